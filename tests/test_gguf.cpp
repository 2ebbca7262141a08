// SPDX-FileCopyrightText: 2026 The Tandem developers
// SPDX-License-Identifier: GPL-3.0-or-later
// GGUF export: the block formats round-trip within their known error, the container re-reads with our parser
// (header, KVs, tensor infos, alignment, sizes), every format of a run exports (the demo model at k-quant-friendly
// sizes and the real tiny Llama from ../shared/assets) with the merged, permuted values inside each file, the
// tokenizer and the Modelfile are what llama.cpp and Ollama expect, and bad input fails clearly leaving nothing.
// llama.cpp itself reads these files in tests/reference/gguf_llamacpp_check.sh (GPU machine, not CI).
#include <QTest>

#include <cmath>
#include <random>

#include <nlohmann/json.hpp>

#include "export/gguf.h"
#include "export/gguf_file.h"
#include "export/gguf_quant.h"
#include "export/merged.h"
#include "export/peft_adapter.h"
#include "tandem/demo_model.h"
#include "tandem/model_config.h"
#include "tandem/run_config.h"
#include "tandem/safetensors.h"
#include "tandem/tokenizer.h"
#include "tandem/trainer.h"
#include "core/files.h"
#include "test_support.h"

using namespace tandem;
using namespace tandem::gguf;
using namespace tandem::test;
namespace fs = std::filesystem;

namespace {

std::vector<float> gaussian(size_t n, uint64_t seed, float sigma = 1.0f) {
    std::mt19937_64 rng(seed);
    std::normal_distribution<float> d(0.0f, sigma);
    std::vector<float> v(n);
    for (float& x : v) x = d(rng);
    return v;
}

std::vector<float> round_trip(GgmlType t, const std::vector<float>& x, int64_t row) {
    std::vector<float> y(x.size());
    std::vector<std::byte> b(ggml_row_bytes(t, row));
    for (size_t r = 0; r < x.size() / size_t(row); ++r) {
        quantize_row(t, std::span(x).subspan(r * row, row), b);
        dequantize_row(t, b, std::span(y).subspan(r * row, row));
    }
    return y;
}

double rel_rms(const std::vector<float>& x, const std::vector<float>& y) {
    double e = 0, s = 0;
    for (size_t i = 0; i < x.size(); ++i) e += double(x[i] - y[i]) * (x[i] - y[i]), s += double(x[i]) * x[i];
    return std::sqrt(e / s);
}

// A run folder with `lora` and random A and B (so the merge changes every adapted weight).
fs::path make_run(const fs::path& root, const std::string& name, const fs::path& model_dir, const LoraConfig& lora,
                  bool with_adapter = true) {
    const fs::path run = root / name;
    RunConfig rc;
    rc.model = model_dir.string();
    rc.data.dataset = "unused.jsonl";
    rc.lora = lora;
    rc.output_dir = run.string();
    nlohmann::json j;
    to_json(j, rc);
    write_file(run / "config.json", j.dump(2));
    if (with_adapter) {
        const ModelConfig m = load_model_config(model_dir);
        LoraTensors t;
        uint64_t seed = 7;
        for (const auto& s : lora_tensor_specs(m, lora))
            t[s.name] = gaussian(size_t(s.shape[0] * s.shape[1]), seed++, 0.05f);
        write_peft_adapter(run / "adapter", lora, m, model_dir.string(), t);
    }
    return run;
}

const GgufValue& kv(const GgufFile& g, const std::string& key) {
    const GgufValue* v = g.find(key);
    if (!v) throw std::runtime_error("missing key " + key);
    return *v;
}

void check_structure(const fs::path& file, const GgufFile& g) {
    QCOMPARE(g.version, 3u);
    QCOMPARE(g.data_offset % 32, uint64_t(0));
    uint64_t end = 0;
    for (const auto& t : g.tensors) {
        QCOMPARE(t.offset % 32, uint64_t(0));
        end = std::max(end, t.offset + t.bytes);
    }
    // The data section ends with the last tensor, padded to the alignment.
    QCOMPARE(g.file_size, g.data_offset + (end + 31) / 32 * 32);
    QCOMPARE(g.file_size, uint64_t(fs::file_size(file)));
}

bool no_partial(const fs::path& dir) {
    for (const auto& e : fs::directory_iterator(dir))
        if (e.path().filename().string().find(".partial-") != std::string::npos) return false;
    return true;
}

// W + scaling * B A, naive loops: an independent check of the merge.
std::vector<float> merged_weight(const SafetensorsSet& base, const std::string& name, const LoraTensors& t,
                                 const std::string& a_name, const std::string& b_name, double scaling) {
    std::vector<float> w = tensor_to_f32(base.at(name));
    const auto& shape = base.at(name).shape;
    const auto& A = t.at(a_name);
    const auto& B = t.at(b_name);
    const int64_t out = shape[0], in = shape[1], r = int64_t(A.size()) / in;
    for (int64_t o = 0; o < out; ++o)
        for (int64_t i = 0; i < in; ++i) {
            double s = 0;
            for (int64_t k = 0; k < r; ++k) s += double(B[o * r + k]) * A[k * in + i];
            w[o * in + i] += float(scaling * s);
        }
    return w;
}

}  // namespace

