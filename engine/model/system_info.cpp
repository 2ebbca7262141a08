// SPDX-FileCopyrightText: 2026 The Tandem developers
// SPDX-License-Identifier: GPL-3.0-or-later
// tandem::system_info (see tandem/system_info.h). The CUDA part reads the device properties and library
// versions directly; it does not create the engine's per-thread context (no handles, no workspace).
#include "tandem/system_info.h"

#include <cstdlib>
#include <exception>

#if TANDEM_WITH_CUDA
#include <cuda_runtime.h>
#include <cudnn.h>

#include "core/cuda/context.h"
#endif

namespace tandem {

namespace {

#if TANDEM_WITH_CUDA
std::string cuda_version_text(int v) { return std::to_string(v / 1000) + "." + std::to_string((v % 1000) / 10); }
#endif

}  // namespace

SystemInfo system_info() {
    SystemInfo s;
    s.version = TANDEM_VERSION;
#if TANDEM_WITH_CUDA
    s.cuda_built = true;
    try {
        std::string reason;
        if (!cuda::device_available(&reason)) {
            s.gpu_unavailable_reason = reason;
            return s;
        }
        int runtime = 0, driver = 0;
        if (cudaRuntimeGetVersion(&runtime) == cudaSuccess) s.cuda_runtime = cuda_version_text(runtime);
        if (cudaDriverGetVersion(&driver) == cudaSuccess) s.cuda_driver = cuda_version_text(driver);
        const size_t dnn = cudnnGetVersion();
        s.cudnn = std::to_string(dnn / 10000) + "." + std::to_string((dnn % 10000) / 100) + "." +
                  std::to_string(dnn % 100);
        cudaDeviceProp p{};
        if (cudaGetDeviceProperties(&p, 0) != cudaSuccess) {
            s.gpu_unavailable_reason = cudaGetErrorString(cudaGetLastError());
            return s;
        }
        s.gpu_usable = true;
        s.gpu_name = p.name;
        s.gpu_memory = p.totalGlobalMem;
        s.compute_capability = std::to_string(p.major) + "." + std::to_string(p.minor);
        s.gpu_fp8 = p.major == 9;
    } catch (const std::exception& e) {
        s.gpu_usable = false;
        s.gpu_unavailable_reason = e.what();
    }
#else
    s.gpu_unavailable_reason = "this build has no CUDA backend (built without nvcc/cuDNN)";
#endif
    return s;
}

std::string fp8_unsupported_reason(const SystemInfo& s) {
    if (!s.gpu_usable) return "no usable GPU (" + s.gpu_unavailable_reason + "); FP8 training needs an NVIDIA Hopper GPU";
    if (s.gpu_fp8) return "";
    const std::string gpu = s.gpu_name + " (compute capability " + s.compute_capability + ")";
    const int major = std::atoi(s.compute_capability.c_str());
    if (s.compute_capability == "8.9")
        return gpu + " has FP8 tensor cores, but cuBLASLt offers only per-tensor scales there, not the 128-wide block "
                     "scales Tandem's FP8 training needs; use precision bf16";
    if (major >= 10)
        return gpu + " scales FP8 blocks the MXFP8 way, which Tandem does not support yet; use precision bf16";
    return gpu + " has no FP8 tensor cores (they start with Hopper, compute capability 9.0); use precision bf16";
}

std::string system_info_text(const SystemInfo& s) {
    std::string t = std::string("CUDA backend: ") + (s.cuda_built ? "built in" : "not built") + "\n";
    if (s.gpu_usable) {
        t += "GPU: " + s.gpu_name + " (" + std::to_string(s.gpu_memory >> 20) + " MiB, compute capability " +
             s.compute_capability + ")\n";
        t += "CUDA runtime " + s.cuda_runtime + ", driver supports CUDA " + s.cuda_driver + ", cuDNN " + s.cudnn + "\n";
    } else {
        t += "GPU: not usable: " + s.gpu_unavailable_reason + "\n";
    }
    return t;
}

}  // namespace tandem
