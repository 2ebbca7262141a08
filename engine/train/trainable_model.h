// tandem::TrainableModel — what the trainer needs from a model, as an interface, so the training loop is
// testable with a small exact fake model and independent of the backend. CpuModelAdapter
// (cpu_model_adapter.cpp) is the only code that touches CpuModel. The contract is model/model.h's:
// gradients accumulate across forward_backward calls until zero_grads(), scaled by grad_scale; the
// returned loss is a SUM over the batch's predicted tokens.
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

#include "export/peft_adapter.h"
#include "model/model.h"
#include "tandem/data.h"
#include "tandem/model_config.h"

namespace tandem {

class TrainableModel {
public:
    virtual ~TrainableModel() = default;
    virtual const ModelConfig& model_config() const = 0;
    virtual std::vector<LoraParam>& lora_params() = 0;
    virtual void zero_grads() = 0;
    virtual double forward_backward(const PackedBatch& batch, float grad_scale, uint64_t dropout_seed) = 0;
    virtual double forward_loss(const PackedBatch& batch) = 0;
    virtual void set_lora(const LoraTensors& tensors) = 0;  // after the trainer changed values (resume)
    virtual LoraTensors lora_tensors() const = 0;
    virtual size_t weight_bytes() const = 0;
    virtual size_t lora_bytes() const = 0;
    virtual size_t activation_bytes() const = 0;
};

}  // namespace tandem
