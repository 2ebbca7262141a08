// SPDX-FileCopyrightText: 2026 The Tandem developers
// SPDX-License-Identifier: GPL-3.0-or-later
// The gated MLP activations on the CPU backend (see swiglu.h): SwiGLU and GeGLU over one loop pair.
// N = rows, F = features. sigmoid(x) = 1 / (1 + exp(-x)): exp overflows to inf for x < -88 and the sigmoid
// correctly becomes 0.
#include "kernels/cpu/swiglu.h"

#include <cmath>
#include <cstdint>

#include "core/check.h"

namespace tandem::cpu {

namespace {

// silu(g) = g * sigmoid(g); silu'(g) = sigmoid(g) * (1 + g * (1 - sigmoid(g))).
struct Silu {
    static float f(float g) { return g * (1.0f / (1.0f + std::exp(-g))); }
    static float df(float g) {
        const float sig = 1.0f / (1.0f + std::exp(-g));
        return sig * (1.0f + g * (1.0f - sig));
    }
};
// gelu_tanh(g) = 0.5 g (1 + tanh(u)), u = sqrt(2/pi) (g + 0.044715 g^3), torch's gelu(approximate="tanh").
struct GeluTanh {
    static constexpr float kA = 0.044715f, kS = 0.7978845608028654f;
    static float f(float g) { return 0.5f * g * (1.0f + std::tanh(kS * (g + kA * g * g * g))); }
    static float df(float g) {
        const float t = std::tanh(kS * (g + kA * g * g * g));
        return 0.5f * (1.0f + t) + 0.5f * g * (1.0f - t * t) * kS * (1.0f + 3.0f * kA * g * g);
    }
};

template <class A>
void gated_forward(float* out, const float* gate, const float* up, int N, int F) {
    TANDEM_KCHECK_PTR(out);
    TANDEM_KCHECK_PTR(gate);
    TANDEM_KCHECK_PTR(up);
    TANDEM_KCHECK(N > 0 && F > 0);
    const int64_t n = static_cast<int64_t>(N) * F;
#pragma omp parallel for schedule(static)
    for (int64_t i = 0; i < n; i++) out[i] = A::f(gate[i]) * up[i];
}

template <class A>
void gated_backward(float* dgate, float* dup, const float* dout, const float* gate, const float* up, int N, int F) {
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
        const float dg = dy * u * A::df(g);
        const float du = dy * A::f(g);
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

}  // namespace tandem::cpu
