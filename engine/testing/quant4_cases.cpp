// SPDX-FileCopyrightText: 2026 The Tandem developers
// SPDX-License-Identifier: GPL-3.0-or-later
// Self-test cases of the 4-bit weight ops (kernels/*/nf4; outside the op table, generator gen_nf4 registered in
// runner.cpp's kOtherKernels): dequantize_4bit exactly equal to its CPU twin rounded to bf16, whole tensors and
// sub-ranges (the fast and the per-element path); the quantization kernels against their CPU twins (codes may
// differ only next to a decision threshold, where the GPU's approximate reciprocal and the CPU's exact one can
// round apart); and, with a fixtures folder, against bitsandbytes' own CUDA output (tests/fixtures/nf4): bit
// for bit; dequantize_4bit_fp8 (in the op table, generator gen_dequantize_4bit_fp8) exactly equal to its CPU
// twin in both layouts. Every case name starts "nf4 " (bench/gpu_checks.sh runs them under compute-sanitizer by
// that filter).
#include "testing/harness.h"

#if TANDEM_WITH_CUDA
#include <cmath>
#include <cstring>
#include <filesystem>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "core/files.h"
#include "core/fp8.h"
#include "kernels/cpu/nf4.h"
#include "kernels/cuda/elementwise.h"
#include "kernels/cuda/nf4.h"
#include "tandem/safetensors.h"

namespace tandem::testing {
namespace {

namespace fs = std::filesystem;

// A 4-bit tensor on both sides: host vectors and their device copies.
struct Q4 {
    int64_t n = 0;
    std::vector<uint8_t> codes, absmax_q;
    std::vector<float> code, nested_code, nested_absmax, offset, absmax;
    Dev<uint8_t> d_codes{1}, d_absmax_q{1};
    Dev<float> d_code{1}, d_nested_code{1}, d_nested_absmax{1}, d_offset{1}, d_absmax{1};
    bool nested = true;

