// SPDX-FileCopyrightText: 2026 The Tandem developers
// SPDX-License-Identifier: GPL-3.0-or-later
// The self-test harness's definitions (testing/harness.h): formatting (shape_label for case names), bf16
// rounding, device transfers on the compute stream, and Check's comparisons. Empty without TANDEM_WITH_CUDA.
#include "testing/harness.h"

#if TANDEM_WITH_CUDA
#include <cmath>
#include <cstdio>

#include "tandem/safetensors.h"

namespace tandem::testing {

std::string fmt(const char* f, double a) {
    char buf[64];
    std::snprintf(buf, sizeof buf, f, a);
    return buf;
}
std::string g3(double x) {
    return fmt("%.3g", x);
}

std::string shape_label(std::initializer_list<std::pair<const char*, int64_t>> dims) {
    std::string s;
    for (const auto& [k, v] : dims) s += std::string(s.empty() ? "" : " ") + k + "=" + std::to_string(v);
    return s;
}

std::string policy_name(CheckpointPolicy p) {
    return std::string(checkpoint_policy_name(p));
}
std::string attention_name(AttentionBackend a) {
    return a == AttentionBackend::Inhouse ? "inhouse" : a == AttentionBackend::Cudnn ? "cudnn" : "auto";
}

float round_bf16(float x) {
    return bf16_to_f32(f32_to_bf16(x));
}

std::vector<float> round_bf16(std::vector<float> v) {
    for (float& x : v) x = round_bf16(x);
    return v;
}

uint64_t fnv1a(const std::string& s) {
    uint64_t h = 0xcbf29ce484222325ull;
    for (unsigned char c : s) h = (h ^ c) * 0x100000001b3ull;
    return h;
}

float fan_in_bound(int in) {
    return float(std::sqrt(3.0 / in));
}  // uniform with std 1/sqrt(in)

cudaStream_t stream() {
    return cuda::context().stream;
}

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

bool device_healthy() {
    cudaError_t e = cudaDeviceSynchronize();
    if (e == cudaSuccess) e = cudaGetLastError();
    return e == cudaSuccess;
}

void Check::result(const std::string& what, double rel, double tol, std::string detail) {
    SelftestResult r;
    r.name = name_ + ": " + what;
    r.rel_error = rel;
    r.tolerance = tol;
    r.passed = std::isfinite(rel) && rel <= tol;
    r.detail = std::move(detail);
    emit(std::move(r));
}

void Check::tensor(const std::string& what, const std::vector<float>& got, const std::vector<float>& want, double tol,
                   const std::vector<float>* init) {
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

void Check::scalar(const std::string& what, double got, double want, double tol) {
    if (!std::isfinite(got)) {
        result(what, kInf, tol, "gpu " + g3(got) + ", cpu " + fmt("%.9g", want));
        return;
    }
    const double d = std::fabs(got - want);
    const double rel = want != 0 ? d / std::fabs(want) : d;
    result(what, rel, tol, "gpu " + fmt("%.9g", got) + ", cpu " + fmt("%.9g", want));
}

void Check::skip(const std::string& what, const std::string& why) {
    SelftestResult r;
    r.name = name_ + ": " + what;
    r.passed = true;
    r.skipped = true;
    r.detail = "skipped: " + why;
    emit(std::move(r));
}

std::vector<float> Check::initial(const std::vector<float>& inc, bool bf16_storage) {
    float m = 0;
    for (float x : inc) m = std::max(m, std::fabs(x));
    if (m == 0) m = 1;
    auto v = rng.f32_values(int64_t(inc.size()), 0.5f * m);
    return bf16_storage ? round_bf16(std::move(v)) : v;
}

void Check::emit(SelftestResult r) {
    ++count_;
    out_.add(std::move(r));
}

}  // namespace tandem::testing
#endif  // TANDEM_WITH_CUDA
