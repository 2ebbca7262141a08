// config.json -> ModelConfig: parsing, per-family defaults (as in transformers' config classes), validation
// with messages that name the file and the field, expected tensor names/shapes, parameter counts.
// Limits on sizes are deliberately generous (10x today's largest models) — they exist to catch corrupt or
// hostile files before they turn into absurd allocations, not to second-guess real models.
#include "tandem/model_config.h"

#include <cmath>
#include <limits>

#include "core/files.h"
#include "tandem/error.h"

namespace tandem {

namespace {

using json = nlohmann::json;

enum class Family { Llama, Mistral, Qwen2, Qwen3, Qwen3Moe, Mixtral, GptOss };

struct FamilyInfo {
    Family family;
    const char* architecture;
    const char* model_type;
    bool trainable;
    // transformers defaults for fields a config may omit
    int64_t max_position_embeddings;
    double rms_norm_eps;
    double rope_theta;
    int64_t head_dim;  // 0 = hidden_size / num_attention_heads
};

constexpr FamilyInfo kFamilies[] = {
    {Family::Llama, "LlamaForCausalLM", "llama", true, 2048, 1e-6, 10000.0, 0},
    {Family::Mistral, "MistralForCausalLM", "mistral", true, 4096 * 32, 1e-6, 10000.0, 0},
    {Family::Qwen2, "Qwen2ForCausalLM", "qwen2", true, 32768, 1e-6, 10000.0, 0},
    {Family::Qwen3, "Qwen3ForCausalLM", "qwen3", true, 32768, 1e-6, 10000.0, 128},
    {Family::Qwen3Moe, "Qwen3MoeForCausalLM", "qwen3_moe", false, 32768, 1e-6, 10000.0, 128},
    {Family::Mixtral, "MixtralForCausalLM", "mixtral", false, 4096 * 32, 1e-5, 1e6, 0},
    {Family::GptOss, "GptOssForCausalLM", "gpt_oss", false, 131072, 1e-5, 150000.0, 64},
};

const FamilyInfo* family_of(const std::string& architecture) {
    for (const auto& f : kFamilies)
        if (architecture == f.architecture) return &f;
    return nullptr;
}

std::string join(const std::vector<std::string>& v) {
    std::string s;
    for (const auto& x : v) s += (s.empty() ? "" : ", ") + x;
    return s;
}

// Typed field access with errors naming the source and the field.
class Reader {
public:
    Reader(const json& j, const std::string& src) : j_(j), src_(src) {}

    [[noreturn]] void bad(const std::string& what) const { throw_invalid(src_ + ": " + what); }

    // Present and not null.
    bool has(const char* key) const { return j_.contains(key) && !j_[key].is_null(); }

    int64_t integer(const char* key) const {
        if (!has(key)) bad(std::string("required field '") + key + "' is missing");
        return as_int(j_[key], key);
    }
    int64_t integer(const char* key, int64_t def) const { return has(key) ? as_int(j_[key], key) : def; }

    double number(const char* key, double def) const {
        if (!has(key)) return def;
        return as_number(j_[key], key);
    }

    bool boolean(const char* key, bool def) const {
        if (!has(key)) return def;
        if (!j_[key].is_boolean())
            bad(std::string("field '") + key + "' must be true or false, found " + describe(j_[key]));
        return j_[key].get<bool>();
    }

    std::string string(const char* key, const std::string& def) const {
        if (!has(key)) return def;
        if (!j_[key].is_string()) bad(std::string("field '") + key + "' must be a string, found " + describe(j_[key]));
        return j_[key].get<std::string>();
    }

    // int, list of ints, or null/absent.
    std::vector<int64_t> int_list(const char* key) const {
        std::vector<int64_t> out;
        if (!has(key)) return out;
        const auto& v = j_[key];
        if (v.is_array()) {
            for (const auto& x : v) out.push_back(as_int(x, key));
        } else {
            out.push_back(as_int(v, key));
        }
        for (auto id : out)
            if (id < 0) bad(std::string("field '") + key + "' has a negative token id (" + std::to_string(id) + ")");
        return out;
    }

    int64_t as_int(const json& v, const std::string& key) const {
        if (v.is_number_unsigned()) {
            if (v.get<uint64_t>() > uint64_t(std::numeric_limits<int64_t>::max()))
                bad("field '" + key + "' is too large (" + v.dump() + ")");
            return static_cast<int64_t>(v.get<uint64_t>());
        }
        if (v.is_number_integer()) return v.get<int64_t>();
        bad("field '" + key + "' must be an integer, found " + describe(v));
    }

