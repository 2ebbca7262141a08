// SPDX-FileCopyrightText: 2026 The Tandem developers
// SPDX-License-Identifier: GPL-3.0-or-later
// The gated MLP activations on the CUDA backend (twins of kernels/cpu/swiglu.h): SwiGLU (Llama, Qwen, ...)
// and GeGLU with the tanh GELU (Gemma). bf16 storage, fp32 math, 16-byte vectors.
#pragma once

#include "core/cuda/context.h"

namespace tandem::cuda {

// out[N,F] = silu(gate) * up. out may alias gate or up.
void swiglu_forward(bf16* out, const bf16* gate, const bf16* up, int N, int F);
// dgate = dout * up * silu'(gate), dup = dout * silu(gate) (written). dgate may alias gate, dup may alias up.
void swiglu_backward(bf16* dgate, bf16* dup, const bf16* dout, const bf16* gate, const bf16* up, int N, int F);

// out = gelu_tanh(gate) * up; the gradients as above with gelu_tanh. Same aliasing.
void geglu_forward(bf16* out, const bf16* gate, const bf16* up, int N, int F);
void geglu_backward(bf16* dgate, bf16* dup, const bf16* dout, const bf16* gate, const bf16* up, int N, int F);

// gpt-oss's clamped SwiGLU (kernels/cpu/swiglu.h): out = (clamp(up, -limit, limit) + 1) * g * sigmoid(alpha g),
// g = min(gate, limit); gradients as there. Same aliasing.
void clamped_swiglu_forward(bf16* out, const bf16* gate, const bf16* up, int N, int F, float alpha, float limit);
void clamped_swiglu_backward(bf16* dgate, bf16* dup, const bf16* dout, const bf16* gate, const bf16* up, int N, int F,
                             float alpha, float limit);

}  // namespace tandem::cuda