class TestGguf : public QObject {
    Q_OBJECT

private slots:
    // Each block format round-trips Gaussian rows within its known error (relative RMS: Q8_0 ~0.5%, Q6_K ~1.8%,
    // Q5_K ~3.5%, Q4_K ~7%: a step of the block's range over the levels, / sqrt(12)), Q8_0 within half a step per
    // value, the k-quant search beats plain min/max scaling,
    // and all-zero / constant rows decode exactly.
    void quantRoundTrip() {
        const int64_t row = 1024;
        const auto x = gaussian(size_t(row) * 16, 1);
        struct Bound {
            GgmlType t;
            double max_rel;
        };
        for (const Bound b : {Bound{GgmlType::F16, 1e-3}, Bound{GgmlType::BF16, 5e-3}, Bound{GgmlType::Q8_0, 0.006},
                              Bound{GgmlType::Q6_K, 0.022}, Bound{GgmlType::Q5_K, 0.042}, Bound{GgmlType::Q4_K, 0.08},
                              Bound{GgmlType::Q5_0, 0.05}, Bound{GgmlType::Q5_1, 0.05}}) {
            const auto y = round_trip(b.t, x, row);
            const double e = rel_rms(x, y);
            qInfo("%s: relative RMS error %.5f", ggml_type_name(b.t).data(), e);
            QVERIFY2(e < b.max_rel, ggml_type_name(b.t).data());
            QVERIFY2(e > b.max_rel / 20, "suspiciously exact: is the type really quantizing?");
        }
        // Q8_0: each value within half a step of its block's scale (amax / 127, fp16-rounded).
        const auto y = round_trip(GgmlType::Q8_0, x, row);
        for (size_t b = 0; b < x.size() / 32; ++b) {
            float amax = 0;
            for (int l = 0; l < 32; ++l) amax = std::max(amax, std::fabs(x[32 * b + l]));
            for (int l = 0; l < 32; ++l) QVERIFY(std::fabs(x[32 * b + l] - y[32 * b + l]) <= amax / 127 * 0.51f);
        }
        // The search matters: on skewed data (exponential-like, one big value per sub-block) the k-quant error is
        // below what mapping [min, max] straight onto the levels gives.
        std::vector<float> skew = gaussian(size_t(row) * 4, 2);
        for (size_t i = 0; i < skew.size(); ++i) skew[i] = std::exp(skew[i]) * (i % 32 == 0 ? 3.0f : 1.0f);
        const double e4 = rel_rms(skew, round_trip(GgmlType::Q4_K, skew, row));
        double naive = 0, s = 0;
        for (size_t i = 0; i < skew.size(); i += 32) {
            float lo = 0, hi = skew[i];
            for (int l = 0; l < 32; ++l) lo = std::min(lo, skew[i + l]), hi = std::max(hi, skew[i + l]);
            for (int l = 0; l < 32; ++l) {
                const float q = std::round((skew[i + l] - lo) / (hi - lo) * 15) * (hi - lo) / 15 + lo;
                naive += double(q - skew[i + l]) * (q - skew[i + l]), s += double(skew[i + l]) * skew[i + l];
            }
        }
        qInfo("Q4_K on skewed data: %.5f (plain min/max scaling before scale quantization: %.5f)", e4, std::sqrt(naive / s));
        QVERIFY(e4 < std::sqrt(naive / s) * 1.05);
        for (GgmlType t : {GgmlType::Q8_0, GgmlType::Q4_K, GgmlType::Q5_K, GgmlType::Q6_K, GgmlType::Q5_0,
                           GgmlType::Q5_1}) {
            const std::vector<float> zero(256, 0.0f), cst(256, 0.5f);
            QVERIFY(round_trip(t, zero, 256) == zero);
            const auto c = round_trip(t, cst, 256);
            for (float v : c) QVERIFY2(std::fabs(v - 0.5f) < 0.5f * 0.01f, ggml_type_name(t).data());
        }
        expect_error([] { std::vector<float> v(100); std::vector<std::byte> b(1000); quantize_row(GgmlType::Q4_K, v, b); },
                     ErrorCategory::Internal, {"Q4_K"});
    }

    // The container: KVs of every kind, tensors of every type, re-read by our parser; corrupt files are refused.
    void containerRoundTrip() {
        QTemporaryDir tmp;
        const fs::path file = fs::path(tmp.path().toStdString()) / "t.gguf";
        GgufHeader h;
        h.add_string("general.architecture", "llama");
        h.add_u32("a.u32", 7);
        h.add_i32("a.i32", -3);
        h.add_f32("a.f32", 0.25f);
        h.add_bool("a.bool", true);
        h.add_strings("a.strs", {"x", "", "ü"});
        h.add_f32s("a.f32s", {1.5f, -2});
        h.add_i32s("a.i32s", {1, 2, 3});
        const std::vector<GgmlType> types = {GgmlType::F32, GgmlType::F16, GgmlType::BF16, GgmlType::Q8_0,
                                             GgmlType::Q4_K, GgmlType::Q5_K, GgmlType::Q6_K};
        std::vector<std::vector<float>> data;
        for (size_t i = 0; i < types.size(); ++i) {
            h.add_tensor("t" + std::to_string(i), {3, 256}, types[i]);
            data.push_back(gaussian(3 * 256, 10 + i));
        }
        h.add_tensor("bias", {5}, GgmlType::F32);
        data.push_back({1, 2, 3, 4, 5});
        {
            GgufStreamWriter w(file, h);
            std::vector<std::byte> b;
            for (size_t i = 0; i < data.size(); ++i) {
                const int64_t row = h.tensors()[i].shape.back();
                for (size_t r = 0; r < data[i].size() / size_t(row); ++r) {
                    b.resize(ggml_row_bytes(h.tensors()[i].type, row));
                    quantize_row(h.tensors()[i].type, std::span(data[i]).subspan(r * row, row), b);
                    w.write(b);
                }
            }
            w.finish();
        }
        QCOMPARE(uint64_t(fs::file_size(file)), h.file_size());
        const GgufFile g = read_gguf(file);
        check_structure(file, g);
        QCOMPARE(g.kv.size(), size_t(8));
        QCOMPARE(kv(g, "general.architecture").s, std::string("llama"));
        QCOMPARE(kv(g, "a.u32").i, int64_t(7));
        QVERIFY(kv(g, "a.u32").type == ValueType::U32);
        QCOMPARE(kv(g, "a.i32").i, int64_t(-3));
        QCOMPARE(kv(g, "a.f32").f, 0.25);
        QCOMPARE(kv(g, "a.bool").i, int64_t(1));
        QVERIFY((kv(g, "a.strs").ss == std::vector<std::string>{"x", "", "ü"}));
        QVERIFY((kv(g, "a.f32s").fs == std::vector<double>{1.5, -2}));
        QVERIFY((kv(g, "a.i32s").is == std::vector<int64_t>{1, 2, 3}));
        QCOMPARE(g.tensors.size(), types.size() + 1);
        for (size_t i = 0; i < types.size(); ++i) {
            const auto& t = g.tensors[i];
            QVERIFY(t.type == types[i]);
            QVERIFY((t.ne == std::vector<int64_t>{256, 3}));  // ggml order
            QCOMPARE(g.read_f32(file, t.name), round_trip(types[i], data[i], 256));
        }
        QCOMPARE(g.read_f32(file, "bias"), data.back());

        // Corruptions: each is refused with a message naming the file.
        const std::string bytes = read_file(file);
        auto corrupt = [&](const std::string& b, const std::string& needle) {
            const fs::path bad = fs::path(tmp.path().toStdString()) / "bad.gguf";
            write_file(bad, b);
            expect_error([&] { read_gguf(bad); }, ErrorCategory::InvalidInput, {"bad.gguf", needle});
        };
        corrupt("GGUX" + bytes.substr(4), "magic");
        corrupt(bytes.substr(0, 200), "truncated");
        corrupt(bytes.substr(0, g.data_offset + 100), "past the end");
        std::string v4 = bytes;
        v4[4] = 4;
        corrupt(v4, "version 4");
        // Writing more than the header declares is a bug, caught.
        GgufHeader small;
        small.add_tensor("x", {2}, GgmlType::F32);
        GgufStreamWriter w(fs::path(tmp.path().toStdString()) / "small.gguf", small);
        const std::vector<std::byte> twelve(12);
        expect_error([&] { w.write(twelve); }, ErrorCategory::Internal, {"more data"});
    }

