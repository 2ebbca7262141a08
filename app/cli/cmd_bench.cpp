// SPDX-FileCopyrightText: 2026 The Tandem developers
// SPDX-License-Identifier: GPL-3.0-or-later
// `tandem-cli bench --config NAME [--layers N] [--batch-tokens 16384] [--seq-len 2048] [--steps 20] [--warmup 3]
// [--checkpointing off|selective|recompute|smart|smart-single] [--attention auto|cudnn|inhouse] [--rank 16]
// [--cuda-graphs on|off] [--moe-routing sort|loop] [--devices 0,1|all] [--json FILE]`, or `tandem-cli bench --plans FILE`, or
// `tandem-cli bench --grouped-gemm [--json FILE]` — LoRA training throughput of the CUDA backend on an
// architecture preset (tandem/arch_presets.h) with random weights: tokens/s, the forward / backward / optimizer
// split, MFU, and peak VRAM against the memory plan. --plans writes the memory plans of the golden presets and
// all policies (the golden bytes of the planner, tests/fixtures/plans/). --grouped-gemm times the MoE grouped
// GEMMs against one dense GEMM of the same FLOPs (below).
// bench/gpu_bench.sh runs it next to the HF PEFT baseline (bench/hf_peft_baseline.py); bench/moe_bench.sh does
// the same for the mixture-of-experts preset qwen3-30b-a3b.
// The measurement runs inside the CUDA plugin (engine/cuda_plugin/bench.cpp: the decisions, the FLOP formula and
// the output); this file turns the flags into CudaBenchOptions.
#include <memory>
#include <string>
#include <vector>

#include "commands.h"
#include "run_flags.h"
#include "cuda_plugin/bench.h"
#include "model/cuda_model.h"
#include "tandem/arch_presets.h"

