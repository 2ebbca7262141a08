// SPDX-FileCopyrightText: 2026 The Tandem developers
// SPDX-License-Identifier: GPL-3.0-or-later
// `tandem-cli train --nodes 2` end to end: two real processes on 127.0.0.1 (the demo model, 4 micro-batches per
// step, LoRA dropout on) train what one process trains with the same micro-batches: the same losses and the same
// adapter within 1e-6 relative (the sums differ only in their order: (g0 + g2) + (g1 + g3) vs g0 + g1 + g2 + g3);
// only node rank 0 writes a run folder. A killed node makes the other exit non-zero naming it, promptly; Ctrl-C
// on one node stops both at the same step, and both resume from node 0's checkpoint to the uninterrupted result.
// Bad launches exit 2 (address, rank, mismatched settings, a node that never comes) or 4 (the GPU) at once.
#include <QProcess>
#include <QTemporaryDir>
#include <QtTest>

#include <signal.h>

#include <chrono>
#include <cmath>
#include <fstream>
#include <memory>

#include <nlohmann/json.hpp>

#include "export/peft_adapter.h"
#include "tandem/model_config.h"
#include "test_support.h"
#include "train/rendezvous.h"

using namespace tandem::test;
namespace fs = std::filesystem;

namespace {

QString qs(const fs::path& p) { return QString::fromStdString(p.string()); }

// A port nothing listens on now (the OS chose it; a race with another program taking it is unlikely).
int free_port() {
    tandem::RendezvousListener l({"127.0.0.1", 0});
    return l.port();
}

// One CPU thread per process: two processes share this machine's cores, and each run's sums must not depend
// on how many threads it had.
QProcessEnvironment env() {
    QProcessEnvironment e = QProcessEnvironment::systemEnvironment();
    e.insert("OMP_NUM_THREADS", "1");
    e.insert("OMP_WAIT_POLICY", "PASSIVE");
    return e;
}

struct Proc {
    std::unique_ptr<QProcess> p = std::make_unique<QProcess>();
    QByteArray err, out;
    int exit_code = -1;
    bool finished = false;
    void start(const QStringList& args) {
        p->setProcessEnvironment(env());
        p->start(QString(TANDEM_CLI_PATH), args);
        QVERIFY(p->waitForStarted(10000));
    }
    void read() {
        err += p->readAllStandardError();
        out += p->readAllStandardOutput();
    }
    // Waits for the end (killing it after timeout_ms); true when it ended by itself.
    bool wait(int timeout_ms) {
        const bool done = p->waitForFinished(timeout_ms);
        if (!done) {
            p->kill();
            p->waitForFinished(5000);
        }
        read();
        finished = done && p->exitStatus() == QProcess::NormalExit;
        exit_code = finished ? p->exitCode() : -1;
        return done;
    }
};

struct Metrics {
    std::vector<double> loss, grad_norm;
};
Metrics read_metrics(const fs::path& run) {
    Metrics m;
    std::ifstream in(run / "metrics.jsonl");
    for (std::string line; std::getline(in, line);) {
        if (line.empty()) continue;
        const auto j = nlohmann::json::parse(line);
        m.loss.push_back(j.at("loss").get<double>());
        m.grad_norm.push_back(j.at("grad_norm").get<double>());
    }
    return m;
}

// The worst relative difference of a tensor of b from a: |a - b|_2 / |a|_2, over the adapter's tensors.
double adapter_difference(const fs::path& a, const fs::path& b, const fs::path& model) {
    const tandem::ModelConfig mc = tandem::load_model_config(model);
    const auto x = tandem::read_peft_adapter(a, mc), y = tandem::read_peft_adapter(b, mc);
    if (x.tensors.size() != y.tensors.size() || x.tensors.empty()) return INFINITY;
    double worst = 0;
    for (const auto& [name, va] : x.tensors) {
        const auto& vb = y.tensors.at(name);
        double d = 0, n = 0;
        for (size_t i = 0; i < va.size(); ++i) {
            d += (double(va[i]) - vb[i]) * (double(va[i]) - vb[i]);
            n += double(va[i]) * va[i];
        }
        worst = std::max(worst, n > 0 ? std::sqrt(d / n) : std::sqrt(d));
    }
    return worst;
}

}  // namespace

class TestNodes : public QObject {
    Q_OBJECT

    QTemporaryDir tmp_;
    fs::path root_, demo_;

