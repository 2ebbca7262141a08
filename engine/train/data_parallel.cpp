// SPDX-FileCopyrightText: 2026 The Tandem developers
// SPDX-License-Identifier: GPL-3.0-or-later
// Data parallelism over rank replicas (see data_parallel.h).
#include "train/data_parallel.h"

#include <algorithm>
#include <cstring>

#include "tandem/error.h"

namespace tandem {

std::vector<GradBucket> gradient_buckets(const std::vector<LoraParam>& params) {
    std::vector<GradBucket> out;
    for (size_t i = 0; i < params.size(); ++i) {
        const int layer = params[i].spec.layer;
        if (out.empty() || out.back().layer != layer) out.push_back({layer, i, 0, 0});
        out.back().count += 1;
        out.back().numel += params[i].grad.size();
    }
    return out;
}

DataParallelModel::DataParallelModel(std::vector<std::unique_ptr<TrainableModel>> ranks,
                                     std::unique_ptr<Communicator> comm)
    : ranks_(std::move(ranks)), comm_(std::move(comm)) {
    if (ranks_.empty()) throw_invalid("data parallel: no ranks");
    if (!comm_ || comm_->local_size() != int(ranks_.size()))
        throw_internal("data parallel: a communicator of " + std::to_string(ranks_.size()) + " local ranks is needed");
    start_workers(ranks_.size());
    check_ranks();
}

DataParallelModel::DataParallelModel(const std::function<std::unique_ptr<TrainableModel>(int)>& make,
                                     std::unique_ptr<Communicator> comm)
    : comm_(std::move(comm)) {
    if (!comm_ || comm_->local_size() < 1) throw_internal("data parallel: a communicator with local ranks is needed");
    ranks_.resize(size_t(comm_->local_size()));
    start_workers(ranks_.size());
    for (size_t r = 0; r < ranks_.size(); ++r) post(int(r), [this, r, &make] { ranks_[r] = make(int(r)); });
    try {
        wait_idle();
        check_ranks();
    } catch (...) {
        stop_workers();  // the loaded ranks freed on their own threads; no destructor runs after a throwing constructor
        throw;
    }
}

DataParallelModel::DataParallelModel(std::unique_ptr<TrainableModel> rank, std::unique_ptr<Communicator> comm,
                                     OnThisThread)
    : comm_(std::move(comm)), inline_(true) {
    if (!rank) throw_invalid("data parallel: no ranks");
    if (!comm_ || comm_->local_size() != 1)
        throw_internal("data parallel: a rank on the calling thread needs a communicator of one local rank");
    ranks_.push_back(std::move(rank));
    workers_.resize(1);
    try {
        check_ranks();
    } catch (const std::exception& e) {
        // The other processes are waiting in the world's collectives: tell them (no destructor runs after this).
        comm_->abort("rank " + std::to_string(comm_->first_rank()) + " failed: " + e.what());
        throw;
    }
}

void DataParallelModel::start_workers(size_t n) {
    workers_.resize(n);
    for (size_t r = 0; r < n; ++r) workers_[r].thread = std::thread([this, r] { run(int(r)); });
}

void DataParallelModel::check_ranks() {
    world_ = comm_->size();
    first_ = comm_->first_rank();
    const std::vector<LoraParam>& p0 = ranks_[0]->lora_params();
    for (size_t r = 1; r < ranks_.size(); ++r) {
        const std::vector<LoraParam>& p = ranks_[r]->lora_params();
        bool same = p.size() == p0.size();
        for (size_t i = 0; same && i < p.size(); ++i)
            same = p[i].spec.name == p0[i].spec.name && p[i].value.size() == p0[i].value.size();
        if (!same) throw_internal("data parallel: rank " + std::to_string(r) + " holds other LoRA tensors than rank 0");
    }
    buckets_ = gradient_buckets(p0);
    staging_.resize(ranks_.size());
    loss_.assign(ranks_.size(), 0.0);
    norm_.assign(ranks_.size(), 0.0);
    collected_.assign(ranks_.size(), StepResult{});
    device_ = comm_->on_device();
    if (device_) {
        std::vector<char> ok(ranks_.size(), 0);
        for (size_t r = 0; r < ranks_.size(); ++r)
            post(int(r), [this, r, &ok] { ok[r] = ranks_[r]->attach_communicator(*comm_, first_ + int(r)) ? 1 : 0; });
        wait_idle();
        for (size_t r = 0; r < ranks_.size(); ++r)
            if (!ok[r])
                throw_internal("data parallel: rank " + std::to_string(first_ + int(r)) + "'s model cannot use the " +
                               comm_->transport() + " transport's device collectives");
    }
}

DataParallelModel::~DataParallelModel() { stop_workers(); }

void DataParallelModel::stop_workers() {
    // Device ranks are freed on the threads that made them; a failure here has been reported already.
    // A worker runs every task queued before it stops; one waiting in a collective is woken by the abort.
    if (inline_) {
        // No thread of this process waits in a collective; a failure has aborted the world already, and a normal
        // end must not abort it (another process may still be completing the last step's collectives).
        ranks_[0].reset();
        return;
    }
    for (size_t r = 0; r < ranks_.size(); ++r) post(int(r), [this, r] { ranks_[r].reset(); });
    {
        std::lock_guard<std::mutex> lock(m_);
        stop_ = true;
    }
    comm_->abort("its training ended (see its output for why)");
    cv_.notify_all();
    for (Worker& w : workers_)
        if (w.thread.joinable()) w.thread.join();
}

void DataParallelModel::on_rank(int r, const std::function<void(TrainableModel&)>& f) {
    post(r, [this, r, &f] { f(*ranks_[size_t(r)]); });
    wait_idle();
}

void DataParallelModel::run(int r) {
    Worker& w = workers_[size_t(r)];
    while (true) {
        std::function<void()> task;
        {
            std::unique_lock<std::mutex> lock(m_);
            cv_.wait(lock, [&] { return stop_ || !w.tasks.empty(); });
            if (w.tasks.empty()) return;  // stopping
            task = std::move(w.tasks.front());
            w.tasks.pop_front();
            w.busy = true;
        }
        run_task(r, task);
        {
            std::lock_guard<std::mutex> lock(m_);
            w.busy = false;
        }
        cv_.notify_all();
    }
}

void DataParallelModel::run_task(int r, const std::function<void()>& task) {
    try {
        task();
    } catch (...) {
        std::string what = "unknown error";
        try {
            throw;
        } catch (const std::exception& e) {
            what = e.what();
        } catch (...) {
        }
        {
            std::lock_guard<std::mutex> lock(m_);
            if (!error_) error_ = std::current_exception();
        }
        // Outside the lock: a communicator across processes tells the others why, over the network.
        if (comm_) comm_->abort("rank " + std::to_string(first_ + r) + " failed: " + what);
    }
}

void DataParallelModel::post(int r, std::function<void()> task) {
    if (inline_) {
        run_task(r, task);
        return;
    }
    {
        std::lock_guard<std::mutex> lock(m_);
        workers_[size_t(r)].tasks.push_back(std::move(task));
    }
    cv_.notify_all();
}

void DataParallelModel::wait_idle() {
    std::unique_lock<std::mutex> lock(m_);
    cv_.wait(lock, [&] {
        for (const Worker& w : workers_)
            if (w.busy || !w.tasks.empty()) return false;
        return true;
    });
    if (error_) {
        std::exception_ptr e = error_;
        error_ = nullptr;
        std::rethrow_exception(e);
    }
}

void DataParallelModel::zero_grads() {
    for (size_t r = 0; r < ranks_.size(); ++r) post(int(r), [this, r] { ranks_[r]->zero_grads(); });
    wait_idle();
    micro_ = 0;
    std::fill(loss_.begin(), loss_.end(), 0.0);
}

void DataParallelModel::begin_step(int micro_batches) {
    // Global rank g runs micro-batches g, g + world, ...: ceil((n - g) / world) of them.
    for (size_t r = 0; r < ranks_.size(); ++r) {
        const int g = first_ + int(r);
        const int mine = micro_batches > g ? (micro_batches - g + world_ - 1) / world_ : 0;
        post(int(r), [this, r, mine] { ranks_[r]->begin_step(mine); });
    }
    if (!device_) wait_idle();  // the host path's workers are idle between steps; the device path queues on
    micro_ = 0;
    std::fill(loss_.begin(), loss_.end(), 0.0);
}

void DataParallelModel::queue_forward_backward(const PackedBatch& batch, float grad_scale, uint64_t dropout_seed) {
    const int r = micro_++ % world_ - first_;
    if (r < 0 || r >= rank_count()) return;  // another process's rank runs it
    // The batch is copied into the task: the trainer may reuse its own after this call returns.
    if (device_) {
        post(r, [this, r, batch, grad_scale, dropout_seed] {
            ranks_[size_t(r)]->queue_forward_backward(batch, grad_scale, dropout_seed);
        });
        return;
    }
    post(r, [this, r, batch, grad_scale, dropout_seed] {
        loss_[size_t(r)] += ranks_[size_t(r)]->forward_backward(batch, grad_scale, dropout_seed);
    });
}

double DataParallelModel::forward_backward(const PackedBatch& batch, float grad_scale, uint64_t dropout_seed) {
    const int r = micro_++ % world_ - first_;
    if (r < 0 || r >= rank_count()) return 0.0;  // another process's rank runs it; its loss joins the step's sum
    double loss = 0;
    post(r, [&, r] { loss = ranks_[size_t(r)]->forward_backward(batch, grad_scale, dropout_seed); });
    wait_idle();
    return loss;
}

LoraTensors DataParallelModel::lora_tensors() {
    LoraTensors out;
    post(0, [&] { out = ranks_[0]->lora_tensors(); });
    wait_idle();
    return out;
}

void DataParallelModel::sync_to_host() {
    post(0, [this] { ranks_[0]->sync_to_host(); });
    wait_idle();
}

MemoryStats DataParallelModel::memory_stats() {
    // Rank 0's figures, with every local rank's GPUs (each rank reads its own, on its thread).
    std::vector<MemoryStats> each(ranks_.size());
    for (size_t r = 0; r < ranks_.size(); ++r) post(int(r), [this, r, &each] { each[r] = ranks_[r]->memory_stats(); });
    wait_idle();
    MemoryStats out = each[0];
    for (size_t r = 1; r < each.size(); ++r)
        for (const GpuStats& g : each[r].gpus)
            if (std::none_of(out.gpus.begin(), out.gpus.end(), [&](const GpuStats& o) { return o.device == g.device; }))
                out.gpus.push_back(g);  // two replicas on one GPU: it is listed once
    return out;
}

double DataParallelModel::forward_loss(const PackedBatch& batch) {
    double loss = 0;
    post(0, [&] { loss = ranks_[0]->forward_loss(batch); });
    wait_idle();
    return loss;
}

void DataParallelModel::exchange(int r) {
    TrainableModel& m = *ranks_[size_t(r)];
    m.sync_to_host();
    std::vector<LoraParam>& p = m.lora_params();
    const int g = first_ + r;
    // One collective per bucket (a layer's tensors packed together), then the loss with the stop requests:
    // the sums are element-wise, so packing changes no bit.
    std::vector<float>& buf = staging_[size_t(r)];
    for (const GradBucket& b : buckets_) {
        buf.resize(b.numel);
        size_t at = 0;
        for (size_t i = b.first; i < b.first + b.count; ++i) {
            std::copy(p[i].grad.begin(), p[i].grad.end(), buf.begin() + ptrdiff_t(at));
            at += p[i].grad.size();
        }
        comm_->all_reduce_sum(g, buf.data(), buf.size());
        at = 0;
        for (size_t i = b.first; i < b.first + b.count; ++i) {
            std::copy(buf.begin() + ptrdiff_t(at), buf.begin() + ptrdiff_t(at + p[i].grad.size()), p[i].grad.begin());
            at += p[i].grad.size();
        }
    }
    const std::atomic<bool>* request = stop_request_.load();
    double tail[2] = {loss_[size_t(r)], r == 0 && request && request->load() ? 1.0 : 0.0};
    comm_->all_reduce_sum(g, tail, 2);
    loss_[size_t(r)] = tail[0];
    if (tail[1] > 0) stop_agreed_.store(true);
}

void DataParallelModel::queue_optimizer_step(const OptimizerStep& s) {
    if (device_) {
        // The ranks sum the step's loss with rank 0's stop vote on the device, after their gradients.
        const std::atomic<bool>* request = stop_request_.load();
        const double vote = request && request->load() ? 1.0 : 0.0;
        for (int r = 0; r < rank_count(); ++r)
            post(r, [this, r, s, vote] {
                ranks_[size_t(r)]->set_step_vote(r == 0 ? vote : 0.0);
                ranks_[size_t(r)]->queue_optimizer_step(s);
            });
        ++pending_steps_;
        micro_ = 0;
        return;
    }
    for (int r = 0; r < rank_count(); ++r)
        post(r, [this, r, s] {
            exchange(r);
            norm_[size_t(r)] = ranks_[size_t(r)]->optimizer_step(s);
        });
    ++pending_steps_;
    micro_ = 0;
}

double DataParallelModel::optimizer_step(const OptimizerStep& s) {
    queue_optimizer_step(s);
    const StepResult res = collect_step();
    return res.grad_norm;
}

StepResult DataParallelModel::collect_step() {
    if (pending_steps_ == 0 && steps_.empty()) throw_internal("trainer: collect_step() with no step queued");
    if (device_) {
        // Each rank's oldest queued step (the rank's one host sync); the transport's own failures (a dead peer)
        // are reported over the values a failed collective may have left.
        for (int r = 0; r < rank_count(); ++r)
            post(r, [this, r] { collected_[size_t(r)] = ranks_[size_t(r)]->collect_step(); });
        wait_idle();
        comm_->check();
        --pending_steps_;
        const StepResult res = collected_[0];
        for (int r = 1; r < rank_count(); ++r)
            if (std::memcmp(&collected_[size_t(r)].grad_norm, &res.grad_norm, sizeof(double)) != 0 &&
                res.grad_norm == res.grad_norm)
                throw_internal("data parallel: rank " + std::to_string(first_ + r) + "'s gradient norm differs from "
                               "rank " + std::to_string(first_) + "'s after the all-reduce (the replicas diverged)");
        if (res.votes > 0) stop_agreed_.store(true);
        return res;
    }
    wait_idle();
    if (pending_steps_ > 0) {
        // The workers ran the queued step(s) in order; one step is queued at a time by the trainer's protocol.
        for (int r = 1; r < rank_count(); ++r)
            if (std::memcmp(&norm_[size_t(r)], &norm_[0], sizeof(double)) != 0 && norm_[0] == norm_[0])
                throw_internal("data parallel: rank " + std::to_string(r) + "'s gradient norm differs from rank 0's "
                               "after the all-reduce (the replicas diverged)");
        steps_.push_back({loss_[0], norm_[0]});
        pending_steps_ = 0;
        std::fill(loss_.begin(), loss_.end(), 0.0);
    }
    const StepResult res = steps_.front();
    steps_.pop_front();
    return res;
}

void DataParallelModel::set_lora(const LoraTensors& tensors) {
    for (size_t r = 0; r < ranks_.size(); ++r) post(int(r), [this, r, &tensors] { ranks_[r]->set_lora(tensors); });
    wait_idle();
}

void DataParallelModel::sync_from_host() {
    std::vector<LoraParam>& p0 = ranks_[0]->lora_params();
    for (size_t r = 1; r < ranks_.size(); ++r) {
        std::vector<LoraParam>& p = ranks_[r]->lora_params();
        for (size_t i = 0; i < p.size(); ++i) {
            p[i].value = p0[i].value;
            p[i].exp_avg = p0[i].exp_avg;
            p[i].exp_avg_sq = p0[i].exp_avg_sq;
        }
    }
    for (size_t r = 0; r < ranks_.size(); ++r) post(int(r), [this, r] { ranks_[r]->sync_from_host(); });
    wait_idle();
}

}  // namespace tandem
