// SPDX-FileCopyrightText: 2026 The Tandem developers
// SPDX-License-Identifier: GPL-3.0-or-later
// Tests for engine/model: the CPU reference model against PyTorch/PEFT and the real tiny babyllama.
//  1. tests/fixtures/models/<variant> (tests/fixtures/README.md): logits of the four sequences packed into
//     ONE batch vs PyTorch running each separately (isolation), the loss, all 28 LoRA gradients, and a
//     10-step AdamW curve + the final LoRA weights.
//  2. gradient accumulation over micro-batches is exact; LoRA dropout is reproducible.
//  3. babyllama-tok105 (shared asset): greedy generation and teacher-forced per-token NLL vs its reference.
//  4. tandem-cli eval / generate, including bad input exit codes.
// Errors are "normalised": rel = max |got - ref| / max |ref| over a tensor; both numbers are printed.
#include <QTest>

#include <nlohmann/json.hpp>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <fstream>
#include <map>
#include <span>
#include <random>
#include <list>
#include <string>
#include <vector>

#include "export/merged.h"
#include "export/peft_adapter.h"
#include "kernels/cpu/adamw.h"
#include "kernels/cpu/mxfp4.h"
#include "kernels/cpu/nf4.h"
#include "kernels/cpu/threads.h"
#include "model/expert_layout.h"
#include "model/lora_table.h"
#include "model/model.h"
#include "model/plan.h"
#include "model/quant4_load.h"
#include "tandem/error.h"
#include "tandem/inference.h"
#include "tandem/model_dir.h"
#include "tandem/model_config.h"
#include "tandem/safetensors.h"
#include "tandem/tokenizer.h"
#include "test_support.h"

using namespace tandem;
using tandem::test::fixtures;
namespace fs = std::filesystem;

namespace {

struct Err {
    double max_abs = 0;
    double max_ref = 0;
    double rel() const { return max_ref > 0 ? max_abs / max_ref : max_abs; }
};

Err compare(const std::vector<float>& got, const std::vector<float>& ref) {
    Err e;
    if (got.size() != ref.size()) {
        e.max_abs = INFINITY;
        return e;
    }
    for (size_t i = 0; i < got.size(); ++i) {
        e.max_abs = std::max(e.max_abs, std::fabs(double(got[i]) - double(ref[i])));
        e.max_ref = std::max(e.max_ref, std::fabs(double(ref[i])));
    }
    return e;
}

nlohmann::json read_json(const fs::path& p) {
    std::ifstream in(p);
    return nlohmann::json::parse(in);
}

std::vector<std::vector<int32_t>> read_sequences(const fs::path& p) {
    return read_json(p)["sequences"].get<std::vector<std::vector<int32_t>>>();
}

std::vector<float> tensor(const SafetensorsFile& f, const std::string& name) { return tensor_to_f32(f.at(name)); }

// The base model with the fixture's PEFT adapter.
CpuModel load_variant(const fs::path& dir, int max_tokens, double dropout = 0.0) {
    const ModelConfig cfg = load_model_config(dir);
    PeftAdapter a = read_peft_adapter(dir / "adapter", cfg);
    a.config.dropout = dropout;
    CpuModel m = CpuModel::load(dir, a.config, 7, max_tokens);
    m.set_lora(a.tensors);
    return m;
}

// A LoRA tensor in PEFT's layout (the models hold an expert parameter's lora_B expert-major: lora_table.h).
std::vector<float> peft_layout(const LoraParam& p, const std::vector<float>& v) {
    if (p.spec.experts == 0 || p.spec.is_a) return v;
    return expert_b_to_peft(v, p.spec.experts, p.spec.shape[0], p.spec.shape[1] / p.spec.experts, p.spec.interleaved);
}

// w through 4-bit NF4 and back as a load quantizes it (blocks of 64, the absmax double-quantized to 8 bits in
// blocks of 256 around their mean).
std::vector<float> nf4_round_trip(const std::vector<float>& w) {
    const int64_t n = int64_t(w.size()), blocks = quant4_blocks(n, 64);
    std::vector<uint8_t> codes(static_cast<size_t>(quant4_code_bytes(n))), absmax_q(static_cast<size_t>(blocks));
    std::vector<float> absmax(static_cast<size_t>(blocks)), nested(static_cast<size_t>(quant4_blocks(blocks, 256)));
    std::vector<float> out(w.size());
    cpu::quantize_4bit(codes.data(), absmax.data(), w.data(), n, 64);
    const float offset = cpu::absmax_mean(absmax.data(), blocks);
    cpu::quantize_blockwise_8bit(absmax_q.data(), nested.data(), absmax.data(), offset, dynamic_code_8bit().data(),
                                 blocks, 256);
    const Quant4Consts c = nf4_consts(offset);
    Quant4Ref r;
    r.codes = codes.data();
    r.code = c.data();
    r.absmax_q = absmax_q.data();
    r.nested_code = c.data() + kQuant4Codes;
    r.nested_absmax = nested.data();
    r.offset = c.data() + kQuant4Codes + kNestedCodes;
    r.n = n;
    r.blocksize = 64;
    cpu::dequantize_4bit(out.data(), r, 0, n);
    return out;
}

std::vector<std::vector<float>> grads_of(const CpuModel& m) {
    std::vector<std::vector<float>> g;
    for (const auto& p : m.lora_params()) g.push_back(p.grad);
    return g;
}

double max_rel(const std::vector<std::vector<float>>& a, const std::vector<std::vector<float>>& b) {
    double worst = 0;
    for (size_t i = 0; i < a.size(); ++i) worst = std::max(worst, compare(a[i], b[i]).rel());
    return worst;
}

// Undoes the octal escapes ("\342\201\207") the babyllama reference uses for non-ASCII bytes.
std::string unescape_octal(const std::string& s) {
    std::string out;
    for (size_t i = 0; i < s.size(); ++i) {
        if (s[i] == '\\' && i + 3 < s.size() + 0 && std::isdigit((unsigned char)s[i + 1])) {
            out.push_back(char(std::stoi(s.substr(i + 1, 3), nullptr, 8)));
            i += 3;
        } else {
            out.push_back(s[i]);
        }
    }
    return out;
}

fs::path babyllama() { return tandem::test::assets() / "babyllama-tok105"; }

// A tiny random Qwen3-MoE folder (3 layers, the middle one dense through mlp_only_layers; 6 experts, top 2,
// norm_topk_prob), fp32, with its experts as the Hub stores them (one tensor per expert) or fused (transformers 5).
void write_tiny_moe(const fs::path& dir, bool fused, uint64_t seed = 99) {
    fs::create_directories(dir);
    const nlohmann::json config = {
        {"architectures", {"Qwen3MoeForCausalLM"}}, {"model_type", "qwen3_moe"}, {"hidden_size", 32},
        {"intermediate_size", 40}, {"moe_intermediate_size", 12}, {"num_hidden_layers", 3},
        {"num_attention_heads", 4}, {"num_key_value_heads", 2}, {"head_dim", 8}, {"vocab_size", 50},
        {"max_position_embeddings", 128}, {"num_experts", 6}, {"num_experts_per_tok", 2},
        {"norm_topk_prob", true}, {"decoder_sparse_step", 1}, {"mlp_only_layers", {1}}, {"rms_norm_eps", 1e-6},
        {"tie_word_embeddings", false}, {"hidden_act", "silu"}};
    ModelConfig cfg = parse_model_config(config, "tiny moe");
    cfg.experts_fused = fused;
    std::mt19937 rng{static_cast<uint32_t>(seed)};
    std::normal_distribution<float> nd(0.0f, 1.0f);
    std::list<std::vector<float>> storage;
    std::vector<TensorToWrite> tensors;
    // The same values in both layouts: drawn per expert projection in the Hub's order, then placed.
    std::map<std::string, std::vector<float>> per_name;
    ModelConfig hub = cfg;
    hub.experts_fused = false;
    for (const auto& t : expected_tensors(hub)) {
        int64_t n = 1;
        for (auto d : t.shape) n *= d;
        std::vector<float> v(static_cast<size_t>(n));
        const bool norm = t.name.find("norm") != std::string::npos;
        const float sd = t.name.find(".gate.") != std::string::npos ? 1.0f : 0.08f;  // routers far from ties
        for (auto& x : v) x = norm ? 1.0f + 0.1f * nd(rng) : sd * nd(rng);
        per_name[t.name] = std::move(v);
    }
    for (const auto& t : expected_tensors(cfg)) {
        std::vector<float> v;
        const auto at = t.name.find("mlp.experts.");
        if (fused && at != std::string::npos) {
            const std::string p = t.name.substr(0, at) + "mlp.experts.";
            const bool gu = t.name.ends_with("gate_up_proj");
            for (int64_t e = 0; e < 6; ++e) {
                const std::string x = p + std::to_string(e) + ".";
                for (const char* part : gu ? std::vector<const char*>{"gate_proj", "up_proj"} : std::vector<const char*>{"down_proj"}) {
                    const auto& src = per_name.at(x + part + ".weight");
                    v.insert(v.end(), src.begin(), src.end());
                }
            }
        } else if (fused && t.name.ends_with("mlp.gate.weight")) {
            v = per_name.at(t.name);
        } else {
            v = per_name.at(t.name);
        }
        storage.push_back(std::move(v));
        tensors.push_back({t.name, DType::F32, t.shape, std::as_bytes(std::span<const float>(storage.back()))});
    }
    write_safetensors(dir / "model.safetensors", tensors, {{"format", "pt"}});
    std::ofstream(dir / "config.json") << config.dump(2);
}

}  // namespace

