// SPDX-FileCopyrightText: 2026 The Tandem developers
// SPDX-License-Identifier: GPL-3.0-or-later
// QLoRA (4-bit NF4 base weights) on the CPU backend, against bitsandbytes, transformers and PEFT
// (tests/reference/make_nf4_fixtures.py, run on a GPU with bitsandbytes built from source):
//  1. The code tables equal bitsandbytes' (the NF4 table, the signed 8-bit dynamic code).
//  2. dequantize_4bit of bitsandbytes' own codes gives its dequantized weights (fp32 exactly; bf16 / fp16 after
//     one rounding), with and without double quantization, NF4 and FP4, an odd element count.
//  3. quantize_4bit / absmax_mean / quantize_blockwise_8bit give bitsandbytes' codes; the only allowed
//     differences are elements whose scaled value lies within two ulps of a decision threshold (bitsandbytes'
//     CUDA kernels use the GPU's approximate reciprocal; the CPU twin the exact one; kernels/cpu/nf4.h).
//  4. The QLoRA step: models/llama-nf4 (the *-bnb-4bit checkpoint transformers saved) with PEFT's adapter
//     gives PEFT + bitsandbytes' logits, loss and LoRA gradients; so does models/llama quantized at load.
//  5. Bad 4-bit checkpoints (lying quant_state, truncated absmax, unknown quant_type) are refused naming the
//     tensor; the CLI trains with --quantization nf4 end to end and `info` / `plan` show the 4-bit weights.
#include <QDir>
#include <QTest>

#include <nlohmann/json.hpp>

#include <cmath>
#include <cstring>
#include <fstream>
#include <functional>
#include <string>
#include <vector>

#include "export/merged.h"
#include "export/peft_adapter.h"
#include "io/quant4_checkpoint.h"
#include "kernels/cpu/nf4.h"
#include "model/model.h"
#include "tandem/error.h"
#include "tandem/model_config.h"
#include "tandem/model_dir.h"
#include "tandem/safetensors.h"
#include "test_support.h"

using namespace tandem;
using tandem::test::fixtures;
namespace fs = std::filesystem;

