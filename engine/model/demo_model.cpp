// SPDX-FileCopyrightText: 2026 The Tandem developers
// SPDX-License-Identifier: GPL-3.0-or-later
// Built-in demo model (see tandem/demo_model.h). Weights come from a SplitMix64 stream + Box-Muller, not
// <random> distributions, so the files are identical on every platform and standard library.
#include "tandem/demo_model.h"

#include <cmath>
#include <cstring>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "core/random.h"
#include "io/atomic_file.h"
#include "tandem/chat_template.h"
#include "tandem/error.h"
#include "tandem/model_config.h"
#include "tandem/safetensors.h"

namespace tandem {
namespace {

// Deterministic normal samples: SplitMix64 -> two uniforms -> Box-Muller.
class NormalStream {
public:
    explicit NormalStream(uint64_t seed) : rng_(seed) {}
    float next() {
        if (have_spare_) { have_spare_ = false; return spare_; }
        const double u1 = 1.0 - rng_.next_double();  // (0, 1]
        const double u2 = rng_.next_double();        // [0, 1)
        const double r = std::sqrt(-2.0 * std::log(u1));
        spare_ = static_cast<float>(r * std::sin(2.0 * M_PI * u2));
        have_spare_ = true;
        return static_cast<float>(r * std::cos(2.0 * M_PI * u2));
    }

private:
    SplitMix64 rng_;
    float spare_ = 0.0f;
    bool have_spare_ = false;
};

constexpr const char* kMeta = "\xE2\x96\x81";  // U+2581 "▁", SentencePiece's word-boundary marker

// Character-level SentencePiece-style BPE: <unk> <s> </s>, the 256 byte-fallback tokens, "▁", printable
// ASCII, then ChatML's two special tokens. No merges: every character is its own token.
nlohmann::ordered_json demo_tokenizer_json(int32_t& vocab_used, int32_t& im_end_id) {
    using J = nlohmann::ordered_json;
    J vocab = J::object();
    int32_t id = 0;
    for (const char* t : {"<unk>", "<s>", "</s>"}) vocab[t] = id++;
    for (int b = 0; b < 256; ++b) {
        char buf[8];
        std::snprintf(buf, sizeof buf, "<0x%02X>", b);
        vocab[buf] = id++;
    }
    vocab[kMeta] = id++;
    for (int c = 33; c < 127; ++c) vocab[std::string(1, static_cast<char>(c))] = id++;
    const int32_t im_start_id = id++;
    im_end_id = id++;
    vocab_used = id;

    auto added = [](int32_t i, const char* content) {
        return J{{"id", i}, {"content", content}, {"single_word", false}, {"lstrip", false},
                 {"rstrip", false}, {"normalized", false}, {"special", true}};
    };
    J model = {{"type", "BPE"}, {"dropout", nullptr}, {"unk_token", "<unk>"},
               {"continuing_subword_prefix", nullptr}, {"end_of_word_suffix", nullptr}, {"fuse_unk", true},
               {"byte_fallback", true}, {"ignore_merges", false}, {"vocab", vocab}, {"merges", J::array()}};
    model["vocab"]["<|im_start|>"] = im_start_id;
    model["vocab"]["<|im_end|>"] = im_end_id;
    return J{
        {"version", "1.0"},
        {"truncation", nullptr},
        {"padding", nullptr},
        {"added_tokens", J::array({added(0, "<unk>"), added(1, "<s>"), added(2, "</s>"),
                                   added(im_start_id, "<|im_start|>"), added(im_end_id, "<|im_end|>")})},
        {"normalizer", {{"type", "Sequence"}, {"normalizers", J::array({
             J{{"type", "Prepend"}, {"prepend", kMeta}},
             J{{"type", "Replace"}, {"pattern", {{"String", " "}}}, {"content", kMeta}}})}}},
        {"pre_tokenizer", nullptr},
        {"post_processor", {{"type", "TemplateProcessing"},
             {"single", J::array({J{{"SpecialToken", {{"id", "<s>"}, {"type_id", 0}}}},
                                  J{{"Sequence", {{"id", "A"}, {"type_id", 0}}}}})},
             {"pair", J::array({J{{"SpecialToken", {{"id", "<s>"}, {"type_id", 0}}}},
                                J{{"Sequence", {{"id", "A"}, {"type_id", 0}}}},
                                J{{"SpecialToken", {{"id", "<s>"}, {"type_id", 1}}}},
                                J{{"Sequence", {{"id", "B"}, {"type_id", 1}}}}})},
             {"special_tokens", {{"<s>", {{"id", "<s>"}, {"ids", J::array({1})}, {"tokens", J::array({"<s>"})}}}}}}},
        {"decoder", {{"type", "Sequence"}, {"decoders", J::array({
             J{{"type", "Replace"}, {"pattern", {{"String", kMeta}}}, {"content", " "}},
             J{{"type", "ByteFallback"}}, J{{"type", "Fuse"}},
             J{{"type", "Strip"}, {"content", " "}, {"start", 1}, {"stop", 0}}})}}},
        {"model", model},
    };
}

}  // namespace

void create_demo_model(const std::filesystem::path& dir, const DemoModelSpec& spec) {
    std::error_code ec;
    std::filesystem::create_directories(dir, ec);
    if (ec) throw_io(dir.string() + ": cannot create the folder: " + ec.message());

    int32_t vocab_used = 0, im_end_id = 0;
    const auto tokenizer = demo_tokenizer_json(vocab_used, im_end_id);
    const int64_t vocab = spec.vocab_size ? spec.vocab_size : (vocab_used + 63) / 64 * 64;  // padded like real models
    if (vocab < vocab_used)
        throw_invalid("demo model: vocab_size " + std::to_string(vocab) + " is smaller than the demo tokenizer's " +
                      std::to_string(vocab_used) + " ids");
    const int64_t head_dim = spec.hidden_size / spec.num_attention_heads;

    nlohmann::ordered_json config = {
        {"architectures", {"LlamaForCausalLM"}},
        {"model_type", "llama"},
        {"tandem_demo", "Tandem built-in demo model: random weights from seed " + std::to_string(spec.seed) +
                            ", not trained"},
        {"hidden_size", spec.hidden_size},
        {"intermediate_size", spec.intermediate_size},
        {"num_hidden_layers", spec.num_hidden_layers},
        {"num_attention_heads", spec.num_attention_heads},
        {"num_key_value_heads", spec.num_key_value_heads},
        {"head_dim", head_dim},
        {"hidden_act", "silu"},
        {"vocab_size", vocab},
        {"max_position_embeddings", spec.max_position_embeddings},
        {"rms_norm_eps", 1e-5},
        {"rope_theta", 10000.0},
        {"rope_scaling", nullptr},
        {"tie_word_embeddings", true},
        {"attention_bias", false},
        {"mlp_bias", false},
        {"bos_token_id", 1},
        {"eos_token_id", {2, im_end_id}},
        {"torch_dtype", "bfloat16"},
    };
    // Validates the spec with the same rules as any config.json, and names the tensors it implies.
    const ModelConfig parsed = parse_model_config(nlohmann::json::parse(config.dump()), "demo model spec");

    NormalStream rng(spec.seed);
    std::vector<std::vector<uint16_t>> storage;
    std::vector<TensorToWrite> tensors;
    for (const auto& t : expected_tensors(parsed)) {
        int64_t n = 1;
        for (auto d : t.shape) n *= d;
        std::vector<uint16_t> values(static_cast<size_t>(n));
        const bool is_norm = t.name.find("norm") != std::string::npos;
        for (auto& v : values) v = f32_to_bf16(is_norm ? 1.0f : 0.02f * rng.next());
        storage.push_back(std::move(values));
        const auto& s = storage.back();
        tensors.push_back({t.name, DType::BF16, t.shape,
                           std::as_bytes(std::span<const uint16_t>(s.data(), s.size()))});
    }

    nlohmann::ordered_json tok_config = {
        {"tokenizer_class", "PreTrainedTokenizerFast"},
        {"bos_token", "<s>"},
        {"eos_token", "<|im_end|>"},
        {"pad_token", "</s>"},
        {"unk_token", "<unk>"},
        {"add_bos_token", false},
        {"add_eos_token", false},
        {"model_max_length", spec.max_position_embeddings},
        {"chat_template", ChatTemplate::builtin("chatml").source()},
    };

    write_safetensors(dir / "model.safetensors", tensors, {{"format", "pt"}, {"tandem_demo", "true"}});
    write_file_atomic(dir / "config.json", config.dump(2) + "\n");
    write_file_atomic(dir / "tokenizer.json", tokenizer.dump(2) + "\n");
    write_file_atomic(dir / "tokenizer_config.json", tok_config.dump(2) + "\n");
}

}  // namespace tandem
