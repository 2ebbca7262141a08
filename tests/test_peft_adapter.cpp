// SPDX-FileCopyrightText: 2026 The Tandem developers
// SPDX-License-Identifier: GPL-3.0-or-later
// Tests for LoraConfig (validation, JSON) and PEFT adapter folders: the tensors a model + config imply,
// write -> read round trips, the exact adapter_config.json and safetensors layout we write, every rejection
// of the writer and the reader, atomicity, and the adapters PEFT 0.21 itself wrote
// (tests/fixtures/models/<variant>/adapter): we read them, and rewriting their tensors with our writer must
// give the same adapter_model.safetensors byte for byte; PEFT adapters whose target_modules is a regex, that
// use layers_to_transform or are stored in bf16 (tests/fixtures/peft).
// Note: no raw string literal in this file may contain a backslash (moc would drop the test class).
#include <QTemporaryDir>
#include <QTest>

#include <atomic>
#include <cmath>
#include <cstring>
#include <set>

#include <nlohmann/json.hpp>

#include "core/files.h"
#include "export/merged.h"
#include "export/peft_adapter.h"
#include "tandem/error.h"
#include "tandem/lora.h"
#include "tandem/model_config.h"
#include "tandem/safetensors.h"
#include "test_support.h"

Q_DECLARE_METATYPE(std::vector<std::string>)
Q_DECLARE_METATYPE(std::vector<int64_t>)

using namespace tandem;
using tandem::test::expect_error;
using json = nlohmann::json;
namespace fs = std::filesystem;

namespace {

// Llama with GQA: hidden 64, 4 heads of 16, 2 kv heads -> q [64, 64], k/v [32, 64], o [64, 64].
const char* kLlamaJson = R"({
  "architectures": ["LlamaForCausalLM"], "model_type": "llama", "hidden_size": 64, "intermediate_size": 96,
  "num_hidden_layers": 2, "num_attention_heads": 4, "num_key_value_heads": 2, "vocab_size": 101,
  "max_position_embeddings": 256, "rms_norm_eps": 1e-6})";

// Qwen3 with head_dim 32 != 64 / 4: q [128, 64], k/v [64, 64], o [64, 128].
const char* kQwen3Json = R"({
  "architectures": ["Qwen3ForCausalLM"], "model_type": "qwen3", "hidden_size": 64, "intermediate_size": 96,
  "num_hidden_layers": 3, "num_attention_heads": 4, "num_key_value_heads": 2, "head_dim": 32,
  "vocab_size": 101, "max_position_embeddings": 256, "rms_norm_eps": 1e-6})";

ModelConfig llama() {
    return parse_model_config(json::parse(kLlamaJson), "llama-test");
}
ModelConfig qwen3() {
    return parse_model_config(json::parse(kQwen3Json), "qwen3-test");
}
// Phi-3: fused qkv_proj [Q + 2 KV, H] = [64 + 2*32, 64] and gate_up_proj [2 * 96, 64].
ModelConfig phi3() {
    return parse_model_config(json::parse(R"({"architectures": ["Phi3ForCausalLM"], "hidden_size": 64,
        "intermediate_size": 96, "num_hidden_layers": 2, "num_attention_heads": 4, "num_key_value_heads": 2,
        "vocab_size": 101, "max_position_embeddings": 256})"),
                              "phi3-test");
}

const std::string kN = "base_model.model.model.layers.";

// Deterministic, non-trivial values (distinct per tensor and element).
// Qwen3-MoE: layers 0 and 2 route over 4 experts of 16 features (top 2), layer 1 is dense (mlp_only_layers).
ModelConfig qwen3_moe() {
    return parse_model_config(json::parse(R"({"architectures": ["Qwen3MoeForCausalLM"], "hidden_size": 64,
        "intermediate_size": 96, "moe_intermediate_size": 16, "num_hidden_layers": 3, "num_attention_heads": 4,
        "num_key_value_heads": 2, "head_dim": 16, "vocab_size": 101, "max_position_embeddings": 256,
        "num_experts": 4, "num_experts_per_tok": 2, "norm_topk_prob": true, "mlp_only_layers": [1]})"),
                              "qwen3-moe-test");
}

LoraTensors make_tensors(const ModelConfig& m, const LoraConfig& c) {
    LoraTensors t;
    int k = 0;
    for (const auto& s : lora_tensor_specs(m, c)) {
        int64_t n = 1;
        for (auto d : s.shape) n *= d;
        std::vector<float> v(static_cast<size_t>(n));
        for (int64_t i = 0; i < n; ++i) v[size_t(i)] = float(std::sin(0.37 * double(i) + 1.3 * k) * 0.1);
        t[s.name] = std::move(v);
        ++k;
    }
    return t;
}

std::vector<std::string> list_dir(const fs::path& dir) {
    std::vector<std::string> out;
    for (const auto& e : fs::directory_iterator(dir)) out.push_back(e.path().filename().string());
    std::sort(out.begin(), out.end());
    return out;
}

// No ".<name>.tmp-*" left by the atomic writer.
bool has_temp_files(const fs::path& dir) {
    for (const auto& e : fs::recursive_directory_iterator(dir))
        if (e.path().filename().string().find(".tmp-") != std::string::npos) return true;
    return false;
}

std::string slurp(const fs::path& p) {
    return read_file(p);
}

void write_json(const fs::path& p, const json& j) {
    tandem::test::write_file(p, j.dump(2));
}

// A tensor for write_safetensors with owned storage.
struct OwnedTensor {
    std::string name;
    DType dtype = DType::F32;
    std::vector<int64_t> shape;
    std::vector<std::byte> bytes;
};

OwnedTensor owned_f32(const std::string& name, std::vector<int64_t> shape, const std::vector<float>& v) {
    OwnedTensor t{name, DType::F32, std::move(shape), {}};
    t.bytes.resize(v.size() * 4);
    std::memcpy(t.bytes.data(), v.data(), t.bytes.size());
    return t;
}

void write_owned(const fs::path& path, const std::vector<OwnedTensor>& ts) {
    std::vector<TensorToWrite> w;
    for (const auto& t : ts) w.push_back({t.name, t.dtype, t.shape, t.bytes});
    write_safetensors(path, w, {{"format", "pt"}});
}

// The weights of a valid adapter as owned tensors, to be altered by a test.
std::vector<OwnedTensor> owned_from(const ModelConfig& m, const LoraConfig& c, const LoraTensors& t) {
    std::vector<OwnedTensor> out;
    for (const auto& s : lora_tensor_specs(m, c)) out.push_back(owned_f32(s.name, s.shape, t.at(s.name)));
    return out;
}

QString q(const std::string& s) {
    return QString::fromStdString(s);
}

}  // namespace

class TestPeftAdapter : public QObject {
    Q_OBJECT

    // A valid adapter for llama() with a small config, written into a fresh folder.
    struct Written {
        fs::path dir;
        LoraConfig config;
        LoraTensors tensors;
    };
    Written write_valid(const QTemporaryDir& tmp, const std::string& sub = "adapter") {
        Written w{fs::path(tmp.path().toStdString()) / sub, {}, {}};
        w.config.r = 4;
        w.config.alpha = 8;
        w.tensors = make_tensors(llama(), w.config);
        write_peft_adapter(w.dir, w.config, llama(), "org/base", w.tensors);
        return w;
    }
    // Rewrites adapter_config.json of a written adapter with `edit` applied.
    template <class F>
    void edit_config(const fs::path& dir, F edit) {
        json j = read_json_file(dir / kPeftConfigName);
        edit(j);
        write_json(dir / kPeftConfigName, j);
    }

private slots:
    // ---------------------------------------------------------------- LoraConfig
    void loraConfigDefaultsAndScaling() {
        LoraConfig c;
        QCOMPARE(c.r, 16);
        QCOMPARE(c.alpha, 32.0);
        QCOMPARE(c.dropout, 0.0);
        QCOMPARE(c.target_modules, lora_default_targets());
        QCOMPARE(c.scaling(), 2.0);
        c.use_rslora = true;
        QCOMPARE(c.scaling(), 8.0);  // 32 / sqrt(16)
        c.r = 8;
        c.alpha = 16;
        QVERIFY(std::fabs(c.scaling() - 16.0 / std::sqrt(8.0)) < 1e-12);
        c.use_rslora = false;
        QCOMPARE(c.scaling(), 2.0);
        validate_lora_config(LoraConfig{});
        // Known names: the seven of the Llama block, then the fused ones other families store.
        const auto& known = lora_known_targets();
        QCOMPARE(std::vector<std::string>(known.begin(), known.begin() + 7), lora_default_targets());
        QVERIFY(std::find(known.begin(), known.end(), "qkv_proj") != known.end());
        QVERIFY(std::find(known.begin(), known.end(), "gate_up_proj") != known.end());
        QVERIFY(std::find(known.begin(), known.end(), "lm_head") == known.end());
    }

    void loraConfigValidation() {
        auto bad = [](auto edit, std::vector<std::string> needles) {
            LoraConfig c;
            edit(c);
            expect_error([&] { validate_lora_config(c, "run.json: lora"); }, ErrorCategory::InvalidInput, needles);
        };
        bad([](LoraConfig& c) { c.r = 0; }, {"run.json: lora", "r = 0", "between 1 and"});
        bad([](LoraConfig& c) { c.r = kLoraMaxRank + 1; }, {"r = 8193"});
        bad([](LoraConfig& c) { c.alpha = 0; }, {"alpha"});
        bad([](LoraConfig& c) { c.alpha = -4; }, {"alpha"});
        bad([](LoraConfig& c) { c.alpha = std::nan(""); }, {"alpha"});
        bad([](LoraConfig& c) { c.dropout = 1.0; }, {"dropout", "[0, 1)"});
        bad([](LoraConfig& c) { c.dropout = -0.1; }, {"dropout"});
        bad([](LoraConfig& c) { c.target_modules.clear(); }, {"target_modules is empty", "q_proj"});
        bad(
            [](LoraConfig& c) {
                c.target_modules = {"q_proj", "attn_proj"};
            },
            {"unknown target module 'attn_proj'",
             "q_proj, k_proj, v_proj, o_proj, gate_proj, up_proj, down_proj, qkv_proj, gate_up_proj"});
        bad([](LoraConfig& c) { c.target_modules = {"lm_head"}; }, {"'lm_head'", "valid ones"});
        bad([](LoraConfig& c) { c.target_modules = {"q_proj", "q_proj"}; }, {"'q_proj' is listed twice"});
        bad([](LoraConfig& c) { c.layers_to_transform = {-1}; }, {"negative"});
        bad([](LoraConfig& c) { c.layers_to_transform = {1, 1}; }, {"layer 1 twice"});
    }

