// Hugging Face hub cache layout: see hf_cache.h.
#include "ui/hf_cache.h"

#include <QDir>
#include <QFile>
#include <QFileInfo>
#include <QRegularExpression>
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

QString modelDisplayName(const QString& folder) {
    static const QRegularExpression snapshot(QStringLiteral("/models--([^/]+)/snapshots/[^/]+/?$"));
    const QString clean = QDir::cleanPath(folder);
    if (const auto m = snapshot.match(clean); m.hasMatch())
        return m.captured(1).replace(QStringLiteral("--"), QStringLiteral("/"));
    return QFileInfo(clean).fileName();
}

}  // namespace tandem::ui
