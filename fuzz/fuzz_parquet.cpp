// SPDX-FileCopyrightText: 2026 The Tandem developers
// SPDX-License-Identifier: GPL-3.0-or-later
// Fuzzes the Parquet reader (engine/data/parquet.cpp): the Thrift footer, page headers, dictionary and data
// pages (v1 / v2), RLE / bit-packed levels, the codecs (snappy, gzip, zstd) and the nested-column assembly,
// through the same entry points a dataset read uses: the column list and every row.
#include "data/parquet.h"
#include "fuzz_common.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
    const std::string text = tandem::fuzz::as_string(data, size);
    tandem::fuzz::run_parser([&] {
        const tandem::parquet::File file(text, "data.parquet");
        (void)file.fields();
        (void)file.num_rows();
        (void)file.read_rows();
    });
    return 0;
}
