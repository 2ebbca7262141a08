// SPDX-FileCopyrightText: 2026 The Tandem developers
// SPDX-License-Identifier: GPL-3.0-or-later
// The studio end to end through MainWindow, the way a user works: demo model, demo dataset, tiny settings,
// Train, watch the Monitor (plots and progress), Stop, Resume, finish, Export through the dialog (and the
// overwrite question), and load the exported adapter back in the engine. Bad inputs (unsupported model
// folder, broken dataset, a memory plan that cannot fit) must show the right message and block Train.
// Also: the plots keep bounded memory over 100k steps and replot only while visible; closing the window
// during a run asks, stops cleanly and keeps a resumable run folder. From a new user's report: Runs ->
// Reopen settings loads the run's model and dataset (symlinked paths count as the same) so Train works, also
// with other data; a diverged run says so on the Monitor, the status bar and the Runs page, and Export warns
// first; a start into an unwritable runs folder clears the plots (no squashed strips) and says to choose a
// writable runs folder; a long one-line error wraps instead of widening the window.
#include <QAction>
#include <QApplication>
#include <QCheckBox>
#include <QComboBox>
#include <QDesktopServices>
#include <QDir>
#include <QFile>
#include <QLabel>
#include <QLineEdit>
#include <QListWidget>
#include <QMessageBox>
#include <QPlainTextEdit>
#include <QProgressBar>
#include <QPushButton>
#include <QSettings>
#include <QSignalSpy>
#include <QSlider>
#include <QSpinBox>
#include <QStackedWidget>
#include <QStandardPaths>
#include <QTableWidget>
#include <QTemporaryDir>
#include <QTest>
#include <QTimer>

#include <cmath>
#include <filesystem>
#include <fstream>
#include <functional>
#include <memory>

#include "tandem/demo_model.h"
#include "tandem/trainer.h"
#include "test_support.h"
#include "tandem/system_info.h"
#include "ui/about_dialog.h"
#include "ui/app_paths.h"
#include "ui/data_page.h"
#include "ui/export_dialog.h"
#include "ui/live_plot.h"
#include "ui/loss_plot.h"
#include "ui/main_window.h"
#include "ui/model_page.h"
#include "ui/monitor_page.h"
#include "ui/runs_page.h"
#include "ui/series_buffer.h"
#include "ui/train_page.h"
#include "ui/training_session.h"

namespace fs = std::filesystem;
using namespace tandem::ui;

namespace {

// Answers the next modal QMessageBox with `button` as soon as it shows (polls; gives up after 20 s).
void answerNextMessageBox(QMessageBox::StandardButton button) {
    auto* timer = new QTimer;
    auto tries = std::make_shared<int>(0);
    timer->setInterval(50);
    QObject::connect(timer, &QTimer::timeout, [timer, tries, button] {
        auto* box = qobject_cast<QMessageBox*>(QApplication::activeModalWidget());
        if (box && box->button(button)) {
            timer->stop();
            timer->deleteLater();
            box->button(button)->click();
        } else if (++*tries > 400) {
            timer->stop();
            timer->deleteLater();
        }
    });
    timer->start();
}

template <class T>
T* child(QObject* parent, const char* name) {
    return parent->findChild<T*>(QString::fromLatin1(name));
}

tandem::StepMetrics syntheticStep(int64_t step, int64_t total) {
    tandem::StepMetrics m;
    m.step = step;
    m.total_steps = total;
    m.epoch = step / 1000.0;
    m.loss = 3.0 * std::exp(-step / 20000.0) + 0.1 * std::sin(step * 0.01) + 0.2;
    m.eval_loss = step % 500 == 0 ? m.loss + 0.05 : std::numeric_limits<double>::quiet_NaN();
    m.lr = 2e-4;
    m.grad_norm = 1.0 + 0.1 * std::cos(step * 0.1);
    m.tokens = 4096;
    m.step_time_s = 0.05;
    m.tokens_per_s = 4096 / 0.05;
    m.steps_per_s = 20;
    m.memory.weights = 1 << 30;
    m.memory.lora_optimizer = 64 << 20;
    m.memory.activations = 512 << 20;
    m.memory.reserved = 128 << 20;
    m.memory.device_total = 80ull << 30;
    return m;
}

// Receives the file URLs QDesktopServices would hand to the file manager.
class UrlCatcher : public QObject {
    Q_OBJECT

public:
    QList<QUrl> urls;

public slots:
    void open(const QUrl& url) { urls.append(url); }
};

}  // namespace

class TestUiStudio : public QObject {
    Q_OBJECT

    QTemporaryDir m_tmp;
    QString m_runs;
    fs::path m_model;

    QString dataset() const {
        return QString::fromStdString((tandem::test::source_dir() / "datasets" / "demo_alpaca.jsonl").string());
    }
    QString path(const QString& name) const { return QDir(m_tmp.path()).filePath(name); }

    // A tiny CPU run of the demo model, set directly (for tests about the window, not the pages).
    tandem::RunConfig tinyConfig(const QString& name, int64_t maxSteps) const {
        return tandem::test::tiny_cpu_run(m_model.string(), dataset().toStdString(),
                                          QDir(m_runs).filePath(name).toStdString(), maxSteps);
    }

