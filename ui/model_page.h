// SPDX-FileCopyrightText: 2026 The Tandem developers
// SPDX-License-Identifier: GPL-3.0-or-later
// The Model page: choose the Hugging Face model folder to fine-tune (file dialog, drag and drop of a folder,
// the recent list, models found in the local Hugging Face cache, a download from the Hub by repo id
// (hub_download.h: size preview, progress, cancel, resume), or the built-in demo) and see what it is:
// architecture, size, dtype, quantization (a *-bnb-4bit checkpoint), tokenizer, chat template, and whether
// Tandem can train it or why not.
// Decisions a reader must know:
//  - Inspecting reads every safetensors header (and the tokenizer), so it runs on a worker thread
//    (QtConcurrent); only the latest selection's result is shown, earlier ones are dropped when they land.
//  - The lists show what belongs in them while empty (PlaceholderListWidget); the Hugging Face cache is
//    scanned at start, on Refresh (a download made by other tools) and after a download made here, which is
//    then selected.
//  - modelChanged fires once per selection, when its inspection is done (supported or not); modelPath()
//    is the selection at once, modelSupported() stays false until the inspection says otherwise.
#pragma once

#include <QString>
#include <QWidget>

#include <functional>

#include "ui/model_inspection.h"
#include "ui/recent_list.h"

class QFormLayout;
class QLabel;
class QListWidget;
class QPushButton;

namespace tandem::ui {

class HubDownloadBox;

class ModelPage : public QWidget {
    Q_OBJECT
    Q_DISABLE_COPY_MOVE(ModelPage)

public:
    explicit ModelPage(QWidget* parent = nullptr);

    // Where selectDemo() writes the built-in demo model: studioDataFolder()/demo-model (app_paths.h).
    static QString demoFolder();

    QString modelPath() const { return m_path; }
    bool modelSupported() const { return m_supported; }

public slots:
    void selectModel(const QString& folder);
    // Writes the demo model to studioDataFolder()/demo-model (app_paths.h) the first time, then selects it.
    void selectDemo();
    void browse();
    void rescanHfCache();

signals:
    void modelChanged(const QString& folder, bool supported);
    // Before modelChanged: the inspected model's hidden size and context length (0 when not inspected).
    void modelShape(qint64 hiddenSize, qint64 contextLength);

protected:
    void dragEnterEvent(QDragEnterEvent* event) override;
    void dropEvent(QDropEvent* event) override;

private:
    void inspect(const QString& folder, std::function<ModelInspection()> job);
    void showInspection(const ModelInspection& result);
    void reloadRecent();

    QString m_path;
    bool m_supported = false;
    quint64 m_generation = 0;  // the selection whose result is awaited
    RecentList m_recent{QStringLiteral("model/recent")};

    QString m_selectAfterScan;  // a downloaded snapshot to show selected once the cache list is rescanned

    HubDownloadBox* m_hub = nullptr;
    QPushButton* m_browse = nullptr;
    QPushButton* m_demo = nullptr;
    QLabel* m_pathLabel = nullptr;
    QListWidget* m_recentList = nullptr;
    QListWidget* m_hfList = nullptr;
    QLabel* m_hfLabel = nullptr;
    QPushButton* m_hfRefresh = nullptr;
    QLabel* m_architecture = nullptr;
    QLabel* m_layers = nullptr;
    QLabel* m_hiddenSize = nullptr;
    QLabel* m_parameters = nullptr;
    QLabel* m_experts = nullptr;
    QLabel* m_dtype = nullptr;
    QLabel* m_quantization = nullptr;  // its row shows only for a pre-quantized (4-bit) checkpoint
    QFormLayout* m_summaryForm = nullptr;
    QLabel* m_tokenizer = nullptr;
    QLabel* m_chatTemplate = nullptr;
    QLabel* m_status = nullptr;
};

}  // namespace tandem::ui
