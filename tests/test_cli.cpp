// SPDX-FileCopyrightText: 2026 The Tandem developers
// SPDX-License-Identifier: GPL-3.0-or-later
// tandem-cli end to end: every subcommand on real assets, and the bad-input suite through the real binary —
// each bad input must exit with code 2 (invalid input) or 4 (unsupported), name the offending file (or
// stdin line) on stderr, and never die from a signal. `train` on the demo model: the resume hint printed
// after Ctrl-C works as printed, and a diverging run exits 2 saying what to change.
#include <QRegularExpression>
#include <QTemporaryDir>
#include <QtTest>

#include <signal.h>

#include <cstring>
#include <fstream>
#include <functional>
#include <optional>

#include <nlohmann/json.hpp>

#include "core/files.h"
#include "test_support.h"

using namespace tandem::test;
namespace fs = std::filesystem;

namespace {

QString qs(const fs::path& p) { return QString::fromStdString(p.string()); }

// Runs the CLI and checks it failed cleanly with `code`, mentioning `needle` on stderr.
void expect_failure(const QStringList& args, int code, const QString& needle, const QByteArray& input = {}) {
    const CliResult r = run_cli(args, input);
    QVERIFY2(!r.crashed, qPrintable("tandem-cli crashed: " + args.join(' ')));
    QVERIFY2(r.exit_code == code, qPrintable(QString("exit %1 (want %2) for %3; stderr: %4")
                                                 .arg(r.exit_code).arg(code).arg(args.join(' '), QString(r.err))));
    QVERIFY2(QString::fromUtf8(r.err).contains(needle),
             qPrintable("stderr does not mention '" + needle + "': " + QString(r.err)));
}

nlohmann::json parse_lines_json(const QByteArray& out, int line) {
    const auto lines = out.split('\n');
    return nlohmann::json::parse(lines.at(line).toStdString());
}

// Writes a model folder whose config.json is `config` and nothing else.
fs::path config_only_model(const QTemporaryDir& tmp, const std::string& name, const std::string& config) {
    const fs::path dir = fs::path(tmp.path().toStdString()) / name;
    write_file(dir / "config.json", config);
    return dir;
}

// A copy of the demo model whose model.safetensors has its header rewritten by `edit` (and its header length
// field replaced by `length_override` when given).
fs::path corrupt_demo(const fs::path& demo, const fs::path& out, const std::function<void(nlohmann::json&)>& edit,
                      std::optional<uint64_t> length_override = std::nullopt, const std::string& raw_header = {}) {
    fs::create_directories(out);
    for (const char* f : {"config.json", "tokenizer.json", "tokenizer_config.json"})
        fs::copy_file(demo / f, out / f, fs::copy_options::overwrite_existing);
    const std::string bytes = tandem::read_file(demo / "model.safetensors");
    uint64_t n = 0;
    std::memcpy(&n, bytes.data(), 8);
    std::string header = bytes.substr(8, n);
    const std::string data = bytes.substr(8 + n);
    if (raw_header.empty()) {
        auto j = nlohmann::json::parse(header);
        edit(j);
        header = j.dump();
    } else {
        header = raw_header;
    }
    uint64_t len = length_override ? *length_override : header.size();
    std::string file(8, '\0');
    std::memcpy(file.data(), &len, 8);
    write_file(out / "model.safetensors", file + header + data);
    return out;
}

const char* kLlamaConfig = R"({"architectures": ["LlamaForCausalLM"], "model_type": "llama", "hidden_size": 64,
  "intermediate_size": 128, "num_hidden_layers": 2, "num_attention_heads": 4, "num_key_value_heads": 2,
  "vocab_size": 100, "max_position_embeddings": 128, "rms_norm_eps": 1e-5, "rope_theta": 10000.0,
  "tie_word_embeddings": true})";

}  // namespace

class TestCli : public QObject {
    Q_OBJECT

private slots:
    void usage_errors() {
        const CliResult none = run_cli({});
        QVERIFY(!none.crashed);
        QCOMPARE(none.exit_code, 2);
        const CliResult help = run_cli({"--help"});
        QCOMPARE(help.exit_code, 0);
        QVERIFY(help.out.contains("tokenize"));
        const CliResult bad = run_cli({"info"});  // missing MODEL_DIR
        QCOMPARE(bad.exit_code, 2);
        // bench --max-position only extends a preset's context (checked before the GPU is needed).
        expect_failure({"bench", "--config", "llama-3.1-8b", "--max-position", "1000"}, 2, "only extends the context");
        expect_failure({"bench", "--config", "llama-3.1-8b", "--max-position", "-5"}, 2, "--max-position");
        // --host-budget (pinned host memory for smart checkpointing) wants a positive number of GiB.
        expect_failure({"plan", "--model", "no-such-model", "--host-budget", "-2"}, 2, "--host-budget");
    }

