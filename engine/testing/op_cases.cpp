// SPDX-FileCopyrightText: 2026 The Tandem developers
// SPDX-License-Identifier: GPL-3.0-or-later
// The self-test's cases for the model's layer ops outside the GEMMs (embedding, RMSNorm, RoPE, the gated
// activations, attention sinks, MXFP4 dequantization), each against its fp32 twin in engine/kernels/cpu on fresh
// random inputs, and their generators (gen_*, registered in runner.cpp), which enumerate each op's shapes
// (letters: the legend in harness.h). The GEMM-family layer ops (matmul, LoRA, lm_head + cross-entropy,
// attention) are in gemm_op_cases.cpp, the ops over flat element counts in flat_op_cases.cpp. Only with
// TANDEM_WITH_CUDA.
// Decisions a reader must know:
//  - Each generator's grid is a base shape, that shape with one field at a time set to an edge value (one row,
//    one channel, an odd size, a thousand rows), each flag on the base (in place, (1+w) weights, ...), then the
//    shapes a kernel path or a model needs (Gemma's 2304, Llama 3's positions, gpt-oss's experts). Case names
//    keep the form "<op> [flags] <dims>", so the names of the shapes listed before the generators existed are
//    unchanged.
#include "testing/harness.h"

#if TANDEM_WITH_CUDA
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <initializer_list>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "kernels/cpu/attention.h"
#include "kernels/cpu/elementwise.h"
#include "kernels/cpu/embedding.h"
#include "kernels/cpu/mxfp4.h"
#include "kernels/cpu/rmsnorm.h"
#include "kernels/cpu/rope.h"
#include "kernels/cpu/swiglu.h"
#include "kernels/cuda/attention.h"
#include "kernels/cuda/embedding.h"
#include "kernels/cuda/mxfp4.h"
#include "kernels/cuda/rmsnorm.h"
#include "kernels/cuda/rope.h"
#include "kernels/cuda/swiglu.h"
#include "tandem/model_config.h"

namespace tandem::testing {
namespace {

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

// offset: Gemma's (1 + w) norms (weights near 0).
void rmsnorm_forward_case(Check& c, int N, int C, bool in_place, float offset = 0.0f) {
    const auto inp = c.rng.bf16_values(numel(N, C), 2.0f);
    const auto w = c.rng.norm_weight(C, offset);
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
    const auto w = c.rng.norm_weight(C, offset);
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
    const auto w = c.rng.norm_weight(C, offset);
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

}  // namespace tandem::testing
#endif  // TANDEM_WITH_CUDA