    void loraConfigJson() {
        LoraConfig c;
        c.r = 8;
        c.alpha = 12.5;
        c.dropout = 0.05;
        c.use_rslora = true;
        c.target_modules = {"v_proj", "q_proj"};
        c.layers_to_transform = {0, 3};
        json j = c;
        QCOMPARE(j.at("r").get<int>(), 8);
        QCOMPARE(j.at("alpha").get<double>(), 12.5);
        QCOMPARE(j.at("dropout").get<double>(), 0.05);
        QCOMPARE(j.at("use_rslora").get<bool>(), true);
        QCOMPARE(j.at("target_modules").get<std::vector<std::string>>(), c.target_modules);
        QCOMPARE(j.at("layers_to_transform").get<std::vector<int64_t>>(), c.layers_to_transform);
        LoraConfig back = j.get<LoraConfig>();
        QVERIFY(back == c);
        // absent keys keep the defaults
        QVERIFY(json::object().get<LoraConfig>() == LoraConfig{});
        LoraConfig partial = json{{"r", 32}}.get<LoraConfig>();
        QCOMPARE(partial.r, 32);
        QCOMPARE(partial.alpha, 32.0);
        // bad input
        auto bad = [](const json& jj, std::vector<std::string> needles) {
            expect_error([&] { (void)jj.get<LoraConfig>(); }, ErrorCategory::InvalidInput, needles);
        };
        bad(json{{"rank", 8}}, {"lora.rank", "unknown key", "target_modules"});
        bad(json{{"r", 8.5}}, {"lora.r", "integer"});
        bad(json{{"r", "8"}}, {"lora.r"});
        bad(json{{"r", 0}}, {"lora.r", "out of range"});
        bad(json{{"alpha", "big"}}, {"lora.alpha", "number"});
        bad(json{{"alpha", -1}}, {"alpha"});
        bad(json{{"dropout", 1}}, {"dropout"});
        bad(json{{"use_rslora", 1}}, {"lora.use_rslora"});
        bad(json{{"target_modules", "q_proj"}}, {"lora.target_modules", "list"});
        bad(json{{"target_modules", json::array({"q_proj", 3})}}, {"lora.target_modules"});
        bad(json{{"target_modules", json::array({"attn"})}}, {"unknown target module 'attn'"});
        bad(json{{"layers_to_transform", json::array({"0"})}}, {"layers_to_transform"});
        bad(json::array(), {"expected a JSON object"});
    }

    // ---------------------------------------------------------------- tensor enumeration
    void specsLlamaGqa() {
        const auto m = llama();
        LoraConfig c;
        c.r = 8;
        const auto specs = lora_tensor_specs(m, c);
        QCOMPARE(specs.size(), size_t(2 * 7 * 2));
        std::map<std::string, std::vector<int64_t>> s;
        for (const auto& x : specs) s[x.name] = x.shape;
        const std::string p = kN + "1.";
        QCOMPARE(s.at(p + "self_attn.q_proj.lora_A.weight"), (std::vector<int64_t>{8, 64}));
        QCOMPARE(s.at(p + "self_attn.q_proj.lora_B.weight"), (std::vector<int64_t>{64, 8}));
        QCOMPARE(s.at(p + "self_attn.k_proj.lora_A.weight"), (std::vector<int64_t>{8, 64}));
        QCOMPARE(s.at(p + "self_attn.k_proj.lora_B.weight"), (std::vector<int64_t>{32, 8}));
        QCOMPARE(s.at(p + "self_attn.v_proj.lora_B.weight"), (std::vector<int64_t>{32, 8}));
        QCOMPARE(s.at(p + "self_attn.o_proj.lora_A.weight"), (std::vector<int64_t>{8, 64}));
        QCOMPARE(s.at(p + "mlp.gate_proj.lora_B.weight"), (std::vector<int64_t>{96, 8}));
        QCOMPARE(s.at(p + "mlp.up_proj.lora_A.weight"), (std::vector<int64_t>{8, 64}));
        QCOMPARE(s.at(p + "mlp.down_proj.lora_A.weight"), (std::vector<int64_t>{8, 96}));
        QCOMPARE(s.at(p + "mlp.down_proj.lora_B.weight"), (std::vector<int64_t>{64, 8}));
        // order: layer by layer, targets in config order, A then B
        QCOMPARE(specs[0].name, kN + "0.self_attn.q_proj.lora_A.weight");
        QCOMPARE(specs[1].name, kN + "0.self_attn.q_proj.lora_B.weight");
        QVERIFY(specs[0].is_a && !specs[1].is_a);
        QCOMPARE(specs[0].layer, int64_t(0));
        QCOMPARE(specs[0].module, std::string("q_proj"));
        QCOMPARE(peft_tensor_name(3, "mlp.up_proj", false), kN + "3.mlp.up_proj.lora_B.weight");

        c.target_modules = {"v_proj", "down_proj"};
        c.layers_to_transform = {1};
        const auto few = lora_tensor_specs(m, c);
        QCOMPARE(few.size(), size_t(4));
        QCOMPARE(few[0].name, kN + "1.self_attn.v_proj.lora_A.weight");
        QCOMPARE(few[2].name, kN + "1.mlp.down_proj.lora_A.weight");
        c.layers_to_transform = {2};
        expect_error([&] { lora_tensor_specs(m, c); }, ErrorCategory::InvalidInput,
                     {"layers_to_transform lists layer 2", "2 layers"});
        c.layers_to_transform = {};
        c.target_modules = {"qkv"};
        expect_error([&] { lora_tensor_specs(m, c); }, ErrorCategory::InvalidInput, {"unknown target module 'qkv'"});
    }

    void specsQwen3HeadDim() {
        const auto m = qwen3();
        QCOMPARE(m.q_dim(), int64_t(128));
        LoraConfig c;
        c.r = 4;
        std::map<std::string, std::vector<int64_t>> s;
        for (const auto& x : lora_tensor_specs(m, c)) s[x.name] = x.shape;
        QCOMPARE(s.size(), size_t(3 * 7 * 2));
        QCOMPARE(s.at(kN + "2.self_attn.q_proj.lora_A.weight"), (std::vector<int64_t>{4, 64}));
        QCOMPARE(s.at(kN + "2.self_attn.q_proj.lora_B.weight"), (std::vector<int64_t>{128, 4}));  // out != hidden
        QCOMPARE(s.at(kN + "2.self_attn.k_proj.lora_B.weight"), (std::vector<int64_t>{64, 4}));
        QCOMPARE(s.at(kN + "2.self_attn.o_proj.lora_A.weight"), (std::vector<int64_t>{4, 128}));  // in != hidden
        QCOMPARE(s.at(kN + "2.self_attn.o_proj.lora_B.weight"), (std::vector<int64_t>{64, 4}));
    }

    // ---------------------------------------------------------------- writing
    // A fused projection is one LoRA target (PEFT's names); the seven default names select it whole.
    void specsPhi3Fused() {
        const auto m = phi3();
        LoraConfig c;
        c.r = 4;
        const auto specs = lora_tensor_specs(m, c);  // the default seven names
        QCOMPARE(specs.size(), size_t(2 * 4 * 2));      // 2 layers x 4 projections x (A, B)
        QCOMPARE(specs[0].name, kN + "0.self_attn.qkv_proj.lora_A.weight");
        QCOMPARE(specs[0].shape, (std::vector<int64_t>{4, 64}));
        QCOMPARE(specs[1].shape, (std::vector<int64_t>{128, 4}));
        QCOMPARE(specs[1].feeds, (std::vector<int>{kQ, kK, kV}));
        QCOMPARE(specs[1].slot_row, (std::vector<int64_t>{0, 64, 96}));
        QCOMPARE(specs[4].name, kN + "0.mlp.gate_up_proj.lora_A.weight");
        QCOMPARE(specs[5].shape, (std::vector<int64_t>{192, 4}));
        QCOMPARE(specs[5].slot_row, (std::vector<int64_t>{0, 96}));
        // The slots share lora_A, read their rows of lora_B and draw one dropout mask.
        const LoraIndex idx = lora_index_of(specs, 2);
        QCOMPARE(idx[1][kK].a, 8);
        QCOMPARE(idx[1][kK].b_row, int64_t(64));
        QCOMPARE(idx[1][kV].drop, int(kQ));
        QCOMPARE(idx[1][kUp].b_row, int64_t(96));
        QCOMPARE(idx[1][kDown].drop, int(kDown));
        // Resolution: parts of a fused projection only all together.
        c.target_modules = {"q_proj", "v_proj"};
        expect_error([&] { lora_tensor_specs(m, c); }, ErrorCategory::InvalidInput,
                     {"fused qkv_proj", "list qkv_proj", "'q_proj'"});
        c.target_modules = {"qkv_proj", "gate_proj", "up_proj"};
        QCOMPARE(resolve_lora_targets(m, c).target_modules, (std::vector<std::string>{"qkv_proj", "gate_up_proj"}));
        c.target_modules = {"q_proj", "k_proj", "v_proj"};
        QCOMPARE(resolve_lora_targets(m, c).target_modules, (std::vector<std::string>{"qkv_proj"}));
        c.target_modules = {"gate_up_proj"};
        expect_error([&] { lora_tensor_specs(llama(), c); }, ErrorCategory::InvalidInput,
                     {"'gate_up_proj' does not exist in LlamaForCausalLM", "gate_proj, up_proj"});

        // Round trip: the written adapter_config names the fused modules, as PEFT does for Phi-3.
        QTemporaryDir tmp;
        LoraConfig d;
        d.r = 4;
        const auto t = make_tensors(m, d);
        const fs::path dir = fs::path(tmp.path().toStdString()) / "phi3";
        write_peft_adapter(dir, d, m, "microsoft/Phi-3-mini-4k-instruct", t);
        const json j = read_json_file(dir / kPeftConfigName);
        QCOMPARE(q(j.at("target_modules").dump()), q(R"(["qkv_proj","o_proj","gate_up_proj","down_proj"])"));
        const auto back = read_peft_adapter(dir, m);
        QCOMPARE(back.config.target_modules,
                 (std::vector<std::string>{"qkv_proj", "o_proj", "gate_up_proj", "down_proj"}));
        QVERIFY(back.tensors == t);
        // PEFT's "all-linear" on Phi-3 is the four fused/unfused projections.
        edit_config(dir, [](json& k) { k["target_modules"] = "all-linear"; });
        QVERIFY(read_peft_adapter(dir, m).tensors == t);
    }