class TestModelCpu : public QObject {
    Q_OBJECT

private slots:
    void parity_data() {
        QTest::addColumn<QString>("variant");
        for (const char* v : {"llama", "qwen2", "qwen3", "mistral", "mistral-window", "phi3", "phi3-partial", "phi3-long", "gemma2",
                              "gemma3", "qwen3-moe", "mixtral", "gpt-oss"})
            QTest::newRow(v) << QString(v);
    }

    // Logits, loss and every LoRA gradient of one packed batch vs PyTorch (each sequence run separately).
    void parity() {
        QFETCH(QString, variant);
        const fs::path dir = fixtures() / "models" / variant.toStdString();
        const SafetensorsFile exp(dir / "expected.safetensors");
        const PackedBatch batch = batch_from_sequences(read_sequences(dir / "sequences.json"));
        QCOMPARE(batch.num_tokens, 33);
        QCOMPARE(batch.num_label_tokens, 29);
        CpuModel m = load_variant(dir, 64);

        const Err le = compare(m.logits(batch), tensor(exp, "logits"));
        qInfo("%s logits: max_abs %.3g rel %.3g", qPrintable(variant), le.max_abs, le.rel());
        QVERIFY2(le.rel() <= 1e-4, qPrintable(QString("logits rel %1").arg(le.rel())));
        // MoE: the router chose transformers' experts for every token (the fixture has no near-tie at fp32).
        const auto routing = m.moe_routing();
        for (size_t l = 0; l < routing.size(); ++l) {
            const TensorInfo* t = exp.find("router_idx." + std::to_string(l));
            QCOMPARE(t != nullptr, !routing[l].empty());
            if (!t) continue;
            const auto* want = reinterpret_cast<const int32_t*>(t->data.data());
            QVERIFY(std::equal(routing[l].begin(), routing[l].end(), want, want + t->numel()));
        }

        m.zero_grads();
        const double loss_sum = m.forward_backward(batch, float(1.0 / batch.num_label_tokens), 0);
        const double loss = loss_sum / batch.num_label_tokens;
        const double ref_loss = tensor(exp, "loss").at(0);
        const double loss_rel = std::fabs(loss - ref_loss) / std::fabs(ref_loss);
        qInfo("%s loss %.9f ref %.9f rel %.3g", qPrintable(variant), loss, ref_loss, loss_rel);
        QVERIFY(loss_rel <= 1e-5);
        QCOMPARE(m.forward_loss(batch), loss_sum);  // same forward without gradients

        double worst = 0, worst_abs = 0;
        size_t grads = 0;  // every LoRA tensor of the fixture has its gradient
        for (const auto& t : exp.tensors()) grads += t.name.size() > 5 && t.name.ends_with(".grad");
        QCOMPARE(m.lora_params().size(), grads);
        for (const auto& p : m.lora_params()) {
            const Err ge = compare(peft_layout(p, p.grad), tensor(exp, p.spec.name + ".grad"));
            worst = std::max(worst, ge.rel());
            worst_abs = std::max(worst_abs, ge.max_abs);
            QVERIFY2(ge.rel() <= 1e-3, qPrintable(QString::fromStdString(p.spec.name) + QString(" rel %1").arg(ge.rel())));
        }
        qInfo("%s LoRA grads: worst max_abs %.3g worst rel %.3g", qPrintable(variant), worst_abs, worst);
    }

    // gpt-oss as released: the experts as MXFP4 blocks + scales (models/gpt-oss/mxfp4, the same weights as the fp32
    // fixture: make_fixtures.py made them MXFP4-exact) give the fp32 checkpoint's logits bit for bit, with the adapter.
    void gpt_oss_mxfp4_checkpoint() {
        const fs::path dir = fixtures() / "models" / "gpt-oss";
        const ModelConfig cfg = load_model_config(dir / "mxfp4");
        QVERIFY(cfg.experts_mxfp4);
        const ModelInfo info = inspect_model_dir(dir / "mxfp4");
        QVERIFY(info.tensors_checked);
        QVERIFY(std::find(info.dtypes.begin(), info.dtypes.end(), "MXFP4") != info.dtypes.end());
        QCOMPARE(info.parameter_count, inspect_model_dir(dir).parameter_count);
        const PackedBatch batch = batch_from_sequences(read_sequences(dir / "sequences.json"));
        CpuModel ref = load_variant(dir, 64);
        PeftAdapter a = read_peft_adapter(dir / "adapter", cfg);
        CpuModel m = CpuModel::load(dir / "mxfp4", a.config, 7, 64);
        m.set_lora(a.tensors);
        const auto want = ref.logits(batch), got = m.logits(batch);
        QCOMPARE(got.size(), want.size());
        QVERIFY(std::equal(got.begin(), got.end(), want.begin()));
        // The device layout's dequantization (kernels/cpu/mxfp4.h, interleaved rows: what the CUDA model runs on
        // its MXFP4 pieces) gives the fp32 checkpoint's gate_up_proj as the load path lays it out, bit for bit.
        {
            const SafetensorsSet mx = SafetensorsSet::open(dir / "mxfp4");
            const SafetensorsSet fp = SafetensorsSet::open(dir);
            const std::string name = "model.layers.1.mlp.experts.gate_up_proj";
            const int64_t E = cfg.num_experts, H = cfg.hidden_size, F = cfg.moe_intermediate_size;
            WeightEntry e;
            e.name = name;
            e.numel = E * 2 * F * H;
            e.expert = {E, H, 2 * F, true, true};
            const std::vector<float> want = read_expert_tensor(fp, e);
            std::vector<float> got(want.size());
            cpu::dequantize_mxfp4(got.data(), reinterpret_cast<const uint8_t*>(mx.at(name + "_blocks").data.data()),
                                  reinterpret_cast<const uint8_t*>(mx.at(name + "_scales").data.data()), E, int(2 * F),
                                  int(H), true);
            QVERIFY(got == want);
        }
        // A block whose bytes do not match config.json's shape is refused naming the tensor.
        QTemporaryDir tmp;
        const fs::path bad = fs::path(tmp.path().toStdString()) / "bad";
        fs::create_directories(bad);
        nlohmann::json c = read_json(dir / "mxfp4" / "config.json");
        c["intermediate_size"] = 64;
        std::ofstream(bad / "config.json") << c.dump(1);
        fs::copy_file(dir / "mxfp4" / "model.safetensors", bad / "model.safetensors");
        try {
            (void)inspect_model_dir(bad);
            QFAIL("a mismatched MXFP4 checkpoint was accepted");
        } catch (const Error& e) {
            QVERIFY2(std::string(e.what()).find("mlp.experts.") != std::string::npos, e.what());
        }
    }