namespace tandem::cli {

namespace {

std::string join(const std::vector<std::string>& v) {
    std::string s;
    for (const auto& x : v) s += (s.empty() ? "" : ", ") + x;
    return s;
}

}  // namespace

Run add_bench_command(CLI::App& app) {
    auto o = std::make_shared<CudaBenchOptions>();
    o->cuda_graphs = CudaModelOptions{}.cuda_graphs ? "on" : "off";  // the engine's default
    const auto names = architecture_preset_names();
    auto* sub = app.add_subcommand("bench", "LoRA training throughput on random weights of an architecture preset "
                                            "(CUDA): tokens/s, step split, MFU, peak VRAM vs plan");
    sub->add_option("--config", o->config,
                    "architecture preset: " + join(names) + " (required but with --plans and --grouped-gemm)")
        ->check(CLI::IsMember(names));
    sub->add_option("--layers", o->layers,
                    "decoder layers to build: the preset's config with num_hidden_layers = N (0: the preset's)")
        ->capture_default_str();
    sub->add_option("--max-position", o->max_position,
                    "raise the preset's max_position_embeddings to N (context extension: samples longer than the "
                    "published context; 0: the preset's)")
        ->capture_default_str();
    sub->add_option("--batch-tokens", o->batch_tokens, "tokens per step (packed)")->capture_default_str();
    sub->add_option("--seq-len", o->seq_len, "tokens per sample")->capture_default_str();
    sub->add_option("--steps", o->steps, "timed steps")->capture_default_str();
    sub->add_option("--warmup", o->warmup, "untimed steps first")->capture_default_str();
    sub->add_option("--checkpointing", o->checkpointing, "off|selective|recompute|smart|smart-single")
        ->check(CLI::IsMember({"off", "selective", "recompute", "smart", "smart-single"}))
        ->capture_default_str();
    sub->add_option("--keep-mlp-layers", o->keep_mlp_layers,
                    "layers (from the first) that keep the MLP buffers the checkpointing policy drops")
        ->check(CLI::NonNegativeNumber)
        ->capture_default_str();
    sub->add_option("--offload-mlp-layers", o->offload_mlp_layers,
                    "layers after those that keep them (spread over the rest but the last) whose MLP buffers go to "
                    "pinned host memory in forward and come back in backward instead of being recomputed")
        ->check(CLI::NonNegativeNumber)
        ->capture_default_str();
    sub->add_flag("--fp8-transposed", o->fp8_transposed,
                  "precision fp8: keep the weights' transposes on the GPU (made once at load) for the input gradients");
    sub->add_option("--attention", o->attention, "auto|cudnn|inhouse")
        ->check(CLI::IsMember({"auto", "cudnn", "inhouse"}))
        ->capture_default_str();
    sub->add_option("--rank", o->rank, "LoRA rank (the default targets: every projection, an MoE model's experts)")
        ->capture_default_str();
    sub->add_option("--vram-budget", o->vram_budget, "plan and allocate as if the GPU had this many GiB (0: its own)");
    sub->add_option("--quantization", o->quantization, "none|nf4 (4-bit base weights: QLoRA)")
        ->check(CLI::IsMember({"none", "nf4"}))
        ->capture_default_str();
    sub->add_option("--precision", o->precision, "bf16|fp8 (FP8 base weights and GEMMs, block-scaled; Hopper)")
        ->check(CLI::IsMember({"bf16", "fp8"}))
        ->capture_default_str();
    sub->add_option("--alpha", o->alpha, "LoRA alpha")->capture_default_str();
    sub->add_option("--json", o->json_path, "also write the results as JSON to this file");
    auto devices = std::make_shared<std::string>();
    sub->add_option("--devices", *devices,
                    "data parallelism: GPUs like 0,1 or all, one replica each running --batch-tokens per step "
                    "(tokens/s counts them all); default: one GPU");
    sub->add_option("--min-seq-len", o->min_seq_len,
                    "draw sample lengths uniformly from [min-seq-len, seq-len] (0: all seq-len)");
    sub->add_flag("--rebuild-metadata-per-layer", o->rebuild_metadata,
                  "ablation: rebuild and upload the batch metadata in every layer, with a host sync");
    sub->add_option("--cuda-graphs", o->cuda_graphs, "run each micro-batch's forward+backward as a CUDA graph")
        ->check(CLI::IsMember({"on", "off"}))
        ->capture_default_str();
    sub->add_option("--moe-routing", o->moe_routing,
                    "MoE presets: sort (grouped GEMMs over device offsets) or loop (ablation: one GEMM per expert, "
                    "row counts read on the host)")
        ->check(CLI::IsMember({"sort", "loop"}))
        ->capture_default_str();
    sub->add_option("--plans", o->plans_path,
                    "only write the memory plans of the golden presets x policy x {4096, 16384} tokens as JSON to "
                    "this file (no GPU work; --config is ignored)");
    sub->add_flag("--grouped-gemm", o->grouped_gemm,
                  "only time the MoE grouped GEMMs (Qwen3-30B-A3B's expert shapes, 131072 rows over 128 experts) "
                  "against one dense GEMM of the same FLOPs (--config is ignored; --json writes the rows)");
    sub->add_flag("--fp8-gemm", o->fp8_gemm,
                  "only time the base GEMMs of Llama-3.1-8B and Qwen3-0.6B in bf16 and in FP8 (quantization, weight "
                  "transpose and block-scaled GEMM apart; --config is ignored; --json writes the rows)");
    sub->add_option("--timeline", o->timeline_path, "write per-layer CUDA events of one micro-batch as JSON");
    return [o, devices]() {
        if (!devices->empty()) o->devices = parse_devices(*devices);
        if (o->max_position < 0) throw_invalid("--max-position must be 0 (the preset's) or a number of positions");
        if (o->max_position > 0 && !o->config.empty()) {  // before the GPU is needed
            const int64_t published = architecture_preset_json(o->config)->value("max_position_embeddings", int64_t(0));
            if (o->max_position < published)
                throw_invalid("--max-position " + std::to_string(o->max_position) + " is below " + o->config + "'s " +
                              std::to_string(published) + " positions; it only extends the context");
        }
        return run_cuda_bench(*o);
    };
}

}  // namespace tandem::cli