    // PEFT 0.21's own MoE adapters (the qwen3-moe fixture with transformers 5's fused experts, the mixtral one with
    // per-expert tensors; tests/reference/make_fixtures.py), read and written back by Tandem: the same tensor
    // names, shapes and values (lora_B of the experts converted to the expert-major memory layout and back) and
    // the same adapter_config.json semantics, so PEFT loads what Tandem writes exactly as it loads its own file.
    void moeAdaptersWrittenAsPeftWrites() {
        QTemporaryDir tmp;
        for (const char* v : {"qwen3-moe", "mixtral"}) {
            const fs::path dir = tandem::test::fixtures() / "models" / v;
            const ModelConfig m = load_model_config(dir);
            const PeftAdapter a = read_peft_adapter(dir / "adapter", m);
            const fs::path out = fs::path(tmp.path().toStdString()) / v;
            write_peft_adapter(out, a.config, m, "", a.tensors);
            const SafetensorsFile theirs(dir / "adapter" / kPeftWeightsName), ours(out / kPeftWeightsName);
            QCOMPARE(ours.tensors().size(), theirs.tensors().size());
            int experts = 0;
            for (const TensorInfo& t : theirs.tensors()) {
                const TensorInfo& o = ours.at(t.name);  // throws (fails) when the name is missing
                QVERIFY2(o.shape == t.shape, qPrintable(QString("%1 %2").arg(v).arg(t.name.c_str())));
                QVERIFY2(tensor_to_f32(o) == tensor_to_f32(t), qPrintable(QString("%1 %2").arg(v).arg(t.name.c_str())));
                experts += t.name.find("experts") != std::string::npos;
            }
            QVERIFY(experts > 0);
            const json want = read_json_file(dir / "adapter" / kPeftConfigName), got = read_json_file(out / kPeftConfigName);
            for (const char* k : {"r", "lora_alpha", "use_rslora", "lora_dropout", "bias", "peft_type", "task_type",
                                  "fan_in_fan_out", "use_dora"})
                QVERIFY2(got.at(k) == want.at(k), qPrintable(QString("%1 %2: %3 vs %4").arg(v).arg(k)
                                                                 .arg(got.at(k).dump().c_str()).arg(want.at(k).dump().c_str())));
            for (const char* k : {"target_modules", "target_parameters"}) {
                const auto g = got.at(k).get<std::vector<std::string>>(), w = want.at(k).get<std::vector<std::string>>();
                QVERIFY2(std::set<std::string>(g.begin(), g.end()) == std::set<std::string>(w.begin(), w.end()),
                         qPrintable(QString("%1 %2: %3 vs %4").arg(v).arg(k).arg(got.at(k).dump().c_str())
                                        .arg(want.at(k).dump().c_str())));
            }
        }
    }

    // The merged export against PEFT's own merge_and_unload of each fixture adapter (fp32, tests/reference/
    // make_merged_fixtures.py): every merged projection, the untouched tensors byte for byte, bf16 rounded once,
    // a sharded base kept sharded, and no folder left behind on refusal or cancel.
    void mergedExportMatchesPeft() {
        QTemporaryDir tmp;
        const fs::path root = tmp.path().toStdString();
        for (const char* v : {"llama", "phi3", "gemma3"}) {
            const fs::path dir = tandem::test::fixtures() / "models" / v;
            const ModelConfig m = load_model_config(dir);
            const PeftAdapter a = read_peft_adapter(dir / "adapter", m);
            MergeOptions o;
            o.dtype = DType::F32;
            write_merged_model(dir, m, a.config, a.tensors, root / v, o);
            const SafetensorsSet out = SafetensorsSet::open(root / v);
            const SafetensorsFile ref(dir / "merged_reference.safetensors");
            const SafetensorsFile base(dir / "model.safetensors");
            int merged = 0;
            for (const TensorInfo& t : ref.tensors()) {
                if (t.name == "logits") continue;
                const auto want = tensor_to_f32(t), got = tensor_to_f32(out.at(t.name));
                QCOMPARE(got.size(), want.size());
                double worst = 0, peak = 0;
                for (size_t i = 0; i < want.size(); ++i) {
                    worst = std::max(worst, std::fabs(double(got[i]) - want[i]));
                    peak = std::max(peak, std::fabs(double(want[i])));
                }
                QVERIFY2(worst <= 1e-6 * peak, qPrintable(QString("%1 %2: %3").arg(v).arg(t.name.c_str()).arg(worst)));
                ++merged;
            }
            QCOMPARE(merged, int(lora_tensor_specs(m, a.config).size() / 2));  // every adapted tensor changed
            // An untouched tensor is copied as it was (the fixtures are fp32).
            const TensorInfo& e = base.at("model.embed_tokens.weight");
            QVERIFY(std::equal(e.data.begin(), e.data.end(), out.at("model.embed_tokens.weight").data.begin()));
            const auto cfg = read_json_file(root / v / "config.json");
            QCOMPARE(cfg.value("dtype", cfg.value("torch_dtype", std::string())), std::string("float32"));
        }

        // bf16: the fp32 merge rounded once.
        const fs::path llama_dir = tandem::test::fixtures() / "models" / "llama";
        const ModelConfig m = load_model_config(llama_dir);
        const PeftAdapter a = read_peft_adapter(llama_dir / "adapter", m);
        write_merged_model(llama_dir, m, a.config, a.tensors, root / "bf16");
        {
            const SafetensorsSet b = SafetensorsSet::open(root / "bf16");
            const SafetensorsSet f = SafetensorsSet::open(root / "llama");
            const std::string name = "model.layers.1.mlp.down_proj.weight";
            QVERIFY(b.at(name).dtype == DType::BF16);
            const auto want = tensor_to_f32(f.at(name));
            const auto* bits = reinterpret_cast<const uint16_t*>(b.at(name).data.data());
            for (size_t i = 0; i < want.size(); ++i) QCOMPARE(bits[i], f32_to_bf16(want[i]));
            QCOMPARE(read_json_file(root / "bf16" / "config.json").value("torch_dtype", std::string()),
                     std::string("bfloat16"));
        }

        // A sharded base (two files + index) stays sharded, with the same values.
        const fs::path sharded = root / "sharded-base";
        fs::create_directories(sharded);
        fs::copy_file(llama_dir / "config.json", sharded / "config.json");
        {
            const SafetensorsFile whole(llama_dir / "model.safetensors");
            std::vector<TensorToWrite> first, second;
            nlohmann::json map = nlohmann::json::object();
            for (const TensorInfo& t : whole.tensors()) {
                const bool one = t.name.find("layers.1.") == std::string::npos;
                (one ? first : second).push_back({t.name, t.dtype, t.shape, t.data});
                map[t.name] = one ? "model-00001-of-00002.safetensors" : "model-00002-of-00002.safetensors";
            }
            write_safetensors(sharded / "model-00001-of-00002.safetensors", first);
            write_safetensors(sharded / "model-00002-of-00002.safetensors", second);
            tandem::test::write_file(sharded / "model.safetensors.index.json",
                                     nlohmann::json{{"metadata", nlohmann::json::object()}, {"weight_map", map}}.dump());
        }
        MergeOptions o32;
        o32.dtype = DType::F32;
        write_merged_model(sharded, m, a.config, a.tensors, root / "sharded-out", o32);
        QVERIFY(fs::exists(root / "sharded-out" / "model-00002-of-00002.safetensors"));
        QVERIFY(fs::exists(root / "sharded-out" / "model.safetensors.index.json"));
        {
            const SafetensorsSet s2 = SafetensorsSet::open(root / "sharded-out");
            const SafetensorsSet s1 = SafetensorsSet::open(root / "llama");
            QCOMPARE(s2.names(), s1.names());
            for (const std::string& n : s1.names()) QVERIFY2(tensor_to_f32(s2.at(n)) == tensor_to_f32(s1.at(n)), n.c_str());
        }

        // Refusals and cancel leave nothing behind.
        expect_error([&] { write_merged_model(llama_dir, m, a.config, a.tensors, root / "bf16"); },
                     ErrorCategory::InvalidInput, {"bf16", "not empty", "overwriting"});
        std::atomic<bool> cancel{true};
        MergeOptions oc;
        oc.cancel = &cancel;
        expect_error([&] { write_merged_model(llama_dir, m, a.config, a.tensors, root / "cancelled", oc); },
                     ErrorCategory::Cancelled, {"cancelled"});
        QVERIFY(!fs::exists(root / "cancelled"));
        for (const auto& entry : fs::directory_iterator(root))
            QVERIFY2(entry.path().filename().string().find(".partial-") == std::string::npos, entry.path().c_str());
        LoraTensors missing = a.tensors;
        missing.erase(missing.begin());
        expect_error([&] { write_merged_model(llama_dir, m, a.config, missing, root / "missing"); },
                     ErrorCategory::InvalidInput, {"is missing"});
        QVERIFY(!fs::exists(root / "missing"));
        expect_error([&] { parse_merge_dtype("int4"); }, ErrorCategory::InvalidInput, {"int4", "bf16, fp16 or fp32"});
    }

