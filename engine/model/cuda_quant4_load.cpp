// SPDX-FileCopyrightText: 2026 The Tandem developers
// SPDX-License-Identifier: GPL-3.0-or-later
// The CUDA model's load of 4-bit projections (see cuda_quant4_load.h).
// Decisions a reader must know:
//  - The staging span holds [fp32 absmax of the whole tensor][bf16 chunk][fp32 chunk]; chunks are multiples
//    of the block size, so each chunk's blocks are the tensor's blocks and one quantize_4bit launch per chunk
//    gives the same codes as one over the whole tensor.
//  - The offset of double quantization is computed on the host (absmax_mean, the CPU's function, so both
//    backends agree): one counted sync per tensor, at load only.
#include "model/cuda_quant4_load.h"

#include "tandem/error.h"

#if TANDEM_WITH_CUDA

#include <algorithm>
#include <cstring>
#include <string>
#include <vector>

#include "core/cuda/context.h"
#include "kernels/cpu/nf4.h"
#include "kernels/cuda/elementwise.h"
#include "kernels/cuda/nf4.h"
#include "model/quant4_load.h"

namespace tandem {

namespace {

struct Areas {
    float* absmax = nullptr;  // [max_blocks]
    cuda::bf16* b16 = nullptr;      // [chunk]
    float* f32 = nullptr;     // [chunk]
    int64_t chunk = 0;
};

Areas areas(const Quant4Stage& s, int blocksize) {
    Areas a;
    const size_t am = size_t(round_up(s.max_blocks * 4, 256));
    if (s.bytes < am + size_t(blocksize) * 6 + 512) throw_internal("4-bit load: staging span too small");
    a.absmax = reinterpret_cast<float*>(s.base);
    a.chunk = std::min<int64_t>(int64_t((s.bytes - am - 512) / 6) / blocksize * blocksize, int64_t(64) << 20);
    a.b16 = reinterpret_cast<cuda::bf16*>(s.base + am);
    a.f32 = reinterpret_cast<float*>(s.base + am + size_t(round_up(a.chunk * 2, 256)));
    return a;
}

void put_consts(float* dst, const Quant4Consts& c) {
    // Pageable source: the copy returns once the driver staged it.
    TANDEM_CUDA_CHECK(cudaMemcpyAsync(dst, c.data(), sizeof c, cudaMemcpyHostToDevice, cuda::context().stream));
}

// After the codes and the fp32 absmax (a.absmax) are on the device: the absmax pieces and the consts.
void finish_absmax(const ArenaLayout& W, void* base, const WeightEntry& e, const Dims& d, const Areas& a) {
    const Quant4Pieces& p = e.q;
    const int64_t blocks = quant4_blocks(p.n, d.quant_blocksize);
    float* consts = W.ptr<float>(base, p.consts);
    const cudaStream_t s = cuda::context().stream;
    if (!d.quant_nested) {
        TANDEM_CUDA_CHECK(cudaMemcpyAsync(W.ptr<float>(base, p.absmax), a.absmax, size_t(blocks) * 4,
                                          cudaMemcpyDeviceToDevice, s));
        put_consts(consts, nf4_consts(0.0f));
        return;
    }
    std::vector<float> host(static_cast<size_t>(blocks));
    TANDEM_CUDA_CHECK(cudaMemcpyAsync(host.data(), a.absmax, size_t(blocks) * 4, cudaMemcpyDeviceToHost, s));
    cuda::synchronize();
    const float offset = cpu::absmax_mean(host.data(), blocks);
    put_consts(consts, nf4_consts(offset));
    cuda::quantize_blockwise_8bit(W.ptr<uint8_t>(base, p.absmax), W.ptr<float>(base, p.nested_absmax), a.absmax,
                                  offset, consts + kQuant4Codes, blocks, 256);
}

}  // namespace

void upload_as_f32(float* dst, void* bf16_scratch, const TensorInfo& t, int64_t first, int64_t count,
                   std::vector<float>& host) {
    const cudaStream_t s = cuda::context().stream;
    const size_t es = dtype_size(t.dtype);
    const std::byte* src = t.data.data() + size_t(first) * es;
    if (t.dtype == DType::BF16) {
        TANDEM_CUDA_CHECK(cudaMemcpyAsync(bf16_scratch, src, size_t(count) * 2, cudaMemcpyHostToDevice, s));
        cuda::to_f32(dst, static_cast<const cuda::bf16*>(bf16_scratch), count);
    } else if (t.dtype == DType::F32) {
        TANDEM_CUDA_CHECK(cudaMemcpyAsync(dst, src, size_t(count) * 4, cudaMemcpyHostToDevice, s));
    } else {
        TensorInfo part = t;  // F16 / F64: converted on the host, one range at a time
        part.shape = {count};
        part.data = t.data.subspan(size_t(first) * es, size_t(count) * es);
        host.resize(size_t(count));
        tensor_to_f32(part, host);
        TANDEM_CUDA_CHECK(cudaMemcpyAsync(dst, host.data(), size_t(count) * 4, cudaMemcpyHostToDevice, s));
    }
}

void upload_quant4(const ArenaLayout& W, void* base, const WeightEntry& e, const Dims& d, const SafetensorsSet& ws,
                   const Quant4Stage& stage) {
    const Quant4Pieces& p = e.q;
    const cudaStream_t s = cuda::context().stream;
    uint8_t* codes = W.ptr<uint8_t>(base, p.codes);
    if (checkpoint_is_quant4(ws, e)) {
        const Quant4Tensors q = checkpoint_quant4(ws, e, d);
        auto up = [&](void* dst, const TensorInfo* t) {
            TANDEM_CUDA_CHECK(cudaMemcpyAsync(dst, t->data.data(), t->data.size(), cudaMemcpyHostToDevice, s));
        };
        up(codes, q.codes);
        up(W.ptr<uint8_t>(base, p.absmax), q.absmax);
        if (q.nested) up(W.ptr<float>(base, p.nested_absmax), q.nested_absmax);
        put_consts(W.ptr<float>(base, p.consts), checkpoint_consts(q));
        return;
    }
    // The tensor, or (4-bit experts of the Hub's layout) its parts one after the other; every part is a whole
    // number of blocks, so a chunk never needs two of them.
    const Areas a = areas(stage, d.quant_blocksize);
    std::vector<float> host;
    const std::vector<std::string> names = entry_tensors(e);
    const int64_t per = p.n / int64_t(names.size());
    if (per % d.quant_blocksize != 0) throw_internal("4-bit load: a part of " + e.name + " is not whole blocks");
    for (size_t k = 0; k < names.size(); ++k) {
        const TensorInfo& t = float_tensor(ws, names[k], per, "4-bit quantization");
        const int64_t first = int64_t(k) * per;
        for (int64_t off = 0; off < per; off += a.chunk) {
            const int64_t n = std::min(a.chunk, per - off);
            upload_as_f32(a.f32, a.b16, t, off, n, host);
            cuda::quantize_4bit(codes + (first + off) / 2, a.absmax + (first + off) / d.quant_blocksize, a.f32, n,
                                d.quant_blocksize);
        }
    }
    finish_absmax(W, base, e, d, a);
}

void random_quant4(const ArenaLayout& W, void* base, const WeightEntry& e, const Dims& d, uint64_t seed, float bound,
                   const Quant4Stage& stage) {
    const Quant4Pieces& p = e.q;
    uint8_t* codes = W.ptr<uint8_t>(base, p.codes);
    const Areas a = areas(stage, d.quant_blocksize);
    for (int64_t off = 0, k = 0; off < p.n; off += a.chunk, ++k) {
        const int64_t n = std::min(a.chunk, p.n - off);
        cuda::fill_uniform(a.b16, n, seed + uint64_t(k) * 0x9E3779B97F4A7C15ull, bound);
        cuda::to_f32(a.f32, a.b16, n);
        cuda::quantize_4bit(codes + off / 2, a.absmax + off / d.quant_blocksize, a.f32, n, d.quant_blocksize);
    }
    finish_absmax(W, base, e, d, a);
}

}  // namespace tandem

#endif  // TANDEM_WITH_CUDA
