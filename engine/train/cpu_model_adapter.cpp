// SPDX-FileCopyrightText: 2026 The Tandem developers
// SPDX-License-Identifier: GPL-3.0-or-later
// The CPU backend behind the trainer: CpuModelAdapter, the only code that touches CpuModel, and
// load_cpu_model for Trainer::prepare (train/prepare.cpp).
#include <memory>
#include <optional>

#include "model/model.h"
#include "train/backends.h"

namespace tandem {

namespace {

class CpuModelAdapter final : public TrainableModel {
public:
    explicit CpuModelAdapter(CpuModel model) : model_(std::move(model)) {}
    const ModelConfig& model_config() const override { return model_.config(); }
    std::vector<LoraParam>& lora_params() override { return model_.lora_params(); }
    void zero_grads() override { model_.zero_grads(); }
    double forward_backward(const PackedBatch& b, float grad_scale, uint64_t dropout_seed) override {
        return model_.forward_backward(b, grad_scale, dropout_seed);
    }
    double forward_loss(const PackedBatch& b) override { return model_.forward_loss(b); }
    void set_lora(const LoraTensors& t) override { model_.set_lora(t); }
    LoraTensors lora_tensors() override { return model_.lora_tensors(); }
    size_t weight_bytes() const override { return model_.weight_bytes(); }
    size_t lora_bytes() const override { return model_.lora_bytes(); }
    size_t activation_bytes() const override { return model_.activation_bytes(); }

private:
    CpuModel model_;
};

}  // namespace

namespace train {

std::unique_ptr<TrainableModel> load_cpu_model(const RunConfig& config, const std::optional<PeftAdapter>& init) {
    CpuModel model = CpuModel::load(config.model, config.lora, config.seed, config.training.batch_tokens,
                                    config.memory.checkpointing, config.quantization == Quantization::Nf4,
                                    config.precision == Precision::Fp8);
    if (init) model.set_lora(init->tensors);
    return std::make_unique<CpuModelAdapter>(std::move(model));
}

}  // namespace train

}  // namespace tandem
