// SPDX-FileCopyrightText: 2026 The Tandem developers
// SPDX-License-Identifier: GPL-3.0-or-later
// The CUDA self-test's harness (tandem/selftest.h), shared by the case files (op_cases.cpp, gemm_op_cases.cpp,
// flat_op_cases.cpp, moe_cases.cpp, quant4_cases.cpp, fp8_cases.cpp, infer_op_cases.cpp, step_cases.cpp,
// step_check_cases.cpp, fixture_cases.cpp) and runner.cpp: tolerances, seeded random inputs, device buffers and
// transfers, Check, which compares a GPU result with its CPU twin and reports it, and the op generators with
// their shape-grid helpers. All in tandem::testing and only with TANDEM_WITH_CUDA (runner.cpp alone also
// compiles without, to its no-CUDA stub). step_support.h: what step_cases.cpp and step_check_cases.cpp share.
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
//  - Op cases are not listed by hand: each op of the op table has a generator (gen_*, below; the registry
//    that maps op names to them is in runner.cpp) that enumerates the op's shapes as a grid around a base
//    shape (add_unique / vary: edge sizes one field at a time, each flag, then the shapes a kernel path or a
//    model needs) and adds one case per shape through CaseList. A case's name starts with the generator's
//    label (the op, or its family: "lora", "elementwise"), so --filter by op works; Case::ops names the ops.
//  - Always compiled by the host compiler; everything that needs CUDA is inside #if TANDEM_WITH_CUDA.
#pragma once

#if TANDEM_WITH_CUDA
#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <initializer_list>
#include <limits>
#include <string>
#include <string_view>
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
    // RMSNorm weights: 1 +- 0.3. With an offset (Gemma's (1 + w) norms: 1) the stored w, those weights shifted down by
    // it (near 0) and rounded to bf16 again.
    std::vector<float> norm_weight(int C, float offset = 0.0f) {
        std::vector<float> v(static_cast<size_t>(C));
        for (float& x : v) {
            x = round_bf16(1.0f + uniform(-0.3f, 0.3f));
            if (offset != 0.0f) x = round_bf16(x - offset);
        }
        return v;
    }

private:
    SplitMix64 g_;
};

uint64_t fnv1a(const std::string& s);

float fan_in_bound(int in);  // uniform with std 1/sqrt(in)

// a * b in 64 bits: the element count of an [a, b] tensor.
inline int64_t numel(int a, int b) {
    return int64_t(a) * int64_t(b);
}

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
    // The op-table ops (or, outside the table, the kernels) whose generator made this case: every registry
    // entry that names that generator (runner.cpp). Empty for step and fixture cases.
    std::vector<std::string_view> ops = {};
};

// What an op's generator appends its cases to. A case's name starts with the generator's label (the op's
// name, or the family name its sibling ops share: "lora", "elementwise"), then the shape and the variant.
class CaseList {
public:
    CaseList(std::vector<Case>& out, const std::string& fixtures_dir) : out_(out), fixtures_dir_(fixtures_dir) {}
    void add(std::string name, std::function<void(Check&)> run) { out_.push_back({std::move(name), std::move(run), {}}); }
    // The repository's tests/fixtures folder, or empty (only the 4-bit generator reads it).
    const std::string& fixtures_dir() const { return fixtures_dir_; }

private:
    std::vector<Case>& out_;
    const std::string& fixtures_dir_;
};

// One generator per op (or per family of sibling ops tested together): it enumerates the op's shapes and
// variants and adds one case each. The registry (runner.cpp) maps every op of TANDEM_BACKEND_OPS to one.
using OpGenerator = void (*)(CaseList&);

// ---------------------------------------------------------------------------------------------------------
// Shape grids
// ---------------------------------------------------------------------------------------------------------
// A generator's shapes are a grid around one base shape: the base, then the base with ONE field changed to
// each of that field's edge values (vary), then each flag variant of the base (vary with {true}), then the
// shapes a kernel path or a model needs (add_unique). Duplicates are dropped, the order is kept. The edge
// values of a dimension are chosen from: 1 (one row / one element), a small odd size (below a warp, not a
// multiple of the 16-byte vector of 8 bf16), an odd size above a tile (130, 1001), a size that is a multiple
// of the vector width (the vectorised path), and one large size (the grid-stride loops, several tiles).

template <class P>
void add_unique(std::vector<P>& shapes, const P& p) {
    if (std::find(shapes.begin(), shapes.end(), p) == shapes.end()) shapes.push_back(p);
}

