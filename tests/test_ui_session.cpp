// SPDX-FileCopyrightText: 2026 The Tandem developers
// SPDX-License-Identifier: GPL-3.0-or-later
// TrainingSession on its own: tiny CPU runs on the demo model (datasets/demo_alpaca.jsonl). Signals must
// arrive on the GUI thread with sane values; Stop must end the run with a checkpoint and Resume must finish
// it; a run whose loss turns non-finite must end with `diverged` (not `finished`); bad inputs must become
// `failed` with the engine's category and a message naming the file (an unwritable runs folder: an I/O
// failure saying what to do); destroying a running session must neither crash nor hang, and must leave a
// resumable run folder.
#include <QElapsedTimer>
#include <QSignalSpy>
#include <QStandardPaths>
#include <QTemporaryDir>
#include <QTest>
#include <QThread>

#include <cmath>
#include <filesystem>
#include <memory>

#include "tandem/demo_model.h"
#include "tandem/error.h"
#include "tandem/trainer.h"
#include "test_support.h"
#include "ui/run_types.h"
#include "ui/training_session.h"

namespace fs = std::filesystem;
using tandem::ui::RunFailure;
using tandem::ui::RunInfo;
using tandem::ui::TrainingSession;

class TestUiSession : public QObject {
    Q_OBJECT

    QTemporaryDir m_tmp;
    fs::path m_model;

    fs::path dataset() const { return tandem::test::source_dir() / "datasets" / "demo_alpaca.jsonl"; }

    tandem::RunConfig tiny(const QString& name, int64_t maxSteps) const {
        tandem::RunConfig c;
        c.model = m_model.string();
        c.data.dataset = dataset().string();
        c.data.max_seq_len = 128;
        c.training.batch_tokens = 256;
        c.training.max_steps = maxSteps;
        c.training.lr = 1e-3;
        c.lora.r = 4;
        c.lora.alpha = 8;
        c.device = tandem::DeviceChoice::Cpu;
        c.output_dir = (fs::path(m_tmp.path().toStdString()) / name.toStdString()).string();
        return c;
    }

private slots:
    void initTestCase() {
        QStandardPaths::setTestModeEnabled(true);
        QVERIFY(m_tmp.isValid());
        m_model = fs::path(m_tmp.path().toStdString()) / "demo-model";
        tandem::create_demo_model(m_model);
        QVERIFY(fs::exists(dataset()));
    }

    void runsToTheEndOnTheGuiThread() {
        TrainingSession session;
        QSignalSpy started(&session, &TrainingSession::started);
        QSignalSpy finished(&session, &TrainingSession::finished);
        QSignalSpy failed(&session, &TrainingSession::failed);
        QSignalSpy running(&session, &TrainingSession::runningChanged);
        std::vector<tandem::StepMetrics> steps;
        bool offThread = false;
        connect(&session, &TrainingSession::stepCompleted, this, [&](const tandem::StepMetrics& m) {
            offThread = offThread || QThread::currentThread() != qApp->thread();
            steps.push_back(m);
        });
        bool runningAtFinish = true;
        connect(&session, &TrainingSession::finished, this, [&] { runningAtFinish = session.isRunning(); });

        const auto config = tiny("full", 6);
        QVERIFY(session.start(config, false));
        QVERIFY(session.isRunning());
        QVERIFY(!session.start(config, false));  // one run at a time
        QCOMPARE(session.runDir(), QString::fromStdString(config.output_dir));
        QTRY_COMPARE_WITH_TIMEOUT(finished.count() + failed.count(), 1, 60000);
        QVERIFY2(failed.isEmpty(), failed.isEmpty() ? "" : qPrintable(failed.at(0).at(0).value<RunFailure>().message));
        QCOMPARE(finished.at(0).at(0).toBool(), false);
        QVERIFY(!session.isRunning());
        QVERIFY(!runningAtFinish);
        QCOMPARE(running.count(), 2);
        QCOMPARE(started.count(), 1);
        const RunInfo info = started.at(0).at(0).value<RunInfo>();
        QCOMPARE(info.plan.total_steps, 6);
        QVERIFY(!info.resumed);
        QVERIFY(info.history.empty());
        QVERIFY(info.plan.trainable_parameters > 0);
        QVERIFY(!offThread);
        QCOMPARE(int(steps.size()), 6);
        for (size_t i = 0; i < steps.size(); ++i) {
            QCOMPARE(steps[i].step, int64_t(i + 1));
            QCOMPARE(steps[i].total_steps, 6);
            QVERIFY(std::isfinite(steps[i].loss) && steps[i].loss > 0);
            QVERIFY(steps[i].tokens > 0);
            QVERIFY(steps[i].lr > 0);
        }
        QVERIFY(fs::exists(fs::path(config.output_dir) / "adapter" / "adapter_config.json"));
    }

