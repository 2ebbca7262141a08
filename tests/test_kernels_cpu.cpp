// SPDX-FileCopyrightText: 2026 The Tandem developers
// SPDX-License-Identifier: GPL-3.0-or-later
// Tests for engine/kernels/cpu, the fp32 reference backend that every CUDA kernel is compared against.
// Three kinds of checks:
//  1. every forward and backward against a naive double-precision version written here (tiny, odd shapes,
//     length-1 samples, S = 1), and the naive backwards against finite differences of the naive forwards;
//  2. against PyTorch: tests/fixtures/ops/<op>.safetensors made by tests/reference/make_fixtures.py with
//     torch autograd (conventions in tests/fixtures/README.md);
//  3. determinism: the same results, bit for bit, with 1 and 4 threads.
// Errors are "normalised": max |got - ref| / max |ref| over a tensor (as ggml's test-backend-ops), so an
// element that is a near-cancellation of large terms does not fail a correct kernel.
#include <QTest>

#include <nlohmann/json.hpp>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <functional>
#include <map>
#include <random>
#include <string>
#include <vector>

#include "backend/cpu/backend.h"
#include "kernels/cpu/adamw.h"
#include "kernels/cpu/dropout.h"
#include "kernels/cpu/attention.h"
#include "kernels/cpu/cross_entropy.h"
#include "kernels/cpu/elementwise.h"
#include "kernels/cpu/embedding.h"
#include "kernels/cpu/kv_cache.h"
#include "kernels/cpu/matmul.h"
#include "kernels/cpu/moe.h"
#include "kernels/cpu/rmsnorm.h"
#include "kernels/cpu/rope.h"
#include "kernels/cpu/sampling.h"
#include "kernels/cpu/swiglu.h"
#include "kernels/cpu/threads.h"
#include "tandem/error.h"
#include "tandem/safetensors.h"
#include "test_support.h"

using namespace tandem;
using namespace tandem::cpu;
using tandem::test::expect_error;
namespace fs = std::filesystem;

namespace {

using vecf = std::vector<float>;
using vecd = std::vector<double>;
using veci = std::vector<int32_t>;

vecf rnd(size_t n, uint32_t seed, float lo = -1.0f, float hi = 1.0f) {
    std::mt19937 g(seed);
    vecf v(n);
    for (auto& x : v) x = lo + (hi - lo) * static_cast<float>(g() >> 8) / static_cast<float>(1u << 24);
    return v;
}

vecd to_d(const vecf& v) {
    return vecd(v.begin(), v.end());
}

struct Cmp {
    double max_abs = 0.0;  // max |got - ref|
    double ref_max = 0.0;  // max |ref|
    size_t worst = 0;      // index of max_abs
    bool finite = true;
    double rel() const { return finite ? max_abs / std::max(ref_max, 1e-30) : INFINITY; }
};

template <class A, class B>
Cmp compare(const A& got, const B& ref) {
    Cmp c;
    if (got.size() != ref.size()) {
        c.finite = false;
        return c;
    }
    for (size_t i = 0; i < got.size(); i++) {
        const double g = static_cast<double>(got[i]), r = static_cast<double>(ref[i]);
        if (!std::isfinite(g)) c.finite = false;
        const double e = std::fabs(g - r);
        if (e > c.max_abs) c.max_abs = e, c.worst = i;
        c.ref_max = std::max(c.ref_max, std::fabs(r));
    }
    return c;
}

QString describe(const char* what, const Cmp& c, double tol) {
    return QString("%1: max abs err %2 (at %3), max |ref| %4, normalised err %5 > %6")
        .arg(what)
        .arg(c.max_abs, 0, 'g', 4)
        .arg(c.worst)
        .arg(c.ref_max, 0, 'g', 4)
        .arg(c.rel(), 0, 'g', 4)
        .arg(tol, 0, 'g', 3);
}

#define CHECK_CLOSE(got, ref, tol, what)                                      \
    do {                                                                      \
        const Cmp c_ = compare((got), (ref));                                 \
        QVERIFY2(c_.rel() <= (tol), qPrintable(describe((what), c_, (tol)))); \
    } while (0)

constexpr double kTol = 2e-5;      // fp32 kernel vs double naive
constexpr double kFwdTol = 1e-5;   // vs PyTorch, forward
constexpr double kGradTol = 1e-4;  // vs PyTorch, gradients

// Central finite differences of f against grad: at a few coordinates of x with step h = 1e-6 for double
// functions (tolerance 1e-6 of the largest gradient); fp32 kernels (f32 = true) at every coordinate with
// h = 1e-2, as fp32 rounding would swamp a smaller step (tolerance 1e-3).
void check_fd(const std::function<double(const vecd&)>& f, vecd x, const vecd& grad, const char* what,
              bool f32 = false) {
    const double h = f32 ? 1e-2 : 1e-6;
    double gmax = 1e-12;
    for (double g : grad) gmax = std::max(gmax, std::fabs(g));
    const size_t step = f32 ? 1 : std::max<size_t>(1, x.size() / 23);
    for (size_t i = 0; i < x.size(); i += step) {
        const double x0 = x[i];
        x[i] = x0 + h;
        const double fp = f(x);
        x[i] = x0 - h;
        const double fm = f(x);
        x[i] = x0;
        const double fd = (fp - fm) / (2 * h);
        const double tol = f32 ? 1e-3 * gmax : 1e-6 * gmax + 1e-7;
        QVERIFY2(std::fabs(fd - grad[i]) <= tol,
                 qPrintable(
                     QString("%1: finite difference at %2: %3 vs analytic %4").arg(what).arg(i).arg(fd).arg(grad[i])));
    }
}

double dotd(const vecd& a, const vecd& b) {
    double s = 0;
    for (size_t i = 0; i < a.size(); i++) s += a[i] * b[i];
    return s;
}

// ---- naive double references ----------------------------------------------------------------------------

// y[N,OUT] = x[N,IN] w[OUT,IN]^T (+ b)
vecd ref_linear(const vecd& x, const vecd& w, const vecd* b, int N, int IN, int OUT) {
    vecd y(static_cast<size_t>(N) * OUT);
    for (int n = 0; n < N; n++)
        for (int o = 0; o < OUT; o++) {
            double s = b ? (*b)[o] : 0.0;
            for (int i = 0; i < IN; i++) s += x[n * IN + i] * w[o * IN + i];
            y[n * OUT + o] = s;
        }
    return y;
}

// x[N,A] (a[A,B]) -> x a : [N,B]
vecd ref_mm(const vecd& x, const vecd& a, int N, int A, int B) {
    vecd y(static_cast<size_t>(N) * B, 0.0);
    for (int n = 0; n < N; n++)
        for (int i = 0; i < A; i++)
            for (int j = 0; j < B; j++) y[n * B + j] += x[n * A + i] * a[i * B + j];
    return y;
}

// x^T y: x[N,A], y[N,B] -> [A,B]
vecd ref_tmm(const vecd& x, const vecd& y, int N, int A, int B) {
    vecd r(static_cast<size_t>(A) * B, 0.0);
    for (int n = 0; n < N; n++)
        for (int i = 0; i < A; i++)
            for (int j = 0; j < B; j++) r[i * B + j] += x[n * A + i] * y[n * B + j];
    return r;
}

vecd ref_rmsnorm(const vecd& x, const vecd& w, int N, int C, double eps) {
    vecd y(x.size());
    for (int n = 0; n < N; n++) {
        double ss = 0;
        for (int c = 0; c < C; c++) ss += x[n * C + c] * x[n * C + c];
        const double r = 1.0 / std::sqrt(ss / C + eps);
        for (int c = 0; c < C; c++) y[n * C + c] = w[c] * x[n * C + c] * r;
    }
    return y;
}

void ref_rmsnorm_backward(vecd& dx, vecd& dw, const vecd& dy, const vecd& x, const vecd& w, int N, int C, double eps) {
    dx.assign(x.size(), 0.0);
    dw.assign(static_cast<size_t>(C), 0.0);
    for (int n = 0; n < N; n++) {
        double ss = 0;
        for (int c = 0; c < C; c++) ss += x[n * C + c] * x[n * C + c];
        const double r = 1.0 / std::sqrt(ss / C + eps);
        double dot = 0;
        for (int c = 0; c < C; c++) dot += w[c] * dy[n * C + c] * x[n * C + c];
        for (int c = 0; c < C; c++) {
            dx[n * C + c] = r * w[c] * dy[n * C + c] - x[n * C + c] * r * r * r * dot / C;
            dw[c] += dy[n * C + c] * x[n * C + c] * r;
        }
    }
}

// Attention with a full probability row per (sample, head, query), in double.
struct RefAttn {
    vecd out, lse;  // [T,Hq,D], [Hq,T]
};

// window > 0: query t sees keys t-window+1..t of its sample only (transformers' sliding-window mask).
RefAttn ref_attention(const vecd& q, const vecd& k, const vecd& v, const veci& cu, int T, int Hq, int Hkv, int D,
                      double scale, int window = 0) {
    RefAttn r{vecd(static_cast<size_t>(T) * Hq * D, 0.0), vecd(static_cast<size_t>(Hq) * T, 0.0)};
    const int G = Hq / Hkv;
    for (size_t s = 0; s + 1 < cu.size(); s++)
        for (int h = 0; h < Hq; h++)
            for (int t = cu[s]; t < cu[s + 1]; t++) {
                const int g = h / G;
                const int b = window > 0 ? std::max(cu[s], t - window + 1) : cu[s];
                vecd sc;
                double m = -INFINITY;
                for (int j = b; j <= t; j++) {
                    double d = 0;
                    for (int c = 0; c < D; c++) d += q[(t * Hq + h) * D + c] * k[(j * Hkv + g) * D + c];
                    sc.push_back(scale * d);
                    m = std::max(m, scale * d);
                }
                double l = 0;
                for (double x : sc) l += std::exp(x - m);
                for (int j = b; j <= t; j++) {
                    const double p = std::exp(sc[j - b] - m) / l;
                    for (int c = 0; c < D; c++) r.out[(t * Hq + h) * D + c] += p * v[(j * Hkv + g) * D + c];
                }
                r.lse[h * T + t] = m + std::log(l);
            }
    return r;
}

void ref_attention_backward(vecd& dq, vecd& dk, vecd& dv, const vecd& dout, const vecd& q, const vecd& k, const vecd& v,
                            const veci& cu, int T, int Hq, int Hkv, int D, double scale, int window = 0) {
    dq.assign(q.size(), 0.0);
    dk.assign(k.size(), 0.0);
    dv.assign(v.size(), 0.0);
    const int G = Hq / Hkv;
    for (size_t s = 0; s + 1 < cu.size(); s++)
        for (int h = 0; h < Hq; h++)
            for (int t = cu[s]; t < cu[s + 1]; t++) {
                const int g = h / G, b = window > 0 ? std::max(cu[s], t - window + 1) : cu[s], L = t - b + 1;
                vecd p(L), dp(L);
                double m = -INFINITY;
                for (int j = b; j <= t; j++) {
                    double d = 0;
                    for (int c = 0; c < D; c++) d += q[(t * Hq + h) * D + c] * k[(j * Hkv + g) * D + c];
                    p[j - b] = scale * d;
                    m = std::max(m, p[j - b]);
                }
                double l = 0;
                for (auto& x : p) l += (x = std::exp(x - m));
                for (auto& x : p) x /= l;
                double Dt = 0;
                for (int j = b; j <= t; j++) {
                    double d = 0;
                    for (int c = 0; c < D; c++) d += dout[(t * Hq + h) * D + c] * v[(j * Hkv + g) * D + c];
                    dp[j - b] = d;
                    Dt += p[j - b] * d;
                }
                for (int j = b; j <= t; j++) {
                    const double ds = p[j - b] * (dp[j - b] - Dt);
                    for (int c = 0; c < D; c++) {
                        dq[(t * Hq + h) * D + c] += scale * ds * k[(j * Hkv + g) * D + c];
                        dk[(j * Hkv + g) * D + c] += scale * ds * q[(t * Hq + h) * D + c];
                        dv[(j * Hkv + g) * D + c] += p[j - b] * dout[(t * Hq + h) * D + c];
                    }
                }
            }
}

struct RefCe {
    double loss = 0;
    vecd dhidden;  // [N,C], gradient of loss * grad_scale
    vecd lse;      // [N]
};

RefCe ref_ce(const vecd& hidden, const vecd& w, const veci& targets, int N, int C, int V, double grad_scale) {
    RefCe r;
    r.dhidden.assign(static_cast<size_t>(N) * C, 0.0);
    r.lse.assign(N, 0.0);
    const vecd logits = ref_linear(hidden, w, nullptr, N, C, V);
    for (int n = 0; n < N; n++) {
        double m = -INFINITY;
        for (int i = 0; i < V; i++) m = std::max(m, logits[n * V + i]);
        double s = 0;
        for (int i = 0; i < V; i++) s += std::exp(logits[n * V + i] - m);
        const double lse = m + std::log(s);
        r.lse[n] = lse;
        if (targets[n] == kIgnoreIndex) continue;
        r.loss += lse - logits[n * V + targets[n]];
        for (int i = 0; i < V; i++) {
            const double g = (std::exp(logits[n * V + i] - lse) - (i == targets[n] ? 1.0 : 0.0)) * grad_scale;
            for (int c = 0; c < C; c++) r.dhidden[n * C + c] += g * w[i * C + c];
        }
    }
    return r;
}


// ---- inference: attention against a KV cache, sampling ------------------------------------------------------

// Row t (slot s, position p) of decode attention in double: keys max(0, p-W+1)..p of slot s, layer `layer`;
// softcap > 0 caps the scaled scores.
vecd ref_decode_attention(const vecd& q, const vecd& kc, const vecd& vc, const veci& slot, const veci& pos, int T,
                          int layer, int L, int M, int Hq, int Hkv, int D, double scale, int window, double softcap) {
    vecd out(static_cast<size_t>(T) * Hq * D, 0.0);
    const int G = Hq / Hkv, KV = Hkv * D;
    for (int t = 0; t < T; t++)
        for (int h = 0; h < Hq; h++) {
            const int g = h / G, p = pos[t], b = window > 0 ? std::max(0, p - window + 1) : 0;
            auto krow = [&](const vecd& c, int j) { return &c[((static_cast<size_t>(slot[t]) * L + layer) * M + j) * KV + g * D]; };
            vecd sc;
            double m = -INFINITY;
            for (int j = b; j <= p; j++) {
                double d = 0;
                for (int c = 0; c < D; c++) d += q[(t * Hq + h) * D + c] * krow(kc, j)[c];
                d *= scale;
                if (softcap > 0) d = softcap * std::tanh(d / softcap);
                sc.push_back(d);
                m = std::max(m, d);
            }
            double l = 0;
            for (double x : sc) l += std::exp(x - m);
            for (int j = b; j <= p; j++)
                for (int c = 0; c < D; c++)
                    out[(t * Hq + h) * D + c] += std::exp(sc[j - b] - m) / l * krow(vc, j)[c];
        }
    return out;
}

// transformers' processors in double: the distribution sample_tokens draws from (0 for removed ids).
vecd ref_sampling_probs(const vecf& logits, const SamplingParams& sp) {
    const int V = static_cast<int>(logits.size());
    vecd x(V);
    for (int v = 0; v < V; v++) x[v] = static_cast<double>(static_cast<float>(logits[v] / sp.temperature));
    std::vector<bool> keep(V, true);
    auto softmax = [&]() {
        double m = -INFINITY, s = 0;
        for (int v = 0; v < V; v++)
            if (keep[v]) m = std::max(m, x[v]);
        vecd p(V, 0.0);
        for (int v = 0; v < V; v++)
            if (keep[v]) s += (p[v] = std::exp(x[v] - m));
        for (double& e : p) e /= s;
        return p;
    };
    if (sp.top_k > 0 && sp.top_k < V) {
        vecd sorted = x;
        std::sort(sorted.begin(), sorted.end(), std::greater<double>());
        for (int v = 0; v < V; v++)
            if (x[v] < sorted[sp.top_k - 1]) keep[v] = false;
    }
    if (sp.top_p < 1.0f) {
        const vecd p = softmax();
        std::vector<int> order;
        for (int v = 0; v < V; v++)
            if (keep[v]) order.push_back(v);
        std::stable_sort(order.begin(), order.end(), [&](int a, int b) { return x[a] < x[b]; });
        double cum = 0;
        for (size_t i = 0; i + 1 < order.size(); i++)
            if ((cum += p[order[i]]) <= 1.0 - sp.top_p) keep[order[i]] = false;
    }
    if (sp.min_p > 0.0f) {
        const vecd p = softmax();
        const double top = *std::max_element(p.begin(), p.end());
        for (int v = 0; v < V; v++)
            if (keep[v] && p[v] < sp.min_p * top) keep[v] = false;
    }
    return softmax();
}

// ---- fixtures from PyTorch -------------------------------------------------------------------------------

struct OpFixture {
    std::unique_ptr<SafetensorsFile> file;
    nlohmann::json params;
    vecf f(const std::string& name) const { return tensor_to_f32(file->at(name)); }
    veci i(const std::string& name) const {
        const TensorInfo& t = file->at(name);
        if (t.dtype != DType::I32) throw_internal(name + " is not I32");
        veci v(static_cast<size_t>(t.numel()));
        if (!v.empty()) std::memcpy(v.data(), t.data.data(), t.data.size());
        return v;
    }
    std::vector<int64_t> shape(const std::string& name) const { return file->at(name).shape; }
    double num(const char* key, double fallback) const {
        auto it = params.find(key);
        return (it != params.end() && it->is_number()) ? it->get<double>() : fallback;
    }
};

fs::path op_fixture_path(const char* name) {
    return tandem::test::fixtures() / "ops" / (std::string(name) + ".safetensors");
}

OpFixture load_op(const char* name) {
    OpFixture fx;
    fx.file = std::make_unique<SafetensorsFile>(op_fixture_path(name));
    const auto& md = fx.file->metadata();
    auto it = md.find("params");
    fx.params = it != md.end() ? nlohmann::json::parse(it->second) : nlohmann::json::object();
    return fx;
}

#define REQUIRE_OP_FIXTURE(name)            \
    if (!fs::exists(op_fixture_path(name))) \
    QSKIP(qPrintable(QString("PyTorch fixture absent: ") + QString::fromStdString(op_fixture_path(name).string())))

// Restores the thread count a test changed.
struct ThreadGuard {
    int saved = cpu_threads();
    ~ThreadGuard() { set_cpu_threads(saved); }
};

}  // namespace