template <class P, class T>
void vary(std::vector<P>& shapes, const P& base, T P::*field, std::initializer_list<T> values) {
    for (const T& v : values) {
        P p = base;
        p.*field = v;
        add_unique(shapes, p);
    }
}

// "N=37 C=96": the dimensions of a case name, in order.
std::string shape_label(std::initializer_list<std::pair<const char*, int64_t>> dims);

// The generators, one per op or family of ops, in the order the registry runs them (and --list shows them).
// op_cases.cpp: the layer ops outside the GEMMs.
void gen_embedding(CaseList& cs);          // embedding_forward, embedding_backward
void gen_rmsnorm_forward(CaseList& cs);
void gen_residual_rmsnorm_forward(CaseList& cs);
void gen_rmsnorm_backward(CaseList& cs);
void gen_rope(CaseList& cs);               // rope_forward, rope_backward
void gen_swiglu(CaseList& cs);             // swiglu_forward, swiglu_backward
void gen_geglu(CaseList& cs);              // geglu_forward, geglu_backward
void gen_clamped_swiglu(CaseList& cs);     // clamped_swiglu_forward, clamped_swiglu_backward
void gen_attention_sinks(CaseList& cs);
void gen_dequantize_mxfp4(CaseList& cs);
// gemm_op_cases.cpp: the GEMM-family layer ops.
void gen_matmul_forward(CaseList& cs);
void gen_matmul_backward(CaseList& cs);
void gen_lora(CaseList& cs);               // lora_forward, lora_tmp_forward, lora_backward
void gen_lm_head_cross_entropy(CaseList& cs);
void gen_lm_head_logits(CaseList& cs);
void gen_attention(CaseList& cs);          // attention_forward, attention_backward (in-house and cuDNN)
// flat_op_cases.cpp: the ops over flat element counts, and the optimizer and collectives outside the table.
void gen_dropout(CaseList& cs);            // dropout_forward, dropout_backward
void gen_elementwise(CaseList& cs);        // add, accumulate, axpy, scale, copy, fill, zero (+ conversions)
void gen_sum(CaseList& cs);
void gen_adamw(CaseList& cs);              // outside the table: adamw_update, global_grad_norm
void gen_fill_uniform(CaseList& cs);       // outside the table
void gen_sum_ranks(CaseList& cs);          // outside the table
// moe_cases.cpp: the mixture-of-experts ops.
void gen_moe_router(CaseList& cs);         // moe_router_forward, moe_router_backward
void gen_moe_aux(CaseList& cs);            // moe_aux_stats, moe_aux_loss
void gen_moe_sort_count(CaseList& cs);
void gen_moe_permute(CaseList& cs);        // moe_permute, moe_permute_backward
void gen_moe_unpermute(CaseList& cs);      // moe_unpermute, moe_unpermute_backward
void gen_grouped_matmul(CaseList& cs);     // grouped_matmul_forward, _backward, _weight_grad
// quant4_cases.cpp: outside the table (the 4-bit base weights); with a fixtures folder also bitsandbytes'.
void gen_nf4(CaseList& cs);
// fp8_cases.cpp
void gen_quantize_fp8_rows(CaseList& cs);
void gen_fp8_transpose(CaseList& cs);      // with quantize_fp8_weight (outside the table), which feeds it
void gen_fp8_matmul(CaseList& cs);
void gen_dequantize_4bit_fp8(CaseList& cs);  // in quant4_cases.cpp, beside the 4-bit helpers
void gen_activation_fp8(CaseList& cs);       // activation_forward_fp8, activation_backward_fp8
void gen_quantize_fp8_grad_rows(CaseList& cs);  // in fp8_cases.cpp
void gen_rmsnorm_forward_fp8(CaseList& cs);
void gen_rmsnorm_backward_fp8(CaseList& cs);
// infer_op_cases.cpp
void gen_kv_cache_write(CaseList& cs);
void gen_decode_attention(CaseList& cs);
void gen_sampling(CaseList& cs);           // outside the table: repetition_penalty, sample_tokens

// The cases that are no op's: whole steps (step_cases.cpp, with the bodies of step_check_cases.cpp), then the
// PyTorch fixture cases and the out-of-memory case (fixture_cases.cpp; none when fixtures_dir is empty).
void add_step_cases(std::vector<Case>& cases);
void add_fixture_cases(std::vector<Case>& cases, const std::string& fixtures_dir);

}  // namespace tandem::testing
#endif  // TANDEM_WITH_CUDA