    template <class T>
    static Dev<T> up(const std::vector<T>& v) {
        Dev<T> d(int64_t(v.size()));
        copy_to_device(d.p(), v.data(), v.size() * sizeof(T));
        return d;
    }
    void upload() {
        d_codes = up(codes);
        d_code = up(code);
        if (nested) {
            d_absmax_q = up(absmax_q);
            d_nested_code = up(nested_code);
            d_nested_absmax = up(nested_absmax);
            d_offset = up(offset);
        } else {
            d_absmax = up(absmax);
        }
    }
    Quant4Ref ref(bool device) const {
        Quant4Ref r;
        r.n = n;
        r.codes = device ? d_codes.p() : codes.data();
        r.code = device ? d_code.p() : code.data();
        if (nested) {
            r.absmax_q = device ? d_absmax_q.p() : absmax_q.data();
            r.nested_code = device ? d_nested_code.p() : nested_code.data();
            r.nested_absmax = device ? d_nested_absmax.p() : nested_absmax.data();
            r.offset = device ? d_offset.p() : offset.data();
        } else {
            r.absmax = device ? d_absmax.p() : absmax.data();
        }
        return r;
    }
};

std::vector<uint8_t> get_u8(const uint8_t* p, int64_t n) {
    std::vector<uint8_t> v(static_cast<size_t>(n));
    copy_to_host(v.data(), p, size_t(n));
    return v;
}

// A CPU-quantized tensor of n values (a block of zeros at block 2 when it has one).
Q4 cpu_quantized(Check& c, int64_t n, bool nested, std::vector<float>* input = nullptr) {
    std::vector<float> x = c.rng.f32_values(n, 0.05f);
    if (n >= 3 * 64) std::fill(x.begin() + 128, x.begin() + 192, 0.0f);
    Q4 q;
    q.n = n;
    q.nested = nested;
    const int64_t blocks = quant4_blocks(n, 64);
    q.codes.resize(size_t(quant4_code_bytes(n)));
    q.absmax.resize(size_t(blocks));
    cpu::quantize_4bit(q.codes.data(), q.absmax.data(), x.data(), n, 64);
    q.code.assign(nf4_code().begin(), nf4_code().end());
    if (nested) {
        q.nested_code.assign(dynamic_code_8bit().begin(), dynamic_code_8bit().end());
        q.offset = {cpu::absmax_mean(q.absmax.data(), blocks)};
        q.absmax_q.resize(size_t(blocks));
        q.nested_absmax.resize(size_t(quant4_blocks(blocks, 256)));
        cpu::quantize_blockwise_8bit(q.absmax_q.data(), q.nested_absmax.data(), q.absmax.data(), q.offset[0],
                                     q.nested_code.data(), blocks, 256);
    }
    q.upload();
    if (input) *input = x;
    return q;
}

void dequantize_case(Check& c, int64_t n, bool nested) {
    const Q4 q = cpu_quantized(c, n, nested);
    auto run = [&](const std::string& what, int64_t first, int64_t count) {
        std::vector<float> want(static_cast<size_t>(count));
        cpu::dequantize_4bit(want.data(), q.ref(false), first, count);
        const auto out = poisoned<bf16>(count + 8);
        bf16* dst = out.p() + (first % 8 == 0 ? 0 : 1);  // an odd start also gets an unaligned output
        cuda::dequantize_4bit(dst, q.ref(true), first, count);
        c.tensor(what, get(dst, count), round_bf16(want), kTolExact);
    };
    run("whole", 0, n);
    if (n >= 1024) {
        run("rows from element 320 (fast path)", 320, (n - 320) / 8 * 8);
        run("odd start (per-element path)", 65, n - 70);
    }
}

// Codes that differ between a and b: adjacent, and the CPU's scaled value within two ulps of the threshold.
void compare_codes(Check& c, const std::string& what, const std::vector<uint8_t>& got, const std::vector<uint8_t>& want,
                   const std::vector<float>& x, const std::vector<float>& absmax, int64_t n) {
    const auto& t = nf4_thresholds();
    int64_t diff = 0, bad = 0;
    for (int64_t e = 0; e < n; ++e) {
        auto at = [&](const std::vector<uint8_t>& v) { return (e & 1) ? int(v[size_t(e >> 1)] & 15) : int(v[size_t(e >> 1)] >> 4); };
        const int a = at(got), b = at(want);
        if (a == b) continue;
        ++diff;
        const float s = x[size_t(e)] * (1.0f / absmax[size_t(e / 64)]);
        const float th = t[size_t(std::min(a, b))];
        const double ulp = double(std::nextafter(std::fabs(th), INFINITY)) - std::fabs(double(th));
        if (std::abs(a - b) != 1 || std::fabs(double(s) - th) > 2 * ulp) ++bad;
    }
    c.result(what, double(bad), kTolExact,
             std::to_string(diff) + " of " + std::to_string(n) + " codes differ, " + std::to_string(bad) +
                 " away from a threshold");
}

void quantize_case(Check& c, int64_t n) {
    std::vector<float> x;
    const Q4 q = cpu_quantized(c, n, true, &x);
    const int64_t blocks = quant4_blocks(n, 64);
    const auto d_x = dev_f32(x);
    const auto d_codes = poisoned<uint8_t>(quant4_code_bytes(n));
    const auto d_absmax = poisoned<float>(blocks);
    cuda::quantize_4bit(d_codes.p(), d_absmax.p(), d_x.p(), n, 64);
    c.tensor("absmax", get(d_absmax), q.absmax, kTolExact);
    compare_codes(c, "codes", get_u8(d_codes.p(), d_codes.n()), q.codes, x, q.absmax, n);
    // Double quantization of the (CPU's) absmax with the same offset.
    const auto d_am = dev_f32(q.absmax);
    const auto d_q = poisoned<uint8_t>(blocks);
    const auto d_nested = poisoned<float>(quant4_blocks(blocks, 256));
    cuda::quantize_blockwise_8bit(d_q.p(), d_nested.p(), d_am.p(), q.offset[0], q.d_nested_code.p(), blocks, 256);
    c.tensor("nested absmax", get(d_nested), q.nested_absmax, kTolExact);
    const auto got = get_u8(d_q.p(), blocks);
    int64_t diff = 0, far = 0;
    for (int64_t i = 0; i < blocks; ++i) {
        diff += got[size_t(i)] != q.absmax_q[size_t(i)];
        far += std::abs(int(got[size_t(i)]) - int(q.absmax_q[size_t(i)])) > 1;
    }
    c.result("absmax codes", double(far) + (diff * 100 > blocks ? 1.0 : 0.0), kTolExact,
             std::to_string(diff) + " of " + std::to_string(blocks) + " differ by one code (midpoints)");
}

// bitsandbytes' fixture case `name`: CUDA quantization of its input bit for bit, and dequantization.
void bnb_case(Check& c, const fs::path& dir, const nlohmann::json& meta) {
    const SafetensorsFile f(dir / "quantize.safetensors");
    const std::string name = meta.at("name");
    const int64_t n = meta.at("n");
    const bool nested = meta.at("nested");
    const std::string qt = meta.at("quant_type"), dtype = meta.at("dtype");
    auto u8 = [&](const std::string& k) {
        const TensorInfo& t = f.at(name + "." + k);
        return std::vector<uint8_t>(reinterpret_cast<const uint8_t*>(t.data.data()),
                                    reinterpret_cast<const uint8_t*>(t.data.data()) + t.data.size());
    };
    auto f32 = [&](const std::string& k) { return tensor_to_f32(f.at(name + "." + k)); };
    Q4 q;
    q.n = n;
    q.nested = nested;
    q.codes = u8("codes");
    q.code = f32("code");
    if (qt == "fp4") q.code.assign(fp4_code().begin(), fp4_code().end());  // bitsandbytes' kernel constants
    if (nested) {
        q.absmax_q = u8("absmax");
        q.nested_code = f32("nested_code");
        q.nested_absmax = f32("nested_absmax");
        q.offset = f32("offset");
    } else {
        q.absmax = f32("absmax");
    }
    q.upload();
    // Dequantization: bitsandbytes' values rounded to bf16 (exact for its bf16 cases).
    const auto out = poisoned<bf16>(n);
    cuda::dequantize_4bit(out.p(), q.ref(true), 0, n);
    c.tensor("dequantize (" + dtype + ")", get(out), round_bf16(f32("dequant")), dtype == "float16" ? kTolBf16 : kTolExact);
    if (qt != "nf4") return;
    // Quantization of the same input: bitsandbytes' codes and statistics bit for bit.
    const auto d_x = dev_f32(f32("input"));
    const int64_t blocks = quant4_blocks(n, 64);
    const auto d_codes = poisoned<uint8_t>(quant4_code_bytes(n));
    const auto d_absmax = poisoned<float>(blocks);
    cuda::quantize_4bit(d_codes.p(), d_absmax.p(), d_x.p(), n, 64);
    const auto codes = get_u8(d_codes.p(), d_codes.n());
    int64_t diff = 0;
    for (size_t i = 0; i < codes.size(); ++i) diff += codes[i] != q.codes[i];
    c.result("codes = bitsandbytes'", double(diff), kTolExact, std::to_string(diff) + " of " + std::to_string(codes.size()) + " bytes differ");
    const std::vector<float> absmax = get(d_absmax);
    c.tensor("absmax", absmax, nested ? f32("absmax_f32") : q.absmax, kTolExact);
    if (!nested) return;
    const float offset = cpu::absmax_mean(absmax.data(), blocks);
    c.scalar("offset (mean absmax)", offset, q.offset[0], kTolExact);
    const auto d_q = poisoned<uint8_t>(blocks);
    const auto d_nested = poisoned<float>(quant4_blocks(blocks, 256));
    cuda::quantize_blockwise_8bit(d_q.p(), d_nested.p(), d_absmax.p(), offset, q.d_nested_code.p(), blocks, 256);
    const auto got = get_u8(d_q.p(), blocks);
    int64_t qd = 0;
    for (int64_t i = 0; i < blocks; ++i) qd += got[size_t(i)] != q.absmax_q[size_t(i)];
    c.result("absmax codes = bitsandbytes'", double(qd), kTolExact, std::to_string(qd) + " of " + std::to_string(blocks) + " differ");
    c.tensor("nested absmax", get(d_nested), q.nested_absmax, kTolExact);
}

// dequantize_4bit_fp8 (FP8 GEMMs on 4-bit weights): the slot [OUT, IN] from element `first` of a tensor with
// room around it, codes and scales (either layout) exactly equal to the CPU twin's.
void dequantize_fp8_case(Check& c, int OUT, int IN, int64_t first, bool nested, bool transposed) {
    const Q4 q = cpu_quantized(c, first + int64_t(OUT) * IN + 64, nested);
    const int64_t ncodes = transposed ? int64_t(IN) * fp8_padded(OUT) : int64_t(OUT) * fp8_padded(IN);
    const int64_t nscales = transposed ? fp8_blocks(IN) * fp8_scale_ld(OUT) : fp8_blocks(OUT) * fp8_scale_ld(IN);
    std::vector<uint8_t> codes(size_t(ncodes), 0xAA);
    std::vector<float> scales(size_t(nscales), -1.0f);
    cpu::dequantize_4bit_fp8(codes.data(), scales.data(), q.ref(false), first, OUT, IN, transposed);
    const auto d_codes = poisoned<uint8_t>(ncodes);
    const auto d_scales = poisoned<float>(nscales);
    cuda::dequantize_4bit_fp8(d_codes.p(), d_scales.p(), q.ref(true), first, OUT, IN, transposed);
    const std::vector<uint8_t> got = get_u8(d_codes.p(), ncodes);
    int64_t diff = 0;
    for (size_t i = 0; i < codes.size(); ++i) diff += got[i] != codes[i];
    c.result("codes", double(diff), kTolExact, std::to_string(diff) + " of " + std::to_string(ncodes) + " differ");
    c.tensor("scales", get(d_scales), scales, kTolExact);
}

}  // namespace

// Outside the op table (the 4-bit base weights are dequantized by the CUDA runtime before the GEMMs). A single
// value, one block, an odd count (a partial last block and byte), 11 x 4096 and a 14336 x 4096 layer, each with
// double quantization and with fp32 absmax; the quantization kernels; with a fixtures folder bitsandbytes' cases.
void gen_nf4(CaseList& cs) {
    for (int64_t n : {int64_t(64), int64_t(1023), int64_t(4096 * 11), int64_t(14336) * 64, int64_t(1)})
        for (bool nested : {true, false})
            cs.add("nf4 dequantize n=" + std::to_string(n) + (nested ? " double-quant" : " fp32 absmax"),
                   [=](Check& c) { dequantize_case(c, n, nested); });
    for (int64_t n : {int64_t(1023), int64_t(4096) * 96})
        cs.add("nf4 quantize n=" + std::to_string(n), [=](Check& c) { quantize_case(c, n); });
    if (cs.fixtures_dir().empty()) return;
    const fs::path dir = fs::path(cs.fixtures_dir()) / "nf4";
    if (!fs::exists(dir / "cases.json")) return;
    const nlohmann::json all = read_json_file(dir / "cases.json");
    for (const auto& meta : all.at("cases"))
        cs.add("nf4 bitsandbytes " + meta.at("name").get<std::string>(), [=](Check& c) { bnb_case(c, dir, meta); });
}

// In the op table (FP8 GEMMs on 4-bit weights): sizes that are and are not multiples of the 128x128 block, a
// slot that starts inside the tensor (a fused projection's rows: the 8-element path), IN not a multiple of 8 and
// an odd start (the per-element path), one row, one column; both absmax forms; both layouts.
void gen_dequantize_4bit_fp8(CaseList& cs) {
    struct S {
        int OUT, IN;
        int64_t first;
        bool nested;
    };
    for (const S& s : {S{300, 352, 0, true}, S{256, 1024, 128 * 1024, true}, S{128, 384, 0, false}, S{37, 100, 0, true},
                       S{130, 200, 7, false}, S{1, 128, 64, true}, S{200, 1, 0, true}})
        for (bool t : {false, true})
            cs.add("nf4 dequantize_4bit_fp8 " + std::to_string(s.OUT) + "x" + std::to_string(s.IN) + " from " +
                       std::to_string(s.first) + (s.nested ? " double-quant" : " fp32 absmax") +
                       (t ? " transposed" : ""),
                   [=](Check& c) { dequantize_fp8_case(c, s.OUT, s.IN, s.first, s.nested, t); });
}

}  // namespace tandem::testing
#endif  // TANDEM_WITH_CUDA
