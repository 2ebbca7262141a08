// SPDX-FileCopyrightText: 2026 The Tandem developers
// SPDX-License-Identifier: GPL-3.0-or-later
// `tandem-cli generate --model DIR [--adapter DIR]... --prompt TEXT [--chat] [--system TEXT] [--interactive]
// [--compare] [--max-new-tokens N] [--temperature T] [--top-k K] [--top-p P] [--min-p P]
// [--repetition-penalty R] [--seed S] [--device auto|cpu|cuda] [--stats] [--batch N]` — text generation with the KV-cache
// engine (tandem::ChatSession, tandem/chat.h).
//  - Default: continues the prompt (decoded together with it, as SentencePiece decoders need) and streams the
//    text to stdout. --chat wraps the prompt as one user message (and --system as the system message) through
//    the model's chat template (chatml when it has none) with the generation prompt, and prints the answer.
//  - --interactive: a terminal chat (stdin lines are user turns; "/reset" starts over, "/quit" or end of input
//    ends); the conversation is kept, so each turn prefills only its new tokens.
//  - --compare: the same prompt answered by the base model and by each --adapter, printed one block per model
//    ("== base ==", "== <adapter folder> ==") after all finished; they run as one batch, taking turns per token.
//  - Sampling: greedy by default (temperature 0); with --temperature > 0 the model's generation_config.json
//    fills the settings not given on the command line. Stops at EOS, generation_config's stop ids, the
//    template's end token, or N tokens. --stats prints tokens/s to stderr. Ctrl-C stops the answer.
//  - --device cuda runs on the GPU (infer/cuda_infer.h; Unsupported without a usable one); auto takes the GPU when
//    there is one.
#include <atomic>
#include <chrono>
#include <csignal>
#include <cstdio>
#include <iostream>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "commands.h"
#include "tandem/chat.h"
#include "tandem/error.h"
#include "tandem/tokenizer.h"

