// SPDX-FileCopyrightText: 2026 The Tandem developers
// SPDX-License-Identifier: GPL-3.0-or-later
// Decoder<B>: the decoder blocks written once over the op table (backend/backend.h), instantiated for the
// CPU (fp32, the oracle) and CUDA (bf16) backends. Forward, recompute and backward of the dense Llama-family
// block: RMSNorm -> q/k/v (+bias, + LoRA with dropout) -> q/k norm -> RoPE -> causal GQA attention -> o_proj
// -> residual + RMSNorm -> gate/up -> SwiGLU -> down -> residual + the next RMSNorm.
// Dimension legend: plan.h. Decisions a reader must know:
//  - Residual adds are fused into the next RMSNorm (residual_rmsnorm_forward): the attention block writes mid
//    and ln2; the MLP block writes the next block's x and ln1 (the last block: x_final and lnf).
//  - Recomputed in backward instead of kept: the SwiGLU output act (from gate and up) and the LoRA-dropped
//    inputs (the mask is a pure hash of (seed, layer, module, index), so the recomputed values are the ones
//    forward used).
//  - The seven projections are slots (arch/arch.h); a family whose checkpoint fuses some (Phi-3 qkv_proj)
//    has their weights and LoRA B rows at offsets in one piece, and their LoRA shares lora_A (its gradient
//    accumulates over the slots) and one dropout mask.
//  - Checkpointing is where the buffers live (plan.h): buffers the policy drops share one piece for all
//    layers, and backward re-runs as much of layer l's forward as produces them right before layer l's
//    backward (recompute_layer); the last layer's shared pieces still hold its forward values: not re-run. Offloading policies move block inputs through the runtime's hooks
//    (CUDA: a copy stream and events; CPU: memcpy), at the same points on both backends.
//  - What differs between backends and is not an op lives in DecoderRuntime: attention dispatch (CUDA picks
//    cuDNN or the in-house kernels per batch), the offload copies, the per-layer timeline and the metadata
//    ablation. The calls below are the CUDA launch sequence, op for op.
//  - The class is declared here with its forward members; bind (decoder_bind.h), recompute and backward
//    (decoder_backward.h) and the mixture-of-experts members (decoder_moe.h) are defined in the headers this one
//    includes at its end, so each file stays readable; include this one.
#pragma once

#include <algorithm>
#include <array>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <vector>

#include "kernels/cpu/rope.h"
#include "model/plan.h"
#include "tandem/data.h"
#include "tandem/error.h"