    void roundTripExact() {
        for (const auto& m : {llama(), qwen3()}) {
            QTemporaryDir tmp;
            LoraConfig c;
            c.r = 8;
            c.alpha = 16;
            c.dropout = 0.05;
            c.target_modules = {"v_proj", "q_proj", "down_proj"};  // order kept
            const auto t = make_tensors(m, c);
            const fs::path dir = fs::path(tmp.path().toStdString()) / "out" / "adapter";  // created
            write_peft_adapter(dir, c, m, "meta-llama/Llama-3.2-1B", t);
            QCOMPARE(list_dir(dir), (std::vector<std::string>{"adapter_config.json", "adapter_model.safetensors"}));
            const auto back = read_peft_adapter(dir, m);
            QVERIFY(back.config == c);
            QCOMPARE(back.base_model_name_or_path, std::string("meta-llama/Llama-3.2-1B"));
            QCOMPARE(back.tensors.size(), t.size());
            QVERIFY(back.tensors == t);  // bit-exact fp32
        }
        // a subset of layers survives the round trip as layers_to_transform
        QTemporaryDir tmp;
        LoraConfig c;
        c.r = 2;
        c.layers_to_transform = {0, 2};
        const auto m = qwen3();
        const auto t = make_tensors(m, c);
        write_peft_adapter(fs::path(tmp.path().toStdString()), c, m, "", t);
        const auto back = read_peft_adapter(fs::path(tmp.path().toStdString()), m);
        QVERIFY(back.config == c);
        QVERIFY(back.tensors == t);
        QCOMPARE(back.base_model_name_or_path, std::string());
        const json j = read_json_file(fs::path(tmp.path().toStdString()) / kPeftConfigName);
        QVERIFY(j.at("layers_to_transform") == json::array({0, 2}));
        QVERIFY(j.at("base_model_name_or_path").is_null());
    }

    void adapterConfigJsonKeys() {
        QTemporaryDir tmp;
        const auto w = write_valid(tmp);
        const std::string text = slurp(w.dir / kPeftConfigName);
        const json j = json::parse(text);
        const json expected = {
            {"alpha_pattern", json::object()},
            {"base_model_name_or_path", "org/base"},
            {"bias", "none"},
            {"fan_in_fan_out", false},
            {"inference_mode", true},
            {"init_lora_weights", true},
            {"layers_pattern", nullptr},
            {"layers_to_transform", nullptr},
            {"lora_alpha", 8},
            {"lora_dropout", 0.0},
            {"modules_to_save", nullptr},
            {"peft_type", "LORA"},
            {"r", 4},
            {"rank_pattern", json::object()},
            {"revision", nullptr},
            {"target_modules", lora_default_targets()},
            {"task_type", "CAUSAL_LM"},
            {"use_dora", false},
            {"use_rslora", false},
        };
        QCOMPARE(q(j.dump()), q(expected.dump()));
        QVERIFY(j.at("lora_alpha").is_number_integer());  // 8, not 8.0, as PEFT writes it
        QVERIFY(j.at("lora_dropout").is_number_float());
        // PEFT's formatting: json.dumps(indent=2, sort_keys=True), no trailing newline
        QVERIFY(text.rfind("{\n  \"alpha_pattern\": {},\n  \"base_model_name_or_path\": \"org/base\",", 0) == 0);
        QVERIFY(text.find("\"lora_dropout\": 0.0,") != std::string::npos);
        QCOMPARE(text.back(), '}');
        // a non-integral alpha is written as a number, non-ASCII escaped like Python's ensure_ascii
        LoraConfig c;
        c.alpha = 2.5;
        const json k = peft_adapter_config_json(c, "caf\xc3\xa9");
        QCOMPARE(k.at("lora_alpha").get<double>(), 2.5);
        QVERIFY(k.dump(2, ' ', true).find("caf\\u00e9") != std::string::npos);
    }

    void safetensorsLayout() {
        QTemporaryDir tmp;
        const auto w = write_valid(tmp);
        SafetensorsFile f(w.dir / kPeftWeightsName);
        QCOMPARE(f.metadata(), (std::map<std::string, std::string>{{"format", "pt"}}));
        QCOMPARE(f.size(), size_t(28));
        std::vector<std::string> names = f.names();
        std::vector<std::string> sorted = names;
        std::sort(sorted.begin(), sorted.end());
        QCOMPARE(names, sorted);  // the reference writer's order: dtype, then name
        for (const auto& s : lora_tensor_specs(llama(), w.config)) {
            const auto& t = f.at(s.name);
            QCOMPARE(t.dtype, DType::F32);
            QCOMPARE(t.shape, s.shape);
            QCOMPARE(tensor_to_f32(t), w.tensors.at(s.name));
        }
        // the whole file is what serialize_safetensors (the reference layout) gives for these tensors
        std::vector<TensorToWrite> tw;
        for (const auto& s : lora_tensor_specs(llama(), w.config))
            tw.push_back({s.name, DType::F32, s.shape, std::as_bytes(std::span<const float>(w.tensors.at(s.name)))});
        QVERIFY(slurp(w.dir / kPeftWeightsName) == serialize_safetensors(tw, {{"format", "pt"}}));
    }

    void rsloraAdapter() {
        QTemporaryDir tmp;
        const auto m = qwen3();
        LoraConfig c;
        c.r = 16;
        c.alpha = 32;
        c.use_rslora = true;
        c.target_modules = {"q_proj", "o_proj"};
        const fs::path dir(tmp.path().toStdString());
        write_peft_adapter(dir, c, m, "Qwen/Qwen3-0.6B", make_tensors(m, c));
        QCOMPARE(read_json_file(dir / kPeftConfigName).at("use_rslora").get<bool>(), true);
        const auto back = read_peft_adapter(dir, m);
        QVERIFY(back.config.use_rslora);
        QCOMPARE(back.config.scaling(), 8.0);
        edit_config(dir, [](json& j) { j["use_rslora"] = false; });
        QCOMPARE(read_peft_adapter(dir, m).config.scaling(), 2.0);
    }

    void overwriteRefused() {
        QTemporaryDir tmp;
        auto w = write_valid(tmp);
        const std::string before = slurp(w.dir / kPeftWeightsName);
        auto t2 = w.tensors;
        t2.begin()->second[0] = 42.0f;
        expect_error([&] { write_peft_adapter(w.dir, w.config, llama(), "org/base", t2); }, ErrorCategory::InvalidInput,
                     {w.dir.string(), "already holds an adapter", "overwrit"});
        QVERIFY(slurp(w.dir / kPeftWeightsName) == before);
        // only the weights, or only the config, is an adapter too
        QTemporaryDir tmp2;
        const fs::path d2(tmp2.path().toStdString());
        tandem::test::write_file(d2 / kPeftWeightsName, "x");
        expect_error([&] { write_peft_adapter(d2, w.config, llama(), "", w.tensors); }, ErrorCategory::InvalidInput,
                     {"already holds an adapter (adapter_model.safetensors)"});
        // allowed with overwrite
        write_peft_adapter(w.dir, w.config, llama(), "org/other", t2, PeftWriteOptions{.overwrite = true});
        const auto back = read_peft_adapter(w.dir, llama());
        QVERIFY(back.tensors == t2);
        QCOMPARE(back.base_model_name_or_path, std::string("org/other"));
        QVERIFY(!has_temp_files(w.dir));
        QCOMPARE(list_dir(w.dir), (std::vector<std::string>{"adapter_config.json", "adapter_model.safetensors"}));
        // other files in the folder are fine (a README, a run's other outputs)
        QTemporaryDir tmp3;
        const fs::path d3(tmp3.path().toStdString());
        tandem::test::write_file(d3 / "README.md", "hi");
        write_peft_adapter(d3, w.config, llama(), "", w.tensors);
    }

    void writerRejections() {
        QTemporaryDir tmp;
        const fs::path dir = fs::path(tmp.path().toStdString()) / "a";
        const auto m = llama();
        LoraConfig c;
        c.r = 4;
        const auto good = make_tensors(m, c);
        auto bad = [&](const LoraConfig& cfg, const LoraTensors& t, ErrorCategory cat, std::vector<std::string> n) {
            expect_error([&] { write_peft_adapter(dir, cfg, m, "", t); }, cat, n);
            QVERIFY(!fs::exists(dir / kPeftConfigName));
            QVERIFY(!fs::exists(dir / kPeftWeightsName));
            if (fs::exists(dir)) QVERIFY(!has_temp_files(dir));
        };
        {
            auto t = good;
            t.erase(kN + "1.mlp.up_proj.lora_B.weight");
            bad(c, t, ErrorCategory::InvalidInput, {kN + "1.mlp.up_proj.lora_B.weight [96, 4]", "missing"});
        }
        {
            auto t = good;
            t[kN + "0.self_attn.k_proj.lora_B.weight"].pop_back();
            bad(c, t, ErrorCategory::InvalidInput, {kN + "0.self_attn.k_proj.lora_B.weight", "127 values", "[32, 4]"});
        }
        {
            auto t = good;
            t["base_model.model.lm_head.lora_A.weight"] = {1.0f};
            bad(c, t, ErrorCategory::InvalidInput, {"lm_head.lora_A.weight", "not part of this LoRA configuration"});
        }
        {
            auto t = good;
            t[kN + "0.mlp.gate_proj.lora_A.weight"][5] = std::nanf("");
            bad(c, t, ErrorCategory::InvalidInput, {kN + "0.mlp.gate_proj.lora_A.weight", "NaN", "element 5"});
            t[kN + "0.mlp.gate_proj.lora_A.weight"][5] = INFINITY;
            bad(c, t, ErrorCategory::InvalidInput, {"infinite"});
        }
        {
            LoraConfig z = c;
            z.r = 0;
            bad(z, good, ErrorCategory::InvalidInput, {"r = 0"});
            z = c;
            z.target_modules = {"fc1"};
            bad(z, good, ErrorCategory::InvalidInput, {"unknown target module 'fc1'", "gate_proj"});
        }
        {  // the target folder is a file
            const fs::path file = fs::path(tmp.path().toStdString()) / "file";
            tandem::test::write_file(file, "x");
            expect_error([&] { write_peft_adapter(file, c, m, "", good); }, ErrorCategory::InvalidInput,
                         {file.string(), "not a folder"});
        }
    }