    // QLoRA on a mixture of experts: the experts quantized to NF4 at load as whole [E, out, in] parameters (the
    // Hub's per-expert tensors assembled first), dequantized one parameter at a time before the grouped GEMMs.
    // The fused and the per-expert checkpoint of the same weights give the same bits; the 4-bit model is close to
    // the float one but not equal (it did quantize), and its plan holds fewer weight bytes.
    void moe_nf4_experts() {
        QTemporaryDir tmp;
        const fs::path hub = fs::path(tmp.path().toStdString()) / "hub", fused = fs::path(tmp.path().toStdString()) / "fused";
        write_tiny_moe(hub, false);
        write_tiny_moe(fused, true);
        LoraConfig lora;
        lora.r = 2;
        const PackedBatch b = batch_from_sequences({{3, 9, 14, 2, 40, 7, 7, 21, 33}, {5}, {11, 4, 19, 8, 30, 1}});
        auto load = [&](const fs::path& dir, bool nf4) {
            CpuModel m = CpuModel::load(dir, lora, 5, 32, CheckpointPolicy::Off, nf4);
            for (auto& prm : m.lora_params())
                if (!prm.spec.is_a)
                    for (size_t i = 0; i < prm.value.size(); ++i) prm.value[i] = 0.05f * float(int(i % 7) - 3);
            return m;
        };
        CpuModel qh = load(hub, true), qf = load(fused, true), ff = load(fused, false);
        QVERIFY(qh.config().quantization.four_bit);
        const std::vector<float> lh = qh.logits(b), lf = qf.logits(b), lfloat = ff.logits(b);
        QVERIFY(lh == lf);
        // The reference: a float checkpoint holding each projection's NF4 round trip (the engine's quantize_4bit
        // with double quantization, checked against bitsandbytes in test_qlora), each expert parameter quantized
        // as one [E, out, in] tensor; it must give the 4-bit model's logits bit for bit.
        const fs::path ref = fs::path(tmp.path().toStdString()) / "ref";
        fs::create_directories(ref);
        fs::copy_file(fused / "config.json", ref / "config.json");
        {
            const SafetensorsFile f(fused / "model.safetensors");
            std::list<std::vector<float>> keep;
            std::vector<TensorToWrite> out;
            for (const TensorInfo& t : f.tensors()) {
                std::vector<float> v = tensor_to_f32(t);
                const bool proj = t.name.find("_proj") != std::string::npos;  // q/k/v/o, dense MLP, experts
                if (proj) v = nf4_round_trip(v);
                keep.push_back(std::move(v));
                out.push_back({t.name, DType::F32, t.shape, std::as_bytes(std::span<const float>(keep.back()))});
            }
            write_safetensors(ref / "model.safetensors", out, {{"format", "pt"}});
        }
        CpuModel rf = load(ref, false);
        QVERIFY(rf.logits(b) == lf);
        const Err e = compare(lf, lfloat);
        qInfo("NF4 vs float weights: logits rel %.3g (the tiny model's routing moves with its inputs)", e.rel());
        QVERIFY(e.rel() > 1e-4);
        qh.zero_grads();
        qf.zero_grads();
        QCOMPARE(qh.forward_backward(b, 1.0f, 0), qf.forward_backward(b, 1.0f, 0));
        for (size_t i = 0; i < qh.lora_params().size(); ++i) QVERIFY(qh.lora_params()[i].grad == qf.lora_params()[i].grad);
        const ModelConfig cfg = load_model_config(fused);
        QVERIFY(CpuModel::plan(with_quantization(cfg), lora, 32).weights < CpuModel::plan(cfg, lora, 32).weights);
        // A pre-quantized (bnb-4bit) MoE checkpoint is refused with the way on.
        ModelConfig pre = with_quantization(cfg);
        pre.quantization.prequantized = true;
        tandem::test::expect_error([&] { (void)CpuModel::plan(pre, lora, 32); }, ErrorCategory::Unsupported,
                                   {"quantization nf4"});
    }

    void train_curve_data() { parity_data(); }

    // 10 AdamW steps on the same batch vs torch.optim.AdamW: losses and final LoRA weights.
    void train_curve() {
        QFETCH(QString, variant);
        const fs::path dir = fixtures() / "models" / variant.toStdString();
        const nlohmann::json curve = read_json(dir / "train_curve.json");
        const PackedBatch batch = batch_from_sequences(read_sequences(dir / "sequences.json"));
        CpuModel m = load_variant(dir, 64);
        const double lr = curve["lr"], b1 = curve["betas"][0], b2 = curve["betas"][1], eps = curve["eps"],
                     wd = curve["weight_decay"];
        std::vector<std::vector<float>> ma, va;
        for (const auto& p : m.lora_params()) {
            ma.emplace_back(p.value.size(), 0.0f);
            va.emplace_back(p.value.size(), 0.0f);
        }
        double worst_loss = 0;
        for (int step = 1; step <= int(curve["steps"]); ++step) {
            m.zero_grads();
            const double loss = m.forward_backward(batch, float(1.0 / batch.num_label_tokens), 0) / batch.num_label_tokens;
            const double ref = curve["losses"][step - 1];
            worst_loss = std::max(worst_loss, std::fabs(loss - ref));
            QVERIFY2(std::fabs(loss - ref) <= 1e-4, qPrintable(QString("step %1 loss %2 ref %3").arg(step).arg(loss).arg(ref)));
            auto& ps = m.lora_params();
            for (size_t i = 0; i < ps.size(); ++i)
                cpu::adamw_update(ps[i].value.data(), ps[i].grad.data(), ma[i].data(), va[i].data(),
                                  int64_t(ps[i].value.size()), lr, b1, b2, eps, wd, step);
        }
        const SafetensorsFile fin(dir / "train_final.safetensors");
        double worst = 0;
        for (const auto& p : m.lora_params()) {
            const Err e = compare(peft_layout(p, p.value), tensor(fin, p.spec.name));
            worst = std::max(worst, e.rel());
            QVERIFY2(e.rel() <= 1e-3, qPrintable(QString::fromStdString(p.spec.name) + QString(" rel %1").arg(e.rel())));
        }
        qInfo("%s train: worst |loss - ref| %.3g, final LoRA worst rel %.3g", qPrintable(variant), worst_loss, worst);
    }

    // Two micro-batches with grad_scale = 1 / all label tokens == one batch holding both.
    void gradient_accumulation() {
        const fs::path dir = fixtures() / "models" / "llama";
        const auto seqs = read_sequences(dir / "sequences.json");
        const PackedBatch all = batch_from_sequences(seqs);
        const PackedBatch b1 = batch_from_sequences({seqs[0], seqs[1]});
        const PackedBatch b2 = batch_from_sequences({seqs[2], seqs[3]});
        QCOMPARE(b1.num_label_tokens + b2.num_label_tokens, all.num_label_tokens);
        const float scale = float(1.0 / all.num_label_tokens);
        CpuModel m = load_variant(dir, 64);
        m.zero_grads();
        const double l_all = m.forward_backward(all, scale, 0);
        const auto g_all = grads_of(m);
        m.zero_grads();
        const double l_split = m.forward_backward(b1, scale, 0) + m.forward_backward(b2, scale, 0);
        const auto g_split = grads_of(m);
        const double rel = max_rel(g_split, g_all);
        qInfo("accumulation: loss diff %.3g, grads worst rel %.3g", std::fabs(l_all - l_split), rel);
        QVERIFY(std::fabs(l_all - l_split) <= 1e-5 * std::fabs(l_all));
        QVERIFY(rel <= 1e-5);
    }

