// SPDX-FileCopyrightText: 2026 The Tandem developers
// SPDX-License-Identifier: GPL-3.0-or-later
// PEFT adapter folders: writing (adapter_config.json + adapter_model.safetensors) and reading them back,
// including adapters made by PEFT itself. See peft_adapter.h for the layout and the decisions.
// How PEFT decides which modules get LoRA (mirrored when reading target_modules):
//  - a list: a module path P matches entry E when P == E or P ends with "." + E; entries matching nothing
//    are ignored; layers_to_transform then keeps only the listed layer indices;
//  - a string: re.fullmatch(string, P) over the module paths ("model.layers.0.self_attn.q_proj"), with
//    the shorthand "all-linear" meaning every linear layer but the output layer.
// We evaluate regexes with PCRE2 (FullMatch below: anchored at both ends like re.fullmatch), whose syntax is
// Python's for the forms people write (".*\.(q_proj|v_proj)", "model.layers.\d+.self_attn.(q|k|v)_proj",
// named groups), with bounds on the pattern and on each match; a pattern past them is refused as Unsupported.
#include "export/peft_adapter.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <list>
#include <memory>
#include <set>
#include <system_error>

#include <pcre2.h>

#include "core/files.h"
#include "io/atomic_file.h"
#include "tandem/error.h"
#include "tandem/safetensors.h"

namespace tandem {

namespace fs = std::filesystem;
using nlohmann::json;

namespace {

std::string shape_str(const std::vector<int64_t>& shape) {
    return shape_to_string(shape);
}

std::string join(const std::vector<std::string>& items, const std::string& sep = ", ") {
    std::string s;
    for (const auto& i : items) s += (s.empty() ? "" : sep) + i;
    return s;
}

bool path_exists(const fs::path& p) {
    std::error_code ec;
    return fs::exists(fs::symlink_status(p, ec));
}

}  // namespace

// ---------------------------------------------------------------------------------------------------------
// Writing

json peft_adapter_config_json(const LoraConfig& c, const std::string& base_model_name_or_path) {
    json j = json::object();  // std::map-backed: keys come out sorted, as PEFT's json.dumps(sort_keys=True)
    j["alpha_pattern"] = json::object();
    j["base_model_name_or_path"] = base_model_name_or_path.empty() ? json(nullptr) : json(base_model_name_or_path);
    j["bias"] = "none";
    j["fan_in_fan_out"] = false;
    j["inference_mode"] = true;
    j["init_lora_weights"] = true;
    j["layers_pattern"] = nullptr;
    j["layers_to_transform"] = c.layers_to_transform.empty() ? json(nullptr) : json(c.layers_to_transform);
    // PEFT types lora_alpha as int; write an integral alpha as one (32, not 32.0) like PEFT's own files.
    if (std::isfinite(c.alpha) && c.alpha == std::floor(c.alpha) && std::fabs(c.alpha) < 9e15)
        j["lora_alpha"] = int64_t(c.alpha);
    else
        j["lora_alpha"] = c.alpha;
    j["lora_dropout"] = c.dropout;
    j["modules_to_save"] = nullptr;
    j["peft_type"] = "LORA";
    j["r"] = c.r;
    j["rank_pattern"] = json::object();
    j["revision"] = nullptr;
    // An MoE model's experts are PEFT's target_parameters (3-D parameters, not Linear modules).
    std::vector<std::string> modules, parameters;
    for (const std::string& t : c.target_modules)
        (t == kExpertsGateUp || t == kExpertsDown ? parameters : modules).push_back(t);
    j["target_modules"] = modules.empty() && !parameters.empty() ? json(nullptr) : json(modules);
    if (!parameters.empty()) j["target_parameters"] = parameters;
    j["task_type"] = "CAUSAL_LM";
    j["use_dora"] = false;
    j["use_rslora"] = c.use_rslora;
    return j;
}

void write_peft_adapter(const fs::path& dir, const LoraConfig& config, const ModelConfig& model,
                        const std::string& base_model_name_or_path, const LoraTensors& tensors,
                        const PeftWriteOptions& options) {
    const auto specs = lora_tensor_specs(model, config);

    // The tensors must be exactly the specs: a missing one would make PEFT fail to load (or silently keep
    // a zero-initialised B), an extra one would be rejected by our reader and ignored by PEFT.
    std::set<std::string> expected;
    for (const auto& s : specs) {
        expected.insert(s.name);
        auto it = tensors.find(s.name);
        if (it == tensors.end())
            throw_invalid(dir.string() + ": cannot write the adapter: tensor " + s.name + " " + shape_str(s.shape) +
                          " is missing (" + std::to_string(tensors.size()) + " tensors given, " +
                          std::to_string(specs.size()) + " expected)");
        int64_t numel = 1;
        for (auto d : s.shape) numel *= d;
        if (int64_t(it->second.size()) != numel)
            throw_invalid(dir.string() + ": cannot write the adapter: tensor " + s.name + " has " +
                          std::to_string(it->second.size()) + " values, but its shape " + shape_str(s.shape) +
                          " needs " + std::to_string(numel));
        for (size_t i = 0; i < it->second.size(); ++i)
            if (!std::isfinite(it->second[i]))
                throw_invalid(dir.string() + ": cannot write the adapter: tensor " + s.name + " holds a " +
                              (std::isnan(it->second[i]) ? "NaN" : "infinite value") + " at element " +
                              std::to_string(i) +
                              "; training diverged (try a lower learning rate) — refusing to export it");
    }
    for (const auto& [name, data] : tensors)
        if (!expected.count(name))
            throw_invalid(dir.string() + ": cannot write the adapter: tensor " + name +
                          " is not part of this LoRA configuration (r " + std::to_string(config.r) + ", targets " +
                          join(config.target_modules) + ")");

    std::error_code ec;
    if (path_exists(dir) && !fs::is_directory(dir, ec))
        throw_invalid(dir.string() + ": exists and is not a folder; choose a folder for the adapter");
    fs::create_directories(dir, ec);
    if (ec) throw_io(dir.string() + ": cannot create the adapter folder: " + ec.message());

    const fs::path config_path = dir / kPeftConfigName;
    const fs::path weights_path = dir / kPeftWeightsName;
    const bool had_config = path_exists(config_path), had_weights = path_exists(weights_path);
    if ((had_config || had_weights) && !options.overwrite)
        throw_invalid(dir.string() + ": already holds an adapter (" +
                      (had_config ? std::string(kPeftConfigName) : std::string(kPeftWeightsName)) +
                      "); refusing to overwrite it. Choose another folder, or allow overwriting.");

    std::vector<TensorToWrite> out;
    out.reserve(specs.size());
    std::list<std::vector<float>> converted;  // experts' lora_B in PEFT's layout (lora_table.h)
    for (const auto& s : specs) {
        const std::vector<float>* data = &tensors.at(s.name);
        if (s.experts > 0 && !s.is_a)
            data = &converted.emplace_back(
                expert_b_to_peft(*data, s.experts, s.shape[0], s.shape[1] / s.experts, s.interleaved));
        // Little-endian host assumed, as everywhere in the engine (x86-64, aarch64).
        out.push_back({s.name, DType::F32, s.shape, std::as_bytes(std::span<const float>(*data))});
    }
    write_safetensors(weights_path, out, {{"format", "pt"}});
    try {
        // target_modules in the model's own names (Phi-3: qkv_proj, not q_proj), as PEFT matches them.
        write_file_atomic(config_path, peft_adapter_config_json(resolve_lora_targets(model, config),
                                                                base_model_name_or_path)
                                           .dump(2, ' ', true));
    } catch (...) {
        if (!had_weights) fs::remove(weights_path, ec);  // no half adapter left behind
        throw;
    }
}

// ---------------------------------------------------------------------------------------------------------
// Reading the config

namespace {

struct ConfigReader {
    const json& j;
    const std::string& src;