    // An MoE model's experts as PEFT's target_parameters: the default targets resolve to the attention, the dense
    // layer's MLP and both expert parameters; names are PEFT's nested ParamWrapper ones (gate_up_proj's under
    // base_layer); lora_B is written in PEFT's [out, r*E] layout and read back to the models' [E, out, r].
    void moeExpertsAsTargetParameters() {
        const ModelConfig m = qwen3_moe();
        LoraConfig c;
        c.r = 4;
        const LoraConfig resolved = resolve_lora_targets(m, c);
        const std::vector<std::string> want = {"q_proj", "k_proj", "v_proj", "o_proj", "mlp.experts.gate_up_proj",
                                               "mlp.experts.down_proj"};
        QCOMPARE(resolved.target_modules, want);
        QCOMPARE(lora_targets(m), want);  // what is offered: not the dense layer's gate_proj / up_proj / down_proj
        const auto specs = lora_tensor_specs(m, c);
        std::map<std::string, std::vector<int64_t>> shapes;
        for (const auto& s : specs) shapes[s.name] = s.shape;
        const std::string l0 = "base_model.model.model.layers.0.mlp.experts.";
        QCOMPARE(shapes.at(l0 + "base_layer.lora_A.weight"), (std::vector<int64_t>{16, 64}));  // gate_up: [E*r, H]
        QCOMPARE(shapes.at(l0 + "base_layer.lora_B.weight"), (std::vector<int64_t>{32, 16}));  // [2F, r*E]
        QCOMPARE(shapes.at(l0 + "lora_A.weight"), (std::vector<int64_t>{16, 16}));             // down: [E*r, F]
        QCOMPARE(shapes.at(l0 + "lora_B.weight"), (std::vector<int64_t>{64, 16}));             // [H, r*E]
        // The dense layer's MLP is not adapted (PEFT rewrites MLP names into the experts' for MoE models).
        QVERIFY(!shapes.count("base_model.model.model.layers.1.mlp.gate_proj.lora_A.weight"));
        QVERIFY(!shapes.count("base_model.model.model.layers.0.mlp.gate_proj.lora_A.weight"));
        // Only down_proj adapted: no nesting.
        LoraConfig down = c;
        down.target_modules = {"q_proj", "mlp.experts.down_proj"};
        bool plain = false;
        for (const auto& s : lora_tensor_specs(m, down)) plain |= s.name == l0 + "lora_A.weight";
        QVERIFY(plain);

        QTemporaryDir tmp;
        const fs::path dir = fs::path(tmp.path().toStdString()) / "moe";
        const LoraTensors t = make_tensors(m, c);
        write_peft_adapter(dir, c, m, "org/moe", t);
        const json cfg = read_json_file(dir / kPeftConfigName);
        QCOMPARE(cfg.at("target_parameters").get<std::vector<std::string>>(),
                 (std::vector<std::string>{"mlp.experts.gate_up_proj", "mlp.experts.down_proj"}));
        QCOMPARE(cfg.at("target_modules").get<std::vector<std::string>>(),
                 (std::vector<std::string>{"q_proj", "k_proj", "v_proj", "o_proj"}));
        // PEFT's layout on disk: B_e[o, j] at column j*E + e.
        SafetensorsFile f(dir / kPeftWeightsName);
        const auto disk = tensor_to_f32(f.at(l0 + "lora_B.weight"));
        const auto& mem = t.at(l0 + "lora_B.weight");  // [E=4, out=64, r=4]
        for (int e = 0; e < 4; ++e)
            for (int o = 0; o < 64; o += 7)
                for (int j = 0; j < 4; ++j) QCOMPARE(disk[size_t(o * 16 + j * 4 + e)], mem[size_t((e * 64 + o) * 4 + j)]);
        const PeftAdapter back = read_peft_adapter(dir, m);
        QCOMPARE(back.config.target_modules, want);
        QVERIFY(back.tensors == t);
        // target_parameters naming no expert parameter, and dropout with experts, are refused.
        edit_config(dir, [](json& j) { j["target_parameters"] = {"mlp.experts.w9"}; });
        expect_error([&] { read_peft_adapter(dir, m); }, ErrorCategory::Unsupported, {"target_parameters", "w9"});
        LoraConfig drop = c;
        drop.dropout = 0.1;
        expect_error([&] { lora_tensor_specs(m, drop); }, ErrorCategory::Unsupported, {"dropout", "experts"});
        LoraConfig half = c;
        half.target_modules = {"q_proj", "gate_proj"};
        expect_error([&] { resolve_lora_targets(m, half); }, ErrorCategory::InvalidInput, {"gate_proj", "up_proj"});
        LoraConfig dense = c;
        dense.target_modules = {"q_proj", "mlp.experts.down_proj"};
        expect_error([&] { resolve_lora_targets(llama(), dense); }, ErrorCategory::InvalidInput, {"experts", "has none"});
    }

    // rank_pattern with one scaling, as PEFT writes it when it turns an MoE model's gate_proj / up_proj targets
    // into gate_up_proj of rank 2r and alpha 2 alpha (tests/fixtures/models/qwen3-moe/meta.json): the smaller
    // ranks are zero-padded to the largest, which leaves every module's B A as the file's tensors give it in
    // PEFT's layouts (computed here from the file, not through the reader); written back: one rank, no patterns.
    void rankPatternPaddedToTheLargest() {
        const ModelConfig m = qwen3_moe();
        const int64_t E = 4;
        LoraConfig small;
        small.r = 4;
        small.alpha = 8;
        LoraConfig wide = small;
        wide.r = 8;
        wide.alpha = 16;
        QTemporaryDir tmp;
        const fs::path root(tmp.path().toStdString());
        write_peft_adapter(root / "r4", small, m, "", make_tensors(m, small));
        write_peft_adapter(root / "r8", wide, m, "", make_tensors(m, wide));
        const SafetensorsFile f4(root / "r4" / kPeftWeightsName), f8(root / "r8" / kPeftWeightsName);
        auto is_gate_up = [](const std::string& name) { return name.find("experts.base_layer.lora_") != std::string::npos; };
        std::vector<OwnedTensor> mixed;
        std::map<std::string, std::pair<std::vector<float>, std::vector<int64_t>>> disk;
        for (const TensorInfo& t : f4.tensors()) {
            const TensorInfo& s = is_gate_up(t.name) ? f8.at(t.name) : t;
            disk[t.name] = {tensor_to_f32(s), s.shape};
            mixed.push_back(owned_f32(t.name, s.shape, disk[t.name].first));
        }
        const fs::path dir = root / "pattern";
        fs::create_directories(dir);
        write_owned(dir / kPeftWeightsName, mixed);
        json cfg = read_json_file(root / "r4" / kPeftConfigName);
        cfg["rank_pattern"] = {{".*\\.gate_up_proj", 8}};
        cfg["alpha_pattern"] = {{".*\\.gate_up_proj", 16}};
        write_json(dir / kPeftConfigName, cfg);

        const PeftAdapter a = read_peft_adapter(dir, m);
        QCOMPARE(a.config.r, 8);
        QCOMPARE(a.config.alpha, 16.0);
        QCOMPARE(a.config.scaling(), 2.0);
        QCOMPARE(int(a.ranks.size()), 4 * 3 + 2);  // attention in 3 layers, down_proj in the 2 MoE layers: r 4
        for (const auto& [key, r] : a.ranks) QVERIFY(r == 4 && key.second != "mlp.experts.gate_up_proj");
        // B A of every module (per expert), from the file in PEFT's layouts and from what the reader holds.
        int checked = 0;
        const std::vector<LoraTensorSpec> specs = lora_tensor_specs(m, a.config);
        for (const auto& s : specs) {
            if (!s.is_a) continue;
            const auto& spec_b = *std::find_if(specs.begin(), specs.end(), [&](const LoraTensorSpec& x) {
                return !x.is_a && x.layer == s.layer && x.module == s.module;
            });
            const int64_t R = 8, r = disk.at(s.name).second[0] / (s.experts > 0 ? E : 1), in = s.shape[1];
            const int64_t out = spec_b.shape[0], experts = std::max<int64_t>(s.experts, 1);
            const auto& fa = disk.at(s.name).first;
            const auto& fb = disk.at(spec_b.name).first;
            const auto& ma = a.tensors.at(s.name);
            const auto& mb = a.tensors.at(spec_b.name);
            for (int64_t e = 0; e < experts; ++e)
                for (int64_t o = 0; o < out; o += 3)
                    for (int64_t i = 0; i < in; i += 5) {
                        double want = 0, got = 0;
                        for (int64_t j = 0; j < r; ++j) {
                            const double b = s.experts > 0 ? fb[size_t(o * r * E + j * E + e)] : fb[size_t(o * r + j)];
                            want += b * fa[size_t((e * r + j) * in + i)];
                        }
                        for (int64_t j = 0; j < R; ++j) {
                            const double b = s.experts > 0 ? mb[size_t((e * out + o) * R + j)] : mb[size_t(o * R + j)];
                            got += b * ma[size_t((e * R + j) * in + i)];
                        }
                        QCOMPARE(got, want);
                    }
            ++checked;
        }
        QCOMPARE(checked, 4 * 3 + 2 * 2);
        // Written back: rank 8 everywhere, no patterns, and read again the same tensors.
        write_peft_adapter(root / "back", a.config, m, "", a.tensors);
        const json back_cfg = read_json_file(root / "back" / kPeftConfigName);
        QCOMPARE(back_cfg.at("r").get<int>(), 8);
        QVERIFY(back_cfg.at("rank_pattern").empty());
        const PeftAdapter b = read_peft_adapter(root / "back", m);
        QVERIFY(b.ranks.empty());
        QVERIFY(b.tensors == a.tensors);

        // The rank without the alpha that keeps the scaling is refused; a tensor of another rank than its pattern's
        // says which rank it expected.
        edit_config(dir, [](json& j) { j.erase("alpha_pattern"); });
        expect_error([&] { read_peft_adapter(dir, m); }, ErrorCategory::Unsupported,
                     {"gate_up_proj 1 (r 8, alpha 8)", "q_proj 2 (r 4, alpha 8)", "one LoRA scaling"});
        edit_config(dir, [](json& j) {
            j["rank_pattern"] = {{".*\\.gate_up_proj", 6}};
            j["alpha_pattern"] = {{".*\\.gate_up_proj", 12}};
        });
        expect_error([&] { read_peft_adapter(dir, m); }, ErrorCategory::InvalidInput, {"with r 6"});
    }

