// SPDX-FileCopyrightText: 2026 The Tandem developers
// SPDX-License-Identifier: GPL-3.0-or-later
// CpuModel: the decoder (model/decoder.h, the blocks written once) on the CPU backend, fp32: the reference
// every CUDA op and step is checked against. Dimension legend: model/plan.h.
// Decisions a reader must know:
//  - Memory: the arenas of the one planner (model/plan.h, element size 4), allocated once at load; a step
//    allocates nothing of its own (the one exception is cpu::attention_backward, which allocates an [Hq,T]
//    scratch per call, see kernels/cpu/attention.h). LoRA values, grads and moments live in LoraParam.
//  - Every checkpointing policy runs here too, synchronously (offloading = memcpy into host memory), so the
//    policies' bitwise agreement is checked on the CPU in CI (test_model_cpu).
//  - Padding: a PackedBatch holds its real tokens first (data.h), so the model runs rows 0..num_tokens-1
//    only; the batch's metadata (tokens, targets = labels shifted by one, positions, cu_seqlens, the dropout
//    seed, grad_scale) is written once per micro-batch into one slot of the activation arena, as on CUDA.
#include "model/model.h"

#include <algorithm>
#include <array>
#include <cmath>
#include <cstring>
#include <string>

#include "backend/cpu/backend.h"
#include "core/random.h"
#include "kernels/cpu/cross_entropy.h"
#include "model/decoder.h"
#include "model/quant4_load.h"
#include "model/plan.h"
#include "tandem/error.h"
#include "tandem/model_dir.h"

namespace tandem {
namespace {

constexpr int kCeChunkRows = 64;

Dims cpu_dims(const ModelConfig& cfg, const LoraConfig& lora, int max_tokens) {
    return make_dims(cfg, lora, max_tokens, 0, kCeChunkRows);
}

ModelPlan cpu_plan(const Dims& d, const std::vector<LoraTensorSpec>& specs, const LoraIndex& lora_index,
                   CheckpointPolicy policy, const PlanOptions& options = {}) {
    PlanTraits tr;
    tr.act_bytes = sizeof(float);
    tr.attention_stats_bytes = size_t(d.Hq) * size_t(d.T) * sizeof(float);  // lse [Hq,T]
    tr.ce_workspace = size_t(d.K) * size_t(d.V) * sizeof(float);           // logits chunk [K,V]
    return make_plan(d, specs, lora_index, policy, tr, options);
}

CheckpointPolicy cpu_policy(CheckpointPolicy p) { return p == CheckpointPolicy::Auto ? CheckpointPolicy::Off : p; }

}  // namespace

struct CpuModel::Impl final : DecoderRuntime<CpuBackend> {
    std::filesystem::path dir;
    ModelConfig cfg;
    LoraConfig lora;
    Dims d;
    cpu::RopeTable rope, rope_local;  // rope_local: the sliding layers' (Gemma 3), else empty
    ModelPlan y;
    Decoder<CpuBackend> dec;
    std::vector<float> weights_mem, acts_mem, work_mem;  // the plan's arenas (sizes are multiples of 256 bytes)
    std::vector<LoraParam> params;
    LoraIndex lora_index;                                  // [L][slot] -> lora_A in params (lora_table.h)
    int32_t* meta = nullptr;                               // the batch metadata slot
    int offloaded = 0;                                     // layers whose input goes to x_host (plan.h)
    std::vector<float> x_host;                             // [offloaded, T, C] offloaded block inputs

    std::vector<float> mlp_host;                           // [mlp_host_slots, 2, T, F] offloaded gate / up

    float* host_slot(int l) { return x_host.data() + size_t(l) * size_t(d.T) * size_t(d.C); }
    // Layer l's offloaded gate / up: host slot j (plan.h ModelPlan::mlp_offloaded); nullptr for the last two
    // offloaded layers, which stay in their device slots.
    float* mlp_host_slot(int l) {
        const int j = dec.mlp_offload_index[size_t(l)];
        return j < y.mlp_host_slots ? mlp_host.data() + size_t(j) * 2 * size_t(d.T) * size_t(d.F) : nullptr;
    }

    // The LoRA pointers of the decoder, from params (refreshed per batch: the trainer may replace values).
    void bind_lora() {
        dec.lora.assign(size_t(d.L), {});
        for (int l = 0; l < d.L; ++l)
            for (int m = 0; m < kNumModules; ++m) {
                const LoraSlot& s = lora_index[size_t(l)][size_t(m)];
                if (s.a < 0) continue;
                LoraParam& A = params[size_t(s.a)];
                LoraParam& B = params[size_t(s.a) + 1];
                const int64_t b_off = s.b_row * d.R;  // this slot's rows of a fused projection's lora_B
                dec.lora[size_t(l)][size_t(m)] = {A.value.data(), B.value.data() + b_off, A.grad.data(),
                                                  B.grad.data() + b_off, s.drop};
            }
    }

