// SPDX-FileCopyrightText: 2026 The Tandem developers
// SPDX-License-Identifier: GPL-3.0-or-later
// tandem::jinja — the Jinja2 subset behind ChatTemplate: parse a template once (jinja_parser.h), render it
// many times with different variables (this header). Rendering follows jinja2 3.1 as transformers configures
// it (ImmutableSandboxedEnvironment, trim_blocks, lstrip_blocks, loopcontrols, default Undefined): scoping
// (a {% set %} inside a loop body does not leak out; `if` does not open a scope; macros see their defining
// scope at call time), Python value semantics (jinja_value.h), and errors wherever jinja2 raises.
// Every render is bounded: output size, evaluation steps and nesting depth have limits, so a template can
// neither hang nor overflow the stack.
#pragma once

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "tokenizer/jinja_parser.h"
#include "tokenizer/jinja_value.h"

namespace tandem::jinja {

struct RenderLimits {
    size_t max_output = size_t(64) << 20;  // bytes of any one string the template builds (incl. the result)
    uint64_t max_steps = 5'000'000;        // statements + expressions evaluated (a long chat is ~1e5)
    int max_depth = 256;                   // nested evaluation (expressions, blocks, macro calls)
    size_t max_items = 1'000'000;          // elements of a list the template builds
};

using Variables = std::vector<std::pair<std::string, Value>>;

// Renders `program` with `variables` (on top of the built-in globals range, namespace, dict,
// raise_exception, strftime_now). Throws tandem::Error naming program.source_name, line and column:
// InvalidInput where jinja2 would raise too (undefined attribute access, raise_exception, type errors),
// Unsupported where jinja2 would succeed but we do not implement the feature.
std::string render(const Program& program, const Variables& variables, const RenderLimits& limits = {});

}  // namespace tandem::jinja