namespace tandem {

// The micro-batch being run: sizes, and pointers (device memory on CUDA) to its metadata.
struct Step {
    int T = 0, S = 0, max_seqlen = 0;
    const int32_t* tokens = nullptr;     // [T]
    const int32_t* targets = nullptr;    // [T] labels shifted by one, -100 on the last row
    const int32_t* positions = nullptr;  // [T]
    const int32_t* cu_seqlens = nullptr; // [S+1]
    const uint64_t* seed = nullptr;      // [1] the LoRA dropout seed
    const float* grad_scale = nullptr;   // [1] the loss gradient's scale
    const float* label_count = nullptr;  // [1] the micro-batch's label tokens (the MoE load-balancing loss's weight)
};

// A batch's metadata slot (int32): header (dropout seed as uint64 at [0,1], grad_scale at [2], the label tokens
// as a float at [3]), tokens,
// targets (labels shifted by one: targets[t] = labels[t+1], -100 on the last row), positions (each padded to
// kMetaAlign rows), cu_seqlens [S+1]. Built once per micro-batch on the host; on CUDA sent up in one copy.
// The positions are the RoPE table's rows (cpu::rope_rows): a LongRoPE table's long rows for the samples longer
// than rope_long_from (RopeTable::long_from; 0: the positions themselves).
inline int64_t metadata_ints(int T, int S) { return kMetaHeader + 3 * round_up(T, kMetaAlign) + S + 1; }

inline void write_metadata(const PackedBatch& b, uint64_t seed, float grad_scale, int rope_long_from, int32_t* h) {
    const int T = b.num_tokens;
    const int S = b.num_samples;
    const int64_t Tp = round_up(T, kMetaAlign);
    std::memcpy(h, &seed, sizeof seed);
    std::memcpy(h + 2, &grad_scale, sizeof grad_scale);
    const float labels = float(b.num_label_tokens);
    std::memcpy(h + 3, &labels, sizeof labels);
    h += kMetaHeader;
    std::memcpy(h, b.tokens.data(), size_t(T) * sizeof(int32_t));
    int32_t* targets = h + Tp;
    for (int t = 0; t < T; ++t) targets[t] = (t + 1 < T) ? b.labels[size_t(t) + 1] : int32_t(-100);
    cpu::rope_rows(h + 2 * Tp, b.position_ids.data(), b.cu_seqlens.data(), S, rope_long_from);
    std::memcpy(h + 3 * Tp, b.cu_seqlens.data(), size_t(S + 1) * sizeof(int32_t));
}

// The Step of a batch whose metadata is at slot (device memory on CUDA).
inline Step metadata_step(const int32_t* slot, int T, int S, int longest) {
    const int64_t Tp = round_up(T, kMetaAlign);
    Step s;
    s.T = T;
    s.S = S;
    s.max_seqlen = longest;
    s.seed = reinterpret_cast<const uint64_t*>(slot);
    s.grad_scale = reinterpret_cast<const float*>(slot + 2);
    s.label_count = reinterpret_cast<const float*>(slot + 3);
    s.tokens = slot + kMetaHeader;
    s.targets = slot + kMetaHeader + Tp;
    s.positions = slot + kMetaHeader + 2 * Tp;
    s.cu_seqlens = slot + kMetaHeader + 3 * Tp;
    return s;
}

template <class B>
struct LayerWeights {
    using Act = typename B::Act;
    const Act* ln1 = nullptr;  // [C]
    const Act* ln2 = nullptr;  // [C]
    const Act* w[kNumModules] = {};  // q [Q,C], k [KV,C], v [KV,C], o [C,Q], gate [F,C], up [F,C], down [C,F]
    const Act* b[kNumModules] = {};  // [OUT] or nullptr
    Quant4Ref q[kNumModules];        // a 4-bit weight (w[m] is nullptr): its codes and scales
    Fp8Ref f8[kNumModules];          // an FP8 weight (w[m] is nullptr; core/fp8.h): the slot's codes and scales
    Fp8Ref f8t[kNumModules];         // its transpose [IN, OUT] when resident (PlanOptions::fp8_transposed), else empty
    int64_t q_first[kNumModules] = {};  // the slot's first element in it (a fused projection's rows)
    const Act* q_norm = nullptr;     // [D] (qk_norm only)
    const Act* k_norm = nullptr;     // [D]
    const Act* attn_out_norm = nullptr;  // [C] sandwich norms only
    const Act* mlp_out_norm = nullptr;   // [C]
    const Act* router = nullptr;         // [E,C] MoE layers; w[kGate] / w[kUp] are then expert 0's gate / up rows
                                         // of gate_up [E,2Fe,C] and w[kDown] expert 0's down [E,C,Fe] (and
                                         // b[m] expert 0's bias rows of [E,2Fe] / [E,C])
    const Act* router_bias = nullptr;    // [E] (Dims::router_bias)
    const Act* sinks = nullptr;          // [Hq] attention sinks (Dims::sinks): the runtime's attention applies them
    // Dims::mxfp4: the experts' codes and scales (0: gate_up [E, 2Fe, C], 1: down [E, C, Fe]); w[] is then nullptr.
    const uint8_t* mx_codes[2] = {};
    const uint8_t* mx_scales[2] = {};
};

// Activations of one layer (pointers into the arena; with a shared set every layer has the same pointers but x).
template <class B>
struct LayerActs {
    using Act = typename B::Act;
    Act* x = nullptr;           // [T,C] block input (residual stream)
    Act* ln1 = nullptr;         // [T,C]
    float* ln1_rstd = nullptr;  // [T]
    Act* q = nullptr;           // [T,Q] projection before q norm (qk_norm only)
    Act* k = nullptr;           // [T,KV] (qk_norm only)
    float* q_rstd = nullptr;    // [T*Hq] (qk_norm only)
    float* k_rstd = nullptr;    // [T*Hkv] (qk_norm only)
    Act* qr = nullptr;          // [T,Q] attention input: projection (+ q norm) + RoPE, in place
    Act* kr = nullptr;          // [T,KV]
    Act* v = nullptr;           // [T,KV]
    Act* att = nullptr;         // [T,Q] attention output
    void* stats = nullptr;      // lse [Hq,T] fp32 (CPU, CUDA in-house) or cuDNN's stats layout
    Act* mid = nullptr;         // [T,C] residual after attention
    Act* ln2 = nullptr;         // [T,C]
    float* ln2_rstd = nullptr;  // [T]
    Act* gate = nullptr;        // [T,F]
    Act* up = nullptr;          // [T,F]
    Act* lora_tmp[kNumModules] = {};  // [T,R] input @ A^T per adapted module
    Act* attn_out = nullptr;          // [T,C] sandwich norms only: o_proj output before its norm
    float* attn_out_rstd = nullptr;   // [T]
    Act* mlp_out = nullptr;           // [T,C] down_proj output before its norm
    float* mlp_out_rstd = nullptr;    // [T]
    // MoE layers (kernels/cpu/moe.h; gate / up then hold [N,Fe] in expert order, the MLP LoRA tmps [N,R]).
    float* probs = nullptr;           // [T,E] router softmax
    Act* logits = nullptr;            // [T,E] router logits (backward: their gradient)
    int32_t* idx = nullptr;           // [T,K] chosen experts
    float* route_w = nullptr;         // [T,K] their weights
    int32_t* order = nullptr;         // [N] assignments in expert order
    int32_t* inv = nullptr;           // [N] each assignment's row
    int32_t* offsets = nullptr;       // [E+1] each expert's first row
    Act* xs = nullptr;                // [N,C] ln2 rows in expert order
    Act* ys = nullptr;                // [N,C] the experts' outputs
};

// One adapted projection's LoRA: the values the GEMMs read (CUDA: the bf16 copies) and the fp32 gradients.
template <class B>
struct LoraRef {
    using Act = typename B::Act;
    const Act* a = nullptr;  // [R,IN]; nullptr: not adapted
    const Act* b = nullptr;  // [OUT,R]
    float* grad_a = nullptr;
    float* grad_b = nullptr;
    int drop = 0;  // the slot whose dropout key it uses (a fused projection draws one mask for its slots)
};

// What the block code asks of the backend's runtime (see the header comment).
template <class B>
class DecoderRuntime {
public:
    using Act = typename B::Act;
    virtual ~DecoderRuntime() = default;
    // Layer l's attention (its window: Dims::windows[l]).
    virtual void attention_forward(int l, LayerActs<B>& a, const Step& s) = 0;
    // dq [T,Q], dk [T,KV], dv [T,KV] written.
    virtual void attention_backward(int l, LayerActs<B>& a, Act* dq, Act* dk, Act* dv, const Act* dout,
                                    const Step& s) = 0;
    // Offloading policies (nb > 0): forward offloads layer l's input after it is written and waits for the
    // copy of the input that last used a buffer before overwriting it; backward reloads ahead and waits.
    virtual void offload_input(int l) = 0;
    virtual void wait_offloaded(int l) = 0;
    virtual void reload_input(int l) = 0;
    virtual void wait_reloaded(int l) = 0;
    virtual void input_used(int l) = 0;  // backward finished reading layer l's input buffer
    // Offloaded MLP layers (plan.h PlanOptions::mlp_offloaded_layers; the j-th such layer's gate / up are in slot
    // j % 2): forward waits until the slot's previous layer (j - 2) reached the host before writing gate / up and
    // offloads them after; backward reloads layer j - 2's into the slot once layer j's MLP backward has read it,
    // and waits before an MLP backward reads a reloaded slot. Only training plans have such layers.
    virtual void wait_mlp_slot(int /*l*/) {}
    virtual void offload_mlp(int /*l*/) {}
    virtual void mlp_used(int /*l*/) {}
    virtual void reload_mlp(int /*l*/) {}
    virtual void wait_mlp_reloaded(int /*l*/) {}
    virtual void before_layer() {}       // the metadata ablation (CUDA bench only)
    // MoE layer l's choice of experts injected into idx [T,K] (checks only: the CPU's routing in a CUDA step, a
    // fixture's); false: the router chooses.
    virtual bool route_given(int /*l*/, int32_t* /*idx*/, const Step& /*s*/) { return false; }
    // The ablation Decoder::moe_loop: the E+1 expert offsets copied where the host reads them (CUDA: a copy and a
    // counted wait, the host sync per layer the loop over experts costs; CPU: they are there already).
    virtual void read_offsets(const int32_t* offsets, int32_t* host, int E) {
        std::memcpy(host, offsets, size_t(E + 1) * sizeof(int32_t));
    }
    virtual int span_begin(const char* /*what*/, int /*layer*/) { return -1; }  // the timeline (CUDA bench)
    virtual void span_end(int /*span*/) {}
    // Layer l's backward is done: its LoRA gradients hold this micro-batch's contribution (data parallelism on
    // CUDA sums them over the ranks from here, beside the next layer's backward).
    virtual void layer_backward_done(int /*l*/) {}
};

template <class B>
class Decoder {
public:
    using Act = typename B::Act;