    void atomicity() {
        const auto m = llama();
        LoraConfig c;
        c.r = 4;
        const auto t = make_tensors(m, c);
        {  // the config cannot be written (a folder is in the way): the new weights are removed again
            QTemporaryDir tmp;
            const fs::path dir(tmp.path().toStdString());
            fs::create_directories(dir / kPeftConfigName / "x");
            expect_error([&] { write_peft_adapter(dir, c, m, "", t, {.overwrite = true}); }, ErrorCategory::Io,
                         {"adapter_config.json"});
            QCOMPARE(list_dir(dir), (std::vector<std::string>{"adapter_config.json"}));
            QVERIFY(!has_temp_files(dir));
        }
        {  // the weights cannot be written: nothing is left, the config is not written
            QTemporaryDir tmp;
            const fs::path dir(tmp.path().toStdString());
            fs::create_directories(dir / kPeftWeightsName / "x");
            expect_error([&] { write_peft_adapter(dir, c, m, "", t, {.overwrite = true}); }, ErrorCategory::Io,
                         {"adapter_model.safetensors"});
            QCOMPARE(list_dir(dir), (std::vector<std::string>{"adapter_model.safetensors"}));
            QVERIFY(!has_temp_files(dir));
        }
        {  // success leaves exactly the two files
            QTemporaryDir tmp;
            const fs::path dir(tmp.path().toStdString());
            write_peft_adapter(dir, c, m, "", t);
            write_peft_adapter(dir, c, m, "", t, {.overwrite = true});
            QCOMPARE(list_dir(dir), (std::vector<std::string>{"adapter_config.json", "adapter_model.safetensors"}));
        }
    }

    // ---------------------------------------------------------------- reading: config
    void readerTargetForms() {
        const auto m = qwen3();  // 3 layers
        auto parse = [&](json tm, json extra = json::object()) {
            json j = {
                {"peft_type", "LORA"}, {"task_type", "CAUSAL_LM"}, {"r", 4}, {"lora_alpha", 8}, {"target_modules", tm}};
            for (auto& [k, v] : extra.items()) j[k] = v;
            return parse_peft_adapter_config(j, m, "cfg.json").config;
        };
        using V = std::vector<std::string>;
        using L = std::vector<int64_t>;
        QCOMPARE(parse(json::array({"v_proj", "q_proj"})).target_modules, (V{"v_proj", "q_proj"}));
        QCOMPARE(parse(json::array({"self_attn.q_proj", "mlp.down_proj", "c_attn"})).target_modules,
                 (V{"q_proj", "down_proj"}));  // suffix match; names matching nothing are ignored, as in PEFT
        QCOMPARE(parse("all-linear").target_modules, lora_default_targets());
        QCOMPARE(parse("q_proj").target_modules, (V{"q_proj"}));  // a bare name as a string
        QCOMPARE(parse(".*\\.(v_proj|q_proj)").target_modules, (V{"q_proj", "v_proj"}));
        QCOMPARE(parse(".*(q_proj|v_proj)$").target_modules, (V{"q_proj", "v_proj"}));
        QCOMPARE(parse("model.layers.\\d+.self_attn.(q|k|v)_proj").target_modules, (V{"q_proj", "k_proj", "v_proj"}));
        QCOMPARE(parse(".*mlp.*").target_modules, (V{"gate_proj", "up_proj", "down_proj"}));
        QCOMPARE(parse(".*_proj").target_modules, lora_default_targets());
        QVERIFY(parse(".*_proj").layers_to_transform.empty());
        // a regex that picks layers is a layers_to_transform
        auto c = parse("model\\.layers\\.(0|2)\\.self_attn\\.(q_proj|v_proj)");
        QCOMPARE(c.target_modules, (V{"q_proj", "v_proj"}));
        QCOMPARE(c.layers_to_transform, (L{0, 2}));
        // layers_to_transform as an int, a list, all layers (normalised to "every layer"), with a layers_pattern
        QCOMPARE(parse(json::array({"q_proj"}), {{"layers_to_transform", 1}}).layers_to_transform, (L{1}));
        QCOMPARE(parse(json::array({"q_proj"}), {{"layers_to_transform", {2, 0}}}).layers_to_transform, (L{0, 2}));
        QVERIFY(parse(json::array({"q_proj"}), {{"layers_to_transform", {0, 1, 2}}}).layers_to_transform.empty());
        QVERIFY(parse(json::array({"q_proj"}), {{"layers_to_transform", json::array()}}).layers_to_transform.empty());
        QCOMPARE(parse(json::array({"q_proj"}), {{"layers_to_transform", {1}}, {"layers_pattern", "layers"}})
                     .layers_to_transform,
                 (L{1}));
        QCOMPARE(parse(json::array({"q_proj"}), {{"layers_to_transform", {1}}, {"layers_pattern", {"layers"}}})
                     .layers_to_transform,
                 (L{1}));
        // PEFT's defaults for absent keys
        const auto d = parse_peft_adapter_config(json{{"peft_type", "LORA"}, {"target_modules", {"q_proj"}}}, m, "x");
        QCOMPARE(d.config.r, 8);
        QCOMPARE(d.config.alpha, 8.0);
        QCOMPARE(d.config.dropout, 0.0);
        QCOMPARE(d.config.use_rslora, false);
        // keys of other PEFT versions that mean "off" are fine
        QCOMPARE(parse(json::array({"q_proj"}), {{"use_bdlora", nullptr},
                                                 {"loftq_config", json::object()},
                                                 {"exclude_modules", nullptr},
                                                 {"lora_bias", false},
                                                 {"target_parameters", nullptr},
                                                 {"peft_version", "0.21.0"},
                                                 {"init_lora_weights", "gaussian"},
                                                 {"task_type", nullptr}})
                     .target_modules,
                 (V{"q_proj"}));
    }

    void readerConfigRejections() {
        const auto m = qwen3();
        auto bad = [&](json edit, ErrorCategory cat, std::vector<std::string> needles) {
            json j = {{"peft_type", "LORA"},
                      {"task_type", "CAUSAL_LM"},
                      {"r", 4},
                      {"lora_alpha", 8},
                      {"target_modules", json::array({"q_proj", "v_proj"})},
                      {"bias", "none"},
                      {"use_dora", false}};
            for (auto& [k, v] : edit.items()) {
                if (v.is_string() && v == "<erase>")
                    j.erase(k);
                else
                    j[k] = v;
            }
            needles.insert(needles.begin(), "cfg.json");
            expect_error([&] { parse_peft_adapter_config(j, m, "cfg.json"); }, cat, needles);
        };
        const auto U = ErrorCategory::Unsupported, I = ErrorCategory::InvalidInput;
        bad({{"peft_type", "<erase>"}}, I, {"no \"peft_type\"", "not a PEFT adapter_config.json"});
        bad({{"peft_type", "ADALORA"}}, U, {"\"ADALORA\"", "LoRA adapters"});
        bad({{"peft_type", "LOHA"}}, U, {"LOHA"});
        bad({{"task_type", "SEQ_CLS"}}, U, {"SEQ_CLS", "CAUSAL_LM"});
        bad({{"use_dora", true}}, U, {"DoRA adapters are not supported"});
        bad({{"bias", "all"}}, U, {"bias is \"all\""});
        bad({{"bias", "lora_only"}}, U, {"lora_only"});
        bad({{"lora_bias", true}}, U, {"lora_bias"});
        bad({{"fan_in_fan_out", true}}, U, {"fan_in_fan_out"});
        // Patterns that change a module's scaling (alpha / r) are refused; bad values are invalid input.
        bad({{"rank_pattern", {{"q_proj", 8}}}}, U, {"rank_pattern", "q_proj", "one LoRA scaling"});
        bad({{"alpha_pattern", {{"v_proj", 16}}}}, U, {"alpha_pattern", "v_proj", "one LoRA scaling"});
        bad({{"rank_pattern", {{"q_proj", 0}}}}, I, {"rank_pattern", "not a rank"});
        bad({{"rank_pattern", {{"q_proj", 2.5}}}}, I, {"rank_pattern", "not a rank"});
        bad({{"rank_pattern", {{"q_proj", "8"}}}}, I, {"rank_pattern", "expected a number"});
        bad({{"rank_pattern", json::array({8})}}, I, {"rank_pattern", "expected an object"});
        bad({{"alpha_pattern", {{"q_proj", -1}}}}, I, {"alpha_pattern", "positive alpha"});
        bad({{"rank_pattern", {{"q_proj", 8}, {".*_proj", 6}}}, {"alpha_pattern", {{".*", 16}}}}, U, {"both match"});
        bad({{"rank_pattern", {{"q_proj(", 8}}}}, U, {"rank_pattern", "cannot evaluate"});
        bad({{"modules_to_save", {"lm_head"}}}, U, {"modules_to_save", "lm_head"});
        bad({{"trainable_token_indices", {1, 2}}}, U, {"trainable_token_indices"});
        bad({{"layer_replication", {{0, 1}}}}, U, {"layer_replication"});
        bad({{"target_parameters", {"mlp.experts.gate_up_proj"}}}, U, {"target_parameters"});
        bad({{"exclude_modules", {"q_proj"}}}, U, {"exclude_modules"});
        bad({{"use_qalora", true}}, U, {"QA-LoRA"});
        bad({{"use_bdlora", true}}, U, {"use_bdlora"});
        bad({{"alora_invocation_tokens", {5, 6}}}, U, {"alora"});
        bad({{"init_lora_weights", "pissa_niter_4"}}, U, {"pissa", "path_initial_model_for_weight_conversion"});
        bad({{"init_lora_weights", "olora"}}, U, {"olora"});
        // malformed values
        bad({{"r", 0}}, I, {"r:", "out of range"});
        bad({{"r", "4"}}, I, {"r:", "integer"});
        bad({{"r", 4.5}}, I, {"r:"});
        bad({{"lora_alpha", "8"}}, I, {"lora_alpha", "number"});
        bad({{"lora_alpha", 0}}, I, {"alpha"});
        bad({{"lora_dropout", 1.5}}, I, {"dropout"});
        bad({{"use_rslora", "yes"}}, I, {"use_rslora"});
        bad({{"target_modules", "<erase>"}}, I, {"target_modules", "missing"});
        bad({{"target_modules", 7}}, I, {"target_modules"});
        bad({{"target_modules", json::array({"q_proj", 1})}}, I, {"target_modules"});
        bad({{"target_modules", json::array()}}, I, {"matches none"});
        bad({{"target_modules", json::array({"fc1", "c_attn"})}}, I, {"matches none", "q_proj"});
        bad({{"target_modules", "foo.*"}}, I, {"matches none"});
        // targets we do not train
        bad({{"target_modules", json::array({"q_proj", "lm_head"})}}, U, {"'lm_head'", "not supported"});
        bad({{"target_modules", {"embed_tokens"}}}, U, {"embed_tokens"});
        bad({{"target_modules", ".*"}}, U, {"matches lm_head"});
        bad({{"target_modules", "(q_proj"}}, U, {"regular expression", "cannot evaluate", "list the module names"});
        // Python's named groups work (PCRE2 has them): fullmatch of the bare name matches no module path.
        bad({{"target_modules", "(?P<x>q_proj)"}}, I, {"matches none"});
        // Patterns std::regex could not bound (found by fuzz_peft_config): refused at once, never a crash or a hang.
        bad({{"target_modules", "\\3333333333333333333333"}}, I, {"matches none"});
        bad({{"target_modules", "a{99999999999999999999}"}}, U, {"cannot evaluate"});
        bad({{"target_modules", std::string(30000, '(') + "q_proj" + std::string(30000, ')')}}, U, {"cannot evaluate"});
        bad({{"target_modules", std::string(40, '(') + "q_proj" + std::string(40, ')')}}, U, {"cannot evaluate"});
        bad({{"target_modules", "(.*.*.*.*.*.*.*.*)*X"}}, I, {"matches none"});  // PCRE2 needs an X first
        bad({{"target_modules", "(.*.*.*.[]*.*.*.*.*)*X"}}, U, {"cannot evaluate"});  // "[]" opens a class
        bad({{"target_modules", "(..***).X"}}, U, {"cannot evaluate"});
        bad({{"target_modules", ".*[q_proj"}}, U, {"cannot evaluate"});
        bad({{"target_modules", "all-{lWn}iA"}}, I, {"matches none"});
        bad({{"target_modules", "model\\.layers\\.0\\.self_attn\\.q_proj|model\\.layers\\.1\\.self_attn\\.v_proj"}}, U,
            {"different projections in different layers", "layer 0: q_proj", "layer 1: v_proj"});
        // layers
        bad({{"layers_to_transform", {0, 3}}}, I, {"layers_to_transform", "layer 3", "3 layers"});
        bad({{"layers_to_transform", {"0"}}}, I, {"layers_to_transform"});
        bad({{"layers_to_transform", {1}}, {"layers_pattern", "h"}}, U, {"layers_pattern"});
        bad({{"layers_to_transform", {1}}, {"target_modules", ".*q_proj"}}, I, {"layers_to_transform", "string"});
        expect_error([&] { parse_peft_adapter_config(json::array(), m, "cfg.json"); }, I, {"cfg.json", "JSON object"});
    }

