// SPDX-FileCopyrightText: 2026 The Tandem developers
// SPDX-License-Identifier: GPL-3.0-or-later
// The self-test's cases for the model's layer ops (embedding, RMSNorm, RoPE, the gated activations, attention
// sinks, MXFP4 dequantization, matmul, LoRA, lm_head + cross-entropy, attention), each against its fp32 twin in
// engine/kernels/cpu on fresh random inputs, and their generators (gen_*, registered in runner.cpp), which
// enumerate each op's shapes (letters: the legend in harness.h). The ops over flat element counts are in
// flat_op_cases.cpp. Only with TANDEM_WITH_CUDA.
// Decisions a reader must know:
//  - Each generator's grid is a base shape, that shape with one field at a time set to an edge value (one row,
//    one channel, an odd size, a thousand rows), each flag on the base (in place, (1+w) weights, bias, ...),
//    then the shapes a kernel path or a model needs (decode GEMVs, Gemma's 2304 and head_dim 256, Llama 3's
//    positions). Case names keep the form "<op> [flags] <dims>", so the names of the shapes listed before the
//    generators existed are unchanged.
//  - Attention's generator adds both paths (in-house and cuDNN) of the same shapes; cuDNN skips what it rejects.
#include "testing/harness.h"

#if TANDEM_WITH_CUDA
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <functional>
#include <initializer_list>
#include <limits>
#include <string>
#include <string_view>
#include <tuple>
#include <utility>
#include <vector>

#include "core/cuda/context.h"
#include "kernels/cpu/adamw.h"
#include "kernels/cpu/attention.h"
#include "kernels/cpu/cross_entropy.h"
#include "kernels/cpu/dropout.h"
#include "kernels/cpu/elementwise.h"
#include "kernels/cpu/embedding.h"
#include "kernels/cpu/matmul.h"
#include "kernels/cpu/mxfp4.h"
#include "kernels/cpu/rmsnorm.h"
#include "kernels/cpu/rope.h"
#include "kernels/cpu/swiglu.h"
#include "kernels/cuda/adamw.h"
#include "kernels/cuda/attention.h"
#include "kernels/cuda/cross_entropy.h"
#include "kernels/cuda/cudnn_attention.h"
#include "kernels/cuda/dropout.h"
#include "kernels/cuda/elementwise.h"
#include "kernels/cuda/embedding.h"
#include "kernels/cuda/matmul.h"
#include "kernels/cuda/mxfp4.h"
#include "kernels/cuda/rmsnorm.h"
#include "kernels/cuda/rope.h"
#include "kernels/cuda/swiglu.h"
#include "tandem/model_config.h"
#include "tandem/safetensors.h"

