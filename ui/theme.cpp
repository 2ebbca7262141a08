// SPDX-FileCopyrightText: 2026 The Tandem developers
// SPDX-License-Identifier: GPL-3.0-or-later
// Theme: palettes and plot colours. The dark palette follows the common Fusion dark scheme; disabled text
// is dimmed explicitly because Fusion does not derive it from a custom palette.
#include "ui/theme.h"

#include <QApplication>
#include <QGuiApplication>
#include <QStyleFactory>

namespace tandem::ui {

bool Theme::systemPrefersDark() {
    const QByteArray forced = qgetenv("TANDEM_THEME").trimmed().toLower();
    if (forced == "dark") return true;
    if (forced == "light") return false;
    const QByteArray gtk = qgetenv("GTK_THEME").toLower();
    if (gtk.endsWith(":dark") || gtk.endsWith("-dark")) return true;
    return isDark(QGuiApplication::palette());
}

bool Theme::apply(QApplication& app, Mode mode) {
    const bool dark = mode == Mode::Dark || (mode == Mode::System && systemPrefersDark());
    app.setStyle(QStyleFactory::create(QStringLiteral("Fusion")));
    app.setPalette(dark ? darkPalette() : lightPalette());
    return dark;
}

QPalette Theme::lightPalette() {
    QPalette p;
    p.setColor(QPalette::Window, QColor(0xf3, 0xf4, 0xf6));
    p.setColor(QPalette::WindowText, QColor(0x1f, 0x23, 0x28));
    p.setColor(QPalette::Base, Qt::white);
    p.setColor(QPalette::AlternateBase, QColor(0xf0, 0xf2, 0xf5));
    p.setColor(QPalette::ToolTipBase, QColor(0xff, 0xff, 0xe8));
    p.setColor(QPalette::ToolTipText, QColor(0x1f, 0x23, 0x28));
    p.setColor(QPalette::PlaceholderText, QColor(0x80, 0x86, 0x8d));
    p.setColor(QPalette::Text, QColor(0x1f, 0x23, 0x28));
    p.setColor(QPalette::Button, QColor(0xe8, 0xea, 0xee));
    p.setColor(QPalette::ButtonText, QColor(0x1f, 0x23, 0x28));
    p.setColor(QPalette::BrightText, Qt::red);
    p.setColor(QPalette::Link, QColor(0x1a, 0x5f, 0xb4));
    p.setColor(QPalette::Highlight, QColor(0x2a, 0x6f, 0xdb));
    p.setColor(QPalette::HighlightedText, Qt::white);
    for (auto role : {QPalette::WindowText, QPalette::Text, QPalette::ButtonText})
        p.setColor(QPalette::Disabled, role, QColor(0xa0, 0xa4, 0xaa));
    return p;
}

QPalette Theme::darkPalette() {
    QPalette p;
    p.setColor(QPalette::Window, QColor(0x2b, 0x2d, 0x31));
    p.setColor(QPalette::WindowText, QColor(0xe6, 0xe7, 0xe9));
    p.setColor(QPalette::Base, QColor(0x1e, 0x1f, 0x22));
    p.setColor(QPalette::AlternateBase, QColor(0x26, 0x28, 0x2b));
    p.setColor(QPalette::ToolTipBase, QColor(0x3a, 0x3d, 0x42));
    p.setColor(QPalette::ToolTipText, QColor(0xe6, 0xe7, 0xe9));
    p.setColor(QPalette::PlaceholderText, QColor(0x8a, 0x8e, 0x94));
    p.setColor(QPalette::Text, QColor(0xe6, 0xe7, 0xe9));
    p.setColor(QPalette::Button, QColor(0x36, 0x39, 0x3e));
    p.setColor(QPalette::ButtonText, QColor(0xe6, 0xe7, 0xe9));
    p.setColor(QPalette::BrightText, QColor(0xff, 0x6b, 0x6b));
    p.setColor(QPalette::Link, QColor(0x6c, 0xb4, 0xff));
    p.setColor(QPalette::Highlight, QColor(0x3d, 0x7e, 0xe0));
    p.setColor(QPalette::HighlightedText, Qt::white);
    p.setColor(QPalette::Light, QColor(0x4a, 0x4d, 0x52));
    p.setColor(QPalette::Midlight, QColor(0x3e, 0x41, 0x46));
    p.setColor(QPalette::Mid, QColor(0x2f, 0x31, 0x35));
    p.setColor(QPalette::Dark, QColor(0x1a, 0x1b, 0x1e));
    p.setColor(QPalette::Shadow, QColor(0x10, 0x10, 0x12));
    for (auto role : {QPalette::WindowText, QPalette::Text, QPalette::ButtonText})
        p.setColor(QPalette::Disabled, role, QColor(0x7a, 0x7d, 0x82));
    p.setColor(QPalette::Disabled, QPalette::Button, QColor(0x30, 0x32, 0x36));
    return p;
}

bool Theme::isDark(const QPalette& palette) { return palette.color(QPalette::Window).lightnessF() < 0.5; }

QList<QColor> Theme::plotColors(const QPalette& palette) {
    if (isDark(palette))  // light, saturated tones on the dark base
        return {QColor(0x5a, 0xb0, 0xff), QColor(0xff, 0xa6, 0x4d), QColor(0x6e, 0xdb, 0x8f),
                QColor(0xf2, 0x6d, 0x8c), QColor(0xc3, 0x9b, 0xff), QColor(0xe6, 0xd2, 0x5a)};
    return {QColor(0x1f, 0x6f, 0xc5), QColor(0xd9, 0x63, 0x0b), QColor(0x1b, 0x8a, 0x3c),
            QColor(0xc2, 0x1f, 0x4a), QColor(0x7b, 0x4f, 0xc9), QColor(0x8a, 0x6d, 0x00)};
}

QColor Theme::gridColor(const QPalette& palette) {
    return isDark(palette) ? QColor(0x44, 0x47, 0x4d) : QColor(0xdc, 0xdf, 0xe4);
}

}  // namespace tandem::ui
