// SPDX-FileCopyrightText: 2026 The Tandem developers
// SPDX-License-Identifier: GPL-3.0-or-later
// CudaInferModel (see cuda_infer.h): a CudaModel's weights and arenas with an inference runtime behind the
// decoder's attention hook, the KV cache, device sampling. Dimension legend: infer/cpu_infer.h.
#include "infer/cuda_infer.h"

#include "tandem/error.h"

#if TANDEM_WITH_CUDA

#include <algorithm>
#include <cstring>
#include <functional>
#include <map>
#include <set>
#include <optional>
#include <string>

#include "backend/cuda/backend.h"
#include "core/cuda/context.h"
#include "core/cuda/memory.h"
#include "core/cuda/owners.h"
#include "infer/chunks.h"
#include "infer/infer_runtime.h"
#include "kernels/cuda/kv_cache.h"
#include "kernels/cuda/sampling.h"
#include "model/cuda_model.h"
#include "model/cuda_model_impl.h"
#include "model/decoder.h"
#include "tandem/safetensors.h"

namespace tandem::infer {
namespace {

constexpr int kDefaultRank = 64;  // LoRA tmp pieces planned for adapters up to this rank (a larger one reloads)

using cuda::bf16;

template <class T>
void upload(T* dst, const T* src, size_t n) {
    if (n) TANDEM_CUDA_CHECK(cudaMemcpyAsync(dst, src, n * sizeof(T), cudaMemcpyHostToDevice, cuda::context().stream));
}

// One adapter on the device: every LoRA tensor of its table, bf16, one after the other.
struct DeviceAdapter {
    InferAdapter info;
    cuda::DeviceBuffer values;
    std::vector<size_t> offset;  // [specs] element offset of each tensor
};

class CudaInferModel final : public InferModel, public InferRuntime<CudaBackend> {
public:
    CudaInferModel(const std::filesystem::path& dir, const InferOptions& o) : dir_(dir), opt_(o) {
        check_infer_options(o, dir.string());
        M_ = resolve_max_len(load_model_config(dir), o);  // before the load: the RoPE table serves M_ positions
        load_model(kDefaultRank);
        const Dims& d = dims();
        N_ = o.num_slots;
        if (M_ < 2) throw_invalid(dir.string() + ": a context of " + std::to_string(M_) + " positions is too short");
        const size_t cache = size_t(N_) * size_t(d.L) * size_t(M_) * size_t(d.KV);
        kc_ = cuda::DeviceBuffer(cache * sizeof(bf16), "kv cache: k");
        vc_ = cuda::DeviceBuffer(cache * sizeof(bf16), "kv cache: v");
        hist_dev_ = cuda::DeviceBuffer(size_t(N_) * size_t(M_) * sizeof(int32_t), "kv cache: token history");
        logits_ = cuda::DeviceBuffer(size_t(N_) * size_t(d.V) * sizeof(float), "next-token logits");
        const int T = d.T;
        rows_ = cuda::DeviceBuffer((5 * size_t(T) + 1) * sizeof(int32_t), "inference rows");
        ws_bytes_ = cuda::decode_attention_workspace(T, d.Hq, d.Hkv, d.D, M_);
        if (ws_bytes_) ws_ = cuda::DeviceBuffer(ws_bytes_, "decode attention workspace");
        sample_ = cuda::DeviceBuffer(size_t(N_) * (sizeof(SamplingParams) + sizeof(int64_t) + 3 * sizeof(int32_t)) + 256,
                                     "sampling state");
        hist_.assign(size_t(N_) * size_t(M_), 0);
        row_tok_.resize(size_t(T));
        row_pos_host_.resize(size_t(T));
        row_rope_host_.resize(size_t(T));
        row_slot_host_.resize(size_t(T));
        cu_host_.resize(size_t(T) + 1);
        len_.assign(size_t(N_), 0);
        TANDEM_CUDA_CHECK(cudaMemsetAsync(hist_dev_.data(), 0, hist_dev_.bytes(), cuda::context().stream));
        cuda::synchronize();
    }

