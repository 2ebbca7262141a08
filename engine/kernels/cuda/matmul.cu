// SPDX-FileCopyrightText: 2026 The Tandem developers
// SPDX-License-Identifier: GPL-3.0-or-later
// Linear layers on the CUDA backend (see matmul.h): every product is one cublasLtMatmul through gemm().
// N = rows, IN = input features, OUT = output features, R = LoRA rank; all matrices row-major.
// Decisions a reader must know:
//  - Row-major trick: cuBLASLt is column-major, and a row-major X[r,c] with leading dim ld is the
//    column-major X^T[c,r] with the same ld. So row-major C[M,N] = op(A) @ op(B) is issued as the
//    column-major C^T[N,M] = op(B)^T @ op(A)^T: cuBLASLt's "A" is our B and its "B" is our A, with the
//    same transpose flags.
//  - bf16 A/B, C/D bf16 or fp32, CUBLAS_COMPUTE_32F, fp32 alpha/beta (host pointers).
//  - One plan (matmul desc, layouts, the heuristic's algorithm) per key = shape, leading dims, transposes,
//    output type, epilogue, pointer alignments and device; built on a thread's first use and kept by that
//    thread (a handful of shapes per model; per thread, like the context: no lock around any GEMM). Alignments are in the key because the heuristic only
//    returns algorithms valid for the alignment it is told (the default assumption is 256 bytes, which
//    chunk offsets and odd sizes break).
//  - The bias gradient is a small kernel (fixed summation order, no workspace, no atomics): deterministic.
//  - matmul_forward with at most kGemvMaxRows rows (a decode step: one token per sequence) is a GEMV kernel, one
//    warp per output feature reading its weight row once with 16-byte loads for every input row: the product is
//    bound by reading the weights, and cuBLASLt's GEMM tiles left a third of the bandwidth unused there.
#include "kernels/cuda/matmul.h"
#include "kernels/cuda/fp8.h"
#include "kernels/cuda/lt_plan.h"
#include "kernels/cuda/vec.cuh"

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <unordered_map>

