// SPDX-FileCopyrightText: 2026 The Tandem developers
// SPDX-License-Identifier: GPL-3.0-or-later
// Data parallelism: N full model replicas ("ranks") behind one TrainableModel, so the trainer's step protocol
// is unchanged. Micro-batch i of an optimizer step runs on rank i mod N (with the trainer's own grad_scale and
// dropout seed, so an N-rank step computes exactly what one rank computes with the same micro-batches, up to
// the order in which gradients are summed); queue_optimizer_step then all-reduces the LoRA gradients in
// per-layer buckets (gradient_buckets) and the step's loss over the ranks, and every rank runs the same
// optimizer update on the same sums, so the replicas stay identical without a broadcast.
// Decisions a reader must know:
//  - One worker thread per rank runs that rank's queued work in order; the trainer's thread only queues and
//    collects. A rank that throws aborts the communicator (no other rank hangs) and collect_step rethrows the
//    first error.
//  - Two ways to exchange. Host: this class sums the ranks' host gradients (LoraParam::grad) bucket by bucket
//    with the communicator's host collectives, right for the CPU backend, whose tensors are host memory (how CI
//    checks "2 ranks x 2 micro-batches == 1 rank x 4"). Device (Communicator::on_device(): NCCL or the peer
//    communicator, train/cuda_communicators.h): each rank model is attached to the communicator and sums its
//    own device gradients on a communication stream, a layer's bucket as soon as that layer's backward is done
//    in the rank's last micro-batch of the step (begin_step tells each rank how many it gets), then the loss
//    with the stop votes, all without a host wait; the ranks' own step protocol runs ahead as on one GPU, and
//    collect_step waits for each rank's step (one host sync per rank and step, whatever the layer count).
//  - Device ranks keep their thread: everything that touches a rank (loading, when built with the factory
//    constructor, and every call, also lora_tensors, memory_stats and evaluation) runs on its worker thread, the
//    thread whose CUDA context (device, streams) the model was made in.
//  - lora_params(), lora_tensors(), memory figures and evaluation are rank 0's (the ranks are identical after
//    every update); set_lora and sync_from_host (resume) write every rank.
//  - Several processes (tandem-cli train --nodes): the model holds this process's share of a world of
//    comm->size() ranks, its replicas being global ranks comm->first_rank() + r (SocketCommunicator). Every
//    process is handed every micro-batch (they all build the same deterministic batch stream) and runs only
//    those of its ranks, i mod world; the rest are skipped, so each rank reads its shard.
//  - Stopping: a stop request (set_stop_request, e.g. Ctrl-C on one process) is summed with the step's loss,
//    so every process learns of it at the same step and stop_agreed() turns true on all of them after that
//    step: the trainer watches stop_agreed() and every process stops at the same step boundary.
#pragma once

#include <atomic>
#include <condition_variable>
#include <deque>
#include <exception>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "train/communicator.h"
#include "train/trainable_model.h"

namespace tandem {

// Consecutive LoRA tensors (in lora_params order) of one layer: the unit of one all-reduce.
struct GradBucket {
    int layer = 0;
    size_t first = 0, count = 0;  // tensors
    size_t numel = 0;             // their elements together
};
// The buckets of a parameter list, in order; tensors of one layer that are not consecutive start a new bucket.
std::vector<GradBucket> gradient_buckets(const std::vector<LoraParam>& params);

class DataParallelModel final : public TrainableModel {
public:
    // ranks: the replicas, loaded alike (same model, LoRA config and initial values); comm: a world whose
    // local share (comm->local_size()) is ranks.size().
    DataParallelModel(std::vector<std::unique_ptr<TrainableModel>> ranks, std::unique_ptr<Communicator> comm);
    // The ranks made by make(r) on their own worker threads (device ranks: a CUDA model lives on the thread
    // that made it), r = 0 .. comm->local_size() - 1; a rank that fails to load stops the others' loading and
    // its error is rethrown.
    DataParallelModel(const std::function<std::unique_ptr<TrainableModel>(int)>& make, std::unique_ptr<Communicator> comm);
    // One local rank run on the calling thread, with no worker: a device model stays on the thread that made it
    // (one GPU per process in a world across processes, tandem-cli train --device cuda --nodes). Every call
    // runs the rank's work before it returns, as the model alone would; a failure aborts the communicator.
    struct OnThisThread {};
    DataParallelModel(std::unique_ptr<TrainableModel> rank, std::unique_ptr<Communicator> comm, OnThisThread);
    ~DataParallelModel() override;

