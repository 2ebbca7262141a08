// SPDX-FileCopyrightText: 2026 The Tandem developers
// SPDX-License-Identifier: GPL-3.0-or-later
// Packed causal GQA attention through cuDNN's fused flash attention, built on the cuDNN graph BACKEND API
// (cudnnBackendCreateDescriptor / SetAttribute / Finalize / Execute); the C++ frontend is not available, so
// this file carries a small RAII wrapper over backend descriptors (Desc) and a graph builder.
//
// T = tokens, S = samples, B = cuDNN batch (S rounded up to a power of two), L = cuDNN sequence length
// (max_seqlen rounded up to a power of two, at least 64), Hq / Hkv = query / kv heads, G = Hq / Hkv, D = head dim.
//
// Decisions a reader must know:
//  - Lowering: the frontend's "composite" SDPA graph, reproduced op by op (cudnn-frontend
//    node/scaled_dot_product_flash_attention.h, CompositeSDPANode / CompositeSDPABackwardNode, with the
//    composite padding mask, diagonal-band causal mask and softmax used for cuDNN < 9.21). cuDNN's runtime
//    fusion engine pattern-matches exactly this graph, so the op order, data types and strides follow the
//    frontend; where a choice looks odd (e.g. the dO*O virtual strides, FLOAT reshaped K) it is the
//    frontend's. The native SDPA_FWD/BWD operation descriptors are not used: on 9.14 they lack per-sample
//    lengths (9.15) and causal masks (9.21 subgraphs).
//  - Packed layout: Q/O/dQ/dO are [T,Hq,D] and K/V/dK/dV [T,Hkv,D] seen as BSHD tensors of B samples with
//    RAGGED element offsets (int64, cu_seqlens[b] * H * D) and per-sample lengths (int32) written into the
//    workspace by a tiny kernel (cudnn_attention_offsets.cu); padding mask + top-left causal mask.
//    Samples S..B-1 are empty (length 0, offset T).
//  - Stats (natural-log sum-exp of the scaled scores, fp32) are ragged too: [T,Hq] token-major, offsets
//    cu_seqlens[b] * Hq. This is NOT attention.h's [Hq,T]; the two paths never share a stats buffer.
//  - Backward follows the frontend with max_total_seq_len set (as TransformerEngine does on cuDNN >= 9.6):
//    the fp32 dQ accumulator, the softmax-sum (dO.O) and, for GQA, the per-query-head dK/dV are ragged
//    buffers of T rows carved from our workspace, so memory is linear in T, not in B*L.
//  - Graphs are cached per (B, L, Hq, Hkv, D) in a thread_local map (the context, and its cuDNN handle, is
//    per thread too). The scale is a by-value input at execute time, so it is not part of the key.
//    A shape cuDNN rejects is remembered with its reason and reported by cudnn_attention_supported().
//  - Nothing in a failed build throws out of cudnn_attention_supported(): every backend call goes through
//    Desc::set / Desc::finalize, which name the descriptor and the attribute and append cuDNN's
//    cudnnGetLastErrorString(), and the build turns that into the returned reason.
//  - Version gate: cuDNN >= 9.10.2 at run time (int64 ragged offsets 9.5, ragged stats / dQ accumulator /
//    GQA with ragged tensors 9.6, 9.10.0-9.10.1 known SDPA bugs, and no pre-9.10 padding-mask workaround
//    needed); Hopper or Blackwell data-centre GPUs (sm_9x, sm_10x): packed THD attention needs Hopper before
//    cuDNN 9.18.1 and the backward's packed stats are not supported on sm_8x / sm_12x.
//  - The slow part is the first use of a bucket: building both graphs runs cuDNN's heuristics and finalizes
//    two execution plans: 0.1-0.2 s, up to ~2 s when cuDNN compiles a kernel it has not built yet in this
//    process (H100, cuDNN 9.14.0). Buckets keep that to a handful per run.
//  - Measured (H100 SXM, cuDNN 9.14.0, T = 16384, Hq = 32, Hkv = 8, D = 128, 4-8 samples of 2-4k tokens):
//    forward 0.53-0.96 ms (520-575 TFLOP/s causal), backward 2.0-3.3 ms (350-415 TFLOP/s); results match
//    the CPU twin to bf16 rounding (rel. error ~3e-3) for MHA/GQA/MQA, D 64/128, 1..9 samples.
//    The engines asked for no plan workspace; with virtual (non-ragged) per-head dK/dV they asked for
//    B*L*Hq*D*4 bytes instead, which is why the ragged buffers above are ours.
//  - Known limits: the backward runs cuDNN's default (non-deterministic) algorithm, so dQ is not bitwise
//    reproducible run to run; engine (plan) workspace above kEngineWorkspaceCap is reported as unsupported
//    so that the planned upper bound holds.
#include "kernels/cuda/cudnn_attention.h"

#include <algorithm>
#include <atomic>
#include <array>
#include <cmath>
#include <cstdint>
#include <limits>
#include <map>
#include <memory>
#include <string>
#include <tuple>
#include <utility>
#include <vector>

#include <cudnn.h>

#include "core/cuda/context.h"

#if CUDNN_MAJOR < 9
#error "cudnn_attention.cpp needs the cuDNN 9 backend API (ragged tensors, cudnnGetLastErrorString)"
#endif

namespace tandem::cuda {

namespace detail {
// cudnn_attention_offsets.cu: ragged offsets ([B+1] int64 each, element units) and per-sample lengths
// ([B] int32 each) from cu_seqlens, on context().stream.
void cudnn_attention_fill_offsets(const int32_t* cu_seqlens, int S, int B, int64_t q_elems_per_token,
                                  int64_t kv_elems_per_token, int64_t stats_elems_per_token, int64_t* off_q,
                                  int64_t* off_k, int64_t* off_v, int64_t* off_o, int64_t* off_stats, int32_t* seq_q,
                                  int32_t* seq_kv);
}  // namespace detail

namespace {

constexpr size_t kMinCudnnVersion = 91002;                  // 9.10.2, see the file comment
constexpr int64_t kEngineWorkspaceCap = int64_t(64) << 20;  // cuDNN plan workspace we plan for (0 seen on 9.14)
constexpr size_t kAlign = 256;                              // alignment of every workspace piece

std::string version_string(size_t v) {
    return std::to_string(v / 10000) + "." + std::to_string(v / 100 % 100) + "." + std::to_string(v % 100);
}

size_t align_up(size_t n, size_t a) {
    return (n + a - 1) / a * a;
}

// ---------------------------------------------------------------------------------------------------------
// Backend descriptors
// ---------------------------------------------------------------------------------------------------------

// A failed backend call while building a graph. Caught by the build, never escapes the public API as is.
struct BuildError {
    cudnnStatus_t status;
    std::string message;
};

std::string last_error_string() {
    char buf[2048] = {0};
    cudnnGetLastErrorString(buf, sizeof(buf));
    return buf;
}

[[noreturn]] void fail(cudnnStatus_t s, const std::string& what) {
    std::string msg = what + " failed: " + cudnnGetErrorString(s);
    const std::string detail = last_error_string();
    if (!detail.empty()) msg += " [" + detail + "]";
    throw BuildError{s, msg};
}

// Owner of one backend descriptor (move-only). `name` says which descriptor this is in every error.
class Desc {
public:
    Desc() = default;
    Desc(cudnnBackendDescriptorType_t type, std::string name) : name_(std::move(name)) {
        const cudnnStatus_t s = cudnnBackendCreateDescriptor(type, &d_);
        if (s != CUDNN_STATUS_SUCCESS) {
            d_ = nullptr;
            fail(s, name_ + ": cudnnBackendCreateDescriptor");
        }
    }
    Desc(Desc&& o) noexcept : d_(std::exchange(o.d_, nullptr)), name_(std::move(o.name_)) {}
    Desc& operator=(Desc&& o) noexcept {
        if (this != &o) {
            reset();
            d_ = std::exchange(o.d_, nullptr);
            name_ = std::move(o.name_);
        }
        return *this;
    }
    Desc(const Desc&) = delete;
    Desc& operator=(const Desc&) = delete;
    ~Desc() { reset(); }

    void set(cudnnBackendAttributeName_t attr, const char* attr_name, cudnnBackendAttributeType_t type, int64_t count,
             const void* value) {
        const cudnnStatus_t s = cudnnBackendSetAttribute(d_, attr, type, count, value);
        if (s != CUDNN_STATUS_SUCCESS) fail(s, name_ + ": cudnnBackendSetAttribute(" + attr_name + ")");
    }
    void finalize() {
        const cudnnStatus_t s = cudnnBackendFinalize(d_);
        if (s != CUDNN_STATUS_SUCCESS) fail(s, name_ + ": cudnnBackendFinalize");
    }
    // Number of elements of an array attribute (count query).
    int64_t count(cudnnBackendAttributeName_t attr, const char* attr_name, cudnnBackendAttributeType_t type) const {
        int64_t n = 0;
        const cudnnStatus_t s = cudnnBackendGetAttribute(d_, attr, type, 0, &n, nullptr);
        if (s != CUDNN_STATUS_SUCCESS) fail(s, name_ + ": cudnnBackendGetAttribute(" + attr_name + ", count)");
        return n;
    }
    void get(cudnnBackendAttributeName_t attr, const char* attr_name, cudnnBackendAttributeType_t type,
             int64_t requested, int64_t* returned, void* values) const {
        const cudnnStatus_t s = cudnnBackendGetAttribute(d_, attr, type, requested, returned, values);
        if (s != CUDNN_STATUS_SUCCESS) fail(s, name_ + ": cudnnBackendGetAttribute(" + attr_name + ")");
    }

