// SPDX-FileCopyrightText: 2026 The Tandem developers
// SPDX-License-Identifier: GPL-3.0-or-later
// Metatype registration and category names for the values in run_types.h.
#include "ui/run_types.h"

#include <string>

namespace tandem::ui {

QString categoryName(tandem::ErrorCategory category) {
    return QString::fromStdString(std::string(tandem::error_category_name(category)));
}

void registerRunMetaTypes() {
    qRegisterMetaType<tandem::StepMetrics>("tandem::StepMetrics");
    qRegisterMetaType<tandem::RunEvent>("tandem::RunEvent");
    qRegisterMetaType<tandem::ui::RunInfo>("tandem::ui::RunInfo");
    qRegisterMetaType<tandem::ui::RunFailure>("tandem::ui::RunFailure");
}

}  // namespace tandem::ui
