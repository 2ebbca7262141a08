// SPDX-FileCopyrightText: 2026 The Tandem developers
// SPDX-License-Identifier: GPL-3.0-or-later
// The CUDA plugin's one exported symbol (cuda_plugin/api.h): the table of the plugin's own definitions of the
// CUDA backend's entry points. Everything else in libtandem-cuda.so is hidden (engine/CMakeLists.txt).
#include "cuda_plugin/api.h"
#include "cuda_plugin/seam.h"
#include "infer/cuda_infer.h"
#include "train/communicator.h"

namespace {

tandem::cuda_plugin::Api make_api() {
    using namespace tandem;
    cuda_plugin::Api a;
    a.abi_version = cuda_plugin::kAbiVersion;
    a.tandem_version = TANDEM_VERSION;
    a.layout = cuda_plugin::layout_fingerprint();
    a.backend_available = &cuda_backend_available;
    a.system_info = &cuda_system_info;
    a.plan = &CudaModel::plan;
    a.choose_plan = &train::choose_cuda_plan;
    a.load_model = &train::load_cuda_model;
    a.load_infer_model = &infer::load_cuda_infer_model;
    a.run_selftest = &run_selftest;
    a.selftest_case_names = &selftest_case_names;
    a.run_bench = &run_cuda_bench;
    a.nccl_unique_id = &train::nccl_unique_id;
    a.nccl_communicator = &train::nccl_communicator;
    return a;
}

}  // namespace

extern "C" const tandem::cuda_plugin::Api* tandem_cuda_plugin_v2() {
    static const tandem::cuda_plugin::Api api = make_api();
    return &api;
}