    QStringList train_args(const fs::path& out, int steps) const {
        return {"train", "--model", qs(demo_), "--dataset", qs(source_dir() / "datasets/demo_alpaca.jsonl"),
                "--out", qs(out), "--max-steps", QString::number(steps), "--batch-tokens", "512", "--max-seq-len",
                "256", "--device", "cpu", "--lora-r", "4", "--lora-dropout", "0.1", "--grad-accum", "4", "--seed",
                "3", "--checkpoint-minutes", "0"};
    }
    static QStringList node(QStringList args, int rank, int port, int nodes = 2) {
        args << "--nodes" << QString::number(nodes) << "--node-rank" << QString::number(rank) << "--rendezvous"
             << QString("127.0.0.1:%1").arg(port) << "--dist-timeout" << "30";
        return args;
    }
    // One process, as the reference.
    void train_one(const fs::path& out, int steps) {
        Proc one;
        one.start(train_args(out, steps));
        QVERIFY(one.wait(300000));
        QVERIFY2(one.exit_code == 0, one.err.right(800).constData());
    }

private slots:
    void initTestCase() {
        QVERIFY(tmp_.isValid());
        root_ = tmp_.path().toStdString();
        demo_ = root_ / "demo";
        const CliResult r = run_cli({"demo", "--out", qs(demo_)});
        QVERIFY2(r.exit_code == 0, r.err.constData());
    }

    void two_processes_train_what_one_trains() {
        train_one(root_ / "one", 3);
        const int port = free_port();
        Proc n0, n1;
        n1.start(node(train_args(root_ / "node1", 3), 1, port));  // the others may start first: they retry
        n0.start(node(train_args(root_ / "node0", 3), 0, port));
        QVERIFY(n0.wait(300000) && n1.wait(60000));
        QVERIFY2(n0.exit_code == 0, n0.err.right(800).constData());
        QVERIFY2(n1.exit_code == 0, n1.err.right(800).constData());
        QCOMPARE(n0.out.trimmed(), QByteArray(qs(root_ / "node0" / "adapter").toUtf8()));
        QVERIFY2(n1.out.isEmpty(), n1.out.constData());
        QVERIFY2(!fs::exists(root_ / "node1"), "node rank 1 wrote a run folder");
        QVERIFY(n1.err.contains("step 3/3"));
        const Metrics want = read_metrics(root_ / "one"), got = read_metrics(root_ / "node0");
        QCOMPARE(got.loss.size(), size_t(3));
        QCOMPARE(want.loss.size(), size_t(3));
        for (size_t s = 0; s < 3; ++s) {
            qInfo("step %zu: loss %.12g vs %.12g, grad norm %.12g vs %.12g", s + 1, got.loss[s], want.loss[s],
                  got.grad_norm[s], want.grad_norm[s]);
            QVERIFY(std::fabs(got.loss[s] - want.loss[s]) <= 1e-6 * std::fabs(want.loss[s]));
            QVERIFY(std::fabs(got.grad_norm[s] - want.grad_norm[s]) <= 1e-6 * want.grad_norm[s]);
        }
        const double d = adapter_difference(root_ / "one" / "adapter", root_ / "node0" / "adapter", demo_);
        qInfo("adapter: worst |a - b|_2 / |a|_2 over the tensors %.3g", d);
        QVERIFY(d <= 1e-6);
        // The steps moved the adapter: the comparison above is not of two untouched initialisations.
        QVERIFY(got.loss[0] != got.loss[2]);
    }

    // SIGKILL on node rank 1 mid-run: node rank 0 stops within seconds with an error naming it.
    void killed_node_stops_the_other() {
        const int port = free_port();
        Proc n0, n1;
        n0.start(node(train_args(root_ / "killed0", 2000), 0, port));
        n1.start(node(train_args(root_ / "killed1", 2000), 1, port));
        QTRY_VERIFY_WITH_TIMEOUT((n0.read(), n0.err.contains("step 2/2000")), 60000);
        ::kill(pid_t(n1.p->processId()), SIGKILL);
        const auto t0 = std::chrono::steady_clock::now();
        QVERIFY2(n0.wait(20000), "node rank 0 did not stop after node rank 1 was killed");
        const double took = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
        n1.wait(5000);
        qInfo("node rank 0 stopped %.2f s after the kill: %s", took, n0.err.right(400).constData());
        QVERIFY2(n0.finished && n0.exit_code != 0, n0.err.right(800).constData());
        QVERIFY2(n0.err.contains("node rank 1"), n0.err.right(800).constData());
        QVERIFY(took < 10);
    }

