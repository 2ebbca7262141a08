// SPDX-FileCopyrightText: 2026 The Tandem developers
// SPDX-License-Identifier: GPL-3.0-or-later
// The self-test's whole training steps: CudaModel against CpuModel on small generated models (one
// StepReference per variant: model folder, batch and CPU results, made once and shared by its cases), then the
// runtime paths that must match a plain step bit for bit (checkpointing policies, the asynchronous step, CUDA
// graphs) and the trainer's host syncs per step. add_step_cases lists them. Only with TANDEM_WITH_CUDA.
#include "testing/harness.h"

#if TANDEM_WITH_CUDA
#include <unistd.h>

#include <algorithm>
#include <array>
#include <atomic>
#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <exception>
#include <filesystem>
#include <functional>
#include <map>
#include <memory>
#include <span>
#include <string>
#include <utility>
#include <vector>

#include <nlohmann/json.hpp>

#include "core/cuda/context.h"
#include "core/files.h"
#include "io/atomic_file.h"
#include "kernels/cpu/adamw.h"
#include "kernels/cpu/cross_entropy.h"
#include "model/cuda_model.h"
#include "model/model.h"
#include "model/plan.h"
#include "tandem/demo_model.h"
#include "tandem/model_config.h"
#include "tandem/safetensors.h"
#include "tandem/trainer.h"
#include "train/backends.h"
#include "train/cuda_communicators.h"
#include "train/data_parallel.h"

