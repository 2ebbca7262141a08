// SPDX-FileCopyrightText: 2026 The Tandem developers
// SPDX-License-Identifier: GPL-3.0-or-later
// engine/hub: downloads from a mock Hub on loopback (tests/mock_hub.py, started per test case; CI has no
// internet): the cache layout against tests/fixtures/hub/expected_layout.json (huggingface_hub's layout),
// the default file choice, gated / missing repos, 429 with Retry-After, a connection cut mid-file (resume),
// a wrong sha256 (refused, nothing in snapshots/), pickle-only repos (refused before any transfer), offline
// mode (no contact), cancel, and `tandem-cli download` / `train --model ORG/NAME` exit codes.
#include <QProcess>
#include <QTemporaryDir>
#include <QtTest>

#include <csignal>
#include <atomic>
#include <fstream>
#include <thread>

#include <nlohmann/json.hpp>

#include "core/files.h"
#include "tandem/error.h"
#include "tandem/hub.h"
#include "test_support.h"

using namespace tandem;
using namespace tandem::test;
namespace fs = std::filesystem;
using json = nlohmann::json;

namespace {

// The mock Hub as a child process; stopped (stdin closed, then killed) with the object.
class MockHub {
   public:
    explicit MockHub(const QStringList& extra = {}) {
        proc_.setProcessChannelMode(QProcess::SeparateChannels);
        proc_.start("python3", QStringList{QString::fromStdString((source_dir() / "tests/mock_hub.py").string())} + extra);
        if (!proc_.waitForStarted(10000)) return;
        for (int i = 0; i < 100 && port_ == 0; ++i) {
            proc_.waitForReadyRead(100);
            const QByteArray line = proc_.readLine().trimmed();
            if (line.startsWith("PORT ")) port_ = line.mid(5).toInt();
        }
    }
    ~MockHub() {
        proc_.closeWriteChannel();
        if (!proc_.waitForFinished(3000)) {
            proc_.kill();
            proc_.waitForFinished(3000);
        }
    }
    bool ok() const { return port_ > 0; }
    std::string endpoint() const { return "http://127.0.0.1:" + std::to_string(port_); }
    json log() const {
        json j;
        const std::string body = fetch("/_log");
        return json::parse(body, nullptr, false);
    }

   private:
    std::string fetch(const std::string& path) const {
        QProcess p;
        p.start("python3", {"-c", QString("import urllib.request,sys;sys.stdout.write(urllib.request.urlopen('%1%2')"
                                          ".read().decode())")
                                      .arg(QString::fromStdString(endpoint()), QString::fromStdString(path))});
        p.waitForFinished(10000);
        return p.readAllStandardOutput().toStdString();
    }
    QProcess proc_;
    int port_ = 0;
};

#define START_HUB(hub, ...)                                          \
    MockHub hub{__VA_ARGS__};                                        \
    if (!hub.ok()) QSKIP("python3 could not start tests/mock_hub.py"); \
    do {                                                             \
    } while (0)

hub::HubOptions options_for(const MockHub& h, const fs::path& cache) {
    hub::HubOptions o;
    o.endpoint = h.endpoint();
    o.cache_dir = cache;
    o.max_retry_wait_s = 5;
    return o;
}

// Every path under the repo folder: "PATH" for files and folders, "PATH -> TARGET" for symlinks, "PATH = TEXT"
// for refs.
std::vector<std::string> layout(const fs::path& repo) {
    std::vector<std::string> out;
    for (auto it = fs::recursive_directory_iterator(repo); it != fs::recursive_directory_iterator(); ++it) {
        const std::string rel = it->path().lexically_relative(repo).generic_string();
        if (it->is_symlink())
            out.push_back(rel + " -> " + fs::read_symlink(it->path()).string());
        else if (rel.rfind("refs/", 0) == 0 && it->is_regular_file())
            out.push_back(rel + " = " + read_file(it->path()));
        else if (it->is_directory())
            out.push_back(rel + "/");
        else
            out.push_back(rel);
    }
    std::sort(out.begin(), out.end());
    return out;
}

bool has_incomplete_or_snapshot_file(const fs::path& repo, const std::string& name) {
    std::error_code ec;
    if (!fs::exists(repo / "snapshots", ec)) return false;
    for (auto it = fs::recursive_directory_iterator(repo / "snapshots"); it != fs::recursive_directory_iterator(); ++it)
        if (it->path().filename() == name) return true;
    return false;
}

QString qs(const fs::path& p) { return QString::fromStdString(p.string()); }

// tandem-cli with the hub's environment.
CliResult run_cli_env(const QStringList& args, const QProcessEnvironment& env, int timeout_ms = 120000) {
    return run_cli(args, {}, timeout_ms, &env);
}

QProcessEnvironment hub_env(const MockHub& h, const fs::path& home) {
    QProcessEnvironment env = QProcessEnvironment::systemEnvironment();
    env.insert("HF_ENDPOINT", QString::fromStdString(h.endpoint()));
    env.insert("HF_HOME", qs(home));
    env.remove("HF_HUB_CACHE");
    env.remove("HF_TOKEN");
    env.remove("HF_HUB_OFFLINE");
    return env;
}

}  // namespace

