// SPDX-FileCopyrightText: 2026 The Tandem developers
// SPDX-License-Identifier: GPL-3.0-or-later
// tandem::CudaModel — the decoder family of model.h on the CUDA backend: the same blocks, the same
// explicit forward/backward order, the same contract (see model.h: loss SUM over predicted tokens, LoRA
// gradients accumulate until zero_grads, scaled by grad_scale; LoRA dropout masks from the same hash),
// over engine/kernels/cuda ops. This header includes no CUDA header (pimpl), so the trainer, the CLI and
// the tests include it in every build; without CUDA every entry point throws Error{Unsupported}.
// Precision: base weights bf16 on the device (fp16/fp32 converted at load, straight from the
// mmap, one layer's staging buffer at a time, never a full host copy); LoRA masters, their gradients and
// AdamW moments fp32 on the device plus a bf16 copy for the GEMMs; activations bf16; norms, softmax and
// loss accumulate in fp32.
// Memory: everything a step touches lives in buffers sized at load from max_tokens (one activation arena
// carved into named pieces, one workspace); nothing is allocated inside a step. plan() computes the same
// layout without allocating, so it predicts the peak.
// Checkpointing: Off keeps every activation backward needs for every layer; Recompute keeps only each
// block's input and recomputes the block (forward) right before its backward, into one layer's buffers.
// Smart is Recompute with the block inputs offloaded to pinned host memory on a copy stream: the device
// keeps two block-input buffers (reloaded one layer ahead in backward, overlapping compute); SmartSingle
// keeps one (reload, then compute: only to measure what the second buffer buys). Same results, bit for bit.
// CUDA graphs (options.cuda_graphs): the micro-step of forward_backward_async (forward,
// loss, backward; not the metadata upload, not the optimizer) is captured once per shape key and replayed;
// per-batch values the kernels need (dropout seed, grad_scale, tokens, ...) are read on the device from
// the batch's metadata slot. Same results as eager, bit for bit.
#pragma once

#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <memory>
#include <string>
#include <vector>

#include "model/model.h"  // LoraParam, batch_from_sequences
#include "model/plan.h"   // PlanBytes
#include "tandem/data.h"
#include "tandem/lora.h"
#include "tandem/model_config.h"
#include "tandem/run_config.h"