    // InferModel
    const ModelConfig& config() const override { return model_->config(); }
    int num_slots() const override { return N_; }
    int max_len() const override { return M_; }
    int vocab() const override { return int(dims().V); }
    std::string device_name() const override { return "CUDA"; }
    InferBytes bytes() const override {
        InferBytes b;
        const CudaMemoryPlan p = const_cast<CudaModel&>(*model_).memory();
        b.weights = p.weights;
        b.activations = p.activations;
        b.workspace = p.workspace + ws_bytes_;
        b.kv_cache = kc_.bytes() + vc_.bytes() + hist_dev_.bytes() + logits_.bytes();
        for (const auto& [name, a] : adapters_) b.adapters += a.values.bytes();
        return b;
    }
    void add_adapter(const std::string& name, const std::filesystem::path& dir) override {
        DeviceAdapter a;
        a.info = read_infer_adapter(name, dir, model_->config(), dims().L);
        std::vector<uint16_t> host;
        for (std::vector<float>& v : a.info.values) {
            // Each tensor at a multiple of kLoraAlign elements (128 bytes), as in the training LoRA regions: the
            // grouped GEMMs of the experts' LoRA take their vectorised path only with 16-byte aligned operands.
            host.resize(size_t(round_up(int64_t(host.size()), kLoraAlign)), 0);
            a.offset.push_back(host.size());
            for (float x : v) host.push_back(f32_to_bf16(x));
            v = {};  // the device copy is what runs
        }
        a.values = cuda::DeviceBuffer(std::max<size_t>(host.size(), 1) * sizeof(uint16_t), "adapter (bf16)");
        upload(static_cast<uint16_t*>(a.values.data()), host.data(), host.size());
        cuda::synchronize();  // `host` goes out of scope
        drop_graphs();  // they hold the replaced adapter's (or the old model's) pointers
        if (a.info.config.r > planned_rank_) load_model(a.info.config.r);  // larger LoRA tmp pieces
        adapters_.erase(name);
        adapters_.emplace(name, std::move(a));
        tables_.clear();
    }
    void remove_adapter(const std::string& name) override {
        drop_graphs();
        adapters_.erase(name);
        tables_.clear();
    }
    bool has_adapter(const std::string& name) const override { return adapters_.count(name) > 0; }
    std::vector<std::string> adapter_names() const override {
        std::vector<std::string> out;
        for (const auto& [name, a] : adapters_) out.push_back(name);
        return out;
    }
    int length(int slot) const override { return len_.at(size_t(slot)); }
    const int32_t* tokens(int slot) const override { return hist_.data() + size_t(slot) * size_t(M_); }
    void truncate(int slot, int length) override {
        if (slot < 0 || slot >= N_) throw_internal("inference: slot " + std::to_string(slot) + " out of range");
        len_[size_t(slot)] = std::clamp(length, 0, len_[size_t(slot)]);
    }

