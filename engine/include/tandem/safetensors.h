// SPDX-FileCopyrightText: 2026 The Tandem developers
// SPDX-License-Identifier: GPL-3.0-or-later
// safetensors — reading (memory-mapped, validated) and writing (atomic) of Hugging Face's tensor format.
// Format: 8-byte little-endian header length N, N bytes of JSON {name: {dtype, shape, data_offsets}, ...,
// "__metadata__": {str: str}}, then the data section. Offsets are relative to the data section.
// Validation mirrors the reference Rust/Python library: besides the per-tensor checks, the tensors must
// cover the data section exactly — sorted by offset, each starts where the previous one ends, no gaps, no
// overlaps, nothing after the last (the library's InvalidOffset / MetadataIncompleteBuffer rules). So a file
// we accept is one PyTorch's `safetensors` accepts, and vice versa. Every error is Error{InvalidInput}
// naming the file (and the tensor) and what is wrong.
// Data spans point into the mapping and are NOT necessarily aligned to the element size (the header
// length need not be a multiple of 8): read them with memcpy or the conversion helpers below.
#pragma once

#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <map>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

namespace tandem {

// Element types of the format. The order is the library's "alignment order", which its writer (and ours)
// sorts by, largest first.
enum class DType : uint8_t { BOOL, U8, I8, F8_E5M2, F8_E4M3, I16, U16, F16, BF16, I32, U32, F32, F64, I64, U64 };

std::string_view dtype_name(DType dtype) noexcept;                 // "BF16"
std::optional<DType> parse_dtype(std::string_view name) noexcept;  // exact, case-sensitive like the format
size_t dtype_size(DType dtype) noexcept;                           // bytes per element
bool dtype_converts_to_f32(DType dtype) noexcept;                  // F32, F16, BF16, F64

// One tensor of a mapped file. `data` is valid while the SafetensorsFile/SafetensorsSet that returned it lives.
struct TensorInfo {
    std::string name;
    DType dtype = DType::F32;
    std::vector<int64_t> shape;       // [] for a scalar
    std::span<const std::byte> data;  // numel * dtype_size bytes, little-endian, row-major
    uint64_t data_begin = 0;          // offsets in the data section, as in the header
    uint64_t data_end = 0;
    int64_t numel() const noexcept;  // 1 for a scalar, 0 if any dimension is 0
};

// "[105, 128]"
std::string shape_to_string(std::span<const int64_t> shape);

// Scalar conversions. f32 -> 16-bit conversions round to nearest even and keep NaN/Inf.
float f16_to_f32(uint16_t bits) noexcept;
float bf16_to_f32(uint16_t bits) noexcept;
uint16_t f32_to_f16(float value) noexcept;
uint16_t f32_to_bf16(float value) noexcept;

// Converts a F32/F16/BF16/F64 tensor to fp32 into `out` (out.size() must equal numel()). Throws
// Error{Unsupported} naming the tensor for other dtypes and Error{Internal} on a size mismatch.
void tensor_to_f32(const TensorInfo& tensor, std::span<float> out);
std::vector<float> tensor_to_f32(const TensorInfo& tensor);

// Largest accepted header, as in the reference library (100 MB).
inline constexpr uint64_t kSafetensorsMaxHeader = 100'000'000;

// One .safetensors file, memory-mapped and validated on open.
class SafetensorsFile {
public:
    // Throws Error{Io} when the file cannot be opened/mapped, Error{InvalidInput} when it is not valid.
    explicit SafetensorsFile(const std::filesystem::path& path);
    ~SafetensorsFile();
    SafetensorsFile(SafetensorsFile&&) noexcept;
    SafetensorsFile& operator=(SafetensorsFile&&) noexcept;

    const std::filesystem::path& path() const noexcept;
    const std::vector<TensorInfo>& tensors() const noexcept;  // in data-offset order
    std::vector<std::string> names() const;                   // in data-offset order
    size_t size() const noexcept;                             // number of tensors
    const TensorInfo* find(std::string_view name) const noexcept;
    // Throws Error{InvalidInput} "FILE: no tensor named 'X'" when absent.
    const TensorInfo& at(std::string_view name) const;
    const std::map<std::string, std::string>& metadata() const noexcept;  // "__metadata__"
    uint64_t file_size() const noexcept;
    uint64_t header_size() const noexcept;  // N, the JSON length
    uint64_t data_size() const noexcept;    // bytes in the data section

private:
    struct Impl;
    std::unique_ptr<Impl> impl_;
};

// The weights of one model: a single file, a set of files, or an index (model.safetensors.index.json)
// plus its shards. Each shard is mapped once. With an index, the weight_map decides which tensors exist
// and where; tensors a shard holds but the index does not list are ignored (as transformers does).
class SafetensorsSet {
public:
    // `path` is a .safetensors file, a *.safetensors.index.json, or a folder holding
    // model.safetensors.index.json or model.safetensors.
    static SafetensorsSet open(const std::filesystem::path& path);
    static SafetensorsSet open_index(const std::filesystem::path& index_json);
    // Several files without an index; a tensor name found in two files is an error naming both.
    static SafetensorsSet open_files(const std::vector<std::filesystem::path>& files);

    SafetensorsSet();
    ~SafetensorsSet();
    SafetensorsSet(SafetensorsSet&&) noexcept;
    SafetensorsSet& operator=(SafetensorsSet&&) noexcept;

    std::vector<std::string> names() const;  // sorted
    size_t size() const noexcept;
    const TensorInfo* find(std::string_view name) const noexcept;
    // Throws Error{InvalidInput} naming the index (or the file(s)) when absent.
    const TensorInfo& at(std::string_view name) const;
    // The file holding a tensor (empty path when absent).
    std::filesystem::path file_of(std::string_view name) const;
    const std::vector<SafetensorsFile>& files() const noexcept;
    const std::filesystem::path& index_path() const noexcept;  // empty without an index
    // What errors about the set should name: the index, or the single file, or the folder.
    std::string source_name() const;
    uint64_t total_bytes() const noexcept;  // sum of tensor bytes over the tensors of the set

private:
    struct Impl;
    std::unique_ptr<Impl> impl_;
};

// A tensor handed to the writer. `data` must hold exactly numel * dtype_size bytes (little-endian).
struct TensorToWrite {
    std::string name;
    DType dtype = DType::F32;
    std::vector<int64_t> shape;
    std::span<const std::byte> data;
};

// The bytes of a file as the reference library writes it: tensors sorted by dtype (largest alignment
// first) then name, data packed in that order; header = compact JSON with "__metadata__" first (its keys
// sorted), then the tensors in data order, padded with spaces to a multiple of 8 bytes. Throws
// Error{Internal} for a duplicate/empty name, a negative dimension or a data size that does not match.
std::string serialize_safetensors(std::span<const TensorToWrite> tensors,
                                  const std::map<std::string, std::string>& metadata = {});

// Same layout, streamed to `path` through an atomic write (temporary + fsync + rename).
void write_safetensors(const std::filesystem::path& path, std::span<const TensorToWrite> tensors,
                       const std::map<std::string, std::string>& metadata = {});

}  // namespace tandem
