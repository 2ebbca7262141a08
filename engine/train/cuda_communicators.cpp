// SPDX-FileCopyrightText: 2026 The Tandem developers
// SPDX-License-Identifier: GPL-3.0-or-later
// The GPU communicators of data parallelism (see cuda_communicators.h).
#include "train/cuda_communicators.h"

#include <dlfcn.h>

#include <algorithm>
#include <array>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <set>
#include <type_traits>

#include "core/cuda/context.h"
#include "kernels/cuda/collective.h"
#include "tandem/error.h"

namespace tandem::cuda {

// ---------------------------------------------------------------------------------------------------------
// NCCL, loaded at run time: the calls Tandem makes, with NCCL's C ABI (nccl.h: ncclResult_t, ncclDataType_t and
// ncclRedOp_t are C enums, ncclComm_t a pointer, ncclUniqueId a struct of 128 bytes passed by value).
// ---------------------------------------------------------------------------------------------------------

namespace {

struct NcclUniqueId {
    char internal[kNcclUniqueIdBytes];
};
using NcclComm = void*;
constexpr int kNcclSuccess = 0, kNcclInProgress = 7;
constexpr int kNcclFloat32 = 7, kNcclFloat64 = 8, kNcclSum = 0;

}  // namespace

struct NcclLibrary {
    void* handle = nullptr;
    int version = 0;
    int (*get_version)(int*) = nullptr;
    int (*get_unique_id)(NcclUniqueId*) = nullptr;
    int (*comm_init_rank)(NcclComm*, int, NcclUniqueId, int) = nullptr;
    int (*comm_init_all)(NcclComm*, int, const int*) = nullptr;
    int (*all_reduce)(const void*, void*, size_t, int, int, NcclComm, cudaStream_t) = nullptr;
    int (*comm_abort)(NcclComm) = nullptr;
    int (*comm_destroy)(NcclComm) = nullptr;
    int (*comm_get_async_error)(NcclComm, int*) = nullptr;
    const char* (*get_error_string)(int) = nullptr;
};

namespace {

struct Loaded {
    NcclLibrary lib;
    std::string why;  // empty: loaded
};

Loaded load_once() {
    Loaded out;
    // NVLink multicast stays off unless the user's environment says otherwise (it can take a host's GPUs out of
    // service on some systems); NCCL reads the variable when it initialises.
    setenv("NCCL_NVLS_ENABLE", "0", 0);
    const char* env = std::getenv("TANDEM_NCCL_LIBRARY");
    const std::vector<std::string> names = env && *env ? std::vector<std::string>{env}
                                                       : std::vector<std::string>{"libnccl.so.2", "libnccl.so"};
    std::string errors;
    for (const std::string& n : names) {
        out.lib.handle = dlopen(n.c_str(), RTLD_NOW | RTLD_LOCAL);
        if (out.lib.handle) break;
        const char* e = dlerror();
        errors += (errors.empty() ? "" : "; ") + std::string(e ? e : n);
    }
    if (!out.lib.handle) {
        out.why = "NCCL could not be loaded (" + errors + "); install NCCL (NVIDIA's libnccl2 package) or set "
                  "TANDEM_NCCL_LIBRARY to its libnccl.so.2";
        return out;
    }
    NcclLibrary& l = out.lib;
    std::string missing;
    auto sym = [&](auto& fn, const char* name) {
        void* p = dlsym(l.handle, name);
        if (!p) missing += (missing.empty() ? "" : ", ") + std::string(name);
        fn = reinterpret_cast<std::remove_reference_t<decltype(fn)>>(p);
    };
    sym(l.get_version, "ncclGetVersion");
    sym(l.get_unique_id, "ncclGetUniqueId");
    sym(l.comm_init_rank, "ncclCommInitRank");
    sym(l.comm_init_all, "ncclCommInitAll");
    sym(l.all_reduce, "ncclAllReduce");
    sym(l.comm_abort, "ncclCommAbort");
    sym(l.comm_destroy, "ncclCommDestroy");
    sym(l.comm_get_async_error, "ncclCommGetAsyncError");
    sym(l.get_error_string, "ncclGetErrorString");
    if (!missing.empty()) {
        out.why = "the NCCL library found lacks " + missing + " (an NCCL 2.x is needed)";
        return out;
    }
    if (l.get_version(&l.version) != kNcclSuccess || l.version < 21000) {
        out.why = "NCCL " + std::to_string(l.version) + " is too old; NCCL 2.10 or newer is needed";
        return out;
    }
    return out;
}

const Loaded& loaded() {
    static const Loaded l = load_once();
    return l;
}

}  // namespace

const NcclLibrary* load_nccl(std::string* why) {
    const Loaded& l = loaded();
    if (!l.why.empty()) {
        if (why) *why = l.why;
        return nullptr;
    }
    return &l.lib;
}

std::string nccl_version(const NcclLibrary& lib) {
    // NCCL_VERSION(X, Y, Z) = X * 10000 + Y * 100 + Z from 2.9 on.
    const int v = lib.version;
    return std::to_string(v / 10000) + "." + std::to_string((v % 10000) / 100) + "." + std::to_string(v % 100);
}

namespace {

const NcclLibrary& nccl_or_throw() {
    std::string why;
    const NcclLibrary* lib = load_nccl(&why);
    if (!lib) throw_unsupported("data parallelism over NCCL: " + why);
    return *lib;
}

std::string nccl_error(const NcclLibrary& lib, int r) {
    const char* s = lib.get_error_string ? lib.get_error_string(r) : nullptr;
    return std::string(s ? s : "unknown NCCL error") + " (ncclResult " + std::to_string(r) + ")";
}

}  // namespace

NcclCommunicator::NcclCommunicator(const std::vector<int>& devices) : lib_(&nccl_or_throw()) {
    if (devices.empty()) throw_internal("NCCL communicator: no devices");
    if (std::set<int>(devices.begin(), devices.end()).size() != devices.size())
        throw_unsupported("NCCL cannot hold two ranks on one GPU (devices repeat an index); give distinct GPUs");
    world_ = int(devices.size());
    comms_.assign(devices.size(), nullptr);
    int current = 0;
    TANDEM_CUDA_CHECK(cudaGetDevice(&current));
    const int r = lib_->comm_init_all(comms_.data(), world_, devices.data());
    (void)cudaSetDevice(current);
    if (r != kNcclSuccess) throw Error(ErrorCategory::Device, "NCCL: ncclCommInitAll failed: " + nccl_error(*lib_, r));
    start_watchdog();
}

NcclCommunicator::NcclCommunicator(int world, int rank, const std::string& unique_id) : lib_(&nccl_or_throw()) {
    if (unique_id.size() != kNcclUniqueIdBytes) throw_internal("NCCL communicator: a unique id has 128 bytes");
    if (world < 1 || rank < 0 || rank >= world) throw_internal("NCCL communicator: rank outside the world");
    world_ = world;
    first_ = rank;
    NcclUniqueId id{};
    std::memcpy(id.internal, unique_id.data(), kNcclUniqueIdBytes);
    comms_.assign(1, nullptr);
    (void)context();  // the calling thread's device is current
    const int r = lib_->comm_init_rank(&comms_[0], world, id, rank);
    if (r != kNcclSuccess)
        throw Error(ErrorCategory::Device, "NCCL: ncclCommInitRank (rank " + std::to_string(rank) + " of " +
                                               std::to_string(world) + ") failed: " + nccl_error(*lib_, r));
    start_watchdog();
}

std::string NcclCommunicator::unique_id() {
    const NcclLibrary& lib = nccl_or_throw();
    NcclUniqueId id{};
    const int r = lib.get_unique_id(&id);
    if (r != kNcclSuccess) throw Error(ErrorCategory::Device, "NCCL: ncclGetUniqueId failed: " + nccl_error(lib, r));
    return std::string(id.internal, kNcclUniqueIdBytes);
}

NcclCommunicator::~NcclCommunicator() {
    stop_.store(true);
    if (watchdog_.joinable()) watchdog_.join();
    std::lock_guard<std::mutex> lock(m_);
    for (void*& c : comms_)
        if (c) {
            (void)lib_->comm_destroy(c);
            c = nullptr;
        }
}

void NcclCommunicator::start_watchdog() {
    watchdog_ = std::thread([this] {
        while (!stop_.load()) {
            std::this_thread::sleep_for(std::chrono::milliseconds(100));
            std::string failure;
            {
                std::lock_guard<std::mutex> lock(m_);
                for (size_t i = 0; i < comms_.size() && failure.empty(); ++i) {
                    int e = kNcclSuccess;
                    if (comms_[i] && lib_->comm_get_async_error(comms_[i], &e) == kNcclSuccess && e != kNcclSuccess &&
                        e != kNcclInProgress)
                        failure = "NCCL reported an error on rank " + std::to_string(first_ + int(i)) + ": " +
                                  nccl_error(*lib_, e) + " (a GPU or a peer process failed; NCCL_DEBUG=WARN says more)";
                }
            }
            if (!failure.empty()) abort(failure);
        }
    });
}

void NcclCommunicator::abort(const std::string& reason) {
    std::unique_lock<std::mutex> lock(m_);
    if (aborted_.load()) return;
    reason_ = reason;
    aborted_.store(true);  // from here no reduce() starts a call on a communicator
    // A communicator is not to be used from two threads at once: let the calls in flight return first (they only
    // enqueue work; a few seconds at most, then the abort goes ahead regardless).
    idle_.wait_for(lock, std::chrono::seconds(5), [this] { return in_flight_ == 0; });
    // Ends the kernels that wait for a peer, so no rank's stream (and no host waiting on it) hangs.
    for (void*& c : comms_)
        if (c) {
            (void)lib_->comm_abort(c);
            c = nullptr;
        }
}

void NcclCommunicator::check() {
    if (!aborted_.load()) return;
    std::lock_guard<std::mutex> lock(m_);
    throw Error(ErrorCategory::Device, "data parallel: stopped (" + reason_ + ")");
}

std::string NcclCommunicator::transport() const { return "nccl " + nccl_version(*lib_); }

void NcclCommunicator::all_reduce_sum(int, float*, size_t) {
    throw_internal("data parallel: the NCCL transport sums device memory only");
}
void NcclCommunicator::all_reduce_sum(int, double*, size_t) {
    throw_internal("data parallel: the NCCL transport sums device memory only");
}

void NcclCommunicator::reduce(int rank, void* data, size_t n, int type, void* stream) {
    const int r = rank - first_;
    if (r < 0 || r >= int(comms_.size())) throw_internal("NCCL communicator: rank " + std::to_string(rank) + " is not local");
    void* comm = nullptr;
    {
        std::lock_guard<std::mutex> lock(m_);
        if (aborted_.load() || !comms_[size_t(r)])
            throw Error(ErrorCategory::Device, "data parallel: stopped (" + reason_ + ")");
        comm = comms_[size_t(r)];
        ++in_flight_;  // abort() waits for it before it frees the communicator
    }
    const int e = lib_->all_reduce(data, data, n, type, kNcclSum, comm, static_cast<cudaStream_t>(stream));
    {
        std::lock_guard<std::mutex> lock(m_);
        --in_flight_;
    }
    idle_.notify_all();
    if (e != kNcclSuccess && e != kNcclInProgress) {
        const std::string why = "NCCL: ncclAllReduce on rank " + std::to_string(rank) + " failed: " + nccl_error(*lib_, e);
        abort(why);
        throw Error(ErrorCategory::Device, why);
    }
}

void NcclCommunicator::all_reduce_sum_device(int rank, float* data, size_t n, void* stream) {
    reduce(rank, data, n, kNcclFloat32, stream);
}
void NcclCommunicator::all_reduce_sum_device(int rank, double* data, size_t n, void* stream) {
    reduce(rank, data, n, kNcclFloat64, stream);
}

// ---------------------------------------------------------------------------------------------------------
// Peer communicator
// ---------------------------------------------------------------------------------------------------------

PeerCommunicator::PeerCommunicator(const std::vector<int>& devices)
    : host_(int(devices.size())), slots_(devices.size()) {
    const std::set<int> distinct(devices.begin(), devices.end());
    int current = 0;
    TANDEM_CUDA_CHECK(cudaGetDevice(&current));
    for (const int a : distinct)
        for (const int b : distinct) {
            if (a == b) continue;
            int ok = 0;
            TANDEM_CUDA_CHECK(cudaDeviceCanAccessPeer(&ok, a, b));
            if (!ok)
                throw_unsupported("GPU " + std::to_string(a) + " cannot read GPU " + std::to_string(b) +
                                  "'s memory (no peer access), so the peer transport cannot sum between them; install "
                                  "NCCL (NVIDIA's libnccl2 package), which Tandem uses when it is there");
            TANDEM_CUDA_CHECK(cudaSetDevice(a));
            const cudaError_t e = cudaDeviceEnablePeerAccess(b, 0);
            if (e == cudaErrorPeerAccessAlreadyEnabled)
                (void)cudaGetLastError();
            else if (e != cudaSuccess) {
                (void)cudaSetDevice(current);
                TANDEM_CUDA_CHECK(e);
            }
        }
    TANDEM_CUDA_CHECK(cudaSetDevice(current));
}

template <class T>
void PeerCommunicator::reduce(int rank, T* data, size_t n, cudaStream_t s) {
    const int ranks = host_.size();
    if (rank < 0 || rank >= ranks) throw_internal("peer communicator: rank " + std::to_string(rank) + " of " + std::to_string(ranks));
    if (ranks == 1) return;
    Slot& me = slots_[size_t(rank)];
    if (!me.ready.get()) {  // on the rank's thread: its device is current
        me.ready = Event::make(cudaEventDisableTiming);
        me.done = Event::make(cudaEventDisableTiming);
    }
    me.data = data;
    me.n = n;
    me.ready.record(s);
    host_.barrier();  // every rank's buffer and event are in its slot
    std::array<T*, cpu::kMaxCollectiveRanks> bufs{};
    for (int q = 0; q < ranks; ++q) {
        const Slot& o = slots_[size_t(q)];
        if (o.n != n) {
            const std::string why = "ranks disagree on a collective's size (" + std::to_string(n) + " vs " +
                                    std::to_string(o.n) + ")";
            host_.abort(why);
            throw_internal("data parallel: " + why);
        }
        bufs[size_t(q)] = static_cast<T*>(o.data);
        if (q != rank) o.ready.wait_on(s);
    }
    const size_t per = (n + size_t(ranks) - 1) / size_t(ranks), lo = std::min(n, per * size_t(rank)),
                 hi = std::min(n, lo + per);
    sum_ranks(bufs.data(), ranks, lo, hi, s);
    me.done.record(s);
    host_.barrier();  // every share is queued; no slot changes before the other ranks read it
    for (int q = 0; q < ranks; ++q)
        if (q != rank) slots_[size_t(q)].done.wait_on(s);
}

void PeerCommunicator::all_reduce_sum_device(int rank, float* data, size_t n, void* stream) {
    reduce(rank, data, n, static_cast<cudaStream_t>(stream));
}
void PeerCommunicator::all_reduce_sum_device(int rank, double* data, size_t n, void* stream) {
    reduce(rank, data, n, static_cast<cudaStream_t>(stream));
}

}  // namespace tandem::cuda