    // Every GGUF quant of a run on the demo model (Llama layout, dims multiples of 256 so the k-quants apply):
    // structure, llama.cpp's keys, the quant mix per tensor, and the values (merged, Q/K-permuted) per type.
    void demoModelEveryQuant() {
        QTemporaryDir tmp;
        const fs::path root = tmp.path().toStdString();
        DemoModelSpec spec;
        spec.hidden_size = 256;
        spec.intermediate_size = 512;
        spec.num_hidden_layers = 2;
        spec.num_attention_heads = 4;
        spec.num_key_value_heads = 2;
        create_demo_model(root / "model", spec);
        LoraConfig lora;
        lora.r = 4;
        lora.alpha = 8;
        lora.target_modules = {"q_proj", "k_proj", "v_proj", "o_proj", "gate_proj", "up_proj", "down_proj"};
        const fs::path run = make_run(root, "run", root / "model", lora);
        const ModelConfig m = load_model_config(root / "model");
        const PeftAdapter adapter = read_peft_adapter(run / "adapter", m);
        const SafetensorsSet base = SafetensorsSet::open(root / "model");
        const int64_t D = m.head_dim;
        const std::string qa = peft_tensor_name(0, "self_attn.q_proj", true), qb = peft_tensor_name(0, "self_attn.q_proj", false);
        const std::vector<float> q_merged =
            merged_weight(base, "model.layers.0.self_attn.q_proj.weight", adapter.tensors, qa, qb, lora.scaling());
        const std::vector<float> v_merged = merged_weight(base, "model.layers.1.self_attn.v_proj.weight", adapter.tensors,
                                                          peft_tensor_name(1, "self_attn.v_proj", true),
                                                          peft_tensor_name(1, "self_attn.v_proj", false), lora.scaling());
        // llama.cpp's row order for q: row h*D + 2i + j holds transformers' row h*D + j*D/2 + i.
        std::vector<float> q_expect(q_merged.size());
        const int64_t C = m.hidden_size;
        for (int64_t h = 0; h < m.num_attention_heads; ++h)
            for (int64_t i = 0; i < D / 2; ++i)
                for (int64_t j = 0; j < 2; ++j)
                    for (int64_t c = 0; c < C; ++c)
                        q_expect[size_t((h * D + 2 * i + j) * C + c)] = q_merged[size_t((h * D + j * D / 2 + i) * C + c)];

        struct Case {
            const char* quant;
            uint32_t ftype;
            GgmlType attn_q, attn_v0, attn_v1, embd;
            double tol;  // relative RMS of the q weight
        };
        const Case cases[] = {
            {"f16", 1, GgmlType::F16, GgmlType::F16, GgmlType::F16, GgmlType::F16, 1e-3},
            {"bf16", 32, GgmlType::BF16, GgmlType::BF16, GgmlType::BF16, GgmlType::BF16, 5e-3},
            {"q8_0", 7, GgmlType::Q8_0, GgmlType::Q8_0, GgmlType::Q8_0, GgmlType::Q8_0, 0.01},
            {"q6_k", 18, GgmlType::Q6_K, GgmlType::Q6_K, GgmlType::Q6_K, GgmlType::Q6_K, 0.02},
            {"q5_k_m", 17, GgmlType::Q5_K, GgmlType::Q5_K, GgmlType::Q6_K, GgmlType::Q6_K, 0.04},
            {"q4_k_m", 15, GgmlType::Q4_K, GgmlType::Q4_K, GgmlType::Q6_K, GgmlType::Q6_K, 0.08},
        };
        for (const Case& c : cases) {
            ExportOptions o;
            o.format = "gguf";
            o.quant = c.quant;
            uint64_t last = 0;
            o.progress = [&](uint64_t done, uint64_t) { last = done; };
            const fs::path out = root / (std::string("out-") + c.quant);
            QCOMPARE(export_run(run, out, o), std::string("adapter"));
            const fs::path file = out / gguf_model_file_name(parse_gguf_quant(c.quant));
            QVERIFY2(fs::exists(file), file.c_str());
            QVERIFY(fs::exists(out / "Modelfile"));
            const GgufFile g = read_gguf(file);
            check_structure(file, g);
            QCOMPARE(last, g.file_size);
            const uint64_t estimate = estimate_export_bytes(run, o);
            QVERIFY2(estimate > g.file_size / 2 && estimate < g.file_size * 2, c.quant);
            QCOMPARE(kv(g, "general.architecture").s, std::string("llama"));
            QCOMPARE(kv(g, "general.type").s, std::string("model"));
            QCOMPARE(kv(g, "general.file_type").i, int64_t(c.ftype));
            QCOMPARE(kv(g, "llama.block_count").i, int64_t(2));
            QCOMPARE(kv(g, "llama.embedding_length").i, int64_t(256));
            QCOMPARE(kv(g, "llama.feed_forward_length").i, int64_t(512));
            QCOMPARE(kv(g, "llama.attention.head_count").i, int64_t(4));
            QCOMPARE(kv(g, "llama.attention.head_count_kv").i, int64_t(2));
            QCOMPARE(kv(g, "llama.rope.dimension_count").i, D);
            QCOMPARE(kv(g, "tokenizer.ggml.model").s, std::string("llama"));
            QCOMPARE(int64_t(kv(g, "tokenizer.ggml.tokens").count), m.vocab_size);
            QVERIFY(kv(g, "tokenizer.chat_template").s.find("<|im_start|>") != std::string::npos);
            // Every base tensor is there under its llama.cpp name (2 layers x 9, embeddings, final norm, lm_head
            // unless tied).
            const size_t expect = 2 * 9 + 2 + (m.tie_word_embeddings ? 0 : 1);
            QCOMPARE(g.tensors.size(), expect);
            QVERIFY(g.tensor("blk.1.ffn_down.weight") && g.tensor("blk.0.attn_norm.weight") && g.tensor("output_norm.weight"));
            QVERIFY(g.tensor("blk.0.attn_q.weight")->type == c.attn_q);
            QVERIFY2(g.tensor("blk.0.attn_v.weight")->type == c.attn_v0, c.quant);
            QVERIFY2(g.tensor("blk.1.attn_v.weight")->type == c.attn_v1, c.quant);  // the last eighth: more bits
            QVERIFY(g.tensor("blk.0.attn_norm.weight")->type == GgmlType::F32);
            const GgufTensorInfo* head = g.tensor(m.tie_word_embeddings ? "token_embd.weight" : "output.weight");
            QVERIFY2(head->type == c.embd, c.quant);
            QVERIFY((g.tensor("blk.0.attn_q.weight")->ne == std::vector<int64_t>{C, m.num_attention_heads * D}));
            // Values: merged and permuted, within the type's error.
            const double eq = rel_rms(q_expect, g.read_f32(file, "blk.0.attn_q.weight"));
            const double ev = rel_rms(v_merged, g.read_f32(file, "blk.1.attn_v.weight"));  // v is not permuted
            qInfo("%s: attn_q error %.5f, attn_v error %.5f", c.quant, eq, ev);
            QVERIFY2(eq < c.tol && ev < c.tol, c.quant);
            QVERIFY(no_partial(root));
        }
        // Unmerged or unpermuted would be far off: the check above can fail.
        QVERIFY(rel_rms(q_merged, q_expect) > 0.5);
        // An existing export is not overwritten without --force; with it, it is.
        ExportOptions o;
        o.format = "gguf";
        expect_error([&] { export_run(run, root / "out-f16", o); }, ErrorCategory::InvalidInput, {"not empty"});
        o.overwrite = true;
        export_run(run, root / "out-f16", o);
        // The Modelfile: FROM the file, ChatML, the end tokens.
        const std::string mf = read_file(root / "out-f16" / "Modelfile");
        QVERIFY2(mf.find("FROM ./model-F16.gguf\n") != std::string::npos, mf.c_str());
        QVERIFY2(mf.find("<|im_start|>{{ .Role }}") != std::string::npos, mf.c_str());
        QVERIFY2(mf.find("PARAMETER stop \"<|im_end|>\"") != std::string::npos, mf.c_str());
    }