    double as_number(const json& v, const std::string& key) const {
        if (!v.is_number()) bad("field '" + key + "' must be a number, found " + describe(v));
        const double d = v.get<double>();
        if (!std::isfinite(d)) bad("field '" + key + "' must be finite");
        return d;
    }

    static std::string describe(const json& v) {
        std::string d = v.dump();
        if (d.size() > 60) d = d.substr(0, 57) + "...";
        return std::string(v.type_name()) + " " + d;
    }

    const json& raw() const { return j_; }
    const std::string& src() const { return src_; }

private:
    const json& j_;
    const std::string& src_;
};

void check_range(const Reader& r, const char* name, int64_t v, int64_t lo, int64_t hi) {
    if (v < lo || v > hi)
        r.bad(std::string(name) + " (" + std::to_string(v) + ") must be between " + std::to_string(lo) + " and " +
              std::to_string(hi));
}

// rope_theta and rope scaling, from the classic keys (rope_theta, rope_scaling) or from transformers v5's
// rope_parameters (which holds both).
void parse_rope(const Reader& r, const FamilyInfo& fam, ModelConfig& c) {
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
              Reader::describe(*scaling));

    c.rope_theta = fam.rope_theta;
    if (r.has("rope_theta")) {
        c.rope_theta = r.number("rope_theta", fam.rope_theta);
    } else if (scaling && scaling->contains("rope_theta")) {
        c.rope_theta = Reader(*scaling, r.src()).number("rope_theta", fam.rope_theta);
    }
    if (!(c.rope_theta > 0)) r.bad("rope_theta (" + std::to_string(c.rope_theta) + ") must be positive");

    if (!scaling) return;
    const Reader s(*scaling, r.src());
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
    } else if (type == "yarn" && !fam.trainable) {
        // Parsed for gpt-oss; yarn is not implemented for the trainable families (see below).
        rs.type = RopeScalingType::Yarn;
        rs.factor = need("factor");
        rs.beta_fast = s.number("beta_fast", 32.0);
        rs.beta_slow = s.number("beta_slow", 1.0);
        rs.original_max_position_embeddings =
            s.has("original_max_position_embeddings")
                ? s.as_int((*scaling)["original_max_position_embeddings"], where + "original_max_position_embeddings")
                : c.max_position_embeddings;
    } else {
        throw_unsupported(r.src() + ": " + scaling_key + " type '" + type +
                          "' is not supported (supported: default, linear, llama3)");
    }
    if (!(rs.factor > 0) || rs.factor > 1e6)
        r.bad(where + "factor (" + std::to_string(rs.factor) + ") must be positive");
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
        for (const auto& f : kFamilies)
            if (f.trainable) out.push_back(f.architecture);
        return out;
    }();
    return v;
}

const std::vector<std::string>& parsed_architectures() {
    static const std::vector<std::string> v = [] {
        std::vector<std::string> out;
        for (const auto& f : kFamilies) out.push_back(f.architecture);
        return out;
    }();
    return v;
}

