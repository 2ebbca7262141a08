// SPDX-FileCopyrightText: 2026 The Tandem developers
// SPDX-License-Identifier: GPL-3.0-or-later
// `tandem-cli data --model DIR --dataset FILE [--format F] [--column KEY=COLUMN]... [--max-seq-len N] [--pack TOKENS] [--limit N] [--json]`
// Reads a dataset the way training will (format detection, invalid records with file:line, chat template,
// loss masks, truncation, packing) and reports what it found; with --json also the first N rendered samples
// with their ids, labels and text.
#include <iostream>
#include <memory>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "commands.h"
#include "tandem/data.h"
#include "tandem/error.h"
#include "tandem/tokenizer.h"

namespace tandem::cli {

Run add_data_command(CLI::App& app) {
    struct Opts {
        std::string model, dataset, validation_file, format = "auto", packing = "on", chat_template = "auto";
        int32_t max_seq_len = 2048;
        int32_t pack = 8192;
        int32_t rows = 0;
        int64_t limit = 3;
        double validation_fraction = 0.0;
        double max_invalid = 0.10;
        uint64_t seed = 0;
        bool json = false;
        bool train_on_all = false;
        std::vector<std::string> columns;
    };
    auto o = std::make_shared<Opts>();
    auto* sub = app.add_subcommand("data", "Check a dataset against a model: format, invalid records, tokens, packing");
    sub->add_option("--model", o->model, "model folder (or tokenizer.json) whose tokenizer and chat template to use")->required();
    sub->add_option("--dataset", o->dataset, "dataset file: .json, .jsonl, .txt, .csv, .tsv or .parquet")->required();
    sub->add_option("--format", o->format, "auto|alpaca|chat|sharegpt|completion|text")->capture_default_str();
    sub->add_option("--column", o->columns,
                    "KEY=COLUMN: read the file's COLUMN as the dataset key KEY (repeatable), e.g. instruction=question");
    sub->add_option("--max-seq-len", o->max_seq_len, "longer samples are truncated (0: no limit)")->capture_default_str();
    sub->add_option("--pack", o->pack, "tokens per micro-batch")->capture_default_str();
    sub->add_option("--packing", o->packing, "on: pack samples; off: one sample per padded row")->capture_default_str();
    sub->add_option("--rows", o->rows, "rows per micro-batch when --packing off (0: budget / longest sample)");
    sub->add_option("--limit", o->limit, "with --json: how many rendered samples to include")->capture_default_str();
    sub->add_option("--template", o->chat_template, "auto (the model's) or a built-in: chatml, alpaca, llama3")->capture_default_str();
    sub->add_flag("--train-on-all-tokens", o->train_on_all, "train on prompts too, not only on replies");
    sub->add_option("--validation-fraction", o->validation_fraction, "share of records held out for validation");
    sub->add_option("--validation-file", o->validation_file, "a separate validation dataset");
    sub->add_option("--max-invalid", o->max_invalid, "fail when more than this share of records is invalid")->capture_default_str();
    sub->add_option("--seed", o->seed, "shuffle and split seed")->capture_default_str();
    sub->add_flag("--json", o->json, "print JSON");
    return [o]() {
        DataOptions opt;
        opt.path = o->dataset;
        const auto fmt = parse_dataset_format(o->format == "completion" ? "prompt_completion" : o->format);
        if (!fmt) throw_invalid("--format " + o->format + ": expected auto, alpaca, chat, sharegpt, completion or text");
        if (o->pack <= 0) throw_invalid("--pack " + std::to_string(o->pack) + ": the token budget must be positive");
        if (o->max_seq_len < 0) throw_invalid("--max-seq-len must be 0 (no limit) or positive");
        if (o->packing != "on" && o->packing != "off") throw_invalid("--packing " + o->packing + ": expected on or off");
        if (o->validation_fraction < 0 || o->validation_fraction >= 1)
            throw_invalid("--validation-fraction must be in [0, 1)");
        if (o->max_invalid < 0 || o->max_invalid > 1) throw_invalid("--max-invalid must be in [0, 1]");
        opt.read.format = *fmt;
        for (const auto& spec : o->columns) opt.read.columns.insert(parse_column_mapping(spec));
        opt.read.max_invalid_fraction = o->max_invalid;
        opt.render.max_seq_len = o->max_seq_len;
        opt.render.chat_template = o->chat_template;
        opt.render.train_on_all_tokens = o->train_on_all;
        opt.pack.token_budget = o->pack;
        opt.pack.packing = o->packing == "on";
        opt.pack.rows = o->rows;
        opt.pack.seed = o->seed;
        opt.seed = o->seed;
        opt.validation_fraction = o->validation_fraction;
        opt.validation_path = o->validation_file;

        const Tokenizer tok = Tokenizer::load(o->model);
        if (auto pad = tok.pad_id()) opt.pack.pad_id = *pad;
        const PreparedData data = prepare_data(opt, tok);
        if (!o->json) {
            std::cout << to_text(data.summary);
            return 0;
        }
        nlohmann::json j = to_json(data.summary);
        nlohmann::json rendered = nlohmann::json::array();
        const auto& t = data.train_tokens;
        for (size_t i = 0; i < t.size() && static_cast<int64_t>(i) < o->limit; ++i) {
            const auto ids = t.sample_tokens(i);
            const auto labels = t.sample_labels(i);
            std::vector<int32_t> trained;
            for (size_t k = 0; k < labels.size(); ++k)
                if (labels[k] != -100) trained.push_back(ids[k]);
            rendered.push_back({{"record", data.train.location(data.train.records[t.record[i]].location)},
                                {"text", tok.decode(ids)},
                                {"trained_text", tok.decode(trained)},
                                {"ids", std::vector<int32_t>(ids.begin(), ids.end())},
                                {"labels", std::vector<int32_t>(labels.begin(), labels.end())}});
        }
        j["rendered"] = std::move(rendered);
        std::cout << j.dump(2, ' ', false, nlohmann::json::error_handler_t::replace) << "\n";
        return 0;
    };
}

}  // namespace tandem::cli
