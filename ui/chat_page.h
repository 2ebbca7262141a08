// SPDX-FileCopyrightText: 2026 The Tandem developers
// SPDX-License-Identifier: GPL-3.0-or-later
// tandem::ui::ChatPage — try the model: a chat with the current model (or another folder) and its adapters,
// in one pane or two panes answering the same prompt (base vs tuned, or two runs), streaming.
// Decisions a reader must know:
//  - The GUI thread never calls the engine. A ChatWorker lives on the page's own QThread and owns the
//    tandem::ChatSession (opened there, kept between turns: the base loads once, adapters are added to it
//    by folder, and each turn prefills only its new tokens). The page posts jobs to it and gets tokens,
//    results and errors back as queued signals. Stop sets an atomic flag the engine checks between tokens.
//    Destroying the page sets the flag, quits the thread and waits for it.
//  - Each pane keeps its own conversation (user turns are shared, answers differ) until Clear. A turn sends
//    the system prompt, the pane's history and the new user message; the two panes run as one generate()
//    call (two sequences, their adapters taking turns per token).
//  - Adapters are named by folder: the runs folder's runs that wrote adapter/, or any folder chosen with
//    "Other adapter folder…". A bad one (another base, wrong shapes) fails with the engine's message, which
//    names the file; the session and the conversation are kept.
//  - Sampling settings start from the model's generation_config.json (greedy when it has none).
//  - "Save to dataset" appends the conversation of pane A as one JSONL line {"messages": [...]} (the chat
//    format the Data page reads), so a corrected answer becomes training data.
//  - Device (the box beside the model): auto (the GPU when one is usable, else the CPU), cpu, or cuda (offered
//    once system_info says a GPU is usable: setGpuAvailable). Changing it reopens the session at the next turn;
//    the conversation is kept (the new session prefills it).
//  - The GPU belongs to a training run while one trains there (setTrainingRun, from the main window: the run's
//    device as asked until it has loaded, then as resolved). A turn that would load on the GPU (auto with a
//    usable GPU, or cuda) is refused before anything is loaded, in the status line, with "Chat on the CPU"
//    beside it (the device box to cpu, then the turn). A CPU chat during a GPU run, and any chat during a CPU
//    run, go on as usual.
//  - A GPU session already open when a GPU run starts is closed (the conversation is kept), not kept working
//    beside the run: the run plans its memory from what is free when it loads, and a kept session can still
//    allocate while it answers (an adapter added, its CUDA graphs, the engine's per-thread workspace on the
//    worker's first turn), which could make the run fail with out of memory mid-run. Closing it gives the run
//    everything it planned for. The main window starts a GPU run only after gpuReleased, so the run's plan
//    sees that memory free (releasingGpu says it waits).
//  - Not done: sharing the frozen base weights with a run of the same model. The run's model and the chat's
//    are separate engine objects with their own copies; a chat during a GPU run runs on the CPU.
#pragma once

#include <QPointer>
#include <QString>
#include <QStringList>
#include <QWidget>

#include <atomic>
#include <memory>
#include <vector>

#include "tandem/chat.h"
#include "tandem/run_config.h"
#include "tandem/system_info.h"

class QCheckBox;
class QComboBox;
class QDoubleSpinBox;
class QLabel;
class QPlainTextEdit;
class QPushButton;
class QSpinBox;
class QTextBrowser;
class QThread;

namespace tandem::ui {

class ChatWorker;

class ChatPage : public QWidget {
    Q_OBJECT
    Q_DISABLE_COPY_MOVE(ChatPage)

public:
    explicit ChatPage(QWidget* parent = nullptr);
    ~ChatPage() override;

