// SPDX-FileCopyrightText: 2026 The Tandem developers
// SPDX-License-Identifier: GPL-3.0-or-later
// The core of the CUDA backend (tandem::cuda), below every kernel: the bf16 type, error checks that turn
// CUDA / cuBLAS / cuDNN failures into tandem::Error, the per-thread device context (stream, cuBLASLt
// handle and workspace, cuDNN handle) that every op launches on, and the counted host syncs.
// Decisions a reader must know:
//  - Ops take the same arguments as their CPU twins (kernels/cpu) with bf16 activations; they never take a
//    stream: they run on context().stream, in order, so the model code reads like the CPU model.
//  - Device pointers are never checked for validity (that would need a sync); sizes are (TANDEM_KCHECK).
//  - Out-of-memory from any CUDA call becomes Error{OutOfMemory}; every other failure Error{Device}, with
//    the call, the file and the line. Host-side argument errors are Error{Internal} as on the CPU.
//  - Kernel launches are checked with cudaGetLastError (no sync); asynchronous faults surface at the next
//    synchronizing call of the step.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>

#include <cublasLt.h>
#include <cuda_bf16.h>
#include <cuda_runtime.h>
#include <cudnn.h>

#include "core/check.h"  // TANDEM_KCHECK, TANDEM_KCHECK_PTR
#include "tandem/error.h"

namespace tandem::cuda {

using bf16 = __nv_bfloat16;

[[noreturn]] void throw_cuda(cudaError_t e, const char* call, const char* file, int line);
[[noreturn]] void throw_cublas(cublasStatus_t s, const char* call, const char* file, int line);
[[noreturn]] void throw_cudnn(cudnnStatus_t s, const char* call, const char* file, int line);

#define TANDEM_CUDA_CHECK(call)                                                         \
    do {                                                                                \
        const cudaError_t tandem_e_ = (call);                                           \
        if (tandem_e_ != cudaSuccess) ::tandem::cuda::throw_cuda(tandem_e_, #call, __FILE__, __LINE__); \
    } while (0)
#define TANDEM_CUBLAS_CHECK(call)                                                       \
    do {                                                                                \
        const cublasStatus_t tandem_s_ = (call);                                        \
        if (tandem_s_ != CUBLAS_STATUS_SUCCESS) ::tandem::cuda::throw_cublas(tandem_s_, #call, __FILE__, __LINE__); \
    } while (0)
#define TANDEM_CUDNN_CHECK(call)                                                        \
    do {                                                                                \
        const cudnnStatus_t tandem_s_ = (call);                                         \
        if (tandem_s_ != CUDNN_STATUS_SUCCESS) ::tandem::cuda::throw_cudnn(tandem_s_, #call, __FILE__, __LINE__); \
    } while (0)
// After a <<<...>>> launch.
#define TANDEM_CUDA_LAUNCH_CHECK() TANDEM_CUDA_CHECK(cudaGetLastError())

// The device state every op uses. One per host thread that calls ops (the trainer's thread); created on
// first use for the current device by context().
struct Context {
    int device = 0;
    cudaStream_t stream = nullptr;         // the compute stream (non-blocking)
    cublasLtHandle_t lt = nullptr;
    void* lt_workspace = nullptr;          // cuBLASLt workspace (kLtWorkspaceBytes)
    size_t lt_workspace_bytes = 0;
    cudnnHandle_t cudnn = nullptr;         // bound to stream
    int sm_count = 0;
    int cc_major = 0, cc_minor = 0;
    size_t total_memory = 0;
    std::string name;                      // "NVIDIA H100 80GB HBM3"
};

inline constexpr size_t kLtWorkspaceBytes = size_t(32) << 20;

// The calling thread's context, created on first use on the thread's device (set_thread_device; 0 unless set):
// cudaSetDevice, stream, handles, workspace. Throws Error{Device} when there is no usable GPU ("no CUDA device:
// <driver message>").
Context& context();
// The device the calling thread's context is (or will be) created on: one worker thread per GPU sets its own
// before its first op. Error{InvalidInput} for a device that does not exist; Error{Internal} when the thread's
// context already lives on another device (reset_context() first).
void set_thread_device(int device);
int thread_device();
// CUDA devices present (0 without a driver).
int device_count();
// Lets `kernel` launch with `bytes` of dynamic shared memory (cudaFuncSetAttribute, needed above 48 KB) on the calling
// thread's device. The attribute is per device: set once per device and kernel (the threads of a data-parallel run
// each drive their own GPU), remembered per thread, so a launch pays a hash lookup.
void allow_dynamic_smem(const void* kernel, size_t bytes);
// Destroys the calling thread's context (handles, stream, workspace). The next context() makes a new one.
void reset_context();

// True when a CUDA device and a driver are present (never throws). reason receives the driver's message
// otherwise. Safe to call on machines without a driver.
bool device_available(std::string* reason = nullptr);

// Versions for --version / About: runtime, driver, cuDNN (cudnnGetVersion), cuBLASLt.
struct Versions {
    int runtime = 0, driver = 0;
    size_t cudnn = 0, cublaslt = 0;
};
Versions versions();

// Host syncs. Every call in the engine that blocks the host on the device goes through these three, and
// each call counts once in host_sync_count() (all threads), so tests can assert how many a training step
// has. Outside the count: library internals on a shape's first use (cuBLASLt heuristics, cuDNN plan
// building) and allocations, which happen only at load (nothing allocates inside a step).
void synchronize();                  // the compute stream is idle
void synchronize(cudaStream_t s);    // stream s is idle
void wait_event(cudaEvent_t e);      // the work before event e is done
uint64_t host_sync_count();

// Grid size for n elements at `threads` per block, n > 0.
inline unsigned grid_for(int64_t n, int threads) { return unsigned((n + threads - 1) / threads); }

}  // namespace tandem::cuda