class TestKernelsCpu : public QObject {
    Q_OBJECT

private slots:
    // ---- 1. against naive double versions ----

    void matmul() {
        struct Shape {
            int N, IN, OUT;
        };
        for (Shape sh : {Shape{1, 1, 1}, Shape{3, 5, 7}, Shape{17, 33, 9}, Shape{64, 70, 130}}) {
            const int N = sh.N, IN = sh.IN, OUT = sh.OUT;
            const vecf x = rnd(N * IN, 1), w = rnd(OUT * IN, 2), b = rnd(OUT, 3), dy = rnd(N * OUT, 4);
            for (bool with_bias : {false, true}) {
                vecf y(N * OUT, 123.0f);  // written, whatever was there
                matmul_forward(y.data(), x.data(), w.data(), with_bias ? b.data() : nullptr, N, IN, OUT);
                const vecd bd = to_d(b);
                CHECK_CLOSE(y, ref_linear(to_d(x), to_d(w), with_bias ? &bd : nullptr, N, IN, OUT), kTol,
                            "matmul_forward");
            }
            // Gradients accumulate onto what is there.
            vecf dx = rnd(N * IN, 5), dw = rnd(OUT * IN, 6), db = rnd(OUT, 7);
            vecd rdx = to_d(dx), rdw = to_d(dw), rdb = to_d(db);
            const vecd gx = ref_mm(to_d(dy), to_d(w), N, OUT, IN), gw = ref_tmm(to_d(dy), to_d(x), N, OUT, IN);
            for (size_t i = 0; i < rdx.size(); i++) rdx[i] += gx[i];
            for (size_t i = 0; i < rdw.size(); i++) rdw[i] += gw[i];
            for (int n = 0; n < N; n++)
                for (int o = 0; o < OUT; o++) rdb[o] += dy[n * OUT + o];
            matmul_backward(dx.data(), dw.data(), db.data(), dy.data(), x.data(), w.data(), N, IN, OUT);
            CHECK_CLOSE(dx, rdx, kTol, "matmul_backward dinp");
            CHECK_CLOSE(dw, rdw, kTol, "matmul_backward dweight");
            CHECK_CLOSE(db, rdb, kTol, "matmul_backward dbias");
            // Every gradient is optional.
            matmul_backward(nullptr, nullptr, nullptr, dy.data(), nullptr, nullptr, N, IN, OUT);
        }
    }

    void lora() {
        struct Shape {
            int N, IN, OUT, R;
        };
        for (Shape sh : {Shape{1, 1, 1, 1}, Shape{6, 19, 21, 4}, Shape{33, 17, 5, 8}}) {
            const int N = sh.N, IN = sh.IN, OUT = sh.OUT, R = sh.R;
            const float scaling = 1.7f;
            const vecf x = rnd(N * IN, 11), a = rnd(R * IN, 12), b = rnd(OUT * R, 13), dy = rnd(N * OUT, 14);
            const vecf y0 = rnd(N * OUT, 15);
            vecf y = y0, tmp(N * R);
            lora_forward(y.data(), tmp.data(), x.data(), a.data(), b.data(), scaling, N, IN, OUT, R);
            const vecd xa = ref_linear(to_d(x), to_d(a), nullptr, N, IN, R);
            vecd ry = ref_linear(xa, to_d(b), nullptr, N, R, OUT);
            for (size_t i = 0; i < ry.size(); i++) ry[i] = y0[i] + scaling * ry[i];
            CHECK_CLOSE(tmp, xa, kTol, "lora_forward tmp");
            CHECK_CLOSE(y, ry, kTol, "lora_forward out (+=)");

            // Naive gradients of L = sum(dy * out) in double, checked by finite differences below.
            const vecd dtmp = ref_mm(to_d(dy), to_d(b), N, OUT, R);  // unscaled
            vecd gx = ref_mm(dtmp, to_d(a), N, R, IN), ga = ref_tmm(dtmp, to_d(x), N, R, IN),
                 gb = ref_tmm(to_d(dy), xa, N, OUT, R);
            for (auto* g : {&gx, &ga, &gb})
                for (double& e : *g) e *= scaling;
            vecf dx = rnd(N * IN, 16), da = rnd(R * IN, 17), db = rnd(OUT * R, 18), scratch(N * R);
            vecd rdx = to_d(dx), rda = to_d(da), rdb = to_d(db);
            for (size_t i = 0; i < rdx.size(); i++) rdx[i] += gx[i];
            for (size_t i = 0; i < rda.size(); i++) rda[i] += ga[i];
            for (size_t i = 0; i < rdb.size(); i++) rdb[i] += gb[i];
            lora_backward(dx.data(), da.data(), db.data(), scratch.data(), dy.data(), x.data(), tmp.data(), a.data(),
                          b.data(), scaling, N, IN, OUT, R);
            CHECK_CLOSE(dx, rdx, kTol, "lora_backward dinp");
            CHECK_CLOSE(da, rda, kTol, "lora_backward dlora_a");
            CHECK_CLOSE(db, rdb, kTol, "lora_backward dlora_b");
            auto loss_a = [&](const vecd& av) {
                return scaling * dotd(to_d(dy), ref_linear(ref_linear(to_d(x), av, nullptr, N, IN, R), to_d(b), nullptr,
                                                           N, R, OUT));
            };
            check_fd(loss_a, to_d(a), ga, "lora dA");
            auto loss_x = [&](const vecd& xv) {
                return scaling * dotd(to_d(dy), ref_linear(ref_linear(xv, to_d(a), nullptr, N, IN, R), to_d(b), nullptr,
                                                           N, R, OUT));
            };
            check_fd(loss_x, to_d(x), gx, "lora dx");
        }
    }

