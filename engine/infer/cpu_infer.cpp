// SPDX-FileCopyrightText: 2026 The Tandem developers
// SPDX-License-Identifier: GPL-3.0-or-later
// CpuInferModel (see cpu_infer.h): loading, the plan with the cache arena, adapters, and forward calls through
// Decoder<CpuBackend> with the inference runtime. Dimension legend: cpu_infer.h.
// The weights load as CpuModel's (load_weights_fp32, model/quant4_load.h).
#include "infer/cpu_infer.h"

#include <algorithm>
#include <cstring>
#include <string>

#include "backend/cpu/backend.h"
#include "infer/chunks.h"
#include "infer/infer_runtime.h"
#include "kernels/cpu/kv_cache.h"
#include "model/decoder.h"
#include "model/quant4_load.h"
#include "tandem/error.h"
#include "tandem/model_dir.h"

namespace tandem::infer {
namespace {

constexpr int kCeChunkRows = 64;


struct CachePlan {
    ArenaLayout arena;
    int k = -1, v = -1, tokens = -1, logits = -1;
};

CachePlan cache_plan(const Dims& d, int N, int M) {
    CachePlan c;
    const size_t rows = size_t(N) * size_t(d.L) * size_t(M);
    c.k = c.arena.reserve(rows * size_t(d.KV) * sizeof(float), "kv cache: k");
    c.v = c.arena.reserve(rows * size_t(d.KV) * sizeof(float), "kv cache: v");
    c.tokens = c.arena.reserve(size_t(N) * size_t(M) * sizeof(int32_t), "kv cache: token history");
    c.logits = c.arena.reserve(size_t(N) * size_t(d.V) * sizeof(float), "next-token logits");
    return c;
}

ModelPlan decoder_plan(const Dims& d, const ModelConfig& cfg, int r) {
    const LoraConfig l = infer_plan_lora(cfg, r);
    const auto specs = lora_tensor_specs(cfg, l);
    PlanTraits tr;
    tr.act_bytes = sizeof(float);
    tr.attention_stats_bytes = size_t(d.Hq) * size_t(d.T) * sizeof(float);
    tr.ce_workspace = size_t(d.K) * size_t(d.V) * sizeof(float);
    return make_plan(d, specs, lora_index_of(specs, d.L), CheckpointPolicy::SmartSingle, tr);
}


}  // namespace

struct CpuInferModel::Impl final : InferRuntime<CpuBackend> {
    std::filesystem::path dir;
    ModelConfig cfg;
    InferOptions opt;
    Dims d;
    int N = 1, M = 0, planned_rank = 1;
    cpu::RopeTable rope, rope_local;
    ModelPlan y;
    CachePlan cp;
    Decoder<CpuBackend> dec;
    std::vector<float> weights_mem, acts_mem, work_mem, cache_mem;
    std::map<std::string, InferAdapter> adapters;
    std::vector<int> len;  // [N] tokens held per slot
    // The rows of the current forward chunk: tokens, positions, cu_seqlens (one sample per feed segment) and
    // slots; `fresh`: every segment starts at position 0 (packed causal attention) or not (cache attention).
    std::vector<int32_t> row_tok, row_pos, row_slot, cu;
    std::vector<int32_t> row_rope;  // [T] the RoPE table's rows of row_pos (a LongRoPE table with both factor sets)
    bool fresh = false;

    float* kc() { return cp.arena.ptr<float>(cache_mem.data(), cp.k); }
    float* vc() { return cp.arena.ptr<float>(cache_mem.data(), cp.v); }
    int32_t* hist() { return cp.arena.ptr<int32_t>(cache_mem.data(), cp.tokens); }
    float* logits() { return cp.arena.ptr<float>(cache_mem.data(), cp.logits); }

    void allocate_decoder(int r) {
        planned_rank = std::max(1, r);
        d.R = planned_rank;
        y = decoder_plan(d, cfg, planned_rank);
        acts_mem.assign(y.acts.alloc_size() / sizeof(float), 0.0f);
        work_mem.assign(y.work.alloc_size() / sizeof(float), 0.0f);
    }

    void bind() { dec.bind(y, weights_mem.data(), acts_mem.data(), work_mem.data()); }

    using Table = std::vector<std::array<LoraRef<CpuBackend>, kNumModules>>;
    std::map<std::string, Table> tables;  // per adapter, built on first use (dropped when adapters change)

