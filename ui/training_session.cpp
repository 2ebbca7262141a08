// SPDX-FileCopyrightText: 2026 The Tandem developers
// SPDX-License-Identifier: GPL-3.0-or-later
// TrainingSession and its worker. The worker is a QObject moved to the session's thread; its run() slot is
// the only code that touches the Trainer. It keeps its outcome in members that the session reads after
// QThread::finished (the thread has ended, so no lock is needed). Filesystem errors (a runs folder that
// cannot be written) become I/O failures that say what to do, not internal errors. The worker holds the run
// folder's studio.lock (run_lock.h) from before prepare() to the end of the run.
#include "ui/training_session.h"

#include <QCoreApplication>
#include <QDir>
#include <QFile>
#include <QThread>

#include <exception>
#include <filesystem>
#include <limits>
#include <new>
#include <optional>
#include <string>
#include <utility>

#include <nlohmann/json.hpp>

#include "tandem/error.h"
#include "tandem/trainer.h"
#include "ui/run_lock.h"
#include "ui/run_scan.h"

namespace tandem::ui {

namespace {

// metrics.jsonl lines with step <= lastStep (the steps a resumed run keeps), in file order, with their memory
// (runs written before the engine stored it have none: 0). Unreadable lines are skipped: the history is for
// the plots, the engine owns the file.
std::vector<tandem::StepMetrics> readHistory(const std::filesystem::path& runDir, int64_t lastStep,
                                             int64_t totalSteps) {
    std::vector<tandem::StepMetrics> out;
    QFile file(QString::fromStdString((runDir / "metrics.jsonl").string()));
    if (lastStep <= 0 || !file.open(QIODevice::ReadOnly)) return out;
    while (!file.atEnd()) {
        const QByteArray line = file.readLine().trimmed();
        if (line.isEmpty()) continue;
        const auto j = nlohmann::json::parse(line.constBegin(), line.constEnd(), nullptr, false);
        if (j.is_discarded() || !j.is_object() || !j.contains("step") || !j["step"].is_number_integer()) continue;
        tandem::StepMetrics m;
        m.step = j["step"].get<int64_t>();
        if (m.step > lastStep) continue;
        m.total_steps = totalSteps;
        auto num = [&j](const char* key, double fallback) {
            const auto it = j.find(key);
            return it != j.end() && it->is_number() ? it->get<double>() : fallback;
        };
        m.epoch = num("epoch", 0);
        m.loss = num("loss", 0);
        m.eval_loss = num("eval_loss", std::numeric_limits<double>::quiet_NaN());
        m.lr = num("lr", 0);
        m.grad_norm = num("grad_norm", 0);
        m.tokens = static_cast<int64_t>(num("tokens", 0));
        m.label_tokens = static_cast<int64_t>(num("label_tokens", 0));
        m.step_time_s = num("step_time_s", 0);
        m.tokens_per_s = num("tokens_per_s", 0);
        if (const auto mem = j.find("memory"); mem != j.end() && mem->is_object()) {
            // Bytes (unsigned) and small signed integers of an object, 0 / fallback when absent or of another type.
            auto bytes = [](const nlohmann::json& o, const char* key) {
                const auto it = o.find(key);
                return it != o.end() && it->is_number_unsigned() ? it->get<uint64_t>() : uint64_t{0};
            };
            auto integer = [](const nlohmann::json& o, const char* key, int fallback) {
                const auto it = o.find(key);
                return it != o.end() && it->is_number_integer() ? it->get<int>() : fallback;
            };
            m.memory.weights = bytes(*mem, "weights");
            m.memory.lora_optimizer = bytes(*mem, "lora_optimizer");
            m.memory.activations = bytes(*mem, "activations");
            m.memory.workspace = bytes(*mem, "workspace");
            m.memory.reserved = bytes(*mem, "reserved");
            m.memory.device_total = bytes(*mem, "device_total");
            m.memory.device_free = bytes(*mem, "device_free");
            m.memory.pinned_host = bytes(*mem, "pinned_host");
            if (const auto gpus = mem->find("gpus"); gpus != mem->end() && gpus->is_array())
                for (const auto& g : *gpus)
                    if (g.is_object())
                        m.memory.gpus.push_back({integer(g, "device", 0), bytes(g, "used"), bytes(g, "total"),
                                                 bytes(g, "peak_allocated"), integer(g, "utilization", -1)});
        }
        out.push_back(m);
    }
    return out;
}

QString writableRunsFolderHint() {
    return QCoreApplication::translate("tandem::ui::TrainingSession",
                                       "Choose a writable runs folder (Train page, Runs folder).");
}

// Creates a new run's folder (and the runs folder above it). Empty when it exists now, else why not.
QString createRunFolder(const std::filesystem::path& dir) {
    std::error_code ec;
    std::filesystem::create_directories(dir, ec);
    if (!ec && std::filesystem::is_directory(dir, ec)) return {};
    return QCoreApplication::translate("tandem::ui::TrainingSession", "Cannot create the run folder %1 (%2). %3")
        .arg(QString::fromStdString(dir.string()), QString::fromStdString(ec ? ec.message() : "not a folder"),
             writableRunsFolderHint());
}

// The step of the latest complete checkpoint (checkpoints/step-N), 0 when there is none.
int64_t checkpointStep(const std::filesystem::path& runDir) {
    const auto dir = tandem::latest_checkpoint(runDir);
    return dir ? checkpointStepOf(*dir) : 0;
}

}  // namespace

class TrainingWorker : public QObject {
    Q_OBJECT

public:
    TrainingWorker(tandem::RunConfig config, bool resume, std::shared_ptr<std::atomic<bool>> stop)
        : m_config(std::move(config)), m_resume(resume), m_stop(std::move(stop)) {}

