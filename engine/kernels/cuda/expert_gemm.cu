// SPDX-FileCopyrightText: 2026 The Tandem developers
// SPDX-License-Identifier: GPL-3.0-or-later
// The batched head of the experts' GEMMs (kernels/cuda/expert_gemm.h says what and why).
#include "kernels/cuda/expert_gemm.h"

#include <algorithm>
#include <cstdlib>
#include <memory>
#include <string>
#include <unordered_map>

#include "core/cuda/memory.h"
#include "kernels/cuda/lt_plan.h"
#include "tandem/error.h"

namespace tandem::cuda {

namespace {

constexpr int kMinMeanRows = 128;          // fewer rows per expert on average: the grouped kernel alone
constexpr int kMinLargeDim = 256;          // a large projection: IN and OUT at least this
constexpr int kMaxNarrow = 64;             // a LoRA A product: at most this many output columns ...
constexpr int kMinLevelRows = 32;          // the smallest chunk of the lower levels
constexpr int kMaxLevels = 4;              // 128, 64, 32 (256 first when TANDEM_EXPERT_CHUNK=256)
constexpr int kChunkThreads = 512;         // the chunk kernel's one block (>= kMaxExperts of moe.cu)

// Rows per chunk of the first level: 128 (TANDEM_EXPERT_CHUNK overrides it for measurements: 64 to 1024, a
// power of two). Measured on Qwen3-30B-A3B's experts under a router's uneven counts (H200, bench --grouped-gemm
// and the model): 128 beats 256 by 7-12% on the large projections (fewer rows left to the grouped kernel)
// and by 2% on the model, though 256 is 2-3% faster when every expert's rows are a multiple of 256.
int chunk_rows(int /*N*/, int /*E*/) {
    static const int forced = [] {
        const char* v = std::getenv("TANDEM_EXPERT_CHUNK");
        const int c = v ? std::atoi(v) : 0;
        return c >= 64 && c <= 1024 && (c & (c - 1)) == 0 ? c : 0;
    }();
    return forced ? forced : 128;
}

// TANDEM_EXPERT_BATCHED (the ablations of bench --grouped-gemm and the MoE benchmark): 0 off; 1 the large
// projections only; 2 every level for the large projections too; unset or anything else the default.
enum class Mode { Off, Large, LargeLevels, Default };
Mode mode() {
    static const Mode m = [] {
        const char* v = std::getenv("TANDEM_EXPERT_BATCHED");
        if (!v || !*v) return Mode::Default;
        switch (v[0]) {
        case '0': return Mode::Off;
        case '1': return Mode::Large;
        case '2': return Mode::LargeLevels;
        default: return Mode::Default;
        }
    }();
    return m;
}

// Which products take the batched head, and with how many levels (measured on an H200 with bench
// --grouped-gemm, docs/benchmarks.md): a large projection with level 0 only (its lower levels' dummy batches
// cost more than the grouped kernel saves on the last rows), a LoRA A product (at most kMaxNarrow output
// columns from at least kMinLargeDim: the forward's x A^T, the backward's dout B) with every level (2.2x
// and 2x faster than the grouped kernel); the other LoRA products (kMaxNarrow inputs or fewer, accumulated
// into a wide output) are no faster batched: moe.cu gives them to the widening kernel (expert_widen.h) first.
enum class Route { Kernel, LevelZero, Levels };
Route route(int width, int reduce) {
    const Mode m = mode();
    if (m == Mode::Off) return Route::Kernel;
    if (width >= kMinLargeDim && reduce >= kMinLargeDim) return m == Mode::LargeLevels ? Route::Levels : Route::LevelZero;
    if (m == Mode::Default && width <= kMaxNarrow && reduce >= kMinLargeDim) return Route::Levels;
    return Route::Kernel;
}

// The levels of one call: level l runs B[l] batches of cap[l] rows; its pointers are slots [slot[l], slot[l] +
// B[l]) of each array.
struct Levels {
    int count = 0;
    int cap[kMaxLevels] = {}, B[kMaxLevels] = {}, slot[kMaxLevels] = {};
    int slots = 0;  // the sum of B, each rounded up to 4
};

Levels make_levels(int N, int E, bool one_level) {
    Levels lv;
    for (int cap = chunk_rows(N, E); cap >= kMinLevelRows && lv.count < kMaxLevels; cap /= 2) {
        // Level 0 has at most N / cap chunks; a lower level at most one per expert (the rows left are < 2 cap).
        const int B = lv.count == 0 ? N / cap : std::min(E, N / cap);
        lv.cap[lv.count] = cap;
        lv.B[lv.count] = B;
        lv.slot[lv.count] = lv.slots;
        lv.slots += (B + 3) / 4 * 4;  // every level's pointers start 32-byte aligned
        ++lv.count;
        if (one_level) break;
    }
    return lv;
}

// One scratch per thread (like its context): pointer arrays [3][slots], starts [E], then the dummy output.
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

// One block. Level 0: expert e owns floor(rows_e / cap) chunks of cap rows; each lower level (cap halved) takes
// one more chunk of an expert when the rows it has left reach that cap. A level's chunks are numbered in expert
// order by an exclusive scan; its batch j < (its chunks) is chunk j, the batches after them (up to B, the most
// there can be) multiply expert 0's first rows into the dummy. starts[e]: the first row past e's chunks.
__global__ void __launch_bounds__(kChunkThreads)
expert_chunks_kernel(const void** wp, const void** ap, void** cp, int32_t* starts, const int32_t* __restrict__ offsets,
                     const bf16* a, const bf16* w, int64_t w_stride, bf16* out, bf16* dummy, int E, Levels lv, int lda,
                     int ldc) {
    __shared__ int scan[kChunkThreads];
    const int e = static_cast<int>(threadIdx.x);
    int r = e < E ? offsets[e] : 0;
    int left = e < E ? offsets[e + 1] - r : 0;
    for (int l = 0; l < lv.count; ++l) {
        const int cap = lv.cap[l], n = left / cap;
        scan[e] = n;
        __syncthreads();
        for (int d = 1; d < kChunkThreads; d *= 2) {  // inclusive Hillis-Steele scan
            const int v = e >= d ? scan[e - d] : 0;
            __syncthreads();
            scan[e] += v;
            __syncthreads();
        }
        const int base = lv.slot[l] + scan[e] - n, total = scan[kChunkThreads - 1];
        for (int k = 0; k < n; ++k) {
            const int row = r + k * cap;
            wp[base + k] = w + static_cast<int64_t>(e) * w_stride;
            ap[base + k] = a + static_cast<int64_t>(row) * lda;
            cp[base + k] = out + static_cast<int64_t>(row) * ldc;
        }
        for (int j = total + e; j < lv.B[l]; j += kChunkThreads) {
            wp[lv.slot[l] + j] = w;
            ap[lv.slot[l] + j] = a;
            cp[lv.slot[l] + j] = dummy;
        }
        r += n * cap;
        left -= n * cap;
        __syncthreads();  // every thread has read the scan before the next level rewrites it
    }
    if (e < E) starts[e] = r;
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
    const bool backward = g == ExpertGemm::Backward;
    const int lda = backward ? OUT : IN, ldc = backward ? IN : OUT;
    const Route r = route(ldc, lda);
    if (r == Route::Kernel || E <= 0 || E > kChunkThreads || N / E < kMinMeanRows || IN % 8 || OUT % 8 ||
        w_stride % 8 || !aligned16(out) || !aligned16(a) || !aligned16(w))
        return nullptr;
    const Levels lv = make_levels(N, E, r == Route::LevelZero);
    const size_t arrays = round256(3 * sizeof(void*) * size_t(lv.slots)),
                 starts_bytes = round256(sizeof(int32_t) * size_t(E));
    if (arrays + starts_bytes + sizeof(bf16) * size_t(lv.cap[0]) * size_t(ldc) > kExpertScratchBytes) return nullptr;

    Context& ctx = context();
    const LtPlan* plans[kMaxLevels] = {};
    for (int l = 0; l < lv.count; ++l) {
        const BatchKey key{ctx.device, backward, lv.cap[l], IN, OUT, lv.B[l]};
        auto it = t_plans.find(key);
        if (it == t_plans.end()) it = t_plans.emplace(key, make_batch_plan(key, ctx)).first;
        if (!it->second) return nullptr;
        plans[l] = it->second.get();
    }
    if (t_scratch.device != ctx.device || !t_scratch.buf.data()) {
        cudaStreamCaptureStatus capturing = cudaStreamCaptureStatusNone;
        TANDEM_CUDA_CHECK(cudaStreamIsCapturing(ctx.stream, &capturing));
        if (capturing != cudaStreamCaptureStatusNone) return nullptr;  // never allocate inside a capture
        t_scratch.buf = DeviceBuffer(kExpertScratchBytes, "expert GEMM pointer arrays and dummy output");
        t_scratch.device = ctx.device;
    }
    char* base = t_scratch.buf.as<char>();
    const void** wp = reinterpret_cast<const void**>(base);
    const void** ap = wp + lv.slots;
    void** cp = const_cast<void**>(reinterpret_cast<const void**>(ap + lv.slots));
    int32_t* starts = reinterpret_cast<int32_t*>(base + arrays);
    bf16* dummy = reinterpret_cast<bf16*>(base + arrays + starts_bytes);
    expert_chunks_kernel<<<1, kChunkThreads, 0, ctx.stream>>>(wp, ap, cp, starts, offsets, a, w, w_stride, out, dummy,
                                                              E, lv, lda, ldc);
    TANDEM_CUDA_LAUNCH_CHECK();
    if (bias && !backward) {
        expert_bias_kernel<<<(N + 7) / 8, 256, 0, ctx.stream>>>(out, bias, bias_stride, offsets, starts, N, E, OUT,
                                                                accumulate);
        TANDEM_CUDA_LAUNCH_CHECK();
    }
    const float beta = backward || accumulate || bias ? 1.0f : 0.0f;
    for (int l = 0; l < lv.count; ++l) {
        const LtPlan& plan = *plans[l];
        const void** wl = wp + lv.slot[l];
        const void** al = ap + lv.slot[l];
        void** cl = cp + lv.slot[l];
        TANDEM_CUBLAS_CHECK(cublasLtMatmul(ctx.lt, plan.op, &alpha, wl, plan.a, al, plan.b, &beta, cl, plan.c, cl,
                                           plan.c, &plan.algo, ctx.lt_workspace, ctx.lt_workspace_bytes, ctx.stream));
    }
    return starts;
}

}  // namespace tandem::cuda