    // The GGUF LoRA adapter: llama.cpp's names and shapes, alpha giving the same scale (rsLoRA too), lora_b of
    // q/k permuted like the base.
    void loraAdapter() {
        QTemporaryDir tmp;
        const fs::path root = tmp.path().toStdString();
        DemoModelSpec spec;
        create_demo_model(root / "model", spec);
        const ModelConfig m = load_model_config(root / "model");
        for (const bool rs : {false, true}) {
            LoraConfig lora;
            lora.r = 4;
            lora.alpha = 8;
            lora.use_rslora = rs;
            lora.target_modules = {"q_proj", "v_proj", "down_proj"};
            const std::string name = rs ? "rs" : "plain";
            const fs::path run = make_run(root, "run-" + name, root / "model", lora);
            ExportOptions o;
            o.format = "gguf-lora";
            o.quant = "f32";
            export_run(run, root / ("lora-" + name), o);
            const fs::path file = root / ("lora-" + name) / "adapter-F32.gguf";
            const GgufFile g = read_gguf(file);
            check_structure(file, g);
            QCOMPARE(kv(g, "general.type").s, std::string("adapter"));
            QCOMPARE(kv(g, "adapter.type").s, std::string("lora"));
            QCOMPARE(kv(g, "general.architecture").s, std::string("llama"));
            // llama.cpp's scale is alpha / r: 8 / 4 = 2 for LoRA, 8 / sqrt(4) = 4 for rsLoRA.
            QCOMPARE(kv(g, "adapter.lora.alpha").f / 4.0, lora.scaling());
            QCOMPARE(kv(g, "adapter.lora.alpha").f, rs ? 16.0 : 8.0);
            QCOMPARE(g.tensors.size(), size_t(m.num_hidden_layers * 3 * 2));
            const auto* a = g.tensor("blk.0.attn_q.weight.lora_a");
            const auto* b = g.tensor("blk.0.attn_q.weight.lora_b");
            QVERIFY(a && b && g.tensor("blk.1.ffn_down.weight.lora_b") && g.tensor("blk.1.attn_v.weight.lora_a"));
            QVERIFY((a->ne == std::vector<int64_t>{m.hidden_size, 4}));   // A [r, in]
            QVERIFY((b->ne == std::vector<int64_t>{4, m.q_dim()}));       // B [out, r]
            const PeftAdapter ad = read_peft_adapter(run / "adapter", m);
            QCOMPARE(g.read_f32(file, "blk.0.attn_q.weight.lora_a"), ad.tensors.at(peft_tensor_name(0, "self_attn.q_proj", true)));
            const auto& B = ad.tensors.at(peft_tensor_name(0, "self_attn.q_proj", false));
            const auto Bg = g.read_f32(file, "blk.0.attn_q.weight.lora_b");
            const int64_t D = m.head_dim;
            for (int64_t h = 0; h < m.num_attention_heads; ++h)
                for (int64_t i = 0; i < D / 2; ++i)
                    for (int64_t j = 0; j < 2; ++j)
                        for (int64_t k = 0; k < 4; ++k)
                            QCOMPARE(Bg[size_t((h * D + 2 * i + j) * 4 + k)], B[size_t((h * D + j * D / 2 + i) * 4 + k)]);
            QCOMPARE(g.read_f32(file, "blk.1.attn_v.weight.lora_b"), ad.tensors.at(peft_tensor_name(1, "self_attn.v_proj", false)));
        }
        ExportOptions bad;
        bad.format = "gguf-lora";
        bad.quant = "q4_k_m";
        expect_error([&] { export_run(root / "run-plain", root / "lora-q4", bad); }, ErrorCategory::InvalidInput,
                     {"f32, f16 or bf16"});
        QVERIFY(!fs::exists(root / "lora-q4"));
    }