    void rmsnorm() {
        struct Shape {
            int N, C;
        };
        for (Shape sh : {Shape{1, 1}, Shape{7, 37}, Shape{15, 16}, Shape{40, 300}}) {
            const int N = sh.N, C = sh.C;
            const float eps = 1e-6f;
            const vecf x = rnd(N * C, 21, -2, 2), w = rnd(C, 22, 0.5f, 1.5f), dy = rnd(N * C, 23);
            vecf y(N * C), rstd(N);
            rmsnorm_forward(y.data(), rstd.data(), x.data(), w.data(), N, C, eps);
            CHECK_CLOSE(y, ref_rmsnorm(to_d(x), to_d(w), N, C, eps), kTol, "rmsnorm_forward");
            vecd gx, gw;
            ref_rmsnorm_backward(gx, gw, to_d(dy), to_d(x), to_d(w), N, C, eps);
            vecf dx = rnd(N * C, 24), dw = rnd(C, 25);
            vecd rdx = to_d(dx), rdw = to_d(dw);
            for (size_t i = 0; i < gx.size(); i++) rdx[i] += gx[i];
            for (size_t i = 0; i < gw.size(); i++) rdw[i] += gw[i];
            rmsnorm_backward(dx.data(), dw.data(), dy.data(), x.data(), w.data(), rstd.data(), N, C);
            CHECK_CLOSE(dx, rdx, kTol, "rmsnorm_backward dinp (+=)");
            CHECK_CLOSE(dw, rdw, kTol, "rmsnorm_backward dweight (+=)");
            if (N * C <= 600) {
                check_fd([&](const vecd& xv) { return dotd(to_d(dy), ref_rmsnorm(xv, to_d(w), N, C, eps)); }, to_d(x),
                         gx, "rmsnorm dx");
                check_fd([&](const vecd& wv) { return dotd(to_d(dy), ref_rmsnorm(to_d(x), wv, N, C, eps)); }, to_d(w),
                         gw, "rmsnorm dw");
            }
        }
        // In place forward.
        vecf x = rnd(5 * 8, 26), w = rnd(8, 27), y(40), r(5);
        rmsnorm_forward(y.data(), r.data(), x.data(), w.data(), 5, 8, 1e-5f);
        rmsnorm_forward(x.data(), r.data(), x.data(), w.data(), 5, 8, 1e-5f);
        QVERIFY(x == y);
    }

    // The fused residual + norm of the block (twin of the CUDA one): residual = a + b, out = rmsnorm(residual);
    // also with the residual written over a (as the block does).
    void residual_rmsnorm() {
        const int N = 9, C = 33;
        const float eps = 1e-5f;
        const vecf a = rnd(N * C, 31, -2, 2), b = rnd(N * C, 32, -2, 2), w = rnd(C, 33, 0.5f, 1.5f);
        vecf sum(N * C), want(N * C), want_rstd(N);
        for (int i = 0; i < N * C; i++) sum[i] = a[i] + b[i];
        rmsnorm_forward(want.data(), want_rstd.data(), sum.data(), w.data(), N, C, eps);
        vecf res(N * C), out(N * C), rstd(N);
        residual_rmsnorm_forward(res.data(), out.data(), rstd.data(), a.data(), b.data(), w.data(), N, C, eps);
        QVERIFY(res == sum);
        QVERIFY(out == want);
        QVERIFY(rstd == want_rstd);
        vecf a2 = a;
        residual_rmsnorm_forward(a2.data(), out.data(), rstd.data(), a2.data(), b.data(), w.data(), N, C, eps);
        QVERIFY(a2 == sum);
        QVERIFY(out == want);
        CHECK_CLOSE(out, ref_rmsnorm(to_d(sum), to_d(w), N, C, eps), kTol, "residual_rmsnorm_forward");
    }

    // The forms the block code uses (backend/backend.h): the dropout seed and the loss's grad_scale read
    // through pointers, row losses instead of their sum, the sum op, lora_forward's first GEMM alone.
    void pointer_scalar_forms() {
        const int64_t n = 1000;
        const vecf x = rnd(n, 41), dy = rnd(n, 42);
        const uint64_t seed = 0x1234abcdULL;
        vecf v1(n), v2(n), g1(n, 0.5f), g2(n, 0.5f);
        dropout_forward(v1.data(), x.data(), seed, 3, 2, n, 0.25);
        dropout_forward(v2.data(), x.data(), &seed, 3, 2, n, 0.25);
        QVERIFY(v1 == v2);
        dropout_backward(g1.data(), dy.data(), seed, 3, 2, n, 0.25);
        dropout_backward(g2.data(), dy.data(), &seed, 3, 2, n, 0.25);
        QVERIFY(g1 == g2);
        int dropped = 0;
        for (int64_t i = 0; i < n; i++) dropped += v1[i] == 0.0f;
        QVERIFY2(dropped > 180 && dropped < 320, qPrintable(QString("%1 of 1000 dropped at p = 0.25").arg(dropped)));

        const int N = 23, C = 16, V = 70, K = 8;
        const vecf h = rnd(N * C, 43, -2, 2), w = rnd(V * C, 44);
        veci tg(N);
        for (int t = 0; t < N; t++) tg[t] = (t % 5 == 2) ? kIgnoreIndex : (t * 7 + 1) % V;
        const float gs = 0.125f;
        vecf dh1(N * C), dh2(N * C, 9.0f), losses(N, -1.0f), scratch(size_t(K) * V);
        const double total = lm_head_cross_entropy(dh1.data(), h.data(), w.data(), tg.data(), N, C, V, gs, K,
                                                   scratch.data());
        lm_head_cross_entropy(dh2.data(), losses.data(), h.data(), w.data(), tg.data(), N, C, V, &gs, K,
                              static_cast<void*>(scratch.data()));
        QVERIFY(dh1 == dh2);
        double row_sum = 0.0;
        for (int t = 0; t < N; t++) {
            if (tg[t] == kIgnoreIndex) QCOMPARE(losses[t], 0.0f);
            row_sum += losses[t];
        }
        QVERIFY2(std::fabs(row_sum - total) <= 1e-5 * std::fabs(total),
                 qPrintable(QString("row losses sum to %1, the summed form says %2").arg(row_sum).arg(total)));
        double s = 7.0;
        tandem::cpu::sum(&s, losses.data(), N, false);
        QCOMPARE(s, row_sum);
        tandem::cpu::sum(&s, losses.data(), N, true);
        QCOMPARE(s, 2 * row_sum);

        const int IN = 12, OUT = 9, R = 4;
        const vecf inp = rnd(N * IN, 45), la = rnd(R * IN, 46), lb = rnd(OUT * R, 47);
        vecf out(N * OUT, 0.0f), tmp1(N * R), tmp2(N * R);
        lora_forward(out.data(), tmp1.data(), inp.data(), la.data(), lb.data(), 2.0f, N, IN, OUT, R);
        lora_tmp_forward(tmp2.data(), inp.data(), la.data(), N, IN, R);
        QVERIFY(tmp1 == tmp2);
    }

    // Every op of the table has a CPU twin (the static_assert in backend/cpu/backend.h is the real check;
    // this one fails if the table is emptied) and no op is listed twice.
    void op_table() {
        QVERIFY(tandem::kBackendOps.size() >= 25);
        std::vector<std::string_view> names(tandem::kBackendOps.begin(), tandem::kBackendOps.end());
        std::sort(names.begin(), names.end());
        QVERIFY(std::adjacent_find(names.begin(), names.end()) == names.end());
        static_assert(tandem::Backend<tandem::CpuBackend>);
    }

    void rope_table() {
        // Default: inv_freq[i] = 1 / theta^(2i/D); cos/sin of pos * inv_freq.
        const RopeTable t = rope_table_build(16, 10000.0, RopeScaling{}, 64);
        QCOMPARE(static_cast<int>(t.inv_freq.size()), 8);
        for (int i = 0; i < 8; i++) {
            const double ref = 1.0 / std::pow(10000.0, 2.0 * i / 16);
            QVERIFY2(std::fabs(t.inv_freq[i] - ref) <= 2e-7 * ref, qPrintable(QString("inv_freq %1").arg(i)));
            for (int p : {0, 1, 7, 63}) {
                QVERIFY(std::fabs(t.cos[p * 8 + i] - std::cos(p * ref)) < 1e-5);
                QVERIFY(std::fabs(t.sin[p * 8 + i] - std::sin(p * ref)) < 1e-5);
            }
        }
        // Linear: inv_freq / factor.
        RopeScaling lin;
        lin.type = RopeScalingType::Linear;
        lin.factor = 4.0;
        const RopeTable tl = rope_table_build(16, 10000.0, lin, 4);
        for (int i = 0; i < 8; i++) QCOMPARE(tl.inv_freq[i], t.inv_freq[i] / 4.0f);
        // Llama 3.1's settings (theta 500000, D 128): each frequency band against the formula in double.
        RopeScaling l3;
        l3.type = RopeScalingType::Llama3;
        l3.factor = 8.0;
        l3.low_freq_factor = 1.0;
        l3.high_freq_factor = 4.0;
        l3.original_max_position_embeddings = 8192;
        const RopeTable t3 = rope_table_build(128, 500000.0, l3, 2);
        for (int i = 0; i < 64; i++) {
            const double f = 1.0 / std::pow(500000.0, 2.0 * i / 128);
            const double wl = 2 * M_PI / f;
            double ref = f;
            if (wl > 8192.0)
                ref = f / 8;
            else if (wl >= 2048.0) {
                const double s = (8192.0 / wl - 1.0) / 3.0;
                ref = (1 - s) * f / 8 + s * f;
            }
            QVERIFY2(std::fabs(t3.inv_freq[i] - ref) <= 1e-6 * ref,
                     qPrintable(QString("llama3 inv_freq %1: %2 vs %3").arg(i).arg(t3.inv_freq[i]).arg(ref)));
        }
        // YaRN as gpt-oss-20b sets it (factor 32 over 4096 positions, beta 32 / 1, truncate false): frequencies
        // ramp from inv_freq (fast dimensions) to inv_freq / 32 (slow ones) between the correction dimensions,
        // cos / sin times 0.1 ln 32 + 1 (the models' fixture checks it against transformers).
        RopeScaling yarn;
        yarn.type = RopeScalingType::Yarn;
        yarn.factor = 32.0;
        yarn.original_max_position_embeddings = 4096;
        yarn.truncate = false;
        yarn.attention_factor = 0.1 * std::log(32.0) + 1.0;
        const RopeTable ty = rope_table_build(64, 150000.0, yarn, 4);
        const auto corr = [](double rot) { return 64 * std::log(4096 / (rot * 2 * M_PI)) / (2 * std::log(150000.0)); };
        const double lo = std::max(corr(32.0), 0.0), hi = std::min(corr(1.0), 63.0);
        for (int i = 0; i < 32; i++) {
            const double f = 1.0 / std::pow(150000.0, 2.0 * i / 64);
            const double ramp = std::clamp((i - lo) / (hi - lo), 0.0, 1.0);
            const double ref = f / 32 * ramp + f * (1 - ramp);
            QVERIFY2(std::fabs(ty.inv_freq[i] - ref) <= 1e-6 * ref,
                     qPrintable(QString("yarn inv_freq %1: %2 vs %3").arg(i).arg(ty.inv_freq[i]).arg(ref)));
        }
        QVERIFY(std::fabs(ty.attention_scaling - (0.1 * std::log(32.0) + 1.0)) < 1e-6);
        QVERIFY(std::fabs(ty.cos[32] - std::cos(ty.inv_freq[0]) * ty.attention_scaling) < 1e-6);
        // LongRoPE (the fixtures check its values against transformers): within the original length one set of
        // rows (short factors); past it the long factors' rows follow, and a sequence longer than the original
        // length is rotated with them from its first position on.
        RopeScaling lr;
        lr.type = RopeScalingType::LongRope;
        lr.short_factor = {1.0, 1.5, 2.0, 4.0};
        lr.long_factor = {2.0, 8.0, 16.0, 32.0};
        lr.original_max_position_embeddings = 6;
        lr.attention_factor = 1.2;
        const RopeTable within = rope_table_build(8, 10000.0, lr, 6);
        QCOMPARE(within.long_from, 0);
        QCOMPARE(within.max_pos, 6);
        const RopeTable both = rope_table_build(8, 10000.0, lr, 10);
        QCOMPARE(both.long_from, 6);
        QCOMPARE(both.max_pos, 16);
        QCOMPARE(rope_positions(both), 10);
        RopeScaling as_long = lr;
        as_long.short_factor = lr.long_factor;
        const RopeTable longs = rope_table_build(8, 10000.0, as_long, 6);
        QVERIFY(std::equal(within.cos.begin(), within.cos.end(), both.cos.begin()));
        QVERIFY(std::equal(longs.cos.begin(), longs.cos.end(), both.cos.begin() + 6 * 4));
        QVERIFY(std::equal(longs.sin.begin(), longs.sin.end(), both.sin.begin() + 6 * 4));
        QVERIFY(both.cos[6 * 4 + 5 * 4 + 1] != both.cos[5 * 4 + 1]);  // position 5: long and short rows differ
        // Samples of 6 (short rows) and 7 positions (long rows), then 3 (short).
        const std::vector<int32_t> pos = {0, 1, 2, 3, 4, 5, 0, 1, 2, 3, 4, 5, 6, 0, 1, 2}, cu = {0, 6, 13, 16};
        std::vector<int32_t> rows(pos.size());
        rope_rows(rows.data(), pos.data(), cu.data(), 3, both.long_from);
        QCOMPARE(rows, (std::vector<int32_t>{0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 0, 1, 2}));
        rope_rows(rows.data(), pos.data(), cu.data(), 3, 0);
        QCOMPARE(rows, pos);
        expect_error([&] { rope_table_build(15, 10000.0, RopeScaling{}, 8); }, ErrorCategory::Internal, {"head_dim"});
    }