namespace tandem::testing {
namespace {

namespace fs = std::filesystem;

// ---------------------------------------------------------------------------------------------------------
// Whole training step: CudaModel against CpuModel on generated models
// ---------------------------------------------------------------------------------------------------------

struct StepVariant {
    std::string name;       // in the case names
    nlohmann::json config;  // config.json
    LoraConfig lora;
    std::vector<int> lengths;  // samples of the packed batch
    int token_budget = 0;      // >= sum of lengths: the rest is padding
    bool fp8 = false;          // precision fp8 on both sides (the CPU emulates it)
    bool nf4 = false;          // 4-bit base weights quantized at load on both sides (QLoRA)
    // The step tolerances' factor: 1, or more for FP8, where the GPU quantizes bf16 activations and the CPU fp32
    // ones, so about one element in 64 lands one E4M3 step (1/8 relative) apart: ~1-2% on each GEMM output, and
    // on these small models (K = 128 .. 352) 7% on the logits and up to 14% on a LoRA gradient after two layers
    // forward and back (measured on an H100; FP8 itself moves these gradients 5-14% from fp32: test_fp8).
    double tol = 1.0;
    // The optimizer update is compared where the gradient is at least this share of its tensor's largest (the
    // sign of AdamW's first step is then certain on both sides).
    double update_min_share = 0.05;
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
        const bool sinks = t.name.ends_with(".sinks");  // gpt-oss: logits that take a visible share of each row
        const float bound = sinks ? 2.0f : bias ? 0.1f : (qk || table) ? fan_in_bound(in) : 0.5f * fan_in_bound(in);
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

// Mixture of experts (Qwen3-MoE): layers 0 and 2 route over 8 experts (top 2, renormalised), layer 1 keeps a
// dense MLP (mlp_only_layers); LoRA on the attention and on both expert parameters (no dropout: PEFT's LoRA on
// experts has none). The CPU's routing is injected into the CUDA step (CudaModel::inject_routing).
StepVariant qwen3_moe_variant() {
    StepVariant v;
    v.name = "qwen3-moe";
    v.config = {{"architectures", {"Qwen3MoeForCausalLM"}},
                {"model_type", "qwen3_moe"},
                {"hidden_size", 128},
                {"intermediate_size", 200},
                {"moe_intermediate_size", 96},
                {"num_experts", 8},
                {"num_experts_per_tok", 2},
                {"norm_topk_prob", true},
                {"decoder_sparse_step", 1},
                {"mlp_only_layers", {1}},
                {"num_hidden_layers", 3},
                {"num_attention_heads", 4},
                {"num_key_value_heads", 2},
                {"head_dim", 32},
                {"vocab_size", 301},
                {"max_position_embeddings", 512},
                {"rms_norm_eps", 1e-6},
                {"rope_theta", 1000000.0},
                {"tie_word_embeddings", false},
                {"hidden_act", "silu"},
                {"torch_dtype", "bfloat16"}};
    v.lora.r = 16;
    v.lora.alpha = 16;
    v.lengths = {1, 17, 64, 130};
    v.token_budget = 224;
    return v;
}

// Mixtral: every layer routes over 4 experts (top 2, always renormalised), the Hub's per-expert names.
StepVariant mixtral_variant() {
    StepVariant v;
    v.name = "mixtral";
    v.config = {{"architectures", {"MixtralForCausalLM"}},
                {"model_type", "mixtral"},
                {"hidden_size", 128},
                {"intermediate_size", 160},
                {"num_local_experts", 4},
                {"num_experts_per_tok", 2},
                {"num_hidden_layers", 2},
                {"num_attention_heads", 4},
                {"num_key_value_heads", 1},
                {"head_dim", 32},
                {"vocab_size", 301},
                {"max_position_embeddings", 512},
                {"rms_norm_eps", 1e-5},
                {"rope_theta", 1000000.0},
                {"tie_word_embeddings", false},
                {"hidden_act", "silu"},
                {"torch_dtype", "bfloat16"}};
    v.lora.r = 8;
    v.lora.alpha = 16;
    v.lengths = {130, 1, 64, 17, 1};
    v.token_budget = 220;
    return v;
}

// gpt-oss: sinks, biased attention / router / experts, [E, in, out] interleaved experts with the clamped
// SwiGLU, layer 0 sliding over 32 tokens (the 130- and 64-token samples are cut), YaRN RoPE.
StepVariant gpt_oss_variant() {
    StepVariant v = mixtral_variant();  // its shapes, lengths and LoRA; gpt-oss's own fields on top
    v.name = "gpt-oss";
    v.config["architectures"] = {"GptOssForCausalLM"};
    v.config["model_type"] = "gpt_oss";
    v.config["head_dim"] = 64;
    v.config["rope_theta"] = 150000.0;
    v.config["rope_scaling"] = {{"rope_type", "yarn"}, {"factor", 4.0}, {"beta_fast", 32.0}, {"beta_slow", 1.0},
                                {"original_max_position_embeddings", 128}, {"truncate", false}};
    v.config["sliding_window"] = 32;
    v.config["layer_types"] = {"sliding_attention", "full_attention"};
    v.config["attention_bias"] = true;
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
    std::vector<std::vector<int32_t>> routing;          // MoE: the CPU's choice of experts per layer (injected)

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

    CpuModel m = CpuModel::load(dir, variant.lora, kLoraInitSeed, variant.token_budget, CheckpointPolicy::Off,
                                variant.nf4, variant.fp8);
    m.set_lora(lora);
    logits = m.logits(batch);
    eval_loss = m.forward_loss(batch);
    m.zero_grads();
    train_loss = m.forward_backward(batch, 1.0f / float(batch.num_label_tokens), kDropoutSeed);
    for (const auto& p : m.lora_params()) grads[p.spec.name] = p.grad;
    if (cfg.num_experts > 0) routing = m.moe_routing();

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

void step_case(Check& c, StepReference& ref, CheckpointPolicy ckpt, AttentionBackend attn, bool moe_loop = false) {
    ref.prepare(c.base_seed());
    const PackedBatch& batch = ref.batch;
    const double k = ref.variant.tol;
    CudaModelOptions opt;
    opt.fp8 = ref.variant.fp8;
    opt.quantize_4bit = ref.variant.nf4;
    opt.moe_routing_loop = moe_loop;
    opt.max_tokens = ref.variant.token_budget;
    opt.max_seqlen = batch.max_seqlen;
    opt.checkpointing = ckpt;
    opt.attention = attn;
    CudaModel g = CudaModel::load(ref.dir, ref.variant.lora, kLoraInitSeed, opt);
    g.set_lora(ref.lora);
    g.inject_routing(ref.routing);

    c.tensor("logits", g.logits(batch), ref.logits, k * kTolStep);
    c.scalar("eval loss", g.forward_loss(batch), ref.eval_loss, k * kTolStep);
    g.zero_grads();
    const double loss = g.forward_backward(batch, 1.0f / float(batch.num_label_tokens), kDropoutSeed);
    c.scalar("train loss (" + g.attention_backend_name() + ")", loss, ref.train_loss, k * kTolStep);

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
    c.result("lora grads (max element)", worst, k * kTolStepGradMax,
             std::to_string(compared) + " tensors, worst " + worst_name + (problems.empty() ? "" : ";" + problems));
    c.result("lora grads (L2)", worst_l2, k * kTolStepGradL2, "||gpu - cpu|| / ||cpu|| per tensor, worst " + worst_l2_name);

    // One optimizer step (clip active). Only elements whose gradient is at least 5% of the tensor's largest
    // are compared (relative to the step size lr): there the sign, hence the AdamW step-1 update, is certain.
    const double got_norm = g.optimizer_step(kOptLr, kOptB1, kOptB2, kOptEps, kOptWd, ref.max_norm, 1);
    c.scalar("optimizer grad norm", got_norm, ref.norm, k * kTolStep);
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
            if (std::fabs(git->second[i]) >= float(ref.variant.update_min_share) * gmax)
                err = std::max(err, std::isfinite(p.value[i]) ? std::fabs(double(p.value[i]) - sit->second[i]) : kInf);
        if (!(err / kOptLr <= worst_step)) {
            worst_step = err / kOptLr;
            worst_step_name = p.spec.name;
        }
    }
    c.result("optimizer update", worst_step, k * kTolStep, "max |gpu - cpu| / lr, worst " + worst_step_name);
}

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
        opt.fp8 = ref.variant.fp8;
        opt.quantize_4bit = ref.variant.nf4;
    opt.quantize_4bit = ref.variant.nf4;
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

// CUDA graphs: the trainer's asynchronous step with cuda_graphs on must be the same step
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
        opt.fp8 = ref.variant.fp8;
        opt.quantize_4bit = ref.variant.nf4;
    opt.quantize_4bit = ref.variant.nf4;
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
    const bool eager_clean =
        want.stats.captures == 0 && want.stats.replays == 0 && want.stats.eager == int64_t(2 * plan.size());
    c.result("cuda_graphs=false captures nothing", eager_clean ? 0.0 : kInf, 0.0,
             std::to_string(want.stats.eager) + " eager, " + std::to_string(want.stats.captures) + " captured");
    const size_t steps = plan.size();
    if (got.loss.size() != steps || want.loss.size() != steps) {
        c.result("steps collected", kInf, 0.0,
                 std::to_string(got.loss.size()) + " vs " + std::to_string(want.loss.size()));
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
                    fmt("%.17g", want.loss[s]) + ", norm " + fmt("%.9g", got.norm[s]) + " vs " +
                    fmt("%.9g", want.norm[s]);
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
        for (int layers : {2, 28, -28}) {  // -28: 28 mixture-of-experts layers (Qwen3-MoE, 8 experts, top 2)
            const bool moe = layers < 0;
            layers = std::abs(layers);
            DemoModelSpec spec;  // head_dim 64, as real models have
            spec.hidden_size = 128;
            spec.intermediate_size = 256;
            spec.num_attention_heads = 2;
            spec.num_key_value_heads = 1;
            spec.num_hidden_layers = layers;
            const fs::path model = root / ((moe ? "moe-" : "demo-") + std::to_string(layers));
            if (!fs::exists(model / "config.json")) {
                create_demo_model(model, spec);
                if (moe) {  // the demo's tokenizer, an MoE config and weights
                    nlohmann::json j = read_json_file(model / "config.json");
                    j["architectures"] = {"Qwen3MoeForCausalLM"};
                    j["model_type"] = "qwen3_moe";
                    j["num_experts"] = 8;
                    j["num_experts_per_tok"] = 2;
                    j["moe_intermediate_size"] = 64;
                    j["norm_topk_prob"] = true;
                    write_model(model, j, c.base_seed());
                }
            }
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
            rc.output_dir =
                (root / ((moe ? "run-moe-" : "run-") + std::to_string(layers) + "-" + std::to_string(accum))).string();
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
            const std::string label =
                std::to_string(layers) + (moe ? " MoE layers" : " layers") + ", grad_accum " + std::to_string(accum);
            c.result("host syncs per step, " + label, double(most), 2.0, "per step (steps 3-9): " + seen);
            if (moe)
                c.result("same syncs for 28 MoE layers as for 2 dense ones, grad_accum " + std::to_string(accum),
                         std::fabs(double(most) - per_step_of_layers[accum]), 0.0,
                         std::to_string(most) + " vs " + g3(per_step_of_layers[accum]));
            else if (layers == 2)
                per_step_of_layers[accum] = double(most);
            else
                c.result("same syncs for 2 and 28 layers, grad_accum " + std::to_string(accum),
                         std::fabs(double(most) - per_step_of_layers[accum]), 0.0,
                         std::to_string(most) + " vs " + g3(per_step_of_layers[accum]));
        }
    }
    fs::remove_all(root, ec);
}

// Off, Recompute, Smart, SmartSingle and Selective run the same kernels on the same values (Smart* only move
// the block inputs between device and pinned host memory; the recomputing policies produce dropped buffers
// again with the same calls), so with the deterministic in-house
// attention the loss and every LoRA gradient must be equal BIT FOR BIT to Off's. Two steps per policy
// (zero_grads between), so events and buffers reused across steps are covered too.
void checkpointing_agree_case(Check& c, StepReference& ref) {
    ref.prepare(c.base_seed());
    const PackedBatch& batch = ref.batch;
    struct Result {
        double loss = 0;
        std::vector<std::pair<std::string, std::vector<float>>> grads;
    };
    auto run = [&](CheckpointPolicy policy, int mlp_kept_layers = 0, bool fp8_transposed = false,
                   int mlp_offloaded_layers = 0) {
        CudaModelOptions opt;
        opt.fp8 = ref.variant.fp8;
        opt.quantize_4bit = ref.variant.nf4;
        opt.mlp_kept_layers = mlp_kept_layers;
        opt.mlp_offloaded_layers = mlp_offloaded_layers;
        opt.fp8_transposed = fp8_transposed;
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
    for (auto policy : {CheckpointPolicy::Recompute, CheckpointPolicy::Smart, CheckpointPolicy::SmartSingle,
                        CheckpointPolicy::Selective}) {
        const std::vector<Result> got = run(policy);
        for (size_t k = 0; k < got.size(); ++k) compare(policy_name(policy) + " step " + std::to_string(k + 1), got[k]);
    }
    // FP8: the weights' transposes made once at load instead of before every input-gradient GEMM.
    if (ref.variant.fp8)
        for (auto policy : {CheckpointPolicy::Off, CheckpointPolicy::Recompute}) {
            const std::vector<Result> got = run(policy, 0, true);
            for (size_t k = 0; k < got.size(); ++k)
                compare(policy_name(policy) + " with resident transposes step " + std::to_string(k + 1), got[k]);
        }
    // Layers 0..K-1 keeping the MLP buffers the policy drops (the trainer's selective with memory to spare).
    const ModelConfig cfg = load_model_config(ref.dir);
    if (cfg.num_experts == 0) {
        const int L = int(cfg.num_hidden_layers);
        for (const auto& [policy, kept] : {std::pair{CheckpointPolicy::Selective, 1}, std::pair{CheckpointPolicy::Selective, L},
                                           std::pair{CheckpointPolicy::Smart, 1}}) {
            const std::vector<Result> got = run(policy, kept);
            for (size_t k = 0; k < got.size(); ++k)
                compare(policy_name(policy) + " with " + std::to_string(kept) + " layers keeping their MLP buffers step " +
                            std::to_string(k + 1),
                        got[k]);
        }
        // Layers sending their MLP buffers to host memory through two shared slots (with 5 layers: the first two
        // offloaded ones are copied out and back, on the copy stream, inside the captured graph of step 2).
        for (const auto& [policy, kept] : {std::pair{CheckpointPolicy::Selective, 0}, std::pair{CheckpointPolicy::Selective, 1},
                                           std::pair{CheckpointPolicy::Smart, 0}}) {
            const int offloaded = L - 1 - kept;
            const std::vector<Result> got = run(policy, kept, false, offloaded);
            for (size_t k = 0; k < got.size(); ++k)
                compare(policy_name(policy) + " with " + std::to_string(kept) + " layers keeping and " +
                            std::to_string(offloaded) + " offloading their MLP buffers step " + std::to_string(k + 1),
                        got[k]);
        }
    }
}

}  // namespace

// Data parallelism on the device (train/data_parallel.h, train/cuda_communicators.h): N replicas of the same
// model, trained with the trainer's protocol (begin_step, queued micro-batches, queued optimizer step collected a
// step late), against one replica given every micro-batch. Steps of 4, 3, 1 and 4 micro-batches (a step with
// fewer micro-batches than ranks: a rank without one sums zeros at the update). The gradients are summed in
// another order (per rank, then over the ranks), so the losses and the LoRA values agree to rounding, not
// bitwise: losses within 1e-4 relative, LoRA values within 1e-2 of each tensor's largest (bf16 level) after four
// AdamW steps. Also: the replicas' gradient norms agree bit for bit (collect_step throws otherwise), a stop vote
// of rank 0 reaches the step it was cast in, and the host syncs per step are at most those of one replica alone
// per replica.
// transport "peer" (ranks may share a GPU) or "nccl" (distinct GPUs; one rank on a one-GPU machine, which
// must then give the single replica's bits exactly).
void data_parallel_case(Check& c, StepReference& ref, const std::string& transport, const std::vector<int>& devices) {
    ref.prepare(c.base_seed());
    const int V = ref.variant.config.at("vocab_size").get<int>();
    Rng rng(c.base_seed() ^ 0xD7);
    const std::vector<PackedBatch> batches{ref.batch, make_step_batch(rng, {7, 19, 4}, ref.variant.token_budget, V),
                                           make_step_batch(rng, {30}, ref.variant.token_budget, V),
                                           make_step_batch(rng, {12, 12}, ref.variant.token_budget, V)};
    const std::vector<int> counts{4, 3, 1, 4};
    RunConfig cfg;
    cfg.model = ref.dir.string();
    cfg.lora = ref.variant.lora;
    cfg.training.batch_tokens = ref.variant.token_budget;
    cfg.data.max_seq_len = ref.variant.token_budget;
    cfg.memory.checkpointing = CheckpointPolicy::Recompute;
    cfg.memory.attention = AttentionKernels::Inhouse;
    cfg.device = DeviceChoice::Cuda;
    struct Run {
        std::vector<double> loss, norm;
        std::vector<uint64_t> syncs;
        LoraTensors values;
        int stop_step = -1;
    };
    auto train = [&](TrainableModel& m, DataParallelModel* dp) {
        Run r;
        std::atomic<bool> stop{false};
        if (dp) dp->set_stop_request(&stop);
        m.set_lora(ref.lora);
        int queued = 0, collected = 0;
        auto collect = [&] {
            const StepResult x = m.collect_step();
            r.loss.push_back(x.loss_sum);
            r.norm.push_back(x.grad_norm);
            ++collected;
            if (dp && r.stop_step < 0 && dp->stop_agreed().load()) r.stop_step = collected;
        };
        const uint64_t syncs_before = cuda::host_sync_count();
        for (size_t s = 0; s < counts.size(); ++s) {
            if (s == 2) stop.store(true);  // rank 0's vote rides with step 3
            m.begin_step(counts[s]);
            int64_t labels = 0;
            for (int i = 0; i < counts[s]; ++i) labels += batches[(s + size_t(i)) % batches.size()].num_label_tokens;
            for (int i = 0; i < counts[s]; ++i)
                m.queue_forward_backward(batches[(s + size_t(i)) % batches.size()], float(1.0 / double(labels)),
                                         kDropoutSeed + 16 * s + size_t(i));
            m.queue_optimizer_step({.lr = 1e-3, .weight_decay = 0.01, .max_grad_norm = 1.0, .step = int64_t(s) + 1});
            ++queued;
            if (queued - collected == 2) collect();
        }
        while (collected < queued) collect();
        r.syncs.push_back(cuda::host_sync_count() - syncs_before);
        if (dp) dp->set_stop_request(nullptr);
        r.values = m.lora_tensors();
        return r;
    };
    const Run want = train(*train::load_cuda_model(cfg, std::nullopt), nullptr);
    std::unique_ptr<Communicator> comm;
    if (transport == "nccl")
        comm = std::make_unique<cuda::NcclCommunicator>(devices);
    else
        comm = std::make_unique<cuda::PeerCommunicator>(devices);
    DataParallelModel dp(
        [&](int r) {
            cuda::set_thread_device(devices[size_t(r)]);
            return train::load_cuda_model(cfg, std::nullopt);
        },
        std::move(comm));
    const Run got = train(dp, &dp);
    const bool exact = devices.size() == 1;
    double worst_loss = 0;
    for (size_t s = 0; s < counts.size(); ++s)
        worst_loss = std::max(worst_loss, std::abs(got.loss[s] - want.loss[s]) / std::max(1e-30, std::abs(want.loss[s])));
    c.result(std::to_string(devices.size()) + " ranks: step losses", worst_loss, exact ? 0.0 : 1e-4,
             "worst relative difference over " + std::to_string(counts.size()) + " steps (" + fmt("%.9g", got.loss[0]) +
                 " vs " + fmt("%.9g", want.loss[0]) + " at step 1)");
    double worst_value = 0;
    for (const auto& [name, w] : want.values) {
        const std::vector<float>& g = got.values.at(name);
        double big = 0, diff = 0;
        for (size_t i = 0; i < w.size(); ++i) {
            big = std::max(big, double(std::abs(w[i])));
            diff = std::max(diff, double(std::abs(g[i] - w[i])));
        }
        worst_value = std::max(worst_value, diff / std::max(big, 1e-30));
    }
    c.result(std::to_string(devices.size()) + " ranks: LoRA values after " + std::to_string(counts.size()) + " steps",
             worst_value, exact ? 0.0 : 1e-2, "worst difference relative to the tensor's largest value");
    c.result("stop vote of rank 0 agreed at the step it was cast in", got.stop_step == 3 ? 0.0 : 1.0, 0.0,
             "stop_agreed first true after collecting step " + std::to_string(got.stop_step) + " (want 3)");
    // One replica alone waits once per step for the step's values, and when more micro-batches are in flight than
    // it has pinned metadata slots, for the oldest slot; N replicas: at most N times that, however many layers.
    const double per_step = double(got.syncs[0]) / double(counts.size()),
                 alone = double(want.syncs[0]) / double(counts.size());
    c.result("host syncs per optimizer step", per_step, double(devices.size()) * alone,
             fmt("%.2f", per_step) + " over " + std::to_string(counts.size()) + " steps (one replica alone: " +
                 fmt("%.2f", alone) + "; allowed: that per replica)");
}

void add_step_cases(std::vector<Case>& cs) {
    auto add = [&](std::string name, std::function<void(Check&)> fn) {
        cs.push_back({std::move(name), std::move(fn)});
    };

    for (auto variant : {qwen3_variant(), llama_variant()}) {
        auto ref = std::make_shared<StepReference>(variant);
        for (auto ckpt : {CheckpointPolicy::Off, CheckpointPolicy::Recompute, CheckpointPolicy::Smart,
                          CheckpointPolicy::SmartSingle, CheckpointPolicy::Selective})
            for (auto at : {AttentionBackend::Inhouse, AttentionBackend::Auto})
                add("step " + variant.name + " checkpointing=" + policy_name(ckpt) + " attention=" + attention_name(at),
                    [=](Check& c) { step_case(c, *ref, ckpt, at); });
        if (variant.name == "qwen3")
            add("checkpointing policies agree " + variant.name, [=](Check& c) { checkpointing_agree_case(c, *ref); });
    }
    {
        // The MLP in chunks (long sequences, plan.h kMlpChunkRows): chunks of 16 rows on CUDA against the CPU
        // reference's whole MLP (no dropout: chunking needs none).
        StepVariant v = qwen3_variant();
        v.name = "qwen3-nodropout";
        v.lora.dropout = 0;
        auto ref = std::make_shared<StepReference>(v);
        for (auto p : {CheckpointPolicy::Recompute, CheckpointPolicy::Smart, CheckpointPolicy::Selective})
            add("step " + v.name + " mlp-chunks=16 checkpointing=" + policy_name(p), [=](Check& c) {
                struct Rows {
                    Rows() { set_mlp_chunk_rows(16); }
                    ~Rows() { set_mlp_chunk_rows(kMlpChunkRows); }
                } rows;
                step_case(c, *ref, p, AttentionBackend::Inhouse);
            });
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
                       CheckpointPolicy::SmartSingle, CheckpointPolicy::Selective})
            add_graphs(ref, p, AttentionBackend::Inhouse);
        for (auto p : {CheckpointPolicy::Off, CheckpointPolicy::Smart}) add_graphs(ref0, p, AttentionBackend::Inhouse);
        add_graphs(ref, CheckpointPolicy::Smart, AttentionBackend::Auto);
    }
    {
        // The load-balancing loss (output_router_logits): the loss term and its gradient through every router.
        StepVariant v = qwen3_moe_variant();
        v.name = "qwen3-moe-aux";
        v.config["output_router_logits"] = true;
        v.config["router_aux_loss_coef"] = 0.05;
        auto ref = std::make_shared<StepReference>(v);
        for (auto ckpt : {CheckpointPolicy::Off, CheckpointPolicy::Recompute, CheckpointPolicy::Smart})
            add("step " + v.name + " checkpointing=" + policy_name(ckpt) + " attention=inhouse",
                [=](Check& c) { step_case(c, *ref, ckpt, AttentionBackend::Inhouse); });
        add("async step matches blocking step " + v.name + " checkpointing=recompute",
            [=](Check& c) { async_step_case(c, *ref, CheckpointPolicy::Recompute); });
        add("cuda graphs match eager " + v.name + " checkpointing=recompute attention=inhouse",
            [=](Check& c) { cuda_graphs_case(c, *ref, CheckpointPolicy::Recompute, AttentionBackend::Inhouse); });
    }
    // A weight format's variant (FP8, NF4): three policies against the CPU, the policies agree, graphs = eager.
    auto add_format_cases = [&](const StepVariant& v) {
        auto ref = std::make_shared<StepReference>(v);
        for (auto ckpt : {CheckpointPolicy::Off, CheckpointPolicy::Recompute, CheckpointPolicy::Smart})
            add("step " + v.name + " checkpointing=" + policy_name(ckpt) + " attention=inhouse",
                [=](Check& c) { step_case(c, *ref, ckpt, AttentionBackend::Inhouse); });
        add("checkpointing policies agree " + v.name, [=](Check& c) { checkpointing_agree_case(c, *ref); });
        add("cuda graphs match eager " + v.name + " checkpointing=recompute attention=inhouse",
            [=](Check& c) { cuda_graphs_case(c, *ref, CheckpointPolicy::Recompute, AttentionBackend::Inhouse); });
    };
    {
        // QLoRA on experts: every projection and both expert parameters quantized to NF4 at load (CPU and CUDA
        // quantize alike), the experts dequantized one parameter at a time before their grouped GEMMs.
        StepVariant v = mixtral_variant();
        v.name = "mixtral-nf4";
        v.nf4 = true;
        add_format_cases(v);
    }
    for (auto variant : {qwen3_moe_variant(), mixtral_variant(), gpt_oss_variant()}) {
        // Mixture of experts: the CPU's routing injected; every policy; the loop-over-experts ablation gives the
        // same step; graphs capture the MoE layers (no host sync inside them) and replay them bit for bit.
        auto ref = std::make_shared<StepReference>(variant);
        for (auto ckpt : {CheckpointPolicy::Off, CheckpointPolicy::Recompute, CheckpointPolicy::Smart,
                          CheckpointPolicy::SmartSingle, CheckpointPolicy::Selective})
            for (auto at : {AttentionBackend::Inhouse, AttentionBackend::Auto})
                add("step " + variant.name + " checkpointing=" + policy_name(ckpt) + " attention=" + attention_name(at),
                    [=](Check& c) { step_case(c, *ref, ckpt, at); });
        add("step " + variant.name + " moe-routing=loop checkpointing=recompute",
            [=](Check& c) { step_case(c, *ref, CheckpointPolicy::Recompute, AttentionBackend::Inhouse, true); });
        add("checkpointing policies agree " + variant.name, [=](Check& c) { checkpointing_agree_case(c, *ref); });
        add("async step matches blocking step " + variant.name + " checkpointing=smart",
            [=](Check& c) { async_step_case(c, *ref, CheckpointPolicy::Smart); });
        for (auto p : {CheckpointPolicy::Off, CheckpointPolicy::Recompute, CheckpointPolicy::Smart})
            add("cuda graphs match eager " + variant.name + " checkpointing=" + policy_name(p) + " attention=inhouse",
                [=](Check& c) { cuda_graphs_case(c, *ref, p, AttentionBackend::Inhouse); });
    }
    {
        // FP8 base GEMMs (precision fp8) against the CPU's emulation; graphs replay them bit for bit and every
        // policy gives the same bits (the same kernels on the same values).
        StepVariant v = qwen3_variant();
        v.name = "qwen3-fp8";
        v.fp8 = true;
        v.tol = 8.0;
        v.update_min_share = 0.5;
        add_format_cases(v);
        StepVariant w = llama_variant();
        w.name = "llama-fp8";
        w.fp8 = true;
        w.tol = 8.0;
        w.update_min_share = 0.5;
        auto wref = std::make_shared<StepReference>(w);
        add("step " + w.name + " checkpointing=recompute attention=auto",
            [=](Check& c) { step_case(c, *wref, CheckpointPolicy::Recompute, AttentionBackend::Auto); });
    }
    add("host syncs per optimizer step (trainer)", [](Check& c) { host_syncs_case(c); });
    {
        // Data parallelism on the device: two replicas sharing GPU 0 over the peer transport (what one GPU can
        // check), NCCL with one rank when libnccl is there; with two GPUs, both transports across GPUs 0 and 1.
        StepVariant v = qwen3_variant();
        v.name = "qwen3-5layers";
        v.config["num_hidden_layers"] = 5;
        auto ref = std::make_shared<StepReference>(v);
        add("data parallel peer devices=0,0 " + v.name, [=](Check& c) { data_parallel_case(c, *ref, "peer", {0, 0}); });
        if (cuda::load_nccl(nullptr))
            add("data parallel nccl devices=0 " + v.name, [=](Check& c) { data_parallel_case(c, *ref, "nccl", {0}); });
        if (cuda::device_count() >= 2) {
            add("data parallel peer devices=0,1 " + v.name, [=](Check& c) { data_parallel_case(c, *ref, "peer", {0, 1}); });
            if (cuda::load_nccl(nullptr))
                add("data parallel nccl devices=0,1 " + v.name,
                    [=](Check& c) { data_parallel_case(c, *ref, "nccl", {0, 1}); });
        }
    }
}

}  // namespace tandem::testing
#endif  // TANDEM_WITH_CUDA
