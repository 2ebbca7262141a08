// SPDX-FileCopyrightText: 2026 The Tandem developers
// SPDX-License-Identifier: GPL-3.0-or-later
// tandem::ChatSession — try a model: open a model folder once, with zero, one or several PEFT adapters, and
// generate answers with a KV cache (prefill, then batched decode), streaming tokens through a sink.
// Decisions a reader must know:
//  - The base weights are loaded once; each request names its adapter ("" = the base model: no LoRA runs at
//    all). Requests of one generate() call run together: those with the same adapter are one decode batch,
//    and the batches of different adapters take turns token by token (the studio's compare panes).
//  - Prompts: chat messages are rendered with the model's chat template (chatml when it has none) with the
//    generation prompt, as transformers' apply_chat_template(add_generation_prompt=True) does; raw text is
//    encoded with the tokenizer's special tokens (BOS), as transformers' tokenizer(text) does.
//  - Stops: the tokenizer's EOS, config.json's and generation_config.json's eos_token_id, and the template's
//    end-of-turn token (the special token the template writes after an assistant message: <|im_end|>,
//    <|eot_id|>, <end_of_turn>, <|end|>). The stop token is not part of the answer.
//  - Sampling follows transformers' logits processors (kernels/cpu/sampling.h) and is deterministic for a seed.
//  - Each request runs in a sequence slot (request i in slot i unless it names one). A slot remembers its
//    tokens: a request whose prompt extends what the slot holds (the next turn of a conversation, with the
//    same adapter) prefills only the new tokens. The answer is the same up to float rounding (a shorter
//    prefill runs its GEMMs on fewer rows, which may round differently): a near-tie may flip under greedy.
//  - Threads: one thread uses a session at a time; cancel may be set from any thread (checked between
//    prefill chunks and decode steps); the sink runs on the generating thread.
//  - Device: Cuda (bf16, infer/cuda_infer.h), Cpu (fp32, the reference) or Auto: CUDA when the backend can run
//    here (cuda_backend_available), else the CPU.
#pragma once

#include <atomic>
#include <cstdint>
#include <filesystem>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace tandem {

class Tokenizer;

struct SamplingOptions {
    double temperature = 0.0;         // 0: greedy (argmax, lowest id on ties)
    int top_k = 0;                    // 0: off
    double top_p = 1.0;               // 1: off
    double min_p = 0.0;               // 0: off
    double repetition_penalty = 1.0;  // 1: off (transformers' RepetitionPenaltyLogitsProcessor)
    uint64_t seed = 0;
    bool operator==(const SamplingOptions&) const = default;
};

// What generation_config.json says (do_sample false or absent: greedy; temperature, top_k, top_p, min_p,
// repetition_penalty when sampling), or the defaults above when the file is absent. Never throws for a bad
// file: the defaults come back with `note` saying why.
struct GenerationDefaults {
    SamplingOptions sampling;
    int max_new_tokens = 256;
    std::string note;
};
GenerationDefaults load_generation_defaults(const std::filesystem::path& model_dir);

struct ChatMessage {
    std::string role;  // "system", "user", "assistant"
    std::string content;
};

struct AdapterSource {
    std::string name;  // how requests name it
    std::filesystem::path dir;  // a PEFT adapter folder (adapter_config.json + adapter_model.safetensors)
};

struct ChatSessionOptions {
    enum class Device { Auto, Cpu, Cuda };
    std::filesystem::path model_dir;
    std::vector<AdapterSource> adapters;
    Device device = Device::Auto;
    int max_sequences = 2;       // sequences held at once (KV-cache slots)
    int max_context = 0;         // tokens per sequence, prompt included; 0: min(max_position_embeddings, 4096)
    // Prompt tokens per forward pass. A prompt that fits one chunk prefills with one pass of the training
    // attention (flash, causal); longer ones continue chunk by chunk against the cache. 2048 rows: a 2.1k-token
    // prompt's first token on Llama-3.1-8B in a fraction of what 256-row chunks took (docs/benchmarks.md); the
    // activation arena grows with it (about 0.3 GiB on 8B).
    int prefill_chunk = 2048;
    bool quantize_4bit = false;  // hold the base as NF4 (a bnb-4bit checkpoint is 4-bit anyway)
};

