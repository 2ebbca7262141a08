// SPDX-FileCopyrightText: 2026 The Tandem developers
// SPDX-License-Identifier: GPL-3.0-or-later
// The Train page: every setting of a run (LoRA or an adapter to continue, optimizer, sequence and batch sizes,
// validation, checkpoints, device, packing, checkpointing), presets, the runs folder, a memory estimate
// against the device's capacity, warnings about implausible settings, and the Train button — disabled, with
// the reason, until the run can start.
// Decisions a reader must know:
//  - config() is the single source of truth: the widgets' values laid over m_base, a RunConfig holding the
//    settings without a widget (betas, eps, keep_checkpoints, ...) and those the Data page sets (chat
//    template, train on prompt tokens: setRendering), so a config reopened from a run round-trips unchanged.
//    Presets are partial RunConfig JSON merged over config().
//  - Decimal boxes (checkpoint minutes, validation share in %, warmup ratio, weight decay, max grad norm) show
//    a few decimals; a reopened value a box cannot show exactly is kept as it was until the box is changed.
//  - Validation: a share of the records held out, or a file (the file wins; the share box is disabled then).
//  - Continue from adapter (init_adapter): the adapter's rank, alpha, rsLoRA and targets replace the LoRA
//    box's, so those fields are disabled while one is chosen (dropout still applies).
//  - Warnings (plausibility.h, and the Data page's via setDataCheck) never block; the Data page's problem
//    (no sample left at these limits) does.
//  - Messages are shown in the page's words (screen_words.h); fields are marked from the engine's text.
//  - Fields are checked with the engine's validate_run_config on every change (cheap, GUI thread); its
//    message names the field, which is then marked. estimate_memory runs on a worker thread, debounced
//    (kEstimateDelayMs) and only for the latest settings.
//  - The model and dataset come from the Model and Data pages (setModel / setDataset). setConfig keeps the
//    current model or dataset when the reopened run's is the same folder or file (canonical paths: a symlink
//    counts as the same); a different one is unchecked until its page confirms it, so the main window
//    selects the run's model and dataset on those pages (MainWindow::reopenSettings).
//  - Train also waits for a runs folder that can hold a new run folder (the nearest existing folder on its
//    path must be a writable folder): otherwise it says "choose a writable runs folder".
//  - Base weights (RunConfig::quantization): 16-bit as stored, or 4-bit NF4 quantized at load (QLoRA). A model
//    whose checkpoint is already 4-bit (ModelConfig::quantization.prequantized) shows "4-bit (from the
//    checkpoint)", disabled: the engine trains it as QLoRA whatever the setting, so config() keeps the user's
//    own choice (m_base.quantization) for the next float model instead of writing one for this model.
//  - Precision (RunConfig::precision): 16-bit (bf16) or FP8 (the frozen base weights in 8 bits, base GEMMs on FP8
//    tensor cores). Offered only where fp8_unsupported_reason(system_info()) is empty (asked once, off the GUI
//    thread, with the cuda check; setFp8Support): until then and elsewhere the combo is disabled, the reason in its
//    tooltip, like cuda's (a reopened fp8 config shows bf16 there). FP8 goes with either base-weights choice and
//    with a pre-quantized model (its 4-bit weights are dequantized straight to FP8 before each GEMM).
//  - "Longest sample that fits": longest_context (a binary search over estimate_memory) on a worker, started
//    with the estimate and dropped when stale like it. The settings it overrides (batch tokens, max seq len,
//    gradient accumulation) and the run folder do not restart it: m_longestKey is the rest of the config.
//    While it computes, the line says so (never a number for other settings).
//  - Choices the GUI does not offer: checkpointing smart-single (a measurement aid; tandem-cli has it) and
//    device cuda when no GPU is usable (system_info, asked once off the GUI thread; setGpuAvailable). A
//    reopened config that names one of them shows auto instead.
#pragma once

#include <optional>
#include <utility>
#include <vector>

#include <QHash>
#include <QString>
#include <QStringList>
#include <QTimer>
#include <QVariantMap>
#include <QWidget>

#include "tandem/model_config.h"
#include "tandem/run_config.h"
#include "tandem/trainer.h"
#include "ui/status_text.h"

class QCheckBox;
class QComboBox;
class QListWidget;
class QDoubleSpinBox;
class QGroupBox;
class QLabel;
class QLineEdit;
class QProgressBar;
class QPushButton;
class QSpinBox;