    // The real tiny Llama (SentencePiece vocabulary of 105 pieces, tied embeddings, head_dim 16): the tokenizer
    // metadata llama.cpp reads, the tied embedding as token_embd only, the plain-prompt Modelfile.
    void realTinyLlama() {
        const fs::path model = assets() / "babyllama-tok105" / "hf";
        TANDEM_REQUIRE_ASSET(model);
        QTemporaryDir tmp;
        const fs::path root = tmp.path().toStdString();
        LoraConfig lora;
        lora.r = 8;
        lora.alpha = 16;
        const fs::path run = make_run(root, "run", model, lora);
        for (const char* q : {"f16", "q8_0", "q4_k_m"}) {
            ExportOptions o;
            o.format = "gguf";
            o.quant = q;
            export_run(run, root / q, o);
            const fs::path file = root / q / gguf_model_file_name(parse_gguf_quant(q));
            const GgufFile g = read_gguf(file);
            check_structure(file, g);
            QVERIFY(!g.tensor("output.weight"));  // tied
            QCOMPARE(g.tensors.size(), size_t(5 * 9 + 2));
            const auto& tokens = kv(g, "tokenizer.ggml.tokens").ss;
            QCOMPARE(tokens.size(), size_t(105));
            QCOMPARE(tokens[3], std::string("▁"));
            QCOMPARE(kv(g, "tokenizer.ggml.bos_token_id").i, int64_t(1));
            QCOMPARE(kv(g, "tokenizer.ggml.eos_token_id").i, int64_t(2));
            QCOMPARE(kv(g, "tokenizer.ggml.unknown_token_id").i, int64_t(0));
            QCOMPARE(kv(g, "tokenizer.ggml.add_bos_token").i, int64_t(1));
            QCOMPARE(kv(g, "tokenizer.ggml.add_eos_token").i, int64_t(0));
            QCOMPARE(kv(g, "tokenizer.ggml.add_space_prefix").i, int64_t(1));
            const auto& types = kv(g, "tokenizer.ggml.token_type").is;
            QCOMPARE(types[0], int64_t(2));  // <unk>: UNKNOWN
            QCOMPARE(types[1], int64_t(3));  // <s>: CONTROL
            QCOMPARE(types[4], int64_t(1));
            QCOMPARE(kv(g, "tokenizer.ggml.scores").count, uint64_t(105));
            // Rows of 128 do not fill a 256-value k-quant block: llama.cpp's fallback, Q4_K -> Q5_0.
            if (std::string(q) == "q4_k_m") QVERIFY(g.tensor("blk.0.attn_q.weight")->type == GgmlType::Q5_0);
            const std::string mf = read_file(root / q / "Modelfile");
            QVERIFY2(mf.find("TEMPLATE \"\"\"{{ .Prompt }}\"\"\"") != std::string::npos, mf.c_str());
            QVERIFY2(mf.find("PARAMETER stop \"</s>\"") != std::string::npos, mf.c_str());
            QVERIFY(mf.find("SYSTEM") == std::string::npos);
        }
    }

