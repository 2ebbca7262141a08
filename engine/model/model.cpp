// CpuModel: the fp32 CPU reference of the decoder family (see model.h), llm.c style: explicit forward and
// backward per block over engine/kernels/cpu ops, no autograd.
// T = tokens of the micro-batch (real tokens only; padding rows are never computed), C = hidden,
// Q = Hq*D (query width), KV = Hkv*D, F = intermediate, V = vocab, L = layers, R = LoRA rank, D = head_dim.
// Decisions a reader must know:
//  - Every activation backward needs lives in ONE arena allocated at load from max_tokens; a step allocates
//    nothing of its own (the one exception is cpu::attention_backward, which allocates an [Hq,T] scratch
//    per call, see attention.h).
//  - Padding: a PackedBatch holds its real tokens first (data.h), so the model runs rows 0..num_tokens-1
//    only; targets[t] = labels[t+1] (t < T-1), -100 on the last row.
//  - LoRA dropout: the mask of element (t, i) of module m's input in layer l is a pure function of
//    (dropout_seed, l, m, t*in + i) (a SplitMix64-style hash), so forward and backward agree and a step is
//    reproducible with any thread count. The dropped input is kept in the arena for backward.
#include "model/model.h"

#include <algorithm>
#include <array>
#include <cmath>
#include <cstring>
#include <string>

#include "backend/cpu/backend.h"  // the op table these calls will go through (M3)
#include "kernels/cpu/attention.h"
#include "kernels/cpu/cross_entropy.h"
#include "kernels/cpu/dropout.h"
#include "kernels/cpu/elementwise.h"
#include "kernels/cpu/embedding.h"
#include "kernels/cpu/matmul.h"
#include "kernels/cpu/rmsnorm.h"
#include "kernels/cpu/rope.h"
#include "kernels/cpu/swiglu.h"
#include "core/random.h"
#include "tandem/error.h"
#include "tandem/model_dir.h"

namespace tandem {
namespace {

constexpr int kCeChunkRows = 64;

struct LayerWeights {
    std::vector<float> ln1;            // [C]
    std::vector<float> w[kNumModules];  // q [Q,C], k [KV,C], v [KV,C], o [C,Q], gate [F,C], up [F,C], down [C,F]
    std::vector<float> b[kNumModules];  // biases [OUT] or empty
    std::vector<float> q_norm, k_norm;  // [D] (qk_norm only)
    std::vector<float> ln2;            // [C]
};

// Activations of one layer (pointers into the arena), sized for max_tokens rows.
struct LayerActs {
    float* x;          // [T,C] layer input (residual stream)
    float* ln1;        // [T,C]
    float* ln1_rstd;   // [T]
    float* q;          // [T,Q] after projection (+LoRA), before q norm
    float* k;          // [T,KV]
    float* v;          // [T,KV]
    float* qn;         // [T,Q] after q norm (== q when no qk_norm)
    float* kn;         // [T,KV]
    float* q_rstd;     // [T*Hq]
    float* k_rstd;     // [T*Hkv]
    float* qr;         // [T,Q] after RoPE
    float* kr;         // [T,KV]
    float* att;        // [T,Q] attention output
    float* lse;        // [Hq,T]
    float* mid;        // [T,C] residual after attention
    float* ln2;        // [T,C]
    float* ln2_rstd;   // [T]
    float* gate;       // [T,F]
    float* up;         // [T,F]
    float* act;        // [T,F] silu(gate)*up
    float* lora_tmp[kNumModules];   // [T,R] x A^T per module (nullptr when not adapted)
    float* lora_drop[kNumModules];  // [T,IN] dropped input per module (dropout > 0 only)
};

}  // namespace

struct CpuModel::Impl {
    std::filesystem::path dir;
    ModelConfig cfg;
    LoraConfig lora;
    float lora_scaling = 1.0f;
    int C = 0, Q = 0, KV = 0, F = 0, V = 0, L = 0, Hq = 0, Hkv = 0, D = 0, R = 0;
    int max_tokens = 0;
    float eps = 1e-6f;

