// SPDX-FileCopyrightText: 2026 The Tandem developers
// SPDX-License-Identifier: GPL-3.0-or-later
// Pattern matching with Oniguruma semantics on top of PCRE2 (see pattern.h).
#include "tokenizer/pattern.h"

#include <pcre2.h>

#include "tandem/error.h"

namespace tandem::tok {

namespace {

// Oniguruma's Unicode classes, spelled with PCRE2 properties. \s is White_Space (PCRE2's own \s also takes
// U+180E); \w is Alphabetic + Mark + Decimal_Number + Connector_Punctuation, and outside brackets
// Oniguruma's Latin-1 table also counts the superscripts and vulgar fractions ²³¹¼½¾ as word characters.
constexpr const char* kWordInClass = "\\p{Alphabetic}\\p{M}\\p{Nd}\\p{Pc}";
constexpr const char* kWordLatin1 = "\\x{B2}\\x{B3}\\x{B9}\\x{BC}-\\x{BE}";
constexpr const char* kHexBody = "0-9a-fA-F";

bool is_hex(char c) {
    return (c >= '0' && c <= '9') || ((c | 0x20) >= 'a' && (c | 0x20) <= 'f');
}

// Per-thread PCRE2 match state: pcre2_match_data is not shareable between threads; the JIT stack is
// enlarged so long whitespace runs or words never hit the 32 KiB default.
struct ThreadMatchState {
    pcre2_match_data* data = nullptr;
    pcre2_match_context* context = nullptr;
    pcre2_jit_stack* jit_stack = nullptr;
    ThreadMatchState() {
        data = pcre2_match_data_create(8, nullptr);
        context = pcre2_match_context_create(nullptr);
        jit_stack = pcre2_jit_stack_create(64 * 1024, 8 * 1024 * 1024, nullptr);
        if (context && jit_stack) pcre2_jit_stack_assign(context, nullptr, jit_stack);
    }
    ~ThreadMatchState() {
        pcre2_jit_stack_free(jit_stack);
        pcre2_match_context_free(context);
        pcre2_match_data_free(data);
    }
};

ThreadMatchState& match_state() {
    thread_local ThreadMatchState state;
    return state;
}

}  // namespace

std::string translate_onig_pattern(std::string_view p) {
    const std::string word = std::string("[") + kWordInClass + kWordLatin1 + "]";
    const std::string non_word = std::string("[^") + kWordInClass + kWordLatin1 + "]";
    std::string out;
    out.reserve(p.size() + 16);
    int class_depth = 0;  // inside [...] (Oniguruma allows nested classes)
    for (size_t i = 0; i < p.size(); ++i) {
        char c = p[i];
        if (c == '\\' && i + 1 < p.size()) {
            char e = p[i + 1];
            std::string rewrite;
            bool in_class = class_depth > 0;
            switch (e) {
                case 's':
                    rewrite = "\\p{White_Space}";
                    break;
                case 'S':
                    rewrite = "\\P{White_Space}";
                    break;
                case 'w':
                    rewrite = in_class ? kWordInClass : word;
                    break;
                case 'W':
                    if (!in_class) rewrite = non_word;
                    break;  // inside [...] PCRE2's \W is kept
                case 'h':
                    rewrite = in_class ? kHexBody : std::string("[") + kHexBody + "]";
                    break;
                case 'H':
                    if (!in_class) rewrite = std::string("[^") + kHexBody + "]";
                    break;
                case 'b':
                    if (!in_class) rewrite = "(?:(?<!" + word + ")(?=" + word + ")|(?<=" + word + ")(?!" + word + "))";
                    break;
                case 'B':
                    if (!in_class) rewrite = "(?:(?<!" + word + ")(?!" + word + ")|(?<=" + word + ")(?=" + word + "))";
                    break;
                default:
                    break;
            }
            if (!rewrite.empty()) {
                out += rewrite;
                ++i;
                continue;
            }
            if (e == 'u' && i + 5 < p.size() && is_hex(p[i + 2]) && is_hex(p[i + 3]) && is_hex(p[i + 4]) &&
                is_hex(p[i + 5])) {
                out += "\\x{";
                out.append(p.substr(i + 2, 4));
                out += '}';
                i += 5;
                continue;
            }
            out += c;
            out += e;
            ++i;
            continue;
        }
        if (c == '[') {
            ++class_depth;
            out += c;
            // A ']' right after '[' or '[^' is a literal in both engines.
            if (i + 1 < p.size() && p[i + 1] == '^') {
                out += '^';
                ++i;
            }
            if (i + 1 < p.size() && p[i + 1] == ']') {
                out += ']';
                ++i;
            }
            continue;
        }
        if (c == ']' && class_depth > 0) --class_depth;
        out += c;
    }
    return out;
}

struct Regex::Code {
    pcre2_code* code = nullptr;
    bool jit = false;
    ~Code() { pcre2_code_free(code); }
};

Regex::Regex(std::string_view onig_pattern, const std::string& where) : code_(std::make_unique<Code>()) {
    std::string translated = translate_onig_pattern(onig_pattern);
    pcre2_compile_context* cctx = pcre2_compile_context_create(nullptr);
    pcre2_set_newline(cctx, PCRE2_NEWLINE_LF);
    int err = 0;
    PCRE2_SIZE err_off = 0;
    code_->code = pcre2_compile(reinterpret_cast<PCRE2_SPTR>(translated.data()), translated.size(),
                                PCRE2_UTF | PCRE2_UCP | PCRE2_MULTILINE, &err, &err_off, cctx);
    pcre2_compile_context_free(cctx);
    if (!code_->code) {
        PCRE2_UCHAR msg[256];
        pcre2_get_error_message(err, msg, sizeof msg);
        throw_invalid(where + ": invalid regex \"" + std::string(onig_pattern) +
                      "\": " + reinterpret_cast<const char*>(msg));
    }
    code_->jit = pcre2_jit_compile(code_->code, PCRE2_JIT_COMPLETE) == 0;
}

Regex::~Regex() = default;

void Regex::find_all(std::string_view s, std::vector<Match>& out) const {
    ThreadMatchState& st = match_state();
    const auto* subject = reinterpret_cast<PCRE2_SPTR>(s.data());
    size_t pos = 0;
    bool have_last = false;
    size_t last_end = 0;
    while (pos <= s.size()) {
        int rc = -1;
        if (code_->jit) {
            rc = pcre2_jit_match(code_->code, subject, s.size(), pos, 0, st.data, st.context);
        }
        if (!code_->jit || rc == PCRE2_ERROR_JIT_STACKLIMIT) {
            rc = pcre2_match(code_->code, subject, s.size(), pos, PCRE2_NO_UTF_CHECK | PCRE2_NO_JIT, st.data,
                             st.context);
        }
        if (rc == PCRE2_ERROR_NOMATCH) break;
        if (rc < 0) {
            PCRE2_UCHAR msg[256];
            pcre2_get_error_message(rc, msg, sizeof msg);
            throw_invalid(std::string("regex matching failed: ") + reinterpret_cast<const char*>(msg));
        }
        const PCRE2_SIZE* ov = pcre2_get_ovector_pointer(st.data);
        size_t ms = ov[0], me = ov[1];
        if (ms == me && have_last && last_end == me) {
            // onig: no empty match right after the previous match; step over one character.
            if (pos >= s.size()) break;
            size_t step = 1;
            while (pos + step < s.size() && (static_cast<unsigned char>(s[pos + step]) & 0xC0) == 0x80) ++step;
            pos += step;
            continue;
        }
        out.push_back({ms, me});
        have_last = true;
        last_end = me;
        pos = me;
    }
}

Pattern Pattern::literal(std::string s, const std::string& where) {
    Pattern p;
    if (s.empty()) {
        // HF compiles the escaped string as a regex; an empty one matches at every character boundary.
        p.regex_ = std::make_shared<Regex>("", where);
    } else {
        p.literal_ = std::move(s);
    }
    return p;
}

Pattern Pattern::regex(std::string_view onig_pattern, const std::string& where) {
    Pattern p;
    p.regex_ = std::make_shared<Regex>(onig_pattern, where);
    return p;
}

void Pattern::find_all(std::string_view s, std::vector<Match>& out) const {
    if (regex_) {
        regex_->find_all(s, out);
        return;
    }
    size_t pos = 0;
    while ((pos = s.find(literal_, pos)) != std::string_view::npos) {
        out.push_back({pos, pos + literal_.size()});
        pos += literal_.size();
    }
}

void Pattern::segments(std::string_view s, bool invert, std::vector<Segment>& out) const {
    if (s.empty()) {
        out.push_back({0, 0, invert});
        return;
    }
    thread_local std::vector<Match> matches;
    matches.clear();
    find_all(s, matches);
    size_t prev = 0;
    for (const Match& m : matches) {
        if (prev != m.start) out.push_back({prev, m.start, invert});
        out.push_back({m.start, m.end, !invert});
        prev = m.end;
    }
    if (prev != s.size()) out.push_back({prev, s.size(), invert});
}

}  // namespace tandem::tok

namespace tandem::tok {

Pattern make_pattern(const Json& j, const Source& src, const std::string& where) {
    std::string at = src.path.string() + ": " + where;
    if (const Json* s = find(j, "String"); s && s->is_string()) return Pattern::literal(s->get<std::string>(), at);
    if (const Json* r = find(j, "Regex"); r && r->is_string()) return Pattern::regex(r->get<std::string>(), at);
    throw_bad_field(src, where, "\"pattern\" must be {\"String\": ...} or {\"Regex\": ...}");
}

}  // namespace tandem::tok
