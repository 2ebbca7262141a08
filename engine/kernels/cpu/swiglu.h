// SPDX-FileCopyrightText: 2026 The Tandem developers
// SPDX-License-Identifier: GPL-3.0-or-later
// The gated MLP activations on the CPU backend: SwiGLU of the Llama/Qwen MLP, out = silu(gate) * up,
// silu(x) = x*sigmoid(x); GeGLU of Gemma, out = gelu_tanh(gate) * up; gpt-oss's clamped SwiGLU.
// N = rows (tokens), F = intermediate features. Elementwise, so trivially deterministic.
// Gradients are WRITTEN (=); dgate may alias gate and dup may alias up (each element is read before written).
#pragma once

#include <cstdint>

namespace tandem::cpu {

// out[N,F] = silu(gate[N,F]) * up[N,F]. out may alias gate or up.
void swiglu_forward(float* out, const float* gate, const float* up, int N, int F);

// dgate[N,F] = dout * up * silu'(gate), dup[N,F] = dout * silu(gate), from dout[N,F].
void swiglu_backward(float* dgate, float* dup, const float* dout, const float* gate, const float* up, int N, int F);

// out[N,F] = gelu_tanh(gate) * up, gelu_tanh as torch's gelu(approximate="tanh"); gradients as above.
void geglu_forward(float* out, const float* gate, const float* up, int N, int F);
void geglu_backward(float* dgate, float* dup, const float* dout, const float* gate, const float* up, int N, int F);

// FP8 models (twins of kernels/cuda/swiglu.h): SwiGLU (GeGLU with gelu), then quantize_fp8_rows(codes, scales,
// out, N, F) (kernels/cpu/fp8.h) of the output for the FP8 GEMM it feeds.
void activation_forward_fp8(float* out, uint8_t* codes, float* scales, const float* gate, const float* up, int N, int F,
                            bool gelu);
// The gradients, then each quantized (quantize_fp8_grad_rows: output gradients): gate_codes / gate_scales from
// dgate, up_codes / up_scales from dup.
void activation_backward_fp8(float* dgate, float* dup, uint8_t* gate_codes, float* gate_scales, uint8_t* up_codes,
                             float* up_scales, const float* dout, const float* gate, const float* up, int N, int F,
                             bool gelu);

// gpt-oss's experts: out = (clamp(up, -limit, limit) + 1) * g * sigmoid(alpha g), g = min(gate, limit)
// (transformers' GptOssExperts._apply_gate on de-interleaved gate / up); limit > 0. The gradients pass no
// gradient through a clamp where it cuts (as torch's clamp).
void clamped_swiglu_forward(float* out, const float* gate, const float* up, int N, int F, float alpha, float limit);
void clamped_swiglu_backward(float* dgate, float* dup, const float* dout, const float* gate, const float* up, int N,
                             int F, float alpha, float limit);

}  // namespace tandem::cpu
