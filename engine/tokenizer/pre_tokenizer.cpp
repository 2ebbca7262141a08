// SPDX-FileCopyrightText: 2026 The Tandem developers
// SPDX-License-Identifier: GPL-3.0-or-later
// Pre-tokenizers (see pre_tokenizer.h). The split behaviors follow HF's NormalizedString::split exactly:
// the subject is cut into match / non-match segments (Pattern::segments or a character predicate), the
// behavior merges or removes segments, and empty results are dropped.
#include "tokenizer/pre_tokenizer.h"

#include <algorithm>
#include <optional>
#include <vector>

#include "tokenizer/byte_level.h"
#include "tokenizer/pattern.h"
#include "tokenizer/unicode.h"

namespace tandem::tok {

namespace {

enum class Behavior { Removed, Isolated, MergedWithPrevious, MergedWithNext, Contiguous };

Behavior parse_behavior(const Json& j, const Source& src, const std::string& where, Behavior fallback) {
    const Json* v = find(j, "behavior");
    if (!v) return fallback;
    std::string b = v->is_string() ? v->get<std::string>() : "";
    if (b == "Removed") return Behavior::Removed;
    if (b == "Isolated") return Behavior::Isolated;
    if (b == "MergedWithPrevious") return Behavior::MergedWithPrevious;
    if (b == "MergedWithNext") return Behavior::MergedWithNext;
    if (b == "Contiguous") return Behavior::Contiguous;
    throw_bad_field(src, where,
                    "unknown split \"behavior\" (expected Removed, Isolated, MergedWithPrevious, "
                    "MergedWithNext or Contiguous)");
}

// Applies a delimiter behavior to the segments of `p` and appends the non-empty results to out.
void emit_split(const Piece& p, std::vector<Segment>& segs, Behavior behavior, Pieces& out) {
    // Each entry: (start, end, remove)
    struct Span {
        size_t start, end;
        bool remove;
    };
    thread_local std::vector<Span> spans;
    spans.clear();
    switch (behavior) {
        case Behavior::Isolated:
            for (const Segment& s : segs) spans.push_back({s.start, s.end, false});
            break;
        case Behavior::Removed:
            for (const Segment& s : segs) spans.push_back({s.start, s.end, s.is_match});
            break;
        case Behavior::Contiguous: {
            bool previous = false;
            for (const Segment& s : segs) {
                if (s.is_match == previous && !spans.empty())
                    spans.back().end = s.end;
                else
                    spans.push_back({s.start, s.end, false});
                previous = s.is_match;
            }
            break;
        }
        case Behavior::MergedWithPrevious: {
            bool previous = false;
            for (const Segment& s : segs) {
                if (s.is_match && !previous && !spans.empty())
                    spans.back().end = s.end;
                else
                    spans.push_back({s.start, s.end, false});
                previous = s.is_match;
            }
            break;
        }
        case Behavior::MergedWithNext: {
            bool previous = false;
            for (size_t k = segs.size(); k-- > 0;) {
                const Segment& s = segs[k];
                if (s.is_match && !previous && !spans.empty())
                    spans.back().start = s.start;
                else
                    spans.push_back({s.start, s.end, false});
                previous = s.is_match;
            }
            std::reverse(spans.begin(), spans.end());
            break;
        }
    }
    for (const Span& s : spans) {
        if (s.remove || s.start == s.end) continue;
        Piece q;
        q.text.assign(p.text, s.start, s.end - s.start);
        q.at_start = p.at_start && s.start == 0;
        out.push_back(std::move(q));
    }
}

// Runs fn(piece, out) on every piece that is not an added token; added tokens pass through.
template <class F>
void split_each(Pieces& pieces, F&& fn) {
    Pieces out;
    out.reserve(pieces.size() * 4);
    for (Piece& p : pieces) {
        if (p.id >= 0)
            out.push_back(std::move(p));
        else
            fn(p, out);
    }
    pieces = std::move(out);
}

// Segments of s where every character satisfying pred is its own match (HF's Pattern for Fn(char)->bool).
template <class Pred>
void char_segments(std::string_view s, Pred pred, std::vector<Segment>& out) {
    if (s.empty()) {
        out.push_back({0, 0, false});
        return;
    }
    size_t last = 0;
    for (size_t i = 0; i < s.size();) {
        size_t b = i;
        char32_t c = next_char(s, i);
        if (pred(c)) {
            if (last < b) out.push_back({last, b, false});
            out.push_back({b, i, true});
            last = i;
        }
    }
    if (last < s.size()) out.push_back({last, s.size(), false});
}

class SequencePreTokenizer final : public PreTokenizer {
public:
    std::vector<std::unique_ptr<PreTokenizer>> steps;
    void pre_tokenize(Pieces& pieces) const override {
        for (const auto& s : steps) s->pre_tokenize(pieces);
    }
    bool is_byte_level() const override {
        for (const auto& s : steps)
            if (s->is_byte_level()) return true;
        return false;
    }
};

class SplitPreTokenizer final : public PreTokenizer {
public:
    SplitPreTokenizer(Pattern p, Behavior b, bool inv) : pattern(std::move(p)), behavior(b), invert(inv) {}
    Pattern pattern;
    Behavior behavior;
    bool invert;
    void pre_tokenize(Pieces& pieces) const override {
        std::vector<Segment> segs;
        split_each(pieces, [&](const Piece& p, Pieces& out) {
            segs.clear();
            pattern.segments(p.text, invert, segs);
            emit_split(p, segs, behavior, out);
        });
    }
};

// GPT-2's split regex, used by ByteLevel when use_regex is true.
constexpr const char* kGpt2Regex = R"('s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+)";

class ByteLevelPreTokenizer final : public PreTokenizer {
public:
    ByteLevelPreTokenizer(bool prefix, bool regex, const std::string& where)
        : add_prefix_space(prefix), use_regex(regex) {
        if (use_regex) pattern = std::make_unique<Pattern>(Pattern::regex(kGpt2Regex, where));
    }
    bool add_prefix_space;
    bool use_regex;
    std::unique_ptr<Pattern> pattern;
    bool is_byte_level() const override { return true; }
    void pre_tokenize(Pieces& pieces) const override {
        std::vector<Segment> segs;
        split_each(pieces, [&](Piece& p, Pieces& out) {
            if (add_prefix_space && (p.text.empty() || p.text[0] != ' ')) p.text.insert(0, " ");
            size_t first = out.size();
            if (use_regex) {
                segs.clear();
                pattern->segments(p.text, false, segs);
                emit_split(p, segs, Behavior::Isolated, out);
            } else if (!p.text.empty()) {
                out.push_back(std::move(p));
            }
            thread_local std::string mapped;
            for (size_t k = first; k < out.size(); ++k) {
                mapped.clear();
                append_byte_level(mapped, out[k].text);
                out[k].text.assign(mapped);  // reuses the piece's own storage
            }
        });
    }
};

enum class PrependScheme { Always, First, Never };

class MetaspacePreTokenizer final : public PreTokenizer {
public:
    std::string replacement;
    PrependScheme scheme = PrependScheme::Always;
    bool split = true;
    std::optional<Pattern> rep;  // the replacement as a literal pattern (split point)
    void pre_tokenize(Pieces& pieces) const override {
        std::vector<Segment> segs;
        split_each(pieces, [&](Piece& p, Pieces& out) {
            std::string s;
            s.reserve(p.text.size() + replacement.size());
            for (char c : p.text) {
                if (c == ' ')
                    s += replacement;
                else
                    s += c;
            }
            bool starts = s.compare(0, replacement.size(), replacement) == 0;
            if (!starts && (scheme == PrependScheme::Always || (scheme == PrependScheme::First && p.at_start)))
                s.insert(0, replacement);
            p.text = std::move(s);
            if (!split) {
                if (!p.text.empty()) out.push_back(std::move(p));
                return;
            }
            segs.clear();
            rep->segments(p.text, false, segs);
            emit_split(p, segs, Behavior::MergedWithNext, out);
        });
    }
};

class PredicatePreTokenizer final : public PreTokenizer {
public:
    bool (*pred)(char32_t) = nullptr;
    Behavior behavior = Behavior::Isolated;
    void pre_tokenize(Pieces& pieces) const override {
        std::vector<Segment> segs;
        split_each(pieces, [&](const Piece& p, Pieces& out) {
            segs.clear();
            char_segments(p.text, pred, segs);
            emit_split(p, segs, behavior, out);
        });
    }
};

}  // namespace

std::unique_ptr<PreTokenizer> make_pre_tokenizer(const Json& j, const Source& src, const std::string& where) {
    std::string type = component_type(j, src, where);
    std::string at = src.path.string() + ": " + where;
    if (type == "Sequence") {
        auto seq = std::make_unique<SequencePreTokenizer>();
        const Json& list = require(j, "pretokenizers", src, where);
        if (!list.is_array()) throw_bad_field(src, where, "\"pretokenizers\" must be a list");
        for (size_t i = 0; i < list.size(); ++i)
            seq->steps.push_back(make_pre_tokenizer(list[i], src, where + ".pretokenizers[" + std::to_string(i) + "]"));
        return seq;
    }
    if (type == "Split") {
        return std::make_unique<SplitPreTokenizer>(make_pattern(require(j, "pattern", src, where), src, where),
                                                   parse_behavior(j, src, where, Behavior::Isolated),
                                                   get_bool_or(j, "invert", false, src, where));
    }
    if (type == "ByteLevel") {
        return std::make_unique<ByteLevelPreTokenizer>(get_bool_or(j, "add_prefix_space", true, src, where),
                                                       get_bool_or(j, "use_regex", true, src, where), at);
    }
    if (type == "Metaspace") {
        auto m = std::make_unique<MetaspacePreTokenizer>();
        m->replacement = get_string_or(j, "replacement", "\xE2\x96\x81", src, where);
        if (m->replacement.empty()) throw_bad_field(src, where, "\"replacement\" must be one character");
        const Json* scheme = find(j, "prepend_scheme");
        if (scheme && scheme->is_string()) {
            std::string s = scheme->get<std::string>();
            if (s == "always")
                m->scheme = PrependScheme::Always;
            else if (s == "first")
                m->scheme = PrependScheme::First;
            else if (s == "never")
                m->scheme = PrependScheme::Never;
            else
                throw_bad_field(src, where, "\"prepend_scheme\" must be always, first or never");
        } else {
            m->scheme =
                get_bool_or(j, "add_prefix_space", true, src, where) ? PrependScheme::Always : PrependScheme::Never;
        }
        m->split = get_bool_or(j, "split", true, src, where);
        m->rep = Pattern::literal(m->replacement, at);
        return m;
    }
    if (type == "Digits") {
        auto d = std::make_unique<PredicatePreTokenizer>();
        d->pred = &is_numeric;
        d->behavior =
            get_bool_or(j, "individual_digits", false, src, where) ? Behavior::Isolated : Behavior::Contiguous;
        return d;
    }
    if (type == "WhitespaceSplit") {
        auto d = std::make_unique<PredicatePreTokenizer>();
        d->pred = &is_whitespace;
        d->behavior = Behavior::Removed;
        return d;
    }
    if (type == "Punctuation") {
        auto d = std::make_unique<PredicatePreTokenizer>();
        d->pred = &is_punctuation;
        d->behavior = parse_behavior(j, src, where, Behavior::Isolated);
        return d;
    }
    if (type == "Whitespace") {
        return std::make_unique<SplitPreTokenizer>(Pattern::regex(R"(\w+|[^\w\s]+)", at), Behavior::Removed, true);
    }
    if (type == "BertPreTokenizer") {
        auto seq = std::make_unique<SequencePreTokenizer>();
        auto ws = std::make_unique<PredicatePreTokenizer>();
        ws->pred = &is_whitespace;
        ws->behavior = Behavior::Removed;
        auto punct = std::make_unique<PredicatePreTokenizer>();
        punct->pred = &is_punctuation;
        punct->behavior = Behavior::Isolated;
        seq->steps.push_back(std::move(ws));
        seq->steps.push_back(std::move(punct));
        return seq;
    }
    throw_unsupported_type(src, "pre_tokenizer", type,
                           "Sequence, Split, ByteLevel, Metaspace, Digits, Whitespace, WhitespaceSplit, "
                           "Punctuation, BertPreTokenizer");
}

}  // namespace tandem::tok
