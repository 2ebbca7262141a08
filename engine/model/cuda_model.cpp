// tandem::CudaModel (see cuda_model.h): the decoder (model/decoder.h, the blocks written once) on the CUDA
// backend, with the runtime it needs: arenas laid out by the plan (model/plan.h), the batch metadata upload,
// attention dispatch, the offload copies of the checkpointing policies, CUDA graphs and the async step.
// Dimension legend: model/plan.h. Decisions a reader must know:
//  - Memory: four arenas (weights, LoRA + AdamW, activations, workspace) laid out by make_plan, which plan()
//    and load() share, so the plan is the allocation byte for byte. Nothing is allocated after load. The
//    workspace arena doubles as the fp16/fp32 -> bf16 staging buffer at load.
//  - Checkpointing Smart / SmartSingle: the decoder's offload hooks. Inputs of layers l < L - nb are copied
//    to a pinned host slot on a copy stream in forward and copied back in backward (the last nb inputs are
//    still in their buffers then: never copied). Smart reloads layer l-1's input into the other buffer while
//    layer l runs; SmartSingle reloads layer l's and waits. Events order copy -> use and use -> overwrite; the
//    host never waits inside the step (the compute stream waits on the last reload, so the step's final sync
//    covers the copy stream too).
//  - Batch metadata (tokens, targets, positions, cu_seqlens, built on the host once per micro-batch) goes
//    up in ONE async copy per batch on its own upload stream: kHostMetaSlots pinned host slots, two device
//    slots (double-buffered: batch n+1's upload runs while batch n computes). Events order upload -> use
//    and use -> next upload into the same device slot. Every layer, forward and backward, reads the same
//    device slot. A host slot is rewritten only after its copy ran: known without waiting when a later
//    step was collected, else one counted wait (never with grad_accum <= 2).
//  - Host syncs (each through core/cuda/context.h's counting wrappers): the trainer's path
//    (forward_backward_async / optimizer_step_async / collect_step) has ONE per optimizer step, in
//    collect_step, which reads the previous step's {loss sum, grad norm} from pinned memory while the
//    device runs the next step. The blocking forward_backward / forward_loss / optimizer_step (selftest,
//    evaluation) have one each. The ablation rebuild_metadata_per_layer adds one per layer and direction.
//  - CUDA graphs (options.cuda_graphs): forward_backward_async's micro-step (forward, loss, backward; the
//    upload and its wait stay outside) is captured per GraphKey (T, S, longest sample, attention path,
//    device metadata slot) and replayed. The per-batch scalars the kernels take (dropout seed, grad_scale)
//    are in the metadata slot's header, read on the device, so a replay is the eager step bit for bit. A
//    shape runs eagerly first (cuBLASLt heuristics, cuDNN plans, kernel attributes are built outside any
//    capture); its next micro-batch in a slot is captured. Smart's copy stream forks from and joins the
//    compute stream inside the capture (its events are recorded inside it). A graph has no forward /
//    backward split (the timing events stay outside); timeline and the metadata ablation run eagerly.
#include "model/cuda_model.h"

#include "tandem/error.h"

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
#include "model/decoder.h"
#include "model/plan.h"
#include "tandem/model_dir.h"
#include "tandem/safetensors.h"

namespace tandem {
namespace {

using cuda::bf16;
using cuda::Event;
using cuda::GraphExec;
using cuda::GraphOwner;
using cuda::PinnedBuffer;
using cuda::Stream;

// CUDA context + cuBLAS/cuDNN handles and their internal buffers: an estimate, not allocated by us.
constexpr uint64_t kContextBytes = uint64_t(600) << 20;
// lm_head chunk: K rows of fp32 logits, K*V*4 bytes at most this (K a multiple of 64, at most max_tokens).
constexpr int64_t kCeChunkBytes = int64_t(256) << 20;
// Readback slots at the start of the pinned buffer: loss sum (double) at 0, grad norm (float) at 8 (the
// blocking calls); then kStepSlots async step slots of 16 bytes {double loss sum, float grad norm} from 16.
constexpr size_t kPinnedHeader = 64;
constexpr int kStepSlots = 2;      // optimizer steps queued before collect_step must be called
constexpr int kHostMetaSlots = 4;  // pinned metadata slots (batches in flight without a host wait)
constexpr size_t kMaxGraphs = 8;      // CUDA graphs kept (least recently used evicted)
constexpr size_t kMaxShapesSeen = 64; // shapes remembered as "ran eagerly once" (oldest forgotten)

// ---------------------------------------------------------------------------------------------------------
// The plan (model/plan.h) with what the CUDA runtime adds
// ---------------------------------------------------------------------------------------------------------

void validate(const ModelConfig& cfg, const LoraConfig& lora, const CudaModelOptions& o, const std::string& where) {
    validate_model(cfg, lora, where);
    if (o.max_tokens <= 0) throw_invalid(where + ": max_tokens must be positive");
    if (o.max_seqlen < 0) throw_invalid(where + ": max_seqlen must not be negative");
    if (o.checkpointing == CheckpointPolicy::Auto)
        throw_unsupported(where +
                          ": the CUDA model takes checkpointing 'off', 'recompute', 'smart' or "
                          "'smart-single' ('auto' is resolved by the trainer)");
}

Dims cuda_dims(const ModelConfig& cfg, const LoraConfig& lora, const CudaModelOptions& o) {
    const int64_t k = kCeChunkBytes / (int64_t(cfg.vocab_size) * int64_t(sizeof(float)));
    return make_dims(cfg, lora, o.max_tokens, o.max_seqlen, int(std::max<int64_t>(k / 64 * 64, 64)));
}

// The table is built for the positions a micro-batch can hold (a sample never exceeds max_tokens), not for
// max_position_embeddings: for 128K-context models that is ~64 MB of device memory saved.
cpu::RopeTable build_rope(const ModelConfig& cfg, const Dims& d, const std::string& where) {
    cpu::RopeTable t = cpu::rope_table_build(d.D, cfg.rope_theta, cfg.rope_scaling, d.rope_positions);
    if (t.attention_scaling != 1.0f) throw_unsupported(where + ": rope attention scaling != 1 is not implemented");
    return t;
}

ModelPlan cuda_plan(const Dims& d, const cpu::RopeTable& rope, const std::vector<LoraTensorSpec>& specs,
               const std::vector<std::array<int, kNumModules>>& lora_index, const CudaModelOptions& o) {
    PlanTraits tr;
    tr.act_bytes = sizeof(bf16);
    tr.attention_stats_bytes = size_t(d.Hq) * size_t(d.T) * sizeof(float);  // in-house lse [Hq,T]
    if (o.attention != AttentionBackend::Inhouse)
        tr.attention_stats_bytes =
            std::max(tr.attention_stats_bytes, cuda::cudnn_attention_stats_bytes_max(d.T, d.max_seqlen, d.Hq));
    if (cuda::attention_supported(d.D)) tr.attention_workspace = cuda::attention_backward_workspace(d.T, d.Hq, d.D);
    if (o.attention != AttentionBackend::Inhouse)
        tr.attention_workspace = std::max(tr.attention_workspace,
                                          cuda::cudnn_attention_workspace_bytes_max(d.T, d.max_seqlen, d.Hq, d.Hkv, d.D));
    tr.ce_workspace = cuda::lm_head_cross_entropy_workspace(d.K, d.V);
    int64_t lora_total = 0;
    for (const auto& s : specs) lora_total += s.shape.at(0) * s.shape.at(1);
    tr.grad_norm_workspace = cuda::grad_norm_workspace(int(specs.size()), lora_total);
    tr.rope_table_bytes = cuda::rope_table_bytes(rope);
    tr.lora_regions = true;
    tr.adamw_descriptor_bytes = sizeof(cuda::AdamWTensor);
    tr.metadata_slots = 2;
    tr.library_workspace = cuda::kLtWorkspaceBytes;  // the context's cuBLASLt workspace
    tr.context = kContextBytes;
    return make_plan(d, specs, lora_index, o.checkpointing, tr);
}

cudaStream_t stream() { return cuda::context().stream; }

template <class X>
void zero(X* p, int64_t n) {
    TANDEM_CUDA_CHECK(cudaMemsetAsync(p, 0, size_t(n) * sizeof(X), stream()));
}

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

}  // namespace

// ---------------------------------------------------------------------------------------------------------
// Impl: the model's state, the decoder (model/decoder.h) and the CUDA runtime the decoder runs on
// ---------------------------------------------------------------------------------------------------------

struct CudaModel::Impl final : DecoderRuntime<CudaBackend> {
    ModelConfig cfg;
    LoraConfig lora;
    CudaModelOptions options;
    Dims d;
    cpu::RopeTable rope_host;
    cuda::RopeTableDevice rope;
    ModelPlan y;
    Decoder<CudaBackend> dec;  // the blocks; its pointers are into the arenas below