namespace tandem::cli {
namespace {

std::atomic<bool> g_stop{false};
extern "C" void generate_on_sigint(int) { g_stop = true; }

// Installs the SIGINT handler (stop the answer) for its lifetime.
class GenerateSigint {
public:
    GenerateSigint() {
        g_stop = false;
        struct sigaction sa {};
        sa.sa_handler = generate_on_sigint;
        sigemptyset(&sa.sa_mask);
        sigaction(SIGINT, &sa, &old_);
    }
    ~GenerateSigint() { sigaction(SIGINT, &old_, nullptr); }
    GenerateSigint(const GenerateSigint&) = delete;
    GenerateSigint& operator=(const GenerateSigint&) = delete;

private:
    struct sigaction old_ {};
};

// Streams one request's text to stdout. With a raw prompt the text printed is decode(prompt + answer), so its
// first piece keeps the prompt's spacing; the new part is printed as it grows.
struct StdoutSink final : GenerationSink {
    const Tokenizer* tok = nullptr;
    std::vector<int32_t> all;  // prompt + answer (raw prompts only)
    std::string printed;
    bool raw = false;
    void on_token(int, int32_t id, std::string_view text) override {
        if (!raw) {
            std::cout << text << std::flush;
            return;
        }
        if (id >= 0) all.push_back(id);
        const std::string now = tok->decode(all, true);
        if (now.size() > printed.size() && now.compare(0, printed.size(), printed) == 0 &&
            now.compare(now.size() - std::min<size_t>(3, now.size()), 3, "\xEF\xBF\xBD") != 0) {
            std::cout << now.substr(printed.size()) << std::flush;
            printed = now;
        }
    }
    void finish() {
        if (!raw) return;
        const std::string now = tok->decode(all, true);
        if (now.size() > printed.size() && now.compare(0, printed.size(), printed) == 0)
            std::cout << now.substr(printed.size());
        printed = now;
    }
};

void print_stats(const GenerationResult& r, const std::string& who) {
    std::fprintf(stderr, "%s%d prompt tokens (%d reused), %zu new, stop: %s, first token %.3f s, %.1f tokens/s\n",
                 who.empty() ? "" : (who + ": ").c_str(), r.prompt_tokens, r.reused_tokens, r.ids.size(),
                 stop_reason_name(r.stop), r.first_token_seconds, r.tokens_per_second());
}

}  // namespace

Run add_generate_command(CLI::App& app) {
    struct Opts {
        std::string model, prompt, system, device = "auto";
        std::vector<std::string> adapters;
        bool chat = false, interactive = false, compare = false, stats = false;
        int max_new = 128;
        int batch = 1;
        std::optional<double> temperature, top_p, min_p, repetition_penalty;
        std::optional<int> top_k;
        uint64_t seed = 0;
        int context = 0;
        int warmup = 0;
        int prefill_chunk = 0;
    };
    auto o = std::make_shared<Opts>();
    CLI::App* sub = app.add_subcommand(
        "generate", "generate text with the KV-cache engine (CPU): continue a prompt, chat, or compare base and tuned");
    sub->add_option("--model", o->model, "model folder (config.json + safetensors + tokenizer.json)")->required();
    sub->add_option("--adapter", o->adapters,
                    "PEFT LoRA adapter folder (repeat with --compare to compare several)");
    sub->add_option("--prompt", o->prompt, "prompt text (empty: start from BOS)");
    sub->add_option("--system", o->system, "system message (with --chat / --interactive)");
    sub->add_flag("--chat", o->chat, "wrap the prompt as a user message through the chat template");
    sub->add_flag("--interactive", o->interactive, "a terminal chat: each stdin line is a user turn");
    sub->add_flag("--compare", o->compare, "answer with the base model and each --adapter, side by side");
    sub->add_option("--max-new-tokens", o->max_new, "tokens to generate at most (capped by the context)")
        ->check(CLI::NonNegativeNumber);
    sub->add_option("--temperature", o->temperature, "0 = greedy (default); > 0 samples")->check(CLI::NonNegativeNumber);
    sub->add_option("--top-k", o->top_k, "keep the k most likely tokens (0: off)")->check(CLI::NonNegativeNumber);
    sub->add_option("--top-p", o->top_p, "nucleus sampling: keep the top tokens with this much probability")
        ->check(CLI::Range(0.0, 1.0));
    sub->add_option("--min-p", o->min_p, "drop tokens below min-p times the most likely one's probability")
        ->check(CLI::Range(0.0, 1.0));
    sub->add_option("--repetition-penalty", o->repetition_penalty, "penalise tokens already in the sequence (1: off)")
        ->check(CLI::PositiveNumber);
    sub->add_option("--seed", o->seed, "sampling seed");
    sub->add_option("--context", o->context, "tokens per conversation, prompt included (0: the model's, at most 4096)")
        ->check(CLI::NonNegativeNumber);
    sub->add_option("--device", o->device, "auto | cpu | cuda")
        ->check(CLI::IsMember({"auto", "cpu", "cuda"}));
    sub->add_flag("--stats", o->stats, "print prompt tokens, stop reason and tokens/s to stderr");
    sub->add_option("--warmup", o->warmup,
                    "run the request this many times first, unprinted, from a fresh conversation each time (so "
                    "--stats measures warm: no first use of a shape)")
        ->check(CLI::Range(0, 100));
    sub->add_option("--prefill-chunk", o->prefill_chunk,
                    "prompt tokens per forward pass (0: the engine's default, 2048)")
        ->check(CLI::NonNegativeNumber);
    sub->add_option("--batch", o->batch,
                    "answer the prompt this many times at once (one decode batch; --stats: the batch's tokens/s)")
        ->check(CLI::Range(1, 256));
    return [o]() -> int {
        if (o->compare && o->adapters.empty())
            throw_invalid("generate --compare: give at least one --adapter to compare with the base model");
        if (!o->compare && o->adapters.size() > 1)
            throw_invalid("generate: several --adapter folders need --compare");
        if (o->compare && o->interactive) throw_invalid("generate: --compare and --interactive do not combine");
        ChatSessionOptions so;
        so.model_dir = o->model;
        so.device = o->device == "cuda"  ? ChatSessionOptions::Device::Cuda
                    : o->device == "cpu" ? ChatSessionOptions::Device::Cpu
                                         : ChatSessionOptions::Device::Auto;
        if (o->batch > 1 && (o->compare || o->interactive))
            throw_invalid("generate: --batch does not combine with --compare or --interactive");
        so.max_sequences = o->compare ? int(o->adapters.size()) + 1 : o->batch;
        so.max_context = o->context;
        if (o->prefill_chunk > 0) so.prefill_chunk = o->prefill_chunk;
        if (o->warmup > 0 && o->interactive) throw_invalid("generate: --warmup does not combine with --interactive");
        for (size_t i = 0; i < o->adapters.size(); ++i) so.adapters.push_back({o->adapters[i], o->adapters[i]});
        ChatSession session = ChatSession::open(so);
        if (!session.tokenizer()) throw_invalid(o->model + ": the model folder has no tokenizer.json");
        const Tokenizer& tok = *session.tokenizer();

        SamplingOptions sampling;  // greedy unless asked; then generation_config.json fills the rest
        if (o->temperature && *o->temperature > 0) {
            const GenerationDefaults g = session.defaults();
            if (!g.note.empty()) std::fprintf(stderr, "%s\n", g.note.c_str());
            sampling = g.sampling;
            sampling.temperature = *o->temperature;
        }
        if (o->top_k) sampling.top_k = *o->top_k;
        if (o->top_p) sampling.top_p = *o->top_p;
        if (o->min_p) sampling.min_p = *o->min_p;
        if (o->repetition_penalty) sampling.repetition_penalty = *o->repetition_penalty;
        sampling.seed = o->seed;
        GenerateSigint sigint;
        const std::string adapter = o->adapters.empty() ? "" : o->adapters[0];

        if (o->interactive) {
            std::vector<ChatMessage> conv;
            if (!o->system.empty()) conv.push_back({"system", o->system});
            if (!o->prompt.empty()) std::fprintf(stderr, "generate --interactive: --prompt is ignored; type your turns\n");
            std::string line;
            while (true) {
                std::cerr << "> " << std::flush;
                if (!std::getline(std::cin, line) || line == "/quit") break;
                if (line == "/reset") {
                    conv.resize(o->system.empty() ? 0 : 1);
                    session.reset();
                    continue;
                }
                if (line.empty()) continue;
                conv.push_back({"user", line});
                GenerationRequest r;
                r.adapter = adapter;
                r.messages = conv;
                r.sampling = sampling;
                r.max_new_tokens = o->max_new;
                StdoutSink sink;
                g_stop = false;
                GenerationResult res;
                try {
                    res = session.generate(r, &sink, &g_stop);
                } catch (const Error& e) {
                    conv.pop_back();
                    std::cerr << "error: " << e.what() << "\n";
                    continue;
                }
                std::cout << "\n" << std::flush;
                if (o->stats) print_stats(res, "");
                conv.push_back({"assistant", res.text});
            }
            return 0;
        }

        GenerationRequest base;
        if (o->chat) {
            if (!o->system.empty()) base.messages.push_back({"system", o->system});
            base.messages.push_back({"user", o->prompt});
        } else {
            base.prompt = o->prompt;
        }
        base.sampling = sampling;
        base.max_new_tokens = o->max_new;

        if (o->compare) {
            std::vector<GenerationRequest> reqs{base};
            for (const std::string& a : o->adapters) {
                reqs.push_back(base);
                reqs.back().adapter = a;
            }
            for (int w = 0; w < o->warmup; ++w) {
                (void)session.generate(reqs, nullptr, &g_stop);
                session.reset();
            }
            const std::vector<GenerationResult> res = session.generate(reqs, nullptr, &g_stop);
            const std::vector<int32_t> prompt = session.prompt_ids(base);
            for (size_t i = 0; i < res.size(); ++i) {
                const std::string who = i == 0 ? "base" : o->adapters[i - 1];
                std::cout << "== " << who << " ==\n";
                if (o->chat) {
                    std::cout << res[i].text << "\n";
                } else {
                    std::vector<int32_t> all = prompt;
                    all.insert(all.end(), res[i].ids.begin(), res[i].ids.end());
                    std::cout << tok.decode(all, true) << "\n";
                }
                if (o->stats) print_stats(res[i], who);
            }
            return 0;
        }

        base.adapter = adapter;
        for (int w = 0; w < o->warmup; ++w) {  // the same request(s), discarded; each from a fresh conversation
            const std::vector<GenerationRequest> reqs(size_t(o->batch), base);
            (void)session.generate(reqs, nullptr, &g_stop);
            session.reset();
        }
        if (o->batch > 1) {  // the same request o->batch times, decoded together: the batch's throughput
            const std::vector<GenerationRequest> reqs(size_t(o->batch), base);
            const auto t0 = std::chrono::steady_clock::now();
            const std::vector<GenerationResult> res = session.generate(reqs, nullptr, &g_stop);
            const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
            size_t tokens = 0;
            for (const GenerationResult& r : res) tokens += r.ids.size();
            std::cout << (o->chat ? res[0].text : tok.decode(res[0].ids, true)) << "\n";
            if (o->stats)
                std::fprintf(stderr, "batch %d: %d prompt tokens each, %zu new tokens in %.2f s = %.1f tokens/s "
                             "(first token %.3f s)\n",
                             o->batch, res[0].prompt_tokens, tokens, s, double(tokens) / s, res[0].first_token_seconds);
            return 0;
        }
        StdoutSink sink;
        sink.tok = &tok;
        sink.raw = !o->chat;
        if (sink.raw) {
            sink.all = session.prompt_ids(base);
            sink.on_token(0, -1, {});  // the prompt's own text first
        }
        const GenerationResult r = session.generate(base, &sink, &g_stop);
        sink.finish();
        std::cout << "\n" << std::flush;
        if (o->stats) print_stats(r, "");
        return 0;
    };
}

}  // namespace tandem::cli
