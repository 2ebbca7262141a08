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

namespace tandem::ui {
namespace {

// The last non-empty line of a text file, read from its end (a few KiB at most).
QByteArray lastLine(const QString& path) {
    QFile f(path);
    if (!f.open(QIODevice::ReadOnly)) return {};
    const qint64 size = f.size();
    for (qint64 window = 4096;; window *= 4) {
        const qint64 start = std::max<qint64>(0, size - window);
        f.seek(start);
        const QByteArray tail = f.read(size - start).trimmed();
        const qsizetype nl = tail.lastIndexOf('\n');
        if (nl >= 0 || start == 0) return nl >= 0 ? tail.mid(nl + 1) : tail;
    }
}

}  // namespace

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
    const QString metricsPath = dir.filePath(QStringLiteral("metrics.jsonl"));
    const QByteArray line = lastLine(metricsPath);
    if (!line.isEmpty() && e.date.isValid())
        e.durationS = static_cast<double>(e.date.msecsTo(QFileInfo(metricsPath).lastModified())) / 1000.0;
    bool diverged = false;
    if (!line.isEmpty()) {
        const auto j = nlohmann::json::parse(line.constData(), line.constData() + line.size(), nullptr, false);
        if (j.is_object()) {
            if (j.contains("step") && j["step"].is_number()) e.steps = j["step"].get<int64_t>();
            if (j.contains("loss") && j["loss"].is_number()) e.finalLoss = j["loss"].get<double>();
            diverged = j.value("status", std::string()) == "diverged";
        }
    }
    if (e.hasAdapter) {
        e.status = RunStatus::Finished;
        e.statusDetail = QStringLiteral("adapter written");
    } else if (diverged) {
        e.status = RunStatus::Diverged;
        e.statusDetail =
            QStringLiteral(
                "the loss was not finite for several steps in a row and the run stopped; "
                "reopen its settings with a lower Learning rate and train again") +
            (e.hasCheckpoint
                 ? QStringLiteral(" (the last good checkpoint is ") +
                       QDir(e.dir).relativeFilePath(QString::fromStdString(checkpoint->string())) + QStringLiteral(")")
                 : QString());
    } else if (e.hasCheckpoint) {
        e.status = RunStatus::Stopped;
        e.statusDetail = QStringLiteral("stopped or interrupted; resumable from ") +
                         QDir(e.dir).relativeFilePath(QString::fromStdString(checkpoint->string()));
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
