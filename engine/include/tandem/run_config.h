// SPDX-FileCopyrightText: 2026 The Tandem developers
// SPDX-License-Identifier: GPL-3.0-or-later
// tandem::RunConfig — everything one training run needs: model folder, data, LoRA, optimizer and schedule,
// memory policy, device, seed and output folder. Stored as JSON (nlohmann) with a schema_version; the run
// directory keeps the fully resolved copy (config.json) that resume compares against.
// Decisions a reader must know:
//  - Unknown keys are an error naming the key, so a typo never silently trains something else.
//  - validate_run_config() names the field in every message ("training.lr: ..."); from_json validates.
//  - max_steps > 0 wins over epochs. warmup_steps > 0 wins over warmup_ratio (HF's rule).
//  - memory.checkpointing is stored and validated; it only changes anything on CUDA.
//  - training.max_nonfinite_steps: a run whose loss or gradient norm is not finite for that many steps in a
//    row stops as diverged (tandem/trainer.h says what is kept); a single bad step is skipped and reported.
//  - training.checkpoint_minutes (default 10, 0 = off): a checkpoint is also written after the step during
//    which that much wall time passed since the last checkpoint (or the run start), so a crash loses at most
//    that much. After such a timed checkpoint only the newest training.keep_checkpoints complete checkpoints
//    are kept. Both, like checkpoint_every, may change on resume.
#pragma once

#include <cstdint>
#include <filesystem>
#include <optional>
#include <map>
#include <string>
#include <string_view>

#include <nlohmann/json.hpp>

#include "tandem/lora.h"