    void begin_batch(const PackedBatch& b, float grad_scale, uint64_t seed) {
        const int longest = check_packed_batch(b, d.T, d.V, cpu::rope_positions(rope));
        write_metadata(b, seed, grad_scale, rope.long_from, meta);
        dec.step = metadata_step(meta, b.num_tokens, b.num_samples, longest);
        bind_lora();
    }

    // DecoderRuntime: everything synchronous.
    void attention_forward(int l, LayerActs<CpuBackend>& a, const Step& s) override {
        CpuBackend::attention_forward(a.att, static_cast<float*>(a.stats), a.qr, a.kr, a.v, s.cu_seqlens, s.S, s.T,
                                      d.Hq, d.Hkv, d.D, d.attn_scale, s.max_seqlen, d.windows[size_t(l)],
                                      d.attn_softcap);
        if (const float* sinks = dec.layers[size_t(l)].sinks)
            CpuBackend::attention_sinks(a.att, static_cast<float*>(a.stats), sinks, s.T, d.Hq, d.D);
    }
    void attention_backward(int l, LayerActs<CpuBackend>& a, float* dq, float* dk, float* dv, const float* dout,
                            const Step& s) override {
        CpuBackend::attention_backward(dq, dk, dv, dout, a.qr, a.kr, a.v, a.att, static_cast<const float*>(a.stats),
                                       s.cu_seqlens, s.S, s.T, d.Hq, d.Hkv, d.D, d.attn_scale, s.max_seqlen,
                                       nullptr, d.windows[size_t(l)], d.attn_softcap);
    }
    void offload_input(int l) override {
        if (l < offloaded) std::memcpy(host_slot(l), dec.acts[size_t(l)].x, size_t(dec.step.T) * d.C * sizeof(float));
    }
    void wait_offloaded(int) override {}
    void reload_input(int l) override {
        if (l >= 0 && l < offloaded)
            std::memcpy(dec.acts[size_t(l)].x, host_slot(l), size_t(dec.step.T) * d.C * sizeof(float));
    }
    void wait_reloaded(int) override {}
    void input_used(int) override {}
    void offload_mlp(int l) override {
        if (float* h = mlp_host_slot(l)) {
            const size_t n = size_t(dec.step.T) * size_t(d.F);
            std::memcpy(h, dec.acts[size_t(l)].gate, n * sizeof(float));
            std::memcpy(h + size_t(d.T) * size_t(d.F), dec.acts[size_t(l)].up, n * sizeof(float));
        }
    }
    void reload_mlp(int l) override {
        if (const float* h = mlp_host_slot(l)) {
            const size_t n = size_t(dec.step.T) * size_t(d.F);
            std::memcpy(dec.acts[size_t(l)].gate, h, n * sizeof(float));
            std::memcpy(dec.acts[size_t(l)].up, h + size_t(d.T) * size_t(d.F), n * sizeof(float));
        }
    }
};

CpuModel::MemoryNeeds CpuModel::plan(const ModelConfig& cfg, const LoraConfig& lora, int max_tokens,
                                     CheckpointPolicy checkpointing) {
    validate_model(cfg, lora, "memory plan");
    if (max_tokens <= 0) throw_invalid("memory plan: max_tokens must be positive");
    const Dims d = cpu_dims(cfg, lora, max_tokens);
    const auto specs = lora_tensor_specs(cfg, lora);
    return cpu_plan(d, specs, lora_index_of(specs, d.L), cpu_policy(checkpointing)).bytes;
}

CpuModel CpuModel::load(const std::filesystem::path& model_dir, const LoraConfig& lora, uint64_t seed, int max_tokens,
                        CheckpointPolicy checkpointing, bool quantize_4bit, bool fp8, const PlanOptions& plan) {
    ModelDir md = open_model_dir(model_dir);
    ModelConfig cfg = quantize_4bit ? with_quantization(md.info.config) : md.info.config;
    if (fp8) cfg = with_fp8(std::move(cfg));
    const std::string where = model_dir.string();
    validate_model(cfg, lora, where);
    if (max_tokens <= 0) throw_invalid(where + ": max_tokens must be positive");

    auto impl = std::make_unique<Impl>();
    Impl& m = *impl;
    m.dir = model_dir;
    m.cfg = cfg;
    m.lora = lora;
    m.d = cpu_dims(cfg, lora, max_tokens);
    const Dims& d = m.d;
    m.rope = cpu::rope_table_build(int(cfg.rotary_dim()), cfg.rope_theta, cfg.rope_scaling, int(cfg.max_position_embeddings));
    if (cfg.rope_local_theta > 0)
        m.rope_local = cpu::rope_table_build(int(cfg.rotary_dim()), cfg.rope_local_theta, RopeScaling{}, int(cfg.max_position_embeddings));
    const auto specs = lora_tensor_specs(cfg, lora);
    m.lora_index = lora_index_of(specs, d.L);
    m.params = init_lora_params(specs, seed);
    m.y = cpu_plan(d, specs, m.lora_index, cpu_policy(checkpointing), plan);

    m.weights_mem.assign(m.y.weights.alloc_size() / sizeof(float), 0.0f);
    m.acts_mem.assign(m.y.acts.alloc_size() / sizeof(float), 0.0f);
    m.work_mem.assign(m.y.work.alloc_size() / sizeof(float), 0.0f);
    m.dec.d = d;
    m.dec.dropout = lora.dropout;
    m.dec.lora_scaling = float(lora.scaling());
    m.dec.embed_scale = d.embed_scale;
    m.dec.rope = &m.rope;
    if (cfg.rope_local_theta > 0) m.dec.rope_local = &m.rope_local;
    m.dec.rt = &m;
    m.dec.bind(m.y, m.weights_mem.data(), m.acts_mem.data(), m.work_mem.data());
    m.meta = m.y.acts.ptr<int32_t>(m.acts_mem.data(), m.y.meta);
    m.offloaded = offloaded_layers(m.y.checkpointing, d.L);
    m.x_host.assign(size_t(m.offloaded) * size_t(d.T) * size_t(d.C), 0.0f);
    m.mlp_host.assign(size_t(m.y.mlp_host_slots) * 2 * size_t(d.T) * size_t(d.F), 0.0f);

    // Weights, converted to fp32 into their pieces of the weights arena (4-bit ones as planned).
    load_weights_fp32(m.y, m.weights_mem.data(), d, md.weights);
    m.dec.transpose_fp8_weights();
    return CpuModel(std::move(impl));
}

CpuModel::CpuModel(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
CpuModel::CpuModel(CpuModel&&) noexcept = default;
CpuModel& CpuModel::operator=(CpuModel&&) noexcept = default;
CpuModel::~CpuModel() = default;

const ModelConfig& CpuModel::config() const { return impl_->cfg; }
const LoraConfig& CpuModel::lora_config() const { return impl_->lora; }
const std::filesystem::path& CpuModel::model_dir() const { return impl_->dir; }
CheckpointPolicy CpuModel::checkpointing() const { return impl_->y.checkpointing; }
std::vector<LoraParam>& CpuModel::lora_params() { return impl_->params; }
const std::vector<LoraParam>& CpuModel::lora_params() const { return impl_->params; }

void CpuModel::set_lora(const LoraTensors& tensors) {
    auto& params = impl_->params;
    if (tensors.size() != params.size())
        throw_invalid("set_lora: the adapter has " + std::to_string(tensors.size()) + " tensors, the model expects " +
                      std::to_string(params.size()) + " (different r or target modules?)");
    for (const auto& p : params) {
        auto it = tensors.find(p.spec.name);
        if (it == tensors.end()) throw_invalid("set_lora: the adapter lacks tensor " + p.spec.name);
        if (it->second.size() != p.value.size())
            throw_invalid("set_lora: tensor " + p.spec.name + " has " + std::to_string(it->second.size()) +
                          " elements, expected " + std::to_string(p.value.size()));
    }
    for (auto& p : params) p.value = tensors.at(p.spec.name);
}

std::vector<std::vector<int32_t>> CpuModel::moe_routing() const {
    const Impl& m = *impl_;
    std::vector<std::vector<int32_t>> out(size_t(m.d.L));
    for (int l = 0; l < m.d.L; ++l) {
        if (!m.d.is_moe(l) || m.y.residency[size_t(Buf::Route)] != Residency::Kept) continue;
        const int32_t* idx = m.dec.acts[size_t(l)].idx;
        out[size_t(l)].assign(idx, idx + size_t(m.dec.step.T) * size_t(m.d.topk));
    }
    return out;
}

LoraTensors CpuModel::lora_tensors() const {
    LoraTensors out;
    for (const auto& p : impl_->params) out[p.spec.name] = p.value;
    return out;
}

void CpuModel::zero_grads() {
    for (auto& p : impl_->params) std::fill(p.grad.begin(), p.grad.end(), 0.0f);
}

double CpuModel::forward_backward(const PackedBatch& batch, float grad_scale, uint64_t dropout_seed) {
    Impl& m = *impl_;
    m.begin_batch(batch, grad_scale, dropout_seed);
    m.dec.forward(true);
    m.dec.loss(m.dec.d_lnf);
    m.dec.backward();
    return m.dec.loss_sum[0];
}

double CpuModel::forward_loss(const PackedBatch& batch) {
    Impl& m = *impl_;
    m.begin_batch(batch, 1.0f, 0);
    m.dec.forward(false);
    m.dec.loss(nullptr);
    return m.dec.loss_sum[0];
}

std::vector<float> CpuModel::logits(const PackedBatch& batch) {
    Impl& m = *impl_;
    m.begin_batch(batch, 1.0f, 0);
    m.dec.forward(false);
    std::vector<float> out(size_t(batch.num_tokens) * size_t(m.d.V));
    cpu::lm_head_logits(out.data(), m.dec.lnf, m.dec.head, batch.num_tokens, m.d.C, m.d.V, m.d.final_softcap);
    return out;
}

std::vector<float> CpuModel::last_logits(const std::vector<int32_t>& ids) {
    Impl& m = *impl_;
    const PackedBatch b = batch_from_sequences({ids});
    m.begin_batch(b, 1.0f, 0);
    m.dec.forward(false);
    std::vector<float> out(size_t(m.d.V));
    cpu::lm_head_logits(out.data(), m.dec.lnf + int64_t(b.num_tokens - 1) * m.d.C, m.dec.head, 1, m.d.C, m.d.V,
                        m.d.final_softcap);
    return out;
}

int CpuModel::max_tokens() const { return impl_->d.T; }

size_t CpuModel::weight_bytes() const { return impl_->y.bytes.weights; }

size_t CpuModel::lora_bytes() const {
    size_t n = 0;
    for (const auto& p : impl_->params) n += p.value.size() + p.grad.size();
    return n * sizeof(float);
}

size_t CpuModel::activation_bytes() const {
    return impl_->y.bytes.activations + impl_->y.bytes.workspace + impl_->x_host.size() * sizeof(float);
}

int check_packed_batch(const PackedBatch& b, int max_tokens, int vocab, int64_t max_positions) {
    const int T = b.num_tokens;
    if (T <= 0) throw_invalid("model: the batch holds no tokens");
    if (T > max_tokens)
        throw_invalid("model: a micro-batch of " + std::to_string(T) + " tokens exceeds the " +
                      std::to_string(max_tokens) + " tokens the model was loaded for; lower the token budget");
    if (b.tokens.size() < size_t(T) || b.labels.size() < size_t(T) || b.position_ids.size() < size_t(T) ||
        b.num_samples < 1 || b.num_samples > T || b.cu_seqlens.size() != size_t(b.num_samples) + 1 ||
        b.cu_seqlens.front() != 0 || b.cu_seqlens.back() != T)
        throw_invalid("model: inconsistent PackedBatch (token/label/position arrays or cu_seqlens)");
    int longest = 0;
    for (int s = 0; s < b.num_samples; ++s) {
        const int len = b.cu_seqlens[size_t(s) + 1] - b.cu_seqlens[size_t(s)];
        if (len < 0) throw_invalid("model: inconsistent PackedBatch (cu_seqlens decreases)");
        longest = std::max(longest, len);
    }
    for (int t = 0; t < T; ++t) {
        if (b.tokens[size_t(t)] < 0 || b.tokens[size_t(t)] >= vocab)
            throw_invalid("model: token id " + std::to_string(b.tokens[size_t(t)]) + " at position " +
                          std::to_string(t) + " is outside the vocabulary [0, " + std::to_string(vocab) + ")");
        if (b.position_ids[size_t(t)] < 0 || b.position_ids[size_t(t)] >= max_positions)
            throw_invalid("model: position " + std::to_string(b.position_ids[size_t(t)]) +
                          " exceeds max_position_embeddings " + std::to_string(max_positions));
        const int32_t lab = b.labels[size_t(t)];
        if (lab != cpu::kIgnoreIndex && (lab < 0 || lab >= vocab))
            throw_invalid("model: label " + std::to_string(lab) + " at position " + std::to_string(t) +
                          " is outside the vocabulary");
    }
    return longest;
}

PackedBatch batch_from_sequences(const std::vector<std::vector<int32_t>>& sequences) {
    PackedBatch b;
    b.cu_seqlens.push_back(0);
    for (size_t s = 0; s < sequences.size(); ++s) {
        const auto& seq = sequences[s];
        for (size_t i = 0; i < seq.size(); ++i) {
            b.tokens.push_back(seq[i]);
            b.labels.push_back(i == 0 ? cpu::kIgnoreIndex : seq[i]);
            b.position_ids.push_back(int32_t(i));
            if (i > 0) ++b.num_label_tokens;
        }
        b.cu_seqlens.push_back(int32_t(b.tokens.size()));
        b.samples.push_back(uint32_t(s));
        b.max_seqlen = std::max<int32_t>(b.max_seqlen, int32_t(seq.size()));
    }
    b.num_samples = int32_t(sequences.size());
    b.num_tokens = int32_t(b.tokens.size());
    b.token_budget = b.num_tokens;
    b.row_len = 0;
    return b;
}

}  // namespace tandem