namespace {

nlohmann::json read_json(const fs::path& p) {
    std::ifstream in(p);
    return nlohmann::json::parse(in);
}

std::vector<uint8_t> bytes_of(const SafetensorsFile& f, const std::string& name) {
    const TensorInfo& t = f.at(name);
    return std::vector<uint8_t>(reinterpret_cast<const uint8_t*>(t.data.data()),
                                reinterpret_cast<const uint8_t*>(t.data.data()) + t.data.size());
}

std::vector<float> f32_of(const SafetensorsFile& f, const std::string& name) { return tensor_to_f32(f.at(name)); }

struct Case {
    std::string name, dtype, quant_type;
    int64_t n = 0;
    bool nested = false;
};

std::vector<Case> cases() {
    std::vector<Case> out;
    const nlohmann::json j = read_json(fixtures() / "nf4" / "cases.json");
    for (const auto& c : j.at("cases"))
        out.push_back({c["name"], c["dtype"], c["quant_type"], c["n"], c["nested"]});
    if (out.size() < 5) throw std::runtime_error("nf4/cases.json: expected the bitsandbytes cases");
    return out;
}

// A Quant4Ref over the fixture's bitsandbytes tensors of case c (the vectors must outlive it).
struct Held {
    std::vector<uint8_t> codes, absmax_q;
    std::vector<float> code, absmax, nested_code, nested_absmax, offset;
    Quant4Ref ref(const Case& c) const {
        Quant4Ref r;
        r.codes = codes.data();
        r.code = code.data();
        if (c.nested) {
            r.absmax_q = absmax_q.data();
            r.nested_code = nested_code.data();
            r.nested_absmax = nested_absmax.data();
            r.offset = offset.data();
        } else {
            r.absmax = absmax.data();
        }
        r.n = c.n;
        r.blocksize = 64;
        r.nested_blocksize = 256;
        return r;
    }
};

Held hold(const SafetensorsFile& f, const Case& c) {
    Held h;
    h.codes = bytes_of(f, c.name + ".codes");
    h.code = f32_of(f, c.name + ".code");
    if (c.nested) {
        h.absmax_q = bytes_of(f, c.name + ".absmax");
        h.nested_code = f32_of(f, c.name + ".nested_code");
        h.nested_absmax = f32_of(f, c.name + ".nested_absmax");
        h.offset = f32_of(f, c.name + ".offset");
    } else {
        h.absmax = f32_of(f, c.name + ".absmax");
    }
    return h;
}

// Rounds like a cast of fp32 to the fixture's dtype.
float round_to(const std::string& dtype, float v) {
    if (dtype == "bfloat16") return bf16_to_f32(f32_to_bf16(v));
    if (dtype == "float16") return f16_to_f32(f32_to_f16(v));
    return v;
}

uint32_t bits(float v) {
    uint32_t b;
    std::memcpy(&b, &v, 4);
    return b;
}

// |a - b| in units of the last place of b (both finite, same sign region).
double ulps(float a, float b) { return std::fabs(double(a) - double(b)) / std::max(double(std::nextafter(std::fabs(b), INFINITY)) - std::fabs(double(b)), 1e-45); }

// A copy of the llama-nf4 fixture folder in which tensor `name` of model.safetensors is replaced.
fs::path damaged_copy(const fs::path& dir, const std::string& tensor, const std::function<void(nlohmann::json&, std::vector<uint8_t>&)>& edit) {
    const fs::path src = fixtures() / "models" / "llama-nf4";
    fs::create_directories(dir);
    fs::copy_file(src / "config.json", dir / "config.json", fs::copy_options::overwrite_existing);
    const SafetensorsFile f(src / "model.safetensors");
    std::vector<std::pair<std::string, std::pair<nlohmann::json, std::vector<uint8_t>>>> all;
    for (const auto& t : f.tensors()) {
        nlohmann::json info = {{"dtype", std::string(dtype_name(t.dtype))}, {"shape", t.shape}};
        std::vector<uint8_t> data(reinterpret_cast<const uint8_t*>(t.data.data()),
                                  reinterpret_cast<const uint8_t*>(t.data.data()) + t.data.size());
        if (t.name == tensor) edit(info, data);
        all.push_back({t.name, {info, data}});
    }
    nlohmann::json header = nlohmann::json::object();
    uint64_t off = 0;
    for (auto& [name, p] : all) {
        p.first["data_offsets"] = {off, off + p.second.size()};
        header[name] = p.first;
        off += p.second.size();
    }
    std::string h = header.dump();
    while (h.size() % 8) h += ' ';
    std::ofstream out(dir / "model.safetensors", std::ios::binary);
    const uint64_t n = h.size();
    out.write(reinterpret_cast<const char*>(&n), 8);
    out.write(h.data(), std::streamsize(h.size()));
    for (auto& [name, p] : all) out.write(reinterpret_cast<const char*>(p.second.data()), std::streamsize(p.second.size()));
    return dir;
}

}  // namespace

class TestQlora : public QObject {
    Q_OBJECT

private slots:
    void code_tables() {
        const SafetensorsFile f(fixtures() / "nf4" / "quantize.safetensors");
        for (const Case& c : cases()) {
            const std::vector<float> code = f32_of(f, c.name + ".code");
            // NF4: the stored table is the kernels' table bit for bit. FP4: bitsandbytes dequantizes with its
            // kernel constants, which differ from the stored k/12 in the last bit of some values.
            const auto& want = c.quant_type == "nf4" ? nf4_code() : fp4_code();
            for (int i = 0; i < kQuant4Codes; ++i)
                QVERIFY2(c.quant_type == "nf4" ? bits(code[size_t(i)]) == bits(want[size_t(i)])
                                               : std::fabs(code[size_t(i)] - want[size_t(i)]) <= 1e-7f,
                         qPrintable(QString::fromStdString(c.name) + QString(" code %1").arg(i)));
            if (!c.nested) continue;
            const std::vector<float> nested = f32_of(f, c.name + ".nested_code");
            for (int i = 0; i < kNestedCodes; ++i)
                QVERIFY2(bits(nested[size_t(i)]) == bits(dynamic_code_8bit()[size_t(i)]),
                         qPrintable(QString("dynamic code %1: bitsandbytes %2, Tandem %3")
                                        .arg(i).arg(double(nested[size_t(i)]), 0, 'g', 9)
                                        .arg(double(dynamic_code_8bit()[size_t(i)]), 0, 'g', 9)));
        }
    }