    void demo_model_is_deterministic_and_inspectable() {
        QTemporaryDir tmp;
        const fs::path a = fs::path(tmp.path().toStdString()) / "a", b = fs::path(tmp.path().toStdString()) / "b";
        QCOMPARE(run_cli({"demo", "--out", qs(a)}).exit_code, 0);
        QCOMPARE(run_cli({"demo", "--out", qs(b)}).exit_code, 0);
        for (const char* f : {"config.json", "model.safetensors", "tokenizer.json", "tokenizer_config.json"}) {
            const std::string sa = tandem::read_file(a / f), sb = tandem::read_file(b / f);
            QVERIFY2(!sa.empty() && sa == sb, f);
        }
        const CliResult info = run_cli({"info", qs(a), "--json"});
        QVERIFY2(info.exit_code == 0, info.err.constData());
        const auto j = nlohmann::json::parse(info.out.toStdString());
        QCOMPARE(j.at("architecture").get<std::string>(), std::string("LlamaForCausalLM"));
        QCOMPARE(j.at("supported").get<bool>(), true);
        QCOMPARE(j.at("chat_template").get<bool>(), true);
        QVERIFY(j.at("demo").get<bool>());
        // The demo tokenizer round-trips text with characters outside its vocabulary (byte fallback).
        const CliResult enc = run_cli({"tokenize", "--tokenizer", qs(a)}, "\"H\\u00e9llo, w\\u00f6rld!\"\n");
        QCOMPARE(enc.exit_code, 0);
        const CliResult dec = run_cli({"tokenize", "--tokenizer", qs(a), "--decode"}, enc.out);
        QCOMPARE(dec.exit_code, 0);
        QCOMPARE(parse_lines_json(dec.out, 0).get<std::string>(), std::string("H\xc3\xa9llo, w\xc3\xb6rld!"));
    }

    void info_on_real_model() {
        const fs::path model = assets() / "babyllama-tok105/hf";
        TANDEM_REQUIRE_ASSET(model);
        const CliResult r = run_cli({"info", qs(model), "--json"});
        QVERIFY2(r.exit_code == 0, r.err.constData());
        const auto j = nlohmann::json::parse(r.out.toStdString());
        QCOMPARE(j.at("parameters").get<int64_t>(), int64_t(936448));
        QCOMPARE(j.at("num_hidden_layers").get<int64_t>(), int64_t(5));
        QCOMPARE(j.at("tie_word_embeddings").get<bool>(), true);
        QCOMPARE(j.at("chat_template").get<bool>(), false);
        const CliResult text = run_cli({"info", qs(model)});
        QCOMPARE(text.exit_code, 0);
        QVERIFY(text.out.contains("LlamaForCausalLM"));
    }

    void tokenize_matches_hf() {
        const fs::path tok = assets() / "tokenizer-qwen3";
        TANDEM_REQUIRE_ASSET(tok);
        const CliResult r = run_cli({"tokenize", "--tokenizer", qs(tok)}, "\"Hello world\"\n\n\"<|im_start|>user\"\n");
        QVERIFY2(r.exit_code == 0, r.err.constData());
        QCOMPARE(parse_lines_json(r.out, 0), nlohmann::json({9707, 1879}));
        QCOMPARE(parse_lines_json(r.out, 1), nlohmann::json({151644, 872}));
        const CliResult d = run_cli({"tokenize", "--tokenizer", qs(tok / "tokenizer.json"), "--decode"}, "[9707, 1879]\n");
        QCOMPARE(d.exit_code, 0);
        QCOMPARE(parse_lines_json(d.out, 0).get<std::string>(), std::string("Hello world"));
        const CliResult bos = run_cli({"tokenize", "--tokenizer", qs(assets() / "tokenizer-llama3"), "--add-special-tokens"},
                                      "\"Hello world\"\n");
        QCOMPARE(parse_lines_json(bos.out, 0), nlohmann::json({128000, 9906, 1917}));
    }

    void chat_matches_transformers() {
        const fs::path dir = assets() / "tokenizer-qwen3";
        TANDEM_REQUIRE_ASSET(dir);
        std::ifstream in(dir / "reference_chat_encodings.json");
        const auto ref = nlohmann::json::parse(in);
        for (const auto& c : ref.at("cases")) {
            QStringList args{"chat", "--tokenizer", qs(dir)};
            if (c.at("add_generation_prompt").get<bool>()) args << "--add-generation-prompt";
            const QByteArray line = QByteArray::fromStdString(c.at("messages").dump() + "\n");
            const CliResult r = run_cli(args, line);
            QVERIFY2(r.exit_code == 0, r.err.constData());
            QCOMPARE(parse_lines_json(r.out, 0).get<std::string>(), c.at("rendered").get<std::string>());
            const CliResult ids = run_cli(args << "--ids", line);
            QCOMPARE(parse_lines_json(ids.out, 0), c.at("input_ids_no_added_specials"));
        }
    }

