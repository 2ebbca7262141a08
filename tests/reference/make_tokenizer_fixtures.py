#!/usr/bin/env python3
# SPDX-FileCopyrightText: 2026 The Tandem developers
# SPDX-License-Identifier: GPL-3.0-or-later
"""Expected tokenizer outputs from Hugging Face `tokenizers` -> tests/fixtures/tokenizer/hf_encodings.json.

Run where `tokenizers` is installed (no network needed), from the repository root:
    python3 tests/reference/make_tokenizer_fixtures.py --assets ../shared/assets --out tests/fixtures/tokenizer/hf_encodings.json
For every tokenizer it encodes our own hard cases (unicode, emoji ZWJ sequences, CJK, RTL, whitespace runs, CRLF,
digit runs, contractions, inline special tokens, control characters) plus every text of the asset's own
reference_encodings.json, with and without special tokens, and decodes the ids back (with and without
skip_special_tokens). tests/test_tokenizer.cpp must reproduce every field exactly.
"""
import argparse
import json
import os

import tokenizers
from tokenizers import Tokenizer

TOKENIZERS = {
    "qwen3": "tokenizer-qwen3/tokenizer.json",
    "llama3": "tokenizer-llama3/tokenizer.json",
    "llama2": "tokenizer-llama2/tokenizer.json",
    "mistral": "tokenizer-mistral-v0.1/tokenizer.json",
    "babyllama": "babyllama-tok105/hf/tokenizer.json",
}

HARD_CASES = [
    "", " ", "  ", "   ", "\n", "\n\n\n", "\t", "\r\n", "a\r\nb", "Hello\r\n\r\nWorld\r\n",
    "   leading spaces", "trailing spaces   ", "multiple    spaces   between  words", "tabs\tand\t\ttabs",
    "a \n b", "line1  \n  line2\n\n\nline3", " \n \n ", "end with newline\n",
    "Hello world!", "hello World HELLO", "Once upon a time, there was a little girl named Lily.",
    "12345678901234567890", "3.14159 and 2,718,281.828", "1st 2nd 3rd 100th 1000000", "version 1.2.3-beta+build.45",
    "phone: +1 (555) 012-3456", "0x1F 0b1010 1e-9 -42",
    "I'm you're he's she'd we'll they've can't won't it's", "I'M YOU'RE HE'S WE'LL THEY'VE DON'T",
    "don\u2019t won\u2019t (curly apostrophes)", "'quoted' \"double\" `back`",
    "na\u00efve caf\u00e9 r\u00e9sum\u00e9 \u00fcber", "e\u0301 decomposed vs \u00e9 composed", "\u212b angstrom sign, \ufb01 ligature, \u2460 circled",
    "\U0001F44D", "\U0001F468\u200d\U0001F469\u200d\U0001F467\u200d\U0001F466 family", "\U0001F3F3\ufe0f\u200d\U0001F308 flag",
    "\U0001F44D\U0001F3FD skin tone", "\u2764\ufe0f love \U0001F525\U0001F525\U0001F525",
    "\u4f60\u597d\uff0c\u4e16\u754c\uff01", "\u65e5\u672c\u8a9e\u306e\u30c6\u30ad\u30b9\u30c8\u3067\u3059\u3002",
    "\ud55c\uad6d\uc5b4 \ud14d\uc2a4\ud2b8", "\u0645\u0631\u062d\u0628\u0627 \u0628\u0627\u0644\u0639\u0627\u0644\u0645",
    "\u05e9\u05dc\u05d5\u05dd \u05e2\u05d5\u05dc\u05dd", "abc \u05d0\u05d1\u05d2 123 \u0627\u0628\u062a",
    "\u0395\u03bb\u03bb\u03b7\u03bd\u03b9\u03ba\u03ac", "\u041f\u0440\u0438\u0432\u0435\u0442, \u043c\u0438\u0440!",
    "\u0e44\u0e17\u0e22 \u0e20\u0e32\u0e29\u0e32", "\u0939\u093f\u0928\u094d\u0926\u0940",
    "\U0001D518\U0001D52B\U0001D526\U0001D520\U0001D52C\U0001D521\U0001D522 \U0001D54F", "\U0002070E ext-B",
    "<|im_start|>user\nhi<|im_end|>\n<|im_start|>assistant\n", "<think>\nhmm\n</think>\n\nanswer",
    "<|begin_of_text|><|start_header_id|>user<|end_header_id|>\n\nhi<|eot_id|>",
    "<s>[INST] hi [/INST] hello</s>", "text<|endoftext|>more", "<|im_end|><|im_end|>", "<unk> token",
    "def f(x):\n    return x**2  # square\n", "if (a != b && c >= d) { x += 1; }",
    "{\"key\": [1, 2, 3], \"nested\": {\"a\": null}}", "https://example.com/path?q=1&r=2#frag", "user@example.org",
    "\x00null\x00", "\x07bell \x1b[31mred\x1b[0m", "zero\u200bwidth", "\ufeffBOM start", "non\u00a0breaking\u00a0space",
    "aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa", "!!!!!!!!!!", "----------------", "=====", "........",
    "The year 2024 was \U0001F525! \u65e5\u672c ok? \u00bfS\u00ed? \u00a1No!", "  \u3000ideographic space",
    "\u2581already has metaspace \u2581\u2581", "mixed\ttab \u00a0 and\u2003em space",
]


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--assets", required=True)
    ap.add_argument("--out", required=True)
    args = ap.parse_args()

    out = {"tokenizers_version": tokenizers.__version__,
           "note": "Made by tests/reference/make_tokenizer_fixtures.py with HF tokenizers (Rust). ids: "
                   "add_special_tokens=False; ids_with_special: add_special_tokens=True; decoded: "
                   "decode(ids, skip_special_tokens=False); decoded_skip_special: skip_special_tokens=True.",
           "tokenizers": {}}
    for name, rel in TOKENIZERS.items():
        tok = Tokenizer.from_file(os.path.join(args.assets, rel))
        texts = list(HARD_CASES)
        ref = os.path.join(args.assets, os.path.dirname(rel), "reference_encodings.json")
        if os.path.exists(ref):
            texts += [c["text"] for c in json.load(open(ref, encoding="utf-8"))["cases"]]
        seen, cases = set(), []
        for t in texts:
            if t in seen:
                continue
            seen.add(t)
            ids = tok.encode(t, add_special_tokens=False).ids
            cases.append({
                "text": t,
                "ids": ids,
                "ids_with_special": tok.encode(t, add_special_tokens=True).ids,
                "decoded": tok.decode(ids, skip_special_tokens=False),
                "decoded_skip_special": tok.decode(ids, skip_special_tokens=True),
            })
        out["tokenizers"][name] = {"path": rel, "vocab_size": tok.get_vocab_size(with_added_tokens=True),
                                   "cases": cases}
        print(f"{name}: {len(cases)} cases")
    with open(args.out, "w", encoding="utf-8") as f:
        json.dump(out, f, ensure_ascii=False, indent=None, separators=(",", ":"))
        f.write("\n")


if __name__ == "__main__":
    main()
