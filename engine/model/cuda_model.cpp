// SPDX-FileCopyrightText: 2026 The Tandem developers
// SPDX-License-Identifier: GPL-3.0-or-later
// tandem::CudaModel (see cuda_model.h): the decoder (model/decoder.h, the blocks written once) on the CUDA
// backend: its plan with what the CUDA runtime adds, construction (allocation, weight upload, LoRA init) and
// the public API. The runtime itself (metadata upload, attention dispatch, offload copies, CUDA graphs) is
// cuda_runtime.cpp; the LoRA state on the device and data parallelism's sums, cuda_model_state.cpp; the state
// they share, model/cuda_model_impl.h. Dimension legend: model/plan.h.
// Decisions a reader must know:
//  - Memory: four arenas (weights, LoRA + AdamW, activations, workspace) laid out by make_plan, which plan()
//    and load() share, so the plan is the allocation byte for byte. Nothing is allocated after load. The
//    workspace arena doubles as the fp16/fp32 -> bf16 staging buffer at load.
//  - Host syncs (each through core/cuda/context.h's counting wrappers): the trainer's path
//    (forward_backward_async / optimizer_step_async / collect_step) has ONE per optimizer step, in
//    collect_step, which reads the previous step's {loss sum, grad norm} from pinned memory while the
//    device runs the next step. The blocking forward_backward / forward_loss / optimizer_step (selftest,
//    evaluation) have one each. The ablation rebuild_metadata_per_layer adds one per layer and direction.
#include "model/cuda_model.h"

#include "tandem/error.h"

#if TANDEM_WITH_CUDA

#include <algorithm>
#include <array>
#include <cmath>
#include <cstring>
#include <string>
#include <utility>

#include "core/mxfp4.h"
#include "core/random.h"
#include "model/cuda_model_impl.h"
#include "model/cuda_fp8_load.h"
#include "tandem/system_info.h"
#include "model/cuda_quant4_load.h"
#include "model/expert_layout.h"
#include "io/mxfp4.h"
#include "kernels/cuda/expert_gemm.h"
#include "kernels/cuda/mxfp4.h"
#include "model/quant4_load.h"
#include "tandem/model_dir.h"
#include "tandem/safetensors.h"

