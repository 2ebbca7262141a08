// SPDX-FileCopyrightText: 2026 The Tandem developers
// SPDX-License-Identifier: GPL-3.0-or-later
// The CUDA runtime of CudaModel::Impl (model/cuda_model_impl.h): what the decoder's blocks ask of the GPU
// beyond the ops (DecoderRuntime), and the per-batch machinery around them.
// Decisions a reader must know:
//  - Batch metadata (tokens, targets, positions, cu_seqlens, built on the host once per micro-batch) goes
//    up in ONE async copy per batch on its own upload stream: kHostMetaSlots pinned host slots, two device
//    slots (double-buffered: batch n+1's upload runs while batch n computes). Events order upload -> use
//    and use -> next upload into the same device slot. Every layer, forward and backward, reads the same
//    device slot. A host slot is rewritten only after its copy ran: known without waiting when a later
//    step was collected, else one counted wait (never with grad_accum <= 2).
//  - Checkpointing Smart / SmartSingle: the decoder's offload hooks. Inputs of layers l < L - nb are copied
//    to a pinned host slot on a copy stream in forward and copied back in backward (the last nb inputs are
//    still in their buffers then: never copied). Smart reloads layer l-1's input into the other buffer while
//    layer l runs; SmartSingle reloads layer l's and waits. Events order copy -> use and use -> overwrite; the
//    host never waits inside the step (the compute stream waits on the last reload, so the step's final sync
//    covers the copy stream too).
//  - Offloaded MLP layers (selective with layers past what fits on the device): the same pattern for their
//    gate / up, two device slots taken in turn, reloaded two offloaded layers ahead in backward.
//  - CUDA graphs (options.cuda_graphs): forward_backward_async's micro-step (forward, loss, backward; the
//    upload and its wait stay outside) is captured per GraphKey (T, S, longest sample, attention path,
//    device metadata slot) and replayed. The per-batch scalars the kernels take (dropout seed, grad_scale)
//    are in the metadata slot's header, read on the device, so a replay is the eager step bit for bit. A
//    shape runs eagerly first (cuBLASLt heuristics, cuDNN plans, kernel attributes are built outside any
//    capture); its next micro-batch in a slot is captured. The copy stream forks from and joins the
//    compute stream inside the capture (its events are recorded inside it). A graph has no forward /
//    backward split (the timing events stay outside); timeline and the metadata ablation run eagerly.
#include "model/cuda_model_impl.h"

#if TANDEM_WITH_CUDA

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <string>

namespace tandem {

using namespace cuda_impl;

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
    const int longest = check_packed_batch(b, d.T, d.V, cfg.max_position_embeddings);
    if (longest > d.max_seqlen)
        throw_invalid("model: a sample of " + std::to_string(longest) + " tokens exceeds the max_seqlen of " +
                      std::to_string(d.max_seqlen) + " the model was loaded for");
    const int positions = rope.max_pos - rope.long_from;
    if (positions < cfg.max_position_embeddings)
        for (int t = 0; t < b.num_tokens; ++t)
            if (b.position_ids[size_t(t)] >= positions)
                throw_invalid("model: position " + std::to_string(b.position_ids[size_t(t)]) + " is beyond the " +
                              std::to_string(positions) + " positions of the RoPE table (sized for the token budget)");
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
    write_metadata(b, cur_seed, cur_grad_scale, rope.long_from, h);
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
    write_metadata(b, cur_seed, cur_grad_scale, rope.long_from, h);
    const int64_t n = metadata_ints(b.num_tokens, b.num_samples);
    TANDEM_CUDA_CHECK(cudaMemcpyAsync(meta + size_t(dev_slot) * size_t(y.meta_ints), h, size_t(n) * sizeof(int32_t),
                                      cudaMemcpyHostToDevice, stream()));
    cuda::synchronize();
    all_complete();
}

