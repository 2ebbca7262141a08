// SPDX-FileCopyrightText: 2026 The Tandem developers
// SPDX-License-Identifier: GPL-3.0-or-later
// CudaModel::Impl (engine-internal, CUDA builds only): the state of a CUDA model, its decoder
// (model/decoder.h) and the runtime the decoder runs on. cuda_model.cpp builds it (plan, allocation, weights)
// and implements the public API; cuda_runtime.cpp implements the runtime: batch metadata upload, attention
// dispatch, the offload copies of the checkpointing policies, the timeline and CUDA graphs.
#pragma once

#if TANDEM_WITH_CUDA


#include <algorithm>
#include <array>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <string>
#include <utility>

#include "backend/cuda/backend.h"
#include "core/random.h"
#include "kernels/cpu/cross_entropy.h"  // kIgnoreIndex
#include "kernels/cpu/rope.h"
#include "kernels/cuda/adamw.h"
#include "kernels/cuda/attention.h"
#include "core/cuda/context.h"
#include "kernels/cuda/cross_entropy.h"
#include "kernels/cuda/cudnn_attention.h"
#include "kernels/cuda/dropout.h"
#include "kernels/cuda/elementwise.h"
#include "kernels/cuda/embedding.h"
#include "kernels/cuda/matmul.h"
#include "core/cuda/memory.h"
#include "core/cuda/owners.h"
#include "kernels/cuda/rmsnorm.h"
#include "kernels/cuda/rope.h"
#include "kernels/cuda/swiglu.h"
#include "model/cuda_model.h"
#include "model/decoder.h"
#include "model/plan.h"
#include "tandem/model_dir.h"
#include "tandem/safetensors.h"

namespace tandem {
namespace cuda_impl {

using cuda::bf16;
using cuda::Event;
using cuda::GraphExec;
using cuda::GraphOwner;
using cuda::PinnedBuffer;
using cuda::Stream;

// Readback slots at the start of the pinned buffer: loss sum (double) at 0, grad norm (float) at 8 (the
// blocking calls); then kStepSlots async step slots of 32 bytes {double loss sum, float grad norm, double vote
// (data parallelism: the vote written, then the sum read back)} from 16.
inline constexpr size_t kPinnedHeader = 128;
inline constexpr int kStepSlots = 2;      // optimizer steps queued before collect_step must be called
inline constexpr int kHostMetaSlots = 4;  // pinned metadata slots (batches in flight without a host wait)
inline constexpr size_t kMaxGraphs = 8;      // CUDA graphs kept (least recently used evicted)
inline constexpr size_t kMaxShapesSeen = 64; // shapes remembered as "ran eagerly once" (oldest forgotten)

inline cudaStream_t stream() { return cuda::context().stream; }

// What the host decides per micro-batch that changes the work a micro-step launches: sizes and grids (T,
// S, max_seqlen: the in-house attention grid is over S x max_seqlen tiles, cuDNN's graph and offsets over
// their buckets and S), the attention path, and the device metadata slot whose pointers the kernels get.
// Everything else a batch brings (tokens, targets, positions, cu_seqlens, the dropout seed, grad_scale) is
// read on the device from that slot; the model's options (checkpointing, LoRA, dropout p) are fixed.
struct GraphKey {
    int T = 0, S = 0, max_seqlen = 0;
    bool cudnn = false;
    int slot = -1;  // -1 in the list of shapes seen (any slot)
    bool operator==(const GraphKey&) const = default;
};

struct CachedGraph {
    GraphKey key;
    GraphExec exec;
    uint64_t last_use = 0;
};

}  // namespace cuda_impl

// ---------------------------------------------------------------------------------------------------------
// Impl: the model's state, the decoder (model/decoder.h) and the CUDA runtime the decoder runs on
// ---------------------------------------------------------------------------------------------------------

struct CudaModel::Impl final : DecoderRuntime<CudaBackend> {
    using bf16 = cuda::bf16;
    using Event = cuda::Event;
    using GraphExec = cuda::GraphExec;
    using PinnedBuffer = cuda::PinnedBuffer;
    using Stream = cuda::Stream;
    using GraphKey = cuda_impl::GraphKey;
    using CachedGraph = cuda_impl::CachedGraph;
    ModelConfig cfg;
    LoraConfig lora;
    CudaModelOptions options;
    Dims d;
    cpu::RopeTable rope_host, rope_local_host;  // rope_local: the sliding layers' (Gemma 3), else empty
    cuda::RopeTableDevice rope, rope_local;
    ModelPlan y;
    Decoder<CudaBackend> dec;  // the blocks; its pointers are into the arenas below

    // The four arenas, allocated once by the plan's layouts.
    cuda::DeviceBuffer weights_mem, lora_mem, acts_mem, work_mem;

