// SPDX-FileCopyrightText: 2026 The Tandem developers
// SPDX-License-Identifier: GPL-3.0-or-later
// Packing tokenized samples into fixed-size micro-batches (T = token_budget tokens each).
// Decisions:
//  * Best-fit-decreasing: samples sorted longest first (a seed-shuffled order breaks ties), each placed in the
//    fullest open batch it fits, found in O(log n) with a multiset of remaining capacities. Samples are never
//    split; one longer than the budget is an error (raise the budget or lower max_seq_len) rather than a
//    silent truncation, since max_seq_len already is the truncation knob.
//  * The order of the batches is shuffled by the seed afterwards, so an epoch does not run longest-first.
//  * Padded mode (packing off) is the baseline the packed mode is measured against: the same struct, one
//    sample per row of T/rows tokens in shuffled order.
#include <algorithm>
#include <numeric>
#include <set>

#include "tandem/data.h"
#include "tandem/error.h"

namespace tandem {

namespace {

constexpr int32_t kIgnore = -100;

int32_t resolve_rows(std::span<const int32_t> lengths, const PackOptions& options) {
    if (options.rows > 0) return options.rows;
    const int32_t longest = lengths.empty() ? 1 : std::max(1, *std::max_element(lengths.begin(), lengths.end()));
    return std::max(1, options.token_budget / longest);
}

[[noreturn]] void too_long(size_t sample, int32_t length, int32_t limit, const char* what) {
    throw_invalid("sample " + std::to_string(sample) + " has " + std::to_string(length) + " tokens, more than the " +
                  what + " of " + std::to_string(limit) +
                  " tokens: raise the micro-batch token budget or lower "
                  "max_seq_len to at most " +
                  std::to_string(limit));
}

}  // namespace

std::vector<std::vector<uint32_t>> plan_batches(std::span<const int32_t> lengths, const PackOptions& options) {
    if (options.token_budget <= 0)
        throw_invalid("the micro-batch token budget must be positive, got " + std::to_string(options.token_budget));
    const size_t n = lengths.size();
    std::vector<uint32_t> order;
    if (options.shuffle) {
        order = shuffled_indices(n, options.seed);
    } else {
        order.resize(n);
        std::iota(order.begin(), order.end(), 0u);
    }
    std::vector<std::vector<uint32_t>> batches;

    if (!options.packing) {
        const int32_t rows = resolve_rows(lengths, options);
        const int32_t row_len = options.token_budget / rows;
        if (row_len <= 0)
            throw_invalid("padded batches: " + std::to_string(rows) + " rows do not fit in a token budget of " +
                          std::to_string(options.token_budget));
        for (size_t k = 0; k < n; ++k) {
            const uint32_t i = order[k];
            if (lengths[i] > row_len) too_long(i, lengths[i], row_len, "padded row length (budget / rows)");
            if (k % rows == 0) batches.emplace_back();
            batches.back().push_back(i);
        }
        return batches;
    }

    std::stable_sort(order.begin(), order.end(), [&](uint32_t a, uint32_t b) { return lengths[a] > lengths[b]; });
    // (remaining capacity, batch index): lower_bound({len, 0}) is the fullest batch the sample fits in, the
    // lowest index among equals, so the plan depends only on the lengths and the seed.
    std::multiset<std::pair<int32_t, uint32_t>> open;
    for (uint32_t i : order) {
        const int32_t len = lengths[i];
        if (len > options.token_budget) too_long(i, len, options.token_budget, "micro-batch token budget");
        if (len <= 0) throw_internal("plan_batches: empty sample " + std::to_string(i));
        auto it = open.lower_bound({len, 0u});
        if (it == open.end()) {
            batches.push_back({i});
            if (options.token_budget - len > 0)
                open.insert({options.token_budget - len, static_cast<uint32_t>(batches.size() - 1)});
            continue;
        }
        const auto [remaining, b] = *it;
        open.erase(it);
        batches[b].push_back(i);
        if (remaining - len > 0) open.insert({remaining - len, b});
    }
    if (options.shuffle) {
        const auto perm = shuffled_indices(batches.size(), options.seed ^ 0x9E3779B97F4A7C15ull);
        std::vector<std::vector<uint32_t>> shuffled(batches.size());
        for (size_t k = 0; k < perm.size(); ++k) shuffled[k] = std::move(batches[perm[k]]);
        batches = std::move(shuffled);
    }
    return batches;
}

PackedBatch make_batch(const TokenizedDataset& data, std::span<const uint32_t> samples, const PackOptions& options) {
    PackedBatch b;
    const int32_t T = options.token_budget;
    b.token_budget = T;
    b.tokens.assign(T, options.pad_id);
    b.labels.assign(T, kIgnore);
    b.position_ids.assign(T, 0);
    b.cu_seqlens.push_back(0);
    if (!options.packing) {
        int32_t rows = options.rows;
        if (rows <= 0) {
            std::vector<int32_t> lengths(data.size());
            for (size_t i = 0; i < data.size(); ++i) lengths[i] = data.length(i);
            rows = resolve_rows(lengths, options);
        }
        b.row_len = T / rows;
        if (static_cast<int32_t>(samples.size()) > rows)
            throw_internal("make_batch: " + std::to_string(samples.size()) + " samples for " + std::to_string(rows) +
                           " rows");
    }
    for (uint32_t s : samples) {
        const auto tok = data.sample_tokens(s);
        const auto lab = data.sample_labels(s);
        const int32_t len = static_cast<int32_t>(tok.size());
        const int32_t offset = b.row_len ? b.num_samples * b.row_len : b.num_tokens;
        const int32_t limit = b.row_len ? b.row_len : T - b.num_tokens;
        if (len > limit) too_long(s, len, b.row_len ? b.row_len : T, b.row_len ? "padded row length" : "budget left");
        std::copy(tok.begin(), tok.end(), b.tokens.begin() + offset);
        std::copy(lab.begin(), lab.end(), b.labels.begin() + offset);
        for (int32_t t = 0; t < len; ++t) b.position_ids[offset + t] = t;
        b.labels[offset] = kIgnore;  // already so in TokenizedDataset; kept here as the invariant's home
        b.num_tokens += len;
        b.cu_seqlens.push_back(b.num_tokens);
        b.samples.push_back(s);
        ++b.num_samples;
        b.max_seqlen = std::max(b.max_seqlen, len);
    }
    b.num_label_tokens =
        static_cast<int32_t>(std::count_if(b.labels.begin(), b.labels.end(), [](int32_t l) { return l != kIgnore; }));
    return b;
}

std::vector<PackedBatch> pack_dataset(const TokenizedDataset& data, const PackOptions& options) {
    std::vector<int32_t> lengths(data.size());
    for (size_t i = 0; i < data.size(); ++i) lengths[i] = data.length(i);
    PackOptions resolved = options;
    if (!options.packing) resolved.rows = resolve_rows(lengths, options);
    const auto plan = plan_batches(lengths, resolved);
    std::vector<PackedBatch> out;
    out.reserve(plan.size());
    for (const auto& batch : plan) out.push_back(make_batch(data, batch, resolved));
    return out;
}

double packing_efficiency(std::span<const int32_t> lengths, const std::vector<std::vector<uint32_t>>& plan,
                          int32_t token_budget) {
    if (plan.empty() || token_budget <= 0) return 0.0;
    int64_t real = 0;
    for (const auto& batch : plan)
        for (uint32_t i : batch) real += lengths[i];
    return static_cast<double>(real) / (static_cast<double>(plan.size()) * token_budget);
}

}  // namespace tandem