    // The four arenas, allocated once by the plan's layouts.
    cuda::DeviceBuffer weights_mem, lora_mem, acts_mem, work_mem;

    // LoRA: host mirror + device regions (tensor i at y.lora_offset[i] in each region).
    std::vector<LoraParam> params;
    std::vector<std::array<int, kNumModules>> lora_index;
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
    double* loss_sum = nullptr;   // [0] this batch's, [1] the step's (async path, zeroed by zero_grads)
    float* norm = nullptr;

    PinnedBuffer pinned;  // [kPinnedHeader readback | kHostMetaSlots x meta_ints int32]
    Event ev_start, ev_mid, ev_end;
    bool timed = false;

    // Metadata upload (see the header comment).
    Stream upload;
    Event ev_meta_up[2];                   // upload stream: device slot s holds its batch
    Event ev_meta_free[2];                 // compute stream: the batch in device slot s is done
    Event ev_host_meta[kHostMetaSlots];    // upload stream: the copy out of host slot h ran
    uint64_t host_meta_seq[kHostMetaSlots] = {};
    uint64_t batch_seq = 0;                // batches begun
    uint64_t completed_seq = 0;            // batches known complete (a sync or a collected step covers them)
    int dev_slot = 0, host_slot_meta = 0;  // the current batch's slots
    const PackedBatch* cur_batch = nullptr;
    float cur_grad_scale = 1.0f;           // the current batch's header values (rebuild_metadata rewrites them)
    uint64_t cur_seed = 0;

    // Async steps: slot r = step % kStepSlots holds {loss sum, grad norm} and the step's timing events.
    int64_t steps_queued = 0, steps_collected = 0;
    uint64_t step_last_seq[kStepSlots] = {};
    Event ev_step_done[kStepSlots];
    Event ev_t[kStepSlots][4];             // forward start, loss, backward end (last micro-batch), optimizer end
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

    double* pinned_loss() const { return reinterpret_cast<double*>(pinned.data()); }
    float* pinned_norm() const { return reinterpret_cast<float*>(pinned.data() + 8); }
    int32_t* pinned_meta(int h) const {
        return reinterpret_cast<int32_t*>(pinned.data() + kPinnedHeader) + size_t(h) * size_t(y.meta_ints);
    }
    double* pinned_step_loss(int r) const { return reinterpret_cast<double*>(pinned.data() + 16 + 16 * r); }
    float* pinned_step_norm(int r) const { return reinterpret_cast<float*>(pinned.data() + 16 + 16 * r + 8); }
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

    // DecoderRuntime: what the blocks ask of the CUDA runtime.
    void attention_forward(LayerActs<CudaBackend>& a, const Step& s) override;
    void attention_backward(LayerActs<CudaBackend>& a, bf16* dq, bf16* dk, bf16* dv, const bf16* dout,
                            const Step& s) override;
    void offload_input(int l) override;
    void wait_offloaded(int l) override;
    void reload_input(int l) override;
    void wait_reloaded(int l) override;
    void input_used(int l) override { ev_used[l % nb].record(); }
    void before_layer() override { rebuild_metadata(); }
    int span_begin(const char* what, int layer) override { return tl_begin(stream(), what, layer); }
    void span_end(int span) override { tl_end(span, stream()); }