    const float* forward(const std::vector<Feed>& feeds, const std::vector<std::string>& adapters,
                         const std::atomic<bool>* cancel) override {
        const Dims& d = dims();
        check_feeds(feeds, N_, M_, int(d.V), len_);
        const std::vector<AdapterRun> runs = adapter_runs(feeds, adapters);
        std::string adapter;  // the graph key's adapter part: the name, or each run's name and rows
        for (const AdapterRun& r : runs) {
            if (!r.adapter.empty() && !adapters_.count(r.adapter))
                throw_invalid("inference: no adapter named '" + r.adapter + "' is loaded");
            adapter += runs.size() == 1 ? r.adapter : r.adapter + ":" + std::to_string(r.count) + ";";
        }
        if (runs.size() == 1)
            bind_adapter(adapter);
        else
            bind_rows(runs);
        struct Unbind {
            Decoder<CudaBackend>& dec;
            ~Unbind() { dec.lora_rows.clear(); }
        } unbind{model_->impl().dec};
        Decoder<CudaBackend>& dec = model_->impl().dec;
        const int Tmax = d.T;
        std::vector<int32_t>& tok = row_tok_;
        std::vector<int32_t>& pos = row_pos_host_;
        std::vector<int32_t>& slot = row_slot_host_;
        std::vector<int32_t>& cu = cu_host_;
        int32_t* dev = static_cast<int32_t*>(rows_.data());
        int32_t* d_tok = dev;
        int32_t* d_pos = dev + Tmax;
        int32_t* d_slot = dev + 2 * Tmax;
        int32_t* d_cu = dev + 3 * Tmax;
        int32_t* d_rope = dev + 4 * Tmax + 1;  // the RoPE table's rows of d_pos (a LongRoPE table's long rows)
        const int long_from = model_->impl().rope.long_from;
        float* out = static_cast<float*>(logits_.data());
        std::vector<size_t> done(feeds.size(), 0);
        size_t next = 0;
        while (next < feeds.size()) {
            if (cancel && cancel->load(std::memory_order_relaxed)) return nullptr;
            const Chunk c = next_chunk(feeds, done, next, Tmax, M_, hist_.data(), len_, tok.data(), pos.data(),
                                       slot.data(), cu.data());
            const int T = c.T, S = c.S, longest = c.longest;
            for (const Chunk::Segment& g : c.segments)  // the device copy of the history (repetition penalty)
                upload(static_cast<int32_t*>(hist_dev_.data()) + size_t(g.slot) * size_t(M_) + g.start,
                       hist_.data() + size_t(g.slot) * size_t(M_) + g.start, size_t(g.n));
            upload(d_tok, tok.data(), size_t(T));
            upload(d_pos, pos.data(), size_t(T));
            upload(d_slot, slot.data(), size_t(T));
            upload(d_cu, cu.data(), size_t(S) + 1);
            fresh_ = c.fresh;
            row_slot_ = d_slot;
            row_pos_ = d_pos;
            Step& s = dec.step;
            s = Step{};
            s.T = T;
            s.S = S;
            s.max_seqlen = longest;
            s.tokens = d_tok;
            s.positions = d_pos;
            if (long_from > 0) {
                chunk_rope_rows(c, pos.data(), long_from, row_rope_host_.data());
                upload(d_rope, row_rope_host_.data(), size_t(T));
                s.positions = d_rope;
            }
            s.cu_seqlens = d_cu;
            bool in_order = int(c.ends.size()) == T;  // decode: every row ends its feed, in feed order
            for (size_t e = 0; in_order && e < c.ends.size(); ++e)
                in_order = c.ends[e].first == e && c.ends[e].second == int(e);
            if (in_order && !c.fresh) {
                // A decode step: the blocks and one lm_head over the rows, as a CUDA graph per (rows, adapter).
                run_decode_step(T, adapter, [&] {
                    dec.forward(false);
                    CudaBackend::lm_head_logits(out, dec.lnf, dec.head, T, d.C, d.V, d.final_softcap);
                });
                continue;
            }
            dec.forward(false);
            for (const auto& [i, row] : c.ends)
                CudaBackend::lm_head_logits(out + i * size_t(d.V), dec.lnf + int64_t(row) * d.C, dec.head, 1, d.C, d.V,
                                            d.final_softcap);
            // The host vectors are reused by the next chunk: the pageable copies above have been staged.
        }
        return out;
    }

    std::vector<int32_t> sample(const std::vector<Feed>& feeds, const std::vector<cpu::SamplingParams>& params,
                                const std::vector<int64_t>& draw) override {
        const int T = int(feeds.size());
        if (T == 0 || params.size() != feeds.size() || draw.size() != feeds.size())
            throw_internal("inference: sample needs one parameter set and draw index per feed");
        std::vector<int32_t> slot(static_cast<size_t>(T)), len(static_cast<size_t>(T)), out(static_cast<size_t>(T));
        bool penalty = false;
        for (int t = 0; t < T; ++t) {
            slot[size_t(t)] = feeds[size_t(t)].slot;
            len[size_t(t)] = len_[size_t(feeds[size_t(t)].slot)];
            penalty |= params[size_t(t)].repetition_penalty != 1.0f;
        }
        char* base = static_cast<char*>(sample_.data());
        auto* d_params = reinterpret_cast<SamplingParams*>(base);
        auto* d_draw = reinterpret_cast<int64_t*>(base + round_up(int64_t(N_) * int64_t(sizeof(SamplingParams)), 64));
        auto* d_ints = reinterpret_cast<int32_t*>(reinterpret_cast<char*>(d_draw) + size_t(N_) * sizeof(int64_t));
        int32_t* d_slot = d_ints;
        int32_t* d_len = d_ints + N_;
        int32_t* d_out = d_ints + 2 * N_;
        upload(d_params, params.data(), size_t(T));
        upload(d_draw, draw.data(), size_t(T));
        upload(d_slot, slot.data(), size_t(T));
        upload(d_len, len.data(), size_t(T));
        float* logits = static_cast<float*>(logits_.data());
        const int V = int(dims().V);
        if (penalty)
            cuda::repetition_penalty(logits, static_cast<const int32_t*>(hist_dev_.data()), d_slot, d_len, d_params, T,
                                     V, N_, M_);
        cuda::sample_tokens(d_out, logits, d_params, d_draw, T, V);
        TANDEM_CUDA_CHECK(cudaMemcpyAsync(out.data(), d_out, size_t(T) * sizeof(int32_t), cudaMemcpyDeviceToHost,
                                          cuda::context().stream));
        cuda::synchronize();  // the ids go back to the host: one sync per generated token (all sequences)
        return out;
    }