    // Ctrl-C on node rank 1 alone: both stop after the same step (exit 130), node 0 checkpoints it, and the
    // resume hint each prints continues the run to what an uninterrupted run gives.
    void ctrl_c_on_one_node_stops_both_and_they_resume() {
        const int steps = 12;
        train_one(root_ / "whole", steps);
        const int port = free_port();
        const fs::path run = root_ / "stopped";  // one folder, as on a shared file system
        Proc n0, n1;
        n0.start(node(train_args(run, steps), 0, port));
        n1.start(node(train_args(run, steps), 1, port));
        QTRY_VERIFY_WITH_TIMEOUT((n1.read(), n1.err.contains("step 2/")), 60000);
        ::kill(pid_t(n1.p->processId()), SIGINT);
        QVERIFY(n0.wait(60000) && n1.wait(60000));
        QVERIFY2(n0.exit_code == 130, n0.err.right(800).constData());
        QVERIFY2(n1.exit_code == 130, n1.err.right(800).constData());
        const QRegularExpression at("stopped at step (\\d+)");
        const auto m0 = at.match(QString::fromUtf8(n0.err)), m1 = at.match(QString::fromUtf8(n1.err));
        QVERIFY2(m0.hasMatch() && m1.hasMatch(), (n0.err.right(400) + n1.err.right(400)).constData());
        QCOMPARE(m0.captured(1), m1.captured(1));
        const int stopped_at = m0.captured(1).toInt();
        QVERIFY(stopped_at >= 2 && stopped_at < steps);
        QVERIFY(fs::is_regular_file(run / "checkpoints" / ("step-" + std::to_string(stopped_at)) / "state.json"));
        QVERIFY(!fs::exists(run / "adapter"));
        // The hints, as printed.
        const QRegularExpression hint("resume with: tandem-cli (train --out .* --rendezvous \\S+)");
        const auto h0 = hint.match(QString::fromUtf8(n0.err)), h1 = hint.match(QString::fromUtf8(n1.err));
        QVERIFY2(h0.hasMatch() && h1.hasMatch(), (n0.err.right(400) + n1.err.right(400)).constData());
        Proc r0, r1;
        r0.start(h0.captured(1).split(' '));
        r1.start(h1.captured(1).split(' '));
        QVERIFY(r0.wait(300000) && r1.wait(60000));
        QVERIFY2(r0.exit_code == 0, r0.err.right(800).constData());
        QVERIFY2(r1.exit_code == 0, r1.err.right(800).constData());
        QVERIFY(r0.err.contains("resumed") && r1.err.contains("resumed"));
        const Metrics want = read_metrics(root_ / "whole"), got = read_metrics(run);
        QCOMPARE(got.loss.size(), size_t(steps));
        for (int s = 0; s < steps; ++s)
            QVERIFY2(std::fabs(got.loss[size_t(s)] - want.loss[size_t(s)]) <= 1e-6 * std::fabs(want.loss[size_t(s)]),
                     qPrintable(QString("step %1: %2 vs %3").arg(s + 1).arg(got.loss[size_t(s)], 0, 'g', 12)
                                    .arg(want.loss[size_t(s)], 0, 'g', 12)));
        const double d = adapter_difference(root_ / "whole" / "adapter", run / "adapter", demo_);
        qInfo("stopped at step %d of %d and resumed: adapter vs one uninterrupted process %.3g", stopped_at, steps, d);
        QVERIFY(d <= 1e-6);
    }

    void bad_launches_fail_at_once() {
        const int port = free_port();
        const auto expect = [](const QStringList& args, int code, const QStringList& needles) {
            Proc p;
            p.start(args);
            QVERIFY(p.wait(60000));
            QVERIFY2(p.exit_code == code, qPrintable(QString("exit %1, want %2: %3").arg(p.exit_code).arg(code)
                                                         .arg(QString(p.err.right(600)))));
            for (const QString& n : needles) QVERIFY2(p.err.contains(n.toUtf8()), qPrintable(n + " not in: " + p.err));
        };
        QStringList cuda = node(train_args(root_ / "bad", 3), 0, port);
        cuda[cuda.indexOf("--device") + 1] = "cuda";
        cuda << "--devices" << "0,1";  // on the GPU a process of a world trains on one GPU
        expect(cuda, 4, {"CUDA_VISIBLE_DEVICES", "one GPU", "--devices"});
        QStringList address = node(train_args(root_ / "bad", 3), 1, port);
        address[address.indexOf("--rendezvous") + 1] = "node0";
        expect(address, 2, {"rendezvous address 'node0'", "HOST:PORT"});
        expect(train_args(root_ / "bad", 3) << "--nodes" << "2", 2, {"--rendezvous HOST:PORT"});
        expect(node(train_args(root_ / "bad", 3), 2, port), 2, {"--node-rank 2", "0..1"});
        QVERIFY(!fs::exists(root_ / "bad"));
        // A node that never comes: the other gives up after --dist-timeout, naming the address and the wait.
        QStringList alone = node(train_args(root_ / "bad", 3), 1, port);
        alone[alone.indexOf("--dist-timeout") + 1] = "1";
        const auto t0 = std::chrono::steady_clock::now();
        expect(alone, 2, {QString("127.0.0.1:%1").arg(port), "within 1 s", "node rank 0"});
        QVERIFY(std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count() < 20);
        // Different settings: both refuse, naming the setting.
        Proc n0, n1;
        QStringList other = node(train_args(root_ / "bad1", 3), 1, port);
        other[other.indexOf("--seed") + 1] = "4";
        n0.start(node(train_args(root_ / "bad0", 3), 0, port));
        n1.start(other);
        QVERIFY(n0.wait(60000) && n1.wait(60000));
        for (Proc* p : {&n0, &n1}) {
            QVERIFY2(p->exit_code == 2, p->err.right(800).constData());
            QVERIFY2(p->err.contains("setting seed: node rank 0 has 3, node rank 1 has 4"), p->err.right(800).constData());
        }
    }
};

QTEST_GUILESS_MAIN(TestNodes)
#include "test_nodes.moc"