    // Checkpointing changes where activations live, never what is computed: off, recompute, smart,
    // smart-single and selective give the same losses and LoRA gradients bit for bit (two accumulated micro-batches with
    // dropout; babyllama has 5 layers, so smart offloads 3 block inputs and smart-single 4; the 2-layer
    // fixtures cover q/k norm and biases).
    void checkpointing_policies_agree_data() {
        QTest::addColumn<QString>("model");
        QTest::newRow("babyllama") << QString::fromStdString((babyllama() / "hf").string());
        for (const char* f : {"qwen3", "qwen2", "phi3", "phi3-long", "gemma2", "gemma3", "qwen3-moe", "mixtral", "gpt-oss"})
            QTest::newRow(f) << QString::fromStdString((fixtures() / "models" / f).string());
    }
    void checkpointing_policies_agree() {
        QFETCH(QString, model);
        const fs::path dir = model.toStdString();
        TANDEM_REQUIRE_ASSET(dir);
        const ModelConfig cfg = load_model_config(dir);
        LoraConfig lora;
        lora.r = 4;
        lora.dropout = cfg.num_experts > 0 ? 0.0 : 0.1;  // PEFT's LoRA on experts has no dropout
        std::vector<std::vector<int32_t>> seqs;
        for (int s = 0; s < 4; ++s) {
            std::vector<int32_t> q;
            for (int t = 0; t < 9 + 5 * s; ++t) q.push_back(int32_t((t * 7 + s * 13 + 3) % cfg.vocab_size));
            seqs.push_back(q);
        }
        const PackedBatch b1 = batch_from_sequences({seqs[0], seqs[1]});
        const PackedBatch b2 = batch_from_sequences({seqs[2], seqs[3]});
        const float scale = float(1.0 / (b1.num_label_tokens + b2.num_label_tokens));
        struct Run {
            double l1, l2, eval;
            std::vector<std::vector<float>> grads;
        };
        auto run = [&](CheckpointPolicy p, int mlp_kept_layers = 0, int mlp_offloaded_layers = 0) -> Run {
            CpuModel m = CpuModel::load(dir, lora, 5, 64, p, false, false,
                                        PlanOptions{mlp_kept_layers, false, mlp_offloaded_layers});
            if (m.checkpointing() != p) qFatal("the model was loaded with another checkpointing policy");
            // B != 0, so every path of the LoRA backward is exercised
            for (auto& prm : m.lora_params())
                if (!prm.spec.is_a)
                    for (size_t i = 0; i < prm.value.size(); ++i) prm.value[i] = 0.01f * float(int(i % 7) - 3);
            m.zero_grads();
            Run r;
            r.l1 = m.forward_backward(b1, scale, 11);
            r.l2 = m.forward_backward(b2, scale, 12);
            r.eval = m.forward_loss(b1);
            r.grads = grads_of(m);
            return r;
        };
        const Run off = run(CheckpointPolicy::Off);
        auto same_as_off = [&](const Run& r, const QString& what) {
            QCOMPARE(r.l1, off.l1);
            QCOMPARE(r.l2, off.l2);
            QCOMPARE(r.eval, off.eval);
            QCOMPARE(r.grads.size(), off.grads.size());
            for (size_t i = 0; i < r.grads.size(); ++i)
                QVERIFY2(std::memcmp(r.grads[i].data(), off.grads[i].data(), r.grads[i].size() * sizeof(float)) == 0,
                         qPrintable(what + QString(": grad of tensor %1 differs from off")
                                               .arg(QString::fromStdString(
                                                   CpuModel::load(dir, lora, 5, 64).lora_params()[i].spec.name))));
        };
        for (CheckpointPolicy p : {CheckpointPolicy::Recompute, CheckpointPolicy::Smart, CheckpointPolicy::SmartSingle,
                                   CheckpointPolicy::Selective})
            same_as_off(run(p), QString("policy %1").arg(int(p)));
        // Layers 0..K-1 keeping the MLP buffers the policy drops (the memory a GPU has left): the same bits.
        if (cfg.num_experts == 0)
            for (const auto& [p, k] : {std::pair{CheckpointPolicy::Selective, 1},
                                       std::pair{CheckpointPolicy::Selective, int(cfg.num_hidden_layers)},
                                       std::pair{CheckpointPolicy::Smart, 1}})
                same_as_off(run(p, k), QString("policy %1 with %2 layers keeping their MLP buffers").arg(int(p)).arg(k));
        // Layers whose MLP buffers go to host memory through two shared slots (the rest of what a GPU cannot hold):
        // every layer but the last (babyllama: 4, the first two copied out and back), or after a kept layer.
        if (cfg.num_experts == 0)
            for (const auto& [p, k] : {std::pair{CheckpointPolicy::Selective, 0}, std::pair{CheckpointPolicy::Selective, 1},
                                       std::pair{CheckpointPolicy::Smart, 0}}) {
                const int n = int(cfg.num_hidden_layers) - 1 - k;
                same_as_off(run(p, k, n), QString("policy %1 with %2 layers keeping and %3 offloading their MLP buffers")
                                              .arg(int(p)).arg(k).arg(n));
            }
        // The plan: off keeps a set per layer, recompute one shared set; selective keeps the attention
        // sub-block's outputs per layer and shares the rest: in between.
        const auto plan_off = CpuModel::plan(cfg, lora, 64, CheckpointPolicy::Off);
        const auto plan_rc = CpuModel::plan(cfg, lora, 64, CheckpointPolicy::Recompute);
        const auto plan_sel = CpuModel::plan(cfg, lora, 64, CheckpointPolicy::Selective);
        QVERIFY(plan_rc.activations < plan_sel.activations);
        QVERIFY(plan_sel.activations < plan_off.activations);
    }


    // Which layers offload their MLP buffers: spread evenly over K..L-2, in order, never the last; too many refused.
    void mlp_offload_layers_spread() {
        QCOMPARE(mlp_offload_layers(5, 0, 4), (std::vector<int>{0, 1, 2, 3}));
        QCOMPARE(mlp_offload_layers(5, 1, 3), (std::vector<int>{1, 2, 3}));
        QCOMPARE(mlp_offload_layers(32, 2, 0), std::vector<int>{});
        const std::vector<int> some = mlp_offload_layers(32, 0, 20);
        QCOMPARE(int(some.size()), 20);
        QCOMPARE(some.front(), 0);
        for (size_t i = 1; i < some.size(); ++i) {
            QVERIFY(some[i] > some[i - 1]);
            QVERIFY(some[i] - some[i - 1] <= 2);  // 31 candidates for 20: never two skipped in a row
        }
        QVERIFY(some.back() <= 30);
        test::expect_error([] { mlp_offload_layers(5, 1, 4); }, ErrorCategory::Internal, {"4 layers offloading", "only 3 of 5"});
        test::expect_error([] { mlp_offload_layers(5, 0, -1); }, ErrorCategory::Internal, {"-1 layers offloading"});
    }

