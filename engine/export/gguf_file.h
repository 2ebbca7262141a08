// SPDX-FileCopyrightText: 2026 The Tandem developers
// SPDX-License-Identifier: GPL-3.0-or-later
// The GGUF v3 container: writing (streamed, one tensor at a time) and reading (validated, for the tests and
// `tandem-cli export`'s own check of what it wrote).
// Layout (little-endian): "GGUF", u32 version 3, u64 tensor count, u64 KV count; the KVs (string key, u32 value
// type, value); the tensor infos (string name, u32 n_dims, i64 ne[n_dims] innermost first, u32 ggml type, u64
// offset into the data section); padding to general.alignment (32 unless the file says otherwise); the data
// section, each tensor starting at an aligned offset. Strings are u64 length + bytes; arrays are u32 element
// type + u64 count + elements.
// Decisions a reader must know:
//  - The writer is told every tensor (name, shape, type) before any data, so the header, offsets and the total
//    size are known up front; data is then appended in the declared order and checked against it.
//  - Shapes are given in row-major order as everywhere else in Tandem ([rows, cols]) and stored reversed (ggml's
//    ne[0] is the row length).
#pragma once

#include <cstdint>
#include <filesystem>
#include <map>
#include <span>
#include <string>
#include <vector>

#include "export/gguf_quant.h"
#include "io/atomic_file.h"

namespace tandem::gguf {

// GGUF value types.
enum class ValueType : uint32_t {
    U8 = 0, I8 = 1, U16 = 2, I16 = 3, U32 = 4, I32 = 5, F32 = 6, BOOL = 7, STRING = 8, ARRAY = 9, U64 = 10,
    I64 = 11, F64 = 12
};

inline constexpr uint32_t kAlignment = 32;

// The header of a file being written: KVs in insertion order, then tensor infos.
class GgufHeader {
public:
    void add_u32(const std::string& key, uint32_t v);
    void add_i32(const std::string& key, int32_t v);
    void add_f32(const std::string& key, float v);
    void add_bool(const std::string& key, bool v);
    void add_string(const std::string& key, const std::string& v);
    void add_strings(const std::string& key, const std::vector<std::string>& v);
    void add_f32s(const std::string& key, const std::vector<float>& v);
    void add_i32s(const std::string& key, const std::vector<int32_t>& v);
    // shape row-major ([out, in] for a weight); returns the tensor's index.
    size_t add_tensor(const std::string& name, const std::vector<int64_t>& shape, GgmlType type);

    struct Tensor {
        std::string name;
        std::vector<int64_t> shape;  // row-major
        GgmlType type;
        uint64_t offset = 0;  // in the data section
        uint64_t bytes = 0;
    };
    const std::vector<Tensor>& tensors() const { return tensors_; }
    size_t kv_count() const { return kv_count_; }
    // The header bytes up to (excluding) the padding before the data section.
    std::string serialize() const;
    // serialize().size() rounded up to the alignment + every tensor's padded bytes.
    uint64_t file_size() const;

private:
    void key(const std::string& k, ValueType t);
    std::string kv_;
    size_t kv_count_ = 0;
    std::vector<Tensor> tensors_;
    uint64_t data_bytes_ = 0;
};

// Writes a GgufHeader and then the tensors' data in order, through an AtomicFileWriter (nothing appears under
// `path` before finish()). Errors are Error{Io} naming the file (a full disk when the write fails).
class GgufStreamWriter {
public:
    GgufStreamWriter(const std::filesystem::path& path, const GgufHeader& header);
    GgufStreamWriter(const GgufStreamWriter&) = delete;
    GgufStreamWriter& operator=(const GgufStreamWriter&) = delete;
    // The next tensor's bytes (exactly header.tensors()[i].bytes, in order); may be given in pieces (rows): a
    // tensor is complete once its byte count is reached.
    void write(std::span<const std::byte> bytes);
    // Checks that every tensor was written, flushes and fsyncs, closes. Error{Internal} when data is missing.
    void finish();
    uint64_t written() const { return pos_; }

private:
    void raw(const void* p, size_t n);
    void pad();
    const GgufHeader& header_;
    AtomicFileWriter out_;
    size_t tensor_ = 0;
    uint64_t in_tensor_ = 0;
    uint64_t pos_ = 0;
};

// A parsed GGUF file (everything but the tensor data, which is read on request).
struct GgufValue {
    ValueType type = ValueType::U8;
    ValueType array_type = ValueType::U8;  // for ARRAY
    // Scalars: integers/bools in i (u64 values above INT64_MAX wrap), floats in f, strings in s.
    int64_t i = 0;
    double f = 0;
    std::string s;
    // Arrays: numbers in fs / is (by kind), strings in ss.
    std::vector<double> fs;
    std::vector<int64_t> is;
    std::vector<std::string> ss;
    uint64_t count = 0;  // array length
};

struct GgufTensorInfo {
    std::string name;
    std::vector<int64_t> ne;  // ggml order: ne[0] innermost
    GgmlType type = GgmlType::F32;
    uint64_t offset = 0;  // in the data section
    uint64_t bytes = 0;   // from the type and ne
};

struct GgufFile {
    uint32_t version = 0;
    std::vector<std::string> key_order;
    std::map<std::string, GgufValue> kv;
    std::vector<GgufTensorInfo> tensors;
    uint32_t alignment = kAlignment;
    uint64_t data_offset = 0;  // where the data section starts in the file
    uint64_t file_size = 0;

    const GgufValue* find(const std::string& key) const;
    const GgufTensorInfo* tensor(const std::string& name) const;
    // A tensor's values as fp32 (dequantized). Error{InvalidInput} for an unknown name.
    std::vector<float> read_f32(const std::filesystem::path& path, const std::string& name) const;
};

// Reads and validates a GGUF file: magic, version 2 or 3, every KV and tensor info well formed (bounded sizes),
// known tensor types, offsets aligned and inside the file, tensors not overlapping. Error{InvalidInput} naming the
// file and what is wrong.
GgufFile read_gguf(const std::filesystem::path& path);

}  // namespace tandem::gguf
