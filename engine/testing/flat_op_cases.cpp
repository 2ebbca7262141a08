// SPDX-FileCopyrightText: 2026 The Tandem developers
// SPDX-License-Identifier: GPL-3.0-or-later
// The self-test's cases for the ops over n flat elements: dropout (whose keep mask must match exactly), the
// elementwise ops and conversions and sum, each against its CPU twin, with their generators (gen_*, registered in
// runner.cpp); and, outside the op table, AdamW with the global gradient norm, fill_uniform (against the
// distribution) and the collectives' rank-ordered sum. Only with TANDEM_WITH_CUDA.
// Decisions a reader must know:
//  - The flat grids: one element, fewer than one 16-byte vector (7) and exactly one (8), an odd count (1001),
//    a million (the grid-stride loops), unaligned pointers (the scalar fallback), and each flag.
#include "testing/harness.h"

#if TANDEM_WITH_CUDA
#include <algorithm>
#include <array>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <functional>
#include <limits>
#include <string>
#include <utility>
#include <vector>

#include "core/cuda/context.h"
#include "kernels/cpu/adamw.h"
#include "kernels/cpu/collective.h"
#include "kernels/cpu/dropout.h"
#include "kernels/cpu/elementwise.h"
#include "kernels/cuda/adamw.h"
#include "kernels/cuda/collective.h"
#include "kernels/cuda/dropout.h"
#include "kernels/cuda/elementwise.h"
#include "tandem/safetensors.h"

