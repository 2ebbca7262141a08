// SPDX-FileCopyrightText: 2026 The Tandem developers
// SPDX-License-Identifier: GPL-3.0-or-later
// The mixture-of-experts members of tandem::Decoder<B> (model/decoder.h, which declares them and includes this
// file at its end): the experts' activation, their projections over the rows each expert was routed (grouped
// GEMMs over device offsets, or the loop ablation with the offsets read on the host), gate and up's backward with
// their shared LoRA A, and an MoE layer's forward and backward from ln2. Written once for every backend.
#pragma once

#include "model/decoder.h"

namespace tandem {

// The experts' activation on act [N,Fe] from gate / up: SwiGLU, or gpt-oss's clamped SwiGLU.
template <class B>
void Decoder<B>::expert_activation(Act* act, const Act* gate, const Act* up, int N) {
    if (d.moe_limit > 0.0f)
        B::clamped_swiglu_forward(act, gate, up, N, d.Fe, d.moe_alpha, d.moe_limit);
    else
        B::swiglu_forward(act, gate, up, N, d.Fe);
}

template <class B>
void Decoder<B>::expert_activation_backward(Act* dgate, Act* dup, const Act* dact, const Act* gate, const Act* up, int N) {
    if (d.moe_limit > 0.0f)
        B::clamped_swiglu_backward(dgate, dup, dact, gate, up, N, d.Fe, d.moe_alpha, d.moe_limit);
    else
        B::swiglu_backward(dgate, dup, dact, gate, up, N, d.Fe);
}

// The loop ablation: the layer's offsets to the host (the runtime's sync), then f(e, first row, rows) per expert
// with rows.
template <class B>
void Decoder<B>::read_loop_offsets(const LayerActs<B>& a) {
    loop_offsets.resize(size_t(d.E) + 1);
    rt->read_offsets(a.offsets, loop_offsets.data(), d.E);
}

template <class B>
template <class F>
void Decoder<B>::each_loop_expert(F f) const {
    for (int e = 0; e < d.E; ++e) {
        const int r0 = loop_offsets[size_t(e)], rows = loop_offsets[size_t(e) + 1] - r0;
        if (rows > 0) f(e, r0, rows);
    }
}

// out[N,OUT] = inp[N,IN] W_e^T + scaling * (inp A_e^T) B_e^T over each expert's rows (LoRA tmp [N,R] kept).
template <class B>
void Decoder<B>::expert_project(int l, int m, Act* out, const Act* inp) {
    const LayerActs<B>& a = acts[size_t(l)];
    const int N = step.T * d.topk, IN = expert_in(m), OUT = expert_out(m);
    if (moe_loop) {
        const LoraRef<B>& r = lora[size_t(l)][size_t(m)];
        each_loop_expert([&](int e, int r0, int rows) {
            Act* o = out + int64_t(r0) * OUT;
            const Act* x = inp + int64_t(r0) * IN;
            const Act* bias = layers[size_t(l)].b[m];
            B::matmul_forward(o, x, expert_weight(l, m) + e * expert_stride(m),
                              bias ? bias + e * expert_bias_stride(m) : nullptr, rows, IN, OUT);
            if (r.a)
                B::lora_forward(o, a.lora_tmp[m] + int64_t(r0) * d.R, x, r.a + int64_t(e) * d.R * IN,
                                r.b + e * expert_b_stride(m), lora_scaling, rows, IN, OUT, d.R);
        });
        return;
    }
    B::grouped_matmul_forward(out, inp, expert_weight(l, m), expert_stride(m), layers[size_t(l)].b[m],
                              expert_bias_stride(m), a.offsets, N, IN, OUT, d.E, 1.0f, false);
    const LoraRef<B>& r = lora[size_t(l)][size_t(m)];
    if (!r.a) return;
    // gate_up_proj's one lora_A feeds gate and up: up reuses the tmp gate computed (the same values).
    Act* tmp = a.lora_tmp[shares_gate_tmp(l, m) ? kGate : m];
    if (!shares_gate_tmp(l, m))
        B::grouped_matmul_forward(tmp, inp, r.a, int64_t(d.R) * IN, nullptr, 0, a.offsets, N, IN, d.R, d.E, 1.0f,
                                  false);
    B::grouped_matmul_forward(out, tmp, r.b, expert_b_stride(m), nullptr, 0, a.offsets, N, d.R, OUT, d.E,
                              lora_scaling, true);
}

template <class B>
bool Decoder<B>::shares_gate_tmp(int l, int m) const {
    return m == kUp && lora[size_t(l)][kUp].a && lora[size_t(l)][kUp].a == lora[size_t(l)][kGate].a;
}

// Gate's and up's backward together (dxs[N,C] += both input gradients): their shared lora_A takes the sum of
// the two tmp gradients in one weight-gradient GEMM and one input-gradient GEMM instead of two each.
template <class B>
void Decoder<B>::expert_gate_up_backward(int l, Act* dxs, const Act* dgate, const Act* dup, const Act* xs) {
    if (moe_loop || !shares_gate_tmp(l, kUp)) {
        expert_project_backward(l, kGate, dxs, dgate, xs);
        expert_project_backward(l, kUp, dxs, dup, xs);
        return;
    }
    const LayerActs<B>& a = acts[size_t(l)];
    const int N = step.T * d.topk, C = d.C, F = d.Fe;
    B::grouped_matmul_backward(dxs, dgate, expert_weight(l, kGate), expert_stride(kGate), a.offsets, N, C, F, d.E,
                               1.0f);
    B::grouped_matmul_backward(dxs, dup, expert_weight(l, kUp), expert_stride(kUp), a.offsets, N, C, F, d.E, 1.0f);
    const LoraRef<B>& g = lora[size_t(l)][kGate];
    const LoraRef<B>& u = lora[size_t(l)][kUp];
    const Act* tmp = a.lora_tmp[kGate];
    const int64_t sa = int64_t(d.R) * C, sb = expert_b_stride(kGate);
    B::zero(d_tmp, int64_t(N) * d.R);
    B::grouped_matmul_backward(d_tmp, dgate, g.b, sb, a.offsets, N, d.R, F, d.E, lora_scaling);
    B::grouped_matmul_backward(d_tmp, dup, u.b, sb, a.offsets, N, d.R, F, d.E, lora_scaling);
    B::grouped_matmul_weight_grad(g.grad_b, sb, dgate, tmp, a.offsets, N, d.R, F, d.E, lora_scaling);
    B::grouped_matmul_weight_grad(u.grad_b, sb, dup, tmp, a.offsets, N, d.R, F, d.E, lora_scaling);
    B::grouped_matmul_weight_grad(g.grad_a, sa, d_tmp, xs, a.offsets, N, C, d.R, d.E, 1.0f);
    B::grouped_matmul_backward(dxs, d_tmp, g.a, sa, a.offsets, N, C, d.R, d.E, 1.0f);
}

// dinp[N,IN] += d(out)/d(inp) dout; the experts' LoRA grads accumulate.
template <class B>
void Decoder<B>::expert_project_backward(int l, int m, Act* dinp, const Act* dout, const Act* inp) {
    const LayerActs<B>& a = acts[size_t(l)];
    const int N = step.T * d.topk, IN = expert_in(m), OUT = expert_out(m);
    if (moe_loop) {
        const LoraRef<B>& r = lora[size_t(l)][size_t(m)];
        each_loop_expert([&](int e, int r0, int rows) {
            Act* dx = dinp + int64_t(r0) * IN;
            const Act* g = dout + int64_t(r0) * OUT;
            const Act* x = inp + int64_t(r0) * IN;
            B::matmul_backward(dx, nullptr, nullptr, g, x, expert_weight(l, m) + e * expert_stride(m), rows, IN,
                               OUT);
            if (r.a)
                B::lora_backward(dx, r.grad_a + int64_t(e) * d.R * IN, r.grad_b + e * expert_b_stride(m), d_tmp, g,
                                 x, a.lora_tmp[m] + int64_t(r0) * d.R, r.a + int64_t(e) * d.R * IN,
                                 r.b + e * expert_b_stride(m), lora_scaling, rows, IN, OUT, d.R);
        });
        return;
    }
    B::grouped_matmul_backward(dinp, dout, expert_weight(l, m), expert_stride(m), a.offsets, N, IN, OUT, d.E,
                               1.0f);
    const LoraRef<B>& r = lora[size_t(l)][size_t(m)];
    if (!r.a) return;
    const Act* tmp = a.lora_tmp[m];
    const int64_t sa = int64_t(d.R) * IN, sb = expert_b_stride(m);
    B::zero(d_tmp, int64_t(N) * d.R);
    B::grouped_matmul_backward(d_tmp, dout, r.b, sb, a.offsets, N, d.R, OUT, d.E, lora_scaling);
    B::grouped_matmul_weight_grad(r.grad_b, sb, dout, tmp, a.offsets, N, d.R, OUT, d.E, lora_scaling);
    B::grouped_matmul_weight_grad(r.grad_a, sa, d_tmp, inp, a.offsets, N, IN, d.R, d.E, 1.0f);
    B::grouped_matmul_backward(dinp, d_tmp, r.a, sa, a.offsets, N, IN, d.R, d.E, 1.0f);
}

// From a.ln2: the routing, the permuted input, gate / up (+ LoRA tmps), and the experts' outputs a.ys. stats:
// the load-balancing loss counts this layer (the forward; a recompute does not count it again).
template <class B>
void Decoder<B>::moe_forward(int l, bool stats) {
    if (!lora_rows.empty()) throw_internal("decoder: per-row adapters do not reach the experts (one adapter per call)");
    LayerActs<B>& a = acts[size_t(l)];
    const int T = step.T, N = T * d.topk;
    B::matmul_forward(a.logits, a.ln2, layers[size_t(l)].router, layers[size_t(l)].router_bias, T, d.C, d.E);
    const bool given = rt->route_given(l, a.idx, step);
    B::moe_router_forward(a.idx, a.route_w, a.probs, a.logits, T, d.E, d.topk, d.moe_renorm, given);
    if (stats && aux_stats)
        B::moe_aux_stats(aux_stats, a.probs, a.idx, step.cu_seqlens + step.S, T, d.E, d.topk, l == d.first_moe);
    B::moe_sort_count(a.order, a.inv, a.offsets, a.idx, N, d.E);
    if (moe_loop) read_loop_offsets(a);
    B::moe_permute(a.xs, a.ln2, a.inv, T, d.topk, d.C);
    expert_project(l, kGate, a.gate, a.xs);
    expert_project(l, kUp, a.up, a.xs);
    Act* act = d_big3;  // [N,Fe] scratch
    expert_activation(act, a.gate, a.up, N);
    expert_project(l, kDown, a.ys, act);
}

// d_res: gradient of the layer's output on entry, of mid on exit (as mlp_block_backward).
template <class B>
void Decoder<B>::moe_backward(int l) {
    LayerActs<B>& a = acts[size_t(l)];
    const LayerWeights<B>& w = layers[size_t(l)];
    const int T = step.T, N = T * d.topk;
    if (moe_loop) read_loop_offsets(a);
    B::moe_unpermute_backward(d_ys, d_route_w, d_res, a.ys, a.route_w, a.inv, T, d.topk, d.C);
    Act* act = d_big3;  // recomputed, consumed by down's backward before d_big3 becomes dup
    expert_activation(act, a.gate, a.up, N);
    Act* dact = d_big;
    B::zero(dact, int64_t(N) * d.Fe);
    expert_project_backward(l, kDown, dact, d_ys, act);
    Act* dgate = d_big2;
    Act* dup = d_big3;
    expert_activation_backward(dgate, dup, dact, a.gate, a.up, N);
    B::zero(d_xs, int64_t(N) * d.C);
    expert_gate_up_backward(l, d_xs, dgate, dup, a.xs);
    B::zero(d_ln, int64_t(T) * d.C);
    B::moe_permute_backward(d_ln, d_xs, a.inv, T, d.topk, d.C);
    // The routing weights' gradient through the top-k and the softmax into the router logits (a.logits is
    // not read again: it takes their gradient), then into ln2.
    B::moe_router_backward(a.logits, d_route_w, a.probs, a.idx, a.route_w, T, d.E, d.topk, d.moe_renorm, aux_dense,
                           step.cu_seqlens + step.S);
    B::matmul_backward(d_ln, nullptr, nullptr, a.logits, a.ln2, w.router, T, d.C, d.E);
    norm_backward(d_res, d_ln, a.mid, w.ln2, a.ln2_rstd, T, d.C);
}

}  // namespace tandem
