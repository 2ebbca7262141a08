// SPDX-FileCopyrightText: 2026 The Tandem developers
// SPDX-License-Identifier: GPL-3.0-or-later
// Thread count of the CPU backend (see threads.h).
#include "kernels/cpu/threads.h"

#include <omp.h>

#include "core/check.h"

namespace tandem::cpu {

int cpu_threads() {
    return omp_get_max_threads();
}

void set_cpu_threads(int threads) {
    TANDEM_KCHECK(threads >= 1);
    omp_set_num_threads(threads);
}

}  // namespace tandem::cpu
