// SPDX-FileCopyrightText: 2026 The Tandem developers
// SPDX-License-Identifier: GPL-3.0-or-later
// FP8 (E4M3 with one fp32 scale per 128x128 block) on the CPU: core/fp8.h's rounding and kernels/cpu/fp8.h.
//  1. e4m3_code / e4m3_value against torch's float8_e4m3fn (fp8/e4m3.safetensors: every finite code, every
//     midpoint between neighbours and the fp32 values either side of it, subnormals, random values), and what
//     torch cannot show: saturation to +-448 (torch makes NaN from 464 up), NaN, the round trip of every code.
//  2. quantize_fp8_weight, quantize_fp8_rows and fp8_transpose equal torch's block quantization bit for bit
//     (fp8/blocks.safetensors); fp8_matmul is within 1e-5 of the output's largest magnitude of a float64
//     product of the same codes, writing (beta 0) and accumulating (beta 1).
//  4. The engine in precision fp8 (CpuModel with every projection FP8): its logits and loss on the llama and qwen3
//     fixture models with their PEFT adapters against torch's FP8-emulated forward (models/*/fp8_expected:
//     transformers + PEFT with each base projection replaced by the same block quantization and a float64
//     product), which is far from the plain fp32 forward; training steps; the memory plan; the refusals.
//  3. Properties that need no fixture: the transpose twice is the identity, the pad columns are code 0, a NaN
//     or inf poisons its block's scale only, the dequantized weight is within half an E4M3 step, the results
//     are bitwise the same for any thread count.
// The fixtures are made by tests/reference/make_fp8_fixtures.py (torch); the cases that need them skip, naming
// the command, while they are absent.
#include <QTest>

#include <nlohmann/json.hpp>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <filesystem>
#include <limits>
#include <map>
#include <random>
#include <stdexcept>
#include <string>
#include <vector>

#include "core/files.h"
#include "core/fp8.h"
#include "export/peft_adapter.h"
#include "kernels/cpu/fp8.h"
#include "kernels/cpu/nf4.h"
#include "kernels/cpu/threads.h"
#include "model/lora_table.h"
#include "model/model.h"
#include "model/plan.h"
#include "tandem/data.h"
#include "tandem/error.h"
#include "tandem/model_config.h"
#include "tandem/run_config.h"
#include "tandem/safetensors.h"
#include "test_support.h"

using namespace tandem;
using tandem::test::fixtures;
namespace fs = std::filesystem;

namespace {

constexpr const char* kMakeFixtures = "CUDA_VISIBLE_DEVICES=\"\" python3 tests/reference/make_fp8_fixtures.py --out tests/fixtures";

fs::path fp8_fixture(const char* name) { return fixtures() / "fp8" / name; }

#define REQUIRE_FP8_FIXTURE(path)                                                                            \
    do {                                                                                                     \
        if (!fs::exists(path))                                                                               \
            QSKIP(qPrintable(QString("FP8 fixture absent: %1; make it (torch, CPU is enough) with: %2")      \
                                 .arg(QString::fromStdString((path).string()), QString(kMakeFixtures)))); \
    } while (0)

uint32_t bits(float v) {
    uint32_t b;
    std::memcpy(&b, &v, sizeof b);
    return b;
}

// A tensor of the fixture, its dtype and shape checked (a wrong fixture fails with the reason).
const TensorInfo& tensor(const SafetensorsFile& f, const std::string& name, DType dtype, std::vector<int64_t> shape) {
    const TensorInfo& t = f.at(name);
    if (t.dtype != dtype || t.shape != shape)
        throw std::runtime_error("fixture tensor " + name + " is " + std::string(dtype_name(t.dtype)) + " " +
                                 shape_to_string(t.shape) + ", expected " + std::string(dtype_name(dtype)) + " " +
                                 shape_to_string(shape));
    return t;
}

std::vector<uint8_t> u8(const SafetensorsFile& f, const std::string& name, std::vector<int64_t> shape) {
    const TensorInfo& t = tensor(f, name, DType::U8, std::move(shape));
    const auto* p = reinterpret_cast<const uint8_t*>(t.data.data());
    return std::vector<uint8_t>(p, p + t.data.size());
}

std::vector<float> f32(const SafetensorsFile& f, const std::string& name, std::vector<int64_t> shape) {
    return tensor_to_f32(tensor(f, name, DType::F32, std::move(shape)));
}

std::vector<double> f64(const SafetensorsFile& f, const std::string& name, std::vector<int64_t> shape) {
    const TensorInfo& t = tensor(f, name, DType::F64, std::move(shape));
    std::vector<double> out(size_t(t.numel()));
    std::memcpy(out.data(), t.data.data(), out.size() * sizeof(double));
    return out;
}

std::vector<float> normal(size_t n, uint32_t seed, float stddev) {
    std::mt19937 g(seed);
    std::normal_distribution<float> d(0.0f, stddev);
    std::vector<float> v(n);
    for (auto& x : v) x = d(g);
    return v;
}

// One weight and its quantization (codes [OUT, INp], scales [ceil(OUT/128), fp8_scale_ld(IN)]).
struct QWeight {
    int OUT = 0, IN = 0;
    std::vector<uint8_t> codes;
    std::vector<float> scales;
};

QWeight quantize_weight(const std::vector<float>& w, int OUT, int IN) {
    QWeight q{OUT, IN, std::vector<uint8_t>(size_t(OUT * fp8_padded(IN)), 0xAB),
              std::vector<float>(size_t(fp8_blocks(OUT) * fp8_scale_ld(IN)), -7.0f)};
    cpu::quantize_fp8_weight(q.codes.data(), q.scales.data(), w.data(), OUT, IN);
    return q;
}

// A torch block-scale grid [rows, cols] in the engine's row stride fp8_scale_ld (pad entries 1).
std::vector<float> with_scale_ld(const std::vector<float>& g, int64_t rows, int64_t cols) {
    const int64_t ld = (cols + 3) / 4 * 4;
    std::vector<float> out(size_t(rows * ld), 1.0f);
    for (int64_t r = 0; r < rows; ++r)
        for (int64_t c = 0; c < cols; ++c) out[size_t(r * ld + c)] = g[size_t(r * cols + c)];
    return out;
}

QWeight transpose(const QWeight& q) {
    QWeight t{q.IN, q.OUT, std::vector<uint8_t>(size_t(q.IN * fp8_padded(q.OUT)), 0xAB),
              std::vector<float>(size_t(fp8_blocks(q.IN) * fp8_scale_ld(q.OUT)), -7.0f)};
    cpu::fp8_transpose(t.codes.data(), t.scales.data(), q.codes.data(), q.scales.data(), q.OUT, q.IN);
    return t;
}

// Activations x [rows, K]: codes [fp8_code_rows(rows), Kp], scales at fp8_row_scale_at (core/fp8.h).
struct QRows {
    int rows = 0, K = 0;
    std::vector<uint8_t> codes;
    std::vector<float> scales;
};

QRows quantize_rows(const std::vector<float>& x, int rows, int K) {
    QRows q{rows, K, std::vector<uint8_t>(size_t(fp8_code_rows(rows) * fp8_padded(K)), 0xAB),
            std::vector<float>(size_t(fp8_padded(K) / kFp8Block * fp8_code_rows(rows)), -7.0f)};
    cpu::quantize_fp8_rows(q.codes.data(), q.scales.data(), x.data(), rows, K);
    return q;
}

// The float64 product of quantized x and w (+ bias): the value of a code is e4m3(code) * its block's scale.
std::vector<double> reference_matmul(const QRows& x, const QWeight& w, const float* bias) {
    const int64_t Kp = fp8_padded(x.K), cols = Kp / kFp8Block;
    std::vector<double> out(size_t(x.rows) * size_t(w.OUT));
    for (int n = 0; n < x.rows; ++n)
        for (int m = 0; m < w.OUT; ++m) {
            double s = bias ? double(bias[m]) : 0.0;
            for (int64_t k = 0; k < x.K; ++k) {
                const double xv = double(e4m3_value(x.codes[size_t(n * Kp + k)])) * x.scales[size_t(fp8_row_scale_at(n, k / kFp8Block, x.rows, cols))];
                const double wv = double(e4m3_value(w.codes[size_t(m * Kp + k)])) *
                                  w.scales[size_t((m / kFp8Block) * fp8_scale_ld(w.IN) + k / kFp8Block)];
                s += xv * wv;
            }
            out[size_t(n) * size_t(w.OUT) + size_t(m)] = s;
        }
    return out;
}

// max |got - want| / max |want|, with a readable failure message.
double normalized_error(const std::vector<float>& got, const std::vector<double>& want) {
    double err = 0, ref = 0;
    for (size_t i = 0; i < want.size(); ++i) {
        err = std::max(err, std::fabs(double(got[i]) - want[i]));  // NaN in got: fails below (NaN > x false)
        if (std::isnan(got[i])) err = INFINITY;
        ref = std::max(ref, std::fabs(want[i]));
    }
    return ref > 0 ? err / ref : err;
}

struct ThreadGuard {
    int saved = cpu::cpu_threads();
    ~ThreadGuard() { cpu::set_cpu_threads(saved); }
};

}  // namespace