    void rope() {
        struct Shape {
            int T, H, D;
        };
        for (Shape sh : {Shape{1, 1, 2}, Shape{11, 3, 16}, Shape{9, 2, 6}}) {
            const int T = sh.T, H = sh.H, D = sh.D, half = D / 2;
            const RopeTable tab = rope_table_build(D, 10000.0, RopeScaling{}, 32);
            veci pos(T);
            for (int t = 0; t < T; t++) pos[t] = (t * 7) % 32;
            const vecf x = rnd(T * H * D, 31), dy = rnd(T * H * D, 32);
            vecf y(x.size());
            rope_forward(y.data(), x.data(), pos.data(), tab, T, H, D);
            vecd ry(x.size());
            for (int t = 0; t < T; t++)
                for (int h = 0; h < H; h++)
                    for (int i = 0; i < half; i++) {
                        const double c = tab.cos[pos[t] * half + i], s = tab.sin[pos[t] * half + i];
                        const double x1 = x[(t * H + h) * D + i], x2 = x[(t * H + h) * D + i + half];
                        ry[(t * H + h) * D + i] = x1 * c - x2 * s;
                        ry[(t * H + h) * D + i + half] = x2 * c + x1 * s;
                    }
            CHECK_CLOSE(y, ry, kTol, "rope_forward");
            // Backward is the transpose: <R x, dy> == <x, R^T dy>.
            vecf dx(x.size());
            rope_backward(dx.data(), dy.data(), pos.data(), tab, T, H, D);
            const double lhs = dotd(to_d(y), to_d(dy)), rhs = dotd(to_d(x), to_d(dx));
            QVERIFY2(std::fabs(lhs - rhs) <= 1e-5 * (1 + std::fabs(lhs)),
                     qPrintable(QString("%1 vs %2").arg(lhs).arg(rhs)));
            // Backward undoes forward (a rotation), in place too.
            vecf z = y;
            rope_backward(z.data(), z.data(), pos.data(), tab, T, H, D);
            CHECK_CLOSE(z, x, kTol, "rope_backward(rope_forward(x)) in place");
        }
        const RopeTable tab = rope_table_build(4, 10000.0, RopeScaling{}, 8);
        vecf x(4 * 2, 1.0f);
        veci bad{3, 8};
        expect_error([&] { rope_forward(x.data(), x.data(), bad.data(), tab, 2, 1, 4); }, ErrorCategory::Internal,
                     {"position 8", "token 1"});
    }

    void attention_data() {
        QTest::addColumn<QString>("cu");
        QTest::addColumn<int>("Hq");
        QTest::addColumn<int>("Hkv");
        QTest::addColumn<int>("D");
        QTest::addColumn<int>("window");
        QTest::newRow("S=1 T=1") << "0,1" << 1 << 1 << 4 << 0;
        QTest::newRow("S=1 T=9 MHA") << "0,9" << 3 << 3 << 5 << 0;
        QTest::newRow("fixture layout 5,1,7 GQA") << "0,5,6,13" << 4 << 2 << 16 << 0;
        QTest::newRow("length-1 samples, MQA") << "0,1,2,6,7" << 6 << 1 << 7 << 0;
        QTest::newRow("empty sample inside") << "0,3,3,8" << 2 << 2 << 3 << 0;
        QTest::newRow("long") << "0,40,41,97" << 4 << 2 << 32 << 0;
        QTest::newRow("window 3, packed") << "0,9,10,13" << 4 << 2 << 8 << 3;
        QTest::newRow("window 1 (itself only)") << "0,6,13" << 2 << 1 << 4 << 1;
        QTest::newRow("window wider than the samples") << "0,5,6,13" << 4 << 2 << 16 << 50;
        QTest::newRow("window 16, long") << "0,40,41,97" << 4 << 2 << 32 << 16;
    }

    void attention() {
        QFETCH(QString, cu);
        QFETCH(int, Hq);
        QFETCH(int, Hkv);
        QFETCH(int, D);
        QFETCH(int, window);
        veci cus;
        for (const QString& part : cu.split(',')) cus.push_back(part.toInt());
        const int S = static_cast<int>(cus.size()) - 1, T = cus.back();
        const float scale = 1.0f / std::sqrt(static_cast<float>(D));
        const vecf q = rnd(T * Hq * D, 41, -2, 2), k = rnd(T * Hkv * D, 42, -2, 2), v = rnd(T * Hkv * D, 43),
                   dy = rnd(T * Hq * D, 44);
        vecf out(q.size()), lse(Hq * T);
        attention_forward(out.data(), lse.data(), q.data(), k.data(), v.data(), cus.data(), S, T, Hq, Hkv, D, scale,
                          window);
        const RefAttn ref = ref_attention(to_d(q), to_d(k), to_d(v), cus, T, Hq, Hkv, D, scale, window);
        CHECK_CLOSE(out, ref.out, kTol, "attention_forward out");
        CHECK_CLOSE(lse, ref.lse, kTol, "attention_forward lse");

        vecf dq(q.size(), 9.0f), dk(k.size(), 9.0f), dv(v.size(), 9.0f);  // written, whatever was there
        attention_backward(dq.data(), dk.data(), dv.data(), dy.data(), q.data(), k.data(), v.data(), out.data(),
                           lse.data(), cus.data(), S, T, Hq, Hkv, D, scale, window);
        vecd rq, rk, rv;
        ref_attention_backward(rq, rk, rv, to_d(dy), to_d(q), to_d(k), to_d(v), cus, T, Hq, Hkv, D, scale, window);
        CHECK_CLOSE(dq, rq, kTol, "attention_backward dq");
        CHECK_CLOSE(dk, rk, kTol, "attention_backward dk");
        CHECK_CLOSE(dv, rv, kTol, "attention_backward dv");
        if (T <= 13) {
            auto loss = [&](const vecd& qv, const vecd& kv, const vecd& vv) {
                return dotd(to_d(dy), ref_attention(qv, kv, vv, cus, T, Hq, Hkv, D, scale, window).out);
            };
            check_fd([&](const vecd& x) { return loss(x, to_d(k), to_d(v)); }, to_d(q), rq, "attention dq");
            check_fd([&](const vecd& x) { return loss(to_d(q), x, to_d(v)); }, to_d(k), rk, "attention dk");
            check_fd([&](const vecd& x) { return loss(to_d(q), to_d(k), x); }, to_d(v), rv, "attention dv");
        }
    }

    void attention_bad_args() {
        vecf b(64, 0.0f);
        veci cu{0, 2};
        auto fwd = [&](int Hq, int Hkv, const veci& c) {
            attention_forward(b.data(), b.data(), b.data(), b.data(), b.data(), c.data(),
                              static_cast<int>(c.size()) - 1, 2, Hq, Hkv, 2, 1.0f);
        };
        expect_error([&] { fwd(3, 2, cu); }, ErrorCategory::Internal, {"Hq % Hkv"});
        expect_error([&] { fwd(2, 2, veci{0, 3}); }, ErrorCategory::Internal, {"cu_seqlens"});
        expect_error([&] { fwd(2, 2, veci{0, 2, 1, 2}); }, ErrorCategory::Internal, {"decreases"});
        expect_error(
            [&] { attention_forward(nullptr, b.data(), b.data(), b.data(), b.data(), cu.data(), 1, 2, 1, 1, 2, 1.0f); },
            ErrorCategory::Internal, {"attention_forward", "out"});
    }

    // kv_cache_write puts rows where their slot and position say; decode_attention = the naive version over
    // the cache (GQA, MQA, windows, soft-cap, several slots, positions 0 and M-1), and gives attention_forward's
    // bits for the same keys (the prefill / decode agreement the inference engine relies on).
    void decode_attention_data() {
        QTest::addColumn<int>("Hq");
        QTest::addColumn<int>("Hkv");
        QTest::addColumn<int>("D");
        QTest::addColumn<int>("window");
        QTest::addColumn<double>("softcap");
        QTest::newRow("MHA") << 3 << 3 << 5 << 0 << 0.0;
        QTest::newRow("GQA") << 4 << 2 << 16 << 0 << 0.0;
        QTest::newRow("MQA window 3") << 6 << 1 << 7 << 3 << 0.0;
        QTest::newRow("GQA window 1") << 4 << 2 << 8 << 1 << 0.0;
        QTest::newRow("GQA soft-cap") << 4 << 2 << 8 << 0 << 2.0;
        QTest::newRow("window + soft-cap") << 4 << 2 << 8 << 5 << 1.5;
    }

    void decode_attention() {
        QFETCH(int, Hq);
        QFETCH(int, Hkv);
        QFETCH(int, D);
        QFETCH(int, window);
        QFETCH(double, softcap);
        const int N = 3, L = 2, M = 19, KV = Hkv * D, layer = 1;
        const float scale = 1.0f / std::sqrt(static_cast<float>(D));
        // Fill every slot's layer through kv_cache_write, position by position, in a shuffled row order.
        vecf kc(static_cast<size_t>(N) * L * M * KV, NAN), vc(kc.size(), NAN);
        const vecf k = rnd(N * M * KV, 61, -2, 2), v = rnd(N * M * KV, 62);
        veci wslot, wpos;
        for (int p = M - 1; p >= 0; p--)
            for (int s = 0; s < N; s++) wslot.push_back(s), wpos.push_back(p);
        vecf krows, vrows;
        for (size_t r = 0; r < wslot.size(); r++) {
            const size_t src = (static_cast<size_t>(wslot[r]) * M + wpos[r]) * KV;
            krows.insert(krows.end(), k.begin() + src, k.begin() + src + KV);
            vrows.insert(vrows.end(), v.begin() + src, v.begin() + src + KV);
        }
        for (int l = 0; l < L; l++)
            kv_cache_write(kc.data(), vc.data(), krows.data(), vrows.data(), wslot.data(), wpos.data(),
                           static_cast<int>(wslot.size()), l, N, L, M, KV);
        for (int s = 0; s < N; s++)
            for (int p = 0; p < M; p++)
                for (int c = 0; c < KV; c++) {
                    const size_t at = ((static_cast<size_t>(s) * L + layer) * M + p) * KV + c;
                    QCOMPARE(kc[at], k[(static_cast<size_t>(s) * M + p) * KV + c]);
                    QCOMPARE(vc[at], v[(static_cast<size_t>(s) * M + p) * KV + c]);
                }
        const veci slot{2, 0, 1, 0, 2}, pos{0, 7, M - 1, 3, 12};
        const int T = static_cast<int>(slot.size());
        const vecf q = rnd(T * Hq * D, 63, -2, 2);
        vecf out(q.size(), 9.0f);
        cpu::decode_attention(out.data(), q.data(), kc.data(), vc.data(), slot.data(), pos.data(), T, layer, N, L, M,
                              Hq, Hkv, D, scale, window, static_cast<float>(softcap));
        const vecd ref = ref_decode_attention(to_d(q), to_d(kc), to_d(vc), slot, pos, T, layer, L, M, Hq, Hkv, D,
                                              scale, window, softcap);
        CHECK_CLOSE(out, ref, kTol, "decode_attention out");
        // Row by row, the training attention over the same slot's keys 0..p gives the same bits.
        for (int t = 0; t < T; t++) {
            const int p = pos[t], len = p + 1;
            const float* ks = kc.data() + (static_cast<size_t>(slot[t]) * L + layer) * M * KV;
            const float* vs = vc.data() + (static_cast<size_t>(slot[t]) * L + layer) * M * KV;
            vecf qa(static_cast<size_t>(len) * Hq * D, 0.0f), oa(qa.size()), lse(static_cast<size_t>(Hq) * len);
            std::copy(q.begin() + t * Hq * D, q.begin() + (t + 1) * Hq * D, qa.begin() + p * Hq * D);
            const veci cu{0, len};
            attention_forward(oa.data(), lse.data(), qa.data(), ks, vs, cu.data(), 1, len, Hq, Hkv, D, scale, window,
                              static_cast<float>(softcap));
            QVERIFY2(std::equal(oa.begin() + p * Hq * D, oa.end(), out.begin() + t * Hq * D),
                     qPrintable(QString("row %1: decode_attention and attention_forward differ").arg(t)));
        }
    }

