// SPDX-FileCopyrightText: 2026 The Tandem developers
// SPDX-License-Identifier: GPL-3.0-or-later
// The self-test's cases for the model's GEMM-family layer ops (matmul, LoRA, lm_head + cross-entropy,
// attention, in-house and cuDNN), each against its fp32 twin in engine/kernels/cpu on fresh random inputs, and
// their generators (gen_*, registered in runner.cpp), which enumerate each op's shapes (letters: the legend in
// harness.h). The other layer ops are in op_cases.cpp. Only with TANDEM_WITH_CUDA.
// Decisions a reader must know:
//  - The grids follow op_cases.cpp's (base, one field at a time, flags, kept shapes); the kept shapes here are
//    the decode GEMVs (N <= 4) and their fallbacks, LoRA ranks that are not a multiple of 8, vocabularies of a
//    chunk's size and not. Case names keep the form "<op> [flags] <dims>".
//  - Attention's generator adds both paths (in-house and cuDNN) of the same shapes; cuDNN skips what it rejects.
#include "testing/harness.h"

#if TANDEM_WITH_CUDA
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <string>
#include <vector>

#include "kernels/cpu/attention.h"
#include "kernels/cpu/cross_entropy.h"
#include "kernels/cpu/matmul.h"
#include "kernels/cuda/attention.h"
#include "kernels/cuda/cross_entropy.h"
#include "kernels/cuda/cudnn_attention.h"
#include "kernels/cuda/matmul.h"