    // Mixture of experts on the CPU: the LoRA gradients of a tiny Qwen3-MoE (attention and experts adapted, B
    // non-zero) against central finite differences of the loss; the Hub's per-expert layout and transformers 5's
    // fused one give the same bits; every checkpointing policy gives the same bits.
    void moe_gradients_and_layouts() {
        QTemporaryDir tmp;
        const fs::path hub = fs::path(tmp.path().toStdString()) / "hub", fused = fs::path(tmp.path().toStdString()) / "fused";
        write_tiny_moe(hub, false);
        write_tiny_moe(fused, true);
        QVERIFY(!inspect_model_dir(hub).config.experts_fused);
        QVERIFY(inspect_model_dir(fused).config.experts_fused);
        LoraConfig lora;
        lora.r = 2;
        std::vector<std::vector<int32_t>> seqs = {{3, 9, 14, 2, 40, 7, 7, 21, 33}, {5}, {11, 4, 19, 8, 30, 1}};
        const PackedBatch b = batch_from_sequences(seqs);
        auto load = [&](const fs::path& dir, CheckpointPolicy p = CheckpointPolicy::Off) {
            CpuModel m = CpuModel::load(dir, lora, 5, 32, p);
            for (auto& prm : m.lora_params())
                if (!prm.spec.is_a)
                    for (size_t i = 0; i < prm.value.size(); ++i) prm.value[i] = 0.05f * float(int(i % 7) - 3);
            return m;
        };
        CpuModel m = load(hub);
        bool experts = false;
        for (const auto& p : m.lora_params()) experts |= p.spec.experts > 0;
        QVERIFY(experts);
        m.zero_grads();
        const double loss = m.forward_backward(b, 1.0f, 0);
        int checked = 0, flips = 0;
        for (auto& p : m.lora_params()) {
            double gmax = 1e-12;
            for (float g : p.grad) gmax = std::max(gmax, double(std::fabs(g)));
            for (size_t i = 0; i < p.value.size(); i += std::max<size_t>(1, p.value.size() / 5)) {
                const float x0 = p.value[i];
                auto fd = [&](float h) {
                    p.value[i] = x0 + h;
                    const double lp = m.forward_loss(b);
                    p.value[i] = x0 - h;
                    const double lm = m.forward_loss(b);
                    p.value[i] = x0;
                    return (lp - lm) / (2.0 * double(h));
                };
                // A step that flips a token's choice of experts makes the loss jump: steps of 2e-3 and 1e-3 that
                // disagree mark one (skipped, and counted: at most a few may be).
                const double f1 = fd(2e-3f), f2 = fd(1e-3f);
                if (std::fabs(f1 - f2) > 1e-2 * gmax + 1e-3) {
                    ++flips;
                    continue;
                }
                ++checked;
                QVERIFY2(std::fabs(f2 - p.grad[i]) <= 1e-2 * gmax + 1e-3,
                         qPrintable(QString("%1[%2]: finite difference %3, gradient %4 (max %5)")
                                        .arg(QString::fromStdString(p.spec.name)).arg(i).arg(f2).arg(p.grad[i]).arg(gmax)));
            }
        }
        qInfo("MoE finite differences: %d checked, %d skipped at a routing flip", checked, flips);
        QVERIFY(flips * 10 <= checked);
        CpuModel f = load(fused);
        f.zero_grads();
        QCOMPARE(f.forward_backward(b, 1.0f, 0), loss);
        for (CheckpointPolicy p : {CheckpointPolicy::Recompute, CheckpointPolicy::Smart, CheckpointPolicy::Selective}) {
            CpuModel r = load(hub, p);
            r.zero_grads();
            QCOMPARE(r.forward_backward(b, 1.0f, 0), loss);
            for (size_t i = 0; i < r.lora_params().size(); ++i)
                QVERIFY(r.lora_params()[i].grad == m.lora_params()[i].grad);
        }
    }

    // The merged export of an MoE adapter (every expert's W_e + scaling B_e A_e, as PEFT merges target_parameters):
    // the merged model alone gives the base + adapter's logits, with the experts fused (qwen3-moe) and per expert
    // (mixtral) in the checkpoint.
    void moe_merged_export() {
        QTemporaryDir tmp;
        // gpt-oss: [E, in, out] experts with interleaved gate / up; gpt-oss/mxfp4: the same base as released
        // (MXFP4 experts: the merged model holds them dequantized, without the quantization_config).
        for (const char* v : {"qwen3-moe", "mixtral", "gpt-oss", "gpt-oss/mxfp4"}) {
            const bool mxfp4 = std::string(v) == "gpt-oss/mxfp4";
            const fs::path dir = fixtures() / "models" / v;
            const fs::path home = mxfp4 ? dir.parent_path() : dir;  // adapter, sequences
            const ModelConfig cfg = load_model_config(dir);
            const PeftAdapter a = read_peft_adapter(home / "adapter", cfg);
            const PackedBatch batch = batch_from_sequences(read_sequences(home / "sequences.json"));
            CpuModel with = load_variant(home, 64);
            const std::vector<float> want = with.logits(batch);
            const fs::path out = fs::path(tmp.path().toStdString()) / (mxfp4 ? "gpt-oss-mxfp4" : v);
            MergeOptions o;
            o.dtype = DType::F32;
            write_merged_model(dir, cfg, a.config, a.tensors, out, o);
            if (mxfp4) QVERIFY(!load_model_config(out).experts_mxfp4);
            CpuModel merged = CpuModel::load(out, a.config, 7, 64);  // LoRA B = 0: no adapter effect
            const Err e = compare(merged.logits(batch), want);
            qInfo("%s merged logits vs base + adapter: rel %.3g", v, e.rel());
            QVERIFY2(e.rel() <= 1e-5, qPrintable(QString("%1 rel %2").arg(v).arg(e.rel())));
            CpuModel base = CpuModel::load(dir, a.config, 7, 64);
            QVERIFY(compare(base.logits(batch), want).rel() > 1e-3);  // the adapter does change them
        }
    }

    // The load-balancing loss (output_router_logits) against transformers' (tests/reference/make_moe_aux_fixture.py:
    // the qwen3-moe fixture's four sequences as one padded batch): the loss (mean cross-entropy + coef * aux) and
    // every LoRA gradient; every checkpointing policy gives the same bits (a recompute must not count a layer twice).
    void moe_load_balancing_loss() {
        const fs::path src = fixtures() / "models" / "qwen3-moe";
        QTemporaryDir tmp;
        const fs::path dir = fs::path(tmp.path().toStdString()) / "qwen3-moe-aux";
        fs::create_directories(dir);
        fs::copy(src / "model.safetensors", dir / "model.safetensors");
        nlohmann::json cfg = read_json(src / "config.json");
        const nlohmann::json meta = read_json(src / "aux_meta.json");
        cfg["output_router_logits"] = true;
        cfg["router_aux_loss_coef"] = meta.at("router_aux_loss_coef");
        std::ofstream(dir / "config.json") << cfg.dump(2);
        const ModelConfig mc = load_model_config(dir);
        QVERIFY(mc.moe_aux_loss);
        const PeftAdapter a = read_peft_adapter(src / "adapter", mc);
        const PackedBatch batch = batch_from_sequences(read_sequences(src / "sequences.json"));
        const SafetensorsFile exp(src / "aux_expected.safetensors");
        auto run = [&](CheckpointPolicy p) {
            CpuModel m = CpuModel::load(dir, a.config, 7, 64, p);
            m.set_lora(a.tensors);
            m.zero_grads();
            const double loss = m.forward_backward(batch, float(1.0 / batch.num_label_tokens), 0) / batch.num_label_tokens;
            return std::make_pair(loss, grads_of(m));
        };
        const auto [loss, grads] = run(CheckpointPolicy::Off);
        const double ref = tensor(exp, "loss").at(0), ce = tensor(exp, "ce").at(0);
        qInfo("loss %.9f ref %.9f (ce %.9f, aux term %.3g)", loss, ref, ce, ref - ce);
        QVERIFY(std::fabs(loss - ref) <= 1e-5 * std::fabs(ref));
        QVERIFY(std::fabs(ref - ce) > 1e-3);  // the term matters
        CpuModel m = CpuModel::load(dir, a.config, 7, 64);
        double worst = 0;
        for (size_t i = 0; i < m.lora_params().size(); ++i) {
            const LoraParam& p = m.lora_params()[i];
            const Err e = compare(peft_layout(p, grads[i]), tensor(exp, p.spec.name + ".grad"));
            worst = std::max(worst, e.rel());
            QVERIFY2(e.rel() <= 1e-3, qPrintable(QString::fromStdString(p.spec.name) + QString(" rel %1").arg(e.rel())));
        }
        qInfo("LoRA grads with the load-balancing loss: worst rel %.3g", worst);
        for (CheckpointPolicy p : {CheckpointPolicy::Recompute, CheckpointPolicy::Smart, CheckpointPolicy::Selective}) {
            const auto [l2, g2] = run(p);
            QCOMPARE(l2, loss);
            QVERIFY(g2 == grads);
        }
    }

