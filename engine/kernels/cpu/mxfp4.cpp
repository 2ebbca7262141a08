// SPDX-FileCopyrightText: 2026 The Tandem developers
// SPDX-License-Identifier: GPL-3.0-or-later
#include "kernels/cpu/mxfp4.h"

#include "core/check.h"
#include "core/mxfp4.h"

namespace tandem::cpu {

void dequantize_mxfp4(float* out, const uint8_t* codes, const uint8_t* scales, int64_t groups, int rows, int cols,
                      bool interleaved) {
    TANDEM_KCHECK_PTR(out);
    TANDEM_KCHECK_PTR(codes);
    TANDEM_KCHECK_PTR(scales);
    TANDEM_KCHECK(groups > 0 && rows > 0 && cols > 0 && cols % kMxfp4Block == 0);
    TANDEM_KCHECK(!interleaved || rows % 2 == 0);
    const int64_t all = groups * rows;
#pragma omp parallel for schedule(static)
    for (int64_t gr = 0; gr < all; ++gr) {
        const int64_t g = gr / rows;
        const int r = int(gr % rows);
        const int dst = interleaved ? (r % 2 == 0 ? r / 2 : rows / 2 + r / 2) : r;
        float* o = out + (g * rows + dst) * int64_t(cols);
        const uint8_t* c = codes + gr * (cols / 2);
        const uint8_t* s = scales + gr * (cols / kMxfp4Block);
        for (int j = 0; j < cols / 2; ++j) {
            const float scale = e8m0_scale(s[2 * j / kMxfp4Block]);
            o[2 * j] = e2m1_value(uint8_t(c[j] & 15)) * scale;
            o[2 * j + 1] = e2m1_value(uint8_t(c[j] >> 4)) * scale;
        }
    }
}

}  // namespace tandem::cpu
