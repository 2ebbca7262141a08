// SwiGLU on the CPU backend (see swiglu.h). N = rows, F = features.
// sigmoid(x) = 1 / (1 + exp(-x)): exp overflows to inf for x < -88 and the sigmoid correctly becomes 0.
#include "kernels/cpu/swiglu.h"

#include <cmath>
#include <cstdint>

#include "core/check.h"

namespace tandem::cpu {

void swiglu_forward(float* out, const float* gate, const float* up, int N, int F) {
    TANDEM_KCHECK_PTR(out);
    TANDEM_KCHECK_PTR(gate);
    TANDEM_KCHECK_PTR(up);
    TANDEM_KCHECK(N > 0 && F > 0);
    const int64_t n = static_cast<int64_t>(N) * F;
#pragma omp parallel for schedule(static)
    for (int64_t i = 0; i < n; i++) {
        const float g = gate[i];
        const float sig = 1.0f / (1.0f + std::exp(-g));
        out[i] = g * sig * up[i];
    }
}

void swiglu_backward(float* dgate, float* dup, const float* dout, const float* gate, const float* up, int N, int F) {
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
        const float sig = 1.0f / (1.0f + std::exp(-g));
        const float silu = g * sig;
        // d silu / dg = sig * (1 + g * (1 - sig))
        const float dg = dy * u * sig * (1.0f + g * (1.0f - sig));
        const float du = dy * silu;
        dgate[i] = dg;
        dup[i] = du;
    }
}

}  // namespace tandem::cpu
