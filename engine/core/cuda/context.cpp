// SPDX-FileCopyrightText: 2026 The Tandem developers
// SPDX-License-Identifier: GPL-3.0-or-later
// The device context and the error mapping of the CUDA backend (see context.h).
#include "core/cuda/context.h"

#include <atomic>
#include <memory>
#include <mutex>
#include <set>
#include <utility>

namespace tandem::cuda {

namespace {

std::string where(const char* call, const char* file, int line) {
    std::string f = file;
    const auto slash = f.find_last_of('/');
    if (slash != std::string::npos) f = f.substr(slash + 1);
    return std::string(call) + " (" + f + ":" + std::to_string(line) + ")";
}

}  // namespace

void throw_cuda(cudaError_t e, const char* call, const char* file, int line) {
    const std::string msg = std::string("CUDA error: ") + cudaGetErrorString(e) + " in " + where(call, file, line);
    if (e == cudaErrorMemoryAllocation) {
        (void)cudaGetLastError();  // clear the sticky-free error so the process stays usable
        throw Error(ErrorCategory::OutOfMemory, "out of GPU memory: " + msg);
    }
    throw Error(ErrorCategory::Device, msg);
}

void throw_cublas(cublasStatus_t s, const char* call, const char* file, int line) {
    const std::string msg = std::string("cuBLAS error: ") + cublasLtGetStatusString(s) + " in " + where(call, file, line);
    if (s == CUBLAS_STATUS_ALLOC_FAILED) throw Error(ErrorCategory::OutOfMemory, "out of GPU memory: " + msg);
    throw Error(ErrorCategory::Device, msg);
}

void throw_cudnn(cudnnStatus_t s, const char* call, const char* file, int line) {
    char detail[512] = {0};
    cudnnGetLastErrorString(detail, sizeof detail);
    std::string msg = std::string("cuDNN error: ") + cudnnGetErrorString(s) + " in " + where(call, file, line);
    if (detail[0]) msg += ": " + std::string(detail);
    if (s == CUDNN_STATUS_ALLOC_FAILED) throw Error(ErrorCategory::OutOfMemory, "out of GPU memory: " + msg);
    throw Error(ErrorCategory::Device, msg);
}

namespace {

struct ContextOwner {
    Context ctx;
    bool ready = false;
    ~ContextOwner() { destroy(); }
    void destroy() noexcept {
        if (!ready) return;
        if (ctx.cudnn) cudnnDestroy(ctx.cudnn);
        if (ctx.lt) cublasLtDestroy(ctx.lt);
        if (ctx.lt_workspace) cudaFree(ctx.lt_workspace);
        if (ctx.stream) cudaStreamDestroy(ctx.stream);
        ctx = Context{};
        ready = false;
    }
};

thread_local ContextOwner t_context;

}  // namespace

bool device_available(std::string* reason) {
    int n = 0;
    const cudaError_t e = cudaGetDeviceCount(&n);
    if (e != cudaSuccess) {
        (void)cudaGetLastError();
        if (reason) *reason = std::string("no usable CUDA driver/device: ") + cudaGetErrorString(e);
        return false;
    }
    if (n == 0) {
        if (reason) *reason = "no CUDA device found";
        return false;
    }
    cudaDeviceProp prop{};
    if (cudaGetDeviceProperties(&prop, 0) == cudaSuccess && prop.major < 8) {
        if (reason)
            *reason = std::string(prop.name) + " has compute capability " + std::to_string(prop.major) + "." +
                      std::to_string(prop.minor) + "; Tandem's CUDA backend needs 8.0 (Ampere) or newer for bf16";
        return false;
    }
    return true;
}

namespace {
thread_local int t_device = 0;
}

void allow_dynamic_smem(const void* kernel, size_t bytes) {
    if (bytes <= 48 * 1024) return;
    thread_local std::set<std::pair<int, const void*>> done;  // (device, kernel) pairs this thread has raised
    const int device = context().device;
    if (done.count({device, kernel})) return;
    TANDEM_CUDA_CHECK(cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, static_cast<int>(bytes)));
    done.insert({device, kernel});
}

int device_count() {
    int n = 0;
    return cudaGetDeviceCount(&n) == cudaSuccess ? n : 0;
}

void set_thread_device(int device) {
    const int n = device_count();
    if (device < 0 || device >= n)
        throw Error(ErrorCategory::InvalidInput, "CUDA device " + std::to_string(device) + " does not exist (this "
                                                 "machine has " + std::to_string(n) + ")");
    if (t_context.ready && t_context.ctx.device != device)
        throw Error(ErrorCategory::Internal, "set_thread_device(" + std::to_string(device) + "): this thread's context "
                                             "already lives on device " + std::to_string(t_context.ctx.device));
    t_device = device;
}

int thread_device() { return t_device; }

Context& context() {
    ContextOwner& o = t_context;
    if (o.ready) return o.ctx;
    std::string reason;
    if (!device_available(&reason)) throw Error(ErrorCategory::Device, reason);
    Context c;
    c.device = t_device;
    TANDEM_CUDA_CHECK(cudaSetDevice(c.device));
    cudaDeviceProp prop{};
    TANDEM_CUDA_CHECK(cudaGetDeviceProperties(&prop, c.device));
    c.sm_count = prop.multiProcessorCount;
    c.cc_major = prop.major;
    c.cc_minor = prop.minor;
    c.total_memory = prop.totalGlobalMem;
    c.name = prop.name;
    o.ctx = c;
    o.ready = true;  // from here destroy() releases whatever was created, also if a step below throws
    try {
        TANDEM_CUDA_CHECK(cudaStreamCreateWithFlags(&o.ctx.stream, cudaStreamNonBlocking));
        TANDEM_CUBLAS_CHECK(cublasLtCreate(&o.ctx.lt));
        TANDEM_CUDA_CHECK(cudaMalloc(&o.ctx.lt_workspace, kLtWorkspaceBytes));
        o.ctx.lt_workspace_bytes = kLtWorkspaceBytes;
        TANDEM_CUDNN_CHECK(cudnnCreate(&o.ctx.cudnn));
        TANDEM_CUDNN_CHECK(cudnnSetStream(o.ctx.cudnn, o.ctx.stream));
    } catch (...) {
        o.destroy();
        throw;
    }
    return o.ctx;
}

void reset_context() { t_context.destroy(); }

Versions versions() {
    Versions v;
    cudaRuntimeGetVersion(&v.runtime);
    cudaDriverGetVersion(&v.driver);
    v.cudnn = cudnnGetVersion();
    v.cublaslt = cublasLtGetVersion();
    return v;
}

namespace {
std::atomic<uint64_t> g_host_syncs{0};
}

void synchronize() { synchronize(context().stream); }

void synchronize(cudaStream_t s) {
    g_host_syncs.fetch_add(1, std::memory_order_relaxed);
    TANDEM_CUDA_CHECK(cudaStreamSynchronize(s));
}

void wait_event(cudaEvent_t e) {
    g_host_syncs.fetch_add(1, std::memory_order_relaxed);
    TANDEM_CUDA_CHECK(cudaEventSynchronize(e));
}

uint64_t host_sync_count() { return g_host_syncs.load(std::memory_order_relaxed); }

}  // namespace tandem::cuda