    // Read by the session after the thread finished.
    bool ok = false;
    bool stopped = false;
    bool diverged = false;
    QString divergedMessage;
    RunFailure failure;

signals:
    void started(const tandem::ui::RunInfo& info);
    void stepCompleted(const tandem::StepMetrics& metrics);
    void event(const tandem::RunEvent& event);

public slots:
    void run() {
        const std::filesystem::path runDir = m_config.output_dir;
        bool created = false;
        if (!m_resume && !runDir.empty()) {
            const bool existed = std::filesystem::exists(runDir);
            const QString why = createRunFolder(runDir);
            if (!why.isEmpty()) {
                failure = {tandem::ErrorCategory::Io, why};
                QThread::currentThread()->quit();
                return;
            }
            created = !existed;
        }
        try {
            // Claimed for the whole run, released before the cleanup below (run_lock.h). A resume of a folder
            // that is gone claims nothing: prepare() says there is no run to resume there.
            std::optional<RunLock> lock;
            std::error_code ec;
            if (!runDir.empty() && std::filesystem::is_directory(runDir, ec))
                lock.emplace(QString::fromStdString(runDir.string()));
            tandem::Trainer trainer = tandem::Trainer::prepare(m_config, tandem::TrainerOptions{.resume = m_resume});
            RunInfo info;
            info.plan = trainer.plan();
            const std::filesystem::path dir = info.plan.config.output_dir;
            info.runDir = QString::fromStdString(dir.string());
            info.resumed = m_resume;
            if (m_resume) {
                info.startStep = checkpointStep(dir);
                info.history = readHistory(dir, info.startStep, info.plan.total_steps);
            }
            emit started(info);
            Sink sink(*this);
            trainer.run(sink, *m_stop);
            stopped = trainer.stopped();
            diverged = trainer.diverged();
            divergedMessage = QString::fromStdString(trainer.diverged_message());
            ok = true;
        } catch (const tandem::Error& e) {
            failure = {e.category(), QString::fromStdString(e.what())};
        } catch (const std::bad_alloc&) {
            failure = {tandem::ErrorCategory::OutOfMemory, tr("out of host memory")};
        } catch (const std::filesystem::filesystem_error& e) {
            // Writing the run folder failed (permissions, a full disk): say where to go, not "internal".
            std::error_code ec;
            const std::string dir = std::filesystem::absolute(runDir, ec).string();
            const bool inRun = !dir.empty() && std::filesystem::absolute(e.path1(), ec).string().rfind(dir, 0) == 0;
            failure = {tandem::ErrorCategory::Io,
                       QString::fromStdString(e.what()) +
                           (inRun ? QStringLiteral(". ") + writableRunsFolderHint() : QString())};
        } catch (const std::exception& e) {
            failure = {tandem::ErrorCategory::Internal, QString::fromStdString(e.what())};
        } catch (...) {
            failure = {tandem::ErrorCategory::Internal, tr("unknown error")};
        }
        if (!ok && created) {  // nothing was written into the new folder: do not leave it behind
            std::error_code ec;
            if (std::filesystem::is_empty(runDir, ec)) std::filesystem::remove(runDir, ec);
        }
        QThread::currentThread()->quit();
    }

private:
    // Runs on the worker thread: each call becomes a queued signal to the session.
    class Sink final : public tandem::ProgressSink {
    public:
        explicit Sink(TrainingWorker& w) : m_worker(w) {}
        void on_step(const tandem::StepMetrics& m) override { emit m_worker.stepCompleted(m); }
        void on_event(const tandem::RunEvent& e) override { emit m_worker.event(e); }