    Dims d;
    double dropout = 0.0;
    float lora_scaling = 1.0f;
    float embed_scale = 1.0f;  // Dims::embed_scale as the backend applies it (CUDA: rounded to bf16, as transformers)
    int nb = 0;  // block-input buffers of an offloading policy (0: none)
    bool recomputes = false;                       // the policy drops buffers: backward recomputes them
    std::array<bool, kBufCount> dropped{};         // per buffer (plan.h)
    int mlp_kept_layers = 0;                       // layers 0..K-1 keep the MLP buffers dropped[] names (plan.h)
    std::vector<int> mlp_offloaded;                // the layers whose MLP buffers go to host memory (plan.h)
    std::vector<int> mlp_offload_index;            // [L] or empty: layer l's index in mlp_offloaded, or -1
    const typename B::RopeTable* rope = nullptr;
    const typename B::RopeTable* rope_local = nullptr;  // the sliding layers' table (Dims::local_rope), or nullptr
    DecoderRuntime<B>* rt = nullptr;
    Step step;

    // Weights.
    const Act* embed = nullptr;   // [V,C]
    const Act* head = nullptr;    // [V,C] lm_head, or embed when tied
    const Act* norm_f = nullptr;  // [C]
    std::vector<LayerWeights<B>> layers;
    std::vector<std::array<LoraRef<B>, kNumModules>> lora;  // [L][module]
    // Inference with several adapters in one decode batch: rows [r0, r0 + rows) of the step use `table` (its rank
    // and scaling) instead of `lora`; the base GEMMs run once over all rows. Forward only, no dropout; d.R is then
    // the planned (largest) rank, the stride of each group's LoRA tmp rows.
    struct LoraRows {
        int r0 = 0, rows = 0;
        const std::vector<std::array<LoraRef<B>, kNumModules>>* table = nullptr;  // nullptr: no adapter
        int R = 0;
        float scaling = 1.0f;
    };
    std::vector<LoraRows> lora_rows;

    // Activations and scratch.
    std::vector<LayerActs<B>> acts;
    Act* x_final = nullptr;    // [T,C]
    Act* lnf = nullptr;        // [T,C] (a chunked block: may share d_att's memory, free until backward: make_plan)
    float* lnf_rstd = nullptr; // [T]
    Act* d_res = nullptr;      // [T,C] gradient of the residual stream
    Act* d_ln = nullptr;       // [T,C] gradient of a norm output; forward: projection output scratch
    Act* d_lnf = nullptr;      // [T,C] written by the loss (a chunked block: may share d_big2's memory)
    Act* d_big = nullptr;      // [T,BIG] dact / datt
    Act* d_big2 = nullptr;     // [T,BIG] dgate / dq
    Act* d_big3 = nullptr;     // [T,BIG] dup / dq after q norm; forward and backward: act scratch
    Act* d_k = nullptr;        // [T,KV]
    Act* d_k2 = nullptr;       // [T,KV] dk after k norm (qk_norm only)
    Act* d_v = nullptr;        // [T,KV]
    Act* d_tmp = nullptr;      // [T,R]
    Act* xd = nullptr;         // [T,IN] dropped LoRA input (dropout only)
    Act* d_drop = nullptr;     // [T,IN] its gradient (dropout only)
    float* losses = nullptr;   // [T]
    void* ce_ws = nullptr;     // lm_head chunk workspace
    double* loss_sum = nullptr;  // [2] this batch's, the step's
    Act* wq = nullptr;           // one slot's 4-bit base weight, dequantized (4-bit models only)
    Act* wx = nullptr;           // Dims::mxfp4: one expert parameter dequantized, [E, out, in]
    int wx_layer = -1, wx_param = -1;  // what wx holds (-1: nothing known; reset at forward / backward)
    // FP8 models (d.fp8): a GEMM's quantized input or output gradient, and one slot's weight transposed.
    uint8_t* f8_codes = nullptr;
    float* f8_scales = nullptr;
    uint8_t* f8_wt = nullptr;
    float* f8_wt_scales = nullptr;
    uint8_t* f8_w = nullptr;  // a 4-bit slot dequantized to FP8 for its forward GEMM (quantization nf4)
    float* f8_w_scales = nullptr;
    Act* f8_tail = nullptr;  // [16, max(OUT, IN)] the tail GEMM's output (core/fp8.h)
    // The MLP's gradients quantized by the activation's backward (activation_backward_fp8): dup's codes here.
    uint8_t* f8_codes2 = nullptr;
    float* f8_scales2 = nullptr;
    // What f8_codes holds while a SharedInput scope is open (several projections of one input), or right after
    // the activation's forward quantized its output for down_proj (f8_produced): that input.
    const Act* f8_held = nullptr;
    int f8_held_rows = 0, f8_held_k = 0;
    bool f8_share = false, f8_produced = false;
    // Output gradients already quantized by the activation's backward, for gate's and up's input-gradient GEMMs:
    // [0] dgate in f8_codes (void once f8_codes is written again), [1] dup in f8_codes2.
    struct Fp8Ready {
        const Act* of = nullptr;
        const uint8_t* codes = nullptr;
        const float* scales = nullptr;
        int rows = 0, k = 0;
    };
    Fp8Ready f8_ready[2];
    Act* d_xs = nullptr;         // [N,C] MoE backward: gradient of the permuted input
    Act* d_ys = nullptr;         // [N,C] of the experts' outputs
    float* d_route_w = nullptr;  // [T,K] of the routing weights
    float* aux_stats = nullptr;  // [2E] the load-balancing loss's sums over the MoE layers (d.aux_coef > 0)
    float* aux_dense = nullptr;  // [E] its gradient of each router probability
    int mlp_rows = 0;            // rows of one MLP chunk (plan.h kMlpChunkRows); >= step.T: one chunk
    // ModelPlan::block_chunked: everything but attention runs in chunks of mlp_rows rows; ln1, mid, ln2 (and
    // their rstds) and d_ln hold one chunk, d_att [T,Q] the attention output's gradient.
    bool block_chunked = false;
    Act* d_att = nullptr;
    // Ablation (CudaModelOptions::moe_routing_loop): the experts the old way, one GEMM (and LoRA) per expert over
    // its rows, the row counts read back by the host once per MoE layer forward and once in backward.
    bool moe_loop = false;
    std::vector<int32_t> loop_offsets;  // [E+1] the layer's offsets on the host (moe_loop)