    void decode_attention_bad_args() {
        vecf b(4096, 0.0f);
        const veci slot{0}, pos{5}, bad_slot{2};
        expect_error([&] { kv_cache_write(b.data(), b.data(), b.data(), b.data(), slot.data(), pos.data(), 1, 0, 1, 1, 5, 4); },
                     ErrorCategory::Internal, {"position 5", "holds 5"});
        expect_error([&] { kv_cache_write(b.data(), b.data(), b.data(), b.data(), bad_slot.data(), veci{0}.data(), 1, 0, 2, 1, 5, 4); },
                     ErrorCategory::Internal, {"slot 2"});
        expect_error([&] { cpu::decode_attention(b.data(), b.data(), b.data(), b.data(), slot.data(), veci{1}.data(), 1, 0, 1, 1, 5, 3, 2, 4, 1.0f); },
                     ErrorCategory::Internal, {"Hq % Hkv"});
        expect_error([&] { cpu::decode_attention(b.data(), b.data(), b.data(), b.data(), slot.data(), veci{1}.data(), 1, 1, 1, 1, 5, 2, 2, 4, 1.0f); },
                     ErrorCategory::Internal, {"layer < L"});
    }

    // The repetition penalty (each seen id once, x / p above zero, x * p below) and sampling against the naive
    // processors in double: the distribution, and the drawn id for u inside an id's interval.
    void sampling() {
        const int V = 37;
        const vecf base = rnd(V, 71, -3, 3);
        // repetition penalty: ids 4 and 9 seen (4 three times); row 1 has penalty 1 (untouched)
        {
            const int N = 2, M = 6;
            const veci hist{4, 9, 4, 4, 0, 0, /* slot 1 */ 1, 2, 3, 0, 0, 0};
            const veci slot{0, 1}, len{4, 3};
            SamplingParams sp[2];
            sp[0].repetition_penalty = 1.3f;
            vecf x = base;
            x.insert(x.end(), base.begin(), base.end());
            x[4] = 2.0f, x[9] = -1.0f;
            vecf want = x;
            want[4] = 2.0f / 1.3f, want[9] = -1.0f * 1.3f;
            repetition_penalty(x.data(), hist.data(), slot.data(), len.data(), sp, 2, V, N, M);
            QCOMPARE(x, want);
        }
        struct Case {
            const char* name;
            float temperature;
            int top_k;
            float top_p, min_p;
        };
        const Case cases[] = {{"temperature", 0.7f, 0, 1.0f, 0.0f}, {"top-k 5", 1.0f, 5, 1.0f, 0.0f},
                              {"top-p 0.6", 1.3f, 0, 0.6f, 0.0f},   {"min-p 0.2", 0.9f, 0, 1.0f, 0.2f},
                              {"all four", 0.8f, 12, 0.9f, 0.05f},  {"top-k 1", 1.0f, 1, 1.0f, 0.0f},
                              {"tiny top-p", 1.0f, 0, 1e-6f, 0.0f}};
        for (const Case& c : cases) {
            SamplingParams sp;
            sp.temperature = c.temperature;
            sp.top_k = c.top_k;
            sp.top_p = c.top_p;
            sp.min_p = c.min_p;
            sp.seed = 99;
            vecf x = base;
            const int64_t draw = 5;
            int32_t got = -1;
            sample_tokens(&got, x.data(), &sp, &draw, 1, V);
            const vecd p = ref_sampling_probs(base, sp);
            CHECK_CLOSE(x, p, kTol, c.name);
            const double u = sampling_uniform(99, 5);
            double cum = 0;
            int32_t want = -1;
            for (int v = 0; v < V && want < 0; v++)
                if (u < (cum += p[v])) want = v;
            QVERIFY2(got == want, qPrintable(QString("%1: drew %2, naive %3").arg(c.name).arg(got).arg(want)));
            int kept = 0;
            for (double e : p) kept += e > 0;
            if (c.top_k == 1 || c.top_p < 1e-3f) QCOMPARE(kept, 1);
        }
        // Greedy: the first of equal maxima; the logits untouched.
        vecf g = base;
        g[3] = g[20] = 50.0f;
        const vecf g0 = g;
        SamplingParams greedy;
        const int64_t draw = 0;
        int32_t id = -1;
        sample_tokens(&id, g.data(), &greedy, &draw, 1, V);
        QCOMPARE(id, 3);
        QCOMPARE(g, g0);
        // Rows are independent: a row's draw does not depend on the other rows or the thread count.
        ThreadGuard guard;
        const int T = 9;
        vecf many;
        std::vector<SamplingParams> sps(T);
        std::vector<int64_t> draws(T);
        for (int t = 0; t < T; t++) {
            const vecf r = rnd(V, 80 + t, -4, 4);
            many.insert(many.end(), r.begin(), r.end());
            sps[t].temperature = 0.5f + 0.1f * t;
            sps[t].top_p = 0.95f;
            sps[t].seed = 1000 + t;
            draws[t] = t * 3;
        }
        auto run = [&](int threads) {
            set_cpu_threads(threads);
            vecf x = many;
            veci out(T);
            sample_tokens(out.data(), x.data(), sps.data(), draws.data(), T, V);
            return std::make_pair(out, x);
        };
        const auto one = run(1), four = run(4);
        QVERIFY(one == four);
        for (int t = 0; t < T; t++) {
            vecf row(many.begin() + t * V, many.begin() + (t + 1) * V);
            int32_t alone = -1;
            sample_tokens(&alone, row.data(), &sps[t], &draws[t], 1, V);
            QCOMPARE(alone, one.first[t]);
        }
        SamplingParams bad;
        bad.temperature = 1.0f;
        bad.top_p = 0.0f;
        expect_error([&] { sample_tokens(&id, g.data(), &bad, &draw, 1, V); }, ErrorCategory::Internal, {"top_p"});
    }

    void swiglu() {
        for (auto [N, F] : {std::pair{1, 1}, std::pair{9, 23}, std::pair{31, 130}}) {
            vecf g = rnd(N * F, 51, -4, 4), u = rnd(N * F, 52), dy = rnd(N * F, 53);
            g[0] = -100.0f;  // exp(100) overflows: silu -> -0, gradient -> 0, no NaN
            auto ref = [&](const vecd& gv, const vecd& uv) {
                vecd y(gv.size());
                for (size_t i = 0; i < y.size(); i++) y[i] = gv[i] / (1 + std::exp(-gv[i])) * uv[i];
                return y;
            };
            vecf y(N * F);
            swiglu_forward(y.data(), g.data(), u.data(), N, F);
            CHECK_CLOSE(y, ref(to_d(g), to_d(u)), kTol, "swiglu_forward");
            vecd rg(g.size()), ru(g.size());
            for (size_t i = 0; i < g.size(); i++) {
                const double s = 1 / (1 + std::exp(-static_cast<double>(g[i])));
                rg[i] = dy[i] * u[i] * s * (1 + g[i] * (1 - s));
                ru[i] = dy[i] * g[i] * s;
            }
            vecf dg(g.size()), du(g.size());
            swiglu_backward(dg.data(), du.data(), dy.data(), g.data(), u.data(), N, F);
            CHECK_CLOSE(dg, rg, kTol, "swiglu_backward dgate");
            CHECK_CLOSE(du, ru, kTol, "swiglu_backward dup");
            check_fd([&](const vecd& x) { return dotd(to_d(dy), ref(x, to_d(u))); }, to_d(g), rg, "swiglu dgate");
            // In place: dgate over gate, dup over up.
            vecf g2 = g, u2 = u;
            swiglu_backward(g2.data(), u2.data(), dy.data(), g2.data(), u2.data(), N, F);
            QVERIFY(g2 == dg && u2 == du);
        }
    }


