// SPDX-FileCopyrightText: 2026 The Tandem developers
// SPDX-License-Identifier: GPL-3.0-or-later
// tandem::Tokenizer: loading tokenizer.json (+ tokenizer_config.json) and the public encode/decode API.
// Only BPE models are supported; any other model or component type is refused with Error{Unsupported}
// naming the file, never approximated, because a silently different tokenization would corrupt training.
#include "tandem/tokenizer.h"

#include <algorithm>

#include "core/files.h"
#include "core/utf8.h"
#include "tandem/error.h"
#include "tokenizer/tokenizer_impl.h"

namespace tandem {

namespace tok {

namespace {

std::string model_type(const Json& model, const Source& src) {
    if (!model.is_object()) throw_bad_field(src, "model", "expected a JSON object");
    if (const Json* t = find(model, "type")) {
        if (!t->is_string()) throw_bad_field(src, "model", "\"type\" must be a string");
        return t->get<std::string>();
    }
    // Old files leave the type out; HF then recognises the model by its fields.
    if (find(model, "merges")) return "BPE";
    if (find(model, "continuing_subword_prefix") || find(model, "max_input_chars_per_word")) return "WordPiece";
    if (find(model, "unk_id")) return "Unigram";
    return "WordLevel";
}

// "▁" in a component's JSON marks SentencePiece-style handling of spaces.
bool mentions_metaspace(const Json* j) {
    if (!j || j->is_null()) return false;
    std::string dump = j->dump(-1, ' ', false, Json::error_handler_t::replace);
    return dump.find("\xE2\x96\x81") != std::string::npos || dump.find("Metaspace") != std::string::npos;
}

}  // namespace

std::unique_ptr<Tokenizer::Impl> build_tokenizer(const Json& root, const std::filesystem::path& path) {
    Source src{path};
    if (!root.is_object()) throw_bad_field(src, "top level", "expected a JSON object");
    auto impl = std::make_unique<Tokenizer::Impl>();
    impl->path = path;
    try {
        const Json& model = require(root, "model", src, "top level");
        std::string type = model_type(model, src);
        if (type != "BPE") {
            throw_unsupported(path.string() + ": the tokenizer model type is \"" + type +
                              "\"; Tandem supports BPE models only (Llama, Mistral, Qwen, GPT-2 style). "
                              "WordPiece, Unigram and WordLevel tokenizers cannot be used for training here.");
        }
        impl->model = BpeModel::from_json(model, src);

        if (const Json* n = find(root, "normalizer"); n && !n->is_null())
            impl->normalizer = make_normalizer(*n, src, "normalizer");
        if (const Json* p = find(root, "pre_tokenizer"); p && !p->is_null()) {
            impl->pre_tokenizer = make_pre_tokenizer(*p, src, "pre_tokenizer");
            impl->byte_level = impl->pre_tokenizer->is_byte_level();
        }
        if (const Json* p = find(root, "post_processor"); p && !p->is_null())
            impl->post_processor = make_post_processor(*p, src, "post_processor");
        if (const Json* d = find(root, "decoder"); d && !d->is_null()) impl->decoder = make_decoder(*d, src, "decoder");

        const BpeModel& bpe = *impl->model;
        const Json* added = find(root, "added_tokens");
        if (added) impl->added.load(*added, src, [&](std::string_view s) { return bpe.token_to_id(s); });
        impl->added.build(impl->normalizer.get());
        impl->vocab_size = std::max(bpe.max_id(), impl->added.max_id()) + 1;
        // The ids the post-processor adds (what it makes of an empty text) must exist too: encode never
        // returns an id the embedding table of a model with this vocabulary does not have.
        if (impl->post_processor) {
            std::vector<int32_t> special;
            impl->post_processor->process(special);
            for (int32_t id : special)
                if (id >= impl->vocab_size)
                    throw_bad_field(src, "post_processor",
                                    "adds token id " + std::to_string(id) + ", which is neither in the vocabulary nor an "
                                    "added token (ids 0.." + std::to_string(impl->vocab_size - 1) + ")");
        }

        impl->sentencepiece_style =
            !impl->byte_level &&
            (bpe.byte_fallback() || mentions_metaspace(find(root, "normalizer")) ||
             mentions_metaspace(find(root, "pre_tokenizer")) || mentions_metaspace(find(root, "decoder")));
    } catch (const nlohmann::json::exception& e) {
        throw_invalid(path.string() + ": malformed tokenizer.json: " + e.what());
    }
    return impl;
}

}  // namespace tok

Tokenizer Tokenizer::load(const std::filesystem::path& path) {
    namespace fs = std::filesystem;
    fs::path file = path;
    auto refuse_sentencepiece = [](const fs::path& model_file) {
        fs::path folder = model_file.parent_path();
        throw_unsupported(model_file.string() +
                          ": this is a SentencePiece model file; Tandem reads Hugging Face tokenizer.json. "
                          "Create one once with Python: `from transformers import AutoTokenizer; "
                          "AutoTokenizer.from_pretrained(\"" +
                          folder.string() + "\").save_pretrained(\"" + folder.string() +
                          "\")` (needs the `transformers`, `sentencepiece` and `tokenizers` "
                          "packages), then load the folder again.");
    };
    std::error_code ec;
    if (fs::is_directory(path, ec)) {
        file = path / "tokenizer.json";
        if (!fs::exists(file, ec)) {
            if (fs::exists(path / "tokenizer.model", ec)) refuse_sentencepiece(path / "tokenizer.model");
            throw_io(path.string() +
                     ": no tokenizer.json in this folder (a model folder from the Hugging Face "
                     "Hub has one next to config.json)");
        }
    } else if (path.extension() == ".model") {
        refuse_sentencepiece(path);
    }
    tok::Json root = read_json_file(file);
    std::unique_ptr<Impl> impl = tok::build_tokenizer(root, file);
    root = tok::Json();  // free the parsed JSON before reading the config
    fs::path config = file.parent_path() / "tokenizer_config.json";
    if (fs::is_regular_file(config, ec)) impl->config = tok::read_tokenizer_config(config);
    return Tokenizer(std::move(impl));
}

Tokenizer::Tokenizer(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
Tokenizer::Tokenizer(Tokenizer&&) noexcept = default;
Tokenizer& Tokenizer::operator=(Tokenizer&&) noexcept = default;
Tokenizer::~Tokenizer() = default;

std::vector<int32_t> Tokenizer::encode(std::string_view text, bool add_special_tokens) const {
    size_t bad = 0;
    if (!utf8::is_valid(text, &bad))
        throw_invalid("tokenizer: the text to encode is not valid UTF-8 (first bad byte at offset " +
                      std::to_string(bad) + ")");
    const Impl& m = *impl_;
    tok::Pieces pieces;
    m.added.split_raw(text, pieces);
    m.added.normalize_and_split(pieces, m.normalizer.get());
    if (m.pre_tokenizer) m.pre_tokenizer->pre_tokenize(pieces);
    std::vector<int32_t> ids;
    ids.reserve(text.size() / 3 + 4);
    for (const tok::Piece& p : pieces) {
        if (p.id >= 0)
            ids.push_back(p.id);
        else
            m.model->tokenize(p.text, ids);
    }
    if (add_special_tokens && m.post_processor) m.post_processor->process(ids);
    return ids;
}

std::string Tokenizer::decode(std::span<const int32_t> ids, bool skip_special_tokens) const {
    const Impl& m = *impl_;
    std::vector<std::string> tokens;
    tokens.reserve(ids.size());
    for (int32_t id : ids) {
        const std::string* s = nullptr;
        if (const tok::AddedToken* a = m.added.by_id(id))
            s = &a->content;
        else
            s = m.model->id_to_token(id);
        if (!s) continue;  // unknown ids are dropped, as HF does
        if (skip_special_tokens && m.added.is_special_content(*s)) continue;
        tokens.push_back(*s);
    }
    if (!m.decoder) {
        std::string out;
        for (size_t i = 0; i < tokens.size(); ++i) {
            if (i) out += ' ';
            out += tokens[i];
        }
        return out;
    }
    m.decoder->decode_chain(tokens);
    std::string out;
    for (const std::string& t : tokens) out += t;
    return out;
}

int32_t Tokenizer::vocab_size() const {
    return impl_->vocab_size;
}

std::optional<int32_t> Tokenizer::token_to_id(std::string_view token) const {
    if (auto id = impl_->added.id_of(token)) return id;
    return impl_->model->token_to_id(token);
}

std::string Tokenizer::id_to_token(int32_t id) const {
    if (const tok::AddedToken* a = impl_->added.by_id(id)) return a->content;
    const std::string* s = impl_->model->id_to_token(id);
    return s ? *s : std::string();
}

bool Tokenizer::is_special(int32_t id) const {
    const tok::AddedToken* a = impl_->added.by_id(id);
    return a && a->special;
}

const TokenizerConfig& Tokenizer::config() const {
    return impl_->config;
}

static std::optional<int32_t> id_of_config_token(const Tokenizer& t, const std::string& token) {
    if (token.empty()) return std::nullopt;
    return t.token_to_id(token);
}

std::optional<int32_t> Tokenizer::bos_id() const {
    return id_of_config_token(*this, impl_->config.bos_token);
}
std::optional<int32_t> Tokenizer::eos_id() const {
    return id_of_config_token(*this, impl_->config.eos_token);
}
std::optional<int32_t> Tokenizer::pad_id() const {
    return id_of_config_token(*this, impl_->config.pad_token);
}

std::string Tokenizer::kind() const {
    if (impl_->byte_level) return "byte-level BPE";
    if (impl_->sentencepiece_style) return "SentencePiece BPE";
    return "BPE";
}

const std::filesystem::path& Tokenizer::path() const {
    return impl_->path;
}

}  // namespace tandem