    // Tool schemas keep their key order through the CLI (transformers prints them as written).
    void chat_with_tools_keeps_key_order() {
        const fs::path dir = assets() / "tokenizer-qwen3";
        TANDEM_REQUIRE_ASSET(dir);
        std::ifstream in(fixtures() / "chat/hf_chat_templates.json");
        const auto fixture = nlohmann::ordered_json::parse(in);
        int checked = 0;
        for (const auto& c : fixture.at("cases")) {
            if (c.at("name").get<std::string>().rfind("qwen3/tool_roundtrip/", 0) != 0 || !c.at("extra").contains("tools"))
                continue;
            QStringList args{"chat", "--tokenizer", qs(dir), "--vars", QString::fromStdString(c.at("extra").dump())};
            if (c.at("add_generation_prompt").get<bool>()) args << "--add-generation-prompt";
            const CliResult r = run_cli(args, QByteArray::fromStdString(c.at("messages").dump() + "\n"));
            QVERIFY2(r.exit_code == 0, r.err.constData());
            QCOMPARE(parse_lines_json(r.out, 0).get<std::string>(), c.at("rendered").get<std::string>());
            ++checked;
        }
        QCOMPARE(checked, 2);
    }

    void data_summary_on_real_dataset() {
        const fs::path model = assets() / "tokenizer-qwen3", ds = assets() / "datasets/alpaca_5000.json";
        TANDEM_REQUIRE_ASSET(ds);
        const CliResult r = run_cli({"data", "--model", qs(model), "--dataset", qs(ds), "--max-seq-len", "512",
                                     "--pack", "4096", "--limit", "2", "--json"});
        QVERIFY2(r.exit_code == 0, r.err.constData());
        const auto j = nlohmann::json::parse(r.out.toStdString());
        QCOMPARE(j.at("format").get<std::string>(), std::string("alpaca"));
        // Two records of the subset have an empty output: skipped and reported with their location.
        QCOMPARE(j.at("records").at("valid").get<int64_t>(), int64_t(4998));
        QCOMPARE(j.at("records").at("invalid").get<int64_t>(), int64_t(2));
        QVERIFY(j.at("records").at("first_invalid").at(0).at("location").get<std::string>().find("alpaca_5000.json:") != std::string::npos);
        QCOMPARE(j.at("rendered").size(), size_t(2));
        const auto& s = j.at("rendered").at(0);
        QCOMPARE(s.at("ids").size(), s.at("labels").size());
        QVERIFY(!s.at("trained_text").get<std::string>().empty());
        const double eff = j.at("batches").at("efficiency").get<double>();
        QVERIFY(eff > 0.5 && eff <= 1.0);
        const CliResult text = run_cli({"data", "--model", qs(model), "--dataset", qs(ds), "--pack", "4096"});
        QCOMPARE(text.exit_code, 0);
        QVERIFY(text.out.contains("alpaca"));
    }

    void bad_model_folders() {
        QTemporaryDir tmp;
        const fs::path root = tmp.path().toStdString();
        expect_failure({"info", qs(root / "does-not-exist")}, 2, "does-not-exist");

        write_file(root / "pickle/pytorch_model.bin", "PK\x03\x04 not really");
        write_file(root / "pickle/config.json", kLlamaConfig);
        expect_failure({"info", qs(root / "pickle")}, 4, "pickle");

        expect_failure({"info", qs(config_only_model(tmp, "bert", R"({"architectures": ["BertForMaskedLM"], "model_type": "bert"})"))},
                       4, "BertForMaskedLM");
        expect_failure({"info", qs(config_only_model(tmp, "notjson", "{\"architectures\": [\"LlamaForCausalLM\",}"))},
                       2, "config.json");
        expect_failure({"info", qs(config_only_model(tmp, "absurd", R"({"architectures": ["LlamaForCausalLM"], "hidden_size": -5})"))},
                       2, "hidden_size");

        // A valid config with a truncated weights file.
        const fs::path trunc = config_only_model(tmp, "trunc", kLlamaConfig);
        write_file(trunc / "model.safetensors", std::string("\xff\xff\xff\xff\x00\x00\x00\x00{\"a\":", 13));
        expect_failure({"info", qs(trunc)}, 2, "model.safetensors");

        // Weights that lack tensors the config needs.
        const fs::path missing = config_only_model(tmp, "missing", kLlamaConfig);
        write_file(missing / "model.safetensors", std::string("\x02\x00\x00\x00\x00\x00\x00\x00{}", 10));
        expect_failure({"info", qs(missing)}, 2, "model.embed_tokens.weight");
    }

