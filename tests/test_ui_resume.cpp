// SPDX-FileCopyrightText: 2026 The Tandem developers
// SPDX-License-Identifier: GPL-3.0-or-later
// No lost work in the studio. A run's studio.lock (ui/run_lock.h) tells a run being trained now from one whose
// studio died mid-run; the Runs page lists them as running and interrupted, offers Resume only for the
// interrupted one, and will not delete the running one; a session will not train a run another session holds.
// At start the main window offers to resume an interrupted run once (Not now is remembered), and the Runs
// page's Resume continues it. A damaged checkpoint or run folder fails naming the file, as the user's to fix
// (tandem-cli too). End to end with a real kill: a studio process (studio_run_driver: the main window
// starting the run as the Train button does) trains the tiny pretrained Llama of the shared assets on the CPU,
// is killed with SIGKILL once two checkpoints exist, a half-written checkpoint folder and a damaged one are
// left beside them, and a new main window offers to resume the run; its Resume continues from the newest
// complete checkpoint and ends with an adapter identical, bit for bit, to an uninterrupted run's.
#include <QApplication>
#include <QDir>
#include <QElapsedTimer>
#include <QLabel>
#include <QMessageBox>
#include <QProcess>
#include <QPushButton>
#include <QSettings>
#include <QSignalSpy>
#include <QStandardPaths>
#include <QTableWidget>
#include <QTemporaryDir>
#include <QTest>
#include <QTimer>

#include <signal.h>
#include <unistd.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "tandem/demo_model.h"
#include "tandem/error.h"
#include "tandem/trainer.h"
#include "test_support.h"
#include "ui/main_window.h"
#include "ui/run_lock.h"
#include "ui/run_scan.h"
#include "ui/run_types.h"
#include "ui/runs_page.h"
#include "ui/training_session.h"

// resources/icons.qrc lives in the static tandem_ui library (as for `tandem`'s main()); outside any namespace.
static void initIcons() { Q_INIT_RESOURCE(icons); }

namespace fs = std::filesystem;
using namespace tandem::ui;

namespace {

QString qs(const fs::path& p) { return QString::fromStdString(p.string()); }

QByteArray fileBytes(const fs::path& p) {
    QFile f(qs(p));
    return f.open(QIODevice::ReadOnly) ? f.readAll() : QByteArray();
}

// A studio.lock as a studio that was killed leaves it: the file, and no process holding its lock.
void leaveStaleLock(const fs::path& runDir) {
    tandem::test::write_file(runDir / kRunLockName,
                             R"({"pid": 999999, "host": "elsewhere", "started": "2026-01-02T03:04:05.000Z"})");
}

// The runs table's row of the run folder named `name`, -1 when it is not listed.
int rowOf(QTableWidget* table, const QString& name) {
    for (int r = 0; r < table->rowCount(); ++r)
        if (table->item(r, 0) && table->item(r, 0)->text() == name) return r;
    return -1;
}

// The loss of every metrics.jsonl line, in order.
std::vector<double> losses(const fs::path& runDir) {
    std::vector<double> out;
    std::ifstream in(runDir / "metrics.jsonl");
    for (std::string line; std::getline(in, line);)
        if (!line.empty()) out.push_back(nlohmann::json::parse(line).at("loss").get<double>());
    return out;
}

// The newest complete checkpoint, found without the engine: the highest step-N that holds a state.json.
int64_t newestCompleteCheckpoint(const fs::path& runDir) {
    int64_t newest = 0;
    for (const auto& e : fs::directory_iterator(runDir / "checkpoints")) {
        const std::string name = e.path().filename().string();
        if (name.rfind("step-", 0) == 0 && fs::is_regular_file(e.path() / "state.json"))
            newest = std::max<int64_t>(newest, std::stoll(name.substr(5)));
    }
    return newest;
}

bool anyHalfWrittenCheckpoint(const fs::path& runDir) {
    for (const auto& e : fs::directory_iterator(runDir / "checkpoints"))
        if (e.path().filename().string().rfind(".step-", 0) == 0) return true;
    return false;
}

}  // namespace

