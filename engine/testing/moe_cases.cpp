// SPDX-FileCopyrightText: 2026 The Tandem developers
// SPDX-License-Identifier: GPL-3.0-or-later
// Self-test cases of the mixture-of-experts ops (kernels/*/moe.h), each CUDA op against its CPU twin, and their
// generators (gen_*, registered in runner.cpp; each adds an edge of one token / one expert / one channel to the
// shapes below): the router (forward, backward), the sort of the assignments by expert,
// permute / unpermute (+ backward) and the grouped GEMMs (forward, input gradient, weight gradient).
// How they compare:
//  - Exactly: the router's expert ids, the sort's order / inv / offsets, permute's copies. The router's logits
//    are drawn so that the K+1 largest of a token are more than 0.05 apart after bf16 rounding (no rounding
//    difference between the backends can reorder them); the "ties" case plants EXACT ties instead (all
//    logits equal, the two largest equal, the K-th equal to the (K+1)-th), where both backends compute
//    bit-identical probabilities for the tied experts and must both take the lower one.
//  - fp32 tolerance: the router's probabilities and weights (expf and the order of one sum differ).
//  - bf16 tolerance: everything stored in bf16, and the fp32 gradients of bf16 products (dw of unpermute, dW).
//  - The grouped GEMMs get their offsets from the CPU's sort, uploaded once: the GPU reads them on the device.
//    Shapes: odd sizes (the per-element load path), experts without rows, one expert with every row (several
//    row tiles), the gate / up halves of a fused [E, 2F, C] weight (w_stride > OUT*IN), bias with a stride
//    above OUT, alpha != 1, accumulate on and off, the LoRA shapes (IN or OUT = R), and Qwen3-MoE-sized layers
//    (T=512, E=128, K=8, 2048 <-> 768). Those let the experts' weights overlap (w_stride = 8 IN + 8 < OUT*IN):
//    every expert still multiplies by a different matrix, and the case needs 4M weights instead of 200M.
// Only with TANDEM_WITH_CUDA.
#include "testing/harness.h"

#if TANDEM_WITH_CUDA
#include <algorithm>
#include <cstdint>
#include <functional>
#include <initializer_list>
#include <numeric>
#include <string>
#include <tuple>
#include <utility>
#include <vector>

#include "kernels/cpu/moe.h"
#include "kernels/cuda/moe.h"

