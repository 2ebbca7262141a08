// SPDX-FileCopyrightText: 2026 The Tandem developers
// SPDX-License-Identifier: GPL-3.0-or-later
// The ggml tensor types a GGUF export writes, with their block layouts, written here from the published format
// descriptions (ggml's block structs): F32, F16, BF16, Q8_0 (32 values: fp16 scale + 32 int8), Q5_0 / Q5_1 (32
// values: fp16 d (and m), 4 bytes of fifth bits, 16 bytes of low nibbles: value j in the low nibble of byte j,
// value j + 16 in its high nibble; Q5_0 = d (q - 16), Q5_1 = d q + m), and the k-quants
// on super-blocks of 256 values: Q4_K (fp16 d, dmin; 8 sub-blocks of 32 with 6-bit scales and mins; 4-bit
// values), Q5_K (the same plus a fifth bit per value), Q6_K (16 sub-blocks of 16 with int8 scales; 6-bit values
// centred on 32; fp16 d last).
// Decisions a reader must know:
//  - Rows are quantized independently (a block never crosses a row), so a row's length must be a multiple of the
//    block size; gguf_type_fits says whether it is and the exporter falls back to another type when not.
//  - The k-quant scale search is ours: per sub-block, a handful of candidate scales around the obvious one,
//    each refined by a weighted least-squares fit (weights favour large values, as the format's authors
//    recommend without an importance matrix), keeping the candidate with the smallest weighted error. The
//    sub-block scales are then quantized against the super-block scale and the values re-quantized with the
//    scales they will be decoded with. Any search gives a valid file; this one lands within the known error of
//    each type (tests/test_gguf.cpp states the bounds).
//  - dequantize_row is the exact decoder llama.cpp uses (the format's definition), for tests and checks.
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>
#include <string_view>

namespace tandem::gguf {

// ggml's type ids as they appear in a GGUF tensor info.
enum class GgmlType : uint32_t { F32 = 0, F16 = 1, Q5_0 = 6, Q5_1 = 7, Q8_0 = 8, Q4_K = 12, Q5_K = 13, Q6_K = 14, BF16 = 30 };

std::string_view ggml_type_name(GgmlType t) noexcept;  // "Q4_K"
// Values per block (1 for the float types) and bytes per block.
int64_t ggml_block_size(GgmlType t) noexcept;
int64_t ggml_type_bytes(GgmlType t) noexcept;
// True when one of our types has this id (a reader of foreign files must not trust the id otherwise).
bool ggml_type_known(uint32_t id) noexcept;
// Bytes of a row of `n` values (n a multiple of the block size).
uint64_t ggml_row_bytes(GgmlType t, int64_t n) noexcept;
// True when rows of `n` values can be stored as `t`.
inline bool gguf_type_fits(GgmlType t, int64_t n) noexcept { return n > 0 && n % ggml_block_size(t) == 0; }

// One row of n fp32 values -> ggml_row_bytes(t, n) bytes. Error{Internal} when n does not fit the type.
void quantize_row(GgmlType t, std::span<const float> x, std::span<std::byte> out);
// The inverse: ggml_row_bytes(t, n) bytes -> n values.
void dequantize_row(GgmlType t, std::span<const std::byte> in, std::span<float> y);

}  // namespace tandem::gguf
