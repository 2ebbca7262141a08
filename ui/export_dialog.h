// SPDX-FileCopyrightText: 2026 The Tandem developers
// SPDX-License-Identifier: GPL-3.0-or-later
// tandem::ui::ExportDialog — exports a run to a folder the user picks, from the final adapter of a finished run
// or the latest checkpoint's LoRA values of an unfinished one: the LoRA adapter (PEFT layout), or the model with
// the adapter merged in (bf16 / fp16 / fp32, a Hugging Face model folder), the merged model as GGUF (Q4_K_M …
// bf16) with an Ollama Modelfile, or the adapter as a GGUF LoRA adapter; each with a size estimate.
//  - Every export but the PEFT adapter shows its progress (bytes written) and can be cancelled; it leaves no
//    folder behind then.
// Decisions a reader must know:
//  - tandem::export_run runs on a worker (QtConcurrent) with a busy bar; the dialog stays responsive
//    and errors become a message in the dialog, never an exception.
//  - A folder that already holds an adapter (adapter_config.json or adapter_model.safetensors) is only
//    overwritten after the user confirms in a QMessageBox::question; no other file is touched.
//  - The default target is <run>-adapter next to the run folder; once the user exported somewhere, the
//    chosen folder's parent (QSettings "export/lastFolder") is used instead.
//  - The dialog grows to show the whole result (it is set after the dialog was sized); Open folder shows the
//    exported folder in the file manager.
//  - A diverged run (run_scan.h) is exported only after a warning: a line in the dialog from the start, and
//    a QMessageBox::question on Export whose default is No.
#pragma once

#include <QDialog>
#include <QFutureWatcher>
#include <QString>
#include <QStringList>

#include <atomic>
#include <memory>

#include "tandem/trainer.h"

class QComboBox;
class QDialogButtonBox;
class QLabel;
class QLineEdit;
class QProgressBar;
class QPushButton;

namespace tandem::ui {

class ExportDialog : public QDialog {
    Q_OBJECT
    Q_DISABLE_COPY_MOVE(ExportDialog)

public:
    explicit ExportDialog(const QString& runDir, QWidget* parent = nullptr);
    ~ExportDialog() override;

    QString runDir() const { return m_runDir; }
    QString targetFolder() const;
    void setTargetFolder(const QString& folder);
    bool isExporting() const { return m_watcher.isRunning(); }
    QStringList writtenFiles() const { return m_written; }  // file names of the last successful export

    static bool holdsAdapter(const QString& folder);
    // The engine's options for a format entry's data ("gguf:q4_k_m").
    static ExportOptions optionsFor(const QString& choice);

public slots:
    void startExport();

signals:
    void exported(const QString& folder, const QString& source);  // source: "adapter" or "checkpoints/step-N"
    void exportFailed(const QString& message);

protected:
    void reject() override;  // not while exporting: the worker writes into the folder

private:
    struct Outcome {
        bool ok = false;
        QString source;   // what was exported
        QString message;  // the error, when !ok
        QStringList files;
    };
    void onFinished();
    void setBusy(bool busy);
    void setResult(const QString& text, bool error);
    void showError(const QString& message);

    QString m_runDir;
    QLineEdit* m_folder = nullptr;
    // data: "peft", "merged:bf16|fp16|fp32", "gguf:q4_k_m|q5_k_m|q6_k|q8_0|f16|bf16" or "gguf-lora:f16"
    QComboBox* m_format = nullptr;
    QLabel* m_size = nullptr;  // estimate_export_bytes of the chosen format
    QPushButton* m_cancel = nullptr;
    std::shared_ptr<std::atomic<bool>> m_cancelFlag;
    QPushButton* m_browse = nullptr;
    QPushButton* m_exportButton = nullptr;
    QPushButton* m_openFolder = nullptr;
    QProgressBar* m_progress = nullptr;
    QLabel* m_result = nullptr;
    QLabel* m_warning = nullptr;  // shown for a diverged run
    bool m_diverged = false;
    QDialogButtonBox* m_buttons = nullptr;
    QFutureWatcher<Outcome> m_watcher;
    QString m_target;
    QStringList m_written;
};

}  // namespace tandem::ui
