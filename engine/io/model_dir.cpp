// SPDX-FileCopyrightText: 2026 The Tandem developers
// SPDX-License-Identifier: GPL-3.0-or-later
// Model folder inspection (see tandem/model_dir.h). Weight files are chosen like transformers does:
// model.safetensors.index.json first, then model.safetensors, then any other *.safetensors (except
// Mistral's consolidated*.safetensors, which uses different tensor names and duplicates the HF shards).
#include "tandem/model_dir.h"

#include <algorithm>
#include <set>

#include "core/files.h"
#include "io/mxfp4.h"
#include "io/quant4_checkpoint.h"
#include "tandem/error.h"

namespace tandem {

namespace {

namespace fs = std::filesystem;

bool is_file(const fs::path& p) {
    std::error_code ec;
    return fs::is_regular_file(p, ec);
}

bool has_suffix(const std::string& name, std::string_view suffix) {
    return name.size() >= suffix.size() && name.compare(name.size() - suffix.size(), suffix.size(), suffix) == 0;
}

std::string conversion_hint(const fs::path& dir) {
    return "Convert it once with transformers: python -c \"from transformers import AutoModelForCausalLM as M; "
           "M.from_pretrained('" +
           dir.string() +
           "').save_pretrained('OUT', safe_serialization=True)\" "
           "(also copy the tokenizer files), then point Tandem at OUT.";
}

SafetensorsSet open_weights(const fs::path& dir, ModelInfo& info) {
    std::vector<fs::path> safetensors, pickles, gguf, consolidated;
    std::error_code ec;
    for (const auto& entry : fs::directory_iterator(dir, ec)) {
        if (!entry.is_regular_file(ec)) continue;
        const auto name = entry.path().filename().string();
        if (has_suffix(name, ".safetensors")) {
            if (name.rfind("consolidated", 0) == 0)
                consolidated.push_back(entry.path());
            else if (name != "adapter_model.safetensors")
                safetensors.push_back(entry.path());
        } else if (has_suffix(name, ".bin") || has_suffix(name, ".pt") || has_suffix(name, ".pth") ||
                   has_suffix(name, ".ckpt") || name == "pytorch_model.bin.index.json") {
            pickles.push_back(entry.path());
        } else if (has_suffix(name, ".gguf")) {
            gguf.push_back(entry.path());
        }
    }
    if (ec) throw_io(dir.string() + ": cannot list the folder: " + ec.message());
    std::sort(safetensors.begin(), safetensors.end());

    if (!pickles.empty() && (is_file(dir / "model.safetensors.index.json") || !safetensors.empty()))
        info.notes.push_back("ignored " + std::to_string(pickles.size()) +
                             " pickle checkpoint file(s); the safetensors weights are used");
    if (is_file(dir / "model.safetensors.index.json")) {
        info.index_file = dir / "model.safetensors.index.json";
        return SafetensorsSet::open_index(info.index_file);
    }
    if (is_file(dir / "model.safetensors")) return SafetensorsSet::open_files({dir / "model.safetensors"});
    if (!safetensors.empty()) return SafetensorsSet::open_files(safetensors);

    if (!pickles.empty())
        throw_unsupported(
            dir.string() + ": only pickle checkpoints here (" + pickles.front().filename().string() +
            (pickles.size() > 1 ? " and " + std::to_string(pickles.size() - 1) + " more" : std::string()) +
            "). Tandem refuses them: loading a pickle (.bin/.pt/.pth/.ckpt) runs whatever code it "
            "contains. " +
            conversion_hint(dir));
    if (!consolidated.empty())
        throw_unsupported(dir.string() + ": only " + consolidated.front().filename().string() +
                          " (Mistral's native layout) here; Tandem reads the Hugging Face layout "
                          "(model-*.safetensors + model.safetensors.index.json). Download those files as well.");
    if (!gguf.empty())
        throw_unsupported(dir.string() +
                          ": only GGUF files here; Tandem trains from Hugging Face safetensors "
                          "weights. Download the original (non-GGUF) model.");
    throw_invalid(dir.string() +
                  ": no weights found (expected model.safetensors, or "
                  "model.safetensors.index.json with its shards)");
}

void inspect_tokenizer(const fs::path& dir, ModelInfo& info) {
    info.has_tokenizer_json = is_file(dir / "tokenizer.json");
    info.has_generation_config = is_file(dir / "generation_config.json");
    const auto tc = dir / "tokenizer_config.json";
    info.has_tokenizer_config = is_file(tc);
    if (info.has_tokenizer_config) {
        const auto j = read_json_file(tc, size_t(64) << 20);
        if (!j.is_object()) throw_invalid(tc.string() + ": must be a JSON object");
        if (j.contains("chat_template")) {
            const auto& t = j["chat_template"];
            // A string, or (older multi-template form) a list of {"name", "template"}.
            info.has_chat_template = (t.is_string() && !t.get<std::string>().empty()) || (t.is_array() && !t.empty());
        }
    }
    // transformers >= 4.43 saves the template as its own file.
    if (is_file(dir / "chat_template.jinja") || is_file(dir / "chat_template.json")) info.has_chat_template = true;
    if (!info.has_tokenizer_json) info.notes.push_back("no tokenizer.json in the folder");
}

void check_tensors(const ModelConfig& config, const SafetensorsSet& weights, ModelInfo& info) {
    const auto expected = expected_tensors(config);
    std::set<std::string> used;
    std::set<std::string> dtypes;
    int64_t params = 0;
    const std::string cfg = info.config_path.filename().string();
    for (const auto& e : expected) {
        const auto* t = weights.find(e.name);
        if (!t && e.shape.size() >= 2 && is_mxfp4_tensor(weights, e.name)) {
            // gpt-oss's MXFP4 experts (io/mxfp4.h): the blocks hold the parameter with its last two axes swapped,
            // as transformers' convert_moe_packed_tensors reads them.
            const Mxfp4Tensor q = find_mxfp4(weights, e.name, mxfp4_out_in(e.shape));
            used.insert(q.blocks->name);
            used.insert(q.scales->name);
            dtypes.insert("MXFP4");
            int64_t n = 1;
            for (int64_t d : e.shape) n *= d;
            params += n;
            continue;
        }
        if (!t) {
            std::string hint;
            if (e.name == "lm_head.weight") hint = " (" + cfg + " has tie_word_embeddings=false)";
            throw_invalid(weights.source_name() + ": tensor '" + e.name + "' (expected shape " +
                          shape_to_string(e.shape) + ") is missing; " + info.config_path.string() + " (" +
                          config.architecture + ", " + std::to_string(config.num_hidden_layers) +
                          " layers) requires it" + hint);
        }
        if (is_quant4_tensor(weights, e.name)) {
            // A 4-bit projection (*-bnb-4bit checkpoints): its parts, checked against the float shape.
            const Quant4Tensors q = find_quant4(weights, e.name, e.shape);
            for (const TensorInfo* part : {q.codes, q.absmax, q.nested_absmax, q.nested_code, q.code})
                if (part) used.insert(part->name);
            for (const auto& name : weights.names())
                if (name.rfind(e.name + ".quant_state.", 0) == 0) used.insert(name);
            dtypes.insert("4-bit " + q.quant_type);
            int64_t n = 1;
            for (int64_t d : e.shape) n *= d;
            params += n;
            continue;
        }
        if (t->shape != e.shape)
            throw_invalid(weights.file_of(e.name).string() + ": tensor '" + e.name + "' has shape " +
                          shape_to_string(t->shape) + ", but " + info.config_path.string() + " implies " +
                          shape_to_string(e.shape) + "; the weights do not match the config");
        if (!(t->dtype == DType::F32 || t->dtype == DType::F16 || t->dtype == DType::BF16))
            throw_unsupported(weights.file_of(e.name).string() + ": tensor '" + e.name + "' has dtype " +
                              std::string(dtype_name(t->dtype)) +
                              "; only F32, F16 and BF16 weights are supported (quantized checkpoints are not)");
        used.insert(e.name);
        dtypes.insert(std::string(dtype_name(t->dtype)));
        params += t->numel();
    }
    for (const auto& name : weights.names())
        if (!used.count(name)) info.extra_tensors.push_back(name);
    info.dtypes.assign(dtypes.begin(), dtypes.end());
    info.parameter_count = params;
    info.tensors_checked = true;
}

}  // namespace

static ModelDir open_impl(const fs::path& dir) {
    std::error_code ec;
    if (!fs::exists(dir, ec)) throw_invalid(dir.string() + ": model folder not found");
    if (!fs::is_directory(dir, ec))
        throw_invalid(dir.string() + ": expected a model folder (with config.json and *.safetensors), got a file");
    ModelDir out;
    ModelInfo& info = out.info;
    info.dir = dir;
    info.config_path = dir / "config.json";
    if (!is_file(info.config_path))
        throw_invalid(dir.string() +
                      ": no config.json in this folder; expected a Hugging Face model folder "
                      "(config.json, *.safetensors, tokenizer.json)");
    info.config = load_model_config(info.config_path);
    out.weights = open_weights(dir, info);
    for (const auto& f : out.weights.files()) info.weight_files.push_back(f.path());
    info.weight_bytes = out.weights.total_bytes();
    inspect_tokenizer(dir, info);
    // Experts: transformers 5's fused 3-D tensors, or the Hub's one tensor per expert (arch/arch.h MoeSpec).
    for (int64_t l = 0; l < info.config.num_hidden_layers; ++l)
        if (info.config.is_moe_layer(l)) {
            info.config.experts_fused =
                out.weights.find("model.layers." + std::to_string(l) + ".mlp.experts.gate_up_proj") != nullptr;
            break;
        }

    if (info.config.supported) {
        check_tensors(info.config, out.weights, info);
    } else {
        // Checkpoints of the not-yet-trainable families may use layouts we do not model (gpt-oss's MXFP4
        // experts), so their tensors are only counted.
        std::set<std::string> dtypes;
        for (const auto& name : out.weights.names()) {
            const auto& t = out.weights.at(name);
            if (has_suffix(name, "rotary_emb.inv_freq")) {
                info.extra_tensors.push_back(name);
                continue;
            }
            dtypes.insert(std::string(dtype_name(t.dtype)));
            info.parameter_count += t.numel();
        }
        info.dtypes.assign(dtypes.begin(), dtypes.end());
        info.notes.push_back("tensor shapes not checked: " + info.config.unsupported_reason);
    }
    return out;
}

ModelInfo inspect_model_dir(const fs::path& dir) {
    return open_impl(dir).info;
}

ModelDir open_model_dir(const fs::path& dir) {
    return open_impl(dir);
}

}  // namespace tandem
