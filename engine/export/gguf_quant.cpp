// SPDX-FileCopyrightText: 2026 The Tandem developers
// SPDX-License-Identifier: GPL-3.0-or-later
// ggml block formats and our k-quant scale search (see gguf_quant.h).
// Q = the values of one row, n = their count; a super-block (k-quants) is 256 values, a sub-block 32 (Q4_K,
// Q5_K) or 16 (Q6_K).
#include "export/gguf_quant.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <string>

#include "tandem/error.h"
#include "tandem/safetensors.h"

namespace tandem::gguf {

namespace {

constexpr int kSuper = 256;

int nearest(float v) { return int(std::lrintf(v)); }

void put_f16(std::byte* p, float v) {
    const uint16_t h = f32_to_f16(v);
    std::memcpy(p, &h, 2);
}
float get_f16(const std::byte* p) {
    uint16_t h;
    std::memcpy(&h, p, 2);
    return f16_to_f32(h);
}

// x ~ scale * q + offset with q in [0, nmax] and offset <= 0 (the k-quants store -offset as a positive "min").
// Candidates: the range mapped onto [0, nmax] and 20 slightly wider scales; each gets the weighted
// least-squares (scale, offset) for its rounding, and the smallest weighted squared error wins.
void fit_scale_offset(const float* x, const float* w, int n, int nmax, float& scale, float& min_out) {
    float lo = x[0], hi = x[0];
    for (int i = 1; i < n; ++i) lo = std::min(lo, x[i]), hi = std::max(hi, x[i]);
    lo = std::min(lo, 0.0f);
    if (hi <= lo) {
        scale = 0.0f;
        min_out = -lo;
        return;
    }
    auto error_of = [&](float s, float off) {
        double e = 0;
        const float inv = s > 0 ? 1.0f / s : 0.0f;
        for (int i = 0; i < n; ++i) {
            const int q = std::clamp(nearest((x[i] - off) * inv), 0, nmax);
            const double d = double(s) * q + off - x[i];
            e += w[i] * d * d;
        }
        return e;
    };
    float best_s = (hi - lo) / float(nmax), best_off = lo;
    double best = error_of(best_s, best_off);
    for (int k = 0; k <= 20; ++k) {
        const float iscale = (float(nmax) - 1.0f + 0.1f * float(k)) / (hi - lo);
        double sw = 0, sl = 0, sll = 0, sx = 0, slx = 0;
        for (int i = 0; i < n; ++i) {
            const int q = std::clamp(nearest(iscale * (x[i] - lo)), 0, nmax);
            sw += w[i], sl += w[i] * q, sll += w[i] * q * q, sx += w[i] * x[i], slx += w[i] * q * x[i];
        }
        const double det = sw * sll - sl * sl;
        if (det <= 0) continue;
        double s = (sw * slx - sx * sl) / det, off = (sll * sx - sl * slx) / det;
        if (off > 0) off = 0, s = sll > 0 ? slx / sll : 0;
        if (s <= 0) continue;
        const double e = error_of(float(s), float(off));
        if (e < best) best = e, best_s = float(s), best_off = float(off);
    }
    scale = best_s;
    min_out = -best_off;
}

// x ~ scale * q with q in [-32, 31] (Q6_K): candidates around mapping the largest magnitude onto -32, each with
// its least-squares scale (weights x^2), smallest weighted error wins. Returns the (signed) scale.
float fit_symmetric(const float* x, int n) {
    float vmax = 0, amax = 0;
    for (int i = 0; i < n; ++i)
        if (std::fabs(x[i]) > amax) amax = std::fabs(x[i]), vmax = x[i];
    if (amax < 1e-30f) return 0.0f;
    float best_s = -vmax / 32.0f;
    double best = -1;
    for (int k = -9; k <= 9; ++k) {
        const float iscale = -(32.0f + 0.1f * float(k)) / vmax;
        double sxl = 0, sll = 0;
        for (int i = 0; i < n; ++i) {
            const int q = std::clamp(nearest(iscale * x[i]), -32, 31);
            const double w = double(x[i]) * x[i];
            sxl += w * x[i] * q, sll += w * q * q;
        }
        if (sll <= 0) continue;
        const double s = sxl / sll;
        double e = 0;
        for (int i = 0; i < n; ++i) {
            const int q = std::clamp(nearest(float(x[i] / s)), -32, 31);
            const double d = x[i] - s * q;
            e += double(x[i]) * x[i] * d * d;
        }
        if (best < 0 || e < best) best = e, best_s = float(s);
    }
    return best_s;
}

// Q4_K (bits 4) and Q5_K (bits 5): one super-block of 256 values into `out`.
void quantize_k_asym(const float* x, std::byte* out, int bits) {
    const int nmax = (1 << bits) - 1;
    float scales[8], mins[8], w[32];
    for (int j = 0; j < 8; ++j) {
        const float* s = x + 32 * j;
        double sum2 = 0;
        for (int l = 0; l < 32; ++l) sum2 += double(s[l]) * s[l];
        const float av = float(std::sqrt(sum2 / 32));
        for (int l = 0; l < 32; ++l) w[l] = av + std::fabs(s[l]);
        fit_scale_offset(s, w, 32, nmax, scales[j], mins[j]);
    }
    const float max_scale = *std::max_element(scales, scales + 8);
    const float max_min = *std::max_element(mins, mins + 8);
    put_f16(out, max_scale / 63.0f);
    put_f16(out + 2, max_min / 63.0f);
    const float d = get_f16(out), dmin = get_f16(out + 2);
    uint8_t ls[8], lm[8];
    for (int j = 0; j < 8; ++j) {
        ls[j] = uint8_t(d > 0 ? std::clamp(nearest(scales[j] / d), 0, 63) : 0);
        lm[j] = uint8_t(dmin > 0 ? std::clamp(nearest(mins[j] / dmin), 0, 63) : 0);
    }
    auto* sc = reinterpret_cast<uint8_t*>(out + 4);  // [12]
    for (int j = 0; j < 4; ++j) {
        sc[j] = uint8_t(ls[j] | ((ls[j + 4] >> 4) << 6));
        sc[j + 4] = uint8_t(lm[j] | ((lm[j + 4] >> 4) << 6));
        sc[j + 8] = uint8_t((ls[j + 4] & 15) | ((lm[j + 4] & 15) << 4));
    }
    uint8_t q[kSuper];
    for (int j = 0; j < 8; ++j) {
        const float ds = d * ls[j], dm = dmin * lm[j];
        for (int l = 0; l < 32; ++l)
            q[32 * j + l] = uint8_t(ds > 0 ? std::clamp(nearest((x[32 * j + l] + dm) / ds), 0, nmax) : 0);
    }
    auto* qh = reinterpret_cast<uint8_t*>(out + 16);  // Q5_K only: [32]
    auto* qs = reinterpret_cast<uint8_t*>(out + 16 + (bits == 5 ? 32 : 0));  // [128]
    if (bits == 5) std::memset(qh, 0, 32);
    for (int p = 0; p < 4; ++p)
        for (int l = 0; l < 32; ++l) {
            const uint8_t a = q[64 * p + l], b = q[64 * p + 32 + l];
            qs[32 * p + l] = uint8_t((a & 15) | ((b & 15) << 4));
            if (bits == 5) qh[l] = uint8_t(qh[l] | ((a >> 4) << (2 * p)) | ((b >> 4) << (2 * p + 1)));
        }
}

void dequantize_k_asym(const std::byte* in, float* y, int bits) {
    const float d = get_f16(in), dmin = get_f16(in + 2);
    const auto* sc = reinterpret_cast<const uint8_t*>(in + 4);
    const auto* qh = reinterpret_cast<const uint8_t*>(in + 16);
    const auto* qs = reinterpret_cast<const uint8_t*>(in + 16 + (bits == 5 ? 32 : 0));
    for (int j = 0; j < 8; ++j) {
        int s, m;
        if (j < 4) {
            s = sc[j] & 63, m = sc[j + 4] & 63;
        } else {
            s = (sc[j + 4] & 15) | ((sc[j - 4] >> 6) << 4);
            m = (sc[j + 4] >> 4) | ((sc[j] >> 6) << 4);
        }
        const int p = j / 2, hi = j % 2;
        for (int l = 0; l < 32; ++l) {
            int q = hi ? qs[32 * p + l] >> 4 : qs[32 * p + l] & 15;
            if (bits == 5 && (qh[l] >> j) & 1) q += 16;
            y[32 * j + l] = d * float(s) * float(q) - dmin * float(m);
        }
    }
}

// Q6_K: ql[128] qh[64] scales[16] (int8) d (fp16).
void quantize_q6_k(const float* x, std::byte* out) {
    float scales[16];
    for (int j = 0; j < 16; ++j) scales[j] = fit_symmetric(x + 16 * j, 16);
    float vmax = 0, amax = 0;
    for (float s : scales)
        if (std::fabs(s) > amax) amax = std::fabs(s), vmax = s;
    auto* ql = reinterpret_cast<uint8_t*>(out);
    auto* qh = reinterpret_cast<uint8_t*>(out + 128);
    auto* sc = reinterpret_cast<int8_t*>(out + 192);
    std::byte* dp = out + 208;
    if (amax < 1e-30f) {  // all zero: d = 0 decodes every value to 0
        std::memset(out, 0, 210);
        return;
    }
    const float iscale = -128.0f / vmax;
    put_f16(dp, 1.0f / iscale);
    const float d = get_f16(dp);
    for (int j = 0; j < 16; ++j) sc[j] = int8_t(std::clamp(nearest(iscale * scales[j]), -128, 127));
    uint8_t q[kSuper];
    for (int j = 0; j < 16; ++j) {
        const float ds = d * sc[j];
        for (int l = 0; l < 16; ++l)
            q[16 * j + l] = uint8_t((ds != 0 ? std::clamp(nearest(x[16 * j + l] / ds), -32, 31) : 0) + 32);
    }
    for (int h = 0; h < 2; ++h) {
        const uint8_t* L = q + 128 * h;
        uint8_t* l4 = ql + 64 * h;
        uint8_t* h2 = qh + 32 * h;
        for (int l = 0; l < 32; ++l) {
            const uint8_t q1 = L[l], q2 = L[l + 32], q3 = L[l + 64], q4 = L[l + 96];
            l4[l] = uint8_t((q1 & 15) | ((q3 & 15) << 4));
            l4[l + 32] = uint8_t((q2 & 15) | ((q4 & 15) << 4));
            h2[l] = uint8_t((q1 >> 4) | ((q2 >> 4) << 2) | ((q3 >> 4) << 4) | ((q4 >> 4) << 6));
        }
    }
}

void dequantize_q6_k(const std::byte* in, float* y) {
    const auto* ql = reinterpret_cast<const uint8_t*>(in);
    const auto* qh = reinterpret_cast<const uint8_t*>(in + 128);
    const auto* sc = reinterpret_cast<const int8_t*>(in + 192);
    const float d = get_f16(in + 208);
    for (int h = 0; h < 2; ++h) {
        const uint8_t* l4 = ql + 64 * h;
        const uint8_t* h2 = qh + 32 * h;
        const int8_t* s = sc + 8 * h;
        float* o = y + 128 * h;
        for (int l = 0; l < 32; ++l) {
            const int is = l / 16;
            const int q1 = ((l4[l] & 15) | (((h2[l] >> 0) & 3) << 4)) - 32;
            const int q2 = ((l4[l + 32] & 15) | (((h2[l] >> 2) & 3) << 4)) - 32;
            const int q3 = ((l4[l] >> 4) | (((h2[l] >> 4) & 3) << 4)) - 32;
            const int q4 = ((l4[l + 32] >> 4) | (((h2[l] >> 6) & 3) << 4)) - 32;
            o[l] = d * s[is] * float(q1);
            o[l + 32] = d * s[is + 2] * float(q2);
            o[l + 64] = d * s[is + 4] * float(q3);
            o[l + 96] = d * s[is + 6] * float(q4);
        }
    }
}

// Q5_0 / Q5_1 (32 values): [d f16 (, m f16), qh 4 bytes, qs 16 bytes]. Q5_0: symmetric, d = the largest-magnitude
// value / -16, q = round(x / d) + 16 in [0, 31]; Q5_1: d = (max - min) / 31, m = min, q = round((x - m) / d).
void quantize_q5(const float* x, std::byte* o, bool with_min) {
    float d, m = 0.0f;
    if (with_min) {
        float lo = x[0], hi = x[0];
        for (int l = 1; l < 32; ++l) lo = std::min(lo, x[l]), hi = std::max(hi, x[l]);
        put_f16(o, (hi - lo) / 31.0f);
        put_f16(o + 2, lo);
        d = get_f16(o);
        m = get_f16(o + 2);
    } else {
        float amax = 0, vmax = 0;
        for (int l = 0; l < 32; ++l)
            if (std::fabs(x[l]) > amax) amax = std::fabs(x[l]), vmax = x[l];
        put_f16(o, vmax / -16.0f);
        d = get_f16(o);
    }
    const float id = d != 0.0f ? 1.0f / d : 0.0f;
    std::byte* qh = o + (with_min ? 4 : 2);
    std::byte* qs = qh + 4;
    uint32_t high = 0;
    for (int j = 0; j < 16; ++j) {
        int q[2];
        for (int h = 0; h < 2; ++h) {
            const float v = x[j + 16 * h];
            q[h] = with_min ? std::clamp(nearest((v - m) * id), 0, 31) : std::clamp(nearest(v * id) + 16, 0, 31);
            high |= uint32_t(q[h] >> 4) << (j + 16 * h);
        }
        qs[j] = std::byte(uint8_t((q[0] & 15) | ((q[1] & 15) << 4)));
    }
    std::memcpy(qh, &high, 4);
}

void dequantize_q5(const std::byte* p, float* y, bool with_min) {
    const float d = get_f16(p), m = with_min ? get_f16(p + 2) : 0.0f;
    const std::byte* qh = p + (with_min ? 4 : 2);
    const std::byte* qs = qh + 4;
    uint32_t high;
    std::memcpy(&high, qh, 4);
    for (int j = 0; j < 16; ++j) {
        const int q0 = (uint8_t(qs[j]) & 15) | int(((high >> j) & 1) << 4);
        const int q1 = (uint8_t(qs[j]) >> 4) | int(((high >> (j + 16)) & 1) << 4);
        y[j] = with_min ? d * float(q0) + m : d * float(q0 - 16);
        y[j + 16] = with_min ? d * float(q1) + m : d * float(q1 - 16);
    }
}

}  // namespace

std::string_view ggml_type_name(GgmlType t) noexcept {
    switch (t) {
    case GgmlType::F32: return "F32";
    case GgmlType::F16: return "F16";
    case GgmlType::BF16: return "BF16";
    case GgmlType::Q8_0: return "Q8_0";
    case GgmlType::Q5_0: return "Q5_0";
    case GgmlType::Q5_1: return "Q5_1";
    case GgmlType::Q4_K: return "Q4_K";
    case GgmlType::Q5_K: return "Q5_K";
    case GgmlType::Q6_K: return "Q6_K";
    }
    return "?";
}

int64_t ggml_block_size(GgmlType t) noexcept {
    switch (t) {
    case GgmlType::Q8_0:
    case GgmlType::Q5_0:
    case GgmlType::Q5_1: return 32;
    case GgmlType::Q4_K:
    case GgmlType::Q5_K:
    case GgmlType::Q6_K: return kSuper;
    default: return 1;
    }
}

int64_t ggml_type_bytes(GgmlType t) noexcept {
    switch (t) {
    case GgmlType::F32: return 4;
    case GgmlType::F16:
    case GgmlType::BF16: return 2;
    case GgmlType::Q8_0: return 34;
    case GgmlType::Q5_0: return 22;
    case GgmlType::Q5_1: return 24;
    case GgmlType::Q4_K: return 144;
    case GgmlType::Q5_K: return 176;
    case GgmlType::Q6_K: return 210;
    }
    return 0;
}

bool ggml_type_known(uint32_t id) noexcept {
    return id == 0 || id == 1 || id == 6 || id == 7 || id == 8 || id == 12 || id == 13 || id == 14 || id == 30;
}

uint64_t ggml_row_bytes(GgmlType t, int64_t n) noexcept {
    return uint64_t(n / ggml_block_size(t)) * uint64_t(ggml_type_bytes(t));
}

void quantize_row(GgmlType t, std::span<const float> x, std::span<std::byte> out) {
    const int64_t n = int64_t(x.size());
    if (!gguf_type_fits(t, n) || out.size() != ggml_row_bytes(t, n))
        throw Error(ErrorCategory::Internal, "quantize_row: " + std::to_string(n) + " values do not fit " +
                                                 std::string(ggml_type_name(t)));
    const int64_t blocks = n / ggml_block_size(t), bb = ggml_type_bytes(t);
    switch (t) {
    case GgmlType::F32: std::memcpy(out.data(), x.data(), out.size()); break;
    case GgmlType::F16:
    case GgmlType::BF16:
        for (int64_t i = 0; i < n; ++i) {
            const uint16_t h = t == GgmlType::F16 ? f32_to_f16(x[size_t(i)]) : f32_to_bf16(x[size_t(i)]);
            std::memcpy(out.data() + 2 * i, &h, 2);
        }
        break;
    case GgmlType::Q8_0:
        for (int64_t b = 0; b < blocks; ++b) {
            const float* v = x.data() + 32 * b;
            std::byte* o = out.data() + bb * b;
            float amax = 0;
            for (int l = 0; l < 32; ++l) amax = std::max(amax, std::fabs(v[l]));
            put_f16(o, amax / 127.0f);
            const float d = get_f16(o);
            for (int l = 0; l < 32; ++l) {
                const int q = d > 0 ? std::clamp(nearest(v[l] / d), -127, 127) : 0;
                o[2 + l] = std::byte(uint8_t(int8_t(q)));
            }
        }
        break;
    case GgmlType::Q5_0:
    case GgmlType::Q5_1:
        for (int64_t b = 0; b < blocks; ++b) quantize_q5(x.data() + 32 * b, out.data() + bb * b, t == GgmlType::Q5_1);
        break;
    case GgmlType::Q4_K:
    case GgmlType::Q5_K:
        for (int64_t b = 0; b < blocks; ++b)
            quantize_k_asym(x.data() + kSuper * b, out.data() + bb * b, t == GgmlType::Q4_K ? 4 : 5);
        break;
    case GgmlType::Q6_K:
        for (int64_t b = 0; b < blocks; ++b) quantize_q6_k(x.data() + kSuper * b, out.data() + bb * b);
        break;
    }
}

void dequantize_row(GgmlType t, std::span<const std::byte> in, std::span<float> y) {
    const int64_t n = int64_t(y.size());
    if (!gguf_type_fits(t, n) || in.size() != ggml_row_bytes(t, n))
        throw Error(ErrorCategory::Internal, "dequantize_row: " + std::to_string(n) + " values do not fit " +
                                                 std::string(ggml_type_name(t)));
    const int64_t blocks = n / ggml_block_size(t), bb = ggml_type_bytes(t);
    switch (t) {
    case GgmlType::F32: std::memcpy(y.data(), in.data(), in.size()); break;
    case GgmlType::F16:
    case GgmlType::BF16:
        for (int64_t i = 0; i < n; ++i) {
            uint16_t h;
            std::memcpy(&h, in.data() + 2 * i, 2);
            y[size_t(i)] = t == GgmlType::F16 ? f16_to_f32(h) : bf16_to_f32(h);
        }
        break;
    case GgmlType::Q8_0:
        for (int64_t b = 0; b < blocks; ++b) {
            const std::byte* p = in.data() + bb * b;
            const float d = get_f16(p);
            for (int l = 0; l < 32; ++l) y[size_t(32 * b + l)] = d * float(int8_t(uint8_t(p[2 + l])));
        }
        break;
    case GgmlType::Q5_0:
    case GgmlType::Q5_1:
        for (int64_t b = 0; b < blocks; ++b) dequantize_q5(in.data() + bb * b, y.data() + 32 * b, t == GgmlType::Q5_1);
        break;
    case GgmlType::Q4_K:
    case GgmlType::Q5_K:
        for (int64_t b = 0; b < blocks; ++b)
            dequantize_k_asym(in.data() + bb * b, y.data() + kSuper * b, t == GgmlType::Q4_K ? 4 : 5);
        break;
    case GgmlType::Q6_K:
        for (int64_t b = 0; b < blocks; ++b) dequantize_q6_k(in.data() + bb * b, y.data() + kSuper * b);
        break;
    }
}

}  // namespace tandem::gguf
