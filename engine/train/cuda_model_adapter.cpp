// SPDX-FileCopyrightText: 2026 The Tandem developers
// SPDX-License-Identifier: GPL-3.0-or-later
// The CUDA backend behind the trainer: CudaModelAdapter (the only code that touches CudaModel) and the
// device memory plan of a run (see backends.h).
// Decisions: Auto checkpointing takes the first of Off, Selective, Recompute, Smart, SmartSingle whose plan fits in 95%
// of the free device memory (the rest is headroom for the driver and fragmentation) and whose pinned host
// memory (every replica of this process together) fits in half of the available RAM, or memory.host_budget_gib;
// otherwise the run is refused before loading, with the numbers and what to change.
#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <map>
#include <set>
#include <string>

#include "model/cuda_model.h"
#include "model/plan.h"
#include "tandem/error.h"
#include "train/backends.h"
#include "train/communicator.h"
#include "train/cuda_data_parallel.h"

#if TANDEM_WITH_CUDA
#include "core/cuda/context.h"
#include "core/cuda/memory.h"
#include "core/cuda/utilization.h"
#include "train/cuda_communicators.h"
#include "train/data_parallel.h"
#endif

namespace tandem::train {

namespace {

#if TANDEM_WITH_CUDA
// CUDA graphs for the micro-step (CudaModelOptions::cuda_graphs): the engine's default unless the
// environment variable TANDEM_CUDA_GRAPHS is set: "0" turns them off, "1" on (anything else is ignored
// with a warning). An environment variable, not a RunConfig field: a switch for measuring and for working
// around a driver / cuDNN that cannot capture, not a setting of the run.
CudaModelOptions options_for(const RunConfig& c) {
    CudaModelOptions o;
    o.max_tokens = c.training.batch_tokens;
    o.max_seqlen = std::min(c.data.max_seq_len, c.training.batch_tokens);
    o.checkpointing = c.memory.checkpointing;
    o.attention = c.memory.attention == AttentionKernels::Inhouse ? AttentionBackend::Inhouse : AttentionBackend::Auto;
    o.quantize_4bit = c.quantization == Quantization::Nf4;
    o.fp8 = c.precision == Precision::Fp8;
    o.mlp_kept_layers = c.memory.mlp_kept_layers;
    o.mlp_offloaded_layers = c.memory.mlp_offloaded_layers;
    o.fp8_transposed = c.memory.fp8_transposed;
    if (const char* env = std::getenv("TANDEM_CUDA_GRAPHS")) {
        const std::string v = env;
        if (v == "0" || v == "1")
            o.cuda_graphs = v == "1";
        else
            std::fprintf(stderr, "tandem: TANDEM_CUDA_GRAPHS=%s ignored (use 0 or 1)\n", env);
    }
    return o;
}

MemoryPlan to_plan(const CudaMemoryPlan& p) {
    MemoryPlan m;
    m.weights = p.weights;
    m.lora_optimizer = p.lora_optimizer;
    m.activations = p.activations;
    m.workspace = p.workspace;
    m.overhead = p.context;
    m.total = p.total;
    m.pinned_host = p.pinned_host;
    return m;
}

// A rank's side of the device collectives: the communicator's sums for this model's global rank.
class RankAllReduce final : public DeviceAllReduce {
public:
    RankAllReduce(Communicator& comm, int rank) : comm_(comm), rank_(rank) {}
    void sum(float* data, size_t n, void* stream) override { comm_.all_reduce_sum_device(rank_, data, n, stream); }
    void sum(double* data, size_t n, void* stream) override { comm_.all_reduce_sum_device(rank_, data, n, stream); }

private:
    Communicator& comm_;
    int rank_;
};

class CudaModelAdapter final : public TrainableModel {
public:
    explicit CudaModelAdapter(CudaModel model) : model_(std::move(model)) {}
    const ModelConfig& model_config() const override { return model_.config(); }
    std::vector<LoraParam>& lora_params() override { return model_.lora_params(); }
    void zero_grads() override {
        model_.zero_grads();
        left_ = -1;
    }
    void begin_step(int micro_batches) override {
        model_.zero_grads();
        left_ = micro_batches;
    }
    bool attach_communicator(Communicator& comm, int rank) override {
        if (!comm.on_device()) return false;
        all_reduce_ = std::make_unique<RankAllReduce>(comm, rank);
        model_.set_all_reduce(all_reduce_.get());
        world_ = comm.size();
        return true;
    }
    void set_step_vote(double vote) override { model_.set_step_vote(vote); }
    double forward_backward(const PackedBatch& b, float grad_scale, uint64_t dropout_seed) override {
        return model_.forward_backward(b, grad_scale, dropout_seed);
    }
    double forward_loss(const PackedBatch& b) override { return model_.forward_loss(b); }
    void set_lora(const LoraTensors& t) override { model_.set_lora(t); }
    LoraTensors lora_tensors() override { return model_.lora_tensors(); }
    size_t weight_bytes() const override { return model_.memory().weights; }
    size_t lora_bytes() const override { return model_.memory().lora_optimizer; }
    size_t activation_bytes() const override { return model_.memory().activations; }
    double optimizer_step(const OptimizerStep& s) override {
        return model_.optimizer_step(s.lr, s.beta1, s.beta2, s.eps, s.weight_decay, s.max_grad_norm, s.step);
    }
    // The trainer's path: queued on the device, read back one step later (one host sync per step).
    void queue_forward_backward(const PackedBatch& b, float grad_scale, uint64_t dropout_seed) override {
        // One rank alone has nothing to overlap: its (empty) sums go at the update and its micro-batches stay graphed.
        if (all_reduce_ && world_ > 1 && left_ > 0 && --left_ == 0) model_.reduce_in_next_backward();
        model_.forward_backward_async(b, grad_scale, dropout_seed);
    }
    void queue_optimizer_step(const OptimizerStep& s) override {
        model_.optimizer_step_async(s.lr, s.beta1, s.beta2, s.eps, s.weight_decay, s.max_grad_norm, s.step);
    }
    StepResult collect_step() override {
        const CudaModel::StepReadback r = model_.collect_step();
        return {r.loss_sum, r.grad_norm, r.votes};
    }
    int queued_steps() const override { return model_.queued_steps(); }
    bool runs_ahead() const override { return true; }
    void sync_to_host() override { model_.sync_to_host(); }
    void sync_from_host() override { model_.sync_from_host(); }
    MemoryStats memory_stats() override {
        const CudaMemoryPlan p = model_.memory();
        MemoryStats m;
        m.weights = p.weights;
        m.lora_optimizer = p.lora_optimizer;
        m.activations = p.activations;
        m.workspace = p.workspace;
        size_t free_b = 0, total_b = 0;
        if (cudaMemGetInfo(&free_b, &total_b) != cudaSuccess) (void)cudaGetLastError();
        m.device_total = total_b;
        m.device_free = free_b;
        m.reserved = cuda::peak_allocated_bytes();  // our high-water mark on the device
        m.pinned_host = cuda::pinned_bytes();
        const int device = cuda::thread_device();
        m.gpus.push_back({device, uint64_t(total_b - free_b), uint64_t(total_b), m.reserved,
                          cuda::gpu_utilization_percent(device)});
        return m;
    }

