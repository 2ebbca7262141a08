// SPDX-FileCopyrightText: 2026 The Tandem developers
// SPDX-License-Identifier: GPL-3.0-or-later
// GPU utilization through NVML, loaded at run time (see utilization.h).
#include "core/cuda/utilization.h"

#include <cuda_runtime.h>
#include <dlfcn.h>

#include <map>
#include <mutex>

namespace tandem::cuda {

namespace {

// NVML's C ABI, as much as is used.
using NvmlReturn = int;  // nvmlReturn_t: 0 is NVML_SUCCESS
using NvmlDevice = void*;
struct NvmlUtilization {
    unsigned int gpu;     // percent of time a kernel ran
    unsigned int memory;  // percent of time device memory was read or written
};

struct Nvml {
    NvmlReturn (*init)() = nullptr;
    NvmlReturn (*by_pci_bus_id)(const char*, NvmlDevice*) = nullptr;
    NvmlReturn (*utilization)(NvmlDevice, NvmlUtilization*) = nullptr;
    bool ok = false;
};

const Nvml& nvml() {
    static const Nvml n = [] {
        Nvml l;
        void* h = dlopen("libnvidia-ml.so.1", RTLD_NOW | RTLD_LOCAL);
        if (!h) return l;
        l.init = reinterpret_cast<NvmlReturn (*)()>(dlsym(h, "nvmlInit_v2"));
        l.by_pci_bus_id =
            reinterpret_cast<NvmlReturn (*)(const char*, NvmlDevice*)>(dlsym(h, "nvmlDeviceGetHandleByPciBusId_v2"));
        l.utilization =
            reinterpret_cast<NvmlReturn (*)(NvmlDevice, NvmlUtilization*)>(dlsym(h, "nvmlDeviceGetUtilizationRates"));
        l.ok = l.init && l.by_pci_bus_id && l.utilization && l.init() == 0;
        return l;
    }();
    return n;
}

}  // namespace

int gpu_utilization_percent(int device) {
    const Nvml& n = nvml();
    if (!n.ok) return -1;
    static std::mutex m;
    static std::map<int, NvmlDevice> handles;  // CUDA index -> NVML device (nullptr: none found)
    NvmlDevice d = nullptr;
    {
        std::lock_guard<std::mutex> lock(m);
        auto it = handles.find(device);
        if (it == handles.end()) {
            char bus[32] = {};
            if (cudaDeviceGetPCIBusId(bus, sizeof bus, device) != cudaSuccess || n.by_pci_bus_id(bus, &d) != 0) {
                (void)cudaGetLastError();
                d = nullptr;
            }
            it = handles.emplace(device, d).first;
        }
        d = it->second;
    }
    NvmlUtilization u{};
    if (!d || n.utilization(d, &u) != 0) return -1;
    return int(u.gpu);
}

}  // namespace tandem::cuda
