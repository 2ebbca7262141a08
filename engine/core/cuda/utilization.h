// SPDX-FileCopyrightText: 2026 The Tandem developers
// SPDX-License-Identifier: GPL-3.0-or-later
// How busy a GPU is, as nvidia-smi reports it: NVML's utilization rate (the percent of the last sample period,
// 1/6 s to 1 s, during which a kernel ran), for the Monitor's per-GPU line.
// Decisions a reader must know:
//  - NVML comes with the driver (libnvidia-ml.so.1): loaded with dlopen on first use, never linked, so a machine
//    whose driver lacks it still trains; the handful of its functions used are declared here (NVML's stable C
//    ABI: nvmlInit_v2, nvmlDeviceGetHandleByPciBusId_v2, nvmlDeviceGetUtilizationRates).
//  - CUDA's index is mapped to NVML's device by PCI bus id (the two number GPUs differently when
//    CUDA_VISIBLE_DEVICES or CUDA_DEVICE_ORDER changes CUDA's order).
#pragma once

namespace tandem::cuda {

// The GPU's utilization in percent (0..100), or -1 when NVML or the device cannot tell. Thread-safe.
int gpu_utilization_percent(int device);

}  // namespace tandem::cuda
