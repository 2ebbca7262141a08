// SPDX-FileCopyrightText: 2026 The Tandem developers
// SPDX-License-Identifier: GPL-3.0-or-later
// ChatSession (tandem/chat.h) over CpuInferModel (infer/cpu_infer.h): prompts (chat template, tokenizer),
// stop ids, slots and prefix reuse, the generation loop (prefill per adapter group, then decode rounds of every
// request at once, the adapters' rows consecutive), sampling, streaming text and timing.
// Streaming text: the detokenizer of vLLM / transformers' TextStreamer: the new text of a token is
// decode(ids[prefix:]) minus decode(ids[prefix:read]), held back while it ends in an incomplete character
// (U+FFFD), so SentencePiece's leading-space rule and byte-fallback pieces come out as the full decode does.
#include "tandem/chat.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <map>
#include <optional>
#include <span>
#include <string>

#include <nlohmann/json.hpp>

#include "core/files.h"
#include "infer/cpu_infer.h"
#include "infer/cuda_infer.h"
#include "model/cuda_model.h"
#include "tandem/chat_template.h"
#include "tandem/error.h"
#include "tandem/model_config.h"
#include "tandem/tokenizer.h"

namespace tandem {
namespace fs = std::filesystem;

const char* stop_reason_name(StopReason r) {
    switch (r) {
    case StopReason::Eos: return "eos";
    case StopReason::MaxTokens: return "max-tokens";
    case StopReason::ContextFull: return "context-full";
    case StopReason::Cancelled: return "cancelled";
    }
    return "?";
}

double GenerationResult::tokens_per_second() const {
    const double t = total_seconds - first_token_seconds;
    return ids.size() >= 2 && t > 0 ? double(ids.size() - 1) / t : 0.0;
}

GenerationDefaults load_generation_defaults(const fs::path& model_dir) {
    GenerationDefaults g;
    const fs::path file = model_dir / "generation_config.json";
    std::error_code ec;
    if (!fs::is_regular_file(file, ec)) return g;
    try {
        const nlohmann::json j = read_json_file(file, size_t(1) << 20);
        if (!j.is_object()) throw std::runtime_error("not a JSON object");
        auto num = [&](const char* k, double& out) {
            if (j.contains(k) && j[k].is_number()) out = j[k].get<double>();
        };
        const bool sample = j.value("do_sample", false);
        SamplingOptions s;
        if (sample) {
            s.temperature = 1.0;
            num("temperature", s.temperature);
            double k = 50;  // transformers' GenerationConfig default top_k
            num("top_k", k);
            s.top_k = int(std::max(0.0, k));
            num("top_p", s.top_p);
            num("min_p", s.min_p);
        }
        num("repetition_penalty", s.repetition_penalty);
        if (j.contains("max_new_tokens") && j["max_new_tokens"].is_number_integer())
            g.max_new_tokens = std::max(1, j["max_new_tokens"].get<int>());
        if (!(s.temperature >= 0) || !(s.top_p > 0 && s.top_p <= 1) || !(s.min_p >= 0 && s.min_p <= 1) ||
            !(s.repetition_penalty > 0))
            throw std::runtime_error("a sampling value is out of range");
        g.sampling = s;
    } catch (const std::exception& e) {
        g = GenerationDefaults{};
        g.note = file.string() + ": ignored (" + e.what() + "); greedy decoding is the default";
    }
    return g;
}

namespace {

// The stop ids of generation_config.json's eos_token_id (an integer or a list).
std::vector<int64_t> generation_config_eos(const fs::path& model_dir) {
    std::vector<int64_t> ids;
    std::error_code ec;
    const fs::path file = model_dir / "generation_config.json";
    if (!fs::is_regular_file(file, ec)) return ids;
    try {
        const nlohmann::json g = read_json_file(file, size_t(1) << 20);
        if (g.is_object() && g.contains("eos_token_id")) {
            const auto& e = g["eos_token_id"];
            if (e.is_number_integer()) ids.push_back(e.get<int64_t>());
            if (e.is_array())
                for (const auto& v : e)
                    if (v.is_number_integer()) ids.push_back(v.get<int64_t>());
        }
    } catch (const std::exception&) {
    }
    return ids;
}

nlohmann::json to_json(const std::vector<ChatMessage>& messages) {
    nlohmann::json a = nlohmann::json::array();
    for (const ChatMessage& m : messages) a.push_back({{"role", m.role}, {"content", m.content}});
    return a;
}

bool ends_incomplete(const std::string& s) {
    static const std::string kReplacement = "\xEF\xBF\xBD";
    return s.size() >= 3 && s.compare(s.size() - 3, 3, kReplacement) == 0;
}

// The incremental detokenizer of one request.
struct TextStream {
    std::vector<int32_t> ids;
    size_t prefix = 0, read = 0;
    std::string emitted;