    CudaModel& cuda_model() { return model_; }

private:
    CudaModel model_;
    std::unique_ptr<RankAllReduce> all_reduce_;  // data parallelism on the device (attach_communicator)
    int left_ = -1;  // micro-batches of the step still to come (-1: not told; the gradients go at the update)
    int world_ = 1;
};
#endif

}  // namespace

CudaPlanChoice choose_cuda_plan(RunConfig& config, std::vector<std::string>& notes) {
#if TANDEM_WITH_CUDA
    const ModelConfig mc = load_model_config(config.model);
    size_t free_b = 0, total_b = 0;
    // The runtime's primary context only: the memory estimate (estimate_memory, called from front-end worker
    // threads) must not build the per-thread engine context (cuBLASLt/cuDNN handles, workspace). Several GPUs:
    // every replica holds the whole plan, so the plan must fit the smallest share (a GPU's free memory over the
    // replicas it holds).
    const std::vector<int> devices = config.devices.empty() ? std::vector<int>{0} : config.devices;
    std::map<int, int> replicas;
    for (const int d : devices) ++replicas[d];
    int tightest = devices[0];
    {
        int current = 0;
        TANDEM_CUDA_CHECK(cudaGetDevice(&current));
        bool first = true;
        for (const auto& [dev, count] : replicas) {
            size_t f = 0, t = 0;
            TANDEM_CUDA_CHECK(cudaSetDevice(dev));
            const cudaError_t e = cudaMemGetInfo(&f, &t);
            (void)cudaSetDevice(current);
            TANDEM_CUDA_CHECK(e);
            f /= size_t(count);
            t /= size_t(count);
            if (first || f < free_b) {
                free_b = f;
                total_b = t;
                tightest = dev;
            }
            first = false;
        }
        if (devices.size() > 1)
            notes.push_back("memory: planned per replica for GPU " + std::to_string(tightest) + ", the smallest share (" +
                            gib(free_b) + " free" + (replicas[tightest] > 1 ? " of its memory for each of its " +
                                                                                 std::to_string(replicas[tightest]) + " replicas"
                                                                           : std::string()) + ")");
    }
    cudaDeviceProp prop{};
    TANDEM_CUDA_CHECK(cudaGetDeviceProperties(&prop, tightest));
    if (config.memory.vram_budget_gib > 0) {
        // A smaller card emulated: its size is the budget, with what is in use now already taken.
        const uint64_t b = uint64_t(config.memory.vram_budget_gib * double(uint64_t(1) << 30));
        const uint64_t used = total_b - free_b;
        if (b < total_b) {
            total_b = b;
            free_b = b > used ? b - used : 0;
            notes.push_back("memory: planning for a " + gib(b) + " GPU (vram_budget_gib)");
        }
    }
    const uint64_t budget = uint64_t(double(free_b) * 0.95);
    // Pinned memory cannot be swapped: smart checkpointing may take at most half of the host's available RAM, or
    // what memory.host_budget_gib says (up to 90% of it: the rest of the machine needs some).
    const HostMemory host = host_memory();
    const bool host_set = config.memory.host_budget_gib > 0;
    const uint64_t host_asked = uint64_t(config.memory.host_budget_gib * double(uint64_t(1) << 30));
    const uint64_t pinned_budget = host_set ? std::min(host_asked, host.available / 10 * 9) : host.available / 2;
    if (host_set && host_asked > pinned_budget)
        notes.push_back("memory: memory.host_budget_gib " + gib(host_asked) + " is more than 90% of the " +
                        gib(host.available) + " of RAM available; planning with " + gib(pinned_budget));
    auto plan_for = [&](CheckpointPolicy p, AttentionKernels a) {
        RunConfig c = config;
        c.memory.checkpointing = p;
        c.memory.attention = a;
        return CudaModel::plan(mc, config.lora, options_for(c));
    };
    const AttentionKernels attention = config.memory.attention;
    // Every replica of this process (--devices) pins its own block inputs: the budget is for all of them.
    const uint64_t host_replicas = uint64_t(devices.size());
    auto pinned_of = [&](const CudaMemoryPlan& p) { return p.pinned_host * host_replicas; };
    auto fits = [&](const CudaMemoryPlan& p) { return p.total <= budget && pinned_of(p) <= pinned_budget; };
    const bool is_auto = config.memory.checkpointing == CheckpointPolicy::Auto;
    // auto: the fastest policy that fits: off, then selective (recomputes only norms and the MLP's gate/up),
    // then recompute, then smart (block inputs in pinned host memory, double-buffered reload: as fast as
    // recompute when the copies hide), then smart-single (one device buffer less: the fallback when the
    // second reload buffer does not fit).
    const std::vector<CheckpointPolicy> order =
        is_auto ? std::vector<CheckpointPolicy>{CheckpointPolicy::Off, CheckpointPolicy::Selective,
                                                CheckpointPolicy::Recompute, CheckpointPolicy::Smart,
                                                CheckpointPolicy::SmartSingle}
                : std::vector<CheckpointPolicy>{config.memory.checkpointing};
    CudaMemoryPlan chosen;
    if (is_auto) {
        const CudaMemoryPlan off = plan_for(CheckpointPolicy::Off, attention);
        config.memory.checkpointing = CheckpointPolicy::SmartSingle;
        for (CheckpointPolicy p : order) {
            chosen = p == CheckpointPolicy::Off ? off : plan_for(p, attention);
            config.memory.checkpointing = p;
            if (fits(chosen)) break;
        }
        const std::string name(checkpoint_policy_name(config.memory.checkpointing));
        if (config.memory.checkpointing == CheckpointPolicy::Off)
            notes.push_back("checkpointing: auto chose 'off' (plan " + gib(off.total) + ", " + gib(free_b) +
                            " free on the GPU)");
        else
            notes.push_back("checkpointing: auto chose '" + name + "': keeping every activation would need " +
                            gib(off.total) + ", " + gib(free_b) + " are free; '" + name + "' needs " +
                            gib(chosen.total) +
                            (chosen.pinned_host ? " on the GPU + " + gib(chosen.pinned_host) + " pinned host memory (" +
                                                      gib(host.available) + " available)"
                                                : std::string()));
    } else {
        chosen = plan_for(config.memory.checkpointing, attention);
    }
    if (!fits(chosen) && attention == AttentionKernels::Auto) {
        // cuDNN's backward workspace (fp32 dQ, and dK / dV expanded to every query head for grouped-query
        // attention) grows with the tokens; the in-house kernels need 4 bytes per token and head. The policies
        // again, in the same order, with the in-house kernels.
        const CudaMemoryPlan with_cudnn = chosen;
        for (CheckpointPolicy p : order) {
            const CudaMemoryPlan q = plan_for(p, AttentionKernels::Inhouse);
            if (fits(q)) {
                chosen = q;
                config.memory.checkpointing = p;
                config.memory.attention = AttentionKernels::Inhouse;
                notes.push_back("attention: the in-house kernels (cuDNN's backward workspace would need " +
                                gib(with_cudnn.workspace - q.workspace) + " more; checkpointing '" +
                                std::string(checkpoint_policy_name(p)) + "' fits in " + gib(chosen.total) + ")");
                break;
            }
        }
    }
    // Selective with memory to spare: as many layers as fit keep their MLP buffers (no gate / up GEMMs again in
    // their backward), each one closer to 'off' (plan.h mlp_kept_layers_that_fit).
    config.memory.mlp_kept_layers = 0;
    config.memory.mlp_offloaded_layers = 0;
    if (fits(chosen) && config.memory.checkpointing == CheckpointPolicy::Selective) {
        const Dims d = make_dims(mc, config.lora, config.training.batch_tokens, 0, 64);
        auto with = [&](int k) {
            RunConfig c = config;
            c.memory.mlp_kept_layers = k;
            return CudaModel::plan(mc, config.lora, options_for(c));
        };
        const int k = mlp_kept_layers_that_fit(d, CheckpointPolicy::Selective, budget, [&](int n) {
            const CudaMemoryPlan p = with(n);
            return pinned_of(p) <= pinned_budget ? p.total : ~uint64_t(0);
        });
        if (k > 0) {
            config.memory.mlp_kept_layers = k;
            chosen = with(k);
            notes.push_back("checkpointing: 'selective' keeps the MLP buffers of " + std::to_string(k) + " of " +
                            std::to_string(d.L) + " layers (" + gib(chosen.total) + " planned)");
        }
        // The layers left (but the last) recompute gate / up in backward. A share of them (kMlpOffloadShare) can
        // send gate / up to pinned host memory instead, through two device slots that cost about what two kept
        // layers cost: taken when it leaves more layers without the recompute than keeping alone does.
        const int chunk = mlp_chunk_rows();
        if (!(chunk > 0 && d.T > chunk) && d.E == 0) {
            auto offloaded_for = [&](int kept) {
                return std::max(d.L - 1 - kept, 0) * kMlpOffloadShareNum / kMlpOffloadShareDen;
            };
            auto with_offload = [&](int kept) {
                RunConfig c = config;
                c.memory.mlp_kept_layers = kept;
                c.memory.mlp_offloaded_layers = offloaded_for(kept);
                return CudaModel::plan(mc, config.lora, options_for(c));
            };
            int best = -1;  // the most layers kept with the slots and host memory fitting
            for (int kept = k; kept >= 0 && best < 0; --kept) {
                const CudaMemoryPlan p = with_offload(kept);
                if (p.total <= budget && pinned_of(p) <= pinned_budget) best = kept;
            }
            if (best >= 0 && offloaded_for(best) > 2 && best + offloaded_for(best) > k) {
                config.memory.mlp_kept_layers = best;
                config.memory.mlp_offloaded_layers = offloaded_for(best);
                chosen = with_offload(best);
                notes.push_back("checkpointing: 'selective' keeps the MLP buffers of " + std::to_string(best) + " of " +
                                std::to_string(d.L) + " layers on the GPU and offloads those of " +
                                std::to_string(offloaded_for(best)) + " more to pinned host memory (" +
                                gib(chosen.total) + " planned on the GPU + " + gib(chosen.pinned_host) + " pinned)");
            }
        }
    }
    // FP8 with memory still to spare: the weights' transposes made once at load instead of before every
    // input-gradient GEMM (a weight's worth of bytes for a few percent of the step; after the MLP buffers, which
    // buy more per byte).
    config.memory.fp8_transposed = false;
    if (fits(chosen) && config.precision == Precision::Fp8 && config.quantization != Quantization::Nf4 &&
        !mc.quantization.four_bit) {  // 4-bit weights are transposed as they are dequantized
        RunConfig c = config;
        c.memory.fp8_transposed = true;
        const CudaMemoryPlan t = CudaModel::plan(mc, config.lora, options_for(c));
        if (fits(t)) {
            config.memory.fp8_transposed = true;
            chosen = t;
            notes.push_back("precision fp8: the weights' transposes stay on the GPU (" + gib(t.total) + " planned)");
        }
    }
    if (config.precision == Precision::Fp8 && mc.hidden_size > 0 && mc.hidden_size < kFp8GainHiddenSize)
        notes.push_back("precision fp8: at hidden size " + std::to_string(mc.hidden_size) +
                        " FP8 brings little (measured on an H200: as fast as bf16 at 1024, slower with 4-bit weights; "
                        "1.3x at 4096): precision bf16 trains this model as fast");
    CudaPlanChoice out;
    out.memory = to_plan(chosen);
    out.memory.device_total = total_b;
    out.memory.device_free = free_b;
    if (chosen.total > budget) {
        std::string advice = "lower training.batch_tokens (now " + std::to_string(config.training.batch_tokens) + ")";
        if (config.memory.checkpointing == CheckpointPolicy::Off) advice += ", use checkpointing 'recompute' or 'auto'";
        advice += ", or lower data.max_seq_len (now " + std::to_string(config.data.max_seq_len) + ")";
        out.fits = false;
        out.refusal = "the run does not fit on the GPU: it needs " + gib(chosen.total) + " (weights " +
                      gib(chosen.weights) + ", LoRA + optimizer " + gib(chosen.lora_optimizer) + ", activations " +
                      gib(chosen.activations) + ", workspace " + gib(chosen.workspace) + ", CUDA context " +
                      gib(chosen.context) + ") but " + gib(free_b) + " of " + gib(total_b) + " are free; " + advice;
    } else if (pinned_of(chosen) > pinned_budget) {
        out.fits = false;
        out.refusal = "checkpointing '" + std::string(checkpoint_policy_name(config.memory.checkpointing)) +
                      "' needs " + gib(pinned_of(chosen)) + " of pinned host memory" +
                      (host_replicas > 1 ? " (" + std::to_string(host_replicas) + " replicas)" : std::string()) +
                      " but may pin " + gib(pinned_budget) + " (" + gib(host.available) + " of RAM available; " +
                      (host_set ? "memory.host_budget_gib"
                                : "half of it by default: memory.host_budget_gib / "
                                  "--host-budget allows more") +
                      "); use checkpointing 'recompute' or 'auto', or lower training.batch_tokens";
    } else {
        notes.push_back("device: cuda (" + std::string(prop.name) + "), planned peak " + gib(chosen.total) + " of " +
                        gib(total_b));
    }
    return out;
#else
    (void)config;
    (void)notes;
    std::string reason;
    cuda_backend_available(&reason);
    throw_unsupported("device: cuda: " + reason);
#endif
}

#if TANDEM_WITH_CUDA
namespace {

// The transport of a data-parallel run over config.devices: NCCL when it loads and the GPUs are distinct, else the
// peer communicator; TANDEM_DP_TRANSPORT=nccl or peer forces one (for measuring; an environment variable like
// TANDEM_CUDA_GRAPHS, not a setting of the run).
std::unique_ptr<Communicator> device_communicator(const std::vector<int>& devices) {
    const char* env = std::getenv("TANDEM_DP_TRANSPORT");
    const std::string want = env ? env : "";
    if (!want.empty() && want != "nccl" && want != "peer")
        std::fprintf(stderr, "tandem: TANDEM_DP_TRANSPORT=%s ignored (use nccl or peer)\n", env);
    const bool distinct = std::set<int>(devices.begin(), devices.end()).size() == devices.size();
    std::string why;
    if (want == "nccl" || (want != "peer" && distinct && devices.size() > 1 && cuda::load_nccl(&why)))
        return std::make_unique<cuda::NcclCommunicator>(devices);
    return std::make_unique<cuda::PeerCommunicator>(devices);
}

}  // namespace
#endif

#if TANDEM_WITH_CUDA
std::unique_ptr<TrainableModel> cuda_data_parallel(const std::vector<int>& devices,
                                                   const std::function<std::unique_ptr<TrainableModel>(int)>& make) {
    for (const int d : devices)
        if (d < 0 || d >= cuda::device_count())
            throw_invalid("devices: GPU " + std::to_string(d) + " does not exist (this machine has " +
                          std::to_string(cuda::device_count()) + "; tandem-cli --version lists them)");
    return std::make_unique<DataParallelModel>(
        [&](int r) {
            cuda::set_thread_device(devices[size_t(r)]);
            return make(r);
        },
        device_communicator(devices));
}

std::unique_ptr<TrainableModel> trainable_cuda_model(CudaModel model) {
    return std::make_unique<CudaModelAdapter>(std::move(model));
}

CudaModel* cuda_model_of(TrainableModel& model) {
    auto* a = dynamic_cast<CudaModelAdapter*>(&model);
    return a ? &a->cuda_model() : nullptr;
}
#endif

std::string nccl_unique_id() {
#if TANDEM_WITH_CUDA
    return cuda::NcclCommunicator::unique_id();
#else
    throw_unsupported("data parallelism on GPUs: this build has no CUDA backend");
#endif
}

std::unique_ptr<Communicator> nccl_communicator(int world, int rank, const std::string& unique_id) {
#if TANDEM_WITH_CUDA
    return std::make_unique<cuda::NcclCommunicator>(world, rank, unique_id);
#else
    (void)world;
    (void)rank;
    (void)unique_id;
    throw_unsupported("data parallelism on GPUs: this build has no CUDA backend");
#endif
}

std::unique_ptr<TrainableModel> load_cuda_model(const RunConfig& config, const std::optional<PeftAdapter>& init) {
#if TANDEM_WITH_CUDA
    if (config.devices.size() > 1 || (config.devices.size() == 1 && config.devices[0] != 0)) {
        RunConfig one = config;
        one.devices.clear();
        return cuda_data_parallel(config.devices, [&](int) { return load_cuda_model(one, init); });
    }
    if (config.memory.vram_budget_gib > 0)  // the allocator refuses what a card of that size could not hold
        cuda::set_device_memory_limit(uint64_t(config.memory.vram_budget_gib * double(uint64_t(1) << 30)));
    CudaModel model = CudaModel::load(config.model, config.lora, config.seed, options_for(config));
    if (init) model.set_lora(init->tensors);
    return std::make_unique<CudaModelAdapter>(std::move(model));
#else
    (void)config;
    (void)init;
    throw_unsupported("device: cuda: this build has no CUDA backend; use --device cpu");
#endif
}

}  // namespace tandem::train