    // Points weights, activations and scratch into arenas laid out by `y` (allocated at the given bases).
    void bind(const ModelPlan& y, void* weights_base, void* acts_base, void* work_base);
    // The pointers of a 4-bit projection's pieces.
    Quant4Ref quant4_ref(const ArenaLayout& W, void* base, const Quant4Pieces& p) const;
    // The base weight [OUT,IN] of module m of layer l: the stored one, or a 4-bit one dequantized into wq
    // (again for every use: forward, recompute and backward).
    const Act* base_weight(int l, int m) {
        const LayerWeights<B>& w = layers[size_t(l)];
        if (w.w[m]) return w.w[m];
        B::dequantize_4bit(wq, w.q[m], w.q_first[m], int64_t(d.out_of(m)) * d.in_of(m));
        return wq;
    }

    // out[T,OUT] = inp[T,IN] W^T + b (+ scaling * drop(inp) A^T B^T) for module m of layer l. A row range (an
    // MLP chunk): inp and out point at row r0, rows rows; the LoRA tmp is at row r0 (never with dropout).
    void project(int l, int m, Act* out, const Act* inp, bool train, int r0 = 0, int rows = -1) {
        const LayerWeights<B>& w = layers[size_t(l)];
        const int T = rows < 0 ? step.T : rows, IN = d.in_of(m), OUT = d.out_of(m);
        if (d.fp8) {
            fp8_input(inp, T, IN);
            const Fp8Ref f = fp8_weight(l, m);
            B::fp8_matmul(out, f8_codes, f8_scales, f.codes, f.scales, w.b[m], T, IN, OUT, 0.0f, f8_tail);
        } else {
            B::matmul_forward(out, inp, base_weight(l, m), w.b[m], T, IN, OUT);
        }
        if (!lora_rows.empty()) {
            if (train || r0 != 0 || T != step.T) throw_internal("decoder: per-row adapters are for inference steps only");
            for (const LoraRows& g : lora_rows) {
                if (!g.table || g.rows == 0) continue;
                const LoraRef<B>& r = (*g.table)[size_t(l)][size_t(m)];
                if (!r.a) continue;
                B::lora_forward(out + int64_t(g.r0) * OUT, acts[size_t(l)].lora_tmp[m] + int64_t(g.r0) * d.R,
                                inp + int64_t(g.r0) * IN, r.a, r.b, g.scaling, g.rows, IN, OUT, g.R);
            }
            return;
        }
        const LoraRef<B>& r = lora[size_t(l)][size_t(m)];
        if (!r.a) return;
        const Act* lin = inp;
        if (train && dropout > 0) {
            B::dropout_forward(xd, inp, step.seed, l, r.drop, int64_t(T) * IN, dropout);  // xd [T,IN]
            lin = xd;
        }
        B::lora_forward(out, tmp_rows(l, m, r0), lin, r.a, r.b, lora_scaling, T, IN, OUT, d.R);
    }
    Act* tmp_rows(int l, int m, int r0) { return acts[size_t(l)].lora_tmp[m] + int64_t(r0) * d.R; }

    // FP8: the weight of module m of layer l for the forward GEMM: the stored one, or a 4-bit one dequantized
    // straight to FP8 into f8_w (again for every use, as base_weight does in bf16).
    Fp8Ref fp8_weight(int l, int m) {
        const LayerWeights<B>& w = layers[size_t(l)];
        if (w.f8[m].codes) return w.f8[m];
        B::dequantize_4bit_fp8(f8_w, f8_w_scales, w.q[m], w.q_first[m], d.out_of(m), d.in_of(m), false);
        return Fp8Ref{f8_w, f8_w_scales, d.out_of(m), d.in_of(m)};
    }
    // FP8: inp[rows,K] quantized into f8_codes / f8_scales, unless an open SharedInput scope holds it already.
    void fp8_input(const Act* inp, int rows, int K) {
        if ((f8_share || f8_produced) && f8_held == inp && f8_held_rows == rows && f8_held_k == K) {
            f8_produced = false;
            return;
        }
        B::quantize_fp8_rows(f8_codes, f8_scales, inp, rows, K);
        f8_ready[0] = {};
        f8_produced = false;
        f8_held = f8_share ? inp : nullptr;
        f8_held_rows = rows;
        f8_held_k = K;
    }
    // FP8: nothing quantized is known to be held (at the start of a forward or a backward).
    void forget_fp8_codes() {
        f8_held = nullptr;
        f8_produced = false;
        f8_ready[0] = f8_ready[1] = {};
    }
    // FP8: the codes of dout [rows, *] when the activation's backward made them (f8_ready; taken once).
    bool take_fp8_ready(const Act* dout, int rows, int k, const uint8_t*& codes, const float*& scales) {
        for (Fp8Ready& r : f8_ready)
            if (r.of && r.of == dout && r.rows == rows && r.k == k) {
                codes = r.codes;
                scales = r.scales;
                r = {};
                return true;
            }
        return false;
    }
    // While alive, projections of the same input (q/k/v of ln1, gate/up of ln2) quantize it once (FP8).
    struct SharedInput {
        Decoder& dec;
        explicit SharedInput(Decoder& x) : dec(x) {
            dec.f8_share = true;
            if (!dec.f8_produced) dec.f8_held = nullptr;  // a norm's codes for these projections stay
        }
        ~SharedInput() {
            dec.f8_share = false;
            dec.f8_held = nullptr;
        }
        SharedInput(const SharedInput&) = delete;
        SharedInput& operator=(const SharedInput&) = delete;
    };

    // The resident transposes of the FP8 weights (PlanOptions::fp8_transposed), once the weights are loaded:
    // the same fp8_transpose project_backward runs otherwise (exact), so either way gives the same bits.
    void transpose_fp8_weights() {
        for (const LayerWeights<B>& w : layers)
            for (int m = 0; m < kNumModules; ++m)
                if (w.f8t[m].codes)
                    B::fp8_transpose(const_cast<uint8_t*>(w.f8t[m].codes), const_cast<float*>(w.f8t[m].scales),
                                     w.f8[m].codes, w.f8[m].scales, d.out_of(m), d.in_of(m));
    }

