// SPDX-FileCopyrightText: 2026 The Tandem developers
// SPDX-License-Identifier: GPL-3.0-or-later
// The CUDA self-test's harness (tandem/selftest.h), shared by the case files (op_cases.cpp, flat_op_cases.cpp,
// moe_cases.cpp, step_cases.cpp, fixture_cases.cpp) and runner.cpp: tolerances, seeded random inputs, device
// buffers and transfers, and Check, which compares a GPU result with its CPU twin and reports it. All in
// tandem::testing and only with TANDEM_WITH_CUDA (runner.cpp alone also compiles without, to its no-CUDA stub).
// Legend: N = rows, C = channels, V = vocab, F = intermediate, T = tokens, S = samples, H = heads,
// D = head_dim, R = LoRA rank, n = element count.
// Decisions a reader must know:
//  - Inputs come from SplitMix64 seeded with (options.seed, case name), so a case sees the same numbers
//    whatever the filter, and bf16 inputs are rounded to bf16 BEFORE the CPU sees them: both backends
//    start from identical values and the error measures the GPU's arithmetic, not the input rounding.
//  - Written outputs are poisoned with 0xFF bytes (NaN in bf16, fp32 and double) before the op runs, so an
//    element nobody wrote fails. An accumulating output starts from random values of half the size of its
//    increment, the CPU starts from the same values, and the error is taken relative to the increment, so
//    "wrote instead of added" and "added twice" fail.
//  - Every transfer goes through the compute stream: ops run on the non-blocking context().stream, which
//    the legacy default stream (plain cudaMemcpy) is not ordered against. Each download synchronises.
//  - Always compiled by the host compiler; everything that needs CUDA is inside #if TANDEM_WITH_CUDA.
#pragma once

#if TANDEM_WITH_CUDA
#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <limits>
#include <string>
#include <utility>
#include <vector>

#include "core/cuda/context.h"
#include "core/cuda/memory.h"
#include "core/random.h"
#include "model/cuda_model.h"   // AttentionBackend
#include "tandem/run_config.h"  // CheckpointPolicy
#include "tandem/selftest.h"

namespace tandem::testing {

using cuda::bf16;

constexpr double kTolBf16 = 1e-2;  // bf16 storage, fp32 math
constexpr double kTolF32 = 1e-5;   // fp32 end to end (AdamW, norms, sums, fp32 accumulation of exact inputs)
constexpr double kTolExact = 0.0;  // copies and conversions
constexpr double kTolStep = 2e-2;  // a whole training step through bf16 activations
// LoRA gradients of a whole step: the worst single element relative to the tensor's largest, and the L2
// error relative to the tensor's norm. Measured on an H100 (seed 1): max-element 0.018-0.023 with either
// attention path (in-house or cuDNN) on both test models, L2 0.017, the level bf16 activation rounding
// reaches through two layers (the weights are bf16 on both sides).
constexpr double kTolStepGradMax = 3e-2;
constexpr double kTolStepGradL2 = 2e-2;
constexpr double kInf = std::numeric_limits<double>::infinity();

std::string fmt(const char* f, double a);  // one number through a printf format
std::string g3(double x);                  // "%.3g"

// The names of a checkpointing policy and an attention backend in case names.
std::string policy_name(CheckpointPolicy p);
std::string attention_name(AttentionBackend a);

// ---------------------------------------------------------------------------------------------------------
// Random inputs
// ---------------------------------------------------------------------------------------------------------

float round_bf16(float x);
std::vector<float> round_bf16(std::vector<float> v);

class Rng {
public:
    explicit Rng(uint64_t seed) : g_(seed) {}
    uint64_t u64() { return g_.next_u64(); }
    float uniform(float lo, float hi) { return lo + (hi - lo) * float(g_.next_double()); }
    int32_t below(int32_t n) { return int32_t(g_.next_u64() % uint64_t(n)); }
    // n fp32 values uniform in [-bound, bound).
    std::vector<float> f32_values(int64_t n, float bound) {
        std::vector<float> v(static_cast<size_t>(n));
        for (float& x : v) x = uniform(-bound, bound);
        return v;
    }
    // The same, rounded to what a bf16 tensor holds.
    std::vector<float> bf16_values(int64_t n, float bound) { return round_bf16(f32_values(n, bound)); }
    // bf16 values with |x| in [bound/10, bound) and random signs: never zero (dropout mask checks).
    std::vector<float> nonzero_values(int64_t n, float bound) {
        std::vector<float> v(static_cast<size_t>(n));
        for (float& x : v) x = round_bf16((g_.next_u64() & 1 ? 1.0f : -1.0f) * uniform(0.1f * bound, bound));
        return v;
    }
    // RMSNorm weights: 1 +- 0.3.
    std::vector<float> norm_weight(int C) {
        std::vector<float> v(static_cast<size_t>(C));
        for (float& x : v) x = round_bf16(1.0f + uniform(-0.3f, 0.3f));
        return v;
    }

private:
    SplitMix64 g_;
};

uint64_t fnv1a(const std::string& s);

float fan_in_bound(int in);  // uniform with std 1/sqrt(in)

// ---------------------------------------------------------------------------------------------------------
// Device buffers and transfers (all on the compute stream)
// ---------------------------------------------------------------------------------------------------------

cudaStream_t stream();

// n elements of T on the device (at least one byte, so every pointer is valid).
template <class T>
class Dev {
public:
    explicit Dev(int64_t n) : n_(n), buf_(std::max<size_t>(size_t(n) * sizeof(T), 1), "self-test buffer") {}
    T* p() const { return buf_.as<T>(); }
    int64_t n() const { return n_; }
    size_t bytes() const { return size_t(n_) * sizeof(T); }

private:
    int64_t n_;
    cuda::DeviceBuffer buf_;
};

void copy_to_device(void* dst, const void* src, size_t bytes);
void copy_to_host(void* dst, const void* src, size_t bytes);

// 0xFF bytes: NaN as bf16 (0xFFFF), fp32 and double.
void poison(void* p, size_t bytes);

void put(bf16* dst, const std::vector<float>& v);
void put(float* dst, const std::vector<float>& v);
void put(int32_t* dst, const std::vector<int32_t>& v);

std::vector<float> get(const bf16* src, int64_t n);
std::vector<float> get(const float* src, int64_t n);
template <class T>
std::vector<float> get(const Dev<T>& d) {
    return get(d.p(), d.n());
}

Dev<bf16> dev_bf16(const std::vector<float>& v);
Dev<float> dev_f32(const std::vector<float>& v);
Dev<int32_t> dev_i32(const std::vector<int32_t>& v);
template <class T>
Dev<T> poisoned(int64_t n) {
    Dev<T> d(n);
    poison(d.p(), d.bytes());
    return d;
}

// False when the device is in an error state no later call can clear (a kernel fault): the rest of the
// run would only repeat that error.
bool device_healthy();

// ---------------------------------------------------------------------------------------------------------
// Comparison and reporting
// ---------------------------------------------------------------------------------------------------------

struct Reporter {
    const std::function<void(const SelftestResult&)>& sink;
    std::vector<SelftestResult>& all;
    void add(SelftestResult r) {
        if (sink) sink(r);
        all.push_back(std::move(r));
    }
};

// One running case: its random generator and its results, named "<case>: <what>".
class Check {
public:
    Check(std::string name, uint64_t base_seed, Reporter& out)
        : rng(splitmix64(base_seed ^ fnv1a(name))), name_(std::move(name)), base_seed_(base_seed), out_(out) {}

