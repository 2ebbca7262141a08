// SPDX-FileCopyrightText: 2026 The Tandem developers
// SPDX-License-Identifier: GPL-3.0-or-later
// The memory plan of the decoder, for every backend: the model's dimensions (Dims), and make_plan, which lays
// out the four arenas (base weights, LoRA state, activations, workspace) as named pieces for a checkpointing
// policy. plan() of a model reports the sizes; load() allocates each arena once and carves it by the same
// offsets, so the plan is the allocation byte for byte (tests/fixtures/plans holds the CUDA plans' golden
// bytes).
// T = max_tokens (rows of every activation buffer), C = hidden, Q = Hq*D, KV = Hkv*D, F = intermediate,
// V = vocab, L = layers, R = LoRA rank, D = head_dim, BIG = max(Q,F), IN = max(C,Q,F), K = lm_head chunk rows,
// P = LoRA elements (each tensor padded to kLoraAlign on CUDA).
// Decisions a reader must know:
//  - The activation set of a layer is the CUDA block's (model/decoder.h): the residual adds are fused into
//    the next norm, RoPE runs in place, the SwiGLU output and the LoRA-dropped inputs are recomputed in
//    backward instead of kept. Both backends run that block, so both have this set; they differ in element
//    size (PlanTraits::act_bytes) and in what their runtime adds (PlanTraits).
//  - Checkpointing is where the sets live: Off keeps one set per layer; Recompute one shared set plus every
//    layer's input; Smart / SmartSingle one shared set plus 2 / 1 block-input buffers (layer l's input in
//    buffer l % nb; the inputs of layers 0 .. L-nb-1 go to host memory, pinned_host bytes).
#pragma once

#include <algorithm>
#include <array>
#include <cstdint>
#include <string>
#include <functional>
#include <vector>

#include "arch/arch.h"
#include "core/layout.h"
#include "core/fp8.h"
#include "core/quant4.h"
#include "model/lora_table.h"
#include "tandem/lora.h"
#include "tandem/model_config.h"
#include "tandem/run_config.h"

namespace tandem {

// LoRA tensors start at multiples of this many elements in every device LoRA region (256-byte aligned fp32).
inline constexpr int64_t kLoraAlign = 64;
// Rows of the batch metadata segments are padded to this (256-byte aligned int32 segments).
inline constexpr int64_t kMetaAlign = 64;
// The metadata starts with this many int32 of per-batch scalars the kernels read (on CUDA from device
// memory, so a CUDA graph replays with each batch's values): [0,1] the dropout seed (uint64), [2] grad_scale,
// [3] the micro-batch's label tokens as a float (the MoE load-balancing loss's weight).
inline constexpr int64_t kMetaHeader = kMetaAlign;

inline int64_t round_up(int64_t x, int64_t m) { return (x + m - 1) / m * m; }

struct Dims {
    int C = 0, Q = 0, KV = 0, F = 0, V = 0, L = 0, Hq = 0, Hkv = 0, D = 0, R = 0;
    int T = 0;               // max_tokens: rows of every activation buffer
    int max_seqlen = 0;      // longest sample the attention buffers are sized for
    int K = 0;               // lm_head chunk rows
    int rope_positions = 0;  // positions of the RoPE table: min(max_position_embeddings, max_tokens or more)
    int window = 0;          // the smallest sliding window of any layer (0: every layer attends fully)
    std::vector<int> windows;         // [L] each layer's window (0: full causal attention)
    std::vector<uint8_t> local_rope;  // [L] 1: the layer uses the local RoPE table (Gemma 3's sliding layers)
    float eps = 1e-6f;
    bool qk_norm = false, tied = false, dropout = false;
    bool bias[kNumModules] = {};
    // Gemma: norms of (1 + w) (norm_offset 1), sandwich norms on the attention / MLP outputs, GeGLU, scaled
    // embeddings, soft-capped attention scores and final logits (0: none).
    float norm_offset = 0.0f;
    bool sandwich = false, gelu = false;
    float embed_scale = 1.0f;
    float attn_scale = 1.0f;  // 1/sqrt(head_dim), or 1/sqrt(query_pre_attn_scalar)
    float attn_softcap = 0.0f, final_softcap = 0.0f;
    bool sinks = false;       // attention sinks (gpt-oss): a weight [Hq] per layer, kernels/cpu/attention.h
    std::string ln1_name, ln2_name, attn_out_norm_name, mlp_out_norm_name;  // checkpoint names ("" = none)
    // The projections of a layer as the checkpoint stores them (arch/arch.h; every layer of a dense model has
    // the same): one weight piece each; a fused one feeds several slots at row offsets.
    std::vector<ProjectionSpec> projections;
    // 4-bit projections (QLoRA, core/quant4.h): quant4[l * quant4_stride() + p] = 1 when projection p of
    // layer l (projections_of(l)) is stored as 4-bit codes; empty when none is. Every 4-bit projection has this
    // block size and double quantization or not. An MoE layer's expert parameters are 4-bit as a whole
    // [E, out, in] (Decoder::expert_weight dequantizes one before its grouped GEMMs).
    std::vector<uint8_t> quant4;
    int quant_blocksize = 64;
    bool quant_nested = true;
    // FP8 base GEMMs (precision fp8, core/fp8.h): every projection is FP8 codes + 128x128 block scales, its
    // input quantized per row and 128 columns before the forward GEMM and its output gradient before the
    // input-gradient GEMM (against the weight transposed into a work piece). Dense models only. With 4-bit
    // projections (quant4) those stay 4-bit and are dequantized straight to FP8 before each of their GEMMs.
    bool fp8 = false;