struct GenerationRequest {
    std::string adapter;                // "" : the base model
    std::vector<ChatMessage> messages;  // rendered with the chat template and the generation prompt
    std::string prompt;                 // when messages is empty: raw text (empty: start from BOS)
    std::vector<int32_t> prompt_ids;    // when not empty: these ids, used as they are
    SamplingOptions sampling;
    int max_new_tokens = 256;           // capped by the context left
    int slot = -1;                      // -1: the request's index
    bool stop_at_eos = true;            // false: only max_new_tokens / the context end stop it
};

enum class StopReason { Eos, MaxTokens, ContextFull, Cancelled };
const char* stop_reason_name(StopReason r);

struct GenerationResult {
    std::vector<int32_t> ids;  // the new tokens, without the stop token
    std::string text;          // ids decoded, special tokens skipped (empty without a tokenizer)
    StopReason stop = StopReason::MaxTokens;
    int32_t stop_id = -1;      // the stop token (StopReason::Eos)
    int prompt_tokens = 0;
    int reused_tokens = 0;     // prompt tokens found in the slot's cache and not prefilled again
    double first_token_seconds = 0;  // from the call's start to this request's first token
    double total_seconds = 0;        // from the call's start to its last token
    // Decode rate: tokens after the first over the time after the first (0 with fewer than 2 tokens).
    double tokens_per_second() const;
};

// Receives tokens as they are chosen (on the generating thread). `text` is the new printable text, which
// may be empty while a multi-byte character is incomplete; the pieces of a request add up to its text.
class GenerationSink {
public:
    virtual ~GenerationSink() = default;
    virtual void on_token(int request, int32_t id, std::string_view text) = 0;
    virtual void on_finished(int /*request*/, const GenerationResult& /*result*/) {}
};

struct ChatMemory {
    uint64_t weights = 0, adapters = 0, kv_cache = 0, activations = 0, workspace = 0;
    uint64_t total() const { return weights + adapters + kv_cache + activations + workspace; }
};

class ChatSession {
public:
    // Loads the model (and the adapters) on the device. Error{InvalidInput|Unsupported|Io} naming the folder
    // or the adapter file; Error{Unsupported} for Device::Cuda (not built yet).
    static ChatSession open(const ChatSessionOptions& options);

    ChatSession(ChatSession&&) noexcept;
    ChatSession& operator=(ChatSession&&) noexcept;
    ~ChatSession();

    // Adds (or replaces) an adapter without reloading the base. Error{InvalidInput|Unsupported} naming the
    // adapter's folder or file: an adapter of another base (wrong shapes) fails here, and the session keeps
    // working without it.
    void add_adapter(const AdapterSource& adapter);
    void remove_adapter(const std::string& name);
    std::vector<std::string> adapters() const;

    // Runs the requests together (see the header comment); returns one result per request. A request that
    // is wrong (unknown adapter, empty prompt without a BOS, a prompt longer than the context) throws
    // Error{InvalidInput} before anything runs. After a cancel the results hold what was generated.
    std::vector<GenerationResult> generate(const std::vector<GenerationRequest>& requests,
                                           GenerationSink* sink = nullptr,
                                           const std::atomic<bool>* cancel = nullptr);
    GenerationResult generate(const GenerationRequest& request, GenerationSink* sink = nullptr,
                              const std::atomic<bool>* cancel = nullptr);

    // The prompt ids a request runs (template rendered, tokenized).
    std::vector<int32_t> prompt_ids(const GenerationRequest& request) const;
    // The chat template's rendering of messages with the generation prompt.
    std::string render(const std::vector<ChatMessage>& messages) const;

    // Forgets what the slots hold (the next request prefills its whole prompt).
    void reset();

    const std::vector<int32_t>& stop_ids() const;
    const Tokenizer* tokenizer() const;  // nullptr for a model folder without tokenizer.json
    const GenerationDefaults& defaults() const;
    ChatMemory memory() const;
    int max_context() const;
    int max_sequences() const;
    const std::filesystem::path& model_dir() const;
    std::string device_name() const;

    struct Impl;

private:
    explicit ChatSession(std::unique_ptr<Impl> impl);
    std::unique_ptr<Impl> impl_;
};

}  // namespace tandem
