// SPDX-FileCopyrightText: 2026 The Tandem developers
// SPDX-License-Identifier: GPL-3.0-or-later
// The CUDA backend as a plugin (engine/cuda_plugin/): what a user reads when it cannot be loaded, and that the
// CPU still serves them.
//  1. missing_library_package / explain_dlopen_error: a missing CUDA library named with its package.
//  2. load(): a missing file, a plugin whose dependency is missing (tests/cuda_plugin_stub: it links
//     libtandem-test-absent.so.1, which is not on the loader's path), a plugin of another build, a library
//     without the entry symbol.
//  3. This build's own plugin (a CUDA build): it loads, all of its symbols resolve (RTLD_NOW), the versions match.
//  4. tandem-cli with TANDEM_CUDA_PLUGIN pointing at the broken stub: --version says "Backend: CPU" and names the
//     missing library; train --device cpu still trains; --device cuda (train, generate, selftest, bench) is
//     refused with exit 4 and the same reason.
#include <QProcessEnvironment>
#include <QTest>

#include <filesystem>
#include <string>

#include "cuda_plugin/loader.h"
#include "tandem/system_info.h"
#include "test_support.h"

namespace fs = std::filesystem;
using namespace tandem;
using tandem::test::CliResult;
using tandem::test::run_cli;

namespace {

QString qs(const fs::path& p) { return QString::fromStdString(p.string()); }

const std::string kAbsent = "libtandem-test-absent.so.1";

QProcessEnvironment env_with_plugin(const std::string& plugin) {
    QProcessEnvironment env = QProcessEnvironment::systemEnvironment();
    env.insert("TANDEM_CUDA_PLUGIN", QString::fromStdString(plugin));
    return env;
}

}  // namespace

class TestCudaPlugin : public QObject {
    Q_OBJECT

private slots:
    void packages_of_missing_libraries() {
        using cuda_plugin::missing_library_package;
        QCOMPARE(missing_library_package("libcudnn.so.9", 13, 0), std::string("libcudnn9-cuda-13 (NVIDIA's CUDA repository)"));
        QCOMPARE(missing_library_package("libcudnn_graph.so.9", 12, 8),
                 std::string("libcudnn9-cuda-12 (NVIDIA's CUDA repository)"));
        QCOMPARE(missing_library_package("libcudart.so.13", 13, 0), std::string("cuda-cudart-13-0 (NVIDIA's CUDA repository)"));
        QCOMPARE(missing_library_package("libcudart.so.12", 12, 4),
                 std::string("cuda-cudart-12-4 (NVIDIA's CUDA repository) or libcudart12 (Debian's non-free)"));
        QCOMPARE(missing_library_package("libcublasLt.so.12", 12, 4),
                 std::string("libcublas-12-4 (NVIDIA's CUDA repository) or libcublaslt12 (Debian's non-free)"));
        QCOMPARE(missing_library_package("libcublasLt.so.13", 13, 0), std::string("libcublas-13-0 (NVIDIA's CUDA repository)"));
        QCOMPARE(missing_library_package("libcublas.so.13", 12, 4), std::string("libcublas-13-* (NVIDIA's CUDA repository)"));
        QVERIFY(missing_library_package("libcuda.so.1", 13, 0).find("libcuda1") != std::string::npos);
        QCOMPARE(missing_library_package("libfoo.so.3", 13, 0), std::string());
        QCOMPARE(missing_library_package(kAbsent, 13, 0), std::string());
    }

    void dlopen_errors_in_words() {
        using cuda_plugin::explain_dlopen_error;
        const std::string plugin = "/usr/lib/x86_64-linux-gnu/tandem/libtandem-cuda.so";
        const std::string missing =
            explain_dlopen_error(plugin, "libcudnn.so.9: cannot open shared object file: No such file or directory");
        QVERIFY2(missing.find(plugin) != std::string::npos, missing.c_str());
        QVERIFY2(missing.find("libcudnn.so.9 is missing; install libcudnn9-cuda-") != std::string::npos, missing.c_str());
        const std::string other = explain_dlopen_error(plugin, plugin + ": undefined symbol: cudnnFoo");
        QVERIFY2(other.find("cannot be loaded: " + plugin + ": undefined symbol: cudnnFoo") != std::string::npos,
                 other.c_str());
        const std::string unknown = explain_dlopen_error(plugin, "libbar.so.2: cannot open shared object file: x");
        QVERIFY2(unknown.find("libbar.so.2 is missing; install the package that provides it") != std::string::npos,
                 unknown.c_str());
    }

