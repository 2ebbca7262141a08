// SPDX-FileCopyrightText: 2026 The Tandem developers
// SPDX-License-Identifier: GPL-3.0-or-later
// `tandem-cli generate --model DIR [--adapter DIR] --prompt TEXT [--chat] [--max-new-tokens N]
// [--temperature T] [--seed S]` — text continuation on the CPU reference model. Greedy at T = 0 (default),
// else sampling from softmax(logits / T) with a seeded SplitMix64. An empty prompt starts from BOS; --chat
// wraps the prompt as one user message through the model's chat template (chatml when it has none) with
// the generation prompt. Stops at EOS (tokenizer's or config's) or after N tokens (capped by
// max_position_embeddings). Known limit: no KV cache — each new token re-runs the whole sequence.
#include <cstdio>
#include <iostream>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "commands.h"
#include "tandem/chat_template.h"
#include "tandem/error.h"
#include "tandem/inference.h"
#include "tandem/tokenizer.h"

namespace tandem::cli {

Run add_generate_command(CLI::App& app) {
    struct Opts {
        std::string model, adapter, prompt;
        bool chat = false;
        int max_new = 128;
        double temperature = 0.0;
        uint64_t seed = 0;
    };
    auto o = std::make_shared<Opts>();
    CLI::App* sub = app.add_subcommand(
        "generate", "generate text on the CPU reference model (simple non-cached path: every token re-runs the "
                    "whole sequence, fine for small models)");
    sub->add_option("--model", o->model, "model folder (config.json + safetensors + tokenizer.json)")->required();
    sub->add_option("--adapter", o->adapter, "PEFT LoRA adapter folder");
    sub->add_option("--prompt", o->prompt, "prompt text (empty: start from BOS)")->required();
    sub->add_flag("--chat", o->chat, "wrap the prompt as a user message through the chat template");
    sub->add_option("--max-new-tokens", o->max_new, "tokens to generate at most (capped by max_position_embeddings)")
        ->check(CLI::NonNegativeNumber);
    sub->add_option("--temperature", o->temperature, "0 = greedy; > 0 samples from softmax(logits / T)")
        ->check(CLI::NonNegativeNumber);
    sub->add_option("--seed", o->seed, "sampling seed");
    return [o]() -> int {
        const Tokenizer tok = Tokenizer::load(o->model);
        std::vector<int32_t> ids;
        std::string text = o->prompt;
        if (o->chat) {
            const auto& cfg = tok.config();
            std::optional<ChatTemplate> tmpl;
            if (!cfg.chat_template.empty())
                tmpl.emplace(ChatTemplate::compile(cfg.chat_template, cfg.bos_token, cfg.eos_token, o->model));
            else
                tmpl.emplace(ChatTemplate::builtin("chatml", cfg.bos_token, cfg.eos_token));
            nlohmann::json msgs = nlohmann::json::array({{{"role", "user"}, {"content", o->prompt}}});
            text = tmpl->render(msgs, true, {{"enable_thinking", false}});
            ids = tok.encode(text, false);
        } else if (!o->prompt.empty()) {
            ids = tok.encode(text, true);
        }
        if (ids.empty()) {  // empty prompt (or a tokenizer that adds nothing): start from BOS
            const auto bos = tok.bos_id();
            if (!bos) throw_invalid(o->model + ": the tokenizer has no BOS token to start an empty prompt from");
            ids.push_back(*bos);
        }
        GenerateRequest req;
        req.model_dir = o->model;
        req.adapter_dir = o->adapter;
        req.prompt_ids = ids;
        req.max_new_tokens = o->max_new;
        req.temperature = o->temperature;
        req.seed = o->seed;
        if (auto e = tok.eos_id()) req.eos_ids.push_back(*e);
        for (int64_t e : model_eos_ids(o->model)) req.eos_ids.push_back(int32_t(e));
        const GenerateResult r = generate_tokens(req);
        std::vector<int32_t> all = ids;
        all.insert(all.end(), r.new_ids.begin(), r.new_ids.end());
        // Print prompt + continuation decoded together (SentencePiece decoders treat the first piece specially).
        std::cout << (o->chat ? tok.decode(r.new_ids, true) : tok.decode(all, true)) << "\n";
        return 0;
    };
}

}  // namespace tandem::cli
