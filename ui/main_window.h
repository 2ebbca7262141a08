// SPDX-FileCopyrightText: 2026 The Tandem developers
// SPDX-License-Identifier: GPL-3.0-or-later
// tandem::ui::MainWindow — the studio's window: a page list (Model, Data, Train, Monitor, Runs) beside a
// stack of the pages, menus with shortcuts, a status bar with the device and the run state, and the one
// TrainingSession that runs the engine.
// Decisions a reader must know:
//  - The window wires the pages together as the contract says (model -> data/train, data -> train, train's
//    limits -> data, Train -> session + Monitor, Runs reopen/resume/export) and owns every engine action:
//    pages only emit signals.
//  - Reopen settings (reopenSettings) fills the Train page and selects the run's model and dataset on the
//    Model and Data pages, unless they hold the same folder and file already (canonical paths), so Train
//    becomes available as soon as those pages have checked them; other data may be chosen after that.
//  - Closing during a run asks; on yes it requests a stop and closes when the session reports the end, so
//    the checkpoint is written and the run folder stays resumable. The window never blocks waiting.
//  - Geometry and dock/toolbar state are saved to QSettings "window/geometry" and "window/state".
//  - At start, once the Runs page has listed the runs, the window offers to resume the newest run that a
//    studio left interrupted (killed or crashed mid-run: run_lock.h) with a question box ("interruptedRunPrompt":
//    Resume / Not now). Resume takes the same way as the Runs page's Resume (resumeRunDir). Each interruption
//    is asked about once: Not now is remembered in QSettings "runs/interruptionsOffered" (run folder and the
//    start time of the session that died), and the run stays on the Runs page as interrupted.
//  - The Chat page is told when a run starts and ends and on which device (ChatPage::setTrainingRun: as asked
//    at start, as resolved once it has loaded), so it refuses GPU chats while the run holds the GPU. A run
//    that may use the GPU while the chat's model is on it waits for the chat to close it (ChatPage::gpuReleased)
//    before it starts, so the run plans its memory with the chat's given back.
#pragma once

#include <QMainWindow>
#include <QPointer>
#include <QString>

#include <optional>
#include <utility>

#include "tandem/run_config.h"
#include "ui/run_scan.h"
#include "ui/run_types.h"

class QLabel;
class QListWidget;
class QStackedWidget;

namespace tandem::ui {

class ChatPage;
class DataPage;
class ExportDialog;
class ModelPage;
class MonitorPage;
class RunsPage;
class TrainingSession;
class TrainPage;

class MainWindow : public QMainWindow {
    Q_OBJECT
    Q_DISABLE_COPY_MOVE(MainWindow)

public:
    enum Page { ModelPageIndex, DataPageIndex, TrainPageIndex, MonitorPageIndex, RunsPageIndex, ChatPageIndex };

    explicit MainWindow(QWidget* parent = nullptr);
    ~MainWindow() override;

    ModelPage* modelPage() const { return m_model; }
    DataPage* dataPage() const { return m_data; }
    TrainPage* trainPage() const { return m_train; }
    MonitorPage* monitorPage() const { return m_monitor; }
    RunsPage* runsPage() const { return m_runs; }
    ChatPage* chatPage() const { return m_chat; }
    TrainingSession* session() const { return m_session; }
    ExportDialog* exportDialog() const;  // the open one, or null
    int currentPage() const;

    // The runs folder: QSettings "runs/folder", default defaultRunsFolder() (app_paths.h).
    static QString runsFolder();

public slots:
    void showPage(int index);
    // The demo model, and `dataset` when given (main --demo passes datasets/demo_alpaca.jsonl).
    void selectDemo(const QString& dataset = {});
    void openModelFolder();
    void openDataset();
    void train();  // presses the Train page's Train button (it explains itself when disabled)
    void startRun(const tandem::RunConfig& config);
    void stopRun();
    void resumeRun();                            // the run the Monitor shows
    void resumeRunDir(const QString& runDir);    // a run from the Runs page
    void reopenSettings(const tandem::RunConfig& config);  // a run's settings, model and dataset, for a new run
    ExportDialog* exportRun(const QString& runDir = {});
    void showAbout();

protected:
    void closeEvent(QCloseEvent* event) override;

private:
    void buildMenus();
    void offerInterruptedRun(const QList<RunEntry>& runs);
    void onRunEnded();
    void startSession(const tandem::RunConfig& config, bool resume);
    void setStateText(const QString& text);
    void showError(const QString& title, const QString& message);

    QListWidget* m_pageList = nullptr;
    QStackedWidget* m_pages = nullptr;
    ModelPage* m_model = nullptr;
    DataPage* m_data = nullptr;
    TrainPage* m_train = nullptr;
    MonitorPage* m_monitor = nullptr;
    RunsPage* m_runs = nullptr;
    ChatPage* m_chat = nullptr;
    TrainingSession* m_session = nullptr;
    QPointer<ExportDialog> m_exportDialog;
    QLabel* m_deviceLabel = nullptr;
    QLabel* m_stateLabel = nullptr;
    bool m_closeWhenStopped = false;
    bool m_interruptedOffered = false;  // the start-up offer is made once, on the first listing of the runs
    std::optional<std::pair<tandem::RunConfig, bool>> m_pendingStart;  // waits for the chat to free the GPU
};

}  // namespace tandem::ui
