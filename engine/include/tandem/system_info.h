// SPDX-FileCopyrightText: 2026 The Tandem developers
// SPDX-License-Identifier: GPL-3.0-or-later
// tandem::system_info — what this build and machine offer, for `tandem-cli --version` and the studio's About
// dialog: the Tandem version, the CUDA backend (a plugin, libtandem-cuda.so, loaded on first use: whether this
// build has it, whether it loaded and from where), and when a GPU is usable its name, memory, compute
// capability, the CUDA runtime and driver versions and cuDNN's. Never throws: what cannot be read is left empty
// and gpu_unavailable_reason says why (the plugin missing, a CUDA library it needs missing and the package that
// provides it, no driver, no GPU). Asking loads the plugin and creates the CUDA context of GPU 0.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace tandem {

struct SystemInfo {
    std::string version;                 // "0.1.0"
    bool cuda_built = false;             // this build has the CUDA backend (its plugin may still be missing here)
    bool cuda_loaded = false;            // the plugin loaded: the CUDA libraries it needs are present
    std::string cuda_plugin;             // the plugin's file, loaded or looked for ("" in a build without CUDA)
    bool gpu_usable = false;
    std::string gpu_unavailable_reason;  // when !gpu_usable
    std::string gpu_name;                // "NVIDIA H100 80GB HBM3"
    uint64_t gpu_memory = 0;             // bytes
    std::string compute_capability;      // "9.0"
    std::string cuda_runtime;            // "13.0"
    std::string cuda_driver;             // "13.0" (the newest CUDA the driver supports)
    std::string cudnn;                   // "9.14.0"
    bool gpu_fp8 = false;                // precision fp8 trains on this GPU (see fp8_unsupported_reason)
    // Every GPU CUDA sees, in CUDA's numbering (RunConfig::devices); the fields above describe GPU 0.
    struct Gpu {
        int index = 0;
        std::string name;
        uint64_t memory = 0;  // bytes
        std::string compute_capability;
    };
    std::vector<Gpu> gpus;
    // NCCL, which data parallelism over several GPUs uses when it is installed ("2.27.3"), else why not.
    std::string nccl;
    std::string nccl_unavailable_reason;
};

SystemInfo system_info();

// Whether this build has the CUDA backend, without loading it (a first guess for front ends until system_info
// answers: the plugin or its libraries may be missing on this machine).
bool cuda_backend_built();

// Why precision fp8 cannot train on this machine's GPU ("" when it can): FP8 training uses cuBLASLt's
// block-scaled FP8 GEMM (one scale per 128x128 weight block and per 1x128 activation tile), which NVIDIA
// provides for Hopper (compute capability 9.0). Ada (8.9) has FP8 tensor cores with per-tensor scales only,
// Blackwell (10.x, 12.x) block-scales through MXFP8; neither is supported yet, and older GPUs have no FP8.
std::string fp8_unsupported_reason(const SystemInfo& s);

// One line per item after the version, for --version: "Backend: CUDA" or "Backend: CPU: <why not CUDA>", then
// the plugin's file when it loaded, and the GPU and library versions when a GPU is usable.
std::string system_info_text(const SystemInfo& info);

}  // namespace tandem
