// SPDX-FileCopyrightText: 2026 The Tandem developers
// SPDX-License-Identifier: GPL-3.0-or-later
// See column_mapping_dialog.h.
#include "ui/column_mapping_dialog.h"

#include <QComboBox>
#include <QDialogButtonBox>
#include <QFormLayout>
#include <QLabel>
#include <QPushButton>
#include <QVBoxLayout>

#include "ui/status_text.h"

namespace tandem::ui {
namespace {

struct Shape {
    const char* name;  // shown
    QStringList keys;  // dataset keys, required first
    int required;      // how many of keys are required
};

const QList<Shape>& shapes() {
    static const QList<Shape> s = {
        {"instruction / input / output (alpaca)", {"instruction", "output", "input", "system"}, 2},
        {"prompt / completion", {"prompt", "completion"}, 2},
        {"chat messages", {"messages"}, 1},
        {"plain text", {"text"}, 1},
    };
    return s;
}

// Common column names for each key, best first.
QStringList synonyms(const QString& key) {
    static const QMap<QString, QStringList> s = {
        {"instruction", {"instruction", "question", "query", "problem", "task", "prompt"}},
        {"input", {"input", "context"}},
        {"output", {"output", "answer", "response", "solution", "target", "completion"}},
        {"system", {"system", "system_prompt"}},
        {"prompt", {"prompt", "question", "query", "input", "source"}},
        {"completion", {"completion", "answer", "response", "output", "target"}},
        {"messages", {"messages", "conversation", "conversations", "chat", "dialog", "dialogue"}},
        {"text", {"text", "content", "body", "document", "story"}},
    };
    return s.value(key);
}

QString findColumn(const QStringList& columns, const QString& key) {
    for (const QString& name : synonyms(key))
        for (const QString& c : columns)
            if (c.trimmed().compare(name, Qt::CaseInsensitive) == 0) return c;
    return {};
}

}  // namespace

QString describeMapping(const QVariantMap& mapping) {
    QStringList parts;
    for (auto it = mapping.begin(); it != mapping.end(); ++it)
        parts.append(QStringLiteral("%1 ← %2").arg(it.key(), it.value().toString()));
    return parts.join(QStringLiteral(", "));
}

ColumnMappingDialog::ColumnMappingDialog(const QString& fileName, const QStringList& columns,
                                         const QVariantMap& current, QWidget* parent)
    : QDialog(parent), m_columns(columns) {
    setObjectName(QStringLiteral("columnMappingDialog"));
    setWindowTitle(tr("Map columns"));
    auto* intro = new QLabel(tr("Training does not know the column names of %1 (%2). Say what each column holds.")
                                 .arg(fileName, columns.isEmpty() ? tr("none found") : columns.join(QStringLiteral(", "))));
    intro->setObjectName(QStringLiteral("mappingIntroLabel"));
    wrapMessage(intro);

    m_shape = new QComboBox;
    m_shape->setObjectName(QStringLiteral("mappingShapeCombo"));
    m_shape->setToolTip(tr("What one record of the file is"));
    for (const Shape& s : shapes()) m_shape->addItem(tr(s.name));
    m_form = new QFormLayout;
    m_form->addRow(tr("Records are"), m_shape);
    for (const Shape& s : shapes()) {
        for (int k = 0; k < s.keys.size(); ++k) {
            const QString key = s.keys[k];
            if (m_keyCombos.contains(key)) continue;
            auto* combo = new QComboBox;
            combo->setObjectName(QStringLiteral("mapColumn_") + key);
            if (k >= s.required) combo->addItem(tr("(none)"), QString());
            for (const QString& c : columns) combo->addItem(c, c);
            m_keyCombos.insert(key, combo);
            m_form->addRow(key, combo);
        }
    }

    // The shape and columns in effect, else guessed from the names.
    int shape = -1;
    for (int i = 0; i < shapes().size() && shape < 0; ++i)
        for (const QString& key : shapes()[i].keys)
            if (current.contains(key)) shape = i;
    if (shape < 0) {
        if (!findColumn(columns, "messages").isEmpty())
            shape = 2;
        else if (!findColumn(columns, "instruction").isEmpty() && !findColumn(columns, "output").isEmpty())
            shape = 0;
        else if (!findColumn(columns, "prompt").isEmpty() && !findColumn(columns, "completion").isEmpty())
            shape = 1;
        else
            shape = 3;
    }
    for (auto it = m_keyCombos.begin(); it != m_keyCombos.end(); ++it) {
        const QString chosen = current.contains(it.key()) ? current.value(it.key()).toString() : findColumn(columns, it.key());
        const int index = it.value()->findData(chosen);
        if (index >= 0) it.value()->setCurrentIndex(index);
    }
    m_shape->setCurrentIndex(shape);
    connect(m_shape, &QComboBox::currentIndexChanged, this, &ColumnMappingDialog::showShape);
    showShape();

    auto* buttons = new QDialogButtonBox(QDialogButtonBox::Ok | QDialogButtonBox::Cancel);
    buttons->button(QDialogButtonBox::Ok)->setObjectName(QStringLiteral("mappingOkButton"));
    buttons->button(QDialogButtonBox::Ok)->setText(tr("Use these columns"));
    auto* clear = buttons->addButton(tr("Clear"), QDialogButtonBox::ResetRole);
    clear->setObjectName(QStringLiteral("mappingClearButton"));
    clear->setToolTip(tr("Read the file with its own column names again"));
    connect(buttons, &QDialogButtonBox::accepted, this, &QDialog::accept);
    connect(buttons, &QDialogButtonBox::rejected, this, &QDialog::reject);
    connect(clear, &QPushButton::clicked, this, [this] {
        m_cleared = true;
        accept();
    });

    auto* layout = new QVBoxLayout(this);
    layout->addWidget(intro);
    layout->addLayout(m_form);
    layout->addWidget(buttons);
}

void ColumnMappingDialog::showShape() {
    const QStringList keys = shapes()[m_shape->currentIndex()].keys;
    for (auto it = m_keyCombos.begin(); it != m_keyCombos.end(); ++it) m_form->setRowVisible(it.value(), keys.contains(it.key()));
}

QVariantMap ColumnMappingDialog::mapping() const {
    QVariantMap m;
    if (m_cleared) return m;
    for (const QString& key : shapes()[m_shape->currentIndex()].keys) {
        const QString column = m_keyCombos.value(key)->currentData().toString();
        if (!column.isEmpty() && column != key) m.insert(key, column);
    }
    return m;
}

}  // namespace tandem::ui