class TestFp8 : public QObject {
    Q_OBJECT

private slots:
    // ---- 1. E4M3 rounding ----

    void e4m3_code_matches_torch() {
        const fs::path path = fp8_fixture("e4m3.safetensors");
        REQUIRE_FP8_FIXTURE(path);
        const SafetensorsFile f(path);
        const int64_t n = f.at("x").numel();
        QVERIFY(n > 3000);
        const std::vector<float> x = f32(f, "x", {n});
        const std::vector<uint8_t> code = u8(f, "code", {n});
        const nlohmann::json groups = nlohmann::json::parse(f.metadata().at("params")).at("groups");
        auto group_of = [&](int64_t i) {
            for (const auto& [name, range] : groups.items())
                if (i >= range[0].get<int64_t>() && i < range[1].get<int64_t>()) return name;
            return std::string("?");
        };
        int64_t bad = 0;
        for (int64_t i = 0; i < n; ++i) {
            const uint8_t got = e4m3_code(x[size_t(i)]);
            if (got == code[size_t(i)]) continue;
            if (++bad <= 10)
                qWarning("x[%lld] = %.9g (%s, bits %08x): e4m3_code %#04x, torch %#04x", (long long)i,
                         double(x[size_t(i)]), group_of(i).c_str(), bits(x[size_t(i)]), got, code[size_t(i)]);
        }
        qInfo("%lld values (%s): %lld codes differ from torch's", (long long)n, groups.dump().c_str(), (long long)bad);
        QCOMPARE(bad, int64_t(0));
        // The exact values: torch's code of an E4M3 value gives that value back (both signs, -0 included).
        const auto exact = groups.at("exact");
        QCOMPARE(exact[1].get<int64_t>() - exact[0].get<int64_t>(), int64_t(254));
        for (int64_t i = exact[0].get<int64_t>(); i < exact[1].get<int64_t>(); ++i)
            QCOMPARE(bits(e4m3_value(code[size_t(i)])), bits(x[size_t(i)]));
    }

    void e4m3_value_matches_torch() {
        const fs::path path = fp8_fixture("e4m3.safetensors");
        REQUIRE_FP8_FIXTURE(path);
        const SafetensorsFile f(path);
        const std::vector<float> table = f32(f, "table", {256});
        for (int c = 0; c < 256; ++c) {
            const float v = e4m3_value(uint8_t(c));
            if ((c & 0x7F) == 0x7F)
                QVERIFY2(std::isnan(v) && std::isnan(table[size_t(c)]), qPrintable(QString("code %1").arg(c, 0, 16)));
            else
                QVERIFY2(bits(v) == bits(table[size_t(c)]),
                         qPrintable(QString("code %1: %2, torch %3").arg(c, 0, 16).arg(double(v)).arg(double(table[size_t(c)]))));
        }
    }

    void e4m3_saturates_and_keeps_nan() {
        for (const float sign : {1.0f, -1.0f}) {
            const uint8_t s = sign < 0 ? 0x80 : 0x00;
            const float big[] = {448.0f, std::nextafter(448.0f, 0.0f), std::nextafter(448.0f, INFINITY), 460.0f,
                                 464.0f /* a tie with 512, which E4M3 lacks */, 479.0f, 480.0f, 1e6f,
                                 std::numeric_limits<float>::max(), INFINITY};
            for (const float v : big) {
                QVERIFY2(e4m3_code(sign * v) == uint8_t(0x7E | s),
                         qPrintable(QString("e4m3_code(%1) = %2").arg(double(sign * v), 0, 'g', 9).arg(e4m3_code(sign * v), 0, 16)));
            }
            QCOMPARE(e4m3_code(std::copysign(NAN, sign)), uint8_t(0x7F | s));
            QCOMPARE(e4m3_code(sign * 0.0f), s);
            QCOMPARE(e4m3_code(sign * std::ldexp(1.0f, -9)), uint8_t(0x01 | s));               // the smallest subnormal
            QCOMPARE(e4m3_code(sign * std::ldexp(1.0f, -10)), s);                              // its half: a tie, to 0
            QCOMPARE(e4m3_code(sign * std::nextafter(std::ldexp(1.0f, -10), 1.0f)), uint8_t(0x01 | s));
            QCOMPARE(e4m3_code(sign * std::ldexp(15.0f, -10)), uint8_t(0x08 | s));             // 7.5 * 2^-9: to even, 2^-6
            QCOMPARE(e4m3_code(sign * 432.0f), uint8_t(0x7E | s));                             // 416..448 tie: to even
            QCOMPARE(e4m3_code(sign * std::nextafter(432.0f, 0.0f)), uint8_t(0x7D | s));
            QCOMPARE(e4m3_code(sign * std::numeric_limits<float>::denorm_min()), s);
        }
    }