    // dinp[T,IN] += d(out)/d(inp) applied to dout[T,OUT]; LoRA grads += (grad_scale is already inside dout).
    // With dropout the dropped input is recomputed from inp (same hash, same values as forward).
    void project_backward(int l, int m, Act* dinp, const Act* dout, const Act* inp, int r0 = 0, int rows = -1) {
        const int T = rows < 0 ? step.T : rows, IN = d.in_of(m), OUT = d.out_of(m);
        if (d.fp8) {  // dinp += dout @ W as an FP8 GEMM against W transposed (FP8 GEMMs are TN only)
            const Fp8Ref& f = layers[size_t(l)].f8[m];
            const Fp8Ref& ft = layers[size_t(l)].f8t[m];
            f8_held = nullptr;
            f8_produced = false;
            const uint8_t* xc = f8_codes;
            const float* xs = f8_scales;
            if (!take_fp8_ready(dout, T, OUT, xc, xs)) {
                B::quantize_fp8_grad_rows(f8_codes, f8_scales, dout, T, OUT);
                f8_ready[0] = {};
            }
            if (ft.codes) {  // resident (made once at load: transpose_fp8_weights)
                B::fp8_matmul(dinp, xc, xs, ft.codes, ft.scales, nullptr, T, OUT, IN, 1.0f, f8_tail);
            } else {
                if (f.codes)
                    B::fp8_transpose(f8_wt, f8_wt_scales, f.codes, f.scales, OUT, IN);
                else  // 4-bit: dequantized straight into the transposed layout
                    B::dequantize_4bit_fp8(f8_wt, f8_wt_scales, layers[size_t(l)].q[m], layers[size_t(l)].q_first[m],
                                           OUT, IN, true);
                B::fp8_matmul(dinp, xc, xs, f8_wt, f8_wt_scales, nullptr, T, OUT, IN, 1.0f, f8_tail);
            }
        } else {
            B::matmul_backward(dinp, nullptr, nullptr, dout, inp, base_weight(l, m), T, IN, OUT);
        }
        const LoraRef<B>& r = lora[size_t(l)][size_t(m)];
        if (!r.a) return;
        const Act* tmp = tmp_rows(l, m, r0);
        if (dropout > 0) {
            const int64_t n = int64_t(T) * IN;
            B::dropout_forward(xd, inp, step.seed, l, r.drop, n, dropout);
            B::zero(d_drop, n);
            B::lora_backward(d_drop, r.grad_a, r.grad_b, d_tmp, dout, xd, tmp, r.a, r.b, lora_scaling, T, IN, OUT,
                             d.R);
            B::dropout_backward(dinp, d_drop, step.seed, l, r.drop, n, dropout);
        } else {
            B::lora_backward(dinp, r.grad_a, r.grad_b, d_tmp, dout, inp, tmp, r.a, r.b, lora_scaling, T, IN, OUT, d.R);
        }
    }

    // Recompute: only the LoRA tmp of module m (tmp = drop(inp) @ A^T), without the projection itself
    // (lora_tmp_forward is lora_forward's first GEMM, so the same values).
    void lora_tmp_forward(int l, int m, const Act* inp, int r0 = 0, int rows = -1) {
        const LoraRef<B>& r = lora[size_t(l)][size_t(m)];
        if (!r.a) return;
        const int T = rows < 0 ? step.T : rows, IN = d.in_of(m);
        const Act* lin = inp;
        if (dropout > 0) {
            B::dropout_forward(xd, inp, step.seed, l, r.drop, int64_t(T) * IN, dropout);
            lin = xd;
        }
        B::lora_tmp_forward(tmp_rows(l, m, r0), lin, r.a, T, IN, d.R);
    }