class TestUiResume : public QObject {
    Q_OBJECT

    QTemporaryDir m_tmp;
    fs::path m_root;
    fs::path m_demo;

    // A tiny CPU run of the demo model in runs/<name>.
    tandem::RunConfig demoRun(const fs::path& runs, const std::string& name, int64_t maxSteps) const {
        return tandem::test::tiny_cpu_run(m_demo.string(),
                                          (tandem::test::source_dir() / "datasets" / "demo_alpaca.jsonl").string(),
                                          (runs / name).string(), maxSteps);
    }

    // Trains `config` through a TrainingSession to its end (or to a stop after `stopAt` steps).
    void train(const tandem::RunConfig& config, bool resume, int64_t stopAt = 0) {
        TrainingSession session;
        QSignalSpy finished(&session, &TrainingSession::finished);
        QSignalSpy failed(&session, &TrainingSession::failed);
        if (stopAt > 0)
            connect(&session, &TrainingSession::stepCompleted, &session,
                    [&session, stopAt](const tandem::StepMetrics& m) {
                        if (m.step == stopAt) session.requestStop();
                    });
        QVERIFY(session.start(config, resume));
        QTRY_COMPARE_WITH_TIMEOUT(finished.count() + failed.count(), 1, 120000);
        QVERIFY2(failed.isEmpty(), failed.isEmpty() ? "" : qPrintable(failed.at(0).at(0).value<RunFailure>().message));
    }

    // A stopped run of the demo model: a checkpoint at the step where the stop took effect, no adapter.
    fs::path stoppedRun(const fs::path& runs, const std::string& name) {
        const tandem::RunConfig c = demoRun(runs, name, 40);
        train(c, false, 1);
        return c.output_dir;
    }

    // Resumes `config` through a TrainingSession, which must fail: how, in `failure`.
    void resumeFails(const tandem::RunConfig& config, RunFailure& failure) {
        TrainingSession session;
        QSignalSpy finished(&session, &TrainingSession::finished);
        QSignalSpy failed(&session, &TrainingSession::failed);
        QVERIFY(session.start(config, true));
        QTRY_COMPARE_WITH_TIMEOUT(finished.count() + failed.count(), 1, 120000);
        QCOMPARE(failed.count(), 1);
        failure = failed.at(0).at(0).value<RunFailure>();
    }

    static void useRunsFolder(const fs::path& runs) { QSettings().setValue("runs/folder", qs(runs)); }

private slots:
    void initTestCase() {
        initIcons();
        QStandardPaths::setTestModeEnabled(true);
        QCoreApplication::setOrganizationName("Tandem");
        QCoreApplication::setApplicationName("TandemResumeTest");  // its own QSettings beside the other suites
        QSettings().clear();
        QVERIFY(m_tmp.isValid());
        m_root = m_tmp.path().toStdString();
        m_demo = m_root / "demo-model";
        tandem::create_demo_model(m_demo);
    }

    void lockTellsHeldFromStale() {
        const fs::path dir = m_root / "lock";
        fs::create_directories(dir);
        QCOMPARE(probeRunLock(qs(dir)).state, RunLockState::None);
        {
            RunLock lock(qs(dir));
            QVERIFY(lock.claimed());
            const RunLockProbe held = probeRunLock(qs(dir));
            QCOMPARE(held.state, RunLockState::Held);  // also from the process that holds it
            QCOMPARE(held.pid, qint64(::getpid()));
            QVERIFY(held.started.isValid());
            tandem::test::expect_error([&] { RunLock second(qs(dir)); }, tandem::ErrorCategory::InvalidInput,
                                       {dir.string(), "being trained by Tandem process"});
        }
        QVERIFY(!fs::exists(dir / kRunLockName));  // released: removed
        QCOMPARE(probeRunLock(qs(dir)).state, RunLockState::None);

        leaveStaleLock(dir);
        const RunLockProbe stale = probeRunLock(qs(dir));
        QCOMPARE(stale.state, RunLockState::Stale);
        QCOMPARE(stale.pid, qint64(999999));
        QCOMPARE(stale.host, QString("elsewhere"));
        {
            RunLock takeover(qs(dir));  // a resume takes over what the dead session left
            QCOMPARE(probeRunLock(qs(dir)).pid, qint64(::getpid()));
        }
        QVERIFY(!fs::exists(dir / kRunLockName));

        // A run folder where the lock file cannot be created: an I/O error naming it, not an internal one.
        const fs::path blocked = m_root / "blocked";
        fs::create_directories(blocked / kRunLockName);  // a folder in the way
        tandem::test::expect_error([&] { RunLock lock(qs(blocked)); }, tandem::ErrorCategory::Io,
                                   {(blocked / kRunLockName).string(), "must be writable"});
    }

