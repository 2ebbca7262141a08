// SPDX-FileCopyrightText: 2026 The Tandem developers
// SPDX-License-Identifier: GPL-3.0-or-later
// tandem::Trainer — one LoRA fine-tuning run: prepare (load model + data, resolve the config), plan (memory
// estimate), run (the training loop, reporting through a ProgressSink and honouring a stop flag).
// Decisions a reader must know:
//  - Loss is normalised by the label tokens of the whole optimizer step (grad_accum micro-batches), so
//    gradient accumulation is exact; StepMetrics::loss is that step's mean over its label tokens.
//  - Runs are bitwise reproducible on the CPU from the seed: data order is pack_dataset(seed + epoch), LoRA
//    dropout seeds derive from (seed, step, micro-batch), AdamW/clipping are deterministic.
//  - A stop request is honoured between micro-batches: the partial step is dropped, a checkpoint of the
//    last completed optimizer step is written, `stopped` is emitted and run() returns normally.
//  - Run directory: config.json (resolved), metrics.jsonl, checkpoints/step-N/ (lora.safetensors,
//    optimizer.safetensors, state.json written last), adapter/ (PEFT) at the end. Every file is written
//    atomically; a checkpoint folder is built as checkpoints/.step-N.tmp and renamed when complete.
//    Resume continues from the latest complete checkpoint, bit-identically to an uninterrupted run.
//  - Checkpoints are written every training.checkpoint_every steps, on stop, and (training.checkpoint_minutes)
//    after the step during which that much wall time passed since the last checkpoint or the run start. After
//    a timed checkpoint only the newest training.keep_checkpoints of the rolling checkpoints (those
//    checkpoint_every did not ask for) are kept; checkpoint_every's own are never removed by this.
//  - Divergence: a step whose loss or gradient norm is not finite leaves the LoRA weights unchanged and is
//    reported as a Warning. After training.max_nonfinite_steps such steps in a row the run stops as
//    diverged: that step's metrics line carries "status": "diverged", a Diverged event says what happened
//    and what to change, run() returns normally and diverged() is true. No adapter is written, and the
//    checkpoints from the last finite step on are removed (their weights give the non-finite loss), so the
//    latest checkpoint left, if any, is the last good one.
// Plain structs, no Qt.
#pragma once

#include <functional>

#include <atomic>
#include <cmath>
#include <cstdint>
#include <filesystem>
#include <limits>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "tandem/run_config.h"

