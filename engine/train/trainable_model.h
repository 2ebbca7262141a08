// SPDX-FileCopyrightText: 2026 The Tandem developers
// SPDX-License-Identifier: GPL-3.0-or-later
// tandem::TrainableModel — what the trainer needs from a model, as an interface, so the training loop is
// testable with a small exact fake model and independent of the backend. CpuModelAdapter
// (cpu_model_adapter.cpp) is the only code that touches CpuModel, CudaModelAdapter (cuda_model_adapter.cpp)
// the only code that touches CudaModel. The contract is model/model.h's: gradients accumulate across
// forward_backward calls until zero_grads(), scaled by grad_scale; the returned loss is a SUM over the
// batch's predicted tokens.
// The optimizer belongs to the model so a device backend runs it where the tensors live: optimizer_step
// clips and applies AdamW to every LoRA tensor. The default implementation runs it on the host over
// lora_params() (kernels/cpu/adamw.h), moments kept in LoraParam::exp_avg/exp_avg_sq.
// The step protocol (one trainer code path for every backend): zero_grads(); queue_forward_backward() for
// each micro-batch; queue_optimizer_step(); later collect_step() returns that step's {loss sum, grad norm}.
// The trainer collects step n after queuing step n+1, so a device backend never makes the host wait inside
// a step (CUDA: one host sync per step, in collect_step). The defaults run synchronously over
// forward_backward / optimizer_step and keep the results until collected.
// Host mirror: lora_params() values, grads and moments are current only after sync_to_host() (a no-op on
// the CPU); after the trainer writes values or moments into them (resume) it calls sync_from_host().
#pragma once

#include <cstddef>
#include <cstdint>
#include <deque>
#include <vector>

#include "export/peft_adapter.h"
#include "model/model.h"
#include "tandem/data.h"
#include "tandem/model_config.h"
#include "tandem/trainer.h"

namespace tandem {

class Communicator;  // train/communicator.h

struct StepResult {
    double loss_sum = 0;   // over the step's predicted tokens
    double grad_norm = 0;  // before clipping; non-finite: the update was skipped
    double votes = 0;      // data parallelism on a device: the step's set_step_vote values summed over the ranks
};

struct OptimizerStep {
    double lr = 0;
    double beta1 = 0.9, beta2 = 0.999, eps = 1e-8, weight_decay = 0;
    double max_grad_norm = 0;  // 0: no clipping
    int64_t step = 1;          // 1-based AdamW step count
};

class TrainableModel {
public:
    virtual ~TrainableModel() = default;
    virtual const ModelConfig& model_config() const = 0;
    virtual std::vector<LoraParam>& lora_params() = 0;
    virtual void zero_grads() = 0;
    virtual double forward_backward(const PackedBatch& batch, float grad_scale, uint64_t dropout_seed) = 0;
    virtual double forward_loss(const PackedBatch& batch) = 0;
    virtual void set_lora(const LoraTensors& tensors) = 0;  // after the trainer changed values (resume)
    virtual LoraTensors lora_tensors() = 0;
    virtual size_t weight_bytes() const = 0;
    virtual size_t lora_bytes() const = 0;
    virtual size_t activation_bytes() const = 0;

    // Clipping + AdamW over every LoRA tensor; returns the global gradient norm before clipping. A
    // non-finite norm leaves every tensor unchanged (the trainer reports it).
    virtual double optimizer_step(const OptimizerStep& s);
    virtual void queue_forward_backward(const PackedBatch& batch, float grad_scale, uint64_t dropout_seed);
    virtual void queue_optimizer_step(const OptimizerStep& s);
    virtual StepResult collect_step();  // the oldest queued step; Error{Internal} when none is queued
    virtual int queued_steps() const { return int(queued_.size()); }
    // The start of a step: exactly micro_batches micro-batches follow before queue_optimizer_step (a data-parallel
    // device rank reduces its gradients during the backward of its last one). The default zeroes the gradients.
    virtual void begin_step(int micro_batches) {
        (void)micro_batches;
        zero_grads();
    }
    // Data parallelism with device collectives (Communicator::on_device, train/data_parallel.h): from now on the
    // model sums its LoRA gradients (a layer's as soon as its last backward of the step is done), its step loss
    // and the step's votes over the world through comm as global rank `rank`, on the device, before every
    // optimizer update. Called on the thread that runs the model. False: this model cannot (the default).
    virtual bool attach_communicator(Communicator& comm, int rank) {
        (void)comm;
        (void)rank;
        return false;
    }
    // With a communicator attached: this rank's vote for the next queued optimizer step (StepResult::votes).
    virtual void set_step_vote(double vote) { (void)vote; }
    // True when queued work runs on a device while the host goes on (CUDA): the trainer then collects a step
    // one step late. False (the default, synchronous backends): it collects each step at once, so a step's
    // reported time is its own.
    virtual bool runs_ahead() const { return false; }

    virtual void sync_to_host() {}
    virtual void sync_from_host() {}
    // Memory by purpose; the default adds the byte counts above (+ two moments per LoRA value).
    virtual MemoryStats memory_stats();

private:
    double queued_loss_ = 0;          // the default protocol: loss of the step being queued
    std::deque<StepResult> queued_;   // steps queued, not collected
};

}  // namespace tandem
