// SPDX-FileCopyrightText: 2026 The Tandem developers
// SPDX-License-Identifier: GPL-3.0-or-later
// Repetition penalty and sampling on the CPU backend (see sampling.h). T = rows, V = vocabulary.
// One task per row. Scores are float (as transformers' warpers see them); softmax sums are double.
#include "kernels/cpu/sampling.h"

#include <algorithm>
#include <cmath>
#include <numeric>
#include <string>
#include <vector>

#include "core/check.h"
#include "core/random.h"

namespace tandem::cpu {

double sampling_uniform(uint64_t seed, int64_t draw) { return sampling_draw_uniform(seed, draw); }

void repetition_penalty(float* logits, const int32_t* tokens, const int32_t* row_slot, const int32_t* row_len,
                        const SamplingParams* params, int T, int V, int N, int M) {
    TANDEM_KCHECK_PTR(logits);
    TANDEM_KCHECK_PTR(tokens);
    TANDEM_KCHECK_PTR(row_slot);
    TANDEM_KCHECK_PTR(row_len);
    TANDEM_KCHECK_PTR(params);
    TANDEM_KCHECK(T > 0 && V > 0 && N > 0 && M > 0);
    for (int t = 0; t < T; t++) {
        TANDEM_KCHECK(row_slot[t] >= 0 && row_slot[t] < N);
        TANDEM_KCHECK(row_len[t] >= 0 && row_len[t] <= M);
        TANDEM_KCHECK(params[t].repetition_penalty > 0.0f);
        const int32_t* seen = tokens + static_cast<size_t>(row_slot[t]) * M;
        for (int i = 0; i < row_len[t]; i++)
            if (seen[i] < 0 || seen[i] >= V)
                throw_internal("repetition_penalty: row " + std::to_string(t) + " has id " + std::to_string(seen[i]) +
                               " outside the vocabulary of " + std::to_string(V));
    }
#pragma omp parallel for schedule(dynamic, 1)
    for (int t = 0; t < T; t++) {
        const float penalty = params[t].repetition_penalty;
        if (penalty == 1.0f) continue;
        float* x = logits + static_cast<size_t>(t) * V;
        const int32_t* seen = tokens + static_cast<size_t>(row_slot[t]) * M;
        // Gather every value first, then scatter (as transformers' gather / scatter): a repeated id is
        // penalised once.
        std::vector<float> vals(static_cast<size_t>(row_len[t]));
        for (int i = 0; i < row_len[t]; i++) {
            const float v = x[seen[i]];
            vals[static_cast<size_t>(i)] = v > 0.0f ? v / penalty : v * penalty;
        }
        for (int i = 0; i < row_len[t]; i++) x[seen[i]] = vals[static_cast<size_t>(i)];
    }
}

namespace {

// The first id of the largest value (torch.argmax).
int32_t argmax(const float* x, int V) {
    int32_t best = 0;
    for (int v = 1; v < V; v++)
        if (x[v] > x[best]) best = v;
    return best;
}

// Softmax of x over the ids with keep[v] (others 0) into p, in double; returns the largest probability.
double softmax_kept(std::vector<double>& p, const std::vector<float>& x, const std::vector<uint8_t>& keep) {
    float m = -INFINITY;
    for (size_t v = 0; v < x.size(); v++)
        if (keep[v]) m = std::max(m, x[v]);
    double sum = 0.0;
    for (size_t v = 0; v < x.size(); v++) sum += (p[v] = keep[v] ? std::exp(double(x[v]) - double(m)) : 0.0);
    double top = 0.0;
    for (size_t v = 0; v < x.size(); v++) top = std::max(top, p[v] /= sum);
    return top;
}

int32_t sample_row(float* logits, const SamplingParams& sp, int64_t draw, int V) {
    std::vector<float> x(logits, logits + V);
    for (float& s : x) s = s / sp.temperature;  // as transformers' TemperatureLogitsWarper
    std::vector<uint8_t> keep(static_cast<size_t>(V), 1);
    if (sp.top_k > 0 && sp.top_k < V) {
        std::vector<float> sorted = x;
        std::nth_element(sorted.begin(), sorted.begin() + (sp.top_k - 1), sorted.end(), std::greater<float>());
        const float kth = sorted[static_cast<size_t>(sp.top_k) - 1];
        for (int v = 0; v < V; v++)
            if (x[v] < kth) keep[v] = 0;
    }
    std::vector<double> p(static_cast<size_t>(V));
    if (sp.top_p < 1.0f) {
        softmax_kept(p, x, keep);
        std::vector<int32_t> order;  // kept ids by ascending probability (ties: ascending id, a stable sort)
        for (int v = 0; v < V; v++)
            if (keep[v]) order.push_back(v);
        std::stable_sort(order.begin(), order.end(), [&](int32_t a, int32_t b) { return x[a] < x[b]; });
        double cum = 0.0;
        for (size_t i = 0; i + 1 < order.size(); i++) {  // the last (most likely) is always kept
            cum += p[static_cast<size_t>(order[i])];
            if (cum <= 1.0 - double(sp.top_p)) keep[static_cast<size_t>(order[i])] = 0;
        }
    }
    if (sp.min_p > 0.0f) {
        const double top = softmax_kept(p, x, keep);
        for (int v = 0; v < V; v++)
            if (keep[v] && p[v] < double(sp.min_p) * top) keep[v] = 0;
    }
    softmax_kept(p, x, keep);
    const double u = sampling_uniform(sp.seed, draw);
    double cum = 0.0;
    int32_t chosen = -1, last = 0;
    for (int v = 0; v < V; v++) {
        logits[v] = static_cast<float>(p[v]);
        if (!keep[v]) continue;
        last = v;
        cum += p[v];
        if (chosen < 0 && u < cum) chosen = v;
    }
    return chosen < 0 ? last : chosen;  // u beyond a sum rounded below 1: the last kept id
}

}  // namespace

void sample_tokens(int32_t* out, float* logits, const SamplingParams* params, const int64_t* draw, int T, int V) {
    TANDEM_KCHECK_PTR(out);
    TANDEM_KCHECK_PTR(logits);
    TANDEM_KCHECK_PTR(params);
    TANDEM_KCHECK_PTR(draw);
    TANDEM_KCHECK(T > 0 && V > 0);
    for (int t = 0; t < T; t++) {
        const SamplingParams& sp = params[t];
        TANDEM_KCHECK(sp.top_k >= 0 && sp.top_p > 0.0f && sp.min_p >= 0.0f && sp.min_p <= 1.0f);
        if (!std::isfinite(sp.temperature)) throw_internal("sample_tokens: temperature is not finite");
    }
#pragma omp parallel for schedule(dynamic, 1)
    for (int t = 0; t < T; t++) {
        float* x = logits + static_cast<size_t>(t) * V;
        out[t] = params[t].temperature > 0.0f ? sample_row(x, params[t], draw[t], V) : argmax(x, V);
    }
}

}  // namespace tandem::cpu
