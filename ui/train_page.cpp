// SPDX-FileCopyrightText: 2026 The Tandem developers
// SPDX-License-Identifier: GPL-3.0-or-later
// See train_page.h.
#include "ui/train_page.h"

#include <QCheckBox>
#include <QComboBox>
#include <QDateTime>
#include <QDir>
#include <QDoubleSpinBox>
#include <QFile>
#include <QFileDialog>
#include <QFileInfo>
#include <QFormLayout>
#include <QGridLayout>
#include <QGroupBox>
#include <QHBoxLayout>
#include <QLabel>
#include <QLineEdit>
#include <QListWidget>
#include <QLocale>
#include <QProgressBar>
#include <QPushButton>
#include <QScrollArea>
#include <QSettings>
#include <QSignalBlocker>
#include <QSpinBox>
#include <QStandardPaths>
#include <QVBoxLayout>

#include <algorithm>
#include <cmath>
#include <exception>
#include <limits>

#include <nlohmann/json.hpp>

#include "tandem/error.h"
#include "tandem/lora.h"
#include "tandem/system_info.h"
#include "ui/app_paths.h"
#include "ui/field_validation.h"
#include "ui/hf_cache.h"
#include "ui/model_inspection.h"
#include "ui/plausibility.h"
#include "ui/recent_list.h"
#include "ui/run_async.h"
#include "ui/screen_words.h"
#include "ui/status_text.h"

// The presets are compiled into the static tandem_ui library; a static library's resources must be
// registered explicitly (Q_INIT_RESOURCE works only outside a namespace).
static void initPresetResources() {
    Q_INIT_RESOURCE(presets);
}

