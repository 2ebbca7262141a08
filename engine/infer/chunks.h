// SPDX-FileCopyrightText: 2026 The Tandem developers
// SPDX-License-Identifier: GPL-3.0-or-later
// The host bookkeeping both inference models share (infer/cpu_infer.h, infer/cuda_infer.h): the LoRA config of
// the plan, checking a forward
// call's feeds, and cutting them into chunks of at most T rows (tokens, positions, slots, cu_seqlens; the token
// history and lengths of the slots advanced).
#pragma once

#include <cstdint>
#include <utility>
#include <vector>

#include "infer/infer_model.h"

namespace tandem::infer {

// The LoRA config an inference plan is made for: every target of the model at rank r (the LoRA tmp pieces).
LoraConfig infer_plan_lora(const ModelConfig& cfg, int r);

// Error{InvalidInput} naming `where` for options no model can hold (slots, chunk, max_len).
void check_infer_options(const InferOptions& o, const std::string& where);
// M: positions per slot: options.max_len, else min(max_position_embeddings, 4096); at most
// max_position_embeddings.
int resolve_max_len(const ModelConfig& cfg, const InferOptions& o);

// A PEFT adapter folder read for inference (fp32 values in the LoRA table's order; Error{InvalidInput|Unsupported}
// naming the folder or the tensor: an adapter of another base fails here).
InferAdapter read_infer_adapter(const std::string& name, const std::filesystem::path& dir, const ModelConfig& cfg,
                                int layers);

// Error{Internal} for a malformed call (slots, empty or duplicate feeds), Error{InvalidInput} for a sequence past
// max_len positions or a token id outside [0, vocab).
void check_feeds(const std::vector<Feed>& feeds, int num_slots, int max_len, int vocab, const std::vector<int>& len);

struct Chunk {
    int T = 0, S = 0, longest = 0;
    bool fresh = true;                                // every segment starts its sequence (position 0)
    std::vector<std::pair<size_t, int>> ends;         // (feed, row) of the rows that end a feed
    // The rows of one feed: slot positions start .. start+n-1, of a feed that ends the sequence at `end` positions.
    struct Segment { int slot, start, n, end; };
    std::vector<Segment> segments;
};

// The rows of the next chunk of at most Tmax rows, from feed `next` on (done[i]: tokens of feed i already run):
// tok / pos / slot [Tmax], cu [Tmax+1] filled, each slot's history (hist [N, M], host) and length advanced.
// Advances `next` past the finished feeds.
Chunk next_chunk(const std::vector<Feed>& feeds, std::vector<size_t>& done, size_t& next, int Tmax, int M,
                 int32_t* hist, std::vector<int>& len, int32_t* tok, int32_t* pos, int32_t* slot, int32_t* cu);

// The RoPE table rows of a chunk's rows (cpu::rope_row; rows [T]): a LongRoPE table's long rows for the feeds
// whose sequence ends past long_from, as transformers chooses for its forward call over the whole feed (a
// prompt, then one token per decode step; the keys already cached keep the rotation they were stored with).
void chunk_rope_rows(const Chunk& c, const int32_t* pos, int long_from, int32_t* rows);

}  // namespace tandem::infer