    // DecoderRuntime: the cache write, then packed causal attention (a fresh chunk) or attention on the cache.
    void attention_forward(int l, LayerActs<CudaBackend>& a, const Step& s) override {
        const Dims& d = dims();
        cuda::kv_cache_write(kc(), vc(), a.kr, a.v, row_slot_, row_pos_, s.T, l, N_, d.L, M_, d.KV);
        const bf16* sinks = model_->impl().dec.layers[size_t(l)].sinks;
        if (fresh_) {
            CudaBackend::attention_forward(a.att, static_cast<float*>(a.stats), a.qr, a.kr, a.v, s.cu_seqlens, s.S, s.T,
                                           d.Hq, d.Hkv, d.D, d.attn_scale, s.max_seqlen, d.windows[size_t(l)],
                                           d.attn_softcap);
            if (sinks) CudaBackend::attention_sinks(a.att, static_cast<float*>(a.stats), sinks, s.T, d.Hq, d.D);
        } else {
            cuda::decode_attention(a.att, a.qr, kc(), vc(), row_slot_, row_pos_, s.T, l, N_, d.L, M_, d.Hq, d.Hkv, d.D,
                                   d.attn_scale, d.windows[size_t(l)], d.attn_softcap,
                                   ws_bytes_ ? ws_.data() : nullptr, sinks);
        }
    }

private:
    // A decode step's kernels depend on its rows and the adapter's pointers only (positions, slots and tokens are
    // read from device memory; decode_attention's split count does not depend on the positions). A key's first
    // step runs eagerly (library first-use work: cuBLASLt heuristics), its second is captured and launched,
    // later ones replay. A failed capture turns graphs off for this model.
    void run_decode_step(int T, const std::string& adapter, const std::function<void()>& body) {
        const std::string key = std::to_string(T) + "/" + adapter;
        auto it = graphs_.find(key);
        if (it != graphs_.end()) {
            TANDEM_CUDA_CHECK(cudaGraphLaunch(it->second.get(), cuda::context().stream));
            return;
        }
        if (!graphs_ok_ || !seen_.insert(key).second) {
            if (graphs_ok_ && graphs_.size() < 64) {
                const cudaStream_t st = cuda::context().stream;
                TANDEM_CUDA_CHECK(cudaStreamBeginCapture(st, cudaStreamCaptureModeThreadLocal));
                cuda::GraphOwner graph;
                try {
                    body();
                } catch (...) {
                    if (cudaStreamEndCapture(st, &graph.g) != cudaSuccess) (void)cudaGetLastError();
                    graphs_ok_ = false;
                    body();  // eagerly after all
                    return;
                }
                if (cudaStreamEndCapture(st, &graph.g) != cudaSuccess) {
                    (void)cudaGetLastError();
                    graphs_ok_ = false;
                    body();
                    return;
                }
                cudaGraphExec_t exec = nullptr;
                TANDEM_CUDA_CHECK(cudaGraphInstantiate(&exec, graph.g, 0));
                auto [pos, _] = graphs_.emplace(key, cuda::GraphExec(exec));
                TANDEM_CUDA_CHECK(cudaGraphLaunch(pos->second.get(), st));
                return;
            }
        }
        body();
    }
    void drop_graphs() {
        cuda::synchronize();  // a graph may still be running
        graphs_.clear();
        seen_.clear();
    }

    const Dims& dims() const { return const_cast<CudaModel&>(*model_).impl().d; }
    bf16* kc() { return static_cast<bf16*>(kc_.data()); }
    bf16* vc() { return static_cast<bf16*>(vc_.data()); }

    // The CudaModel holding weights and arenas, with LoRA tmp pieces of rank r; its decoder runs on this runtime.
    void load_model(int r) {
        CudaModelOptions o;
        o.max_tokens = std::max(opt_.chunk, 64);
        o.max_seqlen = o.max_tokens;
        o.max_positions = M_;  // the cache's positions: decode steps rotate at positions past a prefill chunk
        o.checkpointing = CheckpointPolicy::Recompute;
        o.attention = AttentionBackend::Inhouse;
        o.cuda_graphs = false;
        o.quantize_4bit = opt_.quantize_4bit;
        o.lora_state = false;  // the adapters are ours (bind_adapter): only the tmp pieces are planned
        model_.reset();
        model_.emplace(CudaModel::load(dir_, infer_plan_lora(load_model_config(dir_), r), 1, o));
        planned_rank_ = std::max(1, r);
        model_->impl().dec.rt = this;
        model_->impl().dec.dropout = 0.0;
    }