ModelConfig parse_model_config(const json& j, const std::string& src) {
    if (!j.is_object()) throw_invalid(src + ": config must be a JSON object");
    const Reader r(j, src);
    ModelConfig c;

    // Architecture: architectures[0], or inferred from model_type when the list is absent (as AutoModel does).
    c.model_type = r.string("model_type", "");
    if (r.has("architectures")) {
        const auto& a = j["architectures"];
        if (!a.is_array() || a.empty() || !a[0].is_string())
            r.bad("field 'architectures' must be a non-empty list of strings, found " + Reader::describe(a));
        c.architecture = a[0].get<std::string>();
    } else {
        for (const auto& f : kFamilies)
            if (c.model_type == f.model_type) c.architecture = f.architecture;
        if (c.architecture.empty())
            r.bad("field 'architectures' is missing" +
                  (c.model_type.empty() ? std::string() : " and model_type '" + c.model_type + "' is not known"));
    }
    const FamilyInfo* fam = family_of(c.architecture);
    if (!fam) {
        std::vector<std::string> moe;
        for (const auto& f : kFamilies)
            if (!f.trainable) moe.push_back(f.architecture);
        throw_unsupported(src + ": architecture '" + c.architecture + "' is not supported. Supported: " +
                          join(supported_architectures()) + " (recognised but not yet trainable: " + join(moe) + ")");
    }
    if (c.model_type.empty()) c.model_type = fam->model_type;
    const Family F = fam->family;
    const bool moe = F == Family::Qwen3Moe || F == Family::Mixtral || F == Family::GptOss;

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
    if (F != Family::Qwen2 && r.has("head_dim")) {
        c.head_dim = r.integer("head_dim");
    } else if (F != Family::Qwen2 && fam->head_dim > 0) {
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
    parse_rope(r, *fam, c);

    c.tie_word_embeddings = r.boolean("tie_word_embeddings", false);
    c.hidden_act = r.string("hidden_act", "silu");
    c.bos_token_ids = r.int_list("bos_token_id");
    c.eos_token_ids = r.int_list("eos_token_id");
    // transformers >= 4.56 writes "dtype"; older files "torch_dtype".
    c.torch_dtype = r.has("dtype") ? r.string("dtype", "") : r.string("torch_dtype", "");

    // Family-specific layout.
    switch (F) {
        case Family::Llama:
            c.attention_bias = c.o_proj_bias = r.boolean("attention_bias", false);
            c.mlp_bias = r.boolean("mlp_bias", false);
            break;
        case Family::Mistral:
            // MistralAttention has no biases whatever the file says.
            c.sliding_window = r.integer("sliding_window", 0);
            break;
        case Family::Qwen2:
            c.attention_bias = true;  // Qwen2 always has q/k/v biases and no o_proj bias
            if (r.boolean("use_sliding_window", false)) c.sliding_window = r.integer("sliding_window", 0);
            break;
        case Family::Qwen3:
        case Family::Qwen3Moe:
            c.qk_norm = true;
            c.attention_bias = c.o_proj_bias = r.boolean("attention_bias", false);
            if (r.boolean("use_sliding_window", false)) c.sliding_window = r.integer("sliding_window", 0);
            break;
        case Family::Mixtral:
            c.sliding_window = r.integer("sliding_window", 0);
            break;
        case Family::GptOss:
            c.attention_bias = c.o_proj_bias = r.boolean("attention_bias", true);
            c.attention_sinks = true;
            c.sliding_window = r.integer("sliding_window", 0);
            break;
    }
    if (c.sliding_window < 0) r.bad("sliding_window (" + std::to_string(c.sliding_window) + ") must not be negative");

    if (moe) {
        if (F == Family::Qwen3Moe) {
            c.num_experts = r.integer("num_experts");
            c.moe_intermediate_size = r.integer("moe_intermediate_size");
            c.decoder_sparse_step = r.integer("decoder_sparse_step", 1);
            if (r.has("mlp_only_layers")) {
                if (!j["mlp_only_layers"].is_array())
                    r.bad("field 'mlp_only_layers' must be a list of layer indices, found " +
                          Reader::describe(j["mlp_only_layers"]));
                for (const auto& x : j["mlp_only_layers"]) {
                    const auto l = r.as_int(x, "mlp_only_layers");
                    check_range(r, "mlp_only_layers entry", l, 0, c.num_hidden_layers - 1);
                    c.mlp_only_layers.push_back(l);
                }
            }
        } else {
            c.num_experts = r.integer("num_local_experts");
            c.moe_intermediate_size = c.intermediate_size;
        }
        c.num_experts_per_tok =
            r.has("num_experts_per_tok") ? r.integer("num_experts_per_tok") : r.integer("experts_per_token");
        check_range(r, "number of experts", c.num_experts, 1, 4096);
        check_range(r, "num_experts_per_tok", c.num_experts_per_tok, 1, c.num_experts);
        check_range(r, "moe_intermediate_size", c.moe_intermediate_size, 1, 1 << 20);
        check_range(r, "decoder_sparse_step", c.decoder_sparse_step, 1, c.num_hidden_layers);
    }

    // Trainable or not, and why.
    c.supported = fam->trainable;
    if (!fam->trainable) {
        c.unsupported_reason = c.architecture + " (mixture of experts) is parsed but not yet supported for training";
    } else if (c.hidden_act != "silu" && c.hidden_act != "swish") {
        c.supported = false;
        c.unsupported_reason = "hidden_act '" + c.hidden_act + "' is not yet supported (only silu)";
    } else if (c.mlp_bias) {
        c.supported = false;
        c.unsupported_reason = "mlp_bias=true is not yet supported";
    } else if (r.has("quantization_config")) {
        // Pre-quantized checkpoints (GPTQ, AWQ, bitsandbytes, FP8) store packed integer tensors.
        std::string method = "unknown";
        if (j["quantization_config"].is_object() && j["quantization_config"].contains("quant_method") &&
            j["quantization_config"]["quant_method"].is_string())
            method = j["quantization_config"]["quant_method"].get<std::string>();
        c.supported = false;
        c.unsupported_reason =
            "pre-quantized checkpoint (quant_method '" + method +
            "') is not supported; use the original bf16/fp16 model (Tandem quantizes itself for QLoRA)";
    }
    // sliding_window: both attention paths implement it (kernels/*/attention*: key j is visible from query t
    // when t - window < j <= t, as transformers' sliding-window mask); cuDNN is skipped for such batches.

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

bool ModelConfig::is_moe_layer(int64_t layer) const {
    if (num_experts <= 0) return false;
    for (auto l : mlp_only_layers)
        if (l == layer) return false;
    return decoder_sparse_step > 0 && (layer + 1) % decoder_sparse_step == 0;
}

std::vector<ExpectedTensor> expected_tensors(const ModelConfig& c) {
    const FamilyInfo* fam = family_of(c.architecture);
    const Family F = fam ? fam->family : Family::Llama;
    // H = hidden, V = vocab, Q = heads*head_dim, KV = kv_heads*head_dim, I = intermediate,
    // Im = per-expert intermediate, E = experts, D = head_dim
    const int64_t H = c.hidden_size, V = c.vocab_size, Q = c.q_dim(), KV = c.kv_dim(), I = c.intermediate_size;
    const int64_t Im = c.moe_intermediate_size, E = c.num_experts, D = c.head_dim;
    std::vector<ExpectedTensor> out;
    auto add = [&](std::string name, std::vector<int64_t> shape) {
        out.push_back({std::move(name), std::move(shape)});
    };

    add("model.embed_tokens.weight", {V, H});
    for (int64_t l = 0; l < c.num_hidden_layers; ++l) {
        const std::string p = "model.layers." + std::to_string(l) + ".";
        add(p + "input_layernorm.weight", {H});
        add(p + "self_attn.q_proj.weight", {Q, H});
        if (c.attention_bias) add(p + "self_attn.q_proj.bias", {Q});
        add(p + "self_attn.k_proj.weight", {KV, H});
        if (c.attention_bias) add(p + "self_attn.k_proj.bias", {KV});
        add(p + "self_attn.v_proj.weight", {KV, H});
        if (c.attention_bias) add(p + "self_attn.v_proj.bias", {KV});
        add(p + "self_attn.o_proj.weight", {H, Q});
        if (c.o_proj_bias) add(p + "self_attn.o_proj.bias", {H});
        if (c.qk_norm) {
            add(p + "self_attn.q_norm.weight", {D});
            add(p + "self_attn.k_norm.weight", {D});
        }
        if (c.attention_sinks) add(p + "self_attn.sinks", {c.num_attention_heads});
        add(p + "post_attention_layernorm.weight", {H});
        if (!c.is_moe_layer(l)) {
            add(p + "mlp.gate_proj.weight", {I, H});
            if (c.mlp_bias) add(p + "mlp.gate_proj.bias", {I});
            add(p + "mlp.up_proj.weight", {I, H});
            if (c.mlp_bias) add(p + "mlp.up_proj.bias", {I});
            add(p + "mlp.down_proj.weight", {H, I});
            if (c.mlp_bias) add(p + "mlp.down_proj.bias", {H});
        } else if (F == Family::Mixtral) {
            add(p + "block_sparse_moe.gate.weight", {E, H});
            for (int64_t e = 0; e < E; ++e) {
                const std::string x = p + "block_sparse_moe.experts." + std::to_string(e) + ".";
                add(x + "w1.weight", {Im, H});  // gate
                add(x + "w2.weight", {H, Im});  // down
                add(x + "w3.weight", {Im, H});  // up
            }
        } else if (F == Family::GptOss) {
            // The unquantized (bf16) layout; released gpt-oss checkpoints store the experts as MXFP4
            // "_blocks"/"_scales" tensors instead.
            add(p + "mlp.router.weight", {E, H});
            add(p + "mlp.router.bias", {E});
            add(p + "mlp.experts.gate_up_proj", {E, H, 2 * Im});
            add(p + "mlp.experts.gate_up_proj_bias", {E, 2 * Im});
            add(p + "mlp.experts.down_proj", {E, Im, H});
            add(p + "mlp.experts.down_proj_bias", {E, H});
        } else {  // Qwen3-MoE
            add(p + "mlp.gate.weight", {E, H});
            for (int64_t e = 0; e < E; ++e) {
                const std::string x = p + "mlp.experts." + std::to_string(e) + ".";
                add(x + "gate_proj.weight", {Im, H});
                add(x + "up_proj.weight", {Im, H});
                add(x + "down_proj.weight", {H, Im});
            }
        }
    }
    add("model.norm.weight", {H});
    if (!c.tie_word_embeddings) add("lm_head.weight", {V, H});
    return out;
}

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
