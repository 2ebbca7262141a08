// SPDX-FileCopyrightText: 2026 The Tandem developers
// SPDX-License-Identifier: GPL-3.0-or-later
// Token embedding lookup on the CUDA backend (twin of kernels/cpu/embedding.h). ids live on the device and
// were validated on the host (the model checks the batch before uploading it), so no id check here.
#pragma once

#include <cstdint>

#include "core/cuda/context.h"

namespace tandem::cuda {

// out[N,C] = table[ids[N], :], table[V,C]. 16-byte vector copies.
void embedding_forward(bf16* out, const int32_t* ids, const bf16* table, int N, int C, int V);

// dtable[V,C] (fp32) += scatter of dout[N,C] to rows ids[N]. Deterministic: no atomics.
void embedding_backward(float* dtable, const bf16* dout, const int32_t* ids, int N, int C, int V);

}  // namespace tandem::cuda
