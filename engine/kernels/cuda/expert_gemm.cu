// SPDX-FileCopyrightText: 2026 The Tandem developers
// SPDX-License-Identifier: GPL-3.0-or-later
// The batched head of the experts' GEMMs (kernels/cuda/expert_gemm.h says what and why).
#include "kernels/cuda/expert_gemm.h"

#include <cstdlib>
#include <cstring>
#include <memory>
#include <string>
#include <unordered_map>

#include "core/cuda/memory.h"
#include "kernels/cuda/lt_plan.h"
#include "tandem/error.h"

namespace tandem::cuda {

namespace {

constexpr int kMinMeanRows = 128;          // fewer rows per expert on average: the grouped kernel alone
constexpr int kMinDim = 256;               // IN and OUT at least this (LoRA's r-column products stay grouped)
constexpr int kChunkThreads = 512;         // the chunk kernel's one block (>= kMaxExperts of moe.cu)

// Rows per chunk: 256 when the experts average at least 512 rows, else 128.
int chunk_rows(int N, int E) { return N / E >= 512 ? 256 : 128; }

bool enabled() {
    static const bool on = [] {
        const char* v = std::getenv("TANDEM_EXPERT_BATCHED");
        return !(v && std::strcmp(v, "0") == 0);
    }();
    return on;
}

// One scratch per thread (like its context): pointer arrays [3][B], starts [E], then the dummy output.
struct Scratch {
    int device = -1;
    DeviceBuffer buf;
};
thread_local Scratch t_scratch;

constexpr size_t round256(size_t n) { return (n + 255) / 256 * 256; }

// The cuBLASLt descriptors of one batched shape, cached per thread (the context's handle and stream are).
struct BatchKey {
    int device;
    bool backward;
    int cap, IN, OUT, B;
    bool operator==(const BatchKey&) const = default;
};
struct BatchKeyHash {
    size_t operator()(const BatchKey& k) const noexcept {
        uint64_t h = 1469598103934665603ull;
        for (uint64_t v : {uint64_t(k.device), uint64_t(k.backward), uint64_t(k.cap), uint64_t(k.IN), uint64_t(k.OUT),
                           uint64_t(k.B)})
            h = (h ^ v) * 1099511628211ull;
        return size_t(h);
    }
};
// nullptr: the heuristic has no algorithm for the shape (the grouped kernel then does all rows).
thread_local std::unordered_map<BatchKey, std::unique_ptr<LtPlan>, BatchKeyHash> t_plans;

cublasLtMatrixLayout_t pointer_array_layout(uint64_t rows, uint64_t cols, int64_t ld, int batches) {
    cublasLtMatrixLayout_t l = nullptr;
    TANDEM_CUBLAS_CHECK(cublasLtMatrixLayoutCreate(&l, CUDA_R_16BF, rows, cols, ld));
    const uint32_t mode = CUBLASLT_BATCH_MODE_POINTER_ARRAY;
    const int32_t count = batches;
    TANDEM_CUBLAS_CHECK(cublasLtMatrixLayoutSetAttribute(l, CUBLASLT_MATRIX_LAYOUT_BATCH_MODE, &mode, sizeof(mode)));
    TANDEM_CUBLAS_CHECK(cublasLtMatrixLayoutSetAttribute(l, CUBLASLT_MATRIX_LAYOUT_BATCH_COUNT, &count, sizeof(count)));
    return l;
}

// Column-major views (cuBLASLt's) of the row-major matrices: W_e [OUT, IN] is [IN, OUT] with ld IN; a block of
// cap rows of width n is [n, cap] with ld n. Forward: D [OUT, cap] = W_e^T-view (T) x rows [IN, cap]; backward:
// D [IN, cap] = W_e-view [IN, OUT] (N) x dout rows [OUT, cap].
std::unique_ptr<LtPlan> make_batch_plan(const BatchKey& k, Context& ctx) {
    auto p = std::make_unique<LtPlan>();
    TANDEM_CUBLAS_CHECK(cublasLtMatmulDescCreate(&p->op, CUBLAS_COMPUTE_32F, CUDA_R_32F));
    set_desc(p->op, CUBLASLT_MATMUL_DESC_TRANSA, k.backward ? CUBLAS_OP_N : CUBLAS_OP_T);
    set_desc(p->op, CUBLASLT_MATMUL_DESC_TRANSB, CUBLAS_OP_N);
    const int in_rows = k.backward ? k.OUT : k.IN, out_rows = k.backward ? k.IN : k.OUT;
    p->a = pointer_array_layout(uint64_t(k.IN), uint64_t(k.OUT), k.IN, k.B);
    p->b = pointer_array_layout(uint64_t(in_rows), uint64_t(k.cap), in_rows, k.B);
    p->c = pointer_array_layout(uint64_t(out_rows), uint64_t(k.cap), out_rows, k.B);
    // Every pointer the chunk kernel writes is 16-byte aligned (rows of multiples of 8 bf16).
    if (lt_choose_algo(*p, ctx, 16, 16, 16)) return nullptr;
    return p;
}

// One block: expert e owns floor(rows_e / cap) chunks of cap rows, numbered in expert order by an exclusive
// scan; batch j < (all chunks) is chunk j, the batches after them (up to B = N / cap, the most there can be)
// multiply expert 0's first rows into the dummy. starts[e]: the first row past e's chunks.
__global__ void __launch_bounds__(kChunkThreads)
expert_chunks_kernel(const void** wp, const void** ap, void** cp, int32_t* starts, const int32_t* __restrict__ offsets,
                     const bf16* a, const bf16* w, int64_t w_stride, bf16* out, bf16* dummy, int E, int cap, int B,
                     int lda, int ldc) {
    __shared__ int scan[kChunkThreads];
    const int e = static_cast<int>(threadIdx.x);
    const int first = e < E ? offsets[e] : 0;
    const int n = e < E ? (offsets[e + 1] - first) / cap : 0;
    scan[e] = n;
    __syncthreads();
    for (int d = 1; d < kChunkThreads; d *= 2) {  // inclusive Hillis-Steele scan
        const int v = e >= d ? scan[e - d] : 0;
        __syncthreads();
        scan[e] += v;
        __syncthreads();
    }
    const int base = scan[e] - n, total = scan[kChunkThreads - 1];
    if (e < E) {
        for (int k = 0; k < n; ++k) {
            const int r = first + k * cap;
            wp[base + k] = w + static_cast<int64_t>(e) * w_stride;
            ap[base + k] = a + static_cast<int64_t>(r) * lda;
            cp[base + k] = out + static_cast<int64_t>(r) * ldc;
        }
        starts[e] = first + n * cap;
    }
    for (int j = total + e; j < B; j += kChunkThreads) {
        wp[j] = w;
        ap[j] = a;
        cp[j] = dummy;
    }
}

// The bias of the rows the batched GEMM covers (rows before starts[e] of expert e), put in front of it: out[r,:] =
// (accumulate ? out[r,:] : 0) + bias_e; the GEMM then adds its product (beta 1). One warp per row.
__global__ void expert_bias_kernel(bf16* out, const bf16* __restrict__ bias, int64_t bias_stride,
                                   const int32_t* __restrict__ offsets, const int32_t* __restrict__ starts, int N,
                                   int E, int OUT, bool accumulate) {
    const int row = static_cast<int>(blockIdx.x) * 8 + static_cast<int>(threadIdx.x) / 32;
    if (row >= N) return;
    int lo = 0, hi = E - 1;  // the expert whose rows hold `row`: the last e with offsets[e] <= row
    while (lo < hi) {
        const int mid = (lo + hi + 1) / 2;
        if (offsets[mid] <= row)
            lo = mid;
        else
            hi = mid - 1;
    }
    if (row >= starts[lo]) return;  // the grouped kernel's row: it adds the bias itself
    const bf16* b = bias + static_cast<int64_t>(lo) * bias_stride;
    bf16* o = out + static_cast<int64_t>(row) * OUT;
    for (int c = static_cast<int>(threadIdx.x) % 32; c < OUT; c += 32)
        o[c] = __float2bfloat16_rn((accumulate ? __bfloat162float(o[c]) : 0.0f) + __bfloat162float(b[c]));
}

bool aligned16(const void* p) { return reinterpret_cast<uintptr_t>(p) % 16 == 0; }

}  // namespace

const int32_t* expert_batched_head(ExpertGemm g, bf16* out, const bf16* a, const bf16* w, int64_t w_stride,
                                   const int32_t* offsets, int N, int IN, int OUT, int E, float alpha,
                                   bool accumulate, const bf16* bias, int64_t bias_stride) {
    if (!enabled() || E <= 0 || N / E < kMinMeanRows || IN < kMinDim || OUT < kMinDim || IN % 8 || OUT % 8 ||
        w_stride % 8 || !aligned16(out) || !aligned16(a) || !aligned16(w))
        return nullptr;
    const int cap = chunk_rows(N, E), B = N / cap;
    if (E > kChunkThreads) return nullptr;
    const bool backward = g == ExpertGemm::Backward;
    const int lda = backward ? OUT : IN, ldc = backward ? IN : OUT;
    const size_t arrays = round256(3 * sizeof(void*) * size_t(B)), starts_bytes = round256(sizeof(int32_t) * size_t(E));
    if (arrays + starts_bytes + sizeof(bf16) * size_t(cap) * size_t(ldc) > kExpertScratchBytes) return nullptr;

    Context& ctx = context();
    const BatchKey key{ctx.device, backward, cap, IN, OUT, B};
    auto it = t_plans.find(key);
    if (it == t_plans.end()) it = t_plans.emplace(key, make_batch_plan(key, ctx)).first;
    if (!it->second) return nullptr;
    const LtPlan& plan = *it->second;
    if (t_scratch.device != ctx.device || !t_scratch.buf.data()) {
        cudaStreamCaptureStatus capturing = cudaStreamCaptureStatusNone;
        TANDEM_CUDA_CHECK(cudaStreamIsCapturing(ctx.stream, &capturing));
        if (capturing != cudaStreamCaptureStatusNone) return nullptr;  // never allocate inside a capture
        t_scratch.buf = DeviceBuffer(kExpertScratchBytes, "expert GEMM pointer arrays and dummy output");
        t_scratch.device = ctx.device;
    }
    char* base = t_scratch.buf.as<char>();
    const void** wp = reinterpret_cast<const void**>(base);
    const void** ap = wp + B;
    void** cp = const_cast<void**>(reinterpret_cast<const void**>(ap + B));
    int32_t* starts = reinterpret_cast<int32_t*>(base + arrays);
    bf16* dummy = reinterpret_cast<bf16*>(base + arrays + starts_bytes);
    expert_chunks_kernel<<<1, kChunkThreads, 0, ctx.stream>>>(wp, ap, cp, starts, offsets, a, w, w_stride, out, dummy,
                                                              E, cap, B, lda, ldc);
    TANDEM_CUDA_LAUNCH_CHECK();
    if (bias && !backward) {
        expert_bias_kernel<<<(N + 7) / 8, 256, 0, ctx.stream>>>(out, bias, bias_stride, offsets, starts, N, E, OUT,
                                                                accumulate);
        TANDEM_CUDA_LAUNCH_CHECK();
    }
    const float beta = backward || accumulate || bias ? 1.0f : 0.0f;
    TANDEM_CUBLAS_CHECK(cublasLtMatmul(ctx.lt, plan.op, &alpha, wp, plan.a, ap, plan.b, &beta, cp, plan.c, cp, plan.c,
                                       &plan.algo, ctx.lt_workspace, ctx.lt_workspace_bytes, ctx.stream));
    return starts;
}

}  // namespace tandem::cuda