namespace tandem::ui {
namespace {

// Preset files in the order they are offered; others found under :/presets follow alphabetically.
const QStringList kPresetOrder = {QStringLiteral("quick_test"), QStringLiteral("balanced"),
                                  QStringLiteral("max_quality")};

constexpr int kCheckpointMinutesDecimals = 2;

// What a QDoubleSpinBox shows after setValue(v): clamped to its range, rounded to its decimals.
double spinShown(const QDoubleSpinBox* spin, double v) {
    return QString::number(std::clamp(v, spin->minimum(), spin->maximum()), 'f', spin->decimals()).toDouble();
}

// The box's value / scale, or `exact` while the box still shows exact * scale as it rounds it: a reopened
// value the box cannot show exactly survives until the box is changed.
double exactOr(const QDoubleSpinBox* spin, double exact, double scale = 1.0) {
    return spin->value() == spinShown(spin, exact * scale) ? exact : spin->value() / scale;
}

QDoubleSpinBox* decimalBox(const char* name, double min, double max, int decimals, double step, const QString& tip) {
    auto* box = new QDoubleSpinBox;
    box->setObjectName(QString::fromLatin1(name));
    box->setRange(min, max);
    box->setDecimals(decimals);
    box->setSingleStep(step);
    box->setToolTip(tip);
    return box;
}

// An adapter folder Tandem or PEFT wrote: adapter_config.json inside.
bool isAdapterFolder(const QString& folder) {
    return QFileInfo(QDir(folder).filePath(QStringLiteral("adapter_config.json"))).isFile();
}

QString checkpointingExplanation(const QString& policy) {
    if (policy == QLatin1String("off")) return QObject::tr("Off: keep every activation. Fastest, most GPU memory.");
    if (policy == QLatin1String("selective"))
        return QObject::tr(
            "Selective: keep each block's input and its attention results, recompute the norms and the MLP "
            "projections in the backward pass (between off and recompute in speed and memory).");
    if (policy == QLatin1String("recompute"))
        return QObject::tr(
            "Recompute: keep only each block's input and recompute the block in the backward pass "
            "(about a third more compute, far less memory).");
    if (policy == QLatin1String("smart"))
        return QObject::tr(
            "Smart: block inputs wait in pinned host memory and come back double-buffered while the "
            "GPU computes (least GPU memory, little slowdown).");
    if (policy == QLatin1String("smart-single"))
        return QObject::tr(
            "Smart, single buffer: as smart with one reload buffer (less pinned host memory, less "
            "overlap).");
    return QObject::tr(
        "Auto: the fastest policy that fits the GPU (off, then selective, then recompute, then smart, with a "
        "single reload buffer as the last resort). Off on the CPU.");
}

// The base-weights choice: "none", "nf4", or "checkpoint" (a pre-quantized model; `q` is its quantization).
QString quantizationExplanation(const QString& choice, const WeightQuantization& q) {
    if (choice == QLatin1String("checkpoint"))
        return QObject::tr(
                   "4-bit from the checkpoint: this model's projections are stored as 4-bit %1 (bitsandbytes), so "
                   "it trains as QLoRA: the LoRA adapter trains in full precision and exports in the same PEFT "
                   "format.")
            .arg(QString::fromStdString(q.quant_type).toUpper());
    if (choice == QLatin1String("nf4"))
        return QObject::tr(
            "4-bit (QLoRA): the projections are quantized to 4-bit NF4 when the model loads: about a quarter of "
            "the weights' memory, slightly slower steps. The LoRA adapter trains in full precision and exports "
            "in the same PEFT format.");
    return QObject::tr(
        "16-bit: the weights as the checkpoint stores them (bf16 on the GPU, fp32 on the CPU): the fastest "
        "steps, the most memory for the weights.");
}

const QString kFromCheckpoint = QStringLiteral("checkpoint");

QString precisionExplanation(const QString& choice) {
    if (choice == QLatin1String("fp8"))
        return QObject::tr(
            "FP8: the frozen base weights are held in 8 bits (half of bf16, one scale per 128x128 block) and "
            "multiplied on the GPU's FP8 tensor cores: about 1.3x faster steps on Hopper for 8B-class models, little "
            "for small ones. The LoRA adapter, norms, "
            "attention and the loss stay bf16; the adapter exports the same way.");
    return QObject::tr("16-bit (bf16): the base model's matrix multiplications in bf16, as usual.");
}

QString precisionToolTip() {
    return QObject::tr(
        "The base model's matrix multiplications: 16-bit (bf16), or FP8 on the GPU's FP8 tensor cores (the frozen "
        "base weights in 8 bits; about 1.2-1.3x faster on Hopper for 8B-class models, little for small ones). With "
        "4-bit (QLoRA) base weights, FP8 dequantizes them straight to 8 bits for each multiplication. The LoRA "
        "adapter trains in bf16 either way");
}

// A field's own tooltip; while it is marked invalid the mark's reason stays shown and this one waits.
void setOwnToolTip(QWidget* field, const QString& tip) {
    if (fieldMarkedInvalid(field))
        field->setProperty("validTooltip", tip);
    else
        field->setToolTip(tip);
}

// What the longest-sample line is for: the settings longest_context reads. It sets batch tokens, max seq len
// and gradient accumulation itself, and the estimate reads no dataset and no run folder, so those are left out.
QString longestContextKey(RunConfig c) {
    c.output_dir.clear();
    c.data.dataset.clear();
    c.data.validation.clear();
    c.data.format.clear();
    c.data.columns.clear();
    c.training.batch_tokens = 0;
    c.data.max_seq_len = 0;
    c.training.grad_accum = 1;
    const nlohmann::json j = c;
    return QString::fromStdString(j.dump());
}

QString packingExplanation(bool packing) {
    return packing ? QObject::tr(
                         "Packing on: several samples share each micro-batch, back to back, each attending "
                         "only to itself. No compute is spent on padding.")
                   : QObject::tr(
                         "Packing off: one sample per padded row. Simpler batches, compute spent on "
                         "padding (see the Data page's efficiency).");
}

QString presetDisplayName(const QString& baseName) {
    QString name = baseName;
    name.replace('_', ' ');
    if (!name.isEmpty()) name[0] = name[0].toUpper();
    return name;
}

QString engineName(std::string_view name) {
    return QString::fromUtf8(name.data(), static_cast<qsizetype>(name.size()));
}

// Empty when a new run folder can be made in `folder`: the nearest existing folder on its path is a
// writable folder (a few stat calls, cheap enough for every settings change). Else why not.
QString runsFolderProblem(const QString& folder) {
    if (folder.isEmpty()) return QObject::tr("Choose a runs folder.");
    QFileInfo info(QDir::cleanPath(QFileInfo(folder).absoluteFilePath()));
    while (!info.exists()) {
        const QString parent = info.absolutePath();
        if (parent == info.absoluteFilePath()) break;  // the root
        info = QFileInfo(parent);
    }
    if (info.exists() && info.isDir() && info.isWritable()) return {};
    return QObject::tr("The runs folder %1 cannot hold new runs (%2 is not a writable folder): choose a writable "
                       "runs folder.")
        .arg(QDir::toNativeSeparators(folder), QDir::toNativeSeparators(info.absoluteFilePath()));
}

// Selects the item whose data is `name`, or auto (the first item) when the combo does not offer it.
void selectOrAuto(QComboBox* combo, std::string_view name) {
    const int index = combo->findData(engineName(name));
    combo->setCurrentIndex(index < 0 ? 0 : index);
}

}  // namespace

TrainPage::TrainPage(QWidget* parent) : QWidget(parent) {
    setObjectName(QStringLiteral("trainPage"));
    initPresetResources();

    m_presetCombo = new QComboBox;
    m_presetCombo->setObjectName(QStringLiteral("presetCombo"));
    m_presetCombo->setToolTip(
        tr("Starting points: quick test (a few steps to check everything works), balanced, "
           "max quality (higher rank, more epochs). Editing a field switches to custom"));
    m_runsFolderEdit = new QLineEdit;
    m_runsFolderEdit->setObjectName(QStringLiteral("runsFolderEdit"));
    m_runsFolderEdit->setToolTip(tr("Each run gets its own folder in here: config, metrics, checkpoints, adapter"));
    auto* runsFolderButton = new QPushButton(tr("Browse…"));
    runsFolderButton->setObjectName(QStringLiteral("runsFolderButton"));
    runsFolderButton->setToolTip(tr("Choose the folder runs are written to"));
    connect(runsFolderButton, &QPushButton::clicked, this, &TrainPage::chooseRunsFolder);

    auto* top = new QHBoxLayout;
    top->addWidget(new QLabel(tr("Preset")));
    top->addWidget(m_presetCombo);
    top->addSpacing(16);
    top->addWidget(new QLabel(tr("Runs folder")));
    top->addWidget(m_runsFolderEdit, 1);
    top->addWidget(runsFolderButton);

    auto* content = new QWidget;
    auto* grid = new QGridLayout(content);
    grid->addWidget(buildLoraBox(), 0, 0);
    grid->addWidget(buildOptimizerBox(), 0, 1);
    grid->addWidget(buildValidationBox(), 1, 0);
    grid->addWidget(buildMemoryBox(), 1, 1);
    grid->setColumnStretch(0, 1);
    grid->setColumnStretch(1, 1);
    grid->setRowStretch(2, 1);
    auto* scroll = new QScrollArea;
    scroll->setWidget(content);
    scroll->setWidgetResizable(true);
    scroll->setFrameShape(QFrame::NoFrame);

    m_blockedLabel = new QLabel;
    m_blockedLabel->setObjectName(QStringLiteral("trainBlockedLabel"));
    wrapMessage(m_blockedLabel);
    m_warningsLabel = new QLabel;
    m_warningsLabel->setObjectName(QStringLiteral("trainWarningsLabel"));
    m_warningsLabel->setTextFormat(Qt::PlainText);
    m_warningsLabel->setToolTip(tr("Settings that can run but are probably not what you want"));
    wrapMessage(m_warningsLabel);
    m_warningsLabel->setVisible(false);
    m_trainButton = new QPushButton(tr("Train"));
    m_trainButton->setObjectName(QStringLiteral("trainButton"));
    m_trainButton->setDefault(true);
    connect(m_trainButton, &QPushButton::clicked, this, [this] {
        if (!m_blockedReason.isEmpty()) return;
        const RunConfig c = config();
        nlohmann::json j = c;
        QSettings().setValue(QStringLiteral("train/last"), QString::fromStdString(j.dump()));
        emit trainRequested(c);
    });
    auto* bottom = new QHBoxLayout;
    bottom->addWidget(m_blockedLabel, 1);
    bottom->addWidget(m_trainButton);

    auto* layout = new QVBoxLayout(this);
    layout->addLayout(top);
    layout->addWidget(scroll, 1);
    layout->addWidget(m_warningsLabel);
    layout->addLayout(bottom);

    m_estimateDebounce.setSingleShot(true);
    m_estimateDebounce.setInterval(kEstimateDelayMs);
    connect(&m_estimateDebounce, &QTimer::timeout, this, &TrainPage::startEstimate);

    QSettings settings;
    m_runsFolderEdit->setText(settings.value(QStringLiteral("runs/folder"), defaultRunsFolder()).toString());
    connect(m_runsFolderEdit, &QLineEdit::textChanged, this, &TrainPage::onFieldsChanged);
    connect(m_runsFolderEdit, &QLineEdit::editingFinished, this, [this] {
        QSettings().setValue(QStringLiteral("runs/folder"), runsFolder());
        emit runsFolderChanged(runsFolder());
    });

    // The last settings (not the model or dataset: those belong to their pages).
    RunConfig restored;
    try {
        const QString last = settings.value(QStringLiteral("train/last")).toString();
        if (!last.isEmpty()) restored = parse_run_config(nlohmann::json::parse(last.toStdString()));
    } catch (const std::exception&) {
        restored = RunConfig{};  // an unreadable or older entry: start from the defaults
    }
    restored.model.clear();
    restored.data.dataset.clear();
    restored.data.format = "auto";
    restored.init_adapter.clear();
    restored.data.validation.clear();  // belongs to the dataset, like it
    restored.output_dir.clear();
    m_base = restored;
    fillFields(restored);

    loadPresets();
    // Programmatic changes of the combo (back to "custom") block its signals; any other change applies.
    connect(m_presetCombo, &QComboBox::currentIndexChanged, this, [this](int index) {
        const QString path = m_presetCombo->itemData(index).toString();
        if (!path.isEmpty()) applyPreset(path);
    });
    onFieldsChanged();
    // Whether a GPU is usable and trains in FP8: system_info creates the CUDA context, so it is asked once, off
    // the GUI thread.
    struct Gpu {
        bool usable = false;
        QString reason;     // why no GPU is usable
        QString fp8Reason;  // why FP8 cannot train here ("" when it can)
        std::vector<std::pair<int, QString>> gpus;  // every GPU: CUDA's index, "GPU i: name, memory"
    };
    runAsync(
        this,
        [] {
            const SystemInfo info = system_info();
            Gpu g{info.gpu_usable, QString::fromStdString(info.gpu_unavailable_reason),
                  QString::fromStdString(fp8_unsupported_reason(info)), {}};
            for (const SystemInfo::Gpu& x : info.gpus)
                g.gpus.emplace_back(x.index, tr("GPU %1: %2, %3").arg(x.index).arg(QString::fromStdString(x.name),
                                                                                   humanBytes(x.memory)));
            return g;
        },
        [this](const Gpu& gpu) {
            setFp8Support(gpu.fp8Reason);  // first: gpuChecked (below) tells that both are known
            setGpuList(gpu.usable ? gpu.gpus : std::vector<std::pair<int, QString>>{});
            setGpuAvailable(gpu.usable, gpu.reason);
        });
    // The main window connects limitsChanged after construction: tell the Data page once the loop runs.
    QTimer::singleShot(0, this, [this] {
        emit limitsChanged(m_maxSeqLen->value(), m_batchTokens->value(), m_packing->isChecked());
        emit runsFolderChanged(runsFolder());
    });
}

QWidget* TrainPage::buildLoraBox() {
    auto* box = new QGroupBox(tr("LoRA"));
    auto* form = new QFormLayout(box);
    m_rank = new QSpinBox;
    m_rank->setObjectName(QStringLiteral("rankSpin"));
    m_rank->setRange(1, kLoraMaxRank);
    m_rank->setToolTip(
        tr("Rank r of each adapter (B·A with A [r, in], B [out, r]). Higher: more capacity, more "
           "memory; 8-64 is typical"));
    m_alpha = new QDoubleSpinBox;
    m_alpha->setObjectName(QStringLiteral("alphaSpin"));
    m_alpha->setRange(0.01, 100000);
    m_alpha->setDecimals(2);
    m_alpha->setToolTip(
        tr("lora_alpha: the update is scaled by alpha / r (alpha / sqrt(r) with rsLoRA); 2 x r is "
           "a common choice"));
    m_dropout = new QDoubleSpinBox;
    m_dropout->setObjectName(QStringLiteral("dropoutSpin"));
    m_dropout->setRange(0, 0.95);
    m_dropout->setSingleStep(0.05);
    m_dropout->setDecimals(3);
    m_dropout->setToolTip(tr("Dropout on the adapter's input while training (0: none); 0.05-0.1 helps small datasets"));
    m_rslora = new QCheckBox(tr("rsLoRA"));
    m_rslora->setObjectName(QStringLiteral("rsloraCheck"));
    m_rslora->setToolTip(tr("Rank-stabilised LoRA: scale by alpha / sqrt(r), which keeps high ranks learning"));
    m_targetsBox = new QGroupBox(tr("Target projections"));
    m_targetsBox->setObjectName(QStringLiteral("targetsBox"));
    m_targetsBox->setToolTip(tr("Which projections of every decoder layer get an adapter (the model's own "
                                "projections: Phi-3 stores q/k/v as one qkv_proj)"));
    new QGridLayout(m_targetsBox);
    for (const std::string& t : lora_known_targets()) {
        const QString name = QString::fromStdString(t);
        // A mixture-of-experts model's experts ("mlp.experts.gate_up_proj") read "experts: gate_up_proj".
        const bool experts = name.startsWith(QStringLiteral("mlp.experts."));
        auto* check = new QCheckBox(experts ? tr("experts: %1").arg(name.mid(12)) : name);
        check->setObjectName(QStringLiteral("target_") + name);
        check->setToolTip(experts ? tr("Every expert's %1 (a LoRA per expert; PEFT target_parameters %2)")
                                        .arg(name.mid(12), name)
                          : lora_target_is_attention(t) ? tr("Attention projection %1").arg(name)
                                                        : tr("MLP projection %1").arg(name));
        connect(check, &QCheckBox::toggled, this, &TrainPage::onFieldEdited);
        m_targets.insert(name, check);
    }
    for (const std::string& t : lora_default_targets()) m_modelTargets.append(QString::fromStdString(t));
    showTargets(lora_default_targets());
    m_initAdapter = new QLineEdit;
    m_initAdapter->setObjectName(QStringLiteral("initAdapterEdit"));
    m_initAdapter->setPlaceholderText(tr("none: train a new adapter"));
    m_initAdapter->setClearButtonEnabled(true);
    m_initAdapter->setToolTip(
        tr("A LoRA adapter folder (PEFT format: adapter_config.json, from Tandem or PEFT) to continue training. Its "
           "rank, alpha and targets are used; empty: start a new adapter"));
    auto* initAdapterButton = new QPushButton(tr("Browse…"));
    initAdapterButton->setObjectName(QStringLiteral("initAdapterButton"));
    initAdapterButton->setToolTip(tr("Choose the adapter folder to continue from"));
    connect(initAdapterButton, &QPushButton::clicked, this, [this] {
        const QString start = m_initAdapter->text().isEmpty() ? runsFolder() : m_initAdapter->text();
        const QString folder = QFileDialog::getExistingDirectory(this, tr("Continue from an adapter"), start);
        if (!folder.isEmpty()) m_initAdapter->setText(folder);
    });
    connect(m_initAdapter, &QLineEdit::textChanged, this, &TrainPage::onFieldEdited);
    m_initAdapterNote = new QLabel(tr("The adapter's rank, alpha, rsLoRA and targets are used; Dropout applies."));
    m_initAdapterNote->setObjectName(QStringLiteral("initAdapterNote"));
    m_initAdapterNote->setWordWrap(true);
    m_initAdapterNote->setVisible(false);
    connect(m_rank, &QSpinBox::valueChanged, this, &TrainPage::onFieldEdited);
    connect(m_alpha, &QDoubleSpinBox::valueChanged, this, &TrainPage::onFieldEdited);
    connect(m_dropout, &QDoubleSpinBox::valueChanged, this, &TrainPage::onFieldEdited);
    connect(m_rslora, &QCheckBox::toggled, this, &TrainPage::onFieldEdited);
    form->addRow(tr("Rank"), m_rank);
    form->addRow(tr("Alpha"), m_alpha);
    form->addRow(tr("Dropout"), m_dropout);
    form->addRow(QString(), m_rslora);
    form->addRow(m_targetsBox);
    form->addRow(tr("Continue from adapter"), folderRow(m_initAdapter, initAdapterButton));
    form->addRow(QString(), m_initAdapterNote);
    return box;
}

QWidget* TrainPage::buildOptimizerBox() {
    auto* box = new QGroupBox(tr("Optimizer and data"));
    auto* form = new QFormLayout(box);
    m_lr = new QLineEdit;
    m_lr->setObjectName(QStringLiteral("lrEdit"));
    m_lr->setToolTip(tr("Peak learning rate of AdamW, e.g. 2e-4 (LoRA usually trains well between 5e-5 and 5e-4)"));
    m_schedule = new QComboBox;
    m_schedule->setObjectName(QStringLiteral("scheduleCombo"));
    for (LrSchedule s : {LrSchedule::Constant, LrSchedule::Linear, LrSchedule::Cosine})
        m_schedule->addItem(engineName(lr_schedule_name(s)), engineName(lr_schedule_name(s)));
    m_schedule->setToolTip(tr("After warmup: constant, linear decay to 0, or cosine decay to 0"));
    m_warmup = new QSpinBox;
    m_warmup->setObjectName(QStringLiteral("warmupSpin"));
    m_warmup->setRange(0, 10'000'000);
    m_warmup->setToolTip(tr("Optimizer steps of linear warmup from 0 to the peak learning rate"));
    m_epochs = new QSpinBox;
    m_epochs->setObjectName(QStringLiteral("epochsSpin"));
    m_epochs->setRange(0, 10'000);
    m_epochs->setToolTip(tr("Passes over the dataset (ignored when max steps is set)"));
    m_maxSteps = new QSpinBox;
    m_maxSteps->setObjectName(QStringLiteral("maxStepsSpin"));
    m_maxSteps->setRange(0, 100'000'000);
    m_maxSteps->setSpecialValueText(tr("off (use epochs)"));
    m_maxSteps->setToolTip(tr("Stop after this many optimizer steps; wins over epochs. Off: train for the epochs"));
    m_batchTokens = new QSpinBox;
    m_batchTokens->setObjectName(QStringLiteral("batchTokensSpin"));
    m_batchTokens->setRange(1, 1 << 24);
    m_batchTokens->setSingleStep(256);
    m_batchTokens->setToolTip(
        tr("Tokens per micro-batch (the packing budget). Larger: faster per token, more "
           "activation memory. Must hold max seq len when packing"));
    m_gradAccum = new QSpinBox;
    m_gradAccum->setObjectName(QStringLiteral("gradAccumSpin"));
    m_gradAccum->setRange(1, 4096);
    m_gradAccum->setToolTip(tr("Micro-batches per optimizer step: a larger effective batch at no memory cost"));
    m_maxSeqLen = new QSpinBox;
    m_maxSeqLen->setObjectName(QStringLiteral("maxSeqLenSpin"));
    m_maxSeqLen->setRange(0, 1 << 24);
    m_maxSeqLen->setSingleStep(256);
    m_maxSeqLen->setSpecialValueText(tr("no limit"));
    m_maxSeqLen->setToolTip(tr("Longer samples keep their first max seq len tokens (see the Data page's histogram)"));
    m_seed = new QSpinBox;
    m_seed->setObjectName(QStringLiteral("seedSpin"));
    m_seed->setRange(0, std::numeric_limits<int>::max());
    m_seed->setToolTip(tr("Seeds the data order, LoRA initialisation and dropout: the same seed gives the same run"));
    m_warmupRatio = decimalBox("warmupRatioSpin", 0, 0.999, 3, 0.01,
                               tr("Warmup as a share of all steps (used when Warmup steps is 0), e.g. 0.03"));
    m_warmupRatio->setSpecialValueText(tr("off"));
    m_weightDecay = decimalBox("weightDecaySpin", 0, 10, 4, 0.01,
                               tr("AdamW weight decay on the adapter's weights (0: none; 0.01 is a common choice)"));
    m_maxGradNorm = decimalBox("maxGradNormSpin", 0, 1e6, 2, 0.5,
                               tr("Clip the gradient to this global norm before each update (0: no clipping)"));
    m_maxGradNorm->setSpecialValueText(tr("off (no clipping)"));
    for (QDoubleSpinBox* d : {m_warmupRatio, m_weightDecay, m_maxGradNorm})
        connect(d, &QDoubleSpinBox::valueChanged, this, &TrainPage::onFieldEdited);
    connect(m_lr, &QLineEdit::textChanged, this, &TrainPage::onFieldEdited);
    connect(m_schedule, &QComboBox::currentIndexChanged, this, &TrainPage::onFieldEdited);
    for (QSpinBox* s : {m_warmup, m_epochs, m_maxSteps, m_batchTokens, m_gradAccum, m_maxSeqLen, m_seed})
        connect(s, &QSpinBox::valueChanged, this, &TrainPage::onFieldEdited);
    form->addRow(tr("Learning rate"), m_lr);
    form->addRow(tr("Schedule"), m_schedule);
    form->addRow(tr("Warmup steps"), m_warmup);
    form->addRow(tr("Warmup ratio"), m_warmupRatio);
    form->addRow(tr("Epochs"), m_epochs);
    form->addRow(tr("Max steps"), m_maxSteps);
    form->addRow(tr("Batch tokens"), m_batchTokens);
    form->addRow(tr("Gradient accumulation"), m_gradAccum);
    form->addRow(tr("Weight decay"), m_weightDecay);
    form->addRow(tr("Max grad norm"), m_maxGradNorm);
    form->addRow(tr("Max seq len"), m_maxSeqLen);
    form->addRow(tr("Seed"), m_seed);
    return box;
}

QWidget* TrainPage::buildMemoryBox() {
    auto* box = new QGroupBox(tr("Device and memory"));
    auto* form = new QFormLayout(box);
    m_device = new QComboBox;
    m_device->setObjectName(QStringLiteral("deviceCombo"));
    for (DeviceChoice d : {DeviceChoice::Auto, DeviceChoice::Cuda, DeviceChoice::Cpu})
        m_device->addItem(engineName(device_choice_name(d)), engineName(device_choice_name(d)));
    m_device->setToolTip(
        tr("auto: the GPU when one is usable, else the CPU; cuda: require the GPU; cpu: the CPU "
           "reference backend (slow, for small models)"));
    m_packing = new QCheckBox(tr("Packing"));
    m_packing->setObjectName(QStringLiteral("packingCheck"));
    m_packing->setToolTip(tr("Pack several samples into each micro-batch instead of padding one per row"));
    m_packingHelp = new QLabel;
    m_packingHelp->setObjectName(QStringLiteral("packingHelp"));
    m_packingHelp->setWordWrap(true);
    m_quantization = new QComboBox;
    m_quantization->setObjectName(QStringLiteral("quantizationCombo"));
    m_quantization->addItem(tr("16-bit (as stored)"), engineName(quantization_name(Quantization::None)));
    m_quantization->addItem(tr("4-bit (QLoRA)"), engineName(quantization_name(Quantization::Nf4)));
    m_quantization->setToolTip(
        tr("How the base model's weights are held while training: as the checkpoint stores them, or quantized to "
           "4-bit NF4 at load (QLoRA, as bitsandbytes does). The LoRA adapter is the same either way"));
    m_quantizationHelp = new QLabel;
    m_quantizationHelp->setObjectName(QStringLiteral("quantizationHelp"));
    m_quantizationHelp->setWordWrap(true);
    m_precision = new QComboBox;
    m_precision->setObjectName(QStringLiteral("precisionCombo"));
    m_precision->addItem(tr("16-bit (bf16)"), engineName(precision_name(Precision::Bf16)));
    m_precision->addItem(tr("8-bit floating point (FP8, faster)"), engineName(precision_name(Precision::Fp8)));
    m_precision->setEnabled(false);  // until system_info says whether this GPU trains in FP8 (setFp8Support)
    m_precision->setToolTip(precisionToolTip() + tr(". Checking whether this GPU can train in FP8…"));
    m_precisionHelp = new QLabel;
    m_precisionHelp->setObjectName(QStringLiteral("precisionHelp"));
    m_precisionHelp->setWordWrap(true);
    m_checkpointing = new QComboBox;
    m_checkpointing->setObjectName(QStringLiteral("checkpointingCombo"));
    // Not smart-single: it exists to measure what double buffering brings (tandem-cli --checkpointing).
    for (CheckpointPolicy p : {CheckpointPolicy::Auto, CheckpointPolicy::Off, CheckpointPolicy::Selective,
                               CheckpointPolicy::Recompute, CheckpointPolicy::Smart})
        m_checkpointing->addItem(engineName(checkpoint_policy_name(p)), engineName(checkpoint_policy_name(p)));
    m_checkpointing->setToolTip(tr("Checkpointing: how activations are kept for the backward pass (auto means off on the CPU)"));
    m_checkpointingHelp = new QLabel;
    m_checkpointingHelp->setObjectName(QStringLiteral("checkpointingHelp"));
    m_checkpointingHelp->setWordWrap(true);
    m_hostBudget = decimalBox("hostBudgetSpin", 0, 1'000'000, 1, 8,
                              tr("Pinned host memory smart checkpointing may use for the layers' inputs (GiB). "
                                 "Very long samples need about layers x tokens x hidden size x 2 bytes. Auto: half "
                                 "of the RAM available when the run starts; at most 90% of it"));
    m_hostBudget->setSpecialValueText(tr("auto (half the RAM)"));
    m_hostBudget->setSuffix(tr(" GiB"));
    m_memoryBar = new QProgressBar;
    m_memoryBar->setObjectName(QStringLiteral("memoryBar"));
    m_memoryBar->setRange(0, 1000);
    m_memoryBar->setValue(0);
    m_memoryBar->setTextVisible(true);
    m_memoryBar->setToolTip(tr("Estimated peak memory of the run against the GPU's memory (host memory on the CPU)"));
    m_memoryLabel = new QLabel(tr("Choose a model to estimate memory."));
    m_memoryLabel->setObjectName(QStringLiteral("memoryLabel"));
    m_memoryLabel->setWordWrap(true);  // in the form layout (status_text.h)
    m_memoryLabel->setTextInteractionFlags(Qt::TextSelectableByMouse);
    m_longestLabel = new QLabel;
    m_longestLabel->setObjectName(QStringLiteral("longestContextLabel"));
    m_longestLabel->setWordWrap(true);  // in the form layout (status_text.h)
    m_longestLabel->setTextInteractionFlags(Qt::TextSelectableByMouse);
    m_longestLabel->setToolTip(
        tr("The longest single sample these settings can train (one sample per micro-batch), from the same "
           "memory plan as the bar. Longer samples are cut to Max seq len"));
    m_longestLabel->setVisible(false);
    connect(m_quantization, &QComboBox::currentIndexChanged, this, &TrainPage::onFieldEdited);
    connect(m_precision, &QComboBox::currentIndexChanged, this, &TrainPage::onFieldEdited);
    connect(m_device, &QComboBox::currentIndexChanged, this, &TrainPage::onFieldEdited);
    connect(m_device, &QComboBox::currentIndexChanged, this, [this] { updateGpuList(); });
    connect(m_packing, &QCheckBox::toggled, this, &TrainPage::onFieldEdited);
    // Data parallelism: the GPUs to train on together, shown when the machine has more than one.
    auto* gpuBox = new QWidget;
    gpuBox->setObjectName(QStringLiteral("gpuBox"));
    auto* gpuLayout = new QVBoxLayout(gpuBox);
    gpuLayout->setContentsMargins(0, 0, 0, 0);
    gpuLayout->addWidget(new QLabel(tr("GPUs to train on together")));
    m_gpus = new QListWidget;
    m_gpus->setObjectName(QStringLiteral("gpuList"));
    m_gpus->setToolTip(tr("One full copy of the model on each checked GPU; micro-batch i of an optimizer step runs on "
                          "GPU i mod N and the LoRA gradients are summed over the GPUs after each layer's backward, so "
                          "N GPUs compute what one computes with the same micro-batches, about N times faster"));
    m_gpus->setMaximumHeight(5 * m_gpus->fontMetrics().height() + 8);
    gpuLayout->addWidget(m_gpus);
    m_gpusHelp = new QLabel;
    m_gpusHelp->setObjectName(QStringLiteral("gpuHelp"));
    m_gpusHelp->setWordWrap(true);
    gpuLayout->addWidget(m_gpusHelp);
    gpuBox->setVisible(false);
    connect(m_gpus, &QListWidget::itemChanged, this, [this](QListWidgetItem* item) {
        bool any = false;
        for (int i = 0; i < m_gpus->count(); ++i) any = any || m_gpus->item(i)->checkState() == Qt::Checked;
        if (!any) {  // at least one GPU: unchecking the last one is undone
            const QSignalBlocker block(m_gpus);
            item->setCheckState(Qt::Checked);
        }
        m_devices = checkedGpus();
        updateGpuList();
        onFieldEdited();
    });
    connect(m_gradAccum, &QSpinBox::valueChanged, this, [this] { updateGpuList(); });
    connect(m_checkpointing, &QComboBox::currentIndexChanged, this, &TrainPage::onFieldEdited);
    connect(m_hostBudget, &QDoubleSpinBox::valueChanged, this, &TrainPage::onFieldEdited);
    form->addRow(tr("Device"), m_device);
    form->addRow(gpuBox);
    form->addRow(m_packing, m_packingHelp);
    form->addRow(tr("Base weights"), m_quantization);
    form->addRow(QString(), m_quantizationHelp);
    form->addRow(tr("Precision"), m_precision);
    form->addRow(QString(), m_precisionHelp);
    form->addRow(tr("Checkpointing"), m_checkpointing);
    form->addRow(QString(), m_checkpointingHelp);
    form->addRow(tr("Pinned host memory"), m_hostBudget);
    form->addRow(tr("Memory"), m_memoryBar);
    form->addRow(QString(), m_memoryLabel);
    form->addRow(QString(), m_longestLabel);
    return box;
}

QWidget* TrainPage::folderRow(QLineEdit* edit, QPushButton* button) {
    auto* row = new QWidget;
    auto* layout = new QHBoxLayout(row);
    layout->setContentsMargins(0, 0, 0, 0);
    layout->addWidget(edit, 1);
    layout->addWidget(button);
    return row;
}

QWidget* TrainPage::buildValidationBox() {
    auto* box = new QGroupBox(tr("Validation and checkpoints"));
    auto* form = new QFormLayout(box);
    m_validationShare = decimalBox("validationShareSpin", 0, 90, 1, 1,
                                   tr("Share of the dataset's records held out to measure the eval loss (the same "
                                      "records for every run with this Seed). None: no validation"));
    m_validationShare->setSuffix(QStringLiteral(" %"));
    m_validationShare->setSpecialValueText(tr("none"));
    m_validationFile = new QLineEdit;
    m_validationFile->setObjectName(QStringLiteral("validationFileEdit"));
    m_validationFile->setPlaceholderText(tr("none: hold out a share instead"));
    m_validationFile->setClearButtonEnabled(true);
    m_validationFile->setToolTip(
        tr("A second dataset file, in the same format, used only for the eval loss; it wins "
           "over the held-out share"));
    auto* validationButton = new QPushButton(tr("Browse…"));
    validationButton->setObjectName(QStringLiteral("validationFileButton"));
    validationButton->setToolTip(tr("Choose the validation file"));
    connect(validationButton, &QPushButton::clicked, this, [this] {
        const QString start =
            m_validationFile->text().isEmpty() ? QFileInfo(m_dataset).absolutePath() : m_validationFile->text();
        const QString file =
            QFileDialog::getOpenFileName(this, tr("Choose a validation file"), start,
                                         tr("Datasets (*.jsonl *.json *.parquet *.csv *.tsv *.txt);;All files (*)"));
        if (!file.isEmpty()) m_validationFile->setText(file);
    });
    m_evalEvery = new QSpinBox;
    m_evalEvery->setObjectName(QStringLiteral("evalEverySpin"));
    m_evalEvery->setRange(0, 100'000'000);
    m_evalEvery->setSpecialValueText(tr("at the end only"));
    m_evalEvery->setToolTip(tr("Measure the eval loss every this many steps (and at the end); needs validation data"));
    m_checkpointEvery = new QSpinBox;
    m_checkpointEvery->setObjectName(QStringLiteral("checkpointEverySpin"));
    m_checkpointEvery->setRange(0, 100'000'000);
    m_checkpointEvery->setSpecialValueText(tr("off"));
    m_checkpointEvery->setToolTip(
        tr("Save a checkpoint every this many steps; these are all kept (Off: only the timed "
           "ones and the one at Stop)"));
    m_checkpointMinutes =
        decimalBox("checkpointMinutesSpin", 0, 100'000, kCheckpointMinutesDecimals, 5,
                   tr("Save a checkpoint after the step during which this many minutes passed since the last one, so a "
                      "crash or power cut loses at most that much; the newest few are kept. Off: only when stopped"));
    m_checkpointMinutes->setSpecialValueText(tr("off (only when stopped)"));
    connect(m_validationShare, &QDoubleSpinBox::valueChanged, this, &TrainPage::onFieldEdited);
    connect(m_validationFile, &QLineEdit::textChanged, this, &TrainPage::onFieldEdited);
    connect(m_evalEvery, &QSpinBox::valueChanged, this, &TrainPage::onFieldEdited);
    connect(m_checkpointEvery, &QSpinBox::valueChanged, this, &TrainPage::onFieldEdited);
    connect(m_checkpointMinutes, &QDoubleSpinBox::valueChanged, this, &TrainPage::onFieldEdited);
    form->addRow(tr("Validation share"), m_validationShare);
    form->addRow(tr("Validation file"), folderRow(m_validationFile, validationButton));
    form->addRow(tr("Evaluate every (steps)"), m_evalEvery);
    form->addRow(tr("Checkpoint every (steps)"), m_checkpointEvery);
    form->addRow(tr("Checkpoint every (minutes)"), m_checkpointMinutes);
    return box;
}

void TrainPage::loadPresets() {
    m_presetCombo->addItem(tr("custom"), QString());
    QStringList names =
        QDir(QStringLiteral(":/presets")).entryList({QStringLiteral("*.json")}, QDir::Files, QDir::Name);
    std::stable_sort(names.begin(), names.end(), [](const QString& a, const QString& b) {
        const auto rank = [](const QString& n) {
            const qsizetype i = kPresetOrder.indexOf(QFileInfo(n).completeBaseName());
            return i < 0 ? kPresetOrder.size() : i;
        };
        return rank(a) < rank(b);
    });
    for (const QString& file : names) {
        const QString base = QFileInfo(file).completeBaseName();
        m_presetCombo->addItem(presetDisplayName(base), QStringLiteral(":/presets/") + file);
        m_presetCombo->setItemData(m_presetCombo->count() - 1, base, Qt::UserRole + 1);
    }
}

void TrainPage::applyPreset(const QString& resourcePath) {
    QFile f(resourcePath);
    try {
        if (!f.open(QIODevice::ReadOnly)) throw_io(resourcePath.toStdString() + ": cannot be read");
        nlohmann::json merged = config();
        merged.merge_patch(nlohmann::json::parse(f.readAll().toStdString()));
        const RunConfig c = parse_run_config(merged);
        m_base = c;
        fillFields(c);
        const int index = m_presetCombo->findData(resourcePath);
        const QSignalBlocker block(m_presetCombo);
        m_presetCombo->setCurrentIndex(index < 0 ? 0 : index);
    } catch (const std::exception& e) {
        setStatusText(m_blockedLabel, tr("Preset %1 is broken: %2").arg(resourcePath, QString::fromUtf8(e.what())),
                      Tone::Bad);
        return;
    }
    onFieldsChanged();
}

void TrainPage::fillFields(const RunConfig& c) {
    m_filling = true;
    m_rank->setValue(c.lora.r);
    m_alpha->setValue(c.lora.alpha);
    m_dropout->setValue(c.lora.dropout);
    m_rslora->setChecked(c.lora.use_rslora);
    showTargets(c.lora.target_modules);
    m_lr->setText(QLocale::c().toString(c.training.lr, 'g', QLocale::FloatingPointShortest));
    m_schedule->setCurrentIndex(m_schedule->findData(engineName(lr_schedule_name(c.training.schedule))));
    m_warmup->setValue(static_cast<int>(std::min<int64_t>(c.training.warmup_steps, m_warmup->maximum())));
    m_epochs->setValue(static_cast<int>(std::min<int64_t>(c.training.epochs, m_epochs->maximum())));
    m_maxSteps->setValue(static_cast<int>(std::min<int64_t>(c.training.max_steps, m_maxSteps->maximum())));
    m_batchTokens->setValue(c.training.batch_tokens);
    m_gradAccum->setValue(c.training.grad_accum);
    m_maxSeqLen->setValue(c.data.max_seq_len);
    m_seed->setValue(static_cast<int>(std::min<uint64_t>(c.seed, static_cast<uint64_t>(m_seed->maximum()))));
    selectOrAuto(m_device, device_choice_name(c.device));
    m_packing->setChecked(c.data.packing);
    selectOrAuto(m_checkpointing, checkpoint_policy_name(c.memory.checkpointing));
    m_hostBudget->setValue(c.memory.host_budget_gib);
    if (!modelPrequantized()) {  // else m_base has them
        selectOrAuto(m_quantization, quantization_name(c.quantization));
        selectPrecision(c.precision);
    }
    m_checkpointMinutes->setValue(c.training.checkpoint_minutes);
    m_checkpointEvery->setValue(
        static_cast<int>(std::min<int64_t>(c.training.checkpoint_every, m_checkpointEvery->maximum())));
    m_evalEvery->setValue(static_cast<int>(std::min<int64_t>(c.training.eval_every, m_evalEvery->maximum())));
    m_validationShare->setValue(c.data.validation_fraction * 100.0);
    m_validationFile->setText(QString::fromStdString(c.data.validation));
    m_initAdapter->setText(QString::fromStdString(c.init_adapter));
    m_warmupRatio->setValue(c.training.warmup_ratio);
    m_weightDecay->setValue(c.training.weight_decay);
    m_maxGradNorm->setValue(c.training.max_grad_norm);
    m_filling = false;
}

RunConfig TrainPage::config() const {
    RunConfig c = m_base;
    c.model = m_model.toStdString();
    c.data.dataset = m_dataset.toStdString();
    c.data.format = m_format.toStdString();
    c.lora.r = m_rank->value();
    c.lora.alpha = m_alpha->value();
    c.lora.dropout = m_dropout->value();
    c.lora.use_rslora = m_rslora->isChecked();
    c.lora.target_modules.clear();
    for (const QString& t : m_modelTargets)
        if (m_targets.value(t)->isChecked()) c.lora.target_modules.push_back(t.toStdString());
    bool ok = false;
    const double lr = QLocale::c().toDouble(m_lr->text().trimmed(), &ok);
    c.training.lr = ok ? lr : std::numeric_limits<double>::quiet_NaN();
    c.training.schedule =
        parse_lr_schedule(m_schedule->currentData().toString().toStdString()).value_or(LrSchedule::Linear);
    c.training.warmup_steps = m_warmup->value();
    c.training.epochs = m_epochs->value();
    c.training.max_steps = m_maxSteps->value();
    c.training.batch_tokens = m_batchTokens->value();
    c.training.grad_accum = m_gradAccum->value();
    c.data.max_seq_len = m_maxSeqLen->value();
    c.data.packing = m_packing->isChecked();
    c.seed = static_cast<uint64_t>(m_seed->value());
    c.device = parse_device_choice(m_device->currentData().toString().toStdString()).value_or(DeviceChoice::Auto);
    // GPU 0 alone is the default (no devices); on the CPU none.
    c.devices = c.device == DeviceChoice::Cpu ? std::vector<int>{} : m_devices;
    if (c.devices == std::vector<int>{0}) c.devices.clear();
    c.memory.checkpointing = parse_checkpoint_policy(m_checkpointing->currentData().toString().toStdString())
                                 .value_or(CheckpointPolicy::Auto);
    const QString quantization = m_quantization->currentData().toString();
    c.quantization = quantization == kFromCheckpoint
                         ? m_base.quantization  // the model is 4-bit anyway; the user's choice waits for the next
                         : parse_quantization(quantization.toStdString()).value_or(Quantization::None);
    c.precision = parse_precision(m_precision->currentData().toString().toStdString()).value_or(Precision::Bf16);
    // The boxes round to their decimals: a reopened value shown rounded stays exact until its box changes.
    c.training.checkpoint_minutes = exactOr(m_checkpointMinutes, m_base.training.checkpoint_minutes);
    c.memory.host_budget_gib = exactOr(m_hostBudget, m_base.memory.host_budget_gib);
    c.training.warmup_ratio = exactOr(m_warmupRatio, m_base.training.warmup_ratio);
    c.training.weight_decay = exactOr(m_weightDecay, m_base.training.weight_decay);
    c.training.max_grad_norm = exactOr(m_maxGradNorm, m_base.training.max_grad_norm);
    c.data.validation_fraction = exactOr(m_validationShare, m_base.data.validation_fraction, 100.0);
    c.training.checkpoint_every = m_checkpointEvery->value();
    c.training.eval_every = m_evalEvery->value();
    c.data.validation = m_validationFile->text().trimmed().toStdString();
    c.init_adapter = m_initAdapter->text().trimmed().toStdString();
    c.output_dir.clear();
    if (!runsFolder().isEmpty()) {
        QString name = modelDisplayName(m_model);
        name.replace('/', '_');
        const QString stamp = QDateTime::currentDateTime().toString(QStringLiteral("yyyyMMdd-HHmmss"));
        QString dir = QDir(runsFolder()).filePath(name.isEmpty() ? stamp : stamp + '-' + name);
        for (int n = 2; QFileInfo::exists(dir); ++n)  // two runs started within the same second
            dir = QDir(runsFolder()).filePath(QStringLiteral("%1-%2-%3").arg(stamp, name).arg(n));
        c.output_dir = dir.toStdString();
    }
    return c;
}

void TrainPage::setConfig(const RunConfig& c) {
    m_base = c;
    m_base.output_dir.clear();
    m_devices = c.devices;
    if (m_gpus->count() > 0) checkGpus(c.devices);
    const QString model = QString::fromStdString(c.model);
    if (!samePath(model, m_model)) {
        m_model = model;
        m_modelSupported = false;
        m_modelConfirmed = false;
    }
    const QString dataset = QString::fromStdString(c.data.dataset);
    if (!samePath(dataset, m_dataset) || QString::fromStdString(c.data.format) != m_format) {
        m_dataset = dataset;
        m_format = QString::fromStdString(c.data.format);
        m_datasetValid = false;
        m_datasetConfirmed = false;
    }
    fillFields(c);
    const QSignalBlocker block(m_presetCombo);
    m_presetCombo->setCurrentIndex(0);
    onFieldsChanged();
}

QString TrainPage::runsFolder() const {
    return m_runsFolderEdit->text().trimmed();
}

void TrainPage::setModel(const QString& folder, bool supported) {
    // What is checked now, carried over to the new model's boxes (a fused name also as the names it stands for).
    std::vector<std::string> wanted;
    for (const QString& t : m_modelTargets)
        if (m_targets.value(t)->isChecked()) {
            wanted.push_back(t.toStdString());
            if (m_modelConfig)
                for (const std::string& part : lora_target_parts(*m_modelConfig, t.toStdString())) wanted.push_back(part);
        }
    m_model = folder;
    m_modelSupported = supported;
    m_modelConfirmed = true;
    m_modelConfig.reset();
    std::vector<std::string> targets = lora_default_targets();
    try {
        m_modelConfig = load_model_config(folder.toStdString());  // a small file
        targets = lora_targets(*m_modelConfig);
    } catch (const std::exception&) {
        // Not a readable model: the Model page says why; the Llama names stay.
    }
    m_modelTargets.clear();
    for (const std::string& t : targets) m_modelTargets.append(QString::fromStdString(t));
    showTargets(wanted);
    updateQuantizationChoice();
    onFieldsChanged();
}

bool TrainPage::modelPrequantized() const {
    return m_modelConfig && m_modelConfig->quantization.prequantized;
}

void TrainPage::updateQuantizationChoice() {
    const QSignalBlocker block(m_quantization);  // the caller refreshes the page once
    const int fromCheckpoint = m_quantization->findData(kFromCheckpoint);
    if (modelPrequantized()) {
        if (fromCheckpoint < 0) {
            // Kept for the next float model (config() reports it meanwhile).
            m_base.quantization =
                parse_quantization(m_quantization->currentData().toString().toStdString()).value_or(Quantization::None);
            m_quantization->addItem(tr("4-bit (from the checkpoint)"), kFromCheckpoint);
        }
        m_quantization->setCurrentIndex(m_quantization->findData(kFromCheckpoint));
        m_quantization->setEnabled(false);
        return;
    }
    if (fromCheckpoint >= 0) {
        m_quantization->removeItem(fromCheckpoint);
        selectOrAuto(m_quantization, quantization_name(m_base.quantization));
    }
    m_quantization->setEnabled(true);
}

void TrainPage::selectPrecision(Precision p) {
    if (p == Precision::Fp8 && m_fp8Unsupported && !m_fp8Unsupported->isEmpty()) p = Precision::Bf16;
    selectOrAuto(m_precision, precision_name(p));
}

void TrainPage::setFp8Support(const QString& unsupportedReason) {
    m_fp8Unsupported = unsupportedReason;
    const bool usable = unsupportedReason.isEmpty();
    m_precision->setEnabled(usable);
    setOwnToolTip(m_precision,
                  usable ? precisionToolTip()
                         : precisionToolTip() +
                               tr(". FP8 is not available on this machine: %1").arg(inScreenWords(unsupportedReason)));
    if (usable || m_precision->currentData().toString() != engineName(precision_name(Precision::Fp8))) return;
    {
        const QSignalBlocker block(m_precision);  // not a user's edit: the preset stays
        selectPrecision(Precision::Bf16);
    }
    onFieldsChanged();
}

void TrainPage::showTargets(const std::vector<std::string>& wanted) {
    // A box is checked when its name is wanted, or (a fused projection) when all the names it stands for are.
    auto checked = [&](const std::string& t) {
        auto has = [&](const std::string& n) { return std::find(wanted.begin(), wanted.end(), n) != wanted.end(); };
        if (has(t)) return true;
        if (!m_modelConfig) return false;
        const auto parts = lora_target_parts(*m_modelConfig, t);
        // a fused projection, or an MoE expert parameter (mlp.experts.down_proj stands for down_proj)
        return (parts.size() > 1 || (parts.size() == 1 && parts[0] != t)) && std::all_of(parts.begin(), parts.end(), has);
    };
    auto* grid = static_cast<QGridLayout*>(m_targetsBox->layout());
    for (QCheckBox* check : std::as_const(m_targets)) {
        grid->removeWidget(check);
        check->setVisible(false);
    }
    int i = 0;
    for (const QString& t : std::as_const(m_modelTargets)) {
        QCheckBox* check = m_targets.value(t);
        if (!check) continue;
        {
            const QSignalBlocker quiet(check);  // the callers refresh the page once
            check->setChecked(checked(t.toStdString()));
        }
        grid->addWidget(check, i / 4, i % 4);
        check->setVisible(true);
        ++i;
    }
}

void TrainPage::setDataset(const QString& path, const QString& format, bool valid) {
    m_dataset = path;
    m_format = format;
    m_datasetValid = valid;
    m_datasetConfirmed = true;
    onFieldsChanged();
}

void TrainPage::setColumns(const QVariantMap& columns) {
    m_base.data.columns.clear();
    for (auto it = columns.begin(); it != columns.end(); ++it)
        m_base.data.columns[it.key().toStdString()] = it.value().toString().toStdString();
}

void TrainPage::setRunning(bool running) {
    m_running = running;
    updateTrainButton();
}

void TrainPage::setGpuList(const std::vector<std::pair<int, QString>>& gpus) {
    {
        const QSignalBlocker block(m_gpus);
        m_gpus->clear();
        for (const auto& [index, label] : gpus) {
            auto* item = new QListWidgetItem(label, m_gpus);
            item->setData(Qt::UserRole, index);
            item->setFlags(item->flags() | Qt::ItemIsUserCheckable);
            item->setCheckState(Qt::Unchecked);
        }
    }
    checkGpus(m_devices);
    onFieldsChanged();
}

void TrainPage::checkGpus(const std::vector<int>& devices) {
    const bool all = devices == std::vector<int>{-1};
    {
        const QSignalBlocker block(m_gpus);
        bool any = false;
        for (int i = 0; i < m_gpus->count(); ++i) {
            QListWidgetItem* item = m_gpus->item(i);
            const int index = item->data(Qt::UserRole).toInt();
            const bool on = all || std::find(devices.begin(), devices.end(), index) != devices.end();
            item->setCheckState(on ? Qt::Checked : Qt::Unchecked);
            any = any || on;
        }
        // No GPU of the config is here (or none was named): the first one, the default.
        if (!any && m_gpus->count() > 0) m_gpus->item(0)->setCheckState(Qt::Checked);
    }
    m_devices = checkedGpus();
    updateGpuList();
}

std::vector<int> TrainPage::checkedGpus() const {
    std::vector<int> out;
    for (int i = 0; i < m_gpus->count(); ++i)
        if (m_gpus->item(i)->checkState() == Qt::Checked) out.push_back(m_gpus->item(i)->data(Qt::UserRole).toInt());
    return out;
}

void TrainPage::updateGpuList() {
    const bool cpu = parse_device_choice(m_device->currentData().toString().toStdString()) == DeviceChoice::Cpu;
    if (QWidget* box = m_gpus->parentWidget()) box->setVisible(m_gpus->count() > 1);
    m_gpus->setEnabled(!cpu);
    const int n = int(checkedGpus().size());
    if (cpu)
        m_gpusHelp->setText(tr("The CPU trains alone; choose device auto or cuda to use the GPUs"));
    else if (n <= 1)
        m_gpusHelp->setText(tr("One GPU. Check more to train on them together"));
    else if (m_gradAccum->value() < n)
        m_gpusHelp->setText(tr("%1 GPUs, but gradient accumulation is %2: each optimizer step has %2 micro-batches, "
                               "one per GPU, so %3 GPUs wait. Set it to %1 or a multiple of %1")
                                .arg(n)
                                .arg(m_gradAccum->value())
                                .arg(n - m_gradAccum->value()));
    else
        m_gpusHelp->setText(tr("%1 GPUs: one copy of the model on each, micro-batch i of a step on GPU i mod %1%2")
                                .arg(n)
                                .arg(m_gradAccum->value() % n ? tr(" (gradient accumulation %1 is not a multiple of %2: "
                                                                   "some GPUs get one micro-batch fewer)")
                                                                    .arg(m_gradAccum->value())
                                                                    .arg(n)
                                                              : QString()));
}

void TrainPage::setGpuAvailable(bool usable, const QString& reason) {
    emit gpuChecked(usable, reason);
    const QString cuda = engineName(device_choice_name(DeviceChoice::Cuda));
    const int index = m_device->findData(cuda);
    const QString tip =
        tr("auto: the GPU when one is usable, else the CPU; cuda: require the GPU; cpu: the CPU reference "
           "backend (slow, for small models)");
    if (usable) {
        if (index < 0) {
            const QSignalBlocker block(m_device);
            m_device->insertItem(1, cuda, cuda);
        }
        m_device->setToolTip(tip);
        return;
    }
    m_device->setToolTip(tip + tr(". cuda is not offered: %1").arg(reason.isEmpty() ? tr("no usable GPU") : reason));
    if (index < 0) return;
    const bool wasCurrent = m_device->currentIndex() == index;
    {
        const QSignalBlocker block(m_device);  // not a user's edit: the preset stays
        m_device->removeItem(index);
        if (wasCurrent) m_device->setCurrentIndex(0);  // auto: the CPU here
    }
    if (wasCurrent) onFieldsChanged();
}

void TrainPage::setModelShape(qint64 hiddenSize, qint64 contextLength) {
    m_hiddenSize = hiddenSize;
    m_contextLength = contextLength;
    updateWarnings();
}

void TrainPage::setRendering(const QString& chatTemplate, bool trainOnAll) {
    m_base.data.chat_template = chatTemplate.isEmpty() ? std::string("auto") : chatTemplate.toStdString();
    m_base.data.train_on_all_tokens = trainOnAll;
    onFieldsChanged();
}

void TrainPage::setDataCheck(const QString& problem, const QStringList& warnings) {
    m_dataProblem = problem;
    m_dataWarnings = warnings;
    updateWarnings();
    updateTrainButton();
}

void TrainPage::updateWarnings() {
    m_warnings = plausibilityWarnings(config(), ModelShape{m_hiddenSize, m_contextLength});
    m_warnings += m_dataWarnings;
    QStringList lines;
    for (const QString& w : m_warnings) lines.append(QStringLiteral("⚠ ") + w);
    setStatusText(m_warningsLabel, lines.join('\n'), Tone::Warning);
    m_warningsLabel->setVisible(!m_warnings.isEmpty());
}

void TrainPage::onFieldsChanged() {
    if (m_filling) return;
    m_epochs->setEnabled(m_maxSteps->value() == 0);
    m_warmupRatio->setEnabled(m_warmup->value() == 0);                            // warmup steps win (HF's rule)
    m_validationShare->setEnabled(m_validationFile->text().trimmed().isEmpty());  // a file wins
    const bool fromAdapter = !m_initAdapter->text().trimmed().isEmpty();
    for (QWidget* w : std::initializer_list<QWidget*>{m_rank, m_alpha, m_rslora, m_targetsBox})
        w->setEnabled(!fromAdapter);
    m_initAdapterNote->setVisible(fromAdapter);
    updateWarnings();
    updateExplanations();
    validateFields();
    const int maxSeqLen = m_maxSeqLen->value(), batchTokens = m_batchTokens->value();
    const bool packing = m_packing->isChecked();
    if (maxSeqLen != m_lastMaxSeqLen || batchTokens != m_lastBatchTokens || int(packing) != m_lastPacking) {
        m_lastMaxSeqLen = maxSeqLen;
        m_lastBatchTokens = batchTokens;
        m_lastPacking = packing;
        emit limitsChanged(maxSeqLen, batchTokens, packing);
    }
    ++m_estimateGeneration;  // an estimate still running is for older settings
    m_estimatePending = true;
    if (!m_longestKey.isEmpty() && longestContextKey(config()) != m_longestKey) {
        // Other settings: the line's number (or its computation) is not theirs. startEstimate computes anew.
        m_longestKey.clear();
        ++m_longestGeneration;
        showLongestContext(tr("Longest sample that fits with these settings: computing…"), Tone::Neutral);
    }
    m_estimateDebounce.start();
    updateTrainButton();
}

void TrainPage::onFieldEdited() {
    if (m_filling) return;
    // A hand edit after a preset: the settings are the user's own now.
    const QSignalBlocker block(m_presetCombo);
    m_presetCombo->setCurrentIndex(0);
    onFieldsChanged();
}

void TrainPage::updateExplanations() {
    m_packingHelp->setText(packingExplanation(m_packing->isChecked()));
    m_checkpointingHelp->setText(checkpointingExplanation(m_checkpointing->currentData().toString()));
    m_quantizationHelp->setText(quantizationExplanation(m_quantization->currentData().toString(),
                                                        m_modelConfig ? m_modelConfig->quantization
                                                                      : WeightQuantization{}));
    m_precisionHelp->setText(precisionExplanation(m_precision->currentData().toString()));
}

void TrainPage::validateFields() {
    clearMarks();
    m_fieldError.clear();
    bool ok = false;
    QLocale::c().toDouble(m_lr->text().trimmed(), &ok);
    if (!ok) {
        m_fieldError = tr("Learning rate: '%1' is not a number (write e.g. 2e-4)").arg(m_lr->text());
        markFieldInvalid(m_lr, m_fieldError);
        return;
    }
    // The model and dataset are checked by their pages; placeholders let the settings be checked before.
    RunConfig c = config();
    if (c.model.empty()) c.model = "model";
    if (c.data.dataset.empty()) c.data.dataset = "dataset";
    try {
        validate_run_config(c);
    } catch (const std::exception& e) {
        const QString raw = QString::fromUtf8(e.what());
        m_fieldError = inScreenWords(raw);
        markFields(raw, m_fieldError);
        return;
    }
    const QString adapter = m_initAdapter->text().trimmed();
    if (!adapter.isEmpty() && !isAdapterFolder(adapter)) {
        m_fieldError = tr("Continue from adapter: %1 is not an adapter folder (it holds no adapter_config.json). "
                          "Choose the adapter folder of a run, or clear the field.")
                           .arg(QDir::toNativeSeparators(adapter));
        markFieldInvalid(m_initAdapter, m_fieldError);
        return;
    }
    const QString validation = m_validationFile->text().trimmed();
    if (!validation.isEmpty() && !QFileInfo(validation).isFile()) {
        m_fieldError = tr("Validation file: %1 is not a file. Choose one, or clear the field.")
                           .arg(QDir::toNativeSeparators(validation));
        markFieldInvalid(m_validationFile, m_fieldError);
        return;
    }
    const QString runsFolderIssue = runsFolderProblem(runsFolder());
    if (!runsFolderIssue.isEmpty()) markFieldInvalid(m_runsFolderEdit, runsFolderIssue);
}

// validate_run_config names the field first ("training.lr: ...", "lora: r = ..."); map it to the widgets,
// which show `shown` (the message in the page's words).
void TrainPage::markFields(const QString& message, const QString& shown) {
    struct Rule {
        const char* prefix;
        QList<QWidget*> fields;
    };
    const QList<Rule> rules = {
        {"lora: r ", {m_rank}},
        {"lora: alpha", {m_alpha}},
        {"lora: dropout", {m_dropout}},
        {"lora: target", {m_targetsBox}},
        {"lora: unknown target", {m_targetsBox}},
        {"training.lr", {m_lr}},
        {"training.warmup_steps", {m_warmup}},
        {"training.epochs", {m_epochs, m_maxSteps}},
        {"training.max_steps", {m_maxSteps}},
        {"training.batch_tokens", {m_batchTokens}},
        {"training.grad_accum", {m_gradAccum}},
        {"training.checkpoint_minutes", {m_checkpointMinutes}},
        {"training.checkpoint_every", {m_checkpointEvery}},
        {"training.eval_every", {m_evalEvery}},
        {"training.warmup_ratio", {m_warmupRatio}},
        {"training.weight_decay", {m_weightDecay}},
        {"training.max_grad_norm", {m_maxGradNorm}},
        {"data.validation_fraction", {m_validationShare}},
        {"data.max_seq_len", {m_maxSeqLen}},
        {"memory.host_budget_gib", {m_hostBudget}},
        {"output_dir", {m_runsFolderEdit}},
        {"precision", {m_precision, m_quantization}},  // "precision: fp8 cannot be combined with quantization nf4"
    };
    for (const Rule& rule : rules) {
        if (!message.startsWith(QLatin1String(rule.prefix))) continue;
        for (QWidget* w : rule.fields) markFieldInvalid(w, shown);
    }
    // "training.batch_tokens: 256 is smaller than data.max_seq_len (512)": both fields are part of it.
    if (message.startsWith(QLatin1String("training.batch_tokens")) &&
        message.contains(QLatin1String("data.max_seq_len")))
        markFieldInvalid(m_maxSeqLen, shown);
}

void TrainPage::clearMarks() {
    for (QWidget* w : std::initializer_list<QWidget*>{
             m_rank,        m_alpha,           m_dropout,         m_targetsBox,  m_lr,           m_warmup,
             m_epochs,      m_maxSteps,        m_batchTokens,     m_gradAccum,   m_maxSeqLen,    m_checkpointMinutes,
             m_hostBudget,  m_runsFolderEdit,  m_checkpointEvery, m_evalEvery,   m_warmupRatio,  m_weightDecay,
             m_maxGradNorm, m_validationShare, m_validationFile,  m_initAdapter, m_quantization, m_precision})
        clearFieldInvalid(w);
}

void TrainPage::startEstimate() {
    // Valid settings are saved when they settle, so a crash or a quit keeps them for the next start.
    if (m_fieldError.isEmpty()) {
        nlohmann::json j = config();
        QSettings().setValue(QStringLiteral("train/last"), QString::fromStdString(j.dump()));
    }
    const quint64 generation = ++m_estimateGeneration;
    if (m_model.isEmpty() || !m_modelSupported || !m_fieldError.isEmpty()) {
        m_estimatePending = false;
        m_memoryBar->setValue(0);
        m_memoryBar->setFormat(QString());
        setStatusText(m_memoryLabel,
                      m_model.isEmpty() || !m_modelSupported ? tr("Choose a supported model to estimate memory.")
                                                             : tr("Fix the marked setting to estimate memory."),
                      Tone::Neutral);
        m_longestKey.clear();
        ++m_longestGeneration;
        showLongestContext(QString(), Tone::Neutral);
        updateTrainButton();
        return;
    }
    RunConfig c = config();
    if (c.data.dataset.empty()) c.data.dataset = "dataset";  // the estimate reads only the model's config.json
    setStatusText(m_memoryLabel, tr("Estimating memory…"), Tone::Neutral);
    startLongestContext(c);
    struct Result {
        MemoryEstimate estimate;
        QString error;
    };
    runAsync(
        this,
        [c] {
            Result r;
            try {
                r.estimate = estimate_memory(c);
            } catch (const std::exception& e) {
                r.error = QString::fromUtf8(e.what());
            }
            return r;
        },
        [this, generation](const Result& r) {
            if (generation == m_estimateGeneration) showEstimate(r.estimate, r.error);
        });
}

void TrainPage::startLongestContext(const RunConfig& c) {
    const QString key = longestContextKey(c);
    if (key == m_longestKey) return;  // shown, or being computed, for these settings
    m_longestKey = key;
    const quint64 generation = ++m_longestGeneration;
    showLongestContext(tr("Longest sample that fits with these settings: computing…"), Tone::Neutral);
    struct Result {
        LongestContext longest;
        int64_t cap = 0;  // the longest the search tries: the model's context, in multiples of 64
        QString error;
    };
    runAsync(
        this,
        [c] {
            Result r;
            try {
                r.longest = longest_context(c);
                const int64_t positions = load_model_config(c.model).max_position_embeddings;
                r.cap = std::max<int64_t>(64, positions / 64 * 64);
            } catch (const std::exception& e) {
                r.error = QString::fromUtf8(e.what());
            }
            return r;
        },
        [this, generation](const Result& r) {
            if (generation != m_longestGeneration) return;  // other settings since
            const QString prefix = tr("Longest sample that fits with these settings:");
            if (!r.error.isEmpty()) {
                showLongestContext(tr("%1 cannot tell (%2)").arg(prefix, inScreenWords(r.error)), Tone::Warning);
                return;
            }
            const bool cpu = r.longest.estimate.device == DeviceChoice::Cpu;
            const QString where = cpu ? tr("host memory (CPU)") : tr("GPU memory");
            if (r.longest.tokens <= 0)
                showLongestContext(tr("%1 none: not even 64 tokens fit in %2.").arg(prefix, where), Tone::Warning);
            else if (r.longest.tokens >= r.cap)  // the search stops at the model's positions
                showLongestContext(tr("%1 %2 tokens in %3: the model's whole context length.")
                                       .arg(prefix)
                                       .arg(r.longest.tokens)
                                       .arg(where),
                                   Tone::Neutral);
            else
                showLongestContext(tr("%1 %2 tokens in %3.").arg(prefix).arg(r.longest.tokens).arg(where),
                                   Tone::Neutral);
        });
}

void TrainPage::showLongestContext(const QString& text, Tone tone) {
    setStatusText(m_longestLabel, text, tone);
    m_longestLabel->setVisible(!text.isEmpty());
}

void TrainPage::showEstimate(const MemoryEstimate& e, const QString& engineError) {
    m_estimatePending = false;
    const QString error = inScreenWords(engineError);
    if (!error.isEmpty()) {
        m_estimateFits = false;
        m_estimateProblem = tr("Memory estimate failed: %1").arg(error);
        m_memoryBar->setValue(0);
        m_memoryBar->setFormat(QString());
        setStatusText(m_memoryLabel, m_estimateProblem, Tone::Bad);
        if (engineError.startsWith(QLatin1String("device"))) markFieldInvalid(m_device, error);
        updateTrainButton();
        return;
    }
    clearFieldInvalid(m_device);
    const MemoryPlan& m = e.memory;
    const bool cpu = e.device == DeviceChoice::Cpu;
    const QString where = cpu ? tr("host memory (CPU)") : tr("GPU memory");
    if (m.device_total > 0) {
        const double share = static_cast<double>(m.total) / static_cast<double>(m.device_total);
        m_memoryBar->setValue(static_cast<int>(std::min(1.0, share) * 1000));
        m_memoryBar->setFormat(QStringLiteral("%1 / %2").arg(humanBytes(m.total), humanBytes(m.device_total)));
    } else {
        m_memoryBar->setValue(0);
        m_memoryBar->setFormat(humanBytes(m.total));
    }
    m_memoryBar->setStyleSheet(e.fits ? QString() : QStringLiteral("QProgressBar::chunk { background: #d64541; }"));
    QString text =
        tr("Estimated peak %1 of %2 %3, on %4, checkpointing %5: weights %6, LoRA + optimizer %7, "
           "activations %8")
            .arg(humanBytes(m.total), m.device_total ? humanBytes(m.device_total) : tr("unknown"), where,
                 engineName(device_choice_name(e.device)), engineName(checkpoint_policy_name(e.checkpointing)),
                 humanBytes(m.weights), humanBytes(m.lora_optimizer), humanBytes(m.activations));
    if (m.workspace) text += tr(", workspace %1").arg(humanBytes(m.workspace));
    if (m.overhead) text += tr(", context %1").arg(humanBytes(m.overhead));
    if (m.pinned_host) text += tr("; pinned host %1").arg(humanBytes(m.pinned_host));
    text += '.';
    const QString decision = inScreenWords(QString::fromStdString(e.message));
    if (!decision.isEmpty()) text += QStringLiteral("\n") + decision;
    // Weights that are a large part of a run that does not fit: the 4-bit choice is the advice the engine's
    // message (batch tokens, checkpointing) does not give.
    const bool weightsMatter = m.weights >= m.total / 4;
    if (!e.fits && weightsMatter &&
        m_quantization->currentData().toString() == engineName(quantization_name(Quantization::None)))
        text += QStringLiteral("\n") + tr("Base weights: 4-bit (QLoRA) holds the weights in about a quarter of the "
                                          "memory.");
    m_estimateFits = e.fits;
    // The Memory line shows the engine's advice; the blocked reason points to it instead of repeating it.
    m_estimateProblem = e.fits ? QString()
                               : tr("The run does not fit in %1: the Memory line above says what to change.").arg(where);
    setStatusText(m_memoryLabel, text, e.fits ? Tone::Neutral : Tone::Bad);
    updateTrainButton();
}

void TrainPage::updateTrainButton() {
    QString reason;
    const QString runsFolderIssue = runsFolderProblem(runsFolder());
    if (m_running)
        reason = tr("A run is in progress.");
    else if (m_model.isEmpty())
        reason = tr("Choose a model on the Model page.");
    else if (!m_modelConfirmed)
        reason = tr("Select this run's model on the Model page: %1").arg(m_model);
    else if (!m_modelSupported)
        reason = tr("The model cannot be trained (the Model page says why).");
    else if (m_dataset.isEmpty())
        reason = tr("Choose a dataset on the Data page.");
    else if (!m_datasetConfirmed)
        reason = tr("Select this run's dataset on the Data page: %1").arg(m_dataset);
    else if (!m_datasetValid)
        reason = tr("The dataset has problems (the Data page shows them).");
    else if (!m_dataProblem.isEmpty())
        reason = m_dataProblem;
    else if (!m_fieldError.isEmpty())
        reason = m_fieldError;
    else if (!runsFolderIssue.isEmpty())
        reason = runsFolderIssue;
    else if (m_estimatePending)
        reason = tr("Estimating memory…");
    else if (!m_estimateFits)
        reason = m_estimateProblem;
    const bool changed = reason != m_blockedReason;
    m_blockedReason = reason;
    if (changed) emit readinessChanged(reason);
    m_trainButton->setEnabled(reason.isEmpty());
    m_trainButton->setToolTip(reason.isEmpty() ? tr("Start training with these settings (Ctrl+T)") : reason);
    if (reason.isEmpty())
        setStatusText(m_blockedLabel, tr("Ready: press Train."), Tone::Good);
    else
        setStatusText(m_blockedLabel, reason, reason == tr("Estimating memory…") ? Tone::Neutral : Tone::Bad);
}

void TrainPage::chooseRunsFolder() {
    const QString folder = QFileDialog::getExistingDirectory(this, tr("Choose the runs folder"), runsFolder());
    if (folder.isEmpty()) return;
    m_runsFolderEdit->setText(folder);
    QSettings().setValue(QStringLiteral("runs/folder"), folder);
    emit runsFolderChanged(folder);
}

}  // namespace tandem::ui
