// SPDX-FileCopyrightText: 2026 The Tandem developers
// SPDX-License-Identifier: GPL-3.0-or-later
// Self-test cases of the FP8 ops (kernels/*/fp8) and their generators (gen_*, registered in runner.cpp): the
// quantization of weights and rows and the weight transpose exactly equal to their CPU twins (the same rounding
// code on both sides, inputs that bf16 represents), and the block-scaled cuBLASLt GEMM against the CPU's
// block-scaled GEMM on the same codes (fp32 accumulation on both sides, in other orders; the output rounded to
// bf16 here), with and without bias, accumulating (beta 1), for shapes whose inner dimension is and is not a
// multiple of 128, and rows of very different magnitudes so a scale applied to the wrong row or block shows; the
// gated activations and the RMSNorm that also quantize their outputs (FP8 models' MLP and block norms), against
// the CPU's quantization of the GPU's own bf16 outputs.
// Decisions a reader must know:
//  - Grids: one row, one column (K or IN = 1: one block, mostly padding), sizes that are and are not multiples
//    of the 128-wide block and of the GEMM's 16-row alignment. fp8_matmul's M stays a multiple of 16, as the
//    layers' widths are. The weight's quantization (outside the table) is tested in fp8_transpose's cases,
//    which need its output.
#include "testing/harness.h"

#if TANDEM_WITH_CUDA
#include <string>
#include <vector>

#include "kernels/cpu/fp8.h"
#include "kernels/cpu/rmsnorm.h"
#include "kernels/cpu/swiglu.h"
#include "kernels/cuda/fp8.h"
#include "kernels/cuda/rmsnorm.h"
#include "kernels/cuda/swiglu.h"

