// SPDX-FileCopyrightText: 2026 The Tandem developers
// SPDX-License-Identifier: GPL-3.0-or-later
// CpuInferModel: inference with a KV cache on the CPU backend (fp32): the decoder blocks of model/decoder.h,
// run forward only, with an inference runtime behind DecoderRuntime::attention_forward. The engine under
// tandem::ChatSession (tandem/chat.h).
// Dimension legend: model/plan.h; N = sequence slots, M = positions per slot (max_len), T = rows of one
// forward call (at most `chunk`).
// Decisions a reader must know:
//  - Reuse of the blocks: a forward call appends tokens to sequences ("feeds": a slot and its new tokens).
//    The decoder runs its ordinary forward(false) over the call's rows, and the runtime's attention hook writes
//    each layer's k (after q/k norm and RoPE, as the block hands it over) and v into the cache
//    (cpu::kv_cache_write), then attends: a chunk in which every feed starts a fresh sequence (position 0) runs
//    the training attention (causal, packed by cu_seqlens: prefill); any other chunk (decode: one row per
//    active sequence; the prefill of a prompt that continues a cached prefix) attends each row against its
//    slot's cache (cpu::decode_attention). Both apply the layer's window, the soft-cap and the scale.
//    decoder.h is unchanged: the hook gets the layer, and the rows' slots and positions are the runtime's.
//  - Memory is planned: the decoder's arenas from make_plan with `chunk` rows and the smart-single policy
//    (one block-input buffer and one shared set: forward never needs a layer's buffers after the layer; the
//    policy's host offload is never used, as nothing runs backward), plus the cache arena: K and V
//    [N, L, M, KV], the token history [N, M] (repetition penalty, prefix reuse) and the logits [N, V]. The
//    backward scratch pieces of make_plan are unused here (rows * (2 BIG + 2 C + 2 KV) floats; with experts also
//    rows * top-k * (2 C + 1)). An MoE model's expert buffers are make_plan's: [rows * top-k, ...] rows.
//  - Adapters: any number, read once (PEFT folders); a call names the one to use or none. "None" leaves
//    every LoraRef empty, so no LoRA op runs. The LoRA tmp pieces are planned for all targets at the largest
//    rank added so far (adding a larger one re-plans the activation arena).
//  - A decode step's rows all end their feeds, so the lm_head runs once over them; a prefill chunk runs it
//    for the rows that end a feed only.
#pragma once

#include <atomic>
#include <cstdint>
#include <filesystem>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "infer/infer_model.h"
#include "kernels/cpu/sampling.h"
#include "model/lora_table.h"
#include "model/plan.h"
#include "tandem/model_config.h"

namespace tandem::infer {

class CpuInferModel final : public InferModel {
public:
    // Error{InvalidInput|Unsupported} naming the folder, as CpuModel::load.
    static CpuInferModel load(const std::filesystem::path& model_dir, const InferOptions& options);
    // The bytes load() will hold with adapters of rank `lora_rank` (0: none), from the config alone.
    static InferBytes plan(const ModelConfig& cfg, const InferOptions& options, int lora_rank = 0);

    CpuInferModel(CpuInferModel&&) noexcept;
    CpuInferModel& operator=(CpuInferModel&&) noexcept;
    ~CpuInferModel();

    const ModelConfig& config() const override;
    const std::filesystem::path& model_dir() const;
    int num_slots() const override;
    int max_len() const override;  // M, after the LongRoPE cap
    int vocab() const override;
    InferBytes bytes() const override;
    std::string device_name() const override { return "CPU"; }

    // Reads a PEFT adapter (Error{InvalidInput|Unsupported} naming the folder and, for a bad tensor, its
    // name and shape: an adapter of another base fails here). Replaces an adapter of the same name.
    void add_adapter(const std::string& name, const std::filesystem::path& dir) override;
    void remove_adapter(const std::string& name) override;
    bool has_adapter(const std::string& name) const override;
    std::vector<std::string> adapter_names() const override;
    const InferAdapter& adapter(const std::string& name) const;

    // The tokens held for a slot (its cache rows 0..length-1 are valid).
    int length(int slot) const override;
    const int32_t* tokens(int slot) const override;  // [length]
    void truncate(int slot, int length) override;  // keep the first `length` (0: empty the slot)

    // Appends each feed's tokens to its slot (at most one feed per slot) with the adapters named (one for all
    // feeds, or one per feed, "" : none; several only in a decode step, infer_model.h) and returns the logits
    // [feeds, V] of each feed's last token (valid until the next call). Error{InvalidInput} when a slot would
    // exceed max_len, for an unknown adapter, an id outside the vocabulary. With `cancel` set between two chunks
    // it returns nullptr; the slots then hold what ran.
    const float* forward(const std::vector<Feed>& feeds, const std::vector<std::string>& adapters,
                         const std::atomic<bool>* cancel = nullptr) override;

    // The repetition penalty and the choice of the next token of each feed of the last forward call
    // (rows of its logits, in feed order): params [feeds], draw [feeds] (see kernels/cpu/sampling.h).
    std::vector<int32_t> sample(const std::vector<Feed>& feeds, const std::vector<cpu::SamplingParams>& params,
                                const std::vector<int64_t>& draw) override;

    struct Impl;

private:
    explicit CpuInferModel(std::unique_ptr<Impl> impl);
    std::unique_ptr<Impl> impl_;
};

}  // namespace tandem::infer