    void e4m3_values_round_trip() {
        for (int c = 0; c < 256; ++c) {
            const float v = e4m3_value(uint8_t(c));
            QCOMPARE(std::signbit(v), (c & 0x80) != 0);
            if ((c & 0x7F) == 0x7F) {
                QVERIFY(std::isnan(v));
                continue;
            }
            QVERIFY2(e4m3_code(v) == c, qPrintable(QString("code %1 -> %2 -> %3").arg(c, 0, 16).arg(double(v)).arg(e4m3_code(v), 0, 16)));
            QCOMPARE(bits(e4m3_value(uint8_t(c ^ 0x80))), bits(-v));
            if (c < 0x7E) QVERIFY(e4m3_value(uint8_t(c)) < e4m3_value(uint8_t(c + 1)));
        }
        QCOMPARE(bits(e4m3_value(0x00)), bits(0.0f));
        QCOMPARE(bits(e4m3_value(0x01)), bits(std::ldexp(1.0f, -9)));
        QCOMPARE(bits(e4m3_value(0x07)), bits(std::ldexp(7.0f, -9)));
        QCOMPARE(bits(e4m3_value(0x08)), bits(std::ldexp(1.0f, -6)));
        QCOMPARE(bits(e4m3_value(0x38)), bits(1.0f));
        QCOMPARE(bits(e4m3_value(0x7E)), bits(448.0f));
        QCOMPARE(bits(e4m3_value(0xFE)), bits(-448.0f));
        QCOMPARE(bits(kE4M3Max), bits(448.0f));
        // The block helpers.
        QCOMPARE(fp8_padded(1), int64_t(128));
        QCOMPARE(fp8_padded(128), int64_t(128));
        QCOMPARE(fp8_padded(129), int64_t(256));
        QCOMPARE(fp8_blocks(300), int64_t(3));
        QCOMPARE(bits(fp8_scale_of(0.0f).scale), bits(1.0f));
        QCOMPARE(bits(fp8_scale_of(0.0f).inv), bits(1.0f));
        QCOMPARE(bits(fp8_scale_of(448.0f).scale), bits(1.0f));
        QCOMPARE(bits(fp8_scale_of(3.0f).scale), bits(3.0f / 448.0f));
        QCOMPARE(bits(fp8_scale_of(3.0f).inv), bits(448.0f / 3.0f));
    }

    // ---- 2. the block kernels against torch ----

    void quantize_weight_matches_torch() {
        const fs::path path = fp8_fixture("blocks.safetensors");
        REQUIRE_FP8_FIXTURE(path);
        const SafetensorsFile f(path);
        const int OUT = 300, IN = 352;
        const QWeight q = quantize_weight(f32(f, "w", {OUT, IN}), OUT, IN);
        const std::vector<uint8_t> want = u8(f, "w_codes", {OUT, 384});
        const std::vector<float> want_scales = with_scale_ld(f32(f, "w_scales", {3, 3}), 3, 3);
        QCOMPARE(q.scales.size(), want_scales.size());
        int64_t bad = 0;
        for (size_t i = 0; i < want.size(); ++i)
            if (q.codes[i] != want[i] && ++bad <= 10)
                qWarning("w_codes[%zu, %zu]: %#04x, torch %#04x", i / 384, i % 384, q.codes[i], want[i]);
        QCOMPARE(bad, int64_t(0));
        for (size_t i = 0; i < want_scales.size(); ++i)
            QVERIFY2(bits(q.scales[i]) == bits(want_scales[i]),
                     qPrintable(QString("scale %1: %2, torch %3").arg(i).arg(double(q.scales[i]), 0, 'g', 9).arg(double(want_scales[i]), 0, 'g', 9)));
        QCOMPARE(bits(q.scales[5]), bits(1.0f));  // the all-zero block (1, 1)
    }

    void quantize_rows_matches_torch() {
        const fs::path path = fp8_fixture("blocks.safetensors");
        REQUIRE_FP8_FIXTURE(path);
        const SafetensorsFile f(path);
        const int N = 37, K = 352;
        const QRows q = quantize_rows(f32(f, "x", {N, K}), N, K);
        const std::vector<uint8_t> want = u8(f, "x_codes", {N, 384});
        const std::vector<float> want_scales = f32(f, "x_scales", {3, N});
        int64_t bad = 0;
        for (size_t i = 0; i < want.size(); ++i)
            if (q.codes[i] != want[i] && ++bad <= 10)
                qWarning("x_codes[%zu, %zu]: %#04x, torch %#04x", i / 384, i % 384, q.codes[i], want[i]);
        QCOMPARE(bad, int64_t(0));
        // torch's [Kp/128, rows]; ours in two parts (the head rows, then the tail padded to 16 rows)
        for (size_t i = 0; i < want_scales.size(); ++i) {
            const float got = q.scales[size_t(fp8_row_scale_at(int64_t(i) % N, int64_t(i) / N, N, 3))];
            QVERIFY2(bits(got) == bits(want_scales[i]),
                     qPrintable(QString("x_scales[%1, %2]: %3, torch %4").arg(i / N).arg(i % N)
                                    .arg(double(got), 0, 'g', 9).arg(double(want_scales[i]), 0, 'g', 9)));
        }
        for (int64_t r = N; r < fp8_code_rows(N); ++r)  // the tail's pad rows: codes 0, scale 1
            for (int64_t cb = 0; cb < 3; ++cb) {
                QCOMPARE(bits(q.scales[size_t(fp8_row_scale_at(r, cb, N, 3))]), bits(1.0f));
                for (int64_t k = 0; k < 128; ++k) QCOMPARE(q.codes[size_t(r * 384 + cb * 128 + k)], uint8_t(0));
            }
        QCOMPARE(q.codes[12 * 384], uint8_t(0x80));  // x[12, 0] = -0.0
    }

    void transpose_matches_torch() {
        const fs::path path = fp8_fixture("blocks.safetensors");
        REQUIRE_FP8_FIXTURE(path);
        const SafetensorsFile f(path);
        const QWeight w{300, 352, u8(f, "w_codes", {300, 384}), with_scale_ld(f32(f, "w_scales", {3, 3}), 3, 3)};
        const QWeight t = transpose(w);
        QVERIFY(t.codes == u8(f, "wt_codes", {352, 384}));
        const std::vector<float> want_scales = with_scale_ld(f32(f, "wt_scales", {3, 3}), 3, 3);
        QCOMPARE(t.scales.size(), want_scales.size());
        QVERIFY(std::memcmp(t.scales.data(), want_scales.data(), want_scales.size() * sizeof(float)) == 0);
    }