    // Demo model + demo dataset selected, tiny settings typed into the Train page; waits for Train.
    void prepareTinyRun(MainWindow& w, int maxSteps) {
        QSignalSpy model(w.modelPage(), &ModelPage::modelChanged);
        w.modelPage()->selectDemo();
        QTRY_VERIFY_WITH_TIMEOUT(!model.isEmpty(), 60000);
        QCOMPARE(model.last().at(1).toBool(), true);
        QSignalSpy data(w.dataPage(), &DataPage::datasetChanged);
        w.dataPage()->selectDataset(dataset());
        QTRY_VERIFY_WITH_TIMEOUT(!data.isEmpty() && data.last().at(2).toBool(), 60000);

        w.showPage(MainWindow::TrainPageIndex);
        QWidget* train = w.trainPage();
        auto setSpin = [train](const char* name, int value) {
            auto* spin = child<QSpinBox>(train, name);
            QVERIFY2(spin, name);
            spin->setValue(value);
            QCOMPARE(spin->value(), value);
        };
        setSpin("maxStepsSpin", maxSteps);
        setSpin("batchTokensSpin", 256);
        setSpin("maxSeqLenSpin", 128);
        setSpin("rankSpin", 4);
        auto* device = child<QComboBox>(train, "deviceCombo");
        QVERIFY(device);
        int cpu = -1;
        for (int i = 0; i < device->count(); ++i)
            if (device->itemText(i).contains("cpu", Qt::CaseInsensitive) ||
                device->itemData(i).toString().compare("cpu", Qt::CaseInsensitive) == 0)
                cpu = i;
        QVERIFY(cpu >= 0);
        device->setCurrentIndex(cpu);
        const tandem::RunConfig c = w.trainPage()->config();
        QCOMPARE(c.training.max_steps, int64_t(maxSteps));
        QCOMPARE(c.device, tandem::DeviceChoice::Cpu);
        auto* button = child<QPushButton>(train, "trainButton");
        QVERIFY(button);
        QTRY_VERIFY_WITH_TIMEOUT(button->isEnabled(), 60000);
    }

private slots:
    void initTestCase() {
        QStandardPaths::setTestModeEnabled(true);
        QCoreApplication::setOrganizationName("Tandem");
        QCoreApplication::setApplicationName("Tandem");
        QVERIFY(m_tmp.isValid());
        QSettings().clear();
        m_runs = path("runs");
        QSettings().setValue("runs/folder", m_runs);
        m_model = fs::path(path("demo-model").toStdString());
        tandem::create_demo_model(m_model);
    }

    void windowHasPagesMenusAndRestoresGeometry() {
        {
            MainWindow w;
            QCOMPARE(w.objectName(), QString("mainWindow"));
            auto* list = child<QListWidget>(&w, "pageList");
            auto* pages = child<QStackedWidget>(&w, "pages");
            QVERIFY(list && pages);
            QCOMPARE(list->count(), 6);
            QCOMPARE(pages->count(), 6);
            const char* names[] = {"modelPage", "dataPage", "trainPage", "monitorPage", "runsPage", "chatPage"};
            for (int i = 0; i < 6; ++i) QCOMPARE(pages->widget(i)->objectName(), QString(names[i]));
            list->setCurrentRow(MainWindow::RunsPageIndex);
            QCOMPARE(pages->currentWidget()->objectName(), QString("runsPage"));
            QCOMPARE(child<QAction>(&w, "trainAction")->shortcut(), QKeySequence("Ctrl+T"));
            QCOMPARE(child<QAction>(&w, "stopAction")->shortcut(), QKeySequence("Ctrl+."));
            QCOMPARE(child<QAction>(&w, "exportAction")->shortcut(), QKeySequence("Ctrl+E"));
            QCOMPARE(child<QAction>(&w, "openModelAction")->shortcut(), QKeySequence("Ctrl+O"));
            QCOMPARE(child<QAction>(&w, "openDatasetAction")->shortcut(), QKeySequence("Ctrl+D"));
            QCOMPARE(child<QAction>(&w, "aboutAction")->shortcut(), QKeySequence("F1"));
            w.show();
            w.resize(1111, 777);
            QVERIFY(QTest::qWaitForWindowExposed(&w));
            QVERIFY(w.close());
        }
        MainWindow again;
        QCOMPARE(again.size(), QSize(1111, 777));
    }

    void aboutShowsLicences() {
        MainWindow w;
        w.show();
        child<QAction>(&w, "aboutAction")->trigger();
        auto* about = child<AboutDialog>(&w, "aboutDialog");
        QVERIFY(about);
        const QString text = child<QLabel>(about, "licenseLabel")->text();
        for (const char* needle : {"GPL-3.0-or-later", "Qt 6: LGPL-3.0", "QCustomPlot: GPL-3.0-or-later",
                                   "nlohmann/json: MIT", "CLI11 (tandem-cli): BSD-3-Clause", "PCRE2: BSD-3-Clause",
                                   "utf8proc: MIT", "OpenBLAS: BSD-3-Clause", "NVIDIA proprietary"})
            QVERIFY2(text.contains(QLatin1String(needle)), qPrintable(QString("missing '%1' in: %2").arg(needle, text)));
        // The same licences as the Debian copyright file the package installs.
        QFile copyright(QString::fromStdString((tandem::test::source_dir() / "installer" / "copyright").string()));
        QVERIFY(copyright.open(QIODevice::ReadOnly));
        const QString deb = QString::fromUtf8(copyright.readAll());
        for (const char* needle : {"License: GPL-3+", "LGPL-3", "QCustomPlot", "nlohmann/json", "CLI11", "PCRE2 exception",
                                   "utf8proc", "OpenBLAS", "cuDNN"})
            QVERIFY2(deb.contains(QLatin1String(needle)), needle);
        about->close();
    }

    void aboutShowsVersions() {
        MainWindow w;
        w.show();
        child<QAction>(&w, "aboutAction")->trigger();
        auto* about = child<AboutDialog>(&w, "aboutDialog");
        QVERIFY(about);
        const QString text = child<QLabel>(about, "versionLabel")->text();
        QVERIFY2(text.contains(QString::fromLatin1(qVersion())), qPrintable(text));
        QVERIFY2(text.contains(AboutDialog::tandemVersion()), qPrintable(text));
        QVERIFY(text.contains("CUDA"));
        // The GPU line: its name when one is usable, else the reason (this CI machine has no GPU).
        const tandem::SystemInfo info = tandem::system_info();
        if (info.gpu_usable)
            QVERIFY2(text.contains(QString::fromStdString(info.gpu_name)), qPrintable(text));
        else
            QVERIFY2(text.contains("GPU: not usable"), qPrintable(text));
        about->close();
    }

