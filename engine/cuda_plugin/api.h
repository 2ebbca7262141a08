// SPDX-FileCopyrightText: 2026 The Tandem developers
// SPDX-License-Identifier: GPL-3.0-or-later
// The CUDA backend as a plugin: the table of entry points that libtandem-cuda.so hands to the engine. Everything
// that touches the CUDA runtime, cuBLASLt or cuDNN (core/cuda, kernels/cuda, model/cuda_*, infer/cuda_*,
// train/cuda_*, testing/, this folder's plugin side) is built into that shared library, which links them; the
// executables hold the CPU engine and load the plugin on first use (cuda_plugin/loader.h), so they start where
// the CUDA libraries are missing, and run on the CPU.
// Decisions a reader must know:
//  - One extern "C" symbol, kEntrySymbol, returns the table. The table passes C++ types (std::string, RunConfig,
//    unique_ptr of the engine's interfaces) across, so the plugin must come from the same build as the
//    executable: the loader compares kAbiVersion, the Tandem version and a fingerprint of the sizes of the types
//    that cross (layout_fingerprint) before it uses any entry, and refuses another build's plugin with a reason.
//  - Bump kAbiVersion (and the symbol's suffix) whenever an entry is added, removed or changes its signature.
//  - Each entry is the plugin's definition of an engine function the CPU engine declares; the executables
//    define the same functions as forwarders (cuda_plugin/forward.cpp), so callers (Trainer::prepare,
//    ChatSession, the self-test, system_info, the CLI) do not know whether the backend is linked or loaded.
#pragma once

#include <cstdint>
#include <filesystem>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "cuda_plugin/bench.h"
#include "export/peft_adapter.h"
#include "infer/infer_model.h"
#include "model/cuda_model.h"
#include "tandem/run_config.h"
#include "tandem/selftest.h"
#include "tandem/system_info.h"
#include "train/backends.h"

namespace tandem::cuda_plugin {

inline constexpr uint32_t kAbiVersion = 2;
inline constexpr const char* kEntrySymbol = "tandem_cuda_plugin_v2";
inline constexpr const char* kFileName = "libtandem-cuda.so";

// The sizes of the types the entries pass, folded into one number: a plugin built from other sources than the
// executable (a struct grew) gives another value.
constexpr uint64_t layout_fingerprint() {
    const uint64_t sizes[] = {sizeof(std::string),          sizeof(SystemInfo),        sizeof(RunConfig),
                              sizeof(ModelConfig),          sizeof(LoraConfig),        sizeof(CudaModelOptions),
                              sizeof(CudaMemoryPlan),       sizeof(MemoryPlan),        sizeof(train::CudaPlanChoice),
                              sizeof(PeftAdapter),          sizeof(infer::InferOptions), sizeof(SelftestOptions),
                              sizeof(SelftestResult),       sizeof(CudaBenchOptions),  sizeof(PackedBatch),
                              sizeof(LoraParam),            sizeof(LoraTensors)};
    uint64_t h = 1469598103934665603ull;  // FNV-1a over the sizes
    for (const uint64_t s : sizes) h = (h ^ s) * 1099511628211ull;
    return (h ^ kAbiVersion) * 1099511628211ull;
}

struct Api {
    uint32_t abi_version = 0;          // kAbiVersion of the plugin's build
    const char* tandem_version = "";   // TANDEM_VERSION of the plugin's build
    uint64_t layout = 0;               // layout_fingerprint() of the plugin's build

    // The engine functions of the same names (model/cuda_model.h, train/backends.h, infer/cuda_infer.h,
    // tandem/selftest.h, cuda_plugin/bench.h, cuda_plugin/seam.h).
    bool (*backend_available)(std::string* reason) = nullptr;
    void (*system_info)(SystemInfo& info) = nullptr;
    CudaMemoryPlan (*plan)(const ModelConfig& config, const LoraConfig& lora, const CudaModelOptions& options) = nullptr;
    train::CudaPlanChoice (*choose_plan)(RunConfig& config, std::vector<std::string>& notes) = nullptr;
    std::unique_ptr<TrainableModel> (*load_model)(const RunConfig& config,
                                                  const std::optional<PeftAdapter>& init) = nullptr;
    std::unique_ptr<infer::InferModel> (*load_infer_model)(const std::filesystem::path& model_dir,
                                                           const infer::InferOptions& options) = nullptr;
    std::vector<SelftestResult> (*run_selftest)(const SelftestOptions& options,
                                                const std::function<void(const SelftestResult&)>& on_result) = nullptr;
    std::vector<std::string> (*selftest_case_names)() = nullptr;
    int (*run_bench)(const CudaBenchOptions& options) = nullptr;
    std::string (*nccl_unique_id)() = nullptr;
    std::unique_ptr<Communicator> (*nccl_communicator)(int world, int rank, const std::string& unique_id) = nullptr;
};

}  // namespace tandem::cuda_plugin

// The plugin's one exported symbol (named kEntrySymbol): its table, valid for the life of the process.
extern "C" __attribute__((visibility("default"))) const tandem::cuda_plugin::Api* tandem_cuda_plugin_v2();
