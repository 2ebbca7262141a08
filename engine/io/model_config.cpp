// SPDX-FileCopyrightText: 2026 The Tandem developers
// SPDX-License-Identifier: GPL-3.0-or-later
// config.json -> ModelConfig: parsing, per-family defaults (as in transformers' config classes), validation
// with messages that name the file and the field, expected tensor names/shapes, parameter counts.
// Limits on sizes are deliberately generous (10x today's largest models) — they exist to catch corrupt or
// hostile files before they turn into absurd allocations, not to second-guess real models.
#include "tandem/model_config.h"

#include <cmath>
#include <limits>

#include "arch/arch.h"
#include "core/files.h"
#include "tandem/error.h"

namespace tandem {

namespace {

using json = nlohmann::json;

std::string join(const std::vector<std::string>& v) {
    std::string s;
    for (const auto& x : v) s += (s.empty() ? "" : ", ") + x;
    return s;
}

// rope_theta and rope scaling, from the classic keys (rope_theta, rope_scaling) or from transformers v5's
// rope_parameters (which holds both).
void parse_rope(const ConfigFields& r, const Family& fam, ModelConfig& c) {
    const json& j = r.raw();
    const json* scaling = nullptr;
    const char* scaling_key = "rope_scaling";
    if (r.has("rope_scaling")) {
        scaling = &j["rope_scaling"];
    } else if (r.has("rope_parameters")) {
        scaling = &j["rope_parameters"];
        scaling_key = "rope_parameters";
    }
    if (scaling && !scaling->is_object())
        r.bad(std::string("field '") + scaling_key + "' must be an object or null, found " +
              ConfigFields::describe(*scaling));

    c.rope_theta = fam.rope_theta;
    if (r.has("rope_theta")) {
        c.rope_theta = r.number("rope_theta", fam.rope_theta);
    } else if (scaling && scaling->contains("rope_theta")) {
        c.rope_theta = ConfigFields(*scaling, r.src()).number("rope_theta", fam.rope_theta);
    }
    if (!(c.rope_theta > 0)) r.bad("rope_theta (" + std::to_string(c.rope_theta) + ") must be positive");

    if (!scaling) return;
    const ConfigFields s(*scaling, r.src());
    std::string type = s.string("rope_type", "");
    if (type.empty()) type = s.string("type", "default");
    const std::string where = std::string(scaling_key) + ".";
    auto need = [&](const char* key) -> double {
        if (!s.has(key)) r.bad(where + key + " is required for rope type '" + type + "'");
        return s.as_number((*scaling)[key], where + key);
    };
    auto& rs = c.rope_scaling;
    if (type == "default") {
        rs.type = RopeScalingType::None;
    } else if (type == "linear") {
        rs.type = RopeScalingType::Linear;
        rs.factor = need("factor");
    } else if (type == "llama3") {
        rs.type = RopeScalingType::Llama3;
        rs.factor = need("factor");
        rs.low_freq_factor = need("low_freq_factor");
        rs.high_freq_factor = need("high_freq_factor");
        if (!s.has("original_max_position_embeddings"))
            r.bad(where + "original_max_position_embeddings is required for rope type 'llama3'");
        rs.original_max_position_embeddings =
            s.as_int((*scaling)["original_max_position_embeddings"], where + "original_max_position_embeddings");
        if (!(rs.low_freq_factor > 0) || !(rs.high_freq_factor > rs.low_freq_factor))
            r.bad(where + "low_freq_factor and high_freq_factor must satisfy 0 < low < high");
        if (rs.original_max_position_embeddings <= 0)
            r.bad(where + "original_max_position_embeddings must be positive");
    } else if (type == "longrope" || type == "su") {
        // transformers' _compute_longrope_parameters: per-frequency factors (short for sequences up to
        // original_max_position_embeddings, long beyond), cos/sin scaled by attention_factor, which defaults to
        // sqrt(1 + ln(factor) / ln(original)) with factor = max_position_embeddings / original (Phi-3 keeps
        // original_max_position_embeddings at the top level of config.json).
        rs.type = RopeScalingType::LongRope;
        auto factors = [&](const char* key) {
            if (!s.has(key) || !(*scaling)[key].is_array())
                r.bad(where + key + " must be a list of numbers for rope type '" + type + "'");
            std::vector<double> out;
            for (const auto& x : (*scaling)[key]) {
                out.push_back(s.as_number(x, where + key));
                if (!(out.back() > 0)) r.bad(where + key + " holds a factor that is not positive");
            }
            // One factor per rotated pair: head_dim / 2, or fewer with partial rotary (Phi-4-mini).
            double partial = 1.0;
            for (const json* o : {&j, scaling})
                if (o && o->is_object() && o->contains("partial_rotary_factor") && (*o)["partial_rotary_factor"].is_number())
                    partial = (*o)["partial_rotary_factor"].get<double>();
            const int64_t pairs = int64_t(double(c.head_dim) * partial) / 2;
            if (int64_t(out.size()) != pairs)
                r.bad(where + key + " has " + std::to_string(out.size()) + " factors; head_dim " +
                      std::to_string(c.head_dim) + (partial != 1.0 ? " with partial_rotary_factor " + std::to_string(partial) : "") +
                      " needs " + std::to_string(pairs));
            return out;
        };
        rs.short_factor = factors("short_factor");
        rs.long_factor = factors("long_factor");
        rs.original_max_position_embeddings =
            r.has("original_max_position_embeddings") ? r.integer("original_max_position_embeddings")
            : s.has("original_max_position_embeddings")
                ? s.as_int((*scaling)["original_max_position_embeddings"], where + "original_max_position_embeddings")
                : c.max_position_embeddings;
        if (rs.original_max_position_embeddings <= 1)
            r.bad("original_max_position_embeddings must be greater than 1");
        rs.factor = double(c.max_position_embeddings) / double(rs.original_max_position_embeddings);
        rs.attention_factor =
            s.has("attention_factor") ? s.as_number((*scaling)["attention_factor"], where + "attention_factor")
            : rs.factor <= 1.0
                ? 1.0
                : std::sqrt(1.0 + std::log(rs.factor) / std::log(double(rs.original_max_position_embeddings)));
        if (!(rs.attention_factor > 0)) r.bad(where + "attention_factor must be positive");
    } else if (type == "yarn") {
        // transformers' _compute_yarn_parameters: factor (or max_position_embeddings / original when null), the
        // cos / sin factor attention_factor (given, or from mscale / mscale_all_dim, or 0.1 ln(factor) + 1),
        // beta_fast / beta_slow (null: 32 / 1), truncate (default true).
        rs.type = RopeScalingType::Yarn;
        rs.original_max_position_embeddings =  // transformers' standardize_rope_params: max_position_embeddings
            s.has("original_max_position_embeddings")
                ? s.as_int((*scaling)["original_max_position_embeddings"], where + "original_max_position_embeddings")
                : c.max_position_embeddings;
        if (rs.original_max_position_embeddings <= 0) r.bad(where + "original_max_position_embeddings must be positive");
        const bool has_factor = s.has("factor") && !(*scaling)["factor"].is_null();
        rs.factor = has_factor ? need("factor")
                               : double(c.max_position_embeddings) / double(rs.original_max_position_embeddings);
        auto optional = [&](const char* key, double def) {
            return s.has(key) && !(*scaling)[key].is_null() ? s.as_number((*scaling)[key], where + key) : def;
        };
        rs.beta_fast = optional("beta_fast", 32.0);
        rs.beta_slow = optional("beta_slow", 1.0);
        if (rs.beta_fast == 0.0) rs.beta_fast = 32.0;  // transformers: `get("beta_fast") or 32`
        if (rs.beta_slow == 0.0) rs.beta_slow = 1.0;
        if (!(rs.beta_fast > 0) || !(rs.beta_slow > 0)) r.bad(where + "beta_fast and beta_slow must be positive");
        rs.truncate = s.has("truncate") && (*scaling)["truncate"].is_boolean() ? (*scaling)["truncate"].get<bool>() : true;
        auto mscale = [](double scale, double m) { return scale <= 1.0 ? 1.0 : 0.1 * m * std::log(scale) + 1.0; };
        const double ms = optional("mscale", 0.0), ms_all = optional("mscale_all_dim", 0.0);
        rs.attention_factor = s.has("attention_factor") && !(*scaling)["attention_factor"].is_null()
                                  ? need("attention_factor")
                              : ms != 0.0 && ms_all != 0.0 ? mscale(rs.factor, ms) / mscale(rs.factor, ms_all)
                                                           : mscale(rs.factor, 1.0);
        if (!(rs.attention_factor > 0)) r.bad(where + "attention_factor must be positive");
    } else {
        throw_unsupported(r.src() + ": " + scaling_key + " type '" + type +
                          "' is not supported (supported: default, linear, llama3, longrope, yarn)");
    }
    if (!(rs.factor > 0) || rs.factor > 1e6)
        r.bad(where + "factor (" + std::to_string(rs.factor) + ") must be positive");
}

// quantization_config: bitsandbytes 4-bit (NF4 / FP4, uint8 storage) is trained as QLoRA; other methods
// (GPTQ, AWQ, FP8, bitsandbytes 8-bit) store tensors Tandem cannot read: not supported, with the reason.
void parse_quantization(const json& q, const std::string& src, ModelConfig& c) {
    auto refuse = [&](const std::string& why) {
        c.supported = false;
        c.unsupported_reason = why;
    };
    if (!q.is_object()) {
        refuse("quantization_config is not an object; use the original bf16/fp16 model");
        return;
    }
    auto str = [&](const char* k, const std::string& def) {
        return q.contains(k) && q[k].is_string() ? q[k].get<std::string>() : def;
    };
    auto flag = [&](const char* k) { return q.contains(k) && q[k].is_boolean() && q[k].get<bool>(); };
    const std::string method = str("quant_method", "unknown");
    if (method == "mxfp4" && c.architecture == "GptOssForCausalLM") {
        // gpt-oss as released: the experts in MXFP4 (the other tensors bf16), dequantized at load.
        c.experts_mxfp4 = true;
        return;
    }
    if (method != "bitsandbytes") {
        refuse("pre-quantized checkpoint (quant_method '" + method +
               "') is not supported; use the original bf16/fp16 model (Tandem quantizes to 4-bit itself: "
               "quantization nf4)");
        return;
    }
    const bool four = flag("load_in_4bit") || flag("_load_in_4bit");
    if (!four) {
        refuse("bitsandbytes 8-bit checkpoints are not supported; use the bf16/fp16 model or a 4-bit (bnb-4bit) one");
        return;
    }
    WeightQuantization& w = c.quantization;
    w.four_bit = true;
    w.prequantized = true;
    w.quant_type = str("bnb_4bit_quant_type", "fp4");  // bitsandbytes' default
    w.double_quant = flag("bnb_4bit_use_double_quant");
    if (w.quant_type != "nf4" && w.quant_type != "fp4")
        throw_unsupported(src + ": quantization_config.bnb_4bit_quant_type '" + w.quant_type +
                          "' is not supported (nf4 or fp4)");
    const std::string storage = str("bnb_4bit_quant_storage", "uint8");
    if (storage != "uint8")
        throw_unsupported(src + ": quantization_config.bnb_4bit_quant_storage '" + storage +
                          "' is not supported (only uint8, bitsandbytes' default)");
    if (q.contains("llm_int8_skip_modules") && q["llm_int8_skip_modules"].is_array()) {
        for (const auto& m : q["llm_int8_skip_modules"]) {
            if (!m.is_string())
                throw_invalid(src + ": quantization_config.llm_int8_skip_modules must be a list of strings");
            w.skip_modules.push_back(m.get<std::string>());
        }
    }
}

int64_t checked_mul(int64_t a, int64_t b) {
    int64_t out = 0;
    if (__builtin_mul_overflow(a, b, &out)) return -1;
    return out;
}

}  // namespace

const std::vector<std::string>& supported_architectures() {
    static const std::vector<std::string> v = [] {
        std::vector<std::string> out;
        for (const Family* f : families())
            if (f->trainable) out.push_back(f->architecture);
        return out;
    }();
    return v;
}

const std::vector<std::string>& parsed_architectures() {
    static const std::vector<std::string> v = [] {
        std::vector<std::string> out;
        for (const Family* f : families()) out.push_back(f->architecture);
        return out;
    }();
    return v;
}

ModelConfig parse_model_config(const json& j, const std::string& src) {
    if (!j.is_object()) throw_invalid(src + ": config must be a JSON object");
    const ConfigFields r(j, src);
    ModelConfig c;

    // Architecture: architectures[0], or inferred from model_type when the list is absent (as AutoModel does).
    c.model_type = r.string("model_type", "");
    if (r.has("architectures")) {
        const auto& a = j["architectures"];
        if (!a.is_array() || a.empty() || !a[0].is_string())
            r.bad("field 'architectures' must be a non-empty list of strings, found " + ConfigFields::describe(a));
        c.architecture = a[0].get<std::string>();
    } else {
        for (const Family* f : families())
            if (c.model_type == f->model_type) c.architecture = f->architecture;
        if (c.architecture.empty())
            r.bad("field 'architectures' is missing" +
                  (c.model_type.empty() ? std::string() : " and model_type '" + c.model_type + "' is not known"));
    }
    const Family* fam = find_family(c.architecture);
    if (!fam) {
        std::vector<std::string> moe;
        for (const Family* f : families())
            if (!f->trainable) moe.push_back(f->architecture);
        throw_unsupported(src + ": architecture '" + c.architecture + "' is not supported. Supported: " +
                          join(supported_architectures()) + " (recognised but not yet trainable: " + join(moe) + ")");
    }
    if (c.model_type.empty()) c.model_type = fam->model_type;

    // Sizes.
    // Each field is range-checked as soon as it is read, so the first bad field is the one reported.
    auto sized = [&](const char* key, int64_t hi) {
        const int64_t v = r.integer(key);
        check_range(r, key, v, 1, hi);
        return v;
    };
    c.hidden_size = sized("hidden_size", 65536 * 4);
    c.intermediate_size = sized("intermediate_size", 1 << 20);
    c.num_hidden_layers = sized("num_hidden_layers", 1000);
    c.num_attention_heads = sized("num_attention_heads", 1024);
    c.vocab_size = sized("vocab_size", 10'000'000);
    c.num_key_value_heads = r.integer("num_key_value_heads", c.num_attention_heads);
    check_range(r, "num_key_value_heads", c.num_key_value_heads, 1, 1024);
    if (c.num_attention_heads % c.num_key_value_heads != 0)
        r.bad("num_key_value_heads (" + std::to_string(c.num_key_value_heads) + ") must divide num_attention_heads (" +
              std::to_string(c.num_attention_heads) + ")");
    // Qwen2 has no head_dim setting (always hidden / heads); the others may set it.
    if (fam->reads_head_dim && r.has("head_dim")) {
        c.head_dim = r.integer("head_dim");
    } else if (fam->reads_head_dim && fam->head_dim > 0) {
        c.head_dim = fam->head_dim;
    } else {
        if (c.hidden_size % c.num_attention_heads != 0)
            r.bad("hidden_size (" + std::to_string(c.hidden_size) + ") is not divisible by num_attention_heads (" +
                  std::to_string(c.num_attention_heads) + ") and head_dim is not given");
        c.head_dim = c.hidden_size / c.num_attention_heads;
    }
    check_range(r, "head_dim", c.head_dim, 2, 1024);
    if (c.head_dim % 2 != 0)
        r.bad("head_dim (" + std::to_string(c.head_dim) + ") must be even (rotary embeddings rotate pairs)");
    c.max_position_embeddings = r.integer("max_position_embeddings", fam->max_position_embeddings);
    check_range(r, "max_position_embeddings", c.max_position_embeddings, 1, int64_t(1) << 27);

    c.rms_norm_eps = r.number("rms_norm_eps", fam->rms_norm_eps);
    if (!(c.rms_norm_eps > 0 && c.rms_norm_eps < 1))
        r.bad("rms_norm_eps (" + std::to_string(c.rms_norm_eps) + ") must be between 0 and 1 (exclusive)");
    // transformers 5 writes one RoPE per layer type for Gemma 3: {"full_attention": {...}, "sliding_attention":
    // {...}}; the full layers' is the model's RoPE, the sliding layers' a plain one with its own base.
    if (r.has("rope_parameters") && j["rope_parameters"].is_object() && j["rope_parameters"].contains("full_attention")) {
        const json& per_type = j["rope_parameters"];
        json full = j;
        full["rope_parameters"] = per_type["full_attention"];
        parse_rope(ConfigFields(full, src), *fam, c);
        if (per_type.contains("sliding_attention") && per_type["sliding_attention"].is_object()) {
            ModelConfig local;
            json sliding = j;
            sliding["rope_parameters"] = per_type["sliding_attention"];
            sliding.erase("rope_theta");
            sliding.erase("rope_scaling");
            parse_rope(ConfigFields(sliding, src), *fam, local);
            if (local.rope_scaling.type != RopeScalingType::None)
                throw_unsupported(src + ": rope_parameters.sliding_attention with scaling is not supported");
            c.rope_local_theta = local.rope_theta;
        }
    } else {
        parse_rope(r, *fam, c);
    }

    c.tie_word_embeddings = r.boolean("tie_word_embeddings", false);
    c.hidden_act = r.string("hidden_act", "silu");
    c.bos_token_ids = r.int_list("bos_token_id");
    c.eos_token_ids = r.int_list("eos_token_id");
    // transformers >= 4.56 writes "dtype"; older files "torch_dtype".
    c.torch_dtype = r.has("dtype") ? r.string("dtype", "") : r.string("torch_dtype", "");

    // The family's own fields (biases, windows, experts); it may refuse training with a reason.
    c.supported = fam->trainable;
    fam->parse(r, c);
    if (c.sliding_window < 0) r.bad("sliding_window (" + std::to_string(c.sliding_window) + ") must not be negative");

    // Trainable or not, and why.
    if (!fam->trainable) {
        c.unsupported_reason = c.architecture + " is parsed but not yet supported for training";
    } else if (!c.supported) {
        // the family's reason
    } else if (c.hidden_act != "silu" && c.hidden_act != "swish" && c.hidden_act != "gelu_pytorch_tanh") {
        c.supported = false;
        c.unsupported_reason =
            "hidden_act '" + c.hidden_act + "' is not yet supported (only silu and gelu_pytorch_tanh)";
    } else if (c.mlp_bias) {
        c.supported = false;
        c.unsupported_reason = "mlp_bias=true is not yet supported";
    } else if (r.has("quantization_config")) {
        parse_quantization(j["quantization_config"], src, c);
    }
    // sliding_window: every attention path implements it (kernels/*/attention*, cuDNN's left bound): key j is
    // visible from query t when t - window < j <= t, as transformers' sliding-window mask.

    // Catch sizes whose product is absurd even though each field is in range (before expected_tensors
    // would build millions of names for a hostile expert count).
    const double tensors_per_layer = 16.0 + 3.0 * double(c.num_experts);
    if (double(c.num_hidden_layers) * tensors_per_layer > 2e6)
        r.bad("num_hidden_layers (" + std::to_string(c.num_hidden_layers) + ") x experts (" +
              std::to_string(c.num_experts) + ") implies millions of tensors; the file is probably corrupt");
    const int64_t params = c.parameter_count();
    if (params <= 0 || params > int64_t(20'000'000'000'000))
        r.bad("the sizes in this config imply an absurd number of parameters; the file is probably corrupt");
    return c;
}

ModelConfig load_model_config(const std::filesystem::path& path) {
    std::error_code ec;
    auto file = path;
    if (std::filesystem::is_directory(path, ec)) {
        file = path / "config.json";
        if (!std::filesystem::exists(file, ec))
            throw_invalid(path.string() + ": no config.json in this folder (not a Hugging Face model folder)");
    } else if (!std::filesystem::exists(path, ec)) {
        throw_invalid(path.string() + ": file not found");
    }
    return parse_model_config(read_json_file(file, size_t(16) << 20), file.string());
}

bool WeightQuantization::quantizes(const std::string& module_path) const {
    if (!four_bit) return false;
    for (const auto& k : skip_modules)
        if (!k.empty() && module_path.find(k) != std::string::npos) return false;
    return true;
}

ModelConfig with_quantization(ModelConfig config) {
    if (config.quantization.prequantized) return config;
    config.quantization = WeightQuantization{};
    config.quantization.four_bit = true;
    return config;
}

ModelConfig with_fp8(ModelConfig config) {
    config.quantization.fp8 = true;
    return config;
}

int64_t ModelConfig::active_parameter_count() const {
    int64_t n = parameter_count();
    if (n < 0 || num_experts <= 0) return n;
    const int64_t idle = (num_experts - num_experts_per_tok) * 3 * moe_intermediate_size * hidden_size;
    for (int64_t l = 0; l < num_hidden_layers; ++l)
        if (is_moe_layer(l)) n -= idle;
    return n;
}

bool ModelConfig::is_moe_layer(int64_t layer) const {
    if (num_experts <= 0) return false;
    for (auto l : mlp_only_layers)
        if (l == layer) return false;
    return decoder_sparse_step > 0 && (layer + 1) % decoder_sparse_step == 0;
}

std::vector<ExpectedTensor> expected_tensors(const ModelConfig& c) { return arch_spec(c).tensors(); }

int64_t ModelConfig::parameter_count() const {
    int64_t total = 0;
    for (const auto& t : expected_tensors(*this)) {
        int64_t n = 1;
        for (auto d : t.shape) {
            n = checked_mul(n, d);
            if (n < 0) return -1;
        }
        if (__builtin_add_overflow(total, n, &total)) return -1;
    }
    return total;
}

}  // namespace tandem