// Auto: cuDNN when available and it supports this shape within the planned buffers, else in-house.
void CudaModel::Impl::choose_attention() {
    const Step& step = dec.step;
    attn_shape = cuda::CudnnAttentionShape{step.S, step.T, d.Hq, d.Hkv, d.D, step.max_seqlen, d.attn_scale};
    attn_shape.split = cuda::cudnn_attention_split_backward(d.T, d.Hq, d.Hkv, d.D);  // as planned (cuda_plan)
    std::string why = "requested";
    if (options.attention != AttentionBackend::Inhouse) {
        // Soft-capped scores and attention sinks (which rescale the output and the log-sum-exp in the in-house
        // [Hq,T] layout, attention_sinks) have no cuDNN graph here: the in-house kernels.
        bool ok = cudnn_ok && d.attn_softcap == 0.0f && !d.sinks;
        why = d.attn_softcap > 0.0f ? std::string("soft-capped attention scores")
              : d.sinks             ? std::string("attention sinks")
                                    : cudnn_reason;
        // Every layer's graph (sliding windows are a left bound of cuDNN's mask: one graph per window that cuts
        // into this batch's samples) must build and fit the planned buffers.
        std::vector<int> windows;
        for (int w : d.windows)
            if (std::find(windows.begin(), windows.end(), w) == windows.end()) windows.push_back(w);
        for (int w : windows) {
            cuda::CudnnAttentionShape shape = attn_shape;
            shape.window = w;
            if (ok && !cuda::cudnn_attention_supported(shape, &why)) ok = false;
            if (ok && (cuda::cudnn_attention_workspace_bytes(shape) > y.att_ws_bytes ||
                       cuda::cudnn_attention_stats_bytes(shape) > y.stats_bytes)) {
                ok = false;
                why = "cuDNN needs more workspace for this shape than was planned";
            }
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

bool CudaModel::Impl::route_given(int l, int32_t* idx, const Step& s) {
    if (forced.empty() || !forced[size_t(l)]) return false;
    const size_t per = size_t(d.T) * size_t(d.topk);
    TANDEM_CUDA_CHECK(cudaMemcpyAsync(idx, static_cast<const int32_t*>(forced_routing.data()) + size_t(l) * per,
                                      size_t(s.T) * size_t(d.topk) * sizeof(int32_t), cudaMemcpyDeviceToDevice,
                                      cuda_impl::stream()));
    return true;
}

void CudaModel::Impl::read_offsets(const int32_t* offsets, int32_t* host, int E) {
    // The old way's per-layer query: the counts to the host, and the host waits for them.
    TANDEM_CUDA_CHECK(cudaMemcpyAsync(host, offsets, size_t(E + 1) * sizeof(int32_t), cudaMemcpyDeviceToHost,
                                      cuda_impl::stream()));
    cuda::synchronize(cuda_impl::stream());
}

void CudaModel::Impl::attention_forward(int l, LayerActs<CudaBackend>& a, const Step& step) {
    if (attn_cudnn) {
        cuda::CudnnAttentionShape shape = attn_shape;
        shape.window = d.windows[size_t(l)];
        cuda::cudnn_attention_forward(a.att, a.stats, a.qr, a.kr, a.v, step.cu_seqlens, shape, att_ws);
    } else {
        cuda::attention_forward(a.att, static_cast<float*>(a.stats), a.qr, a.kr, a.v, step.cu_seqlens, step.S, step.T,
                                d.Hq, d.Hkv, d.D, d.attn_scale, step.max_seqlen, d.windows[size_t(l)],
                                d.attn_softcap);
        if (const bf16* sinks = dec.layers[size_t(l)].sinks)
            cuda::attention_sinks(a.att, static_cast<float*>(a.stats), sinks, step.T, d.Hq, d.D);
    }
}

// dq [T,Q], dk [T,KV], dv [T,KV] written.
void CudaModel::Impl::attention_backward(int l, LayerActs<CudaBackend>& a, bf16* dq, bf16* dk, bf16* dv,
                                         const bf16* dout, const Step& step) {
    if (attn_cudnn) {
        cuda::CudnnAttentionShape shape = attn_shape;
        shape.window = d.windows[size_t(l)];
        cuda::cudnn_attention_backward(dq, dk, dv, dout, a.qr, a.kr, a.v, a.att, a.stats, step.cu_seqlens, shape,
                                       att_ws);
    } else
        cuda::attention_backward(dq, dk, dv, dout, a.qr, a.kr, a.v, a.att, static_cast<const float*>(a.stats),
                                 step.cu_seqlens, step.S, step.T, d.Hq, d.Hkv, d.D, d.attn_scale, step.max_seqlen,
                                 att_ws, d.windows[size_t(l)], d.attn_softcap);
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

// Offloaded MLP layers (plan.h PlanOptions::mlp_offloaded_layers): the j-th one's gate / up [T,F] each are in
// device slot j % 2 and, for j < mlp_host_slots, go to host slot j. The last two stay in their slots.
bf16* CudaModel::Impl::mlp_host_slot(int j) const {
    return reinterpret_cast<bf16*>(mlp_host.data()) + size_t(j) * 2 * size_t(d.T) * size_t(d.F);
}

// Forward, before layer l writes its gate / up: the slot's previous layer (j - 2) must have reached the host.
// That copy had the rest of layer j - 2's forward and the layers up to l to finish.
void CudaModel::Impl::wait_mlp_slot(int l) {
    const int j = dec.mlp_offload_index[size_t(l)];
    if (j >= 2) ev_mlp_offloaded[j % 2].wait_on(stream());
}

// Forward: layer l's gate / up were just written on the compute stream -> host slot j.
void CudaModel::Impl::offload_mlp(int l) {
    const int j = dec.mlp_offload_index[size_t(l)];
    if (j >= y.mlp_host_slots) return;
    ev_mlp_ready.record();
    ev_mlp_ready.wait_on(copy.get());
    const int tl = tl_begin(copy.get(), "offload mlp", l);
    const size_t n = size_t(dec.step.T) * size_t(d.F) * sizeof(bf16);
    bf16* h = mlp_host_slot(j);
    const LayerActs<CudaBackend>& a = dec.acts[size_t(l)];
    TANDEM_CUDA_CHECK(cudaMemcpyAsync(h, a.gate, n, cudaMemcpyDeviceToHost, copy.get()));
    TANDEM_CUDA_CHECK(cudaMemcpyAsync(h + size_t(d.T) * size_t(d.F), a.up, n, cudaMemcpyDeviceToHost, copy.get()));
    tl_end(tl, copy.get());
    ev_mlp_offloaded[j % 2].record(copy.get());
}

// Backward: layer l's gate / up, host slot j -> device slot j % 2, once the compute stream has finished the MLP
// backward that last read that slot (layer j + 2's, which recorded ev_mlp_used just before this call).
void CudaModel::Impl::reload_mlp(int l) {
    const int j = dec.mlp_offload_index[size_t(l)];
    if (j >= y.mlp_host_slots) return;
    ev_mlp_used[j % 2].wait_on(copy.get());
    const int tl = tl_begin(copy.get(), "reload mlp", l);
    const size_t n = size_t(dec.step.T) * size_t(d.F) * sizeof(bf16);
    const bf16* h = mlp_host_slot(j);
    LayerActs<CudaBackend>& a = dec.acts[size_t(l)];
    TANDEM_CUDA_CHECK(cudaMemcpyAsync(a.gate, h, n, cudaMemcpyHostToDevice, copy.get()));
    TANDEM_CUDA_CHECK(cudaMemcpyAsync(a.up, h + size_t(d.T) * size_t(d.F), n, cudaMemcpyHostToDevice, copy.get()));
    tl_end(tl, copy.get());
    ev_mlp_reloaded[j % 2].record(copy.get());
}

// Backward, before layer l's MLP backward reads its gate / up: the reload must be in place.
void CudaModel::Impl::wait_mlp_reloaded(int l) {
    const int j = dec.mlp_offload_index[size_t(l)];
    if (j < y.mlp_host_slots) ev_mlp_reloaded[j % 2].wait_on(stream());
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
    timeline_spans[size_t(i)] =
        TimelineSpan{s == stream() ? "compute" : comm.get() && s == comm.get() ? "comm" : "copy", what, layer, 0, 0};
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
    // The step's loss sum, on the device (with the MoE load-balancing loss, moe_aux_loss added the batch's whole
    // loss to it).
    if (!dec.aux_stats) cuda::sum(loss_sum + 1, dec.losses, dec.step.T, true);
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

}  // namespace tandem

#endif  // TANDEM_WITH_CUDA
