// SPDX-FileCopyrightText: 2026 The Tandem developers
// SPDX-License-Identifier: GPL-3.0-or-later
// Marking a settings field as invalid: a red border and the reason as its tooltip, restored when the field
// is valid again. The field's own tooltip is kept in a dynamic property so the reason never replaces it for
// good. Used by the Train page, whose reasons come from validate_run_config (which names the field).
#pragma once

#include <QString>
#include <QVariant>
#include <QWidget>

namespace tandem::ui {

inline bool fieldMarkedInvalid(const QWidget* field) {
    return field->property("invalid").toBool();
}

inline void markFieldInvalid(QWidget* field, const QString& reason) {
    if (!fieldMarkedInvalid(field)) field->setProperty("validTooltip", field->toolTip());
    field->setProperty("invalid", true);
    field->setStyleSheet(QStringLiteral("border: 2px solid #d64541; border-radius: 3px;"));
    field->setToolTip(reason);
}

inline void clearFieldInvalid(QWidget* field) {
    if (!fieldMarkedInvalid(field)) return;
    field->setProperty("invalid", false);
    field->setStyleSheet(QString());
    field->setToolTip(field->property("validTooltip").toString());
}

}  // namespace tandem::ui