namespace tandem {

inline constexpr int kRunConfigSchemaVersion = 1;

enum class LrSchedule { Constant, Linear, Cosine };
enum class CheckpointPolicy { Off, Recompute, Smart, SmartSingle, Selective, Auto };
enum class DeviceChoice { Cpu, Cuda, Auto };
// The base projections' format in memory: as the checkpoint stores them (a *-bnb-4bit checkpoint is 4-bit
// either way), or quantized to 4-bit NF4 at load (QLoRA).
enum class Quantization { None, Nf4 };
// The base GEMMs' arithmetic: bf16 (the default), or fp8: the frozen projections stored as FP8 E4M3 with one
// scale per 128x128 block, activations and output gradients quantized per row and 128 columns on the fly,
// cuBLASLt's block-scaled FP8 GEMM with fp32 accumulation (core/fp8.h). LoRA, norms, attention and the loss
// stay as they are. Needs a GPU with FP8 tensor cores (compute capability 8.9 or newer; the block-scaled GEMM
// is Hopper's, 9.0); the CPU backend emulates it (the same codes and scales).
enum class Precision { Bf16, Fp8 };
// Below this hidden size FP8 is not faster than bf16: its GEMMs are too small for the FP8 tensor cores
// (docs/benchmarks.md, 2026-11-29, H200: 0.93-1.03x at 1024, 1.18-1.30x at 4096; 2048 was not measured). The
// trainer notes it and the Train page warns; neither refuses.
inline constexpr int64_t kFp8GainHiddenSize = 2048;
// The attention kernels on CUDA: auto (cuDNN's fused kernels where they fit the plan, else the in-house flash
// kernels) or inhouse (always the in-house ones: no cuDNN backward workspace, which for grouped-query attention
// is about 48 bytes per token and head dimension: what decides the longest sequence at a small VRAM budget).
enum class AttentionKernels { Auto, Inhouse };

std::string_view lr_schedule_name(LrSchedule s) noexcept;           // "constant", "linear", "cosine"
std::optional<LrSchedule> parse_lr_schedule(std::string_view name) noexcept;
// "off", "recompute", "smart", "smart-single", "selective", "auto"
std::string_view checkpoint_policy_name(CheckpointPolicy p) noexcept;
std::optional<CheckpointPolicy> parse_checkpoint_policy(std::string_view name) noexcept;
std::string_view device_choice_name(DeviceChoice d) noexcept;          // "cpu", "cuda", "auto"
std::optional<DeviceChoice> parse_device_choice(std::string_view name) noexcept;
std::string_view quantization_name(Quantization q) noexcept;            // "none", "nf4"
std::optional<Quantization> parse_quantization(std::string_view name) noexcept;
std::string_view precision_name(Precision p) noexcept;                 // "bf16", "fp8"
std::optional<Precision> parse_precision(std::string_view name) noexcept;
std::string_view attention_kernels_name(AttentionKernels a) noexcept;  // "auto", "inhouse"
std::optional<AttentionKernels> parse_attention_kernels(std::string_view name) noexcept;

struct DataConfig {
    std::string dataset;                 // .json / .jsonl / .txt
    std::string validation;              // a separate validation file ("" = none); wins over the fraction
    double validation_fraction = 0.0;    // share of records held out, in [0, 1)
    std::string format = "auto";         // auto|alpaca|chat|sharegpt|prompt_completion|text
    int32_t max_seq_len = 2048;          // longer samples keep their head; must fit batch_tokens when packing
    bool packing = true;
    std::string chat_template = "auto";  // "auto" (the model's) or a built-in name
    bool train_on_all_tokens = false;    // train on prompts too, not only on the replies
    std::map<std::string, std::string> columns;  // dataset key -> the file's column (ReadOptions::columns)
    bool operator==(const DataConfig&) const = default;
};

struct TrainingConfig {
    double lr = 2e-4;
    LrSchedule schedule = LrSchedule::Linear;
    int64_t warmup_steps = 0;
    double warmup_ratio = 0.0;      // used when warmup_steps == 0: ceil(ratio * total_steps), as HF
    int64_t epochs = 1;
    int64_t max_steps = 0;          // > 0 wins over epochs
    int32_t batch_tokens = 4096;    // micro-batch token budget
    int32_t grad_accum = 1;         // micro-batches per optimizer step
    double max_grad_norm = 1.0;     // 0 = no clipping
    double weight_decay = 0.0;
    double beta1 = 0.9;
    double beta2 = 0.999;
    double eps = 1e-8;
    int64_t eval_every = 0;         // 0 = only at the end (when there is validation data)
    int64_t checkpoint_every = 0;   // 0 = only when stopped
    double checkpoint_minutes = 10;  // also checkpoint once this much wall time passed since the last one; 0 = off
    int64_t keep_checkpoints = 3;   // timed checkpoints keep only the newest N complete ones; >= 1
    int64_t max_nonfinite_steps = 3;  // consecutive non-finite steps that stop the run as diverged; >= 1
    bool operator==(const TrainingConfig&) const = default;
};

struct MemoryConfig {
    CheckpointPolicy checkpointing = CheckpointPolicy::Auto;
    // Plan and allocate as if the GPU had this many GiB (0: its real size): emulates a smaller card.
    double vram_budget_gib = 0.0;
    // Pinned host memory smart checkpointing may take for the offloaded block inputs, in GiB (0: half of the RAM
    // available when the run starts). Pinned pages cannot be swapped: more starves the rest of the machine.
    double host_budget_gib = 0.0;
    // auto: the memory plan falls back to the in-house kernels when cuDNN's workspace is what does not fit.
    AttentionKernels attention = AttentionKernels::Auto;
    // Resolved by the CUDA memory plan, not read from or written to run.json: under 'selective' (chosen or by
    // 'auto'), layers 0..N-1 keep their MLP buffers (gate, up) in the memory the GPU has left, so backward redoes
    // fewer GEMMs.
    int mlp_kept_layers = 0;
    // Resolved the same way: N more layers send their gate / up to pinned host memory in forward and take them
    // back in backward instead of recomputing them (the share of the rest the host link can hide).
    int mlp_offloaded_layers = 0;
    // Resolved the same way: precision fp8 keeps every weight's transpose (for the input-gradient GEMMs) when it
    // still fits after everything else.
    bool fp8_transposed = false;
    bool operator==(const MemoryConfig&) const = default;
};

struct RunConfig {
    int schema_version = kRunConfigSchemaVersion;
    std::string model;  // Hugging Face model folder
    // A PEFT adapter folder to start from (continue training an adapter, ours or PEFT's); empty: fresh LoRA.
    // Its LoRA settings (r, alpha, rsLoRA, targets, layers) replace `lora`'s; only lora.dropout is kept.
    std::string init_adapter;
    Quantization quantization = Quantization::None;  // nf4: QLoRA on a float checkpoint
    Precision precision = Precision::Bf16;           // fp8: FP8 base GEMMs (see Precision)
    DataConfig data;
    LoraConfig lora;
    TrainingConfig training;
    MemoryConfig memory;
    DeviceChoice device = DeviceChoice::Auto;
    // GPUs of a data-parallel run (CUDA): one full replica per entry, micro-batch i of a step on replica i mod N.
    // Empty: one GPU, device 0. {-1}: every GPU of the machine (CLI --devices all). A GPU may appear twice (two
    // replicas share it: checks on one GPU, no speed-up).
    std::vector<int> devices;
    uint64_t seed = 42;
    std::string output_dir;
    bool operator==(const RunConfig&) const = default;
};

// Throws Error{InvalidInput} naming the first wrong field ("training.grad_accum: must be >= 1, got 0").
// Paths are not checked for existence here (Trainer::prepare does that).
void validate_run_config(const RunConfig& config);

// JSON keys: schema_version, model, init_adapter, quantization and precision (written only when not the default),
// data{dataset, validation, validation_fraction, format, max_seq_len,
// packing, template, train_on_all_tokens and columns (written only when set, so older runs' config.json still equal
// a default config on resume)}, lora{...}, training{lr, schedule, warmup_steps, warmup_ratio, epochs, max_steps,
// batch_tokens, grad_accum, max_grad_norm, weight_decay, betas [b1, b2], eps, eval_every,
// checkpoint_every, checkpoint_minutes, keep_checkpoints, max_nonfinite_steps}, memory{checkpointing}, device, devices (written only
// when set), seed, output_dir. Missing keys keep the
// defaults. from_json throws Error{InvalidInput} naming unknown keys and wrong types, then validates.
void to_json(nlohmann::json& j, const RunConfig& config);
void from_json(const nlohmann::json& j, RunConfig& config);

// Parses without validating (for front ends that override fields afterwards, then validate).
RunConfig parse_run_config(const nlohmann::json& j);

// Reads and parses a run.json; errors name the file. validate=false leaves validation to the caller.
RunConfig load_run_config(const std::filesystem::path& path, bool validate = true);

}  // namespace tandem
