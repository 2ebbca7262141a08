// SPDX-FileCopyrightText: 2026 The Tandem developers
// SPDX-License-Identifier: GPL-3.0-or-later
// The Data page: choose a dataset file and see how training will read it: the detected format (override
// possible), record count, invalid records with their line numbers, rendered samples with the trained
// (label) tokens highlighted, a token-length histogram with the max_seq_len cut-off, and the packing
// efficiency at the Train page's batch size.
// Decisions a reader must know:
//  - Three worker-thread stages (dataset_analysis.h): read (on a new file or format), tokenize (on a new
//    model too), summarize limits (on every setLimits, debounced). Each stage has a generation counter; a
//    result that lands after a newer request started is dropped.
//  - Without a model only the record-level information is shown; the preview and histogram say they need
//    one. datasetChanged fires after every read (and again if tokenizing changes the verdict).
//  - The preview decodes one sample at a time on the GUI thread (cheap: at most kPreviewTokens tokens).
//  - The chat template and "train on prompt tokens too" are run settings chosen here, where their effect is
//    seen (renderingChanged -> TrainPage::setRendering); a reopened run sets them back with setRendering.
//  - A dataset can come from the Hub (hub_download.h): after the download the repo's data files are listed
//    (hubFileCombo, shown when there are several) with the train split preselected, and the chosen one is read.
//  - Column mapping (column_mapping_dialog.h): when the file's keys are not recognised the dialog opens (and
//    "Map columns…" reopens it); the mapping is remembered per file in QSettings (data/columnMappings) and
//    sent to the Train page (datasetColumns) before each datasetChanged, so the run config carries it.
//  - checked(problem, warnings) tells the Train page what the data means for a run at its limits: a problem
//    blocks training (no sample left at Max seq len), warnings do not (a template the tokenizer does not know).
#pragma once

#include <QString>
#include <QStringList>
#include <QTimer>
#include <QVariantMap>
#include <QWidget>

#include "ui/dataset_analysis.h"
#include "ui/recent_list.h"

class QCheckBox;
class QComboBox;
class QLabel;
class QListWidget;
class QPushButton;
class QSpinBox;
class QTextBrowser;

namespace tandem::ui {

class HubDownloadBox;
class LengthHistogram;

class DataPage : public QWidget {
    Q_OBJECT
    Q_DISABLE_COPY_MOVE(DataPage)

public:
    static constexpr int kPreviewTokens = 4096;

    explicit DataPage(QWidget* parent = nullptr);

    QString datasetPath() const { return m_path; }
    QString format() const { return m_format; }  // "auto" or a forced format name
    QVariantMap columns() const { return m_columns; }  // the column mapping in effect (key -> column)
    // The mapping remembered for a file (QSettings), or set for it.
    static QVariantMap rememberedColumns(const QString& path);
    static void rememberColumns(const QString& path, const QVariantMap& columns);
    bool datasetValid() const;

public slots:
    void selectDataset(const QString& path);
    // The same with the format forced (a reopened run's "auto" or format name), read once.
    // columns: the run's column mapping, remembered for the file.
    void selectDatasetWithFormat(const QString& path, const QString& format, const QVariantMap& columns = {});
    // Opens the column-mapping dialog for the current file (its columns are read on a worker first).
    void mapColumns();
    // After a Hub download: list the data files, preselect the train split and read it.
    void showDownloadedFiles(const QString& snapshot, const QStringList& files);
    void setModel(const QString& folder);
    void setLimits(int maxSeqLen, int batchTokens, bool packing);
    // chatTemplate: "auto" or a built-in name (chatml, alpaca, llama3); re-renders when either changes.
    void setRendering(const QString& chatTemplate, bool trainOnAll);
    void browse();

signals:
    void datasetChanged(const QString& path, const QString& format, bool valid);
    void datasetColumns(const QVariantMap& columns);  // just before each datasetChanged
    void renderingChanged(const QString& chatTemplate, bool trainOnAll);
    void checked(const QString& problem, const QStringList& warnings);

protected:
    void dragEnterEvent(QDragEnterEvent* event) override;
    void dropEvent(QDropEvent* event) override;

private:
    void startRead();
    void startTokenize();
    void startSummary();
    void showRead();
    void showTokens();
    void showPreview(int sample);
    void showInvalid();
    void reloadRecent();
    void emitChanged();
    void emitChecked();

    QString m_path;
    QString m_format = QStringLiteral("auto");
    QVariantMap m_columns;
    QString m_mappingOffered;  // the file the dialog opened for by itself (once per selection)
    QString m_model;
    int m_maxSeqLen = 2048;
    int m_batchTokens = 4096;
    bool m_packing = true;
    QString m_chatTemplate = QStringLiteral("auto");
    bool m_trainOnAll = false;
    QString m_samplesProblem;  // the latest summary's error (no sample left, a sample longer than the batch)

    DatasetRead m_read;
    DatasetTokens m_tokens;
    quint64 m_readGeneration = 0;
    quint64 m_tokenGeneration = 0;
    quint64 m_summaryGeneration = 0;
    bool m_lastEmittedValid = false;
    QTimer m_summaryDebounce;
    RecentList m_recent{QStringLiteral("data/recent")};

    HubDownloadBox* m_hub = nullptr;
    QComboBox* m_hubFiles = nullptr;
    QLabel* m_hubFilesLabel = nullptr;
    QPushButton* m_mapButton = nullptr;
    QLabel* m_mappingLabel = nullptr;
    QPushButton* m_browse = nullptr;
    QLabel* m_pathLabel = nullptr;
    QComboBox* m_formatCombo = nullptr;
    QLabel* m_formatLabel = nullptr;
    QListWidget* m_recentList = nullptr;
    QLabel* m_records = nullptr;
    QListWidget* m_invalidList = nullptr;
    QSpinBox* m_sampleSpin = nullptr;
    QLabel* m_sampleInfo = nullptr;
    QTextBrowser* m_preview = nullptr;
    LengthHistogram* m_histogram = nullptr;
    QLabel* m_lengthStats = nullptr;
    QLabel* m_packingLabel = nullptr;
    QComboBox* m_templateCombo = nullptr;
    QCheckBox* m_trainOnAllCheck = nullptr;
    QLabel* m_templateWarning = nullptr;
};

}  // namespace tandem::ui
