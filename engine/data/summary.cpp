// SPDX-FileCopyrightText: 2026 The Tandem developers
// SPDX-License-Identifier: GPL-3.0-or-later
// DataSummary: what `tandem-cli data` prints (text and JSON) and the Data page shows.
#include <algorithm>
#include <cmath>
#include <sstream>

#include "tandem/data.h"

namespace tandem {

LengthStats length_stats(std::vector<int32_t> lengths) {
    LengthStats s;
    if (lengths.empty()) return s;
    std::sort(lengths.begin(), lengths.end());
    const size_t n = lengths.size();
    s.count = static_cast<int64_t>(n);
    s.min = lengths.front();
    s.max = lengths.back();
    double sum = 0;
    for (int32_t l : lengths) sum += l;
    s.mean = sum / static_cast<double>(n);
    s.median = lengths[(n - 1) / 2];  // lower median: always a real sample length
    // Nearest-rank percentile: the smallest length with at least 95% of the samples at or below it.
    const size_t rank = static_cast<size_t>(std::ceil(0.95 * static_cast<double>(n)));
    s.p95 = lengths[std::max<size_t>(rank, 1) - 1];
    return s;
}

DataSummary summarize(const Dataset& dataset, const TokenizedDataset& tokens, const PackOptions& options) {
    DataSummary s;
    s.path = dataset.files.empty() ? std::string() : dataset.files[0].string();
    s.format = dataset.format;
    s.template_name = tokens.template_name;
    s.total_records = dataset.total_records;
    s.invalid_records = dataset.invalid.count + tokens.invalid.count;
    s.valid_records = s.total_records - s.invalid_records;
    s.invalid_by_reason = dataset.invalid.by_reason;
    for (const auto& [k, n] : tokens.invalid.by_reason) s.invalid_by_reason[k] += n;
    s.first_invalid = dataset.invalid.first;
    for (const auto& r : tokens.invalid.first)
        if (s.first_invalid.size() < std::max<size_t>(dataset.invalid.max_kept, 1)) s.first_invalid.push_back(r);
    s.samples = static_cast<int64_t>(tokens.size());
    s.truncated = tokens.truncated;
    s.dropped = tokens.dropped;
    s.split_conversations = tokens.split_conversations;
    std::vector<int32_t> lengths(tokens.size());
    for (size_t i = 0; i < tokens.size(); ++i) lengths[i] = tokens.length(i);
    s.total_tokens = static_cast<int64_t>(tokens.tokens.size());
    s.trained_tokens = tokens.trained_tokens();
    s.packing = options.packing;
    s.token_budget = options.token_budget;
    if (!lengths.empty()) {
        PackOptions resolved = options;
        if (!options.packing && options.rows <= 0) {
            const int32_t longest = std::max(1, *std::max_element(lengths.begin(), lengths.end()));
            resolved.rows = std::max(1, options.token_budget / longest);
        }
        const auto plan = plan_batches(lengths, resolved);
        s.batches = static_cast<int64_t>(plan.size());
        s.packing_efficiency = packing_efficiency(lengths, plan, options.token_budget);
    }
    s.lengths = length_stats(std::move(lengths));
    return s;
}

nlohmann::json to_json(const DataSummary& s) {
    nlohmann::json first = nlohmann::json::array();
    for (const auto& r : s.first_invalid)
        first.push_back({{"location", r.location}, {"reason", invalid_reason_name(r.reason)}, {"message", r.message}});
    return {
        {"path", s.path},
        {"format", dataset_format_name(s.format)},
        {"template", s.template_name},
        {"records",
         {{"total", s.total_records},
          {"valid", s.valid_records},
          {"invalid", s.invalid_records},
          {"invalid_by_reason", s.invalid_by_reason},
          {"first_invalid", first}}},
        {"samples",
         {{"count", s.samples},
          {"truncated", s.truncated},
          {"dropped", s.dropped},
          {"split_conversations", s.split_conversations}}},
        {"tokens",
         {{"total", s.total_tokens},
          {"trained", s.trained_tokens},
          {"per_sample",
           {{"min", s.lengths.min},
            {"mean", s.lengths.mean},
            {"median", s.lengths.median},
            {"p95", s.lengths.p95},
            {"max", s.lengths.max}}}}},
        {"batches",
         {{"packing", s.packing},
          {"token_budget", s.token_budget},
          {"count", s.batches},
          {"efficiency", s.packing_efficiency}}},
        {"validation",
         {{"path", s.validation_path},
          {"records", s.validation_records},
          {"samples", s.validation_samples},
          {"batches", s.validation_batches}}},
    };
}

std::string to_text(const DataSummary& s) {
    std::ostringstream o;
    o.setf(std::ios::fixed);
    o.precision(1);
    o << "dataset:    " << s.path << "\n"
      << "format:     " << dataset_format_name(s.format) << "\n";
    if (!s.template_name.empty()) o << "template:   " << s.template_name << "\n";
    o << "records:    " << s.total_records << " total, " << s.valid_records << " valid, " << s.invalid_records
      << " invalid\n";
    for (const auto& [k, n] : s.invalid_by_reason) o << "  " << k << ": " << n << "\n";
    for (const auto& r : s.first_invalid) o << "  " << r.location << ": " << r.message << "\n";
    o << "samples:    " << s.samples << " (" << s.truncated << " truncated, " << s.dropped << " dropped";
    if (s.split_conversations) o << ", " << s.split_conversations << " conversations split per turn";
    o << ")\n"
      << "tokens:     " << s.total_tokens << " total, " << s.trained_tokens << " trained\n"
      << "per sample: min " << s.lengths.min << ", mean " << s.lengths.mean << ", median " << s.lengths.median
      << ", p95 " << s.lengths.p95 << ", max " << s.lengths.max << "\n"
      << "batches:    " << s.batches << " of " << s.token_budget << " tokens, " << (s.packing ? "packed" : "padded")
      << ", efficiency " << s.packing_efficiency * 100 << "%\n";
    if (s.validation_records)
        o << "validation: " << s.validation_records << " records, " << s.validation_samples << " samples, "
          << s.validation_batches << " batches (" << s.validation_path << ")\n";
    return o.str();
}

}  // namespace tandem
