// SPDX-FileCopyrightText: 2026 The Tandem developers
// SPDX-License-Identifier: GPL-3.0-or-later
// The recompute and backward members of tandem::Decoder<B> (model/decoder.h, which declares them and includes
// this file at its end): which buffers a checkpointing policy dropped, a layer's forward again as far as they were
// dropped, the MLP and attention sub-blocks' backward, and the backward through every layer (reloading offloaded
// block inputs and MLP buffers, handing each layer's finished LoRA gradients to the runtime). Written once for every backend.
#pragma once

#include "model/decoder.h"

namespace tandem {

// Layer l's forward again, only as far as the policy dropped buffers (into the shared set; kept buffers
// are not produced again): the attention sub-block from x when any of its outputs was dropped (else only
// the post-attention norm from the kept mid, when dropped), the MLP's gate/up when dropped, and the down
// projection's LoRA tmp (its output backward does not need). Recompute and smart drop everything but the
// block input: the whole forward of the layer but the down projection.
template <class B>
bool Decoder<B>::dropped_at(int l, Buf b) const {
    return dropped[size_t(b)] && !((l < mlp_kept_layers || mlp_offloaded_at(l)) && buffer_decl(b).mlp);
}

template <class B>
bool Decoder<B>::dropped_any(int l, std::initializer_list<Buf> bufs) const {
    for (Buf b : bufs)
        if (dropped_at(l, b)) return true;
    return false;
}

template <class B>
void Decoder<B>::recompute_layer(int l) {
    LayerActs<B>& a = acts[size_t(l)];
    if (block_chunked) {  // ln1 and q / k / v chunk by chunk, attention; the rest chunk by chunk in backward
        attention_block_forward(l, true);
        return;
    }
    const bool attention = dropped_any(l, {Buf::Q, Buf::K, Buf::QRstd, Buf::KRstd, Buf::Qr, Buf::Kr, Buf::V,
                                        Buf::Att, Buf::Stats, Buf::Mid, Buf::TmpAttn}) ||
                           (d.sandwich && dropped_any(l, {Buf::AttnOut, Buf::AttnOutRstd}));
    if (attention)  // q / k / v take ln1 next
        norm_for_projections(nullptr, a.ln1, a.ln1_rstd, a.x, nullptr, layers[size_t(l)].ln1, step.T);
    else if (dropped_any(l, {Buf::Ln1, Buf::Ln1Rstd}))
        norm(a.ln1, a.ln1_rstd, a.x, layers[size_t(l)].ln1, step.T, d.C);
    if (attention)
        attention_block_forward(l, true);
    else if (dropped_any(l, {Buf::Ln2, Buf::Ln2Rstd}))
        norm(a.ln2, a.ln2_rstd, a.mid, layers[size_t(l)].ln2, step.T, d.C);
    if (mlp_chunked()) return;  // mlp_block_backward recomputes the MLP chunk by chunk
    if (d.is_moe(l)) {  // routing, permuted input, gate / up, the experts' outputs and every LoRA tmp
        if (dropped_any(l, {Buf::Gate, Buf::Up, Buf::TmpMlp, Buf::Route, Buf::Xs, Buf::Ys}))
            mlp_block_forward(l, true, false);
        return;
    }
    if (dropped_any(l, {Buf::Gate, Buf::Up, Buf::TmpMlp})) mlp_block_forward(l, true, false);
    const bool tail = d.sandwich && dropped_any(l, {Buf::MlpOut, Buf::MlpOutRstd});
    if (tail || (lora[size_t(l)][kDown].a && dropped_at(l, Buf::TmpMlp))) {
        Act* act = d_big3;  // [T,F] scratch (mlp_block_backward recomputes it again: one cheap pass)
        activation(act, a.gate, a.up);
        if (tail) {  // down_proj (and its LoRA tmp) and the output norm's statistics, not the residual
            project(l, kDown, a.mlp_out, act, true);
            norm(d_ln, a.mlp_out_rstd, a.mlp_out, layers[size_t(l)].mlp_out_norm, step.T, d.C);
        } else {
            lora_tmp_forward(l, kDown, act);
        }
    }
}

// One MLP chunk's backward, rows [r0, r0 + n): gate / up (and their LoRA tmps) again from in (ln2's rows), the
// activation and down's LoRA tmp, down's backward of dout, the activation's, then gate's and up's input gradients
// added into dln.
template <class B>
void Decoder<B>::mlp_chunk_backward(int l, const Act* in, const Act* dout, Act* dln, int r0, int n) {
    LayerActs<B>& a = acts[size_t(l)];
    {
        SharedInput once(*this);
        project(l, kGate, a.gate, in, true, r0, n);
        project(l, kUp, a.up, in, true, r0, n);
    }
    Act* act = d_big3;  // consumed by down's backward before d_big3 becomes dup
    activation(act, a.gate, a.up, n);
    lora_tmp_forward(l, kDown, act, r0, n);
    Act* dact = d_big;
    B::zero(dact, int64_t(n) * d.F);
    project_backward(l, kDown, dact, dout, act, r0, n);
    Act* dgate = d_big2;
    Act* dup = d_big3;
    activation_backward(dgate, dup, dact, a.gate, a.up, n);
    project_backward(l, kGate, dln, dgate, in, r0, n);
    project_backward(l, kUp, dln, dup, in, r0, n);
}

// d_res: gradient of this layer's output on entry, of mid on exit.
template <class B>
void Decoder<B>::mlp_block_backward(int l) {
    if (d.is_moe(l)) {
        moe_backward(l);
        return;
    }
    LayerActs<B>& a = acts[size_t(l)];
    const LayerWeights<B>& w = layers[size_t(l)];
    const int T = step.T;
    if (block_chunked) {
        block_chunks_backward(l);
        return;
    }
    if (mlp_chunked()) {
        // Chunk by chunk into d_ln's rows (no sandwich norms and no dropout here: plan.h).
        B::zero(d_ln, int64_t(T) * d.C);
        for (int r0 = 0; r0 < T; r0 += mlp_rows) {
            const int n = std::min(mlp_rows, T - r0);
            const int64_t rc = int64_t(r0) * d.C;
            mlp_chunk_backward(l, a.ln2 + rc, d_res + rc, d_ln + rc, r0, n);
        }
        norm_backward_for_projection(d_res, d_ln, a.mid, w.ln2, a.ln2_rstd, 0);  // no sandwich norms here
        return;
    }
    Act* act = d_big3;  // recomputed, consumed by down's backward before d_big3 becomes dup
    activation(act, a.gate, a.up);
    Act* dact = d_big;
    B::zero(dact, int64_t(T) * d.F);
    const Act* dmlp = d_res;  // gradient of down_proj's output
    if (d.sandwich) {
        B::zero(d_ln, int64_t(T) * d.C);
        norm_backward(d_ln, d_res, a.mlp_out, w.mlp_out_norm, a.mlp_out_rstd, T, d.C);
        dmlp = d_ln;
    }
    project_backward(l, kDown, dact, dmlp, act);
    Act* dgate = d_big2;
    Act* dup = d_big3;
    activation_backward(dgate, dup, dact, a.gate, a.up, T);
    B::zero(d_ln, int64_t(T) * d.C);
    project_backward(l, kGate, d_ln, dgate, a.ln2);
    project_backward(l, kUp, d_ln, dup, a.ln2);
    if (d.sandwich)
        norm_backward(d_res, d_ln, a.mid, w.ln2, a.ln2_rstd, T, d.C);
    else  // o_proj's output gradient, taken next (attention_block_backward)
        norm_backward_for_projection(d_res, d_ln, a.mid, w.ln2, a.ln2_rstd, 0);
}

// A chunked block's MLP and o_proj backward, chunk by chunk: o_proj again (and its LoRA tmp rows), mid and ln2,
// gate / up / act again, down's backward, the activation's, gate's and up's into d_ln, ln2's into d_res's rows
// (then mid's gradient), and o_proj's into d_att's rows. d_res: the layer output's gradient on entry, mid's on
// exit; d_att: the attention output's.
template <class B>
void Decoder<B>::block_chunks_backward(int l) {
    LayerActs<B>& a = acts[size_t(l)];
    const LayerWeights<B>& w = layers[size_t(l)];
    const int T = step.T;
    B::zero(d_att, int64_t(T) * d.Q);
    for (int r0 = 0; r0 < T; r0 += mlp_rows) {
        const int n = std::min(mlp_rows, T - r0);
        Act* dres = d_res + int64_t(r0) * d.C;
        post_attention_chunk(l, true, r0, n);
        B::zero(d_ln, int64_t(n) * d.C);
        mlp_chunk_backward(l, a.ln2, dres, d_ln, r0, n);
        norm_backward(dres, d_ln, a.mid, w.ln2, a.ln2_rstd, n, d.C);
        project_backward(l, kO, d_att + int64_t(r0) * d.Q, dres, a.att + int64_t(r0) * d.Q, r0, n);
    }
}

// d_res: gradient of mid on entry, of the layer input x on exit (a chunked block: d_att holds the attention
// output's gradient already, and ln1 is made again chunk by chunk for q / k / v's backward).
template <class B>
void Decoder<B>::attention_block_backward(int l) {
    LayerActs<B>& a = acts[size_t(l)];
    const LayerWeights<B>& w = layers[size_t(l)];
    const int T = step.T;
    Act* datt = block_chunked ? d_att : d_big;
    if (!block_chunked) {
        B::zero(datt, int64_t(T) * d.Q);
        const Act* do_ = d_res;  // gradient of o_proj's output
        if (d.sandwich) {
            B::zero(d_ln, int64_t(T) * d.C);
            norm_backward(d_ln, d_res, a.attn_out, w.attn_out_norm, a.attn_out_rstd, T, d.C);
            do_ = d_ln;
        }
        project_backward(l, kO, datt, do_, a.att);
    }
    Act* dq = d_big2;
    Act* dk = d_k;
    rt->attention_backward(l, a, dq, dk, d_v, datt, step);
    B::rope_backward(dq, dq, step.positions, rope_of(l), T, d.Hq, d.D);
    B::rope_backward(dk, dk, step.positions, rope_of(l), T, d.Hkv, d.D);
    if (d.qk_norm) {
        B::zero(d_big3, int64_t(T) * d.Q);
        norm_backward(d_big3, dq, a.q, w.q_norm, a.q_rstd, T * d.Hq, d.D);
        B::zero(d_k2, int64_t(T) * d.KV);
        norm_backward(d_k2, dk, a.k, w.k_norm, a.k_rstd, T * d.Hkv, d.D);
        dq = d_big3;
        dk = d_k2;
    }
    if (block_chunked) {
        for (int r0 = 0; r0 < T; r0 += mlp_rows) {
            const int n = std::min(mlp_rows, T - r0);
            const Act* x = a.x + int64_t(r0) * d.C;
            norm(a.ln1, a.ln1_rstd, x, w.ln1, n, d.C);
            B::zero(d_ln, int64_t(n) * d.C);
            project_backward(l, kQ, d_ln, dq + int64_t(r0) * d.Q, a.ln1, r0, n);
            project_backward(l, kK, d_ln, dk + int64_t(r0) * d.KV, a.ln1, r0, n);
            project_backward(l, kV, d_ln, d_v + int64_t(r0) * d.KV, a.ln1, r0, n);
            norm_backward(d_res + int64_t(r0) * d.C, d_ln, x, w.ln1, a.ln1_rstd, n, d.C);
        }
        return;
    }
    B::zero(d_ln, int64_t(T) * d.C);
    project_backward(l, kQ, d_ln, dq, a.ln1);
    project_backward(l, kK, d_ln, dk, a.ln1);
    project_backward(l, kV, d_ln, d_v, a.ln1);
    if (d.fp8 && down_takes_residual_grad(l))  // the layer below's down_proj takes it after its recompute
        norm_backward_for_projection(d_res, d_ln, a.x, w.ln1, a.ln1_rstd, 1);
    else
        norm_backward(d_res, d_ln, a.x, w.ln1, a.ln1_rstd, T, d.C);
}

// From d_lnf (written by the loss, grad_scale inside) through every layer; LoRA grads accumulate.
template <class B>
void Decoder<B>::backward() {
    const int T = step.T;
    wx_layer = wx_param = -1;
    forget_fp8_codes();
    B::zero(d_res, int64_t(T) * d.C);
    if (d.fp8 && down_takes_residual_grad(d.L))  // the last layer's down_proj's output gradient
        norm_backward_for_projection(d_res, d_lnf, x_final, norm_f, lnf_rstd, 1);
    else
        norm_backward(d_res, d_lnf, x_final, norm_f, lnf_rstd, T, d.C);
    for (int l = d.L - 1; l >= 0; --l) {
        if (nb > 0) {
            rt->reload_input(l - (nb - 1));  // Smart: layer l-1's input into the other buffer, during layer l
            rt->wait_reloaded(l);            // SmartSingle: this layer's, just issued: strictly serial
        }
        rt->before_layer();
        const int span = rt->span_begin("backward", l);
        if (recomputes && l + 1 < d.L) recompute_layer(l);
        const int j = mlp_offloaded_at(l) ? mlp_offload_index[size_t(l)] : -1;
        if (j >= 0) rt->wait_mlp_reloaded(l);
        mlp_block_backward(l);
        if (j >= 0) {
            rt->mlp_used(l);                                                // slot j % 2 is free
            if (j >= 2) rt->reload_mlp(mlp_offloaded[size_t(j - 2)]);  // for layer j - 2, during the layers between
        }
        attention_block_backward(l);
        rt->span_end(span);
        if (nb > 0) rt->input_used(l);  // buffer l % nb free for the reload of layer l - nb
        rt->layer_backward_done(l);
    }
}

}  // namespace tandem
