// SPDX-FileCopyrightText: 2026 The Tandem developers
// SPDX-License-Identifier: GPL-3.0-or-later
// The executables' definitions of the CUDA backend's entry points (cuda_plugin/api.h): each forwards to the
// plugin, loaded on first use (cuda_plugin/loader.h); where it cannot be loaded, the entry answers as a machine
// without a usable GPU does, with the loader's reason: false, an empty list, or Error{Unsupported}. Linked into
// tandem_engine only, never into the plugin, which has the real definitions.
#include <string>

#include "cuda_plugin/api.h"
#include "cuda_plugin/loader.h"
#include "cuda_plugin/seam.h"
#include "infer/cuda_infer.h"
#include "tandem/error.h"
#include "train/communicator.h"

namespace tandem {

namespace {

// The plugin's table, or Error{Unsupported}: what was asked, the loader's reason, what to do instead.
const cuda_plugin::Api& api_or_throw(const std::string& what, const std::string& instead) {
    const cuda_plugin::Loaded& p = cuda_plugin::plugin();
    if (!p.api) throw_unsupported(what + p.reason + instead);
    return *p.api;
}

}  // namespace

bool cuda_backend_available(std::string* reason) {
    const cuda_plugin::Loaded& p = cuda_plugin::plugin();
    if (!p.api) {
        if (reason) *reason = p.reason;
        return false;
    }
    return p.api->backend_available(reason);
}

bool cuda_backend_built() { return cuda_plugin::built(); }

void cuda_system_info(SystemInfo& info) {
    info.cuda_built = cuda_plugin::built();
    const cuda_plugin::Loaded& p = cuda_plugin::plugin();
    info.cuda_plugin = p.path;
    if (!p.api) {
        info.gpu_unavailable_reason = p.reason;
        return;
    }
    p.api->system_info(info);
}

CudaMemoryPlan CudaModel::plan(const ModelConfig& config, const LoraConfig& lora, const CudaModelOptions& options) {
    return api_or_throw("memory plan: ", "").plan(config, lora, options);
}

std::vector<std::string> selftest_case_names() {
    const cuda_plugin::Loaded& p = cuda_plugin::plugin();
    return p.api ? p.api->selftest_case_names() : std::vector<std::string>{};
}

std::vector<SelftestResult> run_selftest(const SelftestOptions& options,
                                         const std::function<void(const SelftestResult&)>& on_result) {
    const cuda_plugin::Loaded& p = cuda_plugin::plugin();
    if (p.api) return p.api->run_selftest(options, on_result);
    if (options.device == "cpu")  // the same answers as the plugin's run_selftest for a device it does not check
        throw_invalid(
            "selftest: device 'cpu' has nothing to compare against (the CPU backend is the reference); "
            "use --device cuda");
    if (options.device != "cuda") throw_invalid("selftest: unknown device '" + options.device + "'; use cuda");
    throw_unsupported("selftest: the CUDA backend cannot run here: " + p.reason);
}

int run_cuda_bench(const CudaBenchOptions& options) {
    return api_or_throw("tandem-cli bench needs the CUDA backend: ", "").run_bench(options);
}

namespace train {

CudaPlanChoice choose_cuda_plan(RunConfig& config, std::vector<std::string>& notes) {
    return api_or_throw("device: cuda: ", "; use --device cpu").choose_plan(config, notes);
}

std::unique_ptr<TrainableModel> load_cuda_model(const RunConfig& config, const std::optional<PeftAdapter>& init) {
    return api_or_throw("device: cuda: ", "; use --device cpu").load_model(config, init);
}

std::string nccl_unique_id() {
    return api_or_throw("data parallelism on GPUs: ", "; use --device cpu").nccl_unique_id();
}

std::unique_ptr<Communicator> nccl_communicator(int world, int rank, const std::string& unique_id) {
    return api_or_throw("data parallelism on GPUs: ", "; use --device cpu").nccl_communicator(world, rank, unique_id);
}

}  // namespace train

namespace infer {

std::unique_ptr<InferModel> load_cuda_infer_model(const std::filesystem::path& model_dir, const InferOptions& options) {
    return api_or_throw(model_dir.string() + ": generation on CUDA: ", "; generate on the CPU (device cpu)").load_infer_model(model_dir, options);
}

}  // namespace infer

}  // namespace tandem