    void trainStopResumeFinishExport() {
        MainWindow w;
        w.show();
        prepareTinyRun(w, 40);
        TrainingSession* session = w.session();
        QSignalSpy steps(session, &TrainingSession::stepCompleted);
        QSignalSpy finished(session, &TrainingSession::finished);
        QSignalSpy failed(session, &TrainingSession::failed);
        MonitorPage* monitor = w.monitorPage();
        // Stop as soon as the GUI has seen two steps (40 steps leave plenty of run to interrupt).
        connect(session, &TrainingSession::stepCompleted, this, [monitor](const tandem::StepMetrics& m) {
            if (m.step == 2) child<QPushButton>(monitor, "stopButton")->click();
        });
        QTest::mouseClick(child<QPushButton>(w.trainPage(), "trainButton"), Qt::LeftButton);
        QCOMPARE(w.currentPage(), int(MainWindow::MonitorPageIndex));
        QTRY_COMPARE_WITH_TIMEOUT(finished.count() + failed.count(), 1, 60000);
        QVERIFY2(failed.isEmpty(), failed.isEmpty() ? "" : qPrintable(failed.at(0).at(0).value<RunFailure>().message));
        QCOMPARE(finished.at(0).at(0).toBool(), true);
        session->disconnect(this);

        const int done = steps.count();
        QVERIFY(done >= 2 && done < 40);
        auto* progress = child<QProgressBar>(monitor, "progressBar");
        QCOMPARE(progress->value(), done);
        QCOMPARE(progress->maximum(), 40);
        QVERIFY(child<QLabel>(monitor, "etaLabel")->text().isEmpty());  // no ETA once the run stopped
        QCOMPARE(monitor->lossPlot()->pointCount("train"), done);
        QCOMPARE(monitor->throughputPlot()->pointCount("tokens_per_s"), done);
        QCOMPARE(monitor->lrPlot()->pointCount("lr"), done);
        QVERIFY(monitor->memoryPlot()->pointCount("weights") == done);
        QTRY_VERIFY_WITH_TIMEOUT(monitor->lossPlot()->replotCount() > 0, 5000);  // visible: it replotted
        QVERIFY(child<QLabel>(monitor, "statusLabel")->text().contains("Stopped"));
        QVERIFY(child<QPlainTextEdit>(monitor, "logView")->toPlainText().contains("checkpoint_saved"));
        auto* resume = child<QPushButton>(monitor, "resumeButton");
        QVERIFY(resume->isEnabled());
        QVERIFY(child<QPushButton>(monitor, "exportButton")->isEnabled());  // a checkpoint exists
        QVERIFY(!child<QPushButton>(monitor, "stopButton")->isEnabled());
        const QString runDir = monitor->runDir();
        QVERIFY(runDir.startsWith(m_runs));

        // Resume: the plots keep the first steps and the run goes to the end.
        finished.clear();
        QTest::mouseClick(resume, Qt::LeftButton);
        QVERIFY(session->isRunning());
        QVERIFY(!resume->isEnabled());
        QTRY_COMPARE_WITH_TIMEOUT(finished.count() + failed.count(), 1, 60000);
        QVERIFY2(failed.isEmpty(), failed.isEmpty() ? "" : qPrintable(failed.at(0).at(0).value<RunFailure>().message));
        QCOMPARE(finished.at(0).at(0).toBool(), false);
        QCOMPARE(progress->value(), 40);
        QCOMPARE(monitor->lossPlot()->pointCount("train"), 40);
        QCOMPARE(monitor->memoryPlot()->pointCount("weights"), 40);  // the memory of the steps before the stop too
        QVERIFY(child<QLabel>(monitor, "statusLabel")->text().contains("Finished"));
        QVERIFY2(child<QLabel>(monitor, "etaLabel")->text().contains("tokens seen in"),
                 qPrintable(child<QLabel>(monitor, "etaLabel")->text()));
        QVERIFY(!resume->isEnabled());
        QCOMPARE(monitor->runDir(), runDir);

        // Export through the dialog.
        auto* exportButton = child<QPushButton>(monitor, "exportButton");
        QVERIFY(exportButton->isEnabled());
        QTest::mouseClick(exportButton, Qt::LeftButton);
        auto* dialog = child<ExportDialog>(&w, "exportDialog");
        QVERIFY(dialog);
        QVERIFY(dialog->isVisible());
        // The default target is next to the run, not in the home folder.
        QCOMPARE(child<QLineEdit>(dialog, "exportFolderEdit")->text(),
                 QDir(QFileInfo(runDir).absolutePath()).filePath(QFileInfo(runDir).fileName() + "-adapter"));
        QVERIFY(!child<QPushButton>(dialog, "exportOpenFolderButton")->isEnabled());
        const QString out = path("exported adapter");
        child<QLineEdit>(dialog, "exportFolderEdit")->setText(out);
        QSignalSpy exported(dialog, &ExportDialog::exported);
        QTest::mouseClick(child<QPushButton>(dialog, "exportButton"), Qt::LeftButton);
        QTRY_COMPARE_WITH_TIMEOUT(exported.count(), 1, 30000);
        auto* result = child<QLabel>(dialog, "exportResultLabel");
        QVERIFY2(result->text().contains("adapter_model.safetensors"), qPrintable(result->text()));
        QVERIFY(result->text().contains(QDir::toNativeSeparators(out)));
        QVERIFY(QFileInfo::exists(out + "/adapter_config.json"));
        QVERIFY(QFileInfo::exists(out + "/adapter_model.safetensors"));
        // The whole result is shown (the dialog grew for it), and Open folder opens the exported folder.
        QTRY_VERIFY_WITH_TIMEOUT(result->height() >= result->heightForWidth(result->width()), 5000);
        QVERIFY(result->geometry().bottom() < dialog->height());
        UrlCatcher catcher;
        QDesktopServices::setUrlHandler(QStringLiteral("file"), &catcher, "open");
        child<QPushButton>(dialog, "exportOpenFolderButton")->click();
        QDesktopServices::unsetUrlHandler(QStringLiteral("file"));
        QCOMPARE(catcher.urls.size(), 1);
        QCOMPARE(catcher.urls.first().toLocalFile(), out);

        // Exporting again asks first: No keeps the folder as it is, Yes replaces.
        const QDateTime before = QFileInfo(out + "/adapter_model.safetensors").lastModified();
        answerNextMessageBox(QMessageBox::No);
        QTest::mouseClick(child<QPushButton>(dialog, "exportButton"), Qt::LeftButton);
        QTRY_VERIFY_WITH_TIMEOUT(result->text().contains("Not exported"), 10000);
        QCOMPARE(exported.count(), 1);
        answerNextMessageBox(QMessageBox::Yes);
        QTest::mouseClick(child<QPushButton>(dialog, "exportButton"), Qt::LeftButton);
        QTRY_COMPARE_WITH_TIMEOUT(exported.count(), 2, 30000);
        QVERIFY(QFileInfo(out + "/adapter_model.safetensors").lastModified() >= before);

        // The merged model: a full model folder (the demo base with the adapter folded in), with progress.
        auto* format = child<QComboBox>(dialog, "exportFormatCombo");
        format->setCurrentIndex(format->findData(QStringLiteral("merged:fp32")));
        const QString merged = path("merged model");
        child<QLineEdit>(dialog, "exportFolderEdit")->setText(merged);
        QTest::mouseClick(child<QPushButton>(dialog, "exportButton"), Qt::LeftButton);
        QTRY_COMPARE_WITH_TIMEOUT(exported.count(), 3, 30000);
        QVERIFY(QFileInfo::exists(merged + "/config.json"));
        QVERIFY(QFileInfo::exists(merged + "/model.safetensors"));
        QVERIFY(QFileInfo::exists(merged + "/tokenizer.json"));
        QVERIFY2(result->text().contains("model.safetensors"), qPrintable(result->text()));
        QCOMPARE(child<QProgressBar>(dialog, "exportProgress")->value(), 1000);
        dialog->close();

        // The exported adapter loads back in the engine (as the starting adapter of a new run).
        tandem::RunConfig again = session->config();
        again.init_adapter = out.toStdString();
        again.output_dir = path("continued").toStdString();
        again.training.max_steps = 1;
        try {
            tandem::Trainer t = tandem::Trainer::prepare(again);
            QVERIFY(t.plan().trainable_parameters > 0);
        } catch (const std::exception& e) {
            QFAIL(e.what());
        }
    }