namespace tandem::testing {
namespace {

std::vector<int32_t> get_i32(const int32_t* p, int64_t n) {
    std::vector<int32_t> v(static_cast<size_t>(n));
    copy_to_host(v.data(), p, v.size() * sizeof(int32_t));
    return v;
}

// Integers compared exactly: the number of differing elements is the error.
void ints(Check& c, const std::string& what, const std::vector<int32_t>& got, const std::vector<int32_t>& want) {
    if (got.size() != want.size()) {
        c.fail(what, "size " + std::to_string(got.size()) + " != " + std::to_string(want.size()));
        return;
    }
    int64_t bad = 0;
    size_t first = 0;
    for (size_t i = 0; i < got.size(); ++i)
        if (got[i] != want[i] && bad++ == 0) first = i;
    c.result(what, double(bad), kTolExact,
             bad ? std::to_string(bad) + " of " + std::to_string(got.size()) + " differ, first [" +
                       std::to_string(first) + "]: " + std::to_string(got[first]) + " vs " + std::to_string(want[first])
                 : std::to_string(got.size()) + " equal");
}

// ---------------------------------------------------------------------------------------------------------
// Routing inputs
// ---------------------------------------------------------------------------------------------------------

enum class Routing { Random, Sparse, OneExpert };

std::string routing_label(Routing r) {
    return r == Routing::Sparse ? " zero-row experts" : r == Routing::OneExpert ? " one expert" : "";
}

// idx[T,K]: K distinct experts per token. Sparse: only the experts e % 3 == 1 (the others, expert 0 among
// them, get no rows; more when fewer than K remain); OneExpert: every token's first choice is expert E/2 (with
// K = 1 it takes every row and all the others none).
std::vector<int32_t> routing(Check& c, int T, int E, int K, Routing kind) {
    std::vector<int32_t> allowed;
    for (int e = 0; e < E; ++e)
        if (kind != Routing::Sparse || e % 3 == 1) allowed.push_back(e);
    for (int e = 0; int(allowed.size()) < K; ++e)
        if (e % 3 != 1) allowed.push_back(e);
    const int hot = E / 2;
    if (kind == Routing::OneExpert) std::erase(allowed, hot);
    std::vector<int32_t> idx(size_t(int64_t(T) * K)), pool;
    for (int t = 0; t < T; ++t) {
        pool = allowed;
        for (int j = 0; j < K; ++j) {
            int32_t e = hot;
            if (kind != Routing::OneExpert || j > 0) {
                const int r = c.rng.below(int32_t(pool.size()));
                e = pool[size_t(r)];
                pool[size_t(r)] = pool.back();
                pool.pop_back();
            }
            idx[size_t(int64_t(t) * K + j)] = e;
        }
    }
    return idx;
}

struct Sorted {
    std::vector<int32_t> order, inv, offsets;
};

Sorted cpu_sort(const std::vector<int32_t>& idx, int E) {
    const int N = int(idx.size());
    Sorted s{std::vector<int32_t>(size_t(N)), std::vector<int32_t>(size_t(N)), std::vector<int32_t>(size_t(E) + 1)};
    cpu::moe_sort_count(s.order.data(), s.inv.data(), s.offsets.data(), idx.data(), N, E);
    return s;
}

// Logits [T,E] whose K+1 largest are more than 0.05 apart after bf16 rounding: the K largest descend from
// [0.5, 2) in steps of [0.1, 0.4), the others lie 0.1 to 4 below the K-th; the values go to a random
// permutation of the experts.
std::vector<float> separated_logits(Check& c, int T, int E, int K) {
    std::vector<float> out(size_t(int64_t(T) * E)), vals(static_cast<size_t>(E)), sorted;
    std::vector<int32_t> perm(static_cast<size_t>(E));
    for (int t = 0; t < T; ++t) {
        for (bool ok = false; !ok;) {
            vals[0] = round_bf16(c.rng.uniform(0.5f, 2.0f));
            for (int j = 1; j < E; ++j)
                vals[size_t(j)] = round_bf16(j < K ? vals[size_t(j - 1)] - c.rng.uniform(0.1f, 0.4f)
                                                   : vals[size_t(K - 1)] - c.rng.uniform(0.1f, 4.0f));
            sorted = vals;
            std::sort(sorted.begin(), sorted.end(), std::greater<float>());
            ok = true;
            for (int j = 0; j < K && j + 1 < E; ++j) ok = ok && sorted[size_t(j)] - sorted[size_t(j + 1)] > 0.05f;
        }
        std::iota(perm.begin(), perm.end(), 0);
        for (int j = E - 1; j > 0; --j) std::swap(perm[size_t(j)], perm[size_t(c.rng.below(j + 1))]);
        for (int j = 0; j < E; ++j) out[size_t(int64_t(t) * E + perm[size_t(j)])] = vals[size_t(j)];
    }
    return out;
}

// Exact ties, by token t % 4: 0: every logit equal (the first K experts win); 1: a random expert gets the
// largest logit too; 2: an expert outside the top K gets the K-th largest (the lower of the two wins);
// 3: none. Every other value stays more than 0.05 from its neighbours.
std::vector<float> tied_logits(Check& c, int T, int E, int K) {
    std::vector<float> out = separated_logits(c, T, E, K);
    std::vector<int32_t> rank(static_cast<size_t>(E));
    for (int t = 0; t < T; ++t) {
        float* row = out.data() + int64_t(t) * E;
        std::iota(rank.begin(), rank.end(), 0);
        std::sort(rank.begin(), rank.end(), [&](int32_t a, int32_t b) { return row[a] > row[b]; });
        if (t % 4 == 0) {
            std::fill(row, row + E, 0.25f);
        } else if (t % 4 == 1 && E > 1) {
            row[rank[size_t(1 + c.rng.below(E - 1))]] = row[rank[0]];
        } else if (t % 4 == 2 && K < E) {
            row[rank[size_t(K + c.rng.below(E - K))]] = row[rank[size_t(K - 1)]];
        }
    }
    return out;
}

// ---------------------------------------------------------------------------------------------------------
// Router
// ---------------------------------------------------------------------------------------------------------

void router_case(Check& c, int T, int E, int K, bool renorm, bool ties) {
    const auto logits = ties ? tied_logits(c, T, E, K) : separated_logits(c, T, E, K);
    const int64_t nk = int64_t(T) * K, ne = int64_t(T) * E;
    std::vector<int32_t> idx(static_cast<size_t>(nk));
    std::vector<float> w(static_cast<size_t>(nk)), probs(static_cast<size_t>(ne));
    cpu::moe_router_forward(idx.data(), w.data(), probs.data(), logits.data(), T, E, K, renorm, false);
    {
        const auto d_logits = dev_bf16(logits);
        const auto d_idx = poisoned<int32_t>(nk);
        const auto d_w = poisoned<float>(nk);
        const auto d_probs = poisoned<float>(ne);
        cuda::moe_router_forward(d_idx.p(), d_w.p(), d_probs.p(), d_logits.p(), T, E, K, renorm, false);
        ints(c, "idx", get_i32(d_idx.p(), nk), idx);
        c.tensor("w", get(d_w), w, kTolF32);
        c.tensor("probs", get(d_probs), probs, kTolF32);
    }
    {
        // An injected choice (given): other experts than the router's; idx untouched, their weights.
        std::vector<int32_t> gi(static_cast<size_t>(nk));
        for (int t = 0; t < T; ++t)
            for (int j = 0; j < K; ++j) gi[size_t(t) * K + j] = (t + 3 * j + 1) % E;
        bool distinct = true;  // (t + 3j + 1) % E repeats within a token when E divides 3(j - j')
        for (int t = 0; t < T && distinct; ++t)
            for (int j = 0; j < K; ++j)
                for (int i = 0; i < j; ++i) distinct &= gi[size_t(t) * K + j] != gi[size_t(t) * K + i];
        if (distinct) {
            std::vector<int32_t> gidx = gi;
            std::vector<float> gw(static_cast<size_t>(nk)), gp(static_cast<size_t>(ne));
            cpu::moe_router_forward(gidx.data(), gw.data(), gp.data(), logits.data(), T, E, K, renorm, true);
            const auto d_logits = dev_bf16(logits);
            const auto d_idx = dev_i32(gi);
            const auto d_w = poisoned<float>(nk);
            const auto d_probs = poisoned<float>(ne);
            cuda::moe_router_forward(d_idx.p(), d_w.p(), d_probs.p(), d_logits.p(), T, E, K, renorm, true);
            ints(c, "given idx untouched", get_i32(d_idx.p(), nk), gi);
            c.tensor("given w", get(d_w), gw, kTolF32);
        }
    }
    // Backward from the CPU's forward outputs on both sides.
    const auto dw = c.rng.f32_values(nk, 1.0f);
    std::vector<float> want(static_cast<size_t>(ne));
    cpu::moe_router_backward(want.data(), dw.data(), probs.data(), idx.data(), w.data(), T, E, K, renorm, nullptr,
                             nullptr);
    const auto d_dw = dev_f32(dw), d_probs = dev_f32(probs), d_w = dev_f32(w);
    const auto d_idx = dev_i32(idx);
    const auto d_dlogits = poisoned<bf16>(ne);
    cuda::moe_router_backward(d_dlogits.p(), d_dw.p(), d_probs.p(), d_idx.p(), d_w.p(), T, E, K, renorm, nullptr,
                              nullptr);
    c.tensor("dlogits", get(d_dlogits), want, kTolBf16);
    // With the load-balancing loss's dense gradient on every row but the last two (padding).
    const auto dense = c.rng.f32_values(E, 0.5f);
    const std::vector<int32_t> real{std::max(1, T - 2)};
    cpu::moe_router_backward(want.data(), dw.data(), probs.data(), idx.data(), w.data(), T, E, K, renorm, dense.data(),
                             real.data());
    const auto d_dense = dev_f32(dense);
    const auto d_real = dev_i32(real);
    const auto d_dlogits2 = poisoned<bf16>(ne);
    cuda::moe_router_backward(d_dlogits2.p(), d_dw.p(), d_probs.p(), d_idx.p(), d_w.p(), T, E, K, renorm, d_dense.p(),
                              d_real.p());
    c.tensor("dlogits + load-balancing", get(d_dlogits2), want, kTolBf16);
}

// The load-balancing loss: two layers' statistics over the real rows, then the loss term and the dense gradient.
void aux_case(Check& c, int T, int E, int K, int real_rows) {
    const int64_t nk = int64_t(T) * K, ne = int64_t(T) * E;
    std::vector<float> stats_want(static_cast<size_t>(2 * E));
    const std::vector<int32_t> real{real_rows};
    const auto d_real = dev_i32(real);
    const auto d_stats = poisoned<float>(2 * E);
    for (int layer = 0; layer < 2; ++layer) {
        const auto logits = separated_logits(c, T, E, K);
        std::vector<int32_t> idx(static_cast<size_t>(nk));
        std::vector<float> w(static_cast<size_t>(nk)), probs(static_cast<size_t>(ne));
        cpu::moe_router_forward(idx.data(), w.data(), probs.data(), logits.data(), T, E, K, true, false);
        cpu::moe_aux_stats(stats_want.data(), probs.data(), idx.data(), real.data(), T, E, K, layer == 0);
        const auto d_probs = dev_f32(probs);
        const auto d_idx = dev_i32(idx);
        cuda::moe_aux_stats(d_stats.p(), d_probs.p(), d_idx.p(), d_real.p(), T, E, K, layer == 0);
    }
    c.tensor("stats", get(d_stats), stats_want, kTolF32);
    const std::vector<float> label{37.0f}, scale{1.0f / 60.0f};
    const auto d_label = dev_f32(label), d_scale = dev_f32(scale);
    std::vector<double> loss_want{0.25, 1.5};
    std::vector<float> dense_want(static_cast<size_t>(E));
    cpu::moe_aux_loss(dense_want.data(), loss_want.data(), stats_want.data(), real.data(), label.data(), scale.data(), E,
                      2, 0.01f, true);
    Dev<double> d_loss(2);
    const double init[2] = {0.25, 1.5};
    copy_to_device(d_loss.p(), init, sizeof init);
    const auto d_dense = poisoned<float>(E);
    cuda::moe_aux_loss(d_dense.p(), d_loss.p(), d_stats.p(), d_real.p(), d_label.p(), d_scale.p(), E, 2, 0.01f, true);
    c.tensor("dense gradient", get(d_dense), dense_want, kTolF32);
    double got[2];
    copy_to_host(got, d_loss.p(), sizeof got);
    c.scalar("loss sum", got[0], loss_want[0], kTolF32);
    c.scalar("step loss sum", got[1], loss_want[1], kTolF32);
}

// ---------------------------------------------------------------------------------------------------------
// Sort + count: exact
// ---------------------------------------------------------------------------------------------------------

void sort_case(Check& c, int T, int K, int E, Routing kind) {
    const auto idx = routing(c, T, E, K, kind);
    const int N = T * K;
    const Sorted want = cpu_sort(idx, E);
    const auto d_idx = dev_i32(idx);
    const auto d_order = poisoned<int32_t>(N);
    const auto d_inv = poisoned<int32_t>(N);
    const auto d_offsets = poisoned<int32_t>(E + 1);
    cuda::moe_sort_count(d_order.p(), d_inv.p(), d_offsets.p(), d_idx.p(), N, E);
    ints(c, "offsets", get_i32(d_offsets.p(), E + 1), want.offsets);
    ints(c, "order", get_i32(d_order.p(), N), want.order);
    ints(c, "inv", get_i32(d_inv.p(), N), want.inv);
    // Run again on the same buffers (the op writes everything; nothing depends on their old contents).
    cuda::moe_sort_count(d_order.p(), d_inv.p(), d_offsets.p(), d_idx.p(), N, E);
    ints(c, "order, second run", get_i32(d_order.p(), N), want.order);
}

// ---------------------------------------------------------------------------------------------------------
// Permute / unpermute
// ---------------------------------------------------------------------------------------------------------

void permute_case(Check& c, int T, int K, int E, int C) {
    const int N = T * K;
    const Sorted s = cpu_sort(routing(c, T, E, K, Routing::Random), E);
    const auto d_inv = dev_i32(s.inv);
    const auto x = c.rng.bf16_values(int64_t(T) * C, 2.0f);
    std::vector<float> want(size_t(int64_t(N) * C));
    cpu::moe_permute(want.data(), x.data(), s.inv.data(), T, K, C);
    const auto d_x = dev_bf16(x);
    const auto d_xs = poisoned<bf16>(int64_t(N) * C);
    cuda::moe_permute(d_xs.p(), d_x.p(), d_inv.p(), T, K, C);
    c.tensor("xs", get(d_xs), want, kTolExact);

    const auto dxs = c.rng.bf16_values(int64_t(N) * C, 1.0f);
    std::vector<float> inc(size_t(int64_t(T) * C), 0.0f);
    cpu::moe_permute_backward(inc.data(), dxs.data(), s.inv.data(), T, K, C);
    const auto init = c.initial(inc, true);
    auto want_dx = init;
    cpu::moe_permute_backward(want_dx.data(), dxs.data(), s.inv.data(), T, K, C);
    const auto d_dxs = dev_bf16(dxs);
    const auto d_dx = dev_bf16(init);
    cuda::moe_permute_backward(d_dx.p(), d_dxs.p(), d_inv.p(), T, K, C);
    c.tensor("dx", get(d_dx), want_dx, kTolBf16, &init);
}

void unpermute_case(Check& c, int T, int K, int E, int C) {
    const int N = T * K;
    const Sorted s = cpu_sort(routing(c, T, E, K, Routing::Random), E);
    const auto d_inv = dev_i32(s.inv);
    const auto ys = c.rng.bf16_values(int64_t(N) * C, 2.0f);
    std::vector<float> w(size_t(int64_t(T) * K));
    for (float& x : w) x = c.rng.uniform(0.05f, 1.0f);
    std::vector<float> want(size_t(int64_t(T) * C));
    cpu::moe_unpermute(want.data(), ys.data(), w.data(), s.inv.data(), T, K, C);
    const auto d_ys = dev_bf16(ys);
    const auto d_w = dev_f32(w);
    const auto d_out = poisoned<bf16>(int64_t(T) * C);
    cuda::moe_unpermute(d_out.p(), d_ys.p(), d_w.p(), d_inv.p(), T, K, C);
    c.tensor("out", get(d_out), want, kTolBf16);

    const auto dout = c.rng.bf16_values(int64_t(T) * C, 1.0f);
    std::vector<float> want_dys(size_t(int64_t(N) * C)), want_dw(size_t(int64_t(T) * K));
    cpu::moe_unpermute_backward(want_dys.data(), want_dw.data(), dout.data(), ys.data(), w.data(), s.inv.data(), T, K,
                                C);
    const auto d_dout = dev_bf16(dout);
    const auto d_dys = poisoned<bf16>(int64_t(N) * C);
    const auto d_dw = poisoned<float>(int64_t(T) * K);
    cuda::moe_unpermute_backward(d_dys.p(), d_dw.p(), d_dout.p(), d_ys.p(), d_w.p(), d_inv.p(), T, K, C);
    c.tensor("dys", get(d_dys), want_dys, kTolBf16);
    c.tensor("dw", get(d_dw), want_dw, kTolBf16);
}

// ---------------------------------------------------------------------------------------------------------
// Grouped GEMMs
// ---------------------------------------------------------------------------------------------------------

// How the experts' weights sit in memory: one [OUT, IN] matrix after another; the gate and up halves of a
// fused [E, 2*OUT, IN] weight (both tested); or overlapping windows (w_stride = 8 IN + 8), for the big shapes.
enum class Weights { Separate, Fused, Overlapping };

struct Grouped {
    int T, E, K, IN, OUT;
    Routing routing = Routing::Random;
    Weights weights = Weights::Separate;
    bool bias = false;
    bool accumulate = false;
    float alpha = 1.0f;
    bool fwd = true, bwd = true, wgrad = true;
};

std::string grouped_label(const Grouped& g) {
    std::string l =
        shape_label({{"T", g.T}, {"E", g.E}, {"K", g.K}, {"IN", g.IN}, {"OUT", g.OUT}}) + routing_label(g.routing);
    if (g.weights == Weights::Fused) l += " fused gate/up";
    if (g.weights == Weights::Overlapping) l += " overlapping weights";
    if (g.bias) l += " bias";
    if (g.accumulate) l += " accumulate";
    if (g.alpha != 1.0f) l += " alpha=" + g3(g.alpha);
    if (!g.wgrad) l += " (forward, backward)";
    if (!g.fwd && !g.bwd) l += " (weight grad)";
    return l;
}

void grouped_case(Check& c, const Grouped& g) {
    const int N = g.T * g.K, E = g.E, IN = g.IN, OUT = g.OUT;
    const Sorted s = cpu_sort(routing(c, g.T, E, g.K, g.routing), E);
    const int32_t* off = s.offsets.data();
    const auto d_off = dev_i32(s.offsets);
    const int64_t mat = int64_t(OUT) * IN;
    const int64_t w_stride = g.weights == Weights::Fused         ? 2 * mat
                             : g.weights == Weights::Overlapping ? 8 * int64_t(IN) + 8
                                                                 : mat;
    const auto w =
        c.rng.bf16_values((E - 1) * w_stride + (g.weights == Weights::Fused ? 2 * mat : mat), fan_in_bound(IN));
    const auto d_w = dev_bf16(w);
    const int64_t bias_stride = OUT + 5;
    const auto bias = c.rng.bf16_values(E * bias_stride, 0.5f);
    const auto d_bias = dev_bf16(bias);

    for (int half = 0; half < (g.weights == Weights::Fused ? 2 : 1); ++half) {
        const std::string tag = g.weights == Weights::Fused ? (half ? " (up half)" : " (gate half)") : "";
        const float* w_e = w.data() + half * mat;
        const bf16* d_w_e = d_w.p() + half * mat;
        if (g.fwd) {
            const auto inp = c.rng.bf16_values(int64_t(N) * IN, 1.0f);
            auto run_cpu = [&](std::vector<float>& out, bool accumulate) {
                cpu::grouped_matmul_forward(out.data(), inp.data(), w_e, w_stride, g.bias ? bias.data() : nullptr,
                                            bias_stride, off, N, IN, OUT, E, g.alpha, accumulate);
            };
            std::vector<float> inc(size_t(int64_t(N) * OUT), 0.0f);
            run_cpu(inc, false);
            const auto init = c.initial(inc, true);
            auto want = inc;
            if (g.accumulate) {
                want = init;
                run_cpu(want, true);
            }
            const auto d_inp = dev_bf16(inp);
            const auto d_out = g.accumulate ? dev_bf16(init) : poisoned<bf16>(int64_t(N) * OUT);
            cuda::grouped_matmul_forward(d_out.p(), d_inp.p(), d_w_e, w_stride, g.bias ? d_bias.p() : nullptr,
                                         bias_stride, d_off.p(), N, IN, OUT, E, g.alpha, g.accumulate);
            c.tensor("out" + tag, get(d_out), want, kTolBf16, g.accumulate ? &init : nullptr);
        }
        if (g.bwd) {
            const auto dout = c.rng.bf16_values(int64_t(N) * OUT, 1.0f);
            std::vector<float> inc(size_t(int64_t(N) * IN), 0.0f);
            cpu::grouped_matmul_backward(inc.data(), dout.data(), w_e, w_stride, off, N, IN, OUT, E, g.alpha);
            const auto init = c.initial(inc, true);
            auto want = init;
            cpu::grouped_matmul_backward(want.data(), dout.data(), w_e, w_stride, off, N, IN, OUT, E, g.alpha);
            const auto d_dout = dev_bf16(dout);
            const auto d_dinp = dev_bf16(init);
            cuda::grouped_matmul_backward(d_dinp.p(), d_dout.p(), d_w_e, w_stride, d_off.p(), N, IN, OUT, E, g.alpha);
            c.tensor("dinp" + tag, get(d_dinp), want, kTolBf16, &init);
        }
    }
    if (g.wgrad) {
        // dW_e rows padded (dw_stride = OUT*IN + 3): expert e's block starts anywhere. Experts without rows keep
        // their starting values (their increment is zero, so any change counts as error).
        const int64_t dw_stride = mat + 3;
        const auto dout = c.rng.bf16_values(int64_t(N) * OUT, 1.0f);
        const auto inp = c.rng.bf16_values(int64_t(N) * IN, 1.0f);
        std::vector<float> inc(size_t(E * dw_stride), 0.0f);
        cpu::grouped_matmul_weight_grad(inc.data(), dw_stride, dout.data(), inp.data(), off, N, IN, OUT, E, g.alpha);
        const auto init = c.initial(inc, false);
        auto want = init;
        cpu::grouped_matmul_weight_grad(want.data(), dw_stride, dout.data(), inp.data(), off, N, IN, OUT, E, g.alpha);
        const auto d_dout = dev_bf16(dout);
        const auto d_inp = dev_bf16(inp);
        const auto d_dw = dev_f32(init);
        cuda::grouped_matmul_weight_grad(d_dw.p(), dw_stride, d_dout.p(), d_inp.p(), d_off.p(), N, IN, OUT, E, g.alpha);
        c.tensor("dW", get(d_dw), want, kTolBf16, &init);
    }
}

}  // namespace

namespace {
struct Router {
    int T, E, K;
    bool renorm = true;
    bool ties = false;
    bool operator==(const Router&) const = default;
};
struct Aux {
    int T, E, K, real;
    bool operator==(const Aux&) const = default;
};
struct Sort {
    int T, K, E;
    Routing kind = Routing::Random;
    bool operator==(const Sort&) const = default;
};
struct Perm {
    int T, K, E, C;
    bool operator==(const Perm&) const = default;
};
}  // namespace

// One token, one expert (K = E = 1), K = E, renorm on and off, planted ties; Qwen3-MoE (E = 128, K = 8) and a
// 512-expert router.
void gen_moe_router(CaseList& cs) {
    const Router base{7, 5, 2};
    std::vector<Router> v{base};
    vary(v, base, &Router::renorm, {false});
    for (Router s : {Router{33, 8, 2}, {512, 128, 8}, {100, 60, 4, false}, {64, 512, 8}, {5, 4, 4}, {9, 32, 1, false}})
        add_unique(v, s);
    vary(v, base, &Router::T, {1});
    add_unique(v, Router{7, 1, 1});
    add_unique(v, Router{40, 16, 4, true, true});
    add_unique(v, Router{40, 128, 8, false, true});
    for (const Router& s : v)
        cs.add(std::string("moe_router ") + (s.ties ? "ties " : "") + shape_label({{"T", s.T}, {"E", s.E}, {"K", s.K}}) +
                   (s.renorm ? " renorm" : ""),
               [=](Check& c) { router_case(c, s.T, s.E, s.K, s.renorm, s.ties); });
}

// Padding rows (real < T), one token, K = 1, Qwen3-MoE's sizes.
void gen_moe_aux(CaseList& cs) {
    std::vector<Aux> v{Aux{33, 8, 2, 29}, Aux{512, 128, 8, 500}, Aux{7, 5, 1, 7}};
    add_unique(v, Aux{1, 8, 2, 1});
    for (const Aux& s : v)
        cs.add("moe_aux " + shape_label({{"T", s.T}, {"E", s.E}, {"K", s.K}, {"real", s.real}}),
               [=](Check& c) { aux_case(c, s.T, s.E, s.K, s.real); });
}

// One assignment to one expert; one chunk (N < E, N > E), two chunks with the histograms just fitting in
// order[] (N = 1025 with E = 512), many chunks, a million assignments; experts without rows, one expert with
// every row.
void gen_moe_sort_count(CaseList& cs) {
    std::vector<Sort> v{Sort{7, 2, 5},       {3, 1, 512},           {41, 25, 512},
                        {512, 8, 128},       {4096, 8, 128},        {131072, 8, 512},
                        {2500, 2, 64, Routing::Sparse}, {70000, 1, 8, Routing::OneExpert}, {3000, 4, 8, Routing::OneExpert}};
    add_unique(v, Sort{1, 1, 1});
    for (const Sort& s : v)
        cs.add("moe_sort_count " + shape_label({{"T", s.T}, {"K", s.K}, {"E", s.E}}) + routing_label(s.kind),
               [=](Check& c) { sort_case(c, s.T, s.K, s.E, s.kind); });
}

namespace {
// 16-byte vectors (C % 8 == 0), single elements (C = 33), one token of one channel, Qwen3-MoE's sizes.
std::vector<Perm> permute_shapes() {
    std::vector<Perm> v{Perm{7, 2, 5, 24}, {7, 2, 5, 33}, {512, 8, 128, 2048}, {100, 2, 8, 1000}};
    add_unique(v, Perm{1, 1, 2, 1});
    return v;
}
}  // namespace

void gen_moe_permute(CaseList& cs) {
    for (const Perm& s : permute_shapes())
        cs.add("moe_permute " + shape_label({{"T", s.T}, {"K", s.K}, {"E", s.E}, {"C", s.C}}),
               [=](Check& c) { permute_case(c, s.T, s.K, s.E, s.C); });
}

void gen_moe_unpermute(CaseList& cs) {
    for (const Perm& s : permute_shapes())
        cs.add("moe_unpermute " + shape_label({{"T", s.T}, {"K", s.K}, {"E", s.E}, {"C", s.C}}),
               [=](Check& c) { unpermute_case(c, s.T, s.K, s.E, s.C); });
}

void gen_grouped_matmul(CaseList& cs) {
    std::vector<Grouped> gs;
    // Small and odd: 40/24 take the 16-byte path, 33 the per-element one; tails in every dimension.
    gs.push_back({.T = 7, .E = 5, .K = 2, .IN = 40, .OUT = 24, .bias = true});
    gs.push_back({.T = 7, .E = 5, .K = 2, .IN = 33, .OUT = 24, .accumulate = true, .alpha = 0.5f});
    gs.push_back({.T = 7, .E = 5, .K = 2, .IN = 40, .OUT = 33, .bias = true, .accumulate = true});
    // The edges: one row for one expert (one 16-byte vector each way), one input and one output column.
    gs.push_back({.T = 1, .E = 1, .K = 1, .IN = 8, .OUT = 8});
    gs.push_back({.T = 5, .E = 3, .K = 1, .IN = 1, .OUT = 1, .bias = true});
    gs.push_back({.T = 100, .E = 8, .K = 2, .IN = 200, .OUT = 136, .bias = true, .alpha = 1.5f});
    gs.push_back({.T = 50, .E = 16, .K = 2, .IN = 64, .OUT = 48, .routing = Routing::Sparse});
    gs.push_back({.T = 300, .E = 4, .K = 1, .IN = 96, .OUT = 64, .routing = Routing::OneExpert, .bias = true});
    gs.push_back({.T = 300, .E = 4, .K = 1, .IN = 37, .OUT = 29, .routing = Routing::OneExpert, .accumulate = true});
    gs.push_back({.T = 37, .E = 6, .K = 2, .IN = 72, .OUT = 40, .weights = Weights::Fused, .bias = true});
    // LoRA: A (IN = C, OUT = R) and B (IN = R, OUT = C, added into the base output with alpha = scaling).
    gs.push_back({.T = 256, .E = 128, .K = 8, .IN = 2048, .OUT = 16, .alpha = 1.0f});
    gs.push_back({.T = 256, .E = 128, .K = 8, .IN = 16, .OUT = 2048, .accumulate = true, .alpha = 2.0f});
    gs.push_back({.T = 64, .E = 8, .K = 2, .IN = 1024, .OUT = 8});
    gs.push_back({.T = 64, .E = 8, .K = 2, .IN = 8, .OUT = 1024, .accumulate = true, .alpha = 0.25f});
    gs.push_back({.T = 20, .E = 5, .K = 2, .IN = 33, .OUT = 16, .routing = Routing::Sparse, .alpha = 2.0f});
    // Qwen3-MoE-sized (gate or up, and down) and Mixtral-shaped scaled down (C = 1024, F = 3584), fused gate/up.
    gs.push_back({.T = 512, .E = 128, .K = 8, .IN = 2048, .OUT = 768, .weights = Weights::Overlapping, .wgrad = false});
    gs.push_back({.T = 512,
                  .E = 128,
                  .K = 8,
                  .IN = 768,
                  .OUT = 2048,
                  .weights = Weights::Overlapping,
                  .accumulate = true,
                  .wgrad = false});
    gs.push_back({.T = 128, .E = 8, .K = 2, .IN = 1024, .OUT = 3584, .weights = Weights::Fused, .wgrad = false});
    gs.push_back({.T = 128, .E = 8, .K = 2, .IN = 3584, .OUT = 1024, .wgrad = false});
    // Enough rows per expert for the batched cuBLASLt head (kernels/cuda/expert_gemm.h: the large projections,
    // IN, OUT >= 256, >= 128 rows per expert on average): every expert past cap (random), experts without rows
    // beside full ones (zero-row experts), and one hot expert with the others under cap (their batches write the
    // dummy).
    gs.push_back({.T = 1024, .E = 8, .K = 2, .IN = 512, .OUT = 768, .wgrad = false});
    gs.push_back({.T = 1024, .E = 8, .K = 2, .IN = 768, .OUT = 512, .routing = Routing::Sparse, .accumulate = true,
                  .alpha = 0.5f, .wgrad = false});
    gs.push_back({.T = 1024, .E = 8, .K = 2, .IN = 512, .OUT = 512, .routing = Routing::OneExpert,
                  .weights = Weights::Overlapping, .wgrad = false});
    // With biases (gpt-oss): written into the chunk rows in front of the batched GEMM, or added to them.
    gs.push_back({.T = 1024, .E = 8, .K = 2, .IN = 512, .OUT = 768, .routing = Routing::OneExpert, .bias = true,
                  .wgrad = false});
    gs.push_back({.T = 1024, .E = 8, .K = 2, .IN = 768, .OUT = 512, .weights = Weights::Fused, .bias = true,
                  .accumulate = true, .alpha = 0.5f, .wgrad = false});
    // LoRA with enough rows for the batched head: A's products take every level (uneven routing, experts without
    // rows, one hot expert), B's forward and A's input gradient the widening kernel (K = R <= 64).
    gs.push_back({.T = 1024, .E = 8, .K = 2, .IN = 512, .OUT = 16, .alpha = 2.0f});
    gs.push_back({.T = 1024, .E = 8, .K = 2, .IN = 768, .OUT = 16, .routing = Routing::Sparse});
    gs.push_back({.T = 1024, .E = 8, .K = 2, .IN = 16, .OUT = 512, .routing = Routing::OneExpert, .accumulate = true,
                  .alpha = 0.5f});
    gs.push_back({.T = 1024, .E = 8, .K = 2, .IN = 64, .OUT = 520, .bias = true, .alpha = 0.5f});
    for (const Grouped& g : gs) cs.add("grouped_matmul " + grouped_label(g), [=](Check& c) { grouped_case(c, g); });
}

}  // namespace tandem::testing
#endif  // TANDEM_WITH_CUDA