    // Mixture of experts (E = 0: a dense model). moe[l] = 1 where layer l's MLP is a router over E experts of
    // Fe features, topk per token (their weights renormalised when moe_renorm); N = T * topk rows of the
    // expert buffers (every token's topk assignments, sorted by expert: kernels/cpu/moe.h).
    int E = 0, topk = 0, Fe = 0;
    bool moe_renorm = false;
    bool router_bias = false;  // the router's logits + a bias [E] (gpt-oss)
    // The experts' two parameters stay MXFP4 on the device (CUDA, an MXFP4 checkpoint: kernels/cpu/mxfp4.h): one
    // parameter at a time is dequantized into a work piece before its grouped GEMMs (Decoder::expert_weight).
    bool mxfp4 = false;
    // The experts' activation: the clamped SwiGLU with this limit and alpha (gpt-oss), or 0: SwiGLU.
    float moe_limit = 0.0f, moe_alpha = 1.702f;
    float aux_coef = 0.0f;   // the load-balancing loss's coefficient (0: off); moe_layers MoE layers, the first one
    int moe_layers = 0, first_moe = -1;
    std::vector<uint8_t> moe;                     // [L]
    std::vector<ProjectionSpec> moe_projections;  // an MoE layer's: attention, then the two expert parameters
    MoeSpec moe_spec;                             // how the checkpoint stores the router and the experts