    // Mixtures of experts: llama.cpp's qwen3moe (Qwen3-MoE, transformers 5's fused experts) and llama with experts
    // (Mixtral, the Hub's per-expert tensors). The experts as ffn_gate_exps / ffn_up_exps [E, F, H] and
    // ffn_down_exps [E, H, F], the router as ffn_gate_inp, with the LoRA merged: equal to the merged export's
    // tensors (gate_up split, per-expert tensors stacked); expert counts in the metadata; a GGUF LoRA adapter of
    // expert LoRA is refused (llama.cpp's adapters cannot hold it).
    void mixtureOfExperts() {
        const fs::path tok_src = assets() / "babyllama-tok105" / "hf";
        TANDEM_REQUIRE_ASSET(tok_src);
        QTemporaryDir tmp;
        const fs::path root = tmp.path().toStdString();
        for (const char* v : {"qwen3-moe", "mixtral", "gpt-oss", "gpt-oss/mxfp4"}) {
            const bool oss = std::string(v).rfind("gpt-oss", 0) == 0;
            const fs::path src = fixtures() / "models" / v, model = root / v;
            const fs::path home = std::string(v) == "gpt-oss/mxfp4" ? src.parent_path() : src;  // its adapter
            fs::create_directories(model);
            const bool qwen = std::string(v) == "qwen3-moe";
            if (qwen) {
                // llama.cpp's qwen3moe routes in every layer: the fixture's dense layer 1 is refused; its layer 0
                // alone (an MoE layer) is exported.
                const ModelConfig full = load_model_config(src);
                expect_error([&] { write_gguf_model(src, full, LoraConfig{}, {}, root / "refused"); },
                             ErrorCategory::Unsupported, {"layer 1", "dense MLP"});
                nlohmann::json c = nlohmann::json::parse(read_file(src / "config.json"));
                c["num_hidden_layers"] = 1;
                c["mlp_only_layers"] = nlohmann::json::array();
                write_file(model / "config.json", c.dump(1));
                const SafetensorsFile f(src / "model.safetensors");
                std::vector<std::vector<float>> keep;
                std::vector<TensorToWrite> out;
                keep.reserve(f.tensors().size());
                for (const TensorInfo& t : f.tensors())
                    if (t.name.rfind("model.layers.", 0) != 0 || t.name.rfind("model.layers.0.", 0) == 0) {
                        keep.push_back(tensor_to_f32(t));
                        out.push_back({t.name, DType::F32, t.shape, std::as_bytes(std::span<const float>(keep.back()))});
                    }
                write_safetensors(model / "model.safetensors", out, {{"format", "pt"}});
            } else {
                fs::copy_file(src / "config.json", model / "config.json");
                fs::copy_file(src / "model.safetensors", model / "model.safetensors");
            }
            // babyllama's character-level tokenizer without the ids beyond the fixture's 101 rows.
            nlohmann::json tj = nlohmann::json::parse(read_file(tok_src / "tokenizer.json"));
            nlohmann::json kept = nlohmann::json::object();
            for (const auto& [text, id] : tj["model"]["vocab"].items())
                if (id.get<int64_t>() < 101) kept[text] = id;
            tj["model"]["vocab"] = kept;
            nlohmann::json merges = nlohmann::json::array();
            for (const auto& m : tj["model"]["merges"]) {
                const std::string ms = m.is_string() ? m.get<std::string>() : m[0].get<std::string>() + " " + m[1].get<std::string>();
                const size_t sp = ms.find(' ');
                if (kept.contains(ms.substr(0, sp)) && kept.contains(ms.substr(sp + 1)) &&
                    kept.contains(ms.substr(0, sp) + ms.substr(sp + 1)))
                    merges.push_back(m);
            }
            tj["model"]["merges"] = merges;
            write_file(model / "tokenizer.json", tj.dump());
            fs::copy_file(tok_src / "tokenizer_config.json", model / "tokenizer_config.json");
            const ModelConfig m = load_model_config(model);
            PeftAdapter a = read_peft_adapter(home / "adapter", load_model_config(src));
            if (qwen) {  // the fixture adapter's config, random tensors for the one-layer model
                a.tensors.clear();
                uint64_t seed = 11;
                for (const auto& sp : lora_tensor_specs(m, a.config))
                    a.tensors[sp.name] = gaussian(size_t(sp.shape[0] * sp.shape[1]), seed++, 0.05f);
            }
            GgufOptions go;
            go.quant = GgufQuant::F32;
            write_gguf_model(model, m, a.config, a.tensors, root / (std::string(v) + "-gguf"), go);
            MergeOptions mo;
            mo.dtype = DType::F32;
            write_merged_model(model, m, a.config, a.tensors, root / (std::string(v) + "-merged"), mo);
            const fs::path file = root / (std::string(v) + "-gguf") / gguf_model_file_name(GgufQuant::F32);
            const GgufFile g = read_gguf(file);
            check_structure(file, g);
            const std::string arch = kv(g, "general.architecture").s;
            QCOMPARE(arch, std::string(std::string(v) == "mixtral" ? "llama" : oss ? "gpt-oss" : "qwen3moe"));
            QCOMPARE(kv(g, arch + ".expert_count").i, m.num_experts);
            if (oss) {
                QCOMPARE(kv(g, "gpt-oss.rope.scaling.type").s, std::string("yarn"));
                QCOMPARE(kv(g, "gpt-oss.attention.sliding_window").i, m.sliding_window);
            }
            QCOMPARE(kv(g, arch + ".expert_used_count").i, m.num_experts_per_tok);
            const SafetensorsSet merged = SafetensorsSet::open(root / (std::string(v) + "-merged"));
            const int64_t E = m.num_experts, F = m.moe_intermediate_size, H = m.hidden_size;
            for (int64_t l = 0; l < m.num_hidden_layers; ++l) {
                if (!m.is_moe_layer(l)) continue;
                const std::string blk = "blk." + std::to_string(l) + ".", pre = "model.layers." + std::to_string(l) + ".";
                std::vector<float> gate, up, down;
                if (oss) {  // [E, H, 2F] with gate / up columns interleaved; down [E, F, H]
                    const std::vector<float> gu = tensor_to_f32(merged.at(pre + "mlp.experts.gate_up_proj"));
                    const std::vector<float> dn = tensor_to_f32(merged.at(pre + "mlp.experts.down_proj"));
                    for (int64_t e = 0; e < E; ++e)
                        for (int64_t f = 0; f < F; ++f)
                            for (int64_t h = 0; h < H; ++h) {
                                gate.push_back(gu[size_t((e * H + h) * 2 * F + 2 * f)]);
                                up.push_back(gu[size_t((e * H + h) * 2 * F + 2 * f + 1)]);
                            }
                    for (int64_t e = 0; e < E; ++e)
                        for (int64_t h = 0; h < H; ++h)
                            for (int64_t f = 0; f < F; ++f) down.push_back(dn[size_t((e * F + f) * H + h)]);
                    const std::vector<float> gub = tensor_to_f32(merged.at(pre + "mlp.experts.gate_up_proj_bias"));
                    std::vector<float> gate_b, up_b;
                    for (int64_t i = 0; i < E * F; ++i) {
                        gate_b.push_back(gub[size_t(2 * i)]);
                        up_b.push_back(gub[size_t(2 * i + 1)]);
                    }
                    QVERIFY(g.read_f32(file, blk + "ffn_gate_exps.bias") == gate_b);
                    QVERIFY(g.read_f32(file, blk + "ffn_up_exps.bias") == up_b);
                    QVERIFY(g.read_f32(file, blk + "ffn_down_exps.bias") ==
                            tensor_to_f32(merged.at(pre + "mlp.experts.down_proj_bias")));
                    QVERIFY(g.read_f32(file, blk + "attn_sinks.weight") == tensor_to_f32(merged.at(pre + "self_attn.sinks")));
                    QVERIFY(g.tensor(blk + "ffn_gate_inp.bias") && g.tensor(blk + "post_attention_norm.weight"));
                } else if (std::string(v) == "qwen3-moe") {
                    const std::vector<float> gu = tensor_to_f32(merged.at(pre + "mlp.experts.gate_up_proj"));
                    for (int64_t e = 0; e < E; ++e) {
                        gate.insert(gate.end(), gu.begin() + e * 2 * F * H, gu.begin() + e * 2 * F * H + F * H);
                        up.insert(up.end(), gu.begin() + e * 2 * F * H + F * H, gu.begin() + (e + 1) * 2 * F * H);
                    }
                    down = tensor_to_f32(merged.at(pre + "mlp.experts.down_proj"));
                    QVERIFY(g.tensor(blk + "ffn_gate_inp.weight")->ne == (std::vector<int64_t>{H, E}));
                } else {
                    for (int64_t e = 0; e < E; ++e) {
                        const std::string x = pre + "block_sparse_moe.experts." + std::to_string(e) + ".";
                        for (auto [dst, n] : {std::pair{&gate, "w1"}, std::pair{&up, "w3"}, std::pair{&down, "w2"}}) {
                            const std::vector<float> t = tensor_to_f32(merged.at(x + n + ".weight"));
                            dst->insert(dst->end(), t.begin(), t.end());
                        }
                    }
                }
                QVERIFY(g.tensor(blk + "ffn_gate_exps.weight")->ne == (std::vector<int64_t>{H, F, E}));
                QVERIFY(g.tensor(blk + "ffn_down_exps.weight")->ne == (std::vector<int64_t>{F, H, E}));
                QVERIFY(g.read_f32(file, blk + "ffn_gate_exps.weight") == gate);
                QVERIFY(g.read_f32(file, blk + "ffn_up_exps.weight") == up);
                QVERIFY(g.read_f32(file, blk + "ffn_down_exps.weight") == down);
            }
            expect_error([&] { write_gguf_lora(model, m, a.config, a.tensors, root / (std::string(v) + "-lora"), {}); },
                         ErrorCategory::Unsupported, {"experts", "--format gguf"});
        }
    }