    void scanListsRunningAndInterruptedRuns() {
        const fs::path runs = m_root / "scan-runs";
        const fs::path dir = stoppedRun(runs, "scanned");
        RunEntry e = readRunEntry(qs(dir));
        QCOMPARE(e.status, RunStatus::Stopped);
        QVERIFY(e.checkpointStep >= 1);
        QCOMPARE(e.checkpointStep, e.steps);
        QVERIFY(canResume(e));
        const QString checkpoint = QString("checkpoints/step-%1").arg(e.checkpointStep);

        leaveStaleLock(dir);
        e = readRunEntry(qs(dir));
        QCOMPARE(e.status, RunStatus::Interrupted);
        QCOMPARE(runStatusName(e.status), QString("interrupted"));
        QVERIFY2(e.statusDetail.contains(checkpoint), qPrintable(e.statusDetail));
        QCOMPARE(e.sessionStarted, QDateTime::fromString("2026-01-02T03:04:05.000Z", Qt::ISODateWithMs));
        QVERIFY(canResume(e));
        {  // killed while writing a metrics line: the step shown is the last complete line's
            std::ofstream(dir / "metrics.jsonl", std::ios::app) << "{\"step\": 99, \"epoch\": 0.5, \"lo";
            QCOMPARE(readRunEntry(qs(dir)).steps, e.steps);
        }
        {
            RunLock lock(qs(dir));  // a session trains it now
            e = readRunEntry(qs(dir));
            QCOMPARE(e.status, RunStatus::Running);
            QVERIFY(!canResume(e));
            // A second session (another window, or this one) refuses to train it, before loading anything.
            TrainingSession session;
            QSignalSpy started(&session, &TrainingSession::started);
            QSignalSpy failed(&session, &TrainingSession::failed);
            QVERIFY(session.start(demoRun(runs, "scanned", 40), true));
            QTRY_COMPARE_WITH_TIMEOUT(failed.count(), 1, 30000);
            QCOMPARE(started.count(), 0);
            const RunFailure f = failed.at(0).at(0).value<RunFailure>();
            QCOMPARE(f.category, tandem::ErrorCategory::InvalidInput);
            QVERIFY2(f.message.contains("being trained by") && f.message.contains("scanned"), qPrintable(f.message));
            QVERIFY(fs::exists(dir / kRunLockName));  // the holder's claim is untouched

            // The Runs page: not resumable, and not deleted.
            useRunsFolder(runs);
            RunsPage page;
            auto* table = page.findChild<QTableWidget*>("runsTable");
            QTRY_VERIFY_WITH_TIMEOUT(rowOf(table, "scanned") >= 0, 30000);
            const int row = rowOf(table, "scanned");
            QCOMPARE(table->item(row, 3)->text(), QString("running"));
            table->selectRow(row);
            QVERIFY(!page.findChild<QPushButton*>("resumeButton")->isEnabled());
            auto* answer = new QTimer(&page);  // the delete confirmation: Yes
            connect(answer, &QTimer::timeout, &page, [answer] {
                if (auto* box = qobject_cast<QMessageBox*>(QApplication::activeModalWidget())) {
                    answer->stop();
                    box->button(QMessageBox::Yes)->click();
                }
            });
            answer->start(50);
            QTest::mouseClick(page.findChild<QPushButton*>("deleteRunButton"), Qt::LeftButton);
            QVERIFY(fs::exists(dir / "config.json"));
            QVERIFY(page.findChild<QLabel*>("runsStatusLabel")->text().contains("being trained now"));
        }
        QCOMPARE(readRunEntry(qs(dir)).status, RunStatus::Stopped);  // the session ended: its claim is gone

        // Interrupted before its first checkpoint: still resumable, from the first step.
        fs::remove_all(dir / "checkpoints");
        leaveStaleLock(dir);
        e = readRunEntry(qs(dir));
        QCOMPARE(e.status, RunStatus::Interrupted);
        QVERIFY(!e.hasCheckpoint);
        QVERIFY(canResume(e));
        QVERIFY2(e.statusDetail.contains("starts it again from the first step"), qPrintable(e.statusDetail));
    }