    // ---------------------------------------------------------------- reading: folders and weights
    void readerFolderRejections() {
        QTemporaryDir tmp;
        const fs::path root(tmp.path().toStdString());
        const auto m = llama();
        expect_error([&] { read_peft_adapter(root / "nope", m); }, ErrorCategory::InvalidInput, {"nope", "not found"});
        tandem::test::write_file(root / "f", "x");
        expect_error([&] { read_peft_adapter(root / "f", m); }, ErrorCategory::InvalidInput, {"not a folder"});
        fs::create_directories(root / "empty");
        expect_error([&] { read_peft_adapter(root / "empty", m); }, ErrorCategory::InvalidInput,
                     {"no adapter_config.json", "not a PEFT adapter folder"});
        // a pickle
        const auto w = write_valid(tmp, "pickle");
        fs::rename(w.dir / kPeftWeightsName, w.dir / "adapter_model.bin");
        expect_error([&] { read_peft_adapter(w.dir, m); }, ErrorCategory::Unsupported,
                     {"adapter_model.bin", "pickle", "runs whatever code", "safe_serialization=True"});
        fs::remove(w.dir / "adapter_model.bin");
        expect_error([&] { read_peft_adapter(w.dir, m); }, ErrorCategory::InvalidInput,
                     {"no adapter_model.safetensors"});
        // bad JSON names the file and line
        const auto w2 = write_valid(tmp, "badjson");
        tandem::test::write_file(w2.dir / kPeftConfigName, "{\n  \"peft_type\": \"LORA\",\n  oops\n}");
        expect_error([&] { read_peft_adapter(w2.dir, m); }, ErrorCategory::InvalidInput, {"adapter_config.json:3"});
        // a config for the wrong model: shapes name tensor, shape, expected
        const auto w3 = write_valid(tmp, "qwen");
        expect_error([&] { read_peft_adapter(w3.dir, qwen3()); }, ErrorCategory::InvalidInput,
                     {kN + "0.self_attn.k_proj.lora_B.weight", "shape [32, 4]", "expected [64, 4]"});
        // r in the config disagrees with the tensors
        edit_config(w3.dir, [](json& j) { j["r"] = 8; });
        expect_error([&] { read_peft_adapter(w3.dir, m); }, ErrorCategory::InvalidInput,
                     {kN + "0.mlp.down_proj.lora_A.weight", "shape [4, 96]", "expected [8, 96]", "r 8"});
    }

    void readerWeightRejections() {
        const auto m = llama();
        QTemporaryDir tmp;
        const auto w = write_valid(tmp);
        const fs::path wp = w.dir / kPeftWeightsName;
        const auto base = owned_from(m, w.config, w.tensors);
        auto with = [&](auto edit, ErrorCategory cat, std::vector<std::string> needles) {
            auto ts = base;
            edit(ts);
            write_owned(wp, ts);
            needles.insert(needles.begin(), wp.string());
            expect_error([&] { read_peft_adapter(w.dir, m); }, cat, needles);
        };
        using TS = std::vector<OwnedTensor>;
        const auto I = ErrorCategory::InvalidInput, U = ErrorCategory::Unsupported;
        auto find = [](TS& ts, const std::string& n) -> OwnedTensor& {
            for (auto& t : ts)
                if (t.name == n) return t;
            throw std::runtime_error("no " + n);
        };
        with(
            [&](TS& ts) {
                find(ts, kN + "1.self_attn.v_proj.lora_B.weight").shape = {16, 8};
            },
            I,
            {kN + "1.self_attn.v_proj.lora_B.weight", "shape [16, 8]", "expected [32, 4]", "lora_B [out_features, r]"});
        with([&](TS& ts) { std::erase_if(ts, [](auto& t) { return t.name == kN + "1.mlp.up_proj.lora_B.weight"; }); },
             I,
             {kN + "1.mlp.up_proj.lora_B.weight [96, 4] is missing", "its pair " + kN + "1.mlp.up_proj.lora_A.weight"});
        with([&](TS& ts) { std::erase_if(ts, [](auto& t) { return t.name.find(".1.mlp.") != std::string::npos; }); }, I,
             {"is missing", "and 5 more", "28 LoRA tensors", "the file has 22"});
        with(
            [&](TS& ts) {
                ts.push_back(owned_f32(kN + "2.self_attn.q_proj.lora_A.weight", {4, 64}, std::vector<float>(256)));
            },
            I, {kN + "2.self_attn.q_proj.lora_A.weight", "layer 2", "2 layers"});
        with(
            [&](TS& ts) {
                ts.push_back(owned_f32(kN + "0.self_attn.gate_proj.lora_A.weight", {4, 64}, std::vector<float>(256)));
            },
            I, {"self_attn.gate_proj", "does not have"});
        with(
            [&](TS& ts) {
                ts.push_back(owned_f32(kN + "0.self_attn.qkv_proj.lora_A.weight", {4, 64}, std::vector<float>(256)));
            },
            I, {"qkv_proj"});
        with(
            [&](TS& ts) {
                ts.push_back(owned_f32("base_model.model.model.norm.weight", {64}, std::vector<float>(64)));
            },
            I, {"unexpected tensor base_model.model.model.norm.weight [64]"});
        with(
            [&](TS& ts) {
                ts.push_back(owned_f32(kN + "0.self_attn.q_proj.lora_magnitude_vector", {64}, std::vector<float>(64)));
            },
            U, {"DoRA"});
        with(
            [&](TS& ts) {
                ts.push_back(owned_f32(kN + "0.self_attn.q_proj.lora_B.bias", {64}, std::vector<float>(64)));
            },
            U, {"lora_B bias"});
        with(
            [&](TS& ts) {
                ts.push_back(owned_f32("base_model.model.lm_head.weight", {101, 64}, std::vector<float>(6464)));
            },
            U, {"lm_head", "not supported"});
        with(
            [&](TS& ts) {
                ts.push_back(owned_f32("base_model.model.model.embed_tokens.lora_embedding_A", {4, 101},
                                       std::vector<float>(404)));
            },
            U, {"embedding"});
        with(
            [&](TS& ts) {
                auto t = find(ts, kN + "0.self_attn.q_proj.lora_A.weight");
                t.name = kN + "0.self_attn.q_proj.lora_A.default.weight";
                ts.push_back(t);
            },
            I, {"are the same LoRA weight"});
        with(
            [&](TS& ts) {
                auto& t = find(ts, kN + "0.self_attn.q_proj.lora_A.weight");
                t.dtype = DType::I32;
            },
            U, {"dtype I32", "F32, F16 or BF16"});
        // tensors of modules the config does not adapt
        edit_config(w.dir, [](json& j) { j["target_modules"] = {"q_proj", "k_proj", "v_proj", "o_proj"}; });
        with([](TS&) {}, I, {kN + "0.mlp.down_proj.lora_A.weight", "does not adapt", "do not belong together"});
        edit_config(w.dir, [](json& j) {
            j["target_modules"] = lora_default_targets();
            j["layers_to_transform"] = {0};
        });
        with([](TS&) {}, I, {kN + "1.", "does not adapt", "some layers only"});
    }

