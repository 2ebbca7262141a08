// SPDX-FileCopyrightText: 2026 The Tandem developers
// SPDX-License-Identifier: GPL-3.0-or-later
// prepare_data: read -> train/validation split -> tokenize -> summary, for tandem-cli and the trainer.
// The validation part comes from a second file when one is given, else from validation_fraction of the
// records (split by record, before rendering, so a conversation split per turn never straddles both parts).
#include <algorithm>

#include "tandem/data.h"
#include "tandem/error.h"

namespace tandem {

PreparedData prepare_data(const DataOptions& options, const TextCodec& codec) {
    PreparedData out;
    Dataset all = read_dataset(options.path, options.read);
    if (!options.validation_path.empty()) {
        out.train = std::move(all);
        out.validation = read_dataset(options.validation_path, options.read);
    } else if (options.validation_fraction > 0) {
        auto split = split_dataset(std::move(all), options.validation_fraction, options.seed);
        out.train = std::move(split.train);
        out.validation = std::move(split.validation);
    } else {
        out.train = std::move(all);
    }
    out.train_tokens = tokenize_dataset(out.train, codec, options.render);
    if (!out.validation.records.empty())
        out.validation_tokens = tokenize_dataset(out.validation, codec, options.render);
    out.summary = summarize(out.train, out.train_tokens, options.pack);
    if (!out.validation.records.empty()) {
        out.summary.validation_path =
            options.validation_path.empty() ? options.path.string() : options.validation_path.string();
        out.summary.validation_records = static_cast<int64_t>(out.validation.records.size());
        out.summary.validation_samples = static_cast<int64_t>(out.validation_tokens.size());
        std::vector<int32_t> lengths(out.validation_tokens.size());
        for (size_t i = 0; i < lengths.size(); ++i) lengths[i] = out.validation_tokens.length(i);
        PackOptions pack = options.pack;
        pack.shuffle = false;
        if (!pack.packing && pack.rows <= 0) {
            int32_t longest = 1;
            for (int32_t l : lengths) longest = std::max(longest, l);
            pack.rows = std::max(1, pack.token_budget / longest);
        }
        out.summary.validation_batches = static_cast<int64_t>(plan_batches(lengths, pack).size());
    }
    return out;
}

}  // namespace tandem