class TestHub : public QObject {
    Q_OBJECT

private slots:
    void repo_ids_and_selection() {
        QVERIFY(hub::is_repo_id("Qwen/Qwen3-0.6B"));
        QVERIFY(hub::is_repo_id("gpt2"));
        QVERIFY(!hub::is_repo_id("a/b/c"));
        QVERIFY(!hub::is_repo_id("../etc"));
        QVERIFY(!hub::is_repo_id("org/na--me"));
        QVERIFY(!hub::is_repo_id("org/"));
        QVERIFY(!hub::is_repo_id("org/name with space"));
        using hub::RepoType;
        for (const char* p : {"config.json", "model-00001-of-00002.safetensors", "model.safetensors.index.json",
                              "tokenizer.json", "tokenizer_config.json", "generation_config.json", "chat_template.jinja",
                              "special_tokens_map.json", "additional_chat_templates/tool_use.jinja"})
            QVERIFY2(hub::needed_for_training(RepoType::Model, p), p);
        for (const char* p : {"pytorch_model.bin", "README.md", "original/consolidated.00.pth", "onnx/model.safetensors",
                              ".gitattributes", "model.gguf"})
            QVERIFY2(!hub::needed_for_training(RepoType::Model, p), p);
        QVERIFY(hub::needed_for_training(RepoType::Dataset, "data/train-00000-of-00001.parquet"));
        QVERIFY(!hub::needed_for_training(RepoType::Dataset, "README.md"));
    }

    void environment() {
        QTemporaryDir tmp;
        const fs::path home = tmp.path().toStdString();
        write_file(home / "token", "hf_fromfile\n");
        qputenv("HF_HOME", tmp.path().toUtf8());
        qunsetenv("HF_HUB_CACHE");
        qunsetenv("HF_TOKEN");
        qputenv("HF_ENDPOINT", "http://mirror.example/");
        qputenv("HF_HUB_OFFLINE", "1");
        hub::HubOptions o = hub::hub_options_from_env();
        QCOMPARE(o.cache_dir, home / "hub");
        QCOMPARE(o.token, std::string("hf_fromfile"));
        QCOMPARE(o.endpoint, std::string("http://mirror.example"));
        QVERIFY(o.offline);
        qputenv("HF_HUB_CACHE", "/elsewhere");
        qputenv("HF_TOKEN", "hf_env");
        qputenv("HF_HUB_OFFLINE", "0");
        o = hub::hub_options_from_env();
        QCOMPARE(o.cache_dir, fs::path("/elsewhere"));
        QCOMPARE(o.token, std::string("hf_env"));
        QVERIFY(!o.offline);
        QCOMPARE(hub::repo_cache_dir(hub::RepoType::Dataset, "org/data", o), fs::path("/elsewhere/datasets--org--data"));
        for (const char* v : {"HF_HOME", "HF_HUB_CACHE", "HF_TOKEN", "HF_ENDPOINT", "HF_HUB_OFFLINE"}) qunsetenv(v);
    }