    void dequantize_matches_bitsandbytes() {
        const SafetensorsFile f(fixtures() / "nf4" / "quantize.safetensors");
        for (const Case& c : cases()) {
            Held h = hold(f, c);
            if (c.quant_type == "fp4") h.code.assign(fp4_code().begin(), fp4_code().end());  // as the loader does
            std::vector<float> out(static_cast<size_t>(c.n));
            cpu::dequantize_4bit(out.data(), h.ref(c), 0, c.n);
            const std::vector<float> want = f32_of(f, c.name + ".dequant");
            int64_t bad = 0;
            for (int64_t i = 0; i < c.n; ++i) bad += bits(round_to(c.dtype, out[size_t(i)])) != bits(want[size_t(i)]);
            qInfo("%s (%s, %s%s): %lld of %lld dequantized values differ", c.name.c_str(), c.dtype.c_str(),
                  c.quant_type.c_str(), c.nested ? ", double quant" : "", (long long)bad, (long long)c.n);
            QCOMPARE(bad, int64_t(0));
            // A sub-range (a fused projection's rows) gives the same values as the whole.
            const int64_t first = 3 * 64 + 5, count = std::min<int64_t>(c.n - first, 1000);
            std::vector<float> part(static_cast<size_t>(count));
            cpu::dequantize_4bit(part.data(), h.ref(c), first, count);
            QVERIFY(std::memcmp(part.data(), out.data() + first, size_t(count) * 4) == 0);
        }
    }

    void quantize_matches_bitsandbytes() {
        const SafetensorsFile f(fixtures() / "nf4" / "quantize.safetensors");
        const auto& t = nf4_thresholds();
        for (const Case& c : cases()) {
            if (c.quant_type != "nf4") continue;
            const std::vector<float> in = f32_of(f, c.name + ".input");
            std::vector<uint8_t> codes(size_t(quant4_code_bytes(c.n)));
            const int64_t blocks = quant4_blocks(c.n, 64);
            std::vector<float> absmax(static_cast<size_t>(blocks));
            cpu::quantize_4bit(codes.data(), absmax.data(), in.data(), c.n, 64);
            const std::vector<float> want_absmax =
                c.nested ? f32_of(f, c.name + ".absmax_f32") : f32_of(f, c.name + ".absmax");
            QVERIFY(std::memcmp(absmax.data(), want_absmax.data(), absmax.size() * 4) == 0);
            const std::vector<uint8_t> want = bytes_of(f, c.name + ".codes");
            int64_t near = 0;
            for (int64_t e = 0; e < c.n; ++e) {
                const auto code_at = [&](const std::vector<uint8_t>& v) {
                    return (e & 1) ? int(v[size_t(e >> 1)] & 15) : int(v[size_t(e >> 1)] >> 4);
                };
                const int a = code_at(codes), b = code_at(want);
                if (a == b) continue;
                // Adjacent codes, and the scaled value within two ulps of the threshold between them.
                const float x = in[size_t(e)] * (1.0f / absmax[size_t(e / 64)]);
                QVERIFY2(std::abs(a - b) == 1, qPrintable(QString("%1 element %2: codes %3 vs %4")
                                                              .arg(QString::fromStdString(c.name)).arg(e).arg(a).arg(b)));
                QVERIFY2(ulps(x, t[size_t(std::min(a, b))]) <= 2.0,
                         qPrintable(QString("%1 element %2: scaled %3 is not at a threshold")
                                        .arg(QString::fromStdString(c.name)).arg(e).arg(double(x), 0, 'g', 9)));
                ++near;
            }
            qInfo("%s: %lld of %lld codes differ from bitsandbytes' CUDA codes, all at a threshold", c.name.c_str(),
                  (long long)near, (long long)c.n);
            if (!c.nested) continue;
            // Double quantization of the absmax.
            const float offset = cpu::absmax_mean(absmax.data(), blocks);
            const float want_offset = f32_of(f, c.name + ".offset").at(0);
            QCOMPARE(bits(offset), bits(want_offset));
            std::vector<uint8_t> q(static_cast<size_t>(blocks));
            std::vector<float> nested(size_t(quant4_blocks(blocks, 256)));
            cpu::quantize_blockwise_8bit(q.data(), nested.data(), absmax.data(), offset, dynamic_code_8bit().data(),
                                         blocks, 256);
            QVERIFY(std::memcmp(nested.data(), f32_of(f, c.name + ".nested_absmax").data(), nested.size() * 4) == 0);
            const std::vector<uint8_t> want_q = bytes_of(f, c.name + ".absmax");
            int64_t qdiff = 0;
            for (int64_t i = 0; i < blocks; ++i) {
                if (q[size_t(i)] == want_q[size_t(i)]) continue;
                QVERIFY(std::abs(int(q[size_t(i)]) - int(want_q[size_t(i)])) == 1);
                ++qdiff;
            }
            qInfo("%s: %lld of %lld absmax codes differ (midpoint ties)", c.name.c_str(), (long long)qdiff,
                  (long long)blocks);
            QVERIFY(qdiff * 100 <= blocks);
        }
    }