    // LoRA: host mirror + device regions (tensor i at y.lora_offset[i] in each region).
    std::vector<LoraParam> params;
    LoraIndex lora_index;
    float* lora_value = nullptr;  // [P] fp32 masters
    float* lora_grad = nullptr;   // [P]
    float* lora_m = nullptr;      // [P]
    float* lora_v = nullptr;      // [P]
    bf16* lora_bf16 = nullptr;    // [P] copies the GEMMs read
    cuda::AdamWTensor* lora_desc = nullptr;  // [count]

    int32_t* meta = nullptr;      // [2, meta_ints] device metadata slots
    // Workspace.
    char* work_base = nullptr;    // the whole workspace arena (staging at load, logits chunks)
    size_t work_bytes = 0;
    void* att_ws = nullptr;
    void* gn_ws = nullptr;
    double* loss_sum = nullptr;   // [0] this batch's, [1] the step's (async path, zeroed by zero_grads), [2] vote
    float* norm = nullptr;

    PinnedBuffer pinned;  // [cuda_impl::kPinnedHeader readback | cuda_impl::kHostMetaSlots x meta_ints int32]
    Event ev_start, ev_mid, ev_end;
    bool timed = false;

    // Metadata upload (cuda_runtime.cpp).
    Stream upload;
    Event ev_meta_up[2];                   // upload stream: device slot s holds its batch
    Event ev_meta_free[2];                 // compute stream: the batch in device slot s is done
    Event ev_host_meta[cuda_impl::kHostMetaSlots];    // upload stream: the copy out of host slot h ran
    uint64_t host_meta_seq[cuda_impl::kHostMetaSlots] = {};
    uint64_t batch_seq = 0;                // batches begun
    uint64_t completed_seq = 0;            // batches known complete (a sync or a collected step covers them)
    int dev_slot = 0, host_slot_meta = 0;  // the current batch's slots
    const PackedBatch* cur_batch = nullptr;
    float cur_grad_scale = 1.0f;           // the current batch's header values (rebuild_metadata rewrites them)
    uint64_t cur_seed = 0;

    // Async steps: slot r = step % cuda_impl::kStepSlots holds {loss sum, grad norm} and the step's timing events.
    int64_t steps_queued = 0, steps_collected = 0;
    uint64_t step_last_seq[cuda_impl::kStepSlots] = {};
    Event ev_step_done[cuda_impl::kStepSlots];
    Event ev_t[cuda_impl::kStepSlots][4];             // forward start, loss, backward end (last micro-batch), optimizer end
    CudaStepTiming collected_timing;

    // Timeline (options.timeline): per-layer events on both streams, read by timeline().
    std::vector<TimelineSpan> timeline_spans;
    std::vector<std::array<Event, 2>> tl_events;  // pairs (begin, end), timeline_spans[i] <-> tl_events[i]
    size_t tl_used = 0;

    // Smart / SmartSingle (nb > 0): block inputs offloaded to pinned slots on the copy stream.
    int nb = 0;             // device block-input buffers: 2 (Smart), 1 (SmartSingle), 0 (not offloading)
    int offloaded = 0;      // layers 0 .. offloaded-1 have a host slot (L - nb)
    PinnedBuffer x_host;    // [offloaded, max_tokens, C] bf16
    Stream copy;            // non-blocking; only checkpoint copies run on it
    Event ev_x_ready;       // compute: a block input is complete (the offload waits on it)
    Event ev_offloaded[2];  // copy: buffer b's input is on the host (before compute overwrites b)
    Event ev_used[2];       // compute: a layer's backward finished reading buffer b (before a reload)
    Event ev_reloaded[2];   // copy: buffer b holds the reloaded input (before compute reads it)
    // Offloaded MLP layers (y.mlp_offloaded; the j-th one's gate / up in device slot j % 2, host slot j), on the
    // same copy stream.
    PinnedBuffer mlp_host;      // [y.mlp_host_slots, 2, max_tokens, F] bf16
    Event ev_mlp_ready;         // compute: a layer's gate / up are complete (the offload waits on it)
    Event ev_mlp_offloaded[2];  // copy: slot s's gate / up are on the host (before compute overwrites s)
    Event ev_mlp_used[2];       // compute: an MLP backward finished reading slot s (before a reload)
    Event ev_mlp_reloaded[2];   // copy: slot s holds the reloaded gate / up (before compute reads them)

    // CUDA graphs (options.cuda_graphs): captured micro-steps of forward_backward_async, per GraphKey.
    std::vector<CachedGraph> graphs;   // at most kMaxGraphs
    std::vector<GraphKey> shapes_seen; // shapes that ran eagerly once (slot -1), least recent first
    uint64_t graph_clock = 0;
    CudaGraphStats graph_stats;

    // Attention of the current batch: cuDNN or the in-house kernels (forward, recompute, backward alike).
    bool cudnn_ok = false;
    std::string cudnn_reason, cudnn_version;
    std::string backend_name;
    bool attn_cudnn = false;
    cuda::CudnnAttentionShape attn_shape;

