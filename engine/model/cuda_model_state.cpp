// SPDX-FileCopyrightText: 2026 The Tandem developers
// SPDX-License-Identifier: GPL-3.0-or-later
// tandem::CudaModel's LoRA state on the device (values, gradients and AdamW moments to and from the host, an
// adapter set in, routing injected for the self-test) and data parallelism's sums: the gradient buckets, one per
// layer, handed to the communication stream as each layer's backward ends (see cuda_model.h). The rest of the
// model is cuda_model.cpp and cuda_runtime.cpp; the state they share, model/cuda_model_impl.h. The build without
// CUDA has the stubs of these functions in cuda_model.cpp.
#include "model/cuda_model.h"

#if TANDEM_WITH_CUDA

#include <string>
#include <vector>

#include "model/cuda_model_impl.h"
#include "tandem/error.h"

namespace tandem {

using namespace cuda_impl;

// ---------------------------------------------------------------------------------------------------------
// LoRA state
// ---------------------------------------------------------------------------------------------------------

void CudaModel::inject_routing(const std::vector<std::vector<int32_t>>& routing) {
    Impl& m = *impl_;
    const Dims& d = m.d;
    if (d.E == 0 || routing.empty()) {
        m.forced.clear();
        return;
    }
    if (routing.size() != size_t(d.L)) throw_invalid("inject_routing: one entry per layer expected");
    const size_t per = size_t(d.T) * size_t(d.topk);
    if (m.forced_routing.bytes() == 0) m.forced_routing = cuda::DeviceBuffer(size_t(d.L) * per * sizeof(int32_t), "injected MoE routing");
    m.forced.assign(size_t(d.L), 0);
    for (int l = 0; l < d.L; ++l) {
        const auto& r = routing[size_t(l)];
        if (r.empty()) continue;
        if (!d.is_moe(l) || r.size() > per || r.size() % size_t(d.topk) != 0)
            throw_invalid("inject_routing: layer " + std::to_string(l) + " is not an MoE layer or has " +
                          std::to_string(r.size()) + " ids");
        for (int32_t e : r)
            if (e < 0 || e >= d.E) throw_invalid("inject_routing: expert id " + std::to_string(e) + " out of range");
        TANDEM_CUDA_CHECK(cudaMemcpyAsync(static_cast<int32_t*>(m.forced_routing.data()) + size_t(l) * per, r.data(),
                                          r.size() * sizeof(int32_t), cudaMemcpyHostToDevice, stream()));
        m.forced[size_t(l)] = 1;
    }
    cuda::synchronize();
}

void CudaModel::sync_to_host() {
    Impl& m = *impl_;
    m.download_lora(m.lora_value, &LoraParam::value);
    m.download_lora(m.lora_grad, &LoraParam::grad);
    m.download_lora(m.lora_m, &LoraParam::exp_avg);
    m.download_lora(m.lora_v, &LoraParam::exp_avg_sq);
}

void CudaModel::sync_from_host() {
    Impl& m = *impl_;
    for (size_t i = 0; i < m.params.size(); ++i) {
        const LoraParam& p = m.params[i];
        const size_t n = size_t(m.y.lora_numel[i]);
        if (p.value.size() != n || p.exp_avg.size() != n || p.exp_avg_sq.size() != n)
            throw_invalid("sync_from_host: LoRA tensor " + p.spec.name + " holds the wrong number of elements (value " +
                          std::to_string(p.value.size()) + ", exp_avg " + std::to_string(p.exp_avg.size()) +
                          ", exp_avg_sq " + std::to_string(p.exp_avg_sq.size()) + "; expected " + std::to_string(n) +
                          ")");
    }
    m.upload_lora_values();
    m.upload_lora_moments();
    cuda::synchronize();
}

void CudaModel::set_lora(const LoraTensors& tensors) {
    Impl& m = *impl_;
    auto& params = m.params;
    if (tensors.size() != params.size())
        throw_invalid("set_lora: the adapter has " + std::to_string(tensors.size()) + " tensors, the model expects " +
                      std::to_string(params.size()) + " (different r or target modules?)");
    for (size_t i = 0; i < params.size(); ++i) {
        const auto& p = params[i];
        auto it = tensors.find(p.spec.name);
        if (it == tensors.end()) throw_invalid("set_lora: the adapter lacks tensor " + p.spec.name);
        if (it->second.size() != size_t(m.y.lora_numel[i]))
            throw_invalid("set_lora: tensor " + p.spec.name + " has " + std::to_string(it->second.size()) +
                          " elements, expected " + std::to_string(m.y.lora_numel[i]));
    }
    for (auto& p : params) p.value = tensors.at(p.spec.name);
    m.upload_lora_values();
    cuda::synchronize();
}

LoraTensors CudaModel::lora_tensors() {
    Impl& m = *impl_;
    m.download_lora(m.lora_value, &LoraParam::value);
    LoraTensors out;
    for (const auto& p : m.params) out[p.spec.name] = p.value;
    return out;
}

void CudaModel::zero_grads() {
    Impl& m = *impl_;
    if (m.y.lora_padded > 0) cuda::zero(m.lora_grad, m.y.lora_padded);
    TANDEM_CUDA_CHECK(cudaMemsetAsync(m.loss_sum + 1, 0, sizeof(double), stream()));
    m.reduce_now = m.reduced = false;
}

// ---------------------------------------------------------------------------------------------------------
// Data parallelism: the gradients summed over the ranks on a communication stream
// ---------------------------------------------------------------------------------------------------------

void CudaModel::set_all_reduce(DeviceAllReduce* r) {
    Impl& m = *impl_;
    m.all_reduce = r;
    m.reduce_now = m.reduced = false;
    m.grad_buckets.clear();
    if (!r) return;
    if (!m.options.lora_state) throw_internal("cuda model: data parallelism needs the LoRA state");
    if (!m.comm.get()) {
        m.comm = Stream::make_non_blocking();
        m.ev_grads = Event::make(cudaEventDisableTiming);
        m.ev_reduced = Event::make(cudaEventDisableTiming);
    }
    // One bucket per layer (its tensors are consecutive in lora_params order), from the first tensor's offset to
    // the last one's end; the padding between them is zero on every rank, so summing it changes nothing.
    std::vector<Impl::GradBucket> other;
    for (size_t i = 0; i < m.params.size(); ++i) {
        const int layer = m.params[i].spec.layer;
        const int64_t b = m.y.lora_offset[i], e = b + m.y.lora_numel[i];
        std::vector<Impl::GradBucket>& into = layer >= 0 && layer < m.d.L ? m.grad_buckets : other;
        if (!into.empty() && into.back().layer == layer) {
            into.back().end = e;
        } else {
            if (layer >= 0 && layer < m.d.L)
                for (const Impl::GradBucket& g : m.grad_buckets)
                    if (g.layer == layer)
                        throw_internal("cuda model: layer " + std::to_string(layer) + "'s LoRA tensors are not consecutive");
            into.push_back({layer, b, e});
        }
    }
    for (const Impl::GradBucket& g : other) m.grad_buckets.push_back(g);
}

void CudaModel::reduce_in_next_backward() {
    Impl& m = *impl_;
    if (!m.all_reduce) throw_internal("cuda model: reduce_in_next_backward() without set_all_reduce()");
    m.reduce_now = true;
}

void CudaModel::set_step_vote(double vote) { impl_->vote = vote; }

void CudaModel::Impl::reduce_bucket(const GradBucket& b) {
    ev_grads.record(stream());
    ev_grads.wait_on(comm.get());
    const int span = tl_begin(comm.get(), "allreduce", b.layer);
    all_reduce->sum(lora_grad + b.begin, size_t(b.end - b.begin), comm.get());
    tl_end(span, comm.get());
}

void CudaModel::Impl::layer_backward_done(int l) {
    if (!reduce_now) return;
    for (const GradBucket& b : grad_buckets)
        if (b.layer == l) reduce_bucket(b);
}

}  // namespace tandem

#endif  // TANDEM_WITH_CUDA