    // Long sequences: the MLP in chunks of rows (plan.h kMlpChunkRows; 256 rows here, 3 chunks of a 600-token
    // batch, the last one partial) under the policies that drop its buffers gives the loss, the eval loss and the
    // LoRA gradients of the whole MLP bit for bit (the LoRA weight gradients sum rows in blocks of 256 either way:
    // kernels/cpu/matmul.h), and a smaller plan. A fused gate_up (Phi-3) shares lora_A between gate and up, whose
    // gradients then add in another order: close, not bitwise. Off keeps its per-layer buffers and never chunks.
    void mlp_chunks_match_the_whole_mlp_data() {
        QTest::addColumn<QString>("model");
        QTest::addColumn<bool>("nf4");
        QTest::addColumn<bool>("fp8");
        QTest::addColumn<bool>("bitwise");
        QTest::newRow("babyllama") << QString::fromStdString((babyllama() / "hf").string()) << false << false << true;
        QTest::newRow("qwen3") << QString::fromStdString((fixtures() / "models" / "qwen3").string()) << false << false
                               << true;
        QTest::newRow("phi3") << QString::fromStdString((fixtures() / "models" / "phi3").string()) << false << false
                              << false;
        QTest::newRow("llama nf4") << QString::fromStdString((fixtures() / "models" / "llama").string()) << true
                                   << false << true;
        // FP8 quantizes each row's 1x128 tiles: chunks of rows change nothing.
        QTest::newRow("llama fp8") << QString::fromStdString((fixtures() / "models" / "llama").string()) << false
                                   << true << true;
    }
    void mlp_chunks_match_the_whole_mlp() {
        QFETCH(QString, model);
        QFETCH(bool, nf4);
        QFETCH(bool, fp8);
        QFETCH(bool, bitwise);
        const fs::path dir = model.toStdString();
        TANDEM_REQUIRE_ASSET(dir);
        const ModelConfig cfg = load_model_config(dir);
        const int positions = int(std::min<int64_t>(cfg.max_position_embeddings, 120));
        LoraConfig lora;
        lora.r = 4;
        std::vector<std::vector<int32_t>> seqs;
        // 1,200 tokens in chunks of 256 rows (kLoraGradRows: the CPU's LoRA weight gradients sum rows in blocks of
        // 256 whether chunked or not): five chunks, so the whole block but attention runs in them
        // (kBlockChunkMinChunks).
        for (int s = 0, total = 0; total < 1200; ++s) {
            const int n = std::min(positions, 1200 - total);
            std::vector<int32_t> q;
            for (int t = 0; t < n; ++t) q.push_back(int32_t((t * 5 + s * 17 + 1) % cfg.vocab_size));
            seqs.push_back(q);
            total += n;
        }
        const PackedBatch b = batch_from_sequences(seqs);
        const float scale = float(1.0 / b.num_label_tokens);
        struct Run {
            double loss, eval;
            std::vector<std::vector<float>> grads;
        };
        auto run = [&](CheckpointPolicy p) -> Run {
            CpuModel m = CpuModel::load(dir, lora, 5, 1280, p, nf4, fp8);
            for (auto& prm : m.lora_params())
                if (!prm.spec.is_a)
                    for (size_t i = 0; i < prm.value.size(); ++i) prm.value[i] = 0.01f * float(int(i % 5) - 2);
            m.zero_grads();
            Run r;
            r.loss = m.forward_backward(b, scale, 3);
            r.eval = m.forward_loss(b);
            r.grads = grads_of(m);
            return r;
        };
        set_mlp_chunk_rows(0);
        const Run whole = run(CheckpointPolicy::Recompute);
        const ModelConfig planned = nf4 ? with_quantization(cfg) : fp8 ? with_fp8(cfg) : cfg;
        const auto plan_whole = CpuModel::plan(planned, lora, 1280, CheckpointPolicy::Recompute);
        set_mlp_chunk_rows(256);
        for (CheckpointPolicy p : {CheckpointPolicy::Recompute, CheckpointPolicy::Smart, CheckpointPolicy::SmartSingle,
                                   CheckpointPolicy::Selective}) {
            const Run r = run(p);
            if (bitwise) {
                QCOMPARE(r.loss, whole.loss);
                QCOMPARE(r.eval, whole.eval);
                for (size_t i = 0; i < r.grads.size(); ++i)
                    QVERIFY2(std::memcmp(r.grads[i].data(), whole.grads[i].data(), r.grads[i].size() * sizeof(float)) == 0,
                             qPrintable(QString("policy %1: LoRA gradient %2 differs from the whole MLP's").arg(int(p)).arg(i)));
            } else {
                QVERIFY(std::fabs(r.loss - whole.loss) <= 1e-5 * std::fabs(whole.loss));
                QVERIFY(std::fabs(r.eval - whole.eval) <= 1e-5 * std::fabs(whole.eval));
                QVERIFY2(max_rel(r.grads, whole.grads) <= 1e-4,
                         qPrintable(QString("grads rel %1").arg(max_rel(r.grads, whole.grads))));
            }
        }
        const Run off = run(CheckpointPolicy::Off);  // never chunked: bitwise the unchunked recompute
        QCOMPARE(off.loss, whole.loss);
        const auto plan_chunked = CpuModel::plan(planned, lora, 1280, CheckpointPolicy::Recompute);
        set_mlp_chunk_rows(kMlpChunkRows);
        QVERIFY2(plan_chunked.activations < plan_whole.activations,
                 qPrintable(QString("activations %1 (chunked) vs %2").arg(plan_chunked.activations).arg(plan_whole.activations)));
    }

    // Long sequences under recompute / smart: the whole block but attention runs in chunks (more than
    // kBlockChunkMinChunks of them: 640 rows in chunks of 128), so ln1, mid, ln2 (and their rstds) and d_ln hold one
    // chunk of rows, d_att the attention output's gradient [T,Q]; selective (which keeps mid) chunks only the MLP,
    // and so does smart with at most four chunks' rows (640 in chunks of 160).
    void plan_chunks_the_block_but_attention() {
        const ModelConfig cfg = load_model_config(fixtures() / "models" / "llama");
        LoraConfig lora;
        const Dims d = make_dims(cfg, lora, 640, 0, 64);
        const auto specs = lora_tensor_specs(cfg, lora);
        PlanTraits tr;
        tr.act_bytes = 4;
        auto bytes = [](const ArenaLayout& a, int h) {
            if (h < 0) return size_t(0);
            return (h + 1 < a.count() ? a.offset(h + 1) : a.size()) - a.offset(h);
        };
        auto rows = [](size_t n) { return (n + ArenaLayout::kAlign - 1) / ArenaLayout::kAlign * ArenaLayout::kAlign; };
        set_mlp_chunk_rows(128);
        for (CheckpointPolicy p : {CheckpointPolicy::Recompute, CheckpointPolicy::Smart, CheckpointPolicy::Selective}) {
            const ModelPlan y = make_plan(d, specs, lora_index_of(specs, d.L), p, tr);
            const bool block = p != CheckpointPolicy::Selective;
            QCOMPARE(y.block_chunked, block);
            QCOMPARE(y.mlp_rows, 128);
            const size_t R = block ? 128 : 640, C = size_t(d.C);
            const ActHandles& s = y.sets[1];
            QCOMPARE(bytes(y.acts, s.ln1), rows(R * C * 4));
            QCOMPARE(bytes(y.acts, s.ln1_rstd), rows(R * 4));
            if (block) {  // selective keeps mid (a GEMM's output) per layer, at every row
                QCOMPARE(bytes(y.acts, s.mid), rows(R * C * 4));
                QCOMPARE(bytes(y.acts, s.ln2), rows(R * C * 4));
                QCOMPARE(bytes(y.acts, y.d_att), rows(640 * size_t(d.Q) * 4));
                QVERIFY(d.Q >= d.C);  // the final norm's output and gradient in d_att's and d_big2's memory
                QCOMPARE(y.lnf, y.d_att);
                QCOMPARE(y.d_lnf, y.d_big2);
                QVERIFY(bytes(y.acts, y.d_big2) >= rows(640 * C * 4));
            } else {
                QCOMPARE(y.d_att, -1);
                QVERIFY(y.lnf != y.d_big && y.d_lnf != y.d_big2);
            }
            QCOMPARE(bytes(y.acts, y.d_ln), rows(R * C * 4));
            QCOMPARE(bytes(y.acts, s.qr), rows(640 * size_t(d.Q) * 4));  // attention's inputs stay whole
        }
        set_mlp_chunk_rows(160);  // four chunks: the MLP only, the rest of the block whole
        const ModelPlan four = make_plan(d, specs, lora_index_of(specs, d.L), CheckpointPolicy::Smart, tr);
        QVERIFY(!four.block_chunked);
        QCOMPARE(four.mlp_rows, 160);
        QCOMPARE(bytes(four.acts, four.sets[1].ln1), rows(640 * size_t(d.C) * 4));
        QCOMPARE(four.d_att, -1);
        set_mlp_chunk_rows(kMlpChunkRows);
    }

