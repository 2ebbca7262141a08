// SPDX-FileCopyrightText: 2026 The Tandem developers
// SPDX-License-Identifier: GPL-3.0-or-later
// Reading the runs folder for the Runs page: one RunEntry per subfolder holding a config.json, and the loss
// curve of a run from its metrics.jsonl. Both touch many files (a run of 100k steps has a 15 MB metrics
// file), so the page calls them on a worker thread.
// Decisions a reader must know:
//  - Status follows the run directory layout the trainer writes (trainer.h) and the studio's studio.lock
//    (run_lock.h), first match wins: running = a live studio session holds studio.lock; finished = adapter/
//    exists; diverged = no adapter and the last metrics line says "status": "diverged" (the trainer stopped
//    it: the loss was not finite; any checkpoint left is the last good one); interrupted = studio.lock left
//    behind by a studio that died mid-run (resumable: from the latest complete checkpoint, or from the start
//    when none was written); stopped = a complete checkpoint but no adapter (resumable; a tandem-cli run
//    killed mid-run looks the same, it takes no lock); failed = steps in metrics.jsonl but nothing to resume
//    from; empty = no step was ever completed.
//  - For the table only the last complete line of metrics.jsonl is read (seeking from the end), never the
//    whole file.
//    So the duration is file times: from config.json (written at the start) to the last metrics line; for a
//    run stopped and resumed later it includes the pause.
#pragma once

#include <QDateTime>
#include <QList>
#include <QString>
#include <QVector>

#include <cstdint>
#include <filesystem>
#include <limits>

namespace tandem::ui {

enum class RunStatus { Finished, Stopped, Failed, Empty, Diverged, Running, Interrupted };
// "finished", "stopped", "failed", "empty", "diverged", "running", "interrupted"
QString runStatusName(RunStatus status);

struct RunEntry {
    QString dir;    // absolute path of the run folder
    QString name;   // the folder's name
    QString model;  // model folder (display name)
    QString modelPath;
    QString dataset;  // dataset file name
    QString datasetPath;
    RunStatus status = RunStatus::Empty;
    QString statusDetail;  // e.g. "resumable from checkpoints/step-40"
    int64_t steps = 0;     // last step in metrics.jsonl
    double finalLoss = std::numeric_limits<double>::quiet_NaN();
    QDateTime date;  // when config.json was written (the run's start)
    bool hasAdapter = false;
    bool hasCheckpoint = false;
    int64_t checkpointStep = 0;  // of the latest complete checkpoint (0 when none)
    QDateTime sessionStarted;    // running or interrupted: when the studio session started (studio.lock)
    QString configError;  // config.json could not be parsed
    // Hyper-parameters from config.json (the resolved copy: device cpu or cuda, never auto).
    double lr = 0;
    int rank = 0;
    int batchTokens = 0;
    int maxSeqLen = 0;
    QString device;
    double durationS = -1;  // config.json written -> last metrics line written; -1 when no step was written
};

// "45s", "3m12s", "2h05m"; "—" for a negative duration.
QString formatDuration(double seconds);

// N of a checkpoint folder "step-N" (as latest_checkpoint returns them), 0 for any other name.
int64_t checkpointStepOf(const std::filesystem::path& dir);

// Whether the Runs page's Resume (and the main window's offer) may continue this run.
bool canResume(const RunEntry& run);

// Every run folder directly under `folder`, newest first.
QList<RunEntry> scanRunsFolder(const QString& folder);
// The same over several folders (duplicates, by canonical path, once), newest first.
QList<RunEntry> scanRunsFolders(const QStringList& folders);
RunEntry readRunEntry(const QString& runDir);

struct LossCurve {
    QString dir;
    QString name;
    QVector<double> steps;
    QVector<double> tokens;  // real tokens seen up to and including each step (same length as steps)
    QVector<double> loss;
    QVector<double> evalSteps;
    QVector<double> evalTokens;
    QVector<double> evalLoss;
    double stepSeconds = 0;  // the sum of the step times: training time without pauses
};
// All (step, loss) points of a run's metrics.jsonl; unreadable lines are skipped.
LossCurve readLossCurve(const QString& runDir);

// "Trained 3m12s (steps), 123456 tokens seen, best eval loss 1.234 at step 40" for a finished curve.
QString runSummary(const LossCurve& curve);

}  // namespace tandem::ui
