// SPDX-FileCopyrightText: 2026 The Tandem developers
// SPDX-License-Identifier: GPL-3.0-or-later
// See run_scan.h.
#include "ui/run_scan.h"

#include <QDir>
#include <QFile>
#include <QFileInfo>

#include <algorithm>
#include <exception>
#include <filesystem>
#include <optional>

#include <nlohmann/json.hpp>

#include "tandem/run_config.h"
#include "tandem/trainer.h"
#include "ui/hf_cache.h"
#include "ui/run_lock.h"

namespace tandem::ui {
namespace {

// The last line of metrics.jsonl that is a JSON object, read from the file's end (16 KiB at most: a line is
// well under 1 KiB). A studio killed while writing a line leaves half of it: the line before counts then.
nlohmann::json lastRecord(const QString& path) {
    QFile f(path);
    if (!f.open(QIODevice::ReadOnly)) return {};
    const qint64 size = f.size();
    const qint64 start = std::max<qint64>(0, size - 16384);
    f.seek(start);
    const QList<QByteArray> lines = f.read(size - start).split('\n');
    for (auto it = lines.crbegin(); it != lines.crend(); ++it) {
        const QByteArray line = it->trimmed();
        if (line.isEmpty()) continue;
        auto j = nlohmann::json::parse(line.constData(), line.constData() + line.size(), nullptr, false);
        if (j.is_object()) return j;
    }
    return {};
}

}  // namespace

int64_t checkpointStepOf(const std::filesystem::path& dir) {
    const QString name = QString::fromStdString(dir.filename().string());
    return name.startsWith(QLatin1String("step-")) ? name.mid(5).toLongLong() : 0;
}

bool canResume(const RunEntry& run) {
    if (run.hasAdapter || run.status == RunStatus::Running || run.status == RunStatus::Diverged) return false;
    return run.hasCheckpoint || run.status == RunStatus::Interrupted;
}

QString formatDuration(double seconds) {
    if (!(seconds >= 0) || seconds > 1e9) return QStringLiteral("—");
    const qint64 t = static_cast<qint64>(seconds + 0.5);
    if (t >= 3600) return QStringLiteral("%1h%2m").arg(t / 3600).arg((t / 60) % 60, 2, 10, QLatin1Char('0'));
    if (t >= 60) return QStringLiteral("%1m%2s").arg(t / 60).arg(t % 60, 2, 10, QLatin1Char('0'));
    return QStringLiteral("%1s").arg(t);
}

QString runStatusName(RunStatus status) {
    switch (status) {
        case RunStatus::Finished:
            return QStringLiteral("finished");
        case RunStatus::Stopped:
            return QStringLiteral("stopped");
        case RunStatus::Failed:
            return QStringLiteral("failed");
        case RunStatus::Empty:
            return QStringLiteral("empty");
        case RunStatus::Diverged:
            return QStringLiteral("diverged");
        case RunStatus::Running:
            return QStringLiteral("running");
        case RunStatus::Interrupted:
            return QStringLiteral("interrupted");
    }
    return {};
}

RunEntry readRunEntry(const QString& runDir) {
    RunEntry e;
    const QDir dir(runDir);
    e.dir = dir.absolutePath();
    e.name = dir.dirName();
    e.date = QFileInfo(dir.filePath(QStringLiteral("config.json"))).lastModified();
    try {
        const RunConfig c = load_run_config(dir.filePath(QStringLiteral("config.json")).toStdString(), false);
        e.modelPath = QString::fromStdString(c.model);
        e.model = modelDisplayName(e.modelPath);
        e.datasetPath = QString::fromStdString(c.data.dataset);
        e.dataset = QFileInfo(e.datasetPath).fileName();
        e.lr = c.training.lr;
        e.rank = c.lora.r;
        e.batchTokens = c.training.batch_tokens;
        e.maxSeqLen = c.data.max_seq_len;
        e.device = QString::fromUtf8(std::string(device_choice_name(c.device)).c_str());
    } catch (const std::exception& ex) {
        e.configError = QString::fromUtf8(ex.what());
    }
    e.hasAdapter = QFileInfo::exists(dir.filePath(QStringLiteral("adapter/adapter_config.json")));
    std::optional<std::filesystem::path> checkpoint;
    try {
        checkpoint = latest_checkpoint(e.dir.toStdString());
    } catch (const std::exception&) {
    }
    e.hasCheckpoint = checkpoint.has_value();
    if (checkpoint) e.checkpointStep = checkpointStepOf(*checkpoint);
    const RunLockProbe lock = probeRunLock(e.dir);
    if (lock.state != RunLockState::None) e.sessionStarted = lock.started;
    const QString metricsPath = dir.filePath(QStringLiteral("metrics.jsonl"));
    const nlohmann::json j = lastRecord(metricsPath);
    if (j.is_object() && e.date.isValid())
        e.durationS = static_cast<double>(e.date.msecsTo(QFileInfo(metricsPath).lastModified())) / 1000.0;
    bool diverged = false;
    if (j.is_object()) {
        if (j.contains("step") && j["step"].is_number()) e.steps = j["step"].get<int64_t>();
        if (j.contains("loss") && j["loss"].is_number()) e.finalLoss = j["loss"].get<double>();
        const auto status = j.find("status");
        diverged = status != j.end() && *status == "diverged";
    }
    const QString checkpointName =
        checkpoint ? QDir(e.dir).relativeFilePath(QString::fromStdString(checkpoint->string())) : QString();
    if (lock.state == RunLockState::Held) {
        e.status = RunStatus::Running;
        e.statusDetail = QStringLiteral("being trained now by ") + describeLockHolder(lock);
    } else if (e.hasAdapter) {
        e.status = RunStatus::Finished;
        e.statusDetail = QStringLiteral("adapter written");
    } else if (diverged) {
        e.status = RunStatus::Diverged;
        e.statusDetail =
            QStringLiteral(
                "the loss was not finite for several steps in a row and the run stopped; "
                "reopen its settings with a lower Learning rate and train again") +
            (e.hasCheckpoint ? QStringLiteral(" (the last good checkpoint is ") + checkpointName + QStringLiteral(")")
                             : QString());
    } else if (lock.state == RunLockState::Stale) {
        e.status = RunStatus::Interrupted;
        e.statusDetail =
            QStringLiteral("Tandem closed while it was training this run (a crash, a kill or a power cut); ") +
            (e.hasCheckpoint ? QStringLiteral("Resume continues it from ") + checkpointName
                             : QStringLiteral("no checkpoint was written yet, so Resume starts it again from the "
                                              "first step with the same settings"));
    } else if (e.hasCheckpoint) {
        e.status = RunStatus::Stopped;
        e.statusDetail = QStringLiteral("stopped or interrupted; resumable from ") + checkpointName;
    } else if (e.steps > 0) {
        e.status = RunStatus::Failed;
        e.statusDetail = QStringLiteral("ended without an adapter or a checkpoint to resume from");
    } else {
        e.status = RunStatus::Empty;
        e.statusDetail = QStringLiteral("no step completed");
    }
    return e;
}

QList<RunEntry> scanRunsFolder(const QString& folder) {
    QList<RunEntry> runs;
    const QDir root(folder);
    for (const QString& sub : root.entryList(QDir::Dirs | QDir::NoDotAndDotDot)) {
        if (!QFileInfo::exists(root.filePath(sub + QStringLiteral("/config.json")))) continue;
        runs.append(readRunEntry(root.filePath(sub)));
    }
    std::sort(runs.begin(), runs.end(), [](const RunEntry& a, const RunEntry& b) {
        return a.date != b.date ? a.date > b.date : a.name > b.name;
    });
    return runs;
}

QList<RunEntry> scanRunsFolders(const QStringList& folders) {
    QList<RunEntry> runs;
    QStringList seen;
    for (const QString& folder : folders) {
        const QString canonical = QFileInfo(folder).canonicalFilePath();
        if (canonical.isEmpty() || seen.contains(canonical)) continue;
        seen.append(canonical);
        runs += scanRunsFolder(folder);
    }
    std::sort(runs.begin(), runs.end(), [](const RunEntry& a, const RunEntry& b) {
        return a.date != b.date ? a.date > b.date : a.name > b.name;
    });
    return runs;
}

QString runSummary(const LossCurve& c) {
    if (c.steps.isEmpty()) return QStringLiteral("%1: no step yet.").arg(c.name);
    QString text = QStringLiteral("%1: %2 steps in %3, %4 tokens seen")
                       .arg(c.name)
                       .arg(static_cast<qint64>(c.steps.last()))
                       .arg(formatDuration(c.stepSeconds))
                       .arg(static_cast<qint64>(c.tokens.last()));
    if (!c.evalLoss.isEmpty()) {
        qsizetype best = 0;
        for (qsizetype i = 1; i < c.evalLoss.size(); ++i)
            if (c.evalLoss[i] < c.evalLoss[best]) best = i;
        text += QStringLiteral(", best eval loss %1 at step %2")
                    .arg(c.evalLoss[best], 0, 'f', 4)
                    .arg(static_cast<qint64>(c.evalSteps[best]));
    }
    return text + '.';
}

LossCurve readLossCurve(const QString& runDir) {
    LossCurve c;
    c.dir = runDir;
    c.name = QDir(runDir).dirName();
    QFile f(QDir(runDir).filePath(QStringLiteral("metrics.jsonl")));
    if (!f.open(QIODevice::ReadOnly)) return c;
    double seen = 0;
    while (!f.atEnd()) {
        const QByteArray line = f.readLine().trimmed();
        if (line.isEmpty()) continue;
        const auto j = nlohmann::json::parse(line.constData(), line.constData() + line.size(), nullptr, false);
        if (!j.is_object() || !j.contains("step") || !j["step"].is_number()) continue;
        const double step = j["step"].get<double>();
        if (j.contains("tokens") && j["tokens"].is_number()) seen += j["tokens"].get<double>();
        if (j.contains("step_time_s") && j["step_time_s"].is_number()) c.stepSeconds += j["step_time_s"].get<double>();
        if (j.contains("loss") && j["loss"].is_number()) {
            c.steps.append(step);
            c.tokens.append(seen);
            c.loss.append(j["loss"].get<double>());
        }
        if (j.contains("eval_loss") && j["eval_loss"].is_number()) {
            c.evalSteps.append(step);
            c.evalTokens.append(seen);
            c.evalLoss.append(j["eval_loss"].get<double>());
        }
    }
    return c;
}

}  // namespace tandem::ui