    std::string push(const Tokenizer& tok, int32_t id) {
        ids.push_back(id);
        const std::span<const int32_t> all(ids);
        const std::string before = tok.decode(all.subspan(prefix, read - prefix), true);
        const std::string now = tok.decode(all.subspan(prefix), true);
        if (now.size() <= before.size() || ends_incomplete(now) || now.compare(0, before.size(), before) != 0)
            return {};
        prefix = read;
        read = ids.size();
        std::string delta = now.substr(before.size());
        emitted += delta;
        return delta;
    }
};

struct Running {
    int request = 0, slot = 0;
    std::string adapter;
    std::vector<int32_t> prompt;
    std::vector<int32_t> pending;  // tokens to feed next (the prompt's unprefilled part, then the last token)
    cpu::SamplingParams params;
    int max_new = 0;
    bool stop_at_eos = true;
    bool active = true;
    TextStream text;
    GenerationResult result;
};

cpu::SamplingParams sampling_params(const SamplingOptions& s, const std::string& where) {
    if (!(s.temperature >= 0) || !std::isfinite(s.temperature))
        throw_invalid(where + ": temperature must be a finite number >= 0");
    if (s.top_k < 0) throw_invalid(where + ": top_k must be >= 0");
    if (!(s.top_p > 0 && s.top_p <= 1)) throw_invalid(where + ": top_p must be in (0, 1]");
    if (!(s.min_p >= 0 && s.min_p <= 1)) throw_invalid(where + ": min_p must be in [0, 1]");
    if (!(s.repetition_penalty > 0) || !std::isfinite(s.repetition_penalty))
        throw_invalid(where + ": repetition_penalty must be a finite number > 0");
    cpu::SamplingParams p;
    p.temperature = float(s.temperature);
    p.top_k = s.top_k;
    p.top_p = float(s.top_p);
    p.min_p = float(s.min_p);
    p.repetition_penalty = float(s.repetition_penalty);
    p.seed = s.seed;
    return p;
}

}  // namespace

struct ChatSession::Impl {
    ChatSessionOptions opt;
    std::optional<Tokenizer> tok;
    std::optional<ChatTemplate> tmpl;
    std::string template_error;  // why messages cannot be rendered (no tokenizer)
    std::vector<int32_t> stops;
    GenerationDefaults defaults;
    std::unique_ptr<infer::InferModel> model;  // CpuInferModel or CudaInferModel
    std::vector<std::string> slot_adapter;  // [slots] the adapter the slot's cache was computed with

    // The special token the template writes after an assistant turn, if any.
    std::optional<int32_t> template_end() const {
        if (!tok || !tmpl) return std::nullopt;
        const std::string mark = "\x01TANDEM_ANSWER\x01";
        try {
            const nlohmann::json msgs =
                nlohmann::json::array({{{"role", "user"}, {"content", "hi"}}, {{"role", "assistant"}, {"content", mark}}});
            const std::string r = tmpl->render(msgs, false, {{"enable_thinking", false}});
            const size_t at = r.find(mark);
            if (at == std::string::npos) return std::nullopt;
            const std::vector<int32_t> after = tok->encode(std::string_view(r).substr(at + mark.size()), false);
            if (!after.empty() && tok->is_special(after[0])) return after[0];
        } catch (const Error&) {
        }
        return std::nullopt;
    }

    void add_stop(int64_t id) {
        if (id < 0 || id >= model->vocab()) return;
        if (std::find(stops.begin(), stops.end(), int32_t(id)) == stops.end()) stops.push_back(int32_t(id));
    }