    // The offer at start is made once per interruption; Not now leaves the run on the Runs page, whose Resume
    // continues it.
    void startOffersResumeOnceThenRunsPageResumes() {
        const fs::path runs = m_root / "offer-runs";
        const fs::path dir = stoppedRun(runs, "offered");
        const int64_t stoppedAt = readRunEntry(qs(dir)).checkpointStep;
        leaveStaleLock(dir);
        useRunsFolder(runs);
        {
            MainWindow w;
            w.show();
            QMessageBox* box = nullptr;
            QTRY_VERIFY_WITH_TIMEOUT((box = w.findChild<QMessageBox*>("interruptedRunPrompt")) != nullptr, 30000);
            QVERIFY2(box->text().contains("offered") && box->text().contains(QString("after step %1").arg(stoppedAt)),
                     qPrintable(box->text()));
            QVERIFY2(box->informativeText().contains(QString("checkpoint (step %1)").arg(stoppedAt)),
                     qPrintable(box->informativeText()));
            QTest::mouseClick(box->findChild<QPushButton*>("notNowButton"), Qt::LeftButton);
            QVERIFY(!w.session()->isRunning());
        }
        MainWindow w;
        QSignalSpy listed(w.runsPage(), &RunsPage::runsListed);
        w.show();
        QTRY_VERIFY_WITH_TIMEOUT(!listed.isEmpty(), 30000);
        QTest::qWait(200);  // a prompt would open right after the listing
        QVERIFY(!w.findChild<QMessageBox*>("interruptedRunPrompt"));

        w.showPage(MainWindow::RunsPageIndex);
        auto* table = w.runsPage()->findChild<QTableWidget*>("runsTable");
        QTRY_VERIFY_WITH_TIMEOUT(rowOf(table, "offered") >= 0, 30000);
        const int row = rowOf(table, "offered");
        QCOMPARE(table->item(row, 3)->text(), QString("interrupted"));
        table->selectRow(row);
        auto* resume = w.runsPage()->findChild<QPushButton*>("resumeButton");
        QVERIFY(resume->isEnabled());
        QSignalSpy started(w.session(), &TrainingSession::started);
        QSignalSpy finished(w.session(), &TrainingSession::finished);
        QSignalSpy failed(w.session(), &TrainingSession::failed);
        QTest::mouseClick(resume, Qt::LeftButton);
        QVERIFY(w.session()->isRunning());
        QTRY_COMPARE_WITH_TIMEOUT(finished.count() + failed.count(), 1, 120000);
        QVERIFY2(failed.isEmpty(), failed.isEmpty() ? "" : qPrintable(failed.at(0).at(0).value<RunFailure>().message));
        QCOMPARE(started.at(0).at(0).value<RunInfo>().startStep, stoppedAt);
        QVERIFY(fs::exists(dir / "adapter" / "adapter_model.safetensors"));
        QVERIFY(!fs::exists(dir / kRunLockName));
        QTRY_COMPARE_WITH_TIMEOUT(table->item(rowOf(table, "offered"), 3)->text(), QString("finished"), 30000);
    }