    // The pages talk to each other through the window: the model's shape reaches the Train page's warnings,
    // the Data page's template choice reaches the run's config; the status bar says what auto will use, and
    // the Monitor says what Train waits for before the first run.
    void windowWiresShapeTemplateDeviceAndIdleTexts() {
        MainWindow w;
        auto* monitorStatus = child<QLabel>(w.monitorPage(), "statusLabel");
        QTRY_VERIFY_WITH_TIMEOUT(monitorStatus->text().contains("Choose a model"), 10000);
        const tandem::SystemInfo info = tandem::system_info();
        auto* device = child<QLabel>(&w, "deviceLabel");
        QTRY_COMPARE_WITH_TIMEOUT(
            device->text(),
            info.gpu_usable ? QStringLiteral("Device: auto (the GPU)") : QStringLiteral("Device: CPU (no usable GPU)"),
            30000);
        QVERIFY(!device->text().contains("this build"));

        QSignalSpy model(w.modelPage(), &ModelPage::modelChanged);
        w.modelPage()->selectDemo();
        QTRY_VERIFY_WITH_TIMEOUT(!model.isEmpty(), 60000);
        child<QSpinBox>(w.trainPage(), "maxSeqLenSpin")->setValue(4096);
        child<QSpinBox>(w.trainPage(), "batchTokensSpin")->setValue(4096);
        QTRY_VERIFY_WITH_TIMEOUT(w.trainPage()->warnings().join(' ').contains("above the model's context"), 10000);
        child<QSpinBox>(w.trainPage(), "maxSeqLenSpin")->setValue(128);
        QVERIFY(w.trainPage()->warnings().isEmpty());

        QSignalSpy data(w.dataPage(), &DataPage::datasetChanged);
        w.dataPage()->selectDataset(dataset());
        QTRY_VERIFY_WITH_TIMEOUT(!data.isEmpty() && data.last().at(2).toBool(), 60000);
        auto* combo = child<QComboBox>(w.dataPage(), "chatTemplateCombo");
        combo->setCurrentIndex(combo->findData(QStringLiteral("alpaca")));
        child<QCheckBox>(w.dataPage(), "trainOnAllCheck")->setChecked(true);
        QCOMPARE(w.trainPage()->config().data.chat_template, std::string("alpaca"));
        QVERIFY(w.trainPage()->config().data.train_on_all_tokens);
        QTRY_VERIFY_WITH_TIMEOUT(child<QPushButton>(w.trainPage(), "trainButton")->isEnabled(), 60000);
        QTRY_COMPARE_WITH_TIMEOUT(monitorStatus->text(),
                                  QStringLiteral("Ready: press Train on the Train page (Ctrl+T)."), 10000);
        QCOMPARE(child<QLabel>(&w, "stateLabel")->text(), QStringLiteral("Ready: press Train"));

        // Reopened settings put the template back on the Data page.
        tandem::RunConfig c = w.trainPage()->config();
        c.data.chat_template = "chatml";
        c.data.train_on_all_tokens = false;
        w.reopenSettings(c);
        QCOMPARE(combo->currentData().toString(), QStringLiteral("chatml"));
        QVERIFY(!child<QCheckBox>(w.dataPage(), "trainOnAllCheck")->isChecked());
        QCOMPARE(w.trainPage()->config().data.chat_template, std::string("chatml"));
    }

    void defaultRunsFolderHasOneTandem() {
        const QString folder = defaultRunsFolder();
        QVERIFY2(folder.endsWith("/Tandem/runs") && !folder.contains("Tandem/Tandem"), qPrintable(folder));
        QVERIFY(!ModelPage::demoFolder().contains("Tandem/Tandem"));
    }