    std::vector<int32_t> prompt_ids(const GenerationRequest& r, const std::string& where) const {
        if (!r.prompt_ids.empty()) return r.prompt_ids;
        if (!tok) throw_invalid(where + ": " + opt.model_dir.string() + " has no tokenizer.json; give prompt ids");
        std::vector<int32_t> ids;
        if (!r.messages.empty()) {
            if (!tmpl) throw_invalid(where + ": " + template_error);
            ids = tok->encode(render(r.messages), false);
        } else if (!r.prompt.empty()) {
            ids = tok->encode(r.prompt, true);
        }
        if (ids.empty()) {
            const auto bos = tok->bos_id();
            if (!bos) throw_invalid(where + ": the prompt is empty and the tokenizer has no BOS token to start from");
            ids.push_back(*bos);
        }
        return ids;
    }

    std::string render(const std::vector<ChatMessage>& messages) const {
        if (!tmpl) throw_invalid(template_error);
        return tmpl->render(to_json(messages), true, {{"enable_thinking", false}});
    }
};

ChatSession::ChatSession(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
ChatSession::ChatSession(ChatSession&&) noexcept = default;
ChatSession& ChatSession::operator=(ChatSession&&) noexcept = default;
ChatSession::~ChatSession() = default;

ChatSession ChatSession::open(const ChatSessionOptions& options) {
    const std::string where = options.model_dir.string();
    if (options.max_sequences < 1) throw_invalid(where + ": at least one sequence is needed");
    auto impl = std::make_unique<Impl>();
    Impl& m = *impl;
    m.opt = options;
    infer::InferOptions io;
    io.num_slots = options.max_sequences;
    io.max_len = options.max_context;
    io.chunk = std::max(options.prefill_chunk, options.max_sequences);
    io.quantize_4bit = options.quantize_4bit;
    // auto: CUDA when this build and machine can run it (cuda_backend_available), else the CPU.
    const bool cuda = options.device == ChatSessionOptions::Device::Cuda ||
                      (options.device == ChatSessionOptions::Device::Auto && cuda_backend_available());
    if (cuda)
        m.model = infer::load_cuda_infer_model(options.model_dir, io);
    else
        m.model = std::make_unique<infer::CpuInferModel>(infer::CpuInferModel::load(options.model_dir, io));
    m.slot_adapter.assign(size_t(options.max_sequences), {});
    std::error_code ec;
    if (fs::is_regular_file(options.model_dir / "tokenizer.json", ec)) {
        m.tok.emplace(Tokenizer::load(options.model_dir));
        const TokenizerConfig& tc = m.tok->config();
        if (!tc.chat_template.empty())
            m.tmpl.emplace(ChatTemplate::compile(tc.chat_template, tc.bos_token, tc.eos_token,
                                                 (options.model_dir / "tokenizer_config.json").string()));
        else
            m.tmpl.emplace(ChatTemplate::builtin("chatml", tc.bos_token, tc.eos_token));
    } else {
        m.template_error = where + " has no tokenizer.json: chat messages cannot be rendered";
    }
    m.defaults = load_generation_defaults(options.model_dir);
    if (m.tok)
        if (auto e = m.tok->eos_id()) m.add_stop(*e);
    for (int64_t e : m.model->config().eos_token_ids) m.add_stop(e);
    for (int64_t e : generation_config_eos(options.model_dir)) m.add_stop(e);
    if (auto e = m.template_end()) m.add_stop(*e);
    ChatSession s(std::move(impl));
    for (const AdapterSource& a : options.adapters) s.add_adapter(a);
    return s;
}

void ChatSession::add_adapter(const AdapterSource& a) {
    Impl& m = *impl_;
    m.model->add_adapter(a.name, a.dir);
    for (size_t s = 0; s < m.slot_adapter.size(); ++s)  // a replaced adapter's cached prefixes are stale
        if (m.slot_adapter[s] == a.name) m.model->truncate(int(s), 0);
}

void ChatSession::remove_adapter(const std::string& name) { impl_->model->remove_adapter(name); }
std::vector<std::string> ChatSession::adapters() const { return impl_->model->adapter_names(); }

std::vector<int32_t> ChatSession::prompt_ids(const GenerationRequest& r) const { return impl_->prompt_ids(r, "generate"); }
std::string ChatSession::render(const std::vector<ChatMessage>& messages) const { return impl_->render(messages); }

void ChatSession::reset() {
    for (int s = 0; s < impl_->model->num_slots(); ++s) impl_->model->truncate(s, 0);
}

const std::vector<int32_t>& ChatSession::stop_ids() const { return impl_->stops; }
const Tokenizer* ChatSession::tokenizer() const { return impl_->tok ? &*impl_->tok : nullptr; }
const GenerationDefaults& ChatSession::defaults() const { return impl_->defaults; }
int ChatSession::max_context() const { return impl_->model->max_len(); }
int ChatSession::max_sequences() const { return impl_->model->num_slots(); }
const fs::path& ChatSession::model_dir() const { return impl_->opt.model_dir; }
std::string ChatSession::device_name() const { return impl_->model->device_name(); }

ChatMemory ChatSession::memory() const {
    const infer::InferBytes b = impl_->model->bytes();
    return {b.weights, b.adapters, b.kv_cache, b.activations, b.workspace};
}

GenerationResult ChatSession::generate(const GenerationRequest& request, GenerationSink* sink,
                                       const std::atomic<bool>* cancel) {
    return generate(std::vector<GenerationRequest>{request}, sink, cancel).at(0);
}

std::vector<GenerationResult> ChatSession::generate(const std::vector<GenerationRequest>& requests,
                                                    GenerationSink* sink, const std::atomic<bool>* cancel) {
    Impl& m = *impl_;
    infer::InferModel& model = *m.model;
    using Clock = std::chrono::steady_clock;
    const auto t0 = Clock::now();
    auto seconds = [&] { return std::chrono::duration<double>(Clock::now() - t0).count(); };
    if (requests.empty()) return {};
    if (int(requests.size()) > model.num_slots())
        throw_invalid("generate: " + std::to_string(requests.size()) + " requests, but the session holds " +
                      std::to_string(model.num_slots()) + " sequences at once");

    // Check every request before anything runs.
    std::vector<Running> run(requests.size());
    std::vector<uint8_t> slot_used(size_t(model.num_slots()), 0);
    for (size_t i = 0; i < requests.size(); ++i) {
        const GenerationRequest& q = requests[i];
        const std::string where = "generate: request " + std::to_string(i);
        Running& r = run[i];
        r.request = int(i);
        r.slot = q.slot < 0 ? int(i) : q.slot;
        if (r.slot >= model.num_slots())
            throw_invalid(where + ": slot " + std::to_string(r.slot) + " does not exist (the session holds " +
                          std::to_string(model.num_slots()) + ")");
        if (slot_used[size_t(r.slot)]++) throw_invalid(where + ": two requests name slot " + std::to_string(r.slot));
        if (!q.adapter.empty() && !model.has_adapter(q.adapter))
            throw_invalid(where + ": no adapter named '" + q.adapter + "' is loaded");
        r.adapter = q.adapter;
        r.prompt = m.prompt_ids(q, where);
        for (int32_t id : r.prompt)
            if (id < 0 || id >= model.vocab())
                throw_invalid(where + ": prompt id " + std::to_string(id) + " is outside the vocabulary [0, " +
                              std::to_string(model.vocab()) + ")");
        if (int(r.prompt.size()) >= model.max_len())
            throw_invalid(where + ": the prompt has " + std::to_string(r.prompt.size()) +
                          " tokens; the session holds " + std::to_string(model.max_len()) +
                          " per sequence, the answer included (start a new conversation or raise the context)");
        if (q.max_new_tokens < 0) throw_invalid(where + ": max_new_tokens must be >= 0");
        r.params = sampling_params(q.sampling, where);
        r.max_new = std::min(q.max_new_tokens, model.max_len() - int(r.prompt.size()));
        r.stop_at_eos = q.stop_at_eos;
        r.result.prompt_tokens = int(r.prompt.size());
    }
    // Prefix reuse: keep what the slot holds of this prompt (computed with the same adapter), all but the
    // prompt's last token, which must run to give the first logits.
    for (Running& r : run) {
        const int held = model.length(r.slot);
        int keep = 0;
        if (m.slot_adapter[size_t(r.slot)] == r.adapter) {
            const int32_t* t = model.tokens(r.slot);
            const int most = std::min<int>(held, int(r.prompt.size()) - 1);
            while (keep < most && t[keep] == r.prompt[size_t(keep)]) ++keep;
        }
        model.truncate(r.slot, keep);
        m.slot_adapter[size_t(r.slot)] = r.adapter;
        r.result.reused_tokens = keep;
        r.pending.assign(r.prompt.begin() + keep, r.prompt.end());
    }
    // Groups of one adapter, in the order of their first request.
    std::vector<std::vector<size_t>> groups;
    {
        std::map<std::string, size_t> at;
        for (size_t i = 0; i < run.size(); ++i) {
            auto [it, fresh] = at.emplace(run[i].adapter, groups.size());
            if (fresh) groups.emplace_back();
            groups[it->second].push_back(i);
        }
    }
    auto cancelled = [&] { return cancel && cancel->load(std::memory_order_relaxed); };
    auto finish = [&](Running& r, StopReason why) {
        r.active = false;
        r.result.stop = why;
        r.result.total_seconds = seconds();
        if (m.tok) {
            r.result.text = m.tok->decode(r.result.ids, true);
            // What the stream held back (an incomplete character at the very end) goes out now.
            if (sink && r.result.text.size() > r.text.emitted.size() &&
                r.result.text.compare(0, r.text.emitted.size(), r.text.emitted) == 0)
                sink->on_token(r.request, -1, std::string_view(r.result.text).substr(r.text.emitted.size()));
        }
        if (sink) sink->on_finished(r.request, r.result);
    };
    // One step of some requests (a group's prefill, or a decode round of every group, each group's requests
    // consecutive): feed what each active request has pending with its adapter, sample, stream, stop.
    auto step = [&](const std::vector<size_t>& requests) {
        std::vector<infer::Feed> feeds;
        std::vector<std::string> adapters;
        std::vector<size_t> who;
        for (size_t i : requests)
            if (run[i].active) {
                feeds.push_back({run[i].slot, run[i].pending});
                adapters.push_back(run[i].adapter);
                who.push_back(i);
            }
        if (feeds.empty()) return;
        if (!model.forward(feeds, adapters, cancel)) return;  // cancelled inside a long prefill
        std::vector<cpu::SamplingParams> params;
        std::vector<int64_t> draw;
        for (size_t i : who) {
            params.push_back(run[i].params);
            draw.push_back(int64_t(run[i].result.ids.size()));
        }
        const std::vector<int32_t> next = model.sample(feeds, params, draw);
        for (size_t k = 0; k < who.size(); ++k) {
            Running& r = run[who[k]];
            const int32_t id = next[k];
            if (r.result.ids.empty()) r.result.first_token_seconds = seconds();
            if (r.stop_at_eos && std::find(m.stops.begin(), m.stops.end(), id) != m.stops.end()) {
                r.result.stop_id = id;
                finish(r, StopReason::Eos);
                continue;
            }
            r.result.ids.push_back(id);
            if (sink) sink->on_token(r.request, id, m.tok ? std::string_view(r.text.push(*m.tok, id)) : std::string_view());
            if (int(r.result.ids.size()) >= r.max_new) {
                finish(r, int(r.prompt.size() + r.result.ids.size()) >= model.max_len() ? StopReason::ContextFull
                                                                                       : StopReason::MaxTokens);
                continue;
            }
            r.pending.assign(1, id);
        }
    };
    auto any_active = [&] {
        return std::any_of(run.begin(), run.end(), [](const Running& r) { return r.active; });
    };
    for (Running& r : run)
        if (r.max_new == 0) finish(r, StopReason::MaxTokens);
    // Prefill every group (chunks inside forward), then decode rounds: one step per group in turn.
    for (const auto& g : groups) {
        if (cancelled()) break;
        step(g);
    }
    // Decode rounds: every active request's next token in one forward call, the groups' rows consecutive, so
    // the base weights are read once per token for all adapters together (each adapter's LoRA over its rows).
    // Not for mixture-of-experts models: their experts' LoRA runs over rows sorted by expert, not by request, so
    // their groups take turns, one step each.
    std::vector<size_t> all;
    for (const auto& g : groups) all.insert(all.end(), g.begin(), g.end());
    const bool together = model.config().num_experts == 0;
    while (any_active() && !cancelled()) {
        if (together) {
            step(all);
            continue;
        }
        for (const auto& g : groups) {
            if (cancelled()) break;
            step(g);
        }
    }
    std::vector<GenerationResult> out;
    for (Running& r : run) {
        if (r.active) finish(r, StopReason::Cancelled);
        out.push_back(std::move(r.result));
    }
    return out;
}

}  // namespace tandem
