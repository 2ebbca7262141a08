// One look for status lines across the pages: neutral, good (green) or bad (red) text on a QLabel. The two
// colours are mid-tones readable on both the light and the dark palette, so they follow no theme switch.
#pragma once

#include <QLabel>
#include <QString>

namespace tandem::ui {

enum class Tone { Neutral, Good, Bad };

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
    }
    label->setProperty("tone", static_cast<int>(tone));
}

}  // namespace tandem::ui