    void readerAcceptsVariants() {
        const auto m = llama();
        QTemporaryDir tmp;
        const auto w = write_valid(tmp);
        const fs::path wp = w.dir / kPeftWeightsName;
        // ".default." names (some PEFT versions / tools) are normalised
        {
            auto ts = owned_from(m, w.config, w.tensors);
            for (auto& t : ts) t.name.replace(t.name.size() - std::string(".weight").size(), 7, ".default.weight");
            write_owned(wp, ts);
            const auto back = read_peft_adapter(w.dir, m);
            QVERIFY(back.tensors == w.tensors);
        }
        // F16 and BF16 files convert to fp32
        for (DType dt : {DType::F16, DType::BF16}) {
            auto ts = owned_from(m, w.config, w.tensors);
            LoraTensors expect;
            for (auto& t : ts) {
                const auto& src = w.tensors.at(t.name);
                std::vector<uint16_t> h(src.size());
                auto& e = expect[t.name];
                for (size_t i = 0; i < src.size(); ++i) {
                    h[i] = dt == DType::F16 ? f32_to_f16(src[i]) : f32_to_bf16(src[i]);
                    e.push_back(dt == DType::F16 ? f16_to_f32(h[i]) : bf16_to_f32(h[i]));
                }
                t.dtype = dt;
                t.bytes.resize(h.size() * 2);
                std::memcpy(t.bytes.data(), h.data(), t.bytes.size());
            }
            write_owned(wp, ts);
            const auto back = read_peft_adapter(w.dir, m);
            QVERIFY(back.tensors == expect);
        }
    }

    // ---------------------------------------------------------------- adapters written by PEFT 0.21
    void peftFixtures_data() {
        QTest::addColumn<QString>("variant");
        for (const char* v : {"llama", "qwen2", "qwen3", "mistral"}) QTest::newRow(v) << QString(v);
    }
    void peftFixtures() {
        QFETCH(QString, variant);
        const fs::path root = tandem::test::fixtures() / "models" / variant.toStdString();
        if (!fs::exists(root / "adapter" / kPeftConfigName))
            QSKIP(qPrintable("PEFT fixture not found: " + q((root / "adapter").string())));
        const auto m = load_model_config(root / "config.json");
        const auto a = read_peft_adapter(root / "adapter", m);
        const json meta = read_json_file(root / "meta.json");
        const json& lm = meta.at("lora");
        QCOMPARE(a.config.r, lm.at("r").get<int>());
        QCOMPARE(a.config.alpha, lm.at("lora_alpha").get<double>());
        QCOMPARE(a.config.use_rslora, lm.at("use_rslora").get<bool>());
        QCOMPARE(a.config.use_rslora, variant == "qwen3");
        QVERIFY(std::fabs(a.config.scaling() - lm.at("scaling").get<double>()) < 1e-12);
        const auto want = lm.at("target_modules").get<std::vector<std::string>>();
        QCOMPARE(std::set<std::string>(a.config.target_modules.begin(), a.config.target_modules.end()),
                 std::set<std::string>(want.begin(), want.end()));
        QVERIFY(a.config.layers_to_transform.empty());
        const auto specs = lora_tensor_specs(m, a.config);
        QCOMPARE(a.tensors.size(), specs.size());
        QCOMPARE(specs.size(), size_t(m.num_hidden_layers * 7 * 2));
        SafetensorsFile f(root / "adapter" / kPeftWeightsName);
        for (const auto& s : specs) {
            const auto& t = f.at(s.name);  // PEFT's names are ours
            QCOMPARE(t.shape, s.shape);
            QCOMPARE(int64_t(a.tensors.at(s.name).size()), t.numel());
        }
        if (variant == "qwen3") {  // head_dim 32 with 4 heads: q_proj out 128 != hidden 64
            QCOMPARE(f.at(kN + "0.self_attn.q_proj.lora_B.weight").shape, (std::vector<int64_t>{m.q_dim(), 4}));
            QVERIFY(m.q_dim() != m.hidden_size);
        }
        // the LoRA gradients the fixture lists name exactly these tensors
        std::set<std::string> grads;
        for (auto& [k, v] : meta.at("lora_grad_norms").items()) grads.insert(k);
        std::set<std::string> ours;
        for (const auto& s : specs) ours.insert(s.name);
        QVERIFY(grads == ours);
    }

    // PEFT-made adapters in the less common forms (tests/reference/make_peft_form_fixtures.py, qwen3 model):
    // target_modules as a regex string, a regex that picks one layer, layers_to_transform, a bf16 file.
    void peftFormFixtures_data() {
        using V = std::vector<std::string>;
        using L = std::vector<int64_t>;
        QTest::addColumn<QString>("form");
        QTest::addColumn<V>("targets");
        QTest::addColumn<L>("layers");
        QTest::addColumn<int>("count");
        QTest::newRow("regex") << QString("regex") << V{"q_proj", "v_proj"} << L{} << 8;
        QTest::newRow("regex_layer") << QString("regex_layer") << V{"up_proj", "down_proj"} << L{1} << 4;
        QTest::newRow("layers") << QString("layers") << V{"k_proj", "o_proj"} << L{0} << 4;
        QTest::newRow("bf16") << QString("bf16") << V{"q_proj", "gate_proj"} << L{} << 8;
    }
    void peftFormFixtures() {
        QFETCH(QString, form);
        QFETCH(std::vector<std::string>, targets);
        QFETCH(std::vector<int64_t>, layers);
        QFETCH(int, count);
        const fs::path dir = tandem::test::fixtures() / "peft" / form.toStdString();
        const fs::path model_cfg = tandem::test::fixtures() / "models" / "qwen3" / "config.json";
        if (!fs::exists(dir / kPeftConfigName) || !fs::exists(model_cfg))
            QSKIP(qPrintable("PEFT fixture not found: " + q(dir.string())));
        const auto m = load_model_config(model_cfg);
        const auto a = read_peft_adapter(dir, m);
        QCOMPARE(a.config.r, 2);
        QCOMPARE(a.config.alpha, 4.0);
        QCOMPARE(std::set<std::string>(a.config.target_modules.begin(), a.config.target_modules.end()),
                 std::set<std::string>(targets.begin(), targets.end()));
        QCOMPARE(a.config.layers_to_transform, layers);
        QCOMPARE(a.tensors.size(), size_t(count));
        SafetensorsFile f(dir / kPeftWeightsName);
        for (const auto& t : f.tensors()) {
            const auto& got = a.tensors.at(t.name);
            QCOMPARE(got, tensor_to_f32(t));
            QCOMPARE(t.dtype, form == "bf16" ? DType::BF16 : DType::F32);
        }
        // ours, from the same tensors: reads back the same; for the F32 files, the same bytes as PEFT's
        QTemporaryDir tmp;
        const fs::path ours(tmp.path().toStdString());
        write_peft_adapter(ours, a.config, m, a.base_model_name_or_path, a.tensors);
        const auto back = read_peft_adapter(ours, m);
        QVERIFY(back.tensors == a.tensors);
        QVERIFY(back.config == a.config);
        if (form != "bf16") QVERIFY(slurp(ours / kPeftWeightsName) == slurp(dir / kPeftWeightsName));
    }

    void peftFixturesRewrite_data() { peftFixtures_data(); }
    void peftFixturesRewrite() {
        QFETCH(QString, variant);
        const fs::path root = tandem::test::fixtures() / "models" / variant.toStdString();
        const fs::path peft_dir = root / "adapter";
        if (!fs::exists(peft_dir / kPeftConfigName))
            QSKIP(qPrintable("PEFT fixture not found: " + q(peft_dir.string())));
        const auto m = load_model_config(root / "config.json");
        const auto a = read_peft_adapter(peft_dir, m);
        QTemporaryDir tmp;
        const fs::path ours(tmp.path().toStdString());
        write_peft_adapter(ours, a.config, m, a.base_model_name_or_path, a.tensors);

        // adapter_config.json: every key we write has PEFT's value (target_modules as a set: PEFT writes a
        // Python set, in no fixed order); the keys PEFT writes and we do not are all at their defaults.
        const json pj = read_json_file(peft_dir / kPeftConfigName);
        const json oj = read_json_file(ours / kPeftConfigName);
        for (auto& [k, v] : oj.items()) {
            QVERIFY2(pj.contains(k), qPrintable("PEFT does not write key " + q(k)));
            if (k == "target_modules") {
                auto a1 = v.get<std::vector<std::string>>(), a2 = pj.at(k).get<std::vector<std::string>>();
                std::sort(a1.begin(), a1.end());
                std::sort(a2.begin(), a2.end());
                QCOMPARE(a1, a2);
            } else {
                QVERIFY2(v == pj.at(k), qPrintable(q(k) + ": ours " + q(v.dump()) + ", PEFT " + q(pj.at(k).dump())));
                QVERIFY(v.type() == pj.at(k).type());  // 8 stays an integer, 0.0 a float
            }
        }
        std::vector<std::string> only_peft;
        for (auto& [k, v] : pj.items())
            if (!oj.contains(k)) {
                only_peft.push_back(k);
                const bool off = v.is_null() || v == false || (v.is_object() && v.empty()) || k == "peft_version" ||
                                 k == "megatron_core" || k == "qalora_group_size";
                QVERIFY2(off, qPrintable("PEFT key " + q(k) + " = " + q(v.dump()) + " is not at its default"));
            }
        qInfo("%s: keys only PEFT writes (all defaults): %zu", qPrintable(variant), only_peft.size());

        // adapter_model.safetensors: byte-identical to PEFT's
        const std::string pb = slurp(peft_dir / kPeftWeightsName), ob = slurp(ours / kPeftWeightsName);
        if (pb != ob) {
            size_t i = 0;
            while (i < pb.size() && i < ob.size() && pb[i] == ob[i]) ++i;
            uint64_t ph = 0, oh = 0;
            std::memcpy(&ph, pb.data(), 8);
            std::memcpy(&oh, ob.data(), 8);
            QFAIL(qPrintable(QString("adapter_model.safetensors differs from PEFT's at byte %1 (sizes %2 vs %3, "
                                     "header lengths %4 vs %5); PEFT header: %6 ... ours: %7")
                                 .arg(i)
                                 .arg(pb.size())
                                 .arg(ob.size())
                                 .arg(ph)
                                 .arg(oh)
                                 .arg(q(pb.substr(8, std::min<size_t>(ph, 400))))
                                 .arg(q(ob.substr(8, std::min<size_t>(oh, 400))))));
        }
        // and it reads back to the same tensors
        QVERIFY(read_peft_adapter(ours, m).tensors == a.tensors);
    }
};

QTEST_GUILESS_MAIN(TestPeftAdapter)
#include "test_peft_adapter.moc"
