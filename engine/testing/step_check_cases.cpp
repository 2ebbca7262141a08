// SPDX-FileCopyrightText: 2026 The Tandem developers
// SPDX-License-Identifier: GPL-3.0-or-later
// The bodies of the self-test's step cases that check a runtime path against another CUDA run rather than
// against the CPU: the asynchronous step against the blocking one, CUDA graphs against eager, the checkpointing
// policies against Off, the trainer's host syncs per step, and data parallelism against one replica. They run on
// step_cases.cpp's generated models (StepReference, step_support.h); add_step_cases there lists them. Only with
// TANDEM_WITH_CUDA.
// Decisions a reader must know:
//  - Bit for bit where both runs issue the same kernels on the same values with the deterministic in-house
//    attention; within a stated tolerance only where they cannot be (cuDNN's backward is not reproducible run to
//    run, data parallelism sums the gradients in another order).
#include "testing/step_support.h"

#if TANDEM_WITH_CUDA
#include <unistd.h>

#include <algorithm>
#include <array>
#include <atomic>
#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include <nlohmann/json.hpp>

#include "core/cuda/context.h"
#include "core/files.h"
#include "io/atomic_file.h"
#include "model/cuda_model.h"
#include "tandem/demo_model.h"
#include "tandem/model_config.h"
#include "tandem/trainer.h"
#include "train/backends.h"
#include "train/cuda_communicators.h"
#include "train/data_parallel.h"

namespace tandem::testing {
namespace {

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

}  // namespace

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
        CudaModelOptions opt = ref.options(ref.variant.token_budget, policy, AttentionBackend::Inhouse);
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
        CudaModelOptions opt = ref.options(ref.variant.token_budget, policy, attention);
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
        CudaModelOptions opt = ref.options(batch.max_seqlen, policy, AttentionBackend::Inhouse);
        opt.mlp_kept_layers = mlp_kept_layers;
        opt.mlp_offloaded_layers = mlp_offloaded_layers;
        opt.fp8_transposed = fp8_transposed;
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

}  // namespace tandem::testing
#endif  // TANDEM_WITH_CUDA
