// SPDX-FileCopyrightText: 2026 The Tandem developers
// SPDX-License-Identifier: GPL-3.0-or-later
// The 4-bit code tables (see quant4.h).
#include "core/quant4.h"

#include <algorithm>
#include <cmath>
#include <vector>

namespace tandem {

const std::array<float, kQuant4Codes>& nf4_code() {
    // The NF4 data type of the QLoRA paper (Dettmers et al. 2023, appendix E), as bitsandbytes stores it.
    static const std::array<float, kQuant4Codes> t = {
        -1.0f, -0.6961928009986877f, -0.5250730514526367f, -0.39491748809814453f, -0.28444138169288635f,
        -0.18477343022823334f, -0.09105003625154495f, 0.0f, 0.07958029955625534f, 0.16093020141124725f,
        0.24611230194568634f, 0.33791524171829224f, 0.44070982933044434f, 0.5626170039176941f,
        0.7229568362236023f, 1.0f};
    return t;
}

const std::array<float, kQuant4Codes>& fp4_code() {
    // 1 sign bit (code 8..15 negative), then 0, 0.0625, 8, 12, 4, 6, 2, 3 divided by 12, written to 8
    // significant digits as bitsandbytes' CUDA kernels write them (its dequantization uses these, not the
    // stored quant_map, which rounds k/12 differently in a few values).
    static const std::array<float, kQuant4Codes> t = [] {
        const float mag[8] = {0.0f, 0.0052083333f, 0.66666667f, 1.0f, 0.33333333f, 0.5f, 0.16666667f, 0.25f};
        std::array<float, kQuant4Codes> v{};
        for (int i = 0; i < 8; ++i) {
            v[size_t(i)] = mag[i];
            v[size_t(i) + 8] = -mag[i];
        }
        return v;
    }();
    return t;
}

const std::array<float, kQuant4Codes - 1>& nf4_thresholds() {
    static const std::array<float, kQuant4Codes - 1> t = [] {
        std::array<float, kQuant4Codes - 1> v{};
        const auto& c = nf4_code();
        for (int i = 0; i + 1 < kQuant4Codes; ++i)
            v[size_t(i)] = float((double(c[size_t(i)]) + double(c[size_t(i) + 1])) / 2.0);
        return v;
    }();
    return t;
}

const std::array<float, kNestedCodes>& dynamic_code_8bit() {
    // create_dynamic_map(signed=True, max_exponent_bits=7, total_bits=8): for exponent i = 0..6, the means of
    // neighbouring points of linspace(0.1, 1, 2^i + 1) (float32), times 10^(i-6), with both signs; then 0 and
    // 1; sorted. linspace as torch computes it in float: step = (end - start) / (steps - 1), the first half
    // start + step * k, the second half end - step * (steps - 1 - k), each a fused multiply-add (checked
    // value for value against bitsandbytes' table: tests/test_qlora.cpp).
    static const std::array<float, kNestedCodes> t = [] {
        std::vector<float> data;
        for (int i = 0; i < 7; ++i) {
            const int steps = (1 << i) + 1;
            const float start = 0.1f, end = 1.0f;
            const float step = (end - start) / float(steps - 1);
            const int halfway = steps / 2;
            std::vector<float> b(static_cast<size_t>(steps));
            for (int k = 0; k < steps; ++k)
                b[size_t(k)] = k < halfway ? std::fma(step, float(k), start) : std::fma(-step, float(steps - k - 1), end);
            const float scale = float(std::pow(10.0, double(i - 6)));
            for (int k = 0; k + 1 < steps; ++k) {
                const float mean = (b[size_t(k)] + b[size_t(k) + 1]) / 2.0f;
                data.push_back(scale * mean);
                data.push_back(-scale * mean);
            }
        }
        data.push_back(0.0f);
        data.push_back(1.0f);
        std::sort(data.begin(), data.end());
        std::array<float, kNestedCodes> v{};
        std::copy(data.begin(), data.end(), v.begin());
        return v;
    }();
    return t;
}

}  // namespace tandem