    // What a user (or a disk) can do to a run folder between a kill and the resume is reported as such, naming
    // the file and the way on, never as an internal error: a damaged newest checkpoint, a run folder whose
    // checkpoints folder cannot be written. tandem-cli exits 2 (not 1) for the latter too.
    void damagedRunFolderIsTheUsersToFix() {
        const fs::path runs = m_root / "damaged-runs";
        RunFailure f;
        const fs::path edited = stoppedRun(runs, "edited-state");
        const auto checkpoint = tandem::latest_checkpoint(edited);
        QVERIFY(checkpoint.has_value());
        tandem::test::write_file(*checkpoint / "state.json", R"({"schema_version": 1, "step": "seven"})");
        resumeFails(demoRun(runs, "edited-state", 40), f);
        QCOMPARE(f.category, tandem::ErrorCategory::InvalidInput);
        QVERIFY2(f.message.contains(qs(*checkpoint / "state.json")) && f.message.contains("Remove its folder"),
                 qPrintable(f.message));
        QVERIFY(!fs::exists(edited / kRunLockName));  // a failed resume leaves no claim behind

        const fs::path blocked = stoppedRun(runs, "blocked-checkpoints");
        fs::remove_all(blocked / "checkpoints");
        tandem::test::write_file(blocked / "checkpoints", "a file where the checkpoints folder belongs");
        resumeFails(demoRun(runs, "blocked-checkpoints", 40), f);
        QCOMPARE(f.category, tandem::ErrorCategory::Io);
        QVERIFY2(f.message.contains(qs(blocked / "checkpoints")) && f.message.contains("writable folder"),
                 qPrintable(f.message));
        const tandem::test::CliResult cli =
            tandem::test::run_cli({"train", "--out", qs(blocked), "--resume"}, {}, 120000);
        QVERIFY(!cli.crashed);
        QVERIFY2(cli.exit_code == 2 && cli.err.contains("writable folder") && !cli.err.contains("internal error"),
                 cli.err.constData());
    }

