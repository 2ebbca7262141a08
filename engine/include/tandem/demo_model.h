// SPDX-FileCopyrightText: 2026 The Tandem developers
// SPDX-License-Identifier: GPL-3.0-or-later
// The built-in demo model: a tiny Llama-architecture decoder with random weights drawn from a fixed seed,
// written as an ordinary Hugging Face model folder so every code path (config, safetensors, tokenizer, chat
// template) runs on it exactly as on a real model, with no download. It is labelled as a demo in its
// config.json ("tandem_demo") and is not a trained model: its outputs are noise until it is fine-tuned.
#pragma once

#include <cstdint>
#include <filesystem>

namespace tandem {

struct DemoModelSpec {
    uint64_t seed = 1234;
    int64_t hidden_size = 64;
    int64_t intermediate_size = 192;
    int64_t num_hidden_layers = 2;
    int64_t num_attention_heads = 4;
    int64_t num_key_value_heads = 2;
    int64_t max_position_embeddings = 2048;
    // 0: the tokenizer's 356 ids rounded up to 64. Larger values pad the embedding table (and so the lm_head
    // cost) to a real model's size, e.g. 32000 for benchmarks; the extra rows are never produced by the
    // tokenizer.
    int64_t vocab_size = 0;
};

// Writes config.json, model.safetensors (BF16), tokenizer.json (character-level SentencePiece-style BPE with
// byte fallback and ChatML special tokens) and tokenizer_config.json (ChatML chat template) into `dir`,
// creating it. Files are written atomically; the same seed gives byte-identical files.
void create_demo_model(const std::filesystem::path& dir, const DemoModelSpec& spec = {});

}  // namespace tandem