    std::vector<float> embed;    // [V,C]
    std::vector<float> lm_head;  // [V,C] (empty when tied: embed is used)
    std::vector<float> norm_f;   // [C]
    std::vector<LayerWeights> layers;
    cpu::RopeTable rope;

    std::vector<LoraParam> params;
    std::vector<std::array<int, kNumModules>> lora_index;  // [L][module] -> index of lora_A in params, -1 none

    // Arena.
    std::vector<float> arena;
    std::vector<LayerActs> acts;
    float* x_final;      // [T,C] output of the last layer
    float* lnf;          // [T,C]
    float* lnf_rstd;     // [T]
    float* d_res;        // [T,C]
    float* d_ln;         // [T,C]
    float* d_big;        // [T,max(Q,F)]  (datt / dact)
    float* d_big2;       // [T,max(Q,F)]  (dq / dgate)
    float* d_big3;       // [T,max(Q,F)]  (dqn scratch / dup)
    float* d_k;          // [T,KV]
    float* d_k2;         // [T,KV]
    float* d_v;          // [T,KV]
    float* d_lnf;        // [T,C]
    float* d_tmp;        // [T,R]
    float* d_drop;       // [T,max(C,Q,F)] (dropout only)
    float* ce_scratch;   // [K,V]
    std::vector<int32_t> targets;  // [max_tokens]

    const float* head() const { return lm_head.empty() ? embed.data() : lm_head.data(); }

    int in_of(int m) const { return m == kO ? Q : (m == kDown ? F : C); }
    int out_of(int m) const {
        switch (m) {
        case kQ: return Q;
        case kK: case kV: return KV;
        case kGate: case kUp: return F;
        default: return C;
        }
    }

