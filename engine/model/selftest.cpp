// The CUDA self-test (tandem/selftest.h): every op of engine/kernels/cuda against its fp32 twin in
// engine/kernels/cpu on fresh random inputs, then whole training steps of two generated models (CudaModel
// against CpuModel). Run by `tandem-cli selftest --device cuda` and tests/test_cuda.cpp.
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
#include "tandem/selftest.h"

#include <string>
#include <vector>

#include "model/cuda_model.h"
#include "tandem/error.h"

#if TANDEM_WITH_CUDA
#include <unistd.h>

#include <algorithm>
#include <array>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <exception>
#include <filesystem>
#include <functional>
#include <limits>
#include <map>
#include <memory>
#include <span>
#include <tuple>
#include <utility>

#include <nlohmann/json.hpp>

#include "core/files.h"
#include "core/random.h"
#include "export/peft_adapter.h"
#include "io/atomic_file.h"
#include "kernels/cpu/adamw.h"
#include "kernels/cpu/attention.h"
#include "kernels/cpu/cross_entropy.h"
#include "kernels/cpu/dropout.h"
#include "kernels/cpu/elementwise.h"
#include "kernels/cpu/embedding.h"
#include "kernels/cpu/matmul.h"
#include "kernels/cpu/rmsnorm.h"
#include "kernels/cpu/rope.h"
#include "kernels/cpu/swiglu.h"
#include "kernels/cuda/adamw.h"
#include "kernels/cuda/attention.h"
#include "kernels/cuda/common.h"
#include "kernels/cuda/cross_entropy.h"
#include "kernels/cuda/cudnn_attention.h"
#include "kernels/cuda/dropout.h"
#include "kernels/cuda/elementwise.h"
#include "kernels/cuda/embedding.h"
#include "kernels/cuda/matmul.h"
#include "kernels/cuda/memory.h"
#include "kernels/cuda/rmsnorm.h"
#include "kernels/cuda/rope.h"
#include "kernels/cuda/swiglu.h"
#include "model/model.h"
#include "tandem/demo_model.h"
#include "tandem/model_config.h"
#include "tandem/trainer.h"
#include "tandem/safetensors.h"
#endif

namespace tandem {

#if TANDEM_WITH_CUDA
namespace {

namespace fs = std::filesystem;
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

std::string fmt(const char* f, double a) {
    char buf[64];
    std::snprintf(buf, sizeof buf, f, a);
    return buf;
}
std::string g3(double x) {
    return fmt("%.3g", x);
}

// ---------------------------------------------------------------------------------------------------------
// Random inputs
// ---------------------------------------------------------------------------------------------------------

float round_bf16(float x) {
    return bf16_to_f32(f32_to_bf16(x));
}

std::vector<float> round_bf16(std::vector<float> v) {
    for (float& x : v) x = round_bf16(x);
    return v;
}

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

uint64_t fnv1a(const std::string& s) {
    uint64_t h = 0xcbf29ce484222325ull;
    for (unsigned char c : s) h = (h ^ c) * 0x100000001b3ull;
    return h;
}

// ---------------------------------------------------------------------------------------------------------
// Device buffers and transfers (all on the compute stream)
// ---------------------------------------------------------------------------------------------------------

cudaStream_t stream() {
    return cuda::context().stream;
}

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

void copy_to_device(void* dst, const void* src, size_t bytes) {
    if (bytes == 0) return;
    TANDEM_CUDA_CHECK(cudaMemcpyAsync(dst, src, bytes, cudaMemcpyHostToDevice, stream()));
    cuda::synchronize();  // src is pageable host memory the caller may free right away
}

void copy_to_host(void* dst, const void* src, size_t bytes) {
    if (bytes == 0) return;
    TANDEM_CUDA_CHECK(cudaMemcpyAsync(dst, src, bytes, cudaMemcpyDeviceToHost, stream()));
    cuda::synchronize();
}

// 0xFF bytes: NaN as bf16 (0xFFFF), fp32 and double.
void poison(void* p, size_t bytes) {
    if (bytes) TANDEM_CUDA_CHECK(cudaMemsetAsync(p, 0xFF, bytes, stream()));
}

void put(bf16* dst, const std::vector<float>& v) {
    std::vector<uint16_t> bits(v.size());
    for (size_t i = 0; i < v.size(); ++i) bits[i] = f32_to_bf16(v[i]);
    copy_to_device(dst, bits.data(), bits.size() * sizeof(uint16_t));
}
void put(float* dst, const std::vector<float>& v) {
    copy_to_device(dst, v.data(), v.size() * sizeof(float));
}
void put(int32_t* dst, const std::vector<int32_t>& v) {
    copy_to_device(dst, v.data(), v.size() * sizeof(int32_t));
}

std::vector<float> get(const bf16* src, int64_t n) {
    std::vector<uint16_t> bits(static_cast<size_t>(n));
    copy_to_host(bits.data(), src, bits.size() * sizeof(uint16_t));
    std::vector<float> v(bits.size());
    for (size_t i = 0; i < bits.size(); ++i) v[i] = bf16_to_f32(bits[i]);
    return v;
}
std::vector<float> get(const float* src, int64_t n) {
    std::vector<float> v(static_cast<size_t>(n));
    copy_to_host(v.data(), src, v.size() * sizeof(float));
    return v;
}
template <class T>
std::vector<float> get(const Dev<T>& d) {
    return get(d.p(), d.n());
}

Dev<bf16> dev_bf16(const std::vector<float>& v) {
    Dev<bf16> d(int64_t(v.size()));
    put(d.p(), v);
    return d;
}
Dev<float> dev_f32(const std::vector<float>& v) {
    Dev<float> d(int64_t(v.size()));
    put(d.p(), v);
    return d;
}
Dev<int32_t> dev_i32(const std::vector<int32_t>& v) {
    Dev<int32_t> d(int64_t(v.size()));
    put(d.p(), v);
    return d;
}
template <class T>
Dev<T> poisoned(int64_t n) {
    Dev<T> d(n);
    poison(d.p(), d.bytes());
    return d;
}

// False when the device is in an error state no later call can clear (a kernel fault): the rest of the
// run would only repeat that error.
bool device_healthy() {
    cudaError_t e = cudaDeviceSynchronize();
    if (e == cudaSuccess) e = cudaGetLastError();
    return e == cudaSuccess;
}

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

    void result(const std::string& what, double rel, double tol, std::string detail) {
        SelftestResult r;
        r.name = name_ + ": " + what;
        r.rel_error = rel;
        r.tolerance = tol;
        r.passed = std::isfinite(rel) && rel <= tol;
        r.detail = std::move(detail);
        emit(std::move(r));
    }

    // rel = max|got - want| / max|want - init| (init: the starting value of an accumulating output).
    void tensor(const std::string& what, const std::vector<float>& got, const std::vector<float>& want, double tol,
                const std::vector<float>* init = nullptr) {
        if (got.size() != want.size()) {
            result(what, kInf, tol, "size " + std::to_string(got.size()) + " != " + std::to_string(want.size()));
            return;
        }
        double max_abs = 0, denom = 0;
        size_t worst = 0, bad = 0, first_bad = 0;
        for (size_t i = 0; i < got.size(); ++i) {
            const double w = want[i], g = got[i];
            denom = std::max(denom, std::fabs(w - (init ? double((*init)[i]) : 0.0)));
            if (!std::isfinite(g) || !std::isfinite(w)) {
                if (bad++ == 0) first_bad = i;
                continue;
            }
            if (std::fabs(g - w) > max_abs) {
                max_abs = std::fabs(g - w);
                worst = i;
            }
        }
        if (bad) {
            result(what, kInf, tol,
                   std::to_string(bad) + " of " + std::to_string(got.size()) + " elements non-finite, first [" +
                       std::to_string(first_bad) + "] gpu " + g3(got[first_bad]) + " cpu " + g3(want[first_bad]) +
                       " (never written, or overflow)");
            return;
        }
        const double rel = denom > 0 ? max_abs / denom : max_abs;
        result(what, rel, tol,
               "max|diff| " + g3(max_abs) + " at [" + std::to_string(worst) + "] (gpu " + fmt("%.6g", got[worst]) +
                   ", cpu " + fmt("%.6g", want[worst]) + "), max|cpu" + (init ? " - initial" : "") + "| " + g3(denom));
    }

    // rel = |got - want| / |want|.
    void scalar(const std::string& what, double got, double want, double tol) {
        if (!std::isfinite(got)) {
            result(what, kInf, tol, "gpu " + g3(got) + ", cpu " + fmt("%.9g", want));
            return;
        }
        const double d = std::fabs(got - want);
        const double rel = want != 0 ? d / std::fabs(want) : d;
        result(what, rel, tol, "gpu " + fmt("%.9g", got) + ", cpu " + fmt("%.9g", want));
    }

    void skip(const std::string& what, const std::string& why) {
        SelftestResult r;
        r.name = name_ + ": " + what;
        r.passed = true;
        r.skipped = true;
        r.detail = "skipped: " + why;
        emit(std::move(r));
    }

    void fail(const std::string& what, const std::string& why) { result(what, kInf, 0.0, why); }

