// SPDX-FileCopyrightText: 2026 The Tandem developers
// SPDX-License-Identifier: GPL-3.0-or-later
// MonitorPage: layout (status and buttons, progress, a 2x2 grid of plots over the log pane in a splitter)
// and the slots that turn session signals into what the user sees.
#include "ui/monitor_page.h"

#include <QCheckBox>
#include <QStringList>
#include <QDateTime>
#include <QDir>
#include <QFileInfo>
#include <QGridLayout>
#include <QHBoxLayout>
#include <QIcon>
#include <QLabel>
#include <QPlainTextEdit>
#include <QProgressBar>
#include <QPushButton>
#include <QSlider>
#include <QSplitter>
#include <QVBoxLayout>

#include <algorithm>
#include <cmath>
#include <string>

#include "tandem/run_config.h"
#include "ui/live_plot.h"
#include "ui/loss_plot.h"
#include "ui/screen_words.h"
#include "ui/status_text.h"
#include "ui/training_session.h"

namespace tandem::ui {

namespace {

constexpr double kMiB = 1024.0 * 1024.0;

QString formatDuration(double seconds) {
    if (!(seconds >= 0) || seconds > 1e8) return QStringLiteral("?");
    const qint64 t = static_cast<qint64>(seconds + 0.5);
    if (t >= 3600) return QStringLiteral("%1h%2m").arg(t / 3600).arg((t / 60) % 60, 2, 10, QLatin1Char('0'));
    return QStringLiteral("%1m%2s").arg(t / 60).arg(t % 60, 2, 10, QLatin1Char('0'));
}

QString str(std::string_view s) { return QString::fromUtf8(s.data(), static_cast<qsizetype>(s.size())); }

}  // namespace

MonitorPage::MonitorPage(QWidget* parent) : QWidget(parent) {
    setObjectName(QStringLiteral("monitorPage"));

    m_status = new QLabel(tr("No run yet: choose a model and a dataset, then press Train."), this);
    m_status->setObjectName(QStringLiteral("statusLabel"));
    m_status->setTextInteractionFlags(Qt::TextSelectableByMouse);
    wrapMessage(m_status);  // a long error grows the label downwards, never the window
    QFont bold = m_status->font();
    bold.setBold(true);
    m_status->setFont(bold);

    m_stop = new QPushButton(QIcon(QStringLiteral(":/icons/stop.svg")), tr("Stop"), this);
    m_stop->setObjectName(QStringLiteral("stopButton"));
    m_stop->setToolTip(tr("Finish the current step, write a checkpoint and stop (Ctrl+.). Resume continues "
                          "from that checkpoint."));
    m_resume = new QPushButton(QIcon(QStringLiteral(":/icons/resume.svg")), tr("Resume"), this);
    m_resume->setObjectName(QStringLiteral("resumeButton"));
    m_resume->setToolTip(tr("Continue the stopped or failed run from its latest checkpoint, with the same "
                            "settings."));
    m_export = new QPushButton(QIcon(QStringLiteral(":/icons/export.svg")), tr("Export…"), this);
    m_export->setObjectName(QStringLiteral("exportButton"));
    m_export->setToolTip(tr("Export the run's LoRA adapter (PEFT format) to a folder: the final adapter, or "
                            "the latest checkpoint of an unfinished run."));
    connect(m_stop, &QPushButton::clicked, this, [this] {
        if (m_state != State::Running && m_state != State::Starting) return;
        showStopping();
        emit stopRequested();
    });
    connect(m_resume, &QPushButton::clicked, this, &MonitorPage::resumeRequested);
    connect(m_export, &QPushButton::clicked, this, [this] { emit exportRequested(m_runDir); });

    auto* top = new QHBoxLayout;
    top->addWidget(m_status, 1);
    top->addWidget(m_stop);
    top->addWidget(m_resume);
    top->addWidget(m_export);

    m_progress = new QProgressBar(this);
    m_progress->setObjectName(QStringLiteral("progressBar"));
    m_progress->setRange(0, 1);
    m_progress->setValue(0);
    m_progress->setFormat(tr("step %v / %m"));
    m_progress->setToolTip(tr("Optimizer steps done out of the run's total"));
    m_eta = new QLabel(this);
    m_eta->setObjectName(QStringLiteral("etaLabel"));
    m_eta->setToolTip(tr("Epoch (fractional), the average step rate since the run started, and the time left "
                         "at that rate"));
    // Wide enough for long runs, so the text never pushes the label out of the window as it changes.
    m_eta->setMinimumWidth(m_eta->fontMetrics().horizontalAdvance(
        QStringLiteral("epoch 000.00 · 0000 steps/s · ETA 000h00m")));
    auto* progressRow = new QHBoxLayout;
    progressRow->addWidget(m_progress, 1);
    progressRow->addWidget(m_eta);

    // Plots.
    m_loss = new LossPlot(this);
    m_loss->setObjectName(QStringLiteral("lossPlot"));
    m_throughput = new LivePlot(tr("Throughput"), this);
    m_throughput->setObjectName(QStringLiteral("throughputPlot"));
    m_throughput->setAxisLabels(tr("step"), tr("steps/s"), tr("tokens/s"));
    m_throughput->addSeries(QStringLiteral("steps_per_s"), tr("steps/s"), 0);
    m_throughput->addSeries(QStringLiteral("tokens_per_s"), tr("tokens/s"), 1, LivePlot::Axis::Right);
    m_throughput->setIncludeZero(true);
    m_memory = new LivePlot(tr("Memory (MiB)"), this);
    m_memory->setObjectName(QStringLiteral("memoryPlot"));
    m_memory->setAxisLabels(tr("step"), tr("MiB"));
    m_memory->addSeries(QStringLiteral("weights"), tr("weights"), 0);
    m_memory->addSeries(QStringLiteral("lora_optimizer"), tr("LoRA + optimizer"), 1);
    m_memory->addSeries(QStringLiteral("activations"), tr("activations"), 2);
    m_memory->addSeries(QStringLiteral("reserved"), tr("reserved"), 3);
    m_memory->addSeries(QStringLiteral("plan"), tr("plan"), 4, LivePlot::Axis::Left, /*dashed=*/true);
    m_memory->addSeries(QStringLiteral("device_total"), tr("device total"), 5, LivePlot::Axis::Left, true);
    m_memory->setIncludeZero(true);
    m_lr = new LivePlot(tr("Learning rate and gradient norm"), this);
    m_lr->setObjectName(QStringLiteral("lrPlot"));
    m_lr->setAxisLabels(tr("step"), tr("learning rate"), tr("grad norm"));
    m_lr->addSeries(QStringLiteral("lr"), tr("learning rate"), 0);
    m_lr->addSeries(QStringLiteral("grad_norm"), tr("grad norm"), 1, LivePlot::Axis::Right);
    m_lr->setIncludeZero(true);

    m_logScale = new QCheckBox(tr("Log scale"), this);
    m_logScale->setObjectName(QStringLiteral("logScaleCheck"));
    m_logScale->setToolTip(tr("Show the loss on a logarithmic axis"));
    connect(m_logScale, &QCheckBox::toggled, m_loss, &LossPlot::setLogScale);
    m_smoothing = new QSlider(Qt::Horizontal, this);
    m_smoothing->setObjectName(QStringLiteral("smoothingSlider"));
    m_smoothing->setRange(0, 99);
    m_smoothing->setValue(static_cast<int>(std::lround(m_loss->smoothing() * 100)));
    m_smoothing->setToolTip(tr("Smoothing of the training loss (exponential moving average weight, as in "
                               "TensorBoard); 0 shows the raw values"));
    m_smoothing->setMaximumWidth(180);
    m_smoothingValue = new QLabel(QString::number(m_smoothing->value() / 100.0, 'f', 2), this);
    connect(m_smoothing, &QSlider::valueChanged, this, [this](int v) {
        m_loss->setSmoothing(v / 100.0);
        m_smoothingValue->setText(QString::number(v / 100.0, 'f', 2));
    });
    auto* lossControls = new QHBoxLayout;
    lossControls->addWidget(m_logScale);
    lossControls->addSpacing(12);
    auto* smoothingLabel = new QLabel(tr("Smoothing"), this);
    smoothingLabel->setToolTip(m_smoothing->toolTip());
    lossControls->addWidget(smoothingLabel);
    lossControls->addWidget(m_smoothing);
    lossControls->addWidget(m_smoothingValue);
    lossControls->addStretch(1);

    auto* lossBox = new QWidget(this);
    auto* lossLayout = new QVBoxLayout(lossBox);
    lossLayout->setContentsMargins(0, 0, 0, 0);
    lossLayout->addLayout(lossControls);
    lossLayout->addWidget(m_loss, 1);

    auto* plots = new QWidget(this);
    auto* grid = new QGridLayout(plots);
    grid->setContentsMargins(0, 0, 0, 0);
    grid->addWidget(lossBox, 0, 0);
    grid->addWidget(m_throughput, 0, 1);
    // Under the memory plot: every GPU of the run with its memory and how busy it is (data parallelism: several).
    m_gpus = new QLabel(this);
    m_gpus->setObjectName(QStringLiteral("gpuLine"));
    m_gpus->setWordWrap(true);
    m_gpus->setToolTip(tr("Memory in use on each GPU of the run (every process's) and the share of the last second "
                          "a kernel ran on it, as nvidia-smi reports it"));
    m_gpus->hide();
    auto* memoryBox = new QWidget(this);
    auto* memoryLayout = new QVBoxLayout(memoryBox);
    memoryLayout->setContentsMargins(0, 0, 0, 0);
    memoryLayout->addWidget(m_memory, 1);
    memoryLayout->addWidget(m_gpus);
    grid->addWidget(memoryBox, 1, 0);
    grid->addWidget(m_lr, 1, 1);
    grid->setColumnStretch(0, 1);
    grid->setColumnStretch(1, 1);
    grid->setRowStretch(0, 1);
    grid->setRowStretch(1, 1);

    m_log = new QPlainTextEdit(this);
    m_log->setObjectName(QStringLiteral("logView"));
    m_log->setReadOnly(true);
    m_log->setMaximumBlockCount(kMaxLogLines);
    m_log->setLineWrapMode(QPlainTextEdit::WidgetWidth);  // a long message wraps instead of hiding its end
    m_log->setToolTip(tr("The engine's events: plan, checkpoints, evaluations, warnings and errors"));
    QFont mono(QStringLiteral("monospace"));
    mono.setStyleHint(QFont::Monospace);
    m_log->setFont(mono);

    auto* splitter = new QSplitter(Qt::Vertical, this);
    splitter->addWidget(plots);
    splitter->addWidget(m_log);
    splitter->setStretchFactor(0, 4);
    splitter->setStretchFactor(1, 1);
    splitter->setChildrenCollapsible(false);

    auto* layout = new QVBoxLayout(this);
    layout->addLayout(top);
    layout->addLayout(progressRow);
    layout->addWidget(splitter, 1);

    updateButtons();
}

void MonitorPage::attach(TrainingSession* session) {
    if (m_session) disconnect(m_session, nullptr, this, nullptr);
    m_session = session;
    if (!session) return;
    connect(session, &TrainingSession::runningChanged, this, [this](bool running) {
        if (running && m_session) showStarting(m_session->runDir());
    });
    connect(session, &TrainingSession::started, this, &MonitorPage::showStarted);
    connect(session, &TrainingSession::stepCompleted, this, &MonitorPage::addStep);
    connect(session, &TrainingSession::event, this, &MonitorPage::addEvent);
    connect(session, &TrainingSession::failed, this, &MonitorPage::showFailed);
    connect(session, &TrainingSession::finished, this, &MonitorPage::showFinished);
    connect(session, &TrainingSession::diverged, this, &MonitorPage::showDiverged);
    if (session->isRunning()) showStarting(session->runDir());
}

void MonitorPage::clearPlots() {
    for (LivePlot* plot : {static_cast<LivePlot*>(m_loss), m_throughput, m_memory, m_lr}) plot->clearData();
    m_rateWindow.clear();
    m_planTotalMiB = 0;
    m_tokensSeen = 0;
    m_earlierSeconds = 0;
    m_bestEvalStep = 0;
}

void MonitorPage::setIdleHint(const QString& blockedReason) {
    if (m_state != State::Idle) return;
    m_status->setText(blockedReason.isEmpty() ? tr("Ready: press Train on the Train page (Ctrl+T).")
                                              : tr("No run yet. %1").arg(blockedReason));
}

QString MonitorPage::runSummaryText() const {
    const double seconds = m_earlierSeconds + m_sessionClock.elapsed() / 1000.0;
    QString text = tr("%1 tokens seen in %2").arg(m_tokensSeen).arg(formatDuration(seconds));
    if (m_bestEvalStep > 0) text += tr(", best eval loss %1 at step %2").arg(m_bestEval, 0, 'f', 4).arg(m_bestEvalStep);
    return text;
}

QString MonitorPage::gpuText(const std::vector<GpuStats>& gpus) {
    QStringList parts;
    for (const GpuStats& g : gpus) {
        QString part = tr("GPU %1: %2 of %3 GiB in use")
                           .arg(g.device)
                           .arg(static_cast<double>(g.used) / (1024.0 * kMiB), 0, 'f', 1)
                           .arg(static_cast<double>(g.total) / (1024.0 * kMiB), 0, 'f', 1);
        part += g.utilization >= 0 ? tr(", %1% busy").arg(g.utilization) : tr(", busy: unknown");
        parts << part;
    }
    return parts.join(QStringLiteral("  ·  "));
}

void MonitorPage::showStarting(const QString& runDir) {
    m_runDir = runDir;
    m_lastStep = 0;
    clearPlots();
    m_sessionClock.start();
    m_progress->setRange(0, 1);
    m_progress->setValue(0);
    m_eta->clear();
    m_gpus->clear();
    m_gpus->hide();
    setState(State::Starting, tr("Starting: loading the model and the data…"));
    appendLog(tr("run folder: %1").arg(QDir::toNativeSeparators(runDir)));
}

void MonitorPage::showStarted(const RunInfo& info) {
    const Plan& p = info.plan;
    if (!info.runDir.isEmpty()) m_runDir = info.runDir;
    clearPlots();
    const bool cpu = p.config.device == DeviceChoice::Cpu;
    m_memory->setTitle(cpu ? tr("Host memory (MiB)") : tr("GPU memory (MiB)"));
    m_planTotalMiB = p.memory.total / kMiB;
    for (const StepMetrics& m : info.history) {
        plotStep(m);
        m_earlierSeconds += m.step_time_s;
    }
    m_lastStep = info.startStep;
    m_progress->setRange(0, static_cast<int>(std::max<int64_t>(p.total_steps, 1)));
    m_progress->setValue(static_cast<int>(info.startStep));
    setState(State::Running, !info.resumed        ? tr("Running")
                             : info.startStep > 0 ? tr("Running (resumed at step %1)").arg(info.startStep)
                                                  : tr("Running (started again: no checkpoint was written)"));
    appendLog(tr("plan: %1, checkpointing %2, %3 steps (%4 per epoch), %5 training samples, %6 trainable "
                 "parameters, memory %7 MiB")
                  .arg(str(device_choice_name(p.config.device)), str(checkpoint_policy_name(p.config.memory.checkpointing)))
                  .arg(p.total_steps)
                  .arg(p.steps_per_epoch)
                  .arg(p.train_samples)
                  .arg(p.trainable_parameters)
                  .arg(p.memory.total / kMiB, 0, 'f', 1));
}

void MonitorPage::plotStep(const StepMetrics& m) {
    const double x = static_cast<double>(m.step);
    m_tokensSeen += m.tokens;
    if (std::isfinite(m.eval_loss) && (m_bestEvalStep == 0 || m.eval_loss < m_bestEval)) {
        m_bestEval = m.eval_loss;
        m_bestEvalStep = m.step;
    }
    m_loss->append(QStringLiteral("train"), x, m.loss);
    if (std::isfinite(m.eval_loss)) m_loss->append(QStringLiteral("eval"), x, m.eval_loss);
    m_rateWindow.emplace_back(m.step_time_s, m.tokens);
    if (m_rateWindow.size() > static_cast<size_t>(kRateWindow)) m_rateWindow.pop_front();
    double seconds = 0, tokens = 0;
    for (const auto& [t, n] : m_rateWindow) {
        seconds += t;
        tokens += static_cast<double>(n);
    }
    if (seconds > 0) {
        m_throughput->append(QStringLiteral("steps_per_s"), x, static_cast<double>(m_rateWindow.size()) / seconds);
        m_throughput->append(QStringLiteral("tokens_per_s"), x, tokens / seconds);
    }
    m_lr->append(QStringLiteral("lr"), x, m.lr);
    m_lr->append(QStringLiteral("grad_norm"), x, m.grad_norm);
    const MemoryStats& mem = m.memory;
    if (!mem.gpus.empty()) {
        m_gpus->setText(gpuText(mem.gpus));
        m_gpus->show();
    }
    if (mem.weights + mem.lora_optimizer + mem.activations == 0) return;  // a history line of an older run
    m_memory->append(QStringLiteral("weights"), x, mem.weights / kMiB);
    m_memory->append(QStringLiteral("lora_optimizer"), x, mem.lora_optimizer / kMiB);
    m_memory->append(QStringLiteral("activations"), x, mem.activations / kMiB);
    if (mem.reserved > 0) m_memory->append(QStringLiteral("reserved"), x, mem.reserved / kMiB);
    if (m_planTotalMiB > 0) m_memory->append(QStringLiteral("plan"), x, m_planTotalMiB);
    if (mem.device_total > 0) m_memory->append(QStringLiteral("device_total"), x, mem.device_total / kMiB);
}

void MonitorPage::addStep(const StepMetrics& m) {
    plotStep(m);
    m_lastStep = m.step;
    if (m.total_steps > 0 && m_progress->maximum() != m.total_steps)
        m_progress->setRange(0, static_cast<int>(m.total_steps));
    m_progress->setValue(static_cast<int>(m.step));
    const double eta = m.steps_per_s > 0 ? static_cast<double>(m.total_steps - m.step) / m.steps_per_s : -1;
    if (m_state == State::Running)  // not after Stop: the run is ending
        m_eta->setText(tr("epoch %1 · %2 steps/s · ETA %3")
                           .arg(m.epoch, 0, 'f', 2)
                           .arg(m.steps_per_s, 0, 'g', 3)
                           .arg(formatDuration(eta)));
    if (std::isfinite(m.eval_loss))
        appendLog(tr("step %1: loss %2, eval loss %3").arg(m.step).arg(m.loss, 0, 'f', 4).arg(m.eval_loss, 0, 'f', 4));
}

void MonitorPage::addEvent(const RunEvent& e) {
    if (e.kind == RunEventKind::Eval) return;  // the step line shows it with the training loss
    appendLog(QStringLiteral("[step %1] %2: %3")
                  .arg(e.step)
                  .arg(str(run_event_kind_name(e.kind)), inScreenWords(QString::fromStdString(e.message))));
}

void MonitorPage::showStopping() {
    if (m_state != State::Running && m_state != State::Starting) return;
    m_eta->clear();
    setState(State::Stopping, tr("Stopping: finishing the current step and writing a checkpoint…"));
}

void MonitorPage::showFailed(const RunFailure& f) {
    m_eta->clear();
    const QString message = inScreenWords(f.message);
    appendLog(tr("error (%1): %2").arg(categoryName(f.category), message));
    QString text = tr("Failed: %1").arg(message);
    if (hasCheckpoint()) text += tr(" — the run folder keeps its latest checkpoint; Resume continues from it.");
    setState(State::Failed, text);
}

void MonitorPage::showFinished(bool stopped) {
    m_eta->clear();  // nothing is left to wait for
    if (stopped) {
        setState(State::Stopped, tr("Stopped at step %1: a checkpoint was written; Resume continues from it.")
                                     .arg(m_lastStep));
    } else {
        m_progress->setValue(m_progress->maximum());
        setState(State::Finished, tr("Finished: the adapter is in %1")
                                      .arg(QDir::toNativeSeparators(m_runDir + QStringLiteral("/adapter"))));
        m_eta->setText(runSummaryText());
    }
}

void MonitorPage::showDiverged(const QString& message) {
    m_eta->clear();
    QString text = inScreenWords(message);
    if (text.startsWith(QLatin1String("training diverged"))) text.replace(0, 17, tr("Diverged"));
    text += tr(" To try again: Runs page, Reopen settings, then a lower Learning rate on the Train page.");
    setState(State::Diverged, text);
}

void MonitorPage::setState(State state, const QString& text) {
    m_state = state;
    m_status->setText(text);
    QPalette pal = palette();
    if (state == State::Failed || state == State::Diverged)
        pal.setColor(QPalette::WindowText, QColor(0xd0, 0x3a, 0x3a));
    m_status->setPalette(pal);
    updateButtons();
}

void MonitorPage::updateButtons() {
    const bool active = m_state == State::Starting || m_state == State::Running || m_state == State::Stopping;
    m_stop->setEnabled(m_state == State::Starting || m_state == State::Running);
    const bool checkpoint = !active && !m_runDir.isEmpty() && hasCheckpoint();
    m_resume->setEnabled((m_state == State::Stopped || m_state == State::Failed) && checkpoint);
    m_export->setEnabled(!active && !m_runDir.isEmpty() &&
                         ((m_state == State::Finished && hasAdapter()) || checkpoint));
}

bool MonitorPage::hasCheckpoint() const {
    try {
        return tandem::latest_checkpoint(m_runDir.toStdString()).has_value();
    } catch (const std::exception&) {
        return false;
    }
}

bool MonitorPage::hasAdapter() const { return QFileInfo::exists(m_runDir + QStringLiteral("/adapter")); }

void MonitorPage::appendLog(const QString& line) {
    m_log->appendPlainText(QDateTime::currentDateTime().toString(QStringLiteral("HH:mm:ss ")) + line);
}

}  // namespace tandem::ui
