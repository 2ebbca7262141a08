// SPDX-FileCopyrightText: 2026 The Tandem developers
// SPDX-License-Identifier: GPL-3.0-or-later
// tandem::Decoder<B>::bind (model/decoder.h, which declares it and includes this file at its end): every weight,
// activation, LoRA reference and scratch buffer of the decoder pointed into the arenas a plan (model/plan.h) laid
// out, for every backend (the CPU allocates the arenas on the host, CUDA on the device).
#pragma once

#include "model/decoder.h"

namespace tandem {

// Points weights, activations and scratch into arenas laid out by `y` (allocated at the given bases).
template <class B>
void Decoder<B>::bind(const ModelPlan& y, void* weights_base, void* acts_base, void* work_base) {
    nb = offload_buffers(y.checkpointing);
    recomputes = y.recomputes;
    for (int b = 0; b < kBufCount; ++b) dropped[size_t(b)] = y.residency[size_t(b)] == Residency::Dropped;
    mlp_kept_layers = y.mlp_kept_layers;
    mlp_offloaded = y.mlp_offloaded;
    mlp_offload_index = y.mlp_offload_index;
    const ArenaLayout& W = y.weights;
    embed = W.ptr<Act>(weights_base, y.embed);
    const Act* lm_head = W.ptr<Act>(weights_base, y.lm_head);
    head = lm_head ? lm_head : embed;
    norm_f = W.ptr<Act>(weights_base, y.norm_f);
    layers.assign(size_t(d.L), {});
    for (int l = 0; l < d.L; ++l) {
        const LayerWeightHandles& h = y.lw[size_t(l)];
        LayerWeights<B>& w = layers[size_t(l)];
        w.ln1 = W.ptr<Act>(weights_base, h.ln1);
        w.ln2 = W.ptr<Act>(weights_base, h.ln2);
        w.q_norm = W.ptr<Act>(weights_base, h.q_norm);
        w.k_norm = W.ptr<Act>(weights_base, h.k_norm);
        w.attn_out_norm = W.ptr<Act>(weights_base, h.attn_out_norm);
        w.mlp_out_norm = W.ptr<Act>(weights_base, h.mlp_out_norm);
        w.router = W.ptr<Act>(weights_base, h.router);
        w.router_bias = W.ptr<Act>(weights_base, h.router_bias);
        w.sinks = W.ptr<Act>(weights_base, h.sinks);
        for (int p = 0; p < 2; ++p) {
            w.mx_codes[p] = W.ptr<uint8_t>(weights_base, h.mx_codes[p]);
            w.mx_scales[p] = W.ptr<uint8_t>(weights_base, h.mx_scales[p]);
        }
        for (int m = 0; m < kNumModules; ++m) {
            if (h.f8[m].codes >= 0) {
                const Fp8Pieces& f = h.f8[m];
                const int64_t kp = fp8_padded(f.in);
                w.w[m] = nullptr;
                w.f8[m] = Fp8Ref{W.ptr<uint8_t>(weights_base, f.codes) + f.row0 * kp,
                                 W.ptr<float>(weights_base, f.scales) + f.row0 / kFp8Block * fp8_scale_ld(f.in),
                                 d.out_of(m), d.in_of(m)};
                if (h.f8t[m].codes >= 0)
                    w.f8t[m] = Fp8Ref{W.ptr<uint8_t>(weights_base, h.f8t[m].codes),
                                      W.ptr<float>(weights_base, h.f8t[m].scales), d.in_of(m), d.out_of(m)};
            } else if (h.q[m].codes >= 0) {
                w.w[m] = nullptr;
                w.q[m] = quant4_ref(W, weights_base, h.q[m]);
                w.q_first[m] = h.w_off[m];
            } else if (h.w[m] >= 0) {
                w.w[m] = W.ptr<Act>(weights_base, h.w[m]) + h.w_off[m];  // a fused projection's rows
            } else {
                w.w[m] = nullptr;  // MXFP4 experts (Dims::mxfp4), or a slot this layer has not
            }
            w.b[m] = h.b[m] < 0 ? nullptr : W.ptr<Act>(weights_base, h.b[m]) + h.b_off[m];
        }
    }
    const ArenaLayout& A = y.acts;
    acts.assign(size_t(d.L), {});
    for (int l = 0; l < d.L; ++l) {
        const ActHandles& s = y.sets[size_t(l)];
        LayerActs<B>& a = acts[size_t(l)];
        a.x = A.ptr<Act>(acts_base, s.x);
        a.ln1 = A.ptr<Act>(acts_base, s.ln1);
        a.ln1_rstd = A.ptr<float>(acts_base, s.ln1_rstd);
        a.q = A.ptr<Act>(acts_base, s.q);
        a.k = A.ptr<Act>(acts_base, s.k);
        a.q_rstd = A.ptr<float>(acts_base, s.q_rstd);
        a.k_rstd = A.ptr<float>(acts_base, s.k_rstd);
        a.qr = A.ptr<Act>(acts_base, s.qr);
        a.kr = A.ptr<Act>(acts_base, s.kr);
        a.v = A.ptr<Act>(acts_base, s.v);
        a.att = A.ptr<Act>(acts_base, s.att);
        a.stats = A.ptr<char>(acts_base, s.stats);
        a.mid = A.ptr<Act>(acts_base, s.mid);
        a.ln2 = A.ptr<Act>(acts_base, s.ln2);
        a.ln2_rstd = A.ptr<float>(acts_base, s.ln2_rstd);
        a.gate = A.ptr<Act>(acts_base, s.gate);
        a.up = A.ptr<Act>(acts_base, s.up);
        for (int m = 0; m < kNumModules; ++m) a.lora_tmp[m] = A.ptr<Act>(acts_base, s.tmp[m]);
        a.attn_out = A.ptr<Act>(acts_base, s.attn_out);
        a.attn_out_rstd = A.ptr<float>(acts_base, s.attn_out_rstd);
        a.mlp_out = A.ptr<Act>(acts_base, s.mlp_out);
        a.mlp_out_rstd = A.ptr<float>(acts_base, s.mlp_out_rstd);
        if (char* r = A.ptr<char>(acts_base, s.route)) {
            const MoeRouteParts p = moe_route_parts(d, sizeof(Act));
            a.probs = reinterpret_cast<float*>(r + p.probs);
            a.logits = reinterpret_cast<Act*>(r + p.logits);
            a.idx = reinterpret_cast<int32_t*>(r + p.idx);
            a.route_w = reinterpret_cast<float*>(r + p.w);
            a.order = reinterpret_cast<int32_t*>(r + p.order);
            a.inv = reinterpret_cast<int32_t*>(r + p.inv);
            a.offsets = reinterpret_cast<int32_t*>(r + p.offsets);
        }
        a.xs = A.ptr<Act>(acts_base, s.xs);
        a.ys = A.ptr<Act>(acts_base, s.ys);
    }
    x_final = A.ptr<Act>(acts_base, y.x_final);
    lnf = A.ptr<Act>(acts_base, y.lnf);
    lnf_rstd = A.ptr<float>(acts_base, y.lnf_rstd);
    d_res = A.ptr<Act>(acts_base, y.d_res);
    d_ln = A.ptr<Act>(acts_base, y.d_ln);
    d_lnf = A.ptr<Act>(acts_base, y.d_lnf);
    d_big = A.ptr<Act>(acts_base, y.d_big);
    d_big2 = A.ptr<Act>(acts_base, y.d_big2);
    d_big3 = A.ptr<Act>(acts_base, y.d_big3);
    d_k = A.ptr<Act>(acts_base, y.d_k);
    d_k2 = A.ptr<Act>(acts_base, y.d_k2);
    d_v = A.ptr<Act>(acts_base, y.d_v);
    d_tmp = A.ptr<Act>(acts_base, y.d_tmp);
    xd = A.ptr<Act>(acts_base, y.xd);
    d_drop = A.ptr<Act>(acts_base, y.d_drop);
    losses = A.ptr<float>(acts_base, y.losses);
    ce_ws = y.work.ptr<char>(work_base, y.ce);
    loss_sum = y.work.ptr<double>(work_base, y.loss_sum);
    wq = y.dequant < 0 ? nullptr : y.work.ptr<Act>(work_base, y.dequant);
    wx = y.mx_dequant < 0 ? nullptr : y.work.ptr<Act>(work_base, y.mx_dequant);
    wx_layer = wx_param = -1;
    f8_codes = y.work.ptr<uint8_t>(work_base, y.fp8_act);
    f8_scales = y.work.ptr<float>(work_base, y.fp8_act_scales);
    f8_wt = y.work.ptr<uint8_t>(work_base, y.fp8_wt);
    f8_wt_scales = y.work.ptr<float>(work_base, y.fp8_wt_scales);
    f8_tail = y.work.ptr<Act>(work_base, y.fp8_tail);
    f8_codes2 = y.work.ptr<uint8_t>(work_base, y.fp8_act2);
    f8_scales2 = y.work.ptr<float>(work_base, y.fp8_act2_scales);
    f8_w = y.work.ptr<uint8_t>(work_base, y.fp8_w);
    f8_w_scales = y.work.ptr<float>(work_base, y.fp8_w_scales);
    d_xs = A.ptr<Act>(acts_base, y.d_xs);
    d_ys = A.ptr<Act>(acts_base, y.d_ys);
    d_route_w = A.ptr<float>(acts_base, y.d_route_w);
    aux_stats = y.work.ptr<float>(work_base, y.moe_aux);
    aux_dense = aux_stats ? aux_stats + 2 * d.E : nullptr;
    mlp_rows = y.mlp_rows;
    block_chunked = y.block_chunked;
    d_att = A.ptr<Act>(acts_base, y.d_att);
}

// The pointers of a 4-bit projection's pieces.
template <class B>
Quant4Ref Decoder<B>::quant4_ref(const ArenaLayout& W, void* base, const Quant4Pieces& p) const {
    Quant4Ref r;
    const float* k = W.ptr<float>(base, p.consts);
    r.codes = W.ptr<uint8_t>(base, p.codes);
    r.code = k;
    if (d.quant_nested) {
        r.absmax_q = W.ptr<uint8_t>(base, p.absmax);
        r.nested_code = k + kQuant4Codes;
        r.nested_absmax = W.ptr<float>(base, p.nested_absmax);
        r.offset = k + kQuant4Codes + kNestedCodes;
    } else {
        r.absmax = W.ptr<float>(base, p.absmax);
    }
    r.n = p.n;
    r.blocksize = d.quant_blocksize;
    return r;
}

}  // namespace tandem
