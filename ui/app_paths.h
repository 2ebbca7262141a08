// SPDX-FileCopyrightText: 2026 The Tandem developers
// SPDX-License-Identifier: GPL-3.0-or-later
// Where the studio keeps its own files when the user chose nothing else: the runs folder and the demo model.
// Qt's AppDataLocation is <data>/<organisation>/<application>, which is ~/.local/share/Tandem/Tandem for the
// studio (both names are "Tandem"); one "Tandem" is enough, so that case uses <data>/Tandem.
#pragma once

#include <QString>

namespace tandem::ui {

QString studioDataFolder();   // ~/.local/share/Tandem
QString defaultRunsFolder();  // studioDataFolder()/runs

}  // namespace tandem::ui
