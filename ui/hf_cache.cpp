// SPDX-FileCopyrightText: 2026 The Tandem developers
// SPDX-License-Identifier: GPL-3.0-or-later
// Hugging Face hub cache layout: see hf_cache.h.
#include "ui/hf_cache.h"

#include <QDir>
#include <QFile>
#include <QFileInfo>
#include <QJsonDocument>
#include <QJsonObject>
#include <QRegularExpression>
#include <QStringList>
#include <QtGlobal>

#include <algorithm>

namespace tandem::ui {

QString hfHubCacheDir() {
    if (const QString hub = qEnvironmentVariable("HF_HUB_CACHE"); !hub.isEmpty()) return hub;
    if (const QString legacy = qEnvironmentVariable("HUGGINGFACE_HUB_CACHE"); !legacy.isEmpty()) return legacy;
    if (const QString home = qEnvironmentVariable("HF_HOME"); !home.isEmpty()) return home + "/hub";
    const QString xdg = qEnvironmentVariable("XDG_CACHE_HOME");
    return (xdg.isEmpty() ? QDir::homePath() + "/.cache" : xdg) + "/huggingface/hub";
}

QList<HfCacheModel> scanHfCache(const QString& cacheDir) {
    QList<HfCacheModel> models;
    const QDir cache(cacheDir);
    for (const QString& repo : cache.entryList({"models--*"}, QDir::Dirs | QDir::NoDotAndDotDot)) {
        const QDir snapshots(cache.filePath(repo + "/snapshots"));
        QString chosen;
        QFile ref(cache.filePath(repo + "/refs/main"));
        if (ref.open(QIODevice::ReadOnly)) {
            const QString revision = QString::fromUtf8(ref.readAll()).trimmed();
            if (!revision.isEmpty() && QFileInfo::exists(snapshots.filePath(revision + "/config.json")))
                chosen = snapshots.filePath(revision);
        }
        if (chosen.isEmpty()) {
            for (const QFileInfo& snap : snapshots.entryInfoList(QDir::Dirs | QDir::NoDotAndDotDot, QDir::Time)) {
                if (QFileInfo::exists(snap.filePath() + "/config.json")) {
                    chosen = snap.absoluteFilePath();
                    break;
                }
            }
        }
        if (chosen.isEmpty()) continue;
        // "models--Qwen--Qwen3-0.6B" -> "Qwen/Qwen3-0.6B" (hub repo names never contain "--").
        const QString id =
            repo.mid(QStringLiteral("models--").size()).replace(QStringLiteral("--"), QStringLiteral("/"));
        models.append({id, QDir::cleanPath(chosen)});
    }
    std::sort(models.begin(), models.end(), [](const HfCacheModel& a, const HfCacheModel& b) {
        return a.repoId.compare(b.repoId, Qt::CaseInsensitive) < 0;
    });
    return models;
}

namespace {

// `_name_or_path` of the folder's config.json when it is a hub repo id ("org/name"), else empty.
QString configRepoId(const QString& folder) {
    QFile f(QDir(folder).filePath(QStringLiteral("config.json")));
    if (!f.open(QIODevice::ReadOnly) || f.size() > (1 << 20)) return {};
    const QString id = QJsonDocument::fromJson(f.readAll()).object().value(QStringLiteral("_name_or_path")).toString();
    static const QRegularExpression repoId(QStringLiteral(R"(^[A-Za-z0-9][\w.-]*/[\w.-]+$)"));
    return repoId.match(id).hasMatch() ? id : QString();
}

// Folder names that say nothing about the model on their own.
bool genericFolderName(const QString& name) {
    static const QStringList generic = {"hf",          "model",        "models", "hf_model", "hf-model",
                                        "huggingface", "transformers", "final",  "merged",   "output",
                                        "weights",     "snapshot",     "latest", "main"};
    return generic.contains(name.toLower());
}

}  // namespace

QString modelDisplayName(const QString& folder) {
    static const QRegularExpression snapshot(QStringLiteral("/models--([^/]+)/snapshots/[^/]+/?$"));
    const QString clean = QDir::cleanPath(folder);
    if (const auto m = snapshot.match(clean); m.hasMatch())
        return m.captured(1).replace(QStringLiteral("--"), QStringLiteral("/"));
    if (const QString id = configRepoId(clean); !id.isEmpty()) return id;
    const QFileInfo info(clean);
    const QString parent = QFileInfo(info.absolutePath()).fileName();
    if (genericFolderName(info.fileName()) && !parent.isEmpty()) return parent + '/' + info.fileName();
    return info.fileName();
}

}  // namespace tandem::ui