    using Table = std::vector<std::array<LoraRef<CudaBackend>, kNumModules>>;
    const Table& table_of(const std::string& name) {
        auto it = tables_.find(name);
        if (it != tables_.end()) return it->second;
        const Dims& d = dims();
        const DeviceAdapter& a = adapters_.at(name);
        const int r = a.info.config.r;
        const bf16* v = static_cast<const bf16*>(a.values.data());
        Table t(size_t(d.L));
        for (int l = 0; l < d.L; ++l)
            for (int m = 0; m < kNumModules; ++m) {
                const LoraSlot& s = a.info.index[size_t(l)][size_t(m)];
                if (s.a < 0) continue;
                t[size_t(l)][size_t(m)] = {v + a.offset[size_t(s.a)], v + a.offset[size_t(s.a) + 1] + s.b_row * r,
                                           nullptr, nullptr, s.drop};
            }
        return tables_.emplace(name, std::move(t)).first->second;
    }

    void bind_adapter(const std::string& name) {
        Decoder<CudaBackend>& dec = model_->impl().dec;
        const Dims& d = dims();
        dec.lora_rows.clear();
        dec.lora.assign(size_t(d.L), {});
        dec.d.R = planned_rank_;
        dec.lora_scaling = 1.0f;
        if (name.empty()) return;
        const DeviceAdapter& a = adapters_.at(name);
        dec.d.R = a.info.config.r;
        dec.lora_scaling = float(a.info.config.scaling());
        dec.lora = table_of(name);
    }

    // Several adapters in one decode step (infer_model.h): each run of rows with its own table.
    void bind_rows(const std::vector<AdapterRun>& runs) {
        Decoder<CudaBackend>& dec = model_->impl().dec;
        dec.lora.assign(size_t(dims().L), {});
        dec.d.R = planned_rank_;
        dec.lora_scaling = 1.0f;
        dec.lora_rows.clear();
        for (const AdapterRun& r : runs) {
            Decoder<CudaBackend>::LoraRows g;
            g.r0 = r.first;
            g.rows = r.count;
            if (!r.adapter.empty()) {
                const DeviceAdapter& a = adapters_.at(r.adapter);
                g.table = &table_of(r.adapter);
                g.R = a.info.config.r;
                g.scaling = float(a.info.config.scaling());
            }
            dec.lora_rows.push_back(g);
        }
    }

    std::filesystem::path dir_;
    InferOptions opt_;
    std::optional<CudaModel> model_;
    int N_ = 1, M_ = 0, planned_rank_ = 1;
    cuda::DeviceBuffer kc_, vc_, hist_dev_, logits_, rows_, ws_, sample_;
    size_t ws_bytes_ = 0;
    std::vector<int32_t> hist_;
    std::vector<int32_t> row_tok_, row_pos_host_, row_rope_host_, row_slot_host_, cu_host_;  // [T], [T+1]: a chunk's rows (host)
    std::vector<int> len_;
    std::map<std::string, DeviceAdapter> adapters_;
    std::map<std::string, std::vector<std::array<LoraRef<CudaBackend>, kNumModules>>> tables_;  // per adapter
    bool fresh_ = false;
    std::map<std::string, cuda::GraphExec> graphs_;  // decode steps by "rows/adapter"
    std::set<std::string> seen_;                      // keys run eagerly once
    bool graphs_ok_ = true;
    const int32_t* row_slot_ = nullptr;
    const int32_t* row_pos_ = nullptr;
};

}  // namespace

std::unique_ptr<InferModel> load_cuda_infer_model(const std::filesystem::path& model_dir, const InferOptions& options) {
    std::string why;
    if (!cuda_backend_available(&why))
        throw_unsupported(model_dir.string() + ": generation on CUDA: " + why + "; generate on the CPU (device cpu)");
    return std::make_unique<CudaInferModel>(model_dir, options);
}

}  // namespace tandem::infer

#else

namespace tandem::infer {
std::unique_ptr<InferModel> load_cuda_infer_model(const std::filesystem::path& model_dir, const InferOptions&) {
    throw_unsupported(model_dir.string() + ": this build has no CUDA backend; generate on the CPU (device cpu)");
}
}  // namespace tandem::infer

#endif  // TANDEM_WITH_CUDA
