// SPDX-FileCopyrightText: 2026 The Tandem developers
// SPDX-License-Identifier: GPL-3.0-or-later
// `tandem-cli bench`: what it measures is the CUDA backend itself (CudaModel, the GEMMs, the device's memory), so
// it runs inside the CUDA plugin (cuda_plugin/bench.cpp); app/cli/cmd_bench.cpp turns the flags into these
// options. The measurements, formulas and output are described in bench.cpp.
#pragma once

#include <string>
#include <vector>

namespace tandem {

struct CudaBenchOptions {
    std::string config;                 // architecture preset (tandem/arch_presets.h); required but with the modes below
    std::string checkpointing = "off";  // off|selective|recompute|smart|smart-single
    std::string attention = "auto";     // auto|cudnn|inhouse
    std::string json_path, timeline_path;
    std::string plans_path;             // only write the golden memory plans there
    std::string quantization = "none";  // none|nf4
    std::string precision = "bf16";     // bf16|fp8
    double vram_budget = 0;             // GiB; 0: the GPU's own
    std::string cuda_graphs = "on";     // on|off
    std::string moe_routing = "sort";   // sort|loop
    int batch_tokens = 16384, seq_len = 2048, min_seq_len = 0, steps = 20, warmup = 3, rank = 16, layers = 0;
    int64_t max_position = 0;           // > 0: the preset's max_position_embeddings raised to this (context extension)
    int keep_mlp_layers = 0;            // layers 0..N-1 keep the MLP buffers the policy drops (make_plan)
    int offload_mlp_layers = 0;         // and M more send them to host memory (PlanOptions::mlp_offloaded_layers)
    bool fp8_transposed = false;        // precision fp8: the weights' transposes resident (PlanOptions)
    bool rebuild_metadata = false;
    bool grouped_gemm = false;          // only time the MoE grouped GEMMs
    bool fp8_gemm = false;              // only time the base GEMMs in bf16 and FP8
    double alpha = 32;
    std::vector<int> devices;           // data parallelism over these GPUs ({-1}: all; empty or one: one GPU)
};

// Runs the benchmark the options ask for and prints it (stdout; progress on stderr); returns the exit code.
// Error{Unsupported} (with the reason) where the CUDA backend cannot run, Error{InvalidInput} for bad options,
// Error{OutOfMemory} when the model does not fit (the JSON is still written, with "oom": true).
int run_cuda_bench(const CudaBenchOptions& options);

}  // namespace tandem
