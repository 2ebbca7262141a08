// SPDX-FileCopyrightText: 2026 The Tandem developers
// SPDX-License-Identifier: GPL-3.0-or-later
// Merged-model export (see merged.h): shard by shard, each adapted weight merged in fp32 and rounded once.
#include "export/merged.h"

#include <algorithm>
#include <chrono>
#include <cstring>
#include <map>
#include <set>
#include <system_error>

#include <nlohmann/json.hpp>

#include "core/files.h"
#include "export/base_weights.h"
#include "io/mxfp4.h"
#include "io/atomic_file.h"
#include "kernels/cpu/gemm.h"
#include "model/expert_layout.h"
#include "tandem/error.h"

namespace tandem {

namespace fs = std::filesystem;

namespace {

// Files of a model folder that travel with the weights (everything a loader or a chat front end reads).
const char* const kCopied[] = {"generation_config.json", "tokenizer.json",     "tokenizer_config.json",
                               "special_tokens_map.json", "tokenizer.model",   "vocab.json",
                               "merges.txt",              "added_tokens.json", "chat_template.jinja",
                               "chat_template.json"};

const char* torch_dtype_name(DType d) {
    switch (d) {
    case DType::BF16: return "bfloat16";
    case DType::F16: return "float16";
    default: return "float32";
    }
}

// fp32 values -> `dtype` bytes (round to nearest even).
void store(const std::vector<float>& v, DType dtype, std::vector<std::byte>& out) {
    out.resize(v.size() * dtype_size(dtype));
    if (dtype == DType::F32) {
        std::memcpy(out.data(), v.data(), out.size());
        return;
    }
    auto* o = reinterpret_cast<uint16_t*>(out.data());
    for (size_t i = 0; i < v.size(); ++i) o[i] = dtype == DType::BF16 ? f32_to_bf16(v[i]) : f32_to_f16(v[i]);
}

// Removes a folder on scope exit unless released (the temporary output on any failure).
struct Cleanup {
    fs::path dir;
    ~Cleanup() {
        std::error_code ec;
        if (!dir.empty()) fs::remove_all(dir, ec);
    }
};

}  // namespace

LoraMerge::LoraMerge(const ModelConfig& model, const LoraConfig& lora, const LoraTensors& tensors)
    : scaling_(float(lora.scaling())), r_(lora.r) {
    const ArchSpec arch = arch_spec(model);
    for (const LoraTensorSpec& s : lora_tensor_specs(model, lora)) {
        const auto it = tensors.find(s.name);
        const int64_t numel = s.shape.at(0) * s.shape.at(1);
        if (it == tensors.end() || int64_t(it->second.size()) != numel)
            throw_invalid("merge: LoRA tensor " + s.name + " " + shape_to_string(s.shape) +
                          (it == tensors.end() ? " is missing" : " has the wrong size") +
                          "; the adapter does not match its LoRA config");
        if (s.experts > 0) {  // the fused name, "model.layers.N.mlp.experts.gate_up_proj", and each expert's
            const std::string param = s.module.substr(s.module.rfind('.') + 1);  // "gate_up_proj"
            const std::string key = lora_module_path(s.layer, s.path) + "." + param;
            Pair& p = pairs_[key];
            (s.is_a ? p.a : p.b) = &it->second;
            p.experts = s.experts;
            p.transposed = s.transposed;
            p.interleaved = s.interleaved;
            if (s.is_a) {
                p.in = s.shape.at(1);
                continue;
            }
            p.out = s.shape.at(0);
            const MoeSpec& moe = arch.layers.at(size_t(s.layer)).moe;
            const std::string prefix = "model.layers." + std::to_string(s.layer) + "." + moe.per_expert + ".";
            const int64_t F = moe.intermediate;
            for (int64_t e = 0; e < s.experts; ++e) {
                const std::string x = prefix + std::to_string(e) + ".";
                if (param == "gate_up_proj") {
                    slices_[x + moe.gate + ".weight"] = {key, e, 0, F};
                    slices_[x + moe.up + ".weight"] = {key, e, F, F};
                } else {
                    slices_[x + moe.down_name + ".weight"] = {key, e, 0, p.out};
                }
            }
            continue;
        }
        Pair& p = pairs_[lora_module_path(s.layer, s.path) + ".weight"];
        (s.is_a ? p.a : p.b) = &it->second;
        if (s.is_a) p.in = s.shape.at(1);
        else p.out = s.shape.at(0);
    }
}

std::vector<std::string> LoraMerge::missing_in(const SafetensorsSet& base) const {
    std::vector<std::string> out;
    for (const auto& [name, p] : pairs_) {
        if (base.find(name) || is_mxfp4_tensor(base, name)) continue;
        bool split = p.experts > 0;  // the Hub's layout: every expert's tensors instead
        for (const auto& [slice, s] : slices_)
            if (s.pair == name && !base.find(slice)) split = false;
        if (!split) out.push_back(name);
    }
    return out;
}

std::vector<std::string> LoraMerge::weights() const {
    std::vector<std::string> out;
    for (const auto& [name, p] : pairs_) out.push_back(name);
    return out;
}

void LoraMerge::apply(const std::string& weight, std::span<const int64_t> shape, std::vector<float>& w,
                      const std::string& source) const {
    if (const auto sl = slices_.find(weight); sl != slices_.end()) {  // one expert's projection (the Hub's layout)
        const Slice& s = sl->second;
        const Pair& p = pairs_.at(s.pair);
        if (shape.size() != 2 || shape[0] != s.rows || shape[1] != p.in || int64_t(w.size()) != s.rows * p.in)
            throw_invalid(source + ": tensor " + weight + " is " + shape_to_string(shape) + "; the adapter's expert " +
                          "LoRA is [" + std::to_string(s.rows) + ", " + std::to_string(p.in) + "]");
        // W[rows,in] += scaling * B_e[row.., r] @ A_e[r, in]
        cpu::gemm(false, false, int(s.rows), int(p.in), r_, scaling_, p.b->data() + (s.expert * p.out + s.row) * r_,
                  r_, p.a->data() + s.expert * r_ * p.in, int(p.in), 1.0f, w.data(), int(p.in));
        return;
    }
    const auto it = pairs_.find(weight);
    if (it == pairs_.end()) return;
    const Pair& p = it->second;
    if (p.experts > 0 && p.transposed) {  // gpt-oss: [E, in, out], gate_up's out interleaved
        if (shape.size() != 3 || shape[0] != p.experts || shape[1] != p.in || shape[2] != p.out ||
            int64_t(w.size()) != p.experts * p.out * p.in)
            throw_invalid(source + ": tensor " + weight + " is " + shape_to_string(shape) + "; the adapter's experts' " +
                          "LoRA is [" + std::to_string(p.experts) + ", " + std::to_string(p.in) + ", " +
                          std::to_string(p.out) + "] (in, out)");
        std::vector<float> delta(size_t(p.out * p.in));
        const ExpertLayout layout{1, p.in, p.out, true, p.interleaved};
        for (int64_t e = 0; e < p.experts; ++e) {
            std::fill(delta.begin(), delta.end(), 0.0f);
            cpu::gemm(false, false, int(p.out), int(p.in), r_, scaling_, p.b->data() + e * p.out * r_, r_,
                      p.a->data() + e * r_ * p.in, int(p.in), 0.0f, delta.data(), int(p.in));
            const std::vector<float> d = expert_tensor_to_checkpoint(delta, layout);  // [in, out] as stored
            float* we = w.data() + e * p.out * p.in;
            for (size_t i = 0; i < d.size(); ++i) we[i] += d[i];
        }
        return;
    }
    if (p.experts > 0) {  // transformers 5's fused [E, out, in]
        if (shape.size() != 3 || shape[0] != p.experts || shape[1] != p.out || shape[2] != p.in ||
            int64_t(w.size()) != p.experts * p.out * p.in)
            throw_invalid(source + ": tensor " + weight + " is " + shape_to_string(shape) + "; the adapter's experts' " +
                          "LoRA is [" + std::to_string(p.experts) + ", " + std::to_string(p.out) + ", " +
                          std::to_string(p.in) + "]");
        for (int64_t e = 0; e < p.experts; ++e)
            cpu::gemm(false, false, int(p.out), int(p.in), r_, scaling_, p.b->data() + e * p.out * r_, r_,
                      p.a->data() + e * r_ * p.in, int(p.in), 1.0f, w.data() + e * p.out * p.in, int(p.in));
        return;
    }
    if (shape.size() != 2 || shape[0] != p.out || shape[1] != p.in || int64_t(w.size()) != p.out * p.in)
        throw_invalid(source + ": tensor " + weight + " is " + shape_to_string(shape) + "; the adapter's LoRA is [" +
                      std::to_string(p.out) + ", " + std::to_string(p.in) + "]");
    // W[out,in] += scaling * B[out,r] @ A[r,in], in fp32
    cpu::gemm(false, false, int(p.out), int(p.in), r_, scaling_, p.b->data(), r_, p.a->data(), int(p.in), 1.0f,
              w.data(), int(p.in));
}

DType parse_merge_dtype(const std::string& name) {
    if (name == "bf16" || name == "bfloat16") return DType::BF16;
    if (name == "fp16" || name == "f16" || name == "float16") return DType::F16;
    if (name == "fp32" || name == "f32" || name == "float32") return DType::F32;
    throw_invalid("dtype '" + name + "': expected bf16, fp16 or fp32");
}

void write_merged_model(const fs::path& model_dir, const ModelConfig& model, const LoraConfig& lora,
                        const LoraTensors& tensors, const fs::path& out_dir, const MergeOptions& options) {
    if (options.dtype != DType::BF16 && options.dtype != DType::F16 && options.dtype != DType::F32)
        throw_invalid("merged export: the dtype must be bf16, fp16 or fp32");
    std::error_code ec;
    if (fs::exists(out_dir, ec) && !options.overwrite && !fs::is_empty(out_dir, ec))
        throw_invalid(out_dir.string() + ": exists and is not empty; choose another folder, or allow overwriting");

    const LoraMerge merge(model, lora, tensors);

    const SafetensorsSet base = SafetensorsSet::open(model_dir);
    uint64_t total = 0, done = 0;
    for (const std::string& name : base.names()) {
        if (!is_base_tensor(base, name)) continue;
        uint64_t n = 1;
        for (int64_t d : base_tensor_shape(base, base.at(name))) n *= uint64_t(d);
        total += n * dtype_size(options.dtype);
    }
    for (const std::string& name : merge.missing_in(base))
        throw_invalid(base.source_name() + ": the adapter adapts " + name + ", which the model does not have");

    // Written under a temporary name next to out_dir, renamed into place at the end.
    const fs::path parent = out_dir.parent_path().empty() ? fs::path(".") : out_dir.parent_path();
    fs::create_directories(parent, ec);
    const fs::path tmp = parent / (out_dir.filename().string() + ".partial-" +
                                   std::to_string(std::chrono::steady_clock::now().time_since_epoch().count()));
    fs::create_directories(tmp, ec);
    if (ec) throw_io(tmp.string() + ": cannot create the export folder: " + ec.message());
    Cleanup cleanup{tmp};

    const auto& files = base.files();
    const bool sharded = files.size() > 1 || !base.index_path().empty();
    nlohmann::json weight_map = nlohmann::json::object();
    std::vector<float> w;
    for (size_t f = 0; f < files.size(); ++f) {
        const SafetensorsFile& file = files[f];
        const std::string out_name =
            sharded ? file.path().filename().string() : std::string("model.safetensors");
        std::vector<std::vector<std::byte>> bytes;  // this shard's output tensors
        std::vector<TensorToWrite> out;
        bytes.reserve(file.size());
        for (const TensorInfo& t : file.tensors()) {
            if (base.file_of(t.name) != file.path()) continue;  // not this shard's by the index
            if (!is_base_tensor(base, t.name)) continue;         // a 4-bit weight's absmax, quant_state, ...
            if (options.cancel && options.cancel->load()) throw Error(ErrorCategory::Cancelled, "export cancelled");
            bytes.emplace_back();
            const std::string name = base_tensor_name(base, t);  // an MXFP4 parameter's for its _blocks
            const bool adapted = merge.adapts(name);
            const std::vector<int64_t> shape = base_tensor_shape(base, t);  // a 4-bit weight: its float shape
            if (!adapted && t.dtype == options.dtype) {
                bytes.back().assign(t.data.begin(), t.data.end());
            } else {
                read_base_tensor(base, t, w, "a merged export");  // 4-bit weights dequantized first
                merge.apply(name, shape, w, base.source_name());
                store(w, options.dtype, bytes.back());
            }
            out.push_back({name, options.dtype, shape, bytes.back()});
            weight_map[name] = out_name;
            done += bytes.back().size();
            if (options.progress) options.progress(done, total);
        }
        write_safetensors(tmp / out_name, out, {{"format", "pt"}});
    }
    if (sharded)
        write_file_atomic(tmp / "model.safetensors.index.json",
                          nlohmann::json{{"metadata", {{"total_size", done}}}, {"weight_map", weight_map}}.dump(2));

    // config.json with the new dtype (and without a quantization_config: these are plain weights).
    nlohmann::json config = read_json_file(model_dir / "config.json", size_t(16) << 20);
    config["dtype"] = torch_dtype_name(options.dtype);        // transformers >= 4.56
    config["torch_dtype"] = torch_dtype_name(options.dtype);  // older readers
    config.erase("quantization_config");
    write_file_atomic(tmp / "config.json", config.dump(2));
    for (const char* name : kCopied)
        if (fs::is_regular_file(model_dir / name, ec)) {
            fs::copy_file(model_dir / name, tmp / name, fs::copy_options::overwrite_existing, ec);
            if (ec) throw_io((tmp / name).string() + ": cannot copy " + name + ": " + ec.message());
        }

    if (fs::exists(out_dir, ec)) {
        fs::remove_all(out_dir, ec);
        if (ec) throw_io(out_dir.string() + ": cannot replace it: " + ec.message());
    }
    fs::rename(tmp, out_dir, ec);
    if (ec) throw_io(out_dir.string() + ": cannot move the export into place: " + ec.message());
    cleanup.dir.clear();
}

}  // namespace tandem
