// SPDX-FileCopyrightText: 2026 The Tandem developers
// SPDX-License-Identifier: GPL-3.0-or-later
// See data_page.h.
#include "ui/data_page.h"

#include <QCheckBox>
#include <QComboBox>
#include <QDir>
#include <QDragEnterEvent>
#include <QDropEvent>
#include <QFileDialog>
#include <QFileInfo>
#include <QGroupBox>
#include <QHBoxLayout>
#include <QLabel>
#include <QListWidget>
#include <QMimeData>
#include <QPushButton>
#include <QRegularExpression>
#include <QSettings>
#include <QSpinBox>
#include <QSplitter>
#include <QTextBrowser>
#include <QVBoxLayout>

#include <vector>

#include "tandem/data.h"
#include "ui/column_mapping_dialog.h"
#include "ui/hub_download.h"
#include "ui/length_histogram.h"
#include "ui/run_async.h"
#include "ui/screen_words.h"
#include "ui/status_text.h"

namespace tandem::ui {
namespace {

// The trained-token highlight: a light amber with black text, readable on light and dark palettes.
const QString kTrainedStyle = QStringLiteral("background-color:#ffd966; color:#000000;");

QString fileNameOf(const QString& path) { return QFileInfo(path).fileName(); }

const QString kMappingsKey = QStringLiteral("data/columnMappings");

// The repo file to read first: a train split when there is one ("data/train-00000-of-00001.parquet",
// "train.jsonl"), else the first file.
int trainFileIndex(const QStringList& files) {
    static const QRegularExpression train(QStringLiteral("(^|[/_.-])train([/_.-]|$)"),
                                          QRegularExpression::CaseInsensitiveOption);
    for (int i = 0; i < files.size(); ++i)
        if (train.match(files[i]).hasMatch()) return i;
    return 0;
}

bool isDataFile(const QString& path) {
    static const QStringList exts = {"parquet", "jsonl", "json", "csv", "tsv", "txt", "ndjson"};
    return exts.contains(QFileInfo(path).suffix().toLower());
}

QString droppedFile(const QMimeData* mime) {
    if (!mime->hasUrls() || mime->urls().isEmpty() || !mime->urls().first().isLocalFile()) return {};
    const QFileInfo info(mime->urls().first().toLocalFile());
    return info.isFile() ? info.absoluteFilePath() : QString();
}

}  // namespace

DataPage::DataPage(QWidget* parent) : QWidget(parent) {
    setObjectName(QStringLiteral("dataPage"));
    setAcceptDrops(true);

    m_browse = new QPushButton(tr("Choose dataset…"));
    m_browse->setObjectName(QStringLiteral("browseDatasetButton"));
    m_browse->setToolTip(
        tr("A .jsonl, .json, .parquet, .csv, .tsv or .txt file: alpaca, chat messages, ShareGPT, prompt/completion or "
           "plain text (Ctrl+D)"));
    connect(m_browse, &QPushButton::clicked, this, &DataPage::browse);
    m_pathLabel = new QLabel(tr("No dataset selected. Choose a file or drop one here."));
    m_pathLabel->setObjectName(QStringLiteral("datasetPathLabel"));
    m_pathLabel->setTextInteractionFlags(Qt::TextSelectableByMouse);
    wrapMessage(m_pathLabel);

    m_formatCombo = new QComboBox;
    m_formatCombo->setObjectName(QStringLiteral("formatCombo"));
    m_formatCombo->setToolTip(
        tr("How records are read. Auto detects the format from the keys of the first records; "
           "choose one to override the detection"));
    m_formatCombo->addItem(tr("auto-detect"), QStringLiteral("auto"));
    for (DatasetFormat f : {DatasetFormat::Alpaca, DatasetFormat::Chat, DatasetFormat::ShareGpt,
                            DatasetFormat::PromptCompletion, DatasetFormat::Text}) {
        const QString name = QString::fromUtf8(std::string(dataset_format_name(f)).c_str());
        m_formatCombo->addItem(name, name);
    }
    connect(m_formatCombo, &QComboBox::currentIndexChanged, this, [this] {
        m_format = m_formatCombo->currentData().toString();
        if (!m_path.isEmpty()) startRead();
    });
    m_formatLabel = new QLabel;
    m_formatLabel->setObjectName(QStringLiteral("detectedFormatLabel"));
    m_mapButton = new QPushButton(tr("Map columns…"));
    m_mapButton->setObjectName(QStringLiteral("mapColumnsButton"));
    m_mapButton->setToolTip(
        tr("Say which column of the file is the instruction, output, prompt, completion, messages or text "
           "(remembered for this file)"));
    m_mapButton->setEnabled(false);
    connect(m_mapButton, &QPushButton::clicked, this, &DataPage::mapColumns);
    m_mappingLabel = new QLabel;
    m_mappingLabel->setObjectName(QStringLiteral("columnMappingLabel"));
    wrapMessage(m_mappingLabel);
    m_mappingLabel->setVisible(false);

    m_hub = new HubDownloadBox(hub::RepoType::Dataset);
    connect(m_hub, &HubDownloadBox::downloaded, this, &DataPage::showDownloadedFiles);
    m_hubFilesLabel = new QLabel(tr("File"));
    m_hubFiles = new QComboBox;
    m_hubFiles->setObjectName(QStringLiteral("hubFileCombo"));
    m_hubFiles->setToolTip(tr("The downloaded repo holds several data files (splits): the one to train on"));
    m_hubFiles->setSizeAdjustPolicy(QComboBox::AdjustToContents);
    connect(m_hubFiles, &QComboBox::activated, this,
            [this](int index) { selectDataset(m_hubFiles->itemData(index).toString()); });
    for (QWidget* w : {static_cast<QWidget*>(m_hubFilesLabel), static_cast<QWidget*>(m_hubFiles)}) w->setVisible(false);
    auto* hubFilesRow = new QHBoxLayout;
    hubFilesRow->addWidget(m_hubFilesLabel);
    hubFilesRow->addWidget(m_hubFiles);
    hubFilesRow->addStretch(1);
    qobject_cast<QVBoxLayout*>(m_hub->layout())->addLayout(hubFilesRow);

    auto* top = new QHBoxLayout;
    top->addWidget(m_browse);
    top->addWidget(m_pathLabel, 1);
    top->addWidget(new QLabel(tr("Format")));
    top->addWidget(m_formatCombo);
    top->addWidget(m_formatLabel);
    top->addWidget(m_mapButton);

    auto* recentList = new PlaceholderListWidget;
    recentList->setPlaceholderText(tr("No recent datasets yet. Choose a file or drop one here."));
    m_recentList = recentList;
    m_recentList->setObjectName(QStringLiteral("recentDatasets"));
    m_recentList->setToolTip(tr("Datasets you used before: double-click one (or press Enter) to select it"));
    // Activation only (a double click or Enter): loading on the first click of a double click would act
    // before the second click lands. The list is never reordered under the mouse (recent_list.h).
    connect(m_recentList, &QListWidget::itemActivated, this,
            [this](QListWidgetItem* item) { selectDataset(item->data(Qt::UserRole).toString()); });
    m_records = new QLabel;
    m_records->setObjectName(QStringLiteral("recordCountLabel"));
    wrapMessage(m_records);
    m_records->setTextInteractionFlags(Qt::TextSelectableByMouse);
    auto* invalidList = new PlaceholderListWidget;
    invalidList->setPlaceholderText(tr("No invalid records."));
    m_invalidList = invalidList;
    m_invalidList->setObjectName(QStringLiteral("invalidList"));
    m_invalidList->setToolTip(tr("Records training will skip, with their line in the file and the reason"));
    m_invalidList->setWordWrap(true);

    auto* left = new QWidget;
    auto* leftLayout = new QVBoxLayout(left);
    leftLayout->setContentsMargins(0, 0, 0, 0);
    leftLayout->addWidget(new QLabel(tr("Recent")));
    leftLayout->addWidget(m_recentList, 1);
    leftLayout->addWidget(m_records);
    leftLayout->addWidget(new QLabel(tr("Invalid records")));
    leftLayout->addWidget(m_invalidList, 2);

    m_templateCombo = new QComboBox;
    m_templateCombo->setObjectName(QStringLiteral("chatTemplateCombo"));
    m_templateCombo->setToolTip(
        tr("How conversations are written out for the model: its own chat template (chatml when it has none), "
           "or a built-in one"));
    m_templateCombo->addItem(tr("model's"), QStringLiteral("auto"));
    for (const char* name : {"chatml", "alpaca", "llama3"})
        m_templateCombo->addItem(QString::fromLatin1(name), QString::fromLatin1(name));
    m_trainOnAllCheck = new QCheckBox(tr("Train on prompt tokens too"));
    m_trainOnAllCheck->setObjectName(QStringLiteral("trainOnAllCheck"));
    m_trainOnAllCheck->setToolTip(
        tr("Compute the loss on the prompts and the template's markers as well, not only on the replies (for "
           "text-like data; usually off)"));
    auto renderingEdited = [this] {
        setRendering(m_templateCombo->currentData().toString(), m_trainOnAllCheck->isChecked());
    };
    connect(m_templateCombo, &QComboBox::currentIndexChanged, this, renderingEdited);
    connect(m_trainOnAllCheck, &QCheckBox::toggled, this, renderingEdited);
    m_templateWarning = new QLabel;
    m_templateWarning->setObjectName(QStringLiteral("templateWarningLabel"));
    m_templateWarning->setTextFormat(Qt::PlainText);  // it quotes tokens such as <unk>
    wrapMessage(m_templateWarning);
    m_templateWarning->setVisible(false);

    auto* previewBox = new QGroupBox(tr("Rendered sample (trained tokens highlighted)"));
    m_sampleSpin = new QSpinBox;
    m_sampleSpin->setObjectName(QStringLiteral("sampleSpin"));
    m_sampleSpin->setToolTip(tr("Which sample to show, as the model's chat template renders it"));
    m_sampleSpin->setRange(1, 1);
    m_sampleSpin->setEnabled(false);
    connect(m_sampleSpin, &QSpinBox::valueChanged, this, [this](int v) { showPreview(v - 1); });
    m_sampleInfo = new QLabel;
    m_sampleInfo->setObjectName(QStringLiteral("sampleInfoLabel"));
    wrapMessage(m_sampleInfo);  // it shows tokenizer and template errors, which can be long
    m_preview = new QTextBrowser;
    m_preview->setObjectName(QStringLiteral("previewView"));
    m_preview->setToolTip(
        tr("The text the model sees. Highlighted: the tokens the loss is computed on (the replies); "
           "the rest is context"));
    auto* sampleRow = new QHBoxLayout;
    sampleRow->addWidget(new QLabel(tr("Sample")));
    sampleRow->addWidget(m_sampleSpin);
    sampleRow->addWidget(m_sampleInfo, 1);
    auto* templateRow = new QHBoxLayout;
    templateRow->addWidget(new QLabel(tr("Chat template")));
    templateRow->addWidget(m_templateCombo);
    templateRow->addSpacing(12);
    templateRow->addWidget(m_trainOnAllCheck);
    templateRow->addStretch(1);
    auto* previewLayout = new QVBoxLayout(previewBox);
    previewLayout->addLayout(templateRow);
    previewLayout->addWidget(m_templateWarning);
    previewLayout->addLayout(sampleRow);
    previewLayout->addWidget(m_preview, 1);

    auto* lengthBox = new QGroupBox(tr("Sample lengths"));
    m_histogram = new LengthHistogram;
    m_lengthStats = new QLabel;
    m_lengthStats->setObjectName(QStringLiteral("lengthStatsLabel"));
    wrapMessage(m_lengthStats);
    m_packingLabel = new QLabel;
    m_packingLabel->setObjectName(QStringLiteral("packingLabel"));
    wrapMessage(m_packingLabel);
    m_packingLabel->setToolTip(
        tr("Real tokens / (micro-batches x batch tokens) at the Train page's settings: the "
           "share of compute spent on data rather than padding"));
    auto* lengthLayout = new QVBoxLayout(lengthBox);
    lengthLayout->addWidget(m_histogram, 1);
    lengthLayout->addWidget(m_lengthStats);
    lengthLayout->addWidget(m_packingLabel);

    auto* right = new QSplitter(Qt::Vertical);
    right->addWidget(previewBox);
    right->addWidget(lengthBox);
    auto* splitter = new QSplitter;
    splitter->addWidget(left);
    splitter->addWidget(right);
    splitter->setStretchFactor(0, 1);
    splitter->setStretchFactor(1, 3);

    auto* layout = new QVBoxLayout(this);
    layout->addLayout(top);
    layout->addWidget(m_mappingLabel);
    layout->addWidget(m_hub);
    layout->addWidget(splitter, 1);

    m_summaryDebounce.setSingleShot(true);
    m_summaryDebounce.setInterval(200);
    connect(&m_summaryDebounce, &QTimer::timeout, this, &DataPage::startSummary);

    m_histogram->setCutoff(m_maxSeqLen);
    reloadRecent();
    showRead();
    showTokens();
}

bool DataPage::datasetValid() const {
    return m_read.valid && m_read.path == m_path && !m_tokens.datasetRefused;
}

void DataPage::browse() {
    QSettings settings;
    const QString start = settings.value(QStringLiteral("data/lastFolder"), QDir::homePath()).toString();
    const QString file = QFileDialog::getOpenFileName(this, tr("Choose a dataset"), start,
                                                      tr("Datasets (*.jsonl *.json *.parquet *.csv *.tsv *.txt);;All files (*)"));
    if (file.isEmpty()) return;
    settings.setValue(QStringLiteral("data/lastFolder"), QFileInfo(file).absolutePath());
    selectDataset(file);
}

void DataPage::selectDatasetWithFormat(const QString& path, const QString& format, const QVariantMap& columns) {
    if (!columns.isEmpty()) rememberColumns(QDir::cleanPath(QFileInfo(path).absoluteFilePath()), columns);
    const int index =
        m_formatCombo->findData(format == QLatin1String("completion") ? QStringLiteral("prompt_completion") : format);
    {
        const QSignalBlocker block(m_formatCombo);  // one read below, not one for the format and one for the file
        m_formatCombo->setCurrentIndex(index < 0 ? 0 : index);
    }
    m_format = m_formatCombo->currentData().toString();
    selectDataset(path);
}

void DataPage::selectDataset(const QString& path) {
    m_path = QDir::cleanPath(QFileInfo(path).absoluteFilePath());
    m_pathLabel->setText(m_path);
    m_columns = rememberedColumns(m_path);
    m_mappingOffered.clear();
    m_mapButton->setEnabled(true);
    startRead();
}

void DataPage::setModel(const QString& folder) {
    if (folder == m_model) return;
    m_model = folder;
    startTokenize();
}

void DataPage::setLimits(int maxSeqLen, int batchTokens, bool packing) {
    if (maxSeqLen == m_maxSeqLen && batchTokens == m_batchTokens && packing == m_packing) return;
    m_maxSeqLen = maxSeqLen;
    m_batchTokens = batchTokens;
    m_packing = packing;
    m_histogram->setCutoff(maxSeqLen);
    if (m_tokens.tokens) {
        setStatusText(m_packingLabel, tr("Computing packing…"), Tone::Neutral);
        m_summaryDebounce.start();
    }
}

void DataPage::setRendering(const QString& chatTemplate, bool trainOnAll) {
    {
        const QSignalBlocker blockCombo(m_templateCombo), blockCheck(m_trainOnAllCheck);
        const int index = m_templateCombo->findData(chatTemplate);
        m_templateCombo->setCurrentIndex(index < 0 ? 0 : index);
        m_trainOnAllCheck->setChecked(trainOnAll);
    }
    const QString shown = m_templateCombo->currentData().toString();
    if (shown == m_chatTemplate && trainOnAll == m_trainOnAll) return;
    m_chatTemplate = shown;
    m_trainOnAll = trainOnAll;
    emit renderingChanged(m_chatTemplate, m_trainOnAll);
    startTokenize();
}

void DataPage::startRead() {
    const quint64 generation = ++m_readGeneration;
    ++m_tokenGeneration;  // results for the previous file are stale
    ++m_summaryGeneration;
    m_read = DatasetRead{};
    m_tokens = DatasetTokens{};
    showRead();
    showTokens();
    setStatusText(m_records, tr("Reading %1…").arg(QFileInfo(m_path).fileName()), Tone::Neutral);
    const QString path = m_path, format = m_format;
    const QVariantMap columns = m_columns;
    runAsync(
        this, [path, format, columns] { return readDatasetFile(path, format, columns); },
        [this, generation](const DatasetRead& result) {
            if (generation != m_readGeneration) return;
            m_read = result;
            if (m_read.dataset) {
                m_recent.add(m_read.path);
                markRecent(m_recentList, m_read.path, fileNameOf);
            }
            showRead();
            emitChanged();
            startTokenize();
            // Keys training does not know: offer the mapping once per selection (Map columns… reopens it).
            if (m_read.columnsUnknown && m_mappingOffered != m_read.path) {
                m_mappingOffered = m_read.path;
                mapColumns();
            }
        });
}

void DataPage::startTokenize() {
    const quint64 generation = ++m_tokenGeneration;
    ++m_summaryGeneration;
    m_tokens = DatasetTokens{};
    m_samplesProblem.clear();
    showTokens();
    emitChecked();
    if (!m_read.dataset || m_model.isEmpty()) return;
    m_sampleInfo->setText(tr("Rendering with the model's tokenizer…"));
    const auto dataset = m_read.dataset;
    const QString model = m_model, chatTemplate = m_chatTemplate;
    const bool trainOnAll = m_trainOnAll;
    runAsync(
        this, [=] { return tokenizeForPreview(dataset, model, chatTemplate, trainOnAll); },
        [this, generation](const DatasetTokens& result) {
            if (generation != m_tokenGeneration) return;
            m_tokens = result;
            showTokens();
            emitChecked();
            if (datasetValid() != m_lastEmittedValid) emitChanged();
            startSummary();
        });
}

void DataPage::startSummary() {
    const quint64 generation = ++m_summaryGeneration;
    if (!m_tokens.tokens) return;
    const auto dataset = m_read.dataset;
    const auto tokens = m_tokens.tokens;
    const int maxSeqLen = m_maxSeqLen, batchTokens = m_batchTokens;
    const bool packing = m_packing;
    const int32_t padId = m_tokens.padId;
    runAsync(
        this, [=] { return summarizeLimits(dataset, tokens, maxSeqLen, batchTokens, packing, padId); },
        [this, generation, maxSeqLen, batchTokens, packing](const LimitsSummary& r) {
            if (generation != m_summaryGeneration) return;
            m_samplesProblem = r.error;
            emitChecked();
            if (!r.error.isEmpty()) {
                setStatusText(m_packingLabel, r.error, Tone::Bad);
                return;
            }
            const DataSummary& s = r.summary;
            QString text = (packing ? tr("Packing efficiency %1%: %2 micro-batches of %3 tokens per epoch")
                                    : tr("Packing off: %1% of each padded micro-batch is real tokens (%2 micro-batches "
                                         "of %3 tokens per epoch)"))
                               .arg(100.0 * s.packing_efficiency, 0, 'f', 1)
                               .arg(s.batches)
                               .arg(batchTokens);
            if (s.truncated || s.dropped)
                text += tr("; at Max seq len %1: %2 truncated, %3 dropped (nothing trained left)")
                            .arg(maxSeqLen)
                            .arg(countOf(s.truncated, tr("sample")))
                            .arg(s.dropped);
            setStatusText(m_packingLabel, text + '.', s.dropped ? Tone::Bad : Tone::Neutral);
        });
}

void DataPage::showRead() {
    m_mappingLabel->setVisible(!m_columns.isEmpty());
    setStatusText(m_mappingLabel, tr("Columns mapped: %1").arg(describeMapping(m_columns)), Tone::Neutral);
    if (m_path.isEmpty()) {
        m_records->setText(tr("No dataset."));
        m_formatLabel->clear();
        showInvalid();
        return;
    }
    if (!m_read.dataset) {
        if (!m_read.error.isEmpty())
            setStatusText(m_records,
                          m_read.columnsUnknown
                              ? m_read.error + QStringLiteral("\n") +
                                    tr("Press Map columns… to say which column holds what.")
                              : m_read.error,
                          Tone::Bad);
        m_formatLabel->clear();
        showInvalid();
        return;
    }
    m_formatLabel->setText(m_format == QLatin1String("auto") ? tr("detected: %1").arg(m_read.detectedFormat)
                                                             : tr("forced: %1").arg(m_read.detectedFormat));
    QString text = tr("%1: %2 valid, %3 invalid")
                       .arg(countOf(m_read.totalRecords, tr("record")))
                       .arg(m_read.totalRecords - m_read.invalidRecords)
                       .arg(m_read.invalidRecords);
    if (!m_read.error.isEmpty()) text += QStringLiteral("\n") + m_read.error;
    setStatusText(m_records, text, m_read.valid ? Tone::Neutral : Tone::Bad);
    showInvalid();
}

void DataPage::showInvalid() {
    m_invalidList->clear();
    for (const QString& line : m_read.invalid) m_invalidList->addItem(line);
    for (const QString& line : m_tokens.invalid) m_invalidList->addItem(line);
    const int64_t counted = m_read.invalidRecords + m_tokens.invalidRecords;
    if (counted > m_invalidList->count())
        m_invalidList->addItem(tr("… and %1 more").arg(counted - m_invalidList->count()));
}

void DataPage::showTokens() {
    showInvalid();
    setStatusText(m_templateWarning, m_tokens.templateWarning, Tone::Warning);
    m_templateWarning->setVisible(!m_tokens.templateWarning.isEmpty());
    if (!m_tokens.tokens) {
        m_histogram->clearLengths();
        m_preview->clear();
        m_sampleSpin->setEnabled(false);
        m_lengthStats->clear();
        m_packingLabel->clear();
        if (!m_tokens.error.isEmpty())
            setStatusText(m_sampleInfo, m_tokens.error, Tone::Bad);
        else if (m_read.dataset && m_model.isEmpty())
            setStatusText(m_sampleInfo,
                          tr("The preview, token lengths and packing need a model: choose one on the "
                             "Model page."),
                          Tone::Neutral);
        else
            setStatusText(m_sampleInfo, QString(), Tone::Neutral);
        return;
    }
    const TokenizedDataset& t = *m_tokens.tokens;
    std::vector<int32_t> lengths(t.size());
    for (size_t i = 0; i < t.size(); ++i) lengths[i] = t.length(i);
    m_histogram->setLengths(lengths);
    const LengthStats stats = length_stats(lengths);
    m_lengthStats->setText(tr("%1 (template %2): tokens per sample min %3, median %4, mean %5, p95 %6, max %7")
                               .arg(countOf(stats.count, tr("sample")))
                               .arg(QString::fromStdString(t.template_name))
                               .arg(stats.min)
                               .arg(stats.median)
                               .arg(stats.mean, 0, 'f', 0)
                               .arg(stats.p95)
                               .arg(stats.max));
    const QSignalBlocker block(m_sampleSpin);
    m_sampleSpin->setRange(1, static_cast<int>(t.size()));
    m_sampleSpin->setValue(1);
    m_sampleSpin->setEnabled(true);
    showPreview(0);
}

void DataPage::showPreview(int sample) {
    if (!m_tokens.tokens || sample < 0 || static_cast<size_t>(sample) >= m_tokens.tokens->size()) return;
    const TokenizedDataset& t = *m_tokens.tokens;
    const Tokenizer& tok = *m_tokens.tokenizer;
    auto ids = t.sample_tokens(static_cast<size_t>(sample));
    auto labels = t.sample_labels(static_cast<size_t>(sample));
    const size_t total = ids.size();
    int64_t trained = 0;
    for (int32_t l : labels) trained += l != -100;
    const size_t shown = std::min<size_t>(total, kPreviewTokens);
    // Runs of tokens with the same trained flag are decoded together, so multi-token characters stay whole.
    QString html = QStringLiteral("<pre style=\"white-space: pre-wrap;\">");
    size_t start = 0;
    while (start < shown) {
        const bool isTrained = labels[start] != -100;
        size_t end = start;
        while (end < shown && (labels[end] != -100) == isTrained) ++end;
        const QString text = QString::fromStdString(tok.decode(ids.subspan(start, end - start))).toHtmlEscaped();
        html += isTrained ? QStringLiteral("<span style=\"%1\">%2</span>").arg(kTrainedStyle, text) : text;
        start = end;
    }
    if (shown < total) html += tr("\n… (%1 more tokens not shown)").arg(total - shown).toHtmlEscaped();
    html += QStringLiteral("</pre>");
    m_preview->setHtml(html);

    QString where;
    const Dataset& d = *m_read.dataset;
    const uint32_t record = t.record[static_cast<size_t>(sample)];
    if (record < d.records.size()) {
        const QString path = d.files.empty() ? QString() : QString::fromStdString(d.files[0].string());
        where = shortLocation(d.location(d.records[record].location), path);
    }
    setStatusText(m_sampleInfo,
                  tr("of %1 (%2): %3 tokens, %4 trained").arg(t.size()).arg(where).arg(total).arg(trained),
                  Tone::Neutral);
}

void DataPage::reloadRecent() { fillRecentList(m_recentList, m_recent.paths(), fileNameOf); }

void DataPage::emitChecked() {
    QStringList warnings;
    if (!m_tokens.templateWarning.isEmpty()) warnings.append(m_tokens.templateWarning);
    emit checked(m_samplesProblem, warnings);
}

void DataPage::emitChanged() {
    m_lastEmittedValid = datasetValid();
    emit datasetColumns(m_columns);
    emit datasetChanged(m_path, m_format, m_lastEmittedValid);
}

QVariantMap DataPage::rememberedColumns(const QString& path) {
    return QSettings().value(kMappingsKey).toMap().value(path).toMap();
}

void DataPage::rememberColumns(const QString& path, const QVariantMap& columns) {
    QSettings settings;
    QVariantMap all = settings.value(kMappingsKey).toMap();
    if (columns.isEmpty())
        all.remove(path);
    else
        all.insert(path, columns);
    settings.setValue(kMappingsKey, all);
}

void DataPage::mapColumns() {
    if (m_path.isEmpty()) return;
    const QString path = m_path;
    m_mappingOffered = path;  // opened once: a cleared or cancelled mapping does not reopen it by itself
    m_mapButton->setEnabled(false);
    struct Columns {
        QStringList names;
        QString error;
    };
    runAsync(
        this,
        [path] {
            Columns c;
            try {
                for (const std::string& name : dataset_columns(path.toStdString()))
                    c.names.append(QString::fromStdString(name));
            } catch (const std::exception& e) {
                c.error = QString::fromUtf8(e.what());
            }
            return c;
        },
        [this, path](const Columns& c) {
            m_mapButton->setEnabled(true);
            if (path != m_path) return;  // another file was chosen meanwhile
            if (!c.error.isEmpty()) {
                setStatusText(m_records, c.error, Tone::Bad);
                return;
            }
            auto* dialog = new ColumnMappingDialog(QFileInfo(path).fileName(), c.names, m_columns, this);
            dialog->setAttribute(Qt::WA_DeleteOnClose);
            connect(dialog, &QDialog::accepted, this, [this, dialog, path] {
                if (path != m_path) return;
                m_columns = dialog->mapping();
                rememberColumns(path, m_columns);
                startRead();
            });
            dialog->open();
        });
}

void DataPage::showDownloadedFiles(const QString& snapshot, const QStringList& files) {
    QStringList data;
    for (const QString& f : files)
        if (isDataFile(f)) data.append(f);
    m_hubFiles->clear();
    for (const QString& f : data) m_hubFiles->addItem(f, QDir(snapshot).filePath(f));
    const bool several = data.size() > 1;
    m_hubFilesLabel->setVisible(several);
    m_hubFiles->setVisible(several);
    if (data.isEmpty()) return;
    const int index = trainFileIndex(data);
    m_hubFiles->setCurrentIndex(index);
    selectDataset(m_hubFiles->itemData(index).toString());
}

void DataPage::dragEnterEvent(QDragEnterEvent* event) {
    if (!droppedFile(event->mimeData()).isEmpty()) event->acceptProposedAction();
}

void DataPage::dropEvent(QDropEvent* event) {
    const QString file = droppedFile(event->mimeData());
    if (file.isEmpty()) return;
    event->acceptProposedAction();
    selectDataset(file);
}

}  // namespace tandem::ui