    void loss(bf16* dhidden);
    void micro_step(cudaEvent_t after_loss);
    bool graphs_enabled() const {
        return options.cuda_graphs && !options.timeline && !options.rebuild_metadata_per_layer &&
               graph_stats.disabled_reason.empty();
    }
    bool run_graphed();
    GraphExec capture_micro_step();
    double finish_loss();
};

// One allocation per arena (in this order: the workspace first, it stages the weight upload), then the
// decoder's and the runtime's pointers into them.
void CudaModel::Impl::allocate_and_bind() {
    work_mem = cuda::DeviceBuffer(y.work.alloc_size(), "workspace (lm_head chunk, attention, grad norm)");
    weights_mem = cuda::DeviceBuffer(y.weights.alloc_size(), "model weights (bf16)");
    lora_mem = cuda::DeviceBuffer(y.lora.alloc_size(), "LoRA parameters, gradients and AdamW state");
    acts_mem = cuda::DeviceBuffer(y.acts.alloc_size(), "activation arena");
    dec.bind(y, weights_mem.data(), acts_mem.data(), work_mem.data());
    lora_value = y.lora.ptr<float>(lora_mem.data(), y.lora_value);
    lora_grad = y.lora.ptr<float>(lora_mem.data(), y.lora_grad);
    lora_m = y.lora.ptr<float>(lora_mem.data(), y.lora_m);
    lora_v = y.lora.ptr<float>(lora_mem.data(), y.lora_v);
    lora_bf16 = y.lora.ptr<bf16>(lora_mem.data(), y.lora_bf16);
    lora_desc = y.lora.ptr<cuda::AdamWTensor>(lora_mem.data(), y.lora_desc);
    dec.lora.assign(size_t(d.L), {});
    for (int l = 0; l < d.L; ++l)
        for (int m = 0; m < kNumModules; ++m) {
            const int ia = lora_index[size_t(l)][size_t(m)];
            if (ia < 0) continue;
            const int64_t offA = y.lora_offset[size_t(ia)], offB = y.lora_offset[size_t(ia) + 1];
            dec.lora[size_t(l)][size_t(m)] = {lora_bf16 + offA, lora_bf16 + offB, lora_grad + offA, lora_grad + offB};
        }
    meta = y.acts.ptr<int32_t>(acts_mem.data(), y.meta);
    work_base = static_cast<char*>(work_mem.data());
    work_bytes = y.work.size();
    att_ws = y.work.ptr<char>(work_mem.data(), y.att_ws);
    gn_ws = y.work.ptr<char>(work_mem.data(), y.gn_ws);
    loss_sum = y.work.ptr<double>(work_mem.data(), y.loss_sum);
    norm = y.work.ptr<float>(work_mem.data(), y.norm);
}

// ---------------------------------------------------------------------------------------------------------
// LoRA transfers
// ---------------------------------------------------------------------------------------------------------

// Host values -> fp32 masters, then ONE conversion of the whole region into the bf16 copies (the padding
// between tensors is zero in both).
void CudaModel::Impl::upload_lora_values() {
    for (size_t i = 0; i < params.size(); ++i)
        TANDEM_CUDA_CHECK(cudaMemcpyAsync(lora_value + y.lora_offset[i], params[i].value.data(),
                                          size_t(y.lora_numel[i]) * sizeof(float), cudaMemcpyHostToDevice, stream()));
    if (y.lora_padded > 0) cuda::to_bf16(lora_bf16, lora_value, y.lora_padded);
}

void CudaModel::Impl::upload_lora_moments() {
    for (size_t i = 0; i < params.size(); ++i) {
        const size_t bytes = size_t(y.lora_numel[i]) * sizeof(float);
        TANDEM_CUDA_CHECK(cudaMemcpyAsync(lora_m + y.lora_offset[i], params[i].exp_avg.data(), bytes,
                                          cudaMemcpyHostToDevice, stream()));
        TANDEM_CUDA_CHECK(cudaMemcpyAsync(lora_v + y.lora_offset[i], params[i].exp_avg_sq.data(), bytes,
                                          cudaMemcpyHostToDevice, stream()));
    }
}

// One region device -> host (one copy, one sync), scattered into the mirror's `field`.
void CudaModel::Impl::download_lora(const float* region, std::vector<float> LoraParam::*field) {
    if (params.empty()) return;
    std::vector<float> buf(size_t(y.lora_padded));
    TANDEM_CUDA_CHECK(
        cudaMemcpyAsync(buf.data(), region, buf.size() * sizeof(float), cudaMemcpyDeviceToHost, stream()));
    cuda::synchronize();
    for (size_t i = 0; i < params.size(); ++i) {
        const float* src = buf.data() + y.lora_offset[i];
        (params[i].*field).assign(src, src + y.lora_numel[i]);
    }
}

// ---------------------------------------------------------------------------------------------------------
// Batch upload and attention dispatch
// ---------------------------------------------------------------------------------------------------------

// check_packed_batch (model.h) plus what the device buffers need: the longest sample within max_seqlen,
// positions inside the RoPE table (sized min(max positions, token budget)). Returns the longest sample.
int CudaModel::Impl::check_batch(const PackedBatch& b) const {
    const int longest = check_packed_batch(b, d.T, d.V, cfg.max_position_embeddings, cfg.sliding_window);
    if (longest > d.max_seqlen)
        throw_invalid("model: a sample of " + std::to_string(longest) + " tokens exceeds the max_seqlen of " +
                      std::to_string(d.max_seqlen) + " the model was loaded for");
    if (rope.max_pos < cfg.max_position_embeddings)
        for (int t = 0; t < b.num_tokens; ++t)
            if (b.position_ids[size_t(t)] >= rope.max_pos)
                throw_invalid("model: position " + std::to_string(b.position_ids[size_t(t)]) + " is beyond the " +
                              std::to_string(rope.max_pos) + " positions of the RoPE table (sized for the token budget)");
    return longest;
}

// Checks the batch, builds its metadata once into a pinned host slot and sends it up in one copy on the
// upload stream into the next device slot (double-buffered); the compute stream waits for that copy only.
void CudaModel::Impl::begin_batch(const PackedBatch& b, float grad_scale, uint64_t dropout_seed) {
    const int longest = check_batch(b);
    const int T = b.num_tokens;
    const int S = b.num_samples;
    const int64_t n = metadata_ints(T, S);
    if (n > y.meta_ints) throw_internal("cuda model: batch metadata exceeds its buffer");
    const uint64_t seq = ++batch_seq;
    host_slot_meta = int(seq % kHostMetaSlots);
    dev_slot = int(seq % 2);
    if (host_meta_seq[host_slot_meta] > completed_seq) cuda::wait_event(ev_host_meta[host_slot_meta].get());
    int32_t* h = pinned_meta(host_slot_meta);
    cur_grad_scale = grad_scale;
    cur_seed = dropout_seed;
    write_metadata(b, cur_seed, cur_grad_scale, h);
    int32_t* dev = meta + size_t(dev_slot) * size_t(y.meta_ints);
    ev_meta_free[dev_slot].wait_on(upload.get());  // the batch before last used this device slot
    TANDEM_CUDA_CHECK(cudaMemcpyAsync(dev, h, size_t(n) * sizeof(int32_t), cudaMemcpyHostToDevice, upload.get()));
    ev_host_meta[host_slot_meta].record(upload.get());
    ev_meta_up[dev_slot].record(upload.get());
    ev_meta_up[dev_slot].wait_on(stream());
    host_meta_seq[host_slot_meta] = seq;
    cur_batch = &b;
    dec.step = metadata_step(dev, T, S, longest);
    choose_attention();
}

// The compute stream is done with the current batch's device slot.
void CudaModel::Impl::end_batch() {
    ev_meta_free[dev_slot].record();
    cur_batch = nullptr;
}

// Ablation (options.rebuild_metadata_per_layer): what a naive implementation does in every layer, forward
// and backward: check and rebuild the batch's metadata on the host, upload it, and wait for the device.
// Only for measuring what building it once buys. (It rewrites the current host slot with the same bytes.)
void CudaModel::Impl::rebuild_metadata() {
    if (!options.rebuild_metadata_per_layer || cur_batch == nullptr) return;
    const PackedBatch& b = *cur_batch;
    check_batch(b);
    int32_t* h = pinned_meta(host_slot_meta);
    write_metadata(b, cur_seed, cur_grad_scale, h);
    const int64_t n = metadata_ints(b.num_tokens, b.num_samples);
    TANDEM_CUDA_CHECK(cudaMemcpyAsync(meta + size_t(dev_slot) * size_t(y.meta_ints), h, size_t(n) * sizeof(int32_t),
                                      cudaMemcpyHostToDevice, stream()));
    cuda::synchronize();
    all_complete();
}

// Auto: cuDNN when available and it supports this shape within the planned buffers, else in-house.
void CudaModel::Impl::choose_attention() {
    const Step& step = dec.step;
    attn_shape = cuda::CudnnAttentionShape{step.S, step.T, d.Hq, d.Hkv, d.D, step.max_seqlen, dec.attn_scale};
    std::string why = "requested";
    if (options.attention != AttentionBackend::Inhouse) {
        bool ok = cudnn_ok;
        why = cudnn_reason;
        if (ok && !cuda::cudnn_attention_supported(attn_shape, &why)) ok = false;
        if (ok && (cuda::cudnn_attention_workspace_bytes(attn_shape) > y.att_ws_bytes ||
                   cuda::cudnn_attention_stats_bytes(attn_shape) > y.stats_bytes)) {
            ok = false;
            why = "cuDNN needs more workspace for this shape than was planned";
        }
        if (ok) {
            attn_cudnn = true;
            backend_name = "cudnn " + cudnn_version;
            return;
        }
        if (options.attention == AttentionBackend::Cudnn)
            throw_unsupported("cuDNN attention was requested but cannot run this batch: " + why);
    }
    if (!cuda::attention_supported(d.D))
        throw_unsupported("attention: head_dim " + std::to_string(d.D) +
                          " is not supported by the in-house kernels, and cuDNN is not usable (" + why + ")");
    if (cuda::attention_backward_workspace(step.T, d.Hq, d.D) > y.att_ws_bytes)
        throw_internal("cuda model: in-house attention workspace larger than planned");
    attn_cudnn = false;
    backend_name = "in-house (" + why + ")";
}

// Fails at load (before allocating) when no backend can ever run this model's attention.
void CudaModel::Impl::check_attention_at_load(const std::string& where) const {
    const bool inhouse = cuda::attention_supported(d.D);
    switch (options.attention) {
    case AttentionBackend::Inhouse:
        if (!inhouse)
            throw_unsupported(where + ": the in-house attention kernels do not support head_dim " +
                              std::to_string(d.D) + "; use attention backend auto or cudnn");
        break;
    case AttentionBackend::Cudnn:
        if (!cudnn_ok) throw_unsupported(where + ": cuDNN attention was requested but is not usable: " + cudnn_reason);
        break;
    case AttentionBackend::Auto:
        if (!inhouse && !cudnn_ok)
            throw_unsupported(where + ": head_dim " + std::to_string(d.D) +
                              " needs cuDNN attention, which is not usable: " + cudnn_reason);
        break;
    }
}

void CudaModel::Impl::attention_forward(LayerActs<CudaBackend>& a, const Step& step) {
    if (attn_cudnn)
        cuda::cudnn_attention_forward(a.att, a.stats, a.qr, a.kr, a.v, step.cu_seqlens, attn_shape, att_ws);
    else
        cuda::attention_forward(a.att, static_cast<float*>(a.stats), a.qr, a.kr, a.v, step.cu_seqlens, step.S, step.T,
                                d.Hq, d.Hkv, d.D, dec.attn_scale, step.max_seqlen);
}

// dq [T,Q], dk [T,KV], dv [T,KV] written.
void CudaModel::Impl::attention_backward(LayerActs<CudaBackend>& a, bf16* dq, bf16* dk, bf16* dv, const bf16* dout,
                                         const Step& step) {
    if (attn_cudnn)
        cuda::cudnn_attention_backward(dq, dk, dv, dout, a.qr, a.kr, a.v, a.att, a.stats, step.cu_seqlens, attn_shape,
                                       att_ws);
    else
        cuda::attention_backward(dq, dk, dv, dout, a.qr, a.kr, a.v, a.att, static_cast<const float*>(a.stats),
                                 step.cu_seqlens, step.S, step.T, d.Hq, d.Hkv, d.D, dec.attn_scale, step.max_seqlen,
                                 att_ws);
}

// ---------------------------------------------------------------------------------------------------------
// Smart checkpointing: block-input copies on the copy stream (nb > 0; layer l's input in buffer l % nb)
// ---------------------------------------------------------------------------------------------------------

bf16* CudaModel::Impl::host_slot(int l) const {
    return reinterpret_cast<bf16*>(x_host.data()) + size_t(l) * size_t(d.T) * size_t(d.C);
}

// Forward: layer l's input [T,C] was just written on the compute stream -> its pinned slot.
void CudaModel::Impl::offload_input(int l) {
    if (l >= offloaded) return;
    ev_x_ready.record();
    ev_x_ready.wait_on(copy.get());
    const int tl = tl_begin(copy.get(), "offload", l);
    TANDEM_CUDA_CHECK(cudaMemcpyAsync(host_slot(l), dec.acts[size_t(l)].x, size_t(dec.step.T) * size_t(d.C) * sizeof(bf16),
                                      cudaMemcpyDeviceToHost, copy.get()));
    tl_end(tl, copy.get());
    ev_offloaded[l % nb].record(copy.get());
}

// Forward, before layer l's input is written: its buffer's previous input (layer l - nb) must have reached
// the host. That copy had all of layer l - nb's forward (Smart: and l - 1's) to finish.
void CudaModel::Impl::wait_offloaded(int l) {
    const int prev = l - nb;
    if (prev < 0 || prev >= offloaded) return;
    ev_offloaded[prev % nb].wait_on(stream());
}

// Backward: layer l's input, pinned slot -> buffer l % nb, once the compute stream has finished the layer
// that last read that buffer (l + nb, whose backward recorded ev_used; it exists because l < L - nb).
void CudaModel::Impl::reload_input(int l) {
    if (l < 0 || l >= offloaded) return;
    const int b = l % nb;
    ev_used[b].wait_on(copy.get());
    const int tl = tl_begin(copy.get(), "reload", l);
    TANDEM_CUDA_CHECK(cudaMemcpyAsync(dec.acts[size_t(l)].x, host_slot(l), size_t(dec.step.T) * size_t(d.C) * sizeof(bf16),
                                      cudaMemcpyHostToDevice, copy.get()));
    tl_end(tl, copy.get());
    ev_reloaded[b].record(copy.get());
}

// Backward, before layer l is recomputed: its reloaded input must be in place.
void CudaModel::Impl::wait_reloaded(int l) {
    if (l >= offloaded) return;
    ev_reloaded[l % nb].wait_on(stream());
}

// Row losses [T] -> their sum (device double) -> the pinned slot. dhidden nullptr: evaluation. The gradient
// is scaled by the batch's grad_scale, read on the device from the metadata header.
void CudaModel::Impl::loss(bf16* dhidden) {
    dec.loss(dhidden);
    TANDEM_CUDA_CHECK(cudaMemcpyAsync(pinned_loss(), loss_sum, sizeof(double), cudaMemcpyDeviceToHost, stream()));
}

// Timeline: a (begin, end) event pair around work queued on stream s; -1 when the timeline is off.
int CudaModel::Impl::tl_begin(cudaStream_t s, const char* what, int layer) {
    if (!options.timeline) return -1;
    if (tl_used == tl_events.size()) tl_events.push_back({Event::make(), Event::make()});  // timeline only
    if (tl_used == timeline_spans.size()) timeline_spans.emplace_back();
    const int i = int(tl_used++);
    timeline_spans[size_t(i)] = TimelineSpan{s == stream() ? "compute" : "copy", what, layer, 0, 0};
    tl_events[size_t(i)][0].record(s);
    return i;
}

void CudaModel::Impl::tl_end(int i, cudaStream_t s) {
    if (i >= 0) tl_events[size_t(i)][1].record(s);
}

// The step's one host sync; the loss sum copied by loss().
double CudaModel::Impl::finish_loss() {
    cuda::synchronize();
    all_complete();
    return *pinned_loss();
}

// One micro-step of training on the current batch, device work only: forward, loss, the step's loss sum,
// backward. after_loss (may be null) is recorded between loss and backward.
void CudaModel::Impl::micro_step(cudaEvent_t after_loss) {
    dec.forward(true);
    loss(dec.d_lnf);
    cuda::sum(loss_sum + 1, dec.losses, dec.step.T, true);  // the step's loss sum, on the device
    if (after_loss) TANDEM_CUDA_CHECK(cudaEventRecord(after_loss, stream()));
    dec.backward();
}

// The current batch's micro-step as a CUDA graph: the cached graph of its key is replayed, or captured
// and launched when its shape already ran eagerly once (so the shape's cuBLASLt plans, cuDNN graphs and
// kernel attributes exist and no library does first-use work inside the capture). A shape never seen
// returns false: the caller runs it eagerly, and its next occurrence is captured.
bool CudaModel::Impl::run_graphed() {
    GraphKey key{dec.step.T, dec.step.S, dec.step.max_seqlen, attn_cudnn, -1};
    const auto seen = std::find(shapes_seen.begin(), shapes_seen.end(), key);
    if (seen == shapes_seen.end()) {
        if (shapes_seen.size() == kMaxShapesSeen) shapes_seen.erase(shapes_seen.begin());
        shapes_seen.push_back(key);
        return false;
    }
    std::rotate(seen, seen + 1, shapes_seen.end());  // most recent last
    key.slot = dev_slot;
    auto it = std::find_if(graphs.begin(), graphs.end(), [&](const CachedGraph& g) { return g.key == key; });
    if (it == graphs.end()) {
        GraphExec exec;
        const auto t0 = std::chrono::steady_clock::now();
        try {
            exec = capture_micro_step();
        } catch (const Error& e) {
            // A library call this CUDA / cuDNN version cannot capture: train without graphs (the eager
            // micro-step the caller runs now reports a real device fault again).
            graph_stats.disabled_reason = e.what();
            std::fprintf(stderr, "tandem: CUDA graphs turned off for this model: %s\n", e.what());
            return false;
        }
        if (graphs.size() == kMaxGraphs)
            graphs.erase(std::min_element(graphs.begin(), graphs.end(), [](const CachedGraph& a, const CachedGraph& b) {
                return a.last_use < b.last_use;
            }));
        graphs.push_back(CachedGraph{key, std::move(exec), 0});
        it = graphs.end() - 1;
        ++graph_stats.captures;
        graph_stats.capture_ms +=
            std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
    } else {
        ++graph_stats.replays;
    }
    it->last_use = ++graph_clock;
    TANDEM_CUDA_CHECK(cudaGraphLaunch(it->exec.get(), stream()));
    return true;
}

// Captures micro_step on the compute stream. Everything it waits on is recorded inside the capture (the
// metadata upload and its wait stay outside, in begin_batch); Smart's copy stream joins through the events
// of offload_input / reload_input and rejoins the compute stream at the last wait_offloaded and
// wait_reloaded, before the capture ends. A failure ends the capture, so the stream stays usable.
GraphExec CudaModel::Impl::capture_micro_step() {
    const cudaStream_t s = stream();
    TANDEM_CUDA_CHECK(cudaStreamBeginCapture(s, cudaStreamCaptureModeThreadLocal));
    GraphOwner graph;
    try {
        micro_step(nullptr);
    } catch (...) {
        if (cudaStreamEndCapture(s, &graph.g) != cudaSuccess) (void)cudaGetLastError();
        throw;
    }
    TANDEM_CUDA_CHECK(cudaStreamEndCapture(s, &graph.g));
    cudaGraphExec_t exec = nullptr;
    TANDEM_CUDA_CHECK(cudaGraphInstantiate(&exec, graph.g, 0));
    return GraphExec(exec);
}

// ---------------------------------------------------------------------------------------------------------
// Construction
// ---------------------------------------------------------------------------------------------------------

namespace {

// Everything but the base weights' values: validation, LoRA init, layout, allocation, LoRA upload.
std::unique_ptr<CudaModel::Impl> make_impl(const ModelConfig& cfg, const LoraConfig& lora, uint64_t seed,
                                           const CudaModelOptions& options, const std::string& where) {
    validate(cfg, lora, options, where);
    auto impl = std::make_unique<CudaModel::Impl>();
    CudaModel::Impl& m = *impl;
    m.cfg = cfg;
    m.lora = lora;
    m.options = options;
    m.d = cuda_dims(cfg, lora, options);
    m.dec.d = m.d;
    m.dec.dropout = lora.dropout;
    m.dec.lora_scaling = float(lora.scaling());
    m.dec.attn_scale = float(1.0 / std::sqrt(double(m.d.D)));
    m.dec.rt = &m;
    m.dec.rope = &m.rope;
    m.rope_host = build_rope(cfg, m.d, where);

    const auto specs = lora_tensor_specs(cfg, lora);
    m.lora_index = lora_index_of(specs, m.d.L);
    m.params = init_lora_params(specs, seed);  // as CpuModel (model.h); moments start at zero
    for (auto& p : m.params) {
        p.exp_avg.assign(p.value.size(), 0.0f);
        p.exp_avg_sq.assign(p.value.size(), 0.0f);
    }

    if (options.attention != AttentionBackend::Inhouse) {
        m.cudnn_ok = cuda::cudnn_attention_available(&m.cudnn_reason);
        const size_t v = cuda::versions().cudnn;
        m.cudnn_version = std::to_string(v / 10000) + "." + std::to_string(v % 10000 / 100) + "." +
                          std::to_string(v % 100);
    }
    m.check_attention_at_load(where);
    if (options.attention == AttentionBackend::Inhouse)
        m.backend_name = "in-house (requested)";
    else if (m.cudnn_ok)
        m.backend_name = "cudnn " + m.cudnn_version;
    else
        m.backend_name = "in-house (" + m.cudnn_reason + ")";

    // Workspace first: it is the staging buffer of the weight upload.
    m.y = cuda_plan(m.d, m.rope_host, specs, m.lora_index, options);
    m.allocate_and_bind();
    m.pinned = PinnedBuffer(kPinnedHeader + size_t(kHostMetaSlots) * size_t(m.y.meta_ints) * sizeof(int32_t),
                            "batch metadata staging");
    m.ev_start = Event::make();
    m.ev_mid = Event::make();
    m.ev_end = Event::make();
    m.upload = Stream::make_non_blocking();
    for (int s2 = 0; s2 < 2; ++s2) {
        m.ev_meta_up[s2] = Event::make(cudaEventDisableTiming);
        m.ev_meta_free[s2] = Event::make(cudaEventDisableTiming);
    }
    for (auto& e : m.ev_host_meta) e = Event::make(cudaEventDisableTiming);
    for (int r = 0; r < kStepSlots; ++r) {
        m.ev_step_done[r] = Event::make(cudaEventDisableTiming);
        for (auto& e : m.ev_t[r]) e = Event::make();
    }
    m.nb = offload_buffers(options.checkpointing);
    if (m.nb > 0) {
        m.offloaded = offloaded_layers(options.checkpointing, m.d.L);
        if (m.y.bytes.pinned_host > 0) m.x_host = PinnedBuffer(m.y.bytes.pinned_host, "offloaded block inputs");
        m.copy = Stream::make_non_blocking();
        m.ev_x_ready = Event::make(cudaEventDisableTiming);
        for (int b = 0; b < 2; ++b) {
            m.ev_offloaded[b] = Event::make(cudaEventDisableTiming);
            m.ev_used[b] = Event::make(cudaEventDisableTiming);
            m.ev_reloaded[b] = Event::make(cudaEventDisableTiming);
        }
    }

    m.rope = cuda::rope_table_upload(m.rope_host, m.y.weights.ptr<char>(m.weights_mem.data(), m.y.rope));

    // LoRA: zero every region (padding included), masters, bf16 copies, AdamW descriptors.
    TANDEM_CUDA_CHECK(cudaMemsetAsync(m.lora_mem.data(), 0, m.y.lora.size(), stream()));
    m.upload_lora_values();
    std::vector<cuda::AdamWTensor> desc(m.params.size());
    for (size_t i = 0; i < desc.size(); ++i) {
        const int64_t off = m.y.lora_offset[i];
        desc[i] = cuda::AdamWTensor{m.lora_value + off, m.lora_grad + off, m.lora_m + off, m.lora_v + off,
                                    m.lora_bf16 + off, m.y.lora_numel[i]};
    }
    if (!desc.empty())
        TANDEM_CUDA_CHECK(cudaMemcpyAsync(m.lora_desc, desc.data(), desc.size() * sizeof(cuda::AdamWTensor),
                                          cudaMemcpyHostToDevice, stream()));
    cuda::synchronize();  // host sources (desc) go out of scope
    return impl;
}

// One tensor from the mapped file into its bf16 piece: BF16 straight from the mapping; F16/F32 through
// the device staging span in chunks and a conversion kernel; F64 converted to fp32 on the host per chunk.
void upload_weight(bf16* dst, const SafetensorsSet& set, const std::string& name, int64_t numel, char* staging,
                   size_t staging_bytes) {
    const TensorInfo& t = set.at(name);
    if (t.numel() != numel)
        throw_invalid(set.source_name() + ": tensor " + name + " has " + std::to_string(t.numel()) +
                      " elements, the config implies " + std::to_string(numel));
    const std::byte* src = t.data.data();
    const cudaStream_t s = stream();
    if (t.dtype == DType::BF16) {
        TANDEM_CUDA_CHECK(cudaMemcpyAsync(dst, src, size_t(numel) * 2, cudaMemcpyHostToDevice, s));
        return;
    }
    if (t.dtype != DType::F16 && t.dtype != DType::F32 && t.dtype != DType::F64)
        throw_unsupported(set.source_name() + ": tensor " + name + " has dtype " + std::string(dtype_name(t.dtype)) +
                          " (the CUDA backend loads BF16, F16, F32 and F64)");
    const size_t in_size = t.dtype == DType::F16 ? 2 : 4;  // element size in staging
    const int64_t chunk = std::max<int64_t>(int64_t(staging_bytes / in_size) / 64 * 64, 64);
    if (size_t(chunk) * in_size > staging_bytes) throw_internal("cuda model: staging buffer too small");
    std::vector<float> host;  // F64 only
    if (t.dtype == DType::F64) host.resize(size_t(std::min<int64_t>(chunk, numel)));
    for (int64_t off = 0; off < numel; off += chunk) {
        const int64_t n = std::min(chunk, numel - off);
        if (t.dtype == DType::F64) {
            for (int64_t i = 0; i < n; ++i) {
                double v;
                std::memcpy(&v, src + (off + i) * 8, sizeof v);
                host[size_t(i)] = float(v);
            }
            // Pageable source: the copy returns once the driver staged it, so `host` can be refilled.
            TANDEM_CUDA_CHECK(cudaMemcpyAsync(staging, host.data(), size_t(n) * 4, cudaMemcpyHostToDevice, s));
        } else {
            TANDEM_CUDA_CHECK(cudaMemcpyAsync(staging, src + off * int64_t(in_size), size_t(n) * in_size,
                                              cudaMemcpyHostToDevice, s));
        }
        if (t.dtype == DType::F16)
            cuda::f16_to_bf16(dst + off, staging, n);
        else
            cuda::to_bf16(dst + off, reinterpret_cast<const float*>(staging), n);
    }
}

}  // namespace

CudaMemoryPlan CudaModel::plan(const ModelConfig& config, const LoraConfig& lora, const CudaModelOptions& options) {
    const std::string where = "memory plan";
    validate(config, lora, options, where);
    const Dims d = cuda_dims(config, lora, options);
    const cpu::RopeTable rope = build_rope(config, d, where);
    const auto specs = lora_tensor_specs(config, lora);
    return cuda_plan(d, rope, specs, lora_index_of(specs, d.L), options).bytes;
}

CudaModel CudaModel::load(const std::filesystem::path& model_dir, const LoraConfig& lora, uint64_t seed,
                          const CudaModelOptions& options) {
    ModelDir md = open_model_dir(model_dir);
    auto impl = make_impl(md.info.config, lora, seed, options, model_dir.string());
    Impl& m = *impl;
    const Dims& d = m.d;
    const SafetensorsSet& ws = md.weights;
    char* stage = m.work_base;
    const size_t stage_bytes = m.work_bytes;
    const int64_t VC = int64_t(d.V) * d.C;
    upload_weight(m.weight(m.y.embed), ws, "model.embed_tokens.weight", VC, stage, stage_bytes);
    if (!d.tied) upload_weight(m.weight(m.y.lm_head), ws, "lm_head.weight", VC, stage, stage_bytes);
    upload_weight(m.weight(m.y.norm_f), ws, "model.norm.weight", d.C, stage, stage_bytes);
    for (int l = 0; l < d.L; ++l) {
        const std::string p = "model.layers." + std::to_string(l) + ".";
        const LayerWeightHandles& h = m.y.lw[size_t(l)];
        upload_weight(m.weight(h.ln1), ws, p + "input_layernorm.weight", d.C, stage, stage_bytes);
        upload_weight(m.weight(h.ln2), ws, p + "post_attention_layernorm.weight", d.C, stage, stage_bytes);
        for (int k = 0; k < kNumModules; ++k) {
            const std::string base = p + (k < kGate ? "self_attn." : "mlp.") + kModuleNames[k];
            upload_weight(m.weight(h.w[k]), ws, base + ".weight", int64_t(d.out_of(k)) * d.in_of(k), stage,
                          stage_bytes);
            if (h.b[k] >= 0) upload_weight(m.weight(h.b[k]), ws, base + ".bias", d.out_of(k), stage, stage_bytes);
        }
        if (d.qk_norm) {
            upload_weight(m.weight(h.q_norm), ws, p + "self_attn.q_norm.weight", d.D, stage, stage_bytes);
            upload_weight(m.weight(h.k_norm), ws, p + "self_attn.k_norm.weight", d.D, stage, stage_bytes);
        }
    }
    cuda::synchronize();  // before the mapping closes and the staging span becomes the workspace again
    return CudaModel(std::move(impl));
}

CudaModel CudaModel::random(const ModelConfig& config, const LoraConfig& lora, uint64_t seed, uint64_t weight_seed,
                            const CudaModelOptions& options) {
    auto impl = make_impl(config, lora, seed, options, "random model");
    Impl& m = *impl;
    const Dims& d = m.d;
    const float bound = 0.02f * std::sqrt(3.0f);  // uniform with std 0.02
    SplitMix64 rng(weight_seed);
    auto uniform = [&](bf16* p, int64_t n) { cuda::fill_uniform(p, n, rng.next_u64(), bound); };
    const int64_t VC = int64_t(d.V) * d.C;
    uniform(m.weight(m.y.embed), VC);
    if (!d.tied) uniform(m.weight(m.y.lm_head), VC);
    cuda::fill(m.weight(m.y.norm_f), 1.0f, d.C);
    for (int l = 0; l < d.L; ++l) {
        const LayerWeightHandles& h = m.y.lw[size_t(l)];
        cuda::fill(m.weight(h.ln1), 1.0f, d.C);
        cuda::fill(m.weight(h.ln2), 1.0f, d.C);
        for (int k = 0; k < kNumModules; ++k) {
            uniform(m.weight(h.w[k]), int64_t(d.out_of(k)) * d.in_of(k));
            if (h.b[k] >= 0) cuda::fill(m.weight(h.b[k]), 0.0f, d.out_of(k));
        }
        if (d.qk_norm) {
            cuda::fill(m.weight(h.q_norm), 1.0f, d.D);
            cuda::fill(m.weight(h.k_norm), 1.0f, d.D);
        }
    }
    cuda::synchronize();
    return CudaModel(std::move(impl));
}

CudaModel::CudaModel(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
CudaModel::CudaModel(CudaModel&&) noexcept = default;
CudaModel& CudaModel::operator=(CudaModel&&) noexcept = default;
CudaModel::~CudaModel() = default;

const ModelConfig& CudaModel::config() const { return impl_->cfg; }
const LoraConfig& CudaModel::lora_config() const { return impl_->lora; }
const CudaModelOptions& CudaModel::options() const { return impl_->options; }
std::string CudaModel::attention_backend_name() const { return impl_->backend_name; }
std::vector<LoraParam>& CudaModel::lora_params() { return impl_->params; }
int CudaModel::max_tokens() const { return impl_->d.T; }
CudaMemoryPlan CudaModel::memory() const { return impl_->y.bytes; }

// ---------------------------------------------------------------------------------------------------------
// LoRA state
// ---------------------------------------------------------------------------------------------------------

void CudaModel::sync_to_host() {
    Impl& m = *impl_;
    m.download_lora(m.lora_value, &LoraParam::value);
    m.download_lora(m.lora_grad, &LoraParam::grad);
    m.download_lora(m.lora_m, &LoraParam::exp_avg);
    m.download_lora(m.lora_v, &LoraParam::exp_avg_sq);
}

void CudaModel::sync_from_host() {
    Impl& m = *impl_;
    for (size_t i = 0; i < m.params.size(); ++i) {
        const LoraParam& p = m.params[i];
        const size_t n = size_t(m.y.lora_numel[i]);
        if (p.value.size() != n || p.exp_avg.size() != n || p.exp_avg_sq.size() != n)
            throw_invalid("sync_from_host: LoRA tensor " + p.spec.name + " holds the wrong number of elements (value " +
                          std::to_string(p.value.size()) + ", exp_avg " + std::to_string(p.exp_avg.size()) +
                          ", exp_avg_sq " + std::to_string(p.exp_avg_sq.size()) + "; expected " + std::to_string(n) +
                          ")");
    }
    m.upload_lora_values();
    m.upload_lora_moments();
    cuda::synchronize();
}

void CudaModel::set_lora(const LoraTensors& tensors) {
    Impl& m = *impl_;
    auto& params = m.params;
    if (tensors.size() != params.size())
        throw_invalid("set_lora: the adapter has " + std::to_string(tensors.size()) + " tensors, the model expects " +
                      std::to_string(params.size()) + " (different r or target modules?)");
    for (size_t i = 0; i < params.size(); ++i) {
        const auto& p = params[i];
        auto it = tensors.find(p.spec.name);
        if (it == tensors.end()) throw_invalid("set_lora: the adapter lacks tensor " + p.spec.name);
        if (it->second.size() != size_t(m.y.lora_numel[i]))
            throw_invalid("set_lora: tensor " + p.spec.name + " has " + std::to_string(it->second.size()) +
                          " elements, expected " + std::to_string(m.y.lora_numel[i]));
    }
    for (auto& p : params) p.value = tensors.at(p.spec.name);
    m.upload_lora_values();
    cuda::synchronize();
}

LoraTensors CudaModel::lora_tensors() {
    Impl& m = *impl_;
    m.download_lora(m.lora_value, &LoraParam::value);
    LoraTensors out;
    for (const auto& p : m.params) out[p.spec.name] = p.value;
    return out;
}

void CudaModel::zero_grads() {
    Impl& m = *impl_;
    if (m.y.lora_padded > 0) zero(m.lora_grad, m.y.lora_padded);
    TANDEM_CUDA_CHECK(cudaMemsetAsync(m.loss_sum + 1, 0, sizeof(double), stream()));
}

// ---------------------------------------------------------------------------------------------------------
// Steps
// ---------------------------------------------------------------------------------------------------------

double CudaModel::forward_backward(const PackedBatch& batch, float grad_scale, uint64_t dropout_seed) {
    Impl& m = *impl_;
    m.timed = false;
    m.tl_used = 0;
    m.begin_batch(batch, grad_scale, dropout_seed);
    m.ev_start.record();
    m.dec.forward(true);
    m.loss(m.dec.d_lnf);
    m.ev_mid.record();
    m.dec.backward();
    m.ev_end.record();
    m.end_batch();
    const double loss = m.finish_loss();
    m.timed = true;
    return loss;
}

void CudaModel::forward_backward_async(const PackedBatch& batch, float grad_scale, uint64_t dropout_seed) {
    Impl& m = *impl_;
    if (m.steps_queued - m.steps_collected >= kStepSlots)
        throw_internal("cuda model: collect_step() must read a queued step before another one starts");
    const int r = int(m.steps_queued % kStepSlots);
    m.tl_used = 0;
    m.begin_batch(batch, grad_scale, dropout_seed);  // the compute stream waits for the upload here
    m.ev_t[r][0].record();
    m.ev_start.record();  // the timeline's origin
    if (m.graphs_enabled() && m.run_graphed()) {
        m.ev_t[r][1].record();  // one graph: no forward / backward split (all of it counts as forward)
    } else {
        ++m.graph_stats.eager;
        m.micro_step(m.ev_t[r][1].get());
    }
    m.ev_t[r][2].record();
    m.end_batch();
}

double CudaModel::forward_loss(const PackedBatch& batch) {
    Impl& m = *impl_;
    m.begin_batch(batch, 1.0f, 0);
    m.dec.forward(false);
    m.loss(nullptr);
    m.end_batch();
    return m.finish_loss();
}

// Full logits in row chunks through the workspace span (evaluation / tests: one copy back per chunk).
std::vector<float> CudaModel::logits(const PackedBatch& batch) {
    Impl& m = *impl_;
    m.begin_batch(batch, 1.0f, 0);
    m.dec.forward(false);
    const int T = m.dec.step.T, V = m.d.V;
    std::vector<float> out(size_t(T) * size_t(V));
    const int rows = int(std::min<size_t>(size_t(T), m.work_bytes / (size_t(V) * sizeof(float))));
    if (rows < 1) throw_internal("cuda model: workspace smaller than one row of logits");
    float* scratch = reinterpret_cast<float*>(m.work_base);
    for (int r0 = 0; r0 < T; r0 += rows) {
        const int n = std::min(rows, T - r0);
        cuda::lm_head_logits(scratch, m.dec.lnf + int64_t(r0) * m.d.C, m.dec.head, n, m.d.C, V);
        TANDEM_CUDA_CHECK(cudaMemcpyAsync(out.data() + int64_t(r0) * V, scratch, size_t(n) * V * sizeof(float),
                                          cudaMemcpyDeviceToHost, stream()));
    }
    m.end_batch();
    cuda::synchronize();
    m.all_complete();
    return out;
}

std::vector<float> CudaModel::last_logits(const std::vector<int32_t>& ids) {
    Impl& m = *impl_;
    const PackedBatch b = batch_from_sequences({ids});
    m.begin_batch(b, 1.0f, 0);
    m.dec.forward(false);
    const int V = m.d.V;
    std::vector<float> out(static_cast<size_t>(V));
    float* scratch = reinterpret_cast<float*>(m.work_base);
    if (m.work_bytes < size_t(V) * sizeof(float)) throw_internal("cuda model: workspace smaller than one row of logits");
    cuda::lm_head_logits(scratch, m.dec.lnf + int64_t(b.num_tokens - 1) * m.d.C, m.dec.head, 1, m.d.C, V);
    TANDEM_CUDA_CHECK(
        cudaMemcpyAsync(out.data(), scratch, size_t(V) * sizeof(float), cudaMemcpyDeviceToHost, stream()));
    m.end_batch();
    cuda::synchronize();
    m.all_complete();
    return out;
}

double CudaModel::optimizer_step(double lr, double beta1, double beta2, double eps, double weight_decay,
                                 double max_grad_norm, int64_t step) {
    Impl& m = *impl_;
    if (m.params.empty()) return 0.0;
    const int count = m.lora_count();
    cuda::global_grad_norm(m.norm, m.lora_desc, count, m.y.lora_total, m.gn_ws);
    cuda::adamw_update(m.lora_desc, count, m.y.lora_total, m.norm, max_grad_norm, lr, beta1, beta2, eps, weight_decay,
                       step);
    TANDEM_CUDA_CHECK(cudaMemcpyAsync(m.pinned_norm(), m.norm, sizeof(float), cudaMemcpyDeviceToHost, stream()));
    cuda::synchronize();
    m.all_complete();
    return double(*m.pinned_norm());
}

void CudaModel::optimizer_step_async(double lr, double beta1, double beta2, double eps, double weight_decay,
                                     double max_grad_norm, int64_t step) {
    Impl& m = *impl_;
    const int r = int(m.steps_queued % kStepSlots);
    if (m.params.empty()) {
        zero(m.norm, 1);
    } else {
        const int count = m.lora_count();
        cuda::global_grad_norm(m.norm, m.lora_desc, count, m.y.lora_total, m.gn_ws);
        cuda::adamw_update(m.lora_desc, count, m.y.lora_total, m.norm, max_grad_norm, lr, beta1, beta2, eps,
                           weight_decay, step);
    }
    TANDEM_CUDA_CHECK(
        cudaMemcpyAsync(m.pinned_step_loss(r), m.loss_sum + 1, sizeof(double), cudaMemcpyDeviceToHost, stream()));
    TANDEM_CUDA_CHECK(
        cudaMemcpyAsync(m.pinned_step_norm(r), m.norm, sizeof(float), cudaMemcpyDeviceToHost, stream()));
    m.ev_t[r][3].record();
    m.ev_step_done[r].record();
    m.step_last_seq[r] = m.batch_seq;
    ++m.steps_queued;
}

CudaModel::StepReadback CudaModel::collect_step() {
    Impl& m = *impl_;
    if (m.steps_collected == m.steps_queued) throw_internal("cuda model: collect_step() with no step queued");
    const int r = int(m.steps_collected % kStepSlots);
    cuda::wait_event(m.ev_step_done[r].get());  // the step's one host sync
    m.completed_seq = std::max(m.completed_seq, m.step_last_seq[r]);
    ++m.steps_collected;
    StepReadback out;
    out.loss_sum = *m.pinned_step_loss(r);
    out.grad_norm = double(*m.pinned_step_norm(r));
    float fwd = 0, bwd = 0, opt = 0;
    if (cudaEventElapsedTime(&fwd, m.ev_t[r][0].get(), m.ev_t[r][1].get()) == cudaSuccess &&
        cudaEventElapsedTime(&bwd, m.ev_t[r][1].get(), m.ev_t[r][2].get()) == cudaSuccess &&
        cudaEventElapsedTime(&opt, m.ev_t[r][2].get(), m.ev_t[r][3].get()) == cudaSuccess) {
        out.timing.forward_ms = fwd;
        out.timing.backward_ms = bwd;
        out.timing.optimizer_ms = opt;
    }
    (void)cudaGetLastError();  // a step without a micro-batch left its timing events unrecorded
    return out;
}

int CudaModel::queued_steps() const { return int(impl_->steps_queued - impl_->steps_collected); }

CudaGraphStats CudaModel::graph_stats() const {
    CudaGraphStats s = impl_->graph_stats;
    s.cached = int(impl_->graphs.size());
    return s;
}

std::vector<TimelineSpan> CudaModel::timeline() {
    Impl& m = *impl_;
    cuda::synchronize();
    if (m.nb > 0) cuda::synchronize(m.copy.get());
    m.all_complete();
    std::vector<TimelineSpan> out;
    for (size_t i = 0; i < m.tl_used; ++i) {
        TimelineSpan t = m.timeline_spans[i];
        float b = 0, e = 0;
        TANDEM_CUDA_CHECK(cudaEventElapsedTime(&b, m.ev_start.get(), m.tl_events[i][0].get()));
        TANDEM_CUDA_CHECK(cudaEventElapsedTime(&e, m.ev_start.get(), m.tl_events[i][1].get()));
        t.begin_ms = b;
        t.end_ms = e;
        out.push_back(t);
    }
    return out;
}

CudaStepTiming CudaModel::last_timing() const {
    const Impl& m = *impl_;
    CudaStepTiming t;
    if (!m.timed) return t;
    float fwd = 0, bwd = 0;
    TANDEM_CUDA_CHECK(cudaEventElapsedTime(&fwd, m.ev_start.get(), m.ev_mid.get()));
    TANDEM_CUDA_CHECK(cudaEventElapsedTime(&bwd, m.ev_mid.get(), m.ev_end.get()));
    t.forward_ms = fwd;
    t.backward_ms = bwd;
    return t;
}

bool cuda_backend_available(std::string* reason) { return cuda::device_available(reason); }

}  // namespace tandem

#else  // !TANDEM_WITH_CUDA

namespace tandem {
namespace {

[[noreturn]] void no_cuda() {
    throw Error(ErrorCategory::Unsupported,
                "this build of Tandem has no CUDA backend (built without nvcc/cuDNN); use --device cpu");
}

}  // namespace

struct CudaModel::Impl {};

CudaMemoryPlan CudaModel::plan(const ModelConfig&, const LoraConfig&, const CudaModelOptions&) { no_cuda(); }
CudaModel CudaModel::load(const std::filesystem::path&, const LoraConfig&, uint64_t, const CudaModelOptions&) {
    no_cuda();
}
CudaModel CudaModel::random(const ModelConfig&, const LoraConfig&, uint64_t, uint64_t, const CudaModelOptions&) {
    no_cuda();
}
CudaModel::CudaModel(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
CudaModel::CudaModel(CudaModel&&) noexcept = default;
CudaModel& CudaModel::operator=(CudaModel&&) noexcept = default;
CudaModel::~CudaModel() = default;
const ModelConfig& CudaModel::config() const { no_cuda(); }
const LoraConfig& CudaModel::lora_config() const { no_cuda(); }
const CudaModelOptions& CudaModel::options() const { no_cuda(); }
std::string CudaModel::attention_backend_name() const { no_cuda(); }
std::vector<LoraParam>& CudaModel::lora_params() { no_cuda(); }
void CudaModel::sync_to_host() { no_cuda(); }
void CudaModel::sync_from_host() { no_cuda(); }
void CudaModel::set_lora(const LoraTensors&) { no_cuda(); }
LoraTensors CudaModel::lora_tensors() { no_cuda(); }
void CudaModel::zero_grads() { no_cuda(); }
double CudaModel::forward_backward(const PackedBatch&, float, uint64_t) { no_cuda(); }
double CudaModel::forward_loss(const PackedBatch&) { no_cuda(); }
void CudaModel::forward_backward_async(const PackedBatch&, float, uint64_t) { no_cuda(); }
void CudaModel::optimizer_step_async(double, double, double, double, double, double, int64_t) { no_cuda(); }
CudaModel::StepReadback CudaModel::collect_step() { no_cuda(); }
int CudaModel::queued_steps() const { no_cuda(); }
CudaGraphStats CudaModel::graph_stats() const { no_cuda(); }
std::vector<TimelineSpan> CudaModel::timeline() { no_cuda(); }
std::vector<float> CudaModel::logits(const PackedBatch&) { no_cuda(); }
std::vector<float> CudaModel::last_logits(const std::vector<int32_t>&) { no_cuda(); }
double CudaModel::optimizer_step(double, double, double, double, double, double, int64_t) { no_cuda(); }
CudaStepTiming CudaModel::last_timing() const { no_cuda(); }
CudaMemoryPlan CudaModel::memory() const { no_cuda(); }
int CudaModel::max_tokens() const { no_cuda(); }

bool cuda_backend_available(std::string* reason) {
    if (reason) *reason = "this build of Tandem has no CUDA backend (built without nvcc/cuDNN); use --device cpu";
    return false;
}

}  // namespace tandem

#endif  // TANDEM_WITH_CUDA
