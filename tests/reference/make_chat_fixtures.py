#!/usr/bin/env python3
# SPDX-FileCopyrightText: 2026 The Tandem developers
# SPDX-License-Identifier: GPL-3.0-or-later
"""Expected chat-template renderings from transformers -> tests/fixtures/chat/hf_chat_templates.json.

Run where transformers is installed (no network needed), from the repository root:
    python3 tests/reference/make_chat_fixtures.py --assets ../shared/assets --out tests/fixtures/chat/hf_chat_templates.json
Each case is rendered with `tokenizer.apply_chat_template(messages, tokenize=False, add_generation_prompt=...,
**extra)`: the real Qwen3 and Llama 3 templates from the assets' tokenizer_config.json, and our built-in
templates (resources/chat_templates/*.jinja) passed as chat_template=. Cases where the template raises are
recorded with "error". tests/test_chat_template.cpp must reproduce every rendering character for character.
"""
import argparse
import copy
import json
import os

import transformers
from transformers import AutoTokenizer

HERE = os.path.dirname(os.path.abspath(__file__))
BUILTINS = os.path.join(HERE, "..", "..", "resources", "chat_templates")

SYS = {"role": "system", "content": "You are a helpful assistant."}
BASIC = [SYS, {"role": "user", "content": "What is 2+2?"}, {"role": "assistant", "content": "2+2 equals 4."},
         {"role": "user", "content": "And 3+3?"}]
TOOLS = [{"type": "function", "function": {
    "name": "get_weather", "description": "Get the current weather in a city",
    "parameters": {"type": "object", "properties": {
        "city": {"type": "string", "description": "City name, e.g. Z\u00fcrich"},
        "unit": {"type": "string", "enum": ["celsius", "fahrenheit"]}}, "required": ["city"]}}}]

CONVERSATIONS = {
    "basic": BASIC,
    "single_user": [{"role": "user", "content": "Hi there"}],
    "assistant_last": BASIC[:3],
    "no_system_multi": [{"role": "user", "content": "a"}, {"role": "assistant", "content": "b"},
                        {"role": "user", "content": "c"}, {"role": "assistant", "content": "d"}],
    "whitespace_unicode": [{"role": "system", "content": "  Sei conciso.  \n"},
                           {"role": "user", "content": "\n\u00bfQu\u00e9 es \u65e5\u672c? \U0001F600\n\n"},
                           {"role": "assistant", "content": "  Jap\u00f3n.\r\nFin.  "}],
    "empty_contents": [{"role": "user", "content": ""}, {"role": "assistant", "content": ""}],
    "think_history": [{"role": "user", "content": "Q1"},
                      {"role": "assistant", "content": "<think>\nfirst thoughts\n</think>\n\nA1"},
                      {"role": "user", "content": "Q2"},
                      {"role": "assistant", "content": "<think>\nsecond thoughts\n</think>\n\nA2"}],
    "reasoning_field": [{"role": "user", "content": "Q"},
                        {"role": "assistant", "content": "A", "reasoning_content": "because"}],
    "tool_roundtrip": [SYS, {"role": "user", "content": "Weather in Paris?"},
                       {"role": "assistant", "content": "", "tool_calls": [{"type": "function", "function": {
                           "name": "get_weather", "arguments": {"city": "Paris", "unit": "celsius"}}}]},
                       {"role": "tool", "content": "{\"temp\": 21}"},
                       {"role": "tool", "content": "{\"wind\": 3}"},
                       {"role": "assistant", "content": "It is 21 \u00b0C in Paris."}],
    "tool_string_args": [{"role": "user", "content": "Call it"},
                         {"role": "assistant", "content": "Sure.", "tool_calls": [{"function": {
                             "name": "get_weather", "arguments": "{\"city\": \"Rome\"}"}}]}],
    "system_only": [SYS],
    "mid_system": [{"role": "user", "content": "u1"}, {"role": "system", "content": "s2"},
                   {"role": "user", "content": "u2"}],
    "tool_role": [{"role": "user", "content": "x"}, {"role": "tool", "content": "y"}],
}

# (name prefix, template source or None for the tokenizer's own, tokenizer folder, conversations, extras)
SETUPS = [
    ("qwen3", None, "tokenizer-qwen3", list(CONVERSATIONS), [{}, {"enable_thinking": False}, {"tools": TOOLS}]),
    ("llama3", None, "tokenizer-llama3", ["basic", "single_user", "assistant_last", "no_system_multi",
                                          "whitespace_unicode", "empty_contents", "system_only"], [{}]),
    ("builtin:chatml", "chatml.jinja", "tokenizer-qwen3", ["basic", "single_user", "assistant_last",
                                                           "whitespace_unicode", "empty_contents"], [{}]),
    ("builtin:llama3", "llama3.jinja", "tokenizer-llama3", ["basic", "single_user", "assistant_last",
                                                            "whitespace_unicode"], [{}]),
    ("builtin:alpaca", "alpaca.jinja", "tokenizer-llama2", ["basic", "single_user", "assistant_last",
                                                            "no_system_multi", "tool_role"], [{}]),
]


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--assets", required=True)
    ap.add_argument("--out", required=True)
    args = ap.parse_args()
    cases = []
    for prefix, builtin, folder, convs, extras in SETUPS:
        tok = AutoTokenizer.from_pretrained(os.path.join(args.assets, folder))
        source = open(os.path.join(BUILTINS, builtin), encoding="utf-8").read() if builtin else None
        for conv in convs:
            for extra in extras:
                for gen in (False, True):
                    msgs = copy.deepcopy(CONVERSATIONS[conv])
                    case = {"name": f"{prefix}/{conv}/{json.dumps(extra, sort_keys=True)}/gen={int(gen)}",
                            "template_file": prefix if builtin else f"{folder}/tokenizer_config.json",
                            "bos_token": tok.bos_token or "", "eos_token": tok.eos_token or "",
                            "messages": msgs, "add_generation_prompt": gen, "extra": extra}
                    try:
                        kw = {"chat_template": source} if source else {}
                        case["rendered"] = tok.apply_chat_template(copy.deepcopy(msgs), tokenize=False,
                                                                   add_generation_prompt=gen, **kw, **extra)
                    except Exception as e:  # the template raised: we must raise too
                        case["error"] = str(e)
                    cases.append(case)
    with open(args.out, "w", encoding="utf-8") as f:
        json.dump({"transformers_version": transformers.__version__,
                   "note": "Made by tests/reference/make_chat_fixtures.py with transformers' apply_chat_template.",
                   "cases": cases}, f, ensure_ascii=False, indent=1)
        f.write("\n")
    print(f"{len(cases)} cases, {sum('error' in c for c in cases)} errors")


if __name__ == "__main__":
    main()
