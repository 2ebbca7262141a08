// SPDX-FileCopyrightText: 2026 The Tandem developers
// SPDX-License-Identifier: GPL-3.0-or-later
// bench_tokenizer: encode throughput of tandem::Tokenizer on real files, single thread.
//   bench_tokenizer TOKENIZER_JSON FILE...
// Same inputs and MB/s definition as bench/hf_tokenizers_baseline.py (the HF `tokenizers` baseline):
// .json files that are arrays of alpaca records are encoded field by field (instruction, input, output);
// other files line by line, each line with its '\n'. Text files are also timed in ~1 MB chunks cut at
// newlines (long inputs: fewer calls, same pre-tokens). Each measurement repeats the whole file until at
// least 2 s have passed. MB/s = UTF-8 bytes encoded / wall seconds (1 MB = 1e6 bytes); add_special_tokens=false.
// "cpu" repeats the figure over this thread's CPU time, which is steadier on a shared, busy machine.
#include <chrono>
#include <ctime>
#include <cstdio>
#include <exception>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "core/files.h"
#include "tandem/error.h"
#include "tandem/tokenizer.h"

namespace {

using Clock = std::chrono::steady_clock;

std::vector<std::string> alpaca_items(const std::string& path) {
    nlohmann::json recs = tandem::read_json_file(path);
    std::vector<std::string> items;
    if (!recs.is_array()) tandem::throw_invalid(path + ": expected a JSON array of alpaca records");
    for (const auto& r : recs)
        for (const char* key : {"instruction", "input", "output"})
            if (r.contains(key) && r[key].is_string() && !r[key].get<std::string>().empty())
                items.push_back(r[key].get<std::string>());
    return items;
}

std::vector<std::string> line_items(const std::string& text) {
    std::vector<std::string> items;
    size_t start = 0;
    while (start < text.size()) {
        size_t nl = text.find('\n', start);
        size_t end = nl == std::string::npos ? text.size() : nl + 1;
        items.push_back(text.substr(start, end - start));
        start = end;
    }
    return items;
}

std::vector<std::string> chunk_items(const std::string& text, size_t target = 1000000) {
    std::vector<std::string> items;
    size_t start = 0;
    while (start < text.size()) {
        size_t end = std::min(text.size(), start + target);
        if (end < text.size()) {
            size_t nl = text.find('\n', end);
            end = nl == std::string::npos ? text.size() : nl + 1;
        }
        items.push_back(text.substr(start, end - start));
        start = end;
    }
    return items;
}

void run(const tandem::Tokenizer& tok, const std::string& label, const std::vector<std::string>& items) {
    size_t bytes = 0, tokens = 0;
    for (const auto& s : items) {
        bytes += s.size();
        tokens += tok.encode(s).size();  // also warms the word cache, as HF's first pass does
    }
    size_t reps = 0, sink = 0;
    timespec c0{}, c1{};
    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &c0);
    auto t0 = Clock::now();
    double dt = 0;
    do {
        for (const auto& s : items) sink += tok.encode(s).size();
        ++reps;
        dt = std::chrono::duration<double>(Clock::now() - t0).count();
    } while (dt < 2.0);
    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &c1);
    double cpu = double(c1.tv_sec - c0.tv_sec) + 1e-9 * double(c1.tv_nsec - c0.tv_nsec);
    if (sink != tokens * reps) std::printf("warning: token count changed between passes\n");
    std::printf("tandem %-44s %7.2f MB/s %6.3f Mtok/s (cpu: %7.2f MB/s)  %zu items, %zu bytes, %zu tokens, %zu reps\n",
                label.c_str(), double(bytes) * double(reps) / dt / 1e6, double(tokens) * double(reps) / dt / 1e6,
                double(bytes) * double(reps) / cpu / 1e6, items.size(), bytes, tokens, reps);
}

std::string base_name(const std::string& p) {
    size_t slash = p.find_last_of('/');
    return slash == std::string::npos ? p : p.substr(slash + 1);
}

}  // namespace

int main(int argc, char** argv) {
    if (argc < 3) {
        std::fprintf(stderr, "usage: %s TOKENIZER_JSON FILE...\n", argv[0]);
        return 2;
    }
    try {
        auto t0 = Clock::now();
        tandem::Tokenizer tok = tandem::Tokenizer::load(argv[1]);
        double load_s = std::chrono::duration<double>(Clock::now() - t0).count();
        std::printf("loaded %s (%s, %d ids) in %.2f s\n", argv[1], tok.kind().c_str(), tok.vocab_size(), load_s);
        std::string tok_name = base_name(std::string(argv[1]).substr(0, std::string(argv[1]).find_last_of('/')));
        for (int i = 2; i < argc; ++i) {
            std::string path = argv[i];
            std::string label = tok_name + " " + base_name(path);
            if (path.size() > 5 && path.compare(path.size() - 5, 5, ".json") == 0) {
                run(tok, label + " (fields)", alpaca_items(path));
            } else {
                std::string text = tandem::read_file(path);
                run(tok, label + " (lines)", line_items(text));
                run(tok, label + " (1 MB chunks)", chunk_items(text));
            }
        }
    } catch (const std::exception& e) {
        std::fprintf(stderr, "bench_tokenizer: %s\n", e.what());
        return 1;
    }
    return 0;
}
