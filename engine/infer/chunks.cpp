// SPDX-FileCopyrightText: 2026 The Tandem developers
// SPDX-License-Identifier: GPL-3.0-or-later
// Feeds and chunks of a forward call (see chunks.h).
#include "infer/chunks.h"

#include <algorithm>
#include <string>

#include "export/peft_adapter.h"
#include "kernels/cpu/rope.h"
#include "model/lora_table.h"
#include "tandem/error.h"

namespace tandem::infer {

LoraConfig infer_plan_lora(const ModelConfig& cfg, int r) {
    LoraConfig l;
    l.r = std::max(1, r);
    l.alpha = l.r;
    l.dropout = 0.0;
    l.target_modules = lora_targets(cfg);
    return l;
}

void check_infer_options(const InferOptions& o, const std::string& where) {
    if (o.num_slots < 1 || o.num_slots > 4096) throw_invalid(where + ": the number of sequences must be 1..4096");
    if (o.chunk < 1) throw_invalid(where + ": the prefill chunk must be at least 1 token");
    if (o.num_slots > o.chunk)
        throw_invalid(where + ": " + std::to_string(o.num_slots) + " sequences need a prefill chunk of at least as many rows");
    if (o.max_len < 0) throw_invalid(where + ": max_len must not be negative");
}

int resolve_max_len(const ModelConfig& cfg, const InferOptions& o) {
    constexpr int64_t kDefaultMaxLen = 4096;
    int64_t m = o.max_len > 0 ? o.max_len : std::min<int64_t>(cfg.max_position_embeddings, kDefaultMaxLen);
    m = std::min<int64_t>(m, cfg.max_position_embeddings);
    return int(m);
}

InferAdapter read_infer_adapter(const std::string& name, const std::filesystem::path& dir, const ModelConfig& cfg,
                                int layers) {
    if (name.empty()) throw_invalid(dir.string() + ": an adapter needs a name");
    PeftAdapter p = read_peft_adapter(dir, cfg);
    InferAdapter a;
    a.name = name;
    a.dir = dir;
    a.config = p.config;
    a.specs = lora_tensor_specs(cfg, p.config);
    a.index = lora_index_of(a.specs, layers);
    for (const LoraTensorSpec& s : a.specs) {
        auto it = p.tensors.find(s.name);
        if (it == p.tensors.end()) throw_invalid((dir / kPeftWeightsName).string() + ": lacks tensor " + s.name);
        a.values.push_back(std::move(it->second));
    }
    return a;
}

void check_feeds(const std::vector<Feed>& feeds, int num_slots, int max_len, int vocab, const std::vector<int>& len) {
    if (feeds.empty() || int(feeds.size()) > num_slots) throw_internal("inference: 1..slots feeds per call");
    std::vector<uint8_t> used(size_t(num_slots), 0);
    for (const Feed& f : feeds) {
        if (f.slot < 0 || f.slot >= num_slots) throw_internal("inference: feed slot out of range");
        if (used[size_t(f.slot)]++) throw_internal("inference: two feeds for one slot in one call");
        if (f.tokens.empty()) throw_internal("inference: an empty feed");
        const int64_t end = int64_t(len[size_t(f.slot)]) + int64_t(f.tokens.size());
        if (end > max_len)
            throw_invalid("inference: a sequence of " + std::to_string(end) + " tokens exceeds the context of " +
                          std::to_string(max_len) + " positions this session holds per sequence");
        for (int32_t t : f.tokens)
            if (t < 0 || t >= vocab)
                throw_invalid("inference: token id " + std::to_string(t) + " is outside the model's vocabulary [0, " +
                              std::to_string(vocab) + ")");
    }
}

Chunk next_chunk(const std::vector<Feed>& feeds, std::vector<size_t>& done, size_t& next, int Tmax, int M,
                 int32_t* hist, std::vector<int>& len, int32_t* tok, int32_t* pos, int32_t* slot, int32_t* cu) {
    Chunk c;
    cu[0] = 0;
    for (size_t i = next; i < feeds.size() && c.T < Tmax; ++i) {
        const Feed& f = feeds[i];
        const int start = len[size_t(f.slot)];
        const int n = int(std::min<size_t>(f.tokens.size() - done[i], size_t(Tmax - c.T)));
        if (start != 0) c.fresh = false;
        int32_t* h = hist + size_t(f.slot) * size_t(M);
        for (int r = 0; r < n; ++r) {
            const int32_t t = f.tokens[done[i] + size_t(r)];
            tok[size_t(c.T + r)] = t;
            pos[size_t(c.T + r)] = start + r;
            slot[size_t(c.T + r)] = f.slot;
            h[start + r] = t;
        }
        c.segments.push_back({f.slot, start, n, start - int(done[i]) + int(f.tokens.size())});
        c.T += n;
        cu[size_t(++c.S)] = c.T;
        c.longest = std::max(c.longest, start + n);
        done[i] += size_t(n);
        len[size_t(f.slot)] += n;
        if (done[i] == f.tokens.size()) c.ends.push_back({i, c.T - 1});
    }
    while (next < feeds.size() && done[next] == feeds[next].tokens.size()) ++next;
    return c;
}

void chunk_rope_rows(const Chunk& c, const int32_t* pos, int long_from, int32_t* rows) {
    int r = 0;
    for (const Chunk::Segment& g : c.segments)
        for (int k = 0; k < g.n; ++k, ++r) rows[r] = cpu::rope_row(long_from, pos[r], g.end);
}

std::vector<AdapterRun> adapter_runs(const std::vector<Feed>& feeds, const std::vector<std::string>& adapters) {
    if (adapters.size() != 1 && adapters.size() != feeds.size())
        throw_internal("inference: " + std::to_string(adapters.size()) + " adapter names for " +
                       std::to_string(feeds.size()) + " feeds (one, or one per feed)");
    std::vector<AdapterRun> runs;
    for (size_t i = 0; i < feeds.size(); ++i) {
        const std::string& a = adapters.size() == 1 ? adapters[0] : adapters[i];
        if (runs.empty() || runs.back().adapter != a) {
            for (const AdapterRun& r : runs)
                if (r.adapter == a) throw_internal("inference: the feeds of adapter '" + a + "' are not consecutive");
            runs.push_back({a, int(i), 0});
        }
        ++runs.back().count;
    }
    if (runs.empty()) runs.push_back({adapters.empty() ? std::string() : adapters[0], 0, 0});
    if (runs.size() > 1)
        for (const Feed& f : feeds)  // (ChatSession keeps mixture-of-experts models to one adapter per call)
            if (f.tokens.size() != 1)
                throw_internal("inference: several adapters in one forward call need one token per feed (a decode step)");
    return runs;
}

}  // namespace tandem::infer
