// SPDX-FileCopyrightText: 2026 The Tandem developers
// SPDX-License-Identifier: GPL-3.0-or-later
// evaluate_sequences / generate_tokens on the CpuModel (see tandem/inference.h).
// V = vocab. Without an adapter the model is loaded with a rank-1 LoRA whose B is zero, so it adds exactly 0.
// generate_tokens runs on ChatSession (the KV-cache engine, through its public header) unless asked for the
// recompute loop.
#include "tandem/inference.h"

#include <algorithm>
#include <cmath>
#include <string>

#include "export/peft_adapter.h"
#include "core/random.h"
#include "model/model.h"
#include "tandem/chat.h"
#include "tandem/error.h"
#include "tandem/model_config.h"

namespace tandem {
namespace {

CpuModel load_with_adapter(const std::filesystem::path& model_dir, const std::filesystem::path& adapter_dir,
                           int max_tokens) {
    if (adapter_dir.empty()) {
        LoraConfig none;
        none.r = 1;
        none.alpha = 1;
        none.target_modules = {"q_proj"};
        CpuModel m = CpuModel::load(model_dir, none, 0, max_tokens);
        LoraTensors zeros = m.lora_tensors();
        for (auto& [name, v] : zeros) std::fill(v.begin(), v.end(), 0.0f);
        m.set_lora(zeros);
        return m;
    }
    const ModelConfig cfg = load_model_config(model_dir);
    PeftAdapter adapter = read_peft_adapter(adapter_dir, cfg);
    CpuModel m = CpuModel::load(model_dir, adapter.config, 0, max_tokens);
    m.set_lora(adapter.tensors);
    return m;
}

}  // namespace

EvalResult evaluate_sequences(const EvalRequest& req) {
    const std::string src = req.source.empty() ? std::string("sequences") : req.source;
    if (req.sequences.empty()) throw_invalid(src + ": no sequences");
    const ModelConfig cfg = load_model_config(req.model_dir);
    int64_t total = 0;
    for (size_t s = 0; s < req.sequences.size(); ++s) {
        const auto& seq = req.sequences[s];
        if (seq.empty()) throw_invalid(src + ": sequence " + std::to_string(s) + " is empty");
        if (int64_t(seq.size()) > cfg.max_position_embeddings)
            throw_invalid(src + ": sequence " + std::to_string(s) + " has " + std::to_string(seq.size()) +
                          " tokens, more than max_position_embeddings " + std::to_string(cfg.max_position_embeddings));
        for (size_t i = 0; i < seq.size(); ++i)
            if (seq[i] < 0 || seq[i] >= cfg.vocab_size)
                throw_invalid(src + ": sequence " + std::to_string(s) + ", token " + std::to_string(i) + ": id " +
                              std::to_string(seq[i]) + " is outside the model's vocabulary [0, " +
                              std::to_string(cfg.vocab_size) + ")");
        total += int64_t(seq.size());
    }
    const PackedBatch batch = batch_from_sequences(req.sequences);
    CpuModel model = load_with_adapter(req.model_dir, req.adapter_dir, int(total));
    EvalResult r;
    r.num_tokens = batch.num_tokens;
    r.num_predicted = batch.num_label_tokens;
    r.vocab = cfg.vocab_size;
    if (req.want_grads) {
        model.zero_grads();
        const float scale = r.num_predicted ? float(1.0 / double(r.num_predicted)) : 0.0f;
        r.loss_sum = model.forward_backward(batch, scale, 0);
        if (!req.adapter_dir.empty())
            for (const auto& p : model.lora_params()) r.grads.push_back({p.spec.name + ".grad", p.spec.shape, p.grad});
    } else {
        r.loss_sum = model.forward_loss(batch);
    }
    if (req.want_logits) r.logits = model.logits(batch);
    return r;
}

GenerateResult generate_tokens(const GenerateRequest& req) {
    if (req.prompt_ids.empty()) throw_invalid("generate: the prompt has no tokens");
    const ModelConfig cfg = load_model_config(req.model_dir);
    const int64_t max_pos = cfg.max_position_embeddings;
    if (int64_t(req.prompt_ids.size()) >= max_pos)
        throw_invalid("generate: the prompt has " + std::to_string(req.prompt_ids.size()) +
                      " tokens; the model allows " + std::to_string(max_pos) + " positions in all");
    GenerateResult r;
    r.max_new_tokens = int(std::min<int64_t>(std::max(req.max_new_tokens, 0), max_pos - int64_t(req.prompt_ids.size())));
    const int total = int(req.prompt_ids.size()) + r.max_new_tokens;
    if (!req.recompute) {
        ChatSessionOptions o;
        o.model_dir = req.model_dir;
        o.device = ChatSessionOptions::Device::Cpu;
        o.max_sequences = 1;
        o.max_context = std::max(total, 2);
        if (!req.adapter_dir.empty()) o.adapters.push_back({"adapter", req.adapter_dir});
        ChatSession session = ChatSession::open(o);
        GenerationRequest g;
        g.adapter = req.adapter_dir.empty() ? "" : "adapter";
        g.prompt_ids = req.prompt_ids;
        g.max_new_tokens = r.max_new_tokens;
        g.sampling.temperature = req.temperature;
        g.sampling.seed = req.seed;
        g.stop_at_eos = false;
        // The request's stop ids only (not the session's: the caller chose them).
        struct Stop final : GenerationSink {
            const std::vector<int32_t>* eos;
            std::atomic<bool> cancel{false};
            int32_t hit = -1;
            void on_token(int, int32_t id, std::string_view) override {
                if (!cancel && std::find(eos->begin(), eos->end(), id) != eos->end()) {
                    hit = id;
                    cancel = true;
                }
            }
        } stop;
        stop.eos = &req.eos_ids;
        const GenerationResult got = session.generate(g, &stop, &stop.cancel);
        r.new_ids = got.ids;
        if (stop.hit >= 0) {
            r.new_ids.pop_back();  // the stop token
            r.stopped_at_eos = true;
        }
        return r;
    }
    CpuModel model = load_with_adapter(req.model_dir, req.adapter_dir, std::max(total, 1));
    std::vector<int32_t> ids = req.prompt_ids;
    SplitMix64 rng(req.seed);
    for (int step = 0; step < r.max_new_tokens; ++step) {
        const std::vector<float> logits = model.last_logits(ids);  // [V]
        int32_t next = 0;
        if (req.temperature <= 0) {
            next = int32_t(std::max_element(logits.begin(), logits.end()) - logits.begin());
        } else {
            const double mx = *std::max_element(logits.begin(), logits.end());
            std::vector<double> p(logits.size());
            double sum = 0;
            for (size_t v = 0; v < p.size(); ++v) sum += (p[v] = std::exp((logits[v] - mx) / req.temperature));
            double u = rng.next_double() * sum;
            next = int32_t(p.size() - 1);
            for (size_t v = 0; v < p.size(); ++v) {
                if (u < p[v]) { next = int32_t(v); break; }
                u -= p[v];
            }
        }
        if (std::find(req.eos_ids.begin(), req.eos_ids.end(), next) != req.eos_ids.end()) {
            r.stopped_at_eos = true;
            break;
        }
        ids.push_back(next);
        r.new_ids.push_back(next);
    }
    return r;
}

std::vector<int64_t> model_eos_ids(const std::filesystem::path& model_dir) {
    return load_model_config(model_dir).eos_token_ids;
}

}  // namespace tandem
