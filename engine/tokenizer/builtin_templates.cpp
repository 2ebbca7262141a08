// SPDX-FileCopyrightText: 2026 The Tandem developers
// SPDX-License-Identifier: GPL-3.0-or-later
// The built-in chat templates (resources/chat_templates/*.jinja), embedded as raw string literals so the
// engine needs no build step or resource file at run time. test_chat_template checks byte for byte that these
// strings equal the .jinja files; edit both together.
#include "tokenizer/builtin_templates.h"

namespace tandem {

namespace {

constexpr std::string_view k_alpaca = R"TANDEM({% if messages[0]['role'] == 'system' %}{{ messages[0]['content'] + '\n\n' }}{% set loop_messages = messages[1:] %}{% else %}{{ 'Below is an instruction that describes a task. Write a response that appropriately completes the request.\n\n' }}{% set loop_messages = messages %}{% endif %}{% for message in loop_messages %}{% if message['role'] == 'user' %}{{ '### Instruction:\n' + message['content'] + '\n\n' }}{% elif message['role'] == 'assistant' %}{{ '### Response:\n' + message['content'] + eos_token + '\n\n' }}{% else %}{{ raise_exception('The alpaca template knows only the system, user and assistant roles, not ' + message['role']) }}{% endif %}{% endfor %}{% if add_generation_prompt %}{{ '### Response:\n' }}{% endif %})TANDEM";

constexpr std::string_view k_chatml = R"TANDEM({% for message in messages %}{{ '<|im_start|>' + message['role'] + '\n' + message['content'] + '<|im_end|>' + '\n' }}{% endfor %}{% if add_generation_prompt %}{{ '<|im_start|>assistant\n' }}{% endif %})TANDEM";

constexpr std::string_view k_llama3 = R"TANDEM({% set loop_messages = messages %}{% for message in loop_messages %}{% set content = '<|start_header_id|>' + message['role'] + '<|end_header_id|>\n\n' + message['content'] | trim + '<|eot_id|>' %}{% if loop.index0 == 0 %}{% set content = bos_token + content %}{% endif %}{{ content }}{% endfor %}{% if add_generation_prompt %}{{ '<|start_header_id|>assistant<|end_header_id|>\n\n' }}{% endif %})TANDEM";

}  // namespace

const std::vector<BuiltinTemplate>& builtin_chat_templates() {
    static const std::vector<BuiltinTemplate> templates = {
        {"alpaca", k_alpaca},
        {"chatml", k_chatml},
        {"llama3", k_llama3},
    };
    return templates;
}

}  // namespace tandem
