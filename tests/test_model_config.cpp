// SPDX-FileCopyrightText: 2026 The Tandem developers
// SPDX-License-Identifier: GPL-3.0-or-later
// Tests for config.json parsing (every architecture, modelled on the released configs, with their known
// parameter counts), rope variants, the bad-config suite, and model folder inspection (real babyllama, tiny
// generated folders, sharded folders, pickle-only, missing/misshapen tensors).
#include <QTemporaryDir>
#include <QTest>

#include <cmath>
#include <functional>

#include <nlohmann/json.hpp>

#include "tandem/error.h"
#include "tandem/lora.h"
#include "tandem/model_config.h"
#include "tandem/model_dir.h"
#include "tandem/safetensors.h"
#include "test_support.h"

using namespace tandem;
using tandem::test::expect_error;
using json = nlohmann::json;
namespace fs = std::filesystem;

namespace {


// Released configs (fields that matter here, values as published).
const char* kLlama32_1B = R"({
  "architectures": ["LlamaForCausalLM"], "attention_bias": false, "attention_dropout": 0.0,
  "bos_token_id": 128000, "eos_token_id": [128001, 128008, 128009], "head_dim": 64, "hidden_act": "silu",
  "hidden_size": 2048, "initializer_range": 0.02, "intermediate_size": 8192, "max_position_embeddings": 131072,
  "mlp_bias": false, "model_type": "llama", "num_attention_heads": 32, "num_hidden_layers": 16,
  "num_key_value_heads": 8, "pretraining_tp": 1, "rms_norm_eps": 1e-05,
  "rope_scaling": {"factor": 32.0, "high_freq_factor": 4.0, "low_freq_factor": 1.0,
                   "original_max_position_embeddings": 8192, "rope_type": "llama3"},
  "rope_theta": 500000.0, "tie_word_embeddings": true, "torch_dtype": "bfloat16", "use_cache": true,
  "vocab_size": 128256})";

const char* kQwen25_05B = R"({
  "architectures": ["Qwen2ForCausalLM"], "attention_dropout": 0.0, "bos_token_id": 151643,
  "eos_token_id": 151643, "hidden_act": "silu", "hidden_size": 896, "initializer_range": 0.02,
  "intermediate_size": 4864, "max_position_embeddings": 32768, "max_window_layers": 24, "model_type": "qwen2",
  "num_attention_heads": 14, "num_hidden_layers": 24, "num_key_value_heads": 2, "rms_norm_eps": 1e-06,
  "rope_theta": 1000000.0, "sliding_window": 32768, "tie_word_embeddings": true, "torch_dtype": "bfloat16",
  "use_cache": true, "use_sliding_window": false, "vocab_size": 151936})";

const char* kQwen3_06B = R"({
  "architectures": ["Qwen3ForCausalLM"], "attention_bias": false, "attention_dropout": 0.0,
  "bos_token_id": 151643, "eos_token_id": 151645, "head_dim": 128, "hidden_act": "silu", "hidden_size": 1024,
  "initializer_range": 0.02, "intermediate_size": 3072, "max_position_embeddings": 40960,
  "max_window_layers": 28, "model_type": "qwen3", "num_attention_heads": 16, "num_hidden_layers": 28,
  "num_key_value_heads": 8, "rms_norm_eps": 1e-06, "rope_scaling": null, "rope_theta": 1000000,
  "sliding_window": null, "tie_word_embeddings": true, "torch_dtype": "bfloat16", "use_cache": true,
  "use_sliding_window": false, "vocab_size": 151936})";

const char* kMistral7B = R"({
  "architectures": ["MistralForCausalLM"], "bos_token_id": 1, "eos_token_id": 2, "hidden_act": "silu",
  "hidden_size": 4096, "initializer_range": 0.02, "intermediate_size": 14336, "max_position_embeddings": 32768,
  "model_type": "mistral", "num_attention_heads": 32, "num_hidden_layers": 32, "num_key_value_heads": 8,
  "rms_norm_eps": 1e-05, "rope_theta": 10000.0, "sliding_window": 4096, "tie_word_embeddings": false,
  "torch_dtype": "bfloat16", "use_cache": true, "vocab_size": 32000})";

const char* kQwen3_30B_A3B = R"({
  "architectures": ["Qwen3MoeForCausalLM"], "attention_bias": false, "attention_dropout": 0.0,
  "bos_token_id": 151643, "decoder_sparse_step": 1, "eos_token_id": 151645, "head_dim": 128,
  "hidden_act": "silu", "hidden_size": 2048, "initializer_range": 0.02, "intermediate_size": 6144,
  "max_position_embeddings": 40960, "max_window_layers": 48, "mlp_only_layers": [], "model_type": "qwen3_moe",
  "moe_intermediate_size": 768, "norm_topk_prob": true, "num_attention_heads": 32, "num_experts": 128,
  "num_experts_per_tok": 8, "num_hidden_layers": 48, "num_key_value_heads": 4, "output_router_logits": false,
  "rms_norm_eps": 1e-06, "rope_scaling": null, "rope_theta": 1000000.0, "router_aux_loss_coef": 0.001,
  "sliding_window": null, "tie_word_embeddings": false, "torch_dtype": "bfloat16", "use_cache": true,
  "use_sliding_window": false, "vocab_size": 151936})";

const char* kMixtral8x7B = R"({
  "architectures": ["MixtralForCausalLM"], "attention_dropout": 0.0, "bos_token_id": 1, "eos_token_id": 2,
  "hidden_act": "silu", "hidden_size": 4096, "initializer_range": 0.02, "intermediate_size": 14336,
  "max_position_embeddings": 32768, "model_type": "mixtral", "num_attention_heads": 32,
  "num_experts_per_tok": 2, "num_hidden_layers": 32, "num_key_value_heads": 8, "num_local_experts": 8,
  "output_router_logits": false, "rms_norm_eps": 1e-05, "rope_theta": 1000000.0, "router_aux_loss_coef": 0.02,
  "sliding_window": null, "tie_word_embeddings": false, "torch_dtype": "bfloat16", "use_cache": true,
  "vocab_size": 32000})";

const char* kGptOss20B = R"({
  "architectures": ["GptOssForCausalLM"], "attention_bias": true, "attention_dropout": 0.0,
  "eos_token_id": 200002, "experts_per_token": 4, "head_dim": 64, "hidden_act": "silu", "hidden_size": 2880,
  "initial_context_length": 4096, "initializer_range": 0.02, "intermediate_size": 2880,
  "layer_types": ["sliding_attention", "full_attention", "sliding_attention", "full_attention", "sliding_attention",
                  "full_attention", "sliding_attention", "full_attention", "sliding_attention", "full_attention",
                  "sliding_attention", "full_attention", "sliding_attention", "full_attention", "sliding_attention",
                  "full_attention", "sliding_attention", "full_attention", "sliding_attention", "full_attention",
                  "sliding_attention", "full_attention", "sliding_attention", "full_attention"],
  "max_position_embeddings": 131072,
  "model_type": "gpt_oss", "num_attention_heads": 64, "num_experts_per_tok": 4, "num_hidden_layers": 24,
  "num_key_value_heads": 8, "num_local_experts": 32, "output_router_logits": false, "pad_token_id": 199999,
  "quantization_config": {"modules_to_not_convert": ["model.layers.*.self_attn", "model.layers.*.mlp.router",
                          "model.embed_tokens", "lm_head"], "quant_method": "mxfp4"},
  "rms_norm_eps": 1e-05,
  "rope_scaling": {"beta_fast": 32.0, "beta_slow": 1.0, "factor": 32.0, "original_max_position_embeddings": 4096,
                   "rope_type": "yarn", "truncate": false},
  "rope_theta": 150000, "router_aux_loss_coef": 0.9, "sliding_window": 128, "swiglu_limit": 7.0,
  "tie_word_embeddings": false, "use_cache": true, "vocab_size": 201088})";

