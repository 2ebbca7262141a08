// SPDX-FileCopyrightText: 2026 The Tandem developers
// SPDX-License-Identifier: GPL-3.0-or-later
// What the data-parallel tests share (test_data_parallel.cpp: ranks as threads; test_rendezvous.cpp: ranks in
// processes over sockets): the llama fixture as a CPU run config with LoRA dropout on (the seeds must reach the
// rank that runs each micro-batch), its replicas, its four sequences as micro-batches, and two optimizer steps
// the trainer's way (queue the micro-batches, queue the optimizer step, collect).
#pragma once

#include <cstdint>
#include <filesystem>
#include <memory>
#include <vector>

#include <nlohmann/json.hpp>

#include "core/files.h"
#include "export/peft_adapter.h"
#include "tandem/data.h"
#include "tandem/model_config.h"
#include "tandem/run_config.h"
#include "test_support.h"
#include "train/backends.h"
#include "train/trainable_model.h"

namespace tandem::test::dp {

inline std::filesystem::path llama() { return fixtures() / "models" / "llama"; }

inline RunConfig fixture_config() {
    RunConfig c;
    c.model = llama().string();
    c.output_dir = "unused";
    c.data.dataset = "unused";
    c.device = DeviceChoice::Cpu;
    c.training.batch_tokens = 64;
    c.seed = 5;
    c.lora = read_peft_adapter(llama() / "adapter", load_model_config(llama())).config;
    c.lora.dropout = 0.1;
    return c;
}

inline std::unique_ptr<TrainableModel> replica(const RunConfig& c) {
    return train::load_cpu_model(c, read_peft_adapter(llama() / "adapter", load_model_config(llama())));
}

inline std::vector<std::unique_ptr<TrainableModel>> replicas(int n) {
    std::vector<std::unique_ptr<TrainableModel>> out;
    for (int i = 0; i < n; ++i) out.push_back(replica(fixture_config()));
    return out;
}

// Four micro-batches: the fixture's sequences one by one.
inline std::vector<PackedBatch> micro_batches() {
    const auto seqs = read_json_file(llama() / "sequences.json")["sequences"].get<std::vector<std::vector<int32_t>>>();
    std::vector<PackedBatch> out;
    for (const auto& s : seqs) out.push_back(batch_from_sequences({s}));
    return out;
}

struct StepLog {
    std::vector<StepResult> steps;
    LoraTensors values;
};

inline StepLog train_two_steps(TrainableModel& m, const std::vector<PackedBatch>& micro = micro_batches()) {
    int64_t labels = 0;
    for (const auto& b : micro) labels += b.num_label_tokens;
    StepLog log;
    for (int64_t step = 1; step <= 2; ++step) {
        m.zero_grads();
        for (size_t i = 0; i < micro.size(); ++i)
            m.queue_forward_backward(micro[i], float(1.0 / double(labels)), uint64_t(1000 * step + int64_t(i)));
        OptimizerStep s;
        s.lr = 1e-2;
        s.max_grad_norm = 1.0;
        s.step = step;
        m.queue_optimizer_step(s);
        log.steps.push_back(m.collect_step());
    }
    m.sync_to_host();
    log.values = m.lora_tensors();
    return log;
}

}  // namespace tandem::test::dp
