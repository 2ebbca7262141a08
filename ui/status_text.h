// SPDX-FileCopyrightText: 2026 The Tandem developers
// SPDX-License-Identifier: GPL-3.0-or-later
// One look for status lines across the pages: neutral, good (green), warning (amber) or bad (red) text on a
// QLabel. The colours are mid-tones readable on both the light and the dark palette, so they follow no theme switch.
// Message labels in box layouts wrap (wrapMessage): a long one-line error must grow the label downwards,
// never widen the window. Word wrap alone is not enough, since a wrapped QLabel still asks for its longest
// word as minimum width (a path, a hash); the minimum width is therefore set explicitly to a small value.
// Not for labels in a QFormLayout: it sizes a wrapped label's row for the label's minimum width, so a small
// one makes a tall, mostly empty row; those labels only get word wrap.
#pragma once

#include <QLabel>
#include <QString>

namespace tandem::ui {

enum class Tone { Neutral, Good, Bad, Warning };  // Warning: amber, for what does not block

inline constexpr int kMessageMinWidth = 120;

inline void wrapMessage(QLabel* label) {
    label->setWordWrap(true);
    label->setMinimumWidth(kMessageMinWidth);
}

inline void setStatusText(QLabel* label, const QString& text, Tone tone) {
    label->setText(text);
    switch (tone) {
        case Tone::Neutral:
            label->setStyleSheet(QString());
            break;
        case Tone::Good:
            label->setStyleSheet(QStringLiteral("color: #2e9d4f;"));
            break;
        case Tone::Bad:
            label->setStyleSheet(QStringLiteral("color: #d64541;"));
            break;
        case Tone::Warning:
            label->setStyleSheet(QStringLiteral("color: #c27c0e;"));
            break;
    }
    label->setProperty("tone", static_cast<int>(tone));
}

}  // namespace tandem::ui
