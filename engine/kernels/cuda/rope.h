// SPDX-FileCopyrightText: 2026 The Tandem developers
// SPDX-License-Identifier: GPL-3.0-or-later
// Rotary position embedding on the CUDA backend (twin of kernels/cpu/rope.h): HF rotate_half convention.
// The cos/sin table is built on the host by cpu::rope_table_build (transformers' fp32 rounding) and
// uploaded once (RopeTableDevice); positions[T] are on the device (the batch metadata).
#pragma once

#include <cstdint>

#include "kernels/cpu/rope.h"
#include "core/cuda/context.h"

namespace tandem::cuda {

struct RopeTableDevice {
    int head_dim = 0;
    int max_pos = 0;
    int long_from = 0;     // cpu::RopeTable::long_from
    float* cos = nullptr;  // [P, D/2] fp32, device
    float* sin = nullptr;  // [P, D/2] fp32, device
};

// Bytes the device table needs (for the memory plan), and the upload into caller-owned device memory
// (cos at dst, sin right after it).
size_t rope_table_bytes(const cpu::RopeTable& table);
RopeTableDevice rope_table_upload(const cpu::RopeTable& table, void* dst);

// out[T,H,D] = rotate(inp) at positions[T]. out may equal inp. Positions are trusted (checked on the host).
void rope_forward(bf16* out, const bf16* inp, const int32_t* positions, const RopeTableDevice& table, int T, int H,
                  int D);
// dinp[T,H,D] = inverse rotation of dout (written). dinp may equal dout.
void rope_backward(bf16* dinp, const bf16* dout, const int32_t* positions, const RopeTableDevice& table, int T, int H,
                   int D);

}  // namespace tandem::cuda