    void config_of_a_bnb_checkpoint() {
        const ModelConfig c = load_model_config(fixtures() / "models" / "llama-nf4");
        QVERIFY2(c.supported, c.unsupported_reason.c_str());
        QVERIFY(c.quantization.four_bit && c.quantization.prequantized);
        QCOMPARE(QString::fromStdString(c.quantization.quant_type), QString("nf4"));
        QVERIFY(c.quantization.double_quant);
        QVERIFY(c.quantization.quantizes("model.layers.1.mlp.down_proj"));
        ModelConfig skip = c;
        skip.quantization.skip_modules = {"lm_head", "layers.1.mlp"};
        QVERIFY(!skip.quantization.quantizes("model.layers.1.mlp.down_proj"));
        QVERIFY(skip.quantization.quantizes("model.layers.0.mlp.down_proj"));
        const ModelInfo info = inspect_model_dir(fixtures() / "models" / "llama-nf4");
        QVERIFY(info.tensors_checked);
        QCOMPARE(info.parameter_count, load_model_config(fixtures() / "models" / "llama").parameter_count());
        QVERIFY(info.extra_tensors.empty());
        // Other methods stay refused with a reason.
        nlohmann::json j = read_json(fixtures() / "models" / "llama" / "config.json");
        j["quantization_config"] = {{"quant_method", "gptq"}, {"bits", 4}};
        QVERIFY(!parse_model_config(j, "gptq/config.json").supported);
        j["quantization_config"] = {{"quant_method", "bitsandbytes"}, {"load_in_8bit", true}};
        const ModelConfig eight = parse_model_config(j, "8bit/config.json");
        QVERIFY(!eight.supported);
        QVERIFY(eight.unsupported_reason.find("8-bit") != std::string::npos);
    }

    // The QLoRA step against PEFT + bitsandbytes (compute dtype fp32): pre-quantized and quantized at load.
    void qlora_step_matches_peft() {
        const fs::path llama = fixtures() / "models" / "llama", nf4 = fixtures() / "models" / "llama-nf4";
        const SafetensorsFile exp(nf4 / "expected.safetensors");
        const PackedBatch batch = batch_from_sequences(
            read_json(llama / "sequences.json")["sequences"].get<std::vector<std::vector<int32_t>>>());
        const PeftAdapter a = read_peft_adapter(llama / "adapter", load_model_config(llama));
        for (const bool at_load : {false, true}) {
            CpuModel m = at_load ? CpuModel::load(llama, a.config, 7, 64, CheckpointPolicy::Off, true)
                                 : CpuModel::load(nf4, a.config, 7, 64);
            QVERIFY(m.config().quantization.four_bit);
            m.set_lora(a.tensors);
            const std::vector<float> logits = m.logits(batch), want = tensor_to_f32(exp.at("logits"));
            QCOMPARE(logits.size(), want.size());
            double err = 0, ref = 0;
            for (size_t i = 0; i < want.size(); ++i) {
                err = std::max(err, std::fabs(double(logits[i]) - want[i]));
                ref = std::max(ref, std::fabs(double(want[i])));
            }
            qInfo("%s: logits max_abs %.3g rel %.3g", at_load ? "quantized at load" : "bnb-4bit checkpoint", err,
                  err / ref);
            QVERIFY(err / ref <= 1e-4);
            m.zero_grads();
            const double loss = m.forward_backward(batch, float(1.0 / batch.num_label_tokens), 0) / batch.num_label_tokens;
            const double want_loss = tensor_to_f32(exp.at("loss")).at(0);
            QVERIFY2(std::fabs(loss - want_loss) <= 1e-5 * want_loss, qPrintable(QString("loss %1 vs %2").arg(loss).arg(want_loss)));
            // The base changed: the 4-bit loss is not the float model's.
            const double float_loss = tensor_to_f32(SafetensorsFile(llama / "expected.safetensors").at("loss")).at(0);
            QVERIFY(std::fabs(want_loss - float_loss) > 1e-4);
            double worst = 0;
            for (const auto& p : m.lora_params()) {
                const std::vector<float> g = tensor_to_f32(exp.at(p.spec.name + ".grad"));
                double e = 0, r = 0;
                for (size_t i = 0; i < g.size(); ++i) {
                    e = std::max(e, std::fabs(double(p.grad[i]) - g[i]));
                    r = std::max(r, std::fabs(double(g[i])));
                }
                worst = std::max(worst, e / r);
            }
            qInfo("  LoRA grads: worst rel %.3g over %zu tensors", worst, m.lora_params().size());
            QVERIFY(worst <= 1e-3);
        }
    }

