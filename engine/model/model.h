// SPDX-FileCopyrightText: 2026 The Tandem developers
// SPDX-License-Identifier: GPL-3.0-or-later
// tandem::CpuModel — the decoder family (docs/architecture.md) on the CPU backend (fp32): the blocks of
// model/decoder.h (embedding, L blocks of RMSNorm -> q/k/v (+bias) -> q/k norm -> RoPE -> packed causal GQA
// attention -> o_proj + residual -> RMSNorm -> SwiGLU MLP + residual, final RMSNorm, lm_head or tied
// embeddings; LoRA on any of the seven projections) over engine/kernels/cpu ops: the fp32 reference.
// Contract shared by the model (engine/model) and the trainer (engine/train):
//  - Input is a PackedBatch (tandem/data.h). Targets follow data.h: labels are aligned with tokens and the
//    target of position t is labels[t+1] (the first label of every sample is -100, so a target never
//    crosses a sample boundary); padding has label -100. The number of predicted tokens of a batch is
//    batch.num_label_tokens.
//  - Only LoRA weights train. Their gradients ACCUMULATE across forward_backward calls until zero_grads(),
//    scaled by grad_scale (the trainer passes 1 / label tokens of the whole optimizer step, so gradient
//    accumulation is exact).
//  - Base weights are read-only after load (bf16/f16 converted to fp32).
//  - Every checkpointing policy (off, recompute, smart, smart-single) runs on the CPU too, with the same
//    results bit for bit; auto means off here.
#pragma once

#include <array>
#include <cstdint>
#include <filesystem>
#include <memory>
#include <string>
#include <vector>

#include "model/lora_table.h"
#include "model/plan.h"
#include "tandem/data.h"
#include "tandem/lora.h"
#include "tandem/model_config.h"
#include "tandem/run_config.h"

namespace tandem {

class CpuModel {
public:
    // Loads a model folder (inspect_model_dir validation, weights converted to fp32) and creates the LoRA
    // parameters for `lora`: A Kaiming-uniform with a = sqrt(5) (bound 1/sqrt(in)), B zeros, as PEFT
    // initialises them, from a deterministic generator seeded with `seed`. Activations are sized for
    // micro-batches of at most `max_tokens` tokens. Throws Error{InvalidInput|Unsupported} naming the folder.
    // quantize_4bit: hold the projections as NF4 (QLoRA; with_quantization) though the checkpoint is float.
    // A pre-quantized (*-bnb-4bit) checkpoint is 4-bit either way. fp8: hold the projections as FP8 with
    // block scales and run the base GEMMs in emulated FP8 (precision fp8; with_fp8; kernels/cpu/fp8.h).
    // plan: what the plan spends spare memory on (kept MLP buffers, resident transposed FP8 weights; plan.h).
    static CpuModel load(const std::filesystem::path& model_dir, const LoraConfig& lora, uint64_t seed,
                         int max_tokens, CheckpointPolicy checkpointing = CheckpointPolicy::Off,
                         bool quantize_4bit = false, bool fp8 = false, const PlanOptions& plan = {});

    CpuModel(CpuModel&&) noexcept;
    CpuModel& operator=(CpuModel&&) noexcept;
    ~CpuModel();

    const ModelConfig& config() const;
    const LoraConfig& lora_config() const;
    const std::filesystem::path& model_dir() const;
    CheckpointPolicy checkpointing() const;  // as loaded (auto resolved to off)

    std::vector<LoraParam>& lora_params();
    const std::vector<LoraParam>& lora_params() const;
    // Replaces the LoRA values with an adapter's (same names and shapes; Error{InvalidInput} otherwise).
    void set_lora(const LoraTensors& tensors);
    LoraTensors lora_tensors() const;  // name -> values, for export
    // Each layer's choice of experts in the last forward ([tokens * experts per token], token-major; empty for a
    // dense layer, or a layer whose routing buffers the checkpointing policy dropped: use checkpointing off).
    std::vector<std::vector<int32_t>> moe_routing() const;
    void zero_grads();

    // Forward + loss + backward of one micro-batch. Returns the loss SUM over the batch's predicted tokens;
    // LoRA gradients += grad_scale * d(loss sum)/d(param). LoRA dropout (lora_config().dropout > 0) draws
    // its masks from a counter-based generator seeded by dropout_seed, so a step is reproducible.
    double forward_backward(const PackedBatch& batch, float grad_scale, uint64_t dropout_seed);

    // Loss sum without gradients or dropout (evaluation).
    double forward_loss(const PackedBatch& batch);

    // Logits [batch.num_tokens, vocab] of the batch's real tokens (sample by sample, in order).
    std::vector<float> logits(const PackedBatch& batch);

    // Logits [vocab] of the last position of one sequence (generation; re-runs the whole sequence).
    std::vector<float> last_logits(const std::vector<int32_t>& ids);

    int max_tokens() const;  // the micro-batch size the activations were allocated for

    // Bytes a load(cfg, lora, .., max_tokens, checkpointing) will hold, from the config alone (the memory
    // estimate): the same planner as load (model/plan.h). activation_bytes() = activations + workspace +
    // pinned_host (the offloaded block inputs, ordinary RAM here).
    using MemoryNeeds = PlanBytes;
    static MemoryNeeds plan(const ModelConfig& cfg, const LoraConfig& lora, int max_tokens,
                            CheckpointPolicy checkpointing = CheckpointPolicy::Off);

    // Bytes held: base weights, LoRA values + grads, activations and workspace (for MemoryStats).
    size_t weight_bytes() const;
    size_t lora_bytes() const;
    size_t activation_bytes() const;

    struct Impl;

private:
    explicit CpuModel(std::unique_ptr<Impl> impl);
    std::unique_ptr<Impl> impl_;
};

// The batch checks of every backend, on the host before any compute: 1..max_tokens tokens, consistent
// arrays and cu_seqlens, token ids and labels inside the vocabulary, positions below max_positions.
// Throws Error{InvalidInput} naming the position and the value; returns the longest sample's length.
int check_packed_batch(const PackedBatch& b, int max_tokens, int vocab, int64_t max_positions);

// A PackedBatch of whole sequences (no padding): every token after the first of each sequence is a target.
// Used by `tandem-cli eval`, generation and tests.
PackedBatch batch_from_sequences(const std::vector<std::vector<int32_t>>& sequences);

}  // namespace tandem
