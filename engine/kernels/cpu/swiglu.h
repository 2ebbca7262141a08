// SwiGLU activation of the Llama/Qwen MLP on the CPU backend: out = silu(gate) * up, silu(x) = x*sigmoid(x).
// N = rows (tokens), F = intermediate features. Elementwise, so trivially deterministic.
// Gradients are WRITTEN (=); dgate may alias gate and dup may alias up (each element is read before written).
#pragma once

namespace tandem::cpu {

// out[N,F] = silu(gate[N,F]) * up[N,F]. out may alias gate or up.
void swiglu_forward(float* out, const float* gate, const float* up, int N, int F);

// dgate[N,F] = dout * up * silu'(gate), dup[N,F] = dout * silu(gate), from dout[N,F].
void swiglu_backward(float* dgate, float* dup, const float* dout, const float* gate, const float* up, int N, int F);

}  // namespace tandem::cpu