    // The block's norm (weights of (1 + w) for Gemma) and gated activation.
    void norm(Act* out, float* rstd, const Act* inp, const Act* w, int rows, int width) {
        B::rmsnorm_forward(out, rstd, inp, w, rows, width, d.eps, d.norm_offset);
        forget_fp8_codes_of(out);
    }
    // FP8: a is written again, so codes of its old values are no longer its (held input or ready gradient).
    void forget_fp8_codes_of(const Act* a) {
        if (a == f8_held) {
            f8_held = nullptr;
            f8_produced = false;
        }
        for (Fp8Ready& r : f8_ready)
            if (r.of == a) r = {};
    }
    // A block norm (width C) whose output the next FP8 GEMMs take whole (q/k/v of ln1, gate/up of an unchunked
    // ln2): FP8 models quantize it in the same pass (f8_produced), as activation_for_down does for down_proj.
    // With residual and b: residual = a + b first (residual_rmsnorm_forward), else the norm of a.
    void norm_for_projections(Act* residual, Act* out, float* rstd, const Act* a, const Act* b, const Act* w,
                              int rows) {
        if (!d.fp8) {
            if (residual)
                B::residual_rmsnorm_forward(residual, out, rstd, a, b, w, rows, d.C, d.eps, d.norm_offset);
            else
                norm(out, rstd, a, w, rows, d.C);
            return;
        }
        B::rmsnorm_forward_fp8(residual, out, f8_codes, f8_scales, rstd, a, b, w, rows, d.C, d.eps, d.norm_offset);
        f8_ready[0] = {};
        f8_held = out;
        f8_held_rows = rows;
        f8_held_k = d.C;
        f8_produced = true;
    }
    void norm_backward(Act* dinp, const Act* dout, const Act* inp, const Act* w, const float* rstd, int rows,
                       int width) {
        B::rmsnorm_backward(dinp, nullptr, dout, inp, w, rstd, rows, width, d.norm_offset);
        forget_fp8_codes_of(dinp);
    }
    // A block norm's backward (width C, every row) whose updated dinp, the residual stream's gradient, is the next
    // FP8 GEMM's output gradient (o_proj's after ln2's backward, the layer below's down_proj's after ln1's or the
    // final norm's): FP8 models quantize it in the same pass, into f8_codes (slot 0: the very next GEMM's) or into
    // f8_codes2 (slot 1: across the recompute between two layers' backward), handed over as f8_ready[slot].
    void norm_backward_for_projection(Act* dinp, const Act* dout, const Act* inp, const Act* w, const float* rstd,
                                      int slot) {
        const int rows = step.T;
        if (!d.fp8) return norm_backward(dinp, dout, inp, w, rstd, rows, d.C);
        uint8_t* codes = slot == 0 ? f8_codes : f8_codes2;
        float* scales = slot == 0 ? f8_scales : f8_scales2;
        B::rmsnorm_backward_fp8(dinp, codes, scales, dout, inp, w, rstd, rows, d.C, d.norm_offset);
        if (slot == 0) {  // f8_codes holds these now
            f8_held = nullptr;
            f8_produced = false;
        }
        f8_ready[slot] = {dinp, codes, scales, rows, d.C};
    }
    // Whether the layer below l (l - 1; l == d.L: the last layer) takes the residual gradient whole as down_proj's
    // output gradient right after (so slot 1 may hold it: an unchunked dense MLP without sandwich norms, whose
    // rows fit up's gradient piece).
    bool down_takes_residual_grad(int l) const {
        return l > 0 && !block_chunked && !mlp_chunked() && !d.sandwich && !d.is_moe(l - 1) &&
               fp8_padded(d.C) <= fp8_padded(d.F);
    }
    void activation(Act* out, const Act* gate, const Act* up, int rows = -1) {
        if (d.gelu)
            B::geglu_forward(out, gate, up, rows < 0 ? step.T : rows, d.F);
        else
            B::swiglu_forward(out, gate, up, rows < 0 ? step.T : rows, d.F);
    }
    // The activation feeding down_proj in forward: FP8 models quantize it in the same pass, for down's GEMM.
    void activation_for_down(Act* out, const Act* gate, const Act* up, int rows) {
        if (!d.fp8) return activation(out, gate, up, rows);
        B::activation_forward_fp8(out, f8_codes, f8_scales, gate, up, rows, d.F, d.gelu);
        f8_ready[0] = {};
        f8_held = out;
        f8_held_rows = rows;
        f8_held_k = d.F;
        f8_produced = true;
    }
    // The activation's gradients; FP8 models also quantize both for gate's and up's input-gradient GEMMs (f8_ready).
    void activation_backward(Act* dgate, Act* dup, const Act* dact, const Act* gate, const Act* up, int rows) {
        if (d.fp8) {
            B::activation_backward_fp8(dgate, dup, f8_codes, f8_scales, f8_codes2, f8_scales2, dact, gate, up, rows,
                                       d.F, d.gelu);
            f8_held = nullptr;
            f8_produced = false;
            f8_ready[0] = {dgate, f8_codes, f8_scales, rows, d.F};
            f8_ready[1] = {dup, f8_codes2, f8_scales2, rows, d.F};
            return;
        }
        if (d.gelu)
            B::geglu_backward(dgate, dup, dact, gate, up, rows, d.F);
        else
            B::swiglu_backward(dgate, dup, dact, gate, up, rows, d.F);
    }
    const typename B::RopeTable& rope_of(int l) const {
        return rope_local && d.local_rope[size_t(l)] ? *rope_local : *rope;
    }

    // From a.ln1 (already computed) to a.mid = x + o_proj(attention) (sandwich: x + norm(o_proj(...))) and
    // a.ln2 = rmsnorm(mid). A chunked block (block_chunked) stops after attention: ln1 and q / k / v chunk by
    // chunk from x here; o_proj, mid and ln2 chunk by chunk with the MLP (block_chunks_forward).
    void attention_block_forward(int l, bool train) {
        LayerActs<B>& a = acts[size_t(l)];
        const LayerWeights<B>& w = layers[size_t(l)];
        const int T = step.T;
        if (block_chunked) {
            for (int r0 = 0; r0 < T; r0 += mlp_rows) {
                const int n = std::min(mlp_rows, T - r0);
                norm_for_projections(nullptr, a.ln1, a.ln1_rstd, a.x + int64_t(r0) * d.C, nullptr, w.ln1, n);
                SharedInput once(*this);
                project(l, kQ, (d.qk_norm ? a.q : a.qr) + int64_t(r0) * d.Q, a.ln1, train, r0, n);
                project(l, kK, (d.qk_norm ? a.k : a.kr) + int64_t(r0) * d.KV, a.ln1, train, r0, n);
                project(l, kV, a.v + int64_t(r0) * d.KV, a.ln1, train, r0, n);
            }
        } else {
            SharedInput once(*this);
            project(l, kQ, d.qk_norm ? a.q : a.qr, a.ln1, train);
            project(l, kK, d.qk_norm ? a.k : a.kr, a.ln1, train);
            project(l, kV, a.v, a.ln1, train);
        }
        if (d.qk_norm) {
            norm(a.qr, a.q_rstd, a.q, w.q_norm, T * d.Hq, d.D);
            norm(a.kr, a.k_rstd, a.k, w.k_norm, T * d.Hkv, d.D);
        }
        B::rope_forward(a.qr, a.qr, step.positions, rope_of(l), T, d.Hq, d.D);
        B::rope_forward(a.kr, a.kr, step.positions, rope_of(l), T, d.Hkv, d.D);
        rt->attention_forward(l, a, step);
        if (block_chunked) return;
        Act* o = d.sandwich ? a.attn_out : d_ln;  // [T,C] (d_ln: scratch)
        project(l, kO, o, a.att, train);
        if (d.sandwich) {
            norm(d_ln, a.attn_out_rstd, a.attn_out, w.attn_out_norm, T, d.C);
            o = d_ln;
        }
        if (!mlp_chunked() && !d.is_moe(l)) {  // gate / up take ln2 whole next
            norm_for_projections(a.mid, a.ln2, a.ln2_rstd, a.x, o, w.ln2, T);
        } else {
            B::residual_rmsnorm_forward(a.mid, a.ln2, a.ln2_rstd, a.x, o, w.ln2, T, d.C, d.eps, d.norm_offset);
            forget_fp8_codes_of(a.ln2);
        }
    }

