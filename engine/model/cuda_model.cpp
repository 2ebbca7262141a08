// tandem::CudaModel (see cuda_model.h): the decoder family on the CUDA backend, model.cpp's CpuModel block
// for block over engine/kernels/cuda ops, bf16 storage with fp32 statistics and accumulation.
// T = tokens of the micro-batch (rows 0..T-1, real tokens only; buffers hold max_tokens rows), C = hidden,
// Q = Hq*D, KV = Hkv*D, F = intermediate, V = vocab, L = layers, R = LoRA rank, D = head_dim,
// BIG = max(Q,F), IN = max(C,Q,F), K = lm_head chunk rows, P = LoRA elements (each tensor padded to 64).
// Decisions a reader must know:
//  - Memory: four arenas (weights, LoRA + AdamW, activations, workspace), laid out by ONE function
//    (make_layout) that plan() and load() share, so the plan is the allocation byte for byte. Nothing is
//    allocated after load. The workspace arena doubles as the fp16/fp32 -> bf16 staging buffer at load.
//  - Residual adds are fused into the next RMSNorm (residual_rmsnorm_forward): the attention block writes
//    mid and ln2; the MLP block writes the next block's x and ln1 (the last block: x_final and lnf).
//  - Recomputed in backward instead of kept (elementwise passes; large memory savings): the SwiGLU output
//    act (from gate and up) and the LoRA-dropped inputs (the mask is a pure hash of (seed, layer, module,
//    index), so the recomputed bf16 values are the ones forward used). The CPU model stores both.
//  - Checkpointing Recompute: every layer keeps its input x; all layers share ONE set of the other
//    buffers; backward re-runs layer l's forward (same dropout seed, same attention backend) into that set
//    right before layer l's backward. The last layer's set is still intact after the forward: not re-run.
//  - Checkpointing Smart / SmartSingle: Recompute (same code, same seeds, so the same bits) with nb = 2 / 1
//    device buffers for the block inputs instead of L: layer l's input lives in buffer l % nb. Inputs of
//    layers l < L - nb are copied to a pinned host slot on a copy stream in forward and copied back in
//    backward (the last nb inputs are still in their buffers then: never copied). Smart reloads layer
//    l-1's input into the other buffer while layer l runs; SmartSingle reloads layer l's and waits. Events
//    order copy -> use and use -> overwrite; the host never waits inside the step (the compute stream
//    waits on the last reload, so the step's final sync covers the copy stream too).
//  - Batch metadata (tokens, targets, positions, cu_seqlens, built on the host once per micro-batch) goes
//    up in ONE async copy per batch on its own upload stream: kHostMetaSlots pinned host slots, two device
//    slots (double-buffered: batch n+1's upload runs while batch n computes). Events order upload -> use
//    and use -> next upload into the same device slot. Every layer, forward and backward, reads the same
//    device slot. A host slot is rewritten only after its copy ran: known without waiting when a later
//    step was collected, else one counted wait (never with grad_accum <= 2).
//  - Host syncs (each through core/cuda/context.h's counting wrappers): the trainer's path
//    (forward_backward_async / optimizer_step_async / collect_step) has ONE per optimizer step, in
//    collect_step, which reads the previous step's {loss sum, grad norm} from pinned memory while the
//    device runs the next step. The blocking forward_backward / forward_loss / optimizer_step (selftest,
//    evaluation) have one each. The ablation rebuild_metadata_per_layer adds one per layer and direction.
//  - CUDA graphs (options.cuda_graphs): forward_backward_async's micro-step (forward, loss, backward; the
//    upload and its wait stay outside) is captured per GraphKey (T, S, longest sample, attention path,
//    device metadata slot) and replayed. The per-batch scalars the kernels take (dropout seed, grad_scale)
//    are in the metadata slot's header, read on the device, so a replay is the eager step bit for bit. A
//    shape runs eagerly first (cuBLASLt heuristics, cuDNN plans, kernel attributes are built outside any
//    capture); its next micro-batch in a slot is captured. Smart's copy stream forks from and joins the
//    compute stream inside the capture (its events are recorded inside it). A graph has no forward /
//    backward split (the timing events stay outside); timeline and the metadata ablation run eagerly.
#include "model/cuda_model.h"

#include "tandem/error.h"

#if TANDEM_WITH_CUDA

#include <algorithm>
#include <array>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <string>
#include <utility>

#include "backend/cuda/backend.h"  // the op table these calls will go through (M3)
#include "core/random.h"
#include "kernels/cpu/cross_entropy.h"  // kIgnoreIndex
#include "kernels/cpu/rope.h"
#include "kernels/cuda/adamw.h"
#include "kernels/cuda/attention.h"
#include "core/cuda/context.h"
#include "kernels/cuda/cross_entropy.h"
#include "kernels/cuda/cudnn_attention.h"
#include "kernels/cuda/dropout.h"
#include "kernels/cuda/elementwise.h"
#include "kernels/cuda/embedding.h"
#include "kernels/cuda/matmul.h"
#include "core/cuda/memory.h"
#include "core/cuda/owners.h"
#include "kernels/cuda/rmsnorm.h"
#include "kernels/cuda/rope.h"
#include "kernels/cuda/swiglu.h"
#include "tandem/model_dir.h"
#include "tandem/safetensors.h"

namespace tandem {
namespace {

using cuda::bf16;
using cuda::Event;
using cuda::GraphExec;
using cuda::GraphOwner;
using cuda::PinnedBuffer;
using cuda::Stream;

// CUDA context + cuBLAS/cuDNN handles and their internal buffers: an estimate, not allocated by us.
constexpr uint64_t kContextBytes = uint64_t(600) << 20;
// lm_head chunk: K rows of fp32 logits, K*V*4 bytes at most this (K a multiple of 64, at most max_tokens).
constexpr int64_t kCeChunkBytes = int64_t(256) << 20;
// LoRA tensors start at multiples of this many elements in every LoRA region (256-byte aligned fp32).
constexpr int64_t kLoraAlign = 64;
// Rows of the batch metadata segments are padded to this (256-byte aligned int32 segments).
constexpr int64_t kMetaAlign = 64;
// The metadata starts with this many int32 of per-batch scalars the kernels read on the device (so that a
// CUDA graph replays with each batch's values): [0,1] the dropout seed (uint64), [2] grad_scale (float).
constexpr int64_t kMetaHeader = kMetaAlign;
// Readback slots at the start of the pinned buffer: loss sum (double) at 0, grad norm (float) at 8 (the
// blocking calls); then kStepSlots async step slots of 16 bytes {double loss sum, float grad norm} from 16.
constexpr size_t kPinnedHeader = 64;
constexpr int kStepSlots = 2;      // optimizer steps queued before collect_step must be called
constexpr int kHostMetaSlots = 4;  // pinned metadata slots (batches in flight without a host wait)
constexpr size_t kMaxGraphs = 8;      // CUDA graphs kept (least recently used evicted)
constexpr size_t kMaxShapesSeen = 64; // shapes remembered as "ran eagerly once" (oldest forgotten)

int64_t round_up(int64_t x, int64_t m) { return (x + m - 1) / m * m; }

// Device buffers holding block inputs under Smart (2) / SmartSingle (1); 0: not an offloading policy.
int offload_buffers(CheckpointPolicy p) {
    return p == CheckpointPolicy::Smart ? 2 : p == CheckpointPolicy::SmartSingle ? 1 : 0;
}
// Layers whose input goes to pinned host memory: 0 .. L-nb-1 (the last nb stay in their buffers).
int offloaded_layers(CheckpointPolicy p, int L) {
    const int nb = offload_buffers(p);
    return nb == 0 ? 0 : std::max(L - nb, 0);
}

// ---------------------------------------------------------------------------------------------------------
// Dimensions and the memory layout (shared by plan and load)
// ---------------------------------------------------------------------------------------------------------

struct Dims {
    int C = 0, Q = 0, KV = 0, F = 0, V = 0, L = 0, Hq = 0, Hkv = 0, D = 0, R = 0;
    int T = 0;               // max_tokens: rows of every activation buffer
    int max_seqlen = 0;      // longest sample the attention buffers are sized for
    int K = 0;               // lm_head chunk rows
    int rope_positions = 0;  // rows of the RoPE table: min(max_position_embeddings, max_tokens)
    float eps = 1e-6f;
    bool qk_norm = false, tied = false, dropout = false;
    bool bias[kNumModules] = {};