const char* kTinyLlama = R"({"architectures": ["LlamaForCausalLM"], "hidden_size": 16, "intermediate_size": 32,
  "num_hidden_layers": 2, "num_attention_heads": 4, "num_key_value_heads": 2, "vocab_size": 50,
  "tie_word_embeddings": true, "rms_norm_eps": 1e-5})";

const char* kTinyQwen3 = R"({"architectures": ["Qwen3ForCausalLM"], "hidden_size": 16, "intermediate_size": 32,
  "num_hidden_layers": 2, "num_attention_heads": 4, "num_key_value_heads": 2, "head_dim": 8, "vocab_size": 50,
  "tie_word_embeddings": false})";

ModelConfig parse(const char* text) {
    return parse_model_config(json::parse(text), "config.json");
}

std::string dump_with(const char* base, const std::function<void(json&)>& edit) {
    json j = json::parse(base);
    edit(j);
    return j.dump();
}

// Writes config.json and model.safetensors (zeros in `dtype`, one tensor per expected_tensors entry; `edit`
// may change the list first). Returns the folder.
fs::path make_model(const fs::path& dir, const std::string& config_text,
                    const std::function<void(std::vector<ExpectedTensor>&)>& edit = {}, DType dtype = DType::BF16) {
    fs::create_directories(dir);
    test::write_file(dir / "config.json", config_text);
    auto tensors = expected_tensors(parse_model_config(json::parse(config_text), "config.json"));
    if (edit) edit(tensors);
    std::vector<std::vector<std::byte>> storage;
    std::vector<TensorToWrite> out;
    storage.reserve(tensors.size());
    for (const auto& t : tensors) {
        int64_t n = 1;
        for (auto d : t.shape) n *= d;
        storage.emplace_back(static_cast<size_t>(n) * dtype_size(dtype));
        out.push_back({t.name, dtype, t.shape, storage.back()});
    }
    write_safetensors(dir / "model.safetensors", out, {{"format", "pt"}});
    return dir;
}

}  // namespace

