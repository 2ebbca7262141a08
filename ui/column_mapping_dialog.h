// SPDX-FileCopyrightText: 2026 The Tandem developers
// SPDX-License-Identifier: GPL-3.0-or-later
// The Data page's column-mapping dialog: for a CSV / TSV / Parquet / JSON file whose column names training
// does not recognise, say which column is the instruction / input / output, the prompt / completion, the chat
// messages or the text. The result is the engine's column mapping (ReadOptions::columns, RunConfig
// data.columns): dataset key -> the file's column.
// Decisions a reader must know:
//  - One record shape at a time (the "Records are" choice); only its rows are shown and returned, so a mapping
//    never mixes shapes. Columns are pre-chosen from common names (question -> instruction, answer -> output,
//    conversation -> messages, content -> text) or from the mapping in effect.
//  - "Clear" returns an empty mapping (the file's own names again); the page remembers mappings per file.
#pragma once

#include <QDialog>
#include <QMap>
#include <QString>
#include <QStringList>
#include <QVariantMap>

class QComboBox;
class QFormLayout;
class QLabel;

namespace tandem::ui {

class ColumnMappingDialog : public QDialog {
    Q_OBJECT
    Q_DISABLE_COPY_MOVE(ColumnMappingDialog)

public:
    // columns: the file's column names (dataset_columns); current: the mapping in effect (key -> column).
    ColumnMappingDialog(const QString& fileName, const QStringList& columns, const QVariantMap& current,
                        QWidget* parent = nullptr);

    // key -> column for the chosen record shape (identity pairs left out); empty after Clear.
    QVariantMap mapping() const;

private:
    void showShape();

    QStringList m_columns;
    bool m_cleared = false;
    QComboBox* m_shape = nullptr;
    QFormLayout* m_form = nullptr;
    QMap<QString, QComboBox*> m_keyCombos;  // dataset key -> its column choice
};

// "instruction ← question, output ← answer" for a status line; empty for no mapping.
QString describeMapping(const QVariantMap& mapping);

}  // namespace tandem::ui
