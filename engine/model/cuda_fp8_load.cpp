// SPDX-FileCopyrightText: 2026 The Tandem developers
// SPDX-License-Identifier: GPL-3.0-or-later
// The CUDA model's load of FP8 projections (see cuda_fp8_load.h).
// The staging span holds [fp32 band][bf16 band]; a band is 128 rows (the last one fewer), so each launch
// quantizes whole 128x128 blocks and the codes equal one launch over the whole tensor.
#include "model/cuda_fp8_load.h"

#include "tandem/error.h"

#if TANDEM_WITH_CUDA

#include <algorithm>
#include <string>
#include <vector>

#include "core/cuda/context.h"
#include "kernels/cuda/elementwise.h"
#include "kernels/cuda/fp8.h"
#include "model/cuda_quant4_load.h"
#include "model/fp8_load.h"

namespace tandem {

namespace {

struct Band {
    float* f32 = nullptr;
    cuda::bf16* b16 = nullptr;
};

Band band_areas(const Fp8Stage& s, int64_t in) {
    const size_t f32_bytes = size_t(round_up(kFp8Block * in * 4, 256));
    if (s.bytes < f32_bytes + size_t(kFp8Block * in * 2)) throw_internal("FP8 load: staging span too small");
    return {reinterpret_cast<float*>(s.base), reinterpret_cast<cuda::bf16*>(s.base + f32_bytes)};
}

}  // namespace

void upload_fp8(const ArenaLayout& W, void* base, const WeightEntry& e, const SafetensorsSet& ws,
                const Fp8Stage& stage) {
    const TensorInfo& t = fp8_source_tensor(ws, e);
    const Fp8Pieces& p = e.f8;
    const Band a = band_areas(stage, p.in);
    uint8_t* codes = W.ptr<uint8_t>(base, p.codes);
    float* scales = W.ptr<float>(base, p.scales);
    const int64_t inp = fp8_padded(p.in), ld = fp8_scale_ld(p.in);
    std::vector<float> host;
    for (int64_t r0 = 0; r0 < p.out; r0 += kFp8Block) {
        const int64_t rows = std::min<int64_t>(kFp8Block, p.out - r0);
        upload_as_f32(a.f32, a.b16, t, r0 * p.in, rows * p.in, host);
        cuda::quantize_fp8_weight(codes + r0 * inp, scales + r0 / kFp8Block * ld, a.f32, int(rows), int(p.in));
    }
}

void random_fp8(const ArenaLayout& W, void* base, const WeightEntry& e, uint64_t seed, float bound,
                const Fp8Stage& stage) {
    const Fp8Pieces& p = e.f8;
    const Band a = band_areas(stage, p.in);
    uint8_t* codes = W.ptr<uint8_t>(base, p.codes);
    float* scales = W.ptr<float>(base, p.scales);
    const int64_t inp = fp8_padded(p.in), ld = fp8_scale_ld(p.in);
    for (int64_t r0 = 0, k = 0; r0 < p.out; r0 += kFp8Block, ++k) {
        const int64_t rows = std::min<int64_t>(kFp8Block, p.out - r0), n = rows * p.in;
        cuda::fill_uniform(a.b16, n, seed + uint64_t(k) * 0x9E3779B97F4A7C15ull, bound);
        cuda::to_f32(a.f32, a.b16, n);
        cuda::quantize_fp8_weight(codes + r0 * inp, scales + r0 / kFp8Block * ld, a.f32, int(rows), int(p.in));
    }
}

}  // namespace tandem

#endif  // TANDEM_WITH_CUDA
