// SPDX-FileCopyrightText: 2026 The Tandem developers
// SPDX-License-Identifier: GPL-3.0-or-later
// Pattern: the "pattern" of HF Split / Replace components ({"String": s} or {"Regex": r}), matched with the
// iteration rules of the Oniguruma engine HF `tokenizers` uses, so the matches (and hence the ids) agree.
//  - Regexes run through PCRE2 (UTF + UCP, JIT). Oniguruma syntax is translated where PCRE2 differs:
//    \s/\S become \p{White_Space} (PCRE2's \s also takes U+180E), \w/\W/\b/\B follow Oniguruma's Unicode
//    word class, \h is Oniguruma's hex digit, \uHHHH becomes \x{HHHH}; ^ and $ are line anchors as in Ruby
//    syntax (PCRE2_MULTILINE, LF newlines).
//  - Iteration: an empty match right where the previous match ended is skipped by advancing one character
//    (onig's find_iter), which differs from Perl's "retry non-empty at the same position".
//  - A non-empty literal string is found with a plain substring search (same matches, much faster).
// Subjects must be valid UTF-8: the tokenizer validates input once, so matching skips PCRE2's UTF check.
#pragma once

#include <cstddef>
#include <memory>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "tokenizer/json_util.h"

namespace tandem::tok {

struct Match {
    size_t start;
    size_t end;
};

// One contiguous part of a subject: either a match or the text between matches.
struct Segment {
    size_t start;
    size_t end;
    bool is_match;
};

class Regex {
public:
    // Throws Error{InvalidInput} "<where>: invalid regex ..." when the pattern does not compile.
    Regex(std::string_view onig_pattern, const std::string& where);
    ~Regex();
    Regex(const Regex&) = delete;
    Regex& operator=(const Regex&) = delete;

    void find_all(std::string_view subject, std::vector<Match>& out) const;

    struct Code;

private:
    std::unique_ptr<Code> code_;
};

class Pattern {
public:
    static Pattern literal(std::string s, const std::string& where);
    static Pattern regex(std::string_view onig_pattern, const std::string& where);

    // All matches, left to right, non-overlapping.
    void find_all(std::string_view subject, std::vector<Match>& out) const;
    // The subject cut into match / non-match segments covering it (HF Pattern::find_matches); an empty
    // subject gives one empty non-match segment.
    void segments(std::string_view subject, bool invert, std::vector<Segment>& out) const;

private:
    std::string literal_;
    std::shared_ptr<Regex> regex_;
};

// Builds a Pattern from HF's {"String": s} / {"Regex": r} object.
Pattern make_pattern(const Json& j, const Source& src, const std::string& where);

// Oniguruma -> PCRE2 pattern translation (exposed for tests).
std::string translate_onig_pattern(std::string_view onig);

}  // namespace tandem::tok