    // Same dropout seed -> bitwise the same gradients; another seed -> different; p = 0 ignores the seed.
    void dropout_reproducible() {
        const fs::path dir = fixtures() / "models" / "qwen2";
        const PackedBatch batch = batch_from_sequences(read_sequences(dir / "sequences.json"));
        const float scale = float(1.0 / batch.num_label_tokens);
        CpuModel a = load_variant(dir, 64, 0.3);
        CpuModel b = load_variant(dir, 64, 0.3);
        a.zero_grads();
        b.zero_grads();
        const double la = a.forward_backward(batch, scale, 1234);
        const double lb = b.forward_backward(batch, scale, 1234);
        QCOMPARE(la, lb);
        const auto ga = grads_of(a), gb = grads_of(b);
        for (size_t i = 0; i < ga.size(); ++i)
            QVERIFY(std::memcmp(ga[i].data(), gb[i].data(), ga[i].size() * sizeof(float)) == 0);
        b.zero_grads();
        b.forward_backward(batch, scale, 999);
        QVERIFY(max_rel(grads_of(b), ga) > 1e-3);
        // dropout changes the loss vs no dropout, and evaluation never drops
        CpuModel c = load_variant(dir, 64, 0.0);
        c.zero_grads();
        const double lc = c.forward_backward(batch, scale, 1234);
        QVERIFY(std::fabs(lc - la) > 1e-6);
        QCOMPARE(a.forward_loss(batch), c.forward_loss(batch));
        // p = 0: the seed is irrelevant
        const auto gc = grads_of(c);
        c.zero_grads();
        QCOMPARE(c.forward_backward(batch, scale, 777), lc);
        const auto gc2 = grads_of(c);
        for (size_t i = 0; i < gc.size(); ++i)
            QVERIFY(std::memcmp(gc[i].data(), gc2[i].data(), gc[i].size() * sizeof(float)) == 0);
    }

    // The kernels are deterministic for any thread count, so the whole step is too: bitwise equal grads.
    void thread_count_determinism() {
        const fs::path dir = fixtures() / "models" / "qwen3";
        const PackedBatch batch = batch_from_sequences(read_sequences(dir / "sequences.json"));
        const int before = cpu::cpu_threads();
        CpuModel m = load_variant(dir, 64, 0.1);
        cpu::set_cpu_threads(1);
        m.zero_grads();
        const double l1 = m.forward_backward(batch, 0.5f, 3);
        const auto g1 = grads_of(m);
        cpu::set_cpu_threads(4);
        m.zero_grads();
        const double l4 = m.forward_backward(batch, 0.5f, 3);
        const auto g4 = grads_of(m);
        cpu::set_cpu_threads(before);
        QCOMPARE(l1, l4);
        for (size_t i = 0; i < g1.size(); ++i)
            QVERIFY(std::memcmp(g1[i].data(), g4[i].data(), g1[i].size() * sizeof(float)) == 0);
    }

    // Fresh LoRA: A ~ U(-1/sqrt(in), 1/sqrt(in)), B = 0, deterministic in the seed; the adapter adds nothing.
    void lora_init() {
        const fs::path dir = fixtures() / "models" / "llama";
        LoraConfig cfg;
        cfg.r = 4;
        cfg.alpha = 8;
        CpuModel a = CpuModel::load(dir, cfg, 42, 16);
        CpuModel b = CpuModel::load(dir, cfg, 42, 16);
        CpuModel c = CpuModel::load(dir, cfg, 43, 16);
        QCOMPARE(a.lora_params().size(), size_t(28));
        for (size_t i = 0; i < a.lora_params().size(); ++i) {
            const auto& p = a.lora_params()[i];
            QVERIFY(p.value == b.lora_params()[i].value);
            if (p.spec.is_a) {
                const double bound = 1.0 / std::sqrt(double(p.spec.shape[1]));
                double mx = 0;
                for (float x : p.value) mx = std::max(mx, std::fabs(double(x)));
                QVERIFY(mx <= bound && mx > 0.5 * bound);
                QVERIFY(p.value != c.lora_params()[i].value);
            } else {
                QVERIFY(std::all_of(p.value.begin(), p.value.end(), [](float x) { return x == 0.0f; }));
            }
        }
        QVERIFY(a.activation_bytes() > 0 && a.weight_bytes() > 0 && a.lora_bytes() > 0);
        // too many tokens for the arena: a clear error, not a crash
        const PackedBatch big = batch_from_sequences({std::vector<int32_t>(17, 3)});
        tandem::test::expect_error([&] { a.forward_loss(big); }, ErrorCategory::InvalidInput, {"16"});
        const PackedBatch bad = batch_from_sequences({{1, 200, 3}});
        tandem::test::expect_error([&] { a.forward_loss(bad); }, ErrorCategory::InvalidInput, {"200"});
    }

    // babyllama-tok105: greedy generation from each reference prompt reproduces the reference ids and text.
    void babyllama_greedy() {
        TANDEM_REQUIRE_ASSET(babyllama());
        const fs::path hf = babyllama() / "hf";
        const nlohmann::json ref = read_json(babyllama() / "reference" / "reference_outputs.json");
        const Tokenizer tok = Tokenizer::load(hf);
        for (const auto& c : ref["cases"]) {
            const auto prompt_ids = c["prompt_ids"].get<std::vector<int32_t>>();
            const auto want = c["greedy_new_ids"].get<std::vector<int32_t>>();
            const std::string prompt = c["prompt"];
            if (!prompt.empty()) QCOMPARE(tok.encode(prompt, true), prompt_ids);
            GenerateRequest req;
            req.model_dir = hf;
            req.prompt_ids = prompt_ids;
            req.max_new_tokens = int(want.size());
            req.eos_ids = {2};
            const GenerateResult r = generate_tokens(req);
            QCOMPARE(r.new_ids, want);
            std::vector<int32_t> all = prompt_ids;
            all.insert(all.end(), r.new_ids.begin(), r.new_ids.end());
            // The reference text comes from SentencePiece, which renders <unk> (id 0) as " \342\201\207 "; HF-style
            // decode with skip_special_tokens drops it, so that piece is removed from the reference.
            const std::string text = tok.decode(all, true);
            std::string want_text = unescape_octal(c["greedy_text"]);
            for (size_t at; (at = want_text.find(" \xE2\x81\x87 ")) != std::string::npos;) want_text.erase(at, 5);
            QVERIFY2(text == want_text, qPrintable(QString::fromStdString(text + " <> " + want_text)));
        }
    }

