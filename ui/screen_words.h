// SPDX-FileCopyrightText: 2026 The Tandem developers
// SPDX-License-Identifier: GPL-3.0-or-later
// The engine's messages in the studio's words. The engine names config keys ("training.lr: ...") and CLI
// flags ("use --device cpu", "resume with --resume") because tandem-cli and run.json users type those; the
// studio shows the labels on its screens ("Learning rate: ...") and the action to take there ("choose
// Device: cpu", "press Resume").
// Decisions a reader must know:
//  - Plain text replacement from one table (kScreenWords in screen_words.cpp), longest key first, whole
//    keys only (a key followed by a letter, digit or '_' is not replaced: data.validation vs
//    data.validation_fraction). A key the table lacks stays as the engine wrote it.
//  - Code that decides from a message (TrainPage::markFields) looks at the engine's text, not at this one.
#pragma once

#include <QString>

namespace tandem::ui {

QString inScreenWords(const QString& engineMessage);

// "1 record", "2 records": count and noun with the English plural (the noun's plural given when not noun+s).
QString countOf(qint64 n, const QString& singular, const QString& plural = {});

}  // namespace tandem::ui