    void stopThenResumeFinishes() {
        TrainingSession session;
        QSignalSpy finished(&session, &TrainingSession::finished);
        QSignalSpy failed(&session, &TrainingSession::failed);
        QSignalSpy stepSpy(&session, &TrainingSession::stepCompleted);
        QSignalSpy eventSpy(&session, &TrainingSession::event);
        connect(&session, &TrainingSession::stepCompleted, this, [&](const tandem::StepMetrics& m) {
            if (m.step == 1) session.requestStop();
        });
        const auto config = tiny("stopped", 40);
        QVERIFY(session.start(config, false));
        QTRY_COMPARE_WITH_TIMEOUT(finished.count() + failed.count(), 1, 60000);
        QVERIFY(failed.isEmpty());
        QCOMPARE(finished.at(0).at(0).toBool(), true);  // stopped
        const int done = stepSpy.count();
        QVERIFY2(done >= 1 && done < 40, qPrintable(QString::number(done)));
        const auto checkpoint = tandem::latest_checkpoint(config.output_dir);
        QVERIFY(checkpoint.has_value());
        QCOMPARE(QString::fromStdString(checkpoint->filename().string()), QString("step-%1").arg(done));
        bool sawStopped = false;
        for (const auto& args : eventSpy)
            sawStopped = sawStopped || args.at(0).value<tandem::RunEvent>().kind == tandem::RunEventKind::Stopped;
        QVERIFY(sawStopped);
        QVERIFY(!fs::exists(fs::path(config.output_dir) / "adapter"));

        // Resume: the run continues after the checkpoint and finishes.
        session.disconnect(this);
        QSignalSpy started(&session, &TrainingSession::started);
        stepSpy.clear();
        finished.clear();
        QVERIFY(session.start(config, true));
        QTRY_COMPARE_WITH_TIMEOUT(finished.count() + failed.count(), 1, 60000);
        QVERIFY2(failed.isEmpty(), failed.isEmpty() ? "" : qPrintable(failed.at(0).at(0).value<RunFailure>().message));
        QCOMPARE(finished.at(0).at(0).toBool(), false);
        const RunInfo info = started.at(0).at(0).value<RunInfo>();
        QVERIFY(info.resumed);
        QCOMPARE(info.startStep, int64_t(done));
        QCOMPARE(int(info.history.size()), done);  // the steps before the stop, for the plots
        QCOMPARE(info.history.back().step, int64_t(done));
        // With the memory of those steps (metrics.jsonl keeps it): the memory plot does not start empty.
        QVERIFY(info.history.back().memory.weights > 0);
        QVERIFY(info.history.back().memory.lora_optimizer > 0);
        QCOMPARE(stepSpy.count(), 40 - done);
        QCOMPARE(stepSpy.at(0).at(0).value<tandem::StepMetrics>().step, int64_t(done + 1));
        QVERIFY(fs::exists(fs::path(config.output_dir) / "adapter" / "adapter_model.safetensors"));
    }

    void divergedRunEndsWithDiverged() {
        TrainingSession session;
        QSignalSpy finished(&session, &TrainingSession::finished);
        QSignalSpy failed(&session, &TrainingSession::failed);
        QSignalSpy diverged(&session, &TrainingSession::diverged);
        auto config = tiny("diverged", 40);
        config.training.lr = 1e5;
        QVERIFY(session.start(config, false));
        QTRY_COMPARE_WITH_TIMEOUT(finished.count() + failed.count() + diverged.count(), 1, 60000);
        QCOMPARE(diverged.count(), 1);
        QVERIFY(!session.isRunning());
        const QString message = diverged.at(0).at(0).toString();
        QVERIFY2(message.startsWith("training diverged at step") && message.contains("Lower the learning rate"),
                 qPrintable(message));
        QVERIFY(!fs::exists(fs::path(config.output_dir) / "adapter"));
        // A new run can start right away.
        QVERIFY(session.start(tiny("after-diverged", 1), false));
        QTRY_COMPARE_WITH_TIMEOUT(finished.count(), 1, 60000);
    }

    void unwritableRunsFolderFailsSayingWhatToDo() {
        TrainingSession session;
        QSignalSpy started(&session, &TrainingSession::started);
        QSignalSpy failed(&session, &TrainingSession::failed);
        const fs::path file = fs::path(m_tmp.path().toStdString()) / "a-file";
        tandem::test::write_file(file, "not a folder");
        auto config = tiny("unused", 4);
        config.output_dir = (file / "runs" / "run").string();
        QVERIFY(session.start(config, false));
        QTRY_COMPARE_WITH_TIMEOUT(failed.count(), 1, 30000);
        QCOMPARE(started.count(), 0);  // nothing was loaded
        const RunFailure f = failed.at(0).at(0).value<RunFailure>();
        QCOMPARE(f.category, tandem::ErrorCategory::Io);
        QVERIFY2(f.message.contains("Choose a writable runs folder") && f.message.contains("a-file"),
                 qPrintable(f.message));
        // A run that fails before writing anything leaves no empty run folder behind.
        auto bad = tiny("left-behind", 4);
        bad.data.dataset = (fs::path(m_tmp.path().toStdString()) / "no_such_file.jsonl").string();
        QVERIFY(session.start(bad, false));
        QTRY_COMPARE_WITH_TIMEOUT(failed.count(), 2, 30000);
        QVERIFY(!fs::exists(bad.output_dir));
    }