    void matmul_matches_float64() {
        const fs::path path = fp8_fixture("blocks.safetensors");
        REQUIRE_FP8_FIXTURE(path);
        const SafetensorsFile f(path);
        const int N = 37, K = 352, M = 300;
        // torch's x codes and scales in the engine's layout (rows padded to 16, the scales in two parts)
        std::vector<uint8_t> xc = u8(f, "x_codes", {N, 384});
        xc.resize(size_t(fp8_code_rows(N) * 384), 0);
        const std::vector<float> xs_torch = f32(f, "x_scales", {3, N});
        std::vector<float> xs(size_t(3 * fp8_code_rows(N)), 1.0f);
        for (int64_t i = 0; i < 3 * N; ++i) xs[size_t(fp8_row_scale_at(i % N, i / N, N, 3))] = xs_torch[size_t(i)];
        const std::vector<uint8_t> wc = u8(f, "w_codes", {M, 384});
        const std::vector<float> ws = with_scale_ld(f32(f, "w_scales", {3, 3}), 3, 3);
        const std::vector<float> bias = f32(f, "bias", {M});
        const std::vector<double> want = f64(f, "out", {N, M});
        // beta 0: whatever the output held is ignored
        std::vector<float> out(size_t(N * M), NAN);
        cpu::fp8_matmul(out.data(), xc.data(), xs.data(), wc.data(), ws.data(), bias.data(), N, K, M, 0.0f);
        const double e0 = normalized_error(out, want);
        // beta 1: added onto a prefilled output
        double big = 0;
        for (double v : want) big = std::max(big, std::fabs(v));
        std::vector<float> acc(size_t(N * M));
        std::vector<double> want1(want.size());
        for (size_t i = 0; i < acc.size(); ++i) {
            acc[i] = float(0.75 * big * std::sin(double(i)));
            want1[i] = double(acc[i]) + want[i];
        }
        cpu::fp8_matmul(acc.data(), xc.data(), xs.data(), wc.data(), ws.data(), bias.data(), N, K, M, 1.0f);
        const double e1 = normalized_error(acc, want1);
        // no bias
        std::vector<double> want_nb(want.size());
        for (size_t i = 0; i < want.size(); ++i) want_nb[i] = want[i] - double(bias[i % size_t(M)]);
        cpu::fp8_matmul(out.data(), xc.data(), xs.data(), wc.data(), ws.data(), nullptr, N, K, M, 0.0f);
        const double enb = normalized_error(out, want_nb);
        qInfo("fp8_matmul vs float64 (max |out| %.4g): beta 0 %.3g, beta 1 %.3g, no bias %.3g (of the max)", big, e0,
              e1, enb);
        QVERIFY(e0 <= 1e-5);
        QVERIFY(e1 <= 1e-5);
        QVERIFY(enb <= 1e-5);
    }

    // ---- 3. properties ----

    void matmul_matches_dequantized_product() {
        struct Shape {
            int N, K, M;
        };
        for (const Shape s : {Shape{1, 1, 1}, Shape{5, 200, 130}, Shape{3, 128, 129}, Shape{9, 257, 20}}) {
            const QRows x = quantize_rows(normal(size_t(s.N * s.K), 11, 2.0f), s.N, s.K);
            const QWeight w = quantize_weight(normal(size_t(s.M * s.K), 12, 0.05f), s.M, s.K);
            const std::vector<float> bias = normal(size_t(s.M), 13, 0.1f);
            for (const bool with_bias : {false, true}) {
                const std::vector<double> want = reference_matmul(x, w, with_bias ? bias.data() : nullptr);
                std::vector<float> out(want.size(), NAN);
                cpu::fp8_matmul(out.data(), x.codes.data(), x.scales.data(), w.codes.data(), w.scales.data(),
                                with_bias ? bias.data() : nullptr, s.N, s.K, s.M, 0.0f);
                QVERIFY2(normalized_error(out, want) <= 1e-5, qPrintable(QString("%1x%2x%3").arg(s.N).arg(s.K).arg(s.M)));
                std::vector<double> want1(want.size());
                for (size_t i = 0; i < out.size(); ++i) want1[i] = double(out[i]) * 2.0;  // beta 1: out + the same sum
                cpu::fp8_matmul(out.data(), x.codes.data(), x.scales.data(), w.codes.data(), w.scales.data(),
                                with_bias ? bias.data() : nullptr, s.N, s.K, s.M, 1.0f);
                QVERIFY(normalized_error(out, want1) <= 1e-6);
            }
        }
    }

    void transpose_twice_is_identity() {
        struct Shape {
            int OUT, IN;
        };
        for (const Shape s : {Shape{1, 1}, Shape{128, 128}, Shape{129, 257}, Shape{200, 384}, Shape{37, 130}, Shape{300, 352}}) {
            const QWeight q = quantize_weight(normal(size_t(s.OUT * s.IN), uint32_t(s.OUT * 1000 + s.IN), 0.05f), s.OUT, s.IN);
            const QWeight t = transpose(q);
            QCOMPARE(t.OUT, s.IN);
            // every code moved to its place, and the block scales
            for (int o = 0; o < s.OUT; ++o)
                for (int i = 0; i < s.IN; ++i)
                    if (t.codes[size_t(i * fp8_padded(s.OUT) + o)] != q.codes[size_t(o * fp8_padded(s.IN) + i)])
                        QFAIL(qPrintable(QString("%1x%2: code (%3, %4) not transposed").arg(s.OUT).arg(s.IN).arg(o).arg(i)));
            const QWeight back = transpose(t);
            QVERIFY2(back.codes == q.codes, qPrintable(QString("%1x%2 codes").arg(s.OUT).arg(s.IN)));
            QVERIFY2(std::memcmp(back.scales.data(), q.scales.data(), q.scales.size() * sizeof(float)) == 0,
                     qPrintable(QString("%1x%2 scales").arg(s.OUT).arg(s.IN)));
        }
    }

    void pad_columns_are_zero() {
        const int OUT = 130, IN = 200;  // INp 256, OUTp 256
        const QWeight q = quantize_weight(normal(size_t(OUT * IN), 21, 1.0f), OUT, IN);
        for (int o = 0; o < OUT; ++o)
            for (int i = IN; i < 256; ++i) QCOMPARE(q.codes[size_t(o * 256 + i)], uint8_t(0));
        const QWeight t = transpose(q);
        for (int i = 0; i < IN; ++i)
            for (int o = OUT; o < 256; ++o) QCOMPARE(t.codes[size_t(i * 256 + o)], uint8_t(0));
        const QRows x = quantize_rows(normal(size_t(7 * IN), 22, 1.0f), 7, IN);
        for (int r = 0; r < 7; ++r)
            for (int k = IN; k < 256; ++k) QCOMPARE(x.codes[size_t(r * 256 + k)], uint8_t(0));
        // An all-zero input: scale 1, codes 0 everywhere (the buffers were 0xAB / -7 before).
        const QWeight z = quantize_weight(std::vector<float>(size_t(OUT * IN), 0.0f), OUT, IN);
        for (uint8_t c : z.codes) QCOMPARE(c, uint8_t(0));
        for (float s : z.scales) QCOMPARE(bits(s), bits(1.0f));
        const QRows zr = quantize_rows(std::vector<float>(size_t(3 * IN), 0.0f), 3, IN);
        for (uint8_t c : zr.codes) QCOMPARE(c, uint8_t(0));
        for (float s : zr.scales) QCOMPARE(bits(s), bits(1.0f));
    }

