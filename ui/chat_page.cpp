// SPDX-FileCopyrightText: 2026 The Tandem developers
// SPDX-License-Identifier: GPL-3.0-or-later
// ChatPage (see chat_page.h): the widgets, the worker thread that owns the ChatSession, and the turn protocol.
// Jobs are lambdas queued to the worker object (it lives on m_thread); results come back as lambdas queued to
// the page (dropped by Qt when the page is gone). Tokens are appended to the pane's answer and the pane is
// redrawn from a 50 ms timer when something arrived (a fast CPU model sends thousands of tokens a second).
// The training run's hold on the GPU (setTrainingRun) is checked on the GUI thread before a turn is posted, so a
// refused turn loads nothing; a GPU session is closed by a job queued after the current one (releaseGpu).
#include "ui/chat_page.h"

#include <QAction>
#include <QApplication>
#include <QCheckBox>
#include <QClipboard>
#include <QComboBox>
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
#include <QPlainTextEdit>
#include <QPushButton>
#include <QScrollBar>
#include <QSpinBox>
#include <QSplitter>
#include <QTextBrowser>
#include <QThread>
#include <QTimer>
#include <QVBoxLayout>

#include <nlohmann/json.hpp>

#include <chrono>
#include <functional>
#include <optional>
#include <thread>

#include "tandem/error.h"
#include "ui/run_scan.h"