    // A merged export from the 4-bit base: dequantized (bitsandbytes' arithmetic), the adapter folded in, float
    // weights with no quantization_config; its logits are PEFT + bitsandbytes' (expected.safetensors).
    void merged_export_from_a_4bit_base() {
        const fs::path llama = fixtures() / "models" / "llama", nf4 = fixtures() / "models" / "llama-nf4";
        const fs::path out = fs::path(QDir::tempPath().toStdString()) / "tandem_qlora_merged";
        fs::remove_all(out);
        const ModelConfig cfg = load_model_config(nf4);
        const PeftAdapter a = read_peft_adapter(llama / "adapter", load_model_config(llama));
        MergeOptions o;
        o.dtype = DType::F32;
        write_merged_model(nf4, cfg, a.config, a.tensors, out, o);
        const nlohmann::json mc = read_json(out / "config.json");
        QVERIFY(!mc.contains("quantization_config"));
        const SafetensorsFile merged(out / "model.safetensors");
        for (const auto& t : merged.tensors()) {
            QVERIFY2(t.dtype == DType::F32, t.name.c_str());
            QVERIFY2(t.name.find("absmax") == std::string::npos && t.name.find("quant") == std::string::npos,
                     t.name.c_str());
        }
        QCOMPARE(merged.at("model.layers.0.mlp.down_proj.weight").shape, (std::vector<int64_t>{64, 96}));
        LoraConfig none = a.config;  // a fresh LoRA (B = 0) changes nothing
        CpuModel m = CpuModel::load(out, none, 3, 64);
        QVERIFY(!m.config().quantization.four_bit);
        const PackedBatch batch = batch_from_sequences(
            read_json(llama / "sequences.json")["sequences"].get<std::vector<std::vector<int32_t>>>());
        const std::vector<float> got = m.logits(batch);
        const std::vector<float> want = tensor_to_f32(SafetensorsFile(nf4 / "expected.safetensors").at("logits"));
        double err = 0, ref = 0;
        for (size_t i = 0; i < want.size(); ++i) {
            err = std::max(err, std::fabs(double(got[i]) - want[i]));
            ref = std::max(ref, std::fabs(double(want[i])));
        }
        qInfo("merged from the 4-bit base: logits rel %.3g vs PEFT + bitsandbytes", err / ref);
        QVERIFY(err / ref <= 1e-4);
        fs::remove_all(out);
    }

    void plan_counts_the_4bit_weights() {
        const ModelConfig c = load_model_config(fixtures() / "models" / "llama");
        LoraConfig lora;
        const auto full = CpuModel::plan(c, lora, 64);
        const auto q = CpuModel::plan(with_quantization(c), lora, 64);
        // 7 projections x 2 layers: fp32 (4 bytes) -> ~0.5 byte + statistics; embeddings, lm_head, norms stay.
        QVERIFY(q.weights < full.weights);
        QVERIFY(q.workspace > full.workspace);  // the dequantized slot
        qInfo("weights fp32 %llu bytes, 4-bit %llu bytes", (unsigned long long)full.weights,
              (unsigned long long)q.weights);
    }