    QString modelPath() const { return m_modelPath; }
    bool isBusy() const { return m_busy; }
    // The adapter folder of pane 0 / 1 ("" : the base model).
    QString adapterOf(int pane) const;
    // The conversation of a pane (system prompt first when set), as the engine gets it.
    std::vector<tandem::ChatMessage> conversation(int pane) const;
    // The device box: where the next session loads.
    tandem::ChatSessionOptions::Device device() const;
    // The open session's device as the engine names it ("CPU", "CUDA"), "" when none is open.
    QString sessionDevice() const { return m_sessionDevice; }
    // Whether the chat's session holds GPU memory, or may be loading into it.
    bool holdsGpu() const { return m_gpuSession; }
    // Whether a training run trains (or is loading) on the GPU now.
    bool trainingHoldsGpu() const;
    // A GPU session is being closed for a training run: gpuReleased follows.
    bool releasingGpu() const { return m_releasing; }

public slots:
    void setModel(const QString& folder);     // the Model page's current model
    void setRunsFolder(const QString& folder);
    void refreshAdapters();                   // rescan the runs folder
    void setAdapterFolder(int pane, const QString& folder);  // choose a folder as the pane's adapter
    void setCompare(bool on);
    void send();                              // the input box's text as the next user turn
    void stop();
    void clear();
    void copyConversation();
    bool saveConversation(const QString& file);  // appends pane A's conversation as one JSONL line
    void setStepDelayForTesting(int ms);      // slows each token (widget tests of Stop)
    void setDevice(tandem::ChatSessionOptions::Device device);
    // Whether a GPU is usable (system_info's answer, TrainPage::gpuChecked; tests call it directly): cuda is
    // offered, and auto means the GPU.
    void setGpuAvailable(bool usable, const QString& reason);
    // A training run started (running, on `device`: as asked until it has loaded, then as resolved) or ended.
    // A run on the GPU refuses GPU turns and closes a GPU session (see the header comment); tests call it
    // directly to pretend a run holds the GPU.
    void setTrainingRun(bool running, tandem::DeviceChoice device = tandem::DeviceChoice::Cpu);
    void chatOnCpu();                         // the device box to cpu, then the message in the input box

signals:
    void busyChanged(bool busy);
    void tokenReceived(int pane, const QString& text);
    void turnFinished();                      // every pane's answer is complete (or stopped, or failed)
    void failed(const QString& message);      // a turn failed, or was refused (then no turnFinished)
    void gpuReleased();                       // the GPU session closed for a training run (releasingGpu)

private:
    void buildUi();
    void addAdapterChoice(QComboBox* box, const QString& label, const QString& folder);
    void fillAdapterBox(QComboBox* box);
    void chooseOtherFolder(int pane);
    void onAdapterIndexChanged(int pane);
    void render(int pane);
    void setBusy(bool busy);
    void applyDefaults(const tandem::GenerationDefaults& g);
    tandem::SamplingOptions sampling() const;
    void showStatus(const QString& text, bool error = false);
    bool wouldUseGpu(tandem::ChatSessionOptions::Device device) const;
    void updateGpuNotice(bool announce);
    void releaseGpu();

    struct Pane {
        QComboBox* adapter = nullptr;
        QTextBrowser* view = nullptr;
        QLabel* stats = nullptr;
        std::vector<tandem::ChatMessage> turns;  // user / assistant, without the system prompt
        QString streaming;                       // the answer arriving now
        bool answering = false;
    };

    QString m_modelPath, m_runsFolder;
    QStringList m_extraAdapters;  // folders chosen with "Other adapter folder…"
    Pane m_panes[2];
    QLabel* m_model = nullptr;
    QCheckBox* m_compare = nullptr;
    QComboBox* m_device = nullptr;
    QPlainTextEdit* m_system = nullptr;
    QPlainTextEdit* m_input = nullptr;
    QDoubleSpinBox* m_temperature = nullptr;
    QSpinBox* m_topK = nullptr;
    QDoubleSpinBox* m_topP = nullptr;
    QDoubleSpinBox* m_minP = nullptr;
    QDoubleSpinBox* m_repetition = nullptr;
    QSpinBox* m_maxTokens = nullptr;
    QSpinBox* m_seed = nullptr;
    QPushButton* m_send = nullptr;
    QPushButton* m_stop = nullptr;
    QPushButton* m_clear = nullptr;
    QPushButton* m_copy = nullptr;
    QPushButton* m_save = nullptr;
    QLabel* m_status = nullptr;
    QPushButton* m_onCpu = nullptr;  // "Chat on the CPU", shown while a training run holds the GPU
    QThread* m_thread = nullptr;
    ChatWorker* m_worker = nullptr;
    std::shared_ptr<std::atomic<bool>> m_cancel;
    std::shared_ptr<std::atomic<int>> m_stepDelay;
    QString m_defaultsFor;  // the model whose generation defaults the settings show
    bool m_busy = false;
    bool m_filling = false;
    QString m_sessionDevice;
    bool m_gpuSession = false;  // the worker's session is on the GPU, or a turn posted may load it there
    bool m_releasing = false;
    bool m_gpuUsable = tandem::cuda_backend_built();  // until system_info answers: auto may mean the GPU
    bool m_runActive = false;
    tandem::DeviceChoice m_runDevice = tandem::DeviceChoice::Cpu;
    bool m_gpuNotice = false;   // the status line shows the training run's hold on the GPU
};

}  // namespace tandem::ui