    void killedStudioRunResumesToTheSameAdapter() {
        const fs::path model = tandem::test::assets() / "babyllama-tok105/hf";
        const fs::path dataset = tandem::test::assets() / "datasets" / "tinystories_train_head.txt";
        TANDEM_REQUIRE_ASSET(model);
        TANDEM_REQUIRE_ASSET(dataset);
        const fs::path runs = m_root / "kill-runs";
        tandem::RunConfig config;
        config.model = model.string();
        config.data.dataset = dataset.string();
        config.data.max_seq_len = 128;
        config.training.batch_tokens = 256;
        config.training.max_steps = 40;  // many steps after the kill: the run cannot end before the signal lands
        config.training.checkpoint_every = 4;
        config.lora.dropout = 0.1;  // the dropout masks depend on the step: a resume at the wrong step shows
        config.seed = 3;
        config.device = tandem::DeviceChoice::Cpu;

        // The uninterrupted run.
        tandem::RunConfig reference = config;
        reference.output_dir = (m_root / "reference").string();
        train(reference, false);
        const QByteArray expected = fileBytes(m_root / "reference/adapter/adapter_model.safetensors");
        QVERIFY(!expected.isEmpty());

        // The same run in a studio process, killed with SIGKILL once its second checkpoint is complete.
        config.output_dir = (runs / "killed").string();
        const fs::path run = config.output_dir;
        const fs::path configFile = m_root / "killed-config.json";
        tandem::test::write_file(configFile, nlohmann::json(config).dump(2));
        QProcess studio;
        QProcessEnvironment env = QProcessEnvironment::systemEnvironment();
        env.insert("QT_QPA_PLATFORM", "offscreen");
        env.insert("XDG_CONFIG_HOME", qs(m_root / "studio-config"));
        env.insert("XDG_DATA_HOME", qs(m_root / "studio-data"));
        studio.setProcessEnvironment(env);
        studio.start(QString(TANDEM_STUDIO_DRIVER_PATH), {qs(configFile)});
        QVERIFY2(studio.waitForStarted(10000), qPrintable(studio.errorString()));
        QByteArray out;
        QElapsedTimer clock;
        clock.start();
        while (!out.split('\n').contains("checkpoint 8") && studio.state() == QProcess::Running &&
               clock.elapsed() < 120000) {
            studio.waitForReadyRead(1000);  // returns as soon as a line arrives: the kill follows at once
            out += studio.readAllStandardOutput();
        }
        QVERIFY2(studio.state() == QProcess::Running,
                 qPrintable("the studio ended before it could be killed: " + studio.readAllStandardError()));
        QVERIFY2(out.split('\n').contains("checkpoint 8"), "no second checkpoint within two minutes");
        QCOMPARE(::kill(static_cast<pid_t>(studio.processId()), SIGKILL), 0);
        QVERIFY(studio.waitForFinished(30000));
        QCOMPARE(studio.exitStatus(), QProcess::CrashExit);
        QVERIFY2(!fs::exists(run / "adapter"), "the run finished before it was killed: the test proves nothing");
        QVERIFY(fs::exists(run / kRunLockName));  // left behind by the killed studio

        // Beside the complete checkpoints: a half-written one (as a kill during its write leaves it, though
        // this one even has a state.json) and a damaged one without state.json, both newer. Neither may be used.
        const int64_t resumeStep = newestCompleteCheckpoint(run);
        QVERIFY2(resumeStep >= 8 && resumeStep < 40, qPrintable(QString::number(resumeStep)));
        QCOMPARE(readRunEntry(qs(run)).checkpointStep, resumeStep);
        const fs::path halfWritten = run / "checkpoints" / (".step-" + std::to_string(resumeStep + 1) + ".tmp");
        tandem::test::write_file(halfWritten / "lora.safetensors", "not a safetensors file");
        tandem::test::write_file(halfWritten / "state.json", nlohmann::json{{"step", resumeStep + 1}}.dump());
        const fs::path damaged = run / "checkpoints" / ("step-" + std::to_string(resumeStep + 2));
        tandem::test::write_file(damaged / "lora.safetensors", "not a safetensors file");
        QCOMPARE(readRunEntry(qs(run)).checkpointStep, resumeStep);

        // A new studio lists the run as interrupted and offers to resume it; Resume continues from the newest
        // complete checkpoint.
        useRunsFolder(runs);
        MainWindow w;
        w.show();
        QMessageBox* box = nullptr;
        QTRY_VERIFY_WITH_TIMEOUT((box = w.findChild<QMessageBox*>("interruptedRunPrompt")) != nullptr, 30000);
        QVERIFY2(box->text().contains("killed"), qPrintable(box->text()));
        QVERIFY2(box->informativeText().contains(QString("checkpoint (step %1)").arg(resumeStep)),
                 qPrintable(box->informativeText()));
        auto* table = w.runsPage()->findChild<QTableWidget*>("runsTable");
        QCOMPARE(table->item(rowOf(table, "killed"), 3)->text(), QString("interrupted"));
        QSignalSpy started(w.session(), &TrainingSession::started);
        QSignalSpy finished(w.session(), &TrainingSession::finished);
        QSignalSpy failed(w.session(), &TrainingSession::failed);
        QTest::mouseClick(box->findChild<QPushButton*>("resumeInterruptedButton"), Qt::LeftButton);
        QVERIFY(w.session()->isRunning());
        QCOMPARE(w.currentPage(), int(MainWindow::MonitorPageIndex));
        QTRY_COMPARE_WITH_TIMEOUT(finished.count() + failed.count(), 1, 120000);
        QVERIFY2(failed.isEmpty(), failed.isEmpty() ? "" : qPrintable(failed.at(0).at(0).value<RunFailure>().message));
        QCOMPARE(finished.at(0).at(0).toBool(), false);
        const RunInfo info = started.at(0).at(0).value<RunInfo>();
        QVERIFY(info.resumed);
        QCOMPARE(info.startStep, resumeStep);

        QVERIFY2(fileBytes(run / "adapter/adapter_model.safetensors") == expected,
                 "the resumed run's adapter differs from the uninterrupted run's");
        QCOMPARE(losses(run), losses(m_root / "reference"));
        QVERIFY(!anyHalfWrittenCheckpoint(run));
        QVERIFY(!fs::exists(run / kRunLockName));
        QCOMPARE(readRunEntry(qs(run)).status, RunStatus::Finished);
    }
};

QTEST_MAIN(TestUiResume)
#include "test_ui_resume.moc"
