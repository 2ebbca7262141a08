// SPDX-FileCopyrightText: 2026 The Tandem developers
// SPDX-License-Identifier: GPL-3.0-or-later
// tandem::ui::Theme — the studio's dark and light looks (Fusion style with a palette) and the plot colours.
// Decisions a reader must know:
//  - Qt 6.4 has no QStyleHints::colorScheme, so "follow the system" means: TANDEM_THEME=dark|light wins;
//    else a GTK_THEME ending in ":dark" or named "*-dark"; else the platform palette's window colour
//    (read before Fusion's palette replaces it) is dark when its lightness is below 50%.
//  - Plot series colours come from two fixed sets chosen for contrast on each background (checked on the
//    screenshots), picked by the lightness of the palette a plot actually has.
#pragma once

#include <QColor>
#include <QList>
#include <QPalette>

class QApplication;

namespace tandem::ui {

class Theme {
public:
    enum class Mode { System, Light, Dark };

    // Sets the Fusion style and the light or dark palette on the application. Returns true for dark.
    static bool apply(QApplication& app, Mode mode = Mode::System);
    static bool systemPrefersDark();
    static QPalette lightPalette();
    static QPalette darkPalette();

    static bool isDark(const QPalette& palette);
    // Series colours in order (train loss, eval loss, ...), readable on the palette's base colour.
    static QList<QColor> plotColors(const QPalette& palette);
    static QColor gridColor(const QPalette& palette);
};

}  // namespace tandem::ui
