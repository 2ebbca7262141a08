// SPDX-FileCopyrightText: 2026 The Tandem developers
// SPDX-License-Identifier: GPL-3.0-or-later
// `tandem-cli eval --model DIR [--adapter DIR] --sequences FILE.json [--dump OUT.safetensors] [--grads]
// [--device cpu|cuda|auto]` — the loss of token sequences under a model (+ LoRA adapter), on the CPU
// reference model. FILE.json is {"sequences": [[ids...], ...]}; all sequences go into ONE packed batch, each
// isolated (positions restart, attention never crosses). loss = sum of next-token CE inside each sequence /
// number of predicted tokens. --dump writes `logits` [total_tokens, vocab] F32 (sequences in order) and
// `loss` [1]; with --grads also `<PEFT name>.grad` for every LoRA tensor (gradient of that loss).
#include <cstdio>
#include <fstream>
#include <iostream>
#include <memory>
#include <sstream>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "commands.h"
#include "tandem/error.h"
#include "tandem/inference.h"
#include "tandem/safetensors.h"

namespace tandem::cli {
namespace {

std::vector<std::vector<int32_t>> read_sequences(const std::string& path) {
    std::ifstream in(path, std::ios::binary);
    if (!in) throw_invalid(path + ": cannot open the sequences file");
    std::stringstream ss;
    ss << in.rdbuf();
    nlohmann::json j;
    try {
        j = nlohmann::json::parse(ss.str());
    } catch (const nlohmann::json::exception& e) {  // parse_error, or out_of_range for 1e309
        throw_invalid(path + ": not valid JSON (" + e.what() + "); expected {\"sequences\": [[ids...], ...]}");
    }
    if (!j.is_object() || !j.contains("sequences") || !j["sequences"].is_array())
        throw_invalid(path + ": expected an object {\"sequences\": [[ids...], ...]}");
    const auto& arr = j["sequences"];
    if (arr.empty()) throw_invalid(path + ": \"sequences\" is empty");
    std::vector<std::vector<int32_t>> out;
    for (size_t s = 0; s < arr.size(); ++s) {
        if (!arr[s].is_array()) throw_invalid(path + ": sequence " + std::to_string(s) + " is not an array of ids");
        std::vector<int32_t> seq;
        for (size_t i = 0; i < arr[s].size(); ++i) {
            const auto& v = arr[s][i];
            if (!v.is_number_integer() || v.get<int64_t>() < 0 || v.get<int64_t>() > INT32_MAX)
                throw_invalid(path + ": sequence " + std::to_string(s) + ", token " + std::to_string(i) +
                              ": not a non-negative integer id");
            seq.push_back(int32_t(v.get<int64_t>()));
        }
        if (seq.empty()) throw_invalid(path + ": sequence " + std::to_string(s) + " is empty");
        out.push_back(std::move(seq));
    }
    return out;
}

std::span<const std::byte> bytes_of(const std::vector<float>& v) {
    return {reinterpret_cast<const std::byte*>(v.data()), v.size() * sizeof(float)};
}

}  // namespace

Run add_eval_command(CLI::App& app) {
    struct Opts {
        std::string model, adapter, sequences, dump, device = "auto";
        bool grads = false;
    };
    auto o = std::make_shared<Opts>();
    CLI::App* sub = app.add_subcommand("eval", "loss (and logits/LoRA gradients) of token sequences, CPU reference model");
    sub->add_option("--model", o->model, "model folder (config.json + safetensors)")->required();
    sub->add_option("--adapter", o->adapter, "PEFT LoRA adapter folder");
    sub->add_option("--sequences", o->sequences, "JSON file {\"sequences\": [[ids...], ...]}")->required();
    sub->add_option("--dump", o->dump, "write logits, loss (and grads) to this .safetensors file");
    sub->add_flag("--grads", o->grads, "also compute d loss / d LoRA weight (needs --adapter to be useful)");
    sub->add_option("--device", o->device, "cpu, cuda or auto (auto = cpu for now)")
        ->check(CLI::IsMember({"cpu", "cuda", "auto"}));
    return [o]() -> int {
        if (o->device == "cuda")
            throw_unsupported("eval runs on the CPU for now (CUDA evaluation comes with the inference engine); "
                              "use --device cpu");
        EvalRequest req;
        req.model_dir = o->model;
        req.adapter_dir = o->adapter;
        req.sequences = read_sequences(o->sequences);
        req.source = o->sequences;
        req.want_logits = !o->dump.empty();
        req.want_grads = o->grads;
        const EvalResult r = evaluate_sequences(req);
        std::printf("loss %.9g\n", r.loss());
        std::printf("sequences %zu tokens %lld predicted %lld loss_sum %.9g\n", req.sequences.size(),
                    static_cast<long long>(r.num_tokens), static_cast<long long>(r.num_predicted), r.loss_sum);
        if (!o->dump.empty()) {
            const std::vector<float> loss{float(r.loss())};
            std::vector<TensorToWrite> t;
            t.push_back({"logits", DType::F32, {r.num_tokens, r.vocab}, bytes_of(r.logits)});
            t.push_back({"loss", DType::F32, {1}, bytes_of(loss)});
            for (const auto& g : r.grads) t.push_back({g.name, DType::F32, g.shape, bytes_of(g.data)});
            write_safetensors(o->dump, t, {{"format", "pt"}});
            std::printf("wrote %s\n", o->dump.c_str());
        }
        return 0;
    };
}

}  // namespace tandem::cli
