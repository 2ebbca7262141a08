// SPDX-FileCopyrightText: 2026 The Tandem developers
// SPDX-License-Identifier: GPL-3.0-or-later
// What a run needs from the machine: the device choice and the sequence-length cap (shared by
// Trainer::prepare and estimate_memory), the host's RAM, and tandem::estimate_memory — the memory a run will
// need, from config.json alone, resolved the way Trainer::prepare resolves it (device auto, checkpointing auto). For front ends that show a memory bar as the
// settings change: no weights are read, no data is tokenized.
// Decisions: on the CPU the plan is CpuModel::plan (fp32 weights, LoRA + AdamW, the activation arena) against
// MemAvailable; a run that needs more than 90% of it is marked as not fitting (the CPU backend would swap).
#include <unistd.h>

#include <cstdio>
#include <fstream>
#include <sstream>
#include <string>

#include "model/cuda_model.h"  // cuda_backend_available
#include "model/model.h"
#include "tandem/error.h"
#include "tandem/model_config.h"
#include "tandem/system_info.h"
#include "tandem/trainer.h"
#include "train/backends.h"

namespace tandem {

namespace train {

bool cuda_usable(std::string* reason) { return cuda_backend_available(reason); }

MemoryPlan plan_cuda_run(RunConfig& config, std::vector<std::string>& notes) {
    CudaPlanChoice c = choose_cuda_plan(config, notes);
    if (!c.fits) throw Error(ErrorCategory::OutOfMemory, c.refusal);
    return c.memory;
}

ModelConfig resolve_limits_and_device(RunConfig& config, std::vector<std::string>& notes) {
    ModelConfig mc = load_model_config(config.model);
    if (mc.max_position_embeddings > 0 && config.data.max_seq_len > mc.max_position_embeddings) {
        notes.push_back("data.max_seq_len " + std::to_string(config.data.max_seq_len) +
                        " is above the model's max_position_embeddings; using " +
                        std::to_string(mc.max_position_embeddings));
        config.data.max_seq_len = static_cast<int32_t>(mc.max_position_embeddings);
    }

    std::string no_cuda;
    if (config.device == DeviceChoice::Auto) {
        config.device = cuda_usable(&no_cuda) ? DeviceChoice::Cuda : DeviceChoice::Cpu;
        notes.push_back(config.device == DeviceChoice::Cuda ? "device: auto chose cuda"
                                                            : "device: auto chose cpu (" + no_cuda + ")");
    } else if (config.device == DeviceChoice::Cuda && !cuda_usable(&no_cuda)) {
        throw_unsupported("device: cuda: " + no_cuda + "; use --device cpu");
    }
    if (!config.devices.empty() && config.device != DeviceChoice::Cuda)
        throw_unsupported("devices: GPUs were chosen but there is no usable GPU (" + no_cuda + ")");
    if (config.devices.size() == 1 && config.devices[0] == -1) {
        const SystemInfo info = system_info();
        config.devices.clear();
        for (const SystemInfo::Gpu& g : info.gpus) config.devices.push_back(g.index);
        notes.push_back("devices: all chose " + std::to_string(config.devices.size()) + " GPU" +
                        (config.devices.size() == 1 ? "" : "s"));
        if (config.devices.size() <= 1) config.devices.clear();  // one GPU: the plain single-GPU path
    }
    return mc;
}

std::string gib(uint64_t b) {
    char buf[32];
    std::snprintf(buf, sizeof buf, "%.2f GiB", double(b) / double(1ull << 30));
    return buf;
}

HostMemory host_memory() {
    HostMemory h;
    std::ifstream in("/proc/meminfo");
    std::string line;
    while (std::getline(in, line)) {
        std::istringstream ss(line);
        std::string key;
        uint64_t kib = 0;
        ss >> key >> kib;
        if (key == "MemTotal:") h.total = kib * 1024;
        if (key == "MemAvailable:") h.available = kib * 1024;
    }
    if (h.total == 0) {
        const long pages = sysconf(_SC_PHYS_PAGES), page = sysconf(_SC_PAGE_SIZE);
        if (pages > 0 && page > 0) h.total = uint64_t(pages) * uint64_t(page);
    }
    if (h.available == 0) {
        const long pages = sysconf(_SC_AVPHYS_PAGES), page = sysconf(_SC_PAGE_SIZE);
        h.available = pages > 0 && page > 0 ? uint64_t(pages) * uint64_t(page) : h.total;
    }
    return h;
}

}  // namespace train

MemoryEstimate estimate_memory(const RunConfig& in) {
    validate_run_config(in);
    RunConfig config = in;
    std::vector<std::string> resolved;
    const ModelConfig mc = train::resolve_limits_and_device(config, resolved);
    MemoryEstimate e;
    e.device = config.device;

    if (config.device == DeviceChoice::Cuda) {
        std::vector<std::string> notes;  // the plan's decisions are the message
        train::CudaPlanChoice c = train::choose_cuda_plan(config, notes);
        e.memory = c.memory;
        e.fits = c.fits;
        e.checkpointing = config.memory.checkpointing;
        e.attention = config.memory.attention;
        std::string decisions;  // (the "device: ... planned peak" note repeats the numbers the estimate holds)
        for (const std::string& n : notes)
            if (n.rfind("device: ", 0) != 0) decisions += (decisions.empty() ? "" : "; ") + n;
        e.message = c.fits ? decisions : c.refusal;
        return e;
    }

    if (!mc.supported)
        throw Error(ErrorCategory::Unsupported,
                    config.model + ": " + mc.architecture + " is not supported yet: " + mc.unsupported_reason);
    const CheckpointPolicy policy =
        config.memory.checkpointing == CheckpointPolicy::Auto ? CheckpointPolicy::Off : config.memory.checkpointing;
    ModelConfig held = config.quantization == Quantization::Nf4 ? with_quantization(mc) : mc;
    if (config.precision == Precision::Fp8) held = with_fp8(std::move(held));
    const CpuModel::MemoryNeeds n = CpuModel::plan(held, config.lora, config.training.batch_tokens, policy);
    const train::HostMemory host = train::host_memory();
    e.checkpointing = policy;  // auto: off (RAM is what the CPU backend has plenty of)
    e.memory.weights = n.weights;
    e.memory.lora_optimizer = n.lora_optimizer;
    e.memory.activations = n.activations + n.workspace + n.pinned_host;  // as CpuModel::activation_bytes()
    e.memory.total = n.weights + n.lora_optimizer + e.memory.activations;
    e.memory.device_total = host.total;
    e.memory.device_free = host.available;
    const uint64_t budget = uint64_t(double(host.available) * 0.9);
    e.fits = e.memory.total <= budget;
    e.message = e.fits ? "device: cpu, planned " + train::gib(e.memory.total) + " of RAM (" +
                             train::gib(host.available) + " available)"
                       : "the run does not fit in RAM: it needs " + train::gib(e.memory.total) + " (weights " +
                             train::gib(n.weights) + ", activations " + train::gib(n.activations) + ") but " +
                             train::gib(host.available) + " are available; lower training.batch_tokens (now " +
                             std::to_string(config.training.batch_tokens) + ")";
    return e;
}

LongestContext longest_context(const RunConfig& in) {
    constexpr int64_t kStep = 64;
    const ModelConfig mc = load_model_config(in.model);
    const int64_t cap = std::max<int64_t>(kStep, mc.max_position_embeddings / kStep * kStep);
    auto at = [&](int64_t len) {
        RunConfig c = in;
        c.training.batch_tokens = int32_t(len);
        c.data.max_seq_len = int32_t(len);
        c.training.grad_accum = 1;
        return estimate_memory(c);
    };
    LongestContext best;
    // The estimate grows with the length: binary search over multiples of 64.
    int64_t lo = 0, hi = cap / kStep;  // lo fits (0: nothing yet), hi may not
    {
        MemoryEstimate e = at(hi * kStep);
        if (e.fits) return {hi * kStep, e};
    }
    while (hi - lo > 1) {
        const int64_t mid = (lo + hi) / 2;
        MemoryEstimate e = at(mid * kStep);
        if (e.fits) {
            lo = mid;
            best = {mid * kStep, std::move(e)};
        } else {
            hi = mid;
        }
    }
    return best;
}

}  // namespace tandem