    // A NaN or infinite element makes its block's scale NaN and touches no other block.
    void non_finite_poisons_only_its_block() {
        const int rows = 5, K = 300, cols = 3;
        const std::vector<float> x = normal(size_t(rows * K), 31, 1.0f);
        const QRows clean = quantize_rows(x, rows, K);
        std::vector<float> bad = x;
        bad[size_t(2 * K + 130)] = NAN;       // block column 1 of row 2
        bad[size_t(4 * K + 299)] = -INFINITY;  // block column 2 of row 4
        const QRows q = quantize_rows(bad, rows, K);
        for (int cb = 0; cb < cols; ++cb)
            for (int r = 0; r < rows; ++r) {
                const size_t i = size_t(fp8_row_scale_at(r, cb, rows, cols));
                const bool poisoned = (cb == 1 && r == 2) || (cb == 2 && r == 4);
                if (poisoned) {
                    QVERIFY2(std::isnan(q.scales[i]), qPrintable(QString("block %1 of row %2").arg(cb).arg(r)));
                    continue;
                }
                QCOMPARE(bits(q.scales[i]), bits(clean.scales[i]));
                for (int k = cb * 128; k < (cb + 1) * 128; ++k)
                    QCOMPARE(q.codes[size_t(r * 384 + k)], clean.codes[size_t(r * 384 + k)]);
            }
        const int OUT = 200, IN = 300;
        const std::vector<float> w = normal(size_t(OUT * IN), 32, 0.05f);
        const QWeight wclean = quantize_weight(w, OUT, IN);
        std::vector<float> wbad = w;
        wbad[size_t(130 * IN + 5)] = NAN;        // block (1, 0)
        wbad[size_t(10 * IN + 260)] = INFINITY;  // block (0, 2)
        const QWeight wq = quantize_weight(wbad, OUT, IN);
        for (int bo = 0; bo < 2; ++bo)
            for (int bi = 0; bi < 3; ++bi) {
                const size_t i = size_t(bo * fp8_scale_ld(IN) + bi);
                const bool poisoned = (bo == 1 && bi == 0) || (bo == 0 && bi == 2);
                if (poisoned) {
                    QVERIFY2(std::isnan(wq.scales[i]), qPrintable(QString("weight block (%1, %2)").arg(bo).arg(bi)));
                    continue;
                }
                QCOMPARE(bits(wq.scales[i]), bits(wclean.scales[i]));
                for (int o = bo * 128; o < std::min(OUT, (bo + 1) * 128); ++o)
                    for (int k = bi * 128; k < (bi + 1) * 128; ++k)
                        QCOMPARE(wq.codes[size_t(o * 384 + k)], wclean.codes[size_t(o * 384 + k)]);
            }
    }

    // Each element is within half an E4M3 step of its block: |deq - w| <= 2^-4 |w| (normal codes) or
    // 2^-10 * scale (subnormal codes), up to the fp32 rounding of w * inv and of the scale.
    void dequantized_weight_is_within_half_a_step() {
        const int OUT = 260, IN = 300;
        std::vector<float> w = normal(size_t(OUT * IN), 41, 0.05f);
        w[7] = 3.0f;  // an outlier: its block's small values get subnormal codes
        const QWeight q = quantize_weight(w, OUT, IN);
        const int64_t INp = fp8_padded(IN);
        double worst = 0;
        for (int o = 0; o < OUT; ++o)
            for (int i = 0; i < IN; ++i) {
                const double scale = q.scales[size_t((o / 128) * fp8_scale_ld(IN) + i / 128)];
                const double deq = double(e4m3_value(q.codes[size_t(o * INp + i)])) * scale;
                const double v = w[size_t(o * IN + i)];
                const double bound = (std::ldexp(std::fabs(v), -4) + std::ldexp(scale, -10)) * (1 + 1e-6);
                worst = std::max(worst, std::fabs(deq - v) / bound);
            }
        qInfo("worst |dequantized - w| / bound: %.4f", worst);
        QVERIFY(worst <= 1.0);
    }

    void thread_count_does_not_change_results() {
        ThreadGuard guard;
        const int OUT = 300, IN = 352, N = 37;
        const std::vector<float> w = normal(size_t(OUT * IN), 51, 0.05f), x = normal(size_t(N * IN), 52, 1.0f);
        const std::vector<float> bias = normal(size_t(OUT), 53, 0.1f);
        struct Run {
            QWeight w, t;
            QRows x;
            std::vector<float> out;
        };
        auto run = [&](int threads) {
            cpu::set_cpu_threads(threads);
            Run r{quantize_weight(w, OUT, IN), {}, quantize_rows(x, N, IN), std::vector<float>(size_t(N * OUT))};
            r.t = transpose(r.w);
            cpu::fp8_matmul(r.out.data(), r.x.codes.data(), r.x.scales.data(), r.w.codes.data(), r.w.scales.data(),
                            bias.data(), N, IN, OUT, 0.0f);
            return r;
        };
        const Run one = run(1);
        for (const int threads : {2, 3, 4}) {
            const Run r = run(threads);
            QVERIFY(r.w.codes == one.w.codes);
            QVERIFY(std::memcmp(r.w.scales.data(), one.w.scales.data(), one.w.scales.size() * 4) == 0);
            QVERIFY(r.t.codes == one.t.codes);
            QVERIFY(std::memcmp(r.t.scales.data(), one.t.scales.data(), one.t.scales.size() * 4) == 0);
            QVERIFY(r.x.codes == one.x.codes);
            QVERIFY(std::memcmp(r.x.scales.data(), one.x.scales.data(), one.x.scales.size() * 4) == 0);
            QVERIFY2(std::memcmp(r.out.data(), one.out.data(), one.out.size() * 4) == 0,
                     qPrintable(QString("fp8_matmul with %1 threads").arg(threads)));
        }
    }

    // ---- 4. The engine in precision fp8 ----

    void model_forward_matches_torch_emulation() {
        for (const char* name : {"llama", "qwen3"}) {
            const fs::path dir = fixtures() / "models" / name, path = dir / "fp8_expected.safetensors";
            REQUIRE_FP8_FIXTURE(path);
            const SafetensorsFile exp(path);
            const PackedBatch batch = batch_from_sequences(
                read_json_file(dir / "sequences.json")["sequences"].get<std::vector<std::vector<int32_t>>>());
            const PeftAdapter a = read_peft_adapter(dir / "adapter", load_model_config(dir));
            CpuModel m = CpuModel::load(dir, a.config, 7, 64, CheckpointPolicy::Off, false, true);
            QVERIFY(m.config().quantization.fp8);
            m.set_lora(a.tensors);
            const std::vector<float> got = m.logits(batch), want = tensor_to_f32(exp.at("logits")),
                                     plain = tensor_to_f32(exp.at("fp32.logits"));
            QCOMPARE(got.size(), want.size());
            double err = 0, moved = 0, ref = 0;
            for (size_t i = 0; i < want.size(); ++i) {
                err = std::max(err, std::fabs(double(got[i]) - want[i]));
                moved = std::max(moved, std::fabs(double(plain[i]) - want[i]));
                ref = std::max(ref, std::fabs(double(want[i])));
            }
            qInfo("%s: FP8 logits vs torch's emulation: max_abs %.3g (rel %.3g); FP8 moves them %.3g from fp32", name,
                  err, err / ref, moved);
            // The engine's fp32 activations differ from torch's at fp32 rounding, which can move an element
            // across an E4M3 rounding boundary now and then: far below what FP8 itself changes.
            QVERIFY2(err / ref <= 2e-3, qPrintable(QString("%1: rel %2").arg(name).arg(err / ref)));
            QVERIFY(moved > 20 * err);
            const double loss = m.forward_loss(batch) / batch.num_label_tokens;
            const double want_loss = tensor_to_f32(exp.at("loss")).at(0);
            QVERIFY2(std::fabs(loss - want_loss) <= 1e-3 * want_loss,
                     qPrintable(QString("%1: loss %2 vs %3").arg(name).arg(loss).arg(want_loss)));
        }
    }