namespace tandem::testing {
namespace {

std::vector<uint8_t> get_bytes(const uint8_t* p, int64_t n) {
    std::vector<uint8_t> v(static_cast<size_t>(n));
    copy_to_host(v.data(), p, size_t(n));
    return v;
}

Dev<uint8_t> dev_bytes(const std::vector<uint8_t>& v) {
    Dev<uint8_t> d(int64_t(v.size()));
    copy_to_device(d.p(), v.data(), v.size());
    return d;
}

void bytes_equal(Check& c, const std::string& what, const std::vector<uint8_t>& got, const std::vector<uint8_t>& want) {
    int64_t diff = 0;
    for (size_t i = 0; i < got.size() && i < want.size(); ++i) diff += got[i] != want[i];
    if (got.size() != want.size()) diff = int64_t(std::max(got.size(), want.size()));
    c.result(what, double(diff), kTolExact, std::to_string(diff) + " of " + std::to_string(want.size()) + " differ");
}

// bf16-representable values whose magnitude changes by row (so each row's and block's scale matters).
std::vector<float> graded(Check& c, int rows, int cols, float base) {
    std::vector<float> x = round_bf16(c.rng.f32_values(int64_t(rows) * cols, base));
    for (int r = 0; r < rows; ++r)
        for (int k = 0; k < cols; ++k) x[size_t(r) * cols + k] *= float(1 + (r * 7 + k / 128 * 3) % 13);
    return round_bf16(x);
}

// grad: quantize_fp8_grad_rows (output gradients: E4M3 on both backends unless the CPU's E5M2 ablation is on,
// which the CUDA twin refuses).
void quantize_rows_case(Check& c, int rows, int K, bool grad = false) {
    const std::vector<float> x = graded(c, rows, K, 0.5f);
    const int64_t Kp = fp8_padded(K), cols = Kp / kFp8Block, cr = fp8_code_rows(rows);
    std::vector<uint8_t> codes(size_t(cr * Kp));
    std::vector<float> scales(size_t(cols * cr));
    (grad ? cpu::quantize_fp8_grad_rows : cpu::quantize_fp8_rows)(codes.data(), scales.data(), x.data(), rows, K);
    const auto d_x = dev_bf16(x);
    const auto d_codes = poisoned<uint8_t>(cr * Kp);
    const auto d_scales = poisoned<float>(cols * cr);
    (grad ? cuda::quantize_fp8_grad_rows : cuda::quantize_fp8_rows)(d_codes.p(), d_scales.p(), d_x.p(), rows, K);
    bytes_equal(c, "codes", get_bytes(d_codes.p(), d_codes.n()), codes);
    c.tensor("scales", get(d_scales), scales, kTolExact);
}

void weight_case(Check& c, int OUT, int IN) {
    const std::vector<float> w = graded(c, OUT, IN, 0.02f);
    const int64_t INp = fp8_padded(IN), OUTp = fp8_padded(OUT);
    const int64_t ns = fp8_blocks(OUT) * fp8_scale_ld(IN), nts = fp8_blocks(IN) * fp8_scale_ld(OUT);
    std::vector<uint8_t> codes(size_t(OUT * INp)), wt(size_t(IN * OUTp));
    std::vector<float> scales(static_cast<size_t>(ns)), wts(static_cast<size_t>(nts));
    cpu::quantize_fp8_weight(codes.data(), scales.data(), w.data(), OUT, IN);
    cpu::fp8_transpose(wt.data(), wts.data(), codes.data(), scales.data(), OUT, IN);
    const auto d_w = dev_f32(w);
    const auto d_codes = poisoned<uint8_t>(OUT * INp);
    const auto d_scales = poisoned<float>(ns);
    cuda::quantize_fp8_weight(d_codes.p(), d_scales.p(), d_w.p(), OUT, IN);
    bytes_equal(c, "codes", get_bytes(d_codes.p(), d_codes.n()), codes);
    c.tensor("scales", get(d_scales), scales, kTolExact);
    const auto d_wt = poisoned<uint8_t>(IN * OUTp);
    const auto d_wts = poisoned<float>(nts);
    cuda::fp8_transpose(d_wt.p(), d_wts.p(), d_codes.p(), d_scales.p(), OUT, IN);
    bytes_equal(c, "fp8_transpose codes", get_bytes(d_wt.p(), d_wt.n()), wt);
    c.tensor("fp8_transpose scales", get(d_wts), wts, kTolExact);
}

// out[N,M] (+)= x[N,K] @ w[M,K]^T (+ bias) on both backends from the same codes and scales.
void matmul_case(Check& c, int N, int K, int M, bool bias, bool accumulate) {
    const std::vector<float> x = graded(c, N, K, 0.5f), w = graded(c, M, K, 0.02f);
    const int64_t Kp = fp8_padded(K), cols = Kp / kFp8Block, cr = fp8_code_rows(N);
    std::vector<uint8_t> xq(size_t(cr * Kp)), wq(size_t(M * Kp));
    std::vector<float> xs(size_t(cols * cr)), ws(size_t(fp8_blocks(M) * fp8_scale_ld(K)));
    cpu::quantize_fp8_rows(xq.data(), xs.data(), x.data(), N, K);
    cpu::quantize_fp8_weight(wq.data(), ws.data(), w.data(), M, K);
    const std::vector<float> b = bias ? round_bf16(c.rng.f32_values(M, 0.1f)) : std::vector<float>{};
    std::vector<float> out(size_t(N) * M, 0.0f), init;
    if (accumulate) {
        std::vector<float> inc(out.size());
        cpu::fp8_matmul(inc.data(), xq.data(), xs.data(), wq.data(), ws.data(), nullptr, N, K, M, 0.0f, nullptr);
        init = c.initial(inc, true);
        out = init;
    }
    cpu::fp8_matmul(out.data(), xq.data(), xs.data(), wq.data(), ws.data(), bias ? b.data() : nullptr, N, K, M,
                    accumulate ? 1.0f : 0.0f, nullptr);
    const auto d_xq = dev_bytes(xq), d_wq = dev_bytes(wq);
    const auto d_xs = dev_f32(xs), d_ws = dev_f32(ws);
    const auto d_b = dev_bf16(bias ? b : std::vector<float>{0.0f});
    auto d_out = accumulate ? dev_bf16(init) : poisoned<bf16>(int64_t(N) * M);
    const auto d_tail = poisoned<bf16>(int64_t(kFp8RowAlign) * M);
    cuda::fp8_matmul(d_out.p(), d_xq.p(), d_xs.p(), d_wq.p(), d_ws.p(), bias ? d_b.p() : nullptr, N, K, M,
                     accumulate ? 1.0f : 0.0f, d_tail.p());
    c.tensor("out", get(d_out), out, kTolBf16, accumulate ? &init : nullptr);
}

}  // namespace

namespace {
struct Rows {
    int rows, K;
    bool operator==(const Rows&) const = default;
};
struct Fp8Mm {
    int N, K, M;
    bool bias = false, acc = false;
    bool operator==(const Fp8Mm&) const = default;
};
// A fused kernel's codes and scales for got[N, K] (the GPU's own bf16 output) are exactly what the CPU's
// quantize_fp8_rows makes of it (what the unfused path would have quantized).
void quantized_like_cpu(Check& c, const std::string& what, const std::vector<float>& got, int N, int K,
                        const Dev<uint8_t>& codes, const Dev<float>& scales) {
    const int64_t cr = fp8_code_rows(N), nc = cr * fp8_padded(K), ns = cr * (fp8_padded(K) / kFp8Block);
    std::vector<uint8_t> wc(static_cast<size_t>(nc));
    std::vector<float> ws(static_cast<size_t>(ns));
    cpu::quantize_fp8_rows(wc.data(), ws.data(), got.data(), N, K);
    bytes_equal(c, what + " codes", get_bytes(codes.p(), nc), wc);
    c.tensor(what + " scales", get(scales), ws, kTolExact);
}

// activation_forward_fp8 / activation_backward_fp8: the bf16 outputs within bf16 rounding of the CPU's fp32 ones,
// and their codes and scales exactly those the CPU's quantize_fp8_rows makes of the GPU's own bf16 outputs (what
// the unfused path quantized). F a multiple of 128 (the fused kernels) or not (the fallback).
void activation_fp8_case(Check& c, int N, int F, bool gelu) {
    const int64_t n = int64_t(N) * F, Fp = fp8_padded(F), cr = fp8_code_rows(N), nc = cr * Fp,
                  ns = cr * (Fp / kFp8Block);
    const auto gate = c.rng.bf16_values(n, 4.0f), up = c.rng.bf16_values(n, 2.0f), dout = c.rng.bf16_values(n, 1.0f);
    const auto d_gate = dev_bf16(gate), d_up = dev_bf16(up), d_dout = dev_bf16(dout);
    {
        std::vector<float> want(static_cast<size_t>(n));
        std::vector<uint8_t> cc(static_cast<size_t>(nc));
        std::vector<float> cs(static_cast<size_t>(ns));
        cpu::activation_forward_fp8(want.data(), cc.data(), cs.data(), gate.data(), up.data(), N, F, gelu);
        const auto out = poisoned<bf16>(n);
        const auto codes = poisoned<uint8_t>(nc);
        const auto scales = poisoned<float>(ns);
        cuda::activation_forward_fp8(out.p(), codes.p(), scales.p(), d_gate.p(), d_up.p(), N, F, gelu);
        const std::vector<float> got = get(out);
        c.tensor("out", got, want, kTolBf16);
        quantized_like_cpu(c, "out", got, N, F, codes, scales);
    }
    std::vector<float> wg(static_cast<size_t>(n)), wu(static_cast<size_t>(n));
    std::vector<uint8_t> cgc(static_cast<size_t>(nc)), cuc(static_cast<size_t>(nc));
    std::vector<float> cgs(static_cast<size_t>(ns)), cus(static_cast<size_t>(ns));
    cpu::activation_backward_fp8(wg.data(), wu.data(), cgc.data(), cgs.data(), cuc.data(), cus.data(), dout.data(),
                                 gate.data(), up.data(), N, F, gelu);
    const auto dgate = poisoned<bf16>(n), dup = poisoned<bf16>(n);
    const auto gc = poisoned<uint8_t>(nc), uc = poisoned<uint8_t>(nc);
    const auto gs = poisoned<float>(ns), us = poisoned<float>(ns);
    cuda::activation_backward_fp8(dgate.p(), dup.p(), gc.p(), gs.p(), uc.p(), us.p(), d_dout.p(), d_gate.p(), d_up.p(),
                                  N, F, gelu);
    const std::vector<float> got_g = get(dgate), got_u = get(dup);
    c.tensor("dgate", got_g, wg, kTolBf16);
    c.tensor("dup", got_u, wu, kTolBf16);
    quantized_like_cpu(c, "dgate", got_g, N, F, gc, gs);
    quantized_like_cpu(c, "dup", got_u, N, F, uc, us);
}

// rmsnorm_forward_fp8: out, rstd (and the residual) bit for bit those of the unfused CUDA norm (the same math; its
// own cases compare it with the CPU), out also within bf16 rounding of the CPU twin's without a residual, and the
// codes and scales exactly what the CPU's quantize_fp8_rows makes of the GPU's own bf16 output. C a multiple of
// 128 (the fused kernel: a warp per row up to 1024, a block beyond) or not (the fallback).
void rmsnorm_fp8_case(Check& c, int N, int C, bool residual, float offset, bool in_place) {
    constexpr float kEps = 1e-6f;
    const int64_t n = numel(N, C), Cp = fp8_padded(C), cr = fp8_code_rows(N), nc = cr * Cp, ns = cr * (Cp / kFp8Block);
    const auto a = c.rng.bf16_values(n, 2.0f), b = c.rng.bf16_values(n, 2.0f);
    const auto w = c.rng.norm_weight(C, offset);  // Gemma's (1 + w): weights near 0
    const auto d_a = dev_bf16(a), d_b = dev_bf16(b), d_w = dev_bf16(w);
    // The unfused CUDA path.
    const auto u_res = poisoned<bf16>(residual ? n : 0), u_out = poisoned<bf16>(n);
    const auto u_rstd = poisoned<float>(N);
    if (residual)
        cuda::residual_rmsnorm_forward(u_res.p(), u_out.p(), u_rstd.p(), d_a.p(), d_b.p(), d_w.p(), N, C, kEps, offset);
    else
        cuda::rmsnorm_forward(u_out.p(), u_rstd.p(), d_a.p(), d_w.p(), N, C, kEps, offset);
    // in_place: the plain form writes out over a, the residual form the residual over a.
    const auto a2 = dev_bf16(a);
    const auto res = poisoned<bf16>(residual && !in_place ? n : 0), out = poisoned<bf16>(!residual && in_place ? 0 : n);
    bf16* res_p = residual ? (in_place ? a2.p() : res.p()) : nullptr;
    bf16* out_p = !residual && in_place ? a2.p() : out.p();
    const auto rstd = poisoned<float>(N);
    const auto codes = poisoned<uint8_t>(nc);
    const auto scales = poisoned<float>(ns);
    cuda::rmsnorm_forward_fp8(res_p, out_p, codes.p(), scales.p(), rstd.p(), a2.p(), residual ? d_b.p() : nullptr,
                              d_w.p(), N, C, kEps, offset);
    const std::vector<float> got = get(out_p, n);
    c.tensor("out (unfused)", got, get(u_out), kTolExact);
    c.tensor("rstd (unfused)", get(rstd), get(u_rstd), kTolExact);
    if (residual) c.tensor("residual (unfused)", get(res_p, n), get(u_res), kTolExact);
    if (!residual) {
        std::vector<float> want(static_cast<size_t>(n)), want_rstd(static_cast<size_t>(N));
        std::vector<uint8_t> cc(static_cast<size_t>(nc));
        std::vector<float> cs(static_cast<size_t>(ns));
        cpu::rmsnorm_forward_fp8(nullptr, want.data(), cc.data(), cs.data(), want_rstd.data(), a.data(), nullptr,
                                 w.data(), N, C, kEps, offset);
        c.tensor("out", got, want, kTolBf16);
    }
    quantized_like_cpu(c, "out", got, N, C, codes, scales);
}

// rmsnorm_backward_fp8: the updated dinp bit for bit that of the unfused CUDA backward (its own cases compare it with
// the CPU) and within bf16 rounding of the CPU twin's, from a nonzero dinp (the residual stream's gradient it adds
// to); the codes and scales exactly what the CPU's quantize_fp8_rows makes of the GPU's own bf16 dinp.
void rmsnorm_backward_fp8_case(Check& c, int N, int C, float offset) {
    const int64_t n = numel(N, C), Cp = fp8_padded(C), cr = fp8_code_rows(N), nc = cr * Cp, ns = cr * (Cp / kFp8Block);
    const auto inp = c.rng.bf16_values(n, 2.0f), dout = c.rng.bf16_values(n, 1.0f), dinp0 = c.rng.bf16_values(n, 1.0f);
    const auto w = c.rng.norm_weight(C, offset);
    std::vector<float> fwd(static_cast<size_t>(n)), rstd(static_cast<size_t>(N));
    cpu::rmsnorm_forward(fwd.data(), rstd.data(), inp.data(), w.data(), N, C, 1e-6f, offset);
    std::vector<float> want = dinp0;
    std::vector<uint8_t> cc(static_cast<size_t>(nc));
    std::vector<float> cs(static_cast<size_t>(ns));
    cpu::rmsnorm_backward_fp8(want.data(), cc.data(), cs.data(), dout.data(), inp.data(), w.data(), rstd.data(), N, C,
                              offset);
    const auto d_inp = dev_bf16(inp), d_dout = dev_bf16(dout), d_w = dev_bf16(w);
    const auto d_rstd = dev_f32(rstd);
    const auto u_dinp = dev_bf16(dinp0), dinp = dev_bf16(dinp0);
    cuda::rmsnorm_backward(u_dinp.p(), nullptr, d_dout.p(), d_inp.p(), d_w.p(), d_rstd.p(), N, C, offset);
    const auto codes = poisoned<uint8_t>(nc);
    const auto scales = poisoned<float>(ns);
    cuda::rmsnorm_backward_fp8(dinp.p(), codes.p(), scales.p(), d_dout.p(), d_inp.p(), d_w.p(), d_rstd.p(), N, C,
                               offset);
    const std::vector<float> got = get(dinp);
    c.tensor("dinp (unfused)", got, get(u_dinp), kTolExact);
    c.tensor("dinp", got, want, kTolBf16, &dinp0);
    quantized_like_cpu(c, "dinp", got, N, C, codes, scales);
}

}  // namespace

// One row, one column (K = 1: one block of padding), K not a multiple of the 128-wide block (352), many rows.
void gen_quantize_fp8_rows(CaseList& cs) {
    const Rows base{37, 352};
    std::vector<Rows> v{base, Rows{256, 4096}, Rows{4096, 1024}, Rows{3, 128}};
    vary(v, base, &Rows::rows, {1});
    vary(v, base, &Rows::K, {1});
    for (const Rows& s : v)
        cs.add("fp8 quantize_fp8_rows " + std::to_string(s.rows) + "x" + std::to_string(s.K),
               [=](Check& c) { quantize_rows_case(c, s.rows, s.K); });
}

// Output gradients: two of the row cases through quantize_fp8_grad_rows.
void gen_quantize_fp8_grad_rows(CaseList& cs) {
    for (const Rows& s : {Rows{37, 352}, Rows{256, 4096}})
        cs.add("fp8 quantize_fp8_grad_rows " + std::to_string(s.rows) + "x" + std::to_string(s.K),
               [=](Check& c) { quantize_rows_case(c, s.rows, s.K, true); });
}

// The weight's quantization (outside the table) and its transpose, one case: one row, one column, sizes that
// are and are not multiples of the block.
void gen_fp8_transpose(CaseList& cs) {
    const Rows base{300, 352};
    std::vector<Rows> v{base, Rows{1024, 3072}, Rows{128, 128}, Rows{352, 128}};
    vary(v, base, &Rows::rows, {1});
    vary(v, base, &Rows::K, {1});
    for (const Rows& s : v)
        cs.add("fp8 weight quantize + fp8_transpose " + std::to_string(s.rows) + "x" + std::to_string(s.K),
               [=](Check& c) { weight_case(c, s.rows, s.K); });
}

// N x K x M: one row (all in the 16-row tail), rows not a multiple of 16 (head and tail), K not a multiple of
// 128; bias, accumulate. M stays a multiple of 16 (the layers' widths).
void gen_fp8_matmul(CaseList& cs) {
    const Fp8Mm base{37, 256, 384};
    std::vector<Fp8Mm> v{Fp8Mm{256, 1024, 2048}, {4096, 4096, 1024}, {512, 1024, 512, true}, {512, 3072, 1024, false, true},
                         {384, 352, 128}, base, {213, 256, 256, true}, {9, 384, 256, false, true},
                         {64, 128, 352, false, true}};
    vary(v, base, &Fp8Mm::N, {1});
    for (const Fp8Mm& s : v)
        cs.add("fp8 fp8_matmul " + std::to_string(s.N) + "x" + std::to_string(s.K) + "x" + std::to_string(s.M) +
                   (s.bias ? " bias" : "") + (s.acc ? " accumulate" : ""),
               [=](Check& c) { matmul_case(c, s.N, s.K, s.M, s.bias, s.acc); });
}

// Rows that are and are not a multiple of 16 (pad rows), F a multiple of 128 (the fused kernels: 14336 is
// Llama-3.1-8B's) and not (352: the fallback), SwiGLU and GeGLU.
void gen_activation_fp8(CaseList& cs) {
    struct S {
        int N, F;
        bool gelu;
    };
    for (const S& s : {S{37, 384, false}, S{256, 14336, false}, S{1, 128, false}, S{37, 352, false}, S{48, 256, true},
                       S{5, 352, true}})
        cs.add(
            "fp8 activation_fp8 " + std::to_string(s.N) + "x" + std::to_string(s.F) + (s.gelu ? " geglu" : " swiglu"),
            [=](Check& c) { activation_fp8_case(c, s.N, s.F, s.gelu); });
}

// Rows that are and are not a multiple of 16 (pad rows); C a multiple of 128 with a warp per row (128: half the
// warp idle; 1024; 896: an odd number of blocks) and a block per row (4096: Llama-3.1-8B's, 2176), and not (352:
// the fallback); with and without the residual; Gemma's weight offset; in place (out over a, the residual over a).
void gen_rmsnorm_forward_fp8(CaseList& cs) {
    struct S {
        int N, C;
        bool residual;
        float offset = 0.0f;
        bool in_place = false;
    };
    for (const S& s : {S{37, 128, false}, S{37, 1024, true}, S{5, 896, false}, S{256, 4096, true}, S{33, 4096, false},
                       S{17, 2176, true}, S{37, 352, true}, S{1, 352, false}, S{37, 1152, false, 1.0f},
                       S{21, 2304, true, 1.0f}, S{37, 1024, false, 0.0f, true}, S{19, 2048, true, 0.0f, true}})
        cs.add("fp8 rmsnorm_forward_fp8 " + std::to_string(s.N) + "x" + std::to_string(s.C) +
                   (s.residual ? " residual" : "") + (s.offset != 0.0f ? " offset" : "") +
                   (s.in_place ? " in-place" : ""),
               [=](Check& c) { rmsnorm_fp8_case(c, s.N, s.C, s.residual, s.offset, s.in_place); });
}

// As the forward's: pad rows, a warp per row (128, 896) and a block (4096, 2176), the fallback (352), Gemma's
// weight offset.
void gen_rmsnorm_backward_fp8(CaseList& cs) {
    struct S {
        int N, C;
        float offset = 0.0f;
    };
    for (const S& s :
         {S{37, 128}, S{5, 896}, S{256, 4096}, S{17, 2176}, S{37, 352}, S{1, 352}, S{21, 1152, 1.0f}, S{9, 2304, 1.0f}})
        cs.add("fp8 rmsnorm_backward_fp8 " + std::to_string(s.N) + "x" + std::to_string(s.C) +
                   (s.offset != 0.0f ? " offset" : ""),
               [=](Check& c) { rmsnorm_backward_fp8_case(c, s.N, s.C, s.offset); });
}

}  // namespace tandem::testing
#endif  // TANDEM_WITH_CUDA
