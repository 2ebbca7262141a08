// SPDX-FileCopyrightText: 2026 The Tandem developers
// SPDX-License-Identifier: GPL-3.0-or-later
// Rotary position embedding on the CPU backend (see rope.h). T = tokens, H = heads, D = head_dim,
// P = table positions. Rows (t, h) are independent, so the loops are deterministic for any thread count.
#include "kernels/cpu/rope.h"

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <numbers>
#include <string>

#include "core/check.h"

namespace tandem::cpu {

namespace {

// transformers' _compute_default_rope_parameters in float32:
//   inv_freq = 1.0 / (base ** (torch.arange(0, dim, 2).float() / dim))
std::vector<float> default_inv_freq(int head_dim, double theta) {
    const int half = head_dim / 2;
    std::vector<float> inv(half);
    const float base = static_cast<float>(theta);
    for (int i = 0; i < half; i++) {
        const float expo = static_cast<float>(2 * i) / static_cast<float>(head_dim);
        const float p = static_cast<float>(std::pow(static_cast<double>(base), static_cast<double>(expo)));
        inv[i] = 1.0f / p;
    }
    return inv;
}

// transformers' _compute_llama3_parameters, op by op in float32 (python scalars meet float32 tensors as
// float32; `a / tensor` is tensor.reciprocal() * a in torch).
void apply_llama3(std::vector<float>& inv, const RopeScaling& s) {
    const float factor = static_cast<float>(s.factor);
    const float low = static_cast<float>(s.low_freq_factor);
    const float old_len = static_cast<float>(s.original_max_position_embeddings);
    const double old_len_d = static_cast<double>(s.original_max_position_embeddings);
    const float low_wavelen = static_cast<float>(old_len_d / s.low_freq_factor);
    const float high_wavelen = static_cast<float>(old_len_d / s.high_freq_factor);
    const float band = static_cast<float>(s.high_freq_factor - s.low_freq_factor);
    const float two_pi = static_cast<float>(2.0 * std::numbers::pi);
    for (float& f : inv) {
        const float wavelen = (1.0f / f) * two_pi;
        float scaled = wavelen > low_wavelen ? f / factor : f;
        const float smooth = ((1.0f / wavelen) * old_len - low) / band;
        const float smoothed = (1.0f - smooth) * scaled / factor + smooth * scaled;
        const bool medium = !(wavelen < high_wavelen) && !(wavelen > low_wavelen);
        if (medium) scaled = smoothed;
        f = scaled;
    }
}

// transformers' _compute_yarn_parameters: the frequencies between the correction range's dimensions (low, high:
// where beta_fast / beta_slow rotations fit in original_max_position_embeddings) ramp linearly from the original
// (extrapolated) to the interpolated inv_freq / factor; float32 as torch, the range in double as Python.
void apply_yarn(std::vector<float>& inv, int dim, double theta, const RopeScaling& s) {
    const double two_pi = 2.0 * std::numbers::pi;
    const double orig = static_cast<double>(s.original_max_position_embeddings);
    auto correction_dim = [&](double rotations) {
        return (dim * std::log(orig / (rotations * two_pi))) / (2.0 * std::log(theta));
    };
    double low = correction_dim(s.beta_fast), high = correction_dim(s.beta_slow);
    if (s.truncate) {
        low = std::floor(low);
        high = std::ceil(high);
    }
    low = std::max(low, 0.0);
    high = std::min(high, static_cast<double>(dim - 1));
    if (low == high) high += 0.001;
    const float factor = static_cast<float>(s.factor);
    const float flow = static_cast<float>(low), span = static_cast<float>(high - low);
    const float base = static_cast<float>(theta);
    for (size_t i = 0; i < inv.size(); ++i) {
        const float expo = static_cast<float>(2 * i) / static_cast<float>(dim);
        const float pos_freq = static_cast<float>(std::pow(static_cast<double>(base), static_cast<double>(expo)));
        const float extrapolation = 1.0f / pos_freq;
        const float interpolation = 1.0f / (factor * pos_freq);
        const float ramp = std::min(std::max((static_cast<float>(i) - flow) / span, 0.0f), 1.0f);
        const float keep = 1.0f - ramp;  // the extrapolation's share
        inv[i] = interpolation * (1.0f - keep) + extrapolation * keep;
    }
}

void check_positions(const int32_t* positions, int T, int max_pos) {
    for (int t = 0; t < T; t++)
        if (positions[t] < 0 || positions[t] >= max_pos)
            throw_internal("rope: position " + std::to_string(positions[t]) + " of token " + std::to_string(t) +
                           " is outside the rope table (0.." + std::to_string(max_pos - 1) + ")");
}

// out[T,H,D] = R(sign * angle) inp: sign +1 forward, -1 backward (the rotation's transpose).
void rope_apply(float* out, const float* inp, const int32_t* positions, const RopeTable& table, int T, int H, int D,
                float sign) {
    TANDEM_KCHECK_PTR(out);
    TANDEM_KCHECK_PTR(inp);
    TANDEM_KCHECK_PTR(positions);
    TANDEM_KCHECK(T > 0 && H > 0 && D > 0);
    TANDEM_KCHECK(table.head_dim > 0 && table.head_dim <= D);  // the table's rotary dim: all of D, or its start
    check_positions(positions, T, table.max_pos);
    const int Dr = table.head_dim, half = Dr / 2;
    const int64_t rows = static_cast<int64_t>(T) * H;
#pragma omp parallel for schedule(static)
    for (int64_t row = 0; row < rows; row++) {
        const int t = static_cast<int>(row / H);
        const float* c = table.cos.data() + static_cast<size_t>(positions[t]) * half;  // [D/2]
        const float* s = table.sin.data() + static_cast<size_t>(positions[t]) * half;  // [D/2]
        const float* x = inp + row * D;                                                // [D]
        float* y = out + row * D;                                                      // [D]
        for (int i = 0; i < half; i++) {
            const float x1 = x[i], x2 = x[i + half];
            const float si = sign * s[i];
            // HF: q * cos + rotate_half(q) * sin, rotate_half(q) = cat(-q2, q1)
            y[i] = x1 * c[i] - x2 * si;
            y[i + half] = x2 * c[i] + x1 * si;
        }
        if (y != x)
            for (int k = Dr; k < D; k++) y[k] = x[k];  // partial rotary: the rest passes through
    }
}

}  // namespace

namespace {

// transformers' _compute_longrope_parameters in float32 with one factor set:
//   inv_freq = 1.0 / (ext_factors * base ** (arange(0, dim, 2).float() / dim))
std::vector<float> longrope_inv_freq(int head_dim, double theta, const std::vector<double>& factors) {
    TANDEM_KCHECK(int(factors.size()) == head_dim / 2);  // head_dim: the rotary dim
    std::vector<float> inv(size_t(head_dim / 2));
    const float base = static_cast<float>(theta);
    for (int i = 0; i < head_dim / 2; i++) {
        const float expo = static_cast<float>(2 * i) / static_cast<float>(head_dim);
        const float p = static_cast<float>(std::pow(static_cast<double>(base), static_cast<double>(expo)));
        inv[size_t(i)] = 1.0f / (static_cast<float>(factors[size_t(i)]) * p);
    }
    return inv;
}

// Rows [row0, row0 + n) of the table for positions 0..n-1 with frequencies inv.
void fill_rows(RopeTable& t, const std::vector<float>& inv, int row0, int n) {
    const int half = t.head_dim / 2;
#pragma omp parallel for schedule(static)
    for (int p = 0; p < n; p++) {
        for (int i = 0; i < half; i++) {
            const float angle = static_cast<float>(p) * inv[size_t(i)];  // float32 product, as HF's matmul
            const size_t at = static_cast<size_t>(row0 + p) * half + i;
            t.cos[at] = static_cast<float>(std::cos(static_cast<double>(angle))) * t.attention_scaling;
            t.sin[at] = static_cast<float>(std::sin(static_cast<double>(angle))) * t.attention_scaling;
        }
    }
}

}  // namespace

RopeTable rope_table_build(int head_dim, double theta, const RopeScaling& scaling, int max_pos) {
    TANDEM_KCHECK(head_dim > 0 && head_dim % 2 == 0);
    TANDEM_KCHECK(max_pos > 0);
    TANDEM_KCHECK(theta > 0.0);
    RopeTable t;
    t.head_dim = head_dim;
    t.max_pos = max_pos;
    t.inv_freq = default_inv_freq(head_dim, theta);
    std::vector<float> long_inv;  // LongRope beyond the original length: the long factors' frequencies
    switch (scaling.type) {
        case RopeScalingType::None:
            break;
        case RopeScalingType::Linear: {
            TANDEM_KCHECK(scaling.factor > 0.0);
            const float factor = static_cast<float>(scaling.factor);
            for (float& f : t.inv_freq) f = f / factor;
            break;
        }
        case RopeScalingType::Llama3:
            TANDEM_KCHECK(scaling.factor > 0.0 && scaling.high_freq_factor != scaling.low_freq_factor);
            apply_llama3(t.inv_freq, scaling);
            break;
        case RopeScalingType::LongRope: {
            t.inv_freq = longrope_inv_freq(head_dim, theta, scaling.short_factor);
            t.attention_scaling = static_cast<float>(scaling.attention_factor);
            const int64_t orig = scaling.original_max_position_embeddings;
            if (!scaling.long_factor.empty() && orig > 0 && max_pos > orig) {
                TANDEM_KCHECK(max_pos + orig < (int64_t(1) << 31));
                long_inv = longrope_inv_freq(head_dim, theta, scaling.long_factor);
                t.long_from = int(orig);
                t.max_pos = max_pos + int(orig);
            }
            break;
        }
        case RopeScalingType::Yarn:
            TANDEM_KCHECK(scaling.factor > 0.0 && scaling.original_max_position_embeddings > 0);
            apply_yarn(t.inv_freq, head_dim, theta, scaling);
            t.attention_scaling = static_cast<float>(scaling.attention_factor);
            break;
    }
    const int half = head_dim / 2;
    t.cos.resize(static_cast<size_t>(t.max_pos) * half);
    t.sin.resize(static_cast<size_t>(t.max_pos) * half);
    if (t.long_from > 0) {
        fill_rows(t, t.inv_freq, 0, t.long_from);
        fill_rows(t, long_inv, t.long_from, max_pos);
    } else {
        fill_rows(t, t.inv_freq, 0, max_pos);
    }
    return t;
}

void rope_rows(int32_t* rows, const int32_t* positions, const int32_t* cu_seqlens, int S, int long_from) {
    if (long_from == 0) {  // one set of rows: the positions themselves
        std::copy(positions, positions + cu_seqlens[S], rows);
        return;
    }
    for (int s = 0; s < S; ++s) {
        int32_t last = -1;
        for (int t = cu_seqlens[s]; t < cu_seqlens[s + 1]; ++t) last = std::max(last, positions[t]);
        for (int t = cu_seqlens[s]; t < cu_seqlens[s + 1]; ++t) rows[t] = rope_row(long_from, positions[t], int64_t(last) + 1);
    }
}

void rope_forward(float* out, const float* inp, const int32_t* positions, const RopeTable& table, int T, int H, int D) {
    rope_apply(out, inp, positions, table, T, H, D, 1.0f);
}

void rope_backward(float* dinp, const float* dout, const int32_t* positions, const RopeTable& table, int T, int H,
                   int D) {
    rope_apply(dinp, dout, positions, table, T, H, D, -1.0f);
}

}  // namespace tandem::cpu
