// SPDX-FileCopyrightText: 2026 The Tandem developers
// SPDX-License-Identifier: GPL-3.0-or-later
// Rotary position embedding on the CPU backend, in Hugging Face's rotate_half convention: channel i is
// paired with channel i + D/2 (not with i+1 as in the original GPT-NeoX/Meta interleaved layout).
// T = tokens, H = heads, D = head_dim, P = max positions of the table. The table's head_dim is the rotary dim
// Dr <= D: partial rotary (Phi-4-mini's partial_rotary_factor) rotates the first Dr channels of each head (pairs
// i, i + Dr/2, as transformers' rotate_half of q[..., :Dr]) and passes the rest through.
// Decision: the cos/sin table reproduces transformers' float32 computation step by step (inv_freq and the
// llama3 wavelength bands in float32 arithmetic, angle = float(pos) * inv_freq rounded to float32, then
// cos/sin of that float angle), with each transcendental evaluated in double and rounded once. So the table
// is what a model saw in training with transformers, not a more precise variant of it: at position 30000
// the two would differ by ~1e-3 rad.
#pragma once

#include <cstdint>
#include <vector>

#include "tandem/model_config.h"

namespace tandem::cpu {

struct RopeTable {
    int head_dim = 0;                // D
    int max_pos = 0;                 // P: rows of the table
    // LongRoPE with both factor sets: rows [0, long_from) hold the short factors for positions 0..long_from-1,
    // rows [long_from, P) the long factors for positions 0..P-long_from-1 (rope_row picks). 0: one set.
    int long_from = 0;
    float attention_scaling = 1.0f;  // transformers' attention_scaling (1 for none / linear / llama3), in cos/sin
    std::vector<float> inv_freq;     // [D/2] (LongRoPE: the short factors')
    std::vector<float> cos;          // [P, D/2]
    std::vector<float> sin;          // [P, D/2]
};

// Builds the table for positions 0..max_pos-1 once per run. Supports RopeScalingType None, Linear
// (inv_freq / factor), Llama3, LongRope and Yarn (inv_freq ramped between the original and inv_freq / factor;
// cos and sin times attention_factor), as transformers' rope init functions compute them. head_dim must be even.
// LongRope: cos and sin times attention_factor; the short factors serve sequences of up to
// original_max_position_embeddings positions, the long ones longer sequences (transformers switches when the
// positions of a forward call pass the original length). When max_pos exceeds the original length the table
// holds both sets (long_from = original_max_position_embeddings, max_pos + long_from rows).
RopeTable rope_table_build(int head_dim, double theta, const RopeScaling& scaling, int max_pos);

// The positions a table serves (0..rope_positions-1) and the row of position pos in a sequence whose forward
// reaches seq_len positions (its largest position + 1): a LongRoPE table's long rows when seq_len > long_from
// (RopeTable::long_from; 0: the position itself).
// Decision: the choice is per sequence (a packed sample, a chat's feed), as transformers chooses for a forward
// call over that sequence alone.
inline int rope_positions(const RopeTable& t) { return t.max_pos - t.long_from; }
inline int32_t rope_row(int long_from, int32_t pos, int64_t seq_len) {
    return long_from > 0 && seq_len > long_from ? pos + long_from : pos;
}
// rows[t] = rope_row of positions[t] for packed sequences cu_seqlens[S+1] (rows may equal positions).
void rope_rows(int32_t* rows, const int32_t* positions, const int32_t* cu_seqlens, int S, int long_from);

// out[T,H,D] = rotate(inp[T,H,D]) at positions[T] (int32, each in [0, P)). out may equal inp (in place).
// A position outside the table throws Error{Internal} before anything is written.
void rope_forward(float* out, const float* inp, const int32_t* positions, const RopeTable& table, int T, int H, int D);

// dinp[T,H,D] = inverse rotation of dout[T,H,D] (written, not accumulated). dinp may equal dout.
void rope_backward(float* dinp, const float* dout, const int32_t* positions, const RopeTable& table, int T, int H,
                   int D);

}  // namespace tandem::cpu