    // gate/up from a.ln2; with tail, also act, down and the residual: the next layer's x and ln1 (the last
    // layer: x_final and lnf).
    // The MLP runs over chunks of mlp_rows rows when the batch has more (plan.h kMlpChunkRows): gate / up / act
    // then hold one chunk; with one chunk this is the plain sequence gate, up, act, down.
    bool mlp_chunked() const { return step.T > mlp_rows; }
    void mlp_block_forward(int l, bool train, bool tail) {
        LayerActs<B>& a = acts[size_t(l)];
        const int T = step.T;
        if (block_chunked) {  // recompute_layer never asks a chunked block for gate / up alone
            block_chunks_forward(l, train);
            return;
        }
        if (d.is_moe(l)) {  // recompute_layer: everything backward reads; forward: then the weighted sum
            moe_forward(l, tail);
            if (!tail) return;
            B::moe_unpermute(d_ln, a.ys, a.route_w, a.inv, T, d.topk, d.C);
            residual_tail(l, d_ln);
            return;
        }
        if (!tail) {  // recompute_layer: gate / up (and their LoRA tmps) of an unchunked MLP
            SharedInput once(*this);
            project(l, kGate, a.gate, a.ln2, train);
            project(l, kUp, a.up, a.ln2, train);
            return;
        }
        const bool offload = train && mlp_offloaded_at(l);  // its gate / up: a slot, then host memory
        if (offload) rt->wait_mlp_slot(l);
        Act* act = d_big3;                        // [rows,F] scratch
        Act* o = d.sandwich ? a.mlp_out : d_ln;  // [T,C] (d_ln: scratch)
        for (int r0 = 0; r0 < T; r0 += mlp_rows) {
            const int n = std::min(mlp_rows, T - r0);
            const Act* in = a.ln2 + int64_t(r0) * d.C;
            {
                SharedInput once(*this);
                project(l, kGate, a.gate, in, train, r0, n);
                project(l, kUp, a.up, in, train, r0, n);
            }
            if (offload) rt->offload_mlp(l);  // the copy reads gate / up beside the activation (one chunk: plan.h)
            activation_for_down(act, a.gate, a.up, n);
            project(l, kDown, o + int64_t(r0) * d.C, act, train, r0, n);
        }
        if (d.sandwich) {
            norm(d_ln, a.mlp_out_rstd, a.mlp_out, layers[size_t(l)].mlp_out_norm, T, d.C);
            o = d_ln;
        }
        residual_tail(l, o);
    }

    // A chunked block's o_proj of rows [r0, r0 + n) of the attention output (its LoRA tmp rows too), added to
    // the block input's rows: mid and ln2 of the chunk.
    void post_attention_chunk(int l, bool train, int r0, int n) {
        LayerActs<B>& a = acts[size_t(l)];
        project(l, kO, d_ln, a.att + int64_t(r0) * d.Q, train, r0, n);  // d_ln: [n,C] scratch
        norm_for_projections(a.mid, a.ln2, a.ln2_rstd, a.x + int64_t(r0) * d.C, d_ln, layers[size_t(l)].ln2, n);
    }
    // A chunked block after attention, chunk by chunk: mid and ln2, gate / up / act / down, and the residual: the
    // next layer's x rows (its ln1 is made again from them, chunk by chunk), the last layer's x_final and lnf rows.
    void block_chunks_forward(int l, bool train) {
        LayerActs<B>& a = acts[size_t(l)];
        const int T = step.T;
        for (int r0 = 0; r0 < T; r0 += mlp_rows) {
            const int n = std::min(mlp_rows, T - r0);
            post_attention_chunk(l, train, r0, n);
            {
                SharedInput once(*this);
                project(l, kGate, a.gate, a.ln2, train, r0, n);
                project(l, kUp, a.up, a.ln2, train, r0, n);
            }
            activation_for_down(d_big3, a.gate, a.up, n);
            project(l, kDown, d_ln, d_big3, train, r0, n);
            residual_tail(l, d_ln, r0, n);
        }
    }

    // The MLP's output o [rows,C] added to mid and normed: rows [r0, r0 + rows) of the next layer's x and ln1 (the
    // last: x_final, lnf). mid holds those rows (a chunked block's: one chunk); so does a chunked block's next ln1,
    // which is written and not read (the next layer norms its x rows again, chunk by chunk).
    void residual_tail(int l, const Act* o, int r0 = 0, int rows = -1) {
        LayerActs<B>& a = acts[size_t(l)];
        const int n = rows < 0 ? step.T : rows;
        const int64_t rc = int64_t(r0) * d.C;
        const bool last = l + 1 == d.L;
        LayerActs<B>* next = last ? nullptr : &acts[size_t(l) + 1];
        if (!last && !block_chunked && r0 == 0 && n == step.T) {  // the next layer's q / k / v take its ln1 whole
            norm_for_projections(next->x, next->ln1, next->ln1_rstd, a.mid, o, layers[size_t(l) + 1].ln1, n);
            return;
        }
        B::residual_rmsnorm_forward(last ? x_final + rc : next->x + rc, last ? lnf + rc : next->ln1,
                                    last ? lnf_rstd + r0 : next->ln1_rstd, a.mid, o,
                                    last ? norm_f : layers[size_t(l) + 1].ln1, n, d.C, d.eps, d.norm_offset);
        forget_fp8_codes_of(last ? lnf + rc : next->ln1);
    }

    // ---- Mixture of experts (layers with d.is_moe(l); kernels/cpu/moe.h). The router's softmax / top-k, one
    // stable sort of the token->expert assignments with one count (each expert's first row, on the device),
    // the ln2 rows permuted to expert order, grouped GEMMs over the experts' row ranges (gate, up, SwiGLU,
    // down; LoRA per expert as PEFT's target_parameters), and the weighted sum back to token order. No expert
    // count ever reaches the host.
    // Expert e's base weight of slot m is w[m] + e * expert_stride(m); its LoRA A_e at a + e*R*IN and B_e at
    // b + e*OUT*R where OUT is the whole parameter's (gate_up: 2Fe): lora_table.h.
    int64_t expert_stride(int m) const { return m == kDown ? int64_t(d.C) * d.Fe : 2 * int64_t(d.Fe) * d.C; }
    int expert_in(int m) const { return m == kDown ? d.Fe : d.C; }
    int expert_out(int m) const { return m == kDown ? d.C : d.Fe; }
    int64_t expert_b_stride(int m) const { return int64_t(m == kDown ? d.C : 2 * d.Fe) * d.R; }
    int64_t expert_bias_stride(int m) const { return m == kDown ? d.C : 2 * int64_t(d.Fe); }  // biased experts

