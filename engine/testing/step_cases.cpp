// SPDX-FileCopyrightText: 2026 The Tandem developers
// SPDX-License-Identifier: GPL-3.0-or-later
// The self-test's whole training steps: CudaModel against CpuModel on small generated models (one
// StepReference per variant: model folder, batch and CPU results, made once and shared by its cases; the types
// in step_support.h), and add_step_cases, which lists every step case: these, then the runtime paths that must
// match a plain step bit for bit (checkpointing policies, the asynchronous step, CUDA graphs), the trainer's host
// syncs per step and data parallelism, whose bodies are in step_check_cases.cpp. Only with TANDEM_WITH_CUDA.
// Decisions a reader must know:
//  - The case order is add_step_cases' alone (grouped by variant, so a variant's reference is built once), not
//    the order of the bodies in the two files.
#include "testing/step_support.h"

#if TANDEM_WITH_CUDA
#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <exception>
#include <filesystem>
#include <functional>
#include <memory>
#include <span>
#include <string>
#include <utility>
#include <vector>

#include <nlohmann/json.hpp>

#include "core/cuda/context.h"
#include "io/atomic_file.h"
#include "kernels/cpu/adamw.h"
#include "kernels/cpu/cross_entropy.h"
#include "model/cuda_model.h"
#include "model/model.h"
#include "model/plan.h"
#include "tandem/model_config.h"
#include "tandem/safetensors.h"
#include "train/cuda_communicators.h"

