// SPDX-FileCopyrightText: 2026 The Tandem developers
// SPDX-License-Identifier: GPL-3.0-or-later
// Fuzzes tokenizer.json loading (engine/tokenizer/: the BPE model, normalizers, pre-tokenizers with their
// PCRE2 patterns, post-processors, decoders, added tokens) through Tokenizer::load, the path every front end
// takes. A tokenizer that loads then encodes a fixed set of texts (ASCII, accents, CJK, emoji, spaces,
// inline special tokens, invalid UTF-8 is not passed: encode takes UTF-8) and decodes the ids back.
#include <array>
#include <string_view>

#include "fuzz_common.h"
#include "tandem/tokenizer.h"

namespace {

constexpr std::array<std::string_view, 5> kTexts = {
    "Hello world! It's 2024, isn't it?",
    "  caf\xC3\xA9 na\xC3\xAFve \xE6\x97\xA5\xE6\x9C\xAC\xE8\xAA\x9E \xF0\x9F\x91\x8D\n\n\tx  ",
    "<s>[INST] hi [/INST]</s><|im_start|>user\nyo<|im_end|><|begin_of_text|>",
    "",
    "aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa           1234567890 ___ ---",
};

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
    // Its own folder, without tokenizer_config.json (fuzz_tokenizer_config covers that file).
    const auto path = tandem::fuzz::write_scratch("tok/tokenizer.json", data, size);
    tandem::fuzz::run_parser([&] {
        const auto tok = tandem::Tokenizer::load(path);
        for (auto text : kTexts) {
            const auto ids = tok.encode(text, /*add_special_tokens=*/text.size() % 2 == 0);
            for (auto id : ids)
                if (id < 0 || id >= tok.vocab_size()) std::abort();  // encode must only produce known ids
            (void)tok.decode(ids, false);
            (void)tok.decode(ids, true);
        }
        std::vector<int32_t> all;
        for (int32_t id = 0; id < tok.vocab_size() && id < 300; ++id) {
            all.push_back(id);
            (void)tok.id_to_token(id);
        }
        (void)tok.decode(all, false);
        (void)tok.kind();
        (void)tok.bos_id();
    });
    return 0;
}