    // Data parallelism (set_all_reduce): the gradients' buckets, one per layer in lora_params order as ranges of
    // lora_grad with the padding between a layer's tensors (the tensors of no layer form the last bucket), and a
    // communication stream that sums them while the compute stream goes on.
    struct GradBucket {
        int layer = -1;
        int64_t begin = 0, end = 0;  // elements of lora_grad
    };
    DeviceAllReduce* all_reduce = nullptr;
    std::vector<GradBucket> grad_buckets;
    Stream comm;
    Event ev_grads;        // compute: the gradients of the bucket about to be summed are final
    Event ev_reduced;      // comm: the step's sums are done (the update waits for it)
    bool reduce_now = false;   // the micro-batch running is this rank's last of the step
    bool reduced = false;      // the step's gradient buckets went during a backward
    double vote = 0;

    // Mixture of experts. inject_routing (checks only): layer l's expert ids [max_tokens * K] at
    // forced_routing + l * max_tokens * K, copied into the router's idx on the stream (graph-capturable).
    cuda::DeviceBuffer forced_routing;
    std::vector<uint8_t> forced;  // [L] 1: layer l's routing is injected

    double* pinned_loss() const { return reinterpret_cast<double*>(pinned.data()); }
    float* pinned_norm() const { return reinterpret_cast<float*>(pinned.data() + 8); }
    int32_t* pinned_meta(int h) const {
        return reinterpret_cast<int32_t*>(pinned.data() + cuda_impl::kPinnedHeader) + size_t(h) * size_t(y.meta_ints);
    }
    double* pinned_step_loss(int r) const { return reinterpret_cast<double*>(pinned.data() + 16 + 32 * r); }
    float* pinned_step_norm(int r) const { return reinterpret_cast<float*>(pinned.data() + 16 + 32 * r + 8); }
    double* pinned_step_vote(int r) const { return reinterpret_cast<double*>(pinned.data() + 16 + 32 * r + 16); }
    int lora_count() const { return int(params.size()); }
    bf16* weight(int handle) const { return y.weights.ptr<bf16>(weights_mem.data(), handle); }  // for the upload

    void allocate_and_bind();
    void upload_lora_values();
    void upload_lora_moments();
    void download_lora(const float* region, std::vector<float> LoraParam::*field);
    void check_attention_at_load(const std::string& where) const;

    int check_batch(const PackedBatch& b) const;
    void begin_batch(const PackedBatch& b, float grad_scale, uint64_t dropout_seed);
    void end_batch();
    void rebuild_metadata();
    void all_complete() { completed_seq = batch_seq; }
    int tl_begin(cudaStream_t s, const char* what, int layer);
    void tl_end(int i, cudaStream_t s);
    void choose_attention();
    bf16* host_slot(int l) const;
    bf16* mlp_host_slot(int j) const;  // host slot j: gate [T,F] then up [T,F]

    // DecoderRuntime: what the blocks ask of the CUDA runtime.
    void attention_forward(int l, LayerActs<CudaBackend>& a, const Step& s) override;
    void attention_backward(int l, LayerActs<CudaBackend>& a, bf16* dq, bf16* dk, bf16* dv, const bf16* dout,
                            const Step& s) override;
    void offload_input(int l) override;
    void wait_offloaded(int l) override;
    void reload_input(int l) override;
    void wait_reloaded(int l) override;
    void input_used(int l) override { ev_used[l % nb].record(); }
    void wait_mlp_slot(int l) override;
    void offload_mlp(int l) override;
    void mlp_used(int l) override { ev_mlp_used[dec.mlp_offload_index[size_t(l)] % 2].record(); }
    void reload_mlp(int l) override;
    void wait_mlp_reloaded(int l) override;
    void before_layer() override { rebuild_metadata(); }
    bool route_given(int l, int32_t* idx, const Step& s) override;
    void read_offsets(const int32_t* offsets, int32_t* host, int E) override;  // the loop ablation's host sync
    int span_begin(const char* what, int layer) override { return tl_begin(cuda_impl::stream(), what, layer); }
    void span_end(int span) override { tl_end(span, cuda_impl::stream()); }
    void layer_backward_done(int l) override;
    void reduce_bucket(const GradBucket& b);  // the comm stream waits for the compute stream, then sums b

    void loss(bf16* dhidden);
    void micro_step(cudaEvent_t after_loss);
    bool graphs_enabled() const {
        return options.cuda_graphs && !options.timeline && !options.rebuild_metadata_per_layer &&
               !options.moe_routing_loop && graph_stats.disabled_reason.empty();
    }
    bool run_graphed();
    GraphExec capture_micro_step();
    double finish_loss();
};

}  // namespace tandem

#endif  // TANDEM_WITH_CUDA