    Rng rng;
    uint64_t base_seed() const { return base_seed_; }
    int count() const { return count_; }

    void result(const std::string& what, double rel, double tol, std::string detail);

    // rel = max|got - want| / max|want - init| (init: the starting value of an accumulating output).
    void tensor(const std::string& what, const std::vector<float>& got, const std::vector<float>& want, double tol,
                const std::vector<float>* init = nullptr);

    // rel = |got - want| / |want|.
    void scalar(const std::string& what, double got, double want, double tol);

    void skip(const std::string& what, const std::string& why);

    void fail(const std::string& what, const std::string& why) { result(what, kInf, 0.0, why); }

    // The starting value of an accumulating output whose increment is `inc`: uniform in +-half its largest
    // element (1 when the increment is all zeros), rounded to bf16 for bf16 outputs.
    std::vector<float> initial(const std::vector<float>& inc, bool bf16_storage);

private:
    void emit(SelftestResult r);
    std::string name_;
    uint64_t base_seed_;
    Reporter& out_;
    int count_ = 0;
};

// ---------------------------------------------------------------------------------------------------------
// The case list
// ---------------------------------------------------------------------------------------------------------

struct Case {
    std::string name;
    std::function<void(Check&)> run;
};

// Each case file appends its cases; runner.cpp calls them in this order (layer ops, flat ops, MoE ops, whole
// steps, fixtures), which is the order of --list and of a run.
void add_op_cases(std::vector<Case>& cases);
void add_flat_op_cases(std::vector<Case>& cases);
// The mixture-of-experts ops (moe_cases.cpp): router, sort + count, permute / unpermute, grouped GEMMs.
void add_moe_cases(std::vector<Case>& cases);
void add_step_cases(std::vector<Case>& cases);
// The PyTorch fixture cases and the out-of-memory case; none when fixtures_dir is empty.
void add_fixture_cases(std::vector<Case>& cases, const std::string& fixtures_dir);
// The 4-bit weight ops (quant4_cases.cpp): CUDA vs CPU, and with a fixtures folder vs bitsandbytes.
void add_quant4_cases(std::vector<Case>& cases, const std::string& fixtures_dir);
// The FP8 ops (fp8_cases.cpp): quantization and transpose exactly as the CPU's, the block-scaled GEMM.
void add_fp8_cases(std::vector<Case>& cases);
// Inference's ops (infer_op_cases.cpp): the KV cache write, decode attention, repetition penalty, sampling.
void add_infer_op_cases(std::vector<Case>& cases);

}  // namespace tandem::testing
#endif  // TANDEM_WITH_CUDA