    void unusable_plugins_say_why() {
        const cuda_plugin::Loaded none = cuda_plugin::load("/nonexistent/libtandem-cuda.so", "TANDEM_CUDA_PLUGIN");
        QVERIFY(!none.api);
        QCOMPARE(none.reason,
                 std::string("the CUDA backend TANDEM_CUDA_PLUGIN=/nonexistent/libtandem-cuda.so does not exist"));
        const cuda_plugin::Loaded installed = cuda_plugin::load("/nonexistent/libtandem-cuda.so", "");
        QCOMPARE(installed.reason, std::string("the CUDA backend is not installed: /nonexistent/libtandem-cuda.so does not exist"));

        const cuda_plugin::Loaded broken = cuda_plugin::load(TANDEM_TEST_PLUGIN_NEEDS_ABSENT, "");
        QVERIFY(!broken.api);
        QVERIFY2(broken.reason.find(std::string("the CUDA backend (") + TANDEM_TEST_PLUGIN_NEEDS_ABSENT +
                                    ") cannot be loaded: " + kAbsent + " is missing") == 0,
                 broken.reason.c_str());

        const cuda_plugin::Loaded other = cuda_plugin::load(TANDEM_TEST_PLUGIN_OTHER_BUILD, "");
        QVERIFY(!other.api);
        QVERIFY2(other.reason.find("comes from another build (Tandem 0.0.0-other) than this program (Tandem ") !=
                     std::string::npos,
                 other.reason.c_str());

        const cuda_plugin::Loaded foreign = cuda_plugin::load(TANDEM_TEST_ABSENT_LIBRARY, "TANDEM_CUDA_PLUGIN");
        QVERIFY(!foreign.api);
        QVERIFY2(foreign.reason.find("is not a Tandem CUDA backend (it has no tandem_cuda_plugin_v2)") !=
                     std::string::npos,
                 foreign.reason.c_str());
    }

    // The build's own plugin, as this test process finds it (no TANDEM_CUDA_PLUGIN in CTest's environment).
    void this_builds_plugin_loads() {
        if (!cuda_plugin::built()) {
            const cuda_plugin::Loaded& p = cuda_plugin::plugin();
            QVERIFY(!p.api);
            QVERIFY2(p.reason.find("no CUDA backend") != std::string::npos, p.reason.c_str());
            QSKIP("this build has no CUDA backend");
        }
        if (qEnvironmentVariableIsSet("TANDEM_CUDA_PLUGIN")) QSKIP("TANDEM_CUDA_PLUGIN is set");
        const cuda_plugin::Loaded& p = cuda_plugin::plugin();
        QVERIFY2(p.api, p.reason.c_str());
        QVERIFY(fs::exists(p.path));
        const SystemInfo info = system_info();
        QVERIFY(info.cuda_built);
        QVERIFY(info.cuda_loaded);
        QCOMPARE(info.cuda_plugin, p.path);
        // The self-test's case list and a memory plan come from the plugin without a GPU.
        QVERIFY(p.api->selftest_case_names().size() > 100);
    }

    void cli_runs_on_the_cpu_without_the_plugins_libraries() {
        const QProcessEnvironment env = env_with_plugin(TANDEM_TEST_PLUGIN_NEEDS_ABSENT);
        const CliResult version = run_cli({"--version"}, {}, 120000, &env);
        QVERIFY2(version.exit_code == 0, version.err.constData());
        QVERIFY2(version.out.contains("Backend: CPU: the CUDA backend ("), version.out.constData());
        QVERIFY2(version.out.contains(QByteArray::fromStdString(kAbsent + " is missing")), version.out.constData());

        QTemporaryDir tmp;
        const fs::path root = tmp.path().toStdString();
        QCOMPARE(run_cli({"demo", "--out", qs(root / "demo")}, {}, 120000, &env).exit_code, 0);
        const QStringList train = {"train", "--model", qs(root / "demo"), "--dataset",
                                   qs(test::source_dir() / "datasets/demo_alpaca.jsonl"), "--out", qs(root / "run"),
                                   "--max-steps", "1", "--batch-tokens", "256", "--max-seq-len", "128",
                                   "--lora-r", "2", "--device", "auto"};
        const CliResult cpu = run_cli(train, {}, 300000, &env);
        QVERIFY2(cpu.exit_code == 0, cpu.err.right(800).constData());
        QVERIFY2(cpu.err.contains("device: auto chose cpu (the CUDA backend (") || cpu.out.contains("device: auto chose cpu"),
                 (cpu.out + cpu.err).right(800).constData());

        QStringList on_cuda = train;
        on_cuda[on_cuda.indexOf("--out") + 1] = qs(root / "run-cuda");
        on_cuda.last() = "cuda";
        for (const QStringList& args :
             {on_cuda, QStringList{"generate", "--model", qs(root / "demo"), "--prompt", "x", "--device", "cuda"},
              QStringList{"selftest", "--device", "cuda"}, QStringList{"bench", "--config", "tiny-llama"}}) {
            const CliResult r = run_cli(args, {}, 120000, &env);
            QVERIFY2(r.exit_code == 4, qPrintable(args.join(' ') + ": " + QString::fromUtf8(r.err)));
            QVERIFY2(r.err.contains(QByteArray::fromStdString(kAbsent + " is missing")),
                     qPrintable(args.join(' ') + ": " + QString::fromUtf8(r.err)));
        }
    }
};

QTEST_GUILESS_MAIN(TestCudaPlugin)
#include "test_cuda_plugin.moc"
