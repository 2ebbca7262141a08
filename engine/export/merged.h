// SPDX-FileCopyrightText: 2026 The Tandem developers
// SPDX-License-Identifier: GPL-3.0-or-later
// Merged-model export: the base model with a LoRA adapter folded into its weights, written as a Hugging Face
// model folder that transformers (and vLLM, llama.cpp's converter) load as a plain model.
// Decisions a reader must know:
//  - Each adapted weight is merged in fp32 and rounded once to the chosen dtype: W' = W + scaling * B A, with
//    scaling = alpha / r (alpha / sqrt(r) with rsLoRA), B A over the whole [out, in] of the checkpoint tensor
//    (a fused projection such as Phi-3's qkv_proj is one LoRA pair on one tensor, as in PEFT; an MoE layer's
//    experts, per expert W_e' = W_e + scaling * B_e A_e, as PEFT merges target_parameters, into the fused 3-D
//    tensors or each expert's own, whichever the base holds). Every other tensor
//    is copied when the dtype is the base's, else converted (round to nearest even).
//  - The output keeps the base's sharding: one output shard per input shard, same tensor names and grouping, and
//    model.safetensors.index.json when the base has one (or more than one file). Only one shard's tensors are
//    in host memory at a time.
//  - config.json is copied with "dtype" and "torch_dtype" set to the chosen dtype; generation_config.json and the
//    tokenizer files are copied as they are.
//  - Nothing half-written is left behind: the folder is written next to `out_dir` under a temporary name and
//    renamed into place at the end (an existing `out_dir` is replaced only with `overwrite`).
#pragma once

#include <atomic>
#include <cstdint>
#include <filesystem>
#include <functional>
#include <map>
#include <span>
#include <vector>
#include <string>

#include "model/lora_table.h"
#include "tandem/lora.h"
#include "tandem/model_config.h"
#include "tandem/safetensors.h"

namespace tandem {

// The adapter's LoRA pairs keyed by the checkpoint weight they adapt ("model.layers.3.self_attn.qkv_proj.weight"),
// checked against the LoRA table. The one merge both the merged and the GGUF export use.
class LoraMerge {
public:
    // Error{InvalidInput} for a missing or misshapen LoRA tensor.
    LoraMerge(const ModelConfig& model, const LoraConfig& lora, const LoraTensors& tensors);
    bool adapts(const std::string& weight) const { return pairs_.count(weight) != 0 || slices_.count(weight) != 0; }
    std::vector<std::string> weights() const;  // every adapted weight name (an MoE layer's experts: the fused one)
    // The adapted weights `base` lacks (an MoE layer's experts count as present in either layout).
    std::vector<std::string> missing_in(const SafetensorsSet& base) const;
    // w [out, in] (fp32, the base weight `weight` of shape `shape`) += scaling * B [out, r] @ A [r, in]; nothing
    // when the weight is not adapted. Error{InvalidInput} naming `source` when the shape disagrees.
    void apply(const std::string& weight, std::span<const int64_t> shape, std::vector<float>& w,
               const std::string& source) const;

private:
    struct Pair {
        const std::vector<float>* a = nullptr;
        const std::vector<float>* b = nullptr;  // an expert parameter's: expert-major [E, out, r] (lora_table.h)
        int64_t out = 0, in = 0;
        int64_t experts = 0;  // > 0: the fused [E, out, in] weight of an MoE layer (transformers 5's layout)
        // gpt-oss: the parameter is [E, in, out], and gate_up's out alternates gate / up (arch/arch.h).
        bool transposed = false, interleaved = false;
    };
    // An MoE layer's experts as the Hub stores them: expert e's rows [row, row + rows) of the fused parameter's
    // pair (gate_up: gate rows then up rows) in its own tensor ("...experts.3.gate_proj.weight" [rows, in]).
    struct Slice {
        std::string pair;
        int64_t expert = 0, row = 0, rows = 0;
    };
    std::map<std::string, Pair> pairs_;
    std::map<std::string, Slice> slices_;
    float scaling_ = 1.0f;
    int r_ = 0;
};

struct MergeOptions {
    DType dtype = DType::BF16;  // BF16, F16 or F32
    bool overwrite = false;
    // Called after each tensor with the bytes written so far and the total (from the worker thread).
    std::function<void(uint64_t done, uint64_t total)> progress;
    const std::atomic<bool>* cancel = nullptr;  // set: stop with Error{Cancelled}, nothing left behind
};

// "bf16" | "fp16" | "fp32" -> the dtype; Error{InvalidInput} for anything else.
DType parse_merge_dtype(const std::string& name);

// Writes the merged model of `model_dir` (config `model`) and the adapter (`lora`, `tensors` as
// lora_tensor_specs names them) into `out_dir`. Error{InvalidInput} for a missing/misshapen LoRA tensor or
// base weight, an existing `out_dir` without `overwrite`; Error{Io} when writing fails; Error{Cancelled}.
void write_merged_model(const std::filesystem::path& model_dir, const ModelConfig& model, const LoraConfig& lora,
                        const LoraTensors& tensors, const std::filesystem::path& out_dir,
                        const MergeOptions& options = {});

}  // namespace tandem
