// SPDX-FileCopyrightText: 2026 The Tandem developers
// SPDX-License-Identifier: GPL-3.0-or-later
// The "recent" lists of the Model and Data pages, kept in QSettings under one key each ("model/recent",
// "data/recent"). Most recent first, no duplicates (two spellings of one folder or file, e.g. through a
// symlink, are one entry), at most kMaxEntries; paths that no longer exist are dropped when the list is read,
// so a deleted model never lingers in the list.
// Decisions a reader must know:
//  - The widget shows the settings' order when it is filled (fillRecentList), and after that never reorders
//    itself: selecting an entry again only marks it current (markRecent), so the rows under the mouse stay
//    put during a double click. Only a path not yet shown is inserted, at the top. Tooltips hold full paths.
//  - samePath compares canonical paths (symlinks resolved) when both exist, else cleaned absolute paths.
#pragma once

#include <QListWidget>
#include <QString>
#include <QStringList>

#include <functional>
#include <utility>

namespace tandem::ui {

class RecentList {
public:
    static constexpr int kMaxEntries = 10;

    explicit RecentList(QString settingsKey) : m_key(std::move(settingsKey)) {}

    QStringList paths() const;      // existing paths, most recent first
    void add(const QString& path);  // moves `path` (and any other spelling of it) to the front

private:
    QString m_key;
};

// A list that says what would be in it while it is empty ("No recent datasets yet: …"), drawn over the
// empty viewport, never as an item (an item could be selected, counted or activated).
class PlaceholderListWidget : public QListWidget {
    Q_OBJECT
    Q_DISABLE_COPY_MOVE(PlaceholderListWidget)

public:
    explicit PlaceholderListWidget(QWidget* parent = nullptr) : QListWidget(parent) {}
    QString placeholderText() const { return m_placeholder; }
    void setPlaceholderText(const QString& text);
    bool showsPlaceholder() const { return count() == 0 && !m_placeholder.isEmpty(); }

protected:
    void paintEvent(QPaintEvent* event) override;

private:
    QString m_placeholder;
};

// The same file or folder: canonical paths when both exist, else the cleaned absolute paths.
bool samePath(const QString& a, const QString& b);

// Item text for a path (the model's or the dataset's display name); the full path goes to the tooltip and
// to Qt::UserRole.
using RecentLabel = std::function<QString(const QString& path)>;

// Replaces the items of `list` with `paths`, in that order.
void fillRecentList(QListWidget* list, const QStringList& paths, const RecentLabel& label);

// `path` was just selected: its item becomes the current one where it is; a path not in the list is inserted
// at the top (and the list trimmed to RecentList::kMaxEntries).
void markRecent(QListWidget* list, const QString& path, const RecentLabel& label);

}  // namespace tandem::ui
