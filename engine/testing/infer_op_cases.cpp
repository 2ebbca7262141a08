// SPDX-FileCopyrightText: 2026 The Tandem developers
// SPDX-License-Identifier: GPL-3.0-or-later
// Self-test cases of inference's ops (kernels/*/kv_cache, kernels/*/sampling), each CUDA op against its CPU
// twin, with their generators (gen_*, registered in runner.cpp; sampling outside the op table): kv_cache_write
// exactly; decode_attention at the bf16 tolerance (one head on a one-position cache, GQA, MQA, groups wider than
// one block's 8 heads, windows, soft-caps, several slots and rows per slot, caches of a few thousand positions,
// head dims 64 / 96 / 128 / 256 and an odd one for the scalar path), both without a workspace (the op
// table's call) and with the split-K workspace; repetition_penalty exactly; sample_tokens at V = 151936:
// greedy ids exact with planted ties, and seeded sampling (temperature, top-k, top-p, min-p and mixes) the
// same ids as the CPU with the same distribution (fp32 tolerance).
// How sampling is compared: the GPU sums probabilities in double in another order than the CPU, so a row
// could differ where u, or top-p's cut, falls within rounding (~1e-16) of a cumulative sum. With the random
// logits used here the gaps are ~1e-6 or more, so any differing id is reported as a failure; the "ties" case
// (integer logits, many equal probabilities) is the one where a rounding-decided cut is conceivable.
// Only with TANDEM_WITH_CUDA.
#include "testing/harness.h"

#if TANDEM_WITH_CUDA
#include <cmath>
#include <cstdint>
#include <set>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "kernels/cpu/kv_cache.h"
#include "kernels/cpu/sampling.h"
#include "kernels/cuda/kv_cache.h"
#include "kernels/cuda/sampling.h"