namespace tandem {

enum class AttentionBackend { Auto, Cudnn, Inhouse };

struct CudaModelOptions {
    int max_tokens = 4096;  // tokens of the largest micro-batch (the token budget)
    int max_seqlen = 0;     // longest sample (0: max_tokens); sizes attention workspaces
    int max_positions = 0;  // positions the RoPE table serves beyond max_tokens (inference: the KV cache's length)
    // Layers 0..K-1 keep the MLP buffers the policy drops (selective, recompute, smart: make_plan, plan.h); the
    // trainer takes the most that fit (mlp_kept_layers_that_fit).
    int mlp_kept_layers = 0;
    // M more layers (after those K, spread over the rest) send their gate / up to pinned host memory in forward
    // and take them back in backward instead of recomputing them (PlanOptions::mlp_offloaded_layers); the trainer
    // offloads a share of the layers that do not fit (kMlpOffloadShare) when the two slots and host memory fit.
    int mlp_offloaded_layers = 0;
    // FP8: every slot's transposed weight kept in the weights arena (made once at load) instead of transposing
    // it before each input-gradient GEMM; the trainer turns it on when it fits after everything else.
    bool fp8_transposed = false;
    CheckpointPolicy checkpointing = CheckpointPolicy::Off;  // Off, Recompute, Smart, SmartSingle (not Auto)
    AttentionBackend attention = AttentionBackend::Auto;     // Auto: cuDNN where it supports the case
    // Ablation only (bench --rebuild-metadata-per-layer): every layer, forward and backward, re-checks and
    // rebuilds the batch metadata on the host, uploads it and waits, as a naive implementation would.
    bool rebuild_metadata_per_layer = false;
    bool timeline = false;  // record per-layer events on both streams for timeline() (bench --timeline)
    // Run the micro-step of forward_backward_async as a CUDA graph per shape key: (T, S, longest sample,
    // attention path, metadata slot). A shape's first micro-batch runs eagerly (library first-use work),
    // its next one in each of the two metadata slots is captured, later ones replay; 8 graphs are kept (LRU).
    // Ignored with timeline or rebuild_metadata_per_layer. Default on: on an H100 (bench --cuda-graphs,
    // docs/benchmarks.md "CUDA graphs") it saved 1-3 ms per micro-batch (6% of Qwen3-0.6B's step at 4096
    // tokens, 0.5-1.5% at 16384; up to 2x on a tiny launch-bound model) and was never slower, with the same
    // bits. Shapes that never repeat (packed data of varied lengths) run eagerly as before (a key lookup);
    // a shape that comes back once is captured for nothing (20-90 ms of host time, bounded by the LRU).
    bool cuda_graphs = true;
    // Hold the projections as 4-bit NF4 (QLoRA; with_quantization) though the checkpoint is float: quantized
    // on the device at load, dequantized to bf16 in front of each base GEMM. A pre-quantized (*-bnb-4bit)
    // checkpoint is 4-bit either way.
    bool quantize_4bit = false;
    // precision fp8: the projections quantized to FP8 at load, the base GEMMs block-scaled FP8 (core/fp8.h).
    // Needs a Hopper GPU (fp8_unsupported_reason); the memory plan counts one byte per weight.
    bool fp8 = false;
    // Ablation only (bench --moe-routing loop): an MoE layer's experts the old way, a loop over the experts with
    // one GEMM each whose row counts the host reads back (one host sync per MoE layer, forward and backward),
    // instead of the grouped GEMMs reading the sorted offsets on the device. Same values; no CUDA graphs.
    bool moe_routing_loop = false;
    // false (inference, infer/cuda_infer.h): no LoRA values, gradients or AdamW state are held (no LoRA arena, no
    // host mirror); the LoRA config only sizes the LoRA tmp pieces, and the caller binds Decoder::lora to its own
    // tensors. Only the decoder's forward may then run (no training calls). At rank 64 on every target the state
    // would be 18 bytes per LoRA element: ~46 GB for Qwen3-30B-A3B's experts, which the inference never reads.
    bool lora_state = true;
};

// What the CUDA graphs of a model did (CudaModel::graph_stats()).
struct CudaGraphStats {
    int64_t eager = 0;     // micro-steps of forward_backward_async run without a graph
    int64_t captures = 0;  // graphs captured (each launched once right away)
    int64_t replays = 0;   // launches of a graph captured earlier
    int cached = 0;        // graphs held now
    double capture_ms = 0; // host time spent capturing and instantiating, all captures
    std::string disabled_reason;  // non-empty: a capture failed, the model runs without graphs since
};

// One piece of work on one stream, in ms from the start of the micro-batch's forward (timeline()).
struct TimelineSpan {
    std::string stream;  // "compute", "copy" or "comm" (data parallelism's sums)
    std::string what;    // "forward", "backward" (recompute + backward), "offload", "reload" (block inputs),
                         // "offload mlp", "reload mlp" (gate / up), "allreduce"
    int layer = 0;       // an all-reduce of no layer's gradients (embeddings, the loss and votes): -1
    double begin_ms = 0, end_ms = 0;
};

// Device bytes by purpose (model/plan.h): total = what the model will hold at its peak (plus a fixed CUDA
// context allowance reported separately in context). pinned_host is host memory and not part of total.
using CudaMemoryPlan = PlanBytes;

// Timing of the last forward_backward, from CUDA events (ms), read after the step synchronised. A
// micro-batch that ran as a CUDA graph has no split: forward_ms holds all of it and backward_ms is 0.
struct CudaStepTiming {
    double forward_ms = 0;   // embedding .. loss
    double backward_ms = 0;  // loss gradient .. first layer
    double optimizer_ms = 0; // grad norm + AdamW (collect_step only)
};

// Data parallelism (train/data_parallel.h): the sum over the ranks of a buffer of device memory, in place,
// enqueued on stream (a cudaStream_t of the model's device) without waiting for the device. Every rank's model
// calls it for the same buffers in the same order (train/cuda_communicators.h implements it).
class DeviceAllReduce {
public:
    virtual ~DeviceAllReduce() = default;
    virtual void sum(float* data, size_t n, void* stream) = 0;
    virtual void sum(double* data, size_t n, void* stream) = 0;
};

class CudaModel {
public:
    // Predicts the device memory of load(dir or config) with these options, without touching the GPU.
    static CudaMemoryPlan plan(const ModelConfig& config, const LoraConfig& lora, const CudaModelOptions& options);

    // Loads a model folder onto the GPU (validation as CpuModel::load; LoRA init identical to CpuModel's
    // for the same seed: A Kaiming-uniform from SplitMix64(seed) in spec order, B zeros).
    static CudaModel load(const std::filesystem::path& model_dir, const LoraConfig& lora, uint64_t seed,
                          const CudaModelOptions& options);
    // A model with random bf16 weights (uniform, std ~0.02, from weight_seed) for a config: benchmarks.
    static CudaModel random(const ModelConfig& config, const LoraConfig& lora, uint64_t seed, uint64_t weight_seed,
                            const CudaModelOptions& options);

    CudaModel(CudaModel&&) noexcept;
    CudaModel& operator=(CudaModel&&) noexcept;
    ~CudaModel();  // frees every device buffer