    // Mixture of experts (kernels/cpu/moe.h): the router against double softmax / top-k (+ finite differences of
    // its backward with the choice fixed), sort + count (stable, offsets), permute / unpermute and the grouped
    // GEMMs against per-row naive code, and the whole expert MLP of a token against the loop HF runs.
    void moe() {
        const int T = 13, E = 6, K = 2, C = 10, F = 7, N = T * K;
        for (bool renorm : {false, true}) {
            vecf logits = rnd(T * E, 71, -3, 3);
            veci idx(T * K);
            vecf w(T * K), probs(T * E);
            moe_router_forward(idx.data(), w.data(), probs.data(), logits.data(), T, E, K, renorm, false);
            auto route = [&](const vecd& z, std::vector<int>& pick) {  // double reference for fixed choices
                vecd out(static_cast<size_t>(T * K));
                for (int t = 0; t < T; ++t) {
                    double mx = -1e300, sum = 0, chosen = 0;
                    for (int e = 0; e < E; ++e) mx = std::max(mx, z[size_t(t * E + e)]);
                    vecd p(static_cast<size_t>(E));
                    for (int e = 0; e < E; ++e) sum += p[size_t(e)] = std::exp(z[size_t(t * E + e)] - mx);
                    for (auto& x : p) x /= sum;
                    if (pick.size() < size_t(T * K)) {
                        std::vector<int> order(static_cast<size_t>(E));
                        for (int e = 0; e < E; ++e) order[size_t(e)] = e;
                        std::stable_sort(order.begin(), order.end(), [&](int a, int b) { return p[size_t(a)] > p[size_t(b)]; });
                        for (int j = 0; j < K; ++j) pick.push_back(order[size_t(j)]);
                    }
                    for (int j = 0; j < K; ++j) chosen += p[size_t(pick[size_t(t * K + j)])];
                    for (int j = 0; j < K; ++j)
                        out[size_t(t * K + j)] = p[size_t(pick[size_t(t * K + j)])] / (renorm ? chosen : 1.0);
                }
                return out;
            };
            std::vector<int> pick;
            const vecd rw = route(to_d(logits), pick);
            for (int i = 0; i < T * K; ++i) QCOMPARE(idx[size_t(i)], pick[size_t(i)]);
            CHECK_CLOSE(w, rw, kTol, "moe_router_forward weights");
            const vecf dw = rnd(T * K, 72);
            vecf dz(T * E);
            moe_router_backward(dz.data(), dw.data(), probs.data(), idx.data(), w.data(), T, E, K, renorm, nullptr,
                                nullptr);
            check_fd([&](const vecd& z) { return dotd(to_d(dw), route(z, pick)); }, to_d(logits), to_d(dz),
                     "moe_router_backward");
            // The load-balancing loss of this one layer over its first T-2 rows (choices fixed): the loss term
            // coef * E * sum_e f_e P_e, and its gradient through moe_aux_loss's dense vector and the router's backward.
            const int32_t real = T - 2;
            const float coef = 0.3f, labels = 1.0f, scale = 1.0f;
            vecf stats(2 * E), dense(E);
            moe_aux_stats(stats.data(), probs.data(), idx.data(), &real, T, E, K, true);
            double sums[2] = {0.0, 0.0};
            moe_aux_loss(dense.data(), sums, stats.data(), &real, &labels, &scale, E, 1, coef, true);
            auto aux_of = [&](const vecd& z) {
                double f[64] = {}, P[64] = {}, out = 0;
                for (int t = 0; t < real; ++t) {
                    double mx = -1e300, sum = 0;
                    for (int e = 0; e < E; ++e) mx = std::max(mx, z[size_t(t * E + e)]);
                    for (int e = 0; e < E; ++e) sum += std::exp(z[size_t(t * E + e)] - mx);
                    for (int e = 0; e < E; ++e) P[e] += std::exp(z[size_t(t * E + e)] - mx) / sum / real;
                    for (int j = 0; j < K; ++j) f[pick[size_t(t * K + j)]] += 1.0 / real;
                }
                for (int e = 0; e < E; ++e) out += f[e] * P[e];
                return coef * E * out;
            };
            QVERIFY(std::fabs(sums[0] - aux_of(to_d(logits))) <= 1e-6 && sums[1] == sums[0]);
            const vecf zero(T * K, 0.0f);
            vecf dza(T * E);
            moe_router_backward(dza.data(), zero.data(), probs.data(), idx.data(), w.data(), T, E, K, renorm,
                                dense.data(), &real);
            check_fd(aux_of, to_d(logits), to_d(dza), "moe load-balancing loss gradient");
            // Ties go to the lower expert.
            vecf flat(E, 0.5f), pw(K), pp(E);
            veci pi(K);
            moe_router_forward(pi.data(), pw.data(), pp.data(), flat.data(), 1, E, K, renorm, false);
            for (int j = 0; j < K; ++j) QCOMPARE(pi[size_t(j)], j);
            // A given routing: the weights of those experts, the choice untouched.
            veci gi(T * K);
            for (int t = 0; t < T; ++t)
                for (int j = 0; j < K; ++j) gi[size_t(t * K + j)] = (t + 2 * j + 1) % E;
            std::vector<int> gpick(gi.begin(), gi.end());
            vecf gw(T * K), gp(T * E);
            moe_router_forward(gi.data(), gw.data(), gp.data(), logits.data(), T, E, K, renorm, true);
            QVERIFY(std::equal(gi.begin(), gi.end(), gpick.begin()));
            CHECK_CLOSE(gw, route(to_d(logits), gpick), kTol, "moe_router_forward given weights");
        }
        // Sort + count: stable by expert, offsets the exclusive sums, inv the inverse; expert 3 gets nothing.
        veci idx(N);
        for (int a = 0; a < N; ++a) idx[size_t(a)] = (a * 7 + a / 5) % E == 3 ? 0 : (a * 7 + a / 5) % E;
        veci order(N), inv(N), off(E + 1);
        moe_sort_count(order.data(), inv.data(), off.data(), idx.data(), N, E);
        QCOMPARE(off[0], 0);
        QCOMPARE(off[size_t(E)], N);
        QCOMPARE(off[3], off[4]);
        for (int i = 0; i < N; ++i) {
            QCOMPARE(inv[size_t(order[size_t(i)])], i);
            const int e = idx[size_t(order[size_t(i)])];
            QVERIFY(i >= off[size_t(e)] && i < off[size_t(e) + 1]);
            if (i > 0 && idx[size_t(order[size_t(i - 1)])] == e) QVERIFY(order[size_t(i - 1)] < order[size_t(i)]);
        }
        // Grouped GEMMs against per-row naive products (a stride wider than one matrix, bias, alpha, +=).
        const int IN = 9, OUT = 5;
        const int64_t stride = int64_t(OUT + 2) * IN;
        const vecf W = rnd(static_cast<size_t>(E * stride), 73), bias = rnd(size_t(E * 8), 74), X = rnd(N * IN, 75), G = rnd(N * OUT, 76);
        const float alpha = 0.7f;
        auto expert_of = [&](int r) { int e = 0; while (r >= off[size_t(e) + 1]) ++e; return e; };
        vecf Y = rnd(N * OUT, 77);
        vecd ry(Y.begin(), Y.end());
        for (int r = 0; r < N; ++r) {
            const int e = expert_of(r);
            for (int o = 0; o < OUT; ++o) {
                double acc = 0;
                for (int i = 0; i < IN; ++i) acc += double(X[size_t(r * IN + i)]) * W[size_t(e * stride + o * IN + i)];
                ry[size_t(r * OUT + o)] += bias[size_t(e * 8 + o)] + alpha * acc;
            }
        }
        grouped_matmul_forward(Y.data(), X.data(), W.data(), stride, bias.data(), 8, off.data(), N, IN, OUT, E, alpha, true);
        CHECK_CLOSE(Y, ry, kTol, "grouped_matmul_forward");
        vecf dX = rnd(N * IN, 78);
        vecd rdx(dX.begin(), dX.end());
        vecf dW(static_cast<size_t>(E * stride), 0.5f);
        vecd rdw(dW.begin(), dW.end());
        for (int r = 0; r < N; ++r) {
            const int e = expert_of(r);
            for (int o = 0; o < OUT; ++o)
                for (int i = 0; i < IN; ++i) {
                    rdx[size_t(r * IN + i)] += alpha * double(G[size_t(r * OUT + o)]) * W[size_t(e * stride + o * IN + i)];
                    rdw[size_t(e * stride + o * IN + i)] += alpha * double(G[size_t(r * OUT + o)]) * X[size_t(r * IN + i)];
                }
        }
        grouped_matmul_backward(dX.data(), G.data(), W.data(), stride, off.data(), N, IN, OUT, E, alpha);
        CHECK_CLOSE(dX, rdx, kTol, "grouped_matmul_backward");
        grouped_matmul_weight_grad(dW.data(), stride, G.data(), X.data(), off.data(), N, IN, OUT, E, alpha);
        CHECK_CLOSE(dW, rdw, kTol, "grouped_matmul_weight_grad");
        // The expert MLP of every token, as HF's loop computes it, through permute -> grouped -> unpermute;
        // and the gradients of the input and of the routing weights by finite differences.
        const vecf x = rnd(T * C, 79), rwt = rnd(T * K, 80, 0.1f, 1.0f);
        const vecf Wgu = rnd(size_t(E) * 2 * F * C, 81), Wd = rnd(size_t(E) * C * F, 82);
        auto mlp = [&](const vecd& xv, const vecd& wv) {
            vecd out(static_cast<size_t>(T * C), 0.0);
            for (int t = 0; t < T; ++t)
                for (int j = 0; j < K; ++j) {
                    const int e = idx[size_t(t * K + j)];
                    vecd h(static_cast<size_t>(F));
                    for (int f = 0; f < F; ++f) {
                        double g = 0, u = 0;
                        for (int c = 0; c < C; ++c) {
                            g += xv[size_t(t * C + c)] * Wgu[size_t((e * 2 * F + f) * C + c)];
                            u += xv[size_t(t * C + c)] * Wgu[size_t((e * 2 * F + F + f) * C + c)];
                        }
                        h[size_t(f)] = g / (1 + std::exp(-g)) * u;
                    }
                    for (int c = 0; c < C; ++c) {
                        double y = 0;
                        for (int f = 0; f < F; ++f) y += h[size_t(f)] * Wd[size_t((e * C + c) * F + f)];
                        out[size_t(t * C + c)] += wv[size_t(t * K + j)] * y;
                    }
                }
            return out;
        };
        vecf xs(N * C), gate(N * F), up(N * F), act(N * F), ys(N * C), out(T * C);
        moe_permute(xs.data(), x.data(), inv.data(), T, K, C);
        grouped_matmul_forward(gate.data(), xs.data(), Wgu.data(), 2 * F * C, nullptr, 0, off.data(), N, C, F, E, 1.0f, false);
        grouped_matmul_forward(up.data(), xs.data(), Wgu.data() + F * C, 2 * F * C, nullptr, 0, off.data(), N, C, F, E, 1.0f, false);
        swiglu_forward(act.data(), gate.data(), up.data(), N, F);
        grouped_matmul_forward(ys.data(), act.data(), Wd.data(), C * F, nullptr, 0, off.data(), N, F, C, E, 1.0f, false);
        moe_unpermute(out.data(), ys.data(), rwt.data(), inv.data(), T, K, C);
        CHECK_CLOSE(out, mlp(to_d(x), to_d(rwt)), kTol, "expert MLP (permute, grouped, unpermute)");
        const vecf dout = rnd(T * C, 83);
        vecf dys(N * C), dwt(T * K), dact(N * F, 0.0f), dg(N * F), du(N * F), dxs(N * C, 0.0f), dx(T * C, 0.0f);
        moe_unpermute_backward(dys.data(), dwt.data(), dout.data(), ys.data(), rwt.data(), inv.data(), T, K, C);
        grouped_matmul_backward(dact.data(), dys.data(), Wd.data(), C * F, off.data(), N, F, C, E, 1.0f);
        swiglu_backward(dg.data(), du.data(), dact.data(), gate.data(), up.data(), N, F);
        grouped_matmul_backward(dxs.data(), dg.data(), Wgu.data(), 2 * F * C, off.data(), N, C, F, E, 1.0f);
        grouped_matmul_backward(dxs.data(), du.data(), Wgu.data() + F * C, 2 * F * C, off.data(), N, C, F, E, 1.0f);
        moe_permute_backward(dx.data(), dxs.data(), inv.data(), T, K, C);
        check_fd([&](const vecd& v) { return dotd(to_d(dout), mlp(v, to_d(rwt))); }, to_d(x), to_d(dx), "moe input gradient");
        check_fd([&](const vecd& v) { return dotd(to_d(dout), mlp(to_d(x), v)); }, to_d(rwt), to_d(dwt),
                 "moe routing-weight gradient");
    }

    // GeGLU (Gemma): gelu_tanh(gate) * up in double against the kernel, and its gradient by finite differences.
    void geglu() {
        const int N = 9, F = 23;
        vecf g = rnd(N * F, 54, -5, 5), u = rnd(N * F, 55), dy = rnd(N * F, 56);
        auto gelu = [](double x) { return 0.5 * x * (1 + std::tanh(std::sqrt(2 / M_PI) * (x + 0.044715 * x * x * x))); };
        auto ref = [&](const vecd& gv, const vecd& uv) {
            vecd y(gv.size());
            for (size_t i = 0; i < y.size(); i++) y[i] = gelu(gv[i]) * uv[i];
            return y;
        };
        vecf y(N * F);
        geglu_forward(y.data(), g.data(), u.data(), N, F);
        CHECK_CLOSE(y, ref(to_d(g), to_d(u)), kTol, "geglu_forward");
        vecf dg(g.size()), du(g.size());
        geglu_backward(dg.data(), du.data(), dy.data(), g.data(), u.data(), N, F);
        vecd ru(g.size());
        for (size_t i = 0; i < g.size(); i++) ru[i] = dy[i] * gelu(g[i]);
        CHECK_CLOSE(du, ru, kTol, "geglu_backward dup");
        check_fd([&](const vecd& x) { return dotd(to_d(dy), ref(x, to_d(u))); }, to_d(g), to_d(dg), "geglu dgate");
    }

    // Soft-capping (Gemma 2) in attention and in the lm_head loss: the gradients by finite differences of the
    // capped forward, and a cap of 0 changes nothing.
    void softcap_gradients() {
        const int T = 7, Hq = 2, Hkv = 1, D = 4;
        const veci cu = {0, 4, 7};
        const vecf q = rnd(T * Hq * D, 71, -2, 2), k = rnd(T * Hkv * D, 72, -2, 2), v = rnd(T * Hkv * D, 73),
                   dout = rnd(T * Hq * D, 74);
        const float scale = 0.7f, cap = 1.5f;
        auto fwd = [&](const vecd& qd, float c) {
            vecf out(q.size()), lse(size_t(Hq) * T);
            vecf qf(qd.begin(), qd.end());
            attention_forward(out.data(), lse.data(), qf.data(), k.data(), v.data(), cu.data(), 2, T, Hq, Hkv, D, scale,
                              0, c);
            return dotd(to_d(dout), to_d(out));
        };
        vecf out(q.size()), lse(size_t(Hq) * T), out0(q.size()), lse0(lse.size());
        attention_forward(out.data(), lse.data(), q.data(), k.data(), v.data(), cu.data(), 2, T, Hq, Hkv, D, scale, 0, cap);
        attention_forward(out0.data(), lse0.data(), q.data(), k.data(), v.data(), cu.data(), 2, T, Hq, Hkv, D, scale);
        QVERIFY(out != out0);  // the cap bends these scores
        vecf dq(q.size()), dk(k.size()), dv(v.size());
        attention_backward(dq.data(), dk.data(), dv.data(), dout.data(), q.data(), k.data(), v.data(), out.data(),
                           lse.data(), cu.data(), 2, T, Hq, Hkv, D, scale, 0, cap);
        check_fd([&](const vecd& x) { return fwd(x, cap); }, to_d(q), to_d(dq), "capped attention dq", true);
        vecf out00(q.size());
        attention_forward(out00.data(), lse.data(), q.data(), k.data(), v.data(), cu.data(), 2, T, Hq, Hkv, D, scale, 0,
                          0.0f);
        QVERIFY(out00 == out0);

        const int N = 5, C = 6, V = 11;
        const vecf h = rnd(N * C, 75, -2, 2), w = rnd(V * C, 76, -2, 2);
        const veci targets = {3, -100, 0, 10, 7};
        vecf scratch(size_t(N) * V), dh(size_t(N) * C);
        auto loss = [&](const vecd& hd) {
            vecf hf(hd.begin(), hd.end()), sc(size_t(N) * V);
            return lm_head_cross_entropy(nullptr, hf.data(), w.data(), targets.data(), N, C, V, 1.0f, 2, sc.data(), 2.0f);
        };
        lm_head_cross_entropy(dh.data(), h.data(), w.data(), targets.data(), N, C, V, 1.0f, 2, scratch.data(), 2.0f);
        check_fd(loss, to_d(h), to_d(dh), "capped cross-entropy dhidden", true);
        vecf logits(size_t(N) * V);
        lm_head_logits(logits.data(), h.data(), w.data(), N, C, V, 2.0f);
        for (float x : logits) QVERIFY(std::fabs(x) < 2.0f);
    }