namespace tandem::testing {
namespace {

int64_t numel(int a, int b) {
    return int64_t(a) * int64_t(b);
}

// ---------------------------------------------------------------------------------------------------------
// Embedding
// ---------------------------------------------------------------------------------------------------------

void embedding_case(Check& c, int N, int C, int V) {
    const auto table = c.rng.bf16_values(numel(V, C), 1.0f);
    std::vector<int32_t> ids(static_cast<size_t>(N));
    for (auto& id : ids) id = c.rng.below(V);
    ids[size_t(N - 1)] = V - 1;   // the table's last row
    if (N >= 3) ids[2] = ids[0];  // a repeated id: backward adds both rows
    const auto d_table = dev_bf16(table);
    const auto d_ids = dev_i32(ids);

    std::vector<float> want(size_t(numel(N, C)));
    cpu::embedding_forward(want.data(), ids.data(), table.data(), N, C, V);
    const auto d_out = poisoned<bf16>(numel(N, C));
    cuda::embedding_forward(d_out.p(), d_ids.p(), d_table.p(), N, C, V);
    c.tensor("out", get(d_out), want, kTolExact);

    // dtable is fp32 and the bf16 dout is exact in fp32: only the summation order may differ.
    const auto dout = c.rng.bf16_values(numel(N, C), 1.0f);
    std::vector<float> inc(size_t(numel(V, C)), 0.0f);
    cpu::embedding_backward(inc.data(), dout.data(), ids.data(), N, C, V);
    const auto init = c.initial(inc, false);
    auto want_d = init;
    cpu::embedding_backward(want_d.data(), dout.data(), ids.data(), N, C, V);
    const auto d_dtable = dev_f32(init);
    const auto d_dout = dev_bf16(dout);
    cuda::embedding_backward(d_dtable.p(), d_dout.p(), d_ids.p(), N, C, V);
    c.tensor("dtable", get(d_dtable), want_d, kTolF32, &init);
}

// ---------------------------------------------------------------------------------------------------------
// RMSNorm
// ---------------------------------------------------------------------------------------------------------

constexpr float kEps = 1e-6f;

std::vector<float> shifted(std::vector<float> v, float by) {
    for (float& x : v) x += by;
    return v;
}

// offset: Gemma's (1 + w) norms (weights near 0).
void rmsnorm_forward_case(Check& c, int N, int C, bool in_place, float offset = 0.0f) {
    const auto inp = c.rng.bf16_values(numel(N, C), 2.0f);
    auto w = c.rng.norm_weight(C);
    if (offset != 0.0f) w = round_bf16(shifted(w, -offset));
    std::vector<float> want(size_t(numel(N, C))), want_rstd(static_cast<size_t>(N));
    cpu::rmsnorm_forward(want.data(), want_rstd.data(), inp.data(), w.data(), N, C, kEps, offset);
    const auto d_inp = dev_bf16(inp);
    const auto d_w = dev_bf16(w);
    const auto d_out = poisoned<bf16>(in_place ? 0 : numel(N, C));
    const auto d_rstd = poisoned<float>(N);
    bf16* out = in_place ? d_inp.p() : d_out.p();
    cuda::rmsnorm_forward(out, d_rstd.p(), d_inp.p(), d_w.p(), N, C, kEps, offset);
    c.tensor("out", get(out, numel(N, C)), want, kTolBf16);
    c.tensor("rstd", get(d_rstd), want_rstd, kTolBf16);
}

// CPU twin: cpu::add, the sum rounded to bf16 (what the residual stream holds), then cpu::rmsnorm_forward.
void residual_rmsnorm_case(Check& c, int N, int C, bool residual_is_a, float offset = 0.0f) {
    const auto a = c.rng.bf16_values(numel(N, C), 2.0f);
    const auto b = c.rng.bf16_values(numel(N, C), 2.0f);
    auto w = c.rng.norm_weight(C);
    if (offset != 0.0f) w = round_bf16(shifted(w, -offset));
    std::vector<float> res(size_t(numel(N, C))), want(res.size()), want_rstd(static_cast<size_t>(N));
    cpu::add(res.data(), a.data(), b.data(), numel(N, C));
    res = round_bf16(std::move(res));
    cpu::rmsnorm_forward(want.data(), want_rstd.data(), res.data(), w.data(), N, C, kEps, offset);
    const auto d_a = dev_bf16(a);
    const auto d_b = dev_bf16(b);
    const auto d_w = dev_bf16(w);
    const auto d_res = poisoned<bf16>(residual_is_a ? 0 : numel(N, C));
    const auto d_out = poisoned<bf16>(numel(N, C));
    const auto d_rstd = poisoned<float>(N);
    bf16* residual = residual_is_a ? d_a.p() : d_res.p();
    cuda::residual_rmsnorm_forward(residual, d_out.p(), d_rstd.p(), d_a.p(), d_b.p(), d_w.p(), N, C, kEps, offset);
    c.tensor("residual", get(residual, numel(N, C)), res, kTolBf16);
    c.tensor("out", get(d_out), want, kTolBf16);
    c.tensor("rstd", get(d_rstd), want_rstd, kTolBf16);
}

void rmsnorm_backward_case(Check& c, int N, int C, bool with_dweight, float offset = 0.0f) {
    const auto inp = c.rng.bf16_values(numel(N, C), 2.0f);
    auto w = c.rng.norm_weight(C);
    if (offset != 0.0f) w = round_bf16(shifted(w, -offset));
    std::vector<float> fwd(size_t(numel(N, C))), rstd(static_cast<size_t>(N));
    cpu::rmsnorm_forward(fwd.data(), rstd.data(), inp.data(), w.data(), N, C, kEps, offset);
    const auto dout = c.rng.bf16_values(numel(N, C), 1.0f);

    std::vector<float> inc_dinp(size_t(numel(N, C)), 0.0f), inc_dw(size_t(C), 0.0f);
    cpu::rmsnorm_backward(inc_dinp.data(), with_dweight ? inc_dw.data() : nullptr, dout.data(), inp.data(), w.data(),
                          rstd.data(), N, C, offset);
    const auto init_dinp = c.initial(inc_dinp, true);
    const auto init_dw = c.initial(inc_dw, false);
    auto want_dinp = init_dinp, want_dw = init_dw;
    cpu::rmsnorm_backward(want_dinp.data(), with_dweight ? want_dw.data() : nullptr, dout.data(), inp.data(), w.data(),
                          rstd.data(), N, C, offset);

    const auto d_inp = dev_bf16(inp);
    const auto d_w = dev_bf16(w);
    const auto d_rstd = dev_f32(rstd);
    const auto d_dout = dev_bf16(dout);
    const auto d_dinp = dev_bf16(init_dinp);
    const auto d_dw = dev_f32(init_dw);
    cuda::rmsnorm_backward(d_dinp.p(), with_dweight ? d_dw.p() : nullptr, d_dout.p(), d_inp.p(), d_w.p(), d_rstd.p(), N,
                           C, offset);
    c.tensor("dinp", get(d_dinp), want_dinp, kTolBf16, &init_dinp);
    if (with_dweight) c.tensor("dweight", get(d_dw), want_dw, kTolBf16, &init_dw);
}

// ---------------------------------------------------------------------------------------------------------
// RoPE
// ---------------------------------------------------------------------------------------------------------

// Positions restarting at 0 for each sample, as the packer makes them.
std::vector<int32_t> packed_positions(const std::vector<int>& lengths) {
    std::vector<int32_t> pos;
    for (int len : lengths)
        for (int i = 0; i < len; ++i) pos.push_back(i);
    return pos;
}

// rotary: the rotated channels (partial rotary: fewer than D; 0: all of D).
void rope_case(Check& c, int H, int D, double theta, const RopeScaling& scaling, std::vector<int32_t> positions,
               int max_pos, bool in_place, int rotary = 0) {
    const int T = int(positions.size());
    const cpu::RopeTable table = cpu::rope_table_build(rotary > 0 ? rotary : D, theta, scaling, max_pos);
    const Dev<char> d_table(int64_t(cuda::rope_table_bytes(table)));
    const cuda::RopeTableDevice td = cuda::rope_table_upload(table, d_table.p());
    const auto d_pos = dev_i32(positions);
    const int64_t n = int64_t(T) * H * D;

    const auto inp = c.rng.bf16_values(n, 1.0f);
    std::vector<float> want(static_cast<size_t>(n));
    cpu::rope_forward(want.data(), inp.data(), positions.data(), table, T, H, D);
    const auto d_inp = dev_bf16(inp);
    const auto d_out = poisoned<bf16>(in_place ? 0 : n);
    bf16* out = in_place ? d_inp.p() : d_out.p();
    cuda::rope_forward(out, d_inp.p(), d_pos.p(), td, T, H, D);
    c.tensor("out", get(out, n), want, kTolBf16);

    const auto dout = c.rng.bf16_values(n, 1.0f);
    std::vector<float> want_d(static_cast<size_t>(n));
    cpu::rope_backward(want_d.data(), dout.data(), positions.data(), table, T, H, D);
    const auto d_dout = dev_bf16(dout);
    const auto d_dinp = poisoned<bf16>(in_place ? 0 : n);
    bf16* dinp = in_place ? d_dout.p() : d_dinp.p();
    cuda::rope_backward(dinp, d_dout.p(), d_pos.p(), td, T, H, D);
    c.tensor("dinp", get(dinp, n), want_d, kTolBf16);
}

// ---------------------------------------------------------------------------------------------------------
// SwiGLU
// ---------------------------------------------------------------------------------------------------------

// The gated activations: SwiGLU, GeGLU, and gpt-oss's clamped SwiGLU (limit 2 here, so that the uniform(-4, 4)
// gates and (-2, 2) ups are cut by both clamps; alpha 1.702).
enum class Gated { Silu, Gelu, Clamped };
constexpr float kClampAlpha = 1.702f, kClampLimit = 2.0f;

void gated_forward_cpu(Gated k, float* out, const float* gate, const float* up, int N, int F) {
    if (k == Gated::Clamped) return cpu::clamped_swiglu_forward(out, gate, up, N, F, kClampAlpha, kClampLimit);
    (k == Gated::Gelu ? cpu::geglu_forward : cpu::swiglu_forward)(out, gate, up, N, F);
}
void gated_forward_cuda(Gated k, bf16* out, const bf16* gate, const bf16* up, int N, int F) {
    if (k == Gated::Clamped) return cuda::clamped_swiglu_forward(out, gate, up, N, F, kClampAlpha, kClampLimit);
    (k == Gated::Gelu ? cuda::geglu_forward : cuda::swiglu_forward)(out, gate, up, N, F);
}
void gated_backward_cpu(Gated k, float* dgate, float* dup, const float* dout, const float* gate, const float* up, int N,
                        int F) {
    if (k == Gated::Clamped)
        return cpu::clamped_swiglu_backward(dgate, dup, dout, gate, up, N, F, kClampAlpha, kClampLimit);
    (k == Gated::Gelu ? cpu::geglu_backward : cpu::swiglu_backward)(dgate, dup, dout, gate, up, N, F);
}
void gated_backward_cuda(Gated k, bf16* dgate, bf16* dup, const bf16* dout, const bf16* gate, const bf16* up, int N,
                         int F) {
    if (k == Gated::Clamped)
        return cuda::clamped_swiglu_backward(dgate, dup, dout, gate, up, N, F, kClampAlpha, kClampLimit);
    (k == Gated::Gelu ? cuda::geglu_backward : cuda::swiglu_backward)(dgate, dup, dout, gate, up, N, F);
}

void swiglu_case(Check& c, int N, int F, bool in_place, Gated kind = Gated::Silu) {
    const int64_t n = numel(N, F);
    const auto gate = c.rng.bf16_values(n, 4.0f);
    const auto up = c.rng.bf16_values(n, 2.0f);
    std::vector<float> want(static_cast<size_t>(n));
    gated_forward_cpu(kind, want.data(), gate.data(), up.data(), N, F);
    {
        const auto d_gate = dev_bf16(gate);
        const auto d_up = dev_bf16(up);
        const auto d_out = poisoned<bf16>(in_place ? 0 : n);
        bf16* out = in_place ? d_gate.p() : d_out.p();
        gated_forward_cuda(kind, out, d_gate.p(), d_up.p(), N, F);
        c.tensor("out", get(out, n), want, kTolBf16);
    }
    const auto dout = c.rng.bf16_values(n, 1.0f);
    std::vector<float> want_dgate(static_cast<size_t>(n)), want_dup(static_cast<size_t>(n));
    gated_backward_cpu(kind, want_dgate.data(), want_dup.data(), dout.data(), gate.data(), up.data(), N, F);
    const auto d_gate = dev_bf16(gate);
    const auto d_up = dev_bf16(up);
    const auto d_dout = dev_bf16(dout);
    const auto d_dgate = poisoned<bf16>(in_place ? 0 : n);
    const auto d_dup = poisoned<bf16>(in_place ? 0 : n);
    bf16* dgate = in_place ? d_gate.p() : d_dgate.p();
    bf16* dup = in_place ? d_up.p() : d_dup.p();
    gated_backward_cuda(kind, dgate, dup, d_dout.p(), d_gate.p(), d_up.p(), N, F);
    c.tensor("dgate", get(dgate, n), want_dgate, kTolBf16);
    c.tensor("dup", get(dup, n), want_dup, kTolBf16);
}

// attention_sinks on an attention output and its log-sum-exp (lse of the order of the sinks: both matter).
void attention_sinks_case(Check& c, int T, int Hq, int D) {
    const int64_t n = int64_t(T) * Hq * D;
    auto out = c.rng.bf16_values(n, 1.0f);
    auto lse = c.rng.f32_values(int64_t(Hq) * T, 2.0f);
    const auto sinks = c.rng.bf16_values(Hq, 2.0f);
    const auto d_out = dev_bf16(out);
    const auto d_lse = dev_f32(lse);
    const auto d_sinks = dev_bf16(sinks);
    cpu::attention_sinks(out.data(), lse.data(), sinks.data(), T, Hq, D);
    cuda::attention_sinks(d_out.p(), d_lse.p(), d_sinks.p(), T, Hq, D);
    c.tensor("out", get(d_out), out, kTolBf16);
    c.tensor("lse", get(d_lse), lse, kTolF32);
}

// dequantize_mxfp4: random codes, scales 2^-17 .. 2^8, exact (the values are bf16 numbers).
void dequantize_mxfp4_case(Check& c, int64_t G, int R, int C, bool interleaved) {
    const int64_t code_bytes = G * R * C / 2, nscales = G * R * C / 32, n = G * R * C;
    std::vector<uint8_t> codes(static_cast<size_t>(code_bytes)), scales(static_cast<size_t>(nscales));
    for (auto& b : codes) b = uint8_t(c.rng.u64());
    for (auto& s : scales) s = uint8_t(110 + c.rng.below(26));
    std::vector<float> want(static_cast<size_t>(n));
    cpu::dequantize_mxfp4(want.data(), codes.data(), scales.data(), G, R, C, interleaved);
    Dev<uint8_t> d_codes(code_bytes), d_scales(nscales);
    copy_to_device(d_codes.p(), codes.data(), codes.size());
    copy_to_device(d_scales.p(), scales.data(), scales.size());
    const auto out = poisoned<bf16>(n);
    cuda::dequantize_mxfp4(out.p(), d_codes.p(), d_scales.p(), G, R, C, interleaved);
    c.tensor("out", get(out), want, kTolExact);
}

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

struct Emb {
    int N, C, V;
    bool operator==(const Emb&) const = default;
};

// offset: Gemma's (1 + w) weights. flag: in-place (forward), the residual written into a
// (residual_rmsnorm_forward), no dweight (backward).
struct Norm {
    int N, C;
    bool flag = false;
    float offset = 0.0f;
    bool operator==(const Norm&) const = default;
};

void add_norm_cases(CaseList& cs, const char* op, const char* flag_word, const std::vector<Norm>& shapes,
                    void (*body)(Check&, int, int, bool, float), bool flag_means_off) {
    for (const Norm& s : shapes) {
        const std::string name = std::string(op) + " " + (s.flag ? std::string(flag_word) + " " : "") +
                                 (s.offset != 0.0f ? "(1+w) " : "") + shape_label({{"N", s.N}, {"C", s.C}});
        const bool flag = flag_means_off ? !s.flag : s.flag;
        cs.add(name, [=](Check& c) { body(c, s.N, s.C, flag, s.offset); });
    }
}

}  // namespace

// One row, one channel, and an odd channel count above a few vectors; the shapes of several kernel paths
// (C of 4096 and 5000: one block per row; N of 1696 and 848: many rows of a short C) and Gemma's (1 + w).
void gen_rmsnorm_forward(CaseList& cs) {
    const Norm base{37, 96};
    std::vector<Norm> v{base};
    vary(v, base, &Norm::N, {1});
    vary(v, base, &Norm::C, {1, 4099});
    for (Norm s : {Norm{64, 200}, {7, 37}, {17, 4096}, {9, 5000}, {1696, 128}, {848, 64}}) add_unique(v, s);
    vary(v, base, &Norm::flag, {true});
    vary(v, base, &Norm::offset, {1.0f});
    add_unique(v, Norm{17, 2304, false, 1.0f});
    add_norm_cases(cs, "rmsnorm_forward", "in-place", v, rmsnorm_forward_case, false);
}

void gen_residual_rmsnorm_forward(CaseList& cs) {
    const Norm base{37, 96};
    std::vector<Norm> v{base};
    vary(v, base, &Norm::N, {1});
    vary(v, base, &Norm::C, {1});
    for (Norm s : {Norm{7, 37}, {17, 4096}}) add_unique(v, s);
    vary(v, base, &Norm::flag, {true});
    vary(v, base, &Norm::offset, {1.0f});
    add_norm_cases(cs, "residual_rmsnorm_forward", "residual=a", v, residual_rmsnorm_case, false);
}

void gen_rmsnorm_backward(CaseList& cs) {
    const Norm base{37, 96};
    std::vector<Norm> v{base};
    vary(v, base, &Norm::N, {1});
    vary(v, base, &Norm::C, {1});
    for (Norm s : {Norm{64, 200}, {7, 37}, {17, 4096}, {1696, 128}}) add_unique(v, s);
    vary(v, base, &Norm::flag, {true});
    vary(v, base, &Norm::offset, {1.0f});
    add_unique(v, Norm{1696, 256, true, 1.0f});
    add_norm_cases(cs, "rmsnorm_backward", "no dweight", v, rmsnorm_backward_case, true);
}

// One row, one channel, an odd channel count, one row of the table (V = 1).
void gen_embedding(CaseList& cs) {
    const Emb base{37, 96, 101};
    std::vector<Emb> v{base};
    for (Emb s : {Emb{130, 200, 53}, {5, 37, 7}}) add_unique(v, s);
    vary(v, base, &Emb::N, {1});
    vary(v, base, &Emb::C, {37});
    vary(v, base, &Emb::V, {1});
    for (const Emb& s : v)
        cs.add("embedding " + shape_label({{"N", s.N}, {"C", s.C}, {"V", s.V}}),
               [=](Check& c) { embedding_case(c, s.N, s.C, s.V); });
}

namespace {

enum class RopeKind { Default, Linear, Llama3 };

// Positions: packed samples of lengths 1, 17, 64, 130 (restarting at 0), or (Llama3) positions up to 16383.
struct RopeShape {
    int H, D;
    RopeKind kind = RopeKind::Default;
    bool in_place = false;
    int rotary = 0;               // partial rotary: the rotated channels (0: all of D)
    std::string_view note = {};   // the kernel path a shape is for, in its name
    bool operator==(const RopeShape&) const = default;
};

std::string rope_label(const RopeShape& s) {
    std::string l = "rope D=" + std::to_string(s.D) + " H=" + std::to_string(s.H);
    if (s.rotary > 0)
        l += " partial rotary " + std::to_string(s.rotary);
    else
        l += s.kind == RopeKind::Linear ? " linear" : s.kind == RopeKind::Llama3 ? " llama3" : " default";
    if (!s.note.empty()) l += " " + std::string(s.note);
    if (s.in_place) l += " in-place";
    return l + (s.kind == RopeKind::Llama3 ? " positions up to 16383" : " lengths=1,17,64,130");
}

}  // namespace

// One head, the smallest head (D = 2), each scaling, in place, partial rotary (Phi-4-mini: 96 of 128 channels,
// the rest pass through, copied when not in place) and its scalar path, Llama 3's long positions.
void gen_rope(CaseList& cs) {
    const RopeShape base{8, 64};
    std::vector<RopeShape> v{base};
    vary(v, base, &RopeShape::H, {1});
    vary(v, base, &RopeShape::D, {2});
    for (RopeShape s : {RopeShape{2, 128, RopeKind::Default, true}, {5, 36, RopeKind::Linear},
                        {4, 128, RopeKind::Default, false, 96}, {3, 128, RopeKind::Default, true, 96},
                        {2, 16, RopeKind::Default, false, 12, "(scalar path)"}, {4, 128, RopeKind::Llama3}})
        add_unique(v, s);
    for (const RopeShape& s : v) {
        cs.add(rope_label(s), [=](Check& c) {
            RopeScaling scaling;
            if (s.kind == RopeKind::Linear) {
                scaling.type = RopeScalingType::Linear;
                scaling.factor = 2;
            }
            if (s.kind == RopeKind::Llama3) {
                scaling.type = RopeScalingType::Llama3;
                scaling.factor = 8;
                scaling.low_freq_factor = 1;
                scaling.high_freq_factor = 4;
                scaling.original_max_position_embeddings = 8192;
                std::vector<int32_t> pos = {0, 1, 2, 17, 255, 1000, 2047, 4095, 8191, 8192, 9001, 16383};
                while (pos.size() < 77) pos.push_back(c.rng.below(16384));
                return rope_case(c, s.H, s.D, 500000.0, scaling, pos, 16384, s.in_place, s.rotary);
            }
            rope_case(c, s.H, s.D, 10000.0, scaling, packed_positions({1, 17, 64, 130}), 256, s.in_place, s.rotary);
        });
    }
}

namespace {

struct Glu {
    int N, F;
    bool in_place = false;
    bool operator==(const Glu&) const = default;
};

// The gated activations share one grid: one row, one element per row, in place; plus each one's kept shapes
// (odd sizes, a tile's worth of rows, gpt-oss's F).
void add_gated(CaseList& cs, const char* op, Gated kind, std::initializer_list<Glu> kept) {
    const Glu base{37, 200};
    std::vector<Glu> v{base};
    for (const Glu& s : kept) add_unique(v, s);
    vary(v, base, &Glu::N, {1});
    vary(v, base, &Glu::F, {1});
    vary(v, base, &Glu::in_place, {true});
    for (const Glu& s : v)
        cs.add(std::string(op) + (s.in_place ? " in-place " : " ") + shape_label({{"N", s.N}, {"F", s.F}}),
               [=](Check& c) { swiglu_case(c, s.N, s.F, s.in_place, kind); });
}

}  // namespace

void gen_swiglu(CaseList& cs) {
    add_gated(cs, "swiglu", Gated::Silu, {Glu{130, 96}, Glu{3, 37}});
}
void gen_geglu(CaseList& cs) {
    add_gated(cs, "geglu", Gated::Gelu, {Glu{130, 96}, Glu{3, 37}});
}
void gen_clamped_swiglu(CaseList& cs) {
    add_gated(cs, "clamped_swiglu", Gated::Clamped, {Glu{64, 2880}});
}

namespace {
struct Sinks {
    int T, Hq, D;
    bool operator==(const Sinks&) const = default;
};
struct Mx {
    int G, R, C;
    bool interleaved = false;
    bool operator==(const Mx&) const = default;
};
}  // namespace

// One token, one head; gpt-oss's 64 heads of 64.
void gen_attention_sinks(CaseList& cs) {
    const Sinks base{37, 8, 128};
    std::vector<Sinks> v{Sinks{300, 64, 64}, base};
    vary(v, base, &Sinks::T, {1});
    vary(v, base, &Sinks::Hq, {1});
    for (const Sinks& s : v)
        cs.add("attention_sinks " + shape_label({{"T", s.T}, {"Hq", s.Hq}, {"D", s.D}}),
               [=](Check& c) { attention_sinks_case(c, s.T, s.Hq, s.D); });
}

// The smallest tensor (one 32-value block; interleaved needs an even R), an odd R, and gpt-oss's experts.
void gen_dequantize_mxfp4(CaseList& cs) {
    std::vector<Mx> v{Mx{4, 192, 64, true}, Mx{32, 2880, 2880}};
    add_unique(v, Mx{1, 2, 32, true});
    add_unique(v, Mx{3, 7, 96});
    for (const Mx& s : v)
        cs.add("dequantize_mxfp4 " + shape_label({{"G", s.G}, {"R", s.R}, {"C", s.C}}) +
                   (s.interleaved ? " interleaved" : ""),
               [=](Check& c) { dequantize_mxfp4_case(c, s.G, s.R, s.C, s.interleaved); });
}

namespace {
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