    // The LoRA gradients of an FP8 step are the fp32 model's within a few percent (FP8 changes the base's
    // products, not what LoRA learns from them), and they are not the same numbers.
    void model_grads_near_fp32() {
        const fs::path dir = fixtures() / "models" / "qwen3";
        const PackedBatch batch = batch_from_sequences(
            read_json_file(dir / "sequences.json")["sequences"].get<std::vector<std::vector<int32_t>>>());
        const PeftAdapter a = read_peft_adapter(dir / "adapter", load_model_config(dir));
        auto grads = [&](bool fp8) {
            CpuModel m = CpuModel::load(dir, a.config, 3, 64, CheckpointPolicy::Off, false, fp8);
            m.set_lora(a.tensors);
            m.zero_grads();
            const double loss = m.forward_backward(batch, float(1.0 / batch.num_label_tokens), 0);
            std::map<std::string, std::vector<float>> g;
            for (const auto& p : m.lora_params()) g[p.spec.name] = p.grad;
            return std::pair{loss, g};
        };
        const auto [l32, g32] = grads(false);
        const auto [l8, g8] = grads(true);
        QVERIFY(std::isfinite(l8));
        QVERIFY(std::fabs(l8 - l32) <= 0.02 * l32);
        double worst = 0, least = 1;
        for (const auto& [name, want] : g32) {
            const std::vector<float>& got = g8.at(name);
            double d2 = 0, r2 = 0;
            for (size_t i = 0; i < want.size(); ++i) {
                d2 += (double(got[i]) - want[i]) * (double(got[i]) - want[i]);
                r2 += double(want[i]) * want[i];
            }
            const double rel = std::sqrt(d2 / std::max(r2, 1e-30));
            worst = std::max(worst, rel);
            least = std::min(least, rel);
        }
        qInfo("FP8 vs fp32 LoRA grads: relative L2 from %.3g to %.3g over %zu tensors", least, worst, g32.size());
        QVERIFY2(worst <= 0.25, qPrintable(QString("worst %1").arg(worst)));
        QVERIFY(least > 1e-5);
    }

    // The transposed weights made once at load (PlanOptions::fp8_transposed) give the bits of the transposes made
    // before every input-gradient GEMM (two fixture models, LoRA B non-zero, recompute).
    void resident_transposes_give_the_same_bits() {
        for (const char* v : {"llama", "qwen3"}) {
            const fs::path dir = fixtures() / "models" / v;
            const PackedBatch batch = batch_from_sequences(
                read_json_file(dir / "sequences.json")["sequences"].get<std::vector<std::vector<int32_t>>>());
            const PeftAdapter a = read_peft_adapter(dir / "adapter", load_model_config(dir));
            auto run = [&](bool resident) {
                CpuModel m = CpuModel::load(dir, a.config, 3, 64, CheckpointPolicy::Recompute, false, true,
                                            PlanOptions{0, resident});
                m.set_lora(a.tensors);
                m.zero_grads();
                const double loss = m.forward_backward(batch, float(1.0 / batch.num_label_tokens), 0);
                std::vector<float> g;
                for (const auto& p : m.lora_params()) g.insert(g.end(), p.grad.begin(), p.grad.end());
                return std::pair{loss, g};
            };
            const auto [l0, g0] = run(false);
            const auto [l1, g1] = run(true);
            QCOMPARE(l1, l0);
            QCOMPARE(g1.size(), g0.size());
            QVERIFY2(std::memcmp(g1.data(), g0.data(), g0.size() * sizeof(float)) == 0, v);
        }
        // The plan: the weights grow by every slot's transpose; the workspace has no shared transpose.
        const ModelConfig cfg = with_fp8(load_model_config(fixtures() / "models" / "llama"));
        LoraConfig lora;
        const Dims d = make_dims(cfg, lora, 64, 0, 64);
        const auto specs = lora_tensor_specs(cfg, lora);
        PlanTraits tr;
        tr.act_bytes = 4;
        const ModelPlan per_step = make_plan(d, specs, lora_index_of(specs, d.L), CheckpointPolicy::Off, tr);
        const ModelPlan resident = make_plan(d, specs, lora_index_of(specs, d.L), CheckpointPolicy::Off, tr, {0, true});
        QVERIFY(resident.weights.size() > per_step.weights.size());
        QVERIFY(per_step.fp8_wt >= 0);
        QCOMPARE(resident.fp8_wt, -1);
    }

    // FP8 GEMMs on 4-bit weights (quantization nf4 with precision fp8): a slot of a 4-bit tensor dequantized
    // straight to FP8 holds, per 128x128 block, the scale amax / 448 of the bf16 values dequantize_4bit gives
    // (the bf16 QLoRA path's weight) and codes within half an E4M3 step of each; the transposed layout holds the
    // same codes and scales transposed.
    void nf4_weights_dequantize_straight_to_fp8() {
        const int OUT = 200, IN = 320;
        const int64_t first = 64 * 5, n = first + int64_t(OUT) * IN + 64;
        std::vector<float> x = normal(size_t(n), 61, 0.05f);
        x[size_t(first + 3)] = 2.0f;  // an outlier: its block's other values get small codes
        std::vector<uint8_t> codes4(size_t(quant4_code_bytes(n)));
        std::vector<float> absmax(size_t(quant4_blocks(n, 64)));
        cpu::quantize_4bit(codes4.data(), absmax.data(), x.data(), n, 64);
        Quant4Ref q;
        q.n = n;
        q.codes = codes4.data();
        q.code = nf4_code().data();
        q.absmax = absmax.data();
        std::vector<float> v(size_t(OUT) * IN);
        cpu::dequantize_4bit(v.data(), q, first, int64_t(v.size()));
        for (float& e : v) e = bf16_to_f32(f32_to_bf16(e));

        const int64_t INp = fp8_padded(IN), OUTp = fp8_padded(OUT);
        std::vector<uint8_t> c(size_t(OUT * INp), 0xAB), ct(size_t(IN * OUTp), 0xAB);
        std::vector<float> sc(size_t(fp8_blocks(OUT) * fp8_scale_ld(IN)), -7.0f),
            sct(size_t(fp8_blocks(IN) * fp8_scale_ld(OUT)), -7.0f);
        cpu::dequantize_4bit_fp8(c.data(), sc.data(), q, first, OUT, IN, false);
        cpu::dequantize_4bit_fp8(ct.data(), sct.data(), q, first, OUT, IN, true);
        double worst = 0;
        for (int bo = 0; bo < fp8_blocks(OUT); ++bo)
            for (int bi = 0; bi < fp8_blocks(IN); ++bi) {
                float amax = 0;
                for (int o = bo * 128; o < std::min(OUT, bo * 128 + 128); ++o)
                    for (int i = bi * 128; i < std::min(IN, bi * 128 + 128); ++i)
                        amax = std::max(amax, std::fabs(v[size_t(o) * IN + i]));
                const float scale = sc[size_t(bo * fp8_scale_ld(IN) + bi)];
                QCOMPARE(scale, amax / kE4M3Max);
                QCOMPARE(sct[size_t(bi * fp8_scale_ld(OUT) + bo)], scale);
                for (int o = bo * 128; o < std::min(OUT, bo * 128 + 128); ++o)
                    for (int i = bi * 128; i < std::min(IN, bi * 128 + 128); ++i) {
                        const uint8_t code = c[size_t(o * INp + i)];
                        QCOMPARE(ct[size_t(i * OUTp + o)], code);
                        const double want = v[size_t(o) * IN + i], got = double(e4m3_value(code)) * scale;
                        const double bound =
                            (std::ldexp(std::fabs(want), -4) + std::ldexp(double(scale), -10)) * (1 + 1e-6);
                        worst = std::max(worst, std::fabs(got - want) / bound);
                    }
            }
        qInfo("worst |FP8 of the 4-bit weight - its bf16 value| / half a step: %.4f", worst);
        QVERIFY(worst <= 1.0);
        for (int o = 0; o < OUT; ++o)  // the pad columns
            for (int64_t i = IN; i < INp; ++i) QCOMPARE(c[size_t(o * INp + i)], uint8_t(0));

        // Every byte and scale (pads included) as the composed path gives them: dequantize_4bit, bf16,
        // quantize_fp8_weight, fp8_transpose; with plain and with double-quantized absmax.
        std::vector<float> nested_absmax(size_t(quant4_blocks(int64_t(absmax.size()), 256)));
        std::vector<uint8_t> absmax_q(absmax.size());
        const float offset = cpu::absmax_mean(absmax.data(), int64_t(absmax.size()));
        cpu::quantize_blockwise_8bit(absmax_q.data(), nested_absmax.data(), absmax.data(), offset,
                                     dynamic_code_8bit().data(), int64_t(absmax.size()), 256);
        Quant4Ref qn = q;
        qn.absmax = nullptr;
        qn.absmax_q = absmax_q.data();
        qn.nested_code = dynamic_code_8bit().data();
        qn.nested_absmax = nested_absmax.data();
        qn.offset = &offset;
        for (const Quant4Ref& ref : {q, qn}) {
            std::vector<float> vr(size_t(OUT) * IN);
            cpu::dequantize_4bit(vr.data(), ref, first, int64_t(vr.size()));
            for (float& e : vr) e = bf16_to_f32(f32_to_bf16(e));
            std::vector<uint8_t> want_c(c.size(), 0xCD), want_ct(ct.size(), 0xCD), got_c(c.size(), 0x11),
                got_ct(ct.size(), 0x11);
            std::vector<float> want_sc(sc.size(), -3.0f), want_sct(sct.size(), -3.0f), got_sc(sc.size(), -5.0f),
                got_sct(sct.size(), -5.0f);
            cpu::quantize_fp8_weight(want_c.data(), want_sc.data(), vr.data(), OUT, IN);
            cpu::fp8_transpose(want_ct.data(), want_sct.data(), want_c.data(), want_sc.data(), OUT, IN);
            cpu::dequantize_4bit_fp8(got_c.data(), got_sc.data(), ref, first, OUT, IN, false);
            cpu::dequantize_4bit_fp8(got_ct.data(), got_sct.data(), ref, first, OUT, IN, true);
            QVERIFY(got_c == want_c);
            QVERIFY(got_ct == want_ct);
            QVERIFY(got_sc == want_sc);
            QVERIFY(got_sct == want_sct);
        }
    }

