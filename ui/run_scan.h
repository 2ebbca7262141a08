// Reading the runs folder for the Runs page: one RunEntry per subfolder holding a config.json, and the loss
// curve of a run from its metrics.jsonl. Both touch many files (a run of 100k steps has a 15 MB metrics
// file), so the page calls them on a worker thread.
// Decisions a reader must know:
//  - Status follows the run directory layout the trainer writes (trainer.h): finished = adapter/ exists;
//    diverged = no adapter and the last metrics line says "status": "diverged" (the trainer stopped it:
//    the loss was not finite; any checkpoint left is the last good one); stopped = a complete checkpoint but
//    no adapter (resumable); failed = steps in metrics.jsonl but nothing to resume from; empty = no step
//    was ever completed.
//  - For the table only the last line of metrics.jsonl is read (seeking from the end), never the whole file.
#pragma once

#include <QDateTime>
#include <QList>
#include <QString>
#include <QVector>

#include <cstdint>
#include <limits>

namespace tandem::ui {

enum class RunStatus { Finished, Stopped, Failed, Empty, Diverged };
QString runStatusName(RunStatus status);  // "finished", "stopped", "failed", "empty", "diverged"

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
    QString configError;  // config.json could not be parsed
};

// Every run folder directly under `folder`, newest first.
QList<RunEntry> scanRunsFolder(const QString& folder);
RunEntry readRunEntry(const QString& runDir);

struct LossCurve {
    QString dir;
    QString name;
    QVector<double> steps;
    QVector<double> loss;
    QVector<double> evalSteps;
    QVector<double> evalLoss;
};
// All (step, loss) points of a run's metrics.jsonl; unreadable lines are skipped.
LossCurve readLossCurve(const QString& runDir);

}  // namespace tandem::ui