    void missingDatasetFails() {
        TrainingSession session;
        QSignalSpy finished(&session, &TrainingSession::finished);
        QSignalSpy failed(&session, &TrainingSession::failed);
        auto config = tiny("nodata", 4);
        config.data.dataset = (fs::path(m_tmp.path().toStdString()) / "no_such_file.jsonl").string();
        QVERIFY(session.start(config, false));
        QTRY_COMPARE_WITH_TIMEOUT(failed.count(), 1, 30000);
        QCOMPARE(finished.count(), 0);
        QVERIFY(!session.isRunning());
        const RunFailure f = failed.at(0).at(0).value<RunFailure>();
        QCOMPARE(f.category, tandem::ErrorCategory::InvalidInput);
        QVERIFY2(f.message.contains("no_such_file.jsonl"), qPrintable(f.message));
    }

    void modelFolderWithoutConfigFails() {
        TrainingSession session;
        QSignalSpy failed(&session, &TrainingSession::failed);
        const fs::path empty = fs::path(m_tmp.path().toStdString()) / "not-a-model";
        fs::create_directories(empty);
        auto config = tiny("nomodel", 4);
        config.model = empty.string();
        QVERIFY(session.start(config, false));
        QTRY_COMPARE_WITH_TIMEOUT(failed.count(), 1, 30000);
        const RunFailure f = failed.at(0).at(0).value<RunFailure>();
        QCOMPARE(f.category, tandem::ErrorCategory::InvalidInput);
        QVERIFY2(f.message.contains("not-a-model"), qPrintable(f.message));
    }

    void unsupportedArchitectureFails() {
        TrainingSession session;
        QSignalSpy failed(&session, &TrainingSession::failed);
        const fs::path dir = fs::path(m_tmp.path().toStdString()) / "mystery-model";
        tandem::test::write_file(dir / "config.json",
                                 R"({"architectures": ["MysteryForCausalLM"], "model_type": "mystery"})");
        auto config = tiny("mystery", 4);
        config.model = dir.string();
        QVERIFY(session.start(config, false));
        QTRY_COMPARE_WITH_TIMEOUT(failed.count(), 1, 30000);
        const RunFailure f = failed.at(0).at(0).value<RunFailure>();
        QCOMPARE(f.category, tandem::ErrorCategory::Unsupported);
        QCOMPARE(tandem::ui::categoryName(f.category), QString("unsupported"));
        QVERIFY2(f.message.contains("mystery-model/config.json") && f.message.contains("MysteryForCausalLM"),
                 qPrintable(f.message));
    }

    void invalidSettingFailsNamingTheField() {
        TrainingSession session;
        QSignalSpy failed(&session, &TrainingSession::failed);
        auto config = tiny("badlr", 4);
        config.training.grad_accum = 0;
        QVERIFY(session.start(config, false));
        QTRY_COMPARE_WITH_TIMEOUT(failed.count(), 1, 30000);
        const RunFailure f = failed.at(0).at(0).value<RunFailure>();
        QCOMPARE(f.category, tandem::ErrorCategory::InvalidInput);
        QVERIFY2(f.message.contains("grad_accum"), qPrintable(f.message));
    }

    void destroyingARunningSessionStopsAndKeepsTheRun() {
        const auto config = tiny("destroyed", 400);
        auto session = std::make_unique<TrainingSession>();
        QSignalSpy steps(session.get(), &TrainingSession::stepCompleted);
        QVERIFY(session->start(config, false));
        QTRY_VERIFY_WITH_TIMEOUT(steps.count() >= 1, 60000);
        QElapsedTimer clock;
        clock.start();
        session.reset();  // requests a stop and joins the thread
        QVERIFY2(clock.elapsed() < 20000, qPrintable(QString::number(clock.elapsed())));
        QVERIFY(tandem::latest_checkpoint(config.output_dir).has_value());
        QVERIFY(!fs::exists(fs::path(config.output_dir) / "adapter"));
    }

    void destroyingDuringPrepareDoesNotHang() {
        auto session = std::make_unique<TrainingSession>();
        QVERIFY(session->start(tiny("early", 400), false));
        QElapsedTimer clock;
        clock.start();
        session.reset();
        QVERIFY(clock.elapsed() < 20000);
    }
};

QTEST_MAIN(TestUiSession)
#include "test_ui_session.moc"