    bool has(const char* key) const { return j.contains(key) && !j.at(key).is_null(); }

    [[noreturn]] void bad(const std::string& key, const std::string& what) const {
        throw_invalid(src + ": " + key + ": " + what);
    }
    [[noreturn]] void unsupported(const std::string& what) const { throw_unsupported(src + ": " + what); }

    bool boolean(const char* key, bool def) const {
        if (!has(key)) return def;
        const auto& v = j.at(key);
        if (!v.is_boolean()) bad(key, "expected true or false, got " + v.dump());
        return v.get<bool>();
    }
    double number(const char* key, double def) const {
        if (!has(key)) return def;
        const auto& v = j.at(key);
        if (!v.is_number()) bad(key, "expected a number, got " + v.dump());
        return v.get<double>();
    }
    std::string string(const char* key, const std::string& def) const {
        if (!has(key)) return def;
        const auto& v = j.at(key);
        if (!v.is_string()) bad(key, "expected a string, got " + v.dump());
        return v.get<std::string>();
    }
    // null, {} and [] are "empty" (PEFT writes {} for the patterns, null or [] for lists).
    bool empty_or_null(const char* key) const {
        if (!has(key)) return true;
        const auto& v = j.at(key);
        return (v.is_object() || v.is_array() || v.is_string()) && v.empty();
    }
};

// The (layer, module) pairs a PEFT target_modules selects, resolved against the model's module paths.
struct TargetResolution {
    std::vector<std::string> modules;  // in first-matched order
    std::set<std::pair<int64_t, std::string>> pairs;
};

// Modules a target could match that exist in the model but are not LoRA targets we support.
const char* const kOtherLinear[] = {"lm_head", "model.embed_tokens"};

bool is_expert_target(const std::string& t) { return t == kExpertsGateUp || t == kExpertsDown; }

// An expert target's parameter as PEFT names it: "model.layers.0.mlp.experts.down_proj".
std::string expert_parameter_name(const LoraModuleRef& m) {
    return m.path + m.target.substr(m.target.rfind('.'));
}

bool list_entry_matches(const std::string& path, const std::string& entry) {
    return path == entry ||
           (path.size() > entry.size() && path.compare(path.size() - entry.size(), entry.size(), entry) == 0 &&
            path[path.size() - entry.size() - 1] == '.');
}

void add_pair(TargetResolution& r, int64_t layer, const std::string& module) {
    if (r.pairs.emplace(layer, module).second &&
        std::find(r.modules.begin(), r.modules.end(), module) == r.modules.end())
        r.modules.push_back(module);
}

TargetResolution resolve_list(const ConfigReader& cr, const json& list, const ModelConfig& model) {
    TargetResolution r;
    const auto modules = lora_modules(model);
    for (const auto& e : list) {
        if (!e.is_string()) cr.bad("target_modules", "expected module names (strings), got " + e.dump());
        const auto entry = e.get<std::string>();
        for (const char* other : kOtherLinear)
            if (list_entry_matches(other, entry))
                cr.unsupported("target_modules includes '" + entry + "': LoRA on " + other +
                               " is not supported; Tandem trains LoRA on the projections " +
                               join(lora_targets(model)) + " only");
        for (const LoraModuleRef& m : modules)
            if (!is_expert_target(m.target) && list_entry_matches(m.path, entry)) add_pair(r, m.layer, m.target);
    }
    return r;
}

// PEFT's target_parameters: "module.parameter" names matched against each parameter's full name as
// target_modules entries are (the whole name, or a suffix after a dot). Only the MoE experts' are supported.
void resolve_parameters(const ConfigReader& cr, const json& list, const ModelConfig& model, TargetResolution& r) {
    if (!list.is_array()) cr.bad("target_parameters", "expected a list of parameter names, got " + list.dump());
    for (const auto& e : list) {
        if (!e.is_string()) cr.bad("target_parameters", "expected parameter names (strings), got " + e.dump());
        const auto entry = e.get<std::string>();
        bool any = false;
        for (const LoraModuleRef& m : lora_modules(model)) {
            if (!is_expert_target(m.target)) continue;
            if (list_entry_matches(expert_parameter_name(m), entry)) {
                add_pair(r, m.layer, m.target);
                any = true;
            }
        }
        if (!any)
            cr.unsupported("target_parameters includes '" + entry + "', which names no expert parameter of " +
                           model.architecture + "; LoRA on raw parameters is supported for the experts' " +
                           kExpertsGateUp + " and " + kExpertsDown + " only");
    }
}

// Python's re.fullmatch for an adapter's target_modules pattern, through PCRE2 (its syntax is Python's for the
// forms people write, named groups included), with bounds, because the pattern comes from a file: at most 512
// characters and 32 nested parentheses when compiled, at most 100,000 backtracking steps, depth 1,000 and 4 MiB
// of heap per match. A pattern past a bound is refused (Unsupported), never a crash or a hang.
class FullMatch {
public:
    explicit FullMatch(const std::string& pattern) {
        pcre2_compile_context* cctx = pcre2_compile_context_create(nullptr);
        pcre2_set_max_pattern_length(cctx, 512);
        pcre2_set_parens_nest_limit(cctx, 32);
        int err = 0;
        PCRE2_SIZE offset = 0;
        code_ = pcre2_compile(reinterpret_cast<PCRE2_SPTR>(pattern.data()), pattern.size(),
                              PCRE2_ANCHORED | PCRE2_ENDANCHORED, &err, &offset, cctx);
        pcre2_compile_context_free(cctx);
        if (!code_) {
            PCRE2_UCHAR buf[256];
            pcre2_get_error_message(err, buf, sizeof buf);
            error_ = std::string(reinterpret_cast<const char*>(buf)) + " at offset " + std::to_string(offset);
            return;
        }
        mctx_ = pcre2_match_context_create(nullptr);
        pcre2_set_match_limit(mctx_, 100000);
        pcre2_set_depth_limit(mctx_, 1000);
        pcre2_set_heap_limit(mctx_, 4096);  // KiB
        data_ = pcre2_match_data_create_from_pattern(code_, nullptr);
    }
    ~FullMatch() {
        pcre2_match_data_free(data_);
        pcre2_match_context_free(mctx_);
        pcre2_code_free(code_);
    }
    FullMatch(const FullMatch&) = delete;
    FullMatch& operator=(const FullMatch&) = delete;