    cudnnBackendDescriptor_t get() const { return d_; }
    const std::string& name() const { return name_; }

private:
    void reset() noexcept {
        if (d_) cudnnBackendDestroyDescriptor(d_);
        d_ = nullptr;
    }
    cudnnBackendDescriptor_t d_ = nullptr;
    std::string name_;
};

// Stringifies the attribute so a failure names it.
#define TANDEM_DESC_SET(desc, attr, type, count, value) (desc).set((attr), #attr, (type), (count), (value))
#define TANDEM_DESC_GET(desc, attr, type, requested, returned, values) \
    (desc).get((attr), #attr, (type), (requested), (returned), (values))

// A built execution plan and everything it was built from (kept alive for the plan's lifetime: the plan is
// declared last so it is destroyed first).
struct Plan {
    std::vector<Desc> pieces;   // tensors, ops, the operation graph, engine configs
    std::vector<int64_t> uids;  // non-virtual tensors (the variant pack), sorted
    int64_t workspace = 0;      // bytes the engine needs
    std::string engine;         // which heuristics result finalized, for messages
    Desc plan;
};

// ---------------------------------------------------------------------------------------------------------
// Graph builder: one method per backend op kind, mirroring the frontend's node lowering
// ---------------------------------------------------------------------------------------------------------

using Dims = std::array<int64_t, 4>;
constexpr Dims kOnes = {1, 1, 1, 1};

enum class Kind { Virtual, Device, ByValue };  // intermediate, device buffer, host scalar

constexpr cudnnDataType_t kBF16 = CUDNN_DATA_BFLOAT16;
constexpr cudnnDataType_t kF32 = CUDNN_DATA_FLOAT;
constexpr cudnnDataType_t kI32 = CUDNN_DATA_INT32;
constexpr cudnnDataType_t kI64 = CUDNN_DATA_INT64;
constexpr cudnnDataType_t kBool = CUDNN_DATA_BOOLEAN;

using Tensor = cudnnBackendDescriptor_t;

class GraphBuilder {
public:
    explicit GraphBuilder(std::string name) : name_(std::move(name)) {}

    Tensor tensor(const char* what, int64_t uid, cudnnDataType_t type, const Dims& dims, const Dims& strides, Kind kind,
                  Tensor ragged = nullptr) {
        Desc d(CUDNN_BACKEND_TENSOR_DESCRIPTOR, name_ + ": tensor '" + what + "' (uid " + std::to_string(uid) + ")");
        const int64_t alignment = 16;
        const bool is_virtual = kind == Kind::Virtual;
        const bool by_value = kind == Kind::ByValue;
        TANDEM_DESC_SET(d, CUDNN_ATTR_TENSOR_DATA_TYPE, CUDNN_TYPE_DATA_TYPE, 1, &type);
        TANDEM_DESC_SET(d, CUDNN_ATTR_TENSOR_DIMENSIONS, CUDNN_TYPE_INT64, 4, dims.data());
        TANDEM_DESC_SET(d, CUDNN_ATTR_TENSOR_STRIDES, CUDNN_TYPE_INT64, 4, strides.data());
        TANDEM_DESC_SET(d, CUDNN_ATTR_TENSOR_UNIQUE_ID, CUDNN_TYPE_INT64, 1, &uid);
        TANDEM_DESC_SET(d, CUDNN_ATTR_TENSOR_BYTE_ALIGNMENT, CUDNN_TYPE_INT64, 1, &alignment);
        TANDEM_DESC_SET(d, CUDNN_ATTR_TENSOR_IS_VIRTUAL, CUDNN_TYPE_BOOLEAN, 1, &is_virtual);
        if (by_value) TANDEM_DESC_SET(d, CUDNN_ATTR_TENSOR_IS_BY_VALUE, CUDNN_TYPE_BOOLEAN, 1, &by_value);
        if (ragged) TANDEM_DESC_SET(d, CUDNN_ATTR_TENSOR_RAGGED_OFFSET_DESC, CUDNN_TYPE_BACKEND_DESCRIPTOR, 1, &ragged);
        d.finalize();
        if (!is_virtual) uids_.push_back(uid);
        return keep(std::move(d));
    }

    // An intermediate tensor (never in memory); uids from 100 up.
    Tensor virt(const char* what, cudnnDataType_t type, const Dims& dims, const Dims& strides,
                Tensor ragged = nullptr) {
        return tensor(what, next_virtual_uid_++, type, dims, strides, Kind::Virtual, ragged);
    }

    // y = mode(x[, b][, t]). b: second operand; t: the BINARY_SELECT predicate (y = t ? x : b).
    void pointwise(const char* what, cudnnPointwiseMode_t mode, cudnnDataType_t compute, Tensor x, Tensor b, Tensor t,
                   Tensor y, int64_t axis = -1) {
        const std::string op = name_ + ": pointwise '" + std::string(what) + "'";
        Desc pw(CUDNN_BACKEND_POINTWISE_DESCRIPTOR, op + " descriptor");
        TANDEM_DESC_SET(pw, CUDNN_ATTR_POINTWISE_MODE, CUDNN_TYPE_POINTWISE_MODE, 1, &mode);
        TANDEM_DESC_SET(pw, CUDNN_ATTR_POINTWISE_MATH_PREC, CUDNN_TYPE_DATA_TYPE, 1, &compute);
        if (mode == CUDNN_POINTWISE_GEN_INDEX)
            TANDEM_DESC_SET(pw, CUDNN_ATTR_POINTWISE_AXIS, CUDNN_TYPE_INT64, 1, &axis);
        pw.finalize();
        const Tensor pw_desc = keep(std::move(pw));

        Desc d(CUDNN_BACKEND_OPERATION_POINTWISE_DESCRIPTOR, op + " operation");
        const float alpha = 1.0f;
        TANDEM_DESC_SET(d, CUDNN_ATTR_OPERATION_POINTWISE_PW_DESCRIPTOR, CUDNN_TYPE_BACKEND_DESCRIPTOR, 1, &pw_desc);
        TANDEM_DESC_SET(d, CUDNN_ATTR_OPERATION_POINTWISE_XDESC, CUDNN_TYPE_BACKEND_DESCRIPTOR, 1, &x);
        TANDEM_DESC_SET(d, CUDNN_ATTR_OPERATION_POINTWISE_YDESC, CUDNN_TYPE_BACKEND_DESCRIPTOR, 1, &y);
        TANDEM_DESC_SET(d, CUDNN_ATTR_OPERATION_POINTWISE_ALPHA1, CUDNN_TYPE_FLOAT, 1, &alpha);
        TANDEM_DESC_SET(d, CUDNN_ATTR_OPERATION_POINTWISE_ALPHA2, CUDNN_TYPE_FLOAT, 1, &alpha);
        if (b) TANDEM_DESC_SET(d, CUDNN_ATTR_OPERATION_POINTWISE_BDESC, CUDNN_TYPE_BACKEND_DESCRIPTOR, 1, &b);
        if (t) TANDEM_DESC_SET(d, CUDNN_ATTR_OPERATION_POINTWISE_TDESC, CUDNN_TYPE_BACKEND_DESCRIPTOR, 1, &t);
        d.finalize();
        ops_.push_back(keep(std::move(d)));
    }

    // y = reduce(x) over the dimensions where y has extent 1 (or, for the GQA head sum, over head groups).
    void reduction(const char* what, cudnnReduceTensorOp_t reduce, Tensor x, Tensor y) {
        const std::string op = name_ + ": reduction '" + std::string(what) + "'";
        Desc r(CUDNN_BACKEND_REDUCTION_DESCRIPTOR, op + " descriptor");
        const cudnnDataType_t compute = kF32;
        TANDEM_DESC_SET(r, CUDNN_ATTR_REDUCTION_OPERATOR, CUDNN_TYPE_REDUCTION_OPERATOR_TYPE, 1, &reduce);
        TANDEM_DESC_SET(r, CUDNN_ATTR_REDUCTION_COMP_TYPE, CUDNN_TYPE_DATA_TYPE, 1, &compute);
        r.finalize();
        const Tensor r_desc = keep(std::move(r));

        Desc d(CUDNN_BACKEND_OPERATION_REDUCTION_DESCRIPTOR, op + " operation");
        TANDEM_DESC_SET(d, CUDNN_ATTR_OPERATION_REDUCTION_DESC, CUDNN_TYPE_BACKEND_DESCRIPTOR, 1, &r_desc);
        TANDEM_DESC_SET(d, CUDNN_ATTR_OPERATION_REDUCTION_XDESC, CUDNN_TYPE_BACKEND_DESCRIPTOR, 1, &x);
        TANDEM_DESC_SET(d, CUDNN_ATTR_OPERATION_REDUCTION_YDESC, CUDNN_TYPE_BACKEND_DESCRIPTOR, 1, &y);
        d.finalize();
        ops_.push_back(keep(std::move(d)));
    }

    // c = a * b (batched over dims 0-1, broadcasting kv heads); m/n/k: optional per-sample extents [B,1,1,1].
    void matmul(const char* what, Tensor a, Tensor b, Tensor c, Tensor m, Tensor n, Tensor k) {
        const std::string op = name_ + ": matmul '" + std::string(what) + "'";
        Desc mm(CUDNN_BACKEND_MATMUL_DESCRIPTOR, op + " descriptor");
        const cudnnDataType_t compute = kF32;
        const double padding = 0.0;  // the frontend always sets it (rows/columns past the overrides read 0)
        TANDEM_DESC_SET(mm, CUDNN_ATTR_MATMUL_COMP_TYPE, CUDNN_TYPE_DATA_TYPE, 1, &compute);
        TANDEM_DESC_SET(mm, CUDNN_ATTR_MATMUL_PADDING_VALUE, CUDNN_TYPE_DOUBLE, 1, &padding);
        mm.finalize();
        const Tensor mm_desc = keep(std::move(mm));

        Desc d(CUDNN_BACKEND_OPERATION_MATMUL_DESCRIPTOR, op + " operation");
        TANDEM_DESC_SET(d, CUDNN_ATTR_OPERATION_MATMUL_ADESC, CUDNN_TYPE_BACKEND_DESCRIPTOR, 1, &a);
        TANDEM_DESC_SET(d, CUDNN_ATTR_OPERATION_MATMUL_BDESC, CUDNN_TYPE_BACKEND_DESCRIPTOR, 1, &b);
        TANDEM_DESC_SET(d, CUDNN_ATTR_OPERATION_MATMUL_CDESC, CUDNN_TYPE_BACKEND_DESCRIPTOR, 1, &c);
        if (m)
            TANDEM_DESC_SET(d, CUDNN_ATTR_OPERATION_MATMUL_GEMM_M_OVERRIDE_DESC, CUDNN_TYPE_BACKEND_DESCRIPTOR, 1, &m);
        if (n)
            TANDEM_DESC_SET(d, CUDNN_ATTR_OPERATION_MATMUL_GEMM_N_OVERRIDE_DESC, CUDNN_TYPE_BACKEND_DESCRIPTOR, 1, &n);
        if (k)
            TANDEM_DESC_SET(d, CUDNN_ATTR_OPERATION_MATMUL_GEMM_K_OVERRIDE_DESC, CUDNN_TYPE_BACKEND_DESCRIPTOR, 1, &k);
        TANDEM_DESC_SET(d, CUDNN_ATTR_OPERATION_MATMUL_DESC, CUDNN_TYPE_BACKEND_DESCRIPTOR, 1, &mm_desc);
        d.finalize();
        ops_.push_back(keep(std::move(d)));
    }

    // y = x seen through y's dims/strides (the frontend's transposes).
    void reshape(const char* what, Tensor x, Tensor y) {
        Desc d(CUDNN_BACKEND_OPERATION_RESHAPE_DESCRIPTOR, name_ + ": reshape '" + std::string(what) + "' operation");
        TANDEM_DESC_SET(d, CUDNN_ATTR_OPERATION_RESHAPE_XDESC, CUDNN_TYPE_BACKEND_DESCRIPTOR, 1, &x);
        TANDEM_DESC_SET(d, CUDNN_ATTR_OPERATION_RESHAPE_YDESC, CUDNN_TYPE_BACKEND_DESCRIPTOR, 1, &y);
        d.finalize();
        ops_.push_back(keep(std::move(d)));
    }

    // Operation graph -> heuristics (mode A, then FALLBACK) -> the first engine config whose execution plan
    // finalizes. Throws BuildError listing what was tried when none does.
    Plan finish(cudnnHandle_t handle) {
        Desc graph(CUDNN_BACKEND_OPERATIONGRAPH_DESCRIPTOR, name_ + ": operation graph");
        TANDEM_DESC_SET(graph, CUDNN_ATTR_OPERATIONGRAPH_OPS, CUDNN_TYPE_BACKEND_DESCRIPTOR,
                        static_cast<int64_t>(ops_.size()), ops_.data());
        TANDEM_DESC_SET(graph, CUDNN_ATTR_OPERATIONGRAPH_HANDLE, CUDNN_TYPE_HANDLE, 1, &handle);
        graph.finalize();
        const Tensor graph_desc = keep(std::move(graph));

        std::string tried;
        int attempts = 0;
        auto note = [&](const std::string& m) {
            if (++attempts <= 8) tried += "\n    " + m;
        };
        const std::pair<cudnnBackendHeurMode_t, const char*> modes[] = {{CUDNN_HEUR_MODE_A, "A"},
                                                                        {CUDNN_HEUR_MODE_FALLBACK, "FALLBACK"}};
        for (const auto& [mode, mode_name] : modes) {
            try {
                Desc heur(CUDNN_BACKEND_ENGINEHEUR_DESCRIPTOR, name_ + ": engine heuristics (mode " + mode_name + ")");
                TANDEM_DESC_SET(heur, CUDNN_ATTR_ENGINEHEUR_OPERATION_GRAPH, CUDNN_TYPE_BACKEND_DESCRIPTOR, 1,
                                &graph_desc);
                TANDEM_DESC_SET(heur, CUDNN_ATTR_ENGINEHEUR_MODE, CUDNN_TYPE_HEUR_MODE, 1, &mode);
                heur.finalize();
                const int64_t n = heur.count(CUDNN_ATTR_ENGINEHEUR_RESULTS, "CUDNN_ATTR_ENGINEHEUR_RESULTS",
                                             CUDNN_TYPE_BACKEND_DESCRIPTOR);
                if (n <= 0) {
                    note(std::string("heuristics mode ") + mode_name + " returned no engine config");
                    continue;
                }
                std::vector<Desc> configs;
                std::vector<cudnnBackendDescriptor_t> raw;
                for (int64_t i = 0; i < n; i++) {
                    configs.emplace_back(CUDNN_BACKEND_ENGINECFG_DESCRIPTOR,
                                         name_ + ": engine config " + std::to_string(i) + " (mode " + mode_name + ")");
                    raw.push_back(configs.back().get());
                }
                int64_t got = 0;
                TANDEM_DESC_GET(heur, CUDNN_ATTR_ENGINEHEUR_RESULTS, CUDNN_TYPE_BACKEND_DESCRIPTOR, n, &got,
                                raw.data());
                for (int64_t i = 0; i < got && i < n; i++) {
                    try {
                        const std::string which =
                            std::string("heuristics ") + mode_name + " config " + std::to_string(i);
                        Desc plan(CUDNN_BACKEND_EXECUTION_PLAN_DESCRIPTOR, name_ + ": execution plan (" + which + ")");
                        TANDEM_DESC_SET(plan, CUDNN_ATTR_EXECUTION_PLAN_HANDLE, CUDNN_TYPE_HANDLE, 1, &handle);
                        TANDEM_DESC_SET(plan, CUDNN_ATTR_EXECUTION_PLAN_ENGINE_CONFIG, CUDNN_TYPE_BACKEND_DESCRIPTOR, 1,
                                        &raw[static_cast<size_t>(i)]);
                        plan.finalize();
                        int64_t workspace = 0, returned = 0;
                        TANDEM_DESC_GET(plan, CUDNN_ATTR_EXECUTION_PLAN_WORKSPACE_SIZE, CUDNN_TYPE_INT64, 1, &returned,
                                        &workspace);
                        Plan p;
                        for (Desc& c : configs) pieces_.push_back(std::move(c));
                        p.pieces = std::move(pieces_);
                        p.uids = uids_;
                        std::sort(p.uids.begin(), p.uids.end());
                        p.workspace = workspace;
                        p.engine = which;
                        p.plan = std::move(plan);
                        return p;
                    } catch (const BuildError& e) {
                        note(e.message);
                    }
                }
            } catch (const BuildError& e) {
                note(e.message);
            }
        }
        if (attempts > 8) tried += "\n    ... and " + std::to_string(attempts - 8) + " more";
        throw BuildError{CUDNN_STATUS_NOT_SUPPORTED,
                         name_ + ": no cuDNN engine config finalized for this graph on this GPU; tried:" + tried};
    }

private:
    Tensor keep(Desc&& d) {
        pieces_.push_back(std::move(d));
        return pieces_.back().get();
    }

    std::string name_;
    std::vector<Desc> pieces_;
    std::vector<Tensor> ops_;
    std::vector<int64_t> uids_;
    int64_t next_virtual_uid_ = 100;
};

// ---------------------------------------------------------------------------------------------------------
// The two graphs
// ---------------------------------------------------------------------------------------------------------

// Unique ids of the non-virtual tensors (the variant pack); virtual ones start at 100.
enum Uid : int64_t {
    kUidQ = 1,
    kUidK,
    kUidV,
    kUidO,
    kUidStats,
    kUidDO,
    kUidDQ,
    kUidDK,
    kUidDV,
    kUidSeqQ,
    kUidSeqKV,
    kUidOffQ,
    kUidOffK,
    kUidOffV,
    kUidOffO,
    kUidOffStats,
    kUidScale,
    kUidNegInfPadding,
    kUidNegInfCausal,
    kUidOne,
    kUidSoftmaxSum,
    kUidDQAccum,
    kUidDKFull,
    kUidDVFull,
    kUidWindow,
    kUidNegInfWindow,
};

// A graph bucket: the cuDNN shapes. Strides in elements of the packed [T, H, D] streams seen as BSHD.
struct Key {
    int64_t B, L, Hq, Hkv, D;
    int64_t W = 0;  // sliding window (0: none)
    bool operator<(const Key& o) const {
        return std::tie(B, L, Hq, Hkv, D, W) < std::tie(o.B, o.L, o.Hq, o.Hkv, o.D, o.W);
    }

    Dims q_dims() const { return {B, Hq, L, D}; }  // Q, O, dQ, dO
    Dims q_strides() const { return {L * Hq * D, D, Hq * D, 1}; }
    Dims kv_dims() const { return {B, Hkv, L, D}; }  // K, V, dK, dV
    Dims kv_strides() const { return {L * Hkv * D, D, Hkv * D, 1}; }
    Dims kt_dims() const { return {B, Hkv, D, L}; }  // K^T, V^T: same memory as K, V
    Dims kt_strides() const { return {L * Hkv * D, D, 1, Hkv * D}; }
    Dims stats_dims() const { return {B, Hq, L, 1}; }  // stats, softmax sum: [T, Hq] packed
    Dims stats_strides() const { return {Hq * L, 1, Hq, 1}; }
    Dims row_strides() const { return {Hq * L, L, 1, 1}; }  // virtual per-row values
    Dims scores_dims() const { return {B, Hq, L, L}; }      // virtual scores / probabilities
    Dims scores_strides() const { return {Hq * L * L, L * L, L, 1}; }
    Dims scores_t_strides() const { return {Hq * L * L, L * L, 1, L}; }  // transposed (dims [B,Hq,Lkv,Lq])
    Dims offsets_dims() const { return {B + 1, 1, 1, 1}; }
    Dims lengths_dims() const { return {B, 1, 1, 1}; }
};

// The inputs both graphs share: ragged offsets, lengths, the scale.
struct Common {
    Tensor off_q, off_k, off_v, off_o, off_stats, seq_q, seq_kv, scale;
};

Common add_common(GraphBuilder& g, const Key& k) {
    Common c{};
    c.off_q = g.tensor("ragged offsets Q", kUidOffQ, kI64, k.offsets_dims(), kOnes, Kind::Device);
    c.off_k = g.tensor("ragged offsets K", kUidOffK, kI64, k.offsets_dims(), kOnes, Kind::Device);
    c.off_v = g.tensor("ragged offsets V", kUidOffV, kI64, k.offsets_dims(), kOnes, Kind::Device);
    c.off_o = g.tensor("ragged offsets O", kUidOffO, kI64, k.offsets_dims(), kOnes, Kind::Device);
    c.off_stats = g.tensor("ragged offsets stats", kUidOffStats, kI64, k.offsets_dims(), kOnes, Kind::Device);
    c.seq_q = g.tensor("seq_len_q", kUidSeqQ, kI32, k.lengths_dims(), kOnes, Kind::Device);
    c.seq_kv = g.tensor("seq_len_kv", kUidSeqKV, kI32, k.lengths_dims(), kOnes, Kind::Device);
    c.scale = g.tensor("attn_scale", kUidScale, kF32, kOnes, kOnes, Kind::ByValue);
    return c;
}

// Scores outside a sample's length become -inf (frontend attn_score_modifiers padding_mask).
Tensor add_padding_mask(GraphBuilder& g, const Key& k, Tensor scores, const Common& c) {
    const Dims dims = k.scores_dims(), strides = k.scores_strides();
    const Tensor neg_inf = g.tensor("padding -inf", kUidNegInfPadding, kF32, kOnes, kOnes, Kind::ByValue);
    const Tensor row = g.virt("padding row index", kI32, dims, strides);
    g.pointwise("padding gen row index", CUDNN_POINTWISE_GEN_INDEX, kI32, scores, nullptr, nullptr, row, 2);
    const Tensor col = g.virt("padding col index", kI32, dims, strides);
    g.pointwise("padding gen col index", CUDNN_POINTWISE_GEN_INDEX, kI32, scores, nullptr, nullptr, col, 3);
    const Tensor row_ok = g.virt("padding row < seq_len_q", kBool, dims, strides);
    g.pointwise("padding row < seq_len_q", CUDNN_POINTWISE_CMP_LT, kBool, row, c.seq_q, nullptr, row_ok);
    const Tensor col_ok = g.virt("padding col < seq_len_kv", kBool, dims, strides);
    g.pointwise("padding col < seq_len_kv", CUDNN_POINTWISE_CMP_LT, kBool, col, c.seq_kv, nullptr, col_ok);
    const Tensor ok = g.virt("padding mask", kBool, dims, strides);
    g.pointwise("padding row and col", CUDNN_POINTWISE_LOGICAL_AND, kBool, row_ok, col_ok, nullptr, ok);
    const Tensor out = g.virt("padding select", kF32, dims, strides);
    g.pointwise("padding select", CUDNN_POINTWISE_BINARY_SELECT, kF32, scores, neg_inf, ok, out);
    return out;
}

// The row (query) and column (key) index of every score, as the frontend's diagonal band masks generate them.
std::pair<Tensor, Tensor> score_indices(GraphBuilder& g, const Key& k, Tensor scores, const std::string& what) {
    const Dims dims = k.scores_dims(), strides = k.scores_strides();
    const Tensor row = g.virt((what + " row index").c_str(), kI32, dims, strides);
    g.pointwise((what + " gen row index").c_str(), CUDNN_POINTWISE_GEN_INDEX, kF32, scores, nullptr, nullptr, row, 2);
    const Tensor col = g.virt((what + " col index").c_str(), kI32, dims, strides);
    g.pointwise((what + " gen col index").c_str(), CUDNN_POINTWISE_GEN_INDEX, kF32, scores, nullptr, nullptr, col, 3);
    return {row, col};
}

// Top-left causal mask: keep row >= col (frontend CompositeDiagonalBandMaskNode, right bound 0).
Tensor add_causal_mask(GraphBuilder& g, const Key& k, Tensor scores) {
    const Dims dims = k.scores_dims(), strides = k.scores_strides();
    const Tensor neg_inf = g.tensor("causal -inf", kUidNegInfCausal, kF32, kOnes, kOnes, Kind::ByValue);
    const auto [row, col] = score_indices(g, k, scores, "causal");
    const Tensor keep = g.virt("causal row >= col", kBool, dims, strides);
    g.pointwise("causal row >= col", CUDNN_POINTWISE_CMP_GE, kBool, row, col, nullptr, keep);
    const Tensor out = g.virt("causal select", kF32, dims, strides);
    g.pointwise("causal select", CUDNN_POINTWISE_BINARY_SELECT, kF32, scores, neg_inf, keep, out);
    return out;
}

// Sliding window W (k.W > 0): keep col + W > row, i.e. key j of query i when i - j < W (the CPU twin's first key
// t - W + 1; frontend sliding_window_mask, top-left left bound: CMP_GT of col + float(W) against row).
Tensor add_window_mask(GraphBuilder& g, const Key& k, Tensor scores) {
    if (k.W == 0) return scores;
    const Dims dims = k.scores_dims(), strides = k.scores_strides();
    const Tensor neg_inf = g.tensor("window -inf", kUidNegInfWindow, kF32, kOnes, kOnes, Kind::ByValue);
    const Tensor window = g.tensor("window", kUidWindow, kF32, kOnes, kOnes, Kind::ByValue);
    const auto [row, col] = score_indices(g, k, scores, "window");
    const Tensor shifted = g.virt("window col + W", kF32, dims, strides);
    g.pointwise("window col + W", CUDNN_POINTWISE_ADD, kF32, col, window, nullptr, shifted);
    const Tensor keep = g.virt("window col + W > row", kBool, dims, strides);
    g.pointwise("window col + W > row", CUDNN_POINTWISE_CMP_GT, kBool, shifted, row, nullptr, keep);
    const Tensor out = g.virt("window select", kF32, dims, strides);
    g.pointwise("window select", CUDNN_POINTWISE_BINARY_SELECT, kF32, scores, neg_inf, keep, out);
    return out;
}

// O = softmax(mask(scale * Q K^T)) V, Stats = max + log(sum exp) per row.
Plan build_forward(cudnnHandle_t handle, const Key& k) {
    GraphBuilder g("forward graph");
    const Common c = add_common(g, k);
    const Tensor q = g.tensor("Q", kUidQ, kBF16, k.q_dims(), k.q_strides(), Kind::Device, c.off_q);
    const Tensor kt = g.tensor("K^T", kUidK, kBF16, k.kt_dims(), k.kt_strides(), Kind::Device, c.off_k);
    const Tensor v = g.tensor("V", kUidV, kBF16, k.kv_dims(), k.kv_strides(), Kind::Device, c.off_v);
    const Tensor o = g.tensor("O", kUidO, kBF16, k.q_dims(), k.q_strides(), Kind::Device, c.off_o);
    const Tensor stats =
        g.tensor("Stats", kUidStats, kF32, k.stats_dims(), k.stats_strides(), Kind::Device, c.off_stats);
    const Dims sd = k.scores_dims(), ss = k.scores_strides(), rd = k.stats_dims(), rs = k.row_strides();

    const Tensor s = g.virt("bmm1 Q*K^T", kF32, sd, ss);
    g.matmul("bmm1 Q*K^T", q, kt, s, c.seq_q, c.seq_kv, nullptr);
    const Tensor scaled = g.virt("attn_scale", kF32, sd, ss);
    g.pointwise("attn_scale", CUDNN_POINTWISE_MUL, kF32, s, c.scale, nullptr, scaled);
    const Tensor masked = add_window_mask(g, k, add_causal_mask(g, k, add_padding_mask(g, k, scaled, c)));

    const Tensor row_max = g.virt("softmax max", kF32, rd, rs);
    g.reduction("softmax max", CUDNN_REDUCE_TENSOR_MAX, masked, row_max);
    const Tensor shifted = g.virt("softmax sub max", kF32, sd, ss);
    g.pointwise("softmax sub max", CUDNN_POINTWISE_SUB, kF32, masked, row_max, nullptr, shifted);
    const Tensor e = g.virt("softmax exp", kF32, sd, ss);
    g.pointwise("softmax exp", CUDNN_POINTWISE_EXP, kF32, shifted, nullptr, nullptr, e);
    const Tensor row_sum = g.virt("softmax sum", kF32, rd, rs);
    g.reduction("softmax sum", CUDNN_REDUCE_TENSOR_ADD, e, row_sum);
    const Tensor log_sum = g.virt("softmax log sum", kF32, rd, rs);
    g.pointwise("softmax log sum", CUDNN_POINTWISE_LOG, kF32, row_sum, nullptr, nullptr, log_sum);
    g.pointwise("softmax stats", CUDNN_POINTWISE_ADD, kF32, row_max, log_sum, nullptr, stats);
    const Tensor p = g.virt("softmax P", kBF16, sd, ss);  // bmm2's A takes the io type
    g.pointwise("softmax div", CUDNN_POINTWISE_DIV, kF32, e, row_sum, nullptr, p);

    g.matmul("bmm2 P*V", p, v, o, c.seq_q, nullptr, c.seq_kv);
    return g.finish(handle);
}

// dQ, dK, dV from dO, recomputing P from Q, K and the forward's Stats (frontend CompositeSDPABackwardNode,
// no dropout / bias, max_total_seq_len_q and _kv set).
Plan build_backward(cudnnHandle_t handle, const Key& k) {
    GraphBuilder g("backward graph");
    const Common c = add_common(g, k);
    const bool gqa = k.Hq != k.Hkv;
    const Tensor q = g.tensor("Q", kUidQ, kBF16, k.q_dims(), k.q_strides(), Kind::Device, c.off_q);
    const Tensor kt = g.tensor("K^T", kUidK, kBF16, k.kt_dims(), k.kt_strides(), Kind::Device, c.off_k);
    const Tensor vt = g.tensor("V^T", kUidV, kBF16, k.kt_dims(), k.kt_strides(), Kind::Device, c.off_v);
    const Tensor o = g.tensor("O", kUidO, kBF16, k.q_dims(), k.q_strides(), Kind::Device, c.off_o);
    const Tensor d_o = g.tensor("dO", kUidDO, kBF16, k.q_dims(), k.q_strides(), Kind::Device, c.off_o);
    const Tensor stats =
        g.tensor("Stats", kUidStats, kF32, k.stats_dims(), k.stats_strides(), Kind::Device, c.off_stats);
    const Tensor dq = g.tensor("dQ", kUidDQ, kBF16, k.q_dims(), k.q_strides(), Kind::Device, c.off_q);
    const Tensor dk = g.tensor("dK", kUidDK, kBF16, k.kv_dims(), k.kv_strides(), Kind::Device, c.off_k);
    const Tensor dv = g.tensor("dV", kUidDV, kBF16, k.kv_dims(), k.kv_strides(), Kind::Device, c.off_v);
    const Tensor one = g.tensor("one", kUidOne, kF32, kOnes, kOnes, Kind::ByValue);
    const Dims sd = k.scores_dims(), ss = k.scores_strides(), st = k.scores_t_strides();
    const Dims rd = k.stats_dims(), rs = k.row_strides();

    // softmax_sum = rowsum(dO * O), kept in the workspace (ragged like the stats).
    const Tensor do_o = g.virt("dO*O", kF32, k.q_dims(), {k.Hq * k.L * k.D, k.L * k.D, k.Hq * k.D, 1});
    g.pointwise("dO*O", CUDNN_POINTWISE_MUL, kF32, d_o, o, nullptr, do_o);
    const Tensor do_o_sum = g.virt("rowsum dO*O", kF32, rd, rs);
    g.reduction("rowsum dO*O", CUDNN_REDUCE_TENSOR_ADD, do_o, do_o_sum);
    const Tensor softmax_sum =
        g.tensor("softmax_sum", kUidSoftmaxSum, kF32, k.stats_dims(), k.stats_strides(), Kind::Device, c.off_stats);
    g.pointwise("softmax_sum (scale 1)", CUDNN_POINTWISE_MUL, kF32, do_o_sum, one, nullptr, softmax_sum);

    // P = exp(mask(scale * Q K^T) - Stats)
    const Tensor s = g.virt("Q*K^T", kF32, sd, ss);
    g.matmul("Q*K^T", q, kt, s, c.seq_q, c.seq_kv, nullptr);
    const Tensor scaled = g.virt("attn_scale", kF32, sd, ss);
    g.pointwise("attn_scale", CUDNN_POINTWISE_MUL, kF32, s, c.scale, nullptr, scaled);
    const Tensor centered = g.virt("sub stats", kF32, sd, ss);
    g.pointwise("sub stats", CUDNN_POINTWISE_SUB, kF32, scaled, stats, nullptr, centered);
    const Tensor masked = add_window_mask(g, k, add_causal_mask(g, k, add_padding_mask(g, k, centered, c)));
    const Tensor p = g.virt("P = exp", kF32, sd, ss);
    g.pointwise("P = exp", CUDNN_POINTWISE_EXP, kF32, masked, nullptr, nullptr, p);

    // dV = P^T dO (per query head, then summed over each kv head's group for GQA)
    const Tensor pt = g.virt("P^T", kBF16, sd, st);
    g.reshape("P^T", p, pt);
    if (!gqa) {
        g.matmul("P^T*dO", pt, d_o, dv, c.seq_kv, nullptr, c.seq_q);
    } else {
        const Tensor dv_full =
            g.tensor("dV per query head", kUidDVFull, kBF16, k.q_dims(), k.q_strides(), Kind::Device, c.off_v);
        g.matmul("P^T*dO", pt, d_o, dv_full, c.seq_kv, nullptr, c.seq_q);
        g.reduction("dV head-group sum", CUDNN_REDUCE_TENSOR_ADD, dv_full, dv);
    }

    // dS = scale * P * (dO V^T - softmax_sum)
    const Tensor dp = g.virt("dO*V^T", kF32, sd, ss);
    g.matmul("dO*V^T", d_o, vt, dp, c.seq_q, c.seq_kv, nullptr);
    const Tensor dp_centered = g.virt("dP - softmax_sum", kF32, sd, ss);
    g.pointwise("dP - softmax_sum", CUDNN_POINTWISE_SUB, kF32, dp, softmax_sum, nullptr, dp_centered);
    const Tensor dp_p = g.virt("* P", kF32, sd, ss);
    g.pointwise("* P", CUDNN_POINTWISE_MUL, kF32, dp_centered, p, nullptr, dp_p);
    const Tensor ds = g.virt("dS", kF32, sd, ss);
    g.pointwise("dS = * attn_scale", CUDNN_POINTWISE_MUL, kF32, dp_p, c.scale, nullptr, ds);

    // dK = dS^T Q
    const Tensor dst = g.virt("dS^T", kBF16, sd, st);
    g.reshape("dS^T", ds, dst);
    if (!gqa) {
        g.matmul("dS^T*Q", dst, q, dk, c.seq_kv, nullptr, c.seq_q);
    } else {
        const Tensor dk_full =
            g.tensor("dK per query head", kUidDKFull, kBF16, k.q_dims(), k.q_strides(), Kind::Device, c.off_k);
        g.matmul("dS^T*Q", dst, q, dk_full, c.seq_kv, nullptr, c.seq_q);
        g.reduction("dK head-group sum", CUDNN_REDUCE_TENSOR_ADD, dk_full, dk);
    }

    // dQ = dS K, accumulated in fp32 in the workspace, then converted.
    const Tensor k_rows = g.virt("K", kF32, k.kv_dims(), k.kv_strides(), c.off_k);
    g.reshape("K", kt, k_rows);
    const Tensor dq_accum =
        g.tensor("dQ accumulator", kUidDQAccum, kF32, k.q_dims(), k.q_strides(), Kind::Device, c.off_q);
    g.matmul("dS*K", ds, k_rows, dq_accum, c.seq_q, nullptr, c.seq_kv);
    g.pointwise("dQ = identity", CUDNN_POINTWISE_IDENTITY, kF32, dq_accum, nullptr, nullptr, dq);
    return g.finish(handle);
}

// ---------------------------------------------------------------------------------------------------------
// Shapes, buckets, workspace layout, cache
// ---------------------------------------------------------------------------------------------------------

int64_t next_pow2(int64_t n) {
    int64_t p = 1;
    while (p < n) p *= 2;
    return p;
}
int64_t bucket_batch(int64_t samples) {
    return next_pow2(std::max<int64_t>(samples, 1));
}
int64_t bucket_seqlen(int64_t max_seqlen) {
    return next_pow2(std::max<int64_t>(max_seqlen, 64));
}

// A window no sample reaches past needs no mask: the unwindowed graph.
Key key_for(const CudnnAttentionShape& s) {
    return {bucket_batch(s.S), bucket_seqlen(s.max_seqlen), s.Hq, s.Hkv, s.D,
            s.window > 0 && s.window < s.max_seqlen ? s.window : 0};
}

std::string describe(const CudnnAttentionShape& s) {
    const Key k = key_for(s);
    return "S=" + std::to_string(s.S) + " T=" + std::to_string(s.T) + " max_seqlen=" + std::to_string(s.max_seqlen) +
           " Hq=" + std::to_string(s.Hq) + " Hkv=" + std::to_string(s.Hkv) + " D=" + std::to_string(s.D) +
           (k.W > 0 ? " window=" + std::to_string(k.W) : std::string()) + " (cuDNN batch " + std::to_string(k.B) +
           ", seq " + std::to_string(k.L) + ")";
}

// Empty when the shape is well formed (independent of what cuDNN supports).
std::string shape_problem(const CudnnAttentionShape& s) {
    if (s.S <= 0 || s.T <= 0 || s.Hq <= 0 || s.Hkv <= 0 || s.D <= 0) return "sizes must be positive";
    if (s.Hq % s.Hkv != 0) return "Hq must be a multiple of Hkv";
    if (s.S > s.T) return "more samples than tokens";
    if (s.max_seqlen <= 0 || s.max_seqlen > s.T) return "max_seqlen must be in [1, T]";
    if (!std::isfinite(s.scale)) return "scale is not finite";
    if (s.window < 0) return "window must not be negative";
    return {};
}

// Byte offsets of our pieces inside the workspace (from its 256-aligned start).
struct Layout {
    size_t off_q, off_k, off_v, off_o, off_stats;  // [B+1] int64 each
    size_t seq_q, seq_kv;                          // [B] int32 each
    size_t softmax_sum;                            // [T, Hq] fp32 (backward)
    size_t dq_accum;                               // [T, Hq, D] fp32 (backward)
    size_t dk_full, dv_full;                       // [T, Hq, D] (backward, GQA only; sized as fp32 like the frontend)
    size_t engine;                                 // cuDNN's plan workspace
    size_t bytes;                                  // total, including the alignment slack of the start
};

// backward: with the backward's pieces (softmax sum, dQ accumulator, per-query-head dK / dV); the forward needs
// the offsets, lengths and its engine workspace only.
// Pieces of a workspace one after the other, each aligned to kAlign.
struct Bump {
    size_t at = 0;
    size_t take(int64_t bytes) {
        const size_t p = at;
        at += align_up(static_cast<size_t>(bytes), kAlign);
        return p;
    }
};

Layout layout_for(int64_t B, int64_t T, int64_t Hq, int64_t Hkv, int64_t D, int64_t engine_bytes,
                  bool backward = true) {
    Layout l{};
    Bump w;
    auto take = [&](int64_t bytes) { return w.take(bytes); };
    const int64_t offsets = (B + 1) * int64_t(sizeof(int64_t)), lengths = B * int64_t(sizeof(int32_t));
    const int64_t full = backward && Hq != Hkv ? T * Hq * D * int64_t(sizeof(float)) : 0;
    const int64_t rows = backward ? T : 0;
    l.off_q = take(offsets);
    l.off_k = take(offsets);
    l.off_v = take(offsets);
    l.off_o = take(offsets);
    l.off_stats = take(offsets);
    l.seq_q = take(lengths);
    l.seq_kv = take(lengths);
    l.softmax_sum = take(rows * Hq * int64_t(sizeof(float)));
    l.dq_accum = take(rows * Hq * D * int64_t(sizeof(float)));
    l.dk_full = take(full);
    l.dv_full = take(full);
    l.engine = take(engine_bytes);
    l.bytes = w.at + kAlign;
    return l;
}

// Backward in kv-head groups (CudnnAttentionShape::split, long GQA sequences). The whole backward's pieces above
// take 48 bytes per token and query-head dimension (fp32 dQ, dK / dV per query head sized as fp32): 48 KB per
// token for Llama-3.1-8B, more than the rest of a token's activations. Split, the backward runs once per kv head
// as an MQA problem of its G = Hq / Hkv query heads: the group's heads are copied into compact buffers
// (cudaMemcpy2DAsync), the MQA graph runs on them, and dQ / dK / dV are copied back: about 12 bytes per token and
// query-head dimension in all, for copies that are small next to attention at those lengths.
constexpr int64_t kSplitBytes = int64_t(1) << 30;  // the whole backward's pieces past which a model splits

// The split backward's workspace: the group's layout (G query heads, 1 kv head), then the compact copies.
struct SplitLayout {
    Layout group;
    size_t q, o, dout, dq, k, v, dk, dv, stats;  // [T,G,D] x4 bf16, [T,D] x4 bf16, [T,G] fp32
    size_t bytes;
};
SplitLayout split_layout_for(int64_t B, int64_t T, int64_t Hq, int64_t Hkv, int64_t D, int64_t engine_bytes) {
    SplitLayout l{};
    const int64_t G = Hq / Hkv;
    l.group = layout_for(B, T, G, 1, D, engine_bytes);
    Bump w{l.group.bytes};
    auto take = [&](int64_t bytes) { return w.take(bytes); };
    const int64_t qb = T * G * D * int64_t(sizeof(bf16)), kb = T * D * int64_t(sizeof(bf16));
    l.q = take(qb);
    l.o = take(qb);
    l.dout = take(qb);
    l.dq = take(qb);
    l.k = take(kb);
    l.v = take(kb);
    l.dk = take(kb);
    l.dv = take(kb);
    l.stats = take(T * G * int64_t(sizeof(float)));
    l.bytes = w.at;
    return l;
}

// The MQA shape of one kv-head group.
CudnnAttentionShape group_shape(const CudnnAttentionShape& s) {
    CudnnAttentionShape g = s;
    g.Hq = s.Hq / s.Hkv;
    g.Hkv = 1;
    return g;
}

struct Entry {
    bool ok = false;
    std::string reason;  // why not, when !ok
    Plan fwd, bwd;
    float neg_inf = -std::numeric_limits<float>::infinity();  // by-value scalars read at execute time
    float one = 1.0f;
    float window = 0.0f;  // Key::W
    int64_t engine_workspace() const { return std::max(fwd.workspace, bwd.workspace); }
};

// Per thread, like the context whose cuDNN handle the plans were built with.
struct Cache {
    cudnnHandle_t handle = nullptr;
    std::map<Key, std::unique_ptr<Entry>> entries;
};
thread_local Cache t_cache;

// The cached entry for a well-formed shape, building both graphs on first use. Requires
// cudnn_attention_available().
Entry& entry_for(const CudnnAttentionShape& shape) {
    Context& ctx = context();
    if (t_cache.handle != ctx.cudnn) {  // a new context: plans of the old handle are not reused
        t_cache.entries.clear();
        t_cache.handle = ctx.cudnn;
    }
    const Key key = key_for(shape);
    auto it = t_cache.entries.find(key);
    if (it != t_cache.entries.end()) return *it->second;

    auto e = std::make_unique<Entry>();
    e->window = float(key.W);
    const std::string where = "cuDNN " + version_string(cudnnGetVersion()) + " on sm_" + std::to_string(ctx.cc_major) +
                              std::to_string(ctx.cc_minor) + ", " + describe(shape) + ": ";
    try {
        e->fwd = build_forward(ctx.cudnn, key);
        e->bwd = build_backward(ctx.cudnn, key);
        if (e->engine_workspace() > kEngineWorkspaceCap) {
            e->reason = where + "cuDNN wants " + std::to_string(e->engine_workspace() >> 20) +
                        " MiB of engine workspace (forward " + e->fwd.engine + ", backward " + e->bwd.engine +
                        "), more than the " + std::to_string(kEngineWorkspaceCap >> 20) + " MiB planned for";
        } else {
            e->ok = true;
        }
    } catch (const BuildError& err) {
        e->reason = where + err.message;
    }
    if (!e->ok) {  // keep nothing of a failed build alive
        e->fwd = Plan{};
        e->bwd = Plan{};
    }
    return *t_cache.entries.emplace(key, std::move(e)).first->second;
}

// Shape checks shared by forward and backward (a bad shape is a caller bug).
Entry& checked_entry(const CudnnAttentionShape& shape, const char* fn) {
    const std::string problem = shape_problem(shape);
    if (!problem.empty()) throw_internal(std::string(fn) + ": invalid shape (" + problem + "): " + describe(shape));
    Entry& e = entry_for(shape);
    if (!e.ok)
        throw_internal(std::string(fn) +
                       ": called for a shape cuDNN does not support (check "
                       "cudnn_attention_supported first): " +
                       e.reason);
    return e;
}

char* aligned_workspace(void* workspace) {
    const uintptr_t p = reinterpret_cast<uintptr_t>(workspace);
    return reinterpret_cast<char*>((p + kAlign - 1) / kAlign * kAlign);
}

// Writes the ragged offsets and lengths of this call into the workspace.
void fill_offsets(char* ws, const Layout& l, const int32_t* cu_seqlens, const CudnnAttentionShape& s, const Key& k) {
    detail::cudnn_attention_fill_offsets(
        cu_seqlens, s.S, static_cast<int>(k.B), int64_t(s.Hq) * s.D, int64_t(s.Hkv) * s.D, s.Hq,
        reinterpret_cast<int64_t*>(ws + l.off_q), reinterpret_cast<int64_t*>(ws + l.off_k),
        reinterpret_cast<int64_t*>(ws + l.off_v), reinterpret_cast<int64_t*>(ws + l.off_o),
        reinterpret_cast<int64_t*>(ws + l.off_stats), reinterpret_cast<int32_t*>(ws + l.seq_q),
        reinterpret_cast<int32_t*>(ws + l.seq_kv));
}

struct Binding {
    int64_t uid;
    void* ptr;
};

// Bindings every graph has (offsets, lengths, scale).
void bind_common(std::vector<Binding>& b, char* ws, const Layout& l, float* scale) {
    b.push_back({kUidOffQ, ws + l.off_q});
    b.push_back({kUidOffK, ws + l.off_k});
    b.push_back({kUidOffV, ws + l.off_v});
    b.push_back({kUidOffO, ws + l.off_o});
    b.push_back({kUidOffStats, ws + l.off_stats});
    b.push_back({kUidSeqQ, ws + l.seq_q});
    b.push_back({kUidSeqKV, ws + l.seq_kv});
    b.push_back({kUidScale, scale});
}

// Variant pack + cudnnBackendExecute on the context's handle (bound to the compute stream).
void execute(const Plan& plan, std::vector<Binding> bindings, void* engine_workspace, const std::string& what) {
    std::sort(bindings.begin(), bindings.end(), [](const Binding& a, const Binding& b) { return a.uid < b.uid; });
    bool match = bindings.size() == plan.uids.size();
    for (size_t i = 0; match && i < bindings.size(); i++) match = bindings[i].uid == plan.uids[i];
    if (!match) throw_internal(what + ": the variant pack does not match the graph's tensors");
    std::vector<int64_t> uids;
    std::vector<void*> ptrs;
    for (const Binding& b : bindings) {
        uids.push_back(b.uid);
        ptrs.push_back(b.ptr);
    }
    try {
        Desc pack(CUDNN_BACKEND_VARIANT_PACK_DESCRIPTOR, what + ": variant pack");
        const int64_t n = static_cast<int64_t>(uids.size());
        TANDEM_DESC_SET(pack, CUDNN_ATTR_VARIANT_PACK_UNIQUE_IDS, CUDNN_TYPE_INT64, n, uids.data());
        TANDEM_DESC_SET(pack, CUDNN_ATTR_VARIANT_PACK_DATA_POINTERS, CUDNN_TYPE_VOID_PTR, n, ptrs.data());
        TANDEM_DESC_SET(pack, CUDNN_ATTR_VARIANT_PACK_WORKSPACE, CUDNN_TYPE_VOID_PTR, 1, &engine_workspace);
        pack.finalize();
        const cudnnStatus_t s = cudnnBackendExecute(context().cudnn, plan.plan.get(), pack.get());
        if (s != CUDNN_STATUS_SUCCESS) fail(s, what + ": cudnnBackendExecute (" + plan.engine + ")");
    } catch (const BuildError& e) {
        throw_cudnn(e.status, e.message.c_str(), __FILE__, __LINE__);
    }
}

}  // namespace

// ---------------------------------------------------------------------------------------------------------
// Public API
// ---------------------------------------------------------------------------------------------------------

bool cudnn_attention_available(std::string* reason) {
    auto no = [&](std::string why) {
        if (reason) *reason = std::move(why);
        return false;
    };
    const size_t version = cudnnGetVersion();
    if (version < kMinCudnnVersion)
        return no("cuDNN " + version_string(version) + " is older than " + version_string(kMinCudnnVersion) +
                  ", the first version this packed (ragged) attention graph is written for");
    std::string why;
    if (!device_available(&why)) return no("no CUDA device: " + why);
    try {
        const Context& ctx = context();
        if (ctx.cudnn == nullptr) return no("the CUDA context has no cuDNN handle");
        const std::string sm = "sm_" + std::to_string(ctx.cc_major) + std::to_string(ctx.cc_minor);
        if (ctx.cc_major < 8) return no(sm + ": cuDNN fused attention needs compute capability 8.0 or newer");
        if (ctx.cc_major == 8 || ctx.cc_major == 12)
            return no(sm +
                      ": cuDNN's packed (THD) attention backward with packed stats runs on Hopper and "
                      "Blackwell data-centre GPUs only (sm_9x, sm_10x)");
    } catch (const std::exception& e) {
        return no(e.what());
    }
    if (reason) reason->clear();
    return true;
}

bool cudnn_attention_supported(const CudnnAttentionShape& shape, std::string* reason) {
    auto no = [&](std::string why) {
        if (reason) *reason = std::move(why);
        return false;
    };
    std::string why;
    if (!cudnn_attention_available(&why)) return no(why);
    const std::string problem = shape_problem(shape);
    if (!problem.empty()) return no("invalid shape (" + problem + "): " + describe(shape));
    if (shape.D % 16 != 0 || shape.D > 256)
        return no("head_dim " + std::to_string(shape.D) +
                  ": cuDNN's packed attention needs a multiple of 16, at most 256");
    if (shape.D > 128 && context().cc_major != 9)
        return no("head_dim " + std::to_string(shape.D) + ": above 128 only on Hopper (sm_9x)");
    const Entry& e = entry_for(shape);
    if (!e.ok) return no(e.reason);
    if (shape.split && shape.Hq != shape.Hkv) {
        const Entry& g = entry_for(group_shape(shape));
        if (!g.ok) return no("the backward in kv-head groups: " + g.reason);
    }
    if (reason) reason->clear();
    return true;
}

bool cudnn_attention_split_backward(int max_tokens, int Hq, int Hkv, int D) {
    TANDEM_KCHECK(max_tokens > 0 && Hq > 0 && Hkv > 0 && D > 0);
    return Hq != Hkv && int64_t(layout_for(bucket_batch(max_tokens), max_tokens, Hq, Hkv, D, 0).bytes) > kSplitBytes;
}

size_t cudnn_attention_stats_bytes(const CudnnAttentionShape& shape) {
    return static_cast<size_t>(shape.T) * static_cast<size_t>(shape.Hq) * sizeof(float);
}

size_t cudnn_attention_workspace_bytes(const CudnnAttentionShape& shape) {
    const std::string problem = shape_problem(shape);
    if (!problem.empty())
        throw_internal("cudnn_attention_workspace_bytes: invalid shape (" + problem + "): " + describe(shape));
    const Key k = key_for(shape);
    const bool ok = cudnn_attention_supported(shape);
    const int64_t engine = ok ? entry_for(shape).engine_workspace() : 0;
    if (shape.split && shape.Hq != shape.Hkv) {
        const int64_t group_engine = ok ? entry_for(group_shape(shape)).engine_workspace() : 0;
        return std::max(layout_for(k.B, shape.T, shape.Hq, shape.Hkv, shape.D, engine, false).bytes,
                        split_layout_for(k.B, shape.T, shape.Hq, shape.Hkv, shape.D, group_engine).bytes);
    }
    return layout_for(k.B, shape.T, shape.Hq, shape.Hkv, shape.D, engine).bytes;
}

size_t cudnn_attention_stats_bytes_max(int max_tokens, int max_seqlen, int Hq) {
    (void)max_seqlen;  // packed stats depend on the tokens only
    return static_cast<size_t>(std::max(max_tokens, 0)) * static_cast<size_t>(std::max(Hq, 0)) * sizeof(float);
}

size_t cudnn_attention_workspace_bytes_max(int max_tokens, int max_seqlen, int Hq, int Hkv, int D, bool split) {
    (void)max_seqlen;  // our pieces are linear in tokens; the engine part is capped at kEngineWorkspaceCap
    TANDEM_KCHECK(max_tokens > 0 && Hq > 0 && Hkv > 0 && D > 0);
    // S <= T, so the largest cuDNN batch is the bucket of max_tokens.
    const int64_t B = bucket_batch(max_tokens);
    if (split && Hq != Hkv)
        return std::max(layout_for(B, max_tokens, Hq, Hkv, D, kEngineWorkspaceCap, false).bytes,
                        split_layout_for(B, max_tokens, Hq, Hkv, D, kEngineWorkspaceCap).bytes);
    return layout_for(B, max_tokens, Hq, Hkv, D, kEngineWorkspaceCap).bytes;
}

void cudnn_attention_forward(bf16* out, void* stats, const bf16* q, const bf16* k, const bf16* v,
                             const int32_t* cu_seqlens, const CudnnAttentionShape& shape, void* workspace) {
    TANDEM_KCHECK_PTR(out);
    TANDEM_KCHECK_PTR(stats);
    TANDEM_KCHECK_PTR(q);
    TANDEM_KCHECK_PTR(k);
    TANDEM_KCHECK_PTR(v);
    TANDEM_KCHECK_PTR(cu_seqlens);
    TANDEM_KCHECK_PTR(workspace);
    Entry& e = checked_entry(shape, "cudnn_attention_forward");
    const Key key = key_for(shape);
    const Layout l = layout_for(key.B, shape.T, shape.Hq, shape.Hkv, shape.D, e.engine_workspace(), false);
    char* ws = aligned_workspace(workspace);
    fill_offsets(ws, l, cu_seqlens, shape, key);

    float scale = shape.scale;
    std::vector<Binding> b;
    bind_common(b, ws, l, &scale);
    b.push_back({kUidQ, const_cast<bf16*>(q)});
    b.push_back({kUidK, const_cast<bf16*>(k)});
    b.push_back({kUidV, const_cast<bf16*>(v)});
    b.push_back({kUidO, out});
    b.push_back({kUidStats, stats});
    b.push_back({kUidNegInfPadding, &e.neg_inf});
    b.push_back({kUidNegInfCausal, &e.neg_inf});
    if (key.W > 0) {
        b.push_back({kUidWindow, &e.window});
        b.push_back({kUidNegInfWindow, &e.neg_inf});
    }
    execute(e.fwd, std::move(b), ws + l.engine, "cudnn_attention_forward " + describe(shape));
}

namespace {

// The backward graph of `shape` on tensors laid out as it says (offsets already filled into ws by l).
void run_backward(Entry& e, const Key& key, const Layout& l, char* ws, bf16* dq, bf16* dk, bf16* dv, const bf16* dout,
                  const bf16* q, const bf16* k, const bf16* v, const bf16* out, const void* stats,
                  const CudnnAttentionShape& shape) {
    float scale = shape.scale;
    std::vector<Binding> b;
    bind_common(b, ws, l, &scale);
    b.push_back({kUidQ, const_cast<bf16*>(q)});
    b.push_back({kUidK, const_cast<bf16*>(k)});
    b.push_back({kUidV, const_cast<bf16*>(v)});
    b.push_back({kUidO, const_cast<bf16*>(out)});
    b.push_back({kUidDO, const_cast<bf16*>(dout)});
    b.push_back({kUidStats, const_cast<void*>(stats)});
    b.push_back({kUidDQ, dq});
    b.push_back({kUidDK, dk});
    b.push_back({kUidDV, dv});
    b.push_back({kUidNegInfPadding, &e.neg_inf});
    b.push_back({kUidNegInfCausal, &e.neg_inf});
    b.push_back({kUidOne, &e.one});
    if (key.W > 0) {
        b.push_back({kUidWindow, &e.window});
        b.push_back({kUidNegInfWindow, &e.neg_inf});
    }
    b.push_back({kUidSoftmaxSum, ws + l.softmax_sum});
    b.push_back({kUidDQAccum, ws + l.dq_accum});
    if (shape.Hq != shape.Hkv) {
        b.push_back({kUidDKFull, ws + l.dk_full});
        b.push_back({kUidDVFull, ws + l.dv_full});
    }
    execute(e.bwd, std::move(b), ws + l.engine, "cudnn_attention_backward " + describe(shape));
}

// rows x width bytes from src (row pitch spitch) to dst (row pitch dpitch), device to device.
void copy_rows(void* dst, size_t dpitch, const void* src, size_t spitch, size_t width, size_t rows) {
    TANDEM_CUDA_CHECK(
        cudaMemcpy2DAsync(dst, dpitch, src, spitch, width, rows, cudaMemcpyDeviceToDevice, context().stream));
}

}  // namespace

void cudnn_attention_backward(bf16* dq, bf16* dk, bf16* dv, const bf16* dout, const bf16* q, const bf16* k,
                              const bf16* v, const bf16* out, const void* stats, const int32_t* cu_seqlens,
                              const CudnnAttentionShape& shape, void* workspace) {
    TANDEM_KCHECK_PTR(dq);
    TANDEM_KCHECK_PTR(dk);
    TANDEM_KCHECK_PTR(dv);
    TANDEM_KCHECK_PTR(dout);
    TANDEM_KCHECK_PTR(q);
    TANDEM_KCHECK_PTR(k);
    TANDEM_KCHECK_PTR(v);
    TANDEM_KCHECK_PTR(out);
    TANDEM_KCHECK_PTR(stats);
    TANDEM_KCHECK_PTR(cu_seqlens);
    TANDEM_KCHECK_PTR(workspace);
    char* ws = aligned_workspace(workspace);
    if (!shape.split || shape.Hq == shape.Hkv) {
        Entry& e = checked_entry(shape, "cudnn_attention_backward");
        const Key key = key_for(shape);
        const Layout l = layout_for(key.B, shape.T, shape.Hq, shape.Hkv, shape.D, e.engine_workspace());
        fill_offsets(ws, l, cu_seqlens, shape, key);
        run_backward(e, key, l, ws, dq, dk, dv, dout, q, k, v, out, stats, shape);
        return;
    }
    // Per kv head h: its G query heads and its k / v into the compact buffers, the MQA backward, dq / dk / dv back.
    (void)checked_entry(shape, "cudnn_attention_backward");
    const CudnnAttentionShape gs = group_shape(shape);
    Entry& e = checked_entry(gs, "cudnn_attention_backward (kv-head group)");
    const Key key = key_for(gs);
    const SplitLayout l = split_layout_for(key.B, shape.T, shape.Hq, shape.Hkv, shape.D, e.engine_workspace());
    fill_offsets(ws, l.group, cu_seqlens, gs, key);
    const size_t T = size_t(shape.T), D = size_t(shape.D), G = size_t(gs.Hq);
    const size_t q_row = size_t(shape.Hq) * D * sizeof(bf16), kv_row = size_t(shape.Hkv) * D * sizeof(bf16);
    const size_t gq = G * D * sizeof(bf16), gk = D * sizeof(bf16);
    bf16* cq = reinterpret_cast<bf16*>(ws + l.q);
    bf16* co = reinterpret_cast<bf16*>(ws + l.o);
    bf16* cdo = reinterpret_cast<bf16*>(ws + l.dout);
    bf16* cdq = reinterpret_cast<bf16*>(ws + l.dq);
    bf16* ck = reinterpret_cast<bf16*>(ws + l.k);
    bf16* cv = reinterpret_cast<bf16*>(ws + l.v);
    bf16* cdk = reinterpret_cast<bf16*>(ws + l.dk);
    bf16* cdv = reinterpret_cast<bf16*>(ws + l.dv);
    float* cst = reinterpret_cast<float*>(ws + l.stats);
    for (int h = 0; h < shape.Hkv; ++h) {
        const size_t qh = size_t(h) * G * D, kh = size_t(h) * D;
        copy_rows(cq, gq, q + qh, q_row, gq, T);
        copy_rows(co, gq, out + qh, q_row, gq, T);
        copy_rows(cdo, gq, dout + qh, q_row, gq, T);
        copy_rows(ck, gk, k + kh, kv_row, gk, T);
        copy_rows(cv, gk, v + kh, kv_row, gk, T);
        copy_rows(cst, G * sizeof(float), static_cast<const float*>(stats) + size_t(h) * G,
                  size_t(shape.Hq) * sizeof(float), G * sizeof(float), T);
        run_backward(e, key, l.group, ws, cdq, cdk, cdv, cdo, cq, ck, cv, co, cst, gs);
        copy_rows(dq + qh, q_row, cdq, gq, gq, T);
        copy_rows(dk + kh, kv_row, cdk, gk, gk, T);
        copy_rows(dv + kh, kv_row, cdv, gk, gk, T);
    }
}

void cudnn_attention_clear_cache() {
    t_cache.entries.clear();
    t_cache.handle = nullptr;
}

}  // namespace tandem::cuda