    // The starting value of an accumulating output whose increment is `inc`: uniform in +-half its largest
    // element (1 when the increment is all zeros), rounded to bf16 for bf16 outputs.
    std::vector<float> initial(const std::vector<float>& inc, bool bf16_storage) {
        float m = 0;
        for (float x : inc) m = std::max(m, std::fabs(x));
        if (m == 0) m = 1;
        auto v = rng.f32_values(int64_t(inc.size()), 0.5f * m);
        return bf16_storage ? round_bf16(std::move(v)) : v;
    }

private:
    void emit(SelftestResult r) {
        ++count_;
        out_.add(std::move(r));
    }
    std::string name_;
    uint64_t base_seed_;
    Reporter& out_;
    int count_ = 0;
};

int64_t numel(int a, int b) {
    return int64_t(a) * int64_t(b);
}

// ---------------------------------------------------------------------------------------------------------
// Embedding
// ---------------------------------------------------------------------------------------------------------

void embedding_case(Check& c, int N, int C, int V) {
    const auto table = c.rng.bf16_values(numel(V, C), 1.0f);
    std::vector<int32_t> ids(static_cast<size_t>(N));
    for (auto& id : ids) id = c.rng.below(V);
    ids[size_t(N - 1)] = V - 1;   // the table's last row
    if (N >= 3) ids[2] = ids[0];  // a repeated id: backward adds both rows
    const auto d_table = dev_bf16(table);
    const auto d_ids = dev_i32(ids);

    std::vector<float> want(size_t(numel(N, C)));
    cpu::embedding_forward(want.data(), ids.data(), table.data(), N, C, V);
    const auto d_out = poisoned<bf16>(numel(N, C));
    cuda::embedding_forward(d_out.p(), d_ids.p(), d_table.p(), N, C, V);
    c.tensor("out", get(d_out), want, kTolExact);

    // dtable is fp32 and the bf16 dout is exact in fp32: only the summation order may differ.
    const auto dout = c.rng.bf16_values(numel(N, C), 1.0f);
    std::vector<float> inc(size_t(numel(V, C)), 0.0f);
    cpu::embedding_backward(inc.data(), dout.data(), ids.data(), N, C, V);
    const auto init = c.initial(inc, false);
    auto want_d = init;
    cpu::embedding_backward(want_d.data(), dout.data(), ids.data(), N, C, V);
    const auto d_dtable = dev_f32(init);
    const auto d_dout = dev_bf16(dout);
    cuda::embedding_backward(d_dtable.p(), d_dout.p(), d_ids.p(), N, C, V);
    c.tensor("dtable", get(d_dtable), want_d, kTolF32, &init);
}

// ---------------------------------------------------------------------------------------------------------
// RMSNorm
// ---------------------------------------------------------------------------------------------------------

constexpr float kEps = 1e-6f;

void rmsnorm_forward_case(Check& c, int N, int C, bool in_place) {
    const auto inp = c.rng.bf16_values(numel(N, C), 2.0f);
    const auto w = c.rng.norm_weight(C);
    std::vector<float> want(size_t(numel(N, C))), want_rstd(static_cast<size_t>(N));
    cpu::rmsnorm_forward(want.data(), want_rstd.data(), inp.data(), w.data(), N, C, kEps);
    const auto d_inp = dev_bf16(inp);
    const auto d_w = dev_bf16(w);
    const auto d_out = poisoned<bf16>(in_place ? 0 : numel(N, C));
    const auto d_rstd = poisoned<float>(N);
    bf16* out = in_place ? d_inp.p() : d_out.p();
    cuda::rmsnorm_forward(out, d_rstd.p(), d_inp.p(), d_w.p(), N, C, kEps);
    c.tensor("out", get(out, numel(N, C)), want, kTolBf16);
    c.tensor("rstd", get(d_rstd), want_rstd, kTolBf16);
}

// CPU twin: cpu::add, the sum rounded to bf16 (what the residual stream holds), then cpu::rmsnorm_forward.
void residual_rmsnorm_case(Check& c, int N, int C, bool residual_is_a) {
    const auto a = c.rng.bf16_values(numel(N, C), 2.0f);
    const auto b = c.rng.bf16_values(numel(N, C), 2.0f);
    const auto w = c.rng.norm_weight(C);
    std::vector<float> res(size_t(numel(N, C))), want(res.size()), want_rstd(static_cast<size_t>(N));
    cpu::add(res.data(), a.data(), b.data(), numel(N, C));
    res = round_bf16(std::move(res));
    cpu::rmsnorm_forward(want.data(), want_rstd.data(), res.data(), w.data(), N, C, kEps);
    const auto d_a = dev_bf16(a);
    const auto d_b = dev_bf16(b);
    const auto d_w = dev_bf16(w);
    const auto d_res = poisoned<bf16>(residual_is_a ? 0 : numel(N, C));
    const auto d_out = poisoned<bf16>(numel(N, C));
    const auto d_rstd = poisoned<float>(N);
    bf16* residual = residual_is_a ? d_a.p() : d_res.p();
    cuda::residual_rmsnorm_forward(residual, d_out.p(), d_rstd.p(), d_a.p(), d_b.p(), d_w.p(), N, C, kEps);
    c.tensor("residual", get(residual, numel(N, C)), res, kTolBf16);
    c.tensor("out", get(d_out), want, kTolBf16);
    c.tensor("rstd", get(d_rstd), want_rstd, kTolBf16);
}

void rmsnorm_backward_case(Check& c, int N, int C, bool with_dweight) {
    const auto inp = c.rng.bf16_values(numel(N, C), 2.0f);
    const auto w = c.rng.norm_weight(C);
    std::vector<float> fwd(size_t(numel(N, C))), rstd(static_cast<size_t>(N));
    cpu::rmsnorm_forward(fwd.data(), rstd.data(), inp.data(), w.data(), N, C, kEps);
    const auto dout = c.rng.bf16_values(numel(N, C), 1.0f);

    std::vector<float> inc_dinp(size_t(numel(N, C)), 0.0f), inc_dw(size_t(C), 0.0f);
    cpu::rmsnorm_backward(inc_dinp.data(), with_dweight ? inc_dw.data() : nullptr, dout.data(), inp.data(), w.data(),
                          rstd.data(), N, C);
    const auto init_dinp = c.initial(inc_dinp, true);
    const auto init_dw = c.initial(inc_dw, false);
    auto want_dinp = init_dinp, want_dw = init_dw;
    cpu::rmsnorm_backward(want_dinp.data(), with_dweight ? want_dw.data() : nullptr, dout.data(), inp.data(), w.data(),
                          rstd.data(), N, C);

    const auto d_inp = dev_bf16(inp);
    const auto d_w = dev_bf16(w);
    const auto d_rstd = dev_f32(rstd);
    const auto d_dout = dev_bf16(dout);
    const auto d_dinp = dev_bf16(init_dinp);
    const auto d_dw = dev_f32(init_dw);
    cuda::rmsnorm_backward(d_dinp.p(), with_dweight ? d_dw.p() : nullptr, d_dout.p(), d_inp.p(), d_w.p(), d_rstd.p(), N,
                           C);
    c.tensor("dinp", get(d_dinp), want_dinp, kTolBf16, &init_dinp);
    if (with_dweight) c.tensor("dweight", get(d_dw), want_dw, kTolBf16, &init_dw);
}

// ---------------------------------------------------------------------------------------------------------
// RoPE
// ---------------------------------------------------------------------------------------------------------

// Positions restarting at 0 for each sample, as the packer makes them.
std::vector<int32_t> packed_positions(const std::vector<int>& lengths) {
    std::vector<int32_t> pos;
    for (int len : lengths)
        for (int i = 0; i < len; ++i) pos.push_back(i);
    return pos;
}

void rope_case(Check& c, int H, int D, double theta, const RopeScaling& scaling, std::vector<int32_t> positions,
               int max_pos, bool in_place) {
    const int T = int(positions.size());
    const cpu::RopeTable table = cpu::rope_table_build(D, theta, scaling, max_pos);
    const Dev<char> d_table(int64_t(cuda::rope_table_bytes(table)));
    const cuda::RopeTableDevice td = cuda::rope_table_upload(table, d_table.p());
    const auto d_pos = dev_i32(positions);
    const int64_t n = int64_t(T) * H * D;

    const auto inp = c.rng.bf16_values(n, 1.0f);
    std::vector<float> want(static_cast<size_t>(n));
    cpu::rope_forward(want.data(), inp.data(), positions.data(), table, T, H, D);
    const auto d_inp = dev_bf16(inp);
    const auto d_out = poisoned<bf16>(in_place ? 0 : n);
    bf16* out = in_place ? d_inp.p() : d_out.p();
    cuda::rope_forward(out, d_inp.p(), d_pos.p(), td, T, H, D);
    c.tensor("out", get(out, n), want, kTolBf16);

    const auto dout = c.rng.bf16_values(n, 1.0f);
    std::vector<float> want_d(static_cast<size_t>(n));
    cpu::rope_backward(want_d.data(), dout.data(), positions.data(), table, T, H, D);
    const auto d_dout = dev_bf16(dout);
    const auto d_dinp = poisoned<bf16>(in_place ? 0 : n);
    bf16* dinp = in_place ? d_dout.p() : d_dinp.p();
    cuda::rope_backward(dinp, d_dout.p(), d_pos.p(), td, T, H, D);
    c.tensor("dinp", get(dinp, n), want_d, kTolBf16);
}

// ---------------------------------------------------------------------------------------------------------
// SwiGLU
// ---------------------------------------------------------------------------------------------------------

void swiglu_case(Check& c, int N, int F, bool in_place) {
    const int64_t n = numel(N, F);
    const auto gate = c.rng.bf16_values(n, 4.0f);
    const auto up = c.rng.bf16_values(n, 2.0f);
    std::vector<float> want(static_cast<size_t>(n));
    cpu::swiglu_forward(want.data(), gate.data(), up.data(), N, F);
    {
        const auto d_gate = dev_bf16(gate);
        const auto d_up = dev_bf16(up);
        const auto d_out = poisoned<bf16>(in_place ? 0 : n);
        bf16* out = in_place ? d_gate.p() : d_out.p();
        cuda::swiglu_forward(out, d_gate.p(), d_up.p(), N, F);
        c.tensor("out", get(out, n), want, kTolBf16);
    }
    const auto dout = c.rng.bf16_values(n, 1.0f);
    std::vector<float> want_dgate(static_cast<size_t>(n)), want_dup(static_cast<size_t>(n));
    cpu::swiglu_backward(want_dgate.data(), want_dup.data(), dout.data(), gate.data(), up.data(), N, F);
    const auto d_gate = dev_bf16(gate);
    const auto d_up = dev_bf16(up);
    const auto d_dout = dev_bf16(dout);
    const auto d_dgate = poisoned<bf16>(in_place ? 0 : n);
    const auto d_dup = poisoned<bf16>(in_place ? 0 : n);
    bf16* dgate = in_place ? d_gate.p() : d_dgate.p();
    bf16* dup = in_place ? d_up.p() : d_dup.p();
    cuda::swiglu_backward(dgate, dup, d_dout.p(), d_gate.p(), d_up.p(), N, F);
    c.tensor("dgate", get(dgate, n), want_dgate, kTolBf16);
    c.tensor("dup", get(dup, n), want_dup, kTolBf16);
}

// ---------------------------------------------------------------------------------------------------------
// Matmul and LoRA
// ---------------------------------------------------------------------------------------------------------

float fan_in_bound(int in) {
    return float(std::sqrt(3.0 / in));
}  // uniform with std 1/sqrt(in)

void matmul_forward_case(Check& c, int N, int IN, int OUT, bool with_bias) {
    const auto inp = c.rng.bf16_values(numel(N, IN), 1.0f);
    const auto w = c.rng.bf16_values(numel(OUT, IN), fan_in_bound(IN));
    const auto bias = c.rng.bf16_values(OUT, 0.5f);
    std::vector<float> want(size_t(numel(N, OUT)));
    cpu::matmul_forward(want.data(), inp.data(), w.data(), with_bias ? bias.data() : nullptr, N, IN, OUT);
    const auto d_inp = dev_bf16(inp);
    const auto d_w = dev_bf16(w);
    const auto d_bias = dev_bf16(bias);
    const auto d_out = poisoned<bf16>(numel(N, OUT));
    cuda::matmul_forward(d_out.p(), d_inp.p(), d_w.p(), with_bias ? d_bias.p() : nullptr, N, IN, OUT);
    c.tensor("out", get(d_out), want, kTolBf16);
}

void matmul_backward_case(Check& c, int N, int IN, int OUT, bool want_dinp, bool want_dweight, bool want_dbias) {
    const auto inp = c.rng.bf16_values(numel(N, IN), 1.0f);
    const auto w = c.rng.bf16_values(numel(OUT, IN), fan_in_bound(IN));
    const auto dout = c.rng.bf16_values(numel(N, OUT), 1.0f);
    std::vector<float> inc_dinp(size_t(numel(N, IN)), 0.0f), inc_dw(size_t(numel(OUT, IN)), 0.0f),
        inc_db(size_t(OUT), 0.0f);
    auto run_cpu = [&](std::vector<float>& di, std::vector<float>& dw, std::vector<float>& db) {
        cpu::matmul_backward(want_dinp ? di.data() : nullptr, want_dweight ? dw.data() : nullptr,
                             want_dbias ? db.data() : nullptr, dout.data(), inp.data(), w.data(), N, IN, OUT);
    };
    run_cpu(inc_dinp, inc_dw, inc_db);
    const auto init_dinp = c.initial(inc_dinp, true);
    const auto init_dw = c.initial(inc_dw, false);
    const auto init_db = c.initial(inc_db, false);
    auto want_di = init_dinp, want_dw = init_dw, want_db = init_db;
    run_cpu(want_di, want_dw, want_db);

    const auto d_inp = dev_bf16(inp);
    const auto d_w = dev_bf16(w);
    const auto d_dout = dev_bf16(dout);
    const auto d_dinp = dev_bf16(init_dinp);
    const auto d_dw = dev_f32(init_dw);
    const auto d_db = dev_f32(init_db);
    cuda::matmul_backward(want_dinp ? d_dinp.p() : nullptr, want_dweight ? d_dw.p() : nullptr,
                          want_dbias ? d_db.p() : nullptr, d_dout.p(), d_inp.p(), d_w.p(), N, IN, OUT);
    if (want_dinp) c.tensor("dinp", get(d_dinp), want_di, kTolBf16, &init_dinp);
    if (want_dweight) c.tensor("dweight", get(d_dw), want_dw, kTolBf16, &init_dw);
    if (want_dbias) c.tensor("dbias", get(d_db), want_db, kTolBf16, &init_db);
}

void lora_case(Check& c, int N, int IN, int OUT, int R, float scaling) {
    const auto inp = c.rng.bf16_values(numel(N, IN), 1.0f);
    const auto A = c.rng.bf16_values(numel(R, IN), 1.0f / float(std::sqrt(double(IN))));
    const auto B = c.rng.bf16_values(numel(OUT, R), 1.0f / float(std::sqrt(double(R))));
    const auto d_inp = dev_bf16(inp);
    const auto d_A = dev_bf16(A);
    const auto d_B = dev_bf16(B);

    // forward: out accumulates, tmp is written
    std::vector<float> inc(size_t(numel(N, OUT)), 0.0f), tmp(size_t(numel(N, R)));
    cpu::lora_forward(inc.data(), tmp.data(), inp.data(), A.data(), B.data(), scaling, N, IN, OUT, R);
    const auto init = c.initial(inc, true);
    auto want = init;
    cpu::lora_forward(want.data(), tmp.data(), inp.data(), A.data(), B.data(), scaling, N, IN, OUT, R);
    const auto d_out = dev_bf16(init);
    const auto d_tmp = poisoned<bf16>(numel(N, R));
    cuda::lora_forward(d_out.p(), d_tmp.p(), d_inp.p(), d_A.p(), d_B.p(), scaling, N, IN, OUT, R);
    c.tensor("out", get(d_out), want, kTolBf16, &init);
    c.tensor("tmp", get(d_tmp), tmp, kTolBf16);

    // backward from the same (bf16) tmp on both sides
    const auto tmp16 = round_bf16(tmp);
    const auto dout = c.rng.bf16_values(numel(N, OUT), 1.0f);
    std::vector<float> inc_di(size_t(numel(N, IN)), 0.0f), inc_da(size_t(numel(R, IN)), 0.0f),
        inc_db(size_t(numel(OUT, R)), 0.0f), dtmp(size_t(numel(N, R)));
    cpu::lora_backward(inc_di.data(), inc_da.data(), inc_db.data(), dtmp.data(), dout.data(), inp.data(), tmp16.data(),
                       A.data(), B.data(), scaling, N, IN, OUT, R);
    const auto init_di = c.initial(inc_di, true);
    const auto init_da = c.initial(inc_da, false);
    const auto init_db = c.initial(inc_db, false);
    auto want_di = init_di, want_da = init_da, want_db = init_db;
    cpu::lora_backward(want_di.data(), want_da.data(), want_db.data(), dtmp.data(), dout.data(), inp.data(),
                       tmp16.data(), A.data(), B.data(), scaling, N, IN, OUT, R);
    const auto d_tmp16 = dev_bf16(tmp16);
    const auto d_dout = dev_bf16(dout);
    const auto d_di = dev_bf16(init_di);
    const auto d_da = dev_f32(init_da);
    const auto d_db = dev_f32(init_db);
    const auto d_dtmp = poisoned<bf16>(numel(N, R));
    cuda::lora_backward(d_di.p(), d_da.p(), d_db.p(), d_dtmp.p(), d_dout.p(), d_inp.p(), d_tmp16.p(), d_A.p(), d_B.p(),
                        scaling, N, IN, OUT, R);
    c.tensor("dinp", get(d_di), want_di, kTolBf16, &init_di);
    c.tensor("dlora_a", get(d_da), want_da, kTolBf16, &init_da);
    c.tensor("dlora_b", get(d_db), want_db, kTolBf16, &init_db);
    c.tensor("dtmp", get(d_dtmp), dtmp, kTolBf16);
}

// ---------------------------------------------------------------------------------------------------------
// lm_head + cross-entropy
// ---------------------------------------------------------------------------------------------------------

// logit_scale multiplies the weights: 8 gives logits of tens, where a softmax without max subtraction fails.
void cross_entropy_case(Check& c, int N, int C, int V, int chunk_rows, float logit_scale, bool with_grad) {
    const auto hidden = c.rng.bf16_values(numel(N, C), 1.0f);
    const auto weight = c.rng.bf16_values(numel(V, C), logit_scale * fan_in_bound(C) * float(std::sqrt(3.0)));
    std::vector<int32_t> targets(static_cast<size_t>(N));
    for (auto& t : targets) t = c.rng.uniform(0, 1) < 0.25f ? cpu::kIgnoreIndex : c.rng.below(V);
    targets[0] = cpu::kIgnoreIndex;
    if (N > 1) targets[1] = V - 1;
    if (N > 2) targets[2] = 0;
    int labels = 0;
    for (auto t : targets) labels += t != cpu::kIgnoreIndex;
    const float grad_scale = 1.0f / float(std::max(labels, 1));

    // CPU: per-row losses one row at a time, then the whole batch for the sum and dhidden.
    std::vector<float> scratch(size_t(numel(std::max(chunk_rows, 1), V)));
    std::vector<float> want_losses(static_cast<size_t>(N));
    for (int n = 0; n < N; ++n)
        want_losses[size_t(n)] =
            float(cpu::lm_head_cross_entropy(nullptr, hidden.data() + numel(n, C), weight.data(), &targets[size_t(n)],
                                             1, C, V, 1.0f, 1, scratch.data()));
    std::vector<float> want_dh(size_t(numel(N, C)));
    const double want_sum = cpu::lm_head_cross_entropy(want_dh.data(), hidden.data(), weight.data(), targets.data(), N,
                                                       C, V, grad_scale, chunk_rows, scratch.data());

    const auto d_hidden = dev_bf16(hidden);
    const auto d_weight = dev_bf16(weight);
    const auto d_targets = dev_i32(targets);
    const auto d_losses = poisoned<float>(N);
    const auto d_dh = poisoned<bf16>(numel(N, C));
    const Dev<char> ws(int64_t(cuda::lm_head_cross_entropy_workspace(chunk_rows, V)));
    cuda::lm_head_cross_entropy(with_grad ? d_dh.p() : nullptr, d_losses.p(), d_hidden.p(), d_weight.p(), d_targets.p(),
                                N, C, V, grad_scale, chunk_rows, ws.p());
    const auto losses = get(d_losses);
    c.tensor("losses", losses, want_losses, kTolBf16);
    double sum = 0;
    for (float l : losses) sum += l;
    c.scalar("loss sum", sum, want_sum, kTolBf16);
    if (with_grad) c.tensor("dhidden", get(d_dh), want_dh, kTolBf16);
}

void lm_head_logits_case(Check& c, int N, int C, int V) {
    const auto hidden = c.rng.bf16_values(numel(N, C), 1.0f);
    const auto weight = c.rng.bf16_values(numel(V, C), 3.0f * fan_in_bound(C));
    std::vector<float> want(size_t(numel(N, V)));
    cpu::lm_head_logits(want.data(), hidden.data(), weight.data(), N, C, V);
    const auto d_hidden = dev_bf16(hidden);
    const auto d_weight = dev_bf16(weight);
    const auto d_out = poisoned<float>(numel(N, V));
    cuda::lm_head_logits(d_out.p(), d_hidden.p(), d_weight.p(), N, C, V);
    c.tensor("logits", get(d_out), want, kTolBf16);
}

// ---------------------------------------------------------------------------------------------------------
// Attention
// ---------------------------------------------------------------------------------------------------------

struct AttnShape {
    std::vector<int> lengths;
    int Hq, Hkv, D;
};

std::string attn_label(const AttnShape& s) {
    std::string l =
        "D=" + std::to_string(s.D) + " Hq=" + std::to_string(s.Hq) + " Hkv=" + std::to_string(s.Hkv) + " lengths=";
    for (size_t i = 0; i < s.lengths.size(); ++i) l += (i ? "," : "") + std::to_string(s.lengths[i]);
    return l;
}

// Inputs and the CPU results (forward from the inputs, backward from the CPU's own out and lse).
struct AttnData {
    int S = 0, T = 0, max_seqlen = 0;
    float scale = 0;
    std::vector<int32_t> cu;
    std::vector<float> q, k, v, dout;  // bf16 values
    std::vector<float> out, lse;       // [T,Hq,D], [Hq,T]
    std::vector<float> dq, dk, dv;
};

AttnData attention_data(Check& c, const AttnShape& s) {
    AttnData a;
    a.S = int(s.lengths.size());
    a.cu.push_back(0);
    for (int len : s.lengths) {
        a.cu.push_back(a.cu.back() + len);
        a.max_seqlen = std::max(a.max_seqlen, len);
    }
    a.T = a.cu.back();
    a.scale = float(1.0 / std::sqrt(double(s.D)));
    const int64_t nq = int64_t(a.T) * s.Hq * s.D, nkv = int64_t(a.T) * s.Hkv * s.D;
    // |q.k| * scale of order 1: softmax rows that are neither flat nor one-hot.
    a.q = c.rng.bf16_values(nq, 2.0f);
    a.k = c.rng.bf16_values(nkv, 2.0f);
    a.v = c.rng.bf16_values(nkv, 1.0f);
    a.dout = c.rng.bf16_values(nq, 1.0f);
    a.out.resize(static_cast<size_t>(nq));
    a.lse.resize(size_t(int64_t(s.Hq) * a.T));
    cpu::attention_forward(a.out.data(), a.lse.data(), a.q.data(), a.k.data(), a.v.data(), a.cu.data(), a.S, a.T, s.Hq,
                           s.Hkv, s.D, a.scale);
    a.dq.resize(static_cast<size_t>(nq));
    a.dk.resize(static_cast<size_t>(nkv));
    a.dv.resize(static_cast<size_t>(nkv));
    cpu::attention_backward(a.dq.data(), a.dk.data(), a.dv.data(), a.dout.data(), a.q.data(), a.k.data(), a.v.data(),
                            a.out.data(), a.lse.data(), a.cu.data(), a.S, a.T, s.Hq, s.Hkv, s.D, a.scale);
    return a;
}

void attention_case(Check& c, const AttnShape& s) {
    if (!cuda::attention_supported(s.D)) {
        c.skip("all", "the in-house kernels do not support head_dim " + std::to_string(s.D));
        return;
    }
    const AttnData a = attention_data(c, s);
    const int64_t nq = int64_t(a.T) * s.Hq * s.D, nkv = int64_t(a.T) * s.Hkv * s.D;
    const auto d_q = dev_bf16(a.q), d_k = dev_bf16(a.k), d_v = dev_bf16(a.v), d_dout = dev_bf16(a.dout);
    const auto d_cu = dev_i32(a.cu);
    const auto d_out = poisoned<bf16>(nq);
    const auto d_lse = poisoned<float>(int64_t(s.Hq) * a.T);
    cuda::attention_forward(d_out.p(), d_lse.p(), d_q.p(), d_k.p(), d_v.p(), d_cu.p(), a.S, a.T, s.Hq, s.Hkv, s.D,
                            a.scale, a.max_seqlen);
    c.tensor("out", get(d_out), a.out, kTolBf16);
    c.tensor("lse", get(d_lse), a.lse, kTolBf16);

    // Backward from the GPU's own out and lse, as the model runs it.
    const auto d_dq = poisoned<bf16>(nq);
    const auto d_dk = poisoned<bf16>(nkv);
    const auto d_dv = poisoned<bf16>(nkv);
    const Dev<char> ws(int64_t(cuda::attention_backward_workspace(a.T, s.Hq, s.D)));
    cuda::attention_backward(d_dq.p(), d_dk.p(), d_dv.p(), d_dout.p(), d_q.p(), d_k.p(), d_v.p(), d_out.p(), d_lse.p(),
                             d_cu.p(), a.S, a.T, s.Hq, s.Hkv, s.D, a.scale, a.max_seqlen, ws.p());
    c.tensor("dq", get(d_dq), a.dq, kTolBf16);
    c.tensor("dk", get(d_dk), a.dk, kTolBf16);
    c.tensor("dv", get(d_dv), a.dv, kTolBf16);
}

void cudnn_attention_case(Check& c, const AttnShape& s) {
    std::string why;
    if (!cuda::cudnn_attention_available(&why)) {
        c.skip("all", "cuDNN attention unavailable: " + why);
        return;
    }
    const AttnData a = attention_data(c, s);
    const cuda::CudnnAttentionShape shape{
        .S = a.S, .T = a.T, .Hq = s.Hq, .Hkv = s.Hkv, .D = s.D, .max_seqlen = a.max_seqlen, .scale = a.scale};
    if (!cuda::cudnn_attention_supported(shape, &why)) {
        c.skip("all", "cuDNN does not support this shape: " + why);
        return;
    }
    const int64_t nq = int64_t(a.T) * s.Hq * s.D, nkv = int64_t(a.T) * s.Hkv * s.D;
    const auto d_q = dev_bf16(a.q), d_k = dev_bf16(a.k), d_v = dev_bf16(a.v), d_dout = dev_bf16(a.dout);
    const auto d_cu = dev_i32(a.cu);
    const Dev<char> stats(int64_t(cuda::cudnn_attention_stats_bytes(shape)));
    const Dev<char> ws(int64_t(cuda::cudnn_attention_workspace_bytes(shape)));
    poison(stats.p(), stats.bytes());
    const auto d_out = poisoned<bf16>(nq);
    cuda::cudnn_attention_forward(d_out.p(), stats.p(), d_q.p(), d_k.p(), d_v.p(), d_cu.p(), shape, ws.p());
    c.tensor("out", get(d_out), a.out, kTolBf16);

    const auto d_dq = poisoned<bf16>(nq);
    const auto d_dk = poisoned<bf16>(nkv);
    const auto d_dv = poisoned<bf16>(nkv);
    cuda::cudnn_attention_backward(d_dq.p(), d_dk.p(), d_dv.p(), d_dout.p(), d_q.p(), d_k.p(), d_v.p(), d_out.p(),
                                   stats.p(), d_cu.p(), shape, ws.p());
    c.tensor("dq", get(d_dq), a.dq, kTolBf16);
    c.tensor("dk", get(d_dk), a.dk, kTolBf16);
    c.tensor("dv", get(d_dv), a.dv, kTolBf16);
}

// ---------------------------------------------------------------------------------------------------------
// Dropout: the keep mask must match EXACTLY (same hash on both backends)
// ---------------------------------------------------------------------------------------------------------

// Positions where got and want disagree on "dropped" (dropped_got(i) vs dropped_want(i)).
template <class G, class W>
void mask_result(Check& c, const std::string& what, int64_t n, G dropped_got, W dropped_want) {
    int64_t bad = 0, first = -1, dropped = 0;
    for (int64_t i = 0; i < n; ++i) {
        dropped += dropped_want(i);
        if (dropped_got(i) != dropped_want(i) && bad++ == 0) first = i;
    }
    c.result(what, double(bad) / double(n), kTolExact,
             bad ? std::to_string(bad) + " of " + std::to_string(n) + " elements differ, first [" +
                       std::to_string(first) + "]"
                 : std::to_string(dropped) + " of " + std::to_string(n) + " dropped on both");
}

void dropout_case(Check& c, int64_t n, double p, int layer, int module, bool in_place) {
    const uint64_t seed = c.rng.u64();
    const auto inp = c.rng.nonzero_values(n, 2.0f);
    std::vector<float> want(static_cast<size_t>(n));
    cpu::dropout_forward(want.data(), inp.data(), seed, layer, module, n, p);
    const auto d_inp = dev_bf16(inp);
    const auto d_out = poisoned<bf16>(in_place ? 0 : n);
    bf16* out = in_place ? d_inp.p() : d_out.p();
    cuda::dropout_forward(out, d_inp.p(), seed, layer, module, n, p);
    const auto got = get(out, n);
    mask_result(
        c, "forward mask", n, [&](int64_t i) { return got[size_t(i)] == 0.0f; },
        [&](int64_t i) { return want[size_t(i)] == 0.0f; });
    c.tensor("out", got, want, kTolBf16);

    // backward accumulates: an element is dropped iff it still holds its initial value
    const auto dout = c.rng.nonzero_values(n, 2.0f);
    std::vector<float> inc(size_t(n), 0.0f);
    cpu::dropout_backward(inc.data(), dout.data(), seed, layer, module, n, p);
    const auto init = c.initial(inc, true);
    auto want_d = init;
    cpu::dropout_backward(want_d.data(), dout.data(), seed, layer, module, n, p);
    const auto d_dout = dev_bf16(dout);
    const auto d_dinp = dev_bf16(init);
    cuda::dropout_backward(d_dinp.p(), d_dout.p(), seed, layer, module, n, p);
    const auto got_d = get(d_dinp);
    mask_result(
        c, "backward mask", n, [&](int64_t i) { return got_d[size_t(i)] == init[size_t(i)]; },
        [&](int64_t i) { return inc[size_t(i)] == 0.0f; });
    c.tensor("dinp", got_d, want_d, kTolBf16, &init);
}

// ---------------------------------------------------------------------------------------------------------
// AdamW + global gradient norm (fp32)
// ---------------------------------------------------------------------------------------------------------

enum class Clip { None, Inactive, Active, NonFinite };

void adamw_case(Check& c, Clip mode) {
    const std::vector<int64_t> sizes = {1, 37, 1000, 4099, 768};
    const int count = int(sizes.size());
    const int64_t total = 1 + 37 + 1000 + 4099 + 768;
    // lr * wd = 1e-3 so a missing weight decay shows at the fp32 tolerance.
    const double lr = 1e-2, b1 = 0.9, b2 = 0.999, eps = 1e-8, wd = 0.1;
    const int64_t step = 3;
    struct Host {
        std::vector<float> param, grad, m, v;
    };
    std::vector<Host> h(static_cast<size_t>(count));
    for (int i = 0; i < count; ++i) {
        const int64_t n = sizes[size_t(i)];
        h[size_t(i)].param = c.rng.f32_values(n, 1.0f);
        h[size_t(i)].grad = c.rng.f32_values(n, 0.1f);
        h[size_t(i)].m = c.rng.f32_values(n, 0.01f);
        h[size_t(i)].v = c.rng.f32_values(n, 0.1f);
        for (float& x : h[size_t(i)].v) x *= x;
    }
    if (mode == Clip::NonFinite) h[2].grad[5] = std::numeric_limits<float>::infinity();

    // CPU: clip (torch's clip_grad_norm_), then one AdamW step per tensor unless the norm is not finite.
    std::vector<Host> want = h;
    std::vector<cpu::GradSpan> spans;
    for (auto& t : want) spans.push_back({t.grad.data(), int64_t(t.grad.size())});
    const double norm0 = cpu::global_grad_norm(spans);
    const double max_norm = mode == Clip::None       ? 0.0
                            : mode == Clip::Active   ? 0.5 * norm0
                            : mode == Clip::Inactive ? 2.0 * norm0
                                                     : 1.0;
    const double norm = max_norm > 0 ? cpu::clip_grad_norm(spans, max_norm) : norm0;
    if (std::isfinite(norm))
        for (auto& t : want)
            cpu::adamw_update(t.param.data(), t.grad.data(), t.m.data(), t.v.data(), int64_t(t.param.size()), lr, b1,
                              b2, eps, wd, step);

    // GPU: tensor 1 has no bf16 copy (nullptr is allowed); the others' copies are poisoned, except when the
    // update must be skipped: then they hold the old values and must keep them.
    std::vector<Dev<float>> P, G, M, Vs;
    std::vector<Dev<bf16>> Pb;
    std::vector<cuda::AdamWTensor> desc(static_cast<size_t>(count));
    for (int i = 0; i < count; ++i) {
        const auto& t = h[size_t(i)];
        P.push_back(dev_f32(t.param));
        G.push_back(dev_f32(t.grad));
        M.push_back(dev_f32(t.m));
        Vs.push_back(dev_f32(t.v));
        Pb.push_back(mode == Clip::NonFinite ? dev_bf16(round_bf16(t.param)) : poisoned<bf16>(sizes[size_t(i)]));
        desc[size_t(i)] = {P.back().p(),    G.back().p(), M.back().p(), Vs.back().p(), i == 1 ? nullptr : Pb.back().p(),
                           sizes[size_t(i)]};
    }
    const Dev<cuda::AdamWTensor> d_desc(count);
    copy_to_device(d_desc.p(), desc.data(), desc.size() * sizeof(cuda::AdamWTensor));
    const Dev<char> ws(int64_t(cuda::grad_norm_workspace(count, total)));
    const auto d_norm = poisoned<float>(1);
    cuda::global_grad_norm(d_norm.p(), d_desc.p(), count, total, ws.p());
    cuda::adamw_update(d_desc.p(), count, total, d_norm.p(), max_norm, lr, b1, b2, eps, wd, step);
    const float got_norm = get(d_norm)[0];

    std::vector<float> got_p, got_m, got_v, got_pb, want_p, want_m, want_v, want_pb;
    for (int i = 0; i < count; ++i) {
        const auto& w = want[size_t(i)];
        const int64_t n = sizes[size_t(i)];
        auto gp = get(P[size_t(i)].p(), n), gm = get(M[size_t(i)].p(), n), gv = get(Vs[size_t(i)].p(), n);
        got_p.insert(got_p.end(), gp.begin(), gp.end());
        got_m.insert(got_m.end(), gm.begin(), gm.end());
        got_v.insert(got_v.end(), gv.begin(), gv.end());
        want_p.insert(want_p.end(), w.param.begin(), w.param.end());
        want_m.insert(want_m.end(), w.m.begin(), w.m.end());
        want_v.insert(want_v.end(), w.v.begin(), w.v.end());
        if (i == 1) continue;
        auto gb = get(Pb[size_t(i)].p(), n);
        const auto wb = round_bf16(w.param);
        got_pb.insert(got_pb.end(), gb.begin(), gb.end());
        want_pb.insert(want_pb.end(), wb.begin(), wb.end());
    }
    if (mode == Clip::NonFinite) {
        c.result("norm", std::isfinite(got_norm) ? kInf : 0.0, kTolExact,
                 "gpu " + g3(got_norm) + ", cpu " + g3(norm) + " (must be non-finite)");
        c.tensor("param unchanged", got_p, want_p, kTolExact);
        c.tensor("exp_avg unchanged", got_m, want_m, kTolExact);
        c.tensor("exp_avg_sq unchanged", got_v, want_v, kTolExact);
        c.tensor("param_bf16 unchanged", got_pb, want_pb, kTolExact);
        return;
    }
    c.scalar("norm", got_norm, norm, kTolF32);
    c.tensor("param", got_p, want_p, kTolF32);
    c.tensor("exp_avg", got_m, want_m, kTolF32);
    c.tensor("exp_avg_sq", got_v, want_v, kTolF32);
    c.tensor("param_bf16", got_pb, want_pb, kTolBf16);
}

// ---------------------------------------------------------------------------------------------------------
// Elementwise
// ---------------------------------------------------------------------------------------------------------

// offset: elements added to every pointer; 1 makes them not 16-byte aligned (the scalar fallback).
void elementwise_case(Check& c, int64_t n, int offset) {
    const int64_t cap = n + 8;
    const Dev<bf16> A(cap), B(cap), O(cap);
    const Dev<float> Af(cap), Of(cap);
    bf16* pa = A.p() + offset;
    bf16* pb = B.p() + offset;
    bf16* po = O.p() + offset;
    float* paf = Af.p() + offset;
    float* pof = Of.p() + offset;
    const auto a = c.rng.bf16_values(n, 2.0f), b = c.rng.bf16_values(n, 2.0f);
    put(pa, a);
    put(pb, b);
    const float alpha = -0.75f;
    {
        std::vector<float> want(static_cast<size_t>(n));
        cpu::add(want.data(), a.data(), b.data(), n);
        poison(po, size_t(n) * sizeof(bf16));
        cuda::add(po, pa, pb, n);
        c.tensor("add", get(po, n), want, kTolBf16);
    }
    {
        std::vector<float> want = b;
        cpu::accumulate(want.data(), a.data(), n);
        put(po, b);
        cuda::accumulate(po, pa, n);
        c.tensor("accumulate bf16", get(po, n), want, kTolBf16, &b);
    }
    {
        const auto init = c.rng.f32_values(n, 1.0f), inp = c.rng.f32_values(n, 1.0f);
        std::vector<float> want = init;
        cpu::accumulate(want.data(), inp.data(), n);
        put(pof, init);
        put(paf, inp);
        cuda::accumulate(pof, paf, n);
        c.tensor("accumulate fp32", get(pof, n), want, kTolF32, &init);
    }
    {
        std::vector<float> want = b;
        cpu::axpy(want.data(), alpha, a.data(), n);
        put(po, b);
        cuda::axpy(po, alpha, pa, n);
        c.tensor("axpy", get(po, n), want, kTolBf16, &b);
    }
    {
        std::vector<float> want = a;
        cpu::scale(want.data(), alpha, n);
        put(po, a);
        cuda::scale(po, alpha, n);
        c.tensor("scale bf16", get(po, n), want, kTolBf16);
    }
    {
        const auto x = c.rng.f32_values(n, 1.0f);
        std::vector<float> want = x;
        cpu::scale(want.data(), alpha, n);
        put(pof, x);
        cuda::scale(pof, alpha, n);
        c.tensor("scale fp32", get(pof, n), want, kTolF32);
    }
    {
        poison(po, size_t(n) * sizeof(bf16));
        cuda::copy(po, pa, n);
        c.tensor("copy", get(po, n), a, kTolExact);
    }
    {
        poison(po, size_t(n) * sizeof(bf16));
        cuda::fill(po, 0.3f, n);
        c.tensor("fill bf16", get(po, n), std::vector<float>(size_t(n), round_bf16(0.3f)), kTolExact);
        poison(pof, size_t(n) * sizeof(float));
        cuda::fill(pof, 0.3f, n);
        c.tensor("fill fp32", get(pof, n), std::vector<float>(size_t(n), 0.3f), kTolExact);
    }
    {
        const auto x = c.rng.f32_values(n, 3.0f);  // not representable in bf16: rounding to nearest even
        put(paf, x);
        poison(po, size_t(n) * sizeof(bf16));
        cuda::to_bf16(po, paf, n);
        c.tensor("to_bf16", get(po, n), round_bf16(x), kTolExact);
        poison(pof, size_t(n) * sizeof(float));
        cuda::to_f32(pof, pa, n);
        c.tensor("to_f32", get(pof, n), a, kTolExact);
    }
    {
        const auto x = c.rng.f32_values(n, 3.0f);
        std::vector<uint16_t> half(static_cast<size_t>(n));
        std::vector<float> want(static_cast<size_t>(n));
        for (size_t i = 0; i < half.size(); ++i) {
            half[i] = f32_to_f16(x[i]);
            want[i] = round_bf16(f16_to_f32(half[i]));
        }
        copy_to_device(pb, half.data(), half.size() * sizeof(uint16_t));  // B holds fp16 bits here
        poison(po, size_t(n) * sizeof(bf16));
        cuda::f16_to_bf16(po, pb, n);
        c.tensor("f16_to_bf16", get(po, n), want, kTolExact);
    }
}

void sum_case(Check& c, int64_t n) {
    auto x = c.rng.f32_values(n, 1.0f);
    for (float& v : x) v += 0.25f;  // a sum far from 0, so the relative error means something
    double want = 0;
    for (float v : x) want += double(v);
    const auto d_x = dev_f32(x);
    const Dev<double> d_out(1);
    poison(d_out.p(), d_out.bytes());
    cuda::sum(d_out.p(), d_x.p(), n, false);
    double got = 0;
    copy_to_host(&got, d_out.p(), sizeof got);
    c.scalar("sum", got, want, kTolF32);

    const double init = 12.5;
    copy_to_device(d_out.p(), &init, sizeof init);
    cuda::sum(d_out.p(), d_x.p(), n, true);
    copy_to_host(&got, d_out.p(), sizeof got);
    c.scalar("sum accumulate (increment)", got - init, want, kTolF32);
}

// No CPU twin: checks range, moments, determinism and the seed.
void fill_uniform_case(Check& c) {
    const int64_t n = 100003;
    const float bound = 0.05f;
    const uint64_t seed = c.rng.u64();
    auto draw = [&](uint64_t s) {
        const auto d = poisoned<bf16>(n);
        cuda::fill_uniform(d.p(), n, s, bound);
        return get(d);
    };
    const auto x = draw(seed), y = draw(seed), z = draw(seed + 1);
    int64_t out_of_range = 0;
    double sum = 0, sq = 0;
    for (float v : x) {
        // bf16 rounding may carry a value just below the bound onto it
        if (!std::isfinite(v) || std::fabs(v) > round_bf16(bound)) ++out_of_range;
        sum += v;
        sq += double(v) * v;
    }
    c.result(
        "range", double(out_of_range) / double(n), kTolExact,
        std::to_string(out_of_range) + " of " + std::to_string(n) + " outside [-" + g3(bound) + ", " + g3(bound) + "]");
    const double mean = sum / double(n), sd = std::sqrt(std::max(0.0, sq / double(n) - mean * mean));
    const double sd_want = bound / std::sqrt(3.0);
    c.result("moments", std::max(std::fabs(mean) / sd_want, std::fabs(sd / sd_want - 1.0)), 0.02,
             "mean " + g3(mean) + ", std " + g3(sd) + " (uniform: 0, " + g3(sd_want) + ")");
    c.tensor("same seed, same values", y, x, kTolExact);
    c.result("another seed, other values", x == z ? 1.0 : 0.0, kTolExact, x == z ? "identical" : "different");
}

// ---------------------------------------------------------------------------------------------------------
// Whole training step: CudaModel against CpuModel on generated models
// ---------------------------------------------------------------------------------------------------------

struct StepVariant {
    std::string name;       // in the case names
    nlohmann::json config;  // config.json
    LoraConfig lora;
    std::vector<int> lengths;  // samples of the packed batch
    int token_budget = 0;      // >= sum of lengths: the rest is padding
};

// config.json + model.safetensors (BF16) with weights scaled so every path matters: q/k projections with
// std 1/sqrt(in) (attention rows neither flat nor one-hot), other projections 0.5/sqrt(in), norms 1 +- 0.3,
// biases +-0.1. No tokenizer: the models only see token ids.
void write_model(const fs::path& dir, const nlohmann::json& config, uint64_t seed) {
    std::error_code ec;
    fs::create_directories(dir, ec);
    if (ec) throw_io(dir.string() + ": cannot create the folder: " + ec.message());
    const ModelConfig cfg = parse_model_config(config, "self-test model");
    Rng rng(seed);
    const auto expected = expected_tensors(cfg);
    std::vector<std::vector<uint16_t>> storage;
    storage.reserve(expected.size());
    std::vector<TensorToWrite> tensors;
    for (const auto& t : expected) {
        int64_t n = 1;
        for (auto d : t.shape) n *= d;
        const int in = int(t.shape.back());
        const bool norm = t.name.find("norm") != std::string::npos;
        const bool bias = t.name.size() > 5 && t.name.compare(t.name.size() - 5, 5, ".bias") == 0;
        const bool qk = t.name.find("q_proj") != std::string::npos || t.name.find("k_proj") != std::string::npos;
        const bool table =
            t.name.find("embed_tokens") != std::string::npos || t.name.find("lm_head") != std::string::npos;
        const float bound = bias ? 0.1f : (qk || table) ? fan_in_bound(in) : 0.5f * fan_in_bound(in);
        std::vector<uint16_t> v(static_cast<size_t>(n));
        for (auto& x : v) x = f32_to_bf16(norm ? 1.0f + rng.uniform(-0.3f, 0.3f) : rng.uniform(-bound, bound));
        storage.push_back(std::move(v));
        const auto& s = storage.back();
        tensors.push_back({t.name, DType::BF16, t.shape, std::as_bytes(std::span<const uint16_t>(s.data(), s.size()))});
    }
    write_safetensors(dir / "model.safetensors", tensors, {{"format", "pt"}});
    write_file_atomic(dir / "config.json", config.dump(2) + "\n");
}

StepVariant qwen3_variant() {
    StepVariant v;
    v.name = "qwen3";  // q/k norm, head_dim 64 != hidden/heads (q width 256 vs hidden 128), rsLoRA, dropout
    v.config = {{"architectures", {"Qwen3ForCausalLM"}},
                {"model_type", "qwen3"},
                {"hidden_size", 128},
                {"intermediate_size", 200},
                {"num_hidden_layers", 2},
                {"num_attention_heads", 4},
                {"num_key_value_heads", 2},
                {"head_dim", 64},
                {"vocab_size", 301},
                {"max_position_embeddings", 512},
                {"rms_norm_eps", 1e-6},
                {"rope_theta", 1000000.0},
                {"tie_word_embeddings", false},
                {"hidden_act", "silu"},
                {"torch_dtype", "bfloat16"}};
    v.lora.r = 16;
    v.lora.alpha = 16;
    v.lora.use_rslora = true;
    v.lora.dropout = 0.1;
    v.lengths = {1, 17, 64, 130};
    v.token_budget = 224;
    return v;
}

StepVariant llama_variant() {
    StepVariant v;
    v.name = "llama-bias";  // q/k/v/o biases, llama3 rope scaling, tied embeddings, head_dim 128, MQA
    v.config = {{"architectures", {"LlamaForCausalLM"}},
                {"model_type", "llama"},
                {"hidden_size", 256},
                {"intermediate_size", 352},
                {"num_hidden_layers", 2},
                {"num_attention_heads", 2},
                {"num_key_value_heads", 1},
                {"head_dim", 128},
                {"vocab_size", 517},
                {"max_position_embeddings", 1024},
                {"rms_norm_eps", 1e-5},
                {"rope_theta", 500000.0},
                {"rope_scaling",
                 {{"rope_type", "llama3"},
                  {"factor", 8.0},
                  {"low_freq_factor", 1.0},
                  {"high_freq_factor", 4.0},
                  {"original_max_position_embeddings", 256}}},
                {"tie_word_embeddings", true},
                {"attention_bias", true},
                {"hidden_act", "silu"},
                {"torch_dtype", "bfloat16"}};
    v.lora.r = 8;
    v.lora.alpha = 16;
    v.lengths = {130, 1, 64, 17, 1};
    v.token_budget = 220;
    return v;
}

constexpr uint64_t kLoraInitSeed = 7;
constexpr uint64_t kDropoutSeed = 1234;
constexpr double kOptLr = 1e-3, kOptB1 = 0.9, kOptB2 = 0.999, kOptEps = 1e-8, kOptWd = 0.1;

// The model folder, the batch, the LoRA values and the CPU results of one variant: made once, shared by
// the variant's cases, the folder removed with it.
class StepReference {
public:
    explicit StepReference(StepVariant v) : variant(std::move(v)) {}
    StepReference(const StepReference&) = delete;
    StepReference& operator=(const StepReference&) = delete;
    ~StepReference() {
        if (!dir.empty()) {
            std::error_code ec;
            fs::remove_all(dir, ec);
        }
    }

