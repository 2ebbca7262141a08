// tandem-cli end to end: every subcommand on real assets, and the bad-input suite through the real binary —
// each bad input must exit with code 2 (invalid input) or 4 (unsupported), name the offending file (or
// stdin line) on stderr, and never die from a signal.
#include <QJsonArray>
#include <QJsonDocument>
#include <QJsonObject>
#include <QTemporaryDir>
#include <QtTest>

#include <fstream>

#include <nlohmann/json.hpp>

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
    }

    void demo_model_is_deterministic_and_inspectable() {
        QTemporaryDir tmp;
        const fs::path a = fs::path(tmp.path().toStdString()) / "a", b = fs::path(tmp.path().toStdString()) / "b";
        QCOMPARE(run_cli({"demo", "--out", qs(a)}).exit_code, 0);
        QCOMPARE(run_cli({"demo", "--out", qs(b)}).exit_code, 0);
        for (const char* f : {"config.json", "model.safetensors", "tokenizer.json", "tokenizer_config.json"}) {
            std::ifstream fa(a / f, std::ios::binary), fb(b / f, std::ios::binary);
            const std::string sa((std::istreambuf_iterator<char>(fa)), {}), sb((std::istreambuf_iterator<char>(fb)), {});
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
        const fs::path llama2 = assets() / "tokenizer-llama2";
        expect_failure({"chat", "--tokenizer", qs(llama2)}, 2, "--template",
                       "[{\"role\": \"user\", \"content\": \"hi\"}]\n");
        // ...and with a built-in template the same model renders.
        const CliResult ok = run_cli({"chat", "--tokenizer", qs(llama2), "--template", "alpaca", "--add-generation-prompt"},
                                     "[{\"role\": \"user\", \"content\": \"hi\"}]\n");
        QCOMPARE(ok.exit_code, 0);
        QVERIFY(ok.out.contains("### Instruction:"));
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