    // The layout huggingface_hub writes (fixture), the default selection, the size preview, progress.
    void layout_matches_huggingface_hub() {
        START_HUB(h);
        QTemporaryDir tmp;
        const fs::path cache = tmp.path().toStdString();
        const auto o = options_for(h, cache);
        hub::DownloadRequest req;
        req.repo_id = "org/tiny";
        const hub::RepoPlan plan = hub::plan_download(req, o);
        QCOMPARE(plan.files.size(), size_t(5));  // config, generation_config, model.safetensors, 2 tokenizer files
        QCOMPARE(plan.cached_bytes, int64_t(0));
        QVERIFY(plan.total_bytes > 300000);
        QVERIFY(std::find(plan.skipped.begin(), plan.skipped.end(), "pytorch_model.bin") != plan.skipped.end());
        std::vector<hub::DownloadProgress> seen;
        std::mutex m;
        const fs::path snap = hub::download(plan, o, [&](const hub::DownloadProgress& p) {
            std::lock_guard<std::mutex> lock(m);
            seen.push_back(p);
        });
        QVERIFY(!seen.empty());
        QCOMPARE(seen.back().bytes_done, plan.total_bytes);
        QCOMPARE(seen.back().files_done, 5);
        QCOMPARE(snap, plan.snapshot);

        const json expected = read_json_file(fixtures() / "hub/expected_layout.json");
        const auto got = layout(cache / "models--org--tiny");
        const auto want = expected.at("models--org--tiny").get<std::vector<std::string>>();
        QVERIFY2(got == want, qPrintable(QString::fromStdString(json(got).dump(1))));
        // The snapshot files read back as the originals (through the relative links).
        QCOMPARE(read_file(snap / "tokenizer_config.json"), std::string("{\"eos_token\": \"</s>\"}"));

        // A second download transfers nothing (everything cached), and the plan says so.
        const hub::RepoPlan again = hub::plan_download(req, o);
        QCOMPARE(again.cached_bytes, again.total_bytes);
        const size_t requests = h.log().size();
        hub::download(again, o);
        QCOMPARE(h.log().size(), requests + 1);  // only the /_log request itself

        // Offline: the cache is used, and nothing is contacted.
        auto off = o;
        off.offline = true;
        off.endpoint = "http://127.0.0.1:9";  // would fail if contacted
        QCOMPARE(hub::resolve_path_or_repo("org/tiny", hub::RepoType::Model, off), snap);
        QCOMPARE(*hub::cached_snapshot(hub::RepoType::Model, "org/tiny", "main", off), snap);
        expect_error([&] { (void)hub::resolve_path_or_repo("org/other", hub::RepoType::Model, off); },
                     ErrorCategory::InvalidInput, {"org/other", "HF_HUB_OFFLINE"});
    }

    void dataset_repo() {
        START_HUB(h);
        QTemporaryDir tmp;
        const auto o = options_for(h, tmp.path().toStdString());
        const fs::path file = hub::resolve_path_or_repo("org/data", hub::RepoType::Dataset, o);
        QCOMPARE(file.filename().string(), std::string("train-00000-of-00001.parquet"));
        const json expected = read_json_file(fixtures() / "hub/expected_layout.json");
        QCOMPARE(layout(fs::path(tmp.path().toStdString()) / "datasets--org--data"),
                 expected.at("datasets--org--data").get<std::vector<std::string>>());
    }

    void gated_missing_and_pickle() {
        START_HUB(h);
        QTemporaryDir tmp;
        auto o = options_for(h, tmp.path().toStdString());
        hub::DownloadRequest req;
        req.repo_id = "gated/model";
        expect_error([&] { (void)hub::plan_download(req, o); }, ErrorCategory::InvalidInput,
                     {"gated/model", "accept the licence", "HF_TOKEN", "no token is set"});
        o.token = "bad-token";
        expect_error([&] { (void)hub::plan_download(req, o); }, ErrorCategory::InvalidInput,
                     {"gated/model", "accept the licence", "no access"});
        o.token = "good-token";
        const fs::path snap = hub::download(req, o);  // the CDN answers 400 if it receives the token
        QVERIFY(fs::exists(snap / "model.safetensors"));
        req.repo_id = "nobody/nothing";
        expect_error([&] { (void)hub::plan_download(req, o); }, ErrorCategory::InvalidInput,
                     {"nobody/nothing", "not found"});
        req.repo_id = "org/tiny";
        req.revision = "v9";
        expect_error([&] { (void)hub::plan_download(req, o); }, ErrorCategory::InvalidInput,
                     {"org/tiny", "no revision \"v9\""});
        for (const char* bad : {"/etc/passwd", "../x", "a//b", ""}) {
            req.revision = bad;
            expect_error([&] { (void)hub::plan_download(req, o); }, ErrorCategory::InvalidInput, {"revision"});
        }
        req.revision = "main";
        req.repo_id = "bad id!";
        expect_error([&] { (void)hub::plan_download(req, o); }, ErrorCategory::InvalidInput, {"not a Hugging Face repo id"});
        req.repo_id = "pickle/model";
        expect_error([&] { (void)hub::plan_download(req, o); }, ErrorCategory::Unsupported,
                     {"pickle/model", "pickle", "pytorch_model.bin", "safetensors"});
        for (const auto& e : h.log())
            QVERIFY2(e.at("path").get<std::string>().find("pickle/model/resolve") == std::string::npos,
                     "a pickle-only repo must be refused before any file transfer");
        // --include overrides the default choice (and the pickle refusal).
        req.include = {"config.json"};
        QCOMPARE(hub::plan_download(req, o).files.size(), size_t(1));
    }