    void unsupportedModelFolderIsExplained() {
        MainWindow w;
        w.show();
        const fs::path dir = fs::path(path("mystery-model").toStdString());
        tandem::test::write_file(dir / "config.json", R"({"architectures": ["MysteryForCausalLM"],
            "model_type": "mystery", "hidden_size": 64, "num_hidden_layers": 2, "num_attention_heads": 4,
            "intermediate_size": 128, "vocab_size": 100})");
        QSignalSpy model(w.modelPage(), &ModelPage::modelChanged);
        w.modelPage()->selectModel(QString::fromStdString(dir.string()));
        QTRY_VERIFY_WITH_TIMEOUT(!model.isEmpty(), 30000);
        QCOMPARE(model.last().at(1).toBool(), false);
        auto* status = child<QLabel>(w.modelPage(), "modelStatusLabel");
        QVERIFY(status);
        QTRY_VERIFY_WITH_TIMEOUT(status->text().contains("MysteryForCausalLM"), 10000);
        QVERIFY(!child<QPushButton>(w.trainPage(), "trainButton")->isEnabled());
    }

    void brokenDatasetIsExplained() {
        MainWindow w;
        w.show();
        const QString broken = path("broken.jsonl");
        tandem::test::write_file(broken.toStdString(),
                                 "{\"instruction\": \"a\", \"output\": \"b\"}\n{not json\n{\"instruction\": \"c\"}\n");
        QSignalSpy data(w.dataPage(), &DataPage::datasetChanged);
        w.dataPage()->selectDataset(broken);
        QTRY_VERIFY_WITH_TIMEOUT(!data.isEmpty(), 30000);
        auto* invalid = w.dataPage()->findChild<QWidget*>("invalidList");
        QVERIFY(invalid);
        // The broken line is listed with its number and what is wrong.
        auto* list = qobject_cast<QListWidget*>(invalid);
        QVERIFY(list);
        QTRY_VERIFY_WITH_TIMEOUT(list->count() >= 2, 10000);
        QVERIFY2(list->item(0)->text().startsWith("line 2") && list->item(0)->text().contains("JSON"),
                 qPrintable(list->item(0)->text()));
        QVERIFY2(list->item(1)->text().startsWith("line 3") && list->item(1)->text().contains("output"),
                 qPrintable(list->item(1)->text()));
    }

    void impossibleMemoryPlanBlocksTrain() {
        MainWindow w;
        w.show();
        prepareTinyRun(w, 4);
        QWidget* train = w.trainPage();
        // The largest micro-batch the field allows: the host cannot hold its activations.
        auto* batch = child<QSpinBox>(train, "batchTokensSpin");
        auto* seqLen = child<QSpinBox>(train, "maxSeqLenSpin");
        seqLen->setValue(seqLen->maximum());
        batch->setValue(batch->maximum());
        auto* button = child<QPushButton>(train, "trainButton");
        QTRY_VERIFY_WITH_TIMEOUT(!button->isEnabled(), 30000);
        auto* blocked = child<QLabel>(train, "trainBlockedLabel");
        QVERIFY(blocked);
        QTRY_VERIFY_WITH_TIMEOUT(!blocked->text().isEmpty() && !blocked->text().contains("Estimating"), 30000);
        QVERIFY2(blocked->text().contains("memory", Qt::CaseInsensitive) && blocked->text().contains("does not fit"),
                 qPrintable(blocked->text()));
        // The engine's advice is on the Memory line, in the page's words, and not printed a second time.
        const QString advice = child<QLabel>(train, "memoryLabel")->text().section('\n', 1);
        QVERIFY2(advice.contains("Batch tokens") && !advice.contains("training."), qPrintable(advice));
        QVERIFY2(!blocked->text().contains(advice), qPrintable(blocked->text()));
    }

    void failedRunShowsTheMessage() {
        MainWindow w;
        w.show();
        tandem::RunConfig c;
        c.model = path("no-model-here").toStdString();
        c.data.dataset = dataset().toStdString();
        c.device = tandem::DeviceChoice::Cpu;
        c.output_dir = path("runs/failed").toStdString();
        QSignalSpy failed(w.session(), &TrainingSession::failed);
        w.startRun(c);
        QCOMPARE(w.currentPage(), int(MainWindow::MonitorPageIndex));
        QTRY_COMPARE_WITH_TIMEOUT(failed.count(), 1, 30000);
        auto* status = child<QLabel>(w.monitorPage(), "statusLabel");
        QVERIFY2(status->text().startsWith("Failed") && status->text().contains("no-model-here"),
                 qPrintable(status->text()));
        QVERIFY(child<QPlainTextEdit>(w.monitorPage(), "logView")->toPlainText().contains("invalid input"));
        QVERIFY(!child<QPushButton>(w.monitorPage(), "resumeButton")->isEnabled());  // nothing to resume
        QVERIFY(child<QPushButton>(w.monitorPage(), "stopButton")->isEnabled() == false);
        QVERIFY(child<QLabel>(&w, "stateLabel")->text().contains("Failed"));
    }

    void closingDuringARunAsksAndStopsCleanly() {
        auto w = std::make_unique<MainWindow>();
        w->show();
        const tandem::RunConfig c = tinyConfig("closed", 400);
        QSignalSpy steps(w->session(), &TrainingSession::stepCompleted);
        w->startRun(c);
        QTRY_VERIFY_WITH_TIMEOUT(steps.count() >= 1, 60000);
        // No: the window stays and the run goes on.
        answerNextMessageBox(QMessageBox::No);
        QVERIFY(!w->close());
        QVERIFY(w->isVisible());
        QVERIFY(w->session()->isRunning());
        // Yes: the run stops with a checkpoint, then the window closes.
        answerNextMessageBox(QMessageBox::Yes);
        QVERIFY(!w->close());
        QTRY_VERIFY_WITH_TIMEOUT(!w->isVisible(), 30000);
        QVERIFY(!w->session()->isRunning());
        QVERIFY(tandem::latest_checkpoint(c.output_dir).has_value());
    }

    void stopShortcutThenResumeFromTheRunsPage() {
        MainWindow w;
        w.show();
        const tandem::RunConfig c = tinyConfig("from-runs", 40);
        TrainingSession* session = w.session();
        QSignalSpy finished(session, &TrainingSession::finished);
        QSignalSpy failed(session, &TrainingSession::failed);
        QString statusWhileStopping;
        connect(session, &TrainingSession::stepCompleted, this, [&](const tandem::StepMetrics& m) {
            if (m.step != 1) return;
            child<QAction>(&w, "stopAction")->trigger();  // Ctrl+.
            statusWhileStopping = child<QLabel>(w.monitorPage(), "statusLabel")->text();
        });
        w.startRun(c);
        QTRY_COMPARE_WITH_TIMEOUT(finished.count() + failed.count(), 1, 60000);
        QCOMPARE(finished.at(0).at(0).toBool(), true);
        QVERIFY2(statusWhileStopping.startsWith("Stopping"), qPrintable(statusWhileStopping));
        session->disconnect(this);
        const int done = int(w.monitorPage()->lossPlot()->pointCount("train"));

        // The Runs page asks to resume that folder: the window reads its config.json and continues it.
        finished.clear();
        emit w.runsPage()->resumeRequested(QString::fromStdString(c.output_dir));
        QVERIFY(session->isRunning());
        QCOMPARE(w.currentPage(), int(MainWindow::MonitorPageIndex));
        QTRY_COMPARE_WITH_TIMEOUT(finished.count() + failed.count(), 1, 60000);
        QVERIFY2(failed.isEmpty(), failed.isEmpty() ? "" : qPrintable(failed.at(0).at(0).value<RunFailure>().message));
        QCOMPARE(finished.at(0).at(0).toBool(), false);
        QVERIFY(done >= 1 && done < 40);
        QCOMPARE(w.monitorPage()->lossPlot()->pointCount("train"), 40);  // history + the new steps
        QVERIFY(fs::exists(fs::path(c.output_dir) / "adapter" / "adapter_config.json"));

        // Resuming a folder that is not a run says why.
        emit w.runsPage()->resumeRequested(path("not-a-run"));
        QVERIFY(!session->isRunning());
        auto* box = child<QMessageBox>(&w, "errorMessage");
        QVERIFY(box);
        QVERIFY2(box->text().contains("config.json"), qPrintable(box->text()));
        box->close();
    }

    // Runs -> Reopen settings on a fresh window: the run's model and dataset are selected on their pages, so
    // Train becomes available; other data can be chosen and a new run started. A model already selected
    // through a symlink to the run's folder counts as the same one.
    void reopenSettingsLoadsModelAndDatasetThenOtherData() {
        const QString link = path("demo-link");
        QVERIFY(QFile::link(QString::fromStdString(m_model.string()), link));
        tandem::RunConfig first = tinyConfig("reopen-source", 2);
        first.model = link.toStdString();  // the engine stores the resolved folder in config.json
        {
            tandem::Trainer t = tandem::Trainer::prepare(first);
            std::atomic<bool> stop{false};
            tandem::ProgressSink sink;
            t.run(sink, stop);
        }
        MainWindow w;
        w.show();
        auto reopen = [&] {
            w.showPage(MainWindow::RunsPageIndex);
            auto* table = child<QTableWidget>(w.runsPage(), "runsTable");
            QTRY_VERIFY_WITH_TIMEOUT(table->rowCount() > 0, 30000);
            int row = -1;
            QTRY_VERIFY_WITH_TIMEOUT(
                [&] {
                    for (int r = 0; r < table->rowCount(); ++r)
                        if (table->item(r, 0)->text() == "reopen-source") row = r;
                    return row >= 0;
                }(),
                30000);
            table->selectRow(row);
            QTest::mouseClick(child<QPushButton>(w.runsPage(), "reopenButton"), Qt::LeftButton);
            QCOMPARE(w.currentPage(), int(MainWindow::TrainPageIndex));
        };
        reopen();
        auto* button = child<QPushButton>(w.trainPage(), "trainButton");
        QTRY_VERIFY2_WITH_TIMEOUT(button->isEnabled(), qPrintable(button->toolTip()), 60000);
        QCOMPARE(QFileInfo(w.modelPage()->modelPath()).canonicalFilePath(),
                 QFileInfo(QString::fromStdString(m_model.string())).canonicalFilePath());
        QCOMPARE(w.dataPage()->datasetPath(), QFileInfo(dataset()).canonicalFilePath());
        QCOMPARE(child<QSpinBox>(w.trainPage(), "maxStepsSpin")->value(), 2);

        // Other data, then Train: a new run with the reopened settings and the new dataset.
        const QString chat =
            QString::fromStdString((tandem::test::source_dir() / "datasets" / "demo_chat.jsonl").string());
        QSignalSpy data(w.dataPage(), &DataPage::datasetChanged);
        w.dataPage()->selectDataset(chat);
        QTRY_VERIFY_WITH_TIMEOUT(!data.isEmpty() && data.last().at(0).toString() == chat && data.last().at(2).toBool(),
                                 60000);
        QTRY_VERIFY2_WITH_TIMEOUT(button->isEnabled(), qPrintable(button->toolTip()), 60000);
        QSignalSpy finished(w.session(), &TrainingSession::finished);
        QSignalSpy failed(w.session(), &TrainingSession::failed);
        QTest::mouseClick(button, Qt::LeftButton);
        QTRY_COMPARE_WITH_TIMEOUT(finished.count() + failed.count(), 1, 60000);
        QVERIFY2(failed.isEmpty(), failed.isEmpty() ? "" : qPrintable(failed.at(0).at(0).value<RunFailure>().message));
        const tandem::RunConfig second = w.session()->config();
        QCOMPARE(QString::fromStdString(second.data.dataset), chat);
        QCOMPARE(second.training.max_steps, int64_t(2));
        QVERIFY(second.output_dir != first.output_dir);

        // The Model page holds the model through the symlink: reopening keeps it (no re-inspection needed).
        QSignalSpy model(w.modelPage(), &ModelPage::modelChanged);
        w.modelPage()->selectModel(link);
        QTRY_VERIFY_WITH_TIMEOUT(!model.isEmpty(), 60000);
        reopen();
        QCOMPARE(w.modelPage()->modelPath(), link);
        QTRY_VERIFY2_WITH_TIMEOUT(button->isEnabled(), qPrintable(button->toolTip()), 60000);
        QCOMPARE(w.trainPage()->config().model, link.toStdString());
        QCOMPARE(w.dataPage()->datasetPath(), QFileInfo(dataset()).canonicalFilePath());  // the run's data again
    }

    // lr 1e5 makes the demo's loss non-finite after a few steps: the run stops itself and is called diverged on
    // the Monitor, in the status bar and on the Runs page; Resume is not offered; Export warns before it
    // exports the last good checkpoint.
    void divergedRunIsMarkedAndExportWarns() {
        MainWindow w;
        w.show();
        tandem::RunConfig c = tinyConfig("diverged", 40);
        c.training.lr = 1e5;
        c.training.checkpoint_every = 1;
        TrainingSession* session = w.session();
        QSignalSpy finished(session, &TrainingSession::finished);
        QSignalSpy failed(session, &TrainingSession::failed);
        QSignalSpy diverged(session, &TrainingSession::diverged);
        w.startRun(c);
        QTRY_COMPARE_WITH_TIMEOUT(finished.count() + failed.count() + diverged.count(), 1, 60000);
        QCOMPARE(diverged.count(), 1);
        MonitorPage* monitor = w.monitorPage();
        QCOMPARE(monitor->state(), MonitorPage::State::Diverged);
        const QString status = child<QLabel>(monitor, "statusLabel")->text();
        QVERIFY2(status.startsWith("Diverged at step") && status.contains("Lower the learning rate") &&
                     status.contains("Reopen settings"),
                 qPrintable(status));
        QCOMPARE(child<QLabel>(&w, "stateLabel")->text(), QString("Diverged"));
        QVERIFY(child<QPlainTextEdit>(monitor, "logView")->toPlainText().contains("diverged: training diverged"));
        QVERIFY(!child<QPushButton>(monitor, "resumeButton")->isEnabled());
        QVERIFY(!fs::exists(fs::path(c.output_dir) / "adapter"));

        // The Runs page (refreshed when the run ended) lists it as diverged.
        auto* table = child<QTableWidget>(w.runsPage(), "runsTable");
        QTRY_VERIFY_WITH_TIMEOUT(
            [&] {
                for (int r = 0; r < table->rowCount(); ++r)
                    if (table->item(r, 0)->text() == "diverged") return table->item(r, 3)->text() == "diverged";
                return false;
            }(),
            30000);

        // Export: a warning in the dialog, and a question first; No exports nothing, Yes the last good checkpoint.
        auto* exportButton = child<QPushButton>(monitor, "exportButton");
        QVERIFY(exportButton->isEnabled());
        QTest::mouseClick(exportButton, Qt::LeftButton);
        auto* dialog = child<ExportDialog>(&w, "exportDialog");
        QVERIFY(dialog);
        QVERIFY(child<QLabel>(dialog, "exportWarningLabel")->isVisible());
        QVERIFY(child<QLabel>(dialog, "exportWarningLabel")->text().contains("diverged"));
        const QString out = path("diverged-adapter");
        child<QLineEdit>(dialog, "exportFolderEdit")->setText(out);
        QSignalSpy exported(dialog, &ExportDialog::exported);
        answerNextMessageBox(QMessageBox::No);
        QTest::mouseClick(child<QPushButton>(dialog, "exportButton"), Qt::LeftButton);
        auto* result = child<QLabel>(dialog, "exportResultLabel");
        QTRY_VERIFY_WITH_TIMEOUT(result->text().contains("Not exported"), 10000);
        QVERIFY(!QFileInfo::exists(out + "/adapter_config.json"));
        answerNextMessageBox(QMessageBox::Yes);
        QTest::mouseClick(child<QPushButton>(dialog, "exportButton"), Qt::LeftButton);
        QTRY_COMPARE_WITH_TIMEOUT(exported.count(), 1, 30000);
        const QString source = exported.at(0).at(1).toString();
        QVERIFY2(source.startsWith("checkpoints/step-"), qPrintable(source));
        dialog->close();
        // A finished run's dialog has no warning.
        tandem::RunConfig ok = tinyConfig("not-diverged", 2);
        w.startRun(ok);
        QTRY_COMPARE_WITH_TIMEOUT(finished.count(), 1, 60000);
        ExportDialog* plain = w.exportRun(QString::fromStdString(ok.output_dir));
        QVERIFY(plain && !child<QLabel>(plain, "exportWarningLabel")->isVisible());
        plain->close();
    }

    // After a run, a start into a runs folder that cannot be written: the Monitor's plots are cleared at once
    // and keep their layout (no thin strips), and the failure says to choose a writable runs folder (an I/O
    // failure, not an internal error).
    void unwritableRunsFolderStartClearsPlotsAndSaysWhatToDo() {
        MainWindow w;
        w.resize(1280, 820);
        w.show();
        QVERIFY(QTest::qWaitForWindowExposed(&w));
        TrainingSession* session = w.session();
        QSignalSpy finished(session, &TrainingSession::finished);
        QSignalSpy failed(session, &TrainingSession::failed);
        w.startRun(tinyConfig("before-unwritable", 3));
        QTRY_COMPARE_WITH_TIMEOUT(finished.count(), 1, 60000);
        MonitorPage* monitor = w.monitorPage();
        QCOMPARE(monitor->lossPlot()->pointCount("train"), 3);

        const QString file = path("i-am-a-file");
        tandem::test::write_file(file.toStdString(), "x");
        tandem::RunConfig c = tinyConfig("x", 3);
        c.output_dir = (file + "/runs/x").toStdString();
        w.startRun(c);
        QTRY_COMPARE_WITH_TIMEOUT(failed.count(), 1, 30000);
        const RunFailure f = failed.at(0).at(0).value<RunFailure>();
        QCOMPARE(f.category, tandem::ErrorCategory::Io);
        QVERIFY2(f.message.contains("Choose a writable runs folder"), qPrintable(f.message));
        const QString status = child<QLabel>(monitor, "statusLabel")->text();
        QVERIFY2(status.startsWith("Failed") && status.contains("writable runs folder"), qPrintable(status));
        QVERIFY(!child<QLabel>(&w, "stateLabel")->text().contains("internal"));
        const std::pair<LivePlot*, const char*> plots[] = {{monitor->lossPlot(), "train"},
                                                           {monitor->throughputPlot(), "tokens_per_s"},
                                                           {monitor->memoryPlot(), "weights"},
                                                           {monitor->lrPlot(), "lr"}};
        for (const auto& [plot, series] : plots) {
            QCOMPARE(plot->pointCount(series), 0);
            QTRY_VERIFY_WITH_TIMEOUT(!plot->isDirty(), 5000);  // replotted since
            plot->replot();
            const QString size = QString("%1: axis rect %2 of %3 px")
                                     .arg(plot->objectName())
                                     .arg(plot->axisRect()->width())
                                     .arg(plot->width());
            QVERIFY2(plot->axisRect()->width() > plot->width() / 2, qPrintable(size));
            QVERIFY(plot->legend->itemCount() > 0);
            QCOMPARE(plot->xAxis->range().upper, 1.0);  // not the last run's 3 steps
        }
    }

    // A long one-line error (here: the Data page's, for a model folder without a tokenizer) wraps in its label
    // instead of widening the window.
    void longErrorWrapsInsteadOfWideningTheWindow() {
        MainWindow w;
        w.resize(1280, 820);
        w.show();
        QVERIFY(QTest::qWaitForWindowExposed(&w));
        QString deep = path("models");
        for (int i = 0; i < 6; ++i) deep += "/a-rather-long-folder-name-for-a-model-" + QString::number(i);
        tandem::test::write_file((deep + "/config.json").toStdString(), "{}");
        QSignalSpy data(w.dataPage(), &DataPage::datasetChanged);
        w.dataPage()->selectDataset(dataset());
        QTRY_VERIFY_WITH_TIMEOUT(!data.isEmpty(), 30000);
        w.dataPage()->setModel(deep);
        w.showPage(MainWindow::DataPageIndex);
        auto* info = child<QLabel>(w.dataPage(), "sampleInfoLabel");
        QTRY_VERIFY_WITH_TIMEOUT(info->text().contains("tokenizer could not be loaded"), 30000);
        QVERIFY(info->fontMetrics().horizontalAdvance(info->text()) > 1280);  // one line would not fit
        QTRY_VERIFY_WITH_TIMEOUT(info->height() > 2 * info->fontMetrics().height(), 5000);  // several lines
        QCOMPARE(w.width(), 1280);
    }

    void plotsKeepBoundedMemoryOver100kSteps() {
        MonitorPage page;
        page.resize(1000, 700);
        RunInfo info;
        info.plan.total_steps = 100000;
        info.plan.memory.total = 2ull << 30;
        info.runDir = path("synthetic");
        page.showStarted(info);
        for (int64_t s = 1; s <= 100000; ++s) page.addStep(syntheticStep(s, 100000));
        const int cap = LivePlot::kMaxPoints + 1;
        for (const char* series : {"train", "eval"}) {
            const int n = page.lossPlot()->pointCount(series);
            QVERIFY2(n > 0 && n <= cap, qPrintable(QString("%1: %2").arg(series).arg(n)));
        }
        QVERIFY(page.lossPlot()->pointCount("train") >= LivePlot::kMaxPoints / 2);
        QCOMPARE(page.lossPlot()->pointCount("eval"), 200);  // every 500th step: below the cap, all kept
        for (const char* s : {"steps_per_s", "tokens_per_s"}) QVERIFY(page.throughputPlot()->pointCount(s) <= cap);
        for (const char* s : {"weights", "lora_optimizer", "activations", "reserved", "plan", "device_total"}) {
            const int n = page.memoryPlot()->pointCount(s);
            QVERIFY2(n > 0 && n <= cap, s);
        }
        for (const char* s : {"lr", "grad_norm"}) QVERIFY(page.lrPlot()->pointCount(s) <= cap);
        QCOMPARE(child<QProgressBar>(&page, "progressBar")->value(), 100000);
        // Hidden: no replot happened; shown: it replots, with the latest point at the end of the curve.
        QCOMPARE(page.lossPlot()->replotCount(), 0);
        page.show();
        QTRY_VERIFY_WITH_TIMEOUT(page.lossPlot()->replotCount() > 0, 5000);
        const auto* graph = page.lossPlot()->graph(0);
        QCOMPARE((graph->data()->constEnd() - 1)->key, 100000.0);
        // The log pane is bounded too.
        for (int i = 0; i < MonitorPage::kMaxLogLines + 500; ++i)
            page.addEvent({tandem::RunEventKind::Info, "event " + std::to_string(i), i});
        QVERIFY(child<QPlainTextEdit>(&page, "logView")->blockCount() <= MonitorPage::kMaxLogLines);
    }

    // Data parallelism: the line under the memory plot lists every GPU with its memory and how busy it is (and
    // says so when NVML cannot tell); a CPU run shows none.
    void monitorShowsEveryGpu() {
        MonitorPage page;
        RunInfo info;
        info.plan.total_steps = 10;
        info.runDir = path("gpus");
        page.showStarted(info);
        page.addStep(syntheticStep(1, 10));
        QVERIFY(page.gpuLine()->isHidden());  // no GPU in the step: the CPU
        tandem::StepMetrics m = syntheticStep(2, 10);
        m.memory.gpus = {{0, 34ull << 30, 140ull << 30, 30ull << 30, 97}, {1, 33ull << 30, 140ull << 30, 30ull << 30, -1}};
        page.addStep(m);
        QVERIFY(!page.gpuLine()->isHidden());
        QCOMPARE(page.gpuLine()->text(), QString("GPU 0: 34.0 of 140.0 GiB in use, 97% busy  ·  "
                                                 "GPU 1: 33.0 of 140.0 GiB in use, busy: unknown"));
        page.showStarting(path("gpus2"));
        QVERIFY(page.gpuLine()->isHidden());  // a new run starts without the last one's GPUs
    }

    void seriesBufferDecimatesEvenly() {
        SeriesBuffer b(8);
        for (int i = 0; i < 100; ++i) b.append(i, i * 2.0);
        QVERIFY(b.size() <= 9);
        QVector<double> k, v;
        b.copyTo(k, v);
        QCOMPARE(k.back(), 99.0);  // the live end is always shown
        QCOMPARE(k.front(), 0.0);
        for (int i = 1; i + 1 < k.size(); ++i) QCOMPARE(k[i] - k[i - 1], double(b.stride()));
        b.clear();
        QCOMPARE(b.size(), 0);
        QCOMPARE(b.stride(), 1);
    }

    void lossPlotControls() {
        MonitorPage page;
        page.show();
        auto* slider = child<QSlider>(&page, "smoothingSlider");
        auto* log = child<QCheckBox>(&page, "logScaleCheck");
        QVERIFY(slider && log);
        slider->setValue(0);
        QCOMPARE(page.lossPlot()->smoothing(), 0.0);
        slider->setValue(90);
        QCOMPARE(page.lossPlot()->smoothing(), 0.9);
        QTest::mouseClick(log, Qt::LeftButton);
        QVERIFY(page.lossPlot()->logScale());
        QCOMPARE(page.lossPlot()->yAxis->scaleType(), QCPAxis::stLogarithmic);
        for (int s = 1; s <= 50; ++s) page.addStep(syntheticStep(s, 50));
        page.lossPlot()->refresh();
        QCOMPARE(page.lossPlot()->smoothedPointCount(), 50);
        // TensorBoard's debiased EMA: a constant stays constant; the first value is kept.
        const QVector<double> flat = LossPlot::smooth({2, 2, 2}, 0.9);
        for (double x : flat) QVERIFY(std::abs(x - 2) < 1e-12);
        const QVector<double> step = LossPlot::smooth({0, 2}, 0.5);
        QCOMPARE(step[0], 0.0);
        QVERIFY(std::abs(step[1] - 4.0 / 3.0) < 1e-12);
    }
};

QTEST_MAIN(TestUiStudio)
#include "test_ui_studio.moc"