namespace tandem::ui {

class TrainPage : public QWidget {
    Q_OBJECT
    Q_DISABLE_COPY_MOVE(TrainPage)

public:
    static constexpr int kEstimateDelayMs = 250;

    explicit TrainPage(QWidget* parent = nullptr);

    // Everything incl. model, data and output_dir: a new folder under the runs folder named
    // <yyyyMMdd-HHmmss>-<model name>.
    tandem::RunConfig config() const;
    // Fills the fields from a config (the Runs page's "reopen"); output_dir is not kept: a new run gets a
    // new folder.
    void setConfig(const tandem::RunConfig& config);

    QString runsFolder() const;
    QString blockedReason() const { return m_blockedReason; }
    QStringList warnings() const { return m_warnings; }

public slots:
    void setModel(const QString& folder, bool supported);
    void setDataset(const QString& path, const QString& format, bool valid);
    // The Data page's column mapping (dataset key -> the file's column), carried in config().data.columns.
    void setColumns(const QVariantMap& columns);
    void setRunning(bool running);
    void applyPreset(const QString& resourcePath);
    // Whether the cuda device can be chosen (called with system_info's answer; tests call it directly).
    void setGpuAvailable(bool usable, const QString& reason);
    // The machine's GPUs (system_info().gpus: CUDA's index and "GPU i: name, memory"): listed with check boxes to
    // pick the GPUs of a data-parallel run (config().devices, CUDA's indices); hidden with fewer than two (tests call
    // it directly).
    void setGpuList(const std::vector<std::pair<int, QString>>& gpus);
    // Whether precision FP8 can be chosen: "" when this machine's GPU trains in FP8, else why not (called with
    // fp8_unsupported_reason(system_info()) before setGpuAvailable; tests call it directly).
    void setFp8Support(const QString& unsupportedReason);
    // The chosen model's hidden size and context (max_position_embeddings), for the warnings; 0 = unknown.
    void setModelShape(qint64 hiddenSize, qint64 contextLength);
    // The Data page's chat template ("auto" or a built-in name) and "train on prompt tokens too".
    void setRendering(const QString& chatTemplate, bool trainOnAll);
    // The Data page's verdict at the current limits: a problem blocks Train, warnings are shown.
    void setDataCheck(const QString& problem, const QStringList& warnings);

signals:
    void trainRequested(const tandem::RunConfig& config);
    void limitsChanged(int maxSeqLen, int batchTokens, bool packing);
    void runsFolderChanged(const QString& folder);  // addition to the contract: RunsPage::setRunsFolder
    void readinessChanged(const QString& blockedReason);  // "" when Train can be pressed
    void gpuChecked(bool usable, const QString& reason);  // system_info's answer (setGpuAvailable)

private:
    QWidget* buildLoraBox();
    QWidget* buildOptimizerBox();
    QWidget* buildMemoryBox();
    std::vector<int> checkedGpus() const;  // the checked rows' CUDA indices
    // Checks the rows of these CUDA indices ({-1}: all; none of them listed: the first row), then updates the list.
    void checkGpus(const std::vector<int>& devices);
    void updateGpuList();  // visibility, enabled state and the help line of the GPU list
    QWidget* buildValidationBox();
    QWidget* folderRow(QLineEdit* edit, QPushButton* button);
    void updateWarnings();
    void loadPresets();
    void fillFields(const tandem::RunConfig& config);
    void onFieldsChanged();
    void onFieldEdited();  // a user's edit: also leaves the preset
    void validateFields();
    void startEstimate();
    void showEstimate(const tandem::MemoryEstimate& estimate, const QString& error);
    void startLongestContext(const tandem::RunConfig& config);
    void showLongestContext(const QString& text, Tone tone);
    // The base-weights choice as the model allows it (the checkpoint item for a pre-quantized model).
    void updateQuantizationChoice();
    bool modelPrequantized() const;
    // Selects `p` where it can be chosen (bf16 where FP8 is known to be unavailable).
    void selectPrecision(tandem::Precision p);
    // FP8 and 4-bit exclude each other: disables the conflicting item of each combo, with why as its tooltip.
    void updateTrainButton();
    void updateExplanations();
    void chooseRunsFolder();
    void markFields(const QString& message, const QString& shown);
    void clearMarks();

