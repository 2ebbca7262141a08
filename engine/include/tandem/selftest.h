// SPDX-FileCopyrightText: 2026 The Tandem developers
// SPDX-License-Identifier: GPL-3.0-or-later
// The CUDA self-test (`tandem-cli selftest --device cuda`, tests/test_cuda.cpp): every CUDA op against its
// fp32 CPU twin on fresh random inputs, then whole training steps of small generated models (CudaModel
// against CpuModel). This header includes no CUDA header, so the CLI and the tests use it in every build.
// Decisions a reader must know:
//  - Error measure per tensor: rel_error = max|gpu - cpu| / max|cpu| (for an accumulating output, the
//    denominator is the largest increment, max|cpu - initial|, so "wrote instead of added" fails).
//    Tolerances: 1e-2 for bf16 paths (inputs are rounded to bf16 before the CPU sees them), 1e-5 for fp32
//    paths (AdamW, gradient norm, sum), 0 for exact ones (copies, conversions), 2e-2 for whole steps
//    (LoRA gradients: 3e-2 max element and 2e-2 L2), and for the PyTorch fixtures 2e-2 on logits and loss
//    and, on LoRA gradients, 1.5 x what PyTorch's own bf16 training reaches on them (bf16_floor.json).
//  - Outputs are poisoned with NaN bit patterns before each run, so an element a kernel forgot to write
//    fails; a non-finite GPU value always fails.
//  - A case the hardware or library cannot run (cuDNN attention missing or rejecting a shape) is reported
//    as passed with a detail starting "skipped:"; an exception inside a case is a failure of that case
//    (detail "error: ..."), and the remaining cases still run unless the device itself is broken.
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

namespace tandem {

struct SelftestOptions {
    std::string device = "cuda";  // only "cuda" is meaningful ("cpu": Error{InvalidInput}, nothing to compare)
    uint64_t seed = 1;            // SplitMix64 seed of every random input
    std::string filter;           // run only cases whose name contains this substring (empty: all)
    // The repository's tests/fixtures folder: adds the PyTorch fixture cases (tests/fixtures/models/*: logits,
    // loss and LoRA gradients on CUDA against transformers + PEFT, 2e-2) and the out-of-memory case.
    std::string fixtures_dir;
};

struct SelftestResult {
    std::string name;      // "rmsnorm_forward N=37 C=96: out"
    double rel_error = 0;  // see above; +inf when the GPU produced a non-finite value or a shape differs
    double tolerance = 0;
    bool passed = false;
    bool skipped = false;  // passed, but nothing was compared (detail says why)
    std::string detail;    // where the worst element is, or why skipped / what failed
};

// Runs every case whose name matches options.filter, calling on_result (may be empty) as each result is
// known, and returns all results. Throws Error{InvalidInput} for device "cpu" or an unknown device or a
// filter that matches no case, Error{Unsupported} (with the reason) when this build has no CUDA backend or
// the machine has no usable GPU.
std::vector<SelftestResult> run_selftest(const SelftestOptions& options,
                                         const std::function<void(const SelftestResult&)>& on_result);

// The names of every case, fixture cases included (for --list and for the filter's error message); empty
// without CUDA.
std::vector<std::string> selftest_case_names();

}  // namespace tandem