namespace tandem::testing {
namespace {

// ---------------------------------------------------------------------------------------------------------
// Dropout: the keep mask must match EXACTLY (same hash on both backends)
// ---------------------------------------------------------------------------------------------------------

// Positions where got and want disagree on "dropped" (dropped_got(i) vs dropped_want(i)).
template <class G, class W>
void mask_result(Check& c, const std::string& what, int64_t n, G dropped_got, W dropped_want) {
    int64_t bad = 0, first = -1, dropped = 0;
    for (int64_t i = 0; i < n; ++i) {
        dropped += dropped_want(i);
        if (dropped_got(i) != dropped_want(i) && bad++ == 0) first = i;
    }
    c.result(what, double(bad) / double(n), kTolExact,
             bad ? std::to_string(bad) + " of " + std::to_string(n) + " elements differ, first [" +
                       std::to_string(first) + "]"
                 : std::to_string(dropped) + " of " + std::to_string(n) + " dropped on both");
}

void dropout_case(Check& c, int64_t n, double p, int layer, int module, bool in_place) {
    const uint64_t seed = c.rng.u64();
    const auto inp = c.rng.nonzero_values(n, 2.0f);
    std::vector<float> want(static_cast<size_t>(n));
    cpu::dropout_forward(want.data(), inp.data(), seed, layer, module, n, p);
    const auto d_inp = dev_bf16(inp);
    const auto d_out = poisoned<bf16>(in_place ? 0 : n);
    bf16* out = in_place ? d_inp.p() : d_out.p();
    cuda::dropout_forward(out, d_inp.p(), seed, layer, module, n, p);
    const auto got = get(out, n);
    mask_result(
        c, "forward mask", n, [&](int64_t i) { return got[size_t(i)] == 0.0f; },
        [&](int64_t i) { return want[size_t(i)] == 0.0f; });
    c.tensor("out", got, want, kTolBf16);

    // backward accumulates: an element is dropped iff it still holds its initial value
    const auto dout = c.rng.nonzero_values(n, 2.0f);
    std::vector<float> inc(size_t(n), 0.0f);
    cpu::dropout_backward(inc.data(), dout.data(), seed, layer, module, n, p);
    const auto init = c.initial(inc, true);
    auto want_d = init;
    cpu::dropout_backward(want_d.data(), dout.data(), seed, layer, module, n, p);
    const auto d_dout = dev_bf16(dout);
    const auto d_dinp = dev_bf16(init);
    cuda::dropout_backward(d_dinp.p(), d_dout.p(), seed, layer, module, n, p);
    const auto got_d = get(d_dinp);
    mask_result(
        c, "backward mask", n, [&](int64_t i) { return got_d[size_t(i)] == init[size_t(i)]; },
        [&](int64_t i) { return inc[size_t(i)] == 0.0f; });
    c.tensor("dinp", got_d, want_d, kTolBf16, &init);
}

// ---------------------------------------------------------------------------------------------------------
// AdamW + global gradient norm (fp32)
// ---------------------------------------------------------------------------------------------------------

enum class Clip { None, Inactive, Active, NonFinite };

void adamw_case(Check& c, Clip mode) {
    const std::vector<int64_t> sizes = {1, 37, 1000, 4099, 768};
    const int count = int(sizes.size());
    const int64_t total = 1 + 37 + 1000 + 4099 + 768;
    // lr * wd = 1e-3 so a missing weight decay shows at the fp32 tolerance.
    const double lr = 1e-2, b1 = 0.9, b2 = 0.999, eps = 1e-8, wd = 0.1;
    const int64_t step = 3;
    struct Host {
        std::vector<float> param, grad, m, v;
    };
    std::vector<Host> h(static_cast<size_t>(count));
    for (int i = 0; i < count; ++i) {
        const int64_t n = sizes[size_t(i)];
        h[size_t(i)].param = c.rng.f32_values(n, 1.0f);
        h[size_t(i)].grad = c.rng.f32_values(n, 0.1f);
        h[size_t(i)].m = c.rng.f32_values(n, 0.01f);
        h[size_t(i)].v = c.rng.f32_values(n, 0.1f);
        for (float& x : h[size_t(i)].v) x *= x;
    }
    if (mode == Clip::NonFinite) h[2].grad[5] = std::numeric_limits<float>::infinity();

    // CPU: clip (torch's clip_grad_norm_), then one AdamW step per tensor unless the norm is not finite.
    std::vector<Host> want = h;
    std::vector<cpu::GradSpan> spans;
    for (auto& t : want) spans.push_back({t.grad.data(), int64_t(t.grad.size())});
    const double norm0 = cpu::global_grad_norm(spans);
    const double max_norm = mode == Clip::None       ? 0.0
                            : mode == Clip::Active   ? 0.5 * norm0
                            : mode == Clip::Inactive ? 2.0 * norm0
                                                     : 1.0;
    const double norm = max_norm > 0 ? cpu::clip_grad_norm(spans, max_norm) : norm0;
    if (std::isfinite(norm))
        for (auto& t : want)
            cpu::adamw_update(t.param.data(), t.grad.data(), t.m.data(), t.v.data(), int64_t(t.param.size()), lr, b1,
                              b2, eps, wd, step);

    // GPU: tensor 1 has no bf16 copy (nullptr is allowed); the others' copies are poisoned, except when the
    // update must be skipped: then they hold the old values and must keep them.
    std::vector<Dev<float>> P, G, M, Vs;
    std::vector<Dev<bf16>> Pb;
    std::vector<cuda::AdamWTensor> desc(static_cast<size_t>(count));
    for (int i = 0; i < count; ++i) {
        const auto& t = h[size_t(i)];
        P.push_back(dev_f32(t.param));
        G.push_back(dev_f32(t.grad));
        M.push_back(dev_f32(t.m));
        Vs.push_back(dev_f32(t.v));
        Pb.push_back(mode == Clip::NonFinite ? dev_bf16(round_bf16(t.param)) : poisoned<bf16>(sizes[size_t(i)]));
        desc[size_t(i)] = {P.back().p(),    G.back().p(), M.back().p(), Vs.back().p(), i == 1 ? nullptr : Pb.back().p(),
                           sizes[size_t(i)]};
    }
    const Dev<cuda::AdamWTensor> d_desc(count);
    copy_to_device(d_desc.p(), desc.data(), desc.size() * sizeof(cuda::AdamWTensor));
    const Dev<char> ws(int64_t(cuda::grad_norm_workspace(count, total)));
    const auto d_norm = poisoned<float>(1);
    cuda::global_grad_norm(d_norm.p(), d_desc.p(), count, total, ws.p());
    cuda::adamw_update(d_desc.p(), count, total, d_norm.p(), max_norm, lr, b1, b2, eps, wd, step);
    const float got_norm = get(d_norm)[0];

    std::vector<float> got_p, got_m, got_v, got_pb, want_p, want_m, want_v, want_pb;
    for (int i = 0; i < count; ++i) {
        const auto& w = want[size_t(i)];
        const int64_t n = sizes[size_t(i)];
        auto gp = get(P[size_t(i)].p(), n), gm = get(M[size_t(i)].p(), n), gv = get(Vs[size_t(i)].p(), n);
        got_p.insert(got_p.end(), gp.begin(), gp.end());
        got_m.insert(got_m.end(), gm.begin(), gm.end());
        got_v.insert(got_v.end(), gv.begin(), gv.end());
        want_p.insert(want_p.end(), w.param.begin(), w.param.end());
        want_m.insert(want_m.end(), w.m.begin(), w.m.end());
        want_v.insert(want_v.end(), w.v.begin(), w.v.end());
        if (i == 1) continue;
        auto gb = get(Pb[size_t(i)].p(), n);
        const auto wb = round_bf16(w.param);
        got_pb.insert(got_pb.end(), gb.begin(), gb.end());
        want_pb.insert(want_pb.end(), wb.begin(), wb.end());
    }
    if (mode == Clip::NonFinite) {
        c.result("norm", std::isfinite(got_norm) ? kInf : 0.0, kTolExact,
                 "gpu " + g3(got_norm) + ", cpu " + g3(norm) + " (must be non-finite)");
        c.tensor("param unchanged", got_p, want_p, kTolExact);
        c.tensor("exp_avg unchanged", got_m, want_m, kTolExact);
        c.tensor("exp_avg_sq unchanged", got_v, want_v, kTolExact);
        c.tensor("param_bf16 unchanged", got_pb, want_pb, kTolExact);
        return;
    }
    c.scalar("norm", got_norm, norm, kTolF32);
    c.tensor("param", got_p, want_p, kTolF32);
    c.tensor("exp_avg", got_m, want_m, kTolF32);
    c.tensor("exp_avg_sq", got_v, want_v, kTolF32);
    c.tensor("param_bf16", got_pb, want_pb, kTolBf16);
}

// ---------------------------------------------------------------------------------------------------------
// Elementwise
// ---------------------------------------------------------------------------------------------------------

// offset: elements added to every pointer; 1 makes them not 16-byte aligned (the scalar fallback).
void elementwise_case(Check& c, int64_t n, int offset) {
    const int64_t cap = n + 8;
    const Dev<bf16> A(cap), B(cap), O(cap);
    const Dev<float> Af(cap), Of(cap);
    bf16* pa = A.p() + offset;
    bf16* pb = B.p() + offset;
    bf16* po = O.p() + offset;
    float* paf = Af.p() + offset;
    float* pof = Of.p() + offset;
    const auto a = c.rng.bf16_values(n, 2.0f), b = c.rng.bf16_values(n, 2.0f);
    put(pa, a);
    put(pb, b);
    const float alpha = -0.75f;
    {
        std::vector<float> want(static_cast<size_t>(n));
        cpu::add(want.data(), a.data(), b.data(), n);
        poison(po, size_t(n) * sizeof(bf16));
        cuda::add(po, pa, pb, n);
        c.tensor("add", get(po, n), want, kTolBf16);
    }
    {
        std::vector<float> want = b;
        cpu::accumulate(want.data(), a.data(), n);
        put(po, b);
        cuda::accumulate(po, pa, n);
        c.tensor("accumulate bf16", get(po, n), want, kTolBf16, &b);
    }
    {
        const auto init = c.rng.f32_values(n, 1.0f), inp = c.rng.f32_values(n, 1.0f);
        std::vector<float> want = init;
        cpu::accumulate(want.data(), inp.data(), n);
        put(pof, init);
        put(paf, inp);
        cuda::accumulate(pof, paf, n);
        c.tensor("accumulate fp32", get(pof, n), want, kTolF32, &init);
    }
    {
        std::vector<float> want = b;
        cpu::axpy(want.data(), alpha, a.data(), n);
        put(po, b);
        cuda::axpy(po, alpha, pa, n);
        c.tensor("axpy", get(po, n), want, kTolBf16, &b);
    }
    {
        std::vector<float> want = a;
        cpu::scale(want.data(), alpha, n);
        put(po, a);
        cuda::scale(po, alpha, n);
        c.tensor("scale bf16", get(po, n), want, kTolBf16);
    }
    {
        const auto x = c.rng.f32_values(n, 1.0f);
        std::vector<float> want = x;
        cpu::scale(want.data(), alpha, n);
        put(pof, x);
        cuda::scale(pof, alpha, n);
        c.tensor("scale fp32", get(pof, n), want, kTolF32);
    }
    {
        poison(po, size_t(n) * sizeof(bf16));
        cuda::copy(po, pa, n);
        c.tensor("copy", get(po, n), a, kTolExact);
    }
    {
        poison(po, size_t(n) * sizeof(bf16));
        cuda::fill(po, 0.3f, n);
        c.tensor("fill bf16", get(po, n), std::vector<float>(size_t(n), round_bf16(0.3f)), kTolExact);
        poison(pof, size_t(n) * sizeof(float));
        cuda::fill(pof, 0.3f, n);
        c.tensor("fill fp32", get(pof, n), std::vector<float>(size_t(n), 0.3f), kTolExact);
        poison(po, size_t(n) * sizeof(bf16));
        cuda::zero(po, n);
        c.tensor("zero bf16", get(po, n), std::vector<float>(size_t(n), 0.0f), kTolExact);
        poison(pof, size_t(n) * sizeof(float));
        cuda::zero(pof, n);
        c.tensor("zero fp32", get(pof, n), std::vector<float>(size_t(n), 0.0f), kTolExact);
    }
    {
        const auto x = c.rng.f32_values(n, 3.0f);  // not representable in bf16: rounding to nearest even
        put(paf, x);
        poison(po, size_t(n) * sizeof(bf16));
        cuda::to_bf16(po, paf, n);
        c.tensor("to_bf16", get(po, n), round_bf16(x), kTolExact);
        poison(pof, size_t(n) * sizeof(float));
        cuda::to_f32(pof, pa, n);
        c.tensor("to_f32", get(pof, n), a, kTolExact);
    }
    {
        const auto x = c.rng.f32_values(n, 3.0f);
        std::vector<uint16_t> half(static_cast<size_t>(n));
        std::vector<float> want(static_cast<size_t>(n));
        for (size_t i = 0; i < half.size(); ++i) {
            half[i] = f32_to_f16(x[i]);
            want[i] = round_bf16(f16_to_f32(half[i]));
        }
        copy_to_device(pb, half.data(), half.size() * sizeof(uint16_t));  // B holds fp16 bits here
        poison(po, size_t(n) * sizeof(bf16));
        cuda::f16_to_bf16(po, pb, n);
        c.tensor("f16_to_bf16", get(po, n), want, kTolExact);
    }
}

void sum_case(Check& c, int64_t n) {
    auto x = c.rng.f32_values(n, 1.0f);
    for (float& v : x) v += 0.25f;  // a sum far from 0, so the relative error means something
    double want = 0;
    for (float v : x) want += double(v);
    const auto d_x = dev_f32(x);
    const Dev<double> d_out(1);
    poison(d_out.p(), d_out.bytes());
    cuda::sum(d_out.p(), d_x.p(), n, false);
    double got = 0;
    copy_to_host(&got, d_out.p(), sizeof got);
    c.scalar("sum", got, want, kTolF32);

    const double init = 12.5;
    copy_to_device(d_out.p(), &init, sizeof init);
    cuda::sum(d_out.p(), d_x.p(), n, true);
    copy_to_host(&got, d_out.p(), sizeof got);
    c.scalar("sum accumulate (increment)", got - init, want, kTolF32);
}

// No CPU twin: checks range, moments, determinism and the seed.
void fill_uniform_case(Check& c) {
    const int64_t n = 100003;
    const float bound = 0.05f;
    const uint64_t seed = c.rng.u64();
    auto draw = [&](uint64_t s) {
        const auto d = poisoned<bf16>(n);
        cuda::fill_uniform(d.p(), n, s, bound);
        return get(d);
    };
    const auto x = draw(seed), y = draw(seed), z = draw(seed + 1);
    int64_t out_of_range = 0;
    double sum = 0, sq = 0;
    for (float v : x) {
        // bf16 rounding may carry a value just below the bound onto it
        if (!std::isfinite(v) || std::fabs(v) > round_bf16(bound)) ++out_of_range;
        sum += v;
        sq += double(v) * v;
    }
    c.result(
        "range", double(out_of_range) / double(n), kTolExact,
        std::to_string(out_of_range) + " of " + std::to_string(n) + " outside [-" + g3(bound) + ", " + g3(bound) + "]");
    const double mean = sum / double(n), sd = std::sqrt(std::max(0.0, sq / double(n) - mean * mean));
    const double sd_want = bound / std::sqrt(3.0);
    c.result("moments", std::max(std::fabs(mean) / sd_want, std::fabs(sd / sd_want - 1.0)), 0.02,
             "mean " + g3(mean) + ", std " + g3(sd) + " (uniform: 0, " + g3(sd_want) + ")");
    c.tensor("same seed, same values", y, x, kTolExact);
    c.result("another seed, other values", x == z ? 1.0 : 0.0, kTolExact, x == z ? "identical" : "different");
}
}  // namespace

// The rank-ordered sum of the peer communicator: three buffers, each rank's share summed into all of them on the
// compute stream, against the CPU twin on the same values (fp32 and double; bit for bit: the same adds in the same
// order).
void sum_ranks_case(Check& c, int ranks, size_t n) {
    std::vector<std::vector<float>> f(static_cast<size_t>(ranks));
    std::vector<std::vector<double>> d(static_cast<size_t>(ranks));
    for (int r = 0; r < ranks; ++r) {
        f[size_t(r)] = c.rng.f32_values(int64_t(n), 1.0f);
        for (float x : c.rng.f32_values(int64_t(n), 3.0f)) d[size_t(r)].push_back(double(x) / 3.0);
    }
    std::vector<Dev<float>> df;
    std::vector<Dev<double>> dd;
    std::array<float*, cpu::kMaxCollectiveRanks> pf{}, hf{};
    std::array<double*, cpu::kMaxCollectiveRanks> pd{}, hd{};
    for (int r = 0; r < ranks; ++r) {
        df.push_back(dev_f32(f[size_t(r)]));
        dd.emplace_back(int64_t(n));
        copy_to_device(dd.back().p(), d[size_t(r)].data(), n * sizeof(double));
    }
    for (int r = 0; r < ranks; ++r) {
        pf[size_t(r)] = df[size_t(r)].p();
        pd[size_t(r)] = dd[size_t(r)].p();
        hf[size_t(r)] = f[size_t(r)].data();
        hd[size_t(r)] = d[size_t(r)].data();
    }
    const size_t per = (n + size_t(ranks) - 1) / size_t(ranks);
    for (int r = 0; r < ranks; ++r) {
        const size_t lo = std::min(n, per * size_t(r)), hi = std::min(n, lo + per);
        cuda::sum_ranks(pf.data(), ranks, lo, hi, stream());
        cuda::sum_ranks(pd.data(), ranks, lo, hi, stream());
        cpu::sum_ranks(hf.data(), ranks, lo, hi);
        cpu::sum_ranks(hd.data(), ranks, lo, hi);
    }
    for (int r = 0; r < ranks; ++r) {
        c.tensor("fp32 rank " + std::to_string(r), get(df[size_t(r)]), f[size_t(r)], kTolExact);
        std::vector<double> back(n);
        copy_to_host(back.data(), dd[size_t(r)].p(), n * sizeof(double));
        size_t differ = 0;
        for (size_t i = 0; i < n; ++i) differ += std::memcmp(&back[i], &d[size_t(r)][i], sizeof(double)) != 0;
        c.result("double rank " + std::to_string(r), double(differ), 0.0,
                 std::to_string(differ) + " of " + std::to_string(n) + " differ from the CPU twin");
    }
}

namespace {
struct Drop {
    int64_t n;
    double p = 0.1;
    int layer = 0, module = 0;
    bool in_place = false;
    bool operator==(const Drop&) const = default;
};
struct Flat {
    int64_t n;
    int offset = 0;  // 1: pointers not 16-byte aligned
    bool operator==(const Flat&) const = default;
};
}  // namespace

// One element, fewer than a vector, a million (the grid-stride loop), each p, layer and module in the hash, in
// place.
void gen_dropout(CaseList& cs) {
    const Drop base{1001};
    std::vector<Drop> v{base, Drop{65539, 0.5, 3, 6}, Drop{4099, 0.3, 1, 2, true}, Drop{(1 << 20) + 5, 0.1, 27, 4}};
    vary(v, base, &Drop::n, {int64_t(1), int64_t(7)});
    for (const Drop& s : v) {
        std::string l = std::string("dropout ") + (s.in_place ? "in-place " : "") + "n=" + std::to_string(s.n) +
                        " p=" + g3(s.p);
        if (s.layer || s.module) l += " layer=" + std::to_string(s.layer) + " module=" + std::to_string(s.module);
        cs.add(l, [=](Check& c) { dropout_case(c, s.n, s.p, s.layer, s.module, s.in_place); });
    }
}

// One element, exactly one 16-byte vector, an odd count, a million, and unaligned pointers (the scalar path).
void gen_elementwise(CaseList& cs) {
    const Flat base{1001};
    std::vector<Flat> v{base};
    vary(v, base, &Flat::n, {int64_t((1 << 20) + 3), int64_t(1), int64_t(8)});
    vary(v, base, &Flat::offset, {1});
    for (const Flat& s : v)
        cs.add(std::string("elementwise ") + (s.offset ? "unaligned " : "") + "n=" + std::to_string(s.n),
               [=](Check& c) { elementwise_case(c, s.n, s.offset); });
}

// One element, a block's worth (1024), an odd count, four million (several passes).
void gen_sum(CaseList& cs) {
    for (int64_t n : {int64_t(1), int64_t(1001), int64_t((1 << 22) + 7), int64_t(1024)})
        cs.add("sum n=" + std::to_string(n), [=](Check& c) { sum_case(c, n); });
}

// Outside the op table: the optimizer's two forms differ by design (backend/backend.h). Four clip modes.
void gen_adamw(CaseList& cs) {
    cs.add("adamw no clip", [](Check& c) { adamw_case(c, Clip::None); });
    cs.add("adamw clip inactive", [](Check& c) { adamw_case(c, Clip::Inactive); });
    cs.add("adamw clip active", [](Check& c) { adamw_case(c, Clip::Active); });
    cs.add("adamw non-finite grad skips the update", [](Check& c) { adamw_case(c, Clip::NonFinite); });
}

void gen_fill_uniform(CaseList& cs) {
    cs.add("fill_uniform", [](Check& c) { fill_uniform_case(c); });
}

void gen_sum_ranks(CaseList& cs) {
    cs.add("sum_ranks ranks=3 n=100003", [](Check& c) { sum_ranks_case(c, 3, 100003); });
    cs.add("sum_ranks ranks=2 n=1", [](Check& c) { sum_ranks_case(c, 2, 1); });
}

}  // namespace tandem::testing
#endif  // TANDEM_WITH_CUDA
