// SPDX-FileCopyrightText: 2026 The Tandem developers
// SPDX-License-Identifier: GPL-3.0-or-later
// CudaInferModel: inference with a KV cache on the CUDA backend (bf16), the twin of CpuInferModel
// (infer/cpu_infer.h, whose header describes the design: the decoder's blocks run forward only, behind an
// inference runtime's attention hook that writes the cache and attends). Decisions a reader must know:
//  - The weights, the decoder arenas and the RoPE tables are a CudaModel's (loaded with the in-house attention,
//    recompute policy, no graphs, `chunk` rows, LoRA tmp pieces of rank `planned_rank` and no LoRA values,
//    gradients or AdamW state: CudaModelOptions::lora_state); this model only swaps the decoder's runtime for its
//    own and adds the cache: K and V bf16 [N, L, M, KV], the token history [N, M] (host, with a device copy for
//    the repetition penalty), the next-token logits fp32 [N, V] and decode_attention's split-K workspace.
//  - Each forward chunk uploads its rows' tokens, positions, slots and cu_seqlens (one copy each on the compute
//    stream) and runs eagerly; sampling runs on the device (repetition_penalty, sample_tokens) and the chosen ids
//    come back with one synchronising copy per step (the tokens stream to the host anyway).
//  - Adapters are bf16 copies on the device, one buffer each; a call binds one (or none: no LoRA op runs). A rank
//    above the planned one reloads the CudaModel with tmp pieces of that rank (the cache is kept).
//  - Decode steps (one new token per sequence) run as CUDA graphs, one per (rows, adapter): the first step of a
//    key eagerly, the second captured, later ones replayed; prefill chunks run eagerly.
#pragma once

#include <filesystem>
#include <memory>

#include "infer/infer_model.h"

namespace tandem::infer {

// Error{Unsupported} in a build without CUDA or without a usable GPU; as CpuInferModel::load otherwise.
std::unique_ptr<InferModel> load_cuda_infer_model(const std::filesystem::path& model_dir, const InferOptions& options);

}  // namespace tandem::infer
