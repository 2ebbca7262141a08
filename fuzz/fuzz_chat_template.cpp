// SPDX-FileCopyrightText: 2026 The Tandem developers
// SPDX-License-Identifier: GPL-3.0-or-later
// Fuzzes the Jinja subset behind chat templates (engine/tokenizer/jinja_lexer.cpp, jinja_parser.cpp,
// jinja_eval.cpp, jinja_value.cpp): the input is a template source, compiled and rendered with a fixed
// conversation (system, user, an assistant tool call, a tool reply, an assistant answer) and tools, with and
// without the generation prompt. The renderer's limits (steps, output size, depth, items) must stop every
// template: a timeout or a huge allocation here is a finding like a crash.
#include "fuzz_common.h"
#include "fuzz_messages.h"
#include "tandem/chat_template.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
    tandem::fuzz::run_parser([&] {
        const auto tmpl = tandem::ChatTemplate::compile(tandem::fuzz::as_string(data, size), "<s>", "</s>",
                                                        "tokenizer_config.json");
        (void)tmpl.render_ordered(tandem::fuzz::messages(), size % 2 == 0, tandem::fuzz::template_vars());
    });
    return 0;
}