namespace tandem::testing {
namespace {

// ---------------------------------------------------------------------------------------------------------
// Matmul and LoRA
// ---------------------------------------------------------------------------------------------------------

void matmul_forward_case(Check& c, int N, int IN, int OUT, bool with_bias) {
    const auto inp = c.rng.bf16_values(numel(N, IN), 1.0f);
    const auto w = c.rng.bf16_values(numel(OUT, IN), fan_in_bound(IN));
    const auto bias = c.rng.bf16_values(OUT, 0.5f);
    std::vector<float> want(size_t(numel(N, OUT)));
    cpu::matmul_forward(want.data(), inp.data(), w.data(), with_bias ? bias.data() : nullptr, N, IN, OUT);
    const auto d_inp = dev_bf16(inp);
    const auto d_w = dev_bf16(w);
    const auto d_bias = dev_bf16(bias);
    const auto d_out = poisoned<bf16>(numel(N, OUT));
    cuda::matmul_forward(d_out.p(), d_inp.p(), d_w.p(), with_bias ? d_bias.p() : nullptr, N, IN, OUT);
    c.tensor("out", get(d_out), want, kTolBf16);
}

void matmul_backward_case(Check& c, int N, int IN, int OUT, bool want_dinp, bool want_dweight, bool want_dbias) {
    const auto inp = c.rng.bf16_values(numel(N, IN), 1.0f);
    const auto w = c.rng.bf16_values(numel(OUT, IN), fan_in_bound(IN));
    const auto dout = c.rng.bf16_values(numel(N, OUT), 1.0f);
    std::vector<float> inc_dinp(size_t(numel(N, IN)), 0.0f), inc_dw(size_t(numel(OUT, IN)), 0.0f),
        inc_db(size_t(OUT), 0.0f);
    auto run_cpu = [&](std::vector<float>& di, std::vector<float>& dw, std::vector<float>& db) {
        cpu::matmul_backward(want_dinp ? di.data() : nullptr, want_dweight ? dw.data() : nullptr,
                             want_dbias ? db.data() : nullptr, dout.data(), inp.data(), w.data(), N, IN, OUT);
    };
    run_cpu(inc_dinp, inc_dw, inc_db);
    const auto init_dinp = c.initial(inc_dinp, true);
    const auto init_dw = c.initial(inc_dw, false);
    const auto init_db = c.initial(inc_db, false);
    auto want_di = init_dinp, want_dw = init_dw, want_db = init_db;
    run_cpu(want_di, want_dw, want_db);

    const auto d_inp = dev_bf16(inp);
    const auto d_w = dev_bf16(w);
    const auto d_dout = dev_bf16(dout);
    const auto d_dinp = dev_bf16(init_dinp);
    const auto d_dw = dev_f32(init_dw);
    const auto d_db = dev_f32(init_db);
    cuda::matmul_backward(want_dinp ? d_dinp.p() : nullptr, want_dweight ? d_dw.p() : nullptr,
                          want_dbias ? d_db.p() : nullptr, d_dout.p(), d_inp.p(), d_w.p(), N, IN, OUT);
    if (want_dinp) c.tensor("dinp", get(d_dinp), want_di, kTolBf16, &init_dinp);
    if (want_dweight) c.tensor("dweight", get(d_dw), want_dw, kTolBf16, &init_dw);
    if (want_dbias) c.tensor("dbias", get(d_db), want_db, kTolBf16, &init_db);
}

void lora_case(Check& c, int N, int IN, int OUT, int R, float scaling) {
    const auto inp = c.rng.bf16_values(numel(N, IN), 1.0f);
    const auto A = c.rng.bf16_values(numel(R, IN), 1.0f / float(std::sqrt(double(IN))));
    const auto B = c.rng.bf16_values(numel(OUT, R), 1.0f / float(std::sqrt(double(R))));
    const auto d_inp = dev_bf16(inp);
    const auto d_A = dev_bf16(A);
    const auto d_B = dev_bf16(B);

    // forward: out accumulates, tmp is written
    std::vector<float> inc(size_t(numel(N, OUT)), 0.0f), tmp(size_t(numel(N, R)));
    cpu::lora_forward(inc.data(), tmp.data(), inp.data(), A.data(), B.data(), scaling, N, IN, OUT, R);
    const auto init = c.initial(inc, true);
    auto want = init;
    cpu::lora_forward(want.data(), tmp.data(), inp.data(), A.data(), B.data(), scaling, N, IN, OUT, R);
    const auto d_out = dev_bf16(init);
    const auto d_tmp = poisoned<bf16>(numel(N, R));
    cuda::lora_forward(d_out.p(), d_tmp.p(), d_inp.p(), d_A.p(), d_B.p(), scaling, N, IN, OUT, R);
    c.tensor("out", get(d_out), want, kTolBf16, &init);
    c.tensor("tmp", get(d_tmp), tmp, kTolBf16);
    // lora_tmp_forward is lora_forward's first GEMM alone (what a recompute runs): the same bits.
    const auto d_tmp_only = poisoned<bf16>(numel(N, R));
    cuda::lora_tmp_forward(d_tmp_only.p(), d_inp.p(), d_A.p(), N, IN, R);
    c.tensor("tmp of lora_tmp_forward = lora_forward's", get(d_tmp_only), get(d_tmp), kTolExact);

    // backward from the same (bf16) tmp on both sides
    const auto tmp16 = round_bf16(tmp);
    const auto dout = c.rng.bf16_values(numel(N, OUT), 1.0f);
    std::vector<float> inc_di(size_t(numel(N, IN)), 0.0f), inc_da(size_t(numel(R, IN)), 0.0f),
        inc_db(size_t(numel(OUT, R)), 0.0f), dtmp(size_t(numel(N, R)));
    cpu::lora_backward(inc_di.data(), inc_da.data(), inc_db.data(), dtmp.data(), dout.data(), inp.data(), tmp16.data(),
                       A.data(), B.data(), scaling, N, IN, OUT, R);
    const auto init_di = c.initial(inc_di, true);
    const auto init_da = c.initial(inc_da, false);
    const auto init_db = c.initial(inc_db, false);
    auto want_di = init_di, want_da = init_da, want_db = init_db;
    cpu::lora_backward(want_di.data(), want_da.data(), want_db.data(), dtmp.data(), dout.data(), inp.data(),
                       tmp16.data(), A.data(), B.data(), scaling, N, IN, OUT, R);
    const auto d_tmp16 = dev_bf16(tmp16);
    const auto d_dout = dev_bf16(dout);
    const auto d_di = dev_bf16(init_di);
    const auto d_da = dev_f32(init_da);
    const auto d_db = dev_f32(init_db);
    const auto d_dtmp = poisoned<bf16>(numel(N, R));
    cuda::lora_backward(d_di.p(), d_da.p(), d_db.p(), d_dtmp.p(), d_dout.p(), d_inp.p(), d_tmp16.p(), d_A.p(), d_B.p(),
                        scaling, N, IN, OUT, R);
    c.tensor("dinp", get(d_di), want_di, kTolBf16, &init_di);
    c.tensor("dlora_a", get(d_da), want_da, kTolBf16, &init_da);
    c.tensor("dlora_b", get(d_db), want_db, kTolBf16, &init_db);
    c.tensor("dtmp", get(d_dtmp), dtmp, kTolBf16);
}

// ---------------------------------------------------------------------------------------------------------
// lm_head + cross-entropy
// ---------------------------------------------------------------------------------------------------------

// logit_scale multiplies the weights: 8 gives logits of tens, where a softmax without max subtraction fails.
void cross_entropy_case(Check& c, int N, int C, int V, int chunk_rows, float logit_scale, bool with_grad,
                        float softcap = 0.0f) {
    const auto hidden = c.rng.bf16_values(numel(N, C), 1.0f);
    const auto weight = c.rng.bf16_values(numel(V, C), logit_scale * fan_in_bound(C) * float(std::sqrt(3.0)));
    std::vector<int32_t> targets(static_cast<size_t>(N));
    for (auto& t : targets) t = c.rng.uniform(0, 1) < 0.25f ? cpu::kIgnoreIndex : c.rng.below(V);
    targets[0] = cpu::kIgnoreIndex;
    if (N > 1) targets[1] = V - 1;
    if (N > 2) targets[2] = 0;
    int labels = 0;
    for (auto t : targets) labels += t != cpu::kIgnoreIndex;
    const float grad_scale = 1.0f / float(std::max(labels, 1));

    // CPU: per-row losses one row at a time, then the whole batch for the sum and dhidden.
    std::vector<float> scratch(size_t(numel(std::max(chunk_rows, 1), V)));
    std::vector<float> want_losses(static_cast<size_t>(N));
    for (int n = 0; n < N; ++n)
        want_losses[size_t(n)] =
            float(cpu::lm_head_cross_entropy(nullptr, hidden.data() + numel(n, C), weight.data(), &targets[size_t(n)],
                                             1, C, V, 1.0f, 1, scratch.data(), softcap));
    std::vector<float> want_dh(size_t(numel(N, C)));
    const double want_sum = cpu::lm_head_cross_entropy(want_dh.data(), hidden.data(), weight.data(), targets.data(), N,
                                                       C, V, grad_scale, chunk_rows, scratch.data(), softcap);

    const auto d_hidden = dev_bf16(hidden);
    const auto d_weight = dev_bf16(weight);
    const auto d_targets = dev_i32(targets);
    const auto d_losses = poisoned<float>(N);
    const auto d_dh = poisoned<bf16>(numel(N, C));
    const Dev<char> ws(int64_t(cuda::lm_head_cross_entropy_workspace(chunk_rows, V)));
    cuda::lm_head_cross_entropy(with_grad ? d_dh.p() : nullptr, d_losses.p(), d_hidden.p(), d_weight.p(), d_targets.p(),
                                N, C, V, grad_scale, chunk_rows, ws.p(), softcap);
    const auto losses = get(d_losses);
    c.tensor("losses", losses, want_losses, kTolBf16);
    double sum = 0;
    for (float l : losses) sum += l;
    c.scalar("loss sum", sum, want_sum, kTolBf16);
    if (with_grad) c.tensor("dhidden", get(d_dh), want_dh, kTolBf16);
}

void lm_head_logits_case(Check& c, int N, int C, int V, float softcap = 0.0f) {
    const auto hidden = c.rng.bf16_values(numel(N, C), 1.0f);
    const auto weight = c.rng.bf16_values(numel(V, C), 3.0f * fan_in_bound(C));
    std::vector<float> want(size_t(numel(N, V)));
    cpu::lm_head_logits(want.data(), hidden.data(), weight.data(), N, C, V, softcap);
    const auto d_hidden = dev_bf16(hidden);
    const auto d_weight = dev_bf16(weight);
    const auto d_out = poisoned<float>(numel(N, V));
    cuda::lm_head_logits(d_out.p(), d_hidden.p(), d_weight.p(), N, C, V, softcap);
    c.tensor("logits", get(d_out), want, kTolBf16);
}

// ---------------------------------------------------------------------------------------------------------
// Attention
// ---------------------------------------------------------------------------------------------------------

struct AttnShape {
    std::vector<int> lengths;
    int Hq, Hkv, D;
    int window = 0;  // sliding window (0: full causal)
    float softcap = 0;  // soft-capped scores (0: none)
};

std::string attn_label(const AttnShape& s) {
    std::string l =
        "D=" + std::to_string(s.D) + " Hq=" + std::to_string(s.Hq) + " Hkv=" + std::to_string(s.Hkv) + " lengths=";
    for (size_t i = 0; i < s.lengths.size(); ++i) l += (i ? "," : "") + std::to_string(s.lengths[i]);
    if (s.window > 0) l += " window=" + std::to_string(s.window);
    if (s.softcap > 0) l += " softcap=" + std::to_string(int(s.softcap));
    return l;
}

// Inputs and the CPU results (forward from the inputs, backward from the CPU's own out and lse).
struct AttnData {
    int S = 0, T = 0, max_seqlen = 0;
    float scale = 0;
    std::vector<int32_t> cu;
    std::vector<float> q, k, v, dout;  // bf16 values
    std::vector<float> out, lse;       // [T,Hq,D], [Hq,T]
    std::vector<float> dq, dk, dv;
};

AttnData attention_data(Check& c, const AttnShape& s) {
    AttnData a;
    a.S = int(s.lengths.size());
    a.cu.push_back(0);
    for (int len : s.lengths) {
        a.cu.push_back(a.cu.back() + len);
        a.max_seqlen = std::max(a.max_seqlen, len);
    }
    a.T = a.cu.back();
    a.scale = float(1.0 / std::sqrt(double(s.D)));
    const int64_t nq = int64_t(a.T) * s.Hq * s.D, nkv = int64_t(a.T) * s.Hkv * s.D;
    // |q.k| * scale of order 1: softmax rows that are neither flat nor one-hot.
    a.q = c.rng.bf16_values(nq, 2.0f);
    a.k = c.rng.bf16_values(nkv, 2.0f);
    a.v = c.rng.bf16_values(nkv, 1.0f);
    a.dout = c.rng.bf16_values(nq, 1.0f);
    a.out.resize(static_cast<size_t>(nq));
    a.lse.resize(size_t(int64_t(s.Hq) * a.T));
    cpu::attention_forward(a.out.data(), a.lse.data(), a.q.data(), a.k.data(), a.v.data(), a.cu.data(), a.S, a.T, s.Hq,
                           s.Hkv, s.D, a.scale, s.window, s.softcap);
    a.dq.resize(static_cast<size_t>(nq));
    a.dk.resize(static_cast<size_t>(nkv));
    a.dv.resize(static_cast<size_t>(nkv));
    cpu::attention_backward(a.dq.data(), a.dk.data(), a.dv.data(), a.dout.data(), a.q.data(), a.k.data(), a.v.data(),
                            a.out.data(), a.lse.data(), a.cu.data(), a.S, a.T, s.Hq, s.Hkv, s.D, a.scale, s.window,
                            s.softcap);
    return a;
}

void attention_case(Check& c, const AttnShape& s) {
    if (!cuda::attention_supported(s.D)) {
        c.skip("all", "the in-house kernels do not support head_dim " + std::to_string(s.D));
        return;
    }
    const AttnData a = attention_data(c, s);
    const int64_t nq = int64_t(a.T) * s.Hq * s.D, nkv = int64_t(a.T) * s.Hkv * s.D;
    const auto d_q = dev_bf16(a.q), d_k = dev_bf16(a.k), d_v = dev_bf16(a.v), d_dout = dev_bf16(a.dout);
    const auto d_cu = dev_i32(a.cu);
    const auto d_out = poisoned<bf16>(nq);
    const auto d_lse = poisoned<float>(int64_t(s.Hq) * a.T);
    cuda::attention_forward(d_out.p(), d_lse.p(), d_q.p(), d_k.p(), d_v.p(), d_cu.p(), a.S, a.T, s.Hq, s.Hkv, s.D,
                            a.scale, a.max_seqlen, s.window, s.softcap);
    c.tensor("out", get(d_out), a.out, kTolBf16);
    c.tensor("lse", get(d_lse), a.lse, kTolBf16);

    // Backward from the GPU's own out and lse, as the model runs it.
    const auto d_dq = poisoned<bf16>(nq);
    const auto d_dk = poisoned<bf16>(nkv);
    const auto d_dv = poisoned<bf16>(nkv);
    const Dev<char> ws(int64_t(cuda::attention_backward_workspace(a.T, s.Hq, s.D)));
    cuda::attention_backward(d_dq.p(), d_dk.p(), d_dv.p(), d_dout.p(), d_q.p(), d_k.p(), d_v.p(), d_out.p(), d_lse.p(),
                             d_cu.p(), a.S, a.T, s.Hq, s.Hkv, s.D, a.scale, a.max_seqlen, ws.p(), s.window, s.softcap);
    c.tensor("dq", get(d_dq), a.dq, kTolBf16);
    c.tensor("dk", get(d_dk), a.dk, kTolBf16);
    c.tensor("dv", get(d_dv), a.dv, kTolBf16);
}

void cudnn_attention_case(Check& c, const AttnShape& s, bool split = false) {
    std::string why;
    if (!cuda::cudnn_attention_available(&why)) {
        c.skip("all", "cuDNN attention unavailable: " + why);
        return;
    }
    const AttnData a = attention_data(c, s);
    const cuda::CudnnAttentionShape shape{
        .S = a.S, .T = a.T, .Hq = s.Hq, .Hkv = s.Hkv, .D = s.D, .max_seqlen = a.max_seqlen, .scale = a.scale,
        .window = s.window, .split = split};
    if (!cuda::cudnn_attention_supported(shape, &why)) {
        c.skip("all", "cuDNN does not support this shape: " + why);
        return;
    }
    const int64_t nq = int64_t(a.T) * s.Hq * s.D, nkv = int64_t(a.T) * s.Hkv * s.D;
    const auto d_q = dev_bf16(a.q), d_k = dev_bf16(a.k), d_v = dev_bf16(a.v), d_dout = dev_bf16(a.dout);
    const auto d_cu = dev_i32(a.cu);
    const Dev<char> stats(int64_t(cuda::cudnn_attention_stats_bytes(shape)));
    const Dev<char> ws(int64_t(cuda::cudnn_attention_workspace_bytes(shape)));
    poison(stats.p(), stats.bytes());
    const auto d_out = poisoned<bf16>(nq);
    cuda::cudnn_attention_forward(d_out.p(), stats.p(), d_q.p(), d_k.p(), d_v.p(), d_cu.p(), shape, ws.p());
    c.tensor("out", get(d_out), a.out, kTolBf16);

    const auto d_dq = poisoned<bf16>(nq);
    const auto d_dk = poisoned<bf16>(nkv);
    const auto d_dv = poisoned<bf16>(nkv);
    cuda::cudnn_attention_backward(d_dq.p(), d_dk.p(), d_dv.p(), d_dout.p(), d_q.p(), d_k.p(), d_v.p(), d_out.p(),
                                   stats.p(), d_cu.p(), shape, ws.p());
    c.tensor("dq", get(d_dq), a.dq, kTolBf16);
    c.tensor("dk", get(d_dk), a.dk, kTolBf16);
    c.tensor("dv", get(d_dv), a.dv, kTolBf16);
}

// ---------------------------------------------------------------------------------------------------------
// The shapes of each generator (harness.h, "Shape grids": base, one field at a time, flags, kept shapes)
// ---------------------------------------------------------------------------------------------------------

// flag: the bias (matmul_forward); want: which of dinp / dweight+dbias (matmul_backward).
struct Mm {
    int N, IN, OUT;
    bool bias = false;
    int want = 3;  // matmul_backward: 1 dinp only, 2 dweight+dbias only, 3 all
    bool operator==(const Mm&) const = default;
};

}  // namespace

// One output column, a thousand rows; the decode GEMV (N <= 4, IN % 8 == 0) and its fallbacks.
void gen_matmul_forward(CaseList& cs) {
    const Mm base{37, 96, 200};
    std::vector<Mm> v{base};
    vary(v, base, &Mm::bias, {true});
    for (Mm s : {Mm{130, 64, 96, true}, {17, 37, 53, true}, {1, 128, 256}, {1, 4096, 520, true}, {2, 1024, 33},
                 {3, 64, 200, true}, {4, 2048, 96}})
        add_unique(v, s);
    vary(v, base, &Mm::OUT, {1});
    vary(v, base, &Mm::N, {1001});
    for (const Mm& s : v)
        cs.add("matmul_forward " + shape_label({{"N", s.N}, {"IN", s.IN}, {"OUT", s.OUT}}) + (s.bias ? " bias" : ""),
               [=](Check& c) { matmul_forward_case(c, s.N, s.IN, s.OUT, s.bias); });
}

void gen_matmul_backward(CaseList& cs) {
    const Mm base{37, 96, 200};
    std::vector<Mm> v{base};
    for (Mm s : {Mm{130, 64, 96}, {17, 37, 53}, {1, 128, 256}}) add_unique(v, s);
    vary(v, base, &Mm::OUT, {1});
    vary(v, base, &Mm::N, {1001});
    vary(v, base, &Mm::want, {1, 2});
    for (const Mm& s : v)
        cs.add(std::string("matmul_backward ") +
                   (s.want == 1 ? "dinp only " : s.want == 2 ? "dweight+dbias only " : "") +
                   shape_label({{"N", s.N}, {"IN", s.IN}, {"OUT", s.OUT}}),
               [=](Check& c) { matmul_backward_case(c, s.N, s.IN, s.OUT, s.want & 1, s.want & 2, s.want & 2); });
}

namespace {
struct Lora {
    int N, IN, OUT, R;
    float scaling = 2.0f;
    bool operator==(const Lora&) const = default;
};
}  // namespace

// One output column, a thousand rows, rank 1; a decode step's rows (the GEMV paths of both products), and R
// not a multiple of 8 (the GEMM again).
void gen_lora(CaseList& cs) {
    const Lora base{37, 96, 200, 8};
    std::vector<Lora> v{base};
    for (Lora s : {Lora{130, 64, 96, 16, 0.5f}, {17, 37, 53, 4, 4.0f}, {5, 64, 37, 1}, {1, 4096, 1024, 16},
                   {2, 1024, 3000, 8, 0.5f}, {3, 256, 96, 64, 1.0f}, {4, 512, 300, 12}})
        add_unique(v, s);
    vary(v, base, &Lora::OUT, {1});
    vary(v, base, &Lora::N, {1001});
    for (const Lora& s : v)
        cs.add("lora " + shape_label({{"N", s.N}, {"IN", s.IN}, {"OUT", s.OUT}, {"R", s.R}}),
               [=](Check& c) { lora_case(c, s.N, s.IN, s.OUT, s.R, s.scaling); });
}

namespace {
struct Ce {
    int N, C, V, chunk;
    float logit_scale = 1.0f;  // 8: logits of tens ("large logits")
    bool grad = true;
    float softcap = 0.0f;
    bool operator==(const Ce&) const = default;
};
struct Logits {
    int N, C, V;
    float softcap = 0.0f;
    bool operator==(const Logits&) const = default;
};
}  // namespace

// Chunks of one row, two rows (the first is always ignored, so one label), a vocabulary of chunk size and not;
// large logits, no dhidden, soft-caps.
void gen_lm_head_cross_entropy(CaseList& cs) {
    const Ce base{37, 96, 101, 16};
    std::vector<Ce> v{base};
    for (Ce s : {Ce{130, 64, 1000, 64}, {37, 96, 2053, 128}, {17, 37, 53, 5}}) add_unique(v, s);
    vary(v, base, &Ce::chunk, {1});
    vary(v, base, &Ce::N, {2});
    for (Ce s : {Ce{37, 64, 301, 16, 8.0f}, {37, 96, 101, 16, 1.0f, false}, {37, 64, 301, 16, 8.0f, true, 3.0f},
                 {130, 64, 1000, 64, 1.0f, true, 30.0f}})
        add_unique(v, s);
    for (const Ce& s : v) {
        std::string l = "lm_head_cross_entropy ";
        if (s.softcap > 0) l += "softcap=" + std::to_string(int(s.softcap)) + " ";
        if (s.logit_scale != 1.0f) l += "large logits ";
        if (!s.grad) l += "no dhidden ";
        cs.add(l + shape_label({{"N", s.N}, {"C", s.C}, {"V", s.V}, {"chunk", s.chunk}}),
               [=](Check& c) { cross_entropy_case(c, s.N, s.C, s.V, s.chunk, s.logit_scale, s.grad, s.softcap); });
    }
}

// One row, one vocabulary entry, an odd C.
void gen_lm_head_logits(CaseList& cs) {
    const Logits base{37, 96, 1001};
    std::vector<Logits> v{base, Logits{5, 37, 53}};
    vary(v, base, &Logits::N, {1});
    vary(v, base, &Logits::V, {1});
    vary(v, base, &Logits::softcap, {2.0f});
    for (const Logits& s : v)
        cs.add(std::string("lm_head_logits ") + (s.softcap > 0 ? "softcap=" + std::to_string(int(s.softcap)) + " " : "") +
                   shape_label({{"N", s.N}, {"C", s.C}, {"V", s.V}}),
               [=](Check& c) { lm_head_logits_case(c, s.N, s.C, s.V, s.softcap); });
}

// Both attention paths on the same shapes: packed samples of 1 to 257 tokens, GQA / MQA / MHA, head dims 64
// and 128; the edges one token with one head, and the smallest head (D = 16) with a two-sample batch. Sliding
// windows narrower than a key tile, across several tiles, and wider than some samples (no effect there; cuDNN
// takes them as its mask's left bound). The GQA backward once per kv head (cuDNN's split backward, what long
// sequences use), with and without a window. Soft-capped scores (Gemma 2: 50; a small cap bends every score)
// with and without a window, and Gemma's head_dim 256: in-house only (cuDNN takes no soft-cap).
void gen_attention(CaseList& cs) {
    const std::vector<AttnShape> attn = {
        {{1, 17, 64, 130}, 8, 2, 64}, {{1, 17, 64, 130}, 8, 2, 128}, {{130, 1, 1, 64, 17}, 4, 4, 64},
        {{257, 1}, 4, 4, 128},        {{33, 96}, 6, 1, 64},          {{1}, 1, 1, 64},
        {{3, 5}, 2, 1, 16},
    };
    const std::vector<AttnShape> windowed = {
        {{1, 17, 64, 130}, 8, 2, 64, 16}, {{300, 5, 129}, 4, 2, 128, 50}, {{257, 1, 40}, 4, 4, 128, 100},
        {{200, 70}, 6, 1, 64, 64},
    };
    const std::vector<AttnShape> capped = {
        {{1, 17, 64, 130}, 8, 2, 64, 0, 1.0f}, {{300, 5, 129}, 4, 2, 128, 50, 2.0f}, {{130, 33}, 4, 2, 256, 0, 50.0f},
        {{200, 70}, 8, 4, 256, 64, 1.0f},
    };
    for (const auto& s : attn) cs.add("attention " + attn_label(s), [=](Check& c) { attention_case(c, s); });
    for (const auto& s : attn) cs.add("cudnn_attention " + attn_label(s), [=](Check& c) { cudnn_attention_case(c, s); });
    for (const auto& s : windowed) cs.add("attention " + attn_label(s), [=](Check& c) { attention_case(c, s); });
    for (const auto& s : windowed)
        cs.add("cudnn_attention " + attn_label(s), [=](Check& c) { cudnn_attention_case(c, s); });
    for (const AttnShape& s : {attn[0], attn[1], windowed[0], windowed[1], windowed[3]})
        cs.add("cudnn_attention split " + attn_label(s), [=](Check& c) { cudnn_attention_case(c, s, true); });
    for (const auto& s : capped) cs.add("attention " + attn_label(s), [=](Check& c) { attention_case(c, s); });
}

}  // namespace tandem::testing
#endif  // TANDEM_WITH_CUDA