    const std::string& error() const { return error_; }  // the compile error, "" when compiled
    // 1: the whole subject matches, 0: it does not, -1: a bound was reached.
    int match(const std::string& subject) const {
        const int rc = pcre2_match(code_, reinterpret_cast<PCRE2_SPTR>(subject.data()), subject.size(), 0, 0, data_,
                                   mctx_);
        if (rc >= 0) return 1;
        return rc == PCRE2_ERROR_NOMATCH ? 0 : -1;
    }

private:
    pcre2_code* code_ = nullptr;
    pcre2_match_context* mctx_ = nullptr;
    pcre2_match_data* data_ = nullptr;
    std::string error_;
};

TargetResolution resolve_string(const ConfigReader& cr, const std::string& s, const ModelConfig& model) {
    TargetResolution r;
    const auto modules = lora_modules(model);
    const auto targets = lora_targets(model);
    if (s == "all-linear") {  // PEFT's shorthand: every linear layer except the output layer
        for (const LoraModuleRef& m : modules) add_pair(r, m.layer, m.target);
        return r;
    }
    const FullMatch re(s);
    if (!re.error().empty())
        cr.unsupported("target_modules is the regular expression \"" + s.substr(0, 80) + (s.size() > 80 ? "..." : "") +
                       "\", which Tandem cannot evaluate (" + re.error() +
                       "); list the module names instead, e.g. [\"q_proj\", \"v_proj\"]");
    auto matches = [&](const std::string& path) {
        const int m = re.match(path);
        if (m < 0)
            cr.unsupported("target_modules is the regular expression \"" + s.substr(0, 80) +
                           (s.size() > 80 ? "..." : "") +
                           "\", which is too complex to evaluate (it backtracks too much); list the module names "
                           "instead, e.g. [\"q_proj\", \"v_proj\"]");
        return m == 1;
    };
    for (const char* other : kOtherLinear)
        if (matches(other))
            cr.unsupported("target_modules \"" + s + "\" matches " + other + ": LoRA on " + other +
                           " is not supported; Tandem trains LoRA on the projections " + join(targets) + " only");
    // Canonical module order for a regex: layer by layer, block order.
    std::vector<std::pair<int64_t, std::string>> found;
    for (const LoraModuleRef& m : modules)
        if (matches(m.path)) found.emplace_back(m.layer, m.target);
    if (found.empty() && std::find(targets.begin(), targets.end(), s) != targets.end()) {
        // A bare name as a string matches nothing under PEFT's fullmatch; other tools mean the module.
        for (const LoraModuleRef& m : modules)
            if (m.target == s) add_pair(r, m.layer, s);
        return r;
    }
    for (const auto& t : targets)
        for (const auto& [l, fm] : found)
            if (fm == t) add_pair(r, l, t);
    return r;
}

std::string describe_layer_modules(const TargetResolution& r, const ModelConfig& model, int64_t layer) {
    std::vector<std::string> ms;
    for (const auto& m : lora_targets(model))
        if (r.pairs.count({layer, m})) ms.push_back(m);
    return "layer " + std::to_string(layer) + ": " + (ms.empty() ? std::string("none") : join(ms));
}

// One of rank_pattern / alpha_pattern: its keys as PEFT's get_pattern_key evaluates them (re.match(rf"(.*\.)?
// ({key})$", name): a full match of "(.*\.)?(key)"), and the value of the key matching a module's name.
class Patterns {
public:
    Patterns(const ConfigReader& cr, const char* field, bool rank) : cr_(cr), field_(field) {
        if (cr.empty_or_null(field)) return;
        const json& o = cr.j.at(field);
        if (!o.is_object()) cr.bad(field, "expected an object of module-name patterns, got " + o.dump());
        for (const auto& [key, v] : o.items()) {
            if (!v.is_number()) cr.bad(field, "\"" + key + "\": expected a number, got " + v.dump());
            const double x = v.get<double>();
            if (rank && (x != std::floor(x) || x < 1 || x > kLoraMaxRank))
                cr.bad(field, "\"" + key + "\": " + v.dump() + " is not a rank between 1 and " +
                                  std::to_string(kLoraMaxRank));
            if (!rank && !(std::isfinite(x) && x > 0))
                cr.bad(field, "\"" + key + "\": " + v.dump() + " is not a positive alpha");
            auto re = std::make_unique<FullMatch>("(?:.*\\.)?(?:" + key + ")");
            if (!re->error().empty())
                cr.unsupported(std::string(field) + " key \"" + key.substr(0, 80) + "\" is a regular expression " +
                               "Tandem cannot evaluate (" + re->error() + ")");
            keys_.push_back({key, x, std::move(re)});
        }
    }
    // The value for the module `name`, or `def` when no key matches it. PEFT takes the first matching key in the
    // file's order, which the parsed JSON does not keep: keys that disagree on one module are refused.
    double value(const std::string& name, double def) const {
        const Key* hit = nullptr;
        for (const Key& k : keys_) {
            const int m = k.re->match(name);
            if (m < 0)
                cr_.unsupported(std::string(field_) + " key \"" + k.key.substr(0, 80) +
                                "\" is too costly to evaluate on " + name);
            if (m == 0) continue;
            if (hit && hit->value != k.value)
                cr_.unsupported(std::string(field_) + " keys \"" + hit->key + "\" and \"" + k.key + "\" both match " +
                                name + " with different values; keep one key per module");
            hit = &k;
        }
        return hit ? hit->value : def;
    }

private:
    struct Key {
        std::string key;
        double value;
        std::unique_ptr<FullMatch> re;
    };
    const ConfigReader& cr_;
    const char* field_;
    std::vector<Key> keys_;
};

// rank_pattern / alpha_pattern: Tandem runs one rank and one scaling for every adapted module, so a module of a
// smaller rank is zero-padded to the largest (read_peft_adapter; B A is unchanged, and the padding's gradients
// are zero, so training keeps it zero). That needs every module's scaling alpha / r (alpha / sqrt(r) with
// rsLoRA) to be the same, as PEFT's own rewrite of gate_proj / up_proj targets into an MoE model's gate_up_proj
// keeps it (rank 2r, alpha 2 alpha). The experts' parameters are matched by their names
// ("model.layers.0.mlp.experts.gate_up_proj"), the other modules by their paths, as PEFT matches them.
void apply_patterns(const ConfigReader& cr, const ModelConfig& model, const TargetResolution& res, PeftAdapter& out) {
    const Patterns ranks(cr, "rank_pattern", true), alphas(cr, "alpha_pattern", false);
    LoraConfig& c = out.config;
    auto scaling = [&](int r, double alpha) {  // LoraConfig's rule (rsLoRA or not) for another rank and alpha
        LoraConfig m = c;
        m.r = r;
        m.alpha = alpha;
        return m.scaling();
    };
    struct Module {
        int64_t layer;
        std::string target, name;
        int r;
        double alpha;
    };
    std::vector<Module> ms;
    for (const LoraModuleRef& m : lora_modules(model)) {
        if (!res.pairs.count({m.layer, m.target})) continue;
        const std::string name = is_expert_target(m.target) ? expert_parameter_name(m) : m.path;
        ms.push_back({m.layer, m.target, name, int(ranks.value(name, c.r)), alphas.value(name, c.alpha)});
    }
    if (ms.empty()) return;
    int R = 0;
    const Module* widest = nullptr;
    for (const Module& m : ms)
        if (m.r > R) R = m.r, widest = &m;
    const double s = scaling(widest->r, widest->alpha);
    auto num = [](double x) {
        char b[32];
        std::snprintf(b, sizeof b, "%g", x);
        return std::string(b);
    };
    auto describe = [&](const Module& m) {
        return m.name + " " + num(scaling(m.r, m.alpha)) + " (r " + std::to_string(m.r) + ", alpha " + num(m.alpha) + ")";
    };
    for (const Module& m : ms)
        if (std::abs(scaling(m.r, m.alpha) - s) > 1e-9 * s)
            cr.unsupported("rank_pattern / alpha_pattern give the modules different scalings: " + describe(m) +
                           ", " + describe(*widest) + "; Tandem applies one LoRA scaling (alpha / r" +
                           (c.use_rslora ? "^0.5" : "") + ") to every module: patterns must keep it the same");
    for (const Module& m : ms)
        if (m.r != R) out.ranks[{m.layer, m.target}] = m.r;
    c.r = R;
    c.alpha = widest->alpha;
}

}  // namespace

PeftAdapter parse_peft_adapter_config(const json& j, const ModelConfig& model, const std::string& src) {
    if (!j.is_object()) throw_invalid(src + ": expected a JSON object (a PEFT adapter_config.json)");
    const ConfigReader cr{j, src};

    if (!j.contains("peft_type")) throw_invalid(src + ": no \"peft_type\" key; this is not a PEFT adapter_config.json");
    const auto peft_type = cr.string("peft_type", "");
    if (peft_type != "LORA")
        cr.unsupported("peft_type is \"" + peft_type + "\"; Tandem reads LoRA adapters (peft_type \"LORA\") only");
    const auto task = cr.string("task_type", "CAUSAL_LM");
    if (task != "CAUSAL_LM")
        cr.unsupported("task_type is \"" + task +
                       "\"; Tandem reads adapters of causal language models "
                       "(task_type \"CAUSAL_LM\") only");

    // Features that change what the adapter computes and that we do not implement.
    if (cr.boolean("use_dora", false)) cr.unsupported("DoRA adapters are not supported (use_dora is true)");
    const auto bias = cr.string("bias", "none");
    if (bias != "none")
        cr.unsupported("bias is \"" + bias + "\"; only adapters without trained biases (bias \"none\") are supported");
    if (cr.boolean("lora_bias", false))
        cr.unsupported("lora_bias is true; adapters with a bias on lora_B are not supported");
    if (cr.boolean("fan_in_fan_out", false))
        cr.unsupported(
            "fan_in_fan_out is true (transposed weights, as for GPT-2's Conv1D); Llama-family models "
            "never need it, so this adapter was made for another architecture");
    if (!cr.empty_or_null("modules_to_save"))
        cr.unsupported("modules_to_save lists " + j.at("modules_to_save").dump() +
                       "; adapters that also save full modules are not supported");
    if (!cr.empty_or_null("trainable_token_indices"))
        cr.unsupported("trainable_token_indices is set; adapters that train token embeddings are not supported");
    if (!cr.empty_or_null("layer_replication"))
        cr.unsupported("layer_replication is set; adapters that replicate layers are not supported");
    if (!cr.empty_or_null("exclude_modules"))
        cr.unsupported("exclude_modules is set (" + j.at("exclude_modules").dump() +
                       "); list the adapted modules in target_modules instead");
    if (cr.boolean("use_qalora", false)) cr.unsupported("QA-LoRA adapters (use_qalora true) are not supported");
    if (!cr.empty_or_null("alora_invocation_tokens"))
        cr.unsupported("activated LoRA (alora_invocation_tokens) is not supported");
    // Variants PEFT 0.21 configures through their own keys; any value but null/false/{} means the adapter
    // is not plain LoRA. (eva/loftq/corda configs only steer initialisation and may stay set.)
    for (const char* key : {"use_bdlora", "arrow_config", "kasa_config", "monteclora_config", "velora_config"})
        if (j.contains(key) && !j.at(key).is_null() && j.at(key) != false && !cr.empty_or_null(key))
            cr.unsupported(std::string(key) + " is " + j.at(key).dump() +
                           ": this LoRA variant is not supported; Tandem reads plain LoRA adapters");
    if (j.contains("init_lora_weights") && j.at("init_lora_weights").is_string()) {
        const auto init = j.at("init_lora_weights").get<std::string>();
        if (init.rfind("pissa", 0) == 0 || init == "olora" || init == "corda" || init == "lora_ga")
            cr.unsupported("init_lora_weights is \"" + init +
                           "\": this adapter expects base weights that PEFT modified at initialisation. Save it "
                           "with PEFT's save_pretrained(path_initial_model_for_weight_conversion=...) to get a "
                           "plain LoRA adapter for the original base model");
    }

    PeftAdapter out;
    LoraConfig& c = out.config;
    // Absent keys take PEFT's LoraConfig defaults (r 8, lora_alpha 8, lora_dropout 0, use_rslora false).
    if (cr.has("r")) {
        const auto& v = j.at("r");
        if (!v.is_number_integer() && !(v.is_number_float() && v.get<double>() == std::floor(v.get<double>())))
            cr.bad("r", "expected an integer rank, got " + v.dump());
        const double r = v.get<double>();
        if (r < 1 || r > kLoraMaxRank)
            cr.bad("r", v.dump() + " is out of range; the rank must be between 1 and " + std::to_string(kLoraMaxRank));
        c.r = int(r);
    } else {
        c.r = 8;
    }
    c.alpha = cr.number("lora_alpha", 8.0);
    c.dropout = cr.number("lora_dropout", 0.0);
    c.use_rslora = cr.boolean("use_rslora", false);
    if (j.contains("base_model_name_or_path") && !j.at("base_model_name_or_path").is_null())
        out.base_model_name_or_path = cr.string("base_model_name_or_path", "");

    // layers_to_transform: null, one index, or a list of indices (PEFT accepts all three).
    std::vector<int64_t> layers;
    if (cr.has("layers_to_transform")) {
        const auto& v = j.at("layers_to_transform");
        auto add = [&](const json& e) {
            if (!e.is_number_integer())
                cr.bad("layers_to_transform", "expected layer indices (integers), got " + e.dump());
            const auto l = e.get<int64_t>();
            if (l < 0 || l >= model.num_hidden_layers)
                cr.bad("layers_to_transform", "lists layer " + std::to_string(l) + " but the model has " +
                                                  std::to_string(model.num_hidden_layers) +
                                                  " layers; was this adapter made for another model?");
            if (std::find(layers.begin(), layers.end(), l) == layers.end()) layers.push_back(l);
        };
        if (v.is_array()) {
            for (const auto& e : v) add(e);
        } else {
            add(v);
        }
        std::sort(layers.begin(), layers.end());
        if (!layers.empty() && cr.has("layers_pattern")) {
            const auto& p = j.at("layers_pattern");
            const bool ok = (p.is_string() && (p == "layers" || p.get<std::string>().empty())) ||
                            (p.is_array() && (p.empty() || (p.size() == 1 && p[0] == "layers")));
            if (!ok)
                cr.unsupported("layers_pattern is " + p.dump() +
                               "; the supported models keep their blocks in \"layers\" (model.layers.N)");
        }
    }

    // target_modules (and target_parameters) -> the (layer, module) pairs PEFT would have adapted.
    const bool params = !cr.empty_or_null("target_parameters");
    if (!cr.has("target_modules") && !params)
        cr.bad("target_modules", "missing; PEFT writes the adapted module names here (e.g. [\"q_proj\", \"v_proj\"])");
    const json tm = cr.has("target_modules") ? j.at("target_modules") : json::array();
    TargetResolution res;
    if (tm.is_array()) {
        res = resolve_list(cr, tm, model);
    } else if (tm.is_string()) {
        if (!layers.empty())
            cr.bad("layers_to_transform", "cannot be combined with target_modules as a string (PEFT refuses this too)");
        res = resolve_string(cr, tm.get<std::string>(), model);
    } else {
        cr.bad("target_modules", "expected a list of module names or a regular expression, got " + tm.dump());
    }
    if (params) resolve_parameters(cr, j.at("target_parameters"), model, res);
    if (!layers.empty()) {
        std::set<std::pair<int64_t, std::string>> kept;
        for (const auto& p : res.pairs)
            if (std::binary_search(layers.begin(), layers.end(), p.first)) kept.insert(p);
        res.pairs = std::move(kept);
        std::erase_if(res.modules, [&](const std::string& m) {
            return std::none_of(res.pairs.begin(), res.pairs.end(), [&](const auto& p) { return p.second == m; });
        });
    }
    if (res.pairs.empty())
        cr.bad("target_modules",
               tm.dump() + " matches none of the model's projections (" + join(lora_targets(model)) + ")");

    // Tandem's LoraConfig is one set of modules on one set of layers: the pairs must be that product (of the
    // modules each layer has: an MoE model's dense layers have no experts, its MoE layers no dense MLP).
    std::set<int64_t> used_layers;
    for (const auto& p : res.pairs) used_layers.insert(p.first);
    std::set<std::pair<int64_t, std::string>> exists;
    for (const LoraModuleRef& m : lora_modules(model)) exists.emplace(m.layer, m.target);
    size_t product = 0;
    for (auto l : used_layers)
        for (const auto& m : res.modules) product += exists.count({l, m});
    if (res.pairs.size() != product) {
        std::vector<std::string> desc;
        for (auto l : used_layers) {
            desc.push_back(describe_layer_modules(res, model, l));
            if (desc.size() == 3) break;
        }
        cr.unsupported("target_modules " + tm.dump() + " adapts different projections in different layers (" +
                       join(desc, "; ") + "); Tandem supports the same projections in every adapted layer");
    }
    c.target_modules = res.modules;
    if (int64_t(used_layers.size()) != model.num_hidden_layers)
        c.layers_to_transform.assign(used_layers.begin(), used_layers.end());
    apply_patterns(cr, model, res, out);

    validate_lora_config(c, src);  // dropout/alpha ranges; messages name the file
    return out;
}

// ---------------------------------------------------------------------------------------------------------
// Reading the weights

namespace {

struct ParsedName {
    int64_t layer = -1;
    std::string parent, module;
    bool is_a = true;
};

// "base_model.model.model.layers.{i}.{self_attn|mlp}.{module}.lora_{A|B}[.default].weight" -> parts.
// Returns false (with `why`) for anything else.
bool parse_lora_name(const std::string& name, ParsedName& out) {
    std::string rest = name;
    auto eat = [&](const std::string& prefix) {
        if (rest.rfind(prefix, 0) != 0) return false;
        rest.erase(0, prefix.size());
        return true;
    };
    if (!eat(kPeftPrefix) || !eat("model.layers.")) return false;
    size_t i = 0;
    while (i < rest.size() && i < 9 && rest[i] >= '0' && rest[i] <= '9') ++i;
    if (i == 0 || i >= rest.size() || rest[i] != '.' || (i > 1 && rest[0] == '0')) return false;
    out.layer = std::stoll(rest.substr(0, i));
    rest.erase(0, i + 1);
    const auto dot = rest.find('.');
    if (dot == std::string::npos) return false;
    out.parent = rest.substr(0, dot);
    rest.erase(0, dot + 1);
    const auto dot2 = rest.find('.');
    if (dot2 == std::string::npos) return false;
    out.module = rest.substr(0, dot2);
    rest.erase(0, dot2 + 1);
    if (rest == "lora_A.weight" || rest == "lora_A.default.weight")
        out.is_a = true;
    else if (rest == "lora_B.weight" || rest == "lora_B.default.weight")
        out.is_a = false;
    else
        return false;
    return true;
}

[[noreturn]] void unexpected_tensor(const std::string& file, const TensorInfo& t, const ModelConfig& model) {
    const auto& n = t.name;
    if (n.find("lora_magnitude_vector") != std::string::npos)
        throw_unsupported(file + ": tensor " + n + " is a DoRA magnitude vector; DoRA adapters are not supported");
    if (n.find("lora_embedding_") != std::string::npos)
        throw_unsupported(file + ": tensor " + n + " is LoRA on an embedding; only the projections " +
                          join(lora_targets(model)) + " are supported");
    if (n.find(".lora_B.") != std::string::npos && n.size() >= 5 && n.compare(n.size() - 5, 5, ".bias") == 0)
        throw_unsupported(file + ": tensor " + n + " is a lora_B bias (lora_bias); such adapters are not supported");
    if (n.find("modules_to_save") != std::string::npos || n.find("lm_head") != std::string::npos ||
        n.find("embed_tokens") != std::string::npos)
        throw_unsupported(file + ": tensor " + n +
                          " is a fully trained module (modules_to_save / lm_head / embeddings); such adapters are "
                          "not supported");
    throw_invalid(file + ": unexpected tensor " + n + " " + shape_to_string(t.shape) +
                  "; a LoRA adapter for this model holds only base_model.model.model.layers.N.{self_attn,mlp}."
                  "<projection>.lora_A/lora_B.weight tensors");
}

}  // namespace

PeftAdapter read_peft_adapter(const fs::path& dir, const ModelConfig& model) {
    std::error_code ec;
    if (!path_exists(dir)) throw_invalid(dir.string() + ": adapter folder not found");
    if (!fs::is_directory(dir, ec))
        throw_invalid(dir.string() +
                      ": not a folder; point to the folder holding adapter_config.json and "
                      "adapter_model.safetensors");
    const fs::path config_path = dir / kPeftConfigName;
    if (!path_exists(config_path))
        throw_invalid(dir.string() + ": no adapter_config.json in this folder (not a PEFT adapter folder)");
    PeftAdapter out =
        parse_peft_adapter_config(read_json_file(config_path, size_t(16) << 20), model, config_path.string());

    const fs::path weights_path = dir / kPeftWeightsName;
    if (!path_exists(weights_path)) {
        if (path_exists(dir / "adapter_model.bin"))
            throw_unsupported(
                dir.string() +
                ": only adapter_model.bin (a pickle) here. Tandem refuses it: loading a pickle (.bin/.pt/.pth/.ckpt) "
                "runs whatever code it contains. Convert it once with PEFT: python -c \"from transformers import "
                "AutoModelForCausalLM as M; from peft import PeftModel as P; P.from_pretrained(M.from_pretrained("
                "'BASE'), '" +
                dir.string() + "').save_pretrained('OUT', safe_serialization=True)\", then point Tandem at OUT.");
        throw_invalid(dir.string() + ": no adapter_model.safetensors in this folder (adapter_config.json is there)");
    }
    SafetensorsFile file(weights_path);
    const std::string fname = weights_path.string();
    auto rank_of = [&](int64_t layer, const std::string& target) -> int64_t {
        const auto it = out.ranks.find({layer, target});
        return it == out.ranks.end() ? out.config.r : it->second;
    };

    std::map<std::string, LoraTensorSpec> specs;
    for (auto& s : lora_tensor_specs(model, out.config)) specs.emplace(s.name, std::move(s));
    std::map<std::string, std::string> source_name;  // canonical name -> name in the file
    std::map<std::string, std::string> module_target;  // path under a layer ("self_attn.q_proj") -> target
    for (const LoraModuleRef& m : lora_modules(model))
        module_target.emplace(m.path.substr(m.path.find('.', std::string("model.layers.").size()) + 1), m.target);
    for (const auto& t : file.tensors()) {
        // The experts' tensors (PEFT's nested ParamWrapper names, lora_table.h), as the specs name them.
        std::string plain = t.name;
        for (const char* ab : {".lora_A.default.weight", ".lora_B.default.weight"})
            if (plain.size() > std::strlen(ab) && plain.compare(plain.size() - std::strlen(ab), std::strlen(ab), ab) == 0)
                plain = plain.substr(0, plain.size() - std::strlen(ab)) + std::string(ab).substr(0, 7) + ".weight";
        if (auto it = specs.find(plain); it != specs.end() && it->second.experts > 0) {
            const LoraTensorSpec& spec = it->second;
            const int64_t E = spec.experts, R = out.config.r, r = rank_of(spec.layer, spec.module);
            // PEFT's layouts: lora_A [E*r, in] (expert e's rows at e*r), lora_B [out, r*E] (B_e[o, j] at column
            // j*E + e); a smaller rank is padded to R with zero rows of A (per expert) and zero columns of B.
            const std::vector<int64_t> shape =
                spec.is_a ? std::vector<int64_t>{E * r, spec.shape[1]} : std::vector<int64_t>{spec.shape[0], r * E};
            if (auto [at, fresh] = source_name.emplace(plain, t.name); !fresh)
                throw_invalid(fname + ": tensors " + at->second + " and " + t.name + " are the same LoRA weight");
            if (!dtype_converts_to_f32(t.dtype))
                throw_unsupported(fname + ": tensor " + t.name + " has dtype " + std::string(dtype_name(t.dtype)) +
                                  "; LoRA weights must be F32, F16 or BF16");
            if (t.shape != shape)
                throw_invalid(fname + ": tensor " + t.name + " has shape " + shape_to_string(t.shape) +
                              ", expected " + shape_to_string(shape) + " (" +
                              (spec.is_a ? "lora_A [experts * r, in_features]" : "lora_B [out_features, r * experts]") +
                              " with r " + std::to_string(r) + " and " + std::to_string(spec.experts) +
                              " experts); was this adapter trained for another model?");
            std::vector<float> v = tensor_to_f32(t);
            if (r != R) {
                std::vector<float> p(size_t(spec.shape[0] * spec.shape[1]), 0.0f);
                if (spec.is_a) {
                    const int64_t in = spec.shape[1];
                    for (int64_t e = 0; e < E; ++e)
                        std::copy_n(v.begin() + e * r * in, r * in, p.begin() + e * R * in);
                } else {
                    for (int64_t o = 0; o < spec.shape[0]; ++o)
                        std::copy_n(v.begin() + o * r * E, r * E, p.begin() + o * R * E);
                }
                v = std::move(p);
            }
            if (!spec.is_a) v = expert_b_from_peft(v, spec.experts, spec.shape[0], out.config.r, spec.interleaved);
            out.tensors.emplace(plain, std::move(v));
            continue;
        }
        ParsedName p;
        if (!parse_lora_name(t.name, p)) unexpected_tensor(fname, t, model);
        const std::string path = p.parent + "." + p.module;
        if (!module_target.count(path))
            throw_invalid(fname + ": tensor " + t.name + " is for module '" + path +
                          "', which this model does not have; the projections are " + join(lora_targets(model)));
        if (p.layer >= model.num_hidden_layers)
            throw_invalid(fname + ": tensor " + t.name + " is for layer " + std::to_string(p.layer) +
                          " but the model has " + std::to_string(model.num_hidden_layers) +
                          " layers; was this adapter trained for another model?");
        if (!out.config.targets(module_target.at(path)) || !out.config.adapts_layer(p.layer))
            throw_invalid(fname + ": tensor " + t.name + " is for " + lora_module_path(p.layer, path) +
                          ", which adapter_config.json does not adapt (target_modules " +
                          join(out.config.target_modules) +
                          (out.config.layers_to_transform.empty() ? std::string() : ", on some layers only") +
                          "); the two files do not belong together");
        const std::string canon = peft_tensor_name(p.layer, path, p.is_a);
        const auto& spec = specs.at(canon);
        if (auto [it, fresh] = source_name.emplace(canon, t.name); !fresh)
            throw_invalid(fname + ": tensors " + it->second + " and " + t.name + " are the same LoRA weight");
        if (!dtype_converts_to_f32(t.dtype))
            throw_unsupported(fname + ": tensor " + t.name + " has dtype " + std::string(dtype_name(t.dtype)) +
                              "; LoRA weights must be F32, F16 or BF16");
        // A smaller rank (rank_pattern) is padded to R: zero rows of lora_A, zero columns of lora_B.
        const int64_t R = out.config.r, r = rank_of(p.layer, module_target.at(path));
        const std::vector<int64_t> shape =
            spec.is_a ? std::vector<int64_t>{r, spec.shape[1]} : std::vector<int64_t>{spec.shape[0], r};
        if (t.shape != shape)
            throw_invalid(fname + ": tensor " + t.name + " has shape " + shape_to_string(t.shape) + ", expected " +
                          shape_to_string(shape) + " (" +
                          (spec.is_a ? "lora_A [r, in_features]" : "lora_B [out_features, r]") + " with r " +
                          std::to_string(r) + " from adapter_config.json); was this adapter "
                          "trained for another model?");
        std::vector<float> v = tensor_to_f32(t);
        if (r != R) {
            std::vector<float> padded(size_t(spec.shape[0] * spec.shape[1]), 0.0f);
            if (spec.is_a)
                std::copy(v.begin(), v.end(), padded.begin());
            else
                for (int64_t o = 0; o < spec.shape[0]; ++o) std::copy_n(v.begin() + o * r, r, padded.begin() + o * R);
            v = std::move(padded);
        }
        out.tensors.emplace(canon, std::move(v));
    }
    std::vector<std::string> missing;
    for (const auto& [name, spec] : specs)
        if (!out.tensors.count(name)) missing.push_back(name);
    if (!missing.empty()) {
        const auto& first = specs.at(missing.front());
        const std::string pair = peft_tensor_name(first.layer, first.path, !first.is_a);
        throw_invalid(fname + ": tensor " + first.name + " " + shape_to_string(first.shape) + " is missing" +
                      (out.tensors.count(pair) ? " (its pair " + pair + " is there)" : std::string()) +
                      (missing.size() > 1 ? " and " + std::to_string(missing.size() - 1) + " more" : std::string()) +
                      "; adapter_config.json (target_modules " + join(out.config.target_modules) + ") implies " +
                      std::to_string(specs.size()) + " LoRA tensors, the file has " + std::to_string(file.size()));
    }
    return out;
}

}  // namespace tandem
