// SPDX-FileCopyrightText: 2026 The Tandem developers
// SPDX-License-Identifier: GPL-3.0-or-later
// tandem::ui::TrainingSession — runs one training run at a time on its own QThread and reports it through
// Qt signals. The GUI thread never calls the engine: a worker object moved to the thread calls
// Trainer::prepare, plan and run; a ProgressSink on that thread emits the metrics as queued signals.
// Decisions a reader must know:
//  - Exactly one terminal signal per start(): finished(stopped) when run() returned (stopped = a stop
//    request ended it, a checkpoint was written), diverged(message) when run() stopped itself because the
//    loss stopped being finite (tandem/trainer.h), or failed(failure) when anything threw. Each is emitted
//    after the thread has ended and isRunning() is false, so a slot may start() the next run at once.
//  - A new run's folder is created before anything is loaded: a runs folder that cannot hold it fails at
//    once with "choose a writable runs folder" (an I/O failure, not an internal error).
//  - While a run is in progress its folder holds studio.lock (run_lock.h), removed however the run ends; a
//    studio killed mid-run leaves it behind, which marks the run as interrupted. A start or resume of a run
//    that a live session holds fails (invalid input, naming the holder) before anything is loaded.
//  - requestStop() only sets an atomic flag: the engine drops the partial step and checkpoints the last
//    completed one. A stop during prepare() (loading) takes effect when the first step begins.
//  - Destroying a running session requests a stop and joins the thread (it waits for the current step):
//    the run folder is left complete and resumable. Pending queued signals are dropped with the session.
#pragma once

#include <QObject>
#include <QString>

#include <atomic>
#include <memory>

#include "tandem/run_config.h"
#include "ui/run_types.h"

class QThread;

namespace tandem::ui {

class TrainingWorker;

class TrainingSession : public QObject {
    Q_OBJECT
    Q_DISABLE_COPY_MOVE(TrainingSession)

public:
    explicit TrainingSession(QObject* parent = nullptr);
    ~TrainingSession() override;

    // Starts a run (resume: continue config.output_dir from its latest checkpoint). Returns false and does
    // nothing when a run is already in progress.
    bool start(const tandem::RunConfig& config, bool resume);
    void requestStop();
    bool isRunning() const;
    bool stopRequested() const;
    QString runDir() const;              // output_dir of the last start() made absolute, "" before any
    tandem::RunConfig config() const;    // the config of the last start()

signals:
    void runningChanged(bool running);
    void started(const tandem::ui::RunInfo& info);
    void stepCompleted(const tandem::StepMetrics& metrics);
    // The contract's name: it hides QObject::event(QEvent*) by name only (the virtual is still called by
    // Qt), so &TrainingSession::event names this signal without qOverload.
    void event(const tandem::RunEvent& event);
    void failed(const tandem::ui::RunFailure& failure);
    void finished(bool stopped);
    void diverged(const QString& message);  // the engine's Diverged message: what happened, what to change

private:
    void onThreadFinished();

    tandem::RunConfig m_config;
    QString m_runDir;
    QThread* m_thread = nullptr;          // owned; non-null while a run is in progress
    TrainingWorker* m_worker = nullptr;   // owned; lives on m_thread while it runs
    std::shared_ptr<std::atomic<bool>> m_stop;
};

}  // namespace tandem::ui