    int big() const { return std::max(Q, F); }
    int in_max() const { return std::max({C, Q, F}); }
    int in_of(int m) const { return m == kO ? Q : (m == kDown ? F : C); }
    int out_of(int m) const {
        switch (m) {
        case kQ: return Q;
        case kK: case kV: return KV;
        case kGate: case kUp: return F;
        default: return C;
        }
    }
};

void validate(const ModelConfig& cfg, const LoraConfig& lora, const CudaModelOptions& o, const std::string& where) {
    if (!cfg.supported)
        throw_unsupported(where + ": " + cfg.architecture + " is not supported yet: " + cfg.unsupported_reason);
    if (cfg.hidden_act != "silu")
        throw_unsupported(where + ": hidden_act '" + cfg.hidden_act + "' (only silu is implemented)");
    if (o.max_tokens <= 0) throw_invalid(where + ": max_tokens must be positive");
    if (o.max_seqlen < 0) throw_invalid(where + ": max_seqlen must not be negative");
    if (o.checkpointing == CheckpointPolicy::Auto)
        throw_unsupported(where +
                          ": the CUDA model takes checkpointing 'off', 'recompute', 'smart' or "
                          "'smart-single' ('auto' is resolved by the trainer)");
    validate_lora_config(lora);
    const int64_t dims[] = {cfg.hidden_size, cfg.intermediate_size, cfg.num_hidden_layers, cfg.num_attention_heads,
                            cfg.num_key_value_heads, cfg.head_dim, cfg.vocab_size, cfg.max_position_embeddings};
    for (int64_t v : dims)
        if (v <= 0 || v > (int64_t(1) << 30)) throw_invalid(where + ": a model dimension is zero, negative or absurd");
    if (cfg.num_attention_heads % cfg.num_key_value_heads != 0)
        throw_invalid(where + ": num_attention_heads must be a multiple of num_key_value_heads");
    if (cfg.head_dim % 2 != 0) throw_invalid(where + ": head_dim must be even (RoPE)");
}

Dims make_dims(const ModelConfig& cfg, const LoraConfig& lora, const CudaModelOptions& o) {
    Dims d;
    d.C = int(cfg.hidden_size);
    d.Hq = int(cfg.num_attention_heads);
    d.Hkv = int(cfg.num_key_value_heads);
    d.D = int(cfg.head_dim);
    d.Q = d.Hq * d.D;
    d.KV = d.Hkv * d.D;
    d.F = int(cfg.intermediate_size);
    d.V = int(cfg.vocab_size);
    d.L = int(cfg.num_hidden_layers);
    d.R = lora.r;
    d.T = o.max_tokens;
    d.max_seqlen = o.max_seqlen > 0 ? std::min(o.max_seqlen, o.max_tokens) : o.max_tokens;
    int64_t k = kCeChunkBytes / (int64_t(d.V) * int64_t(sizeof(float)));
    k = std::max<int64_t>(k / 64 * 64, 64);
    d.K = int(std::min<int64_t>(k, d.T));
    d.rope_positions = int(std::min<int64_t>(cfg.max_position_embeddings, d.T));
    d.eps = float(cfg.rms_norm_eps);
    d.qk_norm = cfg.qk_norm;
    d.tied = cfg.tie_word_embeddings;
    d.dropout = lora.dropout > 0;
    for (int m = 0; m < kNumModules; ++m)
        d.bias[m] = (m <= kV && cfg.attention_bias) || (m == kO && cfg.o_proj_bias) || (m >= kGate && cfg.mlp_bias);
    return d;
}

// The table is built for the positions a micro-batch can hold (a sample never exceeds max_tokens), not for
// max_position_embeddings: for 128K-context models that is ~64 MB of device memory saved.
cpu::RopeTable build_rope(const ModelConfig& cfg, const Dims& d, const std::string& where) {
    cpu::RopeTable t = cpu::rope_table_build(d.D, cfg.rope_theta, cfg.rope_scaling, d.rope_positions);
    if (t.attention_scaling != 1.0f) throw_unsupported(where + ": rope attention scaling != 1 is not implemented");
    return t;
}

struct LayerWeightHandles {
    int ln1 = -1, ln2 = -1, q_norm = -1, k_norm = -1;
    int w[kNumModules] = {-1, -1, -1, -1, -1, -1, -1};
    int b[kNumModules] = {-1, -1, -1, -1, -1, -1, -1};
};

// One layer's activation pieces (-1: not present in this configuration).
struct ActHandles {
    int x = -1, ln1 = -1, ln1_rstd = -1;
    int q = -1, k = -1, q_rstd = -1, k_rstd = -1;  // qk_norm only
    int qr = -1, kr = -1, v = -1, att = -1, stats = -1;
    int mid = -1, ln2 = -1, ln2_rstd = -1, gate = -1, up = -1;
    int tmp[kNumModules] = {-1, -1, -1, -1, -1, -1, -1};
};

struct Layout {
    cuda::Arena weights, lora, acts, work;
    // weights
    int embed = -1, lm_head = -1, norm_f = -1, rope = -1;
    std::vector<LayerWeightHandles> lw;
    // LoRA: five regions with the same per-tensor element offsets, plus the AdamW descriptors
    int lora_value = -1, lora_grad = -1, lora_m = -1, lora_v = -1, lora_bf16 = -1, lora_desc = -1;
    std::vector<int64_t> lora_offset, lora_numel;
    int64_t lora_padded = 0, lora_total = 0;
    // activations: L sets (Off) or one shared set plus L block inputs (Recompute) or plus min(nb, L)
    // block-input buffers (Smart: nb = 2, SmartSingle: nb = 1; x_store[l % nb] is layer l's input)
    std::vector<ActHandles> sets;
    std::vector<int> x_store;
    size_t stats_bytes = 0;
    int x_final = -1, lnf = -1, lnf_rstd = -1;
    int d_res = -1, d_ln = -1, d_lnf = -1, d_big = -1, d_big2 = -1, d_big3 = -1, d_k = -1, d_k2 = -1, d_v = -1;
    int d_tmp = -1, xd = -1, d_drop = -1, losses = -1, meta = -1;
    int64_t meta_ints = 0;
    // workspace
    int ce = -1, att_ws = -1, gn_ws = -1, loss_sum = -1, norm = -1;
    size_t att_ws_bytes = 0;
    CudaMemoryPlan plan;
};

Layout make_layout(const Dims& d, const cpu::RopeTable& rope, const std::vector<LoraTensorSpec>& specs,
                   const std::vector<std::array<int, kNumModules>>& lora_index, const CudaModelOptions& o) {
    Layout y;
    const size_t T = size_t(d.T);
    auto bf = [](size_t n) { return n * sizeof(bf16); };
    auto f32 = [](size_t n) { return n * sizeof(float); };

    // Weights, in file order (bf16; fp32 RoPE table).
    y.embed = y.weights.reserve(bf(size_t(d.V) * d.C), "embed_tokens");
    if (!d.tied) y.lm_head = y.weights.reserve(bf(size_t(d.V) * d.C), "lm_head");
    y.norm_f = y.weights.reserve(bf(d.C), "norm");
    y.rope = y.weights.reserve(cuda::rope_table_bytes(rope), "rope table");
    y.lw.resize(size_t(d.L));
    for (int l = 0; l < d.L; ++l) {
        const std::string p = "layer " + std::to_string(l) + " ";
        LayerWeightHandles& h = y.lw[size_t(l)];
        h.ln1 = y.weights.reserve(bf(d.C), p + "input_layernorm");
        h.ln2 = y.weights.reserve(bf(d.C), p + "post_attention_layernorm");
        for (int m = 0; m < kNumModules; ++m) {
            h.w[m] = y.weights.reserve(bf(size_t(d.out_of(m)) * d.in_of(m)), p + kModuleNames[m]);
            if (d.bias[m]) h.b[m] = y.weights.reserve(bf(d.out_of(m)), p + kModuleNames[m] + " bias");
        }
        if (d.qk_norm) {
            h.q_norm = y.weights.reserve(bf(d.D), p + "q_norm");
            h.k_norm = y.weights.reserve(bf(d.D), p + "k_norm");
        }
    }

    // LoRA + AdamW.
    for (const auto& s : specs) {
        const int64_t n = s.shape.at(0) * s.shape.at(1);
        y.lora_offset.push_back(y.lora_padded);
        y.lora_numel.push_back(n);
        y.lora_padded += round_up(n, kLoraAlign);
        y.lora_total += n;
    }
    const size_t P = size_t(y.lora_padded);
    y.lora_value = y.lora.reserve(f32(P), "lora values");
    y.lora_grad = y.lora.reserve(f32(P), "lora grads");
    y.lora_m = y.lora.reserve(f32(P), "lora exp_avg");
    y.lora_v = y.lora.reserve(f32(P), "lora exp_avg_sq");
    y.lora_bf16 = y.lora.reserve(bf(P), "lora bf16 copies");
    y.lora_desc = y.lora.reserve(specs.size() * sizeof(cuda::AdamWTensor), "adamw descriptors");

    // Activations.
    y.stats_bytes = f32(size_t(d.Hq) * T);  // in-house lse [Hq,T]
    if (o.attention != AttentionBackend::Inhouse)
        y.stats_bytes = std::max(y.stats_bytes, cuda::cudnn_attention_stats_bytes_max(d.T, d.max_seqlen, d.Hq));
    auto make_set = [&](const std::string& p, bool with_x, const std::array<bool, kNumModules>& adapted) {
        cuda::Arena& a = y.acts;
        ActHandles s;
        if (with_x) s.x = a.reserve(bf(T * d.C), p + "x");
        s.ln1 = a.reserve(bf(T * d.C), p + "ln1");
        s.ln1_rstd = a.reserve(f32(T), p + "ln1 rstd");
        if (d.qk_norm) {
            s.q = a.reserve(bf(T * d.Q), p + "q");
            s.k = a.reserve(bf(T * d.KV), p + "k");
            s.q_rstd = a.reserve(f32(T * d.Hq), p + "q rstd");
            s.k_rstd = a.reserve(f32(T * d.Hkv), p + "k rstd");
        }
        s.qr = a.reserve(bf(T * d.Q), p + "q rope");
        s.kr = a.reserve(bf(T * d.KV), p + "k rope");
        s.v = a.reserve(bf(T * d.KV), p + "v");
        s.att = a.reserve(bf(T * d.Q), p + "attention out");
        s.stats = a.reserve(y.stats_bytes, p + "attention stats");
        s.mid = a.reserve(bf(T * d.C), p + "mid");
        s.ln2 = a.reserve(bf(T * d.C), p + "ln2");
        s.ln2_rstd = a.reserve(f32(T), p + "ln2 rstd");
        s.gate = a.reserve(bf(T * d.F), p + "gate");
        s.up = a.reserve(bf(T * d.F), p + "up");
        for (int m = 0; m < kNumModules; ++m)
            if (adapted[size_t(m)]) s.tmp[m] = a.reserve(bf(T * d.R), p + "lora " + kModuleNames[m]);
        return s;
    };
    std::array<bool, kNumModules> any_adapted{};
    for (int l = 0; l < d.L; ++l)
        for (int m = 0; m < kNumModules; ++m) any_adapted[size_t(m)] |= lora_index[size_t(l)][size_t(m)] >= 0;
    const bool any_lora = !specs.empty();
    if (o.checkpointing == CheckpointPolicy::Off) {
        for (int l = 0; l < d.L; ++l) {
            std::array<bool, kNumModules> adapted{};
            for (int m = 0; m < kNumModules; ++m) adapted[size_t(m)] = lora_index[size_t(l)][size_t(m)] >= 0;
            y.sets.push_back(make_set("layer " + std::to_string(l) + " ", true, adapted));
        }
    } else if (o.checkpointing == CheckpointPolicy::Recompute) {
        for (int l = 0; l < d.L; ++l) y.x_store.push_back(y.acts.reserve(bf(T * d.C), "layer " + std::to_string(l) + " x"));
        y.sets.push_back(make_set("recompute ", false, any_adapted));
    } else {
        const int nbuf = std::min(offload_buffers(o.checkpointing), d.L);
        for (int b = 0; b < nbuf; ++b)
            y.x_store.push_back(y.acts.reserve(bf(T * d.C), std::string("block input ") + char('A' + b)));
        y.sets.push_back(make_set("recompute ", false, any_adapted));
    }
    y.x_final = y.acts.reserve(bf(T * d.C), "x final");
    y.lnf = y.acts.reserve(bf(T * d.C), "final norm");
    y.lnf_rstd = y.acts.reserve(f32(T), "final norm rstd");
    y.d_res = y.acts.reserve(bf(T * d.C), "d residual");
    y.d_ln = y.acts.reserve(bf(T * d.C), "d ln");
    y.d_lnf = y.acts.reserve(bf(T * d.C), "d final norm");
    y.d_big = y.acts.reserve(bf(T * size_t(d.big())), "d big");
    y.d_big2 = y.acts.reserve(bf(T * size_t(d.big())), "d big2");
    y.d_big3 = y.acts.reserve(bf(T * size_t(d.big())), "d big3");
    y.d_k = y.acts.reserve(bf(T * d.KV), "d k");
    if (d.qk_norm) y.d_k2 = y.acts.reserve(bf(T * d.KV), "d k2");
    y.d_v = y.acts.reserve(bf(T * d.KV), "d v");
    if (any_lora) y.d_tmp = y.acts.reserve(bf(T * d.R), "d lora tmp");
    if (any_lora && d.dropout) {
        y.xd = y.acts.reserve(bf(T * size_t(d.in_max())), "lora dropped input");
        y.d_drop = y.acts.reserve(bf(T * size_t(d.in_max())), "d lora dropped input");
    }
    y.losses = y.acts.reserve(f32(T), "row losses");
    // Header (seed, grad_scale), tokens, targets, positions (each padded to kMetaAlign rows), cu_seqlens (at
    // most T+1); a slot is a multiple of kMetaAlign ints, so both slots' headers are 256-byte aligned.
    y.meta_ints = round_up(kMetaHeader + 3 * round_up(d.T, kMetaAlign) + d.T + 1, kMetaAlign);
    y.meta = y.acts.reserve(2 * size_t(y.meta_ints) * sizeof(int32_t), "batch metadata (two slots)");

    // Workspace. Piece 0 starts the arena, so the whole arena is one scratch span (load staging, logits).
    y.ce = y.work.reserve(cuda::lm_head_cross_entropy_workspace(d.K, d.V), "lm_head chunk");
    if (cuda::attention_supported(d.D)) y.att_ws_bytes = cuda::attention_backward_workspace(d.T, d.Hq, d.D);
    if (o.attention != AttentionBackend::Inhouse)
        y.att_ws_bytes = std::max(
            y.att_ws_bytes, cuda::cudnn_attention_workspace_bytes_max(d.T, d.max_seqlen, d.Hq, d.Hkv, d.D));
    y.att_ws = y.work.reserve(y.att_ws_bytes, "attention workspace");
    if (any_lora)
        y.gn_ws = y.work.reserve(cuda::grad_norm_workspace(int(specs.size()), y.lora_total), "grad norm scratch");
    y.loss_sum = y.work.reserve(2 * sizeof(double), "loss sum (batch, step)");
    y.norm = y.work.reserve(sizeof(float), "grad norm");

    y.plan.weights = y.weights.size();
    y.plan.lora_optimizer = y.lora.size();
    y.plan.activations = y.acts.size();
    y.plan.workspace = y.work.size() + cuda::kLtWorkspaceBytes;  // the context's cuBLASLt workspace too
    y.plan.context = kContextBytes;
    y.plan.total = y.plan.weights + y.plan.lora_optimizer + y.plan.activations + y.plan.workspace + y.plan.context;
    y.plan.pinned_host = uint64_t(offloaded_layers(o.checkpointing, d.L)) * bf(T * d.C);  // one slot per layer
    return y;
}

cudaStream_t stream() { return cuda::context().stream; }

template <class X>
void zero(X* p, int64_t n) {
    TANDEM_CUDA_CHECK(cudaMemsetAsync(p, 0, size_t(n) * sizeof(X), stream()));
}

template <class X>
X* piece(const cuda::Arena& a, int handle) {
    return handle < 0 ? nullptr : a.ptr<X>(handle);
}

struct LayerWeights {
    bf16* ln1 = nullptr;  // [C]
    bf16* ln2 = nullptr;  // [C]
    bf16* w[kNumModules] = {};  // q [Q,C], k [KV,C], v [KV,C], o [C,Q], gate [F,C], up [F,C], down [C,F]
    bf16* b[kNumModules] = {};  // [OUT] or nullptr
    bf16* q_norm = nullptr;     // [D] (qk_norm only)
    bf16* k_norm = nullptr;     // [D]
};

// Activations of one layer (pointers into the arena; under Recompute every layer shares all but x; under
// Smart x is one of the nb block-input buffers).
struct LayerActs {
    bf16* x = nullptr;          // [T,C] block input (residual stream)
    bf16* ln1 = nullptr;        // [T,C]
    float* ln1_rstd = nullptr;  // [T]
    bf16* q = nullptr;          // [T,Q] projection before q norm (qk_norm only)
    bf16* k = nullptr;          // [T,KV] (qk_norm only)
    float* q_rstd = nullptr;    // [T*Hq] (qk_norm only)
    float* k_rstd = nullptr;    // [T*Hkv] (qk_norm only)
    bf16* qr = nullptr;         // [T,Q] attention input: projection (+ q norm) + RoPE, in place
    bf16* kr = nullptr;         // [T,KV]
    bf16* v = nullptr;          // [T,KV]
    bf16* att = nullptr;        // [T,Q] attention output
    void* stats = nullptr;      // lse [Hq,T] fp32 (in-house) or cuDNN's stats layout
    bf16* mid = nullptr;        // [T,C] residual after attention
    bf16* ln2 = nullptr;        // [T,C]
    float* ln2_rstd = nullptr;  // [T]
    bf16* gate = nullptr;       // [T,F]
    bf16* up = nullptr;         // [T,F]
    bf16* lora_tmp[kNumModules] = {};  // [T,R] input @ A^T per adapted module
};

// The micro-batch being run (set by begin_batch).
struct Step {
    int T = 0, S = 0, max_seqlen = 0;
    const int32_t* tokens = nullptr;     // [T] device
    const int32_t* targets = nullptr;    // [T] device: labels shifted by one, -100 on the last row
    const int32_t* positions = nullptr;  // [T] device
    const int32_t* cu_seqlens = nullptr; // [S+1] device
    const uint64_t* seed = nullptr;      // [1] device: the LoRA dropout seed
    const float* grad_scale = nullptr;   // [1] device: the loss gradient's scale
    bool cudnn = false;                  // attention backend of this batch (forward, recompute, backward)
    cuda::CudnnAttentionShape shape;
};

// What the host decides per micro-batch that changes the work a micro-step launches: sizes and grids (T,
// S, max_seqlen: the in-house attention grid is over S x max_seqlen tiles, cuDNN's graph and offsets over
// their buckets and S), the attention path, and the device metadata slot whose pointers the kernels get.
// Everything else a batch brings (tokens, targets, positions, cu_seqlens, the dropout seed, grad_scale) is
// read on the device from that slot; the model's options (checkpointing, LoRA, dropout p) are fixed.
struct GraphKey {
    int T = 0, S = 0, max_seqlen = 0;
    bool cudnn = false;
    int slot = -1;  // -1 in the list of shapes seen (any slot)
    bool operator==(const GraphKey&) const = default;
};

struct CachedGraph {
    GraphKey key;
    GraphExec exec;
    uint64_t last_use = 0;
};

}  // namespace

// ---------------------------------------------------------------------------------------------------------
// Impl
// ---------------------------------------------------------------------------------------------------------

struct CudaModel::Impl {
    ModelConfig cfg;
    LoraConfig lora;
    CudaModelOptions options;
    Dims d;
    float lora_scaling = 1.0f;
    float attn_scale = 1.0f;
    cpu::RopeTable rope_host;
    cuda::RopeTableDevice rope;
    Layout y;

