// SPDX-FileCopyrightText: 2026 The Tandem developers
// SPDX-License-Identifier: GPL-3.0-or-later
// Decoders (see decoder.h). Invalid UTF-8 is replaced exactly as HF does: ByteLevel decodes the joined
// bytes with Rust's from_utf8_lossy; ByteFallback turns a run of <0xNN> tokens that is not valid UTF-8
// into one U+FFFD per byte.
#include "tokenizer/decoder.h"

#include "core/utf8.h"
#include "tokenizer/byte_level.h"
#include "tokenizer/pattern.h"
#include "tokenizer/unicode.h"

namespace tandem::tok {

namespace {

class SequenceDecoder final : public Decoder {
public:
    std::vector<std::unique_ptr<Decoder>> steps;
    void decode_chain(std::vector<std::string>& tokens) const override {
        for (const auto& s : steps) s->decode_chain(tokens);
    }
};

class ByteLevelDecoder final : public Decoder {
public:
    void decode_chain(std::vector<std::string>& tokens) const override {
        const ByteLevelMap& map = ByteLevelMap::get();
        std::string bytes;
        for (const std::string& t : tokens) {
            size_t mark = bytes.size();
            bool ok = true;
            for (size_t i = 0; i < t.size();) {
                int b = map.char_to_byte(next_char(t, i));
                if (b < 0) {
                    ok = false;
                    break;
                }
                bytes.push_back(static_cast<char>(b));
            }
            if (!ok) {  // a character outside the byte map: HF keeps the token's own UTF-8
                bytes.resize(mark);
                bytes += t;
            }
        }
        tokens.assign(1, utf8_lossy(bytes));
    }
};

class ByteFallbackDecoder final : public Decoder {
public:
    static int parse_byte_token(const std::string& t) {
        if (t.size() != 6 || t.compare(0, 3, "<0x") != 0 || t[5] != '>') return -1;
        int v = 0;
        for (int k = 3; k < 5; ++k) {
            char c = t[static_cast<size_t>(k)];
            int d = (c >= '0' && c <= '9')                     ? c - '0'
                    : ((c | 0x20) >= 'a' && (c | 0x20) <= 'f') ? (c | 0x20) - 'a' + 10
                                                               : -1;
            if (d < 0) return -1;
            v = v * 16 + d;
        }
        return v;
    }
    void decode_chain(std::vector<std::string>& tokens) const override {
        std::vector<std::string> out;
        out.reserve(tokens.size());
        std::string pending;
        auto flush = [&] {
            if (pending.empty()) return;
            if (utf8::is_valid(pending))
                out.push_back(pending);
            else
                for (size_t k = 0; k < pending.size(); ++k) out.emplace_back("\xEF\xBF\xBD");
            pending.clear();
        };
        for (std::string& t : tokens) {
            int b = parse_byte_token(t);
            if (b >= 0) {
                pending.push_back(static_cast<char>(b));
                continue;
            }
            flush();
            out.push_back(std::move(t));
        }
        flush();
        tokens = std::move(out);
    }
};

class FuseDecoder final : public Decoder {
public:
    void decode_chain(std::vector<std::string>& tokens) const override {
        std::string all;
        for (const std::string& t : tokens) all += t;
        tokens.assign(1, std::move(all));
    }
};

class StripDecoder final : public Decoder {
public:
    char32_t content = ' ';
    size_t start = 0, stop = 0;
    void decode_chain(std::vector<std::string>& tokens) const override {
        for (std::string& t : tokens) {
            std::vector<std::pair<size_t, char32_t>> chars;  // (byte offset, char)
            for (size_t i = 0; i < t.size();) {
                size_t at = i;
                chars.emplace_back(at, next_char(t, i));
            }
            size_t begin = 0, end = chars.size();
            for (size_t k = 0; k < start && k < chars.size() && chars[k].second == content; ++k) begin = k + 1;
            for (size_t k = 0; k < stop && k < chars.size() && chars[chars.size() - 1 - k].second == content; ++k)
                end = chars.size() - 1 - k;
            if (begin >= end) {
                t.clear();
                continue;
            }
            size_t b = chars[begin].first;
            size_t e = end < chars.size() ? chars[end].first : t.size();
            t = t.substr(b, e - b);
        }
    }
};

class ReplaceDecoder final : public Decoder {
public:
    ReplaceDecoder(Pattern p, std::string c) : pattern(std::move(p)), content(std::move(c)) {}
    Pattern pattern;
    std::string content;
    void decode_chain(std::vector<std::string>& tokens) const override {
        std::vector<Match> matches;
        for (std::string& t : tokens) {
            matches.clear();
            pattern.find_all(t, matches);
            if (matches.empty()) continue;
            std::string out;
            size_t prev = 0;
            for (const Match& m : matches) {
                out.append(t, prev, m.start - prev);
                out += content;
                prev = m.end;
            }
            out.append(t, prev, std::string::npos);
            t = std::move(out);
        }
    }
};

class MetaspaceDecoder final : public Decoder {
public:
    char32_t replacement = 0x2581;
    bool strip_first = true;  // prepend_scheme != never: the first token loses its replacement characters
    void decode_chain(std::vector<std::string>& tokens) const override {
        for (size_t k = 0; k < tokens.size(); ++k) {
            std::string out;
            const std::string& t = tokens[k];
            for (size_t i = 0; i < t.size();) {
                size_t at = i;
                char32_t c = next_char(t, i);
                if (c == replacement) {
                    if (!(k == 0 && strip_first)) out.push_back(' ');
                } else {
                    out.append(t, at, i - at);
                }
            }
            tokens[k] = std::move(out);
        }
    }
};

class BpeSuffixDecoder final : public Decoder {
public:
    std::string suffix;
    void decode_chain(std::vector<std::string>& tokens) const override {
        for (size_t k = 0; k < tokens.size(); ++k) {
            if (suffix.empty()) continue;
            std::string rep = k + 1 == tokens.size() ? "" : " ";
            std::string& t = tokens[k];
            std::string out;
            size_t prev = 0, pos;
            while ((pos = t.find(suffix, prev)) != std::string::npos) {
                out.append(t, prev, pos - prev);
                out += rep;
                prev = pos + suffix.size();
            }
            out.append(t, prev, std::string::npos);
            t = std::move(out);
        }
    }
};

char32_t single_char(const std::string& s, const Source& src, const std::string& where, const char* key) {
    size_t i = 0;
    int32_t cp = utf8::decode(s, i);
    if (cp < 0 || i != s.size()) throw_bad_field(src, where, std::string("\"") + key + "\" must be one character");
    return static_cast<char32_t>(cp);
}

}  // namespace

std::unique_ptr<Decoder> make_decoder(const Json& j, const Source& src, const std::string& where) {
    std::string type = component_type(j, src, where);
    if (type == "Sequence") {
        auto seq = std::make_unique<SequenceDecoder>();
        const Json& list = require(j, "decoders", src, where);
        if (!list.is_array()) throw_bad_field(src, where, "\"decoders\" must be a list");
        for (size_t i = 0; i < list.size(); ++i)
            seq->steps.push_back(make_decoder(list[i], src, where + ".decoders[" + std::to_string(i) + "]"));
        return seq;
    }
    if (type == "ByteLevel") return std::make_unique<ByteLevelDecoder>();
    if (type == "ByteFallback") return std::make_unique<ByteFallbackDecoder>();
    if (type == "Fuse") return std::make_unique<FuseDecoder>();
    if (type == "Strip") {
        auto d = std::make_unique<StripDecoder>();
        d->content = single_char(get_string(j, "content", src, where), src, where, "content");
        int64_t start = get_int(j, "start", src, where), stop = get_int(j, "stop", src, where);
        if (start < 0 || stop < 0) throw_bad_field(src, where, "\"start\" and \"stop\" must not be negative");
        d->start = static_cast<size_t>(start);
        d->stop = static_cast<size_t>(stop);
        return d;
    }
    if (type == "Replace") {
        return std::make_unique<ReplaceDecoder>(make_pattern(require(j, "pattern", src, where), src, where),
                                                get_string(j, "content", src, where));
    }
    if (type == "Metaspace") {
        auto d = std::make_unique<MetaspaceDecoder>();
        d->replacement =
            single_char(get_string_or(j, "replacement", "\xE2\x96\x81", src, where), src, where, "replacement");
        const Json* scheme = find(j, "prepend_scheme");
        if (scheme && scheme->is_string())
            d->strip_first = scheme->get<std::string>() != "never";
        else
            d->strip_first = get_bool_or(j, "add_prefix_space", true, src, where);
        return d;
    }
    if (type == "BPEDecoder") {
        auto d = std::make_unique<BpeSuffixDecoder>();
        d->suffix = get_string_or(j, "suffix", "</w>", src, where);
        return d;
    }
    throw_unsupported_type(src, "decoder", type,
                           "Sequence, ByteLevel, ByteFallback, Fuse, Strip, Replace, Metaspace, BPEDecoder");
}

}  // namespace tandem::tok