    // e5m2_round against IEEE half precision (the compiler's _Float16), whose top byte E5M2 is: every E5M2 value
    // (the halves whose low 8 bits are 0) is kept, and any float goes to the nearest of them (ties: the even code),
    // saturating at 57344.
    void e5m2_rounding_matches_half_precision() {
        std::vector<float> grid;  // the finite non-negative E5M2 values, ascending
        for (uint32_t code = 0; code < 0x7C; ++code) {
            const uint16_t h = uint16_t(code << 8);
            _Float16 v;
            std::memcpy(&v, &h, 2);
            grid.push_back(float(v));
        }
        QCOMPARE(grid.back(), kE5M2Max);
        for (float v : grid) {
            QCOMPARE(e5m2_round(v), v);
            QCOMPARE(e5m2_round(-v), -v);
        }
        auto nearest = [&](float x) {
            const float a = std::fabs(x);
            if (a >= kE5M2Max) return std::copysign(kE5M2Max, x);
            const auto hi = std::upper_bound(grid.begin(), grid.end(), a);
            const size_t i = size_t(hi - grid.begin());  // grid[i-1] <= a < grid[i]
            const double lo_d = double(a) - grid[i - 1], hi_d = double(grid[i]) - a;
            const size_t pick = lo_d < hi_d ? i - 1 : hi_d < lo_d ? i : ((i - 1) % 2 == 0 ? i - 1 : i);
            return std::copysign(grid[pick], x);
        };
        std::mt19937 rng(7);
        std::uniform_real_distribution<float> e(-20.0f, 17.0f), m(1.0f, 2.0f);
        int checked = 0;
        for (int k = 0; k < 200000; ++k) {
            const float x = (k % 2 ? -1.0f : 1.0f) * m(rng) * std::exp2(std::floor(e(rng)));
            QCOMPARE(e5m2_round(x), nearest(x));
            ++checked;
        }
        for (size_t i = 1; i + 1 < grid.size(); ++i) {  // the midpoints: ties to the even code
            const float mid = float((double(grid[i - 1]) + grid[i]) / 2);
            QCOMPARE(e5m2_round(mid), nearest(mid));
        }
        QVERIFY(std::isnan(e5m2_round(NAN)));
        QCOMPARE(e5m2_round(1e9f), kE5M2Max);
        qInfo("%d random floats and every midpoint rounded as IEEE half's E5M2 grid gives", checked);
    }

    // Output gradients in E5M2 (the CPU ablation): the GEMM's input, codes times scale, is each element rounded to
    // E5M2 under its block's amax / 57344 wherever that value is at least 2^-14 of the block's largest (E4M3 holds
    // it exactly there); E4M3 (the default) is quantize_fp8_rows itself.
    void e5m2_gradients_are_e5m2_values() {
        const int rows = 19, K = 300;
        std::vector<float> x = normal(size_t(rows) * K, 5, 1.0f);
        for (size_t i = 0; i < x.size(); i += 37) x[i] *= 1e-3f;  // small values inside a block
        const int64_t Kp = fp8_padded(K), cols = Kp / kFp8Block, cr = fp8_code_rows(rows);
        std::vector<uint8_t> c4(size_t(cr * Kp)), c5(c4.size()), want4(c4.size());
        std::vector<float> s4(size_t(cols * cr)), s5(s4.size()), wants4(s4.size());
        cpu::quantize_fp8_rows(want4.data(), wants4.data(), x.data(), rows, K);
        cpu::quantize_fp8_grad_rows_as(Fp8GradFormat::E4M3, c4.data(), s4.data(), x.data(), rows, K);
        QVERIFY(c4 == want4);
        QVERIFY(s4 == wants4);
        cpu::quantize_fp8_grad_rows_as(Fp8GradFormat::E5M2, c5.data(), s5.data(), x.data(), rows, K);
        int exact = 0, differ4 = 0;
        for (int r = 0; r < rows; ++r)
            for (int cb = 0; cb < cols; ++cb) {
                float amax = 0;
                for (int c = cb * 128; c < std::min(K, cb * 128 + 128); ++c)
                    amax = std::max(amax, std::fabs(x[size_t(r) * K + c]));
                const float scale5 = amax / kE5M2Max, sc = s5[size_t(fp8_row_scale_at(r, cb, rows, cols))];
                for (int c = cb * 128; c < std::min(K, cb * 128 + 128); ++c) {
                    const float v = x[size_t(r) * K + c], want = e5m2_round(v / scale5) * scale5;
                    const float got = e4m3_value(c5[size_t(r * Kp + c)]) * sc;
                    if (std::fabs(want) < amax * std::exp2(-14.0f)) continue;
                    QVERIFY2(std::fabs(got - want) <= 1e-6f * std::fabs(want),
                             qPrintable(QString("row %1 col %2: %3 vs %4").arg(r).arg(c).arg(got).arg(want)));
                    ++exact;
                    differ4 += c5[size_t(r * Kp + c)] != c4[size_t(r * Kp + c)];
                }
            }
        qInfo("%d gradient elements on the E5M2 grid; %d codes differ from E4M3's", exact, differ4);
        QVERIFY(differ4 > exact / 4);  // E5M2 drops a mantissa bit: about half the codes move
    }

