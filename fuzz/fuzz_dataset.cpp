// SPDX-FileCopyrightText: 2026 The Tandem developers
// SPDX-License-Identifier: GPL-3.0-or-later
// Fuzzes the dataset readers (engine/data/reader.cpp): JSON arrays, JSON Lines, ShareGPT / chat / alpaca /
// prompt-completion / text records, plain text and CSV/TSV. The first input byte picks what a user picks:
// the file extension (bits 0-2: .json .jsonl .txt .csv .tsv .ndjson, and none), the text split (bits 3-4)
// and the forced format (bits 5-7: auto or one of the five); the rest is the file.
#include <array>

#include "fuzz_common.h"
#include "tandem/data.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
    if (size < 1) return 0;
    static constexpr std::array<const char*, 8> kNames = {"data.json", "data.jsonl", "data.txt", "data.csv",
                                                          "data.tsv",  "data.ndjson", "data",     "data.JSON"};
    static constexpr std::array<tandem::TextSplit, 4> kSplits = {
        tandem::TextSplit::BlankLines, tandem::TextSplit::Lines, tandem::TextSplit::WholeFile,
        tandem::TextSplit::BlankLines};
    static constexpr std::array<tandem::DatasetFormat, 8> kFormats = {
        tandem::DatasetFormat::Auto,     tandem::DatasetFormat::Alpaca,           tandem::DatasetFormat::Chat,
        tandem::DatasetFormat::ShareGpt, tandem::DatasetFormat::PromptCompletion, tandem::DatasetFormat::Text,
        tandem::DatasetFormat::Auto,     tandem::DatasetFormat::Auto};
    const uint8_t sel = data[0];
    tandem::ReadOptions options;
    options.text_split = kSplits[(sel >> 3) & 3];
    options.format = kFormats[(sel >> 5) & 7];
    const auto path = tandem::fuzz::write_scratch(std::string("ds/") + kNames[sel & 7], data + 1, size - 1);
    tandem::fuzz::run_parser([&] {
        const tandem::Dataset d = tandem::read_dataset(path, options);
        if (d.records.empty()) std::abort();  // read_dataset throws rather than return nothing
        for (const auto& r : d.records) (void)d.location(r.location);
    });
    return 0;
}