    int rank_count() const { return int(ranks_.size()); }  // this process's replicas
    int world_size() const { return world_; }
    int first_rank() const { return first_; }
    // request: read at every optimizer step's exchange (nullptr: none); stop_agreed(): true from the step at
    // which any process of the world had its request set.
    void set_stop_request(const std::atomic<bool>* request) {
        stop_request_.store(request);
        stop_agreed_.store(false);
    }
    const std::atomic<bool>& stop_agreed() const { return stop_agreed_; }
    // Stops the collectives of every process with this reason (a failure outside the model, e.g. the trainer's).
    void abort(const std::string& reason) { comm_->abort(reason); }
    TrainableModel& rank(int r) { return *ranks_[size_t(r)]; }
    // Runs f(rank r's model) on rank r's thread and waits (checks and tests).
    void on_rank(int r, const std::function<void(TrainableModel&)>& f);
    bool device_collectives() const { return device_; }
    std::string transport() const { return comm_->transport(); }
    const std::vector<GradBucket>& buckets() const { return buckets_; }

    const ModelConfig& model_config() const override { return ranks_[0]->model_config(); }
    std::vector<LoraParam>& lora_params() override { return ranks_[0]->lora_params(); }
    void zero_grads() override;
    void begin_step(int micro_batches) override;
    double forward_backward(const PackedBatch& batch, float grad_scale, uint64_t dropout_seed) override;
    double forward_loss(const PackedBatch& batch) override;
    void set_lora(const LoraTensors& tensors) override;
    LoraTensors lora_tensors() override;
    size_t weight_bytes() const override { return ranks_[0]->weight_bytes(); }
    size_t lora_bytes() const override { return ranks_[0]->lora_bytes(); }
    size_t activation_bytes() const override { return ranks_[0]->activation_bytes(); }

    double optimizer_step(const OptimizerStep& s) override;
    void queue_forward_backward(const PackedBatch& batch, float grad_scale, uint64_t dropout_seed) override;
    void queue_optimizer_step(const OptimizerStep& s) override;
    StepResult collect_step() override;
    int queued_steps() const override { return int(steps_.size()) + pending_steps_; }
    bool runs_ahead() const override { return device_; }

    void sync_to_host() override;
    void sync_from_host() override;
    MemoryStats memory_stats() override;

private:
    struct Worker {
        std::thread thread;
        std::deque<std::function<void()>> tasks;
        bool busy = false;
    };
    void post(int r, std::function<void()> task);
    void wait_idle();  // every rank's queue done; rethrows the first failure
    void start_workers(size_t n);
    void stop_workers();   // frees the ranks on their threads, aborts the communicator, joins the workers
    void check_ranks();    // the same LoRA tensors on every rank; the device path's attachment
    void run(int r);
    void run_task(int r, const std::function<void()>& task);  // runs it; a failure is kept and aborts the world
    void exchange(int r);  // host path: rank r's part of the step's collectives (gradients, loss)

    std::vector<std::unique_ptr<TrainableModel>> ranks_;
    std::unique_ptr<Communicator> comm_;
    int world_ = 1, first_ = 0;
    bool device_ = false;            // device collectives (the ranks reduce their own gradients)
    std::vector<StepResult> collected_;  // [rank] device path: the step each rank returned
    std::vector<GradBucket> buckets_;
    std::vector<std::vector<float>> staging_;  // [rank] one bucket's gradients, packed for its all-reduce
    std::atomic<const std::atomic<bool>*> stop_request_{nullptr};
    std::atomic<bool> stop_agreed_{false};
    std::vector<Worker> workers_;
    std::mutex m_;
    std::condition_variable cv_;
    bool stop_ = false;
    bool inline_ = false;  // OnThisThread: post() runs the task at once on the caller's thread
    std::exception_ptr error_;
    int micro_ = 0;                 // micro-batches queued in the current step
    std::vector<double> loss_;      // [rank] loss of the step being queued
    std::vector<double> norm_;      // [rank] the last update's gradient norm
    std::deque<StepResult> steps_;  // queued, not collected (filled once the workers finish the step)
    int pending_steps_ = 0;
};

}  // namespace tandem