    // Teacher-forced per-token NLL of the reference text.
    void babyllama_teacher_forced() {
        TANDEM_REQUIRE_ASSET(babyllama());
        const fs::path hf = babyllama() / "hf";
        const nlohmann::json tf = read_json(babyllama() / "reference" / "reference_outputs.json")["teacher_forced"];
        const auto ids = tf["ids"].get<std::vector<int32_t>>();
        const auto nll_ref = tf["per_token_nll"].get<std::vector<double>>();
        EvalRequest req;
        req.model_dir = hf;
        req.sequences = {ids};
        req.want_logits = true;
        const EvalResult r = evaluate_sequences(req);
        QCOMPARE(r.num_predicted, int64_t(nll_ref.size()));
        double worst = 0, sum = 0;
        const int V = int(r.vocab);
        for (size_t t = 0; t + 1 < ids.size(); ++t) {
            const float* row = r.logits.data() + t * V;
            double mx = row[0];
            for (int v = 1; v < V; ++v) mx = std::max(mx, double(row[v]));
            double s = 0;
            for (int v = 0; v < V; ++v) s += std::exp(double(row[v]) - mx);
            const double nll = mx + std::log(s) - row[ids[t + 1]];
            sum += nll;
            worst = std::max(worst, std::fabs(nll - nll_ref[t]));
        }
        qInfo("babyllama teacher-forced: worst |nll - ref| %.3g, mean %.6f (ref %.6f), eval loss %.6f", worst,
              sum / nll_ref.size(), double(tf["mean_nll_nats"]), r.loss());
        QVERIFY(worst <= 1e-4);
        QVERIFY(std::fabs(r.loss() - double(tf["mean_nll_nats"])) <= 1e-4);
    }

    // tandem-cli eval --dump --grads equals the PyTorch fixture.
    void cli_eval() {
        const fs::path dir = fixtures() / "models" / "qwen3";
        QTemporaryDir tmp;
        const QString out = tmp.filePath("out.safetensors");
        const auto r = tandem::test::run_cli({"eval", "--model", QString::fromStdString(dir.string()), "--adapter",
                                              QString::fromStdString((dir / "adapter").string()), "--sequences",
                                              QString::fromStdString((dir / "sequences.json").string()), "--dump", out,
                                              "--grads", "--device", "cpu"});
        QVERIFY2(r.exit_code == 0, r.err.constData());
        QVERIFY(r.out.contains("loss "));
        QVERIFY(r.out.contains("predicted 29"));
        const SafetensorsFile got(out.toStdString());
        const SafetensorsFile exp(dir / "expected.safetensors");
        QVERIFY(compare(tensor(got, "logits"), tensor(exp, "logits")).rel() <= 1e-4);
        QVERIFY(compare(tensor(got, "loss"), tensor(exp, "loss")).rel() <= 1e-5);
        int grads = 0;
        for (const auto& name : exp.names()) {
            if (name.size() < 5 || name.substr(name.size() - 5) != ".grad") continue;
            QVERIFY2(compare(tensor(got, name), tensor(exp, name)).rel() <= 1e-3, name.c_str());
            ++grads;
        }
        QCOMPARE(grads, 28);
    }

    void cli_generate() {
        TANDEM_REQUIRE_ASSET(babyllama());
        const nlohmann::json ref = read_json(babyllama() / "reference" / "reference_outputs.json");
        const auto& c = ref["cases"][1];
        const int n = int(c["greedy_new_ids"].size());
        const auto r = tandem::test::run_cli({"generate", "--model",
                                              QString::fromStdString((babyllama() / "hf").string()), "--prompt",
                                              QString::fromStdString(c["prompt"].get<std::string>()),
                                              "--max-new-tokens", QString::number(n)});
        QVERIFY2(r.exit_code == 0, r.err.constData());
        QCOMPARE(QString::fromUtf8(r.out).trimmed(), QString::fromStdString(c["greedy_text"].get<std::string>()).trimmed());
        // sampling is seeded: same seed, same text
        const QStringList args{"generate", "--model", QString::fromStdString((babyllama() / "hf").string()),
                               "--prompt", "", "--max-new-tokens", "30", "--temperature", "1.0", "--seed", "5"};
        const auto s1 = tandem::test::run_cli(args), s2 = tandem::test::run_cli(args);
        QCOMPARE(s1.exit_code, 0);
        QCOMPARE(s1.out, s2.out);
        // --chat: the model has no chat template, so chatml wraps the prompt; it must run and stop in time
        const auto ch = tandem::test::run_cli({"generate", "--model", QString::fromStdString((babyllama() / "hf").string()),
                                               "--prompt", "Hello", "--chat", "--max-new-tokens", "5"});
        QVERIFY2(ch.exit_code == 0, ch.err.constData());
        // base model without adapter: eval prints the loss
        const auto ev = tandem::test::run_cli({"eval", "--model", QString::fromStdString((babyllama() / "hf").string()),
                                               "--sequences", QString::fromStdString((fixtures() / "models" / "llama" / "sequences.json").string())});
        QVERIFY2(ev.exit_code == 0, ev.err.constData());
        QVERIFY(ev.out.startsWith("loss "));
    }

    // The sliding window (the mistral-window fixture checks the values against transformers): samples up to
    // the window give exactly the full-attention results, a longer one does not; eval runs it (exit 0).
    void sliding_window_applies() {
        QTemporaryDir tmp;
        const fs::path dir = fs::path(tmp.path().toStdString()) / "mistral";
        fs::copy(fixtures() / "models" / "mistral", dir, fs::copy_options::recursive);
        nlohmann::json cfg = read_json(dir / "config.json");
        cfg["sliding_window"] = 6;
        tandem::test::write_file(dir / "config.json", cfg.dump(2));
        CpuModel windowed = load_variant(dir, 64);
        CpuModel full = load_variant(fixtures() / "models" / "mistral", 64);
        const PackedBatch short_batch = batch_from_sequences({{1, 2, 3, 4, 5, 6}, {7, 8, 9}});
        QCOMPARE(windowed.forward_loss(short_batch), full.forward_loss(short_batch));
        const PackedBatch long_batch = batch_from_sequences({{1, 2, 3}, {1, 2, 3, 4, 5, 6, 7, 8, 9, 10}});
        const double lw = windowed.forward_loss(long_batch), lf = full.forward_loss(long_batch);
        QVERIFY2(std::isfinite(lw) && std::fabs(lw - lf) > 1e-6,
                 qPrintable(QString("window 6 over a 10-token sample: loss %1, full attention %2").arg(lw).arg(lf)));
        tandem::test::write_file(dir / "seqs.json", "{\"sequences\": [[1, 2, 3, 4, 5, 6, 7, 8]]}");
        const auto r = tandem::test::run_cli(QStringList{"eval", "--model", QString::fromStdString(dir.string()),
                                                         "--sequences", QString::fromStdString((dir / "seqs.json").string())});
        QVERIFY2(r.exit_code == 0, r.err.constData());
    }

    void cli_bad_input() {
        const fs::path dir = fixtures() / "models" / "llama";
        QTemporaryDir tmp;
        const QString model = QString::fromStdString(dir.string());
        auto eval = [&](const std::string& content, const QStringList& extra = {}) {
            const fs::path f = fs::path(tmp.path().toStdString()) / "seqs.json";
            tandem::test::write_file(f, content);
            return tandem::test::run_cli(QStringList{"eval", "--model", model, "--sequences",
                                                     QString::fromStdString(f.string())} + extra);
        };
        auto r = eval("{\"sequences\": [[1, 2, 3], [4, 101, 5]]}");
        QCOMPARE(r.exit_code, 2);
        QVERIFY2(r.err.contains("seqs.json") && r.err.contains("sequence 1") && r.err.contains("101"), r.err.constData());
        r = eval("{\"sequences\": []}");
        QCOMPARE(r.exit_code, 2);
        QVERIFY(r.err.contains("seqs.json"));
        r = eval("{\"sequences\": [[1, 2,");
        QCOMPARE(r.exit_code, 2);
        QVERIFY(r.err.contains("seqs.json"));
        r = eval("{\"sequences\": [[1, 2], []]}");
        QCOMPARE(r.exit_code, 2);
        QVERIFY(r.err.contains("sequence 1"));
        r = eval("{\"sequences\": [[1, 2, 3]]}", {"--device", "cuda"});
        QCOMPARE(r.exit_code, 4);
        QVERIFY(r.err.contains("use --device cpu"));
        r = eval("{\"sequences\": [[1, 2, 3]]}");
        QCOMPARE(r.exit_code, 0);
    }
};

QTEST_GUILESS_MAIN(TestModelCpu)
#include "test_model_cpu.moc"