    // Weights.
    bf16* embed = nullptr;    // [V,C]
    bf16* lm_head = nullptr;  // [V,C] (embed when tied)
    bf16* norm_f = nullptr;   // [C]
    std::vector<LayerWeights> layers;

    // LoRA: host mirror + device regions (tensor i at y.lora_offset[i] in each region).
    std::vector<LoraParam> params;
    std::vector<std::array<int, kNumModules>> lora_index;
    float* lora_value = nullptr;  // [P] fp32 masters
    float* lora_grad = nullptr;   // [P]
    float* lora_m = nullptr;      // [P]
    float* lora_v = nullptr;      // [P]
    bf16* lora_bf16 = nullptr;    // [P] copies the GEMMs read
    cuda::AdamWTensor* lora_desc = nullptr;  // [count]

    // Activations.
    std::vector<LayerActs> acts;
    bf16* x_final = nullptr;      // [T,C]
    bf16* lnf = nullptr;          // [T,C]
    float* lnf_rstd = nullptr;    // [T]
    bf16* d_res = nullptr;        // [T,C] gradient of the residual stream
    bf16* d_ln = nullptr;         // [T,C] gradient of a norm output; forward: projection output scratch (y)
    bf16* d_lnf = nullptr;        // [T,C] written by the loss
    bf16* d_big = nullptr;        // [T,BIG] dact / datt
    bf16* d_big2 = nullptr;       // [T,BIG] dgate / dq
    bf16* d_big3 = nullptr;       // [T,BIG] dup / dq after q norm; forward and backward: act scratch
    bf16* d_k = nullptr;          // [T,KV]
    bf16* d_k2 = nullptr;         // [T,KV] dk after k norm (qk_norm only)
    bf16* d_v = nullptr;          // [T,KV]
    bf16* d_tmp = nullptr;        // [T,R]
    bf16* xd = nullptr;           // [T,IN] dropped LoRA input (dropout only)
    bf16* d_drop = nullptr;       // [T,IN] its gradient (dropout only)
    float* losses = nullptr;      // [T]
    int32_t* meta = nullptr;      // [2, meta_ints] device metadata slots
    // Workspace.
    char* work_base = nullptr;    // the whole workspace arena (staging at load, logits chunks)
    size_t work_bytes = 0;
    void* ce_ws = nullptr;
    void* att_ws = nullptr;
    void* gn_ws = nullptr;
    double* loss_sum = nullptr;   // [0] this batch's, [1] the step's (async path, zeroed by zero_grads)
    float* norm = nullptr;

    PinnedBuffer pinned;  // [kPinnedHeader readback | kHostMetaSlots x meta_ints int32]
    Event ev_start, ev_mid, ev_end;
    bool timed = false;

    // Metadata upload (see the header comment).
    Stream upload;
    Event ev_meta_up[2];                   // upload stream: device slot s holds its batch
    Event ev_meta_free[2];                 // compute stream: the batch in device slot s is done
    Event ev_host_meta[kHostMetaSlots];    // upload stream: the copy out of host slot h ran
    uint64_t host_meta_seq[kHostMetaSlots] = {};
    uint64_t batch_seq = 0;                // batches begun
    uint64_t completed_seq = 0;            // batches known complete (a sync or a collected step covers them)
    int dev_slot = 0, host_slot_meta = 0;  // the current batch's slots
    const PackedBatch* cur_batch = nullptr;
    float cur_grad_scale = 1.0f;           // the current batch's header values (rebuild_metadata rewrites them)
    uint64_t cur_seed = 0;

    // Async steps: slot r = step % kStepSlots holds {loss sum, grad norm} and the step's timing events.
    int64_t steps_queued = 0, steps_collected = 0;
    uint64_t step_last_seq[kStepSlots] = {};
    Event ev_step_done[kStepSlots];
    Event ev_t[kStepSlots][4];             // forward start, loss, backward end (last micro-batch), optimizer end
    CudaStepTiming collected_timing;

    // Timeline (options.timeline): per-layer events on both streams, read by timeline().
    std::vector<TimelineSpan> timeline_spans;
    std::vector<std::array<Event, 2>> tl_events;  // pairs (begin, end), timeline_spans[i] <-> tl_events[i]
    size_t tl_used = 0;

    // Smart / SmartSingle (nb > 0): block inputs offloaded to pinned slots on the copy stream.
    int nb = 0;             // device block-input buffers: 2 (Smart), 1 (SmartSingle), 0 (not offloading)
    int offloaded = 0;      // layers 0 .. offloaded-1 have a host slot (L - nb)
    PinnedBuffer x_host;    // [offloaded, max_tokens, C] bf16
    Stream copy;            // non-blocking; only checkpoint copies run on it
    Event ev_x_ready;       // compute: a block input is complete (the offload waits on it)
    Event ev_offloaded[2];  // copy: buffer b's input is on the host (before compute overwrites b)
    Event ev_used[2];       // compute: a layer's backward finished reading buffer b (before a reload)
    Event ev_reloaded[2];   // copy: buffer b holds the reloaded input (before compute reads it)

    // CUDA graphs (options.cuda_graphs): captured micro-steps of forward_backward_async, per GraphKey.
    std::vector<CachedGraph> graphs;   // at most kMaxGraphs
    std::vector<GraphKey> shapes_seen; // shapes that ran eagerly once (slot -1), least recent first
    uint64_t graph_clock = 0;
    CudaGraphStats graph_stats;

    bool cudnn_ok = false;
    std::string cudnn_reason, cudnn_version;
    std::string backend_name;
    Step step;

    const bf16* head() const { return lm_head ? lm_head : embed; }
    double* pinned_loss() const { return reinterpret_cast<double*>(pinned.data()); }
    float* pinned_norm() const { return reinterpret_cast<float*>(pinned.data() + 8); }
    int32_t* pinned_meta(int h) const {
        return reinterpret_cast<int32_t*>(pinned.data() + kPinnedHeader) + size_t(h) * size_t(y.meta_ints);
    }
    double* pinned_step_loss(int r) const { return reinterpret_cast<double*>(pinned.data() + 16 + 16 * r); }
    float* pinned_step_norm(int r) const { return reinterpret_cast<float*>(pinned.data() + 16 + 16 * r + 8); }
    int lora_count() const { return int(params.size()); }

    void bind();
    void upload_lora_values();
    void upload_lora_moments();
    void download_lora(const float* region, std::vector<float> LoraParam::*field);
    void check_attention_at_load(const std::string& where) const;

    int check_batch(const PackedBatch& b) const;
    void begin_batch(const PackedBatch& b, float grad_scale, uint64_t dropout_seed);
    void write_metadata(const PackedBatch& b, int32_t* h) const;
    void end_batch();
    void rebuild_metadata();
    void all_complete() { completed_seq = batch_seq; }
    int tl_begin(cudaStream_t s, const char* what, int layer);
    void tl_end(int i, cudaStream_t s);
    void choose_attention();
    void attention_fwd(LayerActs& a);
    void attention_bwd(LayerActs& a, bf16* dq, bf16* dk, bf16* dv, const bf16* dout);

