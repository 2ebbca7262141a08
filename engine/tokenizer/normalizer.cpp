// SPDX-FileCopyrightText: 2026 The Tandem developers
// SPDX-License-Identifier: GPL-3.0-or-later
// Normalizers (see normalizer.h). Each mirrors the HF component of the same name; Replace matches with
// Oniguruma iteration rules through Pattern, so regex replacements land exactly where HF's do.
#include "tokenizer/normalizer.h"

#include <vector>

#include <utf8proc.h>

#include "tokenizer/byte_level.h"
#include "tokenizer/pattern.h"
#include "tokenizer/unicode.h"

namespace tandem::tok {

namespace {

class SequenceNormalizer final : public Normalizer {
public:
    std::vector<std::unique_ptr<Normalizer>> steps;
    void normalize(std::string& s) const override {
        for (const auto& n : steps) n->normalize(s);
    }
};

class UnicodeNormalizer final : public Normalizer {
public:
    explicit UnicodeNormalizer(NormForm f) : form(f) {}
    NormForm form;
    void normalize(std::string& s) const override {
        if (!is_normalized_quick(s, form)) s = normalize_unicode(s, form);
    }
};

class ReplaceNormalizer final : public Normalizer {
public:
    ReplaceNormalizer(Pattern p, std::string c) : pattern(std::move(p)), content(std::move(c)) {}
    Pattern pattern;
    std::string content;
    void normalize(std::string& s) const override {
        thread_local std::vector<Match> matches;
        matches.clear();
        pattern.find_all(s, matches);
        if (matches.empty()) return;
        std::string out;
        out.reserve(s.size() + matches.size() * content.size());
        size_t prev = 0;
        for (const Match& m : matches) {
            out.append(s, prev, m.start - prev);
            out += content;
            prev = m.end;
        }
        out.append(s, prev, std::string::npos);
        s = std::move(out);
    }
};

class PrependNormalizer final : public Normalizer {
public:
    explicit PrependNormalizer(std::string p) : prefix(std::move(p)) {}
    std::string prefix;
    void normalize(std::string& s) const override {
        if (!s.empty()) s.insert(0, prefix);
    }
};

class LowercaseNormalizer final : public Normalizer {
public:
    void normalize(std::string& s) const override {
        std::string out;
        out.reserve(s.size());
        for (size_t i = 0; i < s.size();) append_lowercase(out, next_char(s, i));
        s = std::move(out);
    }
};

class StripNormalizer final : public Normalizer {
public:
    bool left = true, right = true;
    void normalize(std::string& s) const override {
        size_t begin = 0, end = s.size();
        if (left) {
            while (begin < end) {
                size_t j = begin;
                if (!is_whitespace(next_char(s, j))) break;
                begin = j;
            }
        }
        if (right) {
            while (end > begin) {
                size_t j = end;
                if (!is_whitespace(prev_char(s, j))) break;
                end = j;
            }
        }
        s = s.substr(begin, end - begin);
    }
};

class StripAccentsNormalizer final : public Normalizer {
public:
    void normalize(std::string& s) const override {
        std::string out;
        out.reserve(s.size());
        for (size_t i = 0; i < s.size();) {
            size_t start = i;
            auto cat = utf8proc_category(static_cast<utf8proc_int32_t>(next_char(s, i)));
            if (cat == UTF8PROC_CATEGORY_MN || cat == UTF8PROC_CATEGORY_MC || cat == UTF8PROC_CATEGORY_ME) continue;
            out.append(s, start, i - start);
        }
        s = std::move(out);
    }
};

class ByteLevelNormalizer final : public Normalizer {
public:
    void normalize(std::string& s) const override {
        std::string out;
        append_byte_level(out, s);
        s = std::move(out);
    }
};

}  // namespace

std::unique_ptr<Normalizer> make_normalizer(const Json& j, const Source& src, const std::string& where) {
    std::string type = component_type(j, src, where);
    if (type == "Sequence") {
        auto seq = std::make_unique<SequenceNormalizer>();
        const Json& list = require(j, "normalizers", src, where);
        if (!list.is_array()) throw_bad_field(src, where, "\"normalizers\" must be a list");
        for (size_t i = 0; i < list.size(); ++i)
            seq->steps.push_back(make_normalizer(list[i], src, where + ".normalizers[" + std::to_string(i) + "]"));
        return seq;
    }
    if (type == "NFC") return std::make_unique<UnicodeNormalizer>(NormForm::NFC);
    if (type == "NFD") return std::make_unique<UnicodeNormalizer>(NormForm::NFD);
    if (type == "NFKC") return std::make_unique<UnicodeNormalizer>(NormForm::NFKC);
    if (type == "NFKD") return std::make_unique<UnicodeNormalizer>(NormForm::NFKD);
    if (type == "Replace") {
        return std::make_unique<ReplaceNormalizer>(make_pattern(require(j, "pattern", src, where), src, where),
                                                   get_string(j, "content", src, where));
    }
    if (type == "Prepend") return std::make_unique<PrependNormalizer>(get_string(j, "prepend", src, where));
    if (type == "Lowercase") return std::make_unique<LowercaseNormalizer>();
    if (type == "Strip") {
        auto n = std::make_unique<StripNormalizer>();
        n->left = get_bool_or(j, "strip_left", true, src, where);
        n->right = get_bool_or(j, "strip_right", true, src, where);
        return n;
    }
    if (type == "StripAccents") return std::make_unique<StripAccentsNormalizer>();
    if (type == "ByteLevel") return std::make_unique<ByteLevelNormalizer>();
    throw_unsupported_type(src, "normalizer", type,
                           "Sequence, NFC, NFD, NFKC, NFKD, Replace, Prepend, Lowercase, Strip, StripAccents, "
                           "ByteLevel");
}

}  // namespace tandem::tok
