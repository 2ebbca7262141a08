// SPDX-FileCopyrightText: 2026 The Tandem developers
// SPDX-License-Identifier: GPL-3.0-or-later
// The values that cross from the training thread to the GUI thread: the engine's StepMetrics and RunEvent,
// plus RunInfo (what a started run will do) and RunFailure (why it ended with an error).
// Decisions a reader must know:
//  - Every type here is a plain value registered as a Qt metatype and passed by value through queued
//    signals; none holds a pointer into the engine, so a run can end while the GUI still shows its values.
//  - RunInfo::history carries the metrics a resumed run already has on disk (metrics.jsonl up to the
//    checkpoint), read on the training thread, so the plots show the whole run and not only the new steps.
#pragma once

#include <QMetaType>
#include <QString>

#include <vector>

#include "tandem/error.h"
#include "tandem/trainer.h"

namespace tandem::ui {

struct RunInfo {
    tandem::Plan plan;                          // resolved config, memory plan, step counts
    QString runDir;                             // the run folder (absolute)
    bool resumed = false;                       // continued from a checkpoint
    int64_t startStep = 0;                      // the last step already done (0 for a fresh run)
    std::vector<tandem::StepMetrics> history;   // steps 1..startStep from metrics.jsonl (resumed runs)
};

struct RunFailure {
    tandem::ErrorCategory category = tandem::ErrorCategory::Internal;
    QString message;  // the engine's message for a user (what, where, what to do)
};

// "invalid input", "out of memory", ... as the engine names the category.
QString categoryName(tandem::ErrorCategory category);

// Registers StepMetrics, RunEvent, RunInfo, RunFailure for queued connections. Idempotent; TrainingSession's
// constructor calls it.
void registerRunMetaTypes();

}  // namespace tandem::ui

Q_DECLARE_METATYPE(tandem::StepMetrics)
Q_DECLARE_METATYPE(tandem::RunEvent)
Q_DECLARE_METATYPE(tandem::ui::RunInfo)
Q_DECLARE_METATYPE(tandem::ui::RunFailure)
