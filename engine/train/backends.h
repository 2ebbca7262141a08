// SPDX-FileCopyrightText: 2026 The Tandem developers
// SPDX-License-Identifier: GPL-3.0-or-later
// The backends behind Trainer::prepare (engine-internal, train/prepare.cpp): each turns a resolved RunConfig
// into a TrainableModel. cpu_model_adapter.cpp holds the CPU one; cuda_model_adapter.cpp the CUDA one,
// including the memory plan that decides checkpointing and refuses runs that cannot fit (built into the CUDA
// plugin; the executables reach choose_cuda_plan and load_cuda_model through cuda_plugin/forward.cpp);
// resources.cpp the device choice, plan_cuda_run and the host's memory.
#pragma once

#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "export/peft_adapter.h"
#include "tandem/run_config.h"
#include "tandem/trainer.h"
#include "train/trainable_model.h"

namespace tandem {
class Communicator;  // train/communicator.h
}

namespace tandem::train {

// True when the CUDA backend is built and a usable GPU is present; reason says why not.
bool cuda_usable(std::string* reason);

// What Trainer::prepare and estimate_memory both resolve from config.json and the machine: max_seq_len capped
// at the model's max_position_embeddings (samples keep their head), and device auto -> cuda when usable,
// else cpu. notes receives each decision. Returns the model's config.json. Error{Unsupported} for device
// cuda without a usable GPU.
ModelConfig resolve_limits_and_device(RunConfig& config, std::vector<std::string>& notes);

// Resolves config.memory.checkpointing (Auto -> Off or Recompute) from the device plan, and returns the
// plan. Throws Error{OutOfMemory} before anything is loaded when no policy fits, saying what to change;
// Error{Unsupported} for policies this backend does not implement. notes receives the decision.
MemoryPlan plan_cuda_run(RunConfig& config, std::vector<std::string>& notes);

// The same decision without the refusal: fits is false (and refusal says why and what to change) when the
// chosen plan exceeds 95% of the free device memory, or its pinned host memory half of the available RAM.
struct CudaPlanChoice {
    MemoryPlan memory;
    bool fits = true;
    std::string refusal;
};
CudaPlanChoice choose_cuda_plan(RunConfig& config, std::vector<std::string>& notes);

// The machine's RAM: total and MemAvailable (/proc/meminfo; sysconf when it cannot be read).
struct HostMemory {
    uint64_t total = 0, available = 0;
};
HostMemory host_memory();

std::string gib(uint64_t bytes);  // "1.25 GiB"

// Loads the model on the CPU (fp32) for a resolved config; init: an adapter to start from.
std::unique_ptr<TrainableModel> load_cpu_model(const RunConfig& config, const std::optional<PeftAdapter>& init);

// Loads the model on the GPU for a config resolved by plan_cuda_run; init: an adapter to start from.
std::unique_ptr<TrainableModel> load_cuda_model(const RunConfig& config, const std::optional<PeftAdapter>& init);

// Data parallelism across processes on GPUs (tandem-cli train --device cuda --nodes; NCCL, loaded at run time by
// the CUDA plugin): a new NCCL unique id (node rank 0 makes it, the rendezvous carries it to the others), and this
// process's communicator as global rank `rank` of `world`, made on the calling thread, whose GPU it sums on (the
// thread that loaded the model). Error{Unsupported} naming why when NCCL cannot be loaded.
std::string nccl_unique_id();
std::unique_ptr<Communicator> nccl_communicator(int world, int rank, const std::string& unique_id);

}  // namespace tandem::train