namespace tandem::testing {
namespace {

template <class T>
Dev<T> upload(const std::vector<T>& v) {
    Dev<T> d(int64_t(v.size()));
    if (!v.empty()) copy_to_device(d.p(), v.data(), v.size() * sizeof(T));
    return d;
}

template <class T>
std::vector<T> download(const T* p, int64_t n) {
    std::vector<T> v(static_cast<size_t>(n));
    if (n > 0) copy_to_host(v.data(), p, size_t(n) * sizeof(T));
    return v;
}

// Rows: T (slot, position) pairs, distinct when `distinct`; the first row sits at position max_pos - 1
// (the longest), and every row's position is below max_pos.
void make_rows(Check& c, int T, int N, int max_pos, bool distinct, std::vector<int32_t>& slot,
               std::vector<int32_t>& pos) {
    std::set<std::pair<int, int>> used;
    slot.clear();
    pos.clear();
    while (int(slot.size()) < T) {
        const int s = c.rng.below(N);
        const int p = slot.empty() ? max_pos - 1 : c.rng.below(max_pos);
        if (distinct && !used.insert({s, p}).second) continue;
        slot.push_back(s);
        pos.push_back(p);
    }
}

// ---------------------------------------------------------------------------------------------------------
// kv_cache_write: exact
// ---------------------------------------------------------------------------------------------------------

void kv_cache_write_case(Check& c, int T, int N, int L, int M, int KV, int layer) {
    const int64_t n = int64_t(N) * L * M * KV;
    auto kc = c.rng.bf16_values(n, 1.0f), vc = c.rng.bf16_values(n, 1.0f);
    const auto k = c.rng.bf16_values(int64_t(T) * KV, 2.0f), v = c.rng.bf16_values(int64_t(T) * KV, 2.0f);
    std::vector<int32_t> slot, pos;
    make_rows(c, T, N, M, true, slot, pos);
    const auto d_kc = dev_bf16(kc), d_vc = dev_bf16(vc), d_k = dev_bf16(k), d_v = dev_bf16(v);
    const auto d_slot = dev_i32(slot), d_pos = dev_i32(pos);
    cpu::kv_cache_write(kc.data(), vc.data(), k.data(), v.data(), slot.data(), pos.data(), T, layer, N, L, M, KV);
    cuda::kv_cache_write(d_kc.p(), d_vc.p(), d_k.p(), d_v.p(), d_slot.p(), d_pos.p(), T, layer, N, L, M, KV);
    c.tensor("k_cache", get(d_kc), kc, kTolExact);
    c.tensor("v_cache", get(d_vc), vc, kTolExact);
}

// ---------------------------------------------------------------------------------------------------------
// decode_attention: bf16 tolerance, without and with the split-K workspace
// ---------------------------------------------------------------------------------------------------------

struct DecShape {
    int T, N, L, M, Hq, Hkv, D;
    int max_pos;        // rows' positions lie below it (the first at max_pos - 1)
    int window = 0;
    float softcap = 0.0f;
    float scale = 0.0f;  // 0: 1 / sqrt(D)
    bool same_slot = false;  // all rows in slot 0 (a prompt continuing a cached prefix)
    bool sinks = false;      // attention sinks (gpt-oss): one logit per head
};

std::string dec_label(const DecShape& s) {
    std::string l = "T=" + std::to_string(s.T) + " N=" + std::to_string(s.N) + " L=" + std::to_string(s.L) +
                    " M=" + std::to_string(s.M) + " Hq=" + std::to_string(s.Hq) + " Hkv=" + std::to_string(s.Hkv) +
                    " D=" + std::to_string(s.D) + " pos<" + std::to_string(s.max_pos);
    if (s.window) l += " window=" + std::to_string(s.window);
    if (s.softcap > 0) l += " softcap=" + g3(s.softcap);
    if (s.scale > 0) l += " scale=" + g3(s.scale);
    if (s.same_slot) l += " one slot";
    if (s.sinks) l += " sinks";
    return l;
}

void decode_attention_case(Check& c, const DecShape& s) {
    const int KV = s.Hkv * s.D, layer = s.L - 1;
    const int64_t n = int64_t(s.N) * s.L * s.M * KV;
    const auto kc = c.rng.bf16_values(n, 1.0f), vc = c.rng.bf16_values(n, 1.0f);
    const auto q = c.rng.bf16_values(int64_t(s.T) * s.Hq * s.D, 1.0f);
    std::vector<int32_t> slot, pos;
    make_rows(c, s.T, s.N, s.max_pos, false, slot, pos);
    if (s.same_slot)
        for (int t = 0; t < s.T; t++) {
            slot[size_t(t)] = 0;
            pos[size_t(t)] = s.max_pos - s.T + t;
        }
    const float scale = s.scale > 0 ? s.scale : 1.0f / std::sqrt(float(s.D));
    const int64_t on = int64_t(s.T) * s.Hq * s.D;
    // Sinks of the order of the scores' log-sum-exp (-1..3): they take a visible share of each row.
    std::vector<float> sinks = c.rng.bf16_values(s.Hq, 2.0f);
    for (float& x : sinks) x = round_bf16(x + 1.0f);
    std::vector<float> want(static_cast<size_t>(on));
    cpu::decode_attention(want.data(), q.data(), kc.data(), vc.data(), slot.data(), pos.data(), s.T, layer, s.N, s.L,
                          s.M, s.Hq, s.Hkv, s.D, scale, s.window, s.softcap, s.sinks ? sinks.data() : nullptr);
    const auto d_kc = dev_bf16(kc), d_vc = dev_bf16(vc), d_q = dev_bf16(q);
    const auto d_slot = dev_i32(slot), d_pos = dev_i32(pos);
    const auto d_sinks = dev_bf16(sinks);
    const bf16* sk = s.sinks ? d_sinks.p() : nullptr;
    {
        const auto d_out = poisoned<bf16>(on);
        cuda::decode_attention(d_out.p(), d_q.p(), d_kc.p(), d_vc.p(), d_slot.p(), d_pos.p(), s.T, layer, s.N, s.L,
                               s.M, s.Hq, s.Hkv, s.D, scale, s.window, s.softcap, nullptr, sk);
        c.tensor("out (one pass)", get(d_out), want, kTolBf16);
    }
    const size_t ws_bytes = cuda::decode_attention_workspace(s.T, s.Hq, s.Hkv, s.D, s.M);
    if (ws_bytes == 0) {
        c.skip("out (split)", "no split for these sizes (the one pass is what runs)");
        return;
    }
    const auto ws = poisoned<char>(int64_t(ws_bytes));
    const auto d_out = poisoned<bf16>(on);
    cuda::decode_attention(d_out.p(), d_q.p(), d_kc.p(), d_vc.p(), d_slot.p(), d_pos.p(), s.T, layer, s.N, s.L, s.M,
                           s.Hq, s.Hkv, s.D, scale, s.window, s.softcap, ws.p(), sk);
    c.tensor("out (split, " + std::to_string(ws_bytes) + " B workspace)", get(d_out), want, kTolBf16);
}

// ---------------------------------------------------------------------------------------------------------
// Sampling
// ---------------------------------------------------------------------------------------------------------

constexpr int kVocab = 151936;

void repetition_penalty_case(Check& c) {
    const int T = 5, V = kVocab, N = 4, M = 300;
    auto logits = c.rng.f32_values(int64_t(T) * V, 8.0f);
    std::vector<int32_t> tokens(size_t(N) * M);
    for (auto& id : tokens) id = c.rng.below(c.rng.below(2) ? V : 50);  // many repeats among the first 50
    const std::vector<int32_t> slot = {2, 0, 3, 2, 1}, len = {300, 17, 0, 1, 120};
    std::vector<SamplingParams> params(T);
    const float pen[T] = {1.3f, 0.8f, 2.0f, 1.0f, 1.7f};
    for (int t = 0; t < T; t++) params[size_t(t)].repetition_penalty = pen[t];
    const auto d_logits = dev_f32(logits);
    const auto d_tokens = dev_i32(tokens), d_slot = dev_i32(slot), d_len = dev_i32(len);
    const auto d_params = upload(params);
    cpu::repetition_penalty(logits.data(), tokens.data(), slot.data(), len.data(), params.data(), T, V, N, M);
    cuda::repetition_penalty(d_logits.p(), d_tokens.p(), d_slot.p(), d_len.p(), d_params.p(), T, V, N, M);
    c.tensor("logits", get(d_logits), logits, kTolExact);
}

// ids and logits of sample_tokens on both backends; logits are rows of V values.
void compare_sampling(Check& c, std::vector<float> logits, const std::vector<SamplingParams>& params,
                      const std::vector<int64_t>& draw, int V) {
    const int T = int(params.size());
    const auto d_logits = dev_f32(logits);
    const auto d_params = upload(params);
    const auto d_draw = upload(draw);
    const auto d_out = poisoned<int32_t>(T);
    std::vector<int32_t> want(size_t(T), -1);
    cpu::sample_tokens(want.data(), logits.data(), params.data(), draw.data(), T, V);
    cuda::sample_tokens(d_out.p(), d_logits.p(), d_params.p(), d_draw.p(), T, V);
    const auto got = download(d_out.p(), T);
    int bad = 0;
    std::string detail;
    for (int t = 0; t < T; t++)
        if (got[size_t(t)] != want[size_t(t)]) {
            if (bad++ < 4)
                detail += " row " + std::to_string(t) + ": gpu " + std::to_string(got[size_t(t)]) + ", cpu " +
                          std::to_string(want[size_t(t)]) + ";";
        }
    c.result("ids", double(bad) / T, kTolExact,
             bad ? std::to_string(bad) + " of " + std::to_string(T) + " rows differ:" + detail
                 : std::to_string(T) + " rows agree");
    // Greedy rows keep their logits (exact); sampled rows hold fp32 probabilities (fp32 tolerance).
    const auto got_l = get(d_logits);
    std::vector<float> g_greedy, w_greedy, g_sampled, w_sampled;
    for (int t = 0; t < T; t++) {
        auto& g = params[size_t(t)].temperature > 0 ? g_sampled : g_greedy;
        auto& w = params[size_t(t)].temperature > 0 ? w_sampled : w_greedy;
        g.insert(g.end(), got_l.begin() + int64_t(t) * V, got_l.begin() + int64_t(t + 1) * V);
        w.insert(w.end(), logits.begin() + int64_t(t) * V, logits.begin() + int64_t(t + 1) * V);
    }
    if (!w_greedy.empty()) c.tensor("greedy rows' logits unchanged", g_greedy, w_greedy, kTolExact);
    if (!w_sampled.empty()) c.tensor("sampled rows' distribution", g_sampled, w_sampled, kTolF32);
}

// Greedy: random logits with the largest value planted at two ids (the lower must win), and an all-equal row.
void greedy_case(Check& c) {
    const int T = 4, V = kVocab;
    auto logits = c.rng.f32_values(int64_t(T) * V, 10.0f);
    const int ties[T][2] = {{70000, 1234}, {151935, 151934}, {5, 100000}, {0, 0}};
    for (int t = 0; t < 3; t++)
        for (int i : ties[t]) logits[size_t(t) * V + size_t(i)] = 20.0f;
    for (int v = 0; v < V; v++) logits[size_t(3) * V + size_t(v)] = -1.5f;  // all equal: id 0
    std::vector<SamplingParams> params(T);
    params[1].temperature = -1.0f;  // <= 0 is greedy too
    compare_sampling(c, logits, params, std::vector<int64_t>(T, 0), V);
}

struct Mode {
    float temperature;
    int top_k;
    float top_p, min_p;
};

// Seeded sampling over several modes. spread: logits uniform in +-spread; peaked: a few ids far above.
void sampling_case(Check& c, int V, float spread, bool peaked, bool integer_logits) {
    const std::vector<Mode> modes = {
        {1.0f, 0, 1.0f, 0.0f},   {0.7f, 50, 1.0f, 0.0f},  {1.0f, 0, 0.9f, 0.0f},  {1.3f, 0, 1.0f, 0.05f},
        {0.8f, 40, 0.95f, 0.02f}, {0.0f, 0, 1.0f, 0.0f},  {1.0f, 1, 1.0f, 0.0f},  {1.0f, 0, 0.5f, 0.0f},
        {0.6f, 1000, 0.8f, 0.1f}, {2.0f, 20000, 1.0f, 0.0f}, {1.0f, 0, 0.99f, 0.0f}, {1.0f, 0, 1.0f, 0.5f},
    };
    const int reps = 2, T = int(modes.size()) * reps;
    std::vector<float> logits(size_t(T) * V);
    for (float& x : logits) {
        x = c.rng.uniform(-spread, spread);
        if (integer_logits) x = std::round(x);
    }
    if (peaked)
        for (int t = 0; t < T; t++)
            for (int i = 0; i < 5; i++) logits[size_t(t) * V + size_t(c.rng.below(V))] = spread + 3.0f + float(i);
    std::vector<SamplingParams> params(static_cast<size_t>(T));
    std::vector<int64_t> draw(static_cast<size_t>(T));
    for (int t = 0; t < T; t++) {
        const Mode& m = modes[size_t(t) % modes.size()];
        SamplingParams& p = params[size_t(t)];
        p.temperature = m.temperature;
        p.top_k = m.top_k;
        p.top_p = m.top_p;
        p.min_p = m.min_p;
        p.seed = c.rng.u64();
        draw[size_t(t)] = int64_t(c.rng.below(1000));
    }
    compare_sampling(c, logits, params, draw, V);
}

}  // namespace

namespace {
struct Kvw {
    int T, N, L, M, KV, layer;
    std::string_view note = {};
    bool operator==(const Kvw&) const = default;
};
}  // namespace

// T, N, L, M, KV, layer: one row of one width-1 head into a one-position cache, one row, several layers and
// slots, a long cache, an odd KV (the scalar path).
void gen_kv_cache_write(CaseList& cs) {
    std::vector<Kvw> v{Kvw{1, 1, 1, 16, 128, 0}, {7, 3, 4, 100, 512, 2}, {300, 4, 2, 1000, 1024, 1},
                       {5, 2, 3, 50, 36, 2, "(scalar path)"}};
    add_unique(v, Kvw{1, 1, 1, 1, 1, 0, "(scalar path)"});
    for (const Kvw& s : v) {
        std::string l = "kv_cache_write " + shape_label({{"T", s.T}, {"N", s.N}, {"L", s.L}, {"M", s.M}, {"KV", s.KV}});
        if (s.layer) l += " layer=" + std::to_string(s.layer);
        if (!s.note.empty()) l += " " + std::string(s.note);
        cs.add(l, [=](Check& c) { kv_cache_write_case(c, s.T, s.N, s.L, s.M, s.KV, s.layer); });
    }
}

// T, N, L, M, Hq, Hkv, D, max_pos: a single key of a single head, GQA, MQA, groups wider than a block's 8
// heads, long caches, head dims 36 / 64 / 96 / 128 / 256, windows, soft-cap, prompt chunks, sinks.
void gen_decode_attention(CaseList& cs) {
    std::vector<DecShape> dec;
    // T, N, L, M, Hq, Hkv, D, max_pos
    dec.push_back({1, 1, 1, 1, 1, 1, 64, 1});                      // one head, a one-position cache
    dec.push_back({1, 1, 1, 16, 2, 1, 64, 1});                     // a single key
    dec.push_back({4, 3, 2, 64, 8, 2, 64, 64});                    // GQA, G = 4
    dec.push_back({3, 2, 1, 300, 8, 1, 128, 300});                 // MQA
    dec.push_back({2, 2, 2, 4096, 16, 4, 128, 4096});              // a long cache
    dec.push_back({3, 3, 1, 3000, 14, 2, 128, 2999});              // G = 7 (Qwen2.5-7B)
    dec.push_back({2, 1, 1, 700, 16, 1, 64, 700});                 // G = 16: two head groups per kv head
    dec.push_back({3, 2, 2, 500, 4, 4, 96, 500});                  // D = 96 (Phi-3), no GQA
    dec.push_back({3, 2, 1, 200, 2, 1, 36, 200});                  // D = 36: the scalar path
    dec.push_back({160, 160, 1, 128, 8, 8, 64, 128});              // a batch that fills the GPU: no split
    dec.push_back({64, 64, 1, 600, 32, 8, 128, 600});              // batch 64, Llama-8B heads
    {
        DecShape s{5, 4, 2, 1024, 4, 2, 64, 1024};
        s.window = 100;
        dec.push_back(s);
        s = {3, 2, 1, 2048, 8, 4, 256, 2048};  // Gemma 2: D = 256, soft-cap and window
        s.window = 512;
        s.softcap = 5.0f;
        s.scale = 1.0f;  // scores of several units: the cap matters
        dec.push_back(s);
        s = {2, 2, 1, 64, 4, 1, 128, 64};
        s.window = 1;  // only the key at the row's position
        dec.push_back(s);
        s = {16, 2, 2, 2500, 8, 2, 128, 2500};  // a prompt chunk continuing a cached prefix in slot 0
        s.same_slot = true;
        dec.push_back(s);
        // gpt-oss: sinks, head_dim 64, 64 query heads on 8, a window of 128; one pass and split.
        s = {1, 2, 1, 4096, 64, 8, 64, 3000};
        s.sinks = true;
        dec.push_back(s);
        s.window = 128;
        dec.push_back(s);
        s = {6, 3, 2, 300, 8, 2, 64, 300};
        s.sinks = true;
        dec.push_back(s);
    }
    for (const auto& s : dec) cs.add("decode_attention " + dec_label(s), [=](Check& c) { decode_attention_case(c, s); });
}

// Outside the op table (inference calls kernels/*/sampling.h after the lm_head): the repetition penalty and
// sample_tokens (greedy, seeded over twelve modes, ties).
void gen_sampling(CaseList& cs) {
    cs.add("repetition_penalty T=5 V=151936", [](Check& c) { repetition_penalty_case(c); });
    cs.add("sample_tokens greedy V=151936 (ties: lowest id)", [](Check& c) { greedy_case(c); });
    cs.add("sample_tokens seeded V=151936 flat", [](Check& c) { sampling_case(c, kVocab, 4.0f, false, false); });
    cs.add("sample_tokens seeded V=151936 peaked", [](Check& c) { sampling_case(c, kVocab, 3.0f, true, false); });
    cs.add("sample_tokens seeded V=1000 ties (integer logits)",
           [](Check& c) { sampling_case(c, 1000, 3.0f, false, true); });
}

}  // namespace tandem::testing
#endif  // TANDEM_WITH_CUDA