    // Expert 0's base weight of slot m of layer l: the stored one, or (Dims::mxfp4) its parameter dequantized
    // into wx (gate_up once for the gate and the up slots; again only when wx holds another parameter).
    // NF4 experts (QLoRA) the same way through dequantize_4bit.
    const Act* expert_weight(int l, int m) {
        const LayerWeights<B>& w = layers[size_t(l)];
        if (w.w[m]) return w.w[m];
        const int p = m == kDown ? 1 : 0;
        if (wx_layer != l || wx_param != p) {
            const int rows = p == 0 ? 2 * d.Fe : d.C, cols = p == 0 ? d.C : d.Fe;
            if (d.mxfp4)
                B::dequantize_mxfp4(wx, w.mx_codes[p], w.mx_scales[p], d.E, rows, cols,
                                    p == 0 && d.moe_spec.interleaved);
            else
                B::dequantize_4bit(wx, w.q[m], 0, int64_t(d.E) * rows * cols);
            wx_layer = l;
            wx_param = p;
        }
        return m == kUp ? wx + int64_t(d.Fe) * d.C : wx;
    }

    // The experts' activation on act [N,Fe] from gate / up: SwiGLU, or gpt-oss's clamped SwiGLU.
    void expert_activation(Act* act, const Act* gate, const Act* up, int N);
    void expert_activation_backward(Act* dgate, Act* dup, const Act* dact, const Act* gate, const Act* up, int N);
    // The loop ablation: the layer's offsets to the host (the runtime's sync), then f(e, first row, rows) per expert
    // with rows.
    void read_loop_offsets(const LayerActs<B>& a);
    template <class F>
    void each_loop_expert(F f) const;
    // out[N,OUT] = inp[N,IN] W_e^T + scaling * (inp A_e^T) B_e^T over each expert's rows (LoRA tmp [N,R] kept).
    void expert_project(int l, int m, Act* out, const Act* inp);
    bool shares_gate_tmp(int l, int m) const;
    // Gate's and up's backward together (dxs[N,C] += both input gradients): their shared lora_A takes the sum of
    // the two tmp gradients in one weight-gradient GEMM and one input-gradient GEMM instead of two each.
    void expert_gate_up_backward(int l, Act* dxs, const Act* dgate, const Act* dup, const Act* xs);
    // dinp[N,IN] += d(out)/d(inp) dout; the experts' LoRA grads accumulate.
    void expert_project_backward(int l, int m, Act* dinp, const Act* dout, const Act* inp);
    // From a.ln2: the routing, the permuted input, gate / up (+ LoRA tmps), and the experts' outputs a.ys. stats:
    // the load-balancing loss counts this layer (the forward; a recompute does not count it again).
    void moe_forward(int l, bool stats);
    // d_res: gradient of the layer's output on entry, of mid on exit (as mlp_block_backward).
    void moe_backward(int l);

    // Embedding .. final norm. train: LoRA dropout on, and block inputs offloaded under an offloading policy
    // (evaluation never reads them back: no copies).
    void forward(bool train) {
        const int T = step.T;
        wx_layer = wx_param = -1;
        forget_fp8_codes();
        const bool offload = train && nb > 0;
        LayerActs<B>& a0 = acts[0];
        B::embedding_forward(a0.x, step.tokens, embed, T, d.C, d.V);
        if (embed_scale != 1.0f) B::scale(a0.x, embed_scale, int64_t(T) * d.C);
        if (offload) rt->offload_input(0);
        if (!block_chunked)  // else chunk by chunk
            norm_for_projections(nullptr, a0.ln1, a0.ln1_rstd, a0.x, nullptr, layers[0].ln1, T);
        for (int l = 0; l < d.L; ++l) {
            rt->before_layer();
            const int span = rt->span_begin("forward", l);
            attention_block_forward(l, train);  // (a chunked block reads layer l's input again in its tail)
            const bool next = l + 1 < d.L;
            if (offload && next) rt->wait_offloaded(l + 1);  // the tail writes layer l+1's input into its buffer
            mlp_block_forward(l, train, true);
            rt->span_end(span);
            if (offload && next) rt->offload_input(l + 1);
        }
    }

    // Layer l's forward again, only as far as the policy dropped buffers (into the shared set; kept buffers
    // are not produced again): the attention sub-block from x when any of its outputs was dropped (else only
    // the post-attention norm from the kept mid, when dropped), the MLP's gate/up when dropped, and the down
    // projection's LoRA tmp (its output backward does not need). Recompute and smart drop everything but the
    // block input: the whole forward of the layer but the down projection.
    bool dropped_at(int l, Buf b) const;
    bool mlp_offloaded_at(int l) const { return !mlp_offload_index.empty() && mlp_offload_index[size_t(l)] >= 0; }
    bool dropped_any(int l, std::initializer_list<Buf> bufs) const;
    void recompute_layer(int l);
    // d_res: gradient of this layer's output on entry, of mid on exit.
    void mlp_block_backward(int l);
    // One MLP chunk's backward (gate / up / act again, down's, the activation's, gate's and up's into dln).
    void mlp_chunk_backward(int l, const Act* in, const Act* dout, Act* dln, int r0, int n);
    // block_chunked: the MLP's and o_proj's backward chunk by chunk (d_res: the output's gradient on entry, mid's on
    // exit; d_att: the attention output's).
    void block_chunks_backward(int l);
    // d_res: gradient of mid on entry, of the layer input x on exit.
    void attention_block_backward(int l);
    // From d_lnf (written by the loss, grad_scale inside) through every layer; LoRA grads accumulate.
    void backward();

    // Row losses [T] and their sum into loss_sum[0]; dhidden (d_lnf, or nullptr for evaluation) scaled by
    // the batch's grad_scale.
    void loss(Act* dhidden) {
        B::lm_head_cross_entropy(dhidden, losses, lnf, head, step.targets, step.T, d.C, d.V, step.grad_scale, d.K,
                                 ce_ws, d.final_softcap);
        B::sum(loss_sum, losses, step.T, false);
        // MoE with output_router_logits: + coef * the load-balancing loss (per micro-batch, as transformers adds it
        // to its mean), and the probabilities' gradient the routers' backward adds. Training: it also adds the
        // batch's loss to the step's sum loss_sum[1] (the CUDA runtime then does not).
        if (aux_stats)
            B::moe_aux_loss(aux_dense, loss_sum, aux_stats, step.cu_seqlens + step.S, step.label_count, step.grad_scale,
                            d.E, d.moe_layers, d.aux_coef, dhidden != nullptr);
    }
};

}  // namespace tandem

#include "model/decoder_backward.h"  // the recompute and backward members of Decoder<B>
#include "model/decoder_bind.h"      // Decoder<B>::bind
#include "model/decoder_moe.h"       // the mixture-of-experts members of Decoder<B>