    void project(int l, int m, bf16* out, const bf16* inp, bool train);
    void project_backward(int l, int m, bf16* dinp, const bf16* dout, const bf16* inp);
    void lora_tmp_forward(int l, int m, const bf16* inp);
    void attention_block_forward(int l, bool train);
    void mlp_block_forward(int l, bool train, bool tail);
    void recompute_layer(int l);
    void mlp_block_backward(int l);
    void attention_block_backward(int l);
    bf16* host_slot(int l) const;
    void offload_input(int l);
    void wait_offloaded(int l);
    void reload_input(int l);
    void wait_reloaded(int l);
    void forward(bool train);
    void backward();
    void loss(bf16* dhidden);
    void micro_step(cudaEvent_t after_loss);
    bool graphs_enabled() const {
        return options.cuda_graphs && !options.timeline && !options.rebuild_metadata_per_layer &&
               graph_stats.disabled_reason.empty();
    }
    bool run_graphed();
    GraphExec capture_micro_step();
    double finish_loss();
};

void CudaModel::Impl::bind() {
    embed = piece<bf16>(y.weights, y.embed);
    lm_head = piece<bf16>(y.weights, y.lm_head);
    norm_f = piece<bf16>(y.weights, y.norm_f);
    layers.resize(size_t(d.L));
    for (int l = 0; l < d.L; ++l) {
        const LayerWeightHandles& h = y.lw[size_t(l)];
        LayerWeights& w = layers[size_t(l)];
        w.ln1 = piece<bf16>(y.weights, h.ln1);
        w.ln2 = piece<bf16>(y.weights, h.ln2);
        w.q_norm = piece<bf16>(y.weights, h.q_norm);
        w.k_norm = piece<bf16>(y.weights, h.k_norm);
        for (int m = 0; m < kNumModules; ++m) {
            w.w[m] = piece<bf16>(y.weights, h.w[m]);
            w.b[m] = piece<bf16>(y.weights, h.b[m]);
        }
    }
    lora_value = piece<float>(y.lora, y.lora_value);
    lora_grad = piece<float>(y.lora, y.lora_grad);
    lora_m = piece<float>(y.lora, y.lora_m);
    lora_v = piece<float>(y.lora, y.lora_v);
    lora_bf16 = piece<bf16>(y.lora, y.lora_bf16);
    lora_desc = piece<cuda::AdamWTensor>(y.lora, y.lora_desc);

    acts.resize(size_t(d.L));
    const bool shared = options.checkpointing != CheckpointPolicy::Off;
    const int nbuf = offload_buffers(options.checkpointing);
    for (int l = 0; l < d.L; ++l) {
        const ActHandles& s = y.sets[shared ? 0 : size_t(l)];
        LayerActs& a = acts[size_t(l)];
        const cuda::Arena& A = y.acts;
        const size_t xi = nbuf > 0 ? size_t(l % nbuf) : size_t(l);
        a.x = shared ? piece<bf16>(A, y.x_store.at(xi)) : piece<bf16>(A, s.x);
        a.ln1 = piece<bf16>(A, s.ln1);
        a.ln1_rstd = piece<float>(A, s.ln1_rstd);
        a.q = piece<bf16>(A, s.q);
        a.k = piece<bf16>(A, s.k);
        a.q_rstd = piece<float>(A, s.q_rstd);
        a.k_rstd = piece<float>(A, s.k_rstd);
        a.qr = piece<bf16>(A, s.qr);
        a.kr = piece<bf16>(A, s.kr);
        a.v = piece<bf16>(A, s.v);
        a.att = piece<bf16>(A, s.att);
        a.stats = piece<char>(A, s.stats);
        a.mid = piece<bf16>(A, s.mid);
        a.ln2 = piece<bf16>(A, s.ln2);
        a.ln2_rstd = piece<float>(A, s.ln2_rstd);
        a.gate = piece<bf16>(A, s.gate);
        a.up = piece<bf16>(A, s.up);
        for (int m = 0; m < kNumModules; ++m) a.lora_tmp[m] = piece<bf16>(A, s.tmp[m]);
    }
    const cuda::Arena& A = y.acts;
    x_final = piece<bf16>(A, y.x_final);
    lnf = piece<bf16>(A, y.lnf);
    lnf_rstd = piece<float>(A, y.lnf_rstd);
    d_res = piece<bf16>(A, y.d_res);
    d_ln = piece<bf16>(A, y.d_ln);
    d_lnf = piece<bf16>(A, y.d_lnf);
    d_big = piece<bf16>(A, y.d_big);
    d_big2 = piece<bf16>(A, y.d_big2);
    d_big3 = piece<bf16>(A, y.d_big3);
    d_k = piece<bf16>(A, y.d_k);
    d_k2 = piece<bf16>(A, y.d_k2);
    d_v = piece<bf16>(A, y.d_v);
    d_tmp = piece<bf16>(A, y.d_tmp);
    xd = piece<bf16>(A, y.xd);
    d_drop = piece<bf16>(A, y.d_drop);
    losses = piece<float>(A, y.losses);
    meta = piece<int32_t>(A, y.meta);

    work_base = piece<char>(y.work, 0);
    work_bytes = y.work.size();
    ce_ws = piece<char>(y.work, y.ce);
    att_ws = piece<char>(y.work, y.att_ws);
    gn_ws = piece<char>(y.work, y.gn_ws);
    loss_sum = piece<double>(y.work, y.loss_sum);
    norm = piece<float>(y.work, y.norm);
}

// ---------------------------------------------------------------------------------------------------------
// LoRA transfers
// ---------------------------------------------------------------------------------------------------------

// Host values -> fp32 masters, then ONE conversion of the whole region into the bf16 copies (the padding
// between tensors is zero in both).
void CudaModel::Impl::upload_lora_values() {
    for (size_t i = 0; i < params.size(); ++i)
        TANDEM_CUDA_CHECK(cudaMemcpyAsync(lora_value + y.lora_offset[i], params[i].value.data(),
                                          size_t(y.lora_numel[i]) * sizeof(float), cudaMemcpyHostToDevice, stream()));
    if (y.lora_padded > 0) cuda::to_bf16(lora_bf16, lora_value, y.lora_padded);
}

void CudaModel::Impl::upload_lora_moments() {
    for (size_t i = 0; i < params.size(); ++i) {
        const size_t bytes = size_t(y.lora_numel[i]) * sizeof(float);
        TANDEM_CUDA_CHECK(cudaMemcpyAsync(lora_m + y.lora_offset[i], params[i].exp_avg.data(), bytes,
                                          cudaMemcpyHostToDevice, stream()));
        TANDEM_CUDA_CHECK(cudaMemcpyAsync(lora_v + y.lora_offset[i], params[i].exp_avg_sq.data(), bytes,
                                          cudaMemcpyHostToDevice, stream()));
    }
}

// One region device -> host (one copy, one sync), scattered into the mirror's `field`.
void CudaModel::Impl::download_lora(const float* region, std::vector<float> LoraParam::*field) {
    if (params.empty()) return;
    std::vector<float> buf(size_t(y.lora_padded));
    TANDEM_CUDA_CHECK(
        cudaMemcpyAsync(buf.data(), region, buf.size() * sizeof(float), cudaMemcpyDeviceToHost, stream()));
    cuda::synchronize();
    for (size_t i = 0; i < params.size(); ++i) {
        const float* src = buf.data() + y.lora_offset[i];
        (params[i].*field).assign(src, src + y.lora_numel[i]);
    }
}

// ---------------------------------------------------------------------------------------------------------
// Batch upload and attention dispatch
// ---------------------------------------------------------------------------------------------------------

// check_packed_batch (model.h) plus what the device buffers need: the longest sample within max_seqlen,
// positions inside the RoPE table (sized min(max positions, token budget)). Returns the longest sample.
int CudaModel::Impl::check_batch(const PackedBatch& b) const {
    const int longest = check_packed_batch(b, d.T, d.V, cfg.max_position_embeddings, cfg.sliding_window);
    if (longest > d.max_seqlen)
        throw_invalid("model: a sample of " + std::to_string(longest) + " tokens exceeds the max_seqlen of " +
                      std::to_string(d.max_seqlen) + " the model was loaded for");
    if (rope.max_pos < cfg.max_position_embeddings)
        for (int t = 0; t < b.num_tokens; ++t)
            if (b.position_ids[size_t(t)] >= rope.max_pos)
                throw_invalid("model: position " + std::to_string(b.position_ids[size_t(t)]) + " is beyond the " +
                              std::to_string(rope.max_pos) + " positions of the RoPE table (sized for the token budget)");
    return longest;
}

// The batch's metadata into a pinned host slot: the header (dropout seed, grad_scale), tokens, targets
// (labels shifted by one), positions, cu_seqlens, each segment padded to kMetaAlign rows.
void CudaModel::Impl::write_metadata(const PackedBatch& b, int32_t* h) const {
    const int T = b.num_tokens;
    const int S = b.num_samples;
    const int64_t Tp = round_up(T, kMetaAlign);
    std::memcpy(h, &cur_seed, sizeof cur_seed);
    std::memcpy(h + 2, &cur_grad_scale, sizeof cur_grad_scale);
    h += kMetaHeader;
    std::memcpy(h, b.tokens.data(), size_t(T) * sizeof(int32_t));
    int32_t* targets = h + Tp;
    for (int t = 0; t < T; ++t) targets[t] = (t + 1 < T) ? b.labels[size_t(t) + 1] : cpu::kIgnoreIndex;
    std::memcpy(h + 2 * Tp, b.position_ids.data(), size_t(T) * sizeof(int32_t));
    std::memcpy(h + 3 * Tp, b.cu_seqlens.data(), size_t(S + 1) * sizeof(int32_t));
}

// Checks the batch, builds its metadata once into a pinned host slot and sends it up in one copy on the
// upload stream into the next device slot (double-buffered); the compute stream waits for that copy only.
void CudaModel::Impl::begin_batch(const PackedBatch& b, float grad_scale, uint64_t dropout_seed) {
    const int longest = check_batch(b);
    const int T = b.num_tokens;
    const int S = b.num_samples;
    const int64_t Tp = round_up(T, kMetaAlign);
    const int64_t n = kMetaHeader + 3 * Tp + S + 1;
    if (n > y.meta_ints) throw_internal("cuda model: batch metadata exceeds its buffer");
    const uint64_t seq = ++batch_seq;
    host_slot_meta = int(seq % kHostMetaSlots);
    dev_slot = int(seq % 2);
    if (host_meta_seq[host_slot_meta] > completed_seq) cuda::wait_event(ev_host_meta[host_slot_meta].get());
    int32_t* h = pinned_meta(host_slot_meta);
    cur_grad_scale = grad_scale;
    cur_seed = dropout_seed;
    write_metadata(b, h);
    int32_t* dev = meta + size_t(dev_slot) * size_t(y.meta_ints);
    ev_meta_free[dev_slot].wait_on(upload.get());  // the batch before last used this device slot
    TANDEM_CUDA_CHECK(cudaMemcpyAsync(dev, h, size_t(n) * sizeof(int32_t), cudaMemcpyHostToDevice, upload.get()));
    ev_host_meta[host_slot_meta].record(upload.get());
    ev_meta_up[dev_slot].record(upload.get());
    ev_meta_up[dev_slot].wait_on(stream());
    host_meta_seq[host_slot_meta] = seq;
    cur_batch = &b;
    step.T = T;
    step.S = S;
    step.max_seqlen = longest;
    step.seed = reinterpret_cast<const uint64_t*>(dev);
    step.grad_scale = reinterpret_cast<const float*>(dev + 2);
    step.tokens = dev + kMetaHeader;
    step.targets = dev + kMetaHeader + Tp;
    step.positions = dev + kMetaHeader + 2 * Tp;
    step.cu_seqlens = dev + kMetaHeader + 3 * Tp;
    choose_attention();
}

// The compute stream is done with the current batch's device slot.
void CudaModel::Impl::end_batch() {
    ev_meta_free[dev_slot].record();
    cur_batch = nullptr;
}

// Ablation (options.rebuild_metadata_per_layer): what a naive implementation does in every layer, forward
// and backward: check and rebuild the batch's metadata on the host, upload it, and wait for the device.
// Only for measuring what building it once buys. (It rewrites the current host slot with the same bytes.)
void CudaModel::Impl::rebuild_metadata() {
    if (!options.rebuild_metadata_per_layer || cur_batch == nullptr) return;
    const PackedBatch& b = *cur_batch;
    check_batch(b);
    int32_t* h = pinned_meta(host_slot_meta);
    write_metadata(b, h);
    const int64_t n = kMetaHeader + 3 * round_up(b.num_tokens, kMetaAlign) + b.num_samples + 1;
    TANDEM_CUDA_CHECK(cudaMemcpyAsync(meta + size_t(dev_slot) * size_t(y.meta_ints), h, size_t(n) * sizeof(int32_t),
                                      cudaMemcpyHostToDevice, stream()));
    cuda::synchronize();
    all_complete();
}

// Auto: cuDNN when available and it supports this shape within the planned buffers, else in-house.
void CudaModel::Impl::choose_attention() {
    step.shape = cuda::CudnnAttentionShape{step.S, step.T, d.Hq, d.Hkv, d.D, step.max_seqlen, attn_scale};
    std::string why = "requested";
    if (options.attention != AttentionBackend::Inhouse) {
        bool ok = cudnn_ok;
        why = cudnn_reason;
        if (ok && !cuda::cudnn_attention_supported(step.shape, &why)) ok = false;
        if (ok && (cuda::cudnn_attention_workspace_bytes(step.shape) > y.att_ws_bytes ||
                   cuda::cudnn_attention_stats_bytes(step.shape) > y.stats_bytes)) {
            ok = false;
            why = "cuDNN needs more workspace for this shape than was planned";
        }
        if (ok) {
            step.cudnn = true;
            backend_name = "cudnn " + cudnn_version;
            return;
        }
        if (options.attention == AttentionBackend::Cudnn)
            throw_unsupported("cuDNN attention was requested but cannot run this batch: " + why);
    }
    if (!cuda::attention_supported(d.D))
        throw_unsupported("attention: head_dim " + std::to_string(d.D) +
                          " is not supported by the in-house kernels, and cuDNN is not usable (" + why + ")");
    if (cuda::attention_backward_workspace(step.T, d.Hq, d.D) > y.att_ws_bytes)
        throw_internal("cuda model: in-house attention workspace larger than planned");
    step.cudnn = false;
    backend_name = "in-house (" + why + ")";
}

// Fails at load (before allocating) when no backend can ever run this model's attention.
void CudaModel::Impl::check_attention_at_load(const std::string& where) const {
    const bool inhouse = cuda::attention_supported(d.D);
    switch (options.attention) {
    case AttentionBackend::Inhouse:
        if (!inhouse)
            throw_unsupported(where + ": the in-house attention kernels do not support head_dim " +
                              std::to_string(d.D) + "; use attention backend auto or cudnn");
        break;
    case AttentionBackend::Cudnn:
        if (!cudnn_ok) throw_unsupported(where + ": cuDNN attention was requested but is not usable: " + cudnn_reason);
        break;
    case AttentionBackend::Auto:
        if (!inhouse && !cudnn_ok)
            throw_unsupported(where + ": head_dim " + std::to_string(d.D) +
                              " needs cuDNN attention, which is not usable: " + cudnn_reason);
        break;
    }
}

void CudaModel::Impl::attention_fwd(LayerActs& a) {
    if (step.cudnn)
        cuda::cudnn_attention_forward(a.att, a.stats, a.qr, a.kr, a.v, step.cu_seqlens, step.shape, att_ws);
    else
        cuda::attention_forward(a.att, static_cast<float*>(a.stats), a.qr, a.kr, a.v, step.cu_seqlens, step.S, step.T,
                                d.Hq, d.Hkv, d.D, attn_scale, step.max_seqlen);
}

// dq [T,Q], dk [T,KV], dv [T,KV] written.
void CudaModel::Impl::attention_bwd(LayerActs& a, bf16* dq, bf16* dk, bf16* dv, const bf16* dout) {
    if (step.cudnn)
        cuda::cudnn_attention_backward(dq, dk, dv, dout, a.qr, a.kr, a.v, a.att, a.stats, step.cu_seqlens,
                                       step.shape, att_ws);
    else
        cuda::attention_backward(dq, dk, dv, dout, a.qr, a.kr, a.v, a.att, static_cast<const float*>(a.stats),
                                 step.cu_seqlens, step.S, step.T, d.Hq, d.Hkv, d.D, attn_scale, step.max_seqlen,
                                 att_ws);
}

// ---------------------------------------------------------------------------------------------------------
// Blocks
// ---------------------------------------------------------------------------------------------------------

// out[T,OUT] = inp[T,IN] W^T + b (+ scaling * drop(inp) A^T B^T) for module m of layer l.
void CudaModel::Impl::project(int l, int m, bf16* out, const bf16* inp, bool train) {
    const LayerWeights& w = layers[size_t(l)];
    const int T = step.T, IN = d.in_of(m), OUT = d.out_of(m);
    cuda::matmul_forward(out, inp, w.w[m], w.b[m], T, IN, OUT);
    const int ia = lora_index[size_t(l)][size_t(m)];
    if (ia < 0) return;
    const bf16* lin = inp;
    if (train && lora.dropout > 0) {
        cuda::dropout_forward(xd, inp, step.seed, l, m, int64_t(T) * IN, lora.dropout);  // xd [T,IN]
        lin = xd;
    }
    cuda::lora_forward(out, acts[size_t(l)].lora_tmp[m], lin, lora_bf16 + y.lora_offset[size_t(ia)],
                       lora_bf16 + y.lora_offset[size_t(ia) + 1], lora_scaling, T, IN, OUT, d.R);
}

// dinp[T,IN] += d(out)/d(inp) applied to dout[T,OUT]; LoRA grads += (grad_scale is already inside dout).
// With dropout the dropped input is recomputed from inp (same hash, same values as forward).
void CudaModel::Impl::project_backward(int l, int m, bf16* dinp, const bf16* dout, const bf16* inp) {
    const LayerWeights& w = layers[size_t(l)];
    const int T = step.T, IN = d.in_of(m), OUT = d.out_of(m);
    cuda::matmul_backward(dinp, nullptr, nullptr, dout, inp, w.w[m], T, IN, OUT);
    const int ia = lora_index[size_t(l)][size_t(m)];
    if (ia < 0) return;
    const int64_t offA = y.lora_offset[size_t(ia)], offB = y.lora_offset[size_t(ia) + 1];
    const bf16* tmp = acts[size_t(l)].lora_tmp[m];
    if (lora.dropout > 0) {
        const int64_t n = int64_t(T) * IN;
        cuda::dropout_forward(xd, inp, step.seed, l, m, n, lora.dropout);
        zero(d_drop, n);
        cuda::lora_backward(d_drop, lora_grad + offA, lora_grad + offB, d_tmp, dout, xd, tmp, lora_bf16 + offA,
                            lora_bf16 + offB, lora_scaling, T, IN, OUT, d.R);
        cuda::dropout_backward(dinp, d_drop, step.seed, l, m, n, lora.dropout);
    } else {
        cuda::lora_backward(dinp, lora_grad + offA, lora_grad + offB, d_tmp, dout, inp, tmp, lora_bf16 + offA,
                            lora_bf16 + offB, lora_scaling, T, IN, OUT, d.R);
    }
}

// Recompute: only the LoRA tmp of module m (tmp = drop(inp) @ A^T), without the projection itself
// (cuda::lora_tmp_forward is lora_forward's first GEMM, so the same values).
void CudaModel::Impl::lora_tmp_forward(int l, int m, const bf16* inp) {
    const int ia = lora_index[size_t(l)][size_t(m)];
    if (ia < 0) return;
    const int T = step.T, IN = d.in_of(m);
    const bf16* lin = inp;
    if (lora.dropout > 0) {
        cuda::dropout_forward(xd, inp, step.seed, l, m, int64_t(T) * IN, lora.dropout);
        lin = xd;
    }
    cuda::lora_tmp_forward(acts[size_t(l)].lora_tmp[m], lin, lora_bf16 + y.lora_offset[size_t(ia)], T, IN, d.R);
}

// From a.ln1 (already computed) to a.mid = x + o_proj(attention) and a.ln2 = rmsnorm(mid).
void CudaModel::Impl::attention_block_forward(int l, bool train) {
    LayerActs& a = acts[size_t(l)];
    const LayerWeights& w = layers[size_t(l)];
    const int T = step.T;
    project(l, kQ, d.qk_norm ? a.q : a.qr, a.ln1, train);
    project(l, kK, d.qk_norm ? a.k : a.kr, a.ln1, train);
    project(l, kV, a.v, a.ln1, train);
    if (d.qk_norm) {
        cuda::rmsnorm_forward(a.qr, a.q_rstd, a.q, w.q_norm, T * d.Hq, d.D, d.eps);
        cuda::rmsnorm_forward(a.kr, a.k_rstd, a.k, w.k_norm, T * d.Hkv, d.D, d.eps);
    }
    cuda::rope_forward(a.qr, a.qr, step.positions, rope, T, d.Hq, d.D);
    cuda::rope_forward(a.kr, a.kr, step.positions, rope, T, d.Hkv, d.D);
    attention_fwd(a);
    bf16* o = d_ln;  // [T,C] scratch
    project(l, kO, o, a.att, train);
    cuda::residual_rmsnorm_forward(a.mid, a.ln2, a.ln2_rstd, a.x, o, w.ln2, T, d.C, d.eps);
}

// gate/up from a.ln2; with tail, also act, down and the residual: the next layer's x and ln1 (the last
// layer: x_final and lnf).
void CudaModel::Impl::mlp_block_forward(int l, bool train, bool tail) {
    LayerActs& a = acts[size_t(l)];
    const int T = step.T;
    project(l, kGate, a.gate, a.ln2, train);
    project(l, kUp, a.up, a.ln2, train);
    if (!tail) return;
    bf16* act = d_big3;  // [T,F] scratch
    cuda::swiglu_forward(act, a.gate, a.up, T, d.F);
    bf16* o = d_ln;  // [T,C] scratch
    project(l, kDown, o, act, train);
    const bool last = l + 1 == d.L;
    LayerActs* next = last ? nullptr : &acts[size_t(l) + 1];
    cuda::residual_rmsnorm_forward(last ? x_final : next->x, last ? lnf : next->ln1, last ? lnf_rstd : next->ln1_rstd,
                                   a.mid, o, last ? norm_f : layers[size_t(l) + 1].ln1, T, d.C, d.eps);
}

// ---------------------------------------------------------------------------------------------------------
// Smart checkpointing: block-input copies on the copy stream (nb > 0; layer l's input in buffer l % nb)
// ---------------------------------------------------------------------------------------------------------

bf16* CudaModel::Impl::host_slot(int l) const {
    return reinterpret_cast<bf16*>(x_host.data()) + size_t(l) * size_t(d.T) * size_t(d.C);
}

// Forward: layer l's input [T,C] was just written on the compute stream -> its pinned slot.
void CudaModel::Impl::offload_input(int l) {
    if (l >= offloaded) return;
    ev_x_ready.record();
    ev_x_ready.wait_on(copy.get());
    const int tl = tl_begin(copy.get(), "offload", l);
    TANDEM_CUDA_CHECK(cudaMemcpyAsync(host_slot(l), acts[size_t(l)].x, size_t(step.T) * size_t(d.C) * sizeof(bf16),
                                      cudaMemcpyDeviceToHost, copy.get()));
    tl_end(tl, copy.get());
    ev_offloaded[l % nb].record(copy.get());
}

// Forward, before layer l's input is written: its buffer's previous input (layer l - nb) must have reached
// the host. That copy had all of layer l - nb's forward (Smart: and l - 1's) to finish.
void CudaModel::Impl::wait_offloaded(int l) {
    const int prev = l - nb;
    if (prev < 0 || prev >= offloaded) return;
    ev_offloaded[prev % nb].wait_on(stream());
}

// Backward: layer l's input, pinned slot -> buffer l % nb, once the compute stream has finished the layer
// that last read that buffer (l + nb, whose backward recorded ev_used; it exists because l < L - nb).
void CudaModel::Impl::reload_input(int l) {
    if (l < 0 || l >= offloaded) return;
    const int b = l % nb;
    ev_used[b].wait_on(copy.get());
    const int tl = tl_begin(copy.get(), "reload", l);
    TANDEM_CUDA_CHECK(cudaMemcpyAsync(acts[size_t(l)].x, host_slot(l), size_t(step.T) * size_t(d.C) * sizeof(bf16),
                                      cudaMemcpyHostToDevice, copy.get()));
    tl_end(tl, copy.get());
    ev_reloaded[b].record(copy.get());
}

// Backward, before layer l is recomputed: its reloaded input must be in place.
void CudaModel::Impl::wait_reloaded(int l) {
    if (l >= offloaded) return;
    ev_reloaded[l % nb].wait_on(stream());
}

void CudaModel::Impl::forward(bool train) {
    const int T = step.T;
    const bool offload = train && nb > 0;  // evaluation never reads the inputs back: no copies
    LayerActs& a0 = acts[0];
    cuda::embedding_forward(a0.x, step.tokens, embed, T, d.C, d.V);
    if (offload) offload_input(0);
    cuda::rmsnorm_forward(a0.ln1, a0.ln1_rstd, a0.x, layers[0].ln1, T, d.C, d.eps);
    for (int l = 0; l < d.L; ++l) {
        rebuild_metadata();
        const int tl = tl_begin(stream(), "forward", l);
        attention_block_forward(l, train);  // the last read of layer l's input in forward
        const bool next = l + 1 < d.L;
        if (offload && next) wait_offloaded(l + 1);  // the tail writes layer l+1's input into its buffer
        mlp_block_forward(l, train, true);
        tl_end(tl, stream());
        if (offload && next) offload_input(l + 1);
    }
}

// Recompute policy: layer l's forward from its stored input, into the shared set (what backward reads):
// everything but the down projection, whose output backward does not need; its LoRA tmp it does.
void CudaModel::Impl::recompute_layer(int l) {
    LayerActs& a = acts[size_t(l)];
    cuda::rmsnorm_forward(a.ln1, a.ln1_rstd, a.x, layers[size_t(l)].ln1, step.T, d.C, d.eps);
    attention_block_forward(l, true);
    mlp_block_forward(l, true, false);
    if (lora_index[size_t(l)][kDown] >= 0) {
        bf16* act = d_big3;  // [T,F] scratch (mlp_block_backward recomputes it again: one cheap pass)
        cuda::swiglu_forward(act, a.gate, a.up, step.T, d.F);
        lora_tmp_forward(l, kDown, act);
    }
}

// d_res: gradient of this layer's output on entry, of mid on exit.
void CudaModel::Impl::mlp_block_backward(int l) {
    LayerActs& a = acts[size_t(l)];
    const LayerWeights& w = layers[size_t(l)];
    const int T = step.T;
    bf16* act = d_big3;  // recomputed, consumed by down's backward before d_big3 becomes dup
    cuda::swiglu_forward(act, a.gate, a.up, T, d.F);
    bf16* dact = d_big;
    zero(dact, int64_t(T) * d.F);
    project_backward(l, kDown, dact, d_res, act);
    bf16* dgate = d_big2;
    bf16* dup = d_big3;
    cuda::swiglu_backward(dgate, dup, dact, a.gate, a.up, T, d.F);
    zero(d_ln, int64_t(T) * d.C);
    project_backward(l, kGate, d_ln, dgate, a.ln2);
    project_backward(l, kUp, d_ln, dup, a.ln2);
    cuda::rmsnorm_backward(d_res, nullptr, d_ln, a.mid, w.ln2, a.ln2_rstd, T, d.C);
}

// d_res: gradient of mid on entry, of the layer input x on exit.
void CudaModel::Impl::attention_block_backward(int l) {
    LayerActs& a = acts[size_t(l)];
    const LayerWeights& w = layers[size_t(l)];
    const int T = step.T;
    bf16* datt = d_big;
    zero(datt, int64_t(T) * d.Q);
    project_backward(l, kO, datt, d_res, a.att);
    bf16* dq = d_big2;
    bf16* dk = d_k;
    attention_bwd(a, dq, dk, d_v, datt);
    cuda::rope_backward(dq, dq, step.positions, rope, T, d.Hq, d.D);
    cuda::rope_backward(dk, dk, step.positions, rope, T, d.Hkv, d.D);
    if (d.qk_norm) {
        zero(d_big3, int64_t(T) * d.Q);
        cuda::rmsnorm_backward(d_big3, nullptr, dq, a.q, w.q_norm, a.q_rstd, T * d.Hq, d.D);
        zero(d_k2, int64_t(T) * d.KV);
        cuda::rmsnorm_backward(d_k2, nullptr, dk, a.k, w.k_norm, a.k_rstd, T * d.Hkv, d.D);
        dq = d_big3;
        dk = d_k2;
    }
    zero(d_ln, int64_t(T) * d.C);
    project_backward(l, kQ, d_ln, dq, a.ln1);
    project_backward(l, kK, d_ln, dk, a.ln1);
    project_backward(l, kV, d_ln, d_v, a.ln1);
    cuda::rmsnorm_backward(d_res, nullptr, d_ln, a.x, w.ln1, a.ln1_rstd, T, d.C);
}

void CudaModel::Impl::backward() {
    const int T = step.T;
    // d_lnf was written by the loss (grad_scale inside); through the final norm into the residual stream.
    zero(d_res, int64_t(T) * d.C);
    cuda::rmsnorm_backward(d_res, nullptr, d_lnf, x_final, norm_f, lnf_rstd, T, d.C);
    const bool recompute = options.checkpointing != CheckpointPolicy::Off;
    for (int l = d.L - 1; l >= 0; --l) {
        if (nb > 0) {
            reload_input(l - (nb - 1));  // Smart: layer l-1's input into the other buffer, during layer l
            wait_reloaded(l);            // SmartSingle: this layer's, just issued: strictly serial
        }
        rebuild_metadata();
        const int tl = tl_begin(stream(), "backward", l);
        if (recompute && l + 1 < d.L) recompute_layer(l);
        mlp_block_backward(l);
        attention_block_backward(l);
        tl_end(tl, stream());
        if (nb > 0) ev_used[l % nb].record();  // buffer l % nb free for the reload of layer l - nb
    }
}

// Row losses [T] -> their sum (device double) -> the pinned slot. dhidden nullptr: evaluation. The gradient
// is scaled by the batch's grad_scale, read on the device from the metadata header.
void CudaModel::Impl::loss(bf16* dhidden) {
    cuda::lm_head_cross_entropy(dhidden, losses, lnf, head(), step.targets, step.T, d.C, d.V, step.grad_scale, d.K,
                                ce_ws);
    cuda::sum(loss_sum, losses, step.T, false);
    TANDEM_CUDA_CHECK(cudaMemcpyAsync(pinned_loss(), loss_sum, sizeof(double), cudaMemcpyDeviceToHost, stream()));
}

// Timeline: a (begin, end) event pair around work queued on stream s; -1 when the timeline is off.
int CudaModel::Impl::tl_begin(cudaStream_t s, const char* what, int layer) {
    if (!options.timeline) return -1;
    if (tl_used == tl_events.size()) tl_events.push_back({Event::make(), Event::make()});  // timeline only
    if (tl_used == timeline_spans.size()) timeline_spans.emplace_back();
    const int i = int(tl_used++);
    timeline_spans[size_t(i)] = TimelineSpan{s == stream() ? "compute" : "copy", what, layer, 0, 0};
    tl_events[size_t(i)][0].record(s);
    return i;
}

void CudaModel::Impl::tl_end(int i, cudaStream_t s) {
    if (i >= 0) tl_events[size_t(i)][1].record(s);
}

// The step's one host sync; the loss sum copied by loss().
double CudaModel::Impl::finish_loss() {
    cuda::synchronize();
    all_complete();
    return *pinned_loss();
}

// One micro-step of training on the current batch, device work only: forward, loss, the step's loss sum,
// backward. after_loss (may be null) is recorded between loss and backward.
void CudaModel::Impl::micro_step(cudaEvent_t after_loss) {
    forward(true);
    loss(d_lnf);
    cuda::sum(loss_sum + 1, losses, step.T, true);  // the step's loss sum, on the device
    if (after_loss) TANDEM_CUDA_CHECK(cudaEventRecord(after_loss, stream()));
    backward();
}

// The current batch's micro-step as a CUDA graph: the cached graph of its key is replayed, or captured
// and launched when its shape already ran eagerly once (so the shape's cuBLASLt plans, cuDNN graphs and
// kernel attributes exist and no library does first-use work inside the capture). A shape never seen
// returns false: the caller runs it eagerly, and its next occurrence is captured.
bool CudaModel::Impl::run_graphed() {
    GraphKey key{step.T, step.S, step.max_seqlen, step.cudnn, -1};
    const auto seen = std::find(shapes_seen.begin(), shapes_seen.end(), key);
    if (seen == shapes_seen.end()) {
        if (shapes_seen.size() == kMaxShapesSeen) shapes_seen.erase(shapes_seen.begin());
        shapes_seen.push_back(key);
        return false;
    }
    std::rotate(seen, seen + 1, shapes_seen.end());  // most recent last
    key.slot = dev_slot;
    auto it = std::find_if(graphs.begin(), graphs.end(), [&](const CachedGraph& g) { return g.key == key; });
    if (it == graphs.end()) {
        GraphExec exec;
        const auto t0 = std::chrono::steady_clock::now();
        try {
            exec = capture_micro_step();
        } catch (const Error& e) {
            // A library call this CUDA / cuDNN version cannot capture: train without graphs (the eager
            // micro-step the caller runs now reports a real device fault again).
            graph_stats.disabled_reason = e.what();
            std::fprintf(stderr, "tandem: CUDA graphs turned off for this model: %s\n", e.what());
            return false;
        }
        if (graphs.size() == kMaxGraphs)
            graphs.erase(std::min_element(graphs.begin(), graphs.end(), [](const CachedGraph& a, const CachedGraph& b) {
                return a.last_use < b.last_use;
            }));
        graphs.push_back(CachedGraph{key, std::move(exec), 0});
        it = graphs.end() - 1;
        ++graph_stats.captures;
        graph_stats.capture_ms +=
            std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
    } else {
        ++graph_stats.replays;
    }
    it->last_use = ++graph_clock;
    TANDEM_CUDA_CHECK(cudaGraphLaunch(it->exec.get(), stream()));
    return true;
}

// Captures micro_step on the compute stream. Everything it waits on is recorded inside the capture (the
// metadata upload and its wait stay outside, in begin_batch); Smart's copy stream joins through the events
// of offload_input / reload_input and rejoins the compute stream at the last wait_offloaded and
// wait_reloaded, before the capture ends. A failure ends the capture, so the stream stays usable.
GraphExec CudaModel::Impl::capture_micro_step() {
    const cudaStream_t s = stream();
    TANDEM_CUDA_CHECK(cudaStreamBeginCapture(s, cudaStreamCaptureModeThreadLocal));
    GraphOwner graph;
    try {
        micro_step(nullptr);
    } catch (...) {
        if (cudaStreamEndCapture(s, &graph.g) != cudaSuccess) (void)cudaGetLastError();
        throw;
    }
    TANDEM_CUDA_CHECK(cudaStreamEndCapture(s, &graph.g));
    cudaGraphExec_t exec = nullptr;
    TANDEM_CUDA_CHECK(cudaGraphInstantiate(&exec, graph.g, 0));
    return GraphExec(exec);
}

// ---------------------------------------------------------------------------------------------------------
// Construction
// ---------------------------------------------------------------------------------------------------------

namespace {

// Everything but the base weights' values: validation, LoRA init, layout, allocation, LoRA upload.
std::unique_ptr<CudaModel::Impl> make_impl(const ModelConfig& cfg, const LoraConfig& lora, uint64_t seed,
                                           const CudaModelOptions& options, const std::string& where) {
    validate(cfg, lora, options, where);
    auto impl = std::make_unique<CudaModel::Impl>();
    CudaModel::Impl& m = *impl;
    m.cfg = cfg;
    m.lora = lora;
    m.options = options;
    m.d = make_dims(cfg, lora, options);
    m.lora_scaling = float(lora.scaling());
    m.attn_scale = float(1.0 / std::sqrt(double(m.d.D)));
    m.rope_host = build_rope(cfg, m.d, where);

    const auto specs = lora_tensor_specs(cfg, lora);
    m.lora_index = lora_index_of(specs, m.d.L);
    m.params = init_lora_params(specs, seed);  // as CpuModel (model.h); moments start at zero
    for (auto& p : m.params) {
        p.exp_avg.assign(p.value.size(), 0.0f);
        p.exp_avg_sq.assign(p.value.size(), 0.0f);
    }

    if (options.attention != AttentionBackend::Inhouse) {
        m.cudnn_ok = cuda::cudnn_attention_available(&m.cudnn_reason);
        const size_t v = cuda::versions().cudnn;
        m.cudnn_version = std::to_string(v / 10000) + "." + std::to_string(v % 10000 / 100) + "." +
                          std::to_string(v % 100);
    }
    m.check_attention_at_load(where);
    if (options.attention == AttentionBackend::Inhouse)
        m.backend_name = "in-house (requested)";
    else if (m.cudnn_ok)
        m.backend_name = "cudnn " + m.cudnn_version;
    else
        m.backend_name = "in-house (" + m.cudnn_reason + ")";

    // Workspace first: it is the staging buffer of the weight upload.
    m.y = make_layout(m.d, m.rope_host, specs, m.lora_index, options);
    m.y.work.allocate("workspace (lm_head chunk, attention, grad norm)");
    m.y.weights.allocate("model weights (bf16)");
    m.y.lora.allocate("LoRA parameters, gradients and AdamW state");
    m.y.acts.allocate("activation arena");
    m.bind();
    m.pinned = PinnedBuffer(kPinnedHeader + size_t(kHostMetaSlots) * size_t(m.y.meta_ints) * sizeof(int32_t),
                            "batch metadata staging");
    m.ev_start = Event::make();
    m.ev_mid = Event::make();
    m.ev_end = Event::make();
    m.upload = Stream::make_non_blocking();
    for (int s2 = 0; s2 < 2; ++s2) {
        m.ev_meta_up[s2] = Event::make(cudaEventDisableTiming);
        m.ev_meta_free[s2] = Event::make(cudaEventDisableTiming);
    }
    for (auto& e : m.ev_host_meta) e = Event::make(cudaEventDisableTiming);
    for (int r = 0; r < kStepSlots; ++r) {
        m.ev_step_done[r] = Event::make(cudaEventDisableTiming);
        for (auto& e : m.ev_t[r]) e = Event::make();
    }
    m.nb = offload_buffers(options.checkpointing);
    if (m.nb > 0) {
        m.offloaded = offloaded_layers(options.checkpointing, m.d.L);
        if (m.y.plan.pinned_host > 0) m.x_host = PinnedBuffer(m.y.plan.pinned_host, "offloaded block inputs");
        m.copy = Stream::make_non_blocking();
        m.ev_x_ready = Event::make(cudaEventDisableTiming);
        for (int b = 0; b < 2; ++b) {
            m.ev_offloaded[b] = Event::make(cudaEventDisableTiming);
            m.ev_used[b] = Event::make(cudaEventDisableTiming);
            m.ev_reloaded[b] = Event::make(cudaEventDisableTiming);
        }
    }

    m.rope = cuda::rope_table_upload(m.rope_host, piece<char>(m.y.weights, m.y.rope));

    // LoRA: zero every region (padding included), masters, bf16 copies, AdamW descriptors.
    TANDEM_CUDA_CHECK(cudaMemsetAsync(piece<char>(m.y.lora, 0), 0, m.y.lora.size(), stream()));
    m.upload_lora_values();
    std::vector<cuda::AdamWTensor> desc(m.params.size());
    for (size_t i = 0; i < desc.size(); ++i) {
        const int64_t off = m.y.lora_offset[i];
        desc[i] = cuda::AdamWTensor{m.lora_value + off, m.lora_grad + off, m.lora_m + off, m.lora_v + off,
                                    m.lora_bf16 + off, m.y.lora_numel[i]};
    }
    if (!desc.empty())
        TANDEM_CUDA_CHECK(cudaMemcpyAsync(m.lora_desc, desc.data(), desc.size() * sizeof(cuda::AdamWTensor),
                                          cudaMemcpyHostToDevice, stream()));
    cuda::synchronize();  // host sources (desc) go out of scope
    return impl;
}

// One tensor from the mapped file into its bf16 piece: BF16 straight from the mapping; F16/F32 through
// the device staging span in chunks and a conversion kernel; F64 converted to fp32 on the host per chunk.
void upload_weight(bf16* dst, const SafetensorsSet& set, const std::string& name, int64_t numel, char* staging,
                   size_t staging_bytes) {
    const TensorInfo& t = set.at(name);
    if (t.numel() != numel)
        throw_invalid(set.source_name() + ": tensor " + name + " has " + std::to_string(t.numel()) +
                      " elements, the config implies " + std::to_string(numel));
    const std::byte* src = t.data.data();
    const cudaStream_t s = stream();
    if (t.dtype == DType::BF16) {
        TANDEM_CUDA_CHECK(cudaMemcpyAsync(dst, src, size_t(numel) * 2, cudaMemcpyHostToDevice, s));
        return;
    }
    if (t.dtype != DType::F16 && t.dtype != DType::F32 && t.dtype != DType::F64)
        throw_unsupported(set.source_name() + ": tensor " + name + " has dtype " + std::string(dtype_name(t.dtype)) +
                          " (the CUDA backend loads BF16, F16, F32 and F64)");
    const size_t in_size = t.dtype == DType::F16 ? 2 : 4;  // element size in staging
    const int64_t chunk = std::max<int64_t>(int64_t(staging_bytes / in_size) / 64 * 64, 64);
    if (size_t(chunk) * in_size > staging_bytes) throw_internal("cuda model: staging buffer too small");
    std::vector<float> host;  // F64 only
    if (t.dtype == DType::F64) host.resize(size_t(std::min<int64_t>(chunk, numel)));
    for (int64_t off = 0; off < numel; off += chunk) {
        const int64_t n = std::min(chunk, numel - off);
        if (t.dtype == DType::F64) {
            for (int64_t i = 0; i < n; ++i) {
                double v;
                std::memcpy(&v, src + (off + i) * 8, sizeof v);
                host[size_t(i)] = float(v);
            }
            // Pageable source: the copy returns once the driver staged it, so `host` can be refilled.
            TANDEM_CUDA_CHECK(cudaMemcpyAsync(staging, host.data(), size_t(n) * 4, cudaMemcpyHostToDevice, s));
        } else {
            TANDEM_CUDA_CHECK(cudaMemcpyAsync(staging, src + off * int64_t(in_size), size_t(n) * in_size,
                                              cudaMemcpyHostToDevice, s));
        }
        if (t.dtype == DType::F16)
            cuda::f16_to_bf16(dst + off, staging, n);
        else
            cuda::to_bf16(dst + off, reinterpret_cast<const float*>(staging), n);
    }
}

}  // namespace

CudaMemoryPlan CudaModel::plan(const ModelConfig& config, const LoraConfig& lora, const CudaModelOptions& options) {
    const std::string where = "memory plan";
    validate(config, lora, options, where);
    const Dims d = make_dims(config, lora, options);
    const cpu::RopeTable rope = build_rope(config, d, where);
    const auto specs = lora_tensor_specs(config, lora);
    return make_layout(d, rope, specs, lora_index_of(specs, d.L), options).plan;
}

CudaModel CudaModel::load(const std::filesystem::path& model_dir, const LoraConfig& lora, uint64_t seed,
                          const CudaModelOptions& options) {
    ModelDir md = open_model_dir(model_dir);
    auto impl = make_impl(md.info.config, lora, seed, options, model_dir.string());
    Impl& m = *impl;
    const Dims& d = m.d;
    const SafetensorsSet& ws = md.weights;
    char* stage = m.work_base;
    const size_t stage_bytes = m.work_bytes;
    const int64_t VC = int64_t(d.V) * d.C;
    upload_weight(m.embed, ws, "model.embed_tokens.weight", VC, stage, stage_bytes);
    if (m.lm_head) upload_weight(m.lm_head, ws, "lm_head.weight", VC, stage, stage_bytes);
    upload_weight(m.norm_f, ws, "model.norm.weight", d.C, stage, stage_bytes);
    for (int l = 0; l < d.L; ++l) {
        const std::string p = "model.layers." + std::to_string(l) + ".";
        const LayerWeights& w = m.layers[size_t(l)];
        upload_weight(w.ln1, ws, p + "input_layernorm.weight", d.C, stage, stage_bytes);
        upload_weight(w.ln2, ws, p + "post_attention_layernorm.weight", d.C, stage, stage_bytes);
        for (int k = 0; k < kNumModules; ++k) {
            const std::string base = p + (k < kGate ? "self_attn." : "mlp.") + kModuleNames[k];
            upload_weight(w.w[k], ws, base + ".weight", int64_t(d.out_of(k)) * d.in_of(k), stage, stage_bytes);
            if (w.b[k]) upload_weight(w.b[k], ws, base + ".bias", d.out_of(k), stage, stage_bytes);
        }
        if (d.qk_norm) {
            upload_weight(w.q_norm, ws, p + "self_attn.q_norm.weight", d.D, stage, stage_bytes);
            upload_weight(w.k_norm, ws, p + "self_attn.k_norm.weight", d.D, stage, stage_bytes);
        }
    }
    cuda::synchronize();  // before the mapping closes and the staging span becomes the workspace again
    return CudaModel(std::move(impl));
}

CudaModel CudaModel::random(const ModelConfig& config, const LoraConfig& lora, uint64_t seed, uint64_t weight_seed,
                            const CudaModelOptions& options) {
    auto impl = make_impl(config, lora, seed, options, "random model");
    Impl& m = *impl;
    const Dims& d = m.d;
    const float bound = 0.02f * std::sqrt(3.0f);  // uniform with std 0.02
    SplitMix64 rng(weight_seed);
    auto uniform = [&](bf16* p, int64_t n) { cuda::fill_uniform(p, n, rng.next_u64(), bound); };
    const int64_t VC = int64_t(d.V) * d.C;
    uniform(m.embed, VC);
    if (m.lm_head) uniform(m.lm_head, VC);
    cuda::fill(m.norm_f, 1.0f, d.C);
    for (int l = 0; l < d.L; ++l) {
        const LayerWeights& w = m.layers[size_t(l)];
        cuda::fill(w.ln1, 1.0f, d.C);
        cuda::fill(w.ln2, 1.0f, d.C);
        for (int k = 0; k < kNumModules; ++k) {
            uniform(w.w[k], int64_t(d.out_of(k)) * d.in_of(k));
            if (w.b[k]) cuda::fill(w.b[k], 0.0f, d.out_of(k));
        }
        if (d.qk_norm) {
            cuda::fill(w.q_norm, 1.0f, d.D);
            cuda::fill(w.k_norm, 1.0f, d.D);
        }
    }
    cuda::synchronize();
    return CudaModel(std::move(impl));
}

CudaModel::CudaModel(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
CudaModel::CudaModel(CudaModel&&) noexcept = default;
CudaModel& CudaModel::operator=(CudaModel&&) noexcept = default;
CudaModel::~CudaModel() = default;

const ModelConfig& CudaModel::config() const { return impl_->cfg; }
const LoraConfig& CudaModel::lora_config() const { return impl_->lora; }
const CudaModelOptions& CudaModel::options() const { return impl_->options; }
std::string CudaModel::attention_backend_name() const { return impl_->backend_name; }
std::vector<LoraParam>& CudaModel::lora_params() { return impl_->params; }
int CudaModel::max_tokens() const { return impl_->d.T; }
CudaMemoryPlan CudaModel::memory() const { return impl_->y.plan; }

// ---------------------------------------------------------------------------------------------------------
// LoRA state
// ---------------------------------------------------------------------------------------------------------

void CudaModel::sync_to_host() {
    Impl& m = *impl_;
    m.download_lora(m.lora_value, &LoraParam::value);
    m.download_lora(m.lora_grad, &LoraParam::grad);
    m.download_lora(m.lora_m, &LoraParam::exp_avg);
    m.download_lora(m.lora_v, &LoraParam::exp_avg_sq);
}

void CudaModel::sync_from_host() {
    Impl& m = *impl_;
    for (size_t i = 0; i < m.params.size(); ++i) {
        const LoraParam& p = m.params[i];
        const size_t n = size_t(m.y.lora_numel[i]);
        if (p.value.size() != n || p.exp_avg.size() != n || p.exp_avg_sq.size() != n)
            throw_invalid("sync_from_host: LoRA tensor " + p.spec.name + " holds the wrong number of elements (value " +
                          std::to_string(p.value.size()) + ", exp_avg " + std::to_string(p.exp_avg.size()) +
                          ", exp_avg_sq " + std::to_string(p.exp_avg_sq.size()) + "; expected " + std::to_string(n) +
                          ")");
    }
    m.upload_lora_values();
    m.upload_lora_moments();
    cuda::synchronize();
}

void CudaModel::set_lora(const LoraTensors& tensors) {
    Impl& m = *impl_;
    auto& params = m.params;
    if (tensors.size() != params.size())
        throw_invalid("set_lora: the adapter has " + std::to_string(tensors.size()) + " tensors, the model expects " +
                      std::to_string(params.size()) + " (different r or target modules?)");
    for (size_t i = 0; i < params.size(); ++i) {
        const auto& p = params[i];
        auto it = tensors.find(p.spec.name);
        if (it == tensors.end()) throw_invalid("set_lora: the adapter lacks tensor " + p.spec.name);
        if (it->second.size() != size_t(m.y.lora_numel[i]))
            throw_invalid("set_lora: tensor " + p.spec.name + " has " + std::to_string(it->second.size()) +
                          " elements, expected " + std::to_string(m.y.lora_numel[i]));
    }
    for (auto& p : params) p.value = tensors.at(p.spec.name);
    m.upload_lora_values();
    cuda::synchronize();
}

LoraTensors CudaModel::lora_tensors() {
    Impl& m = *impl_;
    m.download_lora(m.lora_value, &LoraParam::value);
    LoraTensors out;
    for (const auto& p : m.params) out[p.spec.name] = p.value;
    return out;
}

void CudaModel::zero_grads() {
    Impl& m = *impl_;
    if (m.y.lora_padded > 0) zero(m.lora_grad, m.y.lora_padded);
    TANDEM_CUDA_CHECK(cudaMemsetAsync(m.loss_sum + 1, 0, sizeof(double), stream()));
}

// ---------------------------------------------------------------------------------------------------------
// Steps
// ---------------------------------------------------------------------------------------------------------

double CudaModel::forward_backward(const PackedBatch& batch, float grad_scale, uint64_t dropout_seed) {
    Impl& m = *impl_;
    m.timed = false;
    m.tl_used = 0;
    m.begin_batch(batch, grad_scale, dropout_seed);
    m.ev_start.record();
    m.forward(true);
    m.loss(m.d_lnf);
    m.ev_mid.record();
    m.backward();
    m.ev_end.record();
    m.end_batch();
    const double loss = m.finish_loss();
    m.timed = true;
    return loss;
}

void CudaModel::forward_backward_async(const PackedBatch& batch, float grad_scale, uint64_t dropout_seed) {
    Impl& m = *impl_;
    if (m.steps_queued - m.steps_collected >= kStepSlots)
        throw_internal("cuda model: collect_step() must read a queued step before another one starts");
    const int r = int(m.steps_queued % kStepSlots);
    m.tl_used = 0;
    m.begin_batch(batch, grad_scale, dropout_seed);  // the compute stream waits for the upload here
    m.ev_t[r][0].record();
    m.ev_start.record();  // the timeline's origin
    if (m.graphs_enabled() && m.run_graphed()) {
        m.ev_t[r][1].record();  // one graph: no forward / backward split (all of it counts as forward)
    } else {
        ++m.graph_stats.eager;
        m.micro_step(m.ev_t[r][1].get());
    }
    m.ev_t[r][2].record();
    m.end_batch();
}

double CudaModel::forward_loss(const PackedBatch& batch) {
    Impl& m = *impl_;
    m.begin_batch(batch, 1.0f, 0);
    m.forward(false);
    m.loss(nullptr);
    m.end_batch();
    return m.finish_loss();
}

// Full logits in row chunks through the workspace span (evaluation / tests: one copy back per chunk).
std::vector<float> CudaModel::logits(const PackedBatch& batch) {
    Impl& m = *impl_;
    m.begin_batch(batch, 1.0f, 0);
    m.forward(false);
    const int T = m.step.T, V = m.d.V;
    std::vector<float> out(size_t(T) * size_t(V));
    const int rows = int(std::min<size_t>(size_t(T), m.work_bytes / (size_t(V) * sizeof(float))));
    if (rows < 1) throw_internal("cuda model: workspace smaller than one row of logits");
    float* scratch = reinterpret_cast<float*>(m.work_base);
    for (int r0 = 0; r0 < T; r0 += rows) {
        const int n = std::min(rows, T - r0);
        cuda::lm_head_logits(scratch, m.lnf + int64_t(r0) * m.d.C, m.head(), n, m.d.C, V);
        TANDEM_CUDA_CHECK(cudaMemcpyAsync(out.data() + int64_t(r0) * V, scratch, size_t(n) * V * sizeof(float),
                                          cudaMemcpyDeviceToHost, stream()));
    }
    m.end_batch();
    cuda::synchronize();
    m.all_complete();
    return out;
}

std::vector<float> CudaModel::last_logits(const std::vector<int32_t>& ids) {
    Impl& m = *impl_;
    const PackedBatch b = batch_from_sequences({ids});
    m.begin_batch(b, 1.0f, 0);
    m.forward(false);
    const int V = m.d.V;
    std::vector<float> out(static_cast<size_t>(V));
    float* scratch = reinterpret_cast<float*>(m.work_base);
    if (m.work_bytes < size_t(V) * sizeof(float)) throw_internal("cuda model: workspace smaller than one row of logits");
    cuda::lm_head_logits(scratch, m.lnf + int64_t(b.num_tokens - 1) * m.d.C, m.head(), 1, m.d.C, V);
    TANDEM_CUDA_CHECK(
        cudaMemcpyAsync(out.data(), scratch, size_t(V) * sizeof(float), cudaMemcpyDeviceToHost, stream()));
    m.end_batch();
    cuda::synchronize();
    m.all_complete();
    return out;
}

double CudaModel::optimizer_step(double lr, double beta1, double beta2, double eps, double weight_decay,
                                 double max_grad_norm, int64_t step) {
    Impl& m = *impl_;
    if (m.params.empty()) return 0.0;
    const int count = m.lora_count();
    cuda::global_grad_norm(m.norm, m.lora_desc, count, m.y.lora_total, m.gn_ws);
    cuda::adamw_update(m.lora_desc, count, m.y.lora_total, m.norm, max_grad_norm, lr, beta1, beta2, eps, weight_decay,
                       step);
    TANDEM_CUDA_CHECK(cudaMemcpyAsync(m.pinned_norm(), m.norm, sizeof(float), cudaMemcpyDeviceToHost, stream()));
    cuda::synchronize();
    m.all_complete();
    return double(*m.pinned_norm());
}

void CudaModel::optimizer_step_async(double lr, double beta1, double beta2, double eps, double weight_decay,
                                     double max_grad_norm, int64_t step) {
    Impl& m = *impl_;
    const int r = int(m.steps_queued % kStepSlots);
    if (m.params.empty()) {
        zero(m.norm, 1);
    } else {
        const int count = m.lora_count();
        cuda::global_grad_norm(m.norm, m.lora_desc, count, m.y.lora_total, m.gn_ws);
        cuda::adamw_update(m.lora_desc, count, m.y.lora_total, m.norm, max_grad_norm, lr, beta1, beta2, eps,
                           weight_decay, step);
    }
    TANDEM_CUDA_CHECK(
        cudaMemcpyAsync(m.pinned_step_loss(r), m.loss_sum + 1, sizeof(double), cudaMemcpyDeviceToHost, stream()));
    TANDEM_CUDA_CHECK(
        cudaMemcpyAsync(m.pinned_step_norm(r), m.norm, sizeof(float), cudaMemcpyDeviceToHost, stream()));
    m.ev_t[r][3].record();
    m.ev_step_done[r].record();
    m.step_last_seq[r] = m.batch_seq;
    ++m.steps_queued;
}

CudaModel::StepReadback CudaModel::collect_step() {
    Impl& m = *impl_;
    if (m.steps_collected == m.steps_queued) throw_internal("cuda model: collect_step() with no step queued");
    const int r = int(m.steps_collected % kStepSlots);
    cuda::wait_event(m.ev_step_done[r].get());  // the step's one host sync
    m.completed_seq = std::max(m.completed_seq, m.step_last_seq[r]);
    ++m.steps_collected;
    StepReadback out;
    out.loss_sum = *m.pinned_step_loss(r);
    out.grad_norm = double(*m.pinned_step_norm(r));
    float fwd = 0, bwd = 0, opt = 0;
    if (cudaEventElapsedTime(&fwd, m.ev_t[r][0].get(), m.ev_t[r][1].get()) == cudaSuccess &&
        cudaEventElapsedTime(&bwd, m.ev_t[r][1].get(), m.ev_t[r][2].get()) == cudaSuccess &&
        cudaEventElapsedTime(&opt, m.ev_t[r][2].get(), m.ev_t[r][3].get()) == cudaSuccess) {
        out.timing.forward_ms = fwd;
        out.timing.backward_ms = bwd;
        out.timing.optimizer_ms = opt;
    }
    (void)cudaGetLastError();  // a step without a micro-batch left its timing events unrecorded
    return out;
}

int CudaModel::queued_steps() const { return int(impl_->steps_queued - impl_->steps_collected); }

CudaGraphStats CudaModel::graph_stats() const {
    CudaGraphStats s = impl_->graph_stats;
    s.cached = int(impl_->graphs.size());
    return s;
}

std::vector<TimelineSpan> CudaModel::timeline() {
    Impl& m = *impl_;
    cuda::synchronize();
    if (m.nb > 0) cuda::synchronize(m.copy.get());
    m.all_complete();
    std::vector<TimelineSpan> out;
    for (size_t i = 0; i < m.tl_used; ++i) {
        TimelineSpan t = m.timeline_spans[i];
        float b = 0, e = 0;
        TANDEM_CUDA_CHECK(cudaEventElapsedTime(&b, m.ev_start.get(), m.tl_events[i][0].get()));
        TANDEM_CUDA_CHECK(cudaEventElapsedTime(&e, m.ev_start.get(), m.tl_events[i][1].get()));
        t.begin_ms = b;
        t.end_ms = e;
        out.push_back(t);
    }
    return out;
}

CudaStepTiming CudaModel::last_timing() const {
    const Impl& m = *impl_;
    CudaStepTiming t;
    if (!m.timed) return t;
    float fwd = 0, bwd = 0;
    TANDEM_CUDA_CHECK(cudaEventElapsedTime(&fwd, m.ev_start.get(), m.ev_mid.get()));
    TANDEM_CUDA_CHECK(cudaEventElapsedTime(&bwd, m.ev_mid.get(), m.ev_end.get()));
    t.forward_ms = fwd;
    t.backward_ms = bwd;
    return t;
}

bool cuda_backend_available(std::string* reason) { return cuda::device_available(reason); }

}  // namespace tandem

#else  // !TANDEM_WITH_CUDA

namespace tandem {
namespace {

[[noreturn]] void no_cuda() {
    throw Error(ErrorCategory::Unsupported,
                "this build of Tandem has no CUDA backend (built without nvcc/cuDNN); use --device cpu");
}

}  // namespace

struct CudaModel::Impl {};

CudaMemoryPlan CudaModel::plan(const ModelConfig&, const LoraConfig&, const CudaModelOptions&) { no_cuda(); }
CudaModel CudaModel::load(const std::filesystem::path&, const LoraConfig&, uint64_t, const CudaModelOptions&) {
    no_cuda();
}
CudaModel CudaModel::random(const ModelConfig&, const LoraConfig&, uint64_t, uint64_t, const CudaModelOptions&) {
    no_cuda();
}
CudaModel::CudaModel(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
CudaModel::CudaModel(CudaModel&&) noexcept = default;
CudaModel& CudaModel::operator=(CudaModel&&) noexcept = default;
CudaModel::~CudaModel() = default;
const ModelConfig& CudaModel::config() const { no_cuda(); }
const LoraConfig& CudaModel::lora_config() const { no_cuda(); }
const CudaModelOptions& CudaModel::options() const { no_cuda(); }
std::string CudaModel::attention_backend_name() const { no_cuda(); }
std::vector<LoraParam>& CudaModel::lora_params() { no_cuda(); }
void CudaModel::sync_to_host() { no_cuda(); }
void CudaModel::sync_from_host() { no_cuda(); }
void CudaModel::set_lora(const LoraTensors&) { no_cuda(); }
LoraTensors CudaModel::lora_tensors() { no_cuda(); }
void CudaModel::zero_grads() { no_cuda(); }
double CudaModel::forward_backward(const PackedBatch&, float, uint64_t) { no_cuda(); }
double CudaModel::forward_loss(const PackedBatch&) { no_cuda(); }
void CudaModel::forward_backward_async(const PackedBatch&, float, uint64_t) { no_cuda(); }
void CudaModel::optimizer_step_async(double, double, double, double, double, double, int64_t) { no_cuda(); }
CudaModel::StepReadback CudaModel::collect_step() { no_cuda(); }
int CudaModel::queued_steps() const { no_cuda(); }
CudaGraphStats CudaModel::graph_stats() const { no_cuda(); }
std::vector<TimelineSpan> CudaModel::timeline() { no_cuda(); }
std::vector<float> CudaModel::logits(const PackedBatch&) { no_cuda(); }
std::vector<float> CudaModel::last_logits(const std::vector<int32_t>&) { no_cuda(); }
double CudaModel::optimizer_step(double, double, double, double, double, double, int64_t) { no_cuda(); }
CudaStepTiming CudaModel::last_timing() const { no_cuda(); }
CudaMemoryPlan CudaModel::memory() const { no_cuda(); }
int CudaModel::max_tokens() const { no_cuda(); }

bool cuda_backend_available(std::string* reason) {
    if (reason) *reason = "this build of Tandem has no CUDA backend (built without nvcc/cuDNN); use --device cpu";
    return false;
}

}  // namespace tandem

#endif  // TANDEM_WITH_CUDA
