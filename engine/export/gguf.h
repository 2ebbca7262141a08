// SPDX-FileCopyrightText: 2026 The Tandem developers
// SPDX-License-Identifier: GPL-3.0-or-later
// GGUF export: the base model with a LoRA adapter merged in, as one GGUF file that llama.cpp (and Ollama, LM
// Studio) load, plus an Ollama Modelfile; or the adapter alone as a GGUF LoRA adapter (llama.cpp's --lora).
// Written by our own code: the container (gguf_file.h), the block formats (gguf_quant.h), llama.cpp's names.
// Decisions a reader must know:
//  - Families: llama, mistral and mixtral (llama.cpp arch "llama"), qwen2, qwen3, qwen3moe, phi3, gemma2, gemma3,
//    gpt-oss.
//    The experts of an MoE layer become llama.cpp's ffn_gate_exps / ffn_up_exps [E, F, H] and ffn_down_exps
//    [E, H, F] (gathered from transformers 5's fused gate_up_proj / down_proj or the Hub's per-expert tensors,
//    each merged first), the router ffn_gate_inp. gpt-oss (arch "gpt-oss"): sinks, biases, its [E, in, out]
//    interleaved experts (MXFP4 ones dequantized) split into the same three tensors + their biases, YaRN and the
//    window. A GGUF LoRA adapter with LoRA on experts is refused (llama.cpp's adapters hold 2-D tensors). Anything llama.cpp
//    cannot represent is Error{Unsupported} before anything is written: other architectures, YaRN, a Gemma whose
//    query_pre_attn_scalar is not the one llama.cpp derives, sliding-window layouts that are not periodic, a
//    tokenizer whose pre-tokenizer llama.cpp has no name for.
//  - Weights are merged exactly as the merged export merges them (LoraMerge: fp32, rounded once to the file's
//    type). For arch "llama", q/k rows are permuted per head from transformers' rotate-half layout to the
//    interleaved pairs llama.cpp's RoPE expects (weights, biases and lora_B alike); the other families use
//    llama.cpp's NEOX RoPE and keep transformers' order. Gemma's RMSNorm weights w are written as 1 + w.
//  - Quant mixes (--quant): f16, bf16 and q8_0 store every 2-D weight in that type; q6_k, q4_k_m and q5_k_m follow
//    the per-tensor choices of llama.cpp's llama_model_quantize (output / tied embeddings in Q6_K; attn_v and
//    ffn_down in Q6_K on the first and last eighth of the layers and every third layer between; Phi-3's attn_qkv
//    one step up). Norms, biases and RoPE factors are F32. A weight whose rows do not fill whole blocks (256
//    values for k-quants) falls back as llama.cpp's quantizer does: Q4_K to Q5_0, Q5_K to Q5_1, Q6_K to Q8_0 (blocks
//    of 32), or F16 when rows are not a multiple of 32 either.
//  - Only one tensor is in host memory at a time (the shards are mapped); the GGUF is streamed to a temporary
//    folder next to out_dir and renamed into place at the end, so a failure (full disk, cancel) leaves nothing.
//  - Known limits: llama.cpp's llama/qwen2/qwen3 graphs have no sliding window, so Mistral v0.1's 4096 window is
//    not in the file (contexts beyond it differ from transformers, as with llama.cpp's own converter).
#pragma once

#include <atomic>
#include <cstdint>
#include <filesystem>
#include <functional>
#include <string>

#include "model/lora_table.h"
#include "tandem/lora.h"
#include "tandem/model_config.h"

namespace tandem {

enum class GgufQuant { F32, F16, BF16, Q8_0, Q4_K_M, Q5_K_M, Q6_K };

// "f16" | "bf16" | "q8_0" | "q4_k_m" | "q5_k_m" | "q6_k" (and "f32"; any case) -> the quant; Error{InvalidInput}.
GgufQuant parse_gguf_quant(const std::string& name);
std::string gguf_quant_name(GgufQuant q);  // "Q4_K_M"

struct GgufOptions {
    GgufQuant quant = GgufQuant::F16;  // the model's mix; for an adapter F32, F16 or BF16
    bool overwrite = false;
    std::function<void(uint64_t done, uint64_t total)> progress;  // bytes of the file written so far
    const std::atomic<bool>* cancel = nullptr;                    // set: Error{Cancelled}, nothing left behind
};

// File names inside out_dir.
std::string gguf_model_file_name(GgufQuant q);  // "model-Q4_K_M.gguf"
std::string gguf_lora_file_name(GgufQuant q);   // "adapter-F16.gguf"
inline constexpr const char* kModelfileName = "Modelfile";

// Writes out_dir/model-<QUANT>.gguf (base + merged adapter) and out_dir/Modelfile. Errors: InvalidInput (the
// adapter does not match, out_dir exists and !overwrite), Unsupported (see above), Io (cannot write), Cancelled.
void write_gguf_model(const std::filesystem::path& model_dir, const ModelConfig& model, const LoraConfig& lora,
                      const LoraTensors& tensors, const std::filesystem::path& out_dir,
                      const GgufOptions& options = {});

// Writes out_dir/adapter-<TYPE>.gguf: the LoRA pairs under llama.cpp's names (blk.N.attn_q.weight.lora_a [r, in],
// .lora_b [out, r]), adapter.lora.alpha chosen so that llama.cpp's alpha / r is the adapter's scaling (rsLoRA
// included). Same errors as write_gguf_model.
void write_gguf_lora(const std::filesystem::path& model_dir, const ModelConfig& model, const LoraConfig& lora,
                     const LoraTensors& tensors, const std::filesystem::path& out_dir,
                     const GgufOptions& options = {});

// The size of the GGUF file write_gguf_model would write for this model (the tokenizer's part estimated from
// tokenizer.json's size). Error{Unsupported} as write_gguf_model.
uint64_t estimate_gguf_model_bytes(const std::filesystem::path& model_dir, const ModelConfig& model, GgufQuant q);

// The Ollama Modelfile for a GGUF of this model: FROM ./<gguf_file>, TEMPLATE (the chat template translated for
// the chat formats of the supported families: ChatML, Llama 3, Mistral/Llama 2 [INST], Gemma, Phi-3; the raw
// prompt for a model without a chat template), PARAMETER stop for every end token, SYSTEM when the template
// has a default system prompt.
std::string ollama_modelfile(const std::filesystem::path& model_dir, const ModelConfig& model,
                             const std::string& gguf_file);

}  // namespace tandem
