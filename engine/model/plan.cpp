// SPDX-FileCopyrightText: 2026 The Tandem developers
// SPDX-License-Identifier: GPL-3.0-or-later
// The decoder's memory plan (see plan.h): one function lays out the arenas for every backend and policy.
#include "model/plan.h"

#include "core/fp8.h"
#include "core/mxfp4.h"

#include <algorithm>
#include <atomic>
#include <cmath>

#include "tandem/error.h"

namespace tandem {

void validate_model(const ModelConfig& cfg, const LoraConfig& lora, const std::string& where) {
    if (!cfg.supported)
        throw_unsupported(where + ": " + cfg.architecture + " is not supported yet: " + cfg.unsupported_reason);
    if (cfg.hidden_act != "silu" && cfg.hidden_act != "swish" && cfg.hidden_act != "gelu_pytorch_tanh")
        throw_unsupported(where + ": hidden_act '" + cfg.hidden_act +
                          "' (silu and gelu_pytorch_tanh are implemented)");
    validate_lora_config(lora);
    const int64_t dims[] = {cfg.hidden_size, cfg.intermediate_size, cfg.num_hidden_layers, cfg.num_attention_heads,
                            cfg.num_key_value_heads, cfg.head_dim, cfg.vocab_size, cfg.max_position_embeddings};
    for (int64_t v : dims)
        if (v <= 0 || v > (int64_t(1) << 30)) throw_invalid(where + ": a model dimension is zero, negative or absurd");
    if (cfg.num_attention_heads % cfg.num_key_value_heads != 0)
        throw_invalid(where + ": num_attention_heads must be a multiple of num_key_value_heads");
    if (cfg.head_dim % 2 != 0) throw_invalid(where + ": head_dim must be even (RoPE)");
}

Dims make_dims(const ModelConfig& cfg, const LoraConfig& lora, int max_tokens, int max_seqlen, int ce_chunk_rows) {
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
    d.T = max_tokens;
    d.max_seqlen = max_seqlen > 0 ? std::min(max_seqlen, max_tokens) : max_tokens;
    d.K = std::max(1, std::min(ce_chunk_rows, d.T));
    d.rope_positions = int(std::min<int64_t>(cfg.max_position_embeddings, d.T));
    d.windows.resize(size_t(d.L));
    d.local_rope.resize(size_t(d.L));
    for (int l = 0; l < d.L; ++l) {
        d.windows[size_t(l)] = int(std::min<int64_t>(cfg.window_of(l), int64_t(1) << 30));
        if (d.windows[size_t(l)] > 0 && (d.window == 0 || d.windows[size_t(l)] < d.window)) d.window = d.windows[size_t(l)];
        d.local_rope[size_t(l)] = cfg.rope_local_theta > 0 && cfg.window_of(l) > 0;
    }
    d.norm_offset = cfg.norm_one_plus ? 1.0f : 0.0f;
    d.sandwich = cfg.sandwich_norms;
    d.gelu = cfg.hidden_act == "gelu_pytorch_tanh";
    d.embed_scale = float(cfg.embed_scale);
    d.attn_scale = float(1.0 / std::sqrt(cfg.query_pre_attn_scalar > 0 ? cfg.query_pre_attn_scalar : double(d.D)));
    d.attn_softcap = float(cfg.attn_logit_softcapping);
    d.final_softcap = float(cfg.final_logit_softcapping);
    d.sinks = cfg.attention_sinks;
    d.eps = float(cfg.rms_norm_eps);
    d.qk_norm = cfg.qk_norm;
    d.tied = cfg.tie_word_embeddings;
    d.dropout = lora.dropout > 0;
    const ArchSpec arch = arch_spec(cfg);
    // The layers' projections: every dense layer has d.projections, every MoE layer d.moe_projections.
    const LayerSpec* first_dense = nullptr;
    const LayerSpec* first_moe = nullptr;
    for (const LayerSpec& l : arch.layers) {
        const LayerSpec*& first = l.moe.experts > 0 ? first_moe : first_dense;
        if (!first) first = &l;
    }
    if (!arch.layers.empty()) {
        const LayerSpec& l0 = arch.layers[0];
        d.ln1_name = l0.ln1;
        d.ln2_name = l0.ln2;
        d.attn_out_norm_name = l0.attn_out_norm;
        d.mlp_out_norm_name = l0.mlp_out_norm;
        if (d.sandwich != !l0.attn_out_norm.empty() || d.sandwich != !l0.mlp_out_norm.empty())
            throw_internal(cfg.architecture + ": sandwich_norms and the layer's output norms disagree");
    }
    if (first_dense) d.projections = first_dense->projections;
    if (first_moe) {
        d.moe_projections = first_moe->projections;
        d.moe_spec = first_moe->moe;
        d.E = int(first_moe->moe.experts);
        d.topk = int(first_moe->moe.top_k);
        d.Fe = int(first_moe->moe.intermediate);
        d.moe_renorm = first_moe->moe.renormalize;
        d.router_bias = !first_moe->moe.router_bias.empty();
        d.moe_limit = float(first_moe->moe.swiglu_limit);
        d.moe.resize(size_t(d.L));
        for (int l = 0; l < d.L; ++l) {
            d.moe[size_t(l)] = arch.layers[size_t(l)].moe.experts > 0;
            if (d.moe[size_t(l)] && d.first_moe < 0) d.first_moe = l;
            d.moe_layers += d.moe[size_t(l)];
        }
        if (cfg.moe_aux_loss) d.aux_coef = float(cfg.router_aux_loss_coef);
        if (cfg.quantization.four_bit && cfg.quantization.prequantized)
            throw_unsupported(cfg.architecture + ": pre-quantized (bnb-4bit) mixture-of-experts checkpoints are not "
                              "supported; use the 16-bit checkpoint with quantization nf4 (Tandem quantizes the "
                              "experts itself at load)");
        if (cfg.quantization.four_bit && (cfg.experts_mxfp4 || first_moe->moe.transposed))
            throw_unsupported(cfg.architecture + ": quantization nf4 is not offered for this model's experts (gpt-oss: "
                              "its released experts are MXFP4, 4-bit already); use quantization none");
        if (d.sandwich) throw_unsupported(cfg.architecture + ": sandwich norms with experts are not supported");
    }
    for (const std::vector<ProjectionSpec>* list : {&d.projections, &d.moe_projections}) {
        if (list->empty()) continue;
        int fed[kNumModules] = {};
        for (const ProjectionSpec& p : *list)
            for (int slot : p.feeds) {
                fed[slot]++;
                d.bias[slot] = p.bias;
            }
        for (int m = 0; m < kNumModules; ++m)
            if (fed[m] != 1)
                throw_unsupported(cfg.architecture + ": the block's " + kModuleNames[m] + " is fed by " +
                                  std::to_string(fed[m]) + " projections (the dense block needs exactly one)");
    }
    for (size_t l = 1; l < arch.layers.size(); ++l) {
        const LayerSpec& x = arch.layers[l];
        if (x.projections != d.projections_of(int(l)) || x.ln2 != d.ln2_name ||
            x.attn_out_norm != d.attn_out_norm_name || (x.moe.experts > 0 && x.moe != d.moe_spec))
            throw_unsupported(cfg.architecture + ": layer " + std::to_string(l) +
                              " has other projections than layer 0 (not a dense model)");
    }
    const WeightQuantization& wq = cfg.quantization;
    if (wq.fp8) {
        if (d.E > 0)
            throw_unsupported(cfg.architecture + ": precision fp8 covers dense models; the experts of a mixture-of-"
                                                 "experts model are not FP8 yet: use precision bf16");
        for (const ProjectionSpec& pr : d.projections) {
            int64_t row = 0;
            for (int slot : pr.feeds) {
                if (row % kFp8Block != 0)
                    throw_unsupported(cfg.architecture + ": precision fp8: the fused projection " + pr.path +
                                      " feeds " + kModuleNames[slot] + " from row " + std::to_string(row) +
                                      ", not a multiple of 128 (FP8 scales cover 128x128 blocks): use precision bf16");
                row += d.out_of(slot);
            }
        }
        d.fp8 = true;
    }
    if (wq.four_bit) {
        d.quant_blocksize = wq.blocksize;
        d.quant_nested = wq.double_quant;
        d.quant4.assign(size_t(d.L) * d.quant4_stride(), 0);
        for (int l = 0; l < d.L; ++l) {
            const std::vector<ProjectionSpec>& projs = d.projections_of(l);
            for (size_t pi = 0; pi < projs.size(); ++pi) {
                // An expert parameter by its PEFT path ("model.layers.3.mlp.experts.gate_up_proj").
                const std::string path = projs[pi].experts > 0 ? projs[pi].path + projs[pi].target.substr(
                                                                                     projs[pi].target.rfind('.'))
                                                               : projs[pi].path;
                d.quant4[size_t(l) * d.quant4_stride() + pi] =
                    wq.quantizes("model.layers." + std::to_string(l) + "." + path) ? 1 : 0;
            }
        }
    }
    return d;
}

namespace {
std::atomic<int> g_mlp_chunk_rows{kMlpChunkRows};
}  // namespace

int mlp_chunk_rows() { return g_mlp_chunk_rows.load(); }
void set_mlp_chunk_rows(int rows) { g_mlp_chunk_rows.store(rows < 0 ? 0 : rows); }

const std::array<BufferDecl, kBufCount>& buffer_decls() {
    static const std::array<BufferDecl, kBufCount> decls = {{
        {Buf::X, "x", Cost::None, false},
        {Buf::Ln1, "ln1", Cost::Cheap, false},
        {Buf::Ln1Rstd, "ln1 rstd", Cost::Cheap, false},
        {Buf::Q, "q", Cost::Gemm, false},
        {Buf::K, "k", Cost::Gemm, false},
        {Buf::QRstd, "q rstd", Cost::Gemm, false},  // produced with the q/k chain (a norm of a GEMM output)
        {Buf::KRstd, "k rstd", Cost::Gemm, false},
        {Buf::Qr, "q rope", Cost::Gemm, false},
        {Buf::Kr, "k rope", Cost::Gemm, false},
        {Buf::V, "v", Cost::Gemm, false},
        {Buf::Att, "attention out", Cost::Attention, false},
        {Buf::Stats, "attention stats", Cost::Attention, false},
        {Buf::Mid, "mid", Cost::Gemm, false},  // x + o_proj(att)
        {Buf::Ln2, "ln2", Cost::Cheap, false},
        {Buf::Ln2Rstd, "ln2 rstd", Cost::Cheap, false},
        {Buf::Gate, "gate", Cost::Gemm, true},
        {Buf::Up, "up", Cost::Gemm, true},
        {Buf::TmpAttn, "lora tmp (attention)", Cost::Gemm, false},
        {Buf::TmpMlp, "lora tmp (mlp)", Cost::Gemm, true},
        {Buf::AttnOut, "attention output (sandwich)", Cost::Gemm, false},
        {Buf::AttnOutRstd, "attention output rstd", Cost::Gemm, false},  // produced with it
        {Buf::MlpOut, "mlp output (sandwich)", Cost::Gemm, true},
        {Buf::MlpOutRstd, "mlp output rstd", Cost::Gemm, true},
        {Buf::Route, "routing", Cost::Gemm, true},  // the router GEMM, softmax / top-k, sort and count
        {Buf::Xs, "expert input", Cost::Cheap, true},
        {Buf::Ys, "expert outputs", Cost::Gemm, true},
    }};
    return decls;
}

const BufferDecl& buffer_decl(Buf b) { return buffer_decls().at(size_t(b)); }

Residency checkpoint_residency(CheckpointPolicy p, Buf b) {
    const BufferDecl& decl = buffer_decl(b);
    switch (p) {
    case CheckpointPolicy::Off: return Residency::Kept;
    case CheckpointPolicy::Recompute: return b == Buf::X ? Residency::Kept : Residency::Dropped;
    case CheckpointPolicy::Smart:
    case CheckpointPolicy::SmartSingle: return b == Buf::X ? Residency::Offloaded : Residency::Dropped;
    case CheckpointPolicy::Selective:
        if (b == Buf::X) return Residency::Kept;
        return decl.mlp || decl.cost == Cost::Cheap ? Residency::Dropped : Residency::Kept;
    case CheckpointPolicy::Auto: break;
    }
    throw_internal("checkpoint_residency: policy 'auto' must be resolved first");
}

int offload_buffers(CheckpointPolicy p) {
    return p == CheckpointPolicy::Smart ? 2 : p == CheckpointPolicy::SmartSingle ? 1 : 0;
}

int offloaded_layers(CheckpointPolicy p, int L) {
    const int nb = offload_buffers(p);
    return nb == 0 ? 0 : std::max(L - nb, 0);
}

bool mlp_buffers_dropped(CheckpointPolicy policy) {
    for (const BufferDecl& decl : buffer_decls())
        if (decl.mlp && checkpoint_residency(policy, decl.id) == Residency::Dropped) return true;
    return false;
}

int mlp_kept_layers_that_fit(const Dims& d, CheckpointPolicy policy, uint64_t budget,
                             const std::function<uint64_t(int)>& plan_total) {
    if (policy == CheckpointPolicy::Off || d.E > 0 || !mlp_buffers_dropped(policy)) return 0;
    const int chunk = mlp_chunk_rows();
    if (chunk > 0 && d.T > chunk) return 0;  // long sequences: the MLP runs in chunks instead
    if (plan_total(0) > budget) return 0;
    int lo = 0, hi = d.L;  // plan_total(lo) fits; the total grows with k
    while (lo < hi) {
        const int mid = (lo + hi + 1) / 2;
        if (plan_total(mid) <= budget)
            lo = mid;
        else
            hi = mid - 1;
    }
    return lo;
}

std::vector<int> mlp_offload_layers(int L, int K, int M) {
    const int n = L - 1 - K;  // the candidates K..L-2
    if (M < 0 || K < 0 || (M > 0 && M > n))
        throw_internal("make_plan: " + std::to_string(M) + " layers offloading their MLP buffers, but only " +
                       std::to_string(std::max(n, 0)) + " of " + std::to_string(L) + " layers after the " +
                       std::to_string(K) + " that keep them (and before the last) can");
    std::vector<int> layers(static_cast<size_t>(M));
    for (int i = 0; i < M; ++i) layers[size_t(i)] = K + int((int64_t(i) * n) / M);
    return layers;
}

ModelPlan make_plan(const Dims& d, const std::vector<LoraTensorSpec>& specs, const LoraIndex& lora_index,
                    CheckpointPolicy policy, const PlanTraits& tr, const PlanOptions& options) {
    const int mlp_kept_layers = options.mlp_kept_layers;
    if (policy == CheckpointPolicy::Auto) throw_internal("make_plan: checkpointing 'auto' must be resolved first");
    ModelPlan y;
    y.checkpointing = policy;
    if (mlp_kept_layers < 0 || mlp_kept_layers > d.L)
        throw_internal("make_plan: " + std::to_string(mlp_kept_layers) + " layers keeping their MLP buffers of " +
                       std::to_string(d.L));
    y.mlp_kept_layers = mlp_buffers_dropped(policy) ? mlp_kept_layers : 0;
    if (mlp_buffers_dropped(policy) && options.mlp_offloaded_layers > 0)
        y.mlp_offloaded = mlp_offload_layers(d.L, y.mlp_kept_layers, options.mlp_offloaded_layers);
    const int M = int(y.mlp_offloaded.size());
    y.mlp_host_slots = std::max(M - 2, 0);
    if (M > 0) {
        y.mlp_offload_index.assign(size_t(d.L), -1);
        for (int j = 0; j < M; ++j) y.mlp_offload_index[size_t(y.mlp_offloaded[size_t(j)])] = j;
    }
    auto offload_j = [&](size_t l) { return M > 0 ? y.mlp_offload_index[l] : -1; };
    y.fp8_transposed = d.fp8 && options.fp8_transposed && d.quant4.empty();  // 4-bit weights: transposed per GEMM
    const size_t T = size_t(d.T);
    auto act = [&](size_t n) { return n * tr.act_bytes; };
    auto f32 = [](size_t n) { return n * sizeof(float); };

    // Weights, in file order (act_bytes per element; the RoPE table where the backend keeps it here).
    y.embed = y.weights.reserve(act(size_t(d.V) * d.C), "embed_tokens");
    if (!d.tied) y.lm_head = y.weights.reserve(act(size_t(d.V) * d.C), "lm_head");
    y.norm_f = y.weights.reserve(act(d.C), "norm");
    if (tr.rope_table_bytes > 0) y.rope = y.weights.reserve(tr.rope_table_bytes, "rope table");
    if (tr.rope_local_table_bytes > 0)
        y.rope_local = y.weights.reserve(tr.rope_local_table_bytes, "rope table (sliding layers)");
    y.lw.resize(size_t(d.L));
    for (int l = 0; l < d.L; ++l) {
        const std::string p = "layer " + std::to_string(l) + " ";
        LayerWeightHandles& h = y.lw[size_t(l)];
        h.ln1 = y.weights.reserve(act(d.C), p + d.ln1_name);
        h.ln2 = y.weights.reserve(act(d.C), p + d.ln2_name);
        if (d.sandwich) {
            h.attn_out_norm = y.weights.reserve(act(d.C), p + d.attn_out_norm_name);
            h.mlp_out_norm = y.weights.reserve(act(d.C), p + d.mlp_out_norm_name);
        }
        if (d.is_moe(l)) h.router = y.weights.reserve(act(size_t(d.E) * d.C), p + "router");
        if (d.is_moe(l) && d.router_bias) h.router_bias = y.weights.reserve(act(size_t(d.E)), p + "router bias");
        if (d.sinks) h.sinks = y.weights.reserve(act(size_t(d.Hq)), p + "attention sinks");
        const std::vector<ProjectionSpec>& projs = d.projections_of(l);
        for (size_t pi = 0; pi < projs.size(); ++pi) {
            const ProjectionSpec& pr = projs[pi];
            const int64_t n = std::max<int64_t>(pr.experts, 1) * pr.out * pr.in;  // experts: [E, out, in]
            Quant4Pieces q;
            Fp8Pieces f8;
            int w = -1;
            if (d.mxfp4 && pr.experts > 0) {  // the checkpoint's blocks and scales as they are
                const int pi4 = pr.feeds.at(0) == kDown ? 1 : 0;
                h.mx_codes[pi4] = y.weights.reserve(size_t(n / 2), p + pr.target + " (MXFP4 codes)");
                h.mx_scales[pi4] = y.weights.reserve(size_t(n / kMxfp4Block), p + pr.target + " (MXFP4 scales)");
            } else if (d.quantized(l, pi)) {  // 4-bit (with precision fp8 too: dequantized to FP8 per GEMM)
                const int64_t blocks = quant4_blocks(n, d.quant_blocksize);
                q.n = n;
                q.out = pr.out;
                q.in = pr.in;
                q.codes = y.weights.reserve(size_t(quant4_code_bytes(n)), p + pr.target + " (4-bit codes)");
                q.absmax = y.weights.reserve(size_t(blocks) * (d.quant_nested ? 1 : 4), p + pr.target + " absmax");
                if (d.quant_nested)
                    q.nested_absmax = y.weights.reserve(f32(size_t(quant4_blocks(blocks, 256))),
                                                        p + pr.target + " nested absmax");
                q.consts = y.weights.reserve(f32(kQuant4Consts), p + pr.target + " code tables");
                y.quant_max_blocks = std::max(y.quant_max_blocks, blocks);
            } else if (d.fp8 && pr.experts == 0) {
                const int64_t inp = fp8_padded(pr.in);
                f8.out = pr.out;
                f8.in = pr.in;
                f8.codes = y.weights.reserve(size_t(pr.out * inp), p + pr.target + " (FP8 codes)");
                f8.scales = y.weights.reserve(f32(size_t(fp8_blocks(pr.out) * fp8_scale_ld(pr.in))),
                                              p + pr.target + " (FP8 block scales)");
            } else {
                w = y.weights.reserve(act(size_t(n)), p + pr.target);
            }
            const size_t bias_n = size_t(pr.out) * size_t(std::max<int64_t>(pr.experts, 1));  // experts: [E, out]
            const int b = pr.bias ? y.weights.reserve(act(bias_n), p + pr.target + " bias") : -1;
            int64_t row = 0;  // the slots' rows follow each other in the fused weight (in each expert's)
            for (int slot : pr.feeds) {
                h.w[slot] = w;
                h.q[slot] = q;
                h.f8[slot] = f8;
                h.f8[slot].row0 = row;
                h.w_off[slot] = row * pr.in;
                h.b[slot] = b;
                h.b_off[slot] = row;
                row += pr.experts > 0 ? d.Fe : d.out_of(slot);
                if (y.fp8_transposed && pr.experts == 0) {
                    const int64_t in = d.in_of(slot), out = d.out_of(slot);
                    h.f8t[slot].codes = y.weights.reserve(size_t(in * fp8_padded(out)),
                                                          p + kModuleNames[slot] + " transposed (FP8 codes)");
                    h.f8t[slot].scales = y.weights.reserve(f32(size_t(fp8_blocks(in) * fp8_scale_ld(out))),
                                                           p + kModuleNames[slot] + " transposed (FP8 scales)");
                }
            }
        }
        if (d.qk_norm) {
            h.q_norm = y.weights.reserve(act(d.D), p + "q_norm");
            h.k_norm = y.weights.reserve(act(d.D), p + "k_norm");
        }
    }

    // LoRA + AdamW. With lora_regions (CUDA) one arena of five padded regions and the descriptors; else the
    // backend holds each tensor's value, grad and two moments itself (fp32, unpadded) and only the bytes count.
    for (const auto& s : specs) {
        const int64_t n = s.shape.at(0) * s.shape.at(1);
        y.lora_offset.push_back(tr.lora_regions ? y.lora_padded : y.lora_total);
        y.lora_numel.push_back(n);
        y.lora_padded += tr.lora_regions ? round_up(n, kLoraAlign) : n;
        y.lora_total += n;
    }
    if (tr.lora_regions) {
        const size_t P = size_t(y.lora_padded);
        y.lora_value = y.lora.reserve(f32(P), "lora values");
        y.lora_grad = y.lora.reserve(f32(P), "lora grads");
        y.lora_m = y.lora.reserve(f32(P), "lora exp_avg");
        y.lora_v = y.lora.reserve(f32(P), "lora exp_avg_sq");
        y.lora_bf16 = y.lora.reserve(P * 2, "lora bf16 copies");
        y.lora_desc = y.lora.reserve(specs.size() * tr.adamw_descriptor_bytes, "adamw descriptors");
    }

    // Activations. The policy's residency of each buffer (validated), then the pieces: block inputs, each
    // layer's kept buffers, the shared set of the dropped ones. Off keeps a whole set per layer (x first).
    y.stats_bytes = tr.attention_stats_bytes;
    for (const BufferDecl& decl : buffer_decls()) {
        const Residency r = checkpoint_residency(policy, decl.id);
        y.residency[size_t(decl.id)] = r;
        const std::string what = "checkpointing '" + std::string(checkpoint_policy_name(policy)) + "': buffer " +
                                 decl.name;
        if (decl.id == Buf::X && r == Residency::Dropped) throw_internal(what + " dropped, and nothing recomputes it");
        if (decl.id != Buf::X && r == Residency::Offloaded) throw_internal(what + " offloaded (only block inputs are)");
        if (r == Residency::Offloaded && offload_buffers(policy) == 0)
            throw_internal(what + " offloaded by a policy without offload buffers");
        y.recomputes |= r == Residency::Dropped;
    }
    auto res = [&](Buf b) { return y.residency[size_t(b)]; };
    // The MLP in chunks of rows (see kMlpChunkRows) when its buffers are dropped and a batch can be longer.
    const int chunk = mlp_chunk_rows();
    const bool chunked = chunk > 0 && d.T > chunk && res(Buf::Gate) == Residency::Dropped &&
                         res(Buf::Up) == Residency::Dropped && res(Buf::TmpMlp) == Residency::Dropped &&
                         !d.dropout && !d.sandwich && d.E == 0;
    y.mlp_rows = chunked ? chunk : d.T;
    // The whole block but attention too (plan.h kBlockChunkMinChunks) when the policy drops the norms and mid.
    y.block_chunked = chunked && int64_t(d.T) > int64_t(kBlockChunkMinChunks) * chunk &&
                      res(Buf::Ln1) == Residency::Dropped && res(Buf::Ln1Rstd) == Residency::Dropped &&
                      res(Buf::Mid) == Residency::Dropped && res(Buf::Ln2) == Residency::Dropped &&
                      res(Buf::Ln2Rstd) == Residency::Dropped;
    // Rows of the pieces a chunked block holds one chunk of (ln1, mid, ln2 and their rstds).
    const size_t rows_of_block = y.block_chunked ? size_t(chunk) : T;
    if ((y.mlp_kept_layers > 0 || M > 0) && (chunked || d.E > 0))
        throw_internal("make_plan: layers that keep or offload their MLP buffers need a dense model whose MLP is not "
                       "chunked");
    // An MoE layer's gate / up hold [N, Fe] (the experts' rows), a dense layer's [rows, F].
    const size_t moeF = size_t(d.N()) * size_t(d.Fe);
    const size_t rowsF = std::max(size_t(y.mlp_rows) * size_t(d.F), moeF);
    const size_t allF = std::max(T * size_t(d.F), moeF);
    const MoeRouteParts route = moe_route_parts(d, tr.act_bytes);
    // Reserves the buffers of one set whose residency is `which` (the block input only if with_x).
    // keep_mlp: a layer's own set that also keeps the MLP buffers the policy drops (mlp_kept_layers); without
    // gate_up (an offloaded layer's: its gate / up are a slot) all of them but gate and up.
    auto make_set = [&](const std::string& p, bool with_x, Residency which,
                        const std::array<bool, kNumModules>& adapted, bool moe, bool keep_mlp = false,
                        bool gate_up = true) {
        ArenaLayout& a = y.acts;
        ActHandles s;
        auto want = [&](Buf b) {
            if (which == Residency::Dropped && buffer_decl(b).mlp && y.mlp_kept_layers == d.L) return false;
            if (!gate_up && (b == Buf::Gate || b == Buf::Up)) return false;
            return res(b) == which || (keep_mlp && buffer_decl(b).mlp && res(b) == Residency::Dropped);
        };
        if (with_x) s.x = a.reserve(act(T * d.C), p + "x");
        const size_t bt = which == Residency::Dropped ? rows_of_block : T;  // one chunk when the block is chunked
        if (want(Buf::Ln1)) s.ln1 = a.reserve(act(bt * d.C), p + "ln1");
        if (want(Buf::Ln1Rstd)) s.ln1_rstd = a.reserve(f32(bt), p + "ln1 rstd");
        if (d.qk_norm) {
            if (want(Buf::Q)) s.q = a.reserve(act(T * d.Q), p + "q");
            if (want(Buf::K)) s.k = a.reserve(act(T * d.KV), p + "k");
            if (want(Buf::QRstd)) s.q_rstd = a.reserve(f32(T * d.Hq), p + "q rstd");
            if (want(Buf::KRstd)) s.k_rstd = a.reserve(f32(T * d.Hkv), p + "k rstd");
        }
        if (want(Buf::Qr)) s.qr = a.reserve(act(T * d.Q), p + "q rope");
        if (want(Buf::Kr)) s.kr = a.reserve(act(T * d.KV), p + "k rope");
        if (want(Buf::V)) s.v = a.reserve(act(T * d.KV), p + "v");
        if (want(Buf::Att)) s.att = a.reserve(act(T * d.Q), p + "attention out");
        if (want(Buf::Stats)) s.stats = a.reserve(y.stats_bytes, p + "attention stats");
        if (want(Buf::Mid)) s.mid = a.reserve(act(bt * d.C), p + "mid");
        if (want(Buf::Ln2)) s.ln2 = a.reserve(act(bt * d.C), p + "ln2");
        if (want(Buf::Ln2Rstd)) s.ln2_rstd = a.reserve(f32(bt), p + "ln2 rstd");
        // Dropped gate / up hold one MLP chunk (all T rows when the MLP is not chunked).
        const size_t gate_rows = which == Residency::Dropped ? rowsF : allF;
        if (want(Buf::Gate)) s.gate = a.reserve(act(gate_rows), p + "gate");
        if (want(Buf::Up)) s.up = a.reserve(act(gate_rows), p + "up");
        for (int m = 0; m < kNumModules; ++m)
            if (adapted[size_t(m)] && want(m <= kO ? Buf::TmpAttn : Buf::TmpMlp))
                s.tmp[m] = a.reserve(act((m <= kO ? T : size_t(d.mlp_tmp_rows())) * d.R), p + "lora " + kModuleNames[m]);
        if (moe) {
            if (want(Buf::Route)) s.route = a.reserve(route.bytes, p + "routing");
            if (want(Buf::Xs)) s.xs = a.reserve(act(size_t(d.N()) * d.C), p + "expert input");
            if (want(Buf::Ys)) s.ys = a.reserve(act(size_t(d.N()) * d.C), p + "expert outputs");
        }
        if (d.sandwich) {
            if (want(Buf::AttnOut)) s.attn_out = a.reserve(act(T * d.C), p + "attention output");
            if (want(Buf::AttnOutRstd)) s.attn_out_rstd = a.reserve(f32(T), p + "attention output rstd");
            if (want(Buf::MlpOut)) s.mlp_out = a.reserve(act(T * d.C), p + "mlp output");
            if (want(Buf::MlpOutRstd)) s.mlp_out_rstd = a.reserve(f32(T), p + "mlp output rstd");
        }
        return s;
    };
    // Takes over the pieces src has (a layer's view = its kept pieces + the shared dropped ones).
    auto merge = [](ActHandles& dst, const ActHandles& src) {
        auto take = [](int& a, int b) { if (b >= 0) a = b; };
        take(dst.x, src.x), take(dst.ln1, src.ln1), take(dst.ln1_rstd, src.ln1_rstd), take(dst.q, src.q);
        take(dst.k, src.k), take(dst.q_rstd, src.q_rstd), take(dst.k_rstd, src.k_rstd), take(dst.qr, src.qr);
        take(dst.kr, src.kr), take(dst.v, src.v), take(dst.att, src.att), take(dst.stats, src.stats);
        take(dst.mid, src.mid), take(dst.ln2, src.ln2), take(dst.ln2_rstd, src.ln2_rstd), take(dst.gate, src.gate);
        take(dst.up, src.up);
        for (int m = 0; m < kNumModules; ++m) take(dst.tmp[m], src.tmp[m]);
        take(dst.attn_out, src.attn_out), take(dst.attn_out_rstd, src.attn_out_rstd);
        take(dst.mlp_out, src.mlp_out), take(dst.mlp_out_rstd, src.mlp_out_rstd);
        take(dst.route, src.route), take(dst.xs, src.xs), take(dst.ys, src.ys);
    };
    std::vector<std::array<bool, kNumModules>> adapted(size_t(d.L));
    std::array<bool, kNumModules> any_adapted{};
    for (int l = 0; l < d.L; ++l)
        for (int m = 0; m < kNumModules; ++m) {
            adapted[size_t(l)][size_t(m)] = lora_index[size_t(l)][size_t(m)].a >= 0;
            any_adapted[size_t(m)] |= adapted[size_t(l)][size_t(m)];
        }
    const bool any_lora = !specs.empty();
    if (!y.recomputes && res(Buf::X) == Residency::Kept) {
        for (int l = 0; l < d.L; ++l)
            y.sets.push_back(
                make_set("layer " + std::to_string(l) + " ", true, Residency::Kept, adapted[size_t(l)], d.is_moe(l)));
    } else {
        if (res(Buf::X) == Residency::Kept) {
            for (int l = 0; l < d.L; ++l)
                y.x_store.push_back(y.acts.reserve(act(T * d.C), "layer " + std::to_string(l) + " x"));
        } else {
            const int nbuf = std::min(offload_buffers(policy), d.L);
            for (int b = 0; b < nbuf; ++b)
                y.x_store.push_back(y.acts.reserve(act(T * d.C), std::string("block input ") + char('A' + b)));
        }
        const int nb = offload_buffers(policy);
        // The offloaded MLP layers' gate / up: two slots, the j-th such layer's in slot j % 2.
        int slot_gate[2] = {-1, -1}, slot_up[2] = {-1, -1};
        for (int s = 0; s < std::min(M, 2); ++s) {
            const std::string p = std::string("offloaded MLP slot ") + char('A' + s) + " ";
            slot_gate[s] = y.acts.reserve(act(allF), p + "gate");
            slot_up[s] = y.acts.reserve(act(allF), p + "up");
        }
        auto own_mlp = [&](size_t l) { return int(l) < y.mlp_kept_layers || offload_j(l) >= 0; };
        y.sets.resize(size_t(d.L));
        for (int l = 0; l < d.L; ++l) {
            const int j = offload_j(size_t(l));
            y.sets[size_t(l)].x = y.x_store.at(nb > 0 ? size_t(l % nb) : size_t(l));
            merge(y.sets[size_t(l)], make_set("layer " + std::to_string(l) + " ", false, Residency::Kept,
                                              adapted[size_t(l)], d.is_moe(l), own_mlp(size_t(l)), j < 0));
            if (j >= 0) y.sets[size_t(l)].gate = slot_gate[j % 2], y.sets[size_t(l)].up = slot_up[j % 2];
        }
        const ActHandles shared = make_set("recompute ", false, Residency::Dropped, any_adapted, d.E > 0);
        for (size_t l = 0; l < y.sets.size(); ++l) {
            ActHandles own = y.sets[l];
            merge(y.sets[l], shared);
            if (own_mlp(l)) merge(y.sets[l], own);  // its own MLP pieces over the shared ones
        }
    }
    y.x_final = y.acts.reserve(act(T * d.C), "x final");
    // A chunked block's d_att and d_big2 ([T,Q] at least) are free from the end of the last layer's forward to the
    // start of its backward, where the final norm's output and its gradient live (the loss reads one, writes the
    // other; backward's first step reads the gradient): they hold those when Q >= C.
    const bool final_in_scratch = y.block_chunked && d.Q >= d.C;
    if (!final_in_scratch) y.lnf = y.acts.reserve(act(T * d.C), "final norm");
    y.lnf_rstd = y.acts.reserve(f32(T), "final norm rstd");
    y.d_res = y.acts.reserve(act(T * d.C), "d residual");
    y.d_ln = y.acts.reserve(act(rows_of_block * d.C), "d ln");
    if (!final_in_scratch) y.d_lnf = y.acts.reserve(act(T * d.C), "d final norm");
    // Backward scratch: attention's [T,Q] gradients, and the MLP's [rows,F] ones of one chunk. A chunked block
    // fills the attention output's gradient chunk by chunk while the MLP's scratch is in use: its own d_att;
    // then d_big is the MLP's only, and d_big3 too unless it holds dq after the q norm.
    const size_t big = std::max(T * size_t(d.Q), rowsF);
    if (y.block_chunked) y.d_att = y.acts.reserve(act(T * size_t(d.Q)), "d attention out");
    y.d_big = y.acts.reserve(act(y.block_chunked ? rowsF : big), "d big");
    y.d_big2 = y.acts.reserve(act(big), "d big2");
    y.d_big3 = y.acts.reserve(act(y.block_chunked && !d.qk_norm ? rowsF : big), "d big3");
    if (final_in_scratch) {
        y.lnf = y.d_att;
        y.d_lnf = y.d_big2;
    }
    y.d_k = y.acts.reserve(act(T * d.KV), "d k");
    if (d.qk_norm) y.d_k2 = y.acts.reserve(act(T * d.KV), "d k2");
    y.d_v = y.acts.reserve(act(T * d.KV), "d v");
    if (any_lora) y.d_tmp = y.acts.reserve(act(size_t(d.mlp_tmp_rows()) * d.R), "d lora tmp");
    if (d.E > 0) {
        y.d_xs = y.acts.reserve(act(size_t(d.N()) * d.C), "d expert input");
        y.d_ys = y.acts.reserve(act(size_t(d.N()) * d.C), "d expert outputs");
        y.d_route_w = y.acts.reserve(f32(T * size_t(d.topk)), "d routing weights");
    }
    if (any_lora && d.dropout) {
        y.xd = y.acts.reserve(act(T * size_t(d.in_max())), "lora dropped input");
        y.d_drop = y.acts.reserve(act(T * size_t(d.in_max())), "d lora dropped input");
    }
    y.losses = y.acts.reserve(f32(T), "row losses");
    // Header (seed, grad_scale), tokens, targets, positions (each padded to kMetaAlign rows), cu_seqlens (at
    // most T+1); a slot is a multiple of kMetaAlign ints, so every slot's header is 256-byte aligned.
    y.meta_ints = round_up(kMetaHeader + 3 * round_up(d.T, kMetaAlign) + d.T + 1, kMetaAlign);
    y.meta = y.acts.reserve(size_t(tr.metadata_slots) * size_t(y.meta_ints) * sizeof(int32_t),
                            tr.metadata_slots == 2 ? "batch metadata (two slots)" : "batch metadata");

    // Workspace. Piece 0 starts the arena, so the whole arena is one scratch span (load staging, logits).
    y.ce = y.work.reserve(tr.ce_workspace, "lm_head chunk");
    y.att_ws_bytes = tr.attention_workspace;
    y.att_ws = y.work.reserve(y.att_ws_bytes, "attention workspace");
    if (any_lora && tr.grad_norm_workspace > 0) y.gn_ws = y.work.reserve(tr.grad_norm_workspace, "grad norm scratch");
    y.loss_sum = y.work.reserve(3 * sizeof(double), "loss sum (batch, step) and the step's data-parallel vote");
    // The largest slot of a dense 4-bit projection (4-bit experts: Decoder::wx, below), dequantized to bf16, or with
    // FP8 GEMMs to FP8 codes and block scales (reserved with the FP8 pieces).
    int64_t q8_codes = 0, q8_scales = 0;
    if (!d.quant4.empty()) {
        size_t most = 0;
        for (int l = 0; l < d.L; ++l) {
            const std::vector<ProjectionSpec>& projs = d.projections_of(l);
            for (size_t pi = 0; pi < projs.size(); ++pi)
                if (d.quantized(l, pi) && projs[pi].experts == 0)
                    for (int slot : projs[pi].feeds) {
                        most = std::max(most, size_t(d.out_of(slot)) * size_t(d.in_of(slot)));
                        q8_codes = std::max(q8_codes, int64_t(d.out_of(slot)) * fp8_padded(d.in_of(slot)));
                        q8_scales = std::max(q8_scales, fp8_blocks(d.out_of(slot)) * fp8_scale_ld(d.in_of(slot)));
                    }
        }
        if (most > 0 && !d.fp8) y.dequant = y.work.reserve(act(most), "4-bit weight, dequantized");
        // The CUDA load quantizes through this arena: the fp32 absmax of one tensor plus chunks of it.
        const size_t stage = round_up(int64_t(y.quant_max_blocks) * 4, 256) + kQuant4StageBytes;
        if (y.work.size() < stage) y.work.reserve(stage - y.work.size(), "4-bit load staging");
    }
    if (d.fp8) {
        // The widest GEMM input or output gradient and the largest slot transposed. The attention's projections
        // run over T rows (a chunk's with the whole block chunked), the MLP's over one MLP chunk's.
        int64_t attn_k = 0, mlp_k = 0, wt_bytes = 0, wt_scales = 0, n_most = 0;
        for (int m = 0; m < kNumModules; ++m) {
            n_most = std::max<int64_t>({n_most, d.in_of(m), d.out_of(m)});
            int64_t& k = m <= kO ? attn_k : mlp_k;
            k = std::max({k, fp8_padded(d.in_of(m)), fp8_padded(d.out_of(m))});
            wt_bytes = std::max(wt_bytes, int64_t(d.in_of(m)) * fp8_padded(d.out_of(m)));
            wt_scales = std::max(wt_scales, fp8_blocks(d.in_of(m)) * fp8_scale_ld(d.out_of(m)));
        }
        const int64_t attn_rows = fp8_code_rows(y.block_chunked ? y.mlp_rows : d.T);
        const int64_t mlp_rows = fp8_code_rows(std::min(d.T, y.mlp_rows));
        const int64_t act_codes = std::max(attn_rows * attn_k, mlp_rows * mlp_k);
        y.fp8_act = y.work.reserve(size_t(act_codes), "FP8 GEMM input (codes)");
        y.fp8_act_scales = y.work.reserve(f32(size_t(act_codes / kFp8Block)), "FP8 GEMM input (scales)");
        y.fp8_tail = y.work.reserve(act(size_t(kFp8RowAlign * n_most)), "FP8 GEMM tail rows (output)");
        // up_proj's output gradient, quantized by the activation's backward beside gate's (Decoder::f8_ready).
        const int64_t fp = fp8_padded(d.F);
        y.fp8_act2 = y.work.reserve(size_t(mlp_rows * fp), "FP8 up_proj output gradient (codes)");
        y.fp8_act2_scales =
            y.work.reserve(f32(size_t(mlp_rows * (fp / kFp8Block))), "FP8 up_proj output gradient (scales)");
        // A 4-bit slot dequantized straight to FP8 for its forward GEMM (its transpose for the input gradient goes
        // into the transposed weight's piece).
        if (q8_codes > 0) {
            y.fp8_w = y.work.reserve(size_t(q8_codes), "4-bit weight as FP8 (codes)");
            y.fp8_w_scales = y.work.reserve(f32(size_t(q8_scales)), "4-bit weight as FP8 (scales)");
        }
        if (!y.fp8_transposed) {  // else every slot's W^T is in the weights arena
            y.fp8_wt = y.work.reserve(size_t(wt_bytes), "FP8 weight, transposed (codes)");
            y.fp8_wt_scales = y.work.reserve(f32(size_t(wt_scales)), "FP8 weight, transposed (scales)");
        }
        // The CUDA load quantizes a band of 128 rows at a time through this arena (fp32 and bf16 of the band).
        int64_t in_most = 0;
        for (const ProjectionSpec& pr : d.projections) in_most = std::max(in_most, pr.in);
        const size_t stage = size_t(round_up(kFp8Block * in_most * 6, 256)) + (size_t(4) << 20);
        if (y.work.size() < stage) y.work.reserve(stage - y.work.size(), "FP8 load staging");
    }
    if (d.E > 0 && d.aux_coef > 0) y.moe_aux = y.work.reserve(f32(3 * size_t(d.E)), "load-balancing loss");
    if (d.mxfp4 || (d.E > 0 && !d.quant4.empty())) {  // MXFP4 or NF4 experts: one parameter at a time in bf16
        size_t most = 0;
        for (const ProjectionSpec& pr : d.moe_projections)
            if (pr.experts > 0) most = std::max(most, size_t(pr.experts * pr.out * pr.in));
        y.mx_dequant = y.work.reserve(act(most), "4-bit expert parameter, dequantized");
    }
    y.norm = y.work.reserve(sizeof(float), "grad norm");

    PlanBytes& b = y.bytes;
    b.weights = y.weights.size();
    b.lora_optimizer = tr.lora_regions ? y.lora.size() : uint64_t(y.lora_total) * 4 * sizeof(float);
    b.activations = y.acts.size();
    b.workspace = y.work.size() + tr.library_workspace;
    b.context = tr.context;
    b.total = b.weights + b.lora_optimizer + b.activations + b.workspace + b.context;
    b.pinned_host = uint64_t(offloaded_layers(policy, d.L)) * act(T * d.C) +  // one slot per offloaded layer
                    uint64_t(y.mlp_host_slots) * act(2 * allF);                // and per copied MLP layer
    return y;
}

MoeRouteParts moe_route_parts(const Dims& d, size_t act_bytes) {
    MoeRouteParts r;
    const size_t T = size_t(d.T), E = size_t(d.E), K = size_t(d.topk), N = size_t(d.N());
    size_t at = 0;
    auto part = [&](size_t bytes) {
        const size_t here = at;
        at += size_t(round_up(int64_t(bytes), 256));
        return here;
    };
    r.probs = part(T * E * 4);
    r.logits = part(T * E * act_bytes);
    r.idx = part(T * K * 4);
    r.w = part(T * K * 4);
    r.order = part(N * 4);
    r.inv = part(N * 4);
    r.offsets = part((E + 1) * 4);
    r.bytes = at;
    return r;
}

std::vector<WeightEntry> weight_entries(const ModelPlan& y, const Dims& d) {
    std::vector<WeightEntry> out;
    const int64_t VC = int64_t(d.V) * d.C;
    out.push_back({y.embed, {}, "model.embed_tokens.weight", VC, WeightKind::Matrix});
    if (!d.tied) out.push_back({y.lm_head, {}, "lm_head.weight", VC, WeightKind::Matrix});
    out.push_back({y.norm_f, {}, "model.norm.weight", d.C, WeightKind::Norm});
    for (int l = 0; l < d.L; ++l) {
        const std::string p = "model.layers." + std::to_string(l) + ".";
        const LayerWeightHandles& h = y.lw[size_t(l)];
        out.push_back({h.ln1, {}, p + d.ln1_name + ".weight", d.C, WeightKind::Norm});
        out.push_back({h.ln2, {}, p + d.ln2_name + ".weight", d.C, WeightKind::Norm});
        if (d.sandwich) {
            out.push_back({h.attn_out_norm, {}, p + d.attn_out_norm_name + ".weight", d.C, WeightKind::Norm});
            out.push_back({h.mlp_out_norm, {}, p + d.mlp_out_norm_name + ".weight", d.C, WeightKind::Norm});
        }
        if (d.is_moe(l)) out.push_back({h.router, {}, p + d.moe_spec.router, int64_t(d.E) * d.C, WeightKind::Matrix});
        if (h.router_bias >= 0) out.push_back({h.router_bias, {}, p + d.moe_spec.router_bias, d.E, WeightKind::Bias});
        for (const ProjectionSpec& pr : d.projections_of(l)) {
            const int slot = pr.feeds.at(0);
            if (pr.experts == 0) {
                Fp8Pieces f8 = h.f8[slot];
                f8.row0 = 0;
                out.push_back({h.w[slot], h.q[slot], p + pr.path + ".weight", pr.out * pr.in, WeightKind::Matrix, 0, f8});
                if (pr.bias) out.push_back({h.b[slot], {}, p + pr.path + ".bias", pr.out, WeightKind::Bias});
                continue;
            }
            // The experts: one fused [E, out, in] tensor, or each expert's projections at their rows of it.
            const MoeSpec& m = d.moe_spec;
            const bool gate_up = slot == kGate, interleaved = gate_up && m.interleaved;
            const std::string name = p + (gate_up ? m.gate_up : m.down);
            const int64_t numel = pr.experts * pr.out * pr.in;
            std::vector<std::string> per_expert;  // the Hub's tensors of this parameter, in the piece's row order
            if (!m.fused)
                for (int64_t e = 0; e < pr.experts; ++e) {
                    const std::string x = p + m.per_expert + "." + std::to_string(e) + ".";
                    if (gate_up) {
                        per_expert.push_back(x + m.gate + ".weight");
                        per_expert.push_back(x + m.up + ".weight");
                    } else {
                        per_expert.push_back(x + m.down_name + ".weight");
                    }
                }
            if (d.mxfp4 || h.q[slot].codes >= 0) {  // 4-bit: the whole parameter in one entry
                WeightEntry e;
                e.name = name;
                e.numel = numel;
                if (d.mxfp4) {  // kept MXFP4: the checkpoint's blocks and scales into their pieces
                    e.mx_codes = h.mx_codes[gate_up ? 0 : 1];
                    e.mx_scales = h.mx_scales[gate_up ? 0 : 1];
                } else {  // NF4: quantized at load as one tensor (its per-expert parts assembled first)
                    e.q = h.q[slot];
                    e.parts = per_expert;
                }
                out.push_back(e);
            } else if (m.fused) {
                out.push_back({h.w[slot], {}, name, numel, WeightKind::Matrix, 0, {},
                               {m.transposed || interleaved ? pr.experts : 0, pr.in, pr.out, m.transposed, interleaved}});
            } else {
                const int64_t part = numel / int64_t(per_expert.size());
                for (size_t k = 0; k < per_expert.size(); ++k)
                    out.push_back({h.w[slot], {}, per_expert[k], part, WeightKind::Matrix, int64_t(k) * part});
            }
            if (pr.bias)  // gpt-oss: [E, out], interleaved like the columns for gate_up
                out.push_back({h.b[slot], {}, name + "_bias", pr.experts * pr.out, WeightKind::Bias, 0, {},
                               {interleaved ? pr.experts : 0, 1, pr.out, false, interleaved}});
        }
        if (d.qk_norm) {
            out.push_back({h.q_norm, {}, p + "self_attn.q_norm.weight", d.D, WeightKind::Norm});
            out.push_back({h.k_norm, {}, p + "self_attn.k_norm.weight", d.D, WeightKind::Norm});
        }
        if (h.sinks >= 0) out.push_back({h.sinks, {}, p + "self_attn.sinks", d.Hq, WeightKind::Bias});
    }
    return out;
}

}  // namespace tandem
