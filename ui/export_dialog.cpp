// SPDX-FileCopyrightText: 2026 The Tandem developers
// SPDX-License-Identifier: GPL-3.0-or-later
// ExportDialog: the worker returns an Outcome by value (files listed on the worker too), so the GUI thread
// never touches the filesystem beyond a QFileInfo check of the chosen folder.
#include "ui/export_dialog.h"

#include <QComboBox>
#include <QDesktopServices>
#include <QDialogButtonBox>
#include <QDir>
#include <QFileDialog>
#include <QFileInfo>
#include <QFormLayout>
#include <QHBoxLayout>
#include <QIcon>
#include <QLabel>
#include <QLineEdit>
#include <QLocale>
#include <QMessageBox>
#include <QPointer>
#include <QProgressBar>
#include <QPushButton>
#include <QSettings>
#include <QUrl>
#include <QVBoxLayout>
#include <QtConcurrent/QtConcurrentRun>

#include <exception>
#include <new>

#include "tandem/error.h"
#include "tandem/trainer.h"
#include "ui/run_scan.h"
#include "ui/status_text.h"

namespace tandem::ui {

ExportDialog::ExportDialog(const QString& runDir, QWidget* parent) : QDialog(parent), m_runDir(runDir) {
    setObjectName(QStringLiteral("exportDialog"));
    setWindowTitle(tr("Export"));
    setWindowIcon(QIcon(QStringLiteral(":/icons/export.svg")));

    auto* runLabel = new QLabel(QDir::toNativeSeparators(runDir), this);
    runLabel->setObjectName(QStringLiteral("exportRunLabel"));
    runLabel->setTextInteractionFlags(Qt::TextSelectableByMouse);
    runLabel->setToolTip(tr("The run whose adapter is exported"));
    runLabel->setWordWrap(true);  // in a form layout (status_text.h)

    m_folder = new QLineEdit(this);
    m_folder->setObjectName(QStringLiteral("exportFolderEdit"));
    m_folder->setToolTip(tr("Folder to write adapter_config.json and adapter_model.safetensors into (created "
                            "when missing)"));
    QSettings settings;
    const QString last = settings.value(QStringLiteral("export/lastFolder")).toString();
    const QString base = last.isEmpty() ? QFileInfo(runDir).absolutePath() : last;
    m_folder->setText(QDir(base).filePath(QFileInfo(runDir).fileName() + QStringLiteral("-adapter")));

    m_browse = new QPushButton(tr("Browse…"), this);
    m_browse->setObjectName(QStringLiteral("exportBrowseButton"));
    m_browse->setToolTip(tr("Choose the target folder"));
    connect(m_browse, &QPushButton::clicked, this, [this] {
        const QString dir = QFileDialog::getExistingDirectory(this, tr("Export the adapter to"), targetFolder());
        if (!dir.isEmpty()) m_folder->setText(dir);
    });
    auto* folderRow = new QHBoxLayout;
    folderRow->addWidget(m_folder, 1);
    folderRow->addWidget(m_browse);

    auto* form = new QFormLayout;
    form->addRow(tr("Run:"), runLabel);
    form->addRow(tr("Target folder:"), folderRow);

    m_format = new QComboBox(this);
    m_format->setObjectName(QStringLiteral("exportFormatCombo"));
    m_format->addItem(tr("LoRA adapter (PEFT)"), QStringLiteral("peft"));
    m_format->addItem(tr("Merged model, bf16"), QStringLiteral("merged:bf16"));
    m_format->addItem(tr("Merged model, fp16"), QStringLiteral("merged:fp16"));
    m_format->addItem(tr("Merged model, fp32"), QStringLiteral("merged:fp32"));
    m_format->addItem(tr("GGUF for llama.cpp / Ollama, Q4_K_M (smallest)"), QStringLiteral("gguf:q4_k_m"));
    m_format->addItem(tr("GGUF for llama.cpp / Ollama, Q5_K_M"), QStringLiteral("gguf:q5_k_m"));
    m_format->addItem(tr("GGUF for llama.cpp / Ollama, Q6_K"), QStringLiteral("gguf:q6_k"));
    m_format->addItem(tr("GGUF for llama.cpp / Ollama, Q8_0"), QStringLiteral("gguf:q8_0"));
    m_format->addItem(tr("GGUF for llama.cpp / Ollama, f16"), QStringLiteral("gguf:f16"));
    m_format->addItem(tr("GGUF for llama.cpp / Ollama, bf16"), QStringLiteral("gguf:bf16"));
    m_format->addItem(tr("GGUF LoRA adapter (llama.cpp --lora), f16"), QStringLiteral("gguf-lora:f16"));
    m_format->setToolTip(tr("The adapter alone (small; loads with peft and as Tandem's init adapter), the base "
                            "model with the adapter merged in (a full model folder for transformers or vLLM; as "
                            "large as the base model), the merged model as one GGUF file with an Ollama Modelfile "
                            "(llama.cpp, Ollama, LM Studio; quantized), or the adapter as a GGUF LoRA adapter"));
    form->addRow(tr("Format:"), m_format);
    m_size = new QLabel(this);
    m_size->setObjectName(QStringLiteral("exportSizeLabel"));
    m_size->setToolTip(tr("About how much the export writes"));
    form->addRow(tr("Size:"), m_size);
    auto* format = new QLabel(this);
    format->setWordWrap(true);
    auto describe = [this, format, runDir] {
        const QString choice = m_format->currentData().toString();
        const QString kind = choice.section(QLatin1Char(':'), 0, 0);
        if (kind == QStringLiteral("merged"))
            format->setText(tr("A model folder: the base model's weights with the adapter merged in (merged in fp32, "
                               "rounded once), its config and tokenizer files."));
        else if (kind == QStringLiteral("gguf"))
            format->setText(tr("One GGUF file (the merged model, quantized as chosen, with its tokenizer and chat "
                               "template) and a Modelfile: ollama create NAME -f Modelfile, or llama-cli -m FILE."));
        else if (kind == QStringLiteral("gguf-lora"))
            format->setText(tr("The adapter as a GGUF LoRA adapter: llama-cli -m BASE.gguf --lora FILE, over a GGUF "
                               "of the same base model."));
        else
            format->setText(tr("Adapter files: adapter_config.json and adapter_model.safetensors (loads with "
                               "peft.PeftModel.from_pretrained and as Tandem's init adapter)."));
        const QString name = QFileInfo(m_folder->text()).fileName();
        const QString suffix = kind == QStringLiteral("peft") ? QStringLiteral("-adapter") : QLatin1Char('-') + kind;
        const QString run = QFileInfo(runDir).fileName();
        for (const char* known : {"-adapter", "-merged", "-gguf", "-gguf-lora"})
            if (name == run + QLatin1String(known)) {
                m_folder->setText(QDir(QFileInfo(m_folder->text()).absolutePath()).filePath(run + suffix));
                break;
            }
        const uint64_t bytes = tandem::estimate_export_bytes(runDir.toStdString(), optionsFor(choice));
        m_size->setText(bytes ? tr("about %1").arg(QLocale().formattedDataSize(qint64(bytes))) : tr("unknown"));
    };
    connect(m_format, &QComboBox::currentIndexChanged, this, describe);
    describe();

    m_progress = new QProgressBar(this);
    m_progress->setObjectName(QStringLiteral("exportProgress"));
    m_progress->setRange(0, 0);  // busy
    m_progress->setVisible(false);
    m_progress->setToolTip(tr("Writing the adapter"));

    m_result = new QLabel(this);
    m_result->setObjectName(QStringLiteral("exportResultLabel"));
    wrapMessage(m_result);

    // A small read of the run folder (config.json, the checkpoint list, the end of metrics.jsonl).
    m_diverged = readRunEntry(runDir).status == RunStatus::Diverged;
    m_warning = new QLabel(this);
    m_warning->setObjectName(QStringLiteral("exportWarningLabel"));
    setStatusText(m_warning,
                  tr("This run diverged: its loss stopped being finite. What is exported is its last good "
                     "checkpoint, from before that; test the adapter before you use it."),
                  Tone::Bad);
    wrapMessage(m_warning);
    m_warning->setVisible(m_diverged);
    m_result->setTextInteractionFlags(Qt::TextSelectableByMouse);

    m_exportButton = new QPushButton(QIcon(QStringLiteral(":/icons/export.svg")), tr("Export"), this);
    m_exportButton->setObjectName(QStringLiteral("exportButton"));
    m_exportButton->setToolTip(tr("Write the adapter to the target folder (asks before replacing an adapter "
                                  "already there)"));
    m_exportButton->setDefault(true);
    connect(m_exportButton, &QPushButton::clicked, this, &ExportDialog::startExport);

    m_openFolder = new QPushButton(tr("Open folder"), this);
    m_openFolder->setObjectName(QStringLiteral("exportOpenFolderButton"));
    m_openFolder->setToolTip(tr("Show the exported adapter's folder in the file manager"));
    m_openFolder->setEnabled(false);
    connect(m_openFolder, &QPushButton::clicked, this,
            [this] { QDesktopServices::openUrl(QUrl::fromLocalFile(m_target)); });

    m_cancel = new QPushButton(tr("Cancel export"), this);
    m_cancel->setObjectName(QStringLiteral("exportCancelButton"));
    m_cancel->setToolTip(tr("Stop the export; nothing is left in the target folder"));
    m_cancel->setVisible(false);
    connect(m_cancel, &QPushButton::clicked, this, [this] {
        if (m_cancelFlag) m_cancelFlag->store(true);
    });
    m_buttons = new QDialogButtonBox(QDialogButtonBox::Close, this);
    m_buttons->addButton(m_cancel, QDialogButtonBox::ActionRole);
    m_buttons->addButton(m_openFolder, QDialogButtonBox::ActionRole);
    m_buttons->addButton(m_exportButton, QDialogButtonBox::ActionRole);
    connect(m_buttons, &QDialogButtonBox::rejected, this, &ExportDialog::reject);

    auto* layout = new QVBoxLayout(this);
    layout->addLayout(form);
    layout->addWidget(format);
    layout->addWidget(m_warning);
    layout->addWidget(m_progress);
    layout->addWidget(m_result);
    layout->addStretch(1);
    layout->addWidget(m_buttons);
    resize(560, sizeHint().height());

    connect(&m_watcher, &QFutureWatcher<Outcome>::finished, this, &ExportDialog::onFinished);
}

ExportOptions ExportDialog::optionsFor(const QString& choice) {
    ExportOptions eo;
    eo.format = choice.section(QLatin1Char(':'), 0, 0).toStdString();
    const std::string arg = choice.section(QLatin1Char(':'), 1).toStdString();
    if (eo.format == "merged") eo.dtype = arg;
    else if (eo.format == "gguf" || eo.format == "gguf-lora") eo.quant = arg;
    return eo;
}

ExportDialog::~ExportDialog() {
    m_watcher.waitForFinished();  // the worker only holds copies, but let it finish its files
}

QString ExportDialog::targetFolder() const { return m_folder->text().trimmed(); }

void ExportDialog::setTargetFolder(const QString& folder) { m_folder->setText(folder); }

bool ExportDialog::holdsAdapter(const QString& folder) {
    const QDir dir(folder);
    return dir.exists(QStringLiteral("adapter_config.json")) || dir.exists(QStringLiteral("adapter_model.safetensors"));
}

void ExportDialog::startExport() {
    if (isExporting()) return;
    const QString target = targetFolder();
    if (target.isEmpty()) {
        showError(tr("Choose a target folder first."));
        return;
    }
    if (QFileInfo(target).exists() && !QFileInfo(target).isDir()) {
        showError(tr("%1 is a file, not a folder.").arg(QDir::toNativeSeparators(target)));
        return;
    }
    if (m_diverged) {
        QMessageBox box(QMessageBox::Warning, tr("Export a diverged run?"),
                        tr("This run diverged (its loss stopped being finite), so it has no final adapter. Export "
                           "its last good checkpoint anyway?"),
                        QMessageBox::Yes | QMessageBox::No, this);
        box.setObjectName(QStringLiteral("divergedExportQuestion"));
        box.setDefaultButton(QMessageBox::No);
        if (box.exec() != QMessageBox::Yes) {
            setResult(tr("Not exported: the run diverged."), false);
            return;
        }
    }
    const QString choice = m_format->currentData().toString();
    const bool merged = !choice.startsWith(QStringLiteral("peft"));  // a whole folder, written with progress
    bool overwrite = false;
    if (merged && QDir(target).exists() && !QDir(target).isEmpty()) {
        const auto answer = QMessageBox::question(
            this, tr("Replace the folder?"),
            tr("%1 is not empty. Replace everything in it with the export?").arg(QDir::toNativeSeparators(target)),
            QMessageBox::Yes | QMessageBox::No, QMessageBox::No);
        if (answer != QMessageBox::Yes) {
            setResult(tr("Not exported: %1 was kept as it is.").arg(QDir::toNativeSeparators(target)), false);
            return;
        }
        overwrite = true;
    } else if (!merged && holdsAdapter(target)) {
        const auto answer = QMessageBox::question(
            this, tr("Replace the adapter?"),
            tr("%1 already holds an adapter. Replace its adapter files?").arg(QDir::toNativeSeparators(target)),
            QMessageBox::Yes | QMessageBox::No, QMessageBox::No);
        if (answer != QMessageBox::Yes) {
            setResult(tr("Not exported: the adapter in %1 was kept.").arg(QDir::toNativeSeparators(target)), false);
            return;
        }
        overwrite = true;
    }
    m_target = QDir(target).absolutePath();
    setBusy(true);
    m_openFolder->setEnabled(false);
    setResult(tr("Exporting…"), false);
    const std::string run = m_runDir.toStdString(), out = m_target.toStdString();
    const QString outDir = m_target;
    ExportOptions eo = optionsFor(choice);
    eo.overwrite = overwrite;
    m_cancelFlag = std::make_shared<std::atomic<bool>>(false);
    eo.cancel = m_cancelFlag.get();
    if (merged) {
        m_progress->setRange(0, 1000);
        m_progress->setValue(0);
        QPointer<QProgressBar> bar = m_progress;
        eo.progress = [bar](uint64_t done, uint64_t total) {
            const int value = total ? int(1000.0 * double(done) / double(total)) : 0;
            QMetaObject::invokeMethod(bar, [bar, value] { if (bar) bar->setValue(value); }, Qt::QueuedConnection);
        };
    } else {
        m_progress->setRange(0, 0);  // busy
    }
    m_cancel->setVisible(merged);
    const auto flag = m_cancelFlag;  // kept alive by the worker
    m_watcher.setFuture(QtConcurrent::run([run, out, outDir, eo, flag, merged]() -> Outcome {
        Outcome o;
        try {
            o.source = QString::fromStdString(tandem::export_run(run, out, eo));
            o.files = merged ? QDir(outDir).entryList(QDir::Files, QDir::Name)
                             : QDir(outDir).entryList({QStringLiteral("adapter_*"), QStringLiteral("README*")},
                                                      QDir::Files, QDir::Name);
            o.ok = true;
        } catch (const tandem::Error& e) {
            o.message = QString::fromStdString(e.what());
        } catch (const std::bad_alloc&) {
            o.message = tr("out of memory");
        } catch (const std::exception& e) {
            o.message = QString::fromStdString(e.what());
        }
        return o;
    }));
}

void ExportDialog::onFinished() {
    const Outcome o = m_watcher.result();
    setBusy(false);
    if (!o.ok && m_cancelFlag && m_cancelFlag->load()) {
        setResult(tr("Export cancelled: nothing was written to %1.").arg(QDir::toNativeSeparators(m_target)), false);
        emit exportFailed(o.message);
        return;
    }
    if (!o.ok) {
        showError(tr("Export failed: %1").arg(o.message));
        emit exportFailed(o.message);
        return;
    }
    m_written = o.files;
    QSettings().setValue(QStringLiteral("export/lastFolder"), QFileInfo(m_target).absolutePath());
    setResult(tr("Exported %1 to %2\nFiles: %3")
                  .arg(o.source, QDir::toNativeSeparators(m_target), o.files.join(QStringLiteral(", "))),
              false);
    m_openFolder->setEnabled(true);
    emit exported(m_target, o.source);
}

void ExportDialog::showError(const QString& message) {
    setResult(message, true);
}

void ExportDialog::setResult(const QString& text, bool error) {
    m_result->setStyleSheet(error ? QStringLiteral("color: #d03a3a;") : QString());
    m_result->setText(text);
    // The dialog was sized before this text existed: grow it so the wrapped text is never cut off.
    if (QLayout* l = layout()) {
        l->activate();
        const int needed = l->hasHeightForWidth() ? l->totalHeightForWidth(width()) : l->totalSizeHint().height();
        if (needed > height()) resize(width(), needed);
    }
}

void ExportDialog::setBusy(bool busy) {
    m_progress->setVisible(busy);
    m_format->setEnabled(!busy);
    if (!busy) m_cancel->setVisible(false);
    m_exportButton->setEnabled(!busy);
    m_browse->setEnabled(!busy);
    m_folder->setEnabled(!busy);
    m_buttons->button(QDialogButtonBox::Close)->setEnabled(!busy);
}

void ExportDialog::reject() {
    if (isExporting()) return;
    QDialog::reject();
}

}  // namespace tandem::ui