    void bad_checkpoints_name_the_tensor() {
        const fs::path tmp = fs::path(QDir::tempPath().toStdString()) / "tandem_qlora_bad";
        fs::remove_all(tmp);
        const std::string w = "model.layers.0.self_attn.q_proj.weight";
        LoraConfig lora;
        auto expect = [&](const fs::path& dir, ErrorCategory cat, const std::string& needle) {
            try {
                CpuModel::load(dir, lora, 1, 64);
                QFAIL("loaded a damaged checkpoint");
            } catch (const Error& e) {
                QVERIFY2(e.category() == cat, e.what());
                QVERIFY2(std::string(e.what()).find(needle) != std::string::npos, e.what());
            }
        };
        // quant_state lies about the shape
        expect(damaged_copy(tmp / "shape", w + ".quant_state.bitsandbytes__nf4",
                            [](nlohmann::json& info, std::vector<uint8_t>& d) {
                                std::string s(d.begin(), d.end());
                                s.replace(s.find("[64, 64]"), 8, "[64, 32]");
                                d.assign(s.begin(), s.end());
                                info["shape"] = {d.size()};
                            }),
               ErrorCategory::InvalidInput, w + ".quant_state");
        // truncated quant_state JSON
        expect(damaged_copy(tmp / "trunc", w + ".quant_state.bitsandbytes__nf4",
                            [](nlohmann::json& info, std::vector<uint8_t>& d) {
                                d.resize(d.size() / 2);
                                info["shape"] = {d.size()};
                            }),
               ErrorCategory::InvalidInput, "not valid JSON");
        // absmax of the wrong length
        expect(damaged_copy(tmp / "absmax", w + ".absmax",
                            [](nlohmann::json& info, std::vector<uint8_t>& d) {
                                d.resize(d.size() - 1);
                                info["shape"] = {d.size()};
                            }),
               ErrorCategory::InvalidInput, w + ".absmax");
        // an unknown quant_type
        expect(damaged_copy(tmp / "type", w + ".quant_state.bitsandbytes__nf4",
                            [](nlohmann::json& info, std::vector<uint8_t>& d) {
                                std::string s(d.begin(), d.end());
                                s.replace(s.find("\"nf4\""), 5, "\"nf3\"");
                                d.assign(s.begin(), s.end());
                                info["shape"] = {d.size()};
                            }),
               ErrorCategory::Unsupported, "nf3");
        // the CLI: exit 2 naming the tensor
        const auto r = tandem::test::run_cli({"info", QString::fromStdString((tmp / "absmax").string())});
        QCOMPARE(r.exit_code, 2);
        QVERIFY2(r.err.contains(QByteArray::fromStdString(w + ".absmax")), r.err.constData());
        fs::remove_all(tmp);
    }

    void cli_info_and_train_nf4() {
        const QString nf4 = QString::fromStdString((fixtures() / "models" / "llama-nf4").string());
        auto r = tandem::test::run_cli({"info", nf4});
        QCOMPARE(r.exit_code, 0);
        QVERIFY2(r.out.contains("quantization  4-bit nf4"), qPrintable(r.out));
        // A float model quantized at load, trained a few steps on the CPU; the adapter is PEFT's layout.
        const fs::path out = fs::path(QDir::tempPath().toStdString()) / "tandem_qlora_run";
        fs::remove_all(out);
        const fs::path data = out.parent_path() / "tandem_qlora_data.jsonl";
        {
            std::ofstream d(data);
            for (int i = 0; i < 8; ++i) d << "{\"text\": \"a b c d e f g h " << i << "\"}\n";
        }
        const fs::path baby = tandem::test::assets() / "babyllama-tok105" / "hf";
        TANDEM_REQUIRE_ASSET(baby);  // the shared assets beside the checkout (as the other suites)
        r = tandem::test::run_cli({"train", "--model", QString::fromStdString(baby.string()),
                                   "--dataset", QString::fromStdString(data.string()), "--out",
                                   QString::fromStdString(out.string()), "--device", "cpu", "--quantization", "nf4",
                                   "--max-steps", "2", "--batch-tokens", "64", "--max-seq-len", "64"});
        QVERIFY2(r.exit_code == 0, qPrintable(r.err));
        QVERIFY(fs::exists(out / "adapter" / "adapter_model.safetensors"));
        const nlohmann::json cfg = read_json(out / "config.json");
        QCOMPARE(QString::fromStdString(cfg.value("quantization", std::string())), QString("nf4"));
        r = tandem::test::run_cli({"train", "--model", QString::fromStdString(baby.string()), "--dataset",
                                   QString::fromStdString(data.string()), "--out", QString::fromStdString(out.string()),
                                   "--quantization", "int3"});
        QCOMPARE(r.exit_code, 2);
        QVERIFY(r.err.contains("--quantization int3"));
        fs::remove_all(out);
        fs::remove(data);
    }
};

QTEST_GUILESS_MAIN(TestQlora)
#include "test_qlora.moc"
