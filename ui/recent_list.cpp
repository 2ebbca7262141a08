// See recent_list.h.
#include "ui/recent_list.h"

#include <QDir>
#include <QFileInfo>
#include <QSettings>

namespace tandem::ui {

QStringList RecentList::paths() const {
    QStringList out;
    for (const QString& p : QSettings().value(m_key).toStringList())
        if (!out.contains(p) && QFileInfo::exists(p)) out.append(p);
    return out;
}

void RecentList::add(const QString& path) {
    const QString clean = QDir::cleanPath(QFileInfo(path).absoluteFilePath());
    QStringList list = QSettings().value(m_key).toStringList();
    list.removeAll(clean);
    list.prepend(clean);
    while (list.size() > kMaxEntries) list.removeLast();
    QSettings().setValue(m_key, list);
}

}  // namespace tandem::ui
