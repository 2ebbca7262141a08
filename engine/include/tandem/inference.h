// SPDX-FileCopyrightText: 2026 The Tandem developers
// SPDX-License-Identifier: GPL-3.0-or-later
// tandem inference — what `tandem-cli eval` and `tandem-cli generate` need from the CPU model, behind a
// header the app may include (engine/model/model.h is engine-private).
// Decisions: eval packs all sequences into ONE batch (each sequence isolated, positions restart at 0), the
// loss is sum of next-token CE / number of predicted tokens. Generation runs on tandem::ChatSession (KV cache,
// tandem/chat.h); `recompute` keeps the old loop that re-runs the whole sequence for each token (O(n^2)), the
// oracle the cache is checked against.
#pragma once

#include <cstdint>
#include <filesystem>
#include <string>
#include <vector>

namespace tandem {

struct NamedTensorF32 {
    std::string name;
    std::vector<int64_t> shape;
    std::vector<float> data;
};

struct EvalRequest {
    std::filesystem::path model_dir;
    std::filesystem::path adapter_dir;  // empty: base model only
    std::vector<std::vector<int32_t>> sequences;
    std::string source;                 // named in errors (e.g. the sequences file)
    bool want_logits = false;
    bool want_grads = false;            // gradient of loss (= loss_sum / num_predicted) per LoRA tensor
};

struct EvalResult {
    double loss_sum = 0;
    int64_t num_tokens = 0;
    int64_t num_predicted = 0;
    int64_t vocab = 0;
    std::vector<float> logits;          // [num_tokens, vocab] when asked
    std::vector<NamedTensorF32> grads;  // "<PEFT name>.grad" when asked
    double loss() const { return num_predicted ? loss_sum / double(num_predicted) : 0.0; }
};

// Throws Error{InvalidInput} naming `source` and the sequence index for an empty list, an empty sequence,
// an id outside the vocabulary or a sequence longer than max_position_embeddings.
EvalResult evaluate_sequences(const EvalRequest& request);

struct GenerateRequest {
    std::filesystem::path model_dir;
    std::filesystem::path adapter_dir;
    std::vector<int32_t> prompt_ids;  // at least one id (BOS for an empty prompt)
    int max_new_tokens = 128;         // capped by max_position_embeddings - prompt length
    double temperature = 0.0;         // 0: greedy (argmax, lowest id on ties)
    uint64_t seed = 0;
    std::vector<int32_t> eos_ids;     // stop at any of these
    bool recompute = false;           // the old path: no KV cache, the whole sequence per token
};

struct GenerateResult {
    std::vector<int32_t> new_ids;  // without the EOS that stopped it
    bool stopped_at_eos = false;
    int max_new_tokens = 0;        // after the cap
};

GenerateResult generate_tokens(const GenerateRequest& request);

// Model config ids (bos/eos) without loading weights: convenience for the CLI.
std::vector<int64_t> model_eos_ids(const std::filesystem::path& model_dir);

}  // namespace tandem