    void prepare(uint64_t base_seed);

    StepVariant variant;
    bool ready = false;
    fs::path dir;
    PackedBatch batch;
    LoraTensors lora;           // bf16-representable values, B non-zero
    std::vector<float> logits;  // [num_tokens, V]
    double eval_loss = 0, train_loss = 0;
    std::map<std::string, std::vector<float>> grads;
    double norm = 0;                                    // global grad norm before clipping
    double max_norm = 0;                                // half of it: the clip is active
    std::map<std::string, std::vector<float>> stepped;  // values after one AdamW step

private:
    void build(uint64_t base_seed);
    std::exception_ptr error_;
    static int counter_;
};
int StepReference::counter_ = 0;

PackedBatch make_step_batch(Rng& rng, const std::vector<int>& lengths, int token_budget, int V) {
    std::vector<std::vector<int32_t>> seqs;
    for (int len : lengths) {
        std::vector<int32_t> s(static_cast<size_t>(len));
        for (auto& id : s) id = rng.below(V);
        seqs.push_back(std::move(s));
    }
    PackedBatch b = batch_from_sequences(seqs);
    // An untrained prompt at the start of each sample, as rendered chat data has.
    for (size_t s = 0; s < lengths.size(); ++s)
        for (int i = 1; i <= lengths[s] / 3; ++i) b.labels[size_t(b.cu_seqlens[s] + i)] = cpu::kIgnoreIndex;
    b.num_label_tokens = 0;
    for (int32_t l : b.labels) b.num_label_tokens += l != cpu::kIgnoreIndex;
    // Padding up to the token budget, as the packer makes it: id 0, label -100, position 0.
    while (int(b.tokens.size()) < token_budget) {
        b.tokens.push_back(0);
        b.labels.push_back(cpu::kIgnoreIndex);
        b.position_ids.push_back(0);
    }
    b.token_budget = token_budget;
    return b;
}

void StepReference::prepare(uint64_t base_seed) {
    if (ready) return;
    if (error_) std::rethrow_exception(error_);  // the variant's other cases fail the same way, quickly
    try {
        build(base_seed);
        ready = true;
    } catch (...) {
        error_ = std::current_exception();
        throw;
    }
}

void StepReference::build(uint64_t base_seed) {
    Rng rng(splitmix64(base_seed ^ fnv1a("step " + variant.name)));
    dir = fs::temp_directory_path() /
          ("tandem-selftest-" + std::to_string(::getpid()) + "-" + std::to_string(counter_++) + "-" + variant.name);
    write_model(dir, variant.config, rng.u64());
    const ModelConfig cfg = load_model_config(dir);
    batch = make_step_batch(rng, variant.lengths, variant.token_budget, int(cfg.vocab_size));

    // LoRA values on both sides: A ~ U(+-1/sqrt(in)), B non-zero so the adapter changes the output by ~25%
    // and no gradient hides behind B = 0; rounded to bf16, the precision of the GPU's GEMM copies.
    const float scaling = float(variant.lora.scaling());
    for (const auto& spec : lora_tensor_specs(cfg, variant.lora)) {
        const int64_t n = spec.shape[0] * spec.shape[1];
        const float bound = spec.is_a ? 1.0f / float(std::sqrt(double(spec.shape[1])))
                                      : 0.5f / (scaling * float(std::sqrt(double(variant.lora.r))));
        lora[spec.name] = rng.bf16_values(n, bound);
    }

    CpuModel m = CpuModel::load(dir, variant.lora, kLoraInitSeed, variant.token_budget);
    m.set_lora(lora);
    logits = m.logits(batch);
    eval_loss = m.forward_loss(batch);
    m.zero_grads();
    train_loss = m.forward_backward(batch, 1.0f / float(batch.num_label_tokens), kDropoutSeed);
    for (const auto& p : m.lora_params()) grads[p.spec.name] = p.grad;

    // One optimizer step as CudaModel::optimizer_step does it: clip to half the norm, AdamW step 1.
    std::vector<cpu::GradSpan> spans;
    for (auto& p : m.lora_params()) spans.push_back({p.grad.data(), int64_t(p.grad.size())});
    norm = cpu::global_grad_norm(spans);
    max_norm = 0.5 * norm;
    cpu::clip_grad_norm(spans, max_norm);
    for (auto& p : m.lora_params()) {
        std::vector<float> m1(p.value.size(), 0.0f), v1(p.value.size(), 0.0f);
        auto value = p.value;
        cpu::adamw_update(value.data(), p.grad.data(), m1.data(), v1.data(), int64_t(value.size()), kOptLr, kOptB1,
                          kOptB2, kOptEps, kOptWd, 1);
        stepped[p.spec.name] = std::move(value);
    }
}

std::string policy_name(CheckpointPolicy p) {
    return std::string(checkpoint_policy_name(p));
}
std::string attention_name(AttentionBackend a) {
    return a == AttentionBackend::Inhouse ? "inhouse" : a == AttentionBackend::Cudnn ? "cudnn" : "auto";
}

void step_case(Check& c, StepReference& ref, CheckpointPolicy ckpt, AttentionBackend attn) {
    ref.prepare(c.base_seed());
    const PackedBatch& batch = ref.batch;
    CudaModelOptions opt;
    opt.max_tokens = ref.variant.token_budget;
    opt.max_seqlen = batch.max_seqlen;
    opt.checkpointing = ckpt;
    opt.attention = attn;
    CudaModel g = CudaModel::load(ref.dir, ref.variant.lora, kLoraInitSeed, opt);
    g.set_lora(ref.lora);

    c.tensor("logits", g.logits(batch), ref.logits, kTolStep);
    c.scalar("eval loss", g.forward_loss(batch), ref.eval_loss, kTolStep);
    g.zero_grads();
    const double loss = g.forward_backward(batch, 1.0f / float(batch.num_label_tokens), kDropoutSeed);
    c.scalar("train loss (" + g.attention_backend_name() + ")", loss, ref.train_loss, kTolStep);

    // Every LoRA gradient within the tolerance; one result with the worst tensor.
    g.sync_to_host();
    double worst = 0, worst_l2 = 0;
    std::string worst_name = "(none)", worst_l2_name = "(none)", problems;
    size_t compared = 0;
    for (const auto& p : g.lora_params()) {
        const auto it = ref.grads.find(p.spec.name);
        if (it == ref.grads.end()) {
            problems += " unexpected tensor " + p.spec.name + ";";
            worst = kInf;
            continue;
        }
        ++compared;
        const auto& want = it->second;
        double max_abs = 0, denom = 0, diff2 = 0, ref2 = 0;
        bool finite = p.grad.size() == want.size();
        for (size_t i = 0; finite && i < want.size(); ++i) {
            if (!std::isfinite(p.grad[i])) finite = false;
            const double d = double(p.grad[i]) - want[i];
            max_abs = std::max(max_abs, std::fabs(d));
            denom = std::max(denom, std::fabs(double(want[i])));
            diff2 += d * d;
            ref2 += double(want[i]) * want[i];
        }
        const double rel = !finite ? kInf : denom > 0 ? max_abs / denom : max_abs;
        const double rel2 = !finite ? kInf : ref2 > 0 ? std::sqrt(diff2 / ref2) : std::sqrt(diff2);
        if (!(rel <= worst)) {
            worst = rel;
            worst_name = p.spec.name;
        }
        if (!(rel2 <= worst_l2)) {
            worst_l2 = rel2;
            worst_l2_name = p.spec.name;
        }
    }
    if (compared != ref.grads.size()) {
        problems += " " + std::to_string(ref.grads.size() - compared) + " tensors missing;";
        worst = kInf;
    }
    c.result("lora grads (max element)", worst, kTolStepGradMax,
             std::to_string(compared) + " tensors, worst " + worst_name + (problems.empty() ? "" : ";" + problems));
    c.result("lora grads (L2)", worst_l2, kTolStepGradL2, "||gpu - cpu|| / ||cpu|| per tensor, worst " + worst_l2_name);

    // One optimizer step (clip active). Only elements whose gradient is at least 5% of the tensor's largest
    // are compared (relative to the step size lr): there the sign, hence the AdamW step-1 update, is certain.
    const double got_norm = g.optimizer_step(kOptLr, kOptB1, kOptB2, kOptEps, kOptWd, ref.max_norm, 1);
    c.scalar("optimizer grad norm", got_norm, ref.norm, kTolStep);
    g.sync_to_host();
    double worst_step = 0;
    std::string worst_step_name = "(none)";
    for (const auto& p : g.lora_params()) {
        const auto sit = ref.stepped.find(p.spec.name);
        const auto git = ref.grads.find(p.spec.name);
        if (sit == ref.stepped.end() || git == ref.grads.end() || sit->second.size() != p.value.size()) continue;
        float gmax = 0;
        for (float x : git->second) gmax = std::max(gmax, std::fabs(x));
        double err = 0;
        for (size_t i = 0; i < p.value.size(); ++i)
            if (std::fabs(git->second[i]) >= 0.05f * gmax)
                err = std::max(err, std::isfinite(p.value[i]) ? std::fabs(double(p.value[i]) - sit->second[i]) : kInf);
        if (!(err / kOptLr <= worst_step)) {
            worst_step = err / kOptLr;
            worst_step_name = p.spec.name;
        }
    }
    c.result("optimizer update", worst_step, kTolStep, "max |gpu - cpu| / lr, worst " + worst_step_name);
}

// Off, Recompute, Smart and SmartSingle run the same kernels on the same values in the same order (Smart*
// only move the block inputs between device and pinned host memory), so with the deterministic in-house
// attention the loss and every LoRA gradient must be equal BIT FOR BIT to Off's. Two steps per policy
// (zero_grads between), so events and buffers reused across steps are covered too.
// Elements of `got` that are not bit-identical to `want` (a missing or reshaped tensor counts whole);
// total receives the elements compared.
size_t bitwise_differences(const LoraTensors& got, const LoraTensors& want, size_t& total) {
    size_t differ = 0;
    total = 0;
    for (const auto& [name, w] : want) {
        const auto it = got.find(name);
        if (it == got.end() || it->second.size() != w.size()) {
            differ += w.size();
            continue;
        }
        total += w.size();
        for (size_t i = 0; i < w.size(); ++i) differ += std::memcmp(&it->second[i], &w[i], sizeof(float)) != 0;
    }
    return differ;
}

// The trainer's asynchronous step (queue forward/backward and the optimizer, collect one step late) must be
// the blocking step, bit for bit, over steps with different batches (so a metadata slot mix-up shows); and
// so must the rebuild-metadata-per-layer ablation.
void async_step_case(Check& c, StepReference& ref, CheckpointPolicy policy) {
    ref.prepare(c.base_seed());
    const int V = ref.variant.config.at("vocab_size").get<int>();
    Rng rng(c.base_seed() ^ 0xA5);
    std::vector<PackedBatch> batches{ref.batch, make_step_batch(rng, {7, 19, 4}, ref.variant.token_budget, V),
                                     make_step_batch(rng, {30}, ref.variant.token_budget, V)};
    constexpr int kSteps = 5;
    struct Run {
        std::vector<double> loss, norm;
        LoraTensors values;
    };
    auto load = [&](bool rebuild) {
        CudaModelOptions opt;
        opt.max_tokens = ref.variant.token_budget;
        opt.max_seqlen = ref.variant.token_budget;
        opt.checkpointing = policy;
        opt.attention = AttentionBackend::Inhouse;
        opt.rebuild_metadata_per_layer = rebuild;
        CudaModel g = CudaModel::load(ref.dir, ref.variant.lora, kLoraInitSeed, opt);
        g.set_lora(ref.lora);
        return g;
    };
    auto blocking = [&] {
        CudaModel g = load(false);
        Run r;
        for (int s = 0; s < kSteps; ++s) {
            g.zero_grads();
            double loss = 0;
            for (int mb = 0; mb < 2; ++mb) {  // grad_accum 2
                const PackedBatch& b = batches[size_t(s + mb) % batches.size()];
                loss += g.forward_backward(b, 1e-2f, kDropoutSeed + uint64_t(s));
            }
            r.loss.push_back(loss);
            r.norm.push_back(g.optimizer_step(1e-3, 0.9, 0.999, 1e-8, 0.01, 1.0, s + 1));
        }
        r.values = g.lora_tensors();
        return r;
    };
    auto queued = [&](bool rebuild) {
        CudaModel g = load(rebuild);
        Run r;
        auto collect = [&] {
            const CudaModel::StepReadback x = g.collect_step();
            r.loss.push_back(x.loss_sum);
            r.norm.push_back(x.grad_norm);
        };
        for (int s = 0; s < kSteps; ++s) {
            g.zero_grads();
            for (int mb = 0; mb < 2; ++mb) {
                const PackedBatch& b = batches[size_t(s + mb) % batches.size()];
                g.forward_backward_async(b, 1e-2f, kDropoutSeed + uint64_t(s));
            }
            g.optimizer_step_async(1e-3, 0.9, 0.999, 1e-8, 0.01, 1.0, s + 1);
            if (g.queued_steps() == 2) collect();
        }
        while (g.queued_steps() > 0) collect();
        r.values = g.lora_tensors();
        return r;
    };
    const Run want = blocking();
    for (bool rebuild : {false, true}) {
        const Run got = queued(rebuild);
        const std::string label = rebuild ? "async + rebuild-metadata-per-layer" : "async";
        size_t differ = 0;
        for (int s = 0; s < kSteps; ++s) {
            differ += std::memcmp(&got.loss[size_t(s)], &want.loss[size_t(s)], sizeof(double)) != 0;
            differ += float(got.norm[size_t(s)]) != float(want.norm[size_t(s)]);
        }
        c.result(label + " losses and grad norms", double(differ), 0.0,
                 std::to_string(differ) + " of " + std::to_string(2 * kSteps) + " differ; step 1 loss " +
                     fmt("%.17g", got.loss[0]) + " vs " + fmt("%.17g", want.loss[0]));
        size_t total = 0;
        const size_t values_differ = bitwise_differences(got.values, want.values, total);
        c.result(label + " LoRA values after " + std::to_string(kSteps) + " steps", double(values_differ), 0.0,
                 std::to_string(values_differ) + " of " + std::to_string(total) + " differ from the blocking step's");
    }
}

// CUDA graphs (issue 5 part 3): the trainer's asynchronous step with cuda_graphs on must be the same step
// with them off, bit for bit with the deterministic in-house attention (losses, grad norms, LoRA values).
// The batches repeat, so graphs are captured and replayed, while the dropout seed and grad_scale change
// with every micro-batch (the kernels read both on the device: a graph that froze them would differ).
// After the replays come a batch of a new shape and an old shape in the other metadata slot. Micro-batches
// per step (grad_accum 2; the first of a step goes to metadata slot 1, the second to slot 0):
//   steps 1-5 (A, B), steps 6-7 (C, A), step 8 (A, B)
// so a shape runs eagerly first (A, B at step 1, C at step 6: 3), is captured at its next micro-batch in
// each slot (A and B at step 2, A in slot 0 at step 6, C at step 7: 4) and replayed after (9).
// With cuDNN attention (its backward is not bitwise reproducible run to run) losses and grad norms are
// compared within 1e-3 instead, and the counts must be the same.
void cuda_graphs_case(Check& c, StepReference& ref, CheckpointPolicy policy, AttentionBackend attention) {
    ref.prepare(c.base_seed());
    const int V = ref.variant.config.at("vocab_size").get<int>();
    Rng rng(c.base_seed() ^ 0x6A);
    const PackedBatch& A = ref.batch;
    const PackedBatch B = make_step_batch(rng, {7, 19, 4}, ref.variant.token_budget, V);
    const PackedBatch C = make_step_batch(rng, {30}, ref.variant.token_budget, V);
    std::vector<std::array<const PackedBatch*, 2>> plan(5, {&A, &B});
    plan.push_back({&C, &A});
    plan.push_back({&C, &A});
    plan.push_back({&A, &B});
    constexpr int64_t kWantEager = 3, kWantCaptures = 4, kWantReplays = 9;
    struct Run {
        std::vector<double> loss, norm;
        LoraTensors values;
        CudaGraphStats stats;
    };
    auto run = [&](bool graphs) {
        CudaModelOptions opt;
        opt.max_tokens = ref.variant.token_budget;
        opt.max_seqlen = ref.variant.token_budget;
        opt.checkpointing = policy;
        opt.attention = attention;
        opt.cuda_graphs = graphs;
        CudaModel g = CudaModel::load(ref.dir, ref.variant.lora, kLoraInitSeed, opt);
        g.set_lora(ref.lora);
        Run r;
        auto collect = [&] {
            const CudaModel::StepReadback x = g.collect_step();
            r.loss.push_back(x.loss_sum);
            r.norm.push_back(x.grad_norm);
        };
        for (size_t s = 0; s < plan.size(); ++s) {
            g.zero_grads();
            for (size_t mb = 0; mb < 2; ++mb)
                g.forward_backward_async(*plan[s][mb], 1e-2f / float(1 + (s + mb) % 3), kDropoutSeed + 7919 * s + mb);
            g.optimizer_step_async(1e-3, 0.9, 0.999, 1e-8, 0.01, 1.0, int64_t(s) + 1);
            if (g.queued_steps() == 2) collect();
        }
        while (g.queued_steps() > 0) collect();
        r.values = g.lora_tensors();
        r.stats = g.graph_stats();
        return r;
    };
    const Run want = run(false);
    const Run got = run(true);
    const CudaGraphStats& st = got.stats;
    const bool counts_ok = st.disabled_reason.empty() && st.eager == kWantEager && st.captures == kWantCaptures &&
                           st.replays == kWantReplays;
    c.result("graphs: eager / captured / replayed", counts_ok ? 0.0 : kInf, 0.0,
             std::to_string(st.eager) + " / " + std::to_string(st.captures) + " / " + std::to_string(st.replays) +
                 " (want " + std::to_string(kWantEager) + " / " + std::to_string(kWantCaptures) + " / " +
                 std::to_string(kWantReplays) + "), " + std::to_string(st.cached) + " cached" +
                 (st.disabled_reason.empty() ? "" : "; turned off: " + st.disabled_reason));
    const bool eager_clean = want.stats.captures == 0 && want.stats.replays == 0 &&
                             want.stats.eager == int64_t(2 * plan.size());
    c.result("cuda_graphs=false captures nothing", eager_clean ? 0.0 : kInf, 0.0,
             std::to_string(want.stats.eager) + " eager, " + std::to_string(want.stats.captures) + " captured");
    const size_t steps = plan.size();
    if (got.loss.size() != steps || want.loss.size() != steps) {
        c.result("steps collected", kInf, 0.0, std::to_string(got.loss.size()) + " vs " + std::to_string(want.loss.size()));
        return;
    }
    if (attention != AttentionBackend::Inhouse) {
        double worst = 0;
        for (size_t s = 0; s < steps; ++s) {
            worst = std::max(worst, std::fabs(got.loss[s] - want.loss[s]) / std::max(std::fabs(want.loss[s]), 1e-30));
            worst = std::max(worst, std::fabs(got.norm[s] - want.norm[s]) / std::max(std::fabs(want.norm[s]), 1e-30));
        }
        if (!std::isfinite(worst)) worst = kInf;
        c.result("losses and grad norms (cuDNN: within 1e-3)", worst, 1e-3,
                 "worst relative difference over " + std::to_string(steps) + " steps");
        return;
    }
    size_t differ = 0;
    std::string first;
    for (size_t s = 0; s < steps; ++s) {
        const bool l = std::memcmp(&got.loss[s], &want.loss[s], sizeof(double)) != 0;
        const bool n = float(got.norm[s]) != float(want.norm[s]);
        if ((l || n) && first.empty())
            first = "; first at step " + std::to_string(s + 1) + ": loss " + fmt("%.17g", got.loss[s]) + " vs " +
                    fmt("%.17g", want.loss[s]) + ", norm " + fmt("%.9g", got.norm[s]) + " vs " + fmt("%.9g", want.norm[s]);
        differ += l + n;
    }
    c.result("losses and grad norms bit for bit", double(differ), 0.0,
             std::to_string(differ) + " of " + std::to_string(2 * steps) + " differ from eager's" + first);
    size_t total = 0;
    const size_t values_differ = bitwise_differences(got.values, want.values, total);
    c.result("LoRA values after " + std::to_string(steps) + " steps bit for bit", double(values_differ), 0.0,
             std::to_string(values_differ) + " of " + std::to_string(total) + " differ from eager's");
}

// The host syncs of a training step through the real Trainer (demo models of 2 and 28 layers, smart
// checkpointing, grad_accum 1 and 2): counted by the wrappers between consecutive steps' metrics, in the
// steady state (not the first step, nor the last, which evaluates). At most 2, the same for both depths.
void host_syncs_case(Check& c) {
    const fs::path root = fs::temp_directory_path() / ("tandem-selftest-syncs-" + std::to_string(::getpid()));
    std::error_code ec;
    fs::remove_all(root, ec);
    fs::create_directories(root);
    std::string text;
    Rng rng(c.base_seed());
    for (int d = 0; d < 120; ++d) {
        const int words = 3 + rng.below(12);
        for (int w = 0; w < words; ++w) text += std::string(size_t(1 + rng.below(6)), char('a' + rng.below(26))) + " ";
        text += "\n\n";
    }
    write_file_atomic(root / "data.txt", text);
    struct Sink : ProgressSink {
        std::vector<uint64_t> syncs_at_step;
        void on_step(const StepMetrics&) override { syncs_at_step.push_back(cuda::host_sync_count()); }
    };
    std::map<int, double> per_step_of_layers;
    for (int accum : {1, 2}) {
        for (int layers : {2, 28}) {
            DemoModelSpec spec;  // head_dim 64, as real models have
            spec.hidden_size = 128;
            spec.intermediate_size = 256;
            spec.num_attention_heads = 2;
            spec.num_key_value_heads = 1;
            spec.num_hidden_layers = layers;
            const fs::path model = root / ("demo-" + std::to_string(layers));
            if (!fs::exists(model / "config.json")) create_demo_model(model, spec);
            RunConfig rc;
            rc.model = model.string();
            rc.data.dataset = (root / "data.txt").string();
            rc.data.max_seq_len = 64;
            rc.training.batch_tokens = 256;
            rc.training.grad_accum = accum;
            rc.training.max_steps = 10;
            rc.training.lr = 1e-3;
            rc.memory.checkpointing = CheckpointPolicy::Smart;
            rc.device = DeviceChoice::Cuda;
            rc.output_dir = (root / ("run-" + std::to_string(layers) + "-" + std::to_string(accum))).string();
            Trainer t = Trainer::prepare(rc);
            Sink sink;
            std::atomic<bool> stop{false};
            t.run(sink, stop);
            if (sink.syncs_at_step.size() != 10) {
                c.result("steps reported", kInf, 0.0, std::to_string(sink.syncs_at_step.size()) + " of 10");
                continue;
            }
            uint64_t most = 0;
            std::string seen;
            for (size_t i = 2; i + 1 < sink.syncs_at_step.size(); ++i) {
                const uint64_t n = sink.syncs_at_step[i] - sink.syncs_at_step[i - 1];
                most = std::max(most, n);
                seen += (seen.empty() ? "" : ",") + std::to_string(n);
            }
            const std::string label = std::to_string(layers) + " layers, grad_accum " + std::to_string(accum);
            c.result("host syncs per step, " + label, double(most), 2.0, "per step (steps 3-9): " + seen);
            if (layers == 2) per_step_of_layers[accum] = double(most);
            else
                c.result("same syncs for 2 and 28 layers, grad_accum " + std::to_string(accum),
                         std::fabs(double(most) - per_step_of_layers[accum]), 0.0,
                         std::to_string(most) + " vs " + g3(per_step_of_layers[accum]));
        }
    }
    fs::remove_all(root, ec);
}

void checkpointing_agree_case(Check& c, StepReference& ref) {
    ref.prepare(c.base_seed());
    const PackedBatch& batch = ref.batch;
    struct Result {
        double loss = 0;
        std::vector<std::pair<std::string, std::vector<float>>> grads;
    };
    auto run = [&](CheckpointPolicy policy) {
        CudaModelOptions opt;
        opt.max_tokens = ref.variant.token_budget;
        opt.max_seqlen = batch.max_seqlen;
        opt.checkpointing = policy;
        opt.attention = AttentionBackend::Inhouse;
        CudaModel g = CudaModel::load(ref.dir, ref.variant.lora, kLoraInitSeed, opt);
        g.set_lora(ref.lora);
        std::vector<Result> steps(2);
        for (Result& r : steps) {
            g.zero_grads();
            r.loss = g.forward_backward(batch, 1.0f / float(batch.num_label_tokens), kDropoutSeed);
            g.sync_to_host();
            for (const auto& p : g.lora_params()) r.grads.emplace_back(p.spec.name, p.grad);
        }
        return steps;
    };
    const std::vector<Result> off = run(CheckpointPolicy::Off);
    const Result& want = off[0];
    auto compare = [&](const std::string& label, const Result& got) {
        const bool same_loss = std::memcmp(&got.loss, &want.loss, sizeof(double)) == 0;
        c.result(label + " loss", same_loss ? 0.0 : kInf, 0.0,
                 fmt("%.17g", got.loss) + " vs off " + fmt("%.17g", want.loss));
        size_t differ = 0, total = 0;
        double max_abs = 0;
        std::string first, problems;
        if (got.grads.size() != want.grads.size())
            problems = " " + std::to_string(got.grads.size()) + " tensors vs " + std::to_string(want.grads.size());
        for (size_t t = 0; t < std::min(got.grads.size(), want.grads.size()); ++t) {
            const auto& [gname, g] = got.grads[t];
            const auto& [wname, w] = want.grads[t];
            if (gname != wname || g.size() != w.size()) {
                problems += " tensor " + gname + " does not match " + wname + ";";
                continue;
            }
            total += g.size();
            for (size_t i = 0; i < g.size(); ++i) {
                if (std::memcmp(&g[i], &w[i], sizeof(float)) == 0) continue;
                if (differ++ == 0) first = gname + "[" + std::to_string(i) + "]";
                const double d = std::fabs(double(g[i]) - double(w[i]));
                max_abs = std::isfinite(d) ? std::max(max_abs, d) : kInf;
            }
        }
        const double rel = problems.empty() ? double(differ) : kInf;
        c.result(label + " lora grads", rel, 0.0,
                 std::to_string(differ) + " of " + std::to_string(total) + " elements differ from off's" +
                     (differ ? " (first " + first + ", max|diff| " + g3(max_abs) + ")" : "") + problems);
    };
    compare("off step 2", off[1]);
    for (auto policy : {CheckpointPolicy::Recompute, CheckpointPolicy::Smart, CheckpointPolicy::SmartSingle}) {
        const std::vector<Result> got = run(policy);
        for (size_t k = 0; k < got.size(); ++k) compare(policy_name(policy) + " step " + std::to_string(k + 1), got[k]);
    }
}

// ---------------------------------------------------------------------------------------------------------
// PyTorch fixtures (tests/fixtures/models/<variant>, made by tests/reference/make_fixtures.py): the four
// sequences packed into ONE batch on CudaModel against transformers + PEFT running each separately —
// logits, loss and all 28 LoRA gradients within the bf16 tolerance of the issue (2e-2).
// ---------------------------------------------------------------------------------------------------------

constexpr double kTolFixture = 2e-2;
// LoRA gradients: PyTorch's own bf16 training (HF PEFT: bf16 base, fp32 LoRA, autocast, sdpa on an H100)
// lands 2.3e-2..3.5e-2 (max element) from the same fp32 reference (tests/reference/bf16_floor.py ->
// tests/fixtures/models/bf16_floor.json). So the gate per variant is max(2e-2, 1.5 x that measured error):
// "no worse than HF PEFT's bf16 training, with margin"; the detail prints both numbers.
constexpr double kFixtureFloorFactor = 1.5;

double fixture_grad_tolerance(const fs::path& dir, std::string* note) {
    const fs::path floor = dir.parent_path() / "bf16_floor.json";
    if (!fs::exists(floor)) {
        *note = "no bf16_floor.json: plain 2e-2";
        return kTolFixture;
    }
    const nlohmann::json j = read_json_file(floor);
    const double torch_bf16 = j.at("variants").at(dir.filename().string()).at("lora_grads_worst_rel").get<double>();
    *note = "PyTorch bf16 " + g3(torch_bf16);
    return std::max(kTolFixture, kFixtureFloorFactor * torch_bf16);
}

PackedBatch fixture_batch(const fs::path& dir) {
    const nlohmann::json j = read_json_file(dir / "sequences.json");
    return batch_from_sequences(j.at("sequences").get<std::vector<std::vector<int32_t>>>());
}

CudaModel fixture_model(const fs::path& dir, int max_tokens, AttentionBackend attention) {
    const ModelConfig config = load_model_config(dir);
    const PeftAdapter adapter = read_peft_adapter(dir / "adapter", config);
    CudaModelOptions opt;
    opt.max_tokens = max_tokens;
    opt.attention = attention;
    CudaModel m = CudaModel::load(dir, adapter.config, 7, opt);
    m.set_lora(adapter.tensors);
    return m;
}

void fixture_case(Check& c, const fs::path& dir, AttentionBackend attention) {
    const SafetensorsFile exp(dir / "expected.safetensors");
    const PackedBatch batch = fixture_batch(dir);
    CudaModel m = fixture_model(dir, 64, attention);
    c.tensor("logits", m.logits(batch), tensor_to_f32(exp.at("logits")), kTolFixture);
    const double ref_loss = tensor_to_f32(exp.at("loss")).at(0);
    m.zero_grads();
    const double loss = m.forward_backward(batch, float(1.0 / batch.num_label_tokens), 0) / batch.num_label_tokens;
    c.scalar("loss (" + m.attention_backend_name() + ")", loss, ref_loss, kTolFixture);
    m.sync_to_host();
    double worst = 0;
    std::string worst_name = "(none)";
    for (const auto& p : m.lora_params()) {
        const std::vector<float> want = tensor_to_f32(exp.at(p.spec.name + ".grad"));
        double max_abs = 0, denom = 0;
        bool ok = want.size() == p.grad.size();
        for (size_t i = 0; ok && i < want.size(); ++i) {
            if (!std::isfinite(p.grad[i])) ok = false;
            max_abs = std::max(max_abs, std::fabs(double(p.grad[i]) - want[i]));
            denom = std::max(denom, std::fabs(double(want[i])));
        }
        const double rel = ok ? (denom > 0 ? max_abs / denom : max_abs) : kInf;
        if (!(rel <= worst)) {
            worst = rel;
            worst_name = p.spec.name;
        }
    }
    std::string floor_note;
    const double tol = fixture_grad_tolerance(dir, &floor_note);
    c.result("lora grads", worst, tol,
             std::to_string(m.lora_params().size()) + " tensors, worst " + worst_name + "; " + floor_note);
}

// An impossible load (134M tokens of activations) fails with Error{OutOfMemory}, frees what it took, and the
// GPU stays usable: a small model loads and trains afterwards with the same loss.
void oom_case(Check& c, const fs::path& dir) {
    const PackedBatch batch = fixture_batch(dir);
    auto small_loss = [&] {
        CudaModel m = fixture_model(dir, 64, AttentionBackend::Inhouse);  // deterministic: compared exactly
        m.zero_grads();
        return m.forward_backward(batch, 1.0f, 0);
    };
    const double before_loss = small_loss();
    const ModelConfig config = load_model_config(dir);
    const PeftAdapter adapter = read_peft_adapter(dir / "adapter", config);
    CudaModelOptions huge;
    huge.max_tokens = 1 << 27;
    huge.max_seqlen = int(config.max_position_embeddings);
    const size_t before = cuda::allocated_bytes();
    std::string got = "no error";
    try {
        (void)CudaModel::load(dir, adapter.config, 7, huge);
    } catch (const Error& e) {
        got = std::string(error_category_name(e.category())) + ": " + e.what();
        c.result("load fails with out of memory", e.category() == ErrorCategory::OutOfMemory ? 0.0 : kInf, 0, got);
    }
    if (got == "no error") c.result("load fails with out of memory", kInf, 0, got);
    const size_t after = cuda::allocated_bytes();
    c.result("everything freed", after == before ? 0.0 : kInf, 0,
             std::to_string(before) + " bytes before, " + std::to_string(after) + " after");
    c.scalar("usable afterwards: same loss", small_loss(), before_loss, 0.0);
}

// ---------------------------------------------------------------------------------------------------------
// The case list
// ---------------------------------------------------------------------------------------------------------

struct Case {
    std::string name;
    std::function<void(Check&)> run;
};

std::string shape(std::initializer_list<std::pair<const char*, int64_t>> dims) {
    std::string s;
    for (const auto& [k, v] : dims) s += std::string(s.empty() ? "" : " ") + k + "=" + std::to_string(v);
    return s;
}

std::vector<Case> make_cases(const std::string& fixtures_dir) {
    std::vector<Case> cs;
    auto add = [&](std::string name, std::function<void(Check&)> fn) {
        cs.push_back({std::move(name), std::move(fn)});
    };

    for (auto [N, C, V] : {std::tuple{37, 96, 101}, {130, 200, 53}, {5, 37, 7}})
        add("embedding " + shape({{"N", N}, {"C", C}, {"V", V}}), [=](Check& c) { embedding_case(c, N, C, V); });

    for (auto [N, C] : {std::pair{37, 96}, {64, 200}, {7, 37}, {17, 4096}, {9, 5000}, {1696, 128}, {848, 64}})
        add("rmsnorm_forward " + shape({{"N", N}, {"C", C}}), [=](Check& c) { rmsnorm_forward_case(c, N, C, false); });
    add("rmsnorm_forward in-place N=37 C=96", [](Check& c) { rmsnorm_forward_case(c, 37, 96, true); });
    for (auto [N, C] : {std::pair{37, 96}, {7, 37}, {17, 4096}})
        add("residual_rmsnorm_forward " + shape({{"N", N}, {"C", C}}),
            [=](Check& c) { residual_rmsnorm_case(c, N, C, false); });
    add("residual_rmsnorm_forward residual=a N=37 C=96", [](Check& c) { residual_rmsnorm_case(c, 37, 96, true); });
    for (auto [N, C] : {std::pair{37, 96}, {64, 200}, {7, 37}, {17, 4096}, {1696, 128}})
        add("rmsnorm_backward " + shape({{"N", N}, {"C", C}}), [=](Check& c) { rmsnorm_backward_case(c, N, C, true); });
    add("rmsnorm_backward no dweight N=37 C=96", [](Check& c) { rmsnorm_backward_case(c, 37, 96, false); });

    {
        const RopeScaling none;
        RopeScaling llama3;
        llama3.type = RopeScalingType::Llama3;
        llama3.factor = 8;
        llama3.low_freq_factor = 1;
        llama3.high_freq_factor = 4;
        llama3.original_max_position_embeddings = 8192;
        RopeScaling linear;
        linear.type = RopeScalingType::Linear;
        linear.factor = 2;
        const auto packed = packed_positions({1, 17, 64, 130});
        add("rope D=64 H=8 default lengths=1,17,64,130",
            [=](Check& c) { rope_case(c, 8, 64, 10000.0, none, packed, 256, false); });
        add("rope D=128 H=2 default in-place lengths=1,17,64,130",
            [=](Check& c) { rope_case(c, 2, 128, 10000.0, none, packed, 256, true); });
        add("rope D=36 H=5 linear lengths=1,17,64,130",
            [=](Check& c) { rope_case(c, 5, 36, 10000.0, linear, packed, 256, false); });
        add("rope D=128 H=4 llama3 positions up to 16383", [=](Check& c) {
            std::vector<int32_t> pos = {0, 1, 2, 17, 255, 1000, 2047, 4095, 8191, 8192, 9001, 16383};
            while (pos.size() < 77) pos.push_back(c.rng.below(16384));
            rope_case(c, 4, 128, 500000.0, llama3, pos, 16384, false);
        });
    }

    for (auto [N, F] : {std::pair{37, 200}, {130, 96}, {3, 37}})
        add("swiglu " + shape({{"N", N}, {"F", F}}), [=](Check& c) { swiglu_case(c, N, F, false); });
    add("swiglu in-place N=37 F=200", [](Check& c) { swiglu_case(c, 37, 200, true); });

    for (auto [N, IN, OUT, bias] : {std::tuple{37, 96, 200, false},
                                    {37, 96, 200, true},
                                    {130, 64, 96, true},
                                    {17, 37, 53, true},
                                    {1, 128, 256, false}})
        add("matmul_forward " + shape({{"N", N}, {"IN", IN}, {"OUT", OUT}}) + (bias ? " bias" : ""),
            [=](Check& c) { matmul_forward_case(c, N, IN, OUT, bias); });
    for (auto [N, IN, OUT] : {std::tuple{37, 96, 200}, {130, 64, 96}, {17, 37, 53}, {1, 128, 256}})
        add("matmul_backward " + shape({{"N", N}, {"IN", IN}, {"OUT", OUT}}),
            [=](Check& c) { matmul_backward_case(c, N, IN, OUT, true, true, true); });
    add("matmul_backward dinp only N=37 IN=96 OUT=200",
        [](Check& c) { matmul_backward_case(c, 37, 96, 200, true, false, false); });
    add("matmul_backward dweight+dbias only N=37 IN=96 OUT=200",
        [](Check& c) { matmul_backward_case(c, 37, 96, 200, false, true, true); });

    for (auto [N, IN, OUT, R, s] :
         {std::tuple{37, 96, 200, 8, 2.0f}, {130, 64, 96, 16, 0.5f}, {17, 37, 53, 4, 4.0f}, {5, 64, 37, 1, 2.0f}})
        add("lora " + shape({{"N", N}, {"IN", IN}, {"OUT", OUT}, {"R", R}}),
            [=](Check& c) { lora_case(c, N, IN, OUT, R, s); });

    for (auto [N, C, V, K] : {std::tuple{37, 96, 101, 16}, {130, 64, 1000, 64}, {37, 96, 2053, 128}, {17, 37, 53, 5}})
        add("lm_head_cross_entropy " + shape({{"N", N}, {"C", C}, {"V", V}, {"chunk", K}}),
            [=](Check& c) { cross_entropy_case(c, N, C, V, K, 1.0f, true); });
    add("lm_head_cross_entropy large logits N=37 C=64 V=301 chunk=16",
        [](Check& c) { cross_entropy_case(c, 37, 64, 301, 16, 8.0f, true); });
    add("lm_head_cross_entropy no dhidden N=37 C=96 V=101 chunk=16",
        [](Check& c) { cross_entropy_case(c, 37, 96, 101, 16, 1.0f, false); });
    for (auto [N, C, V] : {std::tuple{37, 96, 1001}, {5, 37, 53}})
        add("lm_head_logits " + shape({{"N", N}, {"C", C}, {"V", V}}),
            [=](Check& c) { lm_head_logits_case(c, N, C, V); });

    const std::vector<AttnShape> attn = {
        {{1, 17, 64, 130}, 8, 2, 64}, {{1, 17, 64, 130}, 8, 2, 128}, {{130, 1, 1, 64, 17}, 4, 4, 64},
        {{257, 1}, 4, 4, 128},        {{33, 96}, 6, 1, 64},
    };
    for (const auto& s : attn) add("attention " + attn_label(s), [=](Check& c) { attention_case(c, s); });
    for (const auto& s : attn) add("cudnn_attention " + attn_label(s), [=](Check& c) { cudnn_attention_case(c, s); });

    add("dropout n=1001 p=0.1", [](Check& c) { dropout_case(c, 1001, 0.1, 0, 0, false); });
    add("dropout n=65539 p=0.5 layer=3 module=6", [](Check& c) { dropout_case(c, 65539, 0.5, 3, 6, false); });
    add("dropout in-place n=4099 p=0.3 layer=1 module=2", [](Check& c) { dropout_case(c, 4099, 0.3, 1, 2, true); });
    add("dropout n=1048581 p=0.1 layer=27 module=4",
        [](Check& c) { dropout_case(c, (1 << 20) + 5, 0.1, 27, 4, false); });

    add("adamw no clip", [](Check& c) { adamw_case(c, Clip::None); });
    add("adamw clip inactive", [](Check& c) { adamw_case(c, Clip::Inactive); });
    add("adamw clip active", [](Check& c) { adamw_case(c, Clip::Active); });
    add("adamw non-finite grad skips the update", [](Check& c) { adamw_case(c, Clip::NonFinite); });

    add("elementwise n=1001", [](Check& c) { elementwise_case(c, 1001, 0); });
    add("elementwise n=1048579", [](Check& c) { elementwise_case(c, (1 << 20) + 3, 0); });
    add("elementwise unaligned n=1001", [](Check& c) { elementwise_case(c, 1001, 1); });
    for (int64_t n : {int64_t(1), int64_t(1001), int64_t((1 << 22) + 7)})
        add("sum n=" + std::to_string(n), [=](Check& c) { sum_case(c, n); });
    add("fill_uniform", [](Check& c) { fill_uniform_case(c); });

    for (auto variant : {qwen3_variant(), llama_variant()}) {
        auto ref = std::make_shared<StepReference>(variant);
        for (auto ckpt : {CheckpointPolicy::Off, CheckpointPolicy::Recompute, CheckpointPolicy::Smart,
                          CheckpointPolicy::SmartSingle})
            for (auto at : {AttentionBackend::Inhouse, AttentionBackend::Auto})
                add("step " + variant.name + " checkpointing=" + policy_name(ckpt) + " attention=" + attention_name(at),
                    [=](Check& c) { step_case(c, *ref, ckpt, at); });
        if (variant.name == "qwen3")
            add("checkpointing policies agree " + variant.name, [=](Check& c) { checkpointing_agree_case(c, *ref); });
    }
    {
        // Two layers offload nothing under smart (the last two inputs stay in the two buffers): five layers
        // make both buffers rotate and three inputs go through the host and back.
        StepVariant deep = qwen3_variant();
        deep.name = "qwen3-5layers";
        deep.config["num_hidden_layers"] = 5;
        auto ref = std::make_shared<StepReference>(deep);
        add("checkpointing policies agree " + deep.name, [=](Check& c) { checkpointing_agree_case(c, *ref); });
        for (auto policy : {CheckpointPolicy::Off, CheckpointPolicy::Smart})
            add("async step matches blocking step " + deep.name + " checkpointing=" + policy_name(policy),
                [=](Check& c) { async_step_case(c, *ref, policy); });
    }
    {
        // CUDA graphs against eager: five layers (smart moves inputs through the host), LoRA dropout 0.1 and
        // 0 (the seed is a device value), every policy with the in-house attention, smart with cuDNN too.
        StepVariant deep = qwen3_variant();
        deep.name = "qwen3-5layers";
        deep.config["num_hidden_layers"] = 5;
        StepVariant deep0 = deep;
        deep0.name = "qwen3-5layers-nodropout";
        deep0.lora.dropout = 0;
        auto ref = std::make_shared<StepReference>(deep);
        auto ref0 = std::make_shared<StepReference>(deep0);
        auto add_graphs = [&](std::shared_ptr<StepReference> r, CheckpointPolicy p, AttentionBackend at) {
            add("cuda graphs match eager " + r->variant.name + " checkpointing=" + policy_name(p) +
                    " attention=" + attention_name(at),
                [=](Check& c) { cuda_graphs_case(c, *r, p, at); });
        };
        for (auto p : {CheckpointPolicy::Off, CheckpointPolicy::Recompute, CheckpointPolicy::Smart,
                       CheckpointPolicy::SmartSingle})
            add_graphs(ref, p, AttentionBackend::Inhouse);
        for (auto p : {CheckpointPolicy::Off, CheckpointPolicy::Smart}) add_graphs(ref0, p, AttentionBackend::Inhouse);
        add_graphs(ref, CheckpointPolicy::Smart, AttentionBackend::Auto);
    }
    add("host syncs per optimizer step (trainer)", [](Check& c) { host_syncs_case(c); });

    if (!fixtures_dir.empty()) {
        const fs::path models = fs::path(fixtures_dir) / "models";
        for (const char* v : {"llama", "qwen2", "qwen3", "mistral"}) {
            const fs::path dir = models / v;
            for (auto at : {AttentionBackend::Inhouse, AttentionBackend::Auto})
                add(std::string("fixture ") + v + " attention=" + attention_name(at),
                    [=](Check& c) { fixture_case(c, dir, at); });
        }
        add("out of memory: impossible load", [=](Check& c) { oom_case(c, models / "llama"); });
    }
    return cs;
}

}  // namespace
#endif  // TANDEM_WITH_CUDA

