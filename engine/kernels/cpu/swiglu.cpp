// SPDX-FileCopyrightText: 2026 The Tandem developers
// SPDX-License-Identifier: GPL-3.0-or-later
// The gated MLP activations on the CPU backend (see swiglu.h): SwiGLU and GeGLU over one loop pair.
// N = rows, F = features. sigmoid(x) = 1 / (1 + exp(-x)): exp overflows to inf for x < -88 and the sigmoid
// correctly becomes 0.
#include "kernels/cpu/swiglu.h"

#include <algorithm>
#include <cmath>
#include <cstdint>

#include "core/check.h"
#include "kernels/cpu/fp8.h"

namespace tandem::cpu {

namespace {

// silu(g) = g * sigmoid(g); silu'(g) = sigmoid(g) * (1 + g * (1 - sigmoid(g))).
// An activation: out = f(gate) * u(up), with f' and u' (u(x) = x but for the clamped SwiGLU).
struct Silu {
    float f(float g) const { return g * (1.0f / (1.0f + std::exp(-g))); }
    float df(float g) const {
        const float sig = 1.0f / (1.0f + std::exp(-g));
        return sig * (1.0f + g * (1.0f - sig));
    }
    float u(float x) const { return x; }
    float du(float) const { return 1.0f; }
};
// gelu_tanh(g) = 0.5 g (1 + tanh(u)), u = sqrt(2/pi) (g + 0.044715 g^3), torch's gelu(approximate="tanh").
struct GeluTanh {
    static constexpr float kA = 0.044715f, kS = 0.7978845608028654f;
    float f(float g) const { return 0.5f * g * (1.0f + std::tanh(kS * (g + kA * g * g * g))); }
    float df(float g) const {
        const float t = std::tanh(kS * (g + kA * g * g * g));
        return 0.5f * (1.0f + t) + 0.5f * g * (1.0f - t * t) * kS * (1.0f + 3.0f * kA * g * g);
    }
    float u(float x) const { return x; }
    float du(float) const { return 1.0f; }
};
// gpt-oss: g = min(gate, limit), f = g * sigmoid(alpha g); u = clamp(up, -limit, limit) + 1. The clamps pass
// no gradient where they cut (torch's clamp: the gradient flows where min <= x <= max).
struct ClampedSilu {
    float alpha, limit;
    float f(float gate) const {
        const float g = std::min(gate, limit);
        return g * (1.0f / (1.0f + std::exp(-(g * alpha))));
    }
    float df(float gate) const {
        if (!(gate <= limit)) return 0.0f;
        const float sig = 1.0f / (1.0f + std::exp(-(gate * alpha)));
        return sig * (1.0f + alpha * gate * (1.0f - sig));
    }
    float u(float x) const { return std::min(std::max(x, -limit), limit) + 1.0f; }
    float du(float x) const { return x >= -limit && x <= limit ? 1.0f : 0.0f; }
};

template <class A>
void gated_forward(float* out, const float* gate, const float* up, int N, int F, A a = {}) {
    TANDEM_KCHECK_PTR(out);
    TANDEM_KCHECK_PTR(gate);
    TANDEM_KCHECK_PTR(up);
    TANDEM_KCHECK(N > 0 && F > 0);
    const int64_t n = static_cast<int64_t>(N) * F;
#pragma omp parallel for schedule(static)
    for (int64_t i = 0; i < n; i++) out[i] = a.f(gate[i]) * a.u(up[i]);
}

template <class A>
void gated_backward(float* dgate, float* dup, const float* dout, const float* gate, const float* up, int N, int F,
                    A a = {}) {
    TANDEM_KCHECK_PTR(dgate);
    TANDEM_KCHECK_PTR(dup);
    TANDEM_KCHECK_PTR(dout);
    TANDEM_KCHECK_PTR(gate);
    TANDEM_KCHECK_PTR(up);
    TANDEM_KCHECK(N > 0 && F > 0);
    const int64_t n = static_cast<int64_t>(N) * F;
#pragma omp parallel for schedule(static)
    for (int64_t i = 0; i < n; i++) {
        const float g = gate[i], u = up[i], dy = dout[i];
        const float dg = dy * a.u(u) * a.df(g);
        const float du = dy * a.f(g) * a.du(u);
        dgate[i] = dg;
        dup[i] = du;
    }
}

}  // namespace

void swiglu_forward(float* out, const float* gate, const float* up, int N, int F) {
    gated_forward<Silu>(out, gate, up, N, F);
}
void swiglu_backward(float* dgate, float* dup, const float* dout, const float* gate, const float* up, int N, int F) {
    gated_backward<Silu>(dgate, dup, dout, gate, up, N, F);
}
void geglu_forward(float* out, const float* gate, const float* up, int N, int F) {
    gated_forward<GeluTanh>(out, gate, up, N, F);
}
void geglu_backward(float* dgate, float* dup, const float* dout, const float* gate, const float* up, int N, int F) {
    gated_backward<GeluTanh>(dgate, dup, dout, gate, up, N, F);
}

void clamped_swiglu_forward(float* out, const float* gate, const float* up, int N, int F, float alpha, float limit) {
    TANDEM_KCHECK(limit > 0.0f);
    gated_forward(out, gate, up, N, F, ClampedSilu{alpha, limit});
}
void clamped_swiglu_backward(float* dgate, float* dup, const float* dout, const float* gate, const float* up, int N,
                             int F, float alpha, float limit) {
    TANDEM_KCHECK(limit > 0.0f);
    gated_backward(dgate, dup, dout, gate, up, N, F, ClampedSilu{alpha, limit});
}

void activation_forward_fp8(float* out, uint8_t* codes, float* scales, const float* gate, const float* up, int N, int F,
                            bool gelu) {
    if (gelu)
        geglu_forward(out, gate, up, N, F);
    else
        swiglu_forward(out, gate, up, N, F);
    quantize_fp8_rows(codes, scales, out, N, F);
}

void activation_backward_fp8(float* dgate, float* dup, uint8_t* gate_codes, float* gate_scales, uint8_t* up_codes,
                             float* up_scales, const float* dout, const float* gate, const float* up, int N, int F,
                             bool gelu) {
    if (gelu)
        geglu_backward(dgate, dup, dout, gate, up, N, F);
    else
        swiglu_backward(dgate, dup, dout, gate, up, N, F);
    quantize_fp8_grad_rows(gate_codes, gate_scales, dgate, N, F);
    quantize_fp8_grad_rows(up_codes, up_scales, dup, N, F);
}

}  // namespace tandem::cpu