    // Byte-level BPE vocabularies (Qwen3, Llama 3): gpt2 model, llama.cpp's pre-tokenizer name, merges, the
    // embedding rows beyond the tokenizer padded as unused tokens, special ids and the chat template.
    void byteLevelTokenizers() {
        struct Tok {
            const char* dir;
            int64_t vocab;
            const char* pre;
            const char* eos;
            bool add_bos;
            const char* stop;
        };
        for (const Tok t : {Tok{"tokenizer-qwen3", 151936, "qwen2", "<|im_end|>", false, "<|im_end|>"},
                            Tok{"tokenizer-llama3", 128256, "llama-bpe", "<|eot_id|>", true, "<|eot_id|>"}}) {
            const fs::path src = assets() / t.dir;
            TANDEM_REQUIRE_ASSET(src);
            QTemporaryDir tmp;
            const fs::path root = tmp.path().toStdString();
            DemoModelSpec spec;
            spec.hidden_size = 32;
            spec.intermediate_size = 64;
            spec.num_hidden_layers = 1;
            spec.num_attention_heads = 2;
            spec.num_key_value_heads = 1;
            spec.vocab_size = t.vocab;
            create_demo_model(root / "model", spec);
            fs::copy_file(src / "tokenizer.json", root / "model" / "tokenizer.json", fs::copy_options::overwrite_existing);
            fs::copy_file(src / "tokenizer_config.json", root / "model" / "tokenizer_config.json",
                          fs::copy_options::overwrite_existing);
            LoraConfig lora;
            lora.r = 2;
            lora.target_modules = {"q_proj"};
            const fs::path run = make_run(root, "run", root / "model", lora);
            ExportOptions o;
            o.format = "gguf";
            export_run(run, root / "out", o);
            const fs::path file = root / "out" / "model-F16.gguf";
            const GgufFile g = read_gguf(file);
            QCOMPARE(kv(g, "tokenizer.ggml.model").s, std::string("gpt2"));
            QCOMPARE(kv(g, "tokenizer.ggml.pre").s, std::string(t.pre));
            const auto& tokens = kv(g, "tokenizer.ggml.tokens").ss;
            QCOMPARE(int64_t(tokens.size()), t.vocab);
            const Tokenizer tok = Tokenizer::load(src);
            const int32_t eos = *tok.token_to_id(t.eos);
            QCOMPARE(kv(g, "tokenizer.ggml.eos_token_id").i, int64_t(eos));
            QCOMPARE(tokens[size_t(eos)], std::string(t.eos));
            QCOMPARE(kv(g, "tokenizer.ggml.token_type").is[size_t(eos)], int64_t(3));
            QCOMPARE(tokens[size_t(*tok.token_to_id("Ġthe"))], std::string("Ġthe"));
            QCOMPARE(kv(g, "tokenizer.ggml.add_bos_token").i, int64_t(t.add_bos));
            QVERIFY(kv(g, "tokenizer.ggml.merges").count > 100000);
            QCOMPARE(kv(g, "tokenizer.ggml.merges").ss[0].find(' ') != std::string::npos, true);
            QCOMPARE(kv(g, "tokenizer.chat_template").s, tok.config().chat_template);
            if (tok.vocab_size() < t.vocab) {
                QCOMPARE(tokens.back(), "[PAD" + std::to_string(t.vocab - 1) + "]");
                QCOMPARE(kv(g, "tokenizer.ggml.token_type").is.back(), int64_t(5));
            }
            const std::string mf = read_file(root / "out" / "Modelfile");
            QVERIFY2(mf.find(std::string("PARAMETER stop \"") + t.stop + "\"") != std::string::npos, mf.c_str());
            QVERIFY2(mf.find("TEMPLATE") != std::string::npos && mf.find("{{ .Prompt }}") == std::string::npos, mf.c_str());
        }
    }