    // A full disk (ENOSPC injected into the atomic writer: TANDEM_FAULT_ENOSPC_AFTER) while a run writes its
    // checkpoint: exit 2 naming the file and "no space left", no partial checkpoint folder, the checkpoints
    // written before it intact, and `--resume` (with space again) continues from the last complete one and
    // finishes. At the start (nothing fits): exit 2 naming the run's config.json, nothing half-written.
    // A run folder under a regular file (the user's mistake): an I/O error naming the path, exit 2, never
    // "internal error", whichever step of the run meets it.
    void unwritable_run_folder_is_an_io_error() {
        QTemporaryDir tmp;
        const fs::path root = tmp.path().toStdString();
        QCOMPARE(run_cli({"demo", "--out", qs(root / "demo")}).exit_code, 0);
        std::ofstream(root / "file") << "x";
        const CliResult r = run_cli({"train", "--model", qs(root / "demo"), "--dataset",
                                     qs(source_dir() / "datasets/demo_alpaca.jsonl"), "--out", qs(root / "file" / "run"),
                                     "--max-steps", "1", "--device", "cpu", "--lora-r", "4"},
                                    {}, 300000);
        QVERIFY2(r.exit_code == 2, r.err.right(600).constData());
        QVERIFY2(!r.err.contains("internal error"), r.err.right(600).constData());
        QVERIFY2(r.err.contains("file"), r.err.right(600).constData());  // names the path
    }

    void disk_full_keeps_the_last_checkpoint() {
        QTemporaryDir tmp;
        const fs::path root = tmp.path().toStdString();
        QCOMPARE(run_cli({"demo", "--out", qs(root / "demo")}).exit_code, 0);
        const QStringList args = {"train", "--model", qs(root / "demo"), "--dataset",
                                  qs(source_dir() / "datasets/demo_alpaca.jsonl"), "--out", qs(root / "run"),
                                  "--max-steps", "4", "--batch-tokens", "512", "--max-seq-len", "256",
                                  "--device", "cpu", "--lora-r", "4", "--checkpoint-every", "1"};
        // The first checkpoint's size, from an unlimited run of one step.
        {
            QStringList one = args;
            one[one.indexOf("--out") + 1] = qs(root / "probe");
            one[one.indexOf("--max-steps") + 1] = "1";
            const CliResult r = run_cli(one, {}, 300000);
            QVERIFY2(r.exit_code == 0, r.err.right(600).constData());
        }
        uint64_t per_checkpoint = 0;
        for (const auto& e : fs::directory_iterator(root / "probe/checkpoints/step-1")) per_checkpoint += fs::file_size(e);
        const uint64_t config = fs::file_size(root / "probe/config.json");
        // Room for config.json and two checkpoints: the third checkpoint runs out of space.
        QProcessEnvironment env = QProcessEnvironment::systemEnvironment();
        env.insert("TANDEM_FAULT_ENOSPC_AFTER", QString::number(config + 2 * per_checkpoint + per_checkpoint / 2));
        const CliResult full = run_cli(args, {}, 300000, &env);
        QVERIFY2(full.exit_code == 2, full.err.right(800).constData());
        QVERIFY2(full.err.contains("no space left on the device"), full.err.right(800).constData());
        QVERIFY2(full.err.contains("checkpoints"), full.err.right(800).constData());  // names the file
        QVERIFY(fs::is_regular_file(root / "run/checkpoints/step-2/state.json"));
        QVERIFY(!fs::exists(root / "run/checkpoints/step-3"));
        for (const auto& e : fs::directory_iterator(root / "run/checkpoints"))
            QVERIFY2(e.path().filename().string().rfind(".step-", 0) != 0, e.path().c_str());  // no partial folder
        QVERIFY(!fs::exists(root / "run/adapter"));
        const CliResult resumed = run_cli({"train", "--out", qs(root / "run"), "--resume"}, {}, 300000);
        QVERIFY2(resumed.exit_code == 0, resumed.err.right(600).constData());
        QVERIFY(resumed.err.contains("resumed"));
        QVERIFY(fs::exists(root / "run/adapter/adapter_model.safetensors"));
        // Nothing fits: the run's config.json cannot be written.
        env.insert("TANDEM_FAULT_ENOSPC_AFTER", "0");
        QStringList none = args;
        none[none.indexOf("--out") + 1] = qs(root / "none");
        const CliResult nothing = run_cli(none, {}, 300000, &env);
        QVERIFY2(nothing.exit_code == 2, nothing.err.right(600).constData());
        QVERIFY2(nothing.err.contains("config.json") && nothing.err.contains("no space left"),
                 nothing.err.right(600).constData());
        if (fs::exists(root / "none"))
            for (const auto& e : fs::recursive_directory_iterator(root / "none"))
                QVERIFY2(e.path().filename().string().find(".tmp") == std::string::npos, e.path().c_str());
    }