namespace tandem::testing {

// ---------------------------------------------------------------------------------------------------------
// Whole training step: CudaModel against CpuModel on generated models
// ---------------------------------------------------------------------------------------------------------

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

namespace {

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

constexpr double kOptLr = 1e-3, kOptB1 = 0.9, kOptB2 = 0.999, kOptEps = 1e-8, kOptWd = 0.1;

}  // namespace

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

namespace {

void step_case(Check& c, StepReference& ref, CheckpointPolicy ckpt, AttentionBackend attn, bool moe_loop = false) {
    ref.prepare(c.base_seed());
    const PackedBatch& batch = ref.batch;
    const double k = ref.variant.tol;
    CudaModelOptions opt = ref.options(batch.max_seqlen, ckpt, attn);
    opt.moe_routing_loop = moe_loop;
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

// A step with the planner's chunk rows set to `rows` (0: never chunk) for its duration.
void chunked_step_case(Check& c, StepReference& ref, CheckpointPolicy p, AttentionBackend at, int rows) {
    struct Rows {
        explicit Rows(int r) { set_mlp_chunk_rows(r); }
        ~Rows() { set_mlp_chunk_rows(kMlpChunkRows); }
    } chunk(rows);
    step_case(c, ref, p, at);
}

}  // namespace

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
        // reference's whole MLP (no dropout: chunking needs none). 224 rows are 14 chunks: under recompute and smart
        // the whole block but attention runs in them too (kBlockChunkMinChunks); selective chunks the MLP only.
        StepVariant v = qwen3_variant();
        v.name = "qwen3-nodropout";
        v.lora.dropout = 0;
        auto ref = std::make_shared<StepReference>(v);
        for (auto p : {CheckpointPolicy::Recompute, CheckpointPolicy::Smart, CheckpointPolicy::Selective})
            add("step " + v.name + " mlp-chunks=16 checkpointing=" + policy_name(p),
                [=](Check& c) { chunked_step_case(c, *ref, p, AttentionBackend::Inhouse, 16); });
    }
    {
        // Long context (issue "Long context"): one 4,096-token sample of the Llama variant (no dropout), the block
        // in chunks of 512 rows (ln1 / q / k / v, then o_proj / mid / ln2 / MLP / residual chunk by chunk around
        // whole-sequence attention; more than plan.h kBlockChunkMinChunks chunks) and unchunked, both against the
        // CPU reference's unchunked fp32 step.
        StepVariant v = llama_variant();
        v.name = "llama-4k";
        v.config["max_position_embeddings"] = 4096;
        v.lora.dropout = 0;
        v.lengths = {4096};
        v.token_budget = 4096;
        auto ref = std::make_shared<StepReference>(v);
        for (int rows : {512, 0})
            for (auto p : {CheckpointPolicy::Recompute, CheckpointPolicy::Smart})
                add("step " + v.name + " block-chunks=" + (rows ? std::to_string(rows) : std::string("off")) +
                        " checkpointing=" + policy_name(p) + " attention=auto",
                    [=](Check& c) { chunked_step_case(c, *ref, p, AttentionBackend::Auto, rows); });
    }
    {
        // The chunked block with block inputs through the host: five layers (smart offloads three, smart-single
        // four, asynchronously), chunks of 16 rows and unchunked, both against the CPU's unchunked step (five
        // layers of bf16 rounding: the unchunked step shows the error chunking adds to).
        StepVariant v = qwen3_variant();
        v.name = "qwen3-5layers-nodropout";
        v.config["num_hidden_layers"] = 5;
        v.lora.dropout = 0;
        v.tol = 1.25;  // 2026-11-29, H200: LoRA grads' L2 0.0218 chunked and unchunked alike (two layers: 0.017)
        auto ref = std::make_shared<StepReference>(v);
        for (int rows : {16, 0})
            for (auto p : {CheckpointPolicy::Smart, CheckpointPolicy::SmartSingle})
                add("step " + v.name + " block-chunks=" + (rows ? std::to_string(rows) : std::string("off")) +
                        " checkpointing=" + policy_name(p),
                    [=](Check& c) { chunked_step_case(c, *ref, p, AttentionBackend::Inhouse, rows); });
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
    {
        // Wide enough projections (>= 256) and enough rows per expert (512 on average) for the batched cuBLASLt
        // paths inside a whole step (kernels/cuda/expert_gemm.h: the base projections in 128-row chunks, the LoRA
        // A products at every level; the grouped kernel on each expert's last rows), with the router's own uneven
        // counts; the widening kernel for LoRA B (expert_widen.h). The op cases test those paths alone.
        StepVariant v = qwen3_moe_variant();
        v.name = "qwen3-moe-wide";
        v.config["hidden_size"] = 256;
        v.config["moe_intermediate_size"] = 256;
        v.config["num_experts"] = 4;
        v.lengths = {1, 300, 450, 273};
        v.token_budget = 1024;
        auto ref = std::make_shared<StepReference>(v);
        for (auto ckpt : {CheckpointPolicy::Off, CheckpointPolicy::Recompute})
            add("step " + v.name + " checkpointing=" + policy_name(ckpt) + " attention=inhouse",
                [=](Check& c) { step_case(c, *ref, ckpt, AttentionBackend::Inhouse); });
        add("cuda graphs match eager " + v.name + " checkpointing=recompute attention=inhouse",
            [=](Check& c) { cuda_graphs_case(c, *ref, CheckpointPolicy::Recompute, AttentionBackend::Inhouse); });
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
        // The chunked block with FP8 GEMMs: chunks of 48 rows, the last of 28 (not a multiple of 16: the tail GEMM).
        add("step " + w.name + " block-chunks=48 checkpointing=smart attention=auto",
            [=](Check& c) { chunked_step_case(c, *wref, CheckpointPolicy::Smart, AttentionBackend::Auto, 48); });
        // FP8 GEMMs on 4-bit weights (quantization nf4 + precision fp8): every 4-bit slot dequantized straight to
        // FP8 (both layouts) before each of its GEMMs, on both sides.
        StepVariant q = qwen3_variant();
        q.name = "qwen3-nf4-fp8";
        q.nf4 = true;
        q.fp8 = true;
        q.tol = 8.0;
        q.update_min_share = 0.5;
        add_format_cases(q);
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