namespace tandem {

// One GPU of a run (several with data parallelism): its memory and how busy it is.
struct GpuStats {
    int device = 0;               // CUDA's index in this process
    uint64_t used = 0;            // device memory in use (every process's, the CUDA context included)
    uint64_t total = 0;
    uint64_t peak_allocated = 0;  // the most Tandem had allocated on it at once
    int utilization = -1;         // percent of the last sample period a kernel ran (NVML); -1: unknown
};

// Bytes. Fields a backend does not have are 0 (the CPU has no device memory).
struct MemoryStats {
    uint64_t weights = 0;
    uint64_t lora_optimizer = 0;  // LoRA values + grads + AdamW moments
    uint64_t activations = 0;
    uint64_t workspace = 0;
    uint64_t reserved = 0;
    uint64_t device_total = 0;
    uint64_t device_free = 0;
    uint64_t pinned_host = 0;
    std::vector<GpuStats> gpus{};  // the run's GPUs in this process (empty on the CPU)
};

struct StepMetrics {
    int64_t step = 0;         // 1-based optimizer step just completed
    int64_t total_steps = 0;
    double epoch = 0;         // fractional: epoch index + share of its micro-batches consumed
    double loss = 0;          // this step's loss sum / label tokens of the step
    double eval_loss = std::numeric_limits<double>::quiet_NaN();  // NaN when not evaluated at this step
    double lr = 0;            // the learning rate this step used
    double grad_norm = 0;     // global L2 norm before clipping (as HF reports it)
    int64_t tokens = 0;       // real (non-padding) tokens of the step
    int64_t label_tokens = 0;
    double step_time_s = 0;
    double tokens_per_s = 0;
    double steps_per_s = 0;
    MemoryStats memory;
};

enum class RunEventKind { Started, Info, Warning, CheckpointSaved, Eval, Finished, Stopped, Resumed, Diverged };
std::string_view run_event_kind_name(RunEventKind kind) noexcept;  // "started", "checkpoint_saved", ...

struct RunEvent {
    RunEventKind kind = RunEventKind::Info;
    std::string message;
    int64_t step = 0;
};

// Receives progress on the thread that calls Trainer::run. Default implementations ignore everything.
class ProgressSink {
public:
    virtual ~ProgressSink() = default;
    virtual void on_step(const StepMetrics&) {}
    virtual void on_event(const RunEvent&) {}
};

// Bytes a run will hold at its peak, predicted before anything is loaded (CUDA: device memory; CPU: host).
struct MemoryPlan {
    uint64_t weights = 0;
    uint64_t lora_optimizer = 0;
    uint64_t activations = 0;
    uint64_t workspace = 0;     // CUDA: cuBLASLt, attention, lm_head chunk, staging
    uint64_t overhead = 0;      // CUDA: context and library handles (an estimate)
    uint64_t total = 0;         // everything above
    uint64_t device_total = 0;  // CUDA: the GPU's memory (0 on the CPU)
    uint64_t device_free = 0;   // CUDA: free when planned
    uint64_t pinned_host = 0;   // CUDA smart checkpointing: pinned host memory for offloaded block inputs
};

// A memory estimate for a config, made from config.json alone (no weights, no data): cheap enough for a
// front end to call on every settings change. The device and the checkpointing policy are resolved as
// Trainer::prepare would resolve them (auto -> the GPU when usable; checkpointing auto -> the fastest policy
// that fits). On the CPU the bytes are host memory: device_total / device_free are the machine's RAM and
// MemAvailable. fits is false when the run would be refused for memory; message then says what to change.
struct MemoryEstimate {
    MemoryPlan memory;
    DeviceChoice device = DeviceChoice::Cpu;
    CheckpointPolicy checkpointing = CheckpointPolicy::Off;
    AttentionKernels attention = AttentionKernels::Auto;  // inhouse when the plan needed the in-house kernels
    bool fits = true;
    std::string message;  // the decision ("checkpointing: auto chose 'recompute' ...") or why it cannot fit
};
// Throws Error{InvalidInput} for an invalid config or an unreadable model config.json, Error{Unsupported}
// for --device cuda without a usable GPU.
MemoryEstimate estimate_memory(const RunConfig& config);

// The longest single sample that trains with these settings: the largest length L (a multiple of 64, at most
// the model's max_position_embeddings) for which a micro-batch of one L-token sample (batch_tokens =
// max_seq_len = L, grad_accum 1) fits, by estimate_memory (so with the same device and checkpointing choice,
// and `auto` still picking the fastest policy that fits). 0 when not even 64 tokens fit.
struct LongestContext {
    int64_t tokens = 0;
    MemoryEstimate estimate;  // at that length
};
LongestContext longest_context(const RunConfig& config);

struct Plan {
    RunConfig config;  // resolved: device chosen, warmup_steps computed, checkpointing policy chosen
    MemoryPlan memory;
    int64_t total_steps = 0;
    int64_t steps_per_epoch = 0;
    int64_t train_batches = 0;       // micro-batches per epoch
    int64_t validation_batches = 0;
    int64_t train_samples = 0;
    int64_t trainable_parameters = 0;
};

// Data parallelism over several processes, one per machine (tandem-cli train --nodes N --node-rank R
// --rendezvous HOST:PORT): every process loads the same model and data, node rank 0 listens at the rendezvous
// address and the others connect; micro-batch i of a step runs on node i mod nodes; node rank 0 alone writes the
// run folder (the others report on the sink only). CPU backend only for now: the GPU transport (NCCL) is not
// built, so a run on CUDA with nodes > 1 is Error{Unsupported}.
struct DistributedOptions {
    int nodes = 1;
    int node_rank = 0;
    std::string rendezvous;  // HOST:PORT where node rank 0 listens
    double timeout_s = 600;  // how long any node waits for another (rendezvous and every all-reduce)
};

struct TrainerOptions {
    bool resume = false;  // continue from the latest complete checkpoint in config.output_dir
    DistributedOptions distributed{};  // one process unless nodes > 1
};

class Trainer {
public:
    // Validates the config, loads the model and the data, resolves the config. Throws Error{InvalidInput}
    // for bad settings/files and for a resume whose config or data do not match the run's, Error{Unsupported}
    // for device cuda without a usable GPU (or a build without CUDA), Error{OutOfMemory} for a run the memory
    // plan says cannot fit.
    static Trainer prepare(RunConfig config, TrainerOptions options = {});