namespace tandem::ui {
namespace {

const QString kOther = QStringLiteral("\x01other");
const QString kCudaName = QStringLiteral("CUDA");  // ChatSession::device_name() of a session on the GPU

using Device = tandem::ChatSessionOptions::Device;

std::string utf8(const QString& s) { return s.toStdString(); }
QString qstr(const std::string& s) { return QString::fromStdString(s); }

QString mib(uint64_t bytes) { return QString::number(double(bytes) / (1024.0 * 1024.0), 'f', 1) + QStringLiteral(" MiB"); }

// What a turn's answer came back as, per pane.
struct PaneResult {
    QString text;
    QString stop;
    int tokens = 0;
    double tokensPerSecond = 0, firstToken = 0;
};

}  // namespace

// Lives on the page's thread; only jobs queued to it touch the session.
class ChatWorker : public QObject {
public:
    std::optional<tandem::ChatSession> session;
    QString model;
    QStringList adapters;  // folders added to the session
    Device device = Device::Auto;  // what the session was opened with
};

ChatPage::ChatPage(QWidget* parent) : QWidget(parent) {
    setObjectName(QStringLiteral("chatPage"));
    m_cancel = std::make_shared<std::atomic<bool>>(false);
    m_stepDelay = std::make_shared<std::atomic<int>>(0);
    m_thread = new QThread(this);
    m_thread->setObjectName(QStringLiteral("chatWorkerThread"));
    m_worker = new ChatWorker;
    m_worker->moveToThread(m_thread);
    connect(m_thread, &QThread::finished, m_worker, &QObject::deleteLater);
    m_thread->start();
    buildUi();
    setCompare(false);
    setBusy(false);
}

ChatPage::~ChatPage() {
    m_cancel->store(true);  // the engine stops at the next token
    m_thread->quit();
    m_thread->wait();  // the running job returns, then the worker (and the session) is deleted
}

void ChatPage::buildUi() {
    auto* top = new QHBoxLayout;
    m_model = new QLabel(tr("No model chosen: choose one on the Model page"), this);
    m_model->setObjectName(QStringLiteral("chatModel"));
    m_model->setTextInteractionFlags(Qt::TextSelectableByMouse);
    m_model->setSizePolicy(QSizePolicy::Ignored, QSizePolicy::Preferred);  // a long path must not widen the page
    auto* otherModel = new QPushButton(tr("Other model folder…"), this);
    otherModel->setObjectName(QStringLiteral("chatOtherModel"));
    connect(otherModel, &QPushButton::clicked, this, [this] {
        const QString dir = QFileDialog::getExistingDirectory(this, tr("Model folder"), m_modelPath);
        if (!dir.isEmpty()) setModel(dir);
    });
    m_compare = new QCheckBox(tr("Compare two answers"), this);
    m_compare->setObjectName(QStringLiteral("chatCompare"));
    m_compare->setToolTip(tr("Answer each message twice, e.g. the base model beside a tuned adapter"));
    connect(m_compare, &QCheckBox::toggled, this, &ChatPage::setCompare);
    auto* refresh = new QPushButton(tr("Rescan runs"), this);
    refresh->setObjectName(QStringLiteral("chatRescan"));
    connect(refresh, &QPushButton::clicked, this, &ChatPage::refreshAdapters);
    m_device = new QComboBox(this);
    m_device->setObjectName(QStringLiteral("chatDevice"));
    m_device->addItem(QStringLiteral("auto"), int(Device::Auto));
    m_device->addItem(QStringLiteral("cpu"), int(Device::Cpu));
    m_device->setToolTip(tr("auto: the GPU when one is usable, else the CPU; cpu: slower, leaves the GPU to "
                            "training; cuda: require the GPU"));
    connect(m_device, &QComboBox::currentIndexChanged, this, [this](int) { updateGpuNotice(true); });
    top->addWidget(m_model, 1);
    top->addWidget(otherModel);
    top->addWidget(new QLabel(tr("Device"), this));
    top->addWidget(m_device);
    top->addWidget(refresh);
    top->addWidget(m_compare);

    auto* panes = new QSplitter(Qt::Horizontal, this);
    for (int p = 0; p < 2; ++p) {
        Pane& pane = m_panes[p];
        auto* box = new QWidget(panes);
        auto* v = new QVBoxLayout(box);
        v->setContentsMargins(0, 0, 0, 0);
        pane.adapter = new QComboBox(box);
        pane.adapter->setObjectName(p == 0 ? QStringLiteral("chatAdapterA") : QStringLiteral("chatAdapterB"));
        pane.adapter->setToolTip(tr("The adapter this pane answers with"));
        connect(pane.adapter, &QComboBox::currentIndexChanged, this, [this, p](int) { onAdapterIndexChanged(p); });
        pane.view = new QTextBrowser(box);
        pane.view->setObjectName(p == 0 ? QStringLiteral("chatPaneA") : QStringLiteral("chatPaneB"));
        pane.view->setOpenLinks(false);
        pane.stats = new QLabel(box);
        pane.stats->setObjectName(p == 0 ? QStringLiteral("chatStatsA") : QStringLiteral("chatStatsB"));
        v->addWidget(pane.adapter);
        v->addWidget(pane.view, 1);
        v->addWidget(pane.stats);
        panes->addWidget(box);
        fillAdapterBox(pane.adapter);
    }

    auto* settings = new QGroupBox(tr("Settings"), this);
    auto* form = new QFormLayout(settings);
    m_system = new QPlainTextEdit(settings);
    m_system->setObjectName(QStringLiteral("chatSystem"));
    m_system->setPlaceholderText(tr("System prompt (optional)"));
    m_system->setMaximumHeight(70);
    form->addRow(tr("System"), m_system);
    auto dspin = [&](const char* name, double lo, double hi, double step, int decimals, const QString& tip) {
        auto* s = new QDoubleSpinBox(settings);
        s->setObjectName(QLatin1String(name));
        s->setRange(lo, hi);
        s->setSingleStep(step);
        s->setDecimals(decimals);
        s->setToolTip(tip);
        return s;
    };
    m_temperature = dspin("chatTemperature", 0.0, 5.0, 0.1, 2, tr("0 answers greedily (always the most likely token)"));
    m_topK = new QSpinBox(settings);
    m_topK->setObjectName(QStringLiteral("chatTopK"));
    m_topK->setRange(0, 100000);
    m_topK->setToolTip(tr("Keep the k most likely tokens (0: all)"));
    m_topP = dspin("chatTopP", 0.01, 1.0, 0.05, 2, tr("Keep the most likely tokens that make up this much probability"));
    m_minP = dspin("chatMinP", 0.0, 1.0, 0.01, 3, tr("Drop tokens less likely than this fraction of the most likely one"));
    m_repetition = dspin("chatRepetitionPenalty", 0.5, 3.0, 0.05, 2, tr("Above 1 discourages repeating tokens"));
    m_maxTokens = new QSpinBox(settings);
    m_maxTokens->setObjectName(QStringLiteral("chatMaxTokens"));
    m_maxTokens->setRange(1, 32768);
    m_seed = new QSpinBox(settings);
    m_seed->setObjectName(QStringLiteral("chatSeed"));
    m_seed->setRange(0, 1 << 30);
    auto* sampling = new QGridLayout;  // two rows, so the page fits a narrow window
    int cell = 0;
    for (auto [label, w] : {std::pair{tr("Temperature"), static_cast<QWidget*>(m_temperature)},
                            std::pair{tr("Top-k"), static_cast<QWidget*>(m_topK)},
                            std::pair{tr("Top-p"), static_cast<QWidget*>(m_topP)},
                            std::pair{tr("Min-p"), static_cast<QWidget*>(m_minP)},
                            std::pair{tr("Repetition"), static_cast<QWidget*>(m_repetition)},
                            std::pair{tr("Max tokens"), static_cast<QWidget*>(m_maxTokens)},
                            std::pair{tr("Seed"), static_cast<QWidget*>(m_seed)}}) {
        sampling->addWidget(new QLabel(label, settings), cell / 4, (cell % 4) * 2);
        sampling->addWidget(w, cell / 4, (cell % 4) * 2 + 1);
        ++cell;
    }
    sampling->setColumnStretch(8, 1);
    form->addRow(tr("Sampling"), sampling);
    applyDefaults(tandem::GenerationDefaults{});

    m_input = new QPlainTextEdit(this);
    m_input->setObjectName(QStringLiteral("chatInput"));
    m_input->setPlaceholderText(tr("Your message (Ctrl+Enter sends)"));
    m_input->setMaximumHeight(90);
    auto* sendShortcut = new QAction(m_input);
    sendShortcut->setShortcut(QKeySequence(Qt::CTRL | Qt::Key_Return));
    sendShortcut->setShortcutContext(Qt::WidgetShortcut);
    connect(sendShortcut, &QAction::triggered, this, &ChatPage::send);
    m_input->addAction(sendShortcut);
    auto button = [&](const char* name, const QString& text, const QString& tip, auto slot) {
        auto* b = new QPushButton(text, this);
        b->setObjectName(QLatin1String(name));
        b->setToolTip(tip);
        connect(b, &QPushButton::clicked, this, slot);
        return b;
    };
    m_send = button("chatSend", tr("Send"), tr("Send the message (Ctrl+Enter)"), [this] { send(); });
    m_stop = button("chatStop", tr("Stop"), tr("Stop the answer now"), [this] { stop(); });
    m_clear = button("chatClear", tr("Clear"), tr("Start a new conversation"), [this] { clear(); });
    m_copy = button("chatCopy", tr("Copy"), tr("Copy the conversation as text"), [this] { copyConversation(); });
    m_save = button("chatSaveDataset", tr("Save to dataset…"),
                    tr("Append this conversation (the left pane) to a JSONL chat dataset, to train on it"), [this] {
                        const QString file = QFileDialog::getSaveFileName(this, tr("Append to dataset"), QString(),
                                                                          tr("JSON Lines (*.jsonl)"));
                        if (!file.isEmpty()) saveConversation(file);
                    });
    auto* buttons = new QHBoxLayout;
    for (QPushButton* b : {m_send, m_stop, m_clear, m_copy, m_save}) buttons->addWidget(b);
    buttons->addStretch(1);
    m_status = new QLabel(this);
    m_status->setObjectName(QStringLiteral("chatStatus"));
    m_status->setWordWrap(true);
    m_status->setTextInteractionFlags(Qt::TextSelectableByMouse);
    m_onCpu = button("chatOnCpu", tr("Chat on the CPU"),
                     tr("Load the model on the CPU and send the message there: slower, and the training run keeps "
                        "the GPU"),
                     [this] { chatOnCpu(); });
    m_onCpu->setVisible(false);
    auto* statusRow = new QHBoxLayout;
    statusRow->addWidget(m_status, 1);
    statusRow->addWidget(m_onCpu, 0, Qt::AlignTop);

    auto* layout = new QVBoxLayout(this);
    layout->addLayout(top);
    layout->addWidget(panes, 1);
    layout->addWidget(settings);
    layout->addWidget(m_input);
    layout->addLayout(buttons);
    layout->addLayout(statusRow);

    auto* redraw = new QTimer(this);
    redraw->setInterval(50);
    connect(redraw, &QTimer::timeout, this, [this] {
        for (int p = 0; p < 2; ++p)
            if (m_panes[p].answering) render(p);
    });
    redraw->start();
}

void ChatPage::applyDefaults(const tandem::GenerationDefaults& g) {
    m_temperature->setValue(g.sampling.temperature);
    m_topK->setValue(g.sampling.top_k);
    m_topP->setValue(g.sampling.top_p);
    m_minP->setValue(g.sampling.min_p);
    m_repetition->setValue(g.sampling.repetition_penalty);
    m_maxTokens->setValue(g.max_new_tokens);
    m_seed->setValue(int(g.sampling.seed));
}

tandem::SamplingOptions ChatPage::sampling() const {
    tandem::SamplingOptions s;
    s.temperature = m_temperature->value();
    s.top_k = m_topK->value();
    s.top_p = m_topP->value();
    s.min_p = m_minP->value();
    s.repetition_penalty = m_repetition->value();
    s.seed = uint64_t(m_seed->value());
    return s;
}

void ChatPage::setModel(const QString& folder) {
    if (folder == m_modelPath) return;
    m_modelPath = folder;
    m_model->setText(folder.isEmpty() ? tr("No model chosen: choose one on the Model page")
                                      : tr("Model: %1").arg(QDir::toNativeSeparators(folder)));
    m_model->setToolTip(folder);
    clear();
    refreshAdapters();
    if (folder.isEmpty()) return;
    // The sampling defaults come from the model's generation_config.json, read off the GUI thread.
    QPointer<ChatPage> self(this);
    const std::string dir = utf8(folder);
    QMetaObject::invokeMethod(m_worker, [self, dir, folder] {
        const tandem::GenerationDefaults g = tandem::load_generation_defaults(dir);
        QMetaObject::invokeMethod(self.data(), [self, g, folder] {
            if (!self || self->m_modelPath != folder) return;
            self->applyDefaults(g);
            self->m_defaultsFor = folder;
            if (!g.note.empty()) self->showStatus(qstr(g.note));
        }, Qt::QueuedConnection);
    }, Qt::QueuedConnection);
}

void ChatPage::setRunsFolder(const QString& folder) {
    m_runsFolder = folder;
    refreshAdapters();
}

void ChatPage::addAdapterChoice(QComboBox* box, const QString& label, const QString& folder) {
    if (box->findData(folder) >= 0) return;
    box->insertItem(box->count() - 1, label, folder);  // before "Other adapter folder…"
    box->setItemData(box->count() - 2, QDir::toNativeSeparators(folder), Qt::ToolTipRole);
}

void ChatPage::fillAdapterBox(QComboBox* box) {
    m_filling = true;
    const QString keep = box->currentData().toString();
    box->clear();
    box->addItem(tr("Base model (no adapter)"), QString());
    box->addItem(tr("Other adapter folder…"), kOther);
    if (!m_runsFolder.isEmpty())
        for (const RunEntry& r : scanRunsFolder(m_runsFolder))
            if (r.hasAdapter) addAdapterChoice(box, tr("Run %1").arg(r.name), QDir(r.dir).filePath(QStringLiteral("adapter")));
    for (const QString& f : m_extraAdapters) addAdapterChoice(box, QFileInfo(f).fileName(), f);
    const int at = box->findData(keep);
    box->setCurrentIndex(at >= 0 && keep != kOther ? at : 0);
    m_filling = false;
}

void ChatPage::refreshAdapters() {
    for (Pane& p : m_panes) fillAdapterBox(p.adapter);
}

void ChatPage::onAdapterIndexChanged(int pane) {
    if (m_filling) return;
    if (m_panes[pane].adapter->currentData().toString() == kOther) chooseOtherFolder(pane);
}

void ChatPage::chooseOtherFolder(int pane) {
    const QString dir = QFileDialog::getExistingDirectory(this, tr("Adapter folder (adapter_config.json)"));
    if (dir.isEmpty()) {
        m_panes[pane].adapter->setCurrentIndex(0);
        return;
    }
    setAdapterFolder(pane, dir);
}

void ChatPage::setAdapterFolder(int pane, const QString& folder) {
    if (folder.isEmpty()) {
        m_panes[pane].adapter->setCurrentIndex(0);
        return;
    }
    if (!m_extraAdapters.contains(folder)) m_extraAdapters << folder;
    for (Pane& p : m_panes) {
        m_filling = true;
        addAdapterChoice(p.adapter, QFileInfo(folder).fileName(), folder);
        m_filling = false;
    }
    m_filling = true;
    m_panes[pane].adapter->setCurrentIndex(m_panes[pane].adapter->findData(folder));
    m_filling = false;
}

QString ChatPage::adapterOf(int pane) const {
    const QString d = m_panes[pane].adapter->currentData().toString();
    return d == kOther ? QString() : d;
}

void ChatPage::setCompare(bool on) {
    if (m_compare->isChecked() != on) m_compare->setChecked(on);
    m_panes[1].adapter->parentWidget()->setVisible(on);
    // Comparing base with base says nothing: the second pane starts on the newest run's adapter.
    if (on && m_panes[1].adapter->currentIndex() == 0 && m_panes[1].adapter->count() > 2) {
        m_filling = true;
        m_panes[1].adapter->setCurrentIndex(1);
        m_filling = false;
    }
}

std::vector<tandem::ChatMessage> ChatPage::conversation(int pane) const {
    std::vector<tandem::ChatMessage> c;
    const QString sys = m_system->toPlainText().trimmed();
    if (!sys.isEmpty()) c.push_back({"system", utf8(sys)});
    for (const auto& t : m_panes[pane].turns) c.push_back(t);
    return c;
}

void ChatPage::render(int pane) {
    Pane& p = m_panes[pane];
    QString html;
    auto block = [&](const QString& who, const QString& text, const char* color) {
        html += QStringLiteral("<p><b style=\"color:%1\">%2</b><br>%3</p>")
                    .arg(QLatin1String(color), who, text.toHtmlEscaped().replace(QLatin1Char('\n'), QStringLiteral("<br>")));
    };
    for (const auto& t : p.turns)
        block(t.role == "user" ? tr("You") : tr("Model"), qstr(t.content), t.role == "user" ? "#2a6fb0" : "#3a8a3a");
    if (p.answering) block(tr("Model"), p.streaming + QStringLiteral(" ▍"), "#3a8a3a");
    p.view->setHtml(html);
    p.view->verticalScrollBar()->setValue(p.view->verticalScrollBar()->maximum());
}

void ChatPage::setBusy(bool busy) {
    m_busy = busy;
    m_send->setEnabled(!busy);
    m_stop->setEnabled(busy);
    m_clear->setEnabled(!busy);
    m_save->setEnabled(!busy);
    m_compare->setEnabled(!busy);
    m_device->setEnabled(!busy);
    m_onCpu->setEnabled(!busy);
    for (Pane& p : m_panes) p.adapter->setEnabled(!busy);
    emit busyChanged(busy);
}

void ChatPage::showStatus(const QString& text, bool error) {
    m_status->setText(text);
    m_status->setStyleSheet(error ? QStringLiteral("color: #b00020;") : QString());
}

void ChatPage::setStepDelayForTesting(int ms) { m_stepDelay->store(ms); }

Device ChatPage::device() const { return Device(m_device->currentData().toInt()); }

void ChatPage::setDevice(Device device) {
    const int at = m_device->findData(int(device));
    if (at >= 0) m_device->setCurrentIndex(at);
}

void ChatPage::setGpuAvailable(bool usable, const QString& reason) {
    m_gpuUsable = usable;
    const int cuda = m_device->findData(int(Device::Cuda));
    const QString tip = tr("auto: the GPU when one is usable, else the CPU; cpu: slower, leaves the GPU to training; "
                           "cuda: require the GPU");
    if (usable) {
        if (cuda < 0) m_device->addItem(QStringLiteral("cuda"), int(Device::Cuda));
        m_device->setToolTip(tip);
    } else {
        m_device->setToolTip(tip + tr(". cuda is not offered: %1").arg(reason.isEmpty() ? tr("no usable GPU") : reason));
        if (cuda >= 0) {
            if (m_device->currentIndex() == cuda) m_device->setCurrentIndex(0);  // auto: the CPU here
            m_device->removeItem(cuda);
        }
    }
    updateGpuNotice(false);
}

bool ChatPage::trainingHoldsGpu() const {
    return m_runActive &&
           (m_runDevice == tandem::DeviceChoice::Cuda || (m_runDevice == tandem::DeviceChoice::Auto && m_gpuUsable));
}

bool ChatPage::wouldUseGpu(Device device) const {
    // A run on the GPU means a GPU is usable, whatever system_info has said so far.
    return device == Device::Cuda ||
           (device == Device::Auto && (m_gpuUsable || (m_runActive && m_runDevice == tandem::DeviceChoice::Cuda)));
}

// The status line and "Chat on the CPU" while a training run holds the GPU and the device box points at it.
// announce: say it now unless it is said already (a run started, the device box changed); otherwise only take
// back what this said when it no longer applies.
void ChatPage::updateGpuNotice(bool announce) {
    const bool blocked = trainingHoldsGpu() && wouldUseGpu(device());
    m_onCpu->setVisible(blocked);
    if (blocked && announce && !m_gpuNotice) {
        showStatus(tr("A training run is using the GPU: chat on the CPU, or wait for the run to finish."));
        m_gpuNotice = true;
    } else if (!blocked && m_gpuNotice) {
        showStatus(m_runActive || !wouldUseGpu(device()) ? QString()
                                                         : tr("The training run has ended: the chat can use the GPU again."));
        m_gpuNotice = false;
    }
}

void ChatPage::setTrainingRun(bool running, tandem::DeviceChoice device) {
    const bool held = trainingHoldsGpu();
    m_runActive = running;
    m_runDevice = running ? device : tandem::DeviceChoice::Cpu;
    if (trainingHoldsGpu() && m_gpuSession && !m_releasing) releaseGpu();
    if (!m_releasing) updateGpuNotice(trainingHoldsGpu() && !held);
}

// Closes the session if it is on the GPU (see the header comment: closed rather than kept, so the run cannot fail
// with out of memory because of the chat). A turn answering now stops at its next token and keeps what it said;
// the close is queued after it on the worker, and the memory is given back before gpuReleased.
void ChatPage::releaseGpu() {
    m_releasing = true;
    m_cancel->store(true);
    QPointer<ChatPage> self(this);
    ChatWorker* w = m_worker;
    QMetaObject::invokeMethod(w, [self, w] {
        bool closed = false;
        if (w->session && qstr(w->session->device_name()) != QStringLiteral("CPU")) {
            w->session.reset();
            w->adapters.clear();
            w->model.clear();
            closed = true;
        }
        QMetaObject::invokeMethod(self.data(), [self, closed] {
            if (!self) return;
            ChatPage& page = *self;
            page.m_releasing = false;
            if (page.m_sessionDevice != QLatin1String("CPU")) page.m_sessionDevice.clear();
            page.m_gpuSession = false;
            if (closed) {
                page.showStatus(tr("A training run is using the GPU: the chat's model was closed to leave the run its "
                                   "memory. The conversation is kept: chat on the CPU, or wait for the run to finish."));
                page.m_gpuNotice = true;
            }
            page.updateGpuNotice(!closed && page.trainingHoldsGpu());
            emit page.gpuReleased();
        }, Qt::QueuedConnection);
    }, Qt::QueuedConnection);
}

void ChatPage::chatOnCpu() {
    if (m_busy) return;
    setDevice(Device::Cpu);
    if (m_input->toPlainText().trimmed().isEmpty()) {
        showStatus(tr("The chat runs on the CPU now: type a message and send it."));
        return;
    }
    send();
}

void ChatPage::send() {
    if (m_busy) return;
    const QString text = m_input->toPlainText().trimmed();
    if (text.isEmpty()) return;
    if (m_modelPath.isEmpty()) {
        showStatus(tr("Choose a model on the Model page first."), true);
        return;
    }
    const Device device = this->device();
    if (trainingHoldsGpu() && wouldUseGpu(device)) {
        // Refused before anything is loaded: the message stays in the input box for "Chat on the CPU".
        const QString msg = tr("A training run is using the GPU, and this chat would load the model there too. Wait "
                               "for the run to finish or stop it (Monitor page), or chat on the CPU (slower; the run "
                               "keeps the GPU).");
        showStatus(msg, true);
        m_gpuNotice = true;
        m_onCpu->setVisible(true);
        emit failed(msg);
        return;
    }
    const int panes = m_compare->isChecked() ? 2 : 1;
    std::vector<tandem::GenerationRequest> reqs;
    QStringList adapters;
    for (int p = 0; p < panes; ++p) {
        Pane& pane = m_panes[p];
        pane.turns.push_back({"user", utf8(text)});
        tandem::GenerationRequest r;
        r.adapter = utf8(adapterOf(p));
        r.messages = conversation(p);
        r.sampling = sampling();
        r.max_new_tokens = m_maxTokens->value();
        reqs.push_back(std::move(r));
        adapters << adapterOf(p);
        pane.streaming.clear();
        pane.answering = true;
        pane.stats->clear();
        render(p);
    }
    m_input->clear();
    m_cancel->store(false);
    setBusy(true);
    m_gpuNotice = false;
    m_onCpu->setVisible(false);
    showStatus(tr("Answering…"));
    m_gpuSession = wouldUseGpu(device);  // until the worker says where the session is

    QPointer<ChatPage> self(this);
    ChatWorker* w = m_worker;
    const QString model = m_modelPath;
    auto cancel = m_cancel;
    auto delay = m_stepDelay;
    QMetaObject::invokeMethod(w, [self, w, model, device, adapters, reqs, cancel, delay] {
        // On the worker thread: open (or keep) the session, add missing adapters, generate.
        auto post = [self](auto fn) {
            QMetaObject::invokeMethod(self.data(), [self, fn] { if (self) fn(*self); }, Qt::QueuedConnection);
        };
        struct Sink final : tandem::GenerationSink {
            std::function<void(int, QString)> token;
            std::shared_ptr<std::atomic<int>> delay;
            void on_token(int r, int32_t, std::string_view t) override {
                if (const int ms = delay->load()) std::this_thread::sleep_for(std::chrono::milliseconds(ms));
                if (!t.empty()) token(r, QString::fromUtf8(t.data(), qsizetype(t.size())));
            }
        } sink;
        sink.delay = delay;
        sink.token = [post](int r, QString t) {
            post([r, t](ChatPage& page) {
                page.m_panes[r].streaming += t;
                emit page.tokenReceived(r, t);
            });
        };
        try {
            if (!w->session || w->model != model || w->device != device) {
                w->session.reset();  // before the next one loads: never two models in memory
                w->adapters.clear();
                tandem::ChatSessionOptions o;
                o.model_dir = utf8(model);
                o.max_sequences = 2;
                o.device = device;
                w->session.emplace(tandem::ChatSession::open(o));
                w->model = model;
                w->device = device;
            }
            for (const QString& a : adapters)
                if (!a.isEmpty() && !w->adapters.contains(a)) {
                    w->session->add_adapter({utf8(a), utf8(a)});
                    w->adapters << a;
                }
            const std::vector<tandem::GenerationResult> res = w->session->generate(reqs, &sink, cancel.get());
            std::vector<PaneResult> out;
            for (const auto& r : res)
                out.push_back({qstr(r.text), QLatin1String(tandem::stop_reason_name(r.stop)), int(r.ids.size()),
                               r.tokens_per_second(), r.first_token_seconds});
            const tandem::ChatMemory mem = w->session->memory();
            post([out, mem, where = qstr(w->session->device_name())](ChatPage& page) {
                page.m_sessionDevice = where;
                if (!page.m_releasing) page.m_gpuSession = where == kCudaName;
                for (size_t p = 0; p < out.size(); ++p) {
                    Pane& pane = page.m_panes[p];
                    pane.answering = false;
                    pane.turns.push_back({"assistant", utf8(out[p].text)});
                    pane.streaming.clear();
                    pane.stats->setText(tr("%1 tokens · %2 tokens/s · first token after %3 s · %4")
                                            .arg(out[p].tokens)
                                            .arg(out[p].tokensPerSecond, 0, 'f', 1)
                                            .arg(out[p].firstToken, 0, 'f', 2)
                                            .arg(out[p].stop == QLatin1String("cancelled") ? tr("stopped") : out[p].stop));
                    page.render(int(p));
                }
                page.showStatus(tr("%1 · weights %2, KV cache %3, adapters %4")
                                    .arg(where, mib(mem.weights), mib(mem.kv_cache), mib(mem.adapters)));
                page.setBusy(false);
                emit page.turnFinished();
            });
        } catch (const std::exception& e) {
            const QString msg = QString::fromUtf8(e.what());
            const QString where = w->session ? qstr(w->session->device_name()) : QString();
            post([msg, where](ChatPage& page) {
                page.m_sessionDevice = where;
                if (!page.m_releasing) page.m_gpuSession = where == kCudaName;
                for (Pane& pane : page.m_panes)
                    if (pane.answering) {  // the turn did not happen: take the user message back
                        pane.answering = false;
                        if (!pane.turns.empty() && pane.turns.back().role == "user") {
                            if (&pane == &page.m_panes[0] && page.m_input->toPlainText().isEmpty())
                                page.m_input->setPlainText(qstr(pane.turns.back().content));
                            pane.turns.pop_back();
                        }
                        page.render(int(&pane - page.m_panes));
                    }
                page.showStatus(msg, true);
                page.setBusy(false);
                emit page.failed(msg);
                emit page.turnFinished();
            });
        }
    }, Qt::QueuedConnection);
}

void ChatPage::stop() {
    if (m_busy) m_cancel->store(true);
}

void ChatPage::clear() {
    if (m_busy) return;
    for (int p = 0; p < 2; ++p) {
        m_panes[p].turns.clear();
        m_panes[p].streaming.clear();
        m_panes[p].stats->clear();
        render(p);
    }
}

void ChatPage::copyConversation() {
    QString text;
    const int panes = m_compare->isChecked() ? 2 : 1;
    for (int p = 0; p < panes; ++p) {
        if (panes == 2) {
            const QString a = adapterOf(p);
            text += QStringLiteral("== %1 ==\n").arg(a.isEmpty() ? tr("base model") : a);
        }
        for (const auto& m : conversation(p))
            text += qstr(m.role) + QStringLiteral(": ") + qstr(m.content) + QStringLiteral("\n\n");
    }
    QApplication::clipboard()->setText(text);
}

bool ChatPage::saveConversation(const QString& file) {
    const auto conv = conversation(0);
    if (m_panes[0].turns.empty()) {
        showStatus(tr("Nothing to save yet: the conversation is empty."), true);
        return false;
    }
    nlohmann::json msgs = nlohmann::json::array();
    for (const auto& m : conv) msgs.push_back({{"role", m.role}, {"content", m.content}});
    const std::string line = nlohmann::json{{"messages", msgs}}.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
    QFile f(file);
    if (!f.open(QIODevice::Append | QIODevice::Text)) {
        showStatus(tr("Could not write %1: %2").arg(QDir::toNativeSeparators(file), f.errorString()), true);
        return false;
    }
    f.write(QByteArray::fromStdString(line));
    f.write("\n");
    f.close();
    showStatus(tr("Appended the conversation to %1").arg(QDir::toNativeSeparators(file)));
    return true;
}

}  // namespace tandem::ui
