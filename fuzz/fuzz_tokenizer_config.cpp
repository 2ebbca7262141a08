// SPDX-FileCopyrightText: 2026 The Tandem developers
// SPDX-License-Identifier: GPL-3.0-or-later
// Fuzzes tokenizer_config.json (engine/tokenizer/tokenizer_config.cpp: special tokens as strings or
// AddedToken objects, chat_template as a string or a list of {name, template}), then compiles and renders
// the chat template it holds with its bos/eos tokens, as make_text_codec does.
#include "fuzz_common.h"
#include "fuzz_messages.h"
#include "tandem/chat_template.h"
#include "tokenizer/tokenizer_impl.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
    const auto path = tandem::fuzz::write_scratch("cfg/tokenizer_config.json", data, size);
    tandem::fuzz::run_parser([&] {
        const tandem::TokenizerConfig c = tandem::tok::read_tokenizer_config(path);
        if (c.chat_template.empty()) return;
        const auto tmpl = tandem::ChatTemplate::compile(c.chat_template, c.bos_token, c.eos_token, path.string());
        (void)tmpl.render_ordered(tandem::fuzz::messages(), true, tandem::fuzz::template_vars());
    });
    return 0;
}
