// SPDX-FileCopyrightText: 2026 The Tandem developers
// SPDX-License-Identifier: GPL-3.0-or-later
// Thread count of the CPU backend. Everything runs on OpenMP threads: our loops and the tiles of gemm.h
// (OpenBLAS itself is kept single-threaded).
// Every CPU kernel gives bitwise-identical results for any thread count (see each file), so this only
// changes speed; the tests use it to prove exactly that.
#pragma once

namespace tandem::cpu {

int cpu_threads();                  // OpenMP's current maximum
void set_cpu_threads(int threads);  // >= 1 (omp_set_num_threads)

}  // namespace tandem::cpu