    void check_batch(const PackedBatch& b) const;
    void forward(const PackedBatch& b, bool train, uint64_t dropout_seed);
    void project(int l, int m, float* out, const float* inp, int T, bool train, uint64_t seed);
    void project_backward(int l, int m, float* dinp, const float* dout, const float* inp, int T, bool train,
                          uint64_t seed);
    void backward(const PackedBatch& b, bool train, uint64_t seed);
};

namespace {

std::vector<float> read_tensor(const SafetensorsSet& set, const std::string& name) {
    return tensor_to_f32(set.at(name));
}

}  // namespace

// out[T,OUT] = inp[T,IN] W^T + b (+ scaling * drop(inp) A^T B^T) for module m of layer l.
void CpuModel::Impl::project(int l, int m, float* out, const float* inp, int T, bool train, uint64_t seed) {
    const LayerWeights& w = layers[l];
    const int IN = in_of(m), OUT = out_of(m);
    cpu::matmul_forward(out, inp, w.w[m].data(), w.b[m].empty() ? nullptr : w.b[m].data(), T, IN, OUT);
    const int ia = lora_index[l][m];
    if (ia < 0) return;
    const float* lin = inp;
    if (train && lora.dropout > 0) {
        float* xd = acts[l].lora_drop[m];  // [T,IN]
        cpu::dropout_forward(xd, inp, seed, l, m, int64_t(T) * IN, lora.dropout);
        lin = xd;
    }
    cpu::lora_forward(out, acts[l].lora_tmp[m], lin, params[ia].value.data(), params[ia + 1].value.data(),
                      lora_scaling, T, IN, OUT, R);
}

// dinp[T,IN] += d(out)/d(inp) applied to dout[T,OUT]; LoRA grads += (grad_scale is already inside dout).
void CpuModel::Impl::project_backward(int l, int m, float* dinp, const float* dout, const float* inp, int T,
                                      bool train, uint64_t seed) {
    const LayerWeights& w = layers[l];
    const int IN = in_of(m), OUT = out_of(m);
    cpu::matmul_backward(dinp, nullptr, nullptr, dout, inp, w.w[m].data(), T, IN, OUT);
    const int ia = lora_index[l][m];
    if (ia < 0) return;
    LoraParam& A = params[ia];
    LoraParam& B = params[ia + 1];
    if (train && lora.dropout > 0) {
        const float* xd = acts[l].lora_drop[m];
        const int64_t n = int64_t(T) * IN;
        cpu::fill(d_drop, 0.0f, n);
        cpu::lora_backward(d_drop, A.grad.data(), B.grad.data(), d_tmp, dout, xd, acts[l].lora_tmp[m],
                           A.value.data(), B.value.data(), lora_scaling, T, IN, OUT, R);
        cpu::dropout_backward(dinp, d_drop, seed, l, m, n, lora.dropout);
    } else {
        cpu::lora_backward(dinp, A.grad.data(), B.grad.data(), d_tmp, dout, inp, acts[l].lora_tmp[m],
                           A.value.data(), B.value.data(), lora_scaling, T, IN, OUT, R);
    }
}

void CpuModel::Impl::check_batch(const PackedBatch& b) const { check_packed_batch(b, max_tokens, V, rope.max_pos, cfg.sliding_window); }

void CpuModel::Impl::forward(const PackedBatch& b, bool train, uint64_t seed) {
    check_batch(b);
    const int T = b.num_tokens;
    const int S = b.num_samples;
    const int32_t* pos = b.position_ids.data();
    cpu::embedding_forward(acts[0].x, b.tokens.data(), embed.data(), T, C, V);
    for (int l = 0; l < L; ++l) {
        LayerActs& a = acts[l];
        const LayerWeights& w = layers[l];
        // attention block
        cpu::rmsnorm_forward(a.ln1, a.ln1_rstd, a.x, w.ln1.data(), T, C, eps);
        project(l, kQ, a.q, a.ln1, T, train, seed);
        project(l, kK, a.k, a.ln1, T, train, seed);
        project(l, kV, a.v, a.ln1, T, train, seed);
        const float* qn = a.q;
        const float* kn = a.k;
        if (cfg.qk_norm) {
            cpu::rmsnorm_forward(a.qn, a.q_rstd, a.q, w.q_norm.data(), T * Hq, D, eps);
            cpu::rmsnorm_forward(a.kn, a.k_rstd, a.k, w.k_norm.data(), T * Hkv, D, eps);
            qn = a.qn;
            kn = a.kn;
        }
        cpu::rope_forward(a.qr, qn, pos, rope, T, Hq, D);
        cpu::rope_forward(a.kr, kn, pos, rope, T, Hkv, D);
        cpu::attention_forward(a.att, a.lse, a.qr, a.kr, a.v, b.cu_seqlens.data(), S, T, Hq, Hkv, D,
                               float(1.0 / std::sqrt(double(D))));
        project(l, kO, a.mid, a.att, T, train, seed);
        cpu::accumulate(a.mid, a.x, int64_t(T) * C);
        // MLP block
        cpu::rmsnorm_forward(a.ln2, a.ln2_rstd, a.mid, w.ln2.data(), T, C, eps);
        project(l, kGate, a.gate, a.ln2, T, train, seed);
        project(l, kUp, a.up, a.ln2, T, train, seed);
        cpu::swiglu_forward(a.act, a.gate, a.up, T, F);
        float* next = (l + 1 < L) ? acts[l + 1].x : x_final;
        project(l, kDown, next, a.act, T, train, seed);
        cpu::accumulate(next, a.mid, int64_t(T) * C);
    }
    cpu::rmsnorm_forward(lnf, lnf_rstd, x_final, norm_f.data(), T, C, eps);
    for (int t = 0; t < T; ++t) targets[t] = (t + 1 < T) ? b.labels[t + 1] : cpu::kIgnoreIndex;
}

void CpuModel::Impl::backward(const PackedBatch& b, bool train, uint64_t seed) {
    // grad_scale is already inside d_lnf (the loss applied it); everything after is linear.
    const int T = b.num_tokens;
    const int S = b.num_samples;
    const int32_t* pos = b.position_ids.data();
    // d_lnf was written by the loss; through the final norm into the residual stream.
    cpu::fill(d_res, 0.0f, int64_t(T) * C);
    cpu::rmsnorm_backward(d_res, nullptr, d_lnf, x_final, norm_f.data(), lnf_rstd, T, C);
    for (int l = L - 1; l >= 0; --l) {
        LayerActs& a = acts[l];
        const LayerWeights& w = layers[l];
        // MLP: d_res is d(next) = d(mid) (residual) + the MLP path.
        float* dact = d_big;
        cpu::fill(dact, 0.0f, int64_t(T) * F);
        project_backward(l, kDown, dact, d_res, a.act, T, train, seed);
        float* dgate = d_big2;
        float* dup = d_big3;
        cpu::swiglu_backward(dgate, dup, dact, a.gate, a.up, T, F);
        cpu::fill(d_ln, 0.0f, int64_t(T) * C);
        project_backward(l, kGate, d_ln, dgate, a.ln2, T, train, seed);
        project_backward(l, kUp, d_ln, dup, a.ln2, T, train, seed);
        cpu::rmsnorm_backward(d_res, nullptr, d_ln, a.mid, w.ln2.data(), a.ln2_rstd, T, C);
        // attention: d_res is now d(mid) = d(x) (residual) + the attention path.
        float* datt = d_big;
        cpu::fill(datt, 0.0f, int64_t(T) * Q);
        project_backward(l, kO, datt, d_res, a.att, T, train, seed);
        float* dqr = d_big2;
        cpu::attention_backward(dqr, d_k, d_v, datt, a.qr, a.kr, a.v, a.att, a.lse, b.cu_seqlens.data(), S, T, Hq,
                                Hkv, D, float(1.0 / std::sqrt(double(D))));
        cpu::rope_backward(dqr, dqr, pos, rope, T, Hq, D);  // now d(qn)
        cpu::rope_backward(d_k, d_k, pos, rope, T, Hkv, D);  // now d(kn)
        float* dq = dqr;
        float* dk = d_k;
        if (cfg.qk_norm) {
            cpu::fill(d_big3, 0.0f, int64_t(T) * Q);
            cpu::rmsnorm_backward(d_big3, nullptr, dqr, a.q, w.q_norm.data(), a.q_rstd, T * Hq, D);
            cpu::fill(d_k2, 0.0f, int64_t(T) * KV);
            cpu::rmsnorm_backward(d_k2, nullptr, d_k, a.k, w.k_norm.data(), a.k_rstd, T * Hkv, D);
            dq = d_big3;
            dk = d_k2;
        }
        cpu::fill(d_ln, 0.0f, int64_t(T) * C);
        project_backward(l, kQ, d_ln, dq, a.ln1, T, train, seed);
        project_backward(l, kK, d_ln, dk, a.ln1, T, train, seed);
        project_backward(l, kV, d_ln, d_v, a.ln1, T, train, seed);
        cpu::rmsnorm_backward(d_res, nullptr, d_ln, a.x, w.ln1.data(), a.ln1_rstd, T, C);
    }
}

// ---------------------------------------------------------------------------------------------------------

namespace {

// Shapes and the LoRA index of a model: everything the arena's size depends on (load and plan share it).
void set_shapes(CpuModel::Impl& m, const ModelConfig& cfg, const LoraConfig& lora, int max_tokens) {
    m.cfg = cfg;
    m.lora = lora;
    m.lora_scaling = float(lora.scaling());
    m.C = int(cfg.hidden_size);
    m.Hq = int(cfg.num_attention_heads);
    m.Hkv = int(cfg.num_key_value_heads);
    m.D = int(cfg.head_dim);
    m.Q = m.Hq * m.D;
    m.KV = m.Hkv * m.D;
    m.F = int(cfg.intermediate_size);
    m.V = int(cfg.vocab_size);
    m.L = int(cfg.num_hidden_layers);
    m.R = lora.r;
    m.eps = float(cfg.rms_norm_eps);
    m.max_tokens = max_tokens;
    m.lora_index = lora_index_of(lora_tensor_specs(cfg, lora), m.L);
}

// Floats of the activation arena for max_tokens rows; load() carves exactly this much.
int64_t arena_floats(const CpuModel::Impl& m) {
    const int64_t T = m.max_tokens;
    const bool drop = m.lora.dropout > 0;
    const int64_t big = std::max<int64_t>(m.Q, m.F);
    int64_t total = 0;
    auto need = [&](int64_t n) { total += n; };
    for (int l = 0; l < m.L; ++l) {
        need(T * m.C * 2 + T);                          // x, ln1, ln1_rstd
        need(T * m.Q * 3 + T * m.KV * 5);               // q qn qr, k v kn kr (+ spare)
        need(T * m.Hq + T * m.Hkv + m.Hq * T);          // q_rstd k_rstd lse
        need(T * m.Q);                                  // att
        need(T * m.C * 2 + T);                          // mid ln2 ln2_rstd
        need(T * m.F * 3);                              // gate up act
        for (int k = 0; k < kNumModules; ++k)
            if (m.lora_index[size_t(l)][size_t(k)] >= 0) need(T * m.R + (drop ? T * m.in_of(k) : 0));
    }
    need(T * m.C * 2 + T);                       // x_final lnf lnf_rstd
    need(T * m.C * 3 + big * T * 3 + T * m.KV * 3 + T * m.R);  // d_res d_ln d_lnf d_big* d_k d_k2 d_v d_tmp
    if (drop) need(T * std::max<int64_t>(big, m.C));
    need(int64_t(kCeChunkRows) * m.V);
    return total;
}

}  // namespace

CpuModel::MemoryNeeds CpuModel::plan(const ModelConfig& cfg, const LoraConfig& lora, int max_tokens) {
    Impl m;
    set_shapes(m, cfg, lora, max_tokens);
    MemoryNeeds n;
    n.weights = uint64_t(cfg.parameter_count()) * sizeof(float);
    int64_t lora_floats = 0;
    for (const auto& spec : lora_tensor_specs(cfg, lora)) lora_floats += spec.shape.at(0) * spec.shape.at(1);
    n.lora_optimizer = uint64_t(lora_floats) * 4 * sizeof(float);  // value, grad, two AdamW moments
    n.activations = uint64_t(arena_floats(m)) * sizeof(float) + uint64_t(max_tokens) * sizeof(int32_t);
    return n;
}

CpuModel CpuModel::load(const std::filesystem::path& model_dir, const LoraConfig& lora, uint64_t seed,
                        int max_tokens) {
    ModelDir md = open_model_dir(model_dir);
    const ModelConfig& cfg = md.info.config;
    const std::string where = model_dir.string();
    if (!cfg.supported)
        throw_unsupported(where + ": " + cfg.architecture + " is not supported yet: " + cfg.unsupported_reason);
    if (cfg.hidden_act != "silu")
        throw_unsupported(where + ": hidden_act '" + cfg.hidden_act + "' (only silu is implemented)");
    if (max_tokens <= 0) throw_invalid(where + ": max_tokens must be positive");
    validate_lora_config(lora);

    auto impl = std::make_unique<Impl>();
    Impl& m = *impl;
    m.dir = model_dir;
    set_shapes(m, cfg, lora, max_tokens);

    // Weights (fp32 copies; bf16/f16 converted).
    const SafetensorsSet& ws = md.weights;
    m.embed = read_tensor(ws, "model.embed_tokens.weight");
    if (!cfg.tie_word_embeddings) m.lm_head = read_tensor(ws, "lm_head.weight");
    m.norm_f = read_tensor(ws, "model.norm.weight");
    m.layers.resize(m.L);
    for (int l = 0; l < m.L; ++l) {
        const std::string p = "model.layers." + std::to_string(l) + ".";
        LayerWeights& w = m.layers[l];
        w.ln1 = read_tensor(ws, p + "input_layernorm.weight");
        w.ln2 = read_tensor(ws, p + "post_attention_layernorm.weight");
        for (int k = 0; k < kNumModules; ++k) {
            const std::string base = p + (k < kGate ? "self_attn." : "mlp.") + kModuleNames[k];
            w.w[k] = read_tensor(ws, base + ".weight");
            const bool bias = (k <= kV && cfg.attention_bias) || (k == kO && cfg.o_proj_bias) ||
                              (k >= kGate && cfg.mlp_bias);
            if (bias) w.b[k] = read_tensor(ws, base + ".bias");
        }
        if (cfg.qk_norm) {
            w.q_norm = read_tensor(ws, p + "self_attn.q_norm.weight");
            w.k_norm = read_tensor(ws, p + "self_attn.k_norm.weight");
        }
    }
    m.rope = cpu::rope_table_build(m.D, cfg.rope_theta, cfg.rope_scaling, int(cfg.max_position_embeddings));
    if (m.rope.attention_scaling != 1.0f)
        throw_unsupported(where + ": rope attention scaling != 1 is not implemented");

    // LoRA parameters, PEFT init.
    m.params = init_lora_params(lora_tensor_specs(cfg, lora), seed);

    // Arena.
    const int64_t T = max_tokens;
    const bool drop = lora.dropout > 0;
    const int64_t big = std::max<int64_t>(m.Q, m.F);
    const int64_t total = arena_floats(m);
    m.arena.assign(size_t(total), 0.0f);
    float* cur = m.arena.data();
    auto take = [&](int64_t n) { float* p = cur; cur += n; return p; };
    m.acts.resize(m.L);
    for (int l = 0; l < m.L; ++l) {
        LayerActs& a = m.acts[l];
        a.x = take(T * m.C);
        a.ln1 = take(T * m.C);
        a.ln1_rstd = take(T);
        a.q = take(T * m.Q);
        a.qn = take(T * m.Q);
        a.qr = take(T * m.Q);
        a.k = take(T * m.KV);
        a.v = take(T * m.KV);
        a.kn = take(T * m.KV);
        a.kr = take(T * m.KV);
        take(T * m.KV);
        a.q_rstd = take(T * m.Hq);
        a.k_rstd = take(T * m.Hkv);
        a.lse = take(m.Hq * T);
        a.att = take(T * m.Q);
        a.mid = take(T * m.C);
        a.ln2 = take(T * m.C);
        a.ln2_rstd = take(T);
        a.gate = take(T * m.F);
        a.up = take(T * m.F);
        a.act = take(T * m.F);
        for (int k = 0; k < kNumModules; ++k) {
            a.lora_tmp[k] = nullptr;
            a.lora_drop[k] = nullptr;
            if (m.lora_index[l][k] >= 0) {
                a.lora_tmp[k] = take(T * m.R);
                if (drop) a.lora_drop[k] = take(T * m.in_of(k));
            }
        }
    }
    m.x_final = take(T * m.C);
    m.lnf = take(T * m.C);
    m.lnf_rstd = take(T);
    m.d_res = take(T * m.C);
    m.d_ln = take(T * m.C);
    m.d_lnf = take(T * m.C);
    m.d_big = take(big * T);
    m.d_big2 = take(big * T);
    m.d_big3 = take(big * T);
    m.d_k = take(T * m.KV);
    m.d_k2 = take(T * m.KV);
    m.d_v = take(T * m.KV);
    m.d_tmp = take(T * m.R);
    m.d_drop = drop ? take(T * std::max<int64_t>(big, m.C)) : nullptr;
    m.ce_scratch = take(int64_t(kCeChunkRows) * m.V);
    if (cur != m.arena.data() + total) throw_internal("model: arena carving mismatch");
    m.targets.assign(size_t(T), cpu::kIgnoreIndex);
    return CpuModel(std::move(impl));
}

CpuModel::CpuModel(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
CpuModel::CpuModel(CpuModel&&) noexcept = default;
CpuModel& CpuModel::operator=(CpuModel&&) noexcept = default;
CpuModel::~CpuModel() = default;

const ModelConfig& CpuModel::config() const { return impl_->cfg; }
const LoraConfig& CpuModel::lora_config() const { return impl_->lora; }
const std::filesystem::path& CpuModel::model_dir() const { return impl_->dir; }
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
    m.forward(batch, true, dropout_seed);
    const int T = batch.num_tokens;
    const double loss = cpu::lm_head_cross_entropy(m.d_lnf, m.lnf, m.head(), m.targets.data(), T, m.C, m.V,
                                                   grad_scale, kCeChunkRows, m.ce_scratch);
    m.backward(batch, true, dropout_seed);
    return loss;
}

double CpuModel::forward_loss(const PackedBatch& batch) {
    Impl& m = *impl_;
    m.forward(batch, false, 0);
    return cpu::lm_head_cross_entropy(nullptr, m.lnf, m.head(), m.targets.data(), batch.num_tokens, m.C, m.V, 1.0f,
                                      kCeChunkRows, m.ce_scratch);
}

std::vector<float> CpuModel::logits(const PackedBatch& batch) {
    Impl& m = *impl_;
    m.forward(batch, false, 0);
    std::vector<float> out(size_t(batch.num_tokens) * m.V);
    cpu::lm_head_logits(out.data(), m.lnf, m.head(), batch.num_tokens, m.C, m.V);
    return out;
}

std::vector<float> CpuModel::last_logits(const std::vector<int32_t>& ids) {
    Impl& m = *impl_;
    const PackedBatch b = batch_from_sequences({ids});
    m.forward(b, false, 0);
    std::vector<float> out(size_t(m.V));
    cpu::lm_head_logits(out.data(), m.lnf + int64_t(b.num_tokens - 1) * m.C, m.head(), 1, m.C, m.V);
    return out;
}

int CpuModel::max_tokens() const { return impl_->max_tokens; }

size_t CpuModel::weight_bytes() const {
    const Impl& m = *impl_;
    size_t n = m.embed.size() + m.lm_head.size() + m.norm_f.size();
    for (const auto& w : m.layers) {
        n += w.ln1.size() + w.ln2.size() + w.q_norm.size() + w.k_norm.size();
        for (int k = 0; k < kNumModules; ++k) n += w.w[k].size() + w.b[k].size();
    }
    return n * sizeof(float);
}

size_t CpuModel::lora_bytes() const {
    size_t n = 0;
    for (const auto& p : impl_->params) n += p.value.size() + p.grad.size();
    return n * sizeof(float);
}

size_t CpuModel::activation_bytes() const {
    return impl_->arena.size() * sizeof(float) + impl_->targets.size() * sizeof(int32_t);
}

int check_packed_batch(const PackedBatch& b, int max_tokens, int vocab, int64_t max_positions,
                       int64_t sliding_window) {
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
    if (sliding_window > 0 && longest > sliding_window)
        throw_unsupported("model: a sample of " + std::to_string(longest) + " tokens is longer than the model's " +
                          "sliding attention window of " + std::to_string(sliding_window) +
                          " tokens, which Tandem does not implement yet (it would attend over the whole sample); "
                          "use samples of at most " + std::to_string(sliding_window) + " tokens (max_seq_len)");
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
