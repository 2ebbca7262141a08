// SPDX-FileCopyrightText: 2026 The Tandem developers
// SPDX-License-Identifier: GPL-3.0-or-later
// A small driver over llama.cpp's public C API (llama.h) for gguf_llamacpp_check.py; built against a llama.cpp
// source tree outside the repository by gguf_llamacpp_check.sh. It is ours: it only calls llama.cpp.
//   gguf_llamacpp_logits logits MODEL.gguf IDS_FILE OUT.f32 [LORA.gguf]
//       IDS_FILE: token ids separated by spaces. Writes float32 logits [n_ids, n_vocab] (every position), with
//       the LoRA adapter applied at scale 1 when given. KV cache in F32, flash attention off, so only the
//       weights' types differ between runs.
//   gguf_llamacpp_logits tokenize MODEL.gguf TEXT_FILE ADD_SPECIAL(0|1)
//       Prints the ids llama.cpp's tokenizer gives for the file's text (special tokens parsed), space-separated.
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <iterator>
#include <sstream>
#include <string>
#include <vector>

#include "llama.h"

namespace {

[[noreturn]] void die(const std::string& m) {
    std::fprintf(stderr, "gguf_llamacpp_logits: %s\n", m.c_str());
    std::exit(1);
}

std::string slurp(const char* path) {
    std::ifstream in(path, std::ios::binary);
    if (!in) die(std::string("cannot read ") + path);
    return std::string(std::istreambuf_iterator<char>(in), {});
}

llama_model* load(const char* path) {
    llama_model_params mp = llama_model_default_params();
    mp.n_gpu_layers = 0;
    llama_model* m = llama_model_load_from_file(path, mp);
    if (!m) die(std::string("llama.cpp cannot load ") + path);
    return m;
}

}  // namespace

int main(int argc, char** argv) {
    if (argc < 5) die("usage: logits MODEL IDS OUT [LORA] | tokenize MODEL TEXT ADD_SPECIAL");
    const std::string mode = argv[1];
    llama_backend_init();
    llama_model* model = load(argv[2]);
    const llama_vocab* vocab = llama_model_get_vocab(model);
    if (mode == "tokenize") {
        const std::string text = slurp(argv[3]);
        const bool add_special = std::string(argv[4]) == "1";
        std::vector<llama_token> ids(text.size() + 16);
        int n = llama_tokenize(vocab, text.data(), int32_t(text.size()), ids.data(), int32_t(ids.size()), add_special, true);
        if (n < 0) die("tokenize: buffer too small");
        for (int i = 0; i < n; ++i) std::printf(i ? " %d" : "%d", ids[size_t(i)]);
        std::printf("\n");
        llama_model_free(model);
        return 0;
    }
    if (mode != "logits") die("unknown mode " + mode);
    std::vector<llama_token> ids;
    {
        std::istringstream s(slurp(argv[3]));
        int v;
        while (s >> v) ids.push_back(v);
    }
    if (ids.empty()) die("no ids");
    llama_context_params cp = llama_context_default_params();
    cp.n_ctx = uint32_t(ids.size() + 8);
    cp.n_batch = uint32_t(ids.size());
    cp.n_ubatch = uint32_t(ids.size());
    cp.n_threads = 8;
    cp.n_threads_batch = 8;
    cp.type_k = GGML_TYPE_F32;
    cp.type_v = GGML_TYPE_F32;
    cp.flash_attn_type = LLAMA_FLASH_ATTN_TYPE_DISABLED;
    llama_context* ctx = llama_init_from_model(model, cp);
    if (!ctx) die("cannot create a context");
    llama_adapter_lora* lora = nullptr;
    if (argc > 5) {
        lora = llama_adapter_lora_init(model, argv[5]);
        if (!lora) die(std::string("llama.cpp cannot load the LoRA adapter ") + argv[5]);
        float scale = 1.0f;
        if (llama_set_adapters_lora(ctx, &lora, 1, &scale) != 0) die("cannot apply the LoRA adapter");
    }
    llama_batch batch = llama_batch_init(int32_t(ids.size()), 0, 1);
    for (size_t i = 0; i < ids.size(); ++i) {
        batch.token[i] = ids[i];
        batch.pos[i] = llama_pos(i);
        batch.n_seq_id[i] = 1;
        batch.seq_id[i][0] = 0;
        batch.logits[i] = 1;
    }
    batch.n_tokens = int32_t(ids.size());
    if (llama_decode(ctx, batch) != 0) die("llama_decode failed");
    const int nv = llama_vocab_n_tokens(vocab);
    std::FILE* f = std::fopen(argv[4], "wb");
    if (!f) die(std::string("cannot write ") + argv[4]);
    for (size_t i = 0; i < ids.size(); ++i) std::fwrite(llama_get_logits_ith(ctx, int32_t(i)), 4, size_t(nv), f);
    std::fclose(f);
    llama_batch_free(batch);
    if (lora) llama_adapter_lora_free(lora);
    llama_free(ctx);
    llama_model_free(model);
    return 0;
}
