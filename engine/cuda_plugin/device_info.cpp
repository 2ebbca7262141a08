// SPDX-FileCopyrightText: 2026 The Tandem developers
// SPDX-License-Identifier: GPL-3.0-or-later
// The CUDA part of tandem::system_info (cuda_plugin/seam.h), inside the CUDA plugin: the device properties and
// library versions read directly; it does not create the engine's per-thread context (no handles, no workspace).
#include <cuda_runtime.h>
#include <cudnn.h>

#include <exception>
#include <string>

#include "core/cuda/context.h"
#include "cuda_plugin/seam.h"
#include "train/cuda_communicators.h"

namespace tandem {

namespace {

std::string cuda_version_text(int v) { return std::to_string(v / 1000) + "." + std::to_string((v % 1000) / 10); }

}  // namespace

void cuda_system_info(SystemInfo& s) {
    s.cuda_built = true;
    s.cuda_loaded = true;
    try {
        std::string reason;
        if (!cuda::device_available(&reason)) {
            s.gpu_unavailable_reason = reason;
            return;
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
            return;
        }
        s.gpu_usable = true;
        s.gpu_name = p.name;
        s.gpu_memory = p.totalGlobalMem;
        s.compute_capability = std::to_string(p.major) + "." + std::to_string(p.minor);
        s.gpu_fp8 = p.major == 9;
        for (int i = 0; i < cuda::device_count(); ++i) {
            cudaDeviceProp q{};
            if (cudaGetDeviceProperties(&q, i) != cudaSuccess) {
                (void)cudaGetLastError();
                continue;
            }
            s.gpus.push_back({i, q.name, q.totalGlobalMem, std::to_string(q.major) + "." + std::to_string(q.minor)});
        }
        std::string why;
        if (const cuda::NcclLibrary* nccl = cuda::load_nccl(&why))
            s.nccl = cuda::nccl_version(*nccl);
        else
            s.nccl_unavailable_reason = why;
    } catch (const std::exception& e) {
        s.gpu_usable = false;
        s.gpu_unavailable_reason = e.what();
    }
}

}  // namespace tandem
