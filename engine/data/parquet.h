// SPDX-FileCopyrightText: 2026 The Tandem developers
// SPDX-License-Identifier: GPL-3.0-or-later
// A small Parquet reader for the subset the Hugging Face Hub's datasets use: rows -> JSON objects, which the
// dataset reader (reader.cpp) turns into Records exactly as it does JSON Lines.
// Decisions a reader must know:
//  * Hand-written because Debian 12 packages no Arrow. It covers the Thrift compact footer (FileMetaData,
//    SchemaElement, RowGroup, ColumnChunk/ColumnMetaData, PageHeader: only the fields it needs, the rest
//    skipped), data pages v1 and v2, dictionary pages, PLAIN / PLAIN_DICTIONARY / RLE_DICTIONARY / RLE
//    (booleans) encodings, BOOLEAN / INT32 / INT64 / FLOAT / DOUBLE / BYTE_ARRAY (as strings), nested
//    groups and lists assembled from repetition / definition levels (Dremel), and the codecs UNCOMPRESSED,
//    SNAPPY (libsnappy), GZIP (zlib) and ZSTD (libzstd). Anything else is refused when a needed column uses it.
//  * The whole file is in memory (the caller read it). Every length and offset read from the file is checked
//    against the bytes that remain before it is used, so a lying file is refused, never over-read; sizes that
//    allocate (decompressed pages, value counts) are bounded by what the file's bytes can encode.
//  * Every refusal is Error{InvalidInput} naming the file, and where known the row group, the column and the
//    page, and what to do.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

namespace tandem::parquet {

// The footer of a Parquet file, parsed; the file's bytes are not copied (keep them alive).
class File {
   public:
    // Checks the magic bytes and parses the footer. `path` is only used in messages.
    File(std::string_view bytes, std::string path);
    ~File();
    File(File&&) noexcept;
    File& operator=(File&&) noexcept;

    // Names of the top-level fields (columns as a user sees them: "messages", not "messages.list.element.role").
    std::vector<std::string> fields() const;
    int64_t num_rows() const;
    size_t num_row_groups() const;

    // Every row as a JSON object holding the requested top-level fields (all when `fields` is empty) in schema
    // order. Strings stay bytes as stored (the caller checks UTF-8); lists -> arrays, groups -> objects, nulls
    // -> null; INT32/INT64 -> integers, FLOAT/DOUBLE -> numbers, BOOLEAN -> booleans.
    std::vector<nlohmann::ordered_json> read_rows(const std::vector<std::string>& fields = {}) const;

    struct Impl;

   private:
    std::unique_ptr<Impl> impl_;
};

// True when the bytes start and end with the Parquet magic "PAR1".
bool has_magic(std::string_view bytes) noexcept;

}  // namespace tandem::parquet
