// SPDX-FileCopyrightText: 2026 The Tandem developers
// SPDX-License-Identifier: GPL-3.0-or-later
// See recent_list.h.
#include "ui/recent_list.h"

#include <QDir>
#include <QFileInfo>
#include <QListWidget>
#include <QPainter>
#include <QSettings>

#include <algorithm>

namespace tandem::ui {

namespace {

QString cleanAbsolute(const QString& path) { return QDir::cleanPath(QFileInfo(path).absoluteFilePath()); }

QListWidgetItem* newItem(const QString& path, const RecentLabel& label) {
    auto* item = new QListWidgetItem(label(path));
    item->setData(Qt::UserRole, path);
    item->setToolTip(QDir::toNativeSeparators(path));
    return item;
}

}  // namespace

void PlaceholderListWidget::setPlaceholderText(const QString& text) {
    m_placeholder = text;
    viewport()->update();
}

void PlaceholderListWidget::paintEvent(QPaintEvent* event) {
    QListWidget::paintEvent(event);
    if (!showsPlaceholder()) return;
    QPainter p(viewport());
    QColor c = palette().color(QPalette::PlaceholderText);
    p.setPen(c);
    p.drawText(viewport()->rect().adjusted(8, 8, -8, -8), Qt::AlignLeft | Qt::AlignTop | Qt::TextWordWrap,
               m_placeholder);
}

bool samePath(const QString& a, const QString& b) {
    if (a.isEmpty() || b.isEmpty()) return a == b;
    const QString ca = QFileInfo(a).canonicalFilePath(), cb = QFileInfo(b).canonicalFilePath();
    if (!ca.isEmpty() && !cb.isEmpty()) return ca == cb;
    return cleanAbsolute(a) == cleanAbsolute(b);
}

QStringList RecentList::paths() const {
    QStringList out;
    for (const QString& p : QSettings().value(m_key).toStringList()) {
        if (!QFileInfo::exists(p)) continue;
        if (std::none_of(out.begin(), out.end(), [&p](const QString& q) { return samePath(p, q); })) out.append(p);
    }
    return out;
}

void RecentList::add(const QString& path) {
    const QString clean = cleanAbsolute(path);
    QStringList list = QSettings().value(m_key).toStringList();
    list.removeIf([&clean](const QString& p) { return samePath(p, clean); });
    list.prepend(clean);
    while (list.size() > kMaxEntries) list.removeLast();
    QSettings().setValue(m_key, list);
}

void fillRecentList(QListWidget* list, const QStringList& paths, const RecentLabel& label) {
    list->clear();
    for (const QString& path : paths) list->addItem(newItem(path, label));
}

void markRecent(QListWidget* list, const QString& path, const RecentLabel& label) {
    for (int i = 0; i < list->count(); ++i) {
        if (samePath(list->item(i)->data(Qt::UserRole).toString(), path)) {
            list->setCurrentRow(i);
            return;
        }
    }
    list->insertItem(0, newItem(path, label));
    while (list->count() > RecentList::kMaxEntries) delete list->takeItem(list->count() - 1);
    list->setCurrentRow(0);
}

}  // namespace tandem::ui
