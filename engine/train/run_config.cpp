// SPDX-FileCopyrightText: 2026 The Tandem developers
// SPDX-License-Identifier: GPL-3.0-or-later
// RunConfig JSON and validation. Every message names the field with its JSON path ("training.lr").
#include "tandem/run_config.h"

#include <cmath>
#include <optional>
#include <set>
#include <sstream>

#include "core/files.h"
#include "tandem/data.h"
#include "tandem/error.h"

namespace tandem {

namespace {

std::string num(double v) {
    std::ostringstream s;
    s << v;
    return s.str();
}

using json = nlohmann::json;

// Rejects keys of `obj` not in `known`; `where` is the JSON path prefix ("training").
void check_keys(const json& obj, const std::string& where, const std::set<std::string>& known) {
    if (!obj.is_object())
        throw_invalid((where.empty() ? std::string("run config") : where) + ": expected a JSON object, got " +
                      std::string(obj.type_name()));
    for (const auto& [key, v] : obj.items()) {
        if (!known.count(key)) {
            std::string list;
            for (const auto& k : known) list += (list.empty() ? "" : ", ") + k;
            throw_invalid((where.empty() ? key : where + "." + key) + ": unknown key; valid keys here are: " + list);
        }
    }
}

std::string path_of(const std::string& where, const std::string& key) { return where.empty() ? key : where + "." + key; }

void read_string(const json& obj, const std::string& where, const char* key, std::string& out) {
    if (!obj.contains(key)) return;
    const json& v = obj.at(key);
    if (v.is_null()) { out.clear(); return; }
    if (!v.is_string()) throw_invalid(path_of(where, key) + ": expected a string, got " + v.dump());
    out = v.get<std::string>();
}
// A named choice (an enum): `parse` turns the name into the value; an unknown name is refused naming the field and
// the choices.
template <class T, class Parse>
void read_choice(const json& obj, const std::string& where, const char* key, Parse parse, const char* choices, T& out) {
    if (!obj.contains(key)) return;
    std::string s;
    read_string(obj, where, key, s);
    const std::optional<T> v = parse(s);
    if (!v) throw_invalid(path_of(where, key) + ": '" + s + "' is unknown; use " + choices);
    out = *v;
}
void read_number(const json& obj, const std::string& where, const char* key, double& out) {
    if (!obj.contains(key)) return;
    const json& v = obj.at(key);
    if (!v.is_number()) throw_invalid(path_of(where, key) + ": expected a number, got " + v.dump());
    out = v.get<double>();
}
template <typename Int>
void read_int(const json& obj, const std::string& where, const char* key, Int& out) {
    if (!obj.contains(key)) return;
    const json& v = obj.at(key);
    if (!v.is_number_integer()) throw_invalid(path_of(where, key) + ": expected an integer, got " + v.dump());
    if constexpr (std::is_unsigned_v<Int>) {
        if (v.is_number_unsigned()) { out = static_cast<Int>(v.get<uint64_t>()); return; }
        const int64_t x = v.get<int64_t>();
        if (x < 0) throw_invalid(path_of(where, key) + ": must not be negative, got " + v.dump());
        out = static_cast<Int>(x);
    } else {
        if (v.is_number_unsigned() && v.get<uint64_t>() > uint64_t(std::numeric_limits<Int>::max()))
            throw_invalid(path_of(where, key) + ": " + v.dump() + " is too large");
        const int64_t x = v.get<int64_t>();
        if (x < int64_t(std::numeric_limits<Int>::min()) || x > int64_t(std::numeric_limits<Int>::max()))
            throw_invalid(path_of(where, key) + ": " + v.dump() + " is out of range");
        out = static_cast<Int>(x);
    }
}
void read_bool(const json& obj, const std::string& where, const char* key, bool& out) {
    if (!obj.contains(key)) return;
    const json& v = obj.at(key);
    if (v.is_boolean()) { out = v.get<bool>(); return; }
    if (v.is_string() && (v == "on" || v == "off")) { out = v == "on"; return; }
    throw_invalid(path_of(where, key) + ": expected true or false, got " + v.dump());
}

}  // namespace

std::string_view lr_schedule_name(LrSchedule s) noexcept {
    switch (s) {
        case LrSchedule::Constant: return "constant";
        case LrSchedule::Linear: return "linear";
        case LrSchedule::Cosine: return "cosine";
    }
    return "?";
}
std::optional<LrSchedule> parse_lr_schedule(std::string_view n) noexcept {
    if (n == "constant") return LrSchedule::Constant;
    if (n == "linear") return LrSchedule::Linear;
    if (n == "cosine") return LrSchedule::Cosine;
    return std::nullopt;
}
std::string_view checkpoint_policy_name(CheckpointPolicy p) noexcept {
    switch (p) {
        case CheckpointPolicy::Off: return "off";
        case CheckpointPolicy::Recompute: return "recompute";
        case CheckpointPolicy::Smart: return "smart";
        case CheckpointPolicy::SmartSingle: return "smart-single";
        case CheckpointPolicy::Selective: return "selective";
        case CheckpointPolicy::Auto: return "auto";
    }
    return "?";
}
std::optional<CheckpointPolicy> parse_checkpoint_policy(std::string_view n) noexcept {
    if (n == "off") return CheckpointPolicy::Off;
    if (n == "recompute") return CheckpointPolicy::Recompute;
    if (n == "smart") return CheckpointPolicy::Smart;
    if (n == "smart-single") return CheckpointPolicy::SmartSingle;
    if (n == "selective") return CheckpointPolicy::Selective;
    if (n == "auto") return CheckpointPolicy::Auto;
    return std::nullopt;
}
std::string_view device_choice_name(DeviceChoice d) noexcept {
    switch (d) {
        case DeviceChoice::Cpu: return "cpu";
        case DeviceChoice::Cuda: return "cuda";
        case DeviceChoice::Auto: return "auto";
    }
    return "?";
}
std::optional<DeviceChoice> parse_device_choice(std::string_view n) noexcept {
    if (n == "cpu") return DeviceChoice::Cpu;
    if (n == "cuda") return DeviceChoice::Cuda;
    if (n == "auto") return DeviceChoice::Auto;
    return std::nullopt;
}

std::string_view quantization_name(Quantization q) noexcept {
    switch (q) {
        case Quantization::None: return "none";
        case Quantization::Nf4: return "nf4";
    }
    return "?";
}
std::optional<Quantization> parse_quantization(std::string_view n) noexcept {
    if (n == "none") return Quantization::None;
    if (n == "nf4") return Quantization::Nf4;
    return std::nullopt;
}

std::string_view precision_name(Precision p) noexcept { return p == Precision::Fp8 ? "fp8" : "bf16"; }
std::optional<Precision> parse_precision(std::string_view n) noexcept {
    if (n == "bf16") return Precision::Bf16;
    if (n == "fp8") return Precision::Fp8;
    return std::nullopt;
}

std::string_view attention_kernels_name(AttentionKernels a) noexcept {
    return a == AttentionKernels::Inhouse ? "inhouse" : "auto";
}
std::optional<AttentionKernels> parse_attention_kernels(std::string_view n) noexcept {
    if (n == "auto") return AttentionKernels::Auto;
    if (n == "inhouse") return AttentionKernels::Inhouse;
    return std::nullopt;
}

void validate_run_config(const RunConfig& c) {
    if (!(c.memory.vram_budget_gib >= 0) || c.memory.vram_budget_gib > 1e6)
        throw_invalid("memory.vram_budget_gib: " + std::to_string(c.memory.vram_budget_gib) +
                      " must be 0 (the GPU's own size) or a positive number of GiB");
    if (!(c.memory.host_budget_gib >= 0) || c.memory.host_budget_gib > 1e6)
        throw_invalid("memory.host_budget_gib: " + std::to_string(c.memory.host_budget_gib) +
                      " must be 0 (half of the available RAM) or a positive number of GiB");
    if (c.schema_version != kRunConfigSchemaVersion)
        throw_invalid("schema_version: " + std::to_string(c.schema_version) + " is not supported; this Tandem reads " +
                      std::to_string(kRunConfigSchemaVersion));
    if (!c.devices.empty()) {
        if (c.devices.size() > 16) throw_invalid("devices: at most 16 GPUs, got " + std::to_string(c.devices.size()));
        for (const int d : c.devices)
            if (d < -1 || (d == -1 && c.devices.size() > 1))
                throw_invalid("devices: " + std::to_string(d) + " is no GPU index; give indices from 0 as CUDA numbers the "
                              "GPUs (tandem-cli --version lists them), or \"all\"");
        if (c.device == DeviceChoice::Cpu)
            throw_invalid("devices: GPUs were chosen but device is cpu; use device cuda (or auto), or leave devices out");
    }
    if (c.model.empty()) throw_invalid("model: missing; give the Hugging Face model folder to fine-tune");
    if (c.output_dir.empty()) throw_invalid("output_dir: missing; give the folder the run is written to");
    const DataConfig& d = c.data;
    if (d.dataset.empty()) throw_invalid("data.dataset: missing; give the dataset file (.json, .jsonl or .txt)");
    if (!(d.validation_fraction >= 0 && d.validation_fraction < 1))
        throw_invalid("data.validation_fraction: " + num(d.validation_fraction) + " must be in [0, 1)");
    const std::string fmt = d.format == "completion" ? "prompt_completion" : d.format;
    if (!parse_dataset_format(fmt))
        throw_invalid("data.format: '" + d.format + "' is unknown; use auto, alpaca, chat, sharegpt, prompt_completion or text");
    if (d.max_seq_len < 0) throw_invalid("data.max_seq_len: must be 0 (no limit) or positive, got " + std::to_string(d.max_seq_len));
    if (d.chat_template.empty()) throw_invalid("data.template: empty; use auto or a built-in template name");
    for (const auto& [key, src] : d.columns) (void)parse_column_mapping(key + "=" + src);
    validate_lora_config(c.lora, "lora");
    const TrainingConfig& t = c.training;
    if (!(std::isfinite(t.lr) && t.lr > 0)) throw_invalid("training.lr: " + num(t.lr) + " must be a positive number");
    if (t.warmup_steps < 0) throw_invalid("training.warmup_steps: must not be negative, got " + std::to_string(t.warmup_steps));
    if (!(t.warmup_ratio >= 0 && t.warmup_ratio < 1))
        throw_invalid("training.warmup_ratio: " + num(t.warmup_ratio) + " must be in [0, 1)");
    if (t.epochs < 0) throw_invalid("training.epochs: must not be negative, got " + std::to_string(t.epochs));
    if (t.max_steps < 0) throw_invalid("training.max_steps: must not be negative, got " + std::to_string(t.max_steps));
    if (t.epochs == 0 && t.max_steps == 0)
        throw_invalid("training.epochs: 0 with no training.max_steps; set one of them to train at all");
    if (t.batch_tokens <= 0) throw_invalid("training.batch_tokens: must be positive, got " + std::to_string(t.batch_tokens));
    if (d.packing && d.max_seq_len > t.batch_tokens)
        throw_invalid("training.batch_tokens: " + std::to_string(t.batch_tokens) + " is smaller than data.max_seq_len (" +
                      std::to_string(d.max_seq_len) + "); a sample must fit one micro-batch");
    if (t.grad_accum < 1) throw_invalid("training.grad_accum: must be >= 1, got " + std::to_string(t.grad_accum));
    if (!(std::isfinite(t.max_grad_norm) && t.max_grad_norm >= 0))
        throw_invalid("training.max_grad_norm: " + num(t.max_grad_norm) + " must be >= 0 (0 turns clipping off)");
    if (!(std::isfinite(t.weight_decay) && t.weight_decay >= 0))
        throw_invalid("training.weight_decay: " + num(t.weight_decay) + " must be >= 0");
    if (!(t.beta1 >= 0 && t.beta1 < 1)) throw_invalid("training.betas: beta1 = " + num(t.beta1) + " must be in [0, 1)");
    if (!(t.beta2 >= 0 && t.beta2 < 1)) throw_invalid("training.betas: beta2 = " + num(t.beta2) + " must be in [0, 1)");
    if (!(std::isfinite(t.eps) && t.eps > 0)) throw_invalid("training.eps: " + num(t.eps) + " must be positive");
    if (t.eval_every < 0) throw_invalid("training.eval_every: must not be negative, got " + std::to_string(t.eval_every));
    if (t.checkpoint_every < 0)
        throw_invalid("training.checkpoint_every: must not be negative, got " + std::to_string(t.checkpoint_every));
    if (!(std::isfinite(t.checkpoint_minutes) && t.checkpoint_minutes >= 0))
        throw_invalid("training.checkpoint_minutes: " + num(t.checkpoint_minutes) +
                      " must be >= 0 (0 turns timed checkpoints off)");
    if (t.keep_checkpoints < 1)
        throw_invalid("training.keep_checkpoints: must be >= 1, got " + std::to_string(t.keep_checkpoints));
    if (t.max_nonfinite_steps < 1)
        throw_invalid("training.max_nonfinite_steps: must be >= 1 (the non-finite steps in a row that stop the "
                      "run), got " + std::to_string(t.max_nonfinite_steps));
}

void to_json(nlohmann::json& j, const RunConfig& c) {
    json lora;
    to_json(lora, c.lora);
    j = json{
        {"schema_version", c.schema_version},
        {"model", c.model},
        {"init_adapter", c.init_adapter},
        {"data", {{"dataset", c.data.dataset}, {"validation", c.data.validation},
                  {"validation_fraction", c.data.validation_fraction}, {"format", c.data.format},
                  {"max_seq_len", c.data.max_seq_len}, {"packing", c.data.packing}, {"template", c.data.chat_template}}},
        {"lora", lora},
        {"training", {{"lr", c.training.lr}, {"schedule", std::string(lr_schedule_name(c.training.schedule))},
                      {"warmup_steps", c.training.warmup_steps}, {"warmup_ratio", c.training.warmup_ratio},
                      {"epochs", c.training.epochs}, {"max_steps", c.training.max_steps},
                      {"batch_tokens", c.training.batch_tokens}, {"grad_accum", c.training.grad_accum},
                      {"max_grad_norm", c.training.max_grad_norm}, {"weight_decay", c.training.weight_decay},
                      {"betas", {c.training.beta1, c.training.beta2}}, {"eps", c.training.eps},
                      {"eval_every", c.training.eval_every}, {"checkpoint_every", c.training.checkpoint_every},
                      {"checkpoint_minutes", c.training.checkpoint_minutes},
                      {"keep_checkpoints", c.training.keep_checkpoints},
                      {"max_nonfinite_steps", c.training.max_nonfinite_steps}}},
        {"memory", {{"checkpointing", std::string(checkpoint_policy_name(c.memory.checkpointing))}}},
        {"device", std::string(device_choice_name(c.device))},
        {"seed", c.seed},
        {"output_dir", c.output_dir},
    };
    // Only when set: a run written before the key existed must still compare equal on resume.
    if (!c.devices.empty()) j["devices"] = c.devices;
    if (c.quantization != Quantization::None) j["quantization"] = std::string(quantization_name(c.quantization));
    if (c.precision != Precision::Bf16) j["precision"] = std::string(precision_name(c.precision));
    if (c.memory.vram_budget_gib > 0) j["memory"]["vram_budget_gib"] = c.memory.vram_budget_gib;
    if (c.memory.host_budget_gib > 0) j["memory"]["host_budget_gib"] = c.memory.host_budget_gib;
    if (c.memory.attention != AttentionKernels::Auto)
        j["memory"]["attention"] = std::string(attention_kernels_name(c.memory.attention));
    if (c.data.train_on_all_tokens) j["data"]["train_on_all_tokens"] = true;
    if (!c.data.columns.empty()) j["data"]["columns"] = c.data.columns;
}

RunConfig parse_run_config(const nlohmann::json& j) {
    RunConfig c;
    check_keys(j, "", {"schema_version", "model", "init_adapter", "quantization", "precision", "data", "lora", "training", "memory", "device", "devices", "seed", "output_dir"});
    read_int(j, "", "schema_version", c.schema_version);
    read_string(j, "", "model", c.model);
    read_string(j, "", "init_adapter", c.init_adapter);
    read_string(j, "", "output_dir", c.output_dir);
    read_int(j, "", "seed", c.seed);
    read_choice(j, "", "device", parse_device_choice, "cpu, cuda or auto", c.device);
    if (j.contains("devices")) {
        const json& d = j.at("devices");
        if (!d.is_array()) throw_invalid("devices: expected a list of GPU indices like [0, 1], got " + d.dump());
        for (const json& x : d) {
            if (!x.is_number_integer()) throw_invalid("devices: expected GPU indices (integers), got " + x.dump());
            c.devices.push_back(x.get<int>());
        }
    }
    if (j.contains("data")) {
        const json& d = j.at("data");
        check_keys(d, "data", {"dataset", "validation", "validation_fraction", "format", "max_seq_len", "packing", "template",
                               "train_on_all_tokens", "columns"});
        if (d.contains("columns")) {
            const json& m = d.at("columns");
            if (!m.is_object()) throw_invalid("data.columns: expected an object {\"KEY\": \"COLUMN\"}");
            for (auto it = m.begin(); it != m.end(); ++it) {
                if (!it->is_string()) throw_invalid("data.columns." + it.key() + ": expected a column name (a string)");
                c.data.columns[it.key()] = it->get<std::string>();
            }
        }
        read_string(d, "data", "dataset", c.data.dataset);
        read_string(d, "data", "validation", c.data.validation);
        read_number(d, "data", "validation_fraction", c.data.validation_fraction);
        read_string(d, "data", "format", c.data.format);
        read_int(d, "data", "max_seq_len", c.data.max_seq_len);
        read_bool(d, "data", "packing", c.data.packing);
        read_string(d, "data", "template", c.data.chat_template);
        read_bool(d, "data", "train_on_all_tokens", c.data.train_on_all_tokens);
    }
    if (j.contains("lora")) c.lora = j.at("lora").get<LoraConfig>();
    if (j.contains("training")) {
        const json& t = j.at("training");
        check_keys(t, "training", {"lr", "schedule", "warmup_steps", "warmup_ratio", "epochs", "max_steps", "batch_tokens",
                                   "grad_accum", "max_grad_norm", "weight_decay", "betas", "eps", "eval_every",
                                   "checkpoint_every", "checkpoint_minutes", "keep_checkpoints", "max_nonfinite_steps"});
        TrainingConfig& x = c.training;
        read_number(t, "training", "lr", x.lr);
        read_choice(t, "training", "schedule", parse_lr_schedule, "constant, linear or cosine", x.schedule);
        read_int(t, "training", "warmup_steps", x.warmup_steps);
        read_number(t, "training", "warmup_ratio", x.warmup_ratio);
        read_int(t, "training", "epochs", x.epochs);
        read_int(t, "training", "max_steps", x.max_steps);
        read_int(t, "training", "batch_tokens", x.batch_tokens);
        read_int(t, "training", "grad_accum", x.grad_accum);
        read_number(t, "training", "max_grad_norm", x.max_grad_norm);
        read_number(t, "training", "weight_decay", x.weight_decay);
        if (t.contains("betas")) {
            const json& b = t.at("betas");
            if (!b.is_array() || b.size() != 2 || !b[0].is_number() || !b[1].is_number())
                throw_invalid("training.betas: expected two numbers [beta1, beta2], got " + b.dump());
            x.beta1 = b[0].get<double>();
            x.beta2 = b[1].get<double>();
        }
        read_number(t, "training", "eps", x.eps);
        read_int(t, "training", "eval_every", x.eval_every);
        read_int(t, "training", "checkpoint_every", x.checkpoint_every);
        read_number(t, "training", "checkpoint_minutes", x.checkpoint_minutes);
        read_int(t, "training", "keep_checkpoints", x.keep_checkpoints);
        read_int(t, "training", "max_nonfinite_steps", x.max_nonfinite_steps);
    }
    read_choice(j, "", "quantization", parse_quantization, "none or nf4", c.quantization);
    read_choice(j, "", "precision", parse_precision, "bf16 or fp8", c.precision);
    if (j.contains("memory")) {
        const json& m = j.at("memory");
        check_keys(m, "memory", {"checkpointing", "vram_budget_gib", "host_budget_gib", "attention"});
        read_number(m, "memory", "vram_budget_gib", c.memory.vram_budget_gib);
        read_number(m, "memory", "host_budget_gib", c.memory.host_budget_gib);
        read_choice(m, "memory", "attention", parse_attention_kernels, "auto or inhouse", c.memory.attention);
        read_choice(m, "memory", "checkpointing", parse_checkpoint_policy,
                    "off, recompute, selective, smart, smart-single or auto", c.memory.checkpointing);
    }
    return c;
}

void from_json(const nlohmann::json& j, RunConfig& out) {
    RunConfig c = parse_run_config(j);
    validate_run_config(c);
    out = std::move(c);
}

RunConfig load_run_config(const std::filesystem::path& path, bool validate) {
    const json j = read_json_file(path);
    try {
        RunConfig c = parse_run_config(j);
        if (validate) validate_run_config(c);
        return c;
    } catch (const Error& e) {
        throw Error(e.category(), path.string() + ": " + e.what());
    }
}

}  // namespace tandem
