// SPDX-FileCopyrightText: 2026 The Tandem developers
// SPDX-License-Identifier: GPL-3.0-or-later
// See app_paths.h.
#include "ui/app_paths.h"

#include <QCoreApplication>
#include <QStandardPaths>

namespace tandem::ui {

QString studioDataFolder() {
    const QString org = QCoreApplication::organizationName(), app = QCoreApplication::applicationName();
    if (!org.isEmpty() && org != app) return QStandardPaths::writableLocation(QStandardPaths::AppDataLocation);
    return QStandardPaths::writableLocation(QStandardPaths::GenericDataLocation) + QLatin1Char('/') + app;
}

QString defaultRunsFolder() {
    return studioDataFolder() + QStringLiteral("/runs");
}

}  // namespace tandem::ui
