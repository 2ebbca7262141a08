// SPDX-FileCopyrightText: 2026 The Tandem developers
// SPDX-License-Identifier: GPL-3.0-or-later
// The FP8 output gradients' format from the environment (see fp8.h), for both backends' quantize_fp8_grad_rows.
#include "core/fp8.h"

#include <cstdlib>
#include <string>

#include "tandem/error.h"

namespace tandem {

Fp8GradFormat fp8_grad_format() {
    static const Fp8GradFormat f = [] {
        const char* v = std::getenv("TANDEM_FP8_GRADS");
        const std::string s = v ? v : "";
        if (s.empty() || s == "e4m3") return Fp8GradFormat::E4M3;
        if (s == "e5m2") return Fp8GradFormat::E5M2;
        throw Error(ErrorCategory::InvalidInput, "TANDEM_FP8_GRADS=" + s + ": expected e4m3 or e5m2 (or unset: e4m3)");
    }();
    return f;
}

}  // namespace tandem