class TestModelConfig : public QObject {
    Q_OBJECT

private slots:
    // --- each architecture ---------------------------------------------------------------------------
    void llama32_1b() {
        const auto c = parse(kLlama32_1B);
        QCOMPARE(c.architecture, std::string("LlamaForCausalLM"));
        QVERIFY(c.supported);
        QCOMPARE(c.head_dim, int64_t(64));
        QCOMPARE(c.num_key_value_heads, int64_t(8));
        QVERIFY(c.tie_word_embeddings);
        QVERIFY(!c.attention_bias && !c.o_proj_bias && !c.qk_norm);
        QCOMPARE(c.rope_theta, 500000.0);
        QVERIFY(c.rope_scaling.type == RopeScalingType::Llama3);
        QCOMPARE(c.rope_scaling.factor, 32.0);
        QCOMPARE(c.rope_scaling.low_freq_factor, 1.0);
        QCOMPARE(c.rope_scaling.high_freq_factor, 4.0);
        QCOMPARE(c.rope_scaling.original_max_position_embeddings, int64_t(8192));
        QCOMPARE(c.rms_norm_eps, 1e-5);
        QCOMPARE(c.bos_token_ids, (std::vector<int64_t>{128000}));
        QCOMPARE(c.eos_token_ids, (std::vector<int64_t>{128001, 128008, 128009}));
        QCOMPARE(c.torch_dtype, std::string("bfloat16"));
        QCOMPARE(c.parameter_count(), int64_t(1'235'814'400));
        const auto t = expected_tensors(c);
        QCOMPARE(t.size(), size_t(1 + 16 * 9 + 1));  // tied: no lm_head
        QCOMPARE(t[2].name, std::string("model.layers.0.self_attn.q_proj.weight"));
        QCOMPARE(t[3].shape, (std::vector<int64_t>{512, 2048}));  // k_proj: 8 kv heads x 64
    }

    void qwen25_05b() {
        const auto c = parse(kQwen25_05B);
        QVERIFY(c.supported);
        QCOMPARE(c.head_dim, int64_t(64));
        QVERIFY(c.attention_bias);  // Qwen2: q/k/v biases always
        QVERIFY(!c.o_proj_bias);
        QCOMPARE(c.sliding_window, int64_t(0));  // use_sliding_window=false
        QCOMPARE(c.parameter_count(), int64_t(494'032'768));
        bool has_q_bias = false, has_o_bias = false;
        for (const auto& t : expected_tensors(c)) {
            if (t.name == "model.layers.0.self_attn.q_proj.bias") {
                has_q_bias = true;
                QCOMPARE(t.shape, (std::vector<int64_t>{896}));
            }
            if (t.name == "model.layers.0.self_attn.k_proj.bias") QCOMPARE(t.shape, (std::vector<int64_t>{128}));
            if (t.name == "model.layers.0.self_attn.o_proj.bias") has_o_bias = true;
        }
        QVERIFY(has_q_bias && !has_o_bias);
    }

    void qwen3_06b() {
        const auto c = parse(kQwen3_06B);
        QVERIFY(c.supported);
        QCOMPARE(c.head_dim, int64_t(128));  // != 1024 / 16
        QCOMPARE(c.q_dim(), int64_t(2048));
        QVERIFY(c.qk_norm);
        QVERIFY(!c.attention_bias);
        QCOMPARE(c.rope_theta, 1e6);  // written as an integer
        QCOMPARE(c.parameter_count(), int64_t(596'049'920));
        int norms = 0;
        for (const auto& t : expected_tensors(c))
            if (t.name.find("_norm.weight") != std::string::npos && t.name.find("self_attn") != std::string::npos) {
                QCOMPARE(t.shape, (std::vector<int64_t>{128}));
                ++norms;
            }
        QCOMPARE(norms, 2 * 28);
        // Qwen3's head_dim default is 128 (transformers' Qwen3Config), not hidden / heads.
        const auto d =
            parse_model_config(json::parse(dump_with(kQwen3_06B, [](json& j) { j.erase("head_dim"); })), "c");
        QCOMPARE(d.head_dim, int64_t(128));
    }

    void mistral7b() {
        const auto c = parse(kMistral7B);
        QVERIFY(c.supported);
        QCOMPARE(c.head_dim, int64_t(128));
        QCOMPARE(c.sliding_window, int64_t(4096));
        QVERIFY(!c.tie_word_embeddings);
        QCOMPARE(c.parameter_count(), int64_t(7'241'732'096));
        QCOMPARE(expected_tensors(c).back().name, std::string("lm_head.weight"));
    }

    void qwen3_30b_a3b() {
        const auto c = parse(kQwen3_30B_A3B);
        QVERIFY2(c.supported, c.unsupported_reason.c_str());
        QVERIFY(c.moe_renormalize);  // norm_topk_prob
        QCOMPARE(c.num_experts, int64_t(128));
        QCOMPARE(c.num_experts_per_tok, int64_t(8));
        QCOMPARE(c.moe_intermediate_size, int64_t(768));
        QVERIFY(c.qk_norm);
        QVERIFY(c.is_moe_layer(0) && c.is_moe_layer(47));
        // Per layer: attention 2048*(4096+512+512) + 4096*2048 + q/k norms 2*128, router 128*2048,
        // experts 128*3*768*2048, two norms 2*2048; plus untied embeddings 2*151936*2048 and the final norm.
        const int64_t per_layer =
            2048LL * (4096 + 512 + 512) + 4096LL * 2048 + 256 + 128LL * 2048 + 128LL * 3 * 768 * 2048 + 2 * 2048;
        QCOMPARE(c.parameter_count(), 48 * per_layer + 2LL * 151936 * 2048 + 2048);
        QCOMPARE(c.parameter_count(), int64_t(30'532'122'624));
        // Active per token: 8 of 128 experts.
        QCOMPARE(c.active_parameter_count(), c.parameter_count() - 48LL * 120 * 3 * 768 * 2048);
        // transformers 5 writes num_experts as num_local_experts (its attribute_map alias).
        const auto v5 = parse_model_config(json::parse(dump_with(kQwen3_30B_A3B,
                                                                 [](json& j) {
                                                                     j["num_local_experts"] = j["num_experts"];
                                                                     j.erase("num_experts");
                                                                 })),
                                           "v5");
        QCOMPARE(v5.num_experts, int64_t(128));
        // output_router_logits turns the load-balancing loss on (transformers' switch), with its coefficient.
        QVERIFY(!c.moe_aux_loss);
        const auto aux = parse_model_config(json::parse(dump_with(kQwen3_30B_A3B,
                                                                  [](json& j) {
                                                                      j["output_router_logits"] = true;
                                                                      j["router_aux_loss_coef"] = 0.02;
                                                                  })),
                                            "aux");
        QVERIFY(aux.supported && aux.moe_aux_loss);
        QCOMPARE(aux.router_aux_loss_coef, 0.02);
        // What Tandem does not do is refused with the field to change.
        const auto jitter = parse_model_config(
            json::parse(dump_with(kQwen3_30B_A3B, [](json& j) { j["router_jitter_noise"] = 0.1; })), "jitter");
        QVERIFY(!jitter.supported && jitter.unsupported_reason.find("router_jitter_noise") != std::string::npos);
        // mlp_only_layers keep a dense MLP.
        const auto d = parse_model_config(json::parse(dump_with(kQwen3_30B_A3B,
                                                                [](json& j) {
                                                                    j["mlp_only_layers"] = {0, 5};
                                                                })),
                                          "c");
        QVERIFY(!d.is_moe_layer(0) && d.is_moe_layer(1) && !d.is_moe_layer(5));
    }

    void mixtral8x7b() {
        const auto c = parse(kMixtral8x7B);
        QVERIFY2(c.supported, c.unsupported_reason.c_str());
        QVERIFY(c.moe_renormalize);
        QCOMPARE(c.num_experts, int64_t(8));
        QCOMPARE(c.num_experts_per_tok, int64_t(2));
        QCOMPARE(c.moe_intermediate_size, int64_t(14336));
        QCOMPARE(c.rope_theta, 1e6);
        QCOMPARE(c.parameter_count(), int64_t(46'702'792'704));
        bool found = false;
        for (const auto& t : expected_tensors(c))
            if (t.name == "model.layers.3.block_sparse_moe.experts.7.w2.weight") {
                found = true;
                QCOMPARE(t.shape, (std::vector<int64_t>{4096, 14336}));
            }
        QVERIFY(found);
    }

    void gptOss20b() {
        const auto c = parse(kGptOss20B);
        QVERIFY2(c.supported, c.unsupported_reason.c_str());
        QVERIFY(c.experts_mxfp4);  // quant_method mxfp4: dequantized at load
        QVERIFY(c.moe_renormalize);
        QCOMPARE(c.swiglu_limit, 7.0);
        QCOMPARE(c.sliding_layers.size(), size_t(24));
        QVERIFY(c.window_of(0) == 128 && c.window_of(1) == 0 && c.window_of(22) == 128 && c.window_of(23) == 0);
        QVERIFY(!c.rope_scaling.truncate);
        QVERIFY(std::fabs(c.rope_scaling.attention_factor - (0.1 * std::log(32.0) + 1.0)) < 1e-12);
        QCOMPARE(c.num_experts, int64_t(32));
        QCOMPARE(c.num_experts_per_tok, int64_t(4));
        QCOMPARE(c.head_dim, int64_t(64));
        QVERIFY(c.attention_bias && c.o_proj_bias && c.attention_sinks);
        QVERIFY(c.rope_scaling.type == RopeScalingType::Yarn);
        QCOMPARE(c.rope_scaling.factor, 32.0);
        QCOMPARE(c.rope_scaling.original_max_position_embeddings, int64_t(4096));
        QCOMPARE(c.rope_theta, 150000.0);
        QCOMPARE(c.sliding_window, int64_t(128));
        QCOMPARE(c.parameter_count(), int64_t(20'914'757'184));
    }

    void babyllamaConfig() {
        const auto dir = test::assets() / "babyllama-tok105" / "hf";
        TANDEM_REQUIRE_ASSET(dir);
        const auto c = load_model_config(dir);  // a folder works as well as the file
        QVERIFY(c.supported);
        QCOMPARE(c.hidden_size, int64_t(128));
        QCOMPARE(c.num_key_value_heads, int64_t(4));
        QCOMPARE(c.head_dim, int64_t(16));
        QVERIFY(c.tie_word_embeddings);
        QCOMPARE(c.parameter_count(), int64_t(936'448));
        // Our expected tensor names are exactly the tensors of the real file.
        const SafetensorsFile f(dir / "model.safetensors");
        const auto expected = expected_tensors(c);
        QCOMPARE(expected.size(), f.size());
        for (const auto& e : expected) {
            const auto* t = f.find(e.name);
            QVERIFY2(t, e.name.c_str());
            QCOMPARE(t->shape, e.shape);
        }
    }

    // --- rope variants -----------------------------------------------------------------------------------
    void ropeVariants() {
        auto with = [](const std::function<void(json&)>& edit) {
            return parse_model_config(json::parse(dump_with(kTinyLlama, edit)), "config.json");
        };
        QCOMPARE(with([](json&) {}).rope_theta, 10000.0);  // Llama default
        QVERIFY(with([](json& j) { j["rope_scaling"] = nullptr; }).rope_scaling.type == RopeScalingType::None);
        QVERIFY(with([](json& j) {
                    j["rope_scaling"] = {{"rope_type", "default"}};
                }).rope_scaling.type == RopeScalingType::None);
        const auto lin = with([](json& j) { j["rope_scaling"] = {{"type", "linear"}, {"factor", 2.0}}; });
        QVERIFY(lin.rope_scaling.type == RopeScalingType::Linear);
        QCOMPARE(lin.rope_scaling.factor, 2.0);
        // transformers v5: rope_parameters holds theta and the type.
        const auto v5 = with([](json& j) { j["rope_parameters"] = {{"rope_theta", 1e6}, {"rope_type", "default"}}; });
        QCOMPARE(v5.rope_theta, 1e6);
        QVERIFY(v5.rope_scaling.type == RopeScalingType::None);
        const auto v5l3 = with([](json& j) {
            j["rope_parameters"] = {{"rope_theta", 5e5},       {"rope_type", "llama3"},
                                    {"factor", 8.0},           {"low_freq_factor", 1.0},
                                    {"high_freq_factor", 4.0}, {"original_max_position_embeddings", 8192}};
        });
        QCOMPARE(v5l3.rope_theta, 5e5);
        QVERIFY(v5l3.rope_scaling.type == RopeScalingType::Llama3);
        QCOMPARE(v5l3.rope_scaling.factor, 8.0);
        // theta inside rope_scaling.
        QCOMPARE(with([](json& j) {
                     j["rope_scaling"] = {{"rope_type", "default"}, {"rope_theta", 123.0}};
                 }).rope_theta,
                 123.0);
        // Unknown types: Unsupported, naming the type.
        expect_error([&] { with([](json& j) {
                               j["rope_scaling"] = {{"type", "dynamic"}, {"factor", 2.0}};
                           }); },
                     ErrorCategory::Unsupported, {"config.json", "'dynamic'", "llama3"});
        // longrope needs its factor lists, one per frequency (head_dim / 2).
        expect_error([&] { with([](json& j) {
                               j["rope_scaling"] = {{"rope_type", "longrope"}};
                           }); },
                     ErrorCategory::InvalidInput, {"config.json", "short_factor", "'longrope'"});
        // yarn (transformers' rope init functions serve every family): the original length defaults to
        // max_position_embeddings, the cos / sin factor to 0.1 ln(factor) + 1.
        const auto yarn = with([](json& j) { j["rope_scaling"] = {{"rope_type", "yarn"}, {"factor", 4.0}}; });
        QVERIFY(yarn.rope_scaling.type == RopeScalingType::Yarn && yarn.rope_scaling.truncate);
        QCOMPARE(yarn.rope_scaling.original_max_position_embeddings, yarn.max_position_embeddings);
        QVERIFY(std::fabs(yarn.rope_scaling.attention_factor - (0.1 * std::log(4.0) + 1.0)) < 1e-12);
        expect_error([&] { with([](json& j) {
                               j["rope_scaling"] = {{"rope_type", "yarn"}, {"factor", 4.0}, {"beta_fast", -1}};
                           }); },
                     ErrorCategory::InvalidInput, {"config.json", "beta_fast"});
        expect_error([&] { with([](json& j) {
                               j["rope_scaling"] = {{"rope_type", "llama3"}, {"factor", 8.0}};
                           }); },
                     ErrorCategory::InvalidInput, {"config.json", "low_freq_factor"});
        expect_error([&] { with([](json& j) { j["rope_scaling"] = "llama3"; }); }, ErrorCategory::InvalidInput,
                     {"config.json", "rope_scaling"});
        expect_error([&] { with([](json& j) {
                               j["rope_scaling"] = {{"type", "linear"}};
                           }); },
                     ErrorCategory::InvalidInput, {"config.json", "factor"});
    }

    void familyDetails() {
        auto with = [](const char* base, const std::function<void(json&)>& edit) {
            return parse_model_config(json::parse(dump_with(base, edit)), "config.json");
        };
        // Llama attention_bias adds q/k/v and o biases.
        const auto lb = with(kTinyLlama, [](json& j) { j["attention_bias"] = true; });
        QVERIFY(lb.attention_bias && lb.o_proj_bias);
        QCOMPARE(lb.parameter_count(), parse(kTinyLlama).parameter_count() + 2 * (16 + 8 + 8 + 16));
        // No architectures list: inferred from model_type.
        const auto mt = with(kTinyLlama, [](json& j) {
            j.erase("architectures");
            j["model_type"] = "qwen3";
        });
        QCOMPARE(mt.architecture, std::string("Qwen3ForCausalLM"));
        // Newer "dtype" key wins over "torch_dtype".
        QCOMPARE(with(kTinyLlama,
                      [](json& j) {
                          j["dtype"] = "float16";
                          j["torch_dtype"] = "bfloat16";
                      })
                     .torch_dtype,
                 std::string("float16"));
        // Features we cannot train yet parse with supported=false and a reason.
        const auto gelu = with(kTinyLlama, [](json& j) { j["hidden_act"] = "gelu"; });
        QVERIFY(!gelu.supported && gelu.unsupported_reason.find("gelu") != std::string::npos);
        const auto mlpb = with(kTinyLlama, [](json& j) { j["mlp_bias"] = true; });
        QVERIFY(!mlpb.supported && mlpb.unsupported_reason.find("mlp_bias") != std::string::npos);
        const auto quant = with(kTinyLlama, [](json& j) { j["quantization_config"] = {{"quant_method", "gptq"}}; });
        QVERIFY(!quant.supported && quant.unsupported_reason.find("gptq") != std::string::npos);
        // Defaults: kv heads = heads, head_dim = hidden / heads.
        const auto def = with(kTinyLlama, [](json& j) { j.erase("num_key_value_heads"); });
        QCOMPARE(def.num_key_value_heads, int64_t(4));
        QCOMPARE(def.head_dim, int64_t(4));
        QCOMPARE(supported_architectures().size(), size_t(10));
        QCOMPARE(parsed_architectures().size(), size_t(10));
    }

    // --- Phi-3 (fused projections, LongRoPE) ---------------------------------------------------------------
    void phi3() {
        // microsoft/Phi-3-mini-4k-instruct's shapes: 3,821,079,552 parameters (its model card's count).
        const auto mini = parse_model_config(json::parse(R"({"architectures": ["Phi3ForCausalLM"],
            "model_type": "phi3", "hidden_size": 3072, "intermediate_size": 8192, "num_hidden_layers": 32,
            "num_attention_heads": 32, "num_key_value_heads": 32, "vocab_size": 32064,
            "max_position_embeddings": 4096, "original_max_position_embeddings": 4096, "rms_norm_eps": 1e-05,
            "rope_scaling": null, "rope_theta": 10000.0, "sliding_window": 2047, "tie_word_embeddings": false,
            "resid_pdrop": 0.0, "embd_pdrop": 0.0, "attention_dropout": 0.0, "hidden_act": "silu"})"),
                                             "config.json");
        QVERIFY2(mini.supported, mini.unsupported_reason.c_str());
        QCOMPARE(mini.parameter_count(), int64_t(3'821'079'552));
        QCOMPARE(mini.sliding_window, int64_t(2047));
        const auto t = expected_tensors(mini);
        auto shape_of = [&](const std::string& n) {
            for (const auto& e : t)
                if (e.name == n) return e.shape;
            return std::vector<int64_t>{};
        };
        QCOMPARE(shape_of("model.layers.0.self_attn.qkv_proj.weight"), (std::vector<int64_t>{9216, 3072}));
        QCOMPARE(shape_of("model.layers.31.mlp.gate_up_proj.weight"), (std::vector<int64_t>{16384, 3072}));
        QCOMPARE(shape_of("model.layers.0.self_attn.q_proj.weight"), std::vector<int64_t>{});
        QCOMPARE(lora_targets(mini), (std::vector<std::string>{"qkv_proj", "o_proj", "gate_up_proj", "down_proj"}));

        // LongRoPE (Phi-3-mini-128k's form, head_dim 4): factors per frequency, attention factor derived from
        // max / original positions as transformers does.
        auto longrope = [](const std::function<void(json&)>& edit) {
            json j = json::parse(R"({"architectures": ["Phi3ForCausalLM"], "hidden_size": 16,
                "intermediate_size": 32, "num_hidden_layers": 1, "num_attention_heads": 4, "vocab_size": 50,
                "max_position_embeddings": 131072, "original_max_position_embeddings": 4096,
                "rope_scaling": {"type": "longrope", "short_factor": [1.0, 1.5], "long_factor": [2.0, 8.0]}})");
            edit(j);
            return parse_model_config(j, "config.json");
        };
        const auto lr = longrope([](json&) {});
        QVERIFY(lr.rope_scaling.type == RopeScalingType::LongRope);
        QCOMPARE(lr.rope_scaling.short_factor, (std::vector<double>{1.0, 1.5}));
        QCOMPARE(lr.rope_scaling.long_factor, (std::vector<double>{2.0, 8.0}));
        QCOMPARE(lr.rope_scaling.original_max_position_embeddings, int64_t(4096));
        QVERIFY(std::fabs(lr.rope_scaling.attention_factor - std::sqrt(1 + std::log(32.0) / std::log(4096.0))) <
                1e-12);
        QCOMPARE(longrope([](json& j) { j["rope_scaling"]["attention_factor"] = 1.25; })
                     .rope_scaling.attention_factor,
                 1.25);
        expect_error([&] { longrope([](json& j) { j["rope_scaling"]["short_factor"] = {1.0}; }); },
                     ErrorCategory::InvalidInput, {"config.json", "short_factor has 1 factors", "needs 2"});
        expect_error([&] { longrope([](json& j) { j["rope_scaling"]["long_factor"] = {1.0, -2.0}; }); },
                     ErrorCategory::InvalidInput, {"long_factor", "not positive"});
        // Partial rotary (Phi-4-mini): int(head_dim * factor) channels rotate, one LongRoPE factor per rotated
        // pair; at the top level or (transformers 5) inside rope_parameters.
        const auto partial = longrope([](json& j) {
            j["partial_rotary_factor"] = 0.5;
            j["rope_scaling"]["short_factor"] = {1.5};
            j["rope_scaling"]["long_factor"] = {8.0};
        });
        QVERIFY2(partial.supported, partial.unsupported_reason.c_str());
        QCOMPARE(partial.rotary_dim(), int64_t(2));
        QCOMPARE(partial.head_dim, int64_t(4));
        const auto partial5 = longrope([](json& j) {
            j["rope_parameters"] = j["rope_scaling"];
            j.erase("rope_scaling");
            j["rope_parameters"]["partial_rotary_factor"] = 0.5;
            j["rope_parameters"]["short_factor"] = {1.5};
            j["rope_parameters"]["long_factor"] = {8.0};
        });
        QVERIFY2(partial5.supported, partial5.unsupported_reason.c_str());
        QCOMPARE(partial5.rotary_dim(), int64_t(2));
        expect_error([&] { longrope([](json& j) { j["partial_rotary_factor"] = 0.5; }); }, ErrorCategory::InvalidInput,
                     {"short_factor has 2 factors", "partial_rotary_factor", "needs 1"});
        // An odd rotary count (4 x 0.75 = 3) is refused with the reason.
        const auto odd = longrope([](json& j) {
            j["partial_rotary_factor"] = 0.75;
            j["rope_scaling"]["short_factor"] = {1.5};
            j["rope_scaling"]["long_factor"] = {8.0};
        });
        QVERIFY(!odd.supported && odd.unsupported_reason.find("partial_rotary_factor") != std::string::npos);
        const auto drop = longrope([](json& j) { j["resid_pdrop"] = 0.1; });
        QVERIFY(!drop.supported && drop.unsupported_reason.find("resid_pdrop") != std::string::npos);
    }

    // --- Gemma 2 / 3 ---------------------------------------------------------------------------------------
    void gemma() {
        // google/gemma-3-1b-it's config.json as published (transformers 4.50 keys): five sliding layers to one
        // full one, two RoPE bases, tied embeddings by default.
        const auto g3 = parse_model_config(json::parse(R"({"architectures": ["Gemma3ForCausalLM"],
            "attn_logit_softcapping": null, "bos_token_id": 2, "eos_token_id": [1, 106], "final_logit_softcapping": null,
            "head_dim": 256, "hidden_activation": "gelu_pytorch_tanh", "hidden_size": 1152, "intermediate_size": 6912,
            "max_position_embeddings": 32768, "model_type": "gemma3_text", "num_attention_heads": 4,
            "num_hidden_layers": 26, "num_key_value_heads": 1, "pad_token_id": 0, "query_pre_attn_scalar": 256,
            "rms_norm_eps": 1e-06, "rope_local_base_freq": 10000, "rope_scaling": null, "rope_theta": 1000000,
            "sliding_window": 512, "sliding_window_pattern": 6, "vocab_size": 262144})"),
                                           "config.json");
        QVERIFY2(g3.supported, g3.unsupported_reason.c_str());
        QVERIFY(g3.tie_word_embeddings && g3.norm_one_plus && g3.sandwich_norms && g3.qk_norm);
        QCOMPARE(g3.hidden_act, std::string("gelu_pytorch_tanh"));
        QCOMPARE(g3.rope_theta, 1e6);
        QCOMPARE(g3.rope_local_theta, 1e4);
        QCOMPARE(g3.window_of(0), int64_t(512));
        QCOMPARE(g3.window_of(5), int64_t(0));
        QCOMPARE(g3.window_of(6), int64_t(512));
        QCOMPARE(g3.embed_scale, std::sqrt(1152.0));
        QCOMPARE(g3.parameter_count(), int64_t(999'885'952));  // Gemma 3 1B (tied embeddings)
        bool pre_ff = false;
        for (const auto& t : expected_tensors(g3)) pre_ff |= t.name == "model.layers.25.pre_feedforward_layernorm.weight";
        QVERIFY(pre_ff);

        // transformers 5's per-layer-type RoPE and explicit layer_types (the fixture's form).
        const auto fx = load_model_config(fs::path(TANDEM_FIXTURES_DIR) / "models" / "gemma3");
        QCOMPARE(fx.sliding_layers, (std::vector<bool>{true, false}));
        QCOMPARE(fx.rope_local_theta, 1e4);
        QVERIFY(fx.rope_scaling.type == RopeScalingType::Linear && fx.rope_scaling.factor == 8.0);
        QCOMPARE(fx.query_pre_attn_scalar, 24.0);

        // Gemma 2: soft-capping defaults (50, 30) unless the file says null; every other layer slides.
        const std::string g2 = R"({"architectures": ["Gemma2ForCausalLM"], "hidden_size": 16, "intermediate_size": 32,
            "num_hidden_layers": 4, "num_attention_heads": 2, "num_key_value_heads": 1, "head_dim": 8, "vocab_size": 50})";
        const auto d2 = parse_model_config(json::parse(g2), "config.json");
        QCOMPARE(d2.attn_logit_softcapping, 50.0);
        QCOMPARE(d2.final_logit_softcapping, 30.0);
        QCOMPARE(d2.sliding_layers, (std::vector<bool>{true, false, true, false}));
        auto j2 = json::parse(g2);
        j2["final_logit_softcapping"] = nullptr;
        j2["layer_types"] = {"full_attention", "sliding_attention", "full_attention", "bogus"};
        expect_error([&] { parse_model_config(j2, "config.json"); }, ErrorCategory::InvalidInput,
                     {"config.json", "layer_types[3]", "sliding_attention"});
        j2["layer_types"] = {"full_attention", "sliding_attention", "full_attention", "full_attention"};
        const auto n2 = parse_model_config(j2, "config.json");
        QCOMPARE(n2.final_logit_softcapping, 0.0);
        QCOMPARE(n2.window_of(1), int64_t(4096));
        j2["use_bidirectional_attention"] = true;
        QVERIFY(!parse_model_config(j2, "config.json").supported);
    }

    // --- bad configs ------------------------------------------------------------------------------------
    void badConfigs_data() {
        QTest::addColumn<QString>("text");
        QTest::addColumn<int>("category");
        QTest::addColumn<QString>("needle");
        const int invalid = int(ErrorCategory::InvalidInput), unsupported = int(ErrorCategory::Unsupported);
        auto edit = [&](const char* name, const std::function<void(json&)>& fn, int cat, const char* needle) {
            QTest::newRow(name) << QString::fromStdString(dump_with(kTinyLlama, fn)) << cat << QString(needle);
        };
        auto raw = [&](const char* name, const char* text, int cat, const char* needle) {
            QTest::newRow(name) << QString(text) << cat << QString(needle);
        };
        raw("not json", "{\"architectures\": [\"LlamaForCausalLM\",}", invalid, "invalid JSON");
        raw("json array", "[1, 2]", invalid, "must be a JSON object");
        raw("empty object", "{}", invalid, "'architectures' is missing");
        edit(
            "unsupported arch", [](json& j) { j["architectures"] = {"GPT2LMHeadModel"}; }, unsupported,
            "architecture 'GPT2LMHeadModel' is not supported. Supported: LlamaForCausalLM, MistralForCausalLM, "
            "Qwen2ForCausalLM, Qwen3ForCausalLM");
        edit(
            "architectures string", [](json& j) { j["architectures"] = "LlamaForCausalLM"; }, invalid,
            "'architectures' must be a non-empty list");
        edit(
            "architectures empty", [](json& j) { j["architectures"] = json::array(); }, invalid, "'architectures'");
        edit(
            "missing hidden_size", [](json& j) { j.erase("hidden_size"); }, invalid,
            "required field 'hidden_size' is missing");
        edit(
            "null hidden_size", [](json& j) { j["hidden_size"] = nullptr; }, invalid, "'hidden_size' is missing");
        edit(
            "hidden_size string", [](json& j) { j["hidden_size"] = "16"; }, invalid,
            "'hidden_size' must be an integer, found string");
        edit(
            "hidden_size float", [](json& j) { j["hidden_size"] = 16.5; }, invalid, "'hidden_size' must be an integer");
        edit(
            "hidden_size zero", [](json& j) { j["hidden_size"] = 0; }, invalid,
            "hidden_size (0) must be between 1 and");
        edit(
            "hidden_size huge", [](json& j) { j["hidden_size"] = 300000; }, invalid, "hidden_size (300000)");
        edit(
            "negative layers", [](json& j) { j["num_hidden_layers"] = -2; }, invalid, "num_hidden_layers (-2)");
        edit(
            "too many layers", [](json& j) { j["num_hidden_layers"] = 5000; }, invalid, "num_hidden_layers (5000)");
        edit(
            "missing layers", [](json& j) { j.erase("num_hidden_layers"); }, invalid, "'num_hidden_layers' is missing");
        edit(
            "vocab huge", [](json& j) { j["vocab_size"] = 20000000; }, invalid, "vocab_size (20000000)");
        edit(
            "vocab above int64", [](json& j) { j["vocab_size"] = 18446744073709551615ULL; }, invalid,
            "'vocab_size' is too large");
        edit(
            "intermediate missing", [](json& j) { j.erase("intermediate_size"); }, invalid, "'intermediate_size'");
        edit(
            "kv does not divide",
            [](json& j) {
                j["num_attention_heads"] = 32;
                j["num_key_value_heads"] = 3;
                j["hidden_size"] = 64;
            },
            invalid, "num_key_value_heads (3) must divide num_attention_heads (32)");
        edit(
            "kv zero", [](json& j) { j["num_key_value_heads"] = 0; }, invalid, "num_key_value_heads (0)");
        edit(
            "hidden not divisible", [](json& j) { j["hidden_size"] = 18; }, invalid,
            "hidden_size (18) is not divisible by num_attention_heads (4) and head_dim is not given");
        edit(
            "head_dim odd", [](json& j) { j["head_dim"] = 15; }, invalid, "head_dim (15) must be even");
        edit(
            "head_dim huge", [](json& j) { j["head_dim"] = 2048; }, invalid, "head_dim (2048)");
        edit(
            "head_dim string", [](json& j) { j["head_dim"] = "8"; }, invalid, "'head_dim' must be an integer");
        edit(
            "eps zero", [](json& j) { j["rms_norm_eps"] = 0; }, invalid, "rms_norm_eps");
        edit(
            "eps one", [](json& j) { j["rms_norm_eps"] = 1.0; }, invalid, "rms_norm_eps");
        edit(
            "eps negative", [](json& j) { j["rms_norm_eps"] = -1e-6; }, invalid, "rms_norm_eps");
        edit(
            "eps string", [](json& j) { j["rms_norm_eps"] = "1e-5"; }, invalid, "'rms_norm_eps' must be a number");
        edit(
            "theta zero", [](json& j) { j["rope_theta"] = 0; }, invalid, "rope_theta");
        edit(
            "theta negative", [](json& j) { j["rope_theta"] = -10000.0; }, invalid, "rope_theta");
        edit(
            "tie string", [](json& j) { j["tie_word_embeddings"] = "yes"; }, invalid,
            "'tie_word_embeddings' must be true or false");
        edit(
            "bias int", [](json& j) { j["attention_bias"] = 1; }, invalid, "'attention_bias' must be true or false");
        edit(
            "bos string", [](json& j) { j["bos_token_id"] = "1"; }, invalid, "'bos_token_id' must be an integer");
        edit(
            "eos list of strings", [](json& j) { j["eos_token_id"] = {"a"}; }, invalid,
            "'eos_token_id' must be an integer");
        edit(
            "eos negative", [](json& j) { j["eos_token_id"] = -1; }, invalid, "'eos_token_id' has a negative token id");
        edit(
            "dtype number", [](json& j) { j["torch_dtype"] = 16; }, invalid, "'torch_dtype' must be a string");
        edit(
            "max positions zero", [](json& j) { j["max_position_embeddings"] = 0; }, invalid,
            "max_position_embeddings (0)");
        edit(
            "unknown rope",
            [](json& j) {
                j["rope_scaling"] = {{"rope_type", "ntk-by-parts"}};
            },
            unsupported, "'ntk-by-parts'");
        QTest::newRow("moe missing experts")
            << QString::fromStdString(dump_with(kQwen3_30B_A3B, [](json& j) { j.erase("num_experts"); })) << invalid
            << QString("'num_local_experts' is missing");
        QTest::newRow("moe top-k above experts")
            << QString::fromStdString(dump_with(kMixtral8x7B, [](json& j) { j["num_experts_per_tok"] = 9; })) << invalid
            << QString("num_experts_per_tok (9)");
        QTest::newRow("moe absurd experts")
            << QString::fromStdString(dump_with(kMixtral8x7B, [](json& j) { j["num_local_experts"] = 100000; }))
            << invalid << QString("number of experts (100000)");
        QTest::newRow("moe absurd product") << QString::fromStdString(dump_with(kMixtral8x7B, [](json& j) {
            j["num_local_experts"] = 4096;
            j["num_hidden_layers"] = 1000;
            j["num_experts_per_tok"] = 2;
        })) << invalid << QString("millions of tensors");
    }

    void badConfigs() {
        QFETCH(QString, text);
        QFETCH(int, category);
        QFETCH(QString, needle);
        QTemporaryDir dir;
        const fs::path p = fs::path(dir.path().toStdString()) / "config.json";
        test::write_file(p, text.toStdString());
        expect_error([&] { load_model_config(p); }, ErrorCategory(category), {"config.json", needle.toStdString()});
    }

    void missingConfig() {
        QTemporaryDir dir;
        const fs::path d = dir.path().toStdString();
        expect_error([&] { load_model_config(d); }, ErrorCategory::InvalidInput, {d.string(), "no config.json"});
        expect_error([&] { load_model_config(d / "nope" / "config.json"); }, ErrorCategory::InvalidInput,
                     {"nope/config.json", "not found"});
    }

    // --- model folders ---------------------------------------------------------------------------------
    void inspectBabyllama() {
        const auto dir = test::assets() / "babyllama-tok105" / "hf";
        TANDEM_REQUIRE_ASSET(dir);
        const auto info = inspect_model_dir(dir);
        QVERIFY(info.tensors_checked);
        QCOMPARE(info.config.architecture, std::string("LlamaForCausalLM"));
        QCOMPARE(info.dtypes, (std::vector<std::string>{"F32"}));
        QCOMPARE(info.parameter_count, int64_t(936'448));
        QCOMPARE(info.weight_bytes, uint64_t(936'448) * 4);
        QCOMPARE(info.weight_files.size(), size_t(1));
        QVERIFY(info.index_file.empty());
        QVERIFY(info.has_tokenizer_json);
        QVERIFY(info.has_tokenizer_config);
        QVERIFY(info.has_generation_config);
        QVERIFY(!info.has_chat_template);  // a base model
        QVERIFY(info.extra_tensors.empty());
        const auto opened = open_model_dir(dir);
        QCOMPARE(opened.weights.at("model.norm.weight").shape, (std::vector<int64_t>{128}));
    }

    void inspectGeneratedFolders() {
        QTemporaryDir tmp;
        const fs::path root = tmp.path().toStdString();

        // A good Qwen3 folder, plus an extra buffer tensor that must be ignored.
        const auto good = make_model(root / "good", kTinyQwen3, [](std::vector<ExpectedTensor>& t) {
            t.push_back({"model.layers.0.self_attn.rotary_emb.inv_freq", {4}});
        });
        test::write_file(good / "tokenizer.json", "{}");
        test::write_file(good / "tokenizer_config.json", R"({"chat_template": "{{ messages }}"})");
        const auto info = inspect_model_dir(good);
        QVERIFY(info.tensors_checked);
        QCOMPARE(info.dtypes, (std::vector<std::string>{"BF16"}));
        QCOMPARE(info.parameter_count, info.config.parameter_count());
        QCOMPARE(info.extra_tensors, (std::vector<std::string>{"model.layers.0.self_attn.rotary_emb.inv_freq"}));
        QVERIFY(info.has_chat_template);
        QCOMPARE(info.weight_bytes, uint64_t(info.config.parameter_count() + 4) * 2);

        // chat_template.jinja next to the tokenizer also counts.
        const auto jinja = make_model(root / "jinja", kTinyLlama);
        QVERIFY(!inspect_model_dir(jinja).has_chat_template);
        test::write_file(jinja / "chat_template.jinja", "{{ messages }}");
        QVERIFY(inspect_model_dir(jinja).has_chat_template);

        // Missing tensor: names it and its expected shape.
        const auto missing = make_model(root / "missing", kTinyQwen3, [](std::vector<ExpectedTensor>& t) {
            std::erase_if(t,
                          [](const ExpectedTensor& e) { return e.name == "model.layers.1.self_attn.k_norm.weight"; });
        });
        expect_error([&] { inspect_model_dir(missing); }, ErrorCategory::InvalidInput,
                     {"model.safetensors", "'model.layers.1.self_attn.k_norm.weight'", "[8]", "missing"});
        // Untied config without lm_head.
        const auto nohead =
            make_model(root / "nohead", kTinyQwen3, [](std::vector<ExpectedTensor>& t) { t.pop_back(); });
        expect_error([&] { inspect_model_dir(nohead); }, ErrorCategory::InvalidInput,
                     {"model.safetensors", "'lm_head.weight'", "tie_word_embeddings=false"});
        // Wrong shape vs the config: names the tensor, both shapes.
        const auto shape = make_model(root / "shape", kTinyQwen3, [](std::vector<ExpectedTensor>& t) {
            for (auto& e : t)
                if (e.name == "model.layers.0.self_attn.k_proj.weight") e.shape = {32, 16};
        });
        expect_error(
            [&] { inspect_model_dir(shape); }, ErrorCategory::InvalidInput,
            {"model.safetensors", "'model.layers.0.self_attn.k_proj.weight'", "[32, 16]", "[16, 16]", "config.json"});
        // Weights of a different config (babyllama-like shapes against a smaller config).
        const auto other = make_model(root / "other", kTinyLlama);
        test::write_file(other / "config.json", dump_with(kTinyLlama, [](json& j) { j["vocab_size"] = 51; }));
        expect_error([&] { inspect_model_dir(other); }, ErrorCategory::InvalidInput,
                     {"'model.embed_tokens.weight'", "[50, 16]", "[51, 16]"});
        // Integer / quantized dtypes.
        const auto ints = make_model(root / "ints", kTinyLlama, {}, DType::I8);
        expect_error([&] { inspect_model_dir(ints); }, ErrorCategory::Unsupported, {"model.safetensors", "I8"});
        // A corrupt weights file is reported with its name.
        const auto corrupt = make_model(root / "corrupt", kTinyLlama);
        test::write_file(corrupt / "model.safetensors", std::string("\x10\x00\x00\x00\x00\x00\x00\x00{\"a\":", 13));
        expect_error([&] { inspect_model_dir(corrupt); }, ErrorCategory::InvalidInput, {"model.safetensors"});
        // Invalid tokenizer_config.json is reported.
        const auto badtok = make_model(root / "badtok", kTinyLlama);
        test::write_file(badtok / "tokenizer_config.json", "{oops");
        expect_error([&] { inspect_model_dir(badtok); }, ErrorCategory::InvalidInput, {"tokenizer_config.json"});
        // MoE folders have their tensors checked (the Hub's per-expert names here).
        const auto moe = make_model(root / "moe", dump_with(kMixtral8x7B, [](json& j) {
                                        j["hidden_size"] = 16;
                                        j["intermediate_size"] = 8;
                                        j["num_hidden_layers"] = 1;
                                        j["num_attention_heads"] = 4;
                                        j["num_key_value_heads"] = 2;
                                        j["vocab_size"] = 10;
                                        j["num_local_experts"] = 2;
                                        j["num_experts_per_tok"] = 1;
                                    }));
        const auto moe_info = inspect_model_dir(moe);
        QVERIFY(moe_info.tensors_checked);
        QVERIFY(!moe_info.config.experts_fused);
        QCOMPARE(moe_info.parameter_count, moe_info.config.parameter_count());
    }

    void inspectShardedFolder() {
        QTemporaryDir tmp;
        const fs::path d = fs::path(tmp.path().toStdString()) / "sharded";
        make_model(d, kTinyLlama);
        // Split model.safetensors into two shards plus an index.
        json weight_map;
        {
            const SafetensorsFile whole(d / "model.safetensors");
            std::vector<TensorToWrite> a, b;
            for (const auto& t : whole.tensors()) {
                const bool first = t.name.find("layers.1.") == std::string::npos;
                (first ? a : b).push_back({t.name, t.dtype, t.shape, t.data});
                weight_map[t.name] = first ? "model-00001-of-00002.safetensors" : "model-00002-of-00002.safetensors";
            }
            write_safetensors(d / "model-00001-of-00002.safetensors", a);
            write_safetensors(d / "model-00002-of-00002.safetensors", b);
        }
        fs::remove(d / "model.safetensors");
        const json index = {{"metadata", {{"total_size", 0}}}, {"weight_map", weight_map}};
        test::write_file(d / "model.safetensors.index.json", index.dump());
        const auto info = inspect_model_dir(d);
        QVERIFY(info.tensors_checked);
        QCOMPARE(info.weight_files.size(), size_t(2));
        QCOMPARE(info.index_file.filename().string(), std::string("model.safetensors.index.json"));
        QCOMPARE(info.parameter_count, info.config.parameter_count());

        // Index pointing at a missing shard.
        fs::remove(d / "model-00002-of-00002.safetensors");
        expect_error([&] { inspect_model_dir(d); }, ErrorCategory::InvalidInput,
                     {"model.safetensors.index.json", "model-00002-of-00002.safetensors", "not found"});
    }

    void refusedFolders() {
        QTemporaryDir tmp;
        const fs::path root = tmp.path().toStdString();
        expect_error([&] { inspect_model_dir(root / "does-not-exist"); }, ErrorCategory::InvalidInput,
                     {"does-not-exist", "not found"});
        fs::create_directories(root / "empty");
        expect_error([&] { inspect_model_dir(root / "empty"); }, ErrorCategory::InvalidInput,
                     {"empty", "no config.json"});
        test::write_file(root / "afile", "x");
        expect_error([&] { inspect_model_dir(root / "afile"); }, ErrorCategory::InvalidInput,
                     {"afile", "model folder"});

        // Pickle only: refused, with why and how to convert.
        test::write_file(root / "pickle" / "config.json", kTinyLlama);
        test::write_file(root / "pickle" / "pytorch_model.bin", "PK\x03\x04 not really");
        expect_error([&] { inspect_model_dir(root / "pickle"); }, ErrorCategory::Unsupported,
                     {"pickle", "pytorch_model.bin", "runs", "save_pretrained", "safe_serialization=True"});
        for (const char* name : {"model.pt", "weights.pth", "model.ckpt"}) {
            const auto d = root / (std::string("p-") + name);
            test::write_file(d / "config.json", kTinyLlama);
            test::write_file(d / name, "x");
            expect_error([&] { inspect_model_dir(d); }, ErrorCategory::Unsupported, {name, "pickle"});
        }
        // Pickle beside safetensors: the safetensors are used, the pickle ignored.
        const auto both = make_model(root / "both", kTinyLlama);
        test::write_file(both / "pytorch_model.bin", "x");
        const auto info = inspect_model_dir(both);
        QVERIFY(info.tensors_checked);
        QVERIFY(!info.notes.empty());

        // Config but no weights at all.
        test::write_file(root / "noweights" / "config.json", kTinyLlama);
        expect_error([&] { inspect_model_dir(root / "noweights"); }, ErrorCategory::InvalidInput,
                     {"noweights", "no weights"});
        // Unsupported architecture in a folder.
        test::write_file(root / "bert" / "config.json",
                         R"({"architectures": ["BertForMaskedLM"], "model_type": "bert"})");
        expect_error([&] { inspect_model_dir(root / "bert"); }, ErrorCategory::Unsupported,
                     {"config.json", "BertForMaskedLM"});
        // Invalid config in a folder.
        test::write_file(root / "absurd" / "config.json",
                         R"({"architectures": ["LlamaForCausalLM"], "hidden_size": -5})");
        expect_error([&] { inspect_model_dir(root / "absurd"); }, ErrorCategory::InvalidInput,
                     {"config.json", "hidden_size"});
    }

    // Folders written by transformers 5.17 save_pretrained (tests/fixtures/models, made by
    // tests/reference/make_fixtures.py): rope settings live only in "rope_parameters".
    void transformers5_model_folders() {
        struct Want {
            const char* variant;
            const char* arch;
            double theta;
            RopeScalingType scaling;
            int64_t head_dim;
            bool tied, bias, qk_norm;
        };
        const Want wants[] = {
            {"llama", "LlamaForCausalLM", 500000.0, RopeScalingType::Llama3, 16, false, false, false},
            {"qwen2", "Qwen2ForCausalLM", 10000.0, RopeScalingType::None, 16, true, true, false},
            {"qwen3", "Qwen3ForCausalLM", 1000000.0, RopeScalingType::None, 32, false, false, true},
            {"mistral", "MistralForCausalLM", 10000.0, RopeScalingType::None, 16, false, false, false},
        };
        for (const auto& w : wants) {
            const auto dir = tandem::test::fixtures() / "models" / w.variant;
            if (!std::filesystem::exists(dir)) QSKIP("tests/fixtures/models not present");
            const ModelInfo info = inspect_model_dir(dir);
            const ModelConfig& c = info.config;
            QVERIFY2(info.tensors_checked, w.variant);
            QCOMPARE(c.architecture, std::string(w.arch));
            QCOMPARE(c.rope_theta, w.theta);
            QVERIFY2(c.rope_scaling.type == w.scaling, w.variant);
            QCOMPARE(c.head_dim, w.head_dim);
            QCOMPARE(c.tie_word_embeddings, w.tied);
            QCOMPARE(c.attention_bias, w.bias);
            QCOMPARE(c.qk_norm, w.qk_norm);
            QCOMPARE(info.parameter_count, c.parameter_count());
            if (w.scaling == RopeScalingType::Llama3) {
                QCOMPARE(c.rope_scaling.factor, 8.0);
                QCOMPARE(c.rope_scaling.original_max_position_embeddings, int64_t(8192));
            }
        }
    }
};

QTEST_GUILESS_MAIN(TestModelConfig)
#include "test_model_config.moc"