    Trainer(Trainer&&) noexcept;
    Trainer& operator=(Trainer&&) noexcept;
    ~Trainer();

    Plan plan() const;
    // Trains to the end (or until stop). Writes the run directory. Throws tandem::Error on failures.
    void run(ProgressSink& sink, const std::atomic<bool>& stop);
    bool stopped() const;  // the last run() ended because of a stop request
    bool diverged() const;  // the last run() stopped itself: non-finite steps in a row (see above)
    std::string diverged_message() const;  // the Diverged event's message ("" when not diverged)
    std::filesystem::path adapter_dir() const;  // output_dir/adapter

    struct Impl;
    explicit Trainer(std::unique_ptr<Impl> impl);

private:
    std::unique_ptr<Impl> impl_;
};

// The latest complete checkpoint folder of a run (checkpoints/step-N with state.json), or nullopt.
std::optional<std::filesystem::path> latest_checkpoint(const std::filesystem::path& run_dir);

// Writes a run's adapter in PEFT layout to out_dir: the final adapter when the run finished, else the
// latest checkpoint's LoRA values. Error{InvalidInput} when the run has neither or out_dir holds an adapter
// and !overwrite. Returns what was exported from ("adapter" or "checkpoints/step-N").
std::string export_run_adapter(const std::filesystem::path& run_dir, const std::filesystem::path& out_dir,
                               bool overwrite);

// A run's export in any format: "peft" (the adapter, as export_run_adapter), "merged" (the base model with the
// adapter folded in, dtype bf16 | fp16 | fp32, a Hugging Face model folder: export/merged.h), "gguf" (the merged
// model as one GGUF file + an Ollama Modelfile, quant f16 | bf16 | q8_0 | q4_k_m | q5_k_m | q6_k) or "gguf-lora"
// (the adapter as a GGUF LoRA adapter for llama.cpp's --lora, quant f32 | f16 | bf16): export/gguf.h.
struct ExportOptions {
    std::string format = "peft";  // peft | merged | gguf | gguf-lora
    std::string dtype = "bf16";   // merged only
    std::string quant = "f16";    // gguf and gguf-lora
    bool overwrite = false;
    std::function<void(uint64_t done, uint64_t total)> progress;  // merged and GGUF: bytes written so far
    const std::atomic<bool>* cancel = nullptr;                    // merged and GGUF: Error{Cancelled}, nothing left
};
// The formats and the GGUF quants, in the order a UI lists them.
const std::vector<std::string>& export_formats();
const std::vector<std::string>& export_gguf_quants();
// About how many bytes export_run writes for these options (0 when it cannot tell, e.g. no adapter yet).
uint64_t estimate_export_bytes(const std::filesystem::path& run_dir, const ExportOptions& options);
// Returns what was exported from ("adapter" or "checkpoints/step-N"). Error{InvalidInput} for an unknown format,
// dtype or quant, Error{Unsupported} for a model the format cannot hold, as export_run_adapter otherwise.
std::string export_run(const std::filesystem::path& run_dir, const std::filesystem::path& out_dir,
                       const ExportOptions& options);

}  // namespace tandem