    const ModelConfig& config() const;
    const LoraConfig& lora_config() const;
    const CudaModelOptions& options() const;
    std::string attention_backend_name() const;  // "cudnn 9.14.0" or "in-house (reason)"

    // Host mirror of the LoRA tensors: specs always valid; value/grad/exp_avg/exp_avg_sq are filled by
    // sync_to_host() and uploaded by sync_from_host().
    std::vector<LoraParam>& lora_params();
    void sync_to_host();    // values, grads and moments device -> host mirror (synchronises)
    void sync_from_host();  // values and moments host mirror -> device (and the bf16 copies)
    void set_lora(const LoraTensors& tensors);  // as CpuModel::set_lora (uploads)
    // Checks only: from now on, MoE layer l takes routing[l] ([tokens * experts per token] expert ids, token-major;
    // empty: the router chooses) instead of its router's choice, e.g. the CPU's (CpuModel::moe_routing) or a
    // fixture's, so that bf16 near-ties cannot pick other experts than the fp32 reference. The router's weights
    // (and their gradient) are still computed, for the injected experts. Every batch must then have that many tokens.
    void inject_routing(const std::vector<std::vector<int32_t>>& routing);
    LoraTensors lora_tensors();                 // downloads values
    void zero_grads();

    // As CpuModel (one host sync each, to read the loss sum).
    double forward_backward(const PackedBatch& batch, float grad_scale, uint64_t dropout_seed);
    double forward_loss(const PackedBatch& batch);
    std::vector<float> logits(const PackedBatch& batch);  // fp32 [num_tokens, V]
    std::vector<float> last_logits(const std::vector<int32_t>& ids);

    // AdamW over every LoRA tensor on the device (one launch), with clipping to max_grad_norm (0: none).
    // Returns the global grad norm before clipping (one host sync); a non-finite norm skips the update.
    double optimizer_step(double lr, double beta1, double beta2, double eps, double weight_decay,
                          double max_grad_norm, int64_t step);

    CudaStepTiming last_timing() const;

    // The trainer's step without host waits. forward_backward_async queues a micro-batch and adds
    // its loss sum to the step's, on the device (zero_grads resets it); optimizer_step_async queues clipping
    // + AdamW and the copy of {step loss sum, grad norm} into pinned memory; collect_step() returns the
    // oldest queued step's values and the forward/backward time of its last micro-batch, waiting for that
    // step only (the one host sync of a step: called after the next step is queued, the device never
    // idles). At most two steps are queued without a collect_step (Error{Internal} otherwise).
    struct StepReadback {
        double loss_sum = 0;
        double grad_norm = 0;  // before clipping; non-finite: the update was skipped on the device
        double votes = 0;      // with an all-reduce: the ranks' set_step_vote values, summed
        CudaStepTiming timing;
    };
    void forward_backward_async(const PackedBatch& batch, float grad_scale, uint64_t dropout_seed);
    void optimizer_step_async(double lr, double beta1, double beta2, double eps, double weight_decay,
                              double max_grad_norm, int64_t step);
    StepReadback collect_step();
    int queued_steps() const;
    // Data parallelism: from now on every optimizer_step_async first sums the LoRA gradients, the step's loss sum
    // and its vote over the ranks through r (on a communication stream of this model's device; the compute stream
    // waits for it before the update). The per-layer buckets of the gradients (in lora_params order, a layer's
    // tensors with the padding between them) go as soon as each layer's backward is done in the micro-batch
    // after reduce_in_next_backward(); those of a step without one go at optimizer_step_async. Call on the thread
    // that runs the model. nullptr: one rank again.
    void set_all_reduce(DeviceAllReduce* r);
    // The next forward_backward_async is this rank's last of the step: its backward hands every layer's gradients
    // to the all-reduce as soon as they are final (that micro-batch runs eagerly, not as a CUDA graph).
    void reduce_in_next_backward();
    // This rank's vote for the next optimizer_step_async, summed over the ranks into StepReadback::votes.
    void set_step_vote(double vote);
    CudaGraphStats graph_stats() const;  // options.cuda_graphs: eager runs, captures, replays
    // With options.timeline: the spans of the last micro-batch (synchronises; for the bench).
    std::vector<TimelineSpan> timeline();

    // Bytes held on the device by purpose (MemoryStats), and the measured allocator high-water mark.
    CudaMemoryPlan memory() const;
    int max_tokens() const;

    struct Impl;
    // The runtime's state (model/cuda_model_impl.h) for in-engine users that drive the decoder themselves
    // (the inference engine: its own attention runtime over the same weights and arenas).
    Impl& impl() { return *impl_; }

private:
    explicit CudaModel(std::unique_ptr<Impl> impl);
    std::unique_ptr<Impl> impl_;
};

// Whether this build and machine can run the CUDA backend (never throws); reason says why not.
bool cuda_backend_available(std::string* reason = nullptr);

}  // namespace tandem