    void cross_entropy() {
        struct Shape {
            int N, C, V;
        };
        for (Shape sh : {Shape{1, 1, 2}, Shape{10, 24, 53}, Shape{37, 16, 300}}) {
            const int N = sh.N, C = sh.C, V = sh.V;
            const vecf h = rnd(N * C, 61, -2, 2), w = rnd(V * C, 62, -1, 1);
            veci tg(N);
            for (int n = 0; n < N; n++) tg[n] = (n % 4 == 1) ? kIgnoreIndex : (n * 13 + 5) % V;
            if (N == 1) tg[0] = V - 1;
            const double gs = 1.0 / 7.0;
            const RefCe ref = ref_ce(to_d(h), to_d(w), tg, N, C, V, gs);
            for (int K : {1, 3, N, N + 5}) {
                vecf dh(N * C, 5.0f), scratch(static_cast<size_t>(K) * V);
                const double loss = lm_head_cross_entropy(dh.data(), h.data(), w.data(), tg.data(), N, C, V,
                                                          static_cast<float>(gs), K, scratch.data());
                QVERIFY2(std::fabs(loss - ref.loss) <= 1e-5 * std::max(1.0, std::fabs(ref.loss)),
                         qPrintable(QString("chunk %1: loss %2 vs %3").arg(K).arg(loss).arg(ref.loss)));
                CHECK_CLOSE(dh, ref.dhidden, kTol, "lm_head_cross_entropy dhidden");
                const double loss2 =
                    lm_head_cross_entropy(nullptr, h.data(), w.data(), tg.data(), N, C, V, 1.0f, K, scratch.data());
                QCOMPARE(loss2, loss);
            }
            // FD of the naive version: d(loss * gs)/d hidden.
            check_fd([&](const vecd& x) { return gs * ref_ce(x, to_d(w), tg, N, C, V, gs).loss; }, to_d(h), ref.dhidden,
                     "cross-entropy dhidden");
            vecf logits(N * V);
            lm_head_logits(logits.data(), h.data(), w.data(), N, C, V);
            CHECK_CLOSE(logits, ref_linear(to_d(h), to_d(w), nullptr, N, C, V), kTol, "lm_head_logits");
        }
        vecf b(64, 0.0f);
        veci bad{1, 9};
        expect_error(
            [&] { lm_head_cross_entropy(nullptr, b.data(), b.data(), bad.data(), 2, 2, 9, 1.0f, 1, b.data()); },
            ErrorCategory::InvalidInput, {"target id 9", "token 1"});
    }

    void embedding() {
        const int N = 8, C = 5, V = 17;
        const vecf table = rnd(V * C, 71), dy = rnd(N * C, 72);
        const veci ids{3, 0, 16, 3, 7, 7, 7, 1};
        vecf out(N * C);
        embedding_forward(out.data(), ids.data(), table.data(), N, C, V);
        for (int n = 0; n < N; n++)
            for (int c = 0; c < C; c++) QCOMPARE(out[n * C + c], table[ids[n] * C + c]);
        vecf dt = rnd(V * C, 73);
        vecd ref = to_d(dt);
        for (int n = 0; n < N; n++)
            for (int c = 0; c < C; c++) ref[ids[n] * C + c] += dy[n * C + c];
        embedding_backward(dt.data(), dy.data(), ids.data(), N, C, V);
        CHECK_CLOSE(dt, ref, kTol, "embedding_backward (+=)");
        const veci bad{1, 17};
        expect_error([&] { embedding_forward(out.data(), bad.data(), table.data(), 2, C, V); },
                     ErrorCategory::InvalidInput, {"token id 17", "position 1"});
        const veci neg{-1};
        expect_error([&] { embedding_forward(out.data(), neg.data(), table.data(), 1, C, V); },
                     ErrorCategory::InvalidInput, {"token id -1"});
    }

    void elementwise() {
        const vecf a = rnd(1000, 81), b = rnd(1000, 82);
        vecf o(1000);
        add(o.data(), a.data(), b.data(), 1000);
        for (int i = 0; i < 1000; i++) QCOMPARE(o[i], a[i] + b[i]);
        accumulate(o.data(), a.data(), 1000);
        for (int i = 0; i < 1000; i++) QCOMPARE(o[i], (a[i] + b[i]) + a[i]);
        copy(o.data(), a.data(), 1000);
        QVERIFY(o == a);
        scale(o.data(), 2.0f, 1000);
        axpy(o.data(), -2.0f, a.data(), 1000);
        for (float x : o) QCOMPARE(x, 0.0f);
        fill(o.data(), 3.0f, 1000);
        for (float x : o) QCOMPARE(x, 3.0f);
        zero(o.data(), 1000);
        for (float x : o) QCOMPARE(x, 0.0f);
        expect_error([&] { add(nullptr, a.data(), b.data(), 3); }, ErrorCategory::Internal, {"add"});
    }

    void adamw() {
        const int P = 1001;
        vecf p = rnd(P, 91), g = rnd(P, 92), m = rnd(P, 93), v = rnd(P, 94, 0.0f, 0.01f);
        vecd rp = to_d(p), rm = to_d(m), rv = to_d(v);
        const double lr = 1e-3, b1 = 0.9, b2 = 0.999, eps = 1e-8, wd = 0.01;
        for (int step = 1; step <= 5; step++) {
            adamw_update(p.data(), g.data(), m.data(), v.data(), P, lr, b1, b2, eps, wd, step);
            for (int i = 0; i < P; i++) {
                rp[i] *= 1 - lr * wd;
                rm[i] = b1 * rm[i] + (1 - b1) * g[i];
                rv[i] = b2 * rv[i] + (1 - b2) * g[i] * g[i];
                const double den = std::sqrt(rv[i]) / std::sqrt(1 - std::pow(b2, step)) + eps;
                rp[i] -= lr / (1 - std::pow(b1, step)) * rm[i] / den;
            }
        }
        CHECK_CLOSE(p, rp, 1e-6, "adamw param");
        CHECK_CLOSE(m, rm, 1e-6, "adamw exp_avg");
        CHECK_CLOSE(v, rv, 1e-5, "adamw exp_avg_sq");
        expect_error([&] { adamw_update(p.data(), g.data(), m.data(), v.data(), P, lr, b1, b2, eps, wd, 0); },
                     ErrorCategory::Internal, {"step >= 1"});
    }

    void grad_norm_and_clip() {
        vecf a = rnd(50000, 101), b = rnd(7, 102);
        double ref = 0;
        for (float x : a) ref += static_cast<double>(x) * x;
        for (float x : b) ref += static_cast<double>(x) * x;
        ref = std::sqrt(ref);
        std::vector<GradSpan> spans{
            {a.data(), static_cast<int64_t>(a.size())}, {nullptr, 0}, {b.data(), static_cast<int64_t>(b.size())}};
        QVERIFY(std::fabs(global_grad_norm(spans) - ref) <= 1e-12 * ref);
        const vecf a0 = a;
        QCOMPARE(clip_grad_norm(spans, ref * 2), global_grad_norm(spans));  // below max: untouched
        QVERIFY(a == a0);
        const double before = clip_grad_norm(spans, 1.0);
        QVERIFY(std::fabs(before - ref) <= 1e-12 * ref);
        QVERIFY(std::fabs(global_grad_norm(spans) - 1.0) < 1e-5);
        b[0] = NAN;
        QVERIFY(std::isnan(clip_grad_norm(spans, 1.0)));
    }

    // ---- 2. against PyTorch (tests/fixtures/ops) ----

    void torch_rmsnorm_data() {
        QTest::addColumn<QString>("file");
        QTest::newRow("rmsnorm [7,37]") << "rmsnorm";
        QTest::newRow("rmsnorm_heads [5,3,16]") << "rmsnorm_heads";
    }

    void torch_rmsnorm() {
        QFETCH(QString, file);
        const std::string name = file.toStdString();
        REQUIRE_OP_FIXTURE(name.c_str());
        const OpFixture fx = load_op(name.c_str());
        const vecf x = fx.f("in.x"), w = fx.f("in.weight"), dy = fx.f("grad_out.y");
        const int C = static_cast<int>(w.size()), N = static_cast<int>(x.size()) / C;
        const float eps = static_cast<float>(fx.num("eps", 1e-6));
        vecf y(x.size()), rstd(N), dx(x.size(), 0.0f), dw(C, 0.0f);
        rmsnorm_forward(y.data(), rstd.data(), x.data(), w.data(), N, C, eps);
        CHECK_CLOSE(y, fx.f("out.y"), kFwdTol, "rmsnorm y");
        rmsnorm_backward(dx.data(), dw.data(), dy.data(), x.data(), w.data(), rstd.data(), N, C);
        CHECK_CLOSE(dx, fx.f("grad_in.x"), kGradTol, "rmsnorm grad x");
        CHECK_CLOSE(dw, fx.f("grad_in.weight"), kGradTol, "rmsnorm grad weight");
    }

    void torch_rope_data() {
        QTest::addColumn<QString>("file");
        QTest::newRow("default") << "rope";
        QTest::newRow("llama3") << "rope_llama3";
    }

    void torch_rope() {
        QFETCH(QString, file);
        const std::string name = file.toStdString();
        REQUIRE_OP_FIXTURE(name.c_str());
        const OpFixture fx = load_op(name.c_str());
        const auto shape = fx.shape("in.x");
        QCOMPARE(shape.size(), size_t{3});
        const int T = static_cast<int>(shape[0]), H = static_cast<int>(shape[1]), D = static_cast<int>(shape[2]);
        const veci pos = fx.i("in.positions");
        RopeScaling sc;
        const std::string type = fx.params.value("rope_type", std::string("default"));
        if (type == "llama3") {
            sc.type = RopeScalingType::Llama3;
            sc.factor = fx.num("factor", 8.0);
            sc.low_freq_factor = fx.num("low_freq_factor", 1.0);
            sc.high_freq_factor = fx.num("high_freq_factor", 4.0);
            sc.original_max_position_embeddings =
                static_cast<int64_t>(fx.num("original_max_position_embeddings", 8192));
        } else if (type == "linear") {
            sc.type = RopeScalingType::Linear;
            sc.factor = fx.num("factor", 1.0);
        }
        const int max_pos = *std::max_element(pos.begin(), pos.end()) + 1;
        const RopeTable tab = rope_table_build(D, fx.num("theta", 10000.0), sc, max_pos);
        // The table: inv_freq exactly as transformers; cos/sin [T, D] (both halves equal) at the positions.
        QVERIFY2(tab.inv_freq == fx.f("out.inv_freq"),
                 qPrintable(describe("inv_freq (bitwise)", compare(tab.inv_freq, fx.f("out.inv_freq")), 0)));
        vecf cs(T * D), sn(T * D);
        for (int t = 0; t < T; t++)
            for (int i = 0; i < D; i++) {
                cs[t * D + i] = tab.cos[pos[t] * (D / 2) + i % (D / 2)];
                sn[t * D + i] = tab.sin[pos[t] * (D / 2) + i % (D / 2)];
            }
        CHECK_CLOSE(cs, fx.f("out.cos"), 1e-6, "rope cos");
        CHECK_CLOSE(sn, fx.f("out.sin"), 1e-6, "rope sin");
        const vecf x = fx.f("in.x");
        vecf y(x.size()), dx(x.size());
        rope_forward(y.data(), x.data(), pos.data(), tab, T, H, D);
        CHECK_CLOSE(y, fx.f("out.y"), kFwdTol, "rope y");
        rope_backward(dx.data(), fx.f("grad_out.y").data(), pos.data(), tab, T, H, D);
        CHECK_CLOSE(dx, fx.f("grad_in.x"), kGradTol, "rope grad x");
    }