    const Table& table_of(const std::string& name) {
        auto it = tables.find(name);
        if (it != tables.end()) return it->second;
        const InferAdapter& a = adapters.at(name);
        Table t(size_t(d.L));
        for (int l = 0; l < d.L; ++l)
            for (int m = 0; m < kNumModules; ++m) {
                const LoraSlot& s = a.index[size_t(l)][size_t(m)];
                if (s.a < 0) continue;
                const float* A = a.values[size_t(s.a)].data();
                const float* B = a.values[size_t(s.a) + 1].data() + s.b_row * a.config.r;
                t[size_t(l)][size_t(m)] = {A, B, nullptr, nullptr, s.drop};
            }
        return tables.emplace(name, std::move(t)).first->second;
    }

    void bind_adapter(const std::string& name) {
        dec.lora_rows.clear();
        dec.lora.assign(size_t(d.L), {});
        dec.d.R = planned_rank;
        dec.lora_scaling = 1.0f;
        if (name.empty()) return;
        const InferAdapter& a = adapters.at(name);
        dec.d.R = a.config.r;
        dec.lora_scaling = float(a.config.scaling());
        dec.lora = table_of(name);
    }

    // Several adapters in one decode step: each run of feeds (= rows) with its own table.
    void bind_rows(const std::vector<AdapterRun>& runs) {
        dec.lora.assign(size_t(d.L), {});
        dec.d.R = planned_rank;
        dec.lora_scaling = 1.0f;
        dec.lora_rows.clear();
        for (const AdapterRun& r : runs) {
            typename Decoder<CpuBackend>::LoraRows g;
            g.r0 = r.first;
            g.rows = r.count;
            if (!r.adapter.empty()) {
                const InferAdapter& a = adapters.at(r.adapter);
                g.table = &table_of(r.adapter);
                g.R = a.config.r;
                g.scaling = float(a.config.scaling());
            }
            dec.lora_rows.push_back(g);
        }
    }

