// SPDX-FileCopyrightText: 2026 The Tandem developers
// SPDX-License-Identifier: GPL-3.0-or-later
// The CUDA benchmark behind `tandem-cli bench` (cuda_plugin/bench.h), built into the CUDA plugin: it drives
// CudaModel and the CUDA kernels directly; app/cli/cmd_bench.cpp parses the flags.
// `tandem-cli bench --config NAME [--layers N] [--batch-tokens 16384] [--seq-len 2048] [--steps 20] [--warmup 3]
// [--checkpointing off|selective|recompute|smart|smart-single] [--attention auto|cudnn|inhouse] [--rank 16]
// [--cuda-graphs on|off] [--moe-routing sort|loop] [--json FILE]`, or `tandem-cli bench --plans FILE`, or
// `tandem-cli bench --grouped-gemm [--json FILE]` — LoRA training throughput of the CUDA backend on an
// architecture preset (tandem/arch_presets.h) with random weights: tokens/s, the forward / backward / optimizer
// split, MFU, and peak VRAM against the memory plan. --plans writes the memory plans of the golden presets and
// all policies (the golden bytes of the planner, tests/fixtures/plans/). --grouped-gemm times the MoE grouped
// GEMMs against one dense GEMM of the same FLOPs (below).
// bench/gpu_bench.sh runs it next to the HF PEFT baseline (bench/hf_peft_baseline.py); bench/moe_bench.sh does
// the same for the mixture-of-experts preset qwen3-30b-a3b.
//
// Decisions a reader must know:
//  - A step is what the trainer does, the trainer's way: zero_grads + forward_backward_async +
//    optimizer_step_async (AdamW, lr 1e-4, clip 1.0), and the previous step's loss and grad norm collected
//    after the next step is queued (one host sync per step). Step time = wall time of the timed steps / their
//    number (warmup drained first); min/max/median are the intervals between collects. Forward, backward
//    and optimizer come from CUDA events of each collected step; "other" = step - the three (upload,
//    launch gaps, host waits). host_syncs_per_step = the counting wrappers' total over the timed steps / N.
//  - --layers N: the preset's config.json with num_hidden_layers = N (every other field as published), parsed
//    like the preset itself, before planning and loading (a 48-layer MoE does not fit one GPU with its LoRA
//    state: bench/moe_bench.sh). 0 = the preset's. The JSON says both ("layers", "layers_preset").
//  - --max-position N: the preset's max_position_embeddings raised to N, as a user extending the context edits
//    config.json (the RoPE table grows; the scaling stays the preset's): samples longer than the published
//    context (bench/long_context.sh CONTEXT=...). It measures memory and speed, not what such a model learns.
//  - LoRA targets are the default seven names, resolved for the model (resolve_lora_targets): a dense model's
//    seven projections; an MoE model's attention projections plus its experts' mlp.experts.gate_up_proj and
//    mlp.experts.down_proj (PEFT target_parameters: one LoRA per expert and parameter). The JSON lists them.
//  - --moe-routing sort|loop (MoE presets only; CudaModelOptions::moe_routing_loop): sort = the grouped GEMMs
//    reading the sorted offsets on the device (the engine's way); loop = the ablation, one GEMM per expert
//    with the row counts read back on the host (a host sync per MoE layer, forward and backward; no CUDA graphs).
//  - --rebuild-metadata-per-layer: the metadata ablation (every layer, forward and backward, rebuilds and
//    uploads the batch metadata and waits). --min-seq-len N: sample lengths drawn uniformly from
//    [N, seq_len] (fixed seed) until the budget is full: many short samples, like instruction data.
//  - --cuda-graphs on|off (default: the engine's default, CudaModelOptions::cuda_graphs): each micro-batch's
//    forward + loss + backward as one CUDA graph (captured in the warmup: the first step of a shape runs
//    eagerly, the next one in each metadata slot is captured). A graph has no inner events: forward then
//    holds forward + backward, backward reads 0 and the output says so. The counts of eager, captured and
//    replayed micro-batches are printed and in the JSON ("cuda_graphs").
//  - --timeline FILE: per-layer CUDA events on the compute and copy streams for one extra micro-batch
//    after the timed steps, as JSON (bench/timeline_plot.py draws it). With --devices: GPU 0's last timed step,
//    with its all-reduces on the communication stream ("comm"), so a reader sees whether they hide behind the
//    backward.
//  - Batches are packed: batch_tokens tokens made of samples of seq_len tokens (the last one shorter when
//    seq_len does not divide batch_tokens), random ids < vocab, labels = tokens with the first label of each
//    sample -100 (batch_from_sequences). HF's 8 x 2048 rows predict exactly as many tokens.
//  - Model FLOPs of one step (one honest formula for LoRA training; MFU divides it). N = tokens of the step,
//    L = layers, H = hidden, Q = Hq*D, KV = Hkv*D, I = intermediate_size, V = vocab; for a mixture-of-experts
//    layer E = experts, K = experts per token, Fe = moe_intermediate_size (Mixtral: intermediate_size):
//      P_lin  = frozen GEMM weights ONE token runs through
//             = sum over layers of (2*H*Q + 2*H*KV + MLP_l) + V*H (lm_head, tied or not); the embedding lookup
//               is not a GEMM and is not counted;
//               MLP_l = 3*H*I for a dense MLP,
//               MLP_l = K*3*H*Fe + H*E for an MoE layer: the K experts the token is routed to (gate, up, down)
//               plus the router; the E-K other experts are not touched by the token and not counted, so MFU
//               is over ACTIVE parameters (a dense model's P_lin is all of its GEMM weights). In the JSON:
//               gemm_parameters_per_token (active_parameters is ModelConfig's count, embeddings included);
//      P_lora = LoRA parameters one token runs through = sum over adapted projections of r * (in + out); an
//               adapted expert parameter counts for the token's K experts only: K * r * (in + out) per MoE
//               layer (gate_up_proj: in H, out 2*Fe, one A and one B per expert; down_proj: in Fe, out H).
//               The JSON's lora_parameters is all trainable ones (every expert's), lora_parameters_active
//               this P_lora;
//      A_fwd  = causal attention GEMMs = sum over layers and samples of 2 * 2 * S^2/2 * D * Hq (QK^T and PV,
//               half the score matrix),
//      forward  = 2*N*P_lin + 2*N*P_lora + A_fwd
//      backward = 2*N*P_lin (input gradients only: frozen weights get no weight gradient)
//               + 4*N*P_lora (dtmp, dB, dA, dinp) + 2.5*A_fwd (flash backward: 5 GEMMs against 2)
//      total    = 4*N*P_lin + 6*N*P_lora + 3.5*A_fwd.
//    For Qwen3-30B-A3B that is, per layer and token, 2*2048*4096 + 2*2048*512 + 8*3*2048*768 + 2048*128
//    = 56.9M frozen weights (not the 623M the layer holds). Recomputation (checkpointing recompute) is NOT
//    counted — it is overhead, so it lowers MFU. Elementwise and gather work (norms, RoPE, SwiGLU, softmax,
//    router softmax / top-k, the MoE sort, permute and weighted unpermute, cross-entropy, AdamW) is not
//    counted either. The full fine-tuning convention 6*N*params would overstate LoRA's work by about 1.5x
//    (no weight gradients). A baseline that computes more (HF PEFT's LoRA on expert parameters materialises
//    every expert's B*A and its weight gradient) is measured against the same count.
//  - Peak = measured, not the datasheet: 20 cuBLASLt 8192^3 bf16 GEMMs (NT, fp32 accumulation, random
//    data) through cuda::gemm, timed with events after the model is freed. MFU = FLOPs / step time / peak.
//  - Memory: peak_allocated = the allocator's high-water mark (every byte through device_alloc);
//    device_used = cudaMemGetInfo total - free after the timed steps (adds the CUDA context, library
//    workspaces and anything else on the GPU: run on an otherwise idle GPU). The plan (CudaModel::plan) is
//    computed before loading; ratio = device_used / plan.total and peak_allocated / (plan.total - context).
//  - --devices 0,1 (data parallelism, train/cuda_data_parallel.h): one replica per GPU, each running one
//    micro-batch of batch_tokens tokens per step (the trainer's rank i mod N), its LoRA gradients summed per layer
//    over the device transport during the backward; a step is begin_step(N) + N queue_forward_backward +
//    queue_optimizer_step, collected one step later (the trainer's protocol). tokens/s counts every GPU's tokens
//    (N x batch_tokens a step); compare with the same command on one GPU (no --devices). host_syncs_per_step
//    counts every rank's (one each). Memory is GPU 0's; no forward / backward split (the ranks' events are
//    their own), no MFU (the peak GEMM would need every GPU).
//  - --grouped-gemm: the MoE expert GEMMs of Qwen3-30B-A3B at 16384 tokens x 8 experts each = 131072 rows
//    over 128 experts, for gate/up (2048 -> 768) and down (768 -> 2048) with the rows spread evenly (1024 each)
//    and unevenly (512 to 1536 rows, none a multiple of 32: what a router gives), and the r = 16 LoRA products
//    of both (A: 2048 -> 16, 768 -> 16; B: 16 -> 768, 16 -> 2048; uneven): cuda::grouped_matmul_forward and
//    cuda::grouped_matmul_backward (the input gradient) against one cuda::gemm of the same shape and total
//    FLOPs (M = 131072 rows, one weight), 3 untimed + 20 timed calls each, CUDA events; TFLOP/s of both and
//    grouped / dense (the target: at least 0.60). No model.
#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <deque>
#include <fstream>
#include <iostream>
#include <memory>
#include <optional>
#include <string>
#include <tuple>
#include <vector>

