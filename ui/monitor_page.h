// SPDX-FileCopyrightText: 2026 The Tandem developers
// SPDX-License-Identifier: GPL-3.0-or-later
// tandem::ui::MonitorPage — the live view of a run: status, progress with epoch and ETA, four plots (loss,
// throughput, memory, learning rate and gradient norm), the engine's events, and Stop / Resume / Export.
// Decisions a reader must know:
//  - The page only shows and asks: Stop, Resume and Export are signals (stopRequested, resumeRequested,
//    exportRequested); the main window owns the TrainingSession and acts on them. attach() connects the
//    session's signals to the show* slots, which tests may also call directly.
//  - Every start clears the plots at once (showStarting), keeping their layout, so a start that fails shows
//    no data or axes of the run before; a resumed run's earlier steps come in RunInfo::history.
//  - Resume is offered after a stop or a failure when the run folder has a complete checkpoint; Export after
//    a finished run or whenever a checkpoint exists (checked on the filesystem, a directory listing). A
//    diverged run (showDiverged) is not resumable (it would diverge again): the status says what to change.
//  - The throughput plot shows rates over the last kRateWindow steps (their tokens and step times summed):
//    a backend that runs ahead (CUDA) has its steps timed when they are collected, one step late except
//    around eval/checkpoint steps, so single step times swing; a window evens that out. The ETA uses the
//    engine's average since the run (re)started, which includes evaluation and checkpoint time. The ETA goes
//    when the run ends; a finished run's line says how long it took, the tokens seen and the best eval loss.
//  - While no run was started, the status says what the Train page waits for (setIdleHint).
//  - Engine messages are shown in the studio's words (screen_words.h); the log wraps long lines.
#pragma once

#include <QElapsedTimer>
#include <QPointer>
#include <QString>
#include <QWidget>

#include <deque>
#include <vector>
#include <utility>

#include "ui/run_types.h"

class QCheckBox;
class QLabel;
class QPlainTextEdit;
class QProgressBar;
class QPushButton;
class QSlider;

namespace tandem::ui {

class LivePlot;
class LossPlot;
class TrainingSession;

class MonitorPage : public QWidget {
    Q_OBJECT
    Q_DISABLE_COPY_MOVE(MonitorPage)

public:
    enum class State { Idle, Starting, Running, Stopping, Stopped, Finished, Failed, Diverged };
    static constexpr int kMaxLogLines = 5000;
    static constexpr int kRateWindow = 8;

    explicit MonitorPage(QWidget* parent = nullptr);

    State state() const { return m_state; }
    QString runDir() const { return m_runDir; }
    LossPlot* lossPlot() const { return m_loss; }
    LivePlot* throughputPlot() const { return m_throughput; }
    LivePlot* memoryPlot() const { return m_memory; }
    LivePlot* lrPlot() const { return m_lr; }
    QLabel* gpuLine() const { return m_gpus; }
    // "GPU 0: 31.6 of 139.8 GiB in use, 97% busy  ·  GPU 1: ..." (the line under the memory plot).
    static QString gpuText(const std::vector<GpuStats>& gpus);

public slots:
    void attach(tandem::ui::TrainingSession* session);
    void showStarting(const QString& runDir);
    void showStarted(const tandem::ui::RunInfo& info);
    void addStep(const tandem::StepMetrics& metrics);
    void addEvent(const tandem::RunEvent& event);
    void showStopping();  // a stop was requested (Stop button, Ctrl+., closing the window)
    void showFailed(const tandem::ui::RunFailure& failure);
    void showFinished(bool stopped);
    void showDiverged(const QString& message);  // the run stopped itself: its loss was not finite
    // The Train page's blocked reason ("" when Train can be pressed), shown while no run was started.
    void setIdleHint(const QString& blockedReason);

signals:
    void stopRequested();
    void resumeRequested();
    void exportRequested(const QString& runDir);

private:
    void setState(State state, const QString& text);
    void updateButtons();
    void plotStep(const tandem::StepMetrics& m);
    void clearPlots();
    void appendLog(const QString& line);
    QString runSummaryText() const;
    bool hasCheckpoint() const;
    bool hasAdapter() const;

    QPointer<TrainingSession> m_session;
    State m_state = State::Idle;
    QString m_runDir;
    int64_t m_lastStep = 0;
    double m_planTotalMiB = 0;
    std::deque<std::pair<double, int64_t>> m_rateWindow;  // (step time s, tokens) of the latest steps
    int64_t m_tokensSeen = 0;                             // real tokens of every step of the run, history included
    double m_earlierSeconds = 0;                          // step time of the sessions before a resume
    double m_bestEval = 0;
    int64_t m_bestEvalStep = 0;    // 0: no eval yet
    QElapsedTimer m_sessionClock;  // since this start

    QLabel* m_status = nullptr;
    QProgressBar* m_progress = nullptr;
    QLabel* m_eta = nullptr;
    QLabel* m_gpus = nullptr;  // per-GPU memory and utilization, under the memory plot
    QPushButton* m_stop = nullptr;
    QPushButton* m_resume = nullptr;
    QPushButton* m_export = nullptr;
    QCheckBox* m_logScale = nullptr;
    QSlider* m_smoothing = nullptr;
    QLabel* m_smoothingValue = nullptr;
    LossPlot* m_loss = nullptr;
    LivePlot* m_throughput = nullptr;
    LivePlot* m_memory = nullptr;
    LivePlot* m_lr = nullptr;
    QPlainTextEdit* m_log = nullptr;
};

}  // namespace tandem::ui