    // DecoderRuntime: the cache write, then packed causal attention (fresh chunk) or attention on the cache.
    void attention_forward(int l, LayerActs<CpuBackend>& a, const Step& s) override {
        cpu::kv_cache_write(kc(), vc(), a.kr, a.v, row_slot.data(), row_pos.data(), s.T, l, N, d.L, M, d.KV);
        const float* sinks = dec.layers[size_t(l)].sinks;
        if (fresh) {
            CpuBackend::attention_forward(a.att, static_cast<float*>(a.stats), a.qr, a.kr, a.v, s.cu_seqlens, s.S,
                                          s.T, d.Hq, d.Hkv, d.D, d.attn_scale, s.max_seqlen, d.windows[size_t(l)],
                                          d.attn_softcap);
            if (sinks) CpuBackend::attention_sinks(a.att, static_cast<float*>(a.stats), sinks, s.T, d.Hq, d.D);
        } else {
            cpu::decode_attention(a.att, a.qr, kc(), vc(), row_slot.data(), row_pos.data(), s.T, l, N, d.L, M, d.Hq,
                                  d.Hkv, d.D, d.attn_scale, d.windows[size_t(l)], d.attn_softcap, sinks);
        }
    }
};

InferBytes CpuInferModel::plan(const ModelConfig& cfg, const InferOptions& options, int lora_rank) {
    check_infer_options(options, "inference plan");
    const LoraConfig l = infer_plan_lora(cfg, lora_rank);
    validate_model(cfg, l, "inference plan");
    const Dims d = make_dims(cfg, l, options.chunk, 0, kCeChunkRows);
    const ModelPlan y = decoder_plan(d, cfg, lora_rank);
    const CachePlan c = cache_plan(d, options.num_slots, resolve_max_len(cfg, options));
    InferBytes b;
    b.weights = y.bytes.weights;
    b.activations = y.bytes.activations;
    b.workspace = y.bytes.workspace;
    b.kv_cache = c.arena.size();
    return b;
}

CpuInferModel CpuInferModel::load(const std::filesystem::path& model_dir, const InferOptions& options) {
    const std::string where = model_dir.string();
    check_infer_options(options, where);
    ModelDir md = open_model_dir(model_dir);
    const ModelConfig cfg = options.quantize_4bit ? with_quantization(md.info.config) : md.info.config;
    validate_model(cfg, infer_plan_lora(cfg, 1), where);

    auto impl = std::make_unique<Impl>();
    Impl& m = *impl;
    m.dir = model_dir;
    m.cfg = cfg;
    m.opt = options;
    m.d = make_dims(cfg, infer_plan_lora(cfg, 1), options.chunk, 0, kCeChunkRows);
    m.N = options.num_slots;
    m.M = resolve_max_len(cfg, options);
    if (m.M < 2) throw_invalid(where + ": a context of " + std::to_string(m.M) + " positions is too short to generate");
    const Dims& d = m.d;
    m.rope = cpu::rope_table_build(int(cfg.rotary_dim()), cfg.rope_theta, cfg.rope_scaling, int(cfg.max_position_embeddings));
    if (cfg.rope_local_theta > 0)
        m.rope_local = cpu::rope_table_build(int(cfg.rotary_dim()), cfg.rope_local_theta, RopeScaling{}, int(cfg.max_position_embeddings));
    m.allocate_decoder(1);
    m.weights_mem.assign(m.y.weights.alloc_size() / sizeof(float), 0.0f);
    m.cp = cache_plan(d, m.N, m.M);
    m.cache_mem.assign(m.cp.arena.alloc_size() / sizeof(float), 0.0f);
    m.len.assign(size_t(m.N), 0);
    m.row_tok.resize(size_t(d.T));
    m.row_pos.resize(size_t(d.T));
    m.row_rope.resize(size_t(d.T));
    m.row_slot.resize(size_t(d.T));
    m.cu.resize(size_t(d.T) + 1);
    m.dec.d = d;
    m.dec.dropout = 0.0;
    m.dec.embed_scale = d.embed_scale;
    m.dec.rope = &m.rope;
    if (cfg.rope_local_theta > 0) m.dec.rope_local = &m.rope_local;
    m.dec.rt = &m;
    m.bind();

    // Weights, converted to fp32 into their pieces of the weights arena (as CpuModel::load).
    load_weights_fp32(m.y, m.weights_mem.data(), d, md.weights);
    return CpuInferModel(std::move(impl));
}

CpuInferModel::CpuInferModel(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
CpuInferModel::CpuInferModel(CpuInferModel&&) noexcept = default;
CpuInferModel& CpuInferModel::operator=(CpuInferModel&&) noexcept = default;
CpuInferModel::~CpuInferModel() = default;

const ModelConfig& CpuInferModel::config() const { return impl_->cfg; }
const std::filesystem::path& CpuInferModel::model_dir() const { return impl_->dir; }
int CpuInferModel::num_slots() const { return impl_->N; }
int CpuInferModel::max_len() const { return impl_->M; }
int CpuInferModel::vocab() const { return impl_->d.V; }

InferBytes CpuInferModel::bytes() const {
    const Impl& m = *impl_;
    InferBytes b;
    b.weights = m.y.bytes.weights;
    b.activations = m.y.bytes.activations;
    b.workspace = m.y.bytes.workspace;
    b.kv_cache = m.cp.arena.size();
    for (const auto& [name, a] : m.adapters)
        for (const auto& v : a.values) b.adapters += v.size() * sizeof(float);
    return b;
}

void CpuInferModel::add_adapter(const std::string& name, const std::filesystem::path& dir) {
    Impl& m = *impl_;
    InferAdapter a = read_infer_adapter(name, dir, m.cfg, m.d.L);
    if (a.config.r > m.planned_rank) {  // the LoRA tmp pieces grow: re-plan the activations
        m.allocate_decoder(a.config.r);
        m.bind();
    }
    m.adapters[name] = std::move(a);
    m.tables.clear();  // a replaced adapter's values moved
}

void CpuInferModel::remove_adapter(const std::string& name) {
    impl_->adapters.erase(name);
    impl_->tables.clear();
}
bool CpuInferModel::has_adapter(const std::string& name) const { return impl_->adapters.count(name) > 0; }

std::vector<std::string> CpuInferModel::adapter_names() const {
    std::vector<std::string> out;
    for (const auto& [name, a] : impl_->adapters) out.push_back(name);
    return out;
}

const InferAdapter& CpuInferModel::adapter(const std::string& name) const {
    auto it = impl_->adapters.find(name);
    if (it == impl_->adapters.end()) throw_invalid("inference: no adapter named '" + name + "' is loaded");
    return it->second;
}

int CpuInferModel::length(int slot) const { return impl_->len.at(size_t(slot)); }
const int32_t* CpuInferModel::tokens(int slot) const {
    Impl& m = *impl_;
    return m.hist() + size_t(slot) * size_t(m.M);
}
void CpuInferModel::truncate(int slot, int length) {
    Impl& m = *impl_;
    if (slot < 0 || slot >= m.N) throw_internal("inference: slot " + std::to_string(slot) + " out of range");
    m.len[size_t(slot)] = std::clamp(length, 0, m.len[size_t(slot)]);
}

const float* CpuInferModel::forward(const std::vector<Feed>& feeds, const std::vector<std::string>& adapters,
                                    const std::atomic<bool>* cancel) {
    Impl& m = *impl_;
    const Dims& d = m.d;
    check_feeds(feeds, m.N, m.M, d.V, m.len);
    const std::vector<AdapterRun> runs = adapter_runs(feeds, adapters);
    for (const AdapterRun& r : runs)
        if (!r.adapter.empty() && !m.adapters.count(r.adapter))
            throw_invalid("inference: no adapter named '" + r.adapter + "' is loaded");
    if (runs.size() == 1)
        m.bind_adapter(runs[0].adapter);
    else
        m.bind_rows(runs);
    struct Unbind {
        Decoder<CpuBackend>& dec;
        ~Unbind() { dec.lora_rows.clear(); }
    } unbind{m.dec};
    std::vector<size_t> done(feeds.size(), 0);  // tokens of each feed already run
    size_t next = 0;                             // the first feed with tokens left
    float* out = m.logits();
    while (next < feeds.size()) {
        if (cancel && cancel->load(std::memory_order_relaxed)) return nullptr;
        const Chunk c = next_chunk(feeds, done, next, d.T, m.M, m.hist(), m.len, m.row_tok.data(), m.row_pos.data(),
                                   m.row_slot.data(), m.cu.data());
        const int T = c.T, S = c.S, longest = c.longest;
        const bool fresh = c.fresh;
        const auto& ends = c.ends;
        m.fresh = fresh;
        Step& s = m.dec.step;
        s = Step{};
        s.T = T;
        s.S = S;
        s.max_seqlen = longest;
        s.tokens = m.row_tok.data();
        s.positions = m.row_pos.data();
        if (m.rope.long_from > 0) {
            chunk_rope_rows(c, m.row_pos.data(), m.rope.long_from, m.row_rope.data());
            s.positions = m.row_rope.data();
        }
        s.cu_seqlens = m.cu.data();
        m.dec.forward(false);
        if (int(ends.size()) == T) {  // every row ends a feed (decode): one lm_head call, rows in feed order
            bool in_order = true;
            for (size_t e = 0; e < ends.size(); ++e) in_order &= ends[e].first == e && ends[e].second == int(e);
            if (in_order) {
                CpuBackend::lm_head_logits(out, m.dec.lnf, m.dec.head, T, d.C, d.V, d.final_softcap);
                continue;
            }
        }
        for (const auto& [i, row] : ends)
            CpuBackend::lm_head_logits(out + i * size_t(d.V), m.dec.lnf + int64_t(row) * d.C, m.dec.head, 1, d.C, d.V,
                                       d.final_softcap);
    }
    return out;
}

std::vector<int32_t> CpuInferModel::sample(const std::vector<Feed>& feeds,
                                           const std::vector<cpu::SamplingParams>& params,
                                           const std::vector<int64_t>& draw) {
    Impl& m = *impl_;
    const int T = int(feeds.size());
    if (T == 0 || params.size() != feeds.size() || draw.size() != feeds.size())
        throw_internal("inference: sample needs one parameter set and draw index per feed");
    std::vector<int32_t> slot(static_cast<size_t>(T)), len(static_cast<size_t>(T)), out(static_cast<size_t>(T));
    bool penalty = false;
    for (int t = 0; t < T; ++t) {
        slot[size_t(t)] = feeds[size_t(t)].slot;
        len[size_t(t)] = m.len[size_t(feeds[size_t(t)].slot)];
        penalty |= params[size_t(t)].repetition_penalty != 1.0f;
    }
    if (penalty)
        cpu::repetition_penalty(m.logits(), m.hist(), slot.data(), len.data(), params.data(), T, m.d.V, m.N, m.M);
    cpu::sample_tokens(out.data(), m.logits(), params.data(), draw.data(), T, m.d.V);
    return out;
}

}  // namespace tandem::infer