    bool is_moe(int l) const { return !moe.empty() && moe[size_t(l)] != 0; }
    const std::vector<ProjectionSpec>& projections_of(int l) const { return is_moe(l) ? moe_projections : projections; }
    int N() const { return T * topk; }
    // Rows of the MLP's LoRA tmps: T, or N when an MoE layer's experts can be adapted.
    int mlp_tmp_rows() const { return E > 0 ? std::max(T, N()) : T; }
    size_t quant4_stride() const { return std::max(projections.size(), moe_projections.size()); }
    bool quantized(int l, size_t p) const { return !quant4.empty() && quant4[size_t(l) * quant4_stride() + p]; }
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

// Long sequences: under a policy that drops the MLP's buffers (recompute, selective, smart, smart-single), the
// MLP runs over chunks of this many rows when a micro-batch has more, so its [rows, F] buffers (gate, up and the
// backward scratch) are bounded by the chunk, not by the sequence (decoder.h mlp_block_forward / _backward). Not
// with LoRA dropout (its mask is keyed by the element index from row 0) nor with sandwich norms.
inline constexpr int kMlpChunkRows = 4096;
// Under recompute and smart (which drop the norms and mid too) the whole block but attention runs in those chunks
// (ModelPlan::block_chunked) once a micro-batch has more than this many chunks' rows (16,384 tokens): up to there
// the step is the one measured before block chunking (whole-batch projections); past it attention dominates the
// step, and the chunks' few extra passes (ln1 normed again in backward) are noise beside the memory they free.
inline constexpr int kBlockChunkMinChunks = 4;
// The chunk size the planner uses (kMlpChunkRows unless a test or a benchmark changes it; 0: never chunk).
int mlp_chunk_rows();
void set_mlp_chunk_rows(int rows);

// The checks every backend makes before planning (Error{Unsupported|InvalidInput} prefixed with `where`):
// a supported family, silu, sane dimensions, heads divisible, an even head_dim, a valid LoRA config.
void validate_model(const ModelConfig& cfg, const LoraConfig& lora, const std::string& where);

// max_seqlen 0: max_tokens. ce_chunk_rows: the lm_head chunk (rows), at most max_tokens. Error{Unsupported}
// for an architecture whose layers are not the dense block's (differing layers, a slot fed twice or never).
Dims make_dims(const ModelConfig& cfg, const LoraConfig& lora, int max_tokens, int max_seqlen, int ce_chunk_rows);

// The buffers a layer's forward produces and its backward reads, with what producing one again costs.
// A checkpointing policy is data: it maps each buffer to a residency (checkpoint_residency), and make_plan
// turns that into the layout: Kept buffers get a piece per layer, Dropped ones one piece shared by every
// layer (backward recomputes them right before the layer's backward), Offloaded (the block input only) a few
// rotating device buffers plus host memory.
enum class Buf : uint8_t {
    X,                          // block input (residual stream)
    Ln1, Ln1Rstd,               // input norm
    Q, K, QRstd, KRstd,         // projections before the q/k norm and its statistics (qk_norm only)
    Qr, Kr, V,                  // attention inputs (after norm and RoPE)
    Att, Stats,                 // attention output and its softmax statistics
    Mid, Ln2, Ln2Rstd,          // residual after attention, post-attention norm
    Gate, Up,                   // MLP projections
    TmpAttn, TmpMlp,            // LoRA x A^T of the attention / MLP projections
    AttnOut, AttnOutRstd,       // sandwich norms only: o_proj output and its norm's statistics
    MlpOut, MlpOutRstd,         //   down_proj output and its norm's statistics
    Route,                      // MoE: router probabilities, choices, weights, the sorted order and offsets
    Xs, Ys,                     // MoE: the MLP input permuted to expert order [N,C], the experts' outputs [N,C]
    Count
};
inline constexpr int kBufCount = int(Buf::Count);
enum class Cost : uint8_t { None, Cheap, Gemm, Attention };  // None: the block input (not recomputable)
enum class Residency : uint8_t { Kept, Dropped, Offloaded };
struct BufferDecl {
    Buf id;
    const char* name;
    Cost cost;
    bool mlp;  // produced by the MLP sub-block (from ln2), else by the attention sub-block (from x)
};
const std::array<BufferDecl, kBufCount>& buffer_decls();
const BufferDecl& buffer_decl(Buf b);

// The policies as data (not Auto): off keeps everything; recompute keeps the block input and drops the
// rest; smart / smart-single offload the block input and drop the rest; selective keeps the block input
// and the attention sub-block's GEMM and attention outputs (the expensive part to redo, small next to the
// MLP's [T,F] buffers) and drops the norms and the MLP sub-block's buffers (recomputed: two norms and the
// gate/up GEMMs).
Residency checkpoint_residency(CheckpointPolicy p, Buf b);

// Device buffers holding block inputs under Smart (2) / SmartSingle (1); 0: not an offloading policy.
int offload_buffers(CheckpointPolicy p);
// Layers whose input goes to host memory: 0 .. L-nb-1 (the last nb stay in their buffers).
int offloaded_layers(CheckpointPolicy p, int L);

// What a backend adds to the plan beyond the block's buffers.
struct PlanTraits {
    size_t act_bytes = 4;               // activations and base weights: 4 (CPU, fp32) or 2 (CUDA, bf16)
    size_t attention_stats_bytes = 0;   // attention statistics of one layer (lse [Hq,T] or cuDNN's layout)
    size_t attention_workspace = 0;
    size_t ce_workspace = 0;            // the lm_head chunk
    size_t grad_norm_workspace = 0;     // 0: none
    size_t rope_table_bytes = 0;        // 0: the table is not in the weights arena (CPU)
    size_t rope_local_table_bytes = 0;  // the sliding layers' table (Gemma 3), 0: none
    bool lora_regions = false;          // CUDA: padded LoRA regions + bf16 copies + AdamW descriptors
    size_t adamw_descriptor_bytes = 0;  // per LoRA tensor (lora_regions)
    int metadata_slots = 1;             // batch metadata slots in the activation arena
    uint64_t library_workspace = 0;     // bytes the backend's libraries hold beside the arenas (cuBLASLt)
    uint64_t context = 0;               // the CUDA context allowance (an estimate, not allocated by us)
};

// Bytes by purpose. total = weights + lora_optimizer + activations + workspace + context; pinned_host is host
// memory for offloaded block inputs and MLP buffers, and not in total.
struct PlanBytes {
    uint64_t weights = 0;         // base weights + norms (+ the RoPE table on CUDA)
    uint64_t lora_optimizer = 0;  // fp32 values + grads + 2 AdamW moments (+ bf16 copies and descriptors on CUDA)
    uint64_t activations = 0;     // the activation arena
    uint64_t workspace = 0;       // the workspace arena (+ library workspace)
    uint64_t context = 0;
    uint64_t total = 0;
    uint64_t pinned_host = 0;
};

// The pieces of a 4-bit projection: codes [ceil(n/2)] uint8, absmax [blocks] (uint8 when double-quantized,
// else fp32), nested_absmax [nested blocks] fp32 (double quantization only), and consts: fp32 code table [16],
// nested code table [256], offset [1] (kQuant4Consts floats).
inline constexpr int kQuant4Consts = 16 + 256 + 1;
// The least staging a CUDA load of a 4-bit model needs beside one tensor's absmax (chunks of the weight).
inline constexpr size_t kQuant4StageBytes = size_t(6) << 20;
struct Quant4Pieces {
    int codes = -1, absmax = -1, nested_absmax = -1, consts = -1;
    int64_t n = 0, out = 0, in = 0;  // the whole (possibly fused) projection: n = out * in
};

// The pieces of an FP8 projection (core/fp8.h): codes [out, fp8_padded(in)] bytes, scales [fp8_blocks(out),
// fp8_padded(in)/128] fp32. A slot of a fused one starts at row row0 (a multiple of 128: make_dims checks).
struct Fp8Pieces {
    int codes = -1, scales = -1;
    int64_t out = 0, in = 0;  // the whole (possibly fused) projection
    int64_t row0 = 0;         // the slot's first row (per slot; 0 in a WeightEntry)
};
// A slot's transposed FP8 weight (PlanOptions::fp8_transposed): codes [in, fp8_padded(out)], scales
// [fp8_blocks(in), fp8_scale_ld(out)] (kernels/*/fp8.h fp8_transpose).
struct Fp8TransposedPieces {
    int codes = -1, scales = -1;
};

// A slot's weight (bias) is element w_off (b_off) of piece w (b): 0 unless its projection is fused. A 4-bit
// slot has w = -1 and its pieces in q (w_off is then the first element of its rows in the 4-bit weight); an
// FP8 slot has w = -1 and its pieces in f8.
struct LayerWeightHandles {
    int ln1 = -1, ln2 = -1, q_norm = -1, k_norm = -1, attn_out_norm = -1, mlp_out_norm = -1;
    int router = -1;  // MoE layers: [E, C]
    int router_bias = -1, sinks = -1;  // [E] (Dims::router_bias), [Hq] (Dims::sinks)
    // Dims::mxfp4: the expert parameters' codes and scales (index 0: gate_up, 1: down); w[] is -1 for them.
    int mx_codes[2] = {-1, -1}, mx_scales[2] = {-1, -1};
    int w[kNumModules] = {-1, -1, -1, -1, -1, -1, -1};
    int b[kNumModules] = {-1, -1, -1, -1, -1, -1, -1};
    int64_t w_off[kNumModules] = {};
    int64_t b_off[kNumModules] = {};
    Quant4Pieces q[kNumModules];
    Fp8Pieces f8[kNumModules];
    Fp8TransposedPieces f8t[kNumModules];  // PlanOptions::fp8_transposed: each slot's W^T
};

// One layer's activation pieces (-1: not present in this configuration).
struct ActHandles {
    int x = -1, ln1 = -1, ln1_rstd = -1;
    int q = -1, k = -1, q_rstd = -1, k_rstd = -1;  // qk_norm only
    int qr = -1, kr = -1, v = -1, att = -1, stats = -1;
    int mid = -1, ln2 = -1, ln2_rstd = -1, gate = -1, up = -1;
    int tmp[kNumModules] = {-1, -1, -1, -1, -1, -1, -1};
    int attn_out = -1, attn_out_rstd = -1, mlp_out = -1, mlp_out_rstd = -1;  // sandwich norms only
    int route = -1, xs = -1, ys = -1;  // MoE layers only (route: moe_route_bytes)
};

// The routing piece of an MoE layer, carved in this order (each part 256-byte aligned): probs [T,E] fp32,
// logits [T,E] act (backward: their gradient), idx [T,K] int32, w [T,K] fp32, order [N] int32, inv [N] int32,
// offsets [E+1] int32.
struct MoeRouteParts {
    size_t probs = 0, logits = 0, idx = 0, w = 0, order = 0, inv = 0, offsets = 0, bytes = 0;
};
MoeRouteParts moe_route_parts(const Dims& d, size_t act_bytes);

struct ModelPlan {
    ArenaLayout weights, lora, acts, work;
    // weights
    int embed = -1, lm_head = -1, norm_f = -1, rope = -1, rope_local = -1;
    std::vector<LayerWeightHandles> lw;
    // LoRA (lora_regions): five regions with the same per-tensor element offsets, plus the AdamW descriptors
    int lora_value = -1, lora_grad = -1, lora_m = -1, lora_v = -1, lora_bf16 = -1, lora_desc = -1;
    std::vector<int64_t> lora_offset, lora_numel;
    int64_t lora_padded = 0, lora_total = 0;
    // activations: L sets (Off) or one shared set plus L block inputs (Recompute) or plus min(nb, L)
    // block-input buffers (Smart: nb = 2, SmartSingle: nb = 1; x_store[l % nb] is layer l's input)
    CheckpointPolicy checkpointing = CheckpointPolicy::Off;
    std::array<Residency, kBufCount> residency{};  // of every buffer (the same for every layer)
    bool recomputes = false;                       // some buffer is dropped: backward recomputes
    std::vector<ActHandles> sets;                  // [L]: each layer's pieces (kept: its own; dropped: shared)
    std::vector<int> x_store;                      // Recompute / Selective: [L]; Smart*: the nb buffers
    size_t stats_bytes = 0;
    int x_final = -1, lnf = -1, lnf_rstd = -1;
    int d_res = -1, d_ln = -1, d_lnf = -1, d_big = -1, d_big2 = -1, d_big3 = -1, d_k = -1, d_k2 = -1, d_v = -1;
    int d_att = -1;  // block_chunked: [T,Q] the attention output's gradient (else d_big holds it); with Q >= C also lnf
                     // (and d_big2 d_lnf) between forward and backward (make_plan)
    int d_tmp = -1, xd = -1, d_drop = -1, losses = -1, meta = -1;
    int d_xs = -1, d_ys = -1, d_route_w = -1;  // MoE: [N,C], [N,C], [T,K] fp32
    int64_t meta_ints = 0;  // int32 of one metadata slot
    // workspace
    int ce = -1, att_ws = -1, gn_ws = -1, loss_sum = -1, norm = -1;
    int dequant = -1;             // one slot's 4-bit weight dequantized (act_bytes per element), 4-bit models only
    // FP8 models: a GEMM's quantized input (codes [T, Kp] + scales [Kp/128, T] for the widest input or output
    // gradient) and one slot's weight transposed (codes [IN, OUTp] + scales) for the input gradient.
    // fp8_tail: the output of the 16-row tail GEMM when a batch's rows are not a multiple of 16 (core/fp8.h).
    // fp8_w: a 4-bit slot dequantized to FP8 for its forward GEMM (precision fp8 with quantization nf4).
    // fp8_act2: up_proj's output gradient [MLP rows, F], quantized beside gate's by the activation's backward.
    int fp8_act = -1, fp8_act_scales = -1, fp8_wt = -1, fp8_wt_scales = -1, fp8_tail = -1, fp8_w = -1,
        fp8_w_scales = -1;
    int fp8_act2 = -1, fp8_act2_scales = -1;
    int moe_aux = -1;             // the load-balancing loss: stats [2E] + the probabilities' gradient [E], fp32
    int mx_dequant = -1;          // Dims::mxfp4: one expert parameter dequantized, [E, out, in] act
    int mlp_rows = 0;             // rows of one MLP chunk (= max_tokens when the MLP is not chunked)
    // The whole block but attention runs in chunks of mlp_rows rows (the MLP is chunked and the policy drops
    // the norms and mid too): ln1, mid, ln2 (and their rstds), d_ln and the MLP scratch hold one chunk; only
    // the block input, q / k / v, the attention output and their gradients stay [T, *].
    bool block_chunked = false;
    int mlp_kept_layers = 0;      // layers 0..K-1 keep the MLP buffers the policy drops (make_plan)
    // PlanOptions::mlp_offloaded_layers: offloaded[j] is the j-th layer whose gate / up go to host memory (its
    // gate / up pieces are slot j % 2); host slot j (j < mlp_host_slots) holds gate then up, [2, T, F] act.
    std::vector<int> mlp_offloaded;
    std::vector<int> mlp_offload_index;  // [L] when there are such layers (else empty): l's j, or -1
    int mlp_host_slots = 0;       // max(M - 2, 0)
    bool fp8_transposed = false;  // FP8 slots' transposed weights are in the weights arena (PlanOptions)
    int64_t quant_max_blocks = 0;  // the most absmax blocks of any 4-bit projection (the load's fp32 scratch)
    size_t att_ws_bytes = 0;
    PlanBytes bytes;
};

// Every base weight of a plan in file order: its piece, its checkpoint tensor name, its element count and what
// kind of tensor it is (random models: matrices uniform, norms 1, biases 0). Both loads walk this list.
enum class WeightKind : uint8_t { Matrix, Norm, Bias };
// gpt-oss's expert tensors (arch/arch.h MoeSpec): the checkpoint holds [experts, in, out] (transposed) and/or
// alternates gate / up along out (interleaved; a bias is [experts, out] with in 1); the piece holds
// [experts, out, in] with the gate rows first. MXFP4 checkpoints hold the transposed ones as blocks
// (io/mxfp4.h). model/expert_layout.h reads them.
struct ExpertLayout {
    int64_t experts = 0;  // 0: the tensor is stored as the piece holds it
    int64_t in = 0, out = 0;
    bool transposed = false, interleaved = false;
};
struct WeightEntry {
    int handle = -1;                // -1 for a 4-bit or FP8 projection: its pieces are q or f8
    Quant4Pieces q;
    std::string name;  // "model.layers.3.self_attn.q_proj.weight"
    int64_t numel = 0;
    WeightKind kind = WeightKind::Matrix;
    int64_t offset = 0;  // the first element it fills in its piece (one expert's projection in the fused experts)
    Fp8Pieces f8;        // an FP8 projection's pieces (handle -1)
    ExpertLayout expert;  // how the checkpoint stores it, when not as the piece
    int mx_codes = -1, mx_scales = -1;  // Dims::mxfp4: the pieces of <name>_blocks / <name>_scales (handle -1)
    // A 4-bit expert parameter of the Hub's per-expert layout: the checkpoint tensors that make it up, in the
    // piece's order (expert 0's gate, up, expert 1's ...), each of numel / parts.size() values; empty otherwise.
    std::vector<std::string> parts;
};
struct ModelPlan;
std::vector<WeightEntry> weight_entries(const ModelPlan& y, const Dims& d);

// The plan of a model with these dimensions, LoRA tensors (lora_tensor_specs order) and policy (not Auto).
// An inconsistent policy (a block input dropped: nothing can recompute it; anything but the block input
// offloaded) is refused with Error{Internal} naming the policy and the buffer.
// What a plan may spend the memory a GPU has left on (both off by default):
//  - mlp_kept_layers K: layers 0..K-1 keep the MLP sub-block's buffers (gate, up, the MLP's LoRA tmps:
//    BufferDecl::mlp) that the policy drops, so backward does not redo their gate / up GEMMs: a per-layer
//    residency between the policy and 'off' (mlp_kept_layers_that_fit). Dense models whose MLP is not chunked only
//    (Error{Internal} otherwise).
//  - fp8_transposed: FP8 models keep every slot's transposed weight (codes [IN, OUT] + block scales, made once at
//    load: Decoder::transpose_fp8_weights) instead of transposing it before each input-gradient GEMM.
//  - mlp_offloaded_layers M: M more layers, spread evenly over K..L-2 (mlp_offload_layers), keep their MLP buffers
//    too, but their gate / up live in one of two device slots shared by them and go to pinned host memory in
//    forward and back in backward on the copy stream (the last two of them are still in their slots when their
//    backward comes: never copied). Their backward does not redo the gate / up GEMMs either; what it costs is
//    host-link time, hidden behind the other layers' compute when the link is fast enough for the share of
//    layers offloaded (kMlpOffloadShare). Same conditions as mlp_kept_layers.
struct PlanOptions {
    int mlp_kept_layers = 0;
    bool fp8_transposed = false;
    int mlp_offloaded_layers = 0;
};
// The layers whose MLP buffers go to host memory: M of the L-1-K layers K..L-2 spread evenly, in order (the last
// layer's buffers are still in place when its backward starts, so it is never one). Error{Internal} when M does
// not fit.
std::vector<int> mlp_offload_layers(int L, int K, int M);
// The share of the layers that still recompute their MLP that the trainer offloads (the rest keep recomputing).
// Measured on an H200 (docs/benchmarks.md, "Selective with MLP buffers offloaded"): Llama-3.1-8B at 4096 tokens,
// one layer's gate / up (2 x 117 MB) take 4.25 ms over the host link against 3.3 ms of one layer's forward, so
// about 3 of 4 layers' copies hide behind the forward of the others (24 of 31 was the fastest; all 31 waited).
inline constexpr int kMlpOffloadShareNum = 3, kMlpOffloadShareDen = 4;
ModelPlan make_plan(const Dims& d, const std::vector<LoraTensorSpec>& specs, const LoraIndex& lora_index,
                    CheckpointPolicy policy, const PlanTraits& traits, const PlanOptions& options = {});

// The most layers (0..L) that can keep their MLP buffers under `policy` with the plan's total at most `budget`
// bytes (plan(k) builds the plan with k kept layers); 0 when the policy keeps them anyway or none fits.
int mlp_kept_layers_that_fit(const Dims& d, CheckpointPolicy policy, uint64_t budget,
                             const std::function<uint64_t(int)>& plan_total);


}  // namespace tandem
