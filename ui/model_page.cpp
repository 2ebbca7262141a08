// SPDX-FileCopyrightText: 2026 The Tandem developers
// SPDX-License-Identifier: GPL-3.0-or-later
// See model_page.h.
#include "ui/model_page.h"

#include <QDir>
#include <QDragEnterEvent>
#include <QDropEvent>
#include <QFileDialog>
#include <QFileInfo>
#include <QFormLayout>
#include <QGroupBox>
#include <QHBoxLayout>
#include <QLabel>
#include <QListWidget>
#include <QMimeData>
#include <QPushButton>
#include <QSettings>
#include <QSplitter>
#include <QStandardPaths>
#include <QVBoxLayout>

#include "ui/app_paths.h"
#include "ui/hf_cache.h"
#include "ui/hub_download.h"
#include "ui/run_async.h"
#include "ui/screen_words.h"
#include "ui/status_text.h"

namespace tandem::ui {
namespace {

// A dropped folder, or the folder of a dropped file (e.g. config.json); empty when nothing local was dropped.
QString droppedFolder(const QMimeData* mime) {
    if (!mime->hasUrls() || mime->urls().isEmpty() || !mime->urls().first().isLocalFile()) return {};
    const QFileInfo info(mime->urls().first().toLocalFile());
    if (info.isDir()) return info.absoluteFilePath();
    if (info.isFile()) return info.absolutePath();
    return {};
}

QLabel* valueLabel(const char* name) {
    auto* label = new QLabel(QStringLiteral("—"));
    label->setObjectName(QString::fromLatin1(name));
    label->setTextInteractionFlags(Qt::TextSelectableByMouse);
    label->setWordWrap(true);  // in the form layout (status_text.h)
    return label;
}

}  // namespace

ModelPage::ModelPage(QWidget* parent) : QWidget(parent) {
    setObjectName(QStringLiteral("modelPage"));
    setAcceptDrops(true);

    m_browse = new QPushButton(tr("Choose model folder…"));
    m_browse->setObjectName(QStringLiteral("browseModelButton"));
    m_browse->setToolTip(tr("A Hugging Face model folder: config.json, *.safetensors and tokenizer.json (Ctrl+O)"));
    m_demo = new QPushButton(tr("Use demo model"));
    m_demo->setObjectName(QStringLiteral("demoButton"));
    m_demo->setToolTip(tr("A tiny built-in Llama with random weights: try the whole workflow in seconds, no download"));
    m_pathLabel = new QLabel(tr("No model selected. Choose a folder, drop one here, or use the demo model."));
    m_pathLabel->setObjectName(QStringLiteral("modelPathLabel"));
    m_pathLabel->setTextInteractionFlags(Qt::TextSelectableByMouse);
    wrapMessage(m_pathLabel);
    connect(m_browse, &QPushButton::clicked, this, &ModelPage::browse);
    connect(m_demo, &QPushButton::clicked, this, &ModelPage::selectDemo);

    m_hub = new HubDownloadBox(hub::RepoType::Model);
    // A finished download: the cache list refreshes and shows the model selected, and the model is inspected.
    connect(m_hub, &HubDownloadBox::downloaded, this, [this](const QString& snapshot) {
        m_selectAfterScan = snapshot;
        rescanHfCache();
        selectModel(snapshot);
    });

    auto* top = new QHBoxLayout;
    top->addWidget(m_browse);
    top->addWidget(m_demo);
    top->addWidget(m_pathLabel, 1);

    auto* recentList = new PlaceholderListWidget;
    recentList->setPlaceholderText(
        tr("No recent models yet. Choose a model folder, drop one here, or use the demo model."));
    m_recentList = recentList;
    m_recentList->setObjectName(QStringLiteral("recentModels"));
    m_recentList->setToolTip(tr("Model folders you used before: double-click one (or press Enter) to select it"));
    auto* hfList = new PlaceholderListWidget;
    hfList->setPlaceholderText(
        tr("No models in the Hugging Face cache. Download one above (e.g. Qwen/Qwen3-0.6B); models downloaded "
           "with Python tools appear after Refresh."));
    m_hfList = hfList;
    m_hfList->setObjectName(QStringLiteral("hfCacheModels"));
    m_hfList->setToolTip(
        tr("Models downloaded with Hugging Face tools (huggingface-cli, transformers): double-click one (or "
           "press Enter) to select it"));
    m_hfLabel = new QLabel(tr("Hugging Face cache"));
    m_hfLabel->setObjectName(QStringLiteral("hfCacheLabel"));
    wrapMessage(m_hfLabel);
    m_hfRefresh = new QPushButton(tr("Refresh"));
    m_hfRefresh->setObjectName(QStringLiteral("hfRefreshButton"));
    m_hfRefresh->setToolTip(tr("Look in the Hugging Face cache again (after a download)"));
    connect(m_hfRefresh, &QPushButton::clicked, this, &ModelPage::rescanHfCache);
    // Activation (a double click or Enter) selects the item's model, or re-inspects the current one (after a
    // fix). A single click only highlights: loading on the first click of a double click would act before the
    // second click lands.
    for (QListWidget* list : {m_recentList, m_hfList})
        connect(list, &QListWidget::itemActivated, this,
                [this](QListWidgetItem* item) { selectModel(item->data(Qt::UserRole).toString()); });

    auto* lists = new QWidget;
    auto* listsLayout = new QVBoxLayout(lists);
    listsLayout->setContentsMargins(0, 0, 0, 0);
    listsLayout->addWidget(new QLabel(tr("Recent")));
    listsLayout->addWidget(m_recentList, 1);
    auto* hfRow = new QHBoxLayout;
    hfRow->addWidget(m_hfLabel, 1);
    hfRow->addWidget(m_hfRefresh);
    listsLayout->addLayout(hfRow);
    listsLayout->addWidget(m_hfList, 2);

    auto* summary = new QGroupBox(tr("Model"));
    summary->setObjectName(QStringLiteral("modelSummary"));
    auto* form = new QFormLayout(summary);
    m_architecture = valueLabel("architectureLabel");
    m_layers = valueLabel("layersLabel");
    m_hiddenSize = valueLabel("hiddenSizeLabel");
    m_parameters = valueLabel("parametersLabel");
    m_experts = valueLabel("expertsLabel");
    m_experts->setToolTip(tr("A mixture-of-experts model: each layer routes every token to a few of its experts, so "
                             "a token runs through only the active parameters (all of them are held in memory)"));
    m_dtype = valueLabel("dtypeLabel");
    m_quantization = valueLabel("quantizationLabel");
    m_quantization->setToolTip(
        tr("The checkpoint stores its projections 4-bit (bitsandbytes): Tandem trains it as QLoRA, a LoRA adapter "
           "over the 4-bit weights"));
    m_tokenizer = valueLabel("tokenizerLabel");
    m_chatTemplate = valueLabel("chatTemplateLabel");
    m_status = valueLabel("modelStatusLabel");
    m_status->setText(QString());
    form->addRow(tr("Architecture"), m_architecture);
    form->addRow(tr("Layers"), m_layers);
    form->addRow(tr("Hidden size"), m_hiddenSize);
    form->addRow(tr("Parameters"), m_parameters);
    form->addRow(tr("Experts"), m_experts);
    form->setRowVisible(m_experts, false);
    form->addRow(tr("Weights"), m_dtype);
    form->addRow(tr("Quantization"), m_quantization);
    form->setRowVisible(m_quantization, false);
    m_summaryForm = form;
    form->addRow(tr("Tokenizer"), m_tokenizer);
    form->addRow(tr("Chat template"), m_chatTemplate);
    form->addRow(tr("Status"), m_status);

    auto* splitter = new QSplitter;
    splitter->addWidget(lists);
    splitter->addWidget(summary);
    splitter->setStretchFactor(0, 1);
    splitter->setStretchFactor(1, 2);

    auto* layout = new QVBoxLayout(this);
    layout->addLayout(top);
    layout->addWidget(m_hub);
    layout->addWidget(splitter, 1);

    reloadRecent();
    rescanHfCache();
}

void ModelPage::browse() {
    QSettings settings;
    const QString start = settings.value(QStringLiteral("model/lastFolder"), QDir::homePath()).toString();
    const QString folder = QFileDialog::getExistingDirectory(this, tr("Choose a Hugging Face model folder"), start);
    if (folder.isEmpty()) return;
    settings.setValue(QStringLiteral("model/lastFolder"), QFileInfo(folder).absolutePath());
    selectModel(folder);
}

void ModelPage::selectModel(const QString& folder) {
    const QString clean = QDir::cleanPath(QFileInfo(folder).absoluteFilePath());
    inspect(clean, [clean] { return inspectModelFolder(clean); });
}

QString ModelPage::demoFolder() {
    return studioDataFolder() + QStringLiteral("/demo-model");
}

void ModelPage::selectDemo() {
    const QString folder = demoFolder();
    inspect(folder, [folder] { return createAndInspectDemo(folder); });
}

void ModelPage::inspect(const QString& folder, std::function<ModelInspection()> job) {
    m_path = folder;
    m_supported = false;
    const quint64 generation = ++m_generation;
    m_pathLabel->setText(folder);
    for (QLabel* l : {m_architecture, m_layers, m_hiddenSize, m_parameters, m_dtype, m_tokenizer, m_chatTemplate})
        l->setText(QStringLiteral("…"));
    m_quantization->clear();
    m_summaryForm->setRowVisible(m_quantization, false);
    setStatusText(m_status, tr("Inspecting…"), Tone::Neutral);

    runAsync(this, std::move(job), [this, generation](const ModelInspection& result) {
        if (generation == m_generation) showInspection(result);  // else a newer selection replaced this one
    });
}

void ModelPage::showInspection(const ModelInspection& r) {
    m_supported = r.supported;
    if (r.inspected) {
        m_architecture->setText(r.modelType.isEmpty() ? r.architecture
                                                      : QStringLiteral("%1 (%2)").arg(r.architecture, r.modelType));
        m_layers->setText(QString::number(r.layers));
        m_hiddenSize->setText(QString::number(r.hiddenSize));
        m_parameters->setText(QStringLiteral("%1 (%2)").arg(humanCount(r.parameters)).arg(r.parameters));
        m_experts->setText(tr("%1 per layer, %2 per token; %3 parameters active per token")
                               .arg(r.experts)
                               .arg(r.expertsPerToken)
                               .arg(humanCount(r.activeParameters)));
        m_summaryForm->setRowVisible(m_experts, r.experts > 0);
        m_dtype->setText(QStringLiteral("%1, %2").arg(r.dtypes.join('/'), humanBytes(r.weightBytes)));
        m_quantization->setText(r.quantization);
        m_tokenizer->setText(r.tokenizer);
        m_chatTemplate->setText(r.hasChatTemplate ? tr("yes")
                                                  : tr("none (a built-in template is used: chatml, alpaca or llama3)"));
        // A folder that inspects is worth remembering even when it is not trainable yet; the built-in demo
        // has its own button.
        if (r.folder != demoFolder()) {
            m_recent.add(r.folder);
            markRecent(m_recentList, r.folder, modelDisplayName);
        }
    } else {
        for (QLabel* l : {m_architecture, m_layers, m_hiddenSize, m_parameters, m_dtype, m_tokenizer, m_chatTemplate})
            l->setText(QStringLiteral("—"));
        m_quantization->clear();
    }
    m_summaryForm->setRowVisible(m_quantization, !m_quantization->text().isEmpty());  // float weights: no row
    QString notes = r.notes.isEmpty() ? QString() : QStringLiteral("\n") + r.notes.join('\n');
    if (r.supported)
        setStatusText(m_status,
                      (r.demo ? tr("Supported. Built-in demo model: random weights, not trained; for trying Tandem.")
                              : tr("Supported: Tandem can fine-tune this model.")) +
                          notes,
                      Tone::Good);
    else
        setStatusText(m_status, inScreenWords(r.reason) + notes, Tone::Bad);
    emit modelShape(r.hiddenSize, r.contextLength);
    emit modelChanged(r.folder, r.supported);
}

void ModelPage::reloadRecent() { fillRecentList(m_recentList, m_recent.paths(), modelDisplayName); }

void ModelPage::rescanHfCache() {
    const QString dir = hfHubCacheDir();
    m_hfLabel->setText(tr("Hugging Face cache (scanning %1…)").arg(dir));
    m_hfRefresh->setEnabled(false);
    runAsync(
        this, [dir] { return scanHfCache(dir); },
        [this, dir](const QList<HfCacheModel>& models) {
            m_hfRefresh->setEnabled(true);
            m_hfList->clear();
            for (const HfCacheModel& m : models) {
                auto* item = new QListWidgetItem(m.repoId, m_hfList);
                item->setData(Qt::UserRole, m.snapshot);
                item->setToolTip(QDir::toNativeSeparators(m.snapshot));
                if (!m_selectAfterScan.isEmpty() && m.snapshot == m_selectAfterScan) m_hfList->setCurrentItem(item);
            }
            m_selectAfterScan.clear();
            m_hfLabel->setText(models.isEmpty() ? tr("Hugging Face cache: no models in %1").arg(dir)
                                                : tr("Hugging Face cache (%1)").arg(dir));
        });
}

void ModelPage::dragEnterEvent(QDragEnterEvent* event) {
    if (!droppedFolder(event->mimeData()).isEmpty()) event->acceptProposedAction();
}

void ModelPage::dropEvent(QDropEvent* event) {
    const QString folder = droppedFolder(event->mimeData());
    if (folder.isEmpty()) return;
    event->acceptProposedAction();
    selectModel(folder);
}

}  // namespace tandem::ui