    void retry_after_429() {
        START_HUB(h);
        QTemporaryDir tmp;
        auto o = options_for(h, tmp.path().toStdString());
        std::vector<std::string> notes;
        o.notice = [&](const std::string& s) { notes.push_back(s); };
        hub::DownloadRequest req;
        req.repo_id = "busy/model";
        const auto t0 = std::chrono::steady_clock::now();
        const fs::path snap = hub::download(req, o);
        QVERIFY(std::chrono::steady_clock::now() - t0 >= std::chrono::milliseconds(900));  // Retry-After: 1
        QVERIFY(fs::exists(snap / "config.json"));
        QCOMPARE(notes.size(), size_t(1));
        QVERIFY(notes[0].find("429") != std::string::npos);
    }

    void connection_cut_resumes() {
        START_HUB(h);
        QTemporaryDir tmp;
        const auto o = options_for(h, tmp.path().toStdString());
        hub::DownloadRequest req;
        req.repo_id = "flaky/model";
        const fs::path snap = hub::download(req, o);
        const std::string got = read_file(snap / "model.safetensors");
        QCOMPARE(got.size(), size_t(200000));
        // The second transfer asked for the rest only.
        bool ranged = false;
        for (const auto& e : h.log())
            if (e.at("range").is_string() && e.at("range").get<std::string>() == "bytes=100000-") ranged = true;
        QVERIFY2(ranged, h.log().dump().c_str());
        for (const auto& e : fs::directory_iterator(fs::path(tmp.path().toStdString()) / "models--flaky--model/blobs"))
            QVERIFY2(e.path().extension() != ".incomplete", e.path().c_str());
    }

    void wrong_sha256_is_refused() {
        START_HUB(h);
        QTemporaryDir tmp;
        const fs::path cache = tmp.path().toStdString();
        auto o = options_for(h, cache);
        // One file at a time: with parallel workers, the refusal stops the other files' transfers, whose partial
        // blobs stay for a later resume (by design), so the check below would depend on timing.
        o.parallel_files = 1;
        hub::DownloadRequest req;
        req.repo_id = "corrupt/model";
        expect_error([&] { (void)hub::download(req, o); }, ErrorCategory::InvalidInput,
                     {"model.safetensors", "sha256", "removed"});
        const fs::path repo = cache / "models--corrupt--model";
        QVERIFY(!has_incomplete_or_snapshot_file(repo, "model.safetensors"));
        for (const auto& e : fs::directory_iterator(repo / "blobs"))
            QVERIFY2(e.path().filename().string().find("incomplete") == std::string::npos, e.path().c_str());
        QVERIFY(!fs::exists(repo / "refs/main"));  // the revision is not published
    }

    void cancel_keeps_partial_for_resume() {
        START_HUB(h);
        QTemporaryDir tmp;
        const fs::path cache = tmp.path().toStdString();
        const auto o = options_for(h, cache);
        hub::DownloadRequest req;
        req.repo_id = "org/tiny";
        std::atomic<bool> cancel{true};  // cancelled before anything arrives
        expect_error([&] { (void)hub::download(req, o, {}, &cancel); }, ErrorCategory::Cancelled, {"cancelled"});
        QVERIFY(!fs::exists(cache / "models--org--tiny/refs/main"));
        cancel = false;
        const fs::path snap = hub::download(req, o, {}, &cancel);
        QCOMPARE(fs::file_size(snap / "model.safetensors"), uintmax_t(300000));
    }

