// SPDX-FileCopyrightText: 2026 The Tandem developers
// SPDX-License-Identifier: GPL-3.0-or-later
// The one GEMM of the CPU backend: row-major sgemm that gives bitwise-identical results for any thread
// count. Internal to kernels/cpu (matmul, lora, cross-entropy call it).
// Why not just cblas_sgemm with OpenBLAS's threads: OpenBLAS splits C between its threads, and its tail
// kernels (the last rows/columns of a thread's share) sum K in a different order from its main kernels, so
// the same element can round differently with 1 and with 4 threads (seen with 0.3.21 on x86-64). Here C
// is cut into a fixed grid of tiles (kTileM x kTileN, independent of the thread count), OpenMP runs the
// tiles in parallel, and each tile is one single-threaded OpenBLAS call: every element always sees the same
// call shapes, hence the same order of operations. The first call sets OpenBLAS to one thread.
#pragma once

namespace tandem::cpu {

inline constexpr int kTileM = 128;  // rows of C per tile
inline constexpr int kTileN = 256;  // columns of C per tile

// C[M,N] = alpha * op(A)[M,K] @ op(B)[K,N] + beta * C. op(A) = A[M,K] (lda >= K) or, with trans_a,
// A^T where A is [K,M] (lda >= M); likewise op(B) = B[K,N] (ldb >= N) or B^T with B [N,K] (ldb >= K).
// beta = 0 writes C without reading it. Never call it from inside an OpenMP parallel region.
void gemm(bool trans_a, bool trans_b, int M, int N, int K, float alpha, const float* A, int lda, const float* B,
          int ldb, float beta, float* C, int ldc);

}  // namespace tandem::cpu
