// SPDX-FileCopyrightText: 2026 The Tandem developers
// SPDX-License-Identifier: GPL-3.0-or-later
// InferModel: what ChatSession needs of an inference engine with a KV cache, implemented by CpuInferModel
// (infer/cpu_infer.h, fp32, the reference) and CudaInferModel (infer/cuda_infer.h, bf16). The semantics of every
// call are documented on CpuInferModel.
#pragma once

#include <atomic>
#include <cstdint>
#include <filesystem>
#include <map>
#include <string>
#include <vector>

#include "kernels/cpu/sampling.h"
#include "model/lora_table.h"
#include "tandem/model_config.h"

namespace tandem::infer {

struct InferOptions {
    int num_slots = 1;       // N: sequences held at once
    int max_len = 0;     // M: positions per slot; 0: min(max_position_embeddings, 4096)
    int chunk = 256;     // rows of one forward call (prefill is cut into chunks of this many)
    bool quantize_4bit = false;  // hold the projections as NF4 (a pre-quantized checkpoint is 4-bit anyway)
};

// Bytes of an inference model: the decoder's arenas and the cache arena.
struct InferBytes {
    uint64_t weights = 0, activations = 0, workspace = 0, kv_cache = 0, adapters = 0;
    uint64_t total() const { return weights + activations + workspace + kv_cache + adapters; }
};

// One adapter, read from a PEFT folder and held as fp32.
struct InferAdapter {
    std::string name;
    std::filesystem::path dir;
    LoraConfig config;
    std::vector<LoraTensorSpec> specs;
    LoraIndex index;
    std::vector<std::vector<float>> values;  // [specs] A [r,in] / B [out,r]
};

// Tokens appended to one sequence by a forward call.
struct Feed {
    int slot = 0;
    std::vector<int32_t> tokens;
};

// The adapters of a forward call as (adapter, first feed, feeds) runs; Error{Internal} unless adapters has one
// name or one per feed, and a call with several different names is a decode step with each name's feeds
// consecutive. One run when every feed uses the same adapter.
struct AdapterRun {
    std::string adapter;
    int first = 0, count = 0;
};
std::vector<AdapterRun> adapter_runs(const std::vector<Feed>& feeds, const std::vector<std::string>& adapters);

class InferModel {
public:
    virtual ~InferModel() = default;
    virtual const ModelConfig& config() const = 0;
    virtual int num_slots() const = 0;
    virtual int max_len() const = 0;
    virtual int vocab() const = 0;
    virtual InferBytes bytes() const = 0;
    virtual std::string device_name() const = 0;
    virtual void add_adapter(const std::string& name, const std::filesystem::path& dir) = 0;
    virtual void remove_adapter(const std::string& name) = 0;
    virtual bool has_adapter(const std::string& name) const = 0;
    virtual std::vector<std::string> adapter_names() const = 0;
    virtual int length(int slot) const = 0;
    virtual const int32_t* tokens(int slot) const = 0;  // host memory
    virtual void truncate(int slot, int length) = 0;
    // The logits of each feed's last token (device memory on CUDA), or nullptr when cancelled. adapters: one name
    // for every feed, or one per feed ("" : none); several different ones only for a decode step (one token per
    // feed) whose feeds of one adapter are consecutive: the base GEMMs then run once over all rows and each
    // adapter's LoRA over its rows (mixed_adapter_groups).
    virtual const float* forward(const std::vector<Feed>& feeds, const std::vector<std::string>& adapters,
                                 const std::atomic<bool>* cancel = nullptr) = 0;
    virtual std::vector<int32_t> sample(const std::vector<Feed>& feeds, const std::vector<cpu::SamplingParams>& params,
                                        const std::vector<int64_t>& draw) = 0;
};

}  // namespace tandem::infer