    void cli_download_and_train() {
        QTemporaryDir tmp;
        const fs::path root = tmp.path().toStdString();
        QCOMPARE(run_cli({"demo", "--out", qs(root / "demo")}).exit_code, 0);
        START_HUB(h, {"--serve", "model:demo/tiny-llama=" + qs(root / "demo")});
        const QProcessEnvironment env = hub_env(h, root / "hf");

        CliResult r = run_cli_env({"download", "org/tiny", "--dry-run", "--json"}, env);
        QCOMPARE(r.exit_code, 0);
        const json plan = json::parse(r.out.toStdString());
        QCOMPARE(plan.at("files").size(), size_t(5));
        r = run_cli_env({"download", "org/tiny"}, env);
        QVERIFY2(r.exit_code == 0, r.err.constData());
        const fs::path snap = r.out.trimmed().toStdString();
        QVERIFY(fs::exists(snap / "model.safetensors"));
        QVERIFY(snap.string().find((root / "hf/hub/models--org--tiny/snapshots").string()) == 0);
        QVERIFY2(r.err.contains("100.0%"), r.err.constData());

        QCOMPARE(run_cli_env({"download", "nobody/nothing"}, env).exit_code, 2);
        QCOMPARE(run_cli_env({"download", "not a repo"}, env).exit_code, 2);
        r = run_cli_env({"download", "pickle/model"}, env);
        QCOMPARE(r.exit_code, 4);
        QVERIFY(r.err.contains("pickle"));
        r = run_cli_env({"download", "gated/model"}, env);
        QCOMPARE(r.exit_code, 2);
        QVERIFY(r.err.contains("accept the licence"));
        r = run_cli_env({"download", "--dataset", "org/data", "--include", "*.parquet"}, env);
        QCOMPARE(r.exit_code, 0);

        // train --model ORG/NAME: downloaded into the cache, then trained from the snapshot.
        r = run_cli_env({"train", "--model", "demo/tiny-llama", "--dataset",
                         qs(source_dir() / "datasets/demo_alpaca.jsonl"), "--out", qs(root / "run"), "--max-steps",
                         "2", "--device", "cpu"},
                        env, 300000);
        QVERIFY2(r.exit_code == 0, r.err.right(2000).constData());
        const json cfg = read_json_file(root / "run/config.json");
        QVERIFY2(cfg.dump().find("models--demo--tiny-llama/snapshots/") != std::string::npos, cfg.dump().c_str());

        // Ctrl-C during a transfer: exit 130, the partial blob kept; the next run resumes from it.
        {
            QProcess p;
            p.setProcessEnvironment(env);
            p.start(QString(TANDEM_CLI_PATH), {"download", "slow/model"});
            QVERIFY(p.waitForStarted(10000));
            const fs::path blobs = root / "hf/hub/models--slow--model/blobs";
            bool partial = false;
            for (int i = 0; i < 200 && !partial; ++i) {
                std::this_thread::sleep_for(std::chrono::milliseconds(50));
                std::error_code ec;
                if (fs::exists(blobs, ec))
                    for (const auto& e : fs::directory_iterator(blobs, ec))
                        partial = partial || (e.path().extension() == ".incomplete" && fs::file_size(e.path()) > 0);
            }
            QVERIFY(partial);
            ::kill(static_cast<pid_t>(p.processId()), SIGINT);  // what Ctrl-C sends
            QVERIFY(p.waitForFinished(20000));
            QCOMPARE(p.exitCode(), 130);
            QVERIFY(p.readAllStandardError().contains("cancelled"));
            QVERIFY(!fs::exists(root / "hf/hub/models--slow--model/refs/main"));
            r = run_cli_env({"download", "slow/model"}, env);
            QVERIFY2(r.exit_code == 0, r.err.constData());
            QCOMPARE(fs::file_size(fs::path(r.out.trimmed().toStdString()) / "model.safetensors"), uintmax_t(2000000));
            bool resumed = false;
            for (const auto& e : h.log())
                if (e.at("range").is_string() && e.at("path").get<std::string>().find("/cdn/") == 0) resumed = true;
            QVERIFY2(resumed, "the second run did not resume with a Range request");
        }

        // Offline: the cached model is used without contacting anything; a missing one is exit 2.
        QProcessEnvironment off = env;
        off.insert("HF_HUB_OFFLINE", "1");
        off.insert("HF_ENDPOINT", "http://127.0.0.1:9");
        r = run_cli_env({"download", "org/tiny", "--dry-run"}, off);
        QCOMPARE(r.exit_code, 0);
        r = run_cli_env({"download", "org/absent"}, off);
        QCOMPARE(r.exit_code, 2);
        QVERIFY(r.err.contains("HF_HUB_OFFLINE"));
    }
};

QTEST_GUILESS_MAIN(TestHub)
#include "test_hub.moc"