    // Each way a weights file can lie, through `tandem-cli info`: exit 2 naming the file, never a signal.
    void corrupt_safetensors() {
        QTemporaryDir tmp;
        const fs::path root = tmp.path().toStdString();
        QCOMPARE(run_cli({"demo", "--out", qs(root / "demo")}).exit_code, 0);
        const fs::path demo = root / "demo";
        const std::string emb = "model.embed_tokens.weight";
        struct Case {
            const char* name;
            std::function<void(nlohmann::json&)> edit;
            std::optional<uint64_t> length;
            std::string raw;
            QString needle;
        };
        const std::vector<Case> cases = {
            {"past_end", [](auto&) {}, uint64_t(1) << 20, {}, "model.safetensors"},
            {"huge_header", [](auto&) {}, uint64_t(1) << 40, {}, "model.safetensors"},
            {"not_json", [](auto&) {}, std::nullopt, "this is not json at all", "model.safetensors"},
            {"array_header", [](auto&) {}, std::nullopt, "[1, 2, 3]", "model.safetensors"},
            {"unknown_dtype", [&](auto& j) { j[emb]["dtype"] = "F7"; }, std::nullopt, {}, "F7"},
            {"offsets_past_end", [&](auto& j) { j[emb]["data_offsets"][1] = 1ull << 40; }, std::nullopt, {}, emb.c_str()},
            {"overlap", [&](auto& j) {
                 for (auto& [k, v] : j.items())
                     if (k != emb && k != "__metadata__") { v["data_offsets"] = j[emb]["data_offsets"]; v["shape"] = j[emb]["shape"]; v["dtype"] = j[emb]["dtype"]; break; }
             }, std::nullopt, {}, "model.safetensors"},
            {"shape_mismatch", [&](auto& j) { j[emb]["shape"][0] = j[emb]["shape"][0].template get<int64_t>() + 1; }, std::nullopt, {}, emb.c_str()},
            {"negative_dim", [&](auto& j) { j[emb]["shape"][0] = -384; }, std::nullopt, {}, emb.c_str()},
            {"overflow_dims", [&](auto& j) { j[emb]["shape"] = {int64_t(1) << 62, int64_t(1) << 62}; }, std::nullopt, {}, emb.c_str()},
            {"wrong_shape_for_config", [&](auto& j) {
                 auto s = j[emb]["shape"];
                 j[emb]["shape"] = {s[1], s[0]};
             }, std::nullopt, {}, emb.c_str()},
            {"missing_tensor", [&](auto& j) {
                 // Drop the final norm and give its bytes to nobody: the header no longer covers the data.
                 j.erase("model.norm.weight");
             }, std::nullopt, {}, "model.safetensors"},
        };
        for (const auto& c : cases) {
            const fs::path dir = corrupt_demo(demo, root / c.name, c.edit, c.length, c.raw);
            const CliResult r = run_cli({"info", qs(dir)});
            QVERIFY2(!r.crashed, c.name);
            QVERIFY2(r.exit_code == 2 || r.exit_code == 4,
                     qPrintable(QString("%1: exit %2: %3").arg(c.name).arg(r.exit_code).arg(QString(r.err))));
            QVERIFY2(QString::fromUtf8(r.err).contains(c.needle),
                     qPrintable(QString("%1: stderr lacks '%2': %3").arg(c.name, c.needle, QString(r.err))));
        }
        // An absurd config next to good weights.
        const fs::path absurd = corrupt_demo(demo, root / "absurd_config", [](auto&) {});
        auto cfg = nlohmann::json::parse(tandem::read_file(absurd / "config.json"));
        cfg["num_hidden_layers"] = 100000;
        write_file(absurd / "config.json", cfg.dump());
        expect_failure({"info", qs(absurd)}, 2, "num_hidden_layers");
        cfg["num_hidden_layers"] = 2;
        cfg["num_key_value_heads"] = 3;
        write_file(absurd / "config.json", cfg.dump());
        expect_failure({"info", qs(absurd)}, 2, "num_key_value_heads");
        cfg["num_key_value_heads"] = "two";
        write_file(absurd / "config.json", cfg.dump());
        expect_failure({"info", qs(absurd)}, 2, "num_key_value_heads");
    }