#include <nlohmann/json.hpp>

#include "core/cuda/context.h"
#include "core/cuda/memory.h"
#include "core/random.h"
#include "cuda_plugin/bench.h"
#include "kernels/cuda/elementwise.h"
#include "kernels/cuda/fp8.h"
#include "kernels/cuda/matmul.h"
#include "kernels/cuda/moe.h"
#include "model/cuda_model.h"
#include "model/lora_table.h"
#include "tandem/arch_presets.h"
#include "tandem/error.h"
#include "tandem/lora.h"
#include "tandem/run_config.h"
#include "train/cuda_data_parallel.h"
#include "train/data_parallel.h"

namespace tandem {

namespace {

using Clock = std::chrono::steady_clock;
using json = nlohmann::ordered_json;

constexpr double kGiB = double(1ull << 30);

// ---------------------------------------------------------------------------------------------------------
// Model FLOPs (formula in the file header)

struct FlopCount {
    double frozen_params = 0;   // P_lin (active: an MoE layer's K routed experts and its router)
    double lora_params = 0;     // P_lora (active: an adapted expert parameter's K routed experts)
    double lora_trainable = 0;  // every LoRA parameter (every expert's)
    double attention_fwd = 0;   // A_fwd for the whole batch
    double forward = 0;
    double backward = 0;
    double total() const { return forward + backward; }
};

FlopCount model_flops(const ModelConfig& c, const LoraConfig& lora, const std::vector<int64_t>& sample_lengths) {
    // H = hidden, Q = q width, KV = kv width, I = intermediate, V = vocab, D = head_dim, L = layers;
    // E = experts, K = experts per token, Fe = an expert's intermediate size (MoE layers)
    const double H = double(c.hidden_size), Q = double(c.q_dim()), KV = double(c.kv_dim());
    const double I = double(c.intermediate_size), V = double(c.vocab_size), D = double(c.head_dim);
    const double L = double(c.num_hidden_layers), Hq = double(c.num_attention_heads);
    const double E = double(c.num_experts), K = double(c.num_experts_per_tok), Fe = double(c.moe_intermediate_size);
    FlopCount f;
    f.frozen_params = V * H;
    for (int64_t l = 0; l < c.num_hidden_layers; ++l)
        f.frozen_params += 2 * H * Q + 2 * H * KV + (c.is_moe_layer(l) ? K * 3 * H * Fe + H * E : 3 * H * I);
    // The LoRA table the model builds (lora_A [r, in] + lora_B [out, r] per adapted projection: r * (in + out);
    // an expert parameter's tensors hold all E experts' A and B, of which a token runs through K).
    for (const LoraTensorSpec& s : lora_tensor_specs(c, lora)) {
        double n = 1;
        for (const auto d : s.shape) n *= double(d);
        f.lora_trainable += n;
        f.lora_params += s.experts > 0 ? n * K / double(s.experts) : n;
    }
    double n_tokens = 0;
    for (const auto s : sample_lengths) {
        n_tokens += double(s);
        f.attention_fwd += L * 2.0 * 2.0 * (double(s) * double(s) / 2.0) * D * Hq;
    }
    f.forward = 2 * n_tokens * f.frozen_params + 2 * n_tokens * f.lora_params + f.attention_fwd;
    f.backward = 2 * n_tokens * f.frozen_params + 4 * n_tokens * f.lora_params + 2.5 * f.attention_fwd;
    return f;
}

// ---------------------------------------------------------------------------------------------------------
// Device measurements

struct DeviceMemory {
    uint64_t used = 0;   // total - free
    uint64_t total = 0;
};

DeviceMemory device_memory() {
    cuda::context();  // the measurement is of this process's device
    size_t free_b = 0, total_b = 0;
    TANDEM_CUDA_CHECK(cudaMemGetInfo(&free_b, &total_b));
    return {uint64_t(total_b - free_b), uint64_t(total_b)};
}

std::string device_name() { return cuda::context().name; }

// Owner of one CUDA event.
struct Event {
    cudaEvent_t e = nullptr;
    Event() { TANDEM_CUDA_CHECK(cudaEventCreate(&e)); }
    ~Event() { cudaEventDestroy(e); }
    Event(const Event&) = delete;
    Event& operator=(const Event&) = delete;
};

// Random bf16 data for the kernel benchmarks (not zeros: the tensor cores draw and clock differently on zeros): one
// 4M-element random block copied over the buffer.
class RandomBf16 {
public:
    explicit RandomBf16(uint64_t seed) : block_(size_t(1) << 22) {
        SplitMix64 rng(seed);
        for (auto& x : block_) x = __float2bfloat16(float(rng.next_double() * 2.0 - 1.0));
    }
    cuda::DeviceBuffer buffer(size_t elems, const char* what) const {
        cuda::DeviceBuffer b(elems * sizeof(cuda::bf16), what);
        for (size_t at = 0; at < elems; at += block_.size()) {
            const size_t n = std::min(block_.size(), elems - at);
            TANDEM_CUDA_CHECK(cudaMemcpyAsync(b.as<cuda::bf16>() + at, block_.data(), n * sizeof(cuda::bf16),
                                              cudaMemcpyHostToDevice, cuda::context().stream));
        }
        return b;
    }

private:
    std::vector<cuda::bf16> block_;
};

// Milliseconds per call of f: `warmup` untimed calls, then `reps` between two events on the compute stream.
template <class F>
double time_calls_ms(const F& f, int warmup = 3, int reps = 20) {
    cudaStream_t stream = cuda::context().stream;
    for (int i = 0; i < warmup; ++i) f();
    Event start, stop;
    TANDEM_CUDA_CHECK(cudaEventRecord(start.e, stream));
    for (int i = 0; i < reps; ++i) f();
    TANDEM_CUDA_CHECK(cudaEventRecord(stop.e, stream));
    cuda::wait_event(stop.e);
    float ms = 0;
    TANDEM_CUDA_CHECK(cudaEventElapsedTime(&ms, start.e, stop.e));
    return double(ms) / reps;
}

// Peak bf16 GEMM throughput (FLOP/s) as cuBLASLt delivers it on this GPU: 20 timed 8192^3 NT GEMMs
// (C[M,N] = A[M,K] @ B[N,K]^T, the layout of every linear layer) after 3 untimed ones. Random data, not
// zeros: the tensor cores draw (and clock) differently on zeros.
double measure_peak_bf16_flops() {
    constexpr int n = 8192;
    constexpr int warmup = 3, reps = 20;
    const size_t elems = size_t(n) * n;
    std::vector<cuda::bf16> host(elems);
    SplitMix64 rng(20240604);
    for (auto& x : host) x = __float2bfloat16(float(rng.next_double() * 2.0 - 1.0));
    const cuda::DeviceBuffer a(elems * sizeof(cuda::bf16), "peak GEMM A");
    const cuda::DeviceBuffer b(elems * sizeof(cuda::bf16), "peak GEMM B");
    const cuda::DeviceBuffer c(elems * sizeof(cuda::bf16), "peak GEMM C");
    cudaStream_t stream = cuda::context().stream;
    TANDEM_CUDA_CHECK(cudaMemcpyAsync(a.data(), host.data(), a.bytes(), cudaMemcpyHostToDevice, stream));
    TANDEM_CUDA_CHECK(cudaMemcpyAsync(b.data(), host.data(), b.bytes(), cudaMemcpyHostToDevice, stream));
    auto gemm = [&] {
        cuda::gemm(false, true, n, n, n, 1.0f, a.as<cuda::bf16>(), n, b.as<cuda::bf16>(), n, 0.0f, c.data(), n,
                   /*c_f32=*/false);
    };
    const double ms = time_calls_ms(gemm, warmup, reps);
    return 2.0 * double(n) * double(n) * double(n) / (ms * 1e-3);
}

// --grouped-gemm (formula and shapes in the file header): the MoE expert GEMMs against one dense GEMM of the
// same FLOPs. Returns one JSON row per shape and direction.
json grouped_gemm_bench() {
    constexpr int kExperts = 128, kRows = 16384 * 8;  // Qwen3-30B-A3B: 16384 tokens x 8 experts each
    cudaStream_t stream = cuda::context().stream;
    const RandomBf16 random(20240605);
    auto random_buffer = [&](size_t elems, const char* what) { return random.buffer(elems, what); };
    // Even routing: expert e owns rows [e * rows / E, (e + 1) * rows / E). Uneven: expert e's share grows with
    // (e * 37) % 128 from 512 to 1536 rows; no count is a multiple of 32 (the last expert takes what is left).
    std::vector<int32_t> even(kExperts + 1), uneven(kExperts + 1);
    for (int e = 0; e <= kExperts; ++e) even[size_t(e)] = int32_t(int64_t(e) * kRows / kExperts);
    for (int e = 0; e < kExperts; ++e) {
        int rows = 512 + ((e * 37) % 128) * 8 + 3;
        if (rows % 32 == 0) ++rows;
        uneven[size_t(e) + 1] = uneven[size_t(e)] + rows;
    }
    uneven[kExperts] = kRows;
    if (uneven[kExperts - 1] >= kRows) throw_internal("grouped GEMM bench: the uneven routing overflows");
    const cuda::DeviceBuffer d_even(even.size() * sizeof(int32_t), "grouped GEMM offsets");
    const cuda::DeviceBuffer d_uneven(uneven.size() * sizeof(int32_t), "grouped GEMM offsets");
    TANDEM_CUDA_CHECK(cudaMemcpyAsync(d_even.data(), even.data(), d_even.bytes(), cudaMemcpyHostToDevice, stream));
    TANDEM_CUDA_CHECK(
        cudaMemcpyAsync(d_uneven.data(), uneven.data(), d_uneven.bytes(), cudaMemcpyHostToDevice, stream));
    auto time_ms = [](const auto& f) { return time_calls_ms(f); };
    struct Shape {
        const char* name;
        int in, out;
        bool even;
    };
    json rows = json::array();
    for (const Shape& sh : {Shape{"gate/up", 2048, 768, true}, Shape{"down", 768, 2048, true},
                            Shape{"gate/up", 2048, 768, false}, Shape{"down", 768, 2048, false},
                            Shape{"lora A", 2048, 16, false}, Shape{"lora A", 768, 16, false},
                            Shape{"lora B", 16, 768, false}, Shape{"lora B", 16, 2048, false}}) {
        const int N = kRows, IN = sh.in, OUT = sh.out;
        const int64_t w_stride = int64_t(OUT) * IN;  // expert e's [OUT, IN] weight at w + e * OUT * IN
        const cuda::DeviceBuffer inp = random_buffer(size_t(N) * IN, "grouped GEMM input");
        const cuda::DeviceBuffer w = random_buffer(size_t(kExperts) * OUT * IN, "grouped GEMM weights");
        const cuda::DeviceBuffer out = random_buffer(size_t(N) * OUT, "grouped GEMM output");
        const cuda::DeviceBuffer dinp = random_buffer(size_t(N) * IN, "grouped GEMM input gradient");
        const auto* x = inp.as<cuda::bf16>();
        const auto* wp = w.as<cuda::bf16>();
        const auto* offs = (sh.even ? d_even : d_uneven).as<int32_t>();
        const double flops = 2.0 * double(N) * double(IN) * double(OUT);
        // forward: out[N,OUT] = inp @ W_e^T per expert | one W for all rows (NT, as every linear layer)
        const double g_fwd = time_ms([&] {
            cuda::grouped_matmul_forward(out.as<cuda::bf16>(), x, wp, w_stride, nullptr, 0, offs, N, IN, OUT,
                                         kExperts, 1.0f, false);
        });
        const double d_fwd = time_ms([&] {
            cuda::gemm(false, true, N, OUT, IN, 1.0f, x, IN, wp, IN, 0.0f, out.data(), OUT, /*c_f32=*/false);
        });
        // backward (input gradient, accumulated): dinp[N,IN] += dout @ W_e per expert | one W (NN)
        const double g_bwd = time_ms([&] {
            cuda::grouped_matmul_backward(dinp.as<cuda::bf16>(), out.as<cuda::bf16>(), wp, w_stride, offs, N, IN,
                                          OUT, kExperts, 1.0f);
        });
        const double d_bwd = time_ms([&] {
            cuda::gemm(false, false, N, IN, OUT, 1.0f, out.as<cuda::bf16>(), OUT, wp, IN, 1.0f, dinp.data(), IN,
                       /*c_f32=*/false);
        });
        for (const auto& [dir, g, d] : {std::tuple{"forward", g_fwd, d_fwd}, std::tuple{"backward", g_bwd, d_bwd}}) {
            const double g_rate = flops / (g * 1e-3), d_rate = flops / (d * 1e-3);
            rows.push_back({{"shape", sh.name}, {"direction", dir}, {"rows", N}, {"experts", kExperts},
                            {"rows_per_expert", N / kExperts}, {"routing", sh.even ? "even" : "uneven"}, {"in", IN},
                            {"out", OUT}, {"flops", flops},
                            {"grouped_ms", g}, {"dense_ms", d}, {"grouped_tflops", g_rate / 1e12},
                            {"dense_tflops", d_rate / 1e12}, {"ratio", g_rate / d_rate}});
        }
    }
    return rows;
}

// --fp8-gemm: each base GEMM of Llama-3.1-8B (4096 rows) and Qwen3-0.6B (16384 rows) in bf16 and in FP8, forward
// (out = x W^T) and input gradient (dx += dy W), with the FP8 path's parts timed alone: the activation / output
// gradient quantization, the weight transpose, the block-scaled GEMM. One JSON row per shape and direction.
json fp8_gemm_bench() {
    const RandomBf16 random(20261125);
    auto random_bf16 = [&](size_t elems, const char* what) { return random.buffer(elems, what); };
    auto time_ms = [](const auto& f) { return time_calls_ms(f); };
    struct Shape {
        const char* model;
        const char* name;
        int rows, in, out;
    };
    const Shape shapes[] = {{"llama-3.1-8b", "q/o", 4096, 4096, 4096},   {"llama-3.1-8b", "k/v", 4096, 4096, 1024},
                            {"llama-3.1-8b", "gate/up", 4096, 4096, 14336}, {"llama-3.1-8b", "down", 4096, 14336, 4096},
                            {"qwen3-0.6b", "q", 16384, 1024, 2048},      {"qwen3-0.6b", "k/v", 16384, 1024, 1024},
                            {"qwen3-0.6b", "o", 16384, 2048, 1024},      {"qwen3-0.6b", "gate/up", 16384, 1024, 3072},
                            {"qwen3-0.6b", "down", 16384, 3072, 1024}};
    json rows = json::array();
    for (const Shape& sh : shapes) {
        const int N = sh.rows, IN = sh.in, OUT = sh.out;
        const int64_t inp = fp8_padded(IN), outp = fp8_padded(OUT), kmax = std::max(inp, outp);
        const cuda::DeviceBuffer x = random_bf16(size_t(N) * IN, "x"), w = random_bf16(size_t(OUT) * IN, "w");
        const cuda::DeviceBuffer y = random_bf16(size_t(N) * OUT, "y"), dx = random_bf16(size_t(N) * IN, "dx");
        cuda::DeviceBuffer wf(size_t(OUT) * IN * 4, "w fp32");
        cuda::to_f32(wf.as<float>(), w.as<cuda::bf16>(), int64_t(OUT) * IN);
        cuda::DeviceBuffer wq(size_t(OUT * inp), "w codes"), ws(size_t(fp8_blocks(OUT) * fp8_scale_ld(IN)) * 4, "w scales");
        cuda::DeviceBuffer wt(size_t(IN * outp), "wt codes"), wts(size_t(fp8_blocks(IN) * fp8_scale_ld(OUT)) * 4, "wt scales");
        cuda::DeviceBuffer xq(size_t(fp8_code_rows(N) * kmax), "x codes"), xs(size_t(fp8_code_rows(N) * (kmax / 128)) * 4, "x scales");
        cuda::quantize_fp8_weight(wq.as<uint8_t>(), ws.as<float>(), wf.as<float>(), OUT, IN);
        const double flops = 2.0 * double(N) * double(IN) * double(OUT);
        // forward
        const double b_fwd = time_ms([&] {
            cuda::gemm(false, true, N, OUT, IN, 1.0f, x.as<cuda::bf16>(), IN, w.as<cuda::bf16>(), IN, 0.0f, y.data(), OUT, false);
        });
        const double q_fwd = time_ms([&] { cuda::quantize_fp8_rows(xq.as<uint8_t>(), xs.as<float>(), x.as<cuda::bf16>(), N, IN); });
        const double g_fwd = time_ms([&] {
            cuda::fp8_matmul(y.as<cuda::bf16>(), xq.as<uint8_t>(), xs.as<float>(), wq.as<uint8_t>(), ws.as<float>(), nullptr,
                             N, IN, OUT, 0.0f, nullptr);
        });
        // input gradient
        const double b_bwd = time_ms([&] {
            cuda::gemm(false, false, N, IN, OUT, 1.0f, y.as<cuda::bf16>(), OUT, w.as<cuda::bf16>(), IN, 1.0f, dx.data(), IN, false);
        });
        const double q_bwd = time_ms([&] { cuda::quantize_fp8_rows(xq.as<uint8_t>(), xs.as<float>(), y.as<cuda::bf16>(), N, OUT); });
        const double t_bwd = time_ms([&] {
            cuda::fp8_transpose(wt.as<uint8_t>(), wts.as<float>(), wq.as<uint8_t>(), ws.as<float>(), OUT, IN);
        });
        const double g_bwd = time_ms([&] {
            cuda::fp8_matmul(dx.as<cuda::bf16>(), xq.as<uint8_t>(), xs.as<float>(), wt.as<uint8_t>(), wts.as<float>(), nullptr,
                             N, OUT, IN, 1.0f, nullptr);
        });
        for (const auto& [dir, b, q, t, g] : {std::tuple{"forward", b_fwd, q_fwd, 0.0, g_fwd},
                                                std::tuple{"input gradient", b_bwd, q_bwd, t_bwd, g_bwd}}) {
            const double total = q + t + g;
            rows.push_back({{"model", sh.model}, {"shape", sh.name}, {"direction", dir}, {"rows", N}, {"in", IN},
                            {"out", OUT}, {"flops", flops}, {"bf16_ms", b}, {"quantize_ms", q}, {"transpose_ms", t},
                            {"fp8_gemm_ms", g}, {"fp8_total_ms", total}, {"bf16_tflops", flops / (b * 1e-3) / 1e12},
                            {"fp8_gemm_tflops", flops / (g * 1e-3) / 1e12}, {"speedup", b / total},
                            {"gemm_speedup", b / g}});
        }
    }
    return rows;
}

uint64_t peak_allocated() { return cuda::peak_allocated_bytes(); }
uint64_t host_sync_total() { return cuda::host_sync_count(); }
void reset_peak_allocated() { cuda::reset_peak(); }
void reset_peak_allocated_on(int device) { cuda::reset_peak(device); }


// ---------------------------------------------------------------------------------------------------------
// Synthetic batches and statistics

// Sample lengths drawn uniformly from [lo, hi] (fixed seed) until the budget is full; the last one takes
// what is left.
std::vector<int64_t> varied_lengths(int batch_tokens, int lo, int hi) {
    SplitMix64 rng(77);
    std::vector<int64_t> out;
    int64_t left = batch_tokens;
    while (left > 0) {
        const int64_t len = std::min<int64_t>(left, lo + int64_t(rng.next_u64() % uint64_t(hi - lo + 1)));
        out.push_back(len);
        left -= len;
    }
    return out;
}

// Sample lengths of one batch: seq_len each, the remainder (if any) as a last, shorter sample.
std::vector<int64_t> sample_lengths(int batch_tokens, int seq_len) {
    std::vector<int64_t> out(size_t(batch_tokens / seq_len), seq_len);
    if (batch_tokens % seq_len != 0) out.push_back(batch_tokens % seq_len);
    return out;
}

PackedBatch random_batch(const std::vector<int64_t>& lengths, int64_t vocab, uint64_t seed) {
    SplitMix64 rng(seed);
    std::vector<std::vector<int32_t>> seqs;
    for (const auto len : lengths) {
        std::vector<int32_t> s(static_cast<size_t>(len));
        for (auto& t : s) t = int32_t(rng.next_u64() % uint64_t(vocab));
        seqs.push_back(std::move(s));
    }
    return batch_from_sequences(seqs);
}

double mean(const std::vector<double>& v) {
    double s = 0;
    for (const auto x : v) s += x;
    return v.empty() ? 0.0 : s / double(v.size());
}

double median(std::vector<double> v) {
    if (v.empty()) return 0.0;
    std::sort(v.begin(), v.end());
    const size_t m = v.size() / 2;
    return v.size() % 2 ? v[m] : 0.5 * (v[m - 1] + v[m]);
}

json plan_json(const CudaMemoryPlan& p) {
    return {{"weights", p.weights},       {"lora_optimizer", p.lora_optimizer}, {"activations", p.activations},
            {"workspace", p.workspace},   {"context", p.context},               {"total", p.total},
            {"pinned_host", p.pinned_host}};
}

std::string gib(uint64_t bytes) {
    char buf[32];
    std::snprintf(buf, sizeof buf, "%.2f GiB", double(bytes) / kGiB);
    return buf;
}

// The memory plans (CudaModel::plan, no weights loaded) of every preset x policy x token budget at 2048-token
// samples, LoRA r 16 on all seven projections: the golden bytes a change of the planner must reproduce.
json plan_table() {
    json rows = json::array();
    // The presets the golden file was recorded with (later presets are not in it).
    for (const char* name : {"qwen3-0.6b", "llama-3.2-1b", "llama-3.1-8b", "tiny-llama"})
        for (const char* policy : {"off", "recompute", "smart", "smart-single"})
            for (int tokens : {4096, 16384}) {
                LoraConfig lora;
                CudaModelOptions options;
                options.max_tokens = tokens;
                options.max_seqlen = 2048;
                options.checkpointing = *parse_checkpoint_policy(policy);
                const CudaMemoryPlan p = CudaModel::plan(*architecture_preset(name), lora, options);
                rows.push_back({{"config", name}, {"checkpointing", policy}, {"batch_tokens", tokens},
                                {"seq_len", 2048}, {"weights", p.weights}, {"lora_optimizer", p.lora_optimizer},
                                {"activations", p.activations}, {"workspace", p.workspace}, {"context", p.context},
                                {"total", p.total}, {"pinned_host", p.pinned_host}});
            }
    return rows;
}

void write_json_file(const std::string& path, const json& j) {
    std::ofstream f(path);
    if (!f) throw_io(path + ": cannot open for writing (--json)");
    f << j.dump(2) << "\n";
    if (!f.flush()) throw_io(path + ": write failed (--json)");
}

std::string join(const std::vector<std::string>& v) {
    std::string s;
    for (const auto& x : v) s += (s.empty() ? "" : ", ") + x;
    return s;
}

// Error{Unsupported} naming `what` and the reason when the CUDA backend cannot run here.
void require_cuda(const std::string& what) {
    std::string reason;
    if (!cuda_backend_available(&reason)) throw_unsupported(what + " needs the CUDA backend (" + reason + ")");
}

// The step loop of both runs (file header): `warmup` untimed then `steps` timed steps, each queued by queue(s) and
// collected one step late by collect(timed) (queued() = steps queued, not collected), every queue drained before
// the clock starts and before it stops. Step time = the timed wall time / steps; intervals between collects for
// min/median/max; host syncs per timed step.
struct TimedSteps {
    std::vector<double> step_ms;  // the intervals between collects (at least one value)
    double wall_step_ms = 0, host_syncs = 0;
};

template <class Queue, class Collect, class Queued>
TimedSteps time_steps(const CudaBenchOptions& o, Queue queue, Collect collect, Queued queued) {
    TimedSteps t;
    for (int s = 0; s < o.warmup; ++s) {
        queue(s);
        if (queued() == 2) collect(false);
    }
    while (queued() > 0) collect(false);
    const uint64_t syncs0 = host_sync_total();
    const auto t0 = Clock::now();
    auto prev = t0;
    for (int s = o.warmup; s < o.warmup + o.steps; ++s) {
        queue(s);
        if (queued() == 2) {
            collect(true);
            const auto now = Clock::now();
            if (s > o.warmup + 1) t.step_ms.push_back(std::chrono::duration<double, std::milli>(now - prev).count());
            prev = now;
        }
    }
    while (queued() > 0) collect(true);
    const auto t1 = Clock::now();
    t.host_syncs = double(host_sync_total() - syncs0) / double(o.steps);
    t.wall_step_ms = std::chrono::duration<double, std::milli>(t1 - t0).count() / double(o.steps);
    if (t.step_ms.empty()) t.step_ms.push_back(t.wall_step_ms);
    return t;
}

// --timeline FILE: the spans of one micro-batch as JSON (bench/timeline_plot.py draws it).
void write_timeline(const CudaBenchOptions& o, const std::string& device, int gpus,
                    const std::vector<TimelineSpan>& spans) {
    json t;
    t["config"] = o.config;
    t["checkpointing"] = o.checkpointing;
    t["batch_tokens"] = o.batch_tokens;
    t["device"] = device;
    t["devices"] = gpus;
    t["spans"] = json::array();
    for (const auto& sp : spans)
        t["spans"].push_back({{"stream", sp.stream}, {"what", sp.what}, {"layer", sp.layer},
                              {"begin_ms", sp.begin_ms}, {"end_ms", sp.end_ms}});
    write_json_file(o.timeline_path, t);
}

// --devices (file header): the step loop over a data-parallel model, printed and written like the one-GPU run.
int run_data_parallel_bench(const CudaBenchOptions& o, const std::vector<int>& devices, const ModelConfig& config,
                            const LoraConfig& lora, const CudaModelOptions& options,
                            const std::vector<PackedBatch>& batches, json& j) {
    const int n = int(devices.size());
    std::vector<double> losses;
    TimedSteps timed;
    MemoryStats mem;
    std::string transport;
    {
        for (const int d : devices) reset_peak_allocated_on(d);
        auto model = train::cuda_data_parallel(devices, [&](int) {
            return train::trainable_cuda_model(CudaModel::random(config, lora, /*seed=*/1, /*weight_seed=*/2, options));
        });
        if (const auto* dp = dynamic_cast<const DataParallelModel*>(model.get())) transport = dp->transport();
        std::fprintf(stderr, "bench: %s loaded on %d GPUs (%s); %d warmup + %d timed steps\n", o.config.c_str(), n,
                     transport.c_str(), o.warmup, o.steps);
        const size_t nb = batches.size();
        std::deque<int64_t> labels;  // of the queued steps, oldest first
        auto queue = [&](int s) {
            int64_t l = 0;
            for (int i = 0; i < n; ++i) l += batches[size_t(s * n + i) % nb].num_label_tokens;
            labels.push_back(l);
            model->begin_step(n);
            for (int i = 0; i < n; ++i)
                model->queue_forward_backward(batches[size_t(s * n + i) % nb], 1.0f / float(l), uint64_t(s));
            OptimizerStep step;
            step.lr = 1e-4;
            step.max_grad_norm = 1.0;
            step.step = s + 1;
            model->queue_optimizer_step(step);
        };
        auto collect = [&](bool) {
            losses.push_back(model->collect_step().loss_sum / double(labels.front()));
            labels.pop_front();
        };
        timed = time_steps(o, queue, collect, [&] { return model->queued_steps(); });
        mem = model->memory_stats();  // rank 0's
        if (!o.timeline_path.empty()) {
            // GPU 0's last step: its micro-batch (forward, backward) and the sums on its communication stream.
            std::vector<TimelineSpan> spans;
            if (auto* dp = dynamic_cast<DataParallelModel*>(model.get()))
                dp->on_rank(0, [&](TrainableModel& m) {
                    if (CudaModel* c = train::cuda_model_of(m)) spans = c->timeline();
                });
            write_timeline(o, device_name() + " x " + std::to_string(n), n, spans);
        }
    }
    const double step = timed.wall_step_ms;
    const std::vector<double>& step_ms = timed.step_ms;
    const double host_syncs = timed.host_syncs;
    const double tokens_per_s = double(o.batch_tokens) * n / (step * 1e-3);
    j["oom"] = false;
    j["devices"] = devices;
    j["transport"] = transport;
    j["tokens_per_step"] = int64_t(o.batch_tokens) * n;
    j["tokens_per_s"] = tokens_per_s;
    j["tokens_per_s_per_gpu"] = tokens_per_s / n;
    j["steps_per_s"] = 1e3 / step;
    j["step_ms"] = {{"mean", step}, {"median", median(step_ms)},
                    {"min", *std::min_element(step_ms.begin(), step_ms.end())},
                    {"max", *std::max_element(step_ms.begin(), step_ms.end())}};
    j["host_syncs_per_step"] = host_syncs;
    j["peak_gib"] = double(mem.reserved) / kGiB;
    j["device_used_gib"] = double(mem.device_total - mem.device_free) / kGiB;
    j["loss_first"] = losses.front();
    j["loss_last"] = losses.back();
    std::printf("tandem bench: %s, LoRA r=%d alpha=%g, data parallel on GPUs", o.config.c_str(), lora.r, lora.alpha);
    for (const int d : devices) std::printf(" %d", d);
    std::printf(" over %s\n", transport.c_str());
    std::printf("  device          %s x %d\n", device_name().c_str(), n);
    std::printf("  batch           %d GPUs x %d tokens (samples of %d) a step; checkpointing %s\n", n, o.batch_tokens,
                o.seq_len, o.checkpointing.c_str());
    std::printf("  steps           %d warmup + %d timed\n", o.warmup, o.steps);
    std::printf("  throughput      %.0f tokens/s (%.0f per GPU), %.3f steps/s\n", tokens_per_s, tokens_per_s / n,
                1e3 / step);
    std::printf("  step            %8.2f ms mean (median %.2f)\n", step, median(step_ms));
    std::printf("  host syncs      %.2f per step (every rank's)\n", host_syncs);
    std::printf("  memory          GPU %d: peak allocated %s, device used %s\n", devices[0], gib(mem.reserved).c_str(),
                gib(mem.device_total - mem.device_free).c_str());
    std::printf("  loss            %.4f first, %.4f last\n", losses.front(), losses.back());
    if (!o.json_path.empty()) write_json_file(o.json_path, j);
    return 0;
}

}  // namespace

int run_cuda_bench(const CudaBenchOptions& o) {
    // --devices N alone: the one-GPU run on GPU N (before anything makes this thread's context).
    if (o.devices.size() == 1 && o.devices[0] >= 0) cuda::set_thread_device(o.devices[0]);
    if (!o.plans_path.empty()) {
        require_cuda("tandem-cli bench --plans");
        write_json_file(o.plans_path, plan_table());
        std::cout << "wrote " << o.plans_path << "\n";
        return 0;
    }
    if (o.grouped_gemm) {
        require_cuda("tandem-cli bench --grouped-gemm");
        json g;
        g["system"] = "tandem";
        g["benchmark"] = "grouped_gemm";
        g["device"] = device_name();
        g["target_ratio"] = 0.60;
        g["rows"] = grouped_gemm_bench();
        std::printf("grouped GEMM vs dense GEMM of the same FLOPs on %s (131072 rows = 16384 tokens x 8, "
                    "128 experts x 1024 rows on average; bf16, fp32 accumulation)\n",
                    g["device"].get<std::string>().c_str());
        std::printf("  %-8s %-7s %-9s %6s %6s  %9s %9s  %7s %9s\n", "shape", "routing", "direction", "in", "out",
                    "grouped", "dense", "ratio", "grouped");
        for (const auto& r : g["rows"])
            std::printf("  %-8s %-7s %-9s %6d %6d  %6.1f TF %6.1f TF  %6.1f %% %6.1f us\n",
                        r["shape"].get<std::string>().c_str(), r["routing"].get<std::string>().c_str(),
                        r["direction"].get<std::string>().c_str(), r["in"].get<int>(), r["out"].get<int>(),
                        r["grouped_tflops"].get<double>(), r["dense_tflops"].get<double>(),
                        100.0 * r["ratio"].get<double>(), 1e3 * r["grouped_ms"].get<double>());
        std::printf("  target: grouped at least 60 %% of the dense rate (TF = TFLOP/s)\n");
        if (!o.json_path.empty()) write_json_file(o.json_path, g);
        return 0;
    }
    if (o.fp8_gemm) {
        require_cuda("tandem-cli bench --fp8-gemm");
        json g;
        g["system"] = "tandem";
        g["benchmark"] = "fp8_gemm";
        g["device"] = device_name();
        g["rows"] = fp8_gemm_bench();
        std::printf("base GEMMs, bf16 vs FP8 (block-scaled E4M3, fp32 accumulation) on %s; ms per call\n",
                    g["device"].get<std::string>().c_str());
        std::printf("  %-13s %-8s %-14s %6s %6s %6s  %7s %7s %7s %7s %7s  %6s %6s\n", "model", "shape", "direction",
                    "rows", "in", "out", "bf16", "quant", "transp", "fp8mm", "fp8", "x", "x mm");
        for (const auto& r : g["rows"])
            std::printf("  %-13s %-8s %-14s %6d %6d %6d  %7.3f %7.3f %7.3f %7.3f %7.3f  %6.2f %6.2f\n",
                        r["model"].get<std::string>().c_str(), r["shape"].get<std::string>().c_str(),
                        r["direction"].get<std::string>().c_str(), r["rows"].get<int>(), r["in"].get<int>(),
                        r["out"].get<int>(), r["bf16_ms"].get<double>(), r["quantize_ms"].get<double>(),
                        r["transpose_ms"].get<double>(), r["fp8_gemm_ms"].get<double>(),
                        r["fp8_total_ms"].get<double>(), r["speedup"].get<double>(), r["gemm_speedup"].get<double>());
        if (!o.json_path.empty()) write_json_file(o.json_path, g);
        return 0;
    }
    if (o.config.empty()) throw_invalid("bench: --config is required (one of the architecture presets)");
    // The preset's config.json (IsMember checked the name), with --layers applied, parsed like a download.
    nlohmann::json model_json = *architecture_preset_json(o.config);
    const int64_t preset_layers = model_json.at("num_hidden_layers").get<int64_t>();
    if (o.layers < 0) throw_invalid("--layers must be 0 (the preset's) or a layer count");
    if (o.layers > 0) {
        model_json["num_hidden_layers"] = o.layers;
        auto& types = model_json["layer_types"];  // one entry per layer (gpt-oss): the first ones kept
        if (types.is_array() && int64_t(types.size()) > o.layers) types.erase(types.begin() + o.layers, types.end());
    }
    if (o.max_position > 0) model_json["max_position_embeddings"] = o.max_position;  // checked by the CLI
    const ModelConfig config = parse_model_config(
        model_json, "preset " + o.config + (o.layers > 0 ? " with --layers " + std::to_string(o.layers) : "") +
                        (o.max_position > 0 ? " with --max-position " + std::to_string(o.max_position) : ""));
    const bool moe = config.num_experts > 0;
    if (!moe && o.moe_routing != "sort")
        throw_invalid("--moe-routing " + o.moe_routing + ": " + o.config + " is not a mixture-of-experts model");
    if (o.seq_len < 2) throw_invalid("--seq-len must be at least 2 (got " + std::to_string(o.seq_len) + ")");
    if (o.batch_tokens < o.seq_len)
        throw_invalid("--batch-tokens (" + std::to_string(o.batch_tokens) + ") must be at least --seq-len (" +
                      std::to_string(o.seq_len) + ")");
    if (o.steps < 1) throw_invalid("--steps must be at least 1");
    if (o.warmup < 0) throw_invalid("--warmup must not be negative");
    LoraConfig lora;  // the default seven names (an MoE model: attention + the experts), dropout 0
    lora.r = o.rank;
    lora.alpha = o.alpha;
    validate_lora_config(lora, "bench");
    const std::vector<std::string> lora_targets = resolve_lora_targets(config, lora).target_modules;

    require_cuda("tandem-cli bench");

    CudaModelOptions options;
    options.max_tokens = o.batch_tokens;
    options.max_seqlen = o.seq_len;
    options.checkpointing = *parse_checkpoint_policy(o.checkpointing);  // IsMember checked the name
    options.attention = o.attention == "cudnn"     ? AttentionBackend::Cudnn
                        : o.attention == "inhouse" ? AttentionBackend::Inhouse
                                                    : AttentionBackend::Auto;
    options.quantize_4bit = o.quantization == "nf4";
    options.fp8 = o.precision == "fp8";
    options.moe_routing_loop = o.moe_routing == "loop";
    options.mlp_kept_layers = o.keep_mlp_layers;
    options.mlp_offloaded_layers = o.offload_mlp_layers;
    options.fp8_transposed = o.fp8_transposed;
    if (o.vram_budget > 0) cuda::set_device_memory_limit(uint64_t(o.vram_budget * double(uint64_t(1) << 30)));
    const CudaMemoryPlan plan = CudaModel::plan(config, lora, options);
    options.rebuild_metadata_per_layer = o.rebuild_metadata;
    options.timeline = !o.timeline_path.empty();
    options.cuda_graphs = o.cuda_graphs == "on";
    if (o.min_seq_len < 0 || o.min_seq_len > o.seq_len)
        throw_invalid("--min-seq-len must be in [0, --seq-len]");
    const auto lengths = o.min_seq_len > 0 ? varied_lengths(o.batch_tokens, o.min_seq_len, o.seq_len)
                                            : sample_lengths(o.batch_tokens, o.seq_len);
    const FlopCount flops = model_flops(config, lora, lengths);

    json j;
    j["system"] = "tandem";
    j["config"] = o.config;
    j["device"] = device_name();
    j["layers"] = config.num_hidden_layers;
    j["layers_preset"] = preset_layers;
    j["max_position_embeddings"] = config.max_position_embeddings;
    j["parameters"] = config.parameter_count();
    j["active_parameters"] = config.active_parameter_count();
    j["experts"] = config.num_experts;
    j["experts_per_token"] = config.num_experts_per_tok;
    j["moe_routing"] = moe ? o.moe_routing : "none";
    j["lora_targets"] = lora_targets;
    j["lora_parameters"] = int64_t(flops.lora_trainable);
    j["lora_parameters_active"] = int64_t(flops.lora_params);
    j["gemm_parameters_per_token"] = int64_t(flops.frozen_params);  // P_lin
    j["lora_r"] = lora.r;
    j["lora_alpha"] = lora.alpha;
    j["batch_tokens"] = o.batch_tokens;
    j["seq_len"] = o.seq_len;
    j["samples"] = lengths.size();
    j["checkpointing"] = o.checkpointing;
    j["keep_mlp_layers"] = o.keep_mlp_layers;
    j["offload_mlp_layers"] = o.offload_mlp_layers;
    j["fp8_transposed"] = o.fp8_transposed;
    j["quantization"] = o.quantization;
    j["precision"] = o.precision;
    j["vram_budget_gib"] = o.vram_budget;
    j["cuda_graphs_requested"] = o.cuda_graphs;
    j["attention_requested"] = o.attention;
    j["warmup"] = o.warmup;
    j["steps"] = o.steps;
    j["plan"] = plan_json(plan);
    // On OOM the JSON still says what was tried (gpu_bench.sh puts "OOM" in its table), then the error
    // goes to main (exit 3).
    auto on_oom = [&](const Error& e) {
        j["oom"] = true;
        j["error"] = e.what();
        if (!o.json_path.empty()) write_json_file(o.json_path, j);
    };

    // Batches are made before timing; a few distinct ones, cycled.
    const int n_batches = std::min(o.steps + o.warmup, 4);
    std::vector<PackedBatch> batches;
    for (int i = 0; i < n_batches; ++i)
        batches.push_back(random_batch(lengths, config.vocab_size, 1000 + uint64_t(i)));

    std::vector<int> devices = o.devices;
    if (devices.size() == 1 && devices[0] == -1) {  // --devices all
        devices.clear();
        for (int d = 0; d < cuda::device_count(); ++d) devices.push_back(d);
    }
    if (devices.size() > 1) {
        try {
            return run_data_parallel_bench(o, devices, config, lora, options, batches, j);
        } catch (const Error& e) {
            if (e.category() == ErrorCategory::OutOfMemory) on_oom(e);
            throw;
        }
    }

    const DeviceMemory before = device_memory();
    reset_peak_allocated();
    std::vector<double> step_ms, fwd_ms, bwd_ms, opt_ms, losses;
    DeviceMemory after;
    uint64_t peak_alloc = 0;
    CudaMemoryPlan held;
    std::string attention_backend;
    double host_syncs = 0, wall_step_ms = 0;
    std::vector<TimelineSpan> timeline;
    CudaGraphStats graph_stats;
    try {
        CudaModel model = CudaModel::random(config, lora, /*seed=*/1, /*weight_seed=*/2, options);
        attention_backend = model.attention_backend_name();
        std::fprintf(stderr, "bench: %s loaded (%s attention); %d warmup + %d timed steps\n", o.config.c_str(),
                     attention_backend.c_str(), o.warmup, o.steps);
        auto queue = [&](int s) {
            const PackedBatch& batch = batches[size_t(s % n_batches)];
            model.zero_grads();
            model.forward_backward_async(batch, 1.0f / float(batch.num_label_tokens), uint64_t(s));
            model.optimizer_step_async(1e-4, 0.9, 0.999, 1e-8, 0.0, 1.0, s + 1);
        };
        int collected = 0;
        auto collect = [&](bool timed) {
            const CudaModel::StepReadback r = model.collect_step();
            const PackedBatch& batch = batches[size_t(collected % n_batches)];
            losses.push_back(r.loss_sum / double(batch.num_label_tokens));
            ++collected;
            if (!timed) return;
            fwd_ms.push_back(r.timing.forward_ms);
            bwd_ms.push_back(r.timing.backward_ms);
            opt_ms.push_back(r.timing.optimizer_ms);
        };
        TimedSteps timed = time_steps(o, queue, collect, [&] { return model.queued_steps(); });
        step_ms = std::move(timed.step_ms);
        host_syncs = timed.host_syncs;
        wall_step_ms = timed.wall_step_ms;
        graph_stats = model.graph_stats();
        attention_backend = model.attention_backend_name();  // the timed batches' pick (a window, sinks: in-house)
        if (options.timeline) {
            const PackedBatch& batch = batches[0];
            model.zero_grads();
            model.forward_backward(batch, 1.0f / float(batch.num_label_tokens), 0);
            timeline = model.timeline();
        }
        after = device_memory();
        peak_alloc = peak_allocated();
        held = model.memory();
    } catch (const Error& e) {
        if (e.category() == ErrorCategory::OutOfMemory) on_oom(e);
        throw;
    }
    // The model is freed here; the peak GEMM runs on an empty GPU.
    const double peak = measure_peak_bf16_flops();

    const double step = wall_step_ms, fwd = mean(fwd_ms), bwd = mean(bwd_ms), opt = mean(opt_ms);
    const double other = step - fwd - bwd - opt;
    const double tokens_per_s = double(o.batch_tokens) / (step * 1e-3);
    const double achieved = flops.total() / (step * 1e-3);
    const double mfu = achieved / peak;
    const double ratio_used = plan.total ? double(after.used) / double(plan.total) : 0.0;
    const uint64_t plan_alloc = plan.total - plan.context;
    const double ratio_alloc = plan_alloc ? double(peak_alloc) / double(plan_alloc) : 0.0;

    j["oom"] = false;
    j["attention_backend"] = attention_backend;
    j["tokens_per_s"] = tokens_per_s;
    j["steps_per_s"] = 1e3 / step;
    j["step_ms"] = {{"mean", step}, {"median", median(step_ms)},
                    {"min", *std::min_element(step_ms.begin(), step_ms.end())},
                    {"max", *std::max_element(step_ms.begin(), step_ms.end())}};
    j["forward_ms"] = fwd;
    j["backward_ms"] = bwd;
    j["optimizer_ms"] = opt;
    j["other_ms"] = other;
    j["host_syncs_per_step"] = host_syncs;
    j["cuda_graphs"] = {{"requested", o.cuda_graphs},
                        {"eager_micro_batches", graph_stats.eager},
                        {"captured", graph_stats.captures},
                        {"replayed", graph_stats.replays},
                        {"cached", graph_stats.cached},
                        {"capture_ms_total", graph_stats.capture_ms},
                        {"disabled_reason", graph_stats.disabled_reason}};
    j["rebuild_metadata_per_layer"] = o.rebuild_metadata;
    j["sample_lengths"] = lengths;
    j["model_flops_per_step"] = flops.total();
    j["model_flops_per_token"] = flops.total() / double(o.batch_tokens);
    j["model_flops_forward"] = flops.forward;
    j["model_flops_backward"] = flops.backward;
    j["achieved_flops_per_s"] = achieved;
    j["peak_bf16_gemm_flops_per_s"] = peak;
    j["mfu"] = mfu;
    j["memory"] = {{"peak_allocated_bytes", peak_alloc},
                   {"device_used_bytes", after.used},
                   {"device_used_before_bytes", before.used},
                   {"device_total_bytes", after.total},
                   {"held", plan_json(held)},
                   {"ratio_device_used_vs_plan", ratio_used},
                   {"ratio_allocated_vs_plan", ratio_alloc}};
    j["peak_gib"] = double(peak_alloc) / kGiB;
    j["device_used_gib"] = double(after.used) / kGiB;
    j["loss_first"] = losses.front();
    j["loss_last"] = losses.back();
    j["model_config"] = model_json;

    std::printf("tandem bench: %s (%.3fB parameters), LoRA r=%d alpha=%g on %s (%.2fM trainable)\n",
                o.config.c_str(), double(config.parameter_count()) / 1e9, lora.r, lora.alpha,
                join(lora_targets).c_str(), flops.lora_trainable / 1e6);
    std::printf("  layers          %lld (preset), %lld used\n", static_cast<long long>(preset_layers),
                static_cast<long long>(config.num_hidden_layers));
    if (moe)
        std::printf("  experts         %lld, %lld per token; %.3fB active parameters (%.2fM LoRA per token); "
                    "routing %s\n",
                    static_cast<long long>(config.num_experts), static_cast<long long>(config.num_experts_per_tok),
                    double(config.active_parameter_count()) / 1e9, flops.lora_params / 1e6,
                    o.moe_routing == "loop" ? "loop (ablation: one GEMM per expert, host-read row counts)"
                                             : "sort (grouped GEMMs over device offsets)");
    std::printf("  device          %s; attention %s\n", j["device"].get<std::string>().c_str(),
                attention_backend.c_str());
    std::printf("  batch           %d tokens = %zu samples of %d; checkpointing %s%s; base weights %s\n",
                o.batch_tokens, lengths.size(), o.seq_len, o.checkpointing.c_str(),
                o.keep_mlp_layers > 0 || o.offload_mlp_layers > 0
                    ? (" (MLP buffers kept in " + std::to_string(o.keep_mlp_layers) + " layers, offloaded in " +
                       std::to_string(o.offload_mlp_layers) + ")")
                          .c_str()
                    : "",
                o.quantization == "nf4"
                    ? (o.precision == "fp8" ? "4-bit nf4, dequantized to fp8 for block-scaled GEMMs" : "4-bit nf4")
                : o.precision == "fp8"
                    ? (o.fp8_transposed ? "fp8 (block-scaled GEMMs, transposes resident)" : "fp8 (block-scaled GEMMs)")
                    : "bf16");
    std::printf("  steps           %d warmup + %d timed\n", o.warmup, o.steps);
    std::printf("  throughput      %.0f tokens/s, %.3f steps/s\n", tokens_per_s, 1e3 / step);
    std::printf("  step            %8.2f ms mean (median %.2f, min %.2f, max %.2f)\n", step, median(step_ms),
                j["step_ms"]["min"].get<double>(), j["step_ms"]["max"].get<double>());
    const bool graphed = graph_stats.replays > 0;
    if (graphed) {
        std::printf("    fwd+bwd       %8.2f ms  (one CUDA graph per micro-batch: no forward/backward split)\n",
                    fwd + bwd);
    } else {
        std::printf("    forward       %8.2f ms\n", fwd);
        std::printf("    backward      %8.2f ms\n", bwd);
    }
    std::printf("    optimizer     %8.2f ms\n", opt);
    std::printf("    other         %8.2f ms  (upload, launch gaps, host waits)\n", other);
    std::printf("  host syncs      %.2f per step%s\n", host_syncs,
                o.rebuild_metadata ? " (ablation: metadata rebuilt in every layer)" : "");
    std::printf("  cuda graphs     %s: %lld micro-batches eager, %lld captured (%.1f ms host time), %lld replayed%s%s\n",
                o.cuda_graphs.c_str(), static_cast<long long>(graph_stats.eager),
                static_cast<long long>(graph_stats.captures), graph_stats.capture_ms,
                static_cast<long long>(graph_stats.replays),
                graph_stats.disabled_reason.empty() ? "" : "; turned off: ", graph_stats.disabled_reason.c_str());
    std::printf("  model FLOPs     %.2f TFLOP/step (fwd %.2f, bwd %.2f) -> %.1f TFLOP/s\n", flops.total() / 1e12,
                flops.forward / 1e12, flops.backward / 1e12, achieved / 1e12);
    std::printf("  peak bf16 GEMM  %.1f TFLOP/s (cuBLASLt 8192^3, measured)\n", peak / 1e12);
    std::printf("  MFU             %.1f %%%s\n", 100.0 * mfu, moe ? " (over active parameters)" : "");
    std::printf("  memory          peak allocated %s, device used %s (before load %s)\n", gib(peak_alloc).c_str(),
                gib(after.used).c_str(), gib(before.used).c_str());
    std::printf("  plan            %s total (weights %s, lora+optimizer %s, activations %s, workspace %s, "
                "context %s)\n",
                gib(plan.total).c_str(), gib(plan.weights).c_str(), gib(plan.lora_optimizer).c_str(),
                gib(plan.activations).c_str(), gib(plan.workspace).c_str(), gib(plan.context).c_str());
    std::printf("  measured/plan   device used %.3f, allocated %.3f\n", ratio_used, ratio_alloc);
    std::printf("  loss            %.4f first, %.4f last (random weights: about ln(vocab) = %.2f)\n",
                losses.front(), losses.back(), std::log(double(config.vocab_size)));
    if (!o.json_path.empty()) write_json_file(o.json_path, j);
    if (!o.timeline_path.empty()) write_timeline(o, j["device"].get<std::string>(), 1, timeline);
    return 0;
}

}  // namespace tandem
