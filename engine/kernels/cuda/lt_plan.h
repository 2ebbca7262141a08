// SPDX-FileCopyrightText: 2026 The Tandem developers
// SPDX-License-Identifier: GPL-3.0-or-later
// The cuBLASLt pieces the CUDA kernels share (internal to kernels/cuda: matmul.cu's GEMMs and expert_gemm.cu's
// batched expert GEMMs): the descriptors of one planned matmul and the heuristic's choice of its algorithm.
#pragma once

#include <cstdint>
#include <optional>

#include "core/cuda/context.h"

namespace tandem::cuda {

// Owns the descriptors of one planned matmul; D uses C's layout (same pointer, in-place accumulate).
struct LtPlan {
    cublasLtMatmulDesc_t op = nullptr;
    cublasLtMatrixLayout_t a = nullptr, b = nullptr, c = nullptr;  // cuBLASLt's A, B, C/D
    cublasLtMatmulAlgo_t algo{};
    LtPlan() = default;
    LtPlan(const LtPlan&) = delete;
    LtPlan& operator=(const LtPlan&) = delete;
    ~LtPlan() {
        if (c) cublasLtMatrixLayoutDestroy(c);
        if (b) cublasLtMatrixLayoutDestroy(b);
        if (a) cublasLtMatrixLayoutDestroy(a);
        if (op) cublasLtMatmulDescDestroy(op);
    }
};

template <class T>
void set_desc(cublasLtMatmulDesc_t d, cublasLtMatmulDescAttributes_t attr, const T& v) {
    TANDEM_CUBLAS_CHECK(cublasLtMatmulDescSetAttribute(d, attr, &v, sizeof(v)));
}

// The heuristic's best algorithm for a plan's descriptors (alignments of cuBLASLt's A, B and C/D in bytes; the
// context's workspace) into plan.algo; the status when there is none (matmul.cu).
std::optional<cublasStatus_t> lt_choose_algo(LtPlan& plan, Context& ctx, uint32_t align_a, uint32_t align_b,
                                             uint32_t align_c);

}  // namespace tandem::cuda
