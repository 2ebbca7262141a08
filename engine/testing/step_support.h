// SPDX-FileCopyrightText: 2026 The Tandem developers
// SPDX-License-Identifier: GPL-3.0-or-later
// What the whole-step cases of the self-test share (an internal header of engine/testing, included by
// step_cases.cpp and step_check_cases.cpp only): StepVariant (a small generated model, its batch and LoRA),
// StepReference (its model folder, batch and CPU results, made once per variant and shared by its cases), the
// model writer and the batch maker, the seeds, and the case bodies of step_check_cases.cpp, which
// add_step_cases (step_cases.cpp) lists. Only with TANDEM_WITH_CUDA.
// Decisions a reader must know:
//  - These are in tandem::testing with external linkage (both files use them), declared here only; what one
//    file alone uses stays in that file's anonymous namespace.
#pragma once

#include "testing/harness.h"

#if TANDEM_WITH_CUDA
#include <cstdint>
#include <exception>
#include <filesystem>
#include <map>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "model/cuda_model.h"
#include "model/lora_table.h"
#include "tandem/data.h"
#include "tandem/lora.h"
#include "tandem/run_config.h"

namespace tandem::testing {

namespace fs = std::filesystem;

struct StepVariant {
    std::string name;       // in the case names
    nlohmann::json config;  // config.json
    LoraConfig lora;
    std::vector<int> lengths;  // samples of the packed batch
    int token_budget = 0;      // >= sum of lengths: the rest is padding
    bool fp8 = false;          // precision fp8 on both sides (the CPU emulates it)
    bool nf4 = false;          // 4-bit base weights quantized at load on both sides (QLoRA)
    // The step tolerances' factor: 1, or more for FP8, where the GPU quantizes bf16 activations and the CPU fp32
    // ones, so about one element in 64 lands one E4M3 step (1/8 relative) apart: ~1-2% on each GEMM output, and
    // on these small models (K = 128 .. 352) 7% on the logits and up to 14% on a LoRA gradient after two layers
    // forward and back (measured on an H100; FP8 itself moves these gradients 5-14% from fp32: test_fp8).
    double tol = 1.0;
    // The optimizer update is compared where the gradient is at least this share of its tensor's largest (the
    // sign of AdamW's first step is then certain on both sides).
    double update_min_share = 0.05;
};

// config.json + model.safetensors (BF16) with weights scaled so every path matters: q/k projections with
// std 1/sqrt(in) (attention rows neither flat nor one-hot), other projections 0.5/sqrt(in), norms 1 +- 0.3,
// biases +-0.1. No tokenizer: the models only see token ids.
void write_model(const fs::path& dir, const nlohmann::json& config, uint64_t seed);

constexpr uint64_t kLoraInitSeed = 7;
constexpr uint64_t kDropoutSeed = 1234;

// The model folder, the batch, the LoRA values and the CPU results of one variant: made once, shared by
// the variant's cases, the folder removed with it.
class StepReference {
public:
    explicit StepReference(StepVariant v) : variant(std::move(v)) {}
    StepReference(const StepReference&) = delete;
    StepReference& operator=(const StepReference&) = delete;
    ~StepReference() {
        if (!dir.empty()) {
            std::error_code ec;
            fs::remove_all(dir, ec);
        }
    }

    void prepare(uint64_t base_seed);
    // The options every GPU load of this variant starts from: its weight format, token budget, the longest sample,
    // the policy and the attention path (each check then sets what it varies).
    CudaModelOptions options(int max_seqlen, CheckpointPolicy policy, AttentionBackend attention) const {
        CudaModelOptions o;
        o.fp8 = variant.fp8;
        o.quantize_4bit = variant.nf4;
        o.max_tokens = variant.token_budget;
        o.max_seqlen = max_seqlen;
        o.checkpointing = policy;
        o.attention = attention;
        return o;
    }

    StepVariant variant;
    bool ready = false;
    fs::path dir;
    PackedBatch batch;
    LoraTensors lora;           // bf16-representable values, B non-zero
    std::vector<float> logits;  // [num_tokens, V]
    double eval_loss = 0, train_loss = 0;
    std::map<std::string, std::vector<float>> grads;
    double norm = 0;                                    // global grad norm before clipping
    double max_norm = 0;                                // half of it: the clip is active
    std::map<std::string, std::vector<float>> stepped;  // values after one AdamW step
    std::vector<std::vector<int32_t>> routing;          // MoE: the CPU's choice of experts per layer (injected)

private:
    void build(uint64_t base_seed);
    std::exception_ptr error_;
    static int counter_;
};

// A packed batch of samples of these lengths (random ids below V; an untrained prompt, the first third, at
// the start of each), padded up to token_budget as the packer pads.
PackedBatch make_step_batch(Rng& rng, const std::vector<int>& lengths, int token_budget, int V);

// ---------------------------------------------------------------------------------------------------------
// step_check_cases.cpp: the runtime paths checked against another CUDA run (what each checks: there)
// ---------------------------------------------------------------------------------------------------------

void async_step_case(Check& c, StepReference& ref, CheckpointPolicy policy);
void cuda_graphs_case(Check& c, StepReference& ref, CheckpointPolicy policy, AttentionBackend attention);
void host_syncs_case(Check& c);
void checkpointing_agree_case(Check& c, StepReference& ref);
void data_parallel_case(Check& c, StepReference& ref, const std::string& transport, const std::vector<int>& devices);

}  // namespace tandem::testing
#endif  // TANDEM_WITH_CUDA