    private:
        TrainingWorker& m_worker;
    };

    tandem::RunConfig m_config;
    bool m_resume;
    std::shared_ptr<std::atomic<bool>> m_stop;
};

TrainingSession::TrainingSession(QObject* parent)
    : QObject(parent), m_stop(std::make_shared<std::atomic<bool>>(false)) {
    registerRunMetaTypes();
}

TrainingSession::~TrainingSession() {
    if (!m_thread) return;
    m_stop->store(true);
    m_thread->quit();  // harmless before run() starts; run() quits the thread itself when it returns
    m_thread->wait();
    delete m_worker;
    delete m_thread;
}

bool TrainingSession::start(const tandem::RunConfig& config, bool resume) {
    if (m_thread) return false;
    m_config = config;
    m_runDir = config.output_dir.empty() ? QString()
                                         : QDir(QString::fromStdString(config.output_dir)).absolutePath();
    m_stop = std::make_shared<std::atomic<bool>>(false);
    m_thread = new QThread;  // no parent: it must not be deleted by a parent while running
    m_thread->setObjectName(QStringLiteral("tandem-training"));
    m_worker = new TrainingWorker(config, resume, m_stop);
    m_worker->moveToThread(m_thread);
    // Cross-thread connections: queued, the arguments are copied.
    connect(m_worker, &TrainingWorker::started, this, &TrainingSession::started);
    connect(m_worker, &TrainingWorker::stepCompleted, this, &TrainingSession::stepCompleted);
    connect(m_worker, &TrainingWorker::event, this, &TrainingSession::event);
    connect(m_thread, &QThread::started, m_worker, &TrainingWorker::run);
    connect(m_thread, &QThread::finished, this, &TrainingSession::onThreadFinished, Qt::QueuedConnection);
    m_thread->start();
    emit runningChanged(true);
    return true;
}

void TrainingSession::onThreadFinished() {
    if (!m_thread) return;
    m_thread->wait();  // finished was emitted: this returns at once
    const bool ok = m_worker->ok;
    const bool stopped = m_worker->stopped;
    const bool wasDiverged = m_worker->diverged;
    const QString divergedMessage = m_worker->divergedMessage;
    const RunFailure failure = m_worker->failure;
    delete m_worker;
    delete m_thread;
    m_worker = nullptr;
    m_thread = nullptr;
    emit runningChanged(false);
    if (ok && wasDiverged) emit diverged(divergedMessage);
    else if (ok) emit finished(stopped);
    else emit failed(failure);
}

void TrainingSession::requestStop() {
    if (m_thread) m_stop->store(true);
}

bool TrainingSession::isRunning() const { return m_thread != nullptr; }

bool TrainingSession::stopRequested() const { return m_thread && m_stop->load(); }

QString TrainingSession::runDir() const { return m_runDir; }

tandem::RunConfig TrainingSession::config() const { return m_config; }

}  // namespace tandem::ui

#include "training_session.moc"