    void torch_attention() {
        REQUIRE_OP_FIXTURE("attention");
        const OpFixture fx = load_op("attention");
        const auto qs = fx.shape("in.q"), ks = fx.shape("in.k");
        const int T = static_cast<int>(qs[0]), Hq = static_cast<int>(qs[1]), D = static_cast<int>(qs[2]);
        const int Hkv = static_cast<int>(ks[1]);
        const veci cu = fx.i("in.cu_seqlens");
        const int S = static_cast<int>(cu.size()) - 1;
        const float scale = static_cast<float>(fx.num("scale", 1.0 / std::sqrt(D)));
        const vecf q = fx.f("in.q"), k = fx.f("in.k"), v = fx.f("in.v"), dy = fx.f("grad_out.o");
        vecf out(q.size()), lse(Hq * T);
        attention_forward(out.data(), lse.data(), q.data(), k.data(), v.data(), cu.data(), S, T, Hq, Hkv, D, scale);
        CHECK_CLOSE(out, fx.f("out.o"), kFwdTol, "attention o");
        // The fixture stores lse as [T, Hq]; ours is [Hq, T].
        const vecf lse_t = fx.f("out.lse");
        vecf lse_ours_as_t(lse.size());
        for (int h = 0; h < Hq; h++)
            for (int t = 0; t < T; t++) lse_ours_as_t[t * Hq + h] = lse[h * T + t];
        CHECK_CLOSE(lse_ours_as_t, lse_t, kFwdTol, "attention lse");
        vecf dq(q.size()), dk(k.size()), dv(v.size());
        attention_backward(dq.data(), dk.data(), dv.data(), dy.data(), q.data(), k.data(), v.data(), out.data(),
                           lse.data(), cu.data(), S, T, Hq, Hkv, D, scale);
        CHECK_CLOSE(dq, fx.f("grad_in.q"), kGradTol, "attention grad q");
        CHECK_CLOSE(dk, fx.f("grad_in.k"), kGradTol, "attention grad k");
        CHECK_CLOSE(dv, fx.f("grad_in.v"), kGradTol, "attention grad v");
    }

    void torch_swiglu() {
        REQUIRE_OP_FIXTURE("swiglu");
        const OpFixture fx = load_op("swiglu");
        const auto sh = fx.shape("in.gate");
        const int N = static_cast<int>(sh[0]), F = static_cast<int>(sh[1]);
        const vecf g = fx.f("in.gate"), u = fx.f("in.up");
        vecf y(g.size()), dg(g.size()), du(g.size());
        swiglu_forward(y.data(), g.data(), u.data(), N, F);
        CHECK_CLOSE(y, fx.f("out.y"), kFwdTol, "swiglu y");
        swiglu_backward(dg.data(), du.data(), fx.f("grad_out.y").data(), g.data(), u.data(), N, F);
        CHECK_CLOSE(dg, fx.f("grad_in.gate"), kGradTol, "swiglu grad gate");
        CHECK_CLOSE(du, fx.f("grad_in.up"), kGradTol, "swiglu grad up");
    }

    void torch_lora_linear() {
        REQUIRE_OP_FIXTURE("lora_linear");
        const OpFixture fx = load_op("lora_linear");
        const auto xs = fx.shape("in.x"), ws = fx.shape("in.weight"), as = fx.shape("in.lora_a");
        const int N = static_cast<int>(xs[0]), IN = static_cast<int>(xs[1]), OUT = static_cast<int>(ws[0]),
                  R = static_cast<int>(as[0]);
        const double scaling_d =
            fx.params.contains("scaling") ? fx.num("scaling", 1.0) : fx.num("alpha", R) / fx.num("r", R);
        const float scaling = static_cast<float>(scaling_d);
        const vecf x = fx.f("in.x"), w = fx.f("in.weight"), b = fx.f("in.bias"), a = fx.f("in.lora_a"),
                   lb = fx.f("in.lora_b"), dy = fx.f("grad_out.y");
        vecf y(N * OUT), tmp(N * R);
        matmul_forward(y.data(), x.data(), w.data(), b.data(), N, IN, OUT);
        lora_forward(y.data(), tmp.data(), x.data(), a.data(), lb.data(), scaling, N, IN, OUT, R);
        CHECK_CLOSE(tmp, fx.f("out.xa"), kFwdTol, "lora xa");
        CHECK_CLOSE(y, fx.f("out.y"), kFwdTol, "lora y");
        vecf dx(N * IN, 0.0f), da(R * IN, 0.0f), db(OUT * R, 0.0f), scratch(N * R);
        matmul_backward(dx.data(), nullptr, nullptr, dy.data(), x.data(), w.data(), N, IN, OUT);  // frozen base
        lora_backward(dx.data(), da.data(), db.data(), scratch.data(), dy.data(), x.data(), tmp.data(), a.data(),
                      lb.data(), scaling, N, IN, OUT, R);
        CHECK_CLOSE(dx, fx.f("grad_in.x"), kGradTol, "lora grad x");
        CHECK_CLOSE(da, fx.f("grad_in.lora_a"), kGradTol, "lora grad lora_a");
        CHECK_CLOSE(db, fx.f("grad_in.lora_b"), kGradTol, "lora grad lora_b");
    }

    void torch_lm_head_cross_entropy() {
        REQUIRE_OP_FIXTURE("lm_head_cross_entropy");
        const OpFixture fx = load_op("lm_head_cross_entropy");
        const auto hs = fx.shape("in.hidden"), ws = fx.shape("in.weight");
        const int N = static_cast<int>(hs[0]), C = static_cast<int>(hs[1]), V = static_cast<int>(ws[0]);
        const vecf h = fx.f("in.hidden"), w = fx.f("in.weight");
        const veci labels = fx.i("in.labels");
        const double ref_loss = fx.f("out.loss_sum").at(0);
        QCOMPARE(
            static_cast<int>(std::count_if(labels.begin(), labels.end(), [](int32_t l) { return l != kIgnoreIndex; })),
            fx.i("out.count").at(0));
        for (int K : {1, 4, N}) {
            vecf dh(N * C), scratch(static_cast<size_t>(K) * V);
            const double loss =
                lm_head_cross_entropy(dh.data(), h.data(), w.data(), labels.data(), N, C, V, 1.0f, K, scratch.data());
            QVERIFY2(std::fabs(loss - ref_loss) <= kFwdTol * std::fabs(ref_loss),
                     qPrintable(QString("chunk %1: loss_sum %2 vs torch %3")
                                    .arg(K)
                                    .arg(loss, 0, 'g', 10)
                                    .arg(ref_loss, 0, 'g', 10)));
            CHECK_CLOSE(dh, fx.f("grad_in.hidden"), kGradTol, "cross-entropy grad hidden");
        }
        // lse of every row (ignored ones too), through the evaluation path.
        vecf logits(N * V), lse(N);
        lm_head_logits(logits.data(), h.data(), w.data(), N, C, V);
        for (int n = 0; n < N; n++) {
            double m = -INFINITY, s = 0;
            for (int i = 0; i < V; i++) m = std::max(m, static_cast<double>(logits[n * V + i]));
            for (int i = 0; i < V; i++) s += std::exp(logits[n * V + i] - m);
            lse[n] = static_cast<float>(m + std::log(s));
        }
        CHECK_CLOSE(lse, fx.f("out.lse"), kFwdTol, "lm_head logits -> lse");
        // grad_in.weight is not produced: the lm_head is frozen under LoRA.
    }

    void torch_embedding() {
        REQUIRE_OP_FIXTURE("embedding");
        const OpFixture fx = load_op("embedding");
        const auto ws = fx.shape("in.weight");
        const int V = static_cast<int>(ws[0]), C = static_cast<int>(ws[1]);
        const veci ids = fx.i("in.ids");
        const int N = static_cast<int>(ids.size());
        const vecf w = fx.f("in.weight");
        vecf y(N * C), dw(V * C, 0.0f);
        embedding_forward(y.data(), ids.data(), w.data(), N, C, V);
        CHECK_CLOSE(y, fx.f("out.y"), kFwdTol, "embedding y");
        embedding_backward(dw.data(), fx.f("grad_out.y").data(), ids.data(), N, C, V);
        CHECK_CLOSE(dw, fx.f("grad_in.weight"), kGradTol, "embedding grad weight");
    }

    void torch_adamw() {
        REQUIRE_OP_FIXTURE("adamw");
        const OpFixture fx = load_op("adamw");
        vecf p = fx.f("in.param"), m = fx.f("in.exp_avg"), v = fx.f("in.exp_avg_sq");
        const vecf g = fx.f("in.grad");
        double b1 = 0.9, b2 = 0.999;
        if (fx.params.contains("betas") && fx.params["betas"].is_array() && fx.params["betas"].size() == 2) {
            b1 = fx.params["betas"][0].get<double>();
            b2 = fx.params["betas"][1].get<double>();
        }
        adamw_update(p.data(), g.data(), m.data(), v.data(), static_cast<int64_t>(p.size()), fx.num("lr", 1e-3), b1, b2,
                     fx.num("eps", 1e-8), fx.num("weight_decay", 0.01), static_cast<int64_t>(fx.num("step", 1)));
        CHECK_CLOSE(p, fx.f("out.param"), kFwdTol, "adamw param");
        CHECK_CLOSE(m, fx.f("out.exp_avg"), kFwdTol, "adamw exp_avg");
        CHECK_CLOSE(v, fx.f("out.exp_avg_sq"), kFwdTol, "adamw exp_avg_sq");
        // The step moves the parameter by ~lr: compare the update itself too, which the check above would hide.
        const vecf p0 = fx.f("in.param"), pr = fx.f("out.param");
        vecf du(p.size()), dr(p.size());
        for (size_t i = 0; i < p.size(); i++) du[i] = p[i] - p0[i], dr[i] = pr[i] - p0[i];
        CHECK_CLOSE(du, dr, 1e-3, "adamw update (param - param0)");
    }

    // ---- 3. determinism across thread counts ----

    void deterministic_across_threads() {
        ThreadGuard guard;
        const veci cu{0, 1, 70, 71, 200, 257};
        const int S = 5, T = 257, Hq = 4, Hkv = 2, D = 32;
        const vecf q = rnd(T * Hq * D, 111, -2, 2), k = rnd(T * Hkv * D, 112, -2, 2), v = rnd(T * Hkv * D, 113),
                   dy = rnd(T * Hq * D, 114);
        const int N = 131, C = 48, V = 1000, K = 16;
        const vecf h = rnd(N * C, 115), w = rnd(V * C, 116);
        veci tg(N);
        for (int n = 0; n < N; n++) tg[n] = n % 5 == 0 ? kIgnoreIndex : (n * 37) % V;
        // GEMMs large enough for several tiles (and for OpenBLAS to have used its threads, which were not
        // deterministic: see gemm.h).
        const int MN = 300, MIN = 520, MOUT = 390;
        const vecf mx = rnd(MN * MIN, 117), mw = rnd(MOUT * MIN, 118), mdy = rnd(MN * MOUT, 119);
        struct Result {
            vecf out, lse, dq, dk, dv, dh, my, mdx, mdw;
            double loss = 0;
            bool operator==(const Result&) const = default;
        };
        auto run = [&](int threads) {
            set_cpu_threads(threads);
            Result r{
                vecf(q.size()), vecf(Hq * T), vecf(q.size()), vecf(k.size()), vecf(v.size()), vecf(N * C), {}, {}, {}};
            attention_forward(r.out.data(), r.lse.data(), q.data(), k.data(), v.data(), cu.data(), S, T, Hq, Hkv, D,
                              0.125f);
            attention_backward(r.dq.data(), r.dk.data(), r.dv.data(), dy.data(), q.data(), k.data(), v.data(),
                               r.out.data(), r.lse.data(), cu.data(), S, T, Hq, Hkv, D, 0.125f);
            vecf scratch(K * V);
            r.loss =
                lm_head_cross_entropy(r.dh.data(), h.data(), w.data(), tg.data(), N, C, V, 0.01f, K, scratch.data());
            r.my.resize(MN * MOUT);
            r.mdx.assign(MN * MIN, 0.0f);
            r.mdw.assign(MOUT * MIN, 0.0f);
            matmul_forward(r.my.data(), mx.data(), mw.data(), nullptr, MN, MIN, MOUT);
            matmul_backward(r.mdx.data(), r.mdw.data(), nullptr, mdy.data(), mx.data(), mw.data(), MN, MIN, MOUT);
            return r;
        };
        const Result one = run(1), four = run(4);
        QVERIFY(one.out == four.out && one.lse == four.lse);
        QVERIFY2(one.dq == four.dq && one.dk == four.dk && one.dv == four.dv,
                 "attention_backward differs with 4 threads");
        QVERIFY2(one.loss == four.loss,
                 qPrintable(QString("CE loss %1 vs %2").arg(one.loss, 0, 'g', 17).arg(four.loss, 0, 'g', 17)));
        QVERIFY2(one.dh == four.dh, "CE dhidden differs with 4 threads");
        QVERIFY2(one.my == four.my && one.mdx == four.mdx && one.mdw == four.mdw, "sgemm differs with 4 threads");
        expect_error([] { set_cpu_threads(0); }, ErrorCategory::Internal, {"threads >= 1"});
    }
};

QTEST_GUILESS_MAIN(TestKernelsCpu)
#include "test_kernels_cpu.moc"
