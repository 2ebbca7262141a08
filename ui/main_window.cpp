// SPDX-FileCopyrightText: 2026 The Tandem developers
// SPDX-License-Identifier: GPL-3.0-or-later
// MainWindow: construction (pages, list, menus, status bar), the contract's wiring, and the run actions.
#include "ui/main_window.h"

#include <QAction>
#include <QApplication>
#include <QCloseEvent>
#include <QDir>
#include <QFileDialog>
#include <QHBoxLayout>
#include <QIcon>
#include <QKeySequence>
#include <QLabel>
#include <QListWidget>
#include <QMenuBar>
#include <QMessageBox>
#include <QPushButton>
#include <QSettings>
#include <QStackedWidget>
#include <QStandardPaths>
#include <QStatusBar>

#include <string>

#include "tandem/error.h"
#include "tandem/run_config.h"
#include "tandem/system_info.h"
#include "ui/app_paths.h"
#include "ui/about_dialog.h"
#include "ui/data_page.h"
#include "ui/export_dialog.h"
#include "ui/model_page.h"
#include "ui/monitor_page.h"
#include "ui/chat_page.h"
#include "ui/recent_list.h"
#include "ui/runs_page.h"
#include "ui/train_page.h"
#include "ui/training_session.h"

namespace tandem::ui {

namespace {

QString str(std::string_view s) { return QString::fromUtf8(s.data(), static_cast<qsizetype>(s.size())); }

const QString kInterruptionsOfferedKey = QStringLiteral("runs/interruptionsOffered");
constexpr qsizetype kInterruptionsRemembered = 50;

// One interruption of one run: its folder and the start of the session that died (a run resumed and
// interrupted again is asked about again).
QString interruptionKey(const RunEntry& run) {
    return run.dir + QLatin1Char('@') + run.sessionStarted.toString(Qt::ISODateWithMs);
}

}  // namespace

MainWindow::MainWindow(QWidget* parent) : QMainWindow(parent) {
    setObjectName(QStringLiteral("mainWindow"));
    setWindowTitle(QStringLiteral("Tandem"));
    setWindowIcon(QIcon(QStringLiteral(":/icons/tandem.svg")));

    m_session = new TrainingSession(this);
    m_model = new ModelPage(this);
    m_data = new DataPage(this);
    m_train = new TrainPage(this);
    m_monitor = new MonitorPage(this);
    m_runs = new RunsPage(this);
    m_chat = new ChatPage(this);
    m_monitor->attach(m_session);

    m_pages = new QStackedWidget(this);
    m_pages->setObjectName(QStringLiteral("pages"));
    m_pageList = new QListWidget(this);
    m_pageList->setObjectName(QStringLiteral("pageList"));
    m_pageList->setIconSize(QSize(24, 24));
    m_pageList->setSpacing(2);
    m_pageList->setFixedWidth(150);
    m_pageList->setToolTip(tr("Pages (Ctrl+1 … Ctrl+6)"));
    const struct {
        QWidget* page;
        const char* icon;
        QString name;
        QString tip;
    } pages[] = {
        {m_model, "model", tr("Model"), tr("Choose the model to fine-tune")},
        {m_data, "data", tr("Data"), tr("Choose and inspect the dataset")},
        {m_train, "train", tr("Train"), tr("LoRA and optimizer settings, memory estimate, Train")},
        {m_monitor, "monitor", tr("Monitor"), tr("Live plots and log of the current run")},
        {m_runs, "runs", tr("Runs"), tr("Every run in the runs folder: compare, reopen, resume, export")},
        {m_chat, "tandem", tr("Chat"), tr("Try the model: chat with it, base and tuned side by side")},
    };
    for (const auto& p : pages) {
        auto* item = new QListWidgetItem(QIcon(QStringLiteral(":/icons/%1.svg").arg(QLatin1String(p.icon))), p.name);
        item->setToolTip(p.tip);
        m_pageList->addItem(item);
        m_pages->addWidget(p.page);
    }
    connect(m_pageList, &QListWidget::currentRowChanged, m_pages, &QStackedWidget::setCurrentIndex);
    m_pageList->setCurrentRow(ModelPageIndex);

    auto* central = new QWidget(this);
    auto* layout = new QHBoxLayout(central);
    layout->setContentsMargins(4, 4, 4, 4);
    layout->addWidget(m_pageList);
    layout->addWidget(m_pages, 1);
    setCentralWidget(central);

    // Contract wiring between the pages.
    connect(m_model, &ModelPage::modelChanged, m_data, [this](const QString& folder, bool) { m_data->setModel(folder); });
    connect(m_model, &ModelPage::modelShape, m_train, &TrainPage::setModelShape);
    connect(m_model, &ModelPage::modelChanged, m_train, &TrainPage::setModel);
    connect(m_data, &DataPage::datasetColumns, m_train, &TrainPage::setColumns);
    connect(m_data, &DataPage::datasetChanged, m_train, &TrainPage::setDataset);
    connect(m_data, &DataPage::renderingChanged, m_train, &TrainPage::setRendering);
    connect(m_data, &DataPage::checked, m_train, &TrainPage::setDataCheck);
    connect(m_train, &TrainPage::limitsChanged, m_data, &DataPage::setLimits);
    connect(m_train, &TrainPage::trainRequested, this, &MainWindow::startRun);
    connect(m_train, &TrainPage::runsFolderChanged, m_runs, &RunsPage::setRunsFolder);
    connect(m_model, &ModelPage::modelChanged, m_chat, [this](const QString& folder, bool) { m_chat->setModel(folder); });
    connect(m_train, &TrainPage::runsFolderChanged, m_chat, &ChatPage::setRunsFolder);
    connect(m_session, &TrainingSession::finished, m_chat, [this](bool) { m_chat->refreshAdapters(); });  // a new adapter
    // The run's hold on the GPU: the device as asked while it loads, as resolved once started.
    connect(m_session, &TrainingSession::runningChanged, m_chat, [this](bool running) {
        m_chat->setTrainingRun(running, m_session->config().device);
    });
    connect(m_session, &TrainingSession::started, m_chat,
            [this](const RunInfo& info) { m_chat->setTrainingRun(true, info.plan.config.device); });
    connect(m_train, &TrainPage::gpuChecked, m_chat, &ChatPage::setGpuAvailable);
    connect(m_chat, &ChatPage::gpuReleased, this, [this] {
        if (!m_pendingStart) return;
        const auto [config, resume] = *m_pendingStart;
        m_pendingStart.reset();
        m_session->start(config, resume);
    });
    connect(m_runs, &RunsPage::reopenConfig, this, &MainWindow::reopenSettings);
    connect(m_runs, &RunsPage::resumeRequested, this, &MainWindow::resumeRunDir);
    connect(m_runs, &RunsPage::runsListed, this, &MainWindow::offerInterruptedRun);
    connect(m_runs, &RunsPage::exportRequested, this, [this](const QString& dir) { exportRun(dir); });
    connect(m_monitor, &MonitorPage::stopRequested, this, &MainWindow::stopRun);
    connect(m_monitor, &MonitorPage::resumeRequested, this, &MainWindow::resumeRun);
    connect(m_monitor, &MonitorPage::exportRequested, this, [this](const QString& dir) { exportRun(dir); });

    // Session -> window state.
    connect(m_session, &TrainingSession::runningChanged, m_train, &TrainPage::setRunning);
    connect(m_session, &TrainingSession::runningChanged, this, [this](bool running) {
        if (running) setStateText(tr("Starting…"));
    });
    connect(m_session, &TrainingSession::started, this, [this](const RunInfo& info) {
        m_deviceLabel->setText(tr("Device: %1").arg(str(device_choice_name(info.plan.config.device))));
        setStateText(tr("Running: step %1 / %2").arg(info.startStep).arg(info.plan.total_steps));
        m_runs->refresh();  // the new run folder exists now
    });
    connect(m_session, &TrainingSession::stepCompleted, this, [this](const StepMetrics& m) {
        setStateText(m_session->stopRequested() ? tr("Stopping…") : tr("Running: step %1 / %2").arg(m.step).arg(m.total_steps));
    });
    connect(m_session, &TrainingSession::finished, this, [this](bool stopped) {
        setStateText(stopped ? tr("Stopped") : tr("Finished"));
        onRunEnded();
    });
    connect(m_session, &TrainingSession::diverged, this, [this](const QString& message) {
        setStateText(tr("Diverged"));
        statusBar()->showMessage(message, 15000);
        onRunEnded();
    });
    connect(m_session, &TrainingSession::failed, this, [this](const RunFailure& f) {
        setStateText(tr("Failed (%1)").arg(categoryName(f.category)));
        statusBar()->showMessage(f.message, 15000);
        onRunEnded();
    });

    m_deviceLabel = new QLabel(this);
    m_deviceLabel->setObjectName(QStringLiteral("deviceLabel"));
    m_deviceLabel->setText(cuda_backend_built() ? tr("Device: auto (CUDA when a GPU is usable)")
                                                : tr("Device: CPU (this build has no CUDA backend)"));
    m_deviceLabel->setToolTip(tr("The device of the current run"));
    // Once system_info answered (the Train page asks it off the GUI thread): what auto will choose.
    connect(m_train, &TrainPage::gpuChecked, this, [this](bool usable, const QString& reason) {
        if (m_session->isRunning()) return;
        m_deviceLabel->setText(usable ? tr("Device: auto (the GPU)") : tr("Device: CPU (no usable GPU)"));
        m_deviceLabel->setToolTip(
            usable ? tr("Runs with Device auto use the GPU")
                   : tr("Runs use the CPU: %1").arg(reason.isEmpty() ? tr("no usable GPU") : reason));
    });
    connect(m_train, &TrainPage::readinessChanged, m_monitor, &MonitorPage::setIdleHint);
    connect(m_train, &TrainPage::readinessChanged, this, [this](const QString& reason) {
        if (!m_session->isRunning() && m_monitor->state() == MonitorPage::State::Idle)
            setStateText(reason.isEmpty() ? tr("Ready: press Train") : tr("Idle"));
    });
    m_stateLabel = new QLabel(tr("Idle"), this);
    m_stateLabel->setObjectName(QStringLiteral("stateLabel"));
    m_stateLabel->setToolTip(tr("The state of the training run"));
    statusBar()->addPermanentWidget(m_deviceLabel);
    statusBar()->addPermanentWidget(m_stateLabel);

    buildMenus();

    m_runs->setRunsFolder(runsFolder());
    m_chat->setRunsFolder(runsFolder());
    m_monitor->setIdleHint(m_train->blockedReason());
    QSettings settings;
    if (!restoreGeometry(settings.value(QStringLiteral("window/geometry")).toByteArray())) resize(1280, 820);
    restoreState(settings.value(QStringLiteral("window/state")).toByteArray());
}

MainWindow::~MainWindow() = default;  // the session (a child) requests a stop and joins its thread

QString MainWindow::runsFolder() {
    const QString fallback = defaultRunsFolder();
    const QString folder = QSettings().value(QStringLiteral("runs/folder")).toString();
    return folder.isEmpty() ? fallback : folder;
}

void MainWindow::buildMenus() {
    auto action = [this](QMenu* menu, const QString& text, const QKeySequence& key, const QString& icon,
                         const QString& objectName, auto slot) {
        QAction* a = menu->addAction(text);
        a->setObjectName(objectName);
        if (!key.isEmpty()) a->setShortcut(key);
        if (!icon.isEmpty()) a->setIcon(QIcon(QStringLiteral(":/icons/%1.svg").arg(icon)));
        connect(a, &QAction::triggered, this, slot);
        return a;
    };

    QMenu* file = menuBar()->addMenu(tr("&File"));
    action(file, tr("Open &model folder…"), QKeySequence(Qt::CTRL | Qt::Key_O), QStringLiteral("model"),
           QStringLiteral("openModelAction"), [this] { openModelFolder(); });
    action(file, tr("Open &dataset…"), QKeySequence(Qt::CTRL | Qt::Key_D), QStringLiteral("data"),
           QStringLiteral("openDatasetAction"), [this] { openDataset(); });
    action(file, tr("Use the d&emo model"), QKeySequence(), QString(), QStringLiteral("demoAction"),
           [this] { selectDemo(); });
    file->addSeparator();
    action(file, tr("&Export adapter…"), QKeySequence(Qt::CTRL | Qt::Key_E), QStringLiteral("export"),
           QStringLiteral("exportAction"), [this] { exportRun(); });
    file->addSeparator();
    action(file, tr("&Quit"), QKeySequence::Quit, QString(), QStringLiteral("quitAction"), [this] { close(); });

    QMenu* run = menuBar()->addMenu(tr("&Run"));
    action(run, tr("&Train"), QKeySequence(Qt::CTRL | Qt::Key_T), QStringLiteral("train"),
           QStringLiteral("trainAction"), [this] { train(); });
    QAction* stop = action(run, tr("&Stop"), QKeySequence(Qt::CTRL | Qt::Key_Period), QStringLiteral("stop"),
                           QStringLiteral("stopAction"), [this] { stopRun(); });
    QAction* resume = action(run, tr("&Resume"), QKeySequence(), QStringLiteral("resume"),
                             QStringLiteral("resumeAction"), [this] { resumeRun(); });
    stop->setEnabled(false);
    connect(m_session, &TrainingSession::runningChanged, stop, &QAction::setEnabled);
    connect(m_session, &TrainingSession::runningChanged, resume, [resume](bool running) { resume->setEnabled(!running); });

    QMenu* view = menuBar()->addMenu(tr("&View"));
    for (int i = 0; i < m_pageList->count(); ++i) {
        QAction* a = view->addAction(m_pageList->item(i)->icon(), m_pageList->item(i)->text());
        a->setShortcut(QKeySequence(Qt::CTRL | (Qt::Key_1 + i)));
        connect(a, &QAction::triggered, this, [this, i] { showPage(i); });
    }

    QMenu* help = menuBar()->addMenu(tr("&Help"));
    action(help, tr("&About Tandem"), QKeySequence(Qt::Key_F1), QStringLiteral("tandem"),
           QStringLiteral("aboutAction"), [this] { showAbout(); });
    action(help, tr("About &Qt"), QKeySequence(), QString(), QStringLiteral("aboutQtAction"),
           [] { QApplication::aboutQt(); });
}

ExportDialog* MainWindow::exportDialog() const { return m_exportDialog; }

int MainWindow::currentPage() const { return m_pages->currentIndex(); }

void MainWindow::showPage(int index) { m_pageList->setCurrentRow(index); }

void MainWindow::selectDemo(const QString& dataset) {
    m_model->selectDemo();
    if (!dataset.isEmpty()) m_data->selectDataset(dataset);
    showPage(dataset.isEmpty() ? ModelPageIndex : TrainPageIndex);
}

void MainWindow::reopenSettings(const tandem::RunConfig& config) {
    m_train->setConfig(config);
    m_data->setRendering(QString::fromStdString(config.data.chat_template), config.data.train_on_all_tokens);
    const QString model = QString::fromStdString(config.model);
    if (!model.isEmpty() && !samePath(m_model->modelPath(), model)) m_model->selectModel(model);
    const QString dataset = QString::fromStdString(config.data.dataset);
    const QString format = QString::fromStdString(config.data.format);
    QVariantMap columns;
    for (const auto& [key, column] : config.data.columns)
        columns.insert(QString::fromStdString(key), QString::fromStdString(column));
    if (!dataset.isEmpty() &&
        (!samePath(m_data->datasetPath(), dataset) || m_data->format() != format || m_data->columns() != columns))
        m_data->selectDatasetWithFormat(dataset, format, columns);
    showPage(TrainPageIndex);
}

void MainWindow::openModelFolder() {
    showPage(ModelPageIndex);
    const QString start = QSettings().value(QStringLiteral("model/lastFolder"), QDir::homePath()).toString();
    const QString folder = QFileDialog::getExistingDirectory(this, tr("Open a Hugging Face model folder"), start);
    if (!folder.isEmpty()) m_model->selectModel(folder);
}

void MainWindow::openDataset() {
    showPage(DataPageIndex);
    const QString start = QSettings().value(QStringLiteral("data/lastFolder"), QDir::homePath()).toString();
    const QString file = QFileDialog::getOpenFileName(this, tr("Open a dataset"), start,
                                                      tr("Datasets (*.jsonl *.json *.parquet *.csv *.tsv *.txt);;All files (*)"));
    if (!file.isEmpty()) m_data->selectDataset(file);
}

void MainWindow::train() {
    showPage(TrainPageIndex);
    auto* button = m_train->findChild<QPushButton*>(QStringLiteral("trainButton"));
    if (button && button->isEnabled()) {
        button->click();
        return;
    }
    const QString why = button ? button->toolTip() : QString();
    statusBar()->showMessage(why.isEmpty() ? tr("Training cannot start yet: see the Train page.") : why, 8000);
}

void MainWindow::startRun(const tandem::RunConfig& config) {
    if (m_session->isRunning() || m_pendingStart) {
        statusBar()->showMessage(tr("A run is in progress: stop it first."), 8000);
        showPage(MonitorPageIndex);
        return;
    }
    startSession(config, /*resume=*/false);
    showPage(MonitorPageIndex);
}

// The Chat page first: from now on it refuses GPU chats; when its model is on the GPU it closes it and the run
// starts on gpuReleased (a run that loaded beside it would plan with less memory, or not fit at all).
void MainWindow::startSession(const tandem::RunConfig& config, bool resume) {
    m_chat->setTrainingRun(true, config.device);
    if (m_chat->releasingGpu()) {
        m_pendingStart.emplace(config, resume);
        setStateText(tr("Closing the chat's model on the GPU…"));
        return;
    }
    m_session->start(config, resume);
}

void MainWindow::stopRun() {
    if (!m_session->isRunning()) return;
    m_session->requestStop();
    m_monitor->showStopping();
    setStateText(tr("Stopping…"));
}

void MainWindow::resumeRun() {
    const QString dir = m_monitor->runDir();
    if (dir.isEmpty()) {
        showPage(RunsPageIndex);
        statusBar()->showMessage(tr("Choose a stopped run on the Runs page and press Resume."), 8000);
        return;
    }
    resumeRunDir(dir);
}

void MainWindow::resumeRunDir(const QString& runDir) {
    if (m_session->isRunning() || m_pendingStart) {
        statusBar()->showMessage(tr("A run is in progress: stop it first."), 8000);
        return;
    }
    tandem::RunConfig config;
    try {
        // The run's resolved config.json (a small file): resume must use the settings the run started with.
        config = tandem::load_run_config((QDir(runDir).filePath(QStringLiteral("config.json"))).toStdString());
    } catch (const tandem::Error& e) {
        showError(tr("Cannot resume"), QString::fromStdString(e.what()));
        return;
    }
    config.output_dir = QDir(runDir).absolutePath().toStdString();
    startSession(config, /*resume=*/true);
    showPage(MonitorPageIndex);
}

ExportDialog* MainWindow::exportRun(const QString& runDir) {
    const QString dir = runDir.isEmpty() ? m_monitor->runDir() : runDir;
    if (dir.isEmpty()) {
        showPage(RunsPageIndex);
        statusBar()->showMessage(tr("Choose a run on the Runs page and press Export."), 8000);
        return nullptr;
    }
    if (m_exportDialog) {
        if (m_exportDialog->runDir() == dir) {
            m_exportDialog->raise();
            m_exportDialog->activateWindow();
            return m_exportDialog;
        }
        if (m_exportDialog->isExporting()) {
            statusBar()->showMessage(tr("An export is in progress."), 8000);
            return m_exportDialog;
        }
        m_exportDialog->close();
    }
    auto* dialog = new ExportDialog(dir, this);
    dialog->setAttribute(Qt::WA_DeleteOnClose);
    connect(dialog, &ExportDialog::exported, this, [this](const QString& folder) {
        statusBar()->showMessage(tr("Adapter exported to %1").arg(QDir::toNativeSeparators(folder)), 10000);
    });
    m_exportDialog = dialog;
    dialog->open();
    return dialog;
}

void MainWindow::showAbout() {
    auto* about = new AboutDialog(this);
    about->setAttribute(Qt::WA_DeleteOnClose);
    about->open();
}

void MainWindow::offerInterruptedRun(const QList<RunEntry>& runs) {
    if (m_interruptedOffered) return;
    m_interruptedOffered = true;
    if (m_session->isRunning() || m_pendingStart) return;
    const QStringList offered = QSettings().value(kInterruptionsOfferedKey).toStringList();
    QList<RunEntry> interrupted;
    for (const RunEntry& r : runs)
        if (r.status == RunStatus::Interrupted && !offered.contains(interruptionKey(r))) interrupted.append(r);
    if (interrupted.isEmpty()) return;
    const RunEntry run = interrupted.first();  // the newest
    QString details = run.hasCheckpoint
                          ? tr("Resume continues it from its latest complete checkpoint (step %1), with the same "
                               "result as if it had never stopped.")
                                .arg(run.checkpointStep)
                          : tr("No checkpoint was written before it closed: Resume starts it again from the first "
                               "step with the same settings.");
    details += QLatin1Char(' ') + tr("Not now keeps it on the Runs page as interrupted, where Resume continues it "
                                     "later.");
    if (interrupted.size() > 1)
        details += QLatin1Char(' ') + tr("%n more interrupted run(s) are listed there.", nullptr,
                                         static_cast<int>(interrupted.size() - 1));
    auto* box = new QMessageBox(
        QMessageBox::Question, tr("Resume the interrupted run?"),
        run.steps > 0 ? tr("Tandem closed while the run %1 was training, after step %2.").arg(run.name).arg(run.steps)
                      : tr("Tandem closed while the run %1 was starting.").arg(run.name),
        QMessageBox::NoButton, this);
    box->setObjectName(QStringLiteral("interruptedRunPrompt"));
    box->setTextFormat(Qt::PlainText);  // a run's name is not markup
    box->setInformativeText(details);
    QPushButton* resume = box->addButton(tr("Resume"), QMessageBox::AcceptRole);
    resume->setObjectName(QStringLiteral("resumeInterruptedButton"));
    box->addButton(tr("Not now"), QMessageBox::RejectRole)->setObjectName(QStringLiteral("notNowButton"));
    box->setDefaultButton(resume);
    box->setAttribute(Qt::WA_DeleteOnClose);
    QStringList keys;
    for (const RunEntry& r : interrupted) keys.append(interruptionKey(r));
    connect(box, &QMessageBox::finished, this, [this, box, resume, keys, dir = run.dir] {
        if (box->clickedButton() == resume) {
            resumeRunDir(dir);
            return;
        }
        QStringList remembered = QSettings().value(kInterruptionsOfferedKey).toStringList() + keys;
        if (remembered.size() > kInterruptionsRemembered)
            remembered = remembered.mid(remembered.size() - kInterruptionsRemembered);
        QSettings().setValue(kInterruptionsOfferedKey, remembered);
    });
    box->open();
}

void MainWindow::onRunEnded() {
    m_runs->setRunsFolder(runsFolder());
    m_runs->refresh();
    if (m_closeWhenStopped) close();
}

void MainWindow::setStateText(const QString& text) { m_stateLabel->setText(text); }

void MainWindow::showError(const QString& title, const QString& message) {
    auto* box = new QMessageBox(QMessageBox::Warning, title, message, QMessageBox::Ok, this);
    box->setObjectName(QStringLiteral("errorMessage"));
    box->setAttribute(Qt::WA_DeleteOnClose);
    box->open();
    statusBar()->showMessage(message, 15000);
}

void MainWindow::closeEvent(QCloseEvent* event) {
    if (m_session->isRunning()) {
        event->ignore();
        if (m_closeWhenStopped) return;  // already stopping; the window closes when the run ends
        const auto answer = QMessageBox::question(
            this, tr("A run is in progress"),
            tr("Stop the run and quit? The current step finishes and a checkpoint is written; you can resume "
               "the run later from the Runs page."),
            QMessageBox::Yes | QMessageBox::No, QMessageBox::No);
        if (answer != QMessageBox::Yes) return;
        if (!m_session->isRunning()) {  // it ended while the question was open
            QMetaObject::invokeMethod(this, &QWidget::close, Qt::QueuedConnection);
            return;
        }
        m_closeWhenStopped = true;
        stopRun();
        setStateText(tr("Stopping, then quitting…"));
        return;
    }
    QSettings settings;
    settings.setValue(QStringLiteral("window/geometry"), saveGeometry());
    settings.setValue(QStringLiteral("window/state"), saveState());
    if (m_exportDialog && m_exportDialog->isExporting()) {
        event->ignore();
        statusBar()->showMessage(tr("An export is in progress: the window closes when it ends."), 8000);
        connect(m_exportDialog, &ExportDialog::exported, this, &QWidget::close, Qt::QueuedConnection);
        connect(m_exportDialog, &ExportDialog::exportFailed, this, &QWidget::close, Qt::QueuedConnection);
        return;
    }
    event->accept();
}

}  // namespace tandem::ui