    void bad_tokenizers_and_stdin() {
        QTemporaryDir tmp;
        const fs::path root = tmp.path().toStdString();
        expect_failure({"tokenize", "--tokenizer", qs(root / "nope.json")}, 2, "nope.json", "\"x\"\n");
        write_file(root / "broken/tokenizer.json", "{\"model\": {\"type\": \"BPE\", \"vocab\": ");
        expect_failure({"tokenize", "--tokenizer", qs(root / "broken")}, 2, "tokenizer.json", "\"x\"\n");
        write_file(root / "wordpiece/tokenizer.json", R"({"model": {"type": "WordPiece", "vocab": {"a": 0}}})");
        expect_failure({"tokenize", "--tokenizer", qs(root / "wordpiece")}, 4, "WordPiece", "\"x\"\n");

        const fs::path qwen = assets() / "tokenizer-qwen3";
        TANDEM_REQUIRE_ASSET(qwen);
        expect_failure({"tokenize", "--tokenizer", qs(qwen)}, 2, "stdin:2", "\"ok\"\n42\n");
        expect_failure({"tokenize", "--tokenizer", qs(qwen)}, 2, "stdin:1", "{not json\n");
        expect_failure({"tokenize", "--tokenizer", qs(qwen), "--decode"}, 2, "stdin:1", "[1, 99999999]\n");
        expect_failure({"chat", "--tokenizer", qs(qwen)}, 2, "stdin:1", "[{\"content\": \"no role\"}]\n");
        expect_failure({"chat", "--tokenizer", qs(qwen)}, 2, "stdin:1", "{\"role\": \"user\"}\n");
        expect_failure({"chat", "--tokenizer", qs(qwen), "--vars", "[1]"}, 2, "--vars", "[]\n");
        expect_failure({"chat", "--tokenizer", qs(qwen), "--template", "vicuna"}, 2, "chatml", "[]\n");
        // A number beyond double's range is invalid input too (nlohmann throws out_of_range, not parse_error).
        expect_failure({"chat", "--tokenizer", qs(qwen), "--vars", "{\"a\": 1e309}"}, 2, "--vars", "[]\n");
        const fs::path llama2 = assets() / "tokenizer-llama2";
        expect_failure({"chat", "--tokenizer", qs(llama2)}, 2, "--template",
                       "[{\"role\": \"user\", \"content\": \"hi\"}]\n");
        // ...and with a built-in template the same model renders.
        const CliResult ok = run_cli({"chat", "--tokenizer", qs(llama2), "--template", "alpaca", "--add-generation-prompt"},
                                     "[{\"role\": \"user\", \"content\": \"hi\"}]\n");
        QCOMPARE(ok.exit_code, 0);
        QVERIFY(ok.out.contains("### Instruction:"));
    }

    // Ctrl-C during `train` prints "resume with: tandem-cli train --out RUN --resume"; that command, as printed
    // (no --model, no --dataset), reads RUN/config.json and finishes the run.
    // 30 steps of 2048 tokens: slow enough to interrupt after the first, short enough for the sanitizer build.
    void train_resume_hint_works_as_printed() {
        QTemporaryDir tmp;
        const fs::path root = tmp.path().toStdString();
        QCOMPARE(run_cli({"demo", "--out", qs(root / "demo")}).exit_code, 0);
        const QStringList args = {"train", "--model", qs(root / "demo"), "--dataset",
                                  qs(source_dir() / "datasets/demo_alpaca.jsonl"), "--out", qs(root / "run"),
                                  "--max-steps", "30", "--batch-tokens", "2048", "--max-seq-len", "512",
                                  "--device", "cpu", "--lora-r", "4"};
        QProcess p;
        p.start(QString(TANDEM_CLI_PATH), args);
        QVERIFY(p.waitForStarted());
        QByteArray err;
        QTRY_VERIFY_WITH_TIMEOUT((err += p.readAllStandardError()).contains("step 1/30"), 60000);
        ::kill(static_cast<pid_t>(p.processId()), SIGINT);  // what Ctrl-C sends
        QVERIFY(p.waitForFinished(120000));
        err += p.readAllStandardError();
        QVERIFY2(p.exitCode() == 130, err.right(600).constData());  // cancelled
        const QRegularExpression hint(R"(resume with: tandem-cli (train --out (\S+) --resume))");
        const auto match = hint.match(QString::fromUtf8(err));
        QVERIFY2(match.hasMatch(), err.right(600).constData());
        QVERIFY(!fs::exists(root / "run/adapter"));
        const CliResult resumed = run_cli(match.captured(1).split(' '), {}, 300000);
        QVERIFY2(resumed.exit_code == 0, resumed.err.right(600).constData());
        QVERIFY(resumed.err.contains("resumed"));
        QVERIFY(fs::exists(root / "run/adapter/adapter_model.safetensors"));
        std::ifstream metrics(root / "run/metrics.jsonl");
        int lines = 0;
        for (std::string line; std::getline(metrics, line);) lines += !line.empty();
        QCOMPARE(lines, 30);
        // `--out DIR --resume` where DIR holds no run names the folder and what to do.
        expect_failure({"train", "--out", qs(root / "nothing-here"), "--resume"}, 2, "nothing-here");
        expect_failure({"train", "--resume"}, 2, "--out");
    }