namespace tandem {

using namespace cuda_impl;

namespace {

// CUDA context + cuBLAS/cuDNN handles and their internal buffers: an estimate, not allocated by us.
constexpr uint64_t kContextBytes = uint64_t(600) << 20;
// lm_head chunk: K rows of fp32 logits, K*V*4 bytes at most this (K a multiple of 64, at most max_tokens).
constexpr int64_t kCeChunkBytes = int64_t(256) << 20;
// ---------------------------------------------------------------------------------------------------------
// The plan (model/plan.h) with what the CUDA runtime adds
// ---------------------------------------------------------------------------------------------------------

void validate(const ModelConfig& cfg, const LoraConfig& lora, const CudaModelOptions& o, const std::string& where) {
    validate_model(cfg, lora, where);
    if (o.max_tokens <= 0) throw_invalid(where + ": max_tokens must be positive");
    if (o.max_seqlen < 0) throw_invalid(where + ": max_seqlen must not be negative");
    if (o.checkpointing == CheckpointPolicy::Auto)
        throw_unsupported(where +
                          ": the CUDA model takes checkpointing 'off', 'recompute', 'smart' or "
                          "'smart-single' ('auto' is resolved by the trainer)");
}

// The config the model holds: the checkpoint's, with its projections 4-bit (QLoRA) or FP8 when asked.
ModelConfig held_config(const ModelConfig& cfg, const CudaModelOptions& o) {
    if (o.fp8) return with_fp8(o.quantize_4bit ? with_quantization(cfg) : cfg);
    return o.quantize_4bit ? with_quantization(cfg) : cfg;
}

Dims cuda_dims(const ModelConfig& cfg, const LoraConfig& lora, const CudaModelOptions& o) {
    const int64_t k = kCeChunkBytes / (int64_t(cfg.vocab_size) * int64_t(sizeof(float)));
    Dims d = make_dims(held_config(cfg, o), lora, o.max_tokens, o.max_seqlen, int(std::max<int64_t>(k / 64 * 64, 64)));
    // An MXFP4 checkpoint's experts stay 4-bit on the device (gpt-oss-20b's weights: ~13 GB instead of ~42).
    d.mxfp4 = cfg.experts_mxfp4 && d.E > 0;
    if (o.max_positions > d.rope_positions)
        d.rope_positions = int(std::min<int64_t>(cfg.max_position_embeddings, o.max_positions));
    if (d.mxfp4 && (d.C % kMxfp4Block != 0 || d.Fe % kMxfp4Block != 0))
        throw_invalid(cfg.architecture + ": MXFP4 experts need hidden_size and the experts' intermediate size in "
                      "multiples of 32 (found " + std::to_string(d.C) + " and " + std::to_string(d.Fe) + ")");
    return d;
}

// The table is built for the positions a micro-batch can hold (a sample never exceeds max_tokens), not for
// max_position_embeddings: for 128K-context models that is ~64 MB of device memory saved.
// local: the sliding layers' table (Gemma 3; empty when the model has none).
cpu::RopeTable build_rope(const ModelConfig& cfg, const Dims& d, bool local = false) {
    if (local)
        return cfg.rope_local_theta > 0
                   ? cpu::rope_table_build(int(cfg.rotary_dim()), cfg.rope_local_theta, RopeScaling{}, d.rope_positions)
                   : cpu::RopeTable{};
    return cpu::rope_table_build(int(cfg.rotary_dim()), cfg.rope_theta, cfg.rope_scaling, d.rope_positions);
}

ModelPlan cuda_plan(const Dims& d, const cpu::RopeTable& rope, const cpu::RopeTable& rope_local,
                    const std::vector<LoraTensorSpec>& specs, const LoraIndex& lora_index,
                    const CudaModelOptions& o) {
    PlanTraits tr;
    tr.act_bytes = sizeof(bf16);
    tr.attention_stats_bytes = size_t(d.Hq) * size_t(d.T) * sizeof(float);  // in-house lse [Hq,T]
    if (o.attention != AttentionBackend::Inhouse)
        tr.attention_stats_bytes =
            std::max(tr.attention_stats_bytes, cuda::cudnn_attention_stats_bytes_max(d.T, d.max_seqlen, d.Hq));
    if (cuda::attention_supported(d.D)) tr.attention_workspace = cuda::attention_backward_workspace(d.T, d.Hq, d.D);
    if (o.attention != AttentionBackend::Inhouse)
        tr.attention_workspace = std::max(tr.attention_workspace,
                                          cuda::cudnn_attention_workspace_bytes_max(
                                              d.T, d.max_seqlen, d.Hq, d.Hkv, d.D,
                                              cuda::cudnn_attention_split_backward(d.T, d.Hq, d.Hkv, d.D)));
    tr.ce_workspace = cuda::lm_head_cross_entropy_workspace(d.K, d.V);
    int64_t lora_total = 0;
    for (const auto& s : specs) lora_total += s.shape.at(0) * s.shape.at(1);
    tr.grad_norm_workspace = cuda::grad_norm_workspace(int(specs.size()), lora_total);
    tr.rope_table_bytes = cuda::rope_table_bytes(rope);
    if (rope_local.max_pos > 0) tr.rope_local_table_bytes = cuda::rope_table_bytes(rope_local);
    tr.lora_regions = true;
    tr.adamw_descriptor_bytes = sizeof(cuda::AdamWTensor);
    tr.metadata_slots = 2;
    tr.library_workspace = cuda::kLtWorkspaceBytes;  // the context's cuBLASLt workspace
    if (d.E > 0) tr.library_workspace += cuda::kExpertScratchBytes;  // the experts' batched GEMM (expert_gemm.h)
    tr.context = kContextBytes;
    return make_plan(d, specs, lora_index, o.checkpointing, tr, {o.mlp_kept_layers, o.fp8_transposed, o.mlp_offloaded_layers});
}

}  // namespace

// One allocation per arena (in this order: the workspace first, it stages the weight upload), then the
// decoder's and the runtime's pointers into them.
void CudaModel::Impl::allocate_and_bind() {
    work_mem = cuda::DeviceBuffer(y.work.alloc_size(), "workspace (lm_head chunk, attention, grad norm)");
    weights_mem = cuda::DeviceBuffer(y.weights.alloc_size(), "model weights (bf16)");
    lora_mem = cuda::DeviceBuffer(y.lora.alloc_size(), "LoRA parameters, gradients and AdamW state");
    acts_mem = cuda::DeviceBuffer(y.acts.alloc_size(), "activation arena");
    dec.bind(y, weights_mem.data(), acts_mem.data(), work_mem.data());
    dec.moe_loop = options.moe_routing_loop && d.E > 0;
    lora_value = y.lora.ptr<float>(lora_mem.data(), y.lora_value);
    lora_grad = y.lora.ptr<float>(lora_mem.data(), y.lora_grad);
    lora_m = y.lora.ptr<float>(lora_mem.data(), y.lora_m);
    lora_v = y.lora.ptr<float>(lora_mem.data(), y.lora_v);
    lora_bf16 = y.lora.ptr<bf16>(lora_mem.data(), y.lora_bf16);
    lora_desc = y.lora.ptr<cuda::AdamWTensor>(lora_mem.data(), y.lora_desc);
    dec.lora.assign(size_t(d.L), {});
    for (int l = 0; l < d.L; ++l)
        for (int m = 0; m < kNumModules; ++m) {
            const LoraSlot& s = lora_index[size_t(l)][size_t(m)];
            if (s.a < 0 || !options.lora_state) continue;
            // A fused projection's slot reads its rows of lora_B.
            const int64_t offA = y.lora_offset[size_t(s.a)], offB = y.lora_offset[size_t(s.a) + 1] + s.b_row * d.R;
            dec.lora[size_t(l)][size_t(m)] = {lora_bf16 + offA, lora_bf16 + offB, lora_grad + offA, lora_grad + offB,
                                              s.drop};
        }
    meta = y.acts.ptr<int32_t>(acts_mem.data(), y.meta);
    work_base = static_cast<char*>(work_mem.data());
    work_bytes = y.work.size();
    att_ws = y.work.ptr<char>(work_mem.data(), y.att_ws);
    gn_ws = y.work.ptr<char>(work_mem.data(), y.gn_ws);
    loss_sum = y.work.ptr<double>(work_mem.data(), y.loss_sum);
    norm = y.work.ptr<float>(work_mem.data(), y.norm);
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
    if (options.fp8) {
        const std::string why = fp8_unsupported_reason(system_info());
        if (!why.empty()) throw_unsupported(where + ": precision fp8: " + why);
    }
    m.cfg = held_config(cfg, options);
    m.lora = lora;
    m.options = options;
    m.d = cuda_dims(cfg, lora, options);
    m.dec.d = m.d;
    m.dec.dropout = lora.dropout;
    m.dec.lora_scaling = float(lora.scaling());
    // transformers multiplies the bf16 embeddings by the scale rounded to bf16 (Gemma).
    m.dec.embed_scale = float(bf16(m.d.embed_scale));
    m.dec.rt = &m;
    m.dec.rope = &m.rope;
    m.rope_host = build_rope(cfg, m.d);
    m.rope_local_host = build_rope(cfg, m.d, true);
    if (m.rope_local_host.max_pos > 0) m.dec.rope_local = &m.rope_local;

    const auto specs = lora_tensor_specs(cfg, lora);
    m.lora_index = lora_index_of(specs, m.d.L);
    // Without LoRA state (options.lora_state) the plan gets no specs: no LoRA arena, but the tmp pieces of the
    // index's slots.
    if (options.lora_state) m.params = init_lora_params(specs, seed);  // as CpuModel (model.h); moments start at zero
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
    m.y = cuda_plan(m.d, m.rope_host, m.rope_local_host, options.lora_state ? specs : std::vector<LoraTensorSpec>{},
                    m.lora_index, options);
    m.allocate_and_bind();
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
    if (m.nb > 0 || !m.y.mlp_offloaded.empty()) {
        m.offloaded = offloaded_layers(options.checkpointing, m.d.L);
        const size_t x_bytes = size_t(m.offloaded) * size_t(m.d.T) * size_t(m.d.C) * sizeof(bf16);
        if (x_bytes > 0) m.x_host = PinnedBuffer(x_bytes, "offloaded block inputs");
        if (m.y.mlp_host_slots > 0)
            m.mlp_host = PinnedBuffer(size_t(m.y.mlp_host_slots) * 2 * size_t(m.d.T) * size_t(m.d.F) * sizeof(bf16),
                                      "offloaded MLP buffers (gate, up)");
        m.copy = Stream::make_non_blocking();
        m.ev_mlp_ready = Event::make(cudaEventDisableTiming);
        for (int b = 0; b < 2; ++b) {
            m.ev_mlp_offloaded[b] = Event::make(cudaEventDisableTiming);
            m.ev_mlp_used[b] = Event::make(cudaEventDisableTiming);
            m.ev_mlp_reloaded[b] = Event::make(cudaEventDisableTiming);
        }
        m.ev_x_ready = Event::make(cudaEventDisableTiming);
        for (int b = 0; b < 2; ++b) {
            m.ev_offloaded[b] = Event::make(cudaEventDisableTiming);
            m.ev_used[b] = Event::make(cudaEventDisableTiming);
            m.ev_reloaded[b] = Event::make(cudaEventDisableTiming);
        }
    }

    m.rope = cuda::rope_table_upload(m.rope_host, m.y.weights.ptr<char>(m.weights_mem.data(), m.y.rope));
    if (m.y.rope_local >= 0)
        m.rope_local = cuda::rope_table_upload(m.rope_local_host,
                                               m.y.weights.ptr<char>(m.weights_mem.data(), m.y.rope_local));

    // LoRA: zero every region (padding included), masters, bf16 copies, AdamW descriptors.
    TANDEM_CUDA_CHECK(cudaMemsetAsync(m.lora_mem.data(), 0, m.y.lora.size(), stream()));
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
    const Dims d = cuda_dims(config, lora, options);
    const cpu::RopeTable rope = build_rope(config, d), rope_local = build_rope(config, d, true);
    const auto specs = lora_tensor_specs(config, lora);
    return cuda_plan(d, rope, rope_local, options.lora_state ? specs : std::vector<LoraTensorSpec>{},
                     lora_index_of(specs, d.L), options)
        .bytes;
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
    const Quant4Stage q4{stage, stage_bytes, m.y.quant_max_blocks};
    for (const WeightEntry& e : weight_entries(m.y, d)) {
        if (e.mx_codes >= 0) {  // MXFP4 experts: the checkpoint's blocks and scales, byte for byte
            const bool gate_up = e.name.ends_with(d.moe_spec.gate_up);
            const Mxfp4Tensor t = find_mxfp4(ws, e.name, {d.E, gate_up ? 2 * d.Fe : d.C, gate_up ? d.C : d.Fe});
            TANDEM_CUDA_CHECK(cudaMemcpyAsync(m.y.weights.ptr<uint8_t>(m.weights_mem.data(), e.mx_codes),
                                              t.blocks->data.data(), t.blocks->data.size(), cudaMemcpyHostToDevice,
                                              stream()));
            TANDEM_CUDA_CHECK(cudaMemcpyAsync(m.y.weights.ptr<uint8_t>(m.weights_mem.data(), e.mx_scales),
                                              t.scales->data.data(), t.scales->data.size(), cudaMemcpyHostToDevice,
                                              stream()));
        } else if (e.f8.codes >= 0) {
            upload_fp8(m.y.weights, m.weights_mem.data(), e, ws, Fp8Stage{stage, stage_bytes});
        } else if (e.handle < 0) {
            upload_quant4(m.y.weights, m.weights_mem.data(), e, d, ws, q4);
        } else if (e.expert.experts > 0) {  // gpt-oss's experts: transposed / interleaved / MXFP4, on the host
            const std::vector<float> v = read_expert_tensor(ws, e);
            std::vector<uint16_t> h(v.size());
            for (size_t i = 0; i < v.size(); ++i) h[i] = f32_to_bf16(v[i]);
            TANDEM_CUDA_CHECK(cudaMemcpyAsync(m.weight(e.handle) + e.offset, h.data(), h.size() * 2,
                                              cudaMemcpyHostToDevice, stream()));
            cuda::synchronize(stream());  // h is freed at the end of this block
        } else {
            check_not_quant4(ws, e);
            upload_weight(m.weight(e.handle) + e.offset, ws, e.name, e.numel, stage, stage_bytes);
        }
    }
    m.dec.transpose_fp8_weights();
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
    const Quant4Stage q4{m.work_base, m.work_bytes, m.y.quant_max_blocks};
    for (const WeightEntry& e : weight_entries(m.y, d)) {
        if (e.mx_codes >= 0)  // codes uniform, every scale 2^-7: values of std ~0.023
            cuda::fill_random_mxfp4(m.y.weights.ptr<uint8_t>(m.weights_mem.data(), e.mx_codes),
                                    m.y.weights.ptr<uint8_t>(m.weights_mem.data(), e.mx_scales), e.numel / 2,
                                    rng.next_u64(), uint8_t(127 - 7));
        else if (e.f8.codes >= 0)
            random_fp8(m.y.weights, m.weights_mem.data(), e, rng.next_u64(), bound, Fp8Stage{m.work_base, m.work_bytes});
        else if (e.handle < 0)
            random_quant4(m.y.weights, m.weights_mem.data(), e, d, rng.next_u64(), bound, q4);
        else if (e.kind == WeightKind::Matrix)
            uniform(m.weight(e.handle) + e.offset, e.numel);  // one draw of the weight seed per matrix, in file order
        else
            cuda::fill(m.weight(e.handle) + e.offset, e.kind == WeightKind::Norm ? 1.0f - d.norm_offset : 0.0f, e.numel);
    }
    m.dec.transpose_fp8_weights();
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
CudaMemoryPlan CudaModel::memory() const { return impl_->y.bytes; }

// ---------------------------------------------------------------------------------------------------------
// Steps
// ---------------------------------------------------------------------------------------------------------

double CudaModel::forward_backward(const PackedBatch& batch, float grad_scale, uint64_t dropout_seed) {
    Impl& m = *impl_;
    m.timed = false;
    m.tl_used = 0;
    m.begin_batch(batch, grad_scale, dropout_seed);
    m.ev_start.record();
    m.dec.forward(true);
    m.loss(m.dec.d_lnf);
    m.ev_mid.record();
    m.dec.backward();
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
    // The rank's last micro-batch of a data-parallel step hands its gradients to the all-reduce layer by layer:
    // eagerly, since a graph would replay those collectives with every later micro-batch of its shape.
    if (!m.reduce_now && m.graphs_enabled() && m.run_graphed()) {
        m.ev_t[r][1].record();  // one graph: no forward / backward split (all of it counts as forward)
    } else {
        ++m.graph_stats.eager;
        m.micro_step(m.ev_t[r][1].get());
    }
    if (m.reduce_now) {
        for (const Impl::GradBucket& b : m.grad_buckets)  // the tensors of no layer are final only now
            if (b.layer < 0 || b.layer >= m.d.L) m.reduce_bucket(b);
        m.reduce_now = false;
        m.reduced = true;
    }
    m.ev_t[r][2].record();
    m.end_batch();
}

double CudaModel::forward_loss(const PackedBatch& batch) {
    Impl& m = *impl_;
    m.begin_batch(batch, 1.0f, 0);
    m.dec.forward(false);
    m.loss(nullptr);
    m.end_batch();
    return m.finish_loss();
}

// Full logits in row chunks through the workspace span (evaluation / tests: one copy back per chunk).
std::vector<float> CudaModel::logits(const PackedBatch& batch) {
    Impl& m = *impl_;
    m.begin_batch(batch, 1.0f, 0);
    m.dec.forward(false);
    const int T = m.dec.step.T, V = m.d.V;
    std::vector<float> out(size_t(T) * size_t(V));
    const int rows = int(std::min<size_t>(size_t(T), m.work_bytes / (size_t(V) * sizeof(float))));
    if (rows < 1) throw_internal("cuda model: workspace smaller than one row of logits");
    float* scratch = reinterpret_cast<float*>(m.work_base);
    for (int r0 = 0; r0 < T; r0 += rows) {
        const int n = std::min(rows, T - r0);
        cuda::lm_head_logits(scratch, m.dec.lnf + int64_t(r0) * m.d.C, m.dec.head, n, m.d.C, V, m.d.final_softcap);
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
    m.dec.forward(false);
    const int V = m.d.V;
    std::vector<float> out(static_cast<size_t>(V));
    float* scratch = reinterpret_cast<float*>(m.work_base);
    if (m.work_bytes < size_t(V) * sizeof(float)) throw_internal("cuda model: workspace smaller than one row of logits");
    cuda::lm_head_logits(scratch, m.dec.lnf + int64_t(b.num_tokens - 1) * m.d.C, m.dec.head, 1, m.d.C, V,
                         m.d.final_softcap);
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
    if (m.all_reduce) {
        // The buckets no backward handed over (this rank had no micro-batch, or none was marked last), in the
        // backward's order, then the step's loss sum with the vote; the update waits for the sums.
        if (!m.reduced)
            for (int l = m.d.L - 1; l >= -1; --l)
                for (const Impl::GradBucket& b : m.grad_buckets)
                    if (l >= 0 ? b.layer == l : b.layer < 0 || b.layer >= m.d.L) m.reduce_bucket(b);
        *m.pinned_step_vote(r) = m.vote;
        TANDEM_CUDA_CHECK(
            cudaMemcpyAsync(m.loss_sum + 2, m.pinned_step_vote(r), sizeof(double), cudaMemcpyHostToDevice, stream()));
        m.ev_grads.record(stream());
        m.ev_grads.wait_on(m.comm.get());
        const int span = m.tl_begin(m.comm.get(), "allreduce", -1);  // the loss and the votes
        m.all_reduce->sum(m.loss_sum + 1, 2, m.comm.get());
        m.tl_end(span, m.comm.get());
        m.ev_reduced.record(m.comm.get());
        m.ev_reduced.wait_on(stream());
        m.reduced = false;
        m.vote = 0;
    }
    if (m.params.empty()) {
        cuda::zero(m.norm, 1);
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
    if (m.all_reduce)
        TANDEM_CUDA_CHECK(
            cudaMemcpyAsync(m.pinned_step_vote(r), m.loss_sum + 2, sizeof(double), cudaMemcpyDeviceToHost, stream()));
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
    out.votes = m.all_reduce ? *m.pinned_step_vote(r) : 0.0;
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
void CudaModel::inject_routing(const std::vector<std::vector<int32_t>>&) { no_cuda(); }
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
void CudaModel::set_all_reduce(DeviceAllReduce*) { no_cuda(); }
void CudaModel::reduce_in_next_backward() { no_cuda(); }
void CudaModel::set_step_vote(double) { no_cuda(); }
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