std::vector<std::string> selftest_case_names() {
    std::vector<std::string> names;
#if TANDEM_WITH_CUDA
    for (const auto& c : make_cases("fixtures")) names.push_back(c.name);
#endif
    return names;
}

std::vector<SelftestResult> run_selftest(const SelftestOptions& options,
                                         const std::function<void(const SelftestResult&)>& on_result) {
    if (options.device == "cpu")
        throw_invalid(
            "selftest: device 'cpu' has nothing to compare against (the CPU backend is the reference); "
            "use --device cuda");
    if (options.device != "cuda") throw_invalid("selftest: unknown device '" + options.device + "'; use cuda");
    std::string why;
    if (!cuda_backend_available(&why)) throw_unsupported("selftest: the CUDA backend cannot run here: " + why);
#if TANDEM_WITH_CUDA
    if (!cuda::device_available(&why)) throw_unsupported("selftest: no usable CUDA device: " + why);
    cuda::context();  // a device that cannot even start fails the command (Error{Device}), not every case
    if (!options.fixtures_dir.empty() && !fs::is_directory(fs::path(options.fixtures_dir) / "models"))
        throw_invalid("selftest: " + options.fixtures_dir + " has no models/ folder (pass tests/fixtures)");
    std::vector<Case> cases = make_cases(options.fixtures_dir);
    std::erase_if(cases, [&](const Case& c) { return c.name.find(options.filter) == std::string::npos; });
    if (cases.empty())
        throw_invalid("selftest: no case name contains '" + options.filter +
                      "' (tandem-cli selftest --list shows them)");

    std::vector<SelftestResult> results;
    Reporter out{on_result, results};
    std::string broken;  // the case after which the device stopped working
    for (const auto& cs : cases) {
        Check check(cs.name, options.seed, out);
        if (!broken.empty()) {
            check.fail("not run", "the device failed in '" + broken + "'");
            continue;
        }
        try {
            cs.run(check);
            if (check.count() == 0) check.fail("no result", "the case compared nothing (a self-test bug)");
        } catch (const Error& e) {
            check.fail("error", std::string(error_category_name(e.category())) + ": " + e.what());
        } catch (const std::exception& e) {
            check.fail("error", e.what());
        }
        if (!device_healthy()) broken = cs.name;
    }
    if (broken.empty()) cuda::cudnn_attention_clear_cache();
    return results;
#else
    (void)on_result;
    throw_unsupported(
        "selftest: this build has no CUDA backend (configure with -DTANDEM_CUDA=ON on a machine with "
        "the CUDA toolkit and cuDNN)");
#endif
}

}  // namespace tandem
