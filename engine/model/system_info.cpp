// SPDX-FileCopyrightText: 2026 The Tandem developers
// SPDX-License-Identifier: GPL-3.0-or-later
// tandem::system_info (see tandem/system_info.h). The CUDA part is the CUDA plugin's (cuda_system_info,
// cuda_plugin/seam.h): loading it is the first use of the backend.
#include "tandem/system_info.h"

#include <cstdlib>

#include "cuda_plugin/seam.h"

namespace tandem {

SystemInfo system_info() {
    SystemInfo s;
    s.version = TANDEM_VERSION;
    cuda_system_info(s);
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
    std::string t = "Backend: " + (s.gpu_usable ? std::string("CUDA") : "CPU: " + s.gpu_unavailable_reason) + "\n";
    if (s.cuda_loaded) t += "CUDA backend: " + s.cuda_plugin + "\n";
    if (s.gpu_usable)
        t += "GPU: " + s.gpu_name + " (" + std::to_string(s.gpu_memory >> 20) + " MiB, compute capability " +
             s.compute_capability + ")\nCUDA runtime " + s.cuda_runtime + ", driver supports CUDA " + s.cuda_driver +
             ", cuDNN " + s.cudnn + "\n";
    if (s.gpus.size() > 1)
        for (const SystemInfo::Gpu& g : s.gpus)
            t += "GPU " + std::to_string(g.index) + ": " + g.name + " (" + std::to_string(g.memory >> 20) +
                 " MiB, compute capability " + g.compute_capability + ")\n";
    if (s.gpu_usable)
        t += s.nccl.empty() ? "NCCL: not found (" + s.nccl_unavailable_reason + "); several GPUs use the peer transport\n"
                            : "NCCL " + s.nccl + "\n";
    return t;
}

}  // namespace tandem