    tandem::RunConfig m_base;  // settings without a widget; model/data/output_dir are set in config()
    QString m_model;
    bool m_modelSupported = false;
    bool m_modelConfirmed = false;  // the Model page reported on m_model
    QString m_dataset;
    QString m_format = QStringLiteral("auto");
    bool m_datasetValid = false;
    bool m_datasetConfirmed = false;
    bool m_running = false;
    bool m_filling = false;  // fields are being set programmatically
    QString m_fieldError;    // validate_run_config's message, empty when the fields are valid
    bool m_estimatePending = false;
    bool m_estimateFits = false;
    QString m_estimateProblem;  // why the estimate blocks training
    quint64 m_estimateGeneration = 0;
    QString m_blockedReason;
    QStringList m_warnings;
    qint64 m_hiddenSize = 0, m_contextLength = 0;
    QString m_dataProblem;
    QStringList m_dataWarnings;
    int m_lastMaxSeqLen = -1, m_lastBatchTokens = -1;
    int m_lastPacking = -1;
    QTimer m_estimateDebounce;

    QComboBox* m_presetCombo = nullptr;
    QLineEdit* m_runsFolderEdit = nullptr;
    QSpinBox* m_rank = nullptr;
    QDoubleSpinBox* m_alpha = nullptr;
    QDoubleSpinBox* m_dropout = nullptr;
    QCheckBox* m_rslora = nullptr;
    QGroupBox* m_targetsBox = nullptr;
    QHash<QString, QCheckBox*> m_targets;  // one box per name any family offers (lora_known_targets)
    QStringList m_modelTargets;            // the shown boxes: the model's LoRA targets (lora_targets), in order
    std::optional<ModelConfig> m_modelConfig;  // the chosen model's config.json, when it parses
    // Shows the boxes of m_modelTargets (in order) and checks those `wanted` selects, resolved against the model
    // (Phi-3: q_proj, k_proj, v_proj -> qkv_proj).
    void showTargets(const std::vector<std::string>& wanted);
    QLineEdit* m_lr = nullptr;
    QComboBox* m_schedule = nullptr;
    QSpinBox* m_warmup = nullptr;
    QSpinBox* m_epochs = nullptr;
    QSpinBox* m_maxSteps = nullptr;
    QSpinBox* m_batchTokens = nullptr;
    QSpinBox* m_gradAccum = nullptr;
    QSpinBox* m_maxSeqLen = nullptr;
    QSpinBox* m_seed = nullptr;
    QComboBox* m_device = nullptr;
    QListWidget* m_gpus = nullptr;   // one checkable row per GPU (RunConfig::devices)
    QLabel* m_gpusHelp = nullptr;
    std::vector<int> m_devices;      // the config's devices while the list is not filled yet
    QCheckBox* m_packing = nullptr;
    QLabel* m_packingHelp = nullptr;
    QComboBox* m_quantization = nullptr;
    QLabel* m_quantizationHelp = nullptr;
    QComboBox* m_precision = nullptr;
    QLabel* m_precisionHelp = nullptr;
    std::optional<QString> m_fp8Unsupported;  // fp8_unsupported_reason's answer ("" = FP8 trains here); none yet
    QComboBox* m_checkpointing = nullptr;
    QDoubleSpinBox* m_hostBudget = nullptr;  // memory.host_budget_gib (0: half of the available RAM)
    QLabel* m_checkpointingHelp = nullptr;
    QDoubleSpinBox* m_checkpointMinutes = nullptr;  // training.checkpoint_minutes
    QSpinBox* m_checkpointEvery = nullptr;          // training.checkpoint_every
    QLineEdit* m_initAdapter = nullptr;
    QLabel* m_initAdapterNote = nullptr;
    QDoubleSpinBox* m_warmupRatio = nullptr;
    QDoubleSpinBox* m_weightDecay = nullptr;
    QDoubleSpinBox* m_maxGradNorm = nullptr;
    QDoubleSpinBox* m_validationShare = nullptr;  // percent of data.validation_fraction
    QLineEdit* m_validationFile = nullptr;
    QSpinBox* m_evalEvery = nullptr;
    QLabel* m_warningsLabel = nullptr;
    QProgressBar* m_memoryBar = nullptr;
    QLabel* m_memoryLabel = nullptr;
    QLabel* m_longestLabel = nullptr;
    QString m_longestKey;  // the settings the longest-sample line is for (shown or computing); "" = none
    quint64 m_longestGeneration = 0;
    QLabel* m_blockedLabel = nullptr;
    QPushButton* m_trainButton = nullptr;
};

}  // namespace tandem::ui