    // A 4-bit model with FP8 GEMMs: its loss and LoRA gradients are the 4-bit bf16 path's within FP8's few
    // percent, and not the same numbers; the plan holds the 4-bit weights as they are (no FP8 copy) and a work
    // piece for one slot in FP8 instead of the bf16 dequantization's.
    void nf4_with_fp8_model_near_nf4() {
        const fs::path dir = fixtures() / "models" / "llama";
        const PackedBatch batch = batch_from_sequences(
            read_json_file(dir / "sequences.json")["sequences"].get<std::vector<std::vector<int32_t>>>());
        const PeftAdapter a = read_peft_adapter(dir / "adapter", load_model_config(dir));
        auto grads = [&](bool fp8, CheckpointPolicy p) {
            CpuModel m = CpuModel::load(dir, a.config, 3, 64, p, true, fp8);
            if (!m.config().quantization.four_bit || m.config().quantization.fp8 != fp8)
                throw std::runtime_error("the model does not hold what was asked");
            m.set_lora(a.tensors);
            m.zero_grads();
            const double loss = m.forward_backward(batch, float(1.0 / batch.num_label_tokens), 0);
            std::vector<float> g;
            for (const auto& prm : m.lora_params()) g.insert(g.end(), prm.grad.begin(), prm.grad.end());
            return std::pair{loss, g};
        };
        const auto [l16, g16] = grads(false, CheckpointPolicy::Off);
        const auto [l8, g8] = grads(true, CheckpointPolicy::Off);
        const auto [l8r, g8r] = grads(true, CheckpointPolicy::Recompute);
        QVERIFY(std::isfinite(l8));
        QVERIFY2(std::fabs(l8 - l16) <= 0.02 * l16, qPrintable(QString("loss %1 vs %2").arg(l8).arg(l16)));
        double d2 = 0, r2 = 0;
        for (size_t i = 0; i < g16.size(); ++i) {
            d2 += (double(g8[i]) - g16[i]) * (double(g8[i]) - g16[i]);
            r2 += double(g16[i]) * g16[i];
        }
        const double rel = std::sqrt(d2 / r2);
        qInfo("nf4 + FP8 vs nf4 LoRA grads: relative L2 %.3g; loss %.6f vs %.6f", rel, l8, l16);
        QVERIFY(rel <= 0.25 && rel > 1e-5);
        QCOMPARE(l8r, l8);  // recompute dequantizes again: the same bits
        QVERIFY(std::memcmp(g8r.data(), g8.data(), g8.size() * sizeof(float)) == 0);

        const ModelConfig q4 = with_quantization(load_model_config(dir));
        LoraConfig lora;
        const auto specs = lora_tensor_specs(q4, lora);
        PlanTraits tr;
        tr.act_bytes = 2;
        const Dims d16 = make_dims(q4, lora, 64, 0, 64), d8 = make_dims(with_fp8(q4), lora, 64, 0, 64);
        const ModelPlan p16 = make_plan(d16, specs, lora_index_of(specs, d16.L), CheckpointPolicy::Off, tr);
        const ModelPlan p8 = make_plan(d8, specs, lora_index_of(specs, d8.L), CheckpointPolicy::Off, tr, {0, true});
        QCOMPARE(p8.weights.size(), p16.weights.size());  // resident transposes are not made for 4-bit weights
        QVERIFY(!p8.fp8_transposed);
        QVERIFY(p16.dequant >= 0 && p16.fp8_w < 0);
        QVERIFY(p8.dequant < 0 && p8.fp8_w >= 0 && p8.fp8_wt >= 0);
    }

    // The plan holds a byte per weight (rows padded to 128 columns) plus a scale per 128x128 block instead of the
    // backend's float, exactly.
    void plan_counts_one_byte_per_weight() {
        const ModelConfig cfg = load_model_config(fixtures() / "models" / "llama");
        LoraConfig lora;
        const auto f32 = CpuModel::plan(cfg, lora, 64, CheckpointPolicy::Off);
        const auto f8 = CpuModel::plan(with_fp8(cfg), lora, 64, CheckpointPolicy::Off);
        QVERIFY(f8.weights < f32.weights);
        // Every projection: 4 bytes per element less, out * padded(in) codes and the block scales more (each
        // piece padded to the arena's alignment, at most 256 bytes).
        int64_t want = 0, pieces = 0;
        for (const auto& t : expected_tensors(cfg)) {
            if (t.name.find("_proj.weight") == std::string::npos) continue;
            const int64_t out = t.shape.at(0), in = t.shape.at(1);
            want += 4 * out * in - out * fp8_padded(in) - 4 * fp8_blocks(out) * fp8_scale_ld(in);
            pieces += 2;
        }
        const int64_t saved = int64_t(f32.weights) - int64_t(f8.weights);
        QVERIFY2(std::llabs(saved - want) <= 256 * pieces,
                 qPrintable(QString("saved %1 bytes, expected %2").arg(saved).arg(want)));
    }

    void refusals() {
        RunConfig c;
        c.model = "m";
        c.output_dir = "o";
        c.data.dataset = "d.jsonl";
        c.precision = Precision::Fp8;
        c.quantization = Quantization::Nf4;
        validate_run_config(c);  // FP8 GEMMs on 4-bit weights: accepted (nf4_with_fp8_model_near_nf4)
        // Mixture of experts: not FP8 yet, said so when the model is built.
        LoraConfig lora;
        try {
            (void)CpuModel::load(fixtures() / "models" / "qwen3-moe", lora, 1, 64, CheckpointPolicy::Off, false, true);
            QFAIL("fp8 MoE accepted");
        } catch (const Error& e) {
            QCOMPARE(e.category(), ErrorCategory::Unsupported);
            QVERIFY(std::string(e.what()).find("experts") != std::string::npos);
        }
        // The JSON key: written only when fp8, read back, unknown values named.
        c.quantization = Quantization::None;
        nlohmann::json j;
        to_json(j, c);
        QCOMPARE(j.at("precision").get<std::string>(), std::string("fp8"));
        RunConfig back = parse_run_config(j);
        QVERIFY(back.precision == Precision::Fp8);
        c.precision = Precision::Bf16;
        to_json(j, c);
        QVERIFY(!j.contains("precision"));
        j["precision"] = "fp4";
        try {
            (void)parse_run_config(j);
            QFAIL("precision fp4 accepted");
        } catch (const Error& e) {
            QVERIFY(std::string(e.what()).find("bf16 or fp8") != std::string::npos);
        }
    }
};

QTEST_GUILESS_MAIN(TestFp8)
#include "test_fp8.moc"
