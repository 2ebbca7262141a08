// The "recent" lists of the Model and Data pages, kept in QSettings under one key each ("model/recent",
// "data/recent"). Most recent first, no duplicates, at most kMaxEntries; paths that no longer exist are
// dropped when the list is read, so a deleted model never lingers in the list.
#pragma once

#include <QString>
#include <QStringList>

#include <utility>

namespace tandem::ui {

class RecentList {
public:
    static constexpr int kMaxEntries = 10;

    explicit RecentList(QString settingsKey) : m_key(std::move(settingsKey)) {}

    QStringList paths() const;      // existing paths, most recent first
    void add(const QString& path);  // moves `path` to the front

private:
    QString m_key;
};

}  // namespace tandem::ui