    // plan: the memory estimate from config.json alone, and --max-context: the longest single sample that fits.
    void plan_and_longest_context() {
        QTemporaryDir tmp;
        const fs::path root = tmp.path().toStdString();
        write_file(root / "m/config.json",
                   R"({"architectures": ["LlamaForCausalLM"], "hidden_size": 256, "intermediate_size": 1024,
                       "num_hidden_layers": 2, "num_attention_heads": 4, "num_key_value_heads": 2,
                       "vocab_size": 1000, "max_position_embeddings": 134217728})");
        const CliResult p = run_cli({"plan", "--model", qs(root / "m"), "--device", "cpu"});
        QVERIFY2(p.exit_code == 0, p.err.constData());
        QVERIFY(p.out.contains("activations") && p.out.contains("fits"));
        const CliResult r = run_cli({"plan", "--model", qs(root / "m"), "--device", "cpu", "--max-context"});
        QVERIFY2(r.exit_code == 0, (r.out + r.err).constData());
        const QString out = QString::fromUtf8(r.out);
        const int at = out.indexOf("longest sample that fits: ");
        QVERIFY2(at >= 0, qPrintable(out));
        const qint64 n = out.mid(at + 26).section(' ', 0, 0).toLongLong();
        QVERIFY2(n >= 64 && n % 64 == 0, qPrintable(out));
        // Half of it fits, twice it does not: the margins keep the test steady while other processes (parallel
        // test suites) change the free memory between the calls.
        const QString len = QString::number(n / 128 * 64), more = QString::number(2 * n);
        QCOMPARE(run_cli({"plan", "--model", qs(root / "m"), "--device", "cpu", "--batch-tokens", len, "--max-seq-len",
                          len})
                     .exit_code,
                 0);
        if (2 * n <= 134217728)
            QCOMPARE(run_cli({"plan", "--model", qs(root / "m"), "--device", "cpu", "--batch-tokens", more,
                              "--max-seq-len", more})
                         .exit_code,
                     3);
        expect_failure({"plan", "--device", "cpu"}, 2, "--model");
    }

    // The rendering and optimizer settings the studio has are flags too, and they land in the run's config.json.
    void train_flags_for_template_prompts_and_optimizer() {
        QTemporaryDir tmp;
        const fs::path root = tmp.path().toStdString();
        QCOMPARE(run_cli({"demo", "--out", qs(root / "demo")}).exit_code, 0);
        const CliResult r = run_cli({"train", "--model", qs(root / "demo"), "--dataset",
                                     qs(source_dir() / "datasets/demo_alpaca.jsonl"), "--out", qs(root / "run"),
                                     "--max-steps", "2", "--batch-tokens", "256", "--max-seq-len", "128", "--device",
                                     "cpu", "--lora-r", "4", "--template", "alpaca", "--train-on-all-tokens",
                                     "--weight-decay", "0.01", "--warmup-ratio", "0.5"});
        QVERIFY2(r.exit_code == 0, r.err.right(800).constData());
        const auto j = nlohmann::json::parse(tandem::read_file(root / "run/config.json"));
        QCOMPARE(j["data"]["template"].get<std::string>(), std::string("alpaca"));
        QVERIFY(j["data"]["train_on_all_tokens"].get<bool>());
        QCOMPARE(j["training"]["weight_decay"].get<double>(), 0.01);
        QCOMPARE(j["training"]["warmup_ratio"].get<double>(), 0.5);
        expect_failure({"train", "--model", qs(root / "demo"), "--dataset",
                        qs(source_dir() / "datasets/demo_alpaca.jsonl"), "--out", qs(root / "run2"), "--template",
                        "vicuna"},
                       2, "vicuna");
    }

    // --precision fp8 trains (the CPU emulates FP8; the demo's 64-wide projections are padded to 128), alone and
    // with --quantization nf4, is written to config.json, and an unknown name is refused.
    void train_precision_fp8() {
        QTemporaryDir tmp;
        const fs::path root = tmp.path().toStdString();
        QCOMPARE(run_cli({"demo", "--out", qs(root / "demo")}).exit_code, 0);
        const QStringList base = {"train", "--model", qs(root / "demo"), "--dataset",
                                  qs(source_dir() / "datasets/demo_alpaca.jsonl"), "--max-steps", "2",
                                  "--batch-tokens", "256", "--max-seq-len", "128", "--device", "cpu", "--lora-r", "4"};
        const CliResult r = run_cli(base + QStringList{"--out", qs(root / "run"), "--precision", "fp8"});
        QVERIFY2(r.exit_code == 0, r.err.right(800).constData());
        const auto j = nlohmann::json::parse(tandem::read_file(root / "run/config.json"));
        QCOMPARE(j["precision"].get<std::string>(), std::string("fp8"));
        QVERIFY(fs::exists(root / "run/adapter/adapter_model.safetensors"));
        expect_failure(base + QStringList{"--out", qs(root / "run2"), "--precision", "fp4"}, 2, "bf16 or fp8");
        // With 4-bit base weights (dequantized straight to FP8 per GEMM): trains, both in config.json.
        const CliResult q =
            run_cli(base + QStringList{"--out", qs(root / "run3"), "--precision", "fp8", "--quantization", "nf4"});
        QVERIFY2(q.exit_code == 0, q.err.right(800).constData());
        const auto jq = nlohmann::json::parse(tandem::read_file(root / "run3/config.json"));
        QCOMPARE(jq["precision"].get<std::string>(), std::string("fp8"));
        QCOMPARE(jq["quantization"].get<std::string>(), std::string("nf4"));
        QVERIFY(fs::exists(root / "run3/adapter/adapter_model.safetensors"));
    }

    // lr 1e5 turns the demo's loss non-finite within a few steps: the run stops itself after 3 such steps in a
    // row, exits 2 saying what to change (once), keeps only checkpoints from before, writes no adapter.
    void train_divergence_exits_2_saying_what_to_change() {
        QTemporaryDir tmp;
        const fs::path root = tmp.path().toStdString();
        QCOMPARE(run_cli({"demo", "--out", qs(root / "demo")}).exit_code, 0);
        const CliResult r = run_cli({"train", "--model", qs(root / "demo"), "--dataset",
                                     qs(source_dir() / "datasets/demo_alpaca.jsonl"), "--out", qs(root / "run"),
                                     "--max-steps", "40", "--batch-tokens", "256", "--max-seq-len", "128",
                                     "--device", "cpu", "--lora-r", "4", "--lr", "1e5", "--checkpoint-every", "1"});
        QVERIFY(!r.crashed);
        QVERIFY2(r.exit_code == 2, r.err.right(800).constData());
        const QString err = QString::fromUtf8(r.err);
        QVERIFY2(err.contains("tandem-cli: invalid input: training diverged at step"), qPrintable(err.right(800)));
        QVERIFY2(err.contains("Lower the learning rate (it was 100000)") && err.contains("--lr"),
                 qPrintable(err.right(800)));
        QCOMPARE(err.count("training diverged"), 1);
        QVERIFY(r.out.isEmpty());  // no adapter path
        QVERIFY(!fs::exists(root / "run/adapter"));
        std::ifstream in(root / "run/metrics.jsonl");
        std::string line, last;
        while (std::getline(in, line))
            if (!line.empty()) last = line;
        const auto j = nlohmann::json::parse(last);
        QCOMPARE(j.at("status").get<std::string>(), std::string("diverged"));
        QVERIFY(j.at("step").get<int64_t>() < 40);
        // Every checkpoint left is from before the first non-finite step.
        for (const auto& e : fs::directory_iterator(root / "run/checkpoints")) {
            const int64_t s = std::stoll(e.path().filename().string().substr(5));
            QVERIFY2(s <= j.at("step").get<int64_t>() - 4, e.path().c_str());
        }
        // The setting is validated like every other.
        expect_failure({"train", "--model", qs(root / "demo"), "--dataset",
                        qs(source_dir() / "datasets/demo_alpaca.jsonl"), "--out", qs(root / "run2"),
                        "--max-nonfinite-steps", "0"},
                       2, "max_nonfinite_steps");
    }

    void bad_datasets() {
        QTemporaryDir tmp;
        const fs::path root = tmp.path().toStdString();
        const fs::path model = assets() / "tokenizer-qwen3";
        TANDEM_REQUIRE_ASSET(model);
        auto data = [&](const fs::path& file) { return QStringList{"data", "--model", qs(model), "--dataset", qs(file)}; };

        expect_failure(data(root / "missing.jsonl"), 2, "missing.jsonl");
        write_file(root / "empty.jsonl", "");
        expect_failure(data(root / "empty.jsonl"), 2, "empty.jsonl");
        write_file(root / "binary.jsonl", std::string("\x7f" "ELF\x02\x01\x01\x00\x00\x00\x00", 12));
        expect_failure(data(root / "binary.jsonl"), 2, "binary.jsonl");
        write_file(root / "truncated.json", "[{\"instruction\": \"a\", \"output\": \"b\"}, {\"instruction\": \"c\", \"out");
        expect_failure(data(root / "truncated.json"), 2, "truncated.json");
        write_file(root / "keys.jsonl", "{\"question\": \"a\", \"answer\": \"b\"}\n{\"question\": \"c\", \"answer\": \"d\"}\n");
        expect_failure(data(root / "keys.jsonl"), 2, "question");
        write_file(root / "types.jsonl", "{\"instruction\": \"a\", \"output\": 5}\n{\"instruction\": \"b\", \"output\": [1]}\n");
        expect_failure(data(root / "types.jsonl"), 2, "types.jsonl:1");
        write_file(root / "roles.jsonl", "{\"messages\": [{\"role\": \"wizard\", \"content\": \"x\"}]}\n");
        expect_failure(data(root / "roles.jsonl"), 2, "wizard");
        write_file(root / "utf8.jsonl", "{\"text\": \"bad \xc3\x28 byte\"}\n");
        expect_failure(data(root / "utf8.jsonl"), 2, "utf8.jsonl:1");
        expect_failure(data(root / "utf8.jsonl") << "--format" << "yaml", 2, "yaml");
        expect_failure(data(root / "utf8.jsonl") << "--pack" << "0", 2, "pack");
    }
};

QTEST_GUILESS_MAIN(TestCli)
#include "test_cli.moc"