namespace tandem::cuda {

// ----------------------------------------------------------------------------------------------------------
// CUDA kernels

constexpr int kBiasCols = 32;   // columns per block (one warp across, coalesced)
constexpr int kBiasLanes = 16;  // row lanes per block

// dbias[OUT] (fp32) += sum over n of dout[n, o]. Lane y sums rows y, y + kBiasLanes, ...; the lanes are
// then added in lane order: the same order on every run.
static __global__ void __launch_bounds__(kBiasCols* kBiasLanes)
    bias_grad_kernel(float* dbias, const bf16* dout, int N, int OUT) {
    __shared__ float part[kBiasLanes][kBiasCols + 1];
    const int o = blockIdx.x * kBiasCols + threadIdx.x;
    float acc = 0.0f;
    if (o < OUT)
        for (int n = threadIdx.y; n < N; n += kBiasLanes) acc += __bfloat162float(dout[static_cast<size_t>(n) * OUT + o]);
    part[threadIdx.y][threadIdx.x] = acc;
    __syncthreads();
    if (threadIdx.y == 0 && o < OUT) {
        float s = 0.0f;
        for (int y = 0; y < kBiasLanes; y++) s += part[y][threadIdx.x];
        dbias[o] += s;
    }
}

// out[n, o] = dot(inp[n, :], w[o, :]) (+ bias[o]) for NR rows: warp o % kGemvWarps of block o / kGemvWarps, fp32
// sums in a fixed order (lane-strided, then the butterfly), rounded once.
constexpr int kGemvMaxRows = 4, kGemvWarps = 8;
template <int NR>
static __global__ void __launch_bounds__(kGemvWarps * 32)
    gemv_kernel(bf16* __restrict__ out, const bf16* __restrict__ inp, const bf16* __restrict__ w,
                const bf16* __restrict__ bias, int IN, int OUT) {
    const int o = static_cast<int>(blockIdx.x) * kGemvWarps + static_cast<int>(threadIdx.x) / 32;
    const int lane = threadIdx.x % 32;
    if (o >= OUT) return;
    const bf16* wr = w + static_cast<int64_t>(o) * IN;
    float acc[NR] = {};
#pragma unroll 4
    for (int c = lane * 8; c < IN; c += 32 * 8) {
        const Pack<bf16, 8> wv = load_pack<8>(wr + c);
#pragma unroll
        for (int n = 0; n < NR; n++) {
            const Pack<bf16, 8> xv = load_pack<8>(inp + static_cast<int64_t>(n) * IN + c);
#pragma unroll
            for (int q = 0; q < 8; q++) acc[n] += __bfloat162float(wv.v[q]) * __bfloat162float(xv.v[q]);
        }
    }
#pragma unroll
    for (int n = 0; n < NR; n++)
#pragma unroll
        for (int d = 16; d > 0; d /= 2) acc[n] += __shfl_xor_sync(0xffffffffu, acc[n], d);
    if (lane == 0) {
        const float b = bias ? __bfloat162float(bias[o]) : 0.0f;
#pragma unroll
        for (int n = 0; n < NR; n++) out[static_cast<int64_t>(n) * OUT + o] = __float2bfloat16_rn(acc[n] + b);
    }
}

template <int NR>
static void gemv(bf16* out, const bf16* inp, const bf16* w, const bf16* bias, int IN, int OUT) {
    gemv_kernel<NR><<<static_cast<unsigned>((OUT + kGemvWarps - 1) / kGemvWarps), kGemvWarps * 32, 0,
                      context().stream>>>(out, inp, w, bias, IN, OUT);
    TANDEM_CUDA_LAUNCH_CHECK();
}

// LoRA's first product for a decode step's few rows, tmp[n, r] = dot(inp[n, :], a[r, :]): R (the rank) is too few
// outputs for gemv_kernel's warp per output, so here a whole block per output r: 256 threads stride over IN
// with 16-byte loads, then a fixed-order reduction (warp butterfly, then the warps in order), rounded once.
constexpr int kLoraAThreads = 256;
template <int NR>
static __global__ void __launch_bounds__(kLoraAThreads)
    lora_a_gemv_kernel(bf16* __restrict__ tmp, const bf16* __restrict__ inp, const bf16* __restrict__ a, int IN,
                       int R) {
    __shared__ float part[NR][kLoraAThreads / 32];
    const int r = static_cast<int>(blockIdx.x);
    const bf16* ar = a + static_cast<int64_t>(r) * IN;
    float acc[NR] = {};
    for (int c = static_cast<int>(threadIdx.x) * 8; c < IN; c += kLoraAThreads * 8) {
        const Pack<bf16, 8> av = load_pack<8>(ar + c);
#pragma unroll
        for (int n = 0; n < NR; n++) {
            const Pack<bf16, 8> xv = load_pack<8>(inp + static_cast<int64_t>(n) * IN + c);
#pragma unroll
            for (int q = 0; q < 8; q++) acc[n] += __bfloat162float(av.v[q]) * __bfloat162float(xv.v[q]);
        }
    }
    const int lane = threadIdx.x % 32, warp = threadIdx.x / 32;
#pragma unroll
    for (int n = 0; n < NR; n++) {
#pragma unroll
        for (int d = 16; d > 0; d /= 2) acc[n] += __shfl_xor_sync(0xffffffffu, acc[n], d);
        if (lane == 0) part[n][warp] = acc[n];
    }
    __syncthreads();
    if (threadIdx.x < NR) {
        float s = 0.0f;
        for (int w = 0; w < kLoraAThreads / 32; w++) s += part[threadIdx.x][w];
        tmp[static_cast<int64_t>(threadIdx.x) * R + r] = __float2bfloat16_rn(s);
    }
}

template <int NR>
static void lora_a_gemv(bf16* tmp, const bf16* inp, const bf16* a, int IN, int R) {
    lora_a_gemv_kernel<NR><<<static_cast<unsigned>(R), kLoraAThreads, 0, context().stream>>>(tmp, inp, a, IN, R);
    TANDEM_CUDA_LAUNCH_CHECK();
}

// LoRA's second product for a decode step's few rows: out[n, o] += scaling * dot(tmp[n, :R], b[o, :R]), one thread
// per output feature reading its row of b (R bf16, 16-byte loads) once for all NR rows; tmp in shared memory; the
// sum in fp32 in a fixed order, added to out and rounded once (what the GEMM with beta 1 computes).
constexpr int kLoraBThreads = 256, kLoraBMaxRank = 256;
template <int NR>
static __global__ void __launch_bounds__(kLoraBThreads)
    lora_b_gemv_kernel(bf16* __restrict__ out, const bf16* __restrict__ tmp, const bf16* __restrict__ b,
                       float scaling, int OUT, int R) {
    __shared__ float t[NR][kLoraBMaxRank];
    for (int i = threadIdx.x; i < NR * R; i += blockDim.x) t[i / R][i % R] = __bfloat162float(tmp[i]);
    __syncthreads();
    const int o = static_cast<int>(blockIdx.x) * kLoraBThreads + static_cast<int>(threadIdx.x);
    if (o >= OUT) return;
    const bf16* br = b + static_cast<int64_t>(o) * R;
    float acc[NR] = {};
    for (int j = 0; j < R; j += 8) {
        const Pack<bf16, 8> bv = load_pack<8>(br + j);
#pragma unroll
        for (int n = 0; n < NR; n++)
#pragma unroll
            for (int q = 0; q < 8; q++) acc[n] += t[n][j + q] * __bfloat162float(bv.v[q]);
    }
#pragma unroll
    for (int n = 0; n < NR; n++) {
        bf16& y = out[static_cast<int64_t>(n) * OUT + o];
        y = __float2bfloat16_rn(__bfloat162float(y) + scaling * acc[n]);
    }
}

template <int NR>
static void lora_b_gemv(bf16* out, const bf16* tmp, const bf16* b, float scaling, int OUT, int R) {
    lora_b_gemv_kernel<NR><<<static_cast<unsigned>((OUT + kLoraBThreads - 1) / kLoraBThreads), kLoraBThreads, 0,
                             context().stream>>>(out, tmp, b, scaling, OUT, R);
    TANDEM_CUDA_LAUNCH_CHECK();
}

// ----------------------------------------------------------------------------------------------------------
// cuBLASLt plans

namespace {

struct PlanKey {
    int device;
    bool trans_a, trans_b, c_f32, bias;
    bool fp8;  // fp8_matmul's block-scaled FP8 GEMM (A, B E4M3; the other fields as for bf16)
    int M, N, K, lda, ldb, ldc;
    uint32_t align_a, align_b, align_c, align_bias;
    bool operator==(const PlanKey&) const = default;
};

struct PlanKeyHash {
    size_t operator()(const PlanKey& k) const noexcept {
        uint64_t h = 1469598103934665603ull;
        auto mix = [&h](uint64_t v) { h = (h ^ v) * 1099511628211ull; };
        mix(uint64_t(k.device));
        mix(uint64_t(k.trans_a) | uint64_t(k.trans_b) << 1 | uint64_t(k.c_f32) << 2 | uint64_t(k.bias) << 3 |
            uint64_t(k.fp8) << 4);
        mix(uint32_t(k.M)), mix(uint32_t(k.N)), mix(uint32_t(k.K));
        mix(uint32_t(k.lda)), mix(uint32_t(k.ldb)), mix(uint32_t(k.ldc));
        mix(k.align_a | uint64_t(k.align_b) << 16 | uint64_t(k.align_c) << 32 | uint64_t(k.align_bias) << 48);
        return size_t(h);
    }
};

// One shape's descriptors (lt_plan.h): cuBLASLt's A is our B, its B our A (see the file comment).
using Plan = LtPlan;

struct PrefGuard {
    cublasLtMatmulPreference_t p = nullptr;
    ~PrefGuard() {
        if (p) cublasLtMatmulPreferenceDestroy(p);
    }
};

// Per thread, like the context whose stream the plans run on: GEMMs of different threads (a training run and a
// chat in the studio; one worker per GPU) never wait on each other's lock, and the bias and scale pointers
// written into a cached descriptor right before its call cannot race.
thread_local std::unordered_map<PlanKey, std::unique_ptr<Plan>, PlanKeyHash> t_plans;

// Largest power of two (<= 256, cuBLASLt's default assumption) dividing the address; 0 for nullptr.
uint32_t alignment_of(const void* p) {
    if (!p) return 0;
    const uintptr_t a = reinterpret_cast<uintptr_t>(p);
    uint32_t align = 256;
    while (align > 1 && (a % align) != 0) align /= 2;
    return align;
}

template <class T>
void set_pref(cublasLtMatmulPreference_t p, cublasLtMatmulPreferenceAttributes_t attr, const T& v) {
    TANDEM_CUBLAS_CHECK(cublasLtMatmulPreferenceSetAttribute(p, attr, &v, sizeof(v)));
}

std::string describe(const PlanKey& k) {
    return "C[" + std::to_string(k.M) + "," + std::to_string(k.N) + "] (" + (k.c_f32 ? "fp32" : "bf16") +
           ", ldc " + std::to_string(k.ldc) + ") = " + (k.trans_a ? "A^T" : "A") + " (lda " + std::to_string(k.lda) +
           ") @ " + (k.trans_b ? "B^T" : "B") + " (ldb " + std::to_string(k.ldb) + "), K = " + std::to_string(k.K) +
           (k.bias ? ", bias epilogue" : "") + ", alignments A/B/C " + std::to_string(k.align_a) + "/" +
           std::to_string(k.align_b) + "/" + std::to_string(k.align_c) + " bytes";
}

std::unique_ptr<Plan> make_plan(const PlanKey& k, Context& ctx, const bf16* bias) {
    auto plan = std::make_unique<Plan>();
    const cudaDataType_t c_type = k.c_f32 ? CUDA_R_32F : CUDA_R_16BF;
    TANDEM_CUBLAS_CHECK(cublasLtMatmulDescCreate(&plan->op, CUBLAS_COMPUTE_32F, CUDA_R_32F));
    // cuBLASLt's A is our B, its B is our A (see the file comment).
    set_desc(plan->op, CUBLASLT_MATMUL_DESC_TRANSA, k.trans_b ? CUBLAS_OP_T : CUBLAS_OP_N);
    set_desc(plan->op, CUBLASLT_MATMUL_DESC_TRANSB, k.trans_a ? CUBLAS_OP_T : CUBLAS_OP_N);
    if (k.bias) {
        set_desc(plan->op, CUBLASLT_MATMUL_DESC_EPILOGUE, CUBLASLT_EPILOGUE_BIAS);
        set_desc(plan->op, CUBLASLT_MATMUL_DESC_BIAS_DATA_TYPE, int32_t(CUDA_R_16BF));
        set_desc(plan->op, CUBLASLT_MATMUL_DESC_BIAS_POINTER, static_cast<const void*>(bias));
    }
    // Column-major layouts (rows, cols, ld) of the matrices as stored.
    // Ours B: [K,N] row-major = [N,K] column-major; with trans_b, [N,K] row-major = [K,N] column-major.
    TANDEM_CUBLAS_CHECK(cublasLtMatrixLayoutCreate(&plan->a, CUDA_R_16BF, k.trans_b ? k.K : k.N,
                                                   k.trans_b ? k.N : k.K, k.ldb));
    // Ours A: [M,K] row-major = [K,M] column-major; with trans_a, [K,M] row-major = [M,K] column-major.
    TANDEM_CUBLAS_CHECK(cublasLtMatrixLayoutCreate(&plan->b, CUDA_R_16BF, k.trans_a ? k.M : k.K,
                                                   k.trans_a ? k.K : k.M, k.lda));
    // Ours C: [M,N] row-major = [N,M] column-major.
    TANDEM_CUBLAS_CHECK(cublasLtMatrixLayoutCreate(&plan->c, c_type, k.N, k.M, k.ldc));

    // cuBLASLt's A is our B, its B is our A (alignments swapped accordingly).
    if (const std::optional<cublasStatus_t> bad = lt_choose_algo(*plan, ctx, k.align_b, k.align_a, k.align_c))
        throw Error(ErrorCategory::Device, std::string("cuBLASLt has no algorithm for ") + describe(k) + " on " +
                                               ctx.name + " (" + cublasLtGetStatusName(*bad) +
                                               "); a shape or alignment this GPU's cuBLASLt does not support");
    return plan;
}

// The one cuBLASLt call: C[M,N] = alpha * op(A) @ op(B) + beta * C (+ bias[N] broadcast over rows).
void lt_matmul(bool trans_a, bool trans_b, int M, int N, int K, float alpha, const bf16* A, int lda, const bf16* B,
               int ldb, float beta, void* C, int ldc, bool c_f32, const bf16* bias) {
    TANDEM_KCHECK_PTR(A);
    TANDEM_KCHECK_PTR(B);
    TANDEM_KCHECK_PTR(C);
    TANDEM_KCHECK(M > 0 && N > 0 && K > 0);
    TANDEM_KCHECK(lda >= (trans_a ? M : K));
    TANDEM_KCHECK(ldb >= (trans_b ? K : N));
    TANDEM_KCHECK(ldc >= N);
    TANDEM_KCHECK(!bias || !c_f32);  // the bias epilogue is only set up for bf16 outputs
    Context& ctx = context();
    const PlanKey key{ctx.device, trans_a, trans_b, c_f32, bias != nullptr, false, M, N, K, lda, ldb, ldc,
                      alignment_of(A), alignment_of(B), alignment_of(C), alignment_of(bias)};
    auto it = t_plans.find(key);
    if (it == t_plans.end()) it = t_plans.emplace(key, make_plan(key, ctx, bias)).first;
    Plan& plan = *it->second;
    if (bias) set_desc(plan.op, CUBLASLT_MATMUL_DESC_BIAS_POINTER, static_cast<const void*>(bias));
    TANDEM_CUBLAS_CHECK(cublasLtMatmul(ctx.lt, plan.op, &alpha, B, plan.a, A, plan.b, &beta, C, plan.c, C, plan.c,
                                       &plan.algo, ctx.lt_workspace, ctx.lt_workspace_bytes, ctx.stream));
}

// The block-scaled FP8 GEMM (Hopper): out[N,M] (bf16, row-major = cuBLASLt's column-major [M,N]) =
// w[M,Kp] (cuBLASLt's A, transposed: the TN form FP8 requires) times x[N,Kp] (cuBLASLt's B), with the weight's
// 128x128 block scales (A: BLK128x128_32F) and the activations' 1x128 ones (B: VEC128_32F). Both scale
// pointers (and the bias) are written into the cached descriptor under the plan lock, right before the call.
std::unique_ptr<Plan> make_fp8_plan(const PlanKey& k, Context& ctx, const bf16* bias, const float* w_scales,
                                    const float* x_scales) {
    auto plan = std::make_unique<Plan>();
    TANDEM_CUBLAS_CHECK(cublasLtMatmulDescCreate(&plan->op, CUBLAS_COMPUTE_32F, CUDA_R_32F));
    set_desc(plan->op, CUBLASLT_MATMUL_DESC_TRANSA, CUBLAS_OP_T);
    set_desc(plan->op, CUBLASLT_MATMUL_DESC_TRANSB, CUBLAS_OP_N);
    set_desc(plan->op, CUBLASLT_MATMUL_DESC_A_SCALE_MODE, int32_t(CUBLASLT_MATMUL_MATRIX_SCALE_BLK128x128_32F));
    set_desc(plan->op, CUBLASLT_MATMUL_DESC_B_SCALE_MODE, int32_t(CUBLASLT_MATMUL_MATRIX_SCALE_VEC128_32F));
    // The heuristic refuses block-scaled modes without scale pointers (CUBLAS_STATUS_INVALID_VALUE).
    set_desc(plan->op, CUBLASLT_MATMUL_DESC_A_SCALE_POINTER, static_cast<const void*>(w_scales));
    set_desc(plan->op, CUBLASLT_MATMUL_DESC_B_SCALE_POINTER, static_cast<const void*>(x_scales));
    if (k.bias) {
        set_desc(plan->op, CUBLASLT_MATMUL_DESC_EPILOGUE, CUBLASLT_EPILOGUE_BIAS);
        set_desc(plan->op, CUBLASLT_MATMUL_DESC_BIAS_DATA_TYPE, int32_t(CUDA_R_16BF));
        set_desc(plan->op, CUBLASLT_MATMUL_DESC_BIAS_POINTER, static_cast<const void*>(bias));
    }
    // Here M = the output features, N = the rows, K = the padded inner dimension.
    TANDEM_CUBLAS_CHECK(cublasLtMatrixLayoutCreate(&plan->a, CUDA_R_8F_E4M3, k.K, k.M, k.lda));
    TANDEM_CUBLAS_CHECK(cublasLtMatrixLayoutCreate(&plan->b, CUDA_R_8F_E4M3, k.K, k.N, k.ldb));
    TANDEM_CUBLAS_CHECK(cublasLtMatrixLayoutCreate(&plan->c, CUDA_R_16BF, k.M, k.N, k.ldc));
    if (const std::optional<cublasStatus_t> bad = lt_choose_algo(*plan, ctx, k.align_a, k.align_b, k.align_c))
        throw Error(ErrorCategory::Unsupported,
                    "cuBLASLt has no block-scaled FP8 algorithm for out[" + std::to_string(k.N) + "," +
                        std::to_string(k.M) + "] = x[" + std::to_string(k.N) + "," + std::to_string(k.K) + "] @ w[" +
                        std::to_string(k.M) + "," + std::to_string(k.K) + "]^T on " + ctx.name + " (" +
                        cublasLtGetStatusName(*bad) +
                        "); FP8 training needs a Hopper GPU (compute capability 9.0) and cuBLAS 12.9 or newer: use "
                        "precision bf16");
    return plan;
}

}  // namespace

// lt_plan.h: the heuristic's best algorithm for a plan's descriptors into plan.algo.
std::optional<cublasStatus_t> lt_choose_algo(LtPlan& plan, Context& ctx, uint32_t align_a, uint32_t align_b,
                                             uint32_t align_c) {
    PrefGuard pref;
    TANDEM_CUBLAS_CHECK(cublasLtMatmulPreferenceCreate(&pref.p));
    set_pref(pref.p, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES, uint64_t(ctx.lt_workspace_bytes));
    set_pref(pref.p, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_A_BYTES, align_a);
    set_pref(pref.p, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_B_BYTES, align_b);
    set_pref(pref.p, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_C_BYTES, align_c);
    set_pref(pref.p, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_D_BYTES, align_c);
    cublasLtMatmulHeuristicResult_t result{};
    int found = 0;
    const cublasStatus_t s =
        cublasLtMatmulAlgoGetHeuristic(ctx.lt, plan.op, plan.a, plan.b, plan.c, plan.c, pref.p, 1, &result, &found);
    if (s != CUBLAS_STATUS_SUCCESS || found == 0 || result.state != CUBLAS_STATUS_SUCCESS)
        return s != CUBLAS_STATUS_SUCCESS ? s : CUBLAS_STATUS_NOT_SUPPORTED;
    plan.algo = result.algo;
    return std::nullopt;
}

// ----------------------------------------------------------------------------------------------------------
// launchers

void gemm(bool trans_a, bool trans_b, int M, int N, int K, float alpha, const bf16* A, int lda, const bf16* B, int ldb,
          float beta, void* C, int ldc, bool c_f32) {
    lt_matmul(trans_a, trans_b, M, N, K, alpha, A, lda, B, ldb, beta, C, ldc, c_f32, nullptr);
}

void matmul_forward(bf16* out, const bf16* inp, const bf16* weight, const bf16* bias, int N, int IN, int OUT) {
    TANDEM_KCHECK_PTR(out);
    TANDEM_KCHECK_PTR(inp);
    TANDEM_KCHECK_PTR(weight);
    TANDEM_KCHECK(N > 0 && IN > 0 && OUT > 0);
    // out[N,OUT] = inp[N,IN] @ weight[OUT,IN]^T (+ bias[OUT])
    const auto a16 = [](const void* p) { return reinterpret_cast<uintptr_t>(p) % 16 == 0; };
    if (N <= kGemvMaxRows && IN % 8 == 0 && a16(inp) && a16(weight)) {  // a decode step's few rows
        switch (N) {
        case 1: gemv<1>(out, inp, weight, bias, IN, OUT); return;
        case 2: gemv<2>(out, inp, weight, bias, IN, OUT); return;
        case 3: gemv<3>(out, inp, weight, bias, IN, OUT); return;
        default: gemv<4>(out, inp, weight, bias, IN, OUT); return;
        }
    }
    lt_matmul(false, true, N, OUT, IN, 1.0f, inp, IN, weight, IN, 0.0f, out, OUT, false, bias);
}

void matmul_backward(bf16* dinp, float* dweight, float* dbias, const bf16* dout, const bf16* inp, const bf16* weight,
                     int N, int IN, int OUT) {
    TANDEM_KCHECK_PTR(dout);
    TANDEM_KCHECK(N > 0 && IN > 0 && OUT > 0);
    if (dinp) {
        TANDEM_KCHECK_PTR(weight);
        // dinp[N,IN] += dout[N,OUT] @ weight[OUT,IN]
        gemm(false, false, N, IN, OUT, 1.0f, dout, OUT, weight, IN, 1.0f, dinp, IN, false);
    }
    if (dweight) {
        TANDEM_KCHECK_PTR(inp);
        // dweight[OUT,IN] (fp32) += dout[N,OUT]^T @ inp[N,IN]
        gemm(true, false, OUT, IN, N, 1.0f, dout, OUT, inp, IN, 1.0f, dweight, IN, true);
    }
    if (dbias) {
        const dim3 block(kBiasCols, kBiasLanes);
        bias_grad_kernel<<<grid_for(OUT, kBiasCols), block, 0, context().stream>>>(dbias, dout, N, OUT);
        TANDEM_CUDA_LAUNCH_CHECK();
    }
}

void lora_forward(bf16* out, bf16* tmp, const bf16* inp, const bf16* lora_a, const bf16* lora_b, float scaling, int N,
                  int IN, int OUT, int R) {
    TANDEM_KCHECK_PTR(out);
    TANDEM_KCHECK_PTR(tmp);
    TANDEM_KCHECK_PTR(inp);
    TANDEM_KCHECK_PTR(lora_a);
    TANDEM_KCHECK_PTR(lora_b);
    TANDEM_KCHECK(N > 0 && IN > 0 && OUT > 0 && R > 0);
    lora_tmp_forward(tmp, inp, lora_a, N, IN, R);
    // out[N,OUT] += scaling * tmp[N,R] @ lora_b[OUT,R]^T
    const auto a16 = [](const void* p) { return reinterpret_cast<uintptr_t>(p) % 16 == 0; };
    if (N <= kGemvMaxRows && R % 8 == 0 && R <= kLoraBMaxRank && a16(lora_b)) {  // a decode step's few rows
        switch (N) {
        case 1: lora_b_gemv<1>(out, tmp, lora_b, scaling, OUT, R); return;
        case 2: lora_b_gemv<2>(out, tmp, lora_b, scaling, OUT, R); return;
        case 3: lora_b_gemv<3>(out, tmp, lora_b, scaling, OUT, R); return;
        default: lora_b_gemv<4>(out, tmp, lora_b, scaling, OUT, R); return;
        }
    }
    gemm(false, true, N, OUT, R, scaling, tmp, R, lora_b, R, 1.0f, out, OUT, false);
}

void lora_tmp_forward(bf16* tmp, const bf16* inp, const bf16* lora_a, int N, int IN, int R) {
    TANDEM_KCHECK_PTR(tmp);
    TANDEM_KCHECK_PTR(inp);
    TANDEM_KCHECK_PTR(lora_a);
    TANDEM_KCHECK(N > 0 && IN > 0 && R > 0);
    // tmp[N,R] = inp[N,IN] @ lora_a[R,IN]^T
    const auto a16 = [](const void* p) { return reinterpret_cast<uintptr_t>(p) % 16 == 0; };
    if (N <= kGemvMaxRows && IN % 8 == 0 && a16(inp) && a16(lora_a)) {  // a decode step's few rows: a block per r
        switch (N) {
        case 1: lora_a_gemv<1>(tmp, inp, lora_a, IN, R); return;
        case 2: lora_a_gemv<2>(tmp, inp, lora_a, IN, R); return;
        case 3: lora_a_gemv<3>(tmp, inp, lora_a, IN, R); return;
        default: lora_a_gemv<4>(tmp, inp, lora_a, IN, R); return;
        }
    }
    gemm(false, true, N, R, IN, 1.0f, inp, IN, lora_a, IN, 0.0f, tmp, R, false);
}

void lora_backward(bf16* dinp, float* dlora_a, float* dlora_b, bf16* dtmp, const bf16* dout, const bf16* inp,
                   const bf16* tmp, const bf16* lora_a, const bf16* lora_b, float scaling, int N, int IN, int OUT,
                   int R) {
    TANDEM_KCHECK_PTR(dtmp);
    TANDEM_KCHECK_PTR(dout);
    TANDEM_KCHECK_PTR(lora_b);
    TANDEM_KCHECK(N > 0 && IN > 0 && OUT > 0 && R > 0);
    if (dlora_b) {
        TANDEM_KCHECK_PTR(tmp);
        // dlora_b[OUT,R] (fp32) += scaling * dout[N,OUT]^T @ tmp[N,R]
        gemm(true, false, OUT, R, N, scaling, dout, OUT, tmp, R, 1.0f, dlora_b, R, true);
    }
    if (!dlora_a && !dinp) return;
    // dtmp[N,R] = scaling * dout[N,OUT] @ lora_b[OUT,R]
    gemm(false, false, N, R, OUT, scaling, dout, OUT, lora_b, R, 0.0f, dtmp, R, false);
    if (dlora_a) {
        TANDEM_KCHECK_PTR(inp);
        // dlora_a[R,IN] (fp32) += dtmp[N,R]^T @ inp[N,IN]
        gemm(true, false, R, IN, N, 1.0f, dtmp, R, inp, IN, 1.0f, dlora_a, IN, true);
    }
    if (dinp) {
        TANDEM_KCHECK_PTR(lora_a);
        // dinp[N,IN] += dtmp[N,R] @ lora_a[R,IN]
        gemm(false, false, N, IN, R, 1.0f, dtmp, R, lora_a, IN, 1.0f, dinp, IN, false);
    }
}

namespace {

// One block-scaled FP8 GEMM of N rows (a multiple of 16) through the cached plan.
void fp8_gemm(bf16* out, const uint8_t* x_codes, const float* x_scales, const uint8_t* w_codes, const float* w_scales,
              const bf16* bias, int N, int Kp, int M, float beta) {
    Context& ctx = context();
    const PlanKey key{ctx.device, true, false, false, bias != nullptr, true, M, N, Kp, Kp, Kp, M,
                      alignment_of(w_codes), alignment_of(x_codes), alignment_of(out), alignment_of(bias)};
    auto it = t_plans.find(key);
    if (it == t_plans.end()) it = t_plans.emplace(key, make_fp8_plan(key, ctx, bias, w_scales, x_scales)).first;
    Plan& plan = *it->second;
    set_desc(plan.op, CUBLASLT_MATMUL_DESC_A_SCALE_POINTER, static_cast<const void*>(w_scales));
    set_desc(plan.op, CUBLASLT_MATMUL_DESC_B_SCALE_POINTER, static_cast<const void*>(x_scales));
    if (bias) set_desc(plan.op, CUBLASLT_MATMUL_DESC_BIAS_POINTER, static_cast<const void*>(bias));
    const float alpha = 1.0f;
    TANDEM_CUBLAS_CHECK(cublasLtMatmul(ctx.lt, plan.op, &alpha, w_codes, plan.a, x_codes, plan.b, &beta, out, plan.c,
                                       out, plan.c, &plan.algo, ctx.lt_workspace, ctx.lt_workspace_bytes, ctx.stream));
}

}  // namespace

void fp8_matmul(bf16* out, const uint8_t* x_codes, const float* x_scales, const uint8_t* w_codes,
                const float* w_scales, const bf16* bias, int N, int K, int M, float beta, bf16* tail) {
    TANDEM_KCHECK_PTR(out);
    TANDEM_KCHECK_PTR(x_codes);
    TANDEM_KCHECK_PTR(x_scales);
    TANDEM_KCHECK_PTR(w_codes);
    TANDEM_KCHECK_PTR(w_scales);
    TANDEM_KCHECK(N > 0 && K > 0 && M > 0);
    TANDEM_KCHECK(beta == 0.0f || beta == 1.0f);
    TANDEM_KCHECK(!bias || beta == 0.0f);
    const int Kp = int(fp8_padded(K)), cols = Kp / kFp8Block;
    const int head = int(fp8_head_rows(N)), rest = N - head;
    if (head > 0) fp8_gemm(out, x_codes, x_scales, w_codes, w_scales, bias, head, Kp, M, beta);
    if (rest == 0) return;
    TANDEM_KCHECK_PTR(tail);
    const cudaStream_t s = context().stream;
    bf16* o = out + int64_t(head) * M;
    const size_t bytes = size_t(rest) * size_t(M) * sizeof(bf16);
    if (beta != 0.0f) TANDEM_CUDA_CHECK(cudaMemcpyAsync(tail, o, bytes, cudaMemcpyDeviceToDevice, s));
    fp8_gemm(tail, x_codes + int64_t(head) * Kp, x_scales + int64_t(cols) * head, w_codes, w_scales, bias,
             kFp8RowAlign, Kp, M, beta);
    TANDEM_CUDA_CHECK(cudaMemcpyAsync(o, tail, bytes, cudaMemcpyDeviceToDevice, s));
}

}  // namespace tandem::cuda
