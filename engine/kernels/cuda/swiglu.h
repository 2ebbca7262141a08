// SPDX-FileCopyrightText: 2026 The Tandem developers
// SPDX-License-Identifier: GPL-3.0-or-later
// The gated MLP activations on the CUDA backend (twins of kernels/cpu/swiglu.h): SwiGLU (Llama, Qwen, ...)
// and GeGLU with the tanh GELU (Gemma). bf16 storage, fp32 math, 16-byte vectors.
#pragma once

#include <cstdint>

#include "core/cuda/context.h"

namespace tandem::cuda {

// out[N,F] = silu(gate) * up. out may alias gate or up.
void swiglu_forward(bf16* out, const bf16* gate, const bf16* up, int N, int F);
// dgate = dout * up * silu'(gate), dup = dout * silu(gate) (written). dgate may alias gate, dup may alias up.
void swiglu_backward(bf16* dgate, bf16* dup, const bf16* dout, const bf16* gate, const bf16* up, int N, int F);

// out = gelu_tanh(gate) * up; the gradients as above with gelu_tanh. Same aliasing.
void geglu_forward(bf16* out, const bf16* gate, const bf16* up, int N, int F);
void geglu_backward(bf16* dgate, bf16* dup, const bf16* dout, const bf16* gate, const bf16* up, int N, int F);

// FP8 models: SwiGLU (GeGLU with gelu) as above, its output also quantized for the FP8 GEMM it feeds: codes and
// scales as quantize_fp8_rows(codes, scales, out, N, F) writes them (kernels/cuda/fp8.h), in the same pass where F
// is a multiple of 128. No aliasing of out with gate / up here.
void activation_forward_fp8(bf16* out, uint8_t* codes, float* scales, const bf16* gate, const bf16* up, int N, int F,
                            bool gelu);
// The gradients as swiglu_backward / geglu_backward write them, each also quantized: gate_codes / gate_scales from
// dgate, up_codes / up_scales from dup (quantize_fp8_rows' layout). No aliasing.
void activation_backward_fp8(bf16* dgate, bf16* dup, uint8_t* gate_codes, float* gate_scales, uint8_t* up_codes,
                             float* up_scales, const bf16* dout, const bf16* gate, const bf16* up, int N, int F,
                             bool gelu);

// gpt-oss's clamped SwiGLU (kernels/cpu/swiglu.h): out = (clamp(up, -limit, limit) + 1) * g * sigmoid(alpha g),
// g = min(gate, limit); gradients as there. Same aliasing.
void clamped_swiglu_forward(bf16* out, const bf16* gate, const bf16* up, int N, int F, float alpha, float limit);
void clamped_swiglu_backward(bf16* dgate, bf16* dup, const bf16* dout, const bf16* gate, const bf16* up, int N, int F,
                             float alpha, float limit);

}  // namespace tandem::cuda