    // A template with a default system prompt (Qwen2.5's) gives SYSTEM; one without gives none.
    void modelfileSystemPrompt() {
        const fs::path src = assets() / "tokenizer-qwen3";
        TANDEM_REQUIRE_ASSET(src);
        QTemporaryDir tmp;
        const fs::path root = tmp.path().toStdString();
        create_demo_model(root / "model");
        nlohmann::json cfg = nlohmann::json::parse(read_file(root / "model" / "tokenizer_config.json"));
        cfg["chat_template"] =
            "{%- if messages[0]['role'] == 'system' %}{{- '<|im_start|>system\\n' + messages[0]['content'] + "
            "'<|im_end|>\\n' }}{%- else %}{{- '<|im_start|>system\\nYou are Qwen, created by Alibaba Cloud. You are a "
            "helpful assistant.<|im_end|>\\n' }}{%- endif %}{%- for message in messages %}{%- if message.role != "
            "'system' %}{{- '<|im_start|>' + message.role + '\\n' + message.content + '<|im_end|>\\n' }}{%- endif "
            "%}{%- endfor %}{%- if add_generation_prompt %}{{- '<|im_start|>assistant\\n' }}{%- endif %}";
        write_file(root / "model" / "tokenizer_config.json", cfg.dump());
        const ModelConfig m = load_model_config(root / "model");
        const std::string mf = ollama_modelfile(root / "model", m, "x.gguf");
        QVERIFY2(mf.find("SYSTEM \"\"\"You are Qwen, created by Alibaba Cloud. You are a helpful assistant.\"\"\"") !=
                     std::string::npos,
                 mf.c_str());
        QVERIFY(ollama_modelfile(root / "model", m, "x.gguf").find("FROM ./x.gguf") != std::string::npos);
    }

    // Bad input: a run without an adapter, an unwritable folder, a cancelled export, an unknown quant, a model
    // llama.cpp cannot represent — each a clear error and no file or partial folder left; the CLI's exit codes.
    void badInput() {
        QTemporaryDir tmp;
        const fs::path root = tmp.path().toStdString();
        create_demo_model(root / "model");
        LoraConfig lora;
        lora.r = 2;
        const fs::path empty_run = make_run(root, "empty", root / "model", lora, false);
        ExportOptions o;
        o.format = "gguf";
        expect_error([&] { export_run(empty_run, root / "out", o); }, ErrorCategory::InvalidInput,
                     {"neither a final adapter nor a complete checkpoint"});
        QVERIFY(!fs::exists(root / "out"));
        const fs::path run = make_run(root, "run", root / "model", lora);
        // A folder that cannot be created (its parent is a file; permissions do not stop root).
        write_file(root / "file", "x");
        for (const char* format : {"gguf", "gguf-lora"}) {
            o.format = format;
            expect_error([&] { export_run(run, root / "file" / "out", o); }, ErrorCategory::Io,
                         {"cannot create the export folder"});
        }
        // Cancelled: nothing left.
        std::atomic<bool> cancel{true};
        o.format = "gguf";
        o.cancel = &cancel;
        expect_error([&] { export_run(run, root / "cancelled", o); }, ErrorCategory::Cancelled, {"cancelled"});
        QVERIFY(!fs::exists(root / "cancelled"));
        QVERIFY(no_partial(root));
        o.cancel = nullptr;
        o.quant = "q3_k";
        expect_error([&] { export_run(run, root / "q3", o); }, ErrorCategory::InvalidInput, {"q3_k", "q4_k_m"});
        // A Gemma 2 whose attention scale llama.cpp would get wrong: Unsupported before anything is read.
        const nlohmann::json gemma = {{"architectures", {"Gemma2ForCausalLM"}}, {"model_type", "gemma2"},
                                      {"hidden_size", 64}, {"intermediate_size", 128}, {"num_hidden_layers", 2},
                                      {"num_attention_heads", 2}, {"num_key_value_heads", 1}, {"head_dim", 32},
                                      {"vocab_size", 100}, {"query_pre_attn_scalar", 50}};
        const ModelConfig gm = parse_model_config(gemma, "gemma2/config.json");
        expect_error([&] { write_gguf_model(root / "nowhere", gm, LoraConfig{}, {}, root / "g"); },
                     ErrorCategory::Unsupported, {"query_pre_attn_scalar"});
        QVERIFY(!fs::exists(root / "g"));

        // The CLI: exit codes and messages.
        const QString r = QString::fromStdString(run.string());
        CliResult c = run_cli({"export", QString::fromStdString(empty_run.string()), "--out",
                               QString::fromStdString((root / "c1").string()), "--format", "gguf"});
        QCOMPARE(c.exit_code, 2);
        QVERIFY2(c.err.contains("neither a final adapter"), c.err.constData());
        c = run_cli({"export", r, "--out", QString::fromStdString((root / "c2").string()), "--format", "gguf", "--quant", "q2_k"});
        QCOMPARE(c.exit_code, 2);
        c = run_cli({"export", "--run", r, "--out", QString::fromStdString((root / "c3").string()), "--format", "gguf",
                     "--quant", "q8_0"});
        QVERIFY2(c.exit_code == 0, c.err.constData());
        QVERIFY(fs::exists(root / "c3" / "model-Q8_0.gguf") && fs::exists(root / "c3" / "Modelfile"));
        c = run_cli({"export", r, "--out", QString::fromStdString((root / "c4").string()), "--format", "gguf-lora"});
        QVERIFY2(c.exit_code == 0, c.err.constData());
        QVERIFY(fs::exists(root / "c4" / "adapter-F16.gguf"));
    }
};

QTEST_GUILESS_MAIN(TestGguf)
#include "test_gguf.moc"
