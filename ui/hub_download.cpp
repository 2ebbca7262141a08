// SPDX-FileCopyrightText: 2026 The Tandem developers
// SPDX-License-Identifier: GPL-3.0-or-later
// See hub_download.h.
#include "ui/hub_download.h"

#include <QDir>
#include <QHBoxLayout>
#include <QLabel>
#include <QLineEdit>
#include <QProgressBar>
#include <QPushButton>
#include <QRandomGenerator>
#include <QVBoxLayout>

#include <atomic>
#include <exception>
#include <filesystem>
#include <mutex>
#include <system_error>

#include "tandem/error.h"
#include "tandem/run_config.h"
#include "tandem/trainer.h"
#include "ui/model_inspection.h"
#include "ui/run_async.h"
#include "ui/run_scan.h"
#include "ui/screen_words.h"
#include "ui/status_text.h"

namespace tandem::ui {

namespace fs = std::filesystem;
using hub::RepoType;

namespace {

// A status line that takes no room while empty.
void setShown(QLabel* label, const QString& text, Tone tone) {
    setStatusText(label, text, tone);
    label->setVisible(!text.isEmpty());
}

QString repoWord(RepoType type) { return type == RepoType::Model ? QStringLiteral("model") : QStringLiteral("dataset"); }

QString hubPageUrl(const QString& endpoint, RepoType type, const QString& repoId) {
    return endpoint + (type == RepoType::Dataset ? QStringLiteral("/datasets/") : QStringLiteral("/")) + repoId;
}

// Where huggingface_hub (and the engine) read the token from when HF_TOKEN is not set.
QString tokenFile() {
    if (const QString p = qEnvironmentVariable("HF_TOKEN_PATH"); !p.isEmpty()) return p;
    if (const QString home = qEnvironmentVariable("HF_HOME"); !home.isEmpty()) return home + "/token";
    const QString xdg = qEnvironmentVariable("XDG_CACHE_HOME");
    return (xdg.isEmpty() ? QDir::homePath() + "/.cache" : xdg) + "/huggingface/token";
}

QString endpoint() { return QString::fromStdString(hub::hub_options_from_env().endpoint); }

// Whether `dir/config.json` at the Train page's defaults fits this machine (GPU, or RAM without one).
void estimateFit(const fs::path& dir, HubCheck& r) {
    try {
        RunConfig c;
        c.model = dir.string();
        c.data.dataset = "dataset";  // the estimate reads only config.json
        c.output_dir = (dir.parent_path() / "runs").string();
        const MemoryEstimate e = estimate_memory(c);
        const QString need = humanBytes(e.memory.total);
        const QString have = humanBytes(e.memory.device_total);
        if (e.device == DeviceChoice::Cuda) {
            r.fit = e.fits ? QObject::tr("Fits your GPU: about %1 of its %2 at the default training settings.")
                                 .arg(need, have)
                           : QObject::tr("Does not fit your GPU at the default training settings: about %1 "
                                         "needed, the GPU has %2. Fewer batch tokens or checkpointing on the "
                                         "Train page may make it fit.")
                                 .arg(need, have);
            r.fitTone = static_cast<int>(e.fits ? Tone::Good : Tone::Bad);
        } else {
            r.fit = (e.fits ? QObject::tr("No usable GPU here: training would run on the CPU, about %1 of RAM "
                                          "(%2 available).")
                            : QObject::tr("No usable GPU here, and on the CPU it needs about %1 of RAM (%2 "
                                          "available)."))
                        .arg(need, humanBytes(e.memory.device_free));
            r.fitTone = static_cast<int>(e.fits ? Tone::Warning : Tone::Bad);
        }
    } catch (const std::exception& e) {
        r.fit = QObject::tr("Cannot tell whether it fits: %1").arg(inScreenWords(QString::fromUtf8(e.what())));
        r.fitTone = static_cast<int>(Tone::Warning);
    }
}

// config.json of the plan's repo into a throw-away folder (from the cache's blob when it is there).
void checkFit(const hub::RepoPlan& plan, const hub::HubOptions& options, HubCheck& r) {
    const hub::RepoFile* config = nullptr;
    for (const auto& f : plan.files)
        if (f.path == "config.json") config = &f;
    if (!config) return;
    const fs::path tmp = fs::temp_directory_path() /
                         ("tandem-hub-config-" + std::to_string(QRandomGenerator::global()->generate64()));
    std::error_code ec;
    try {
        fs::path dir;
        if (config->cached && !options.offline) {
            dir = tmp / "model";
            fs::create_directories(dir);
            fs::copy_file(hub::repo_cache_dir(plan.request.type, plan.request.repo_id, options) / "blobs" / config->blob,
                          dir / "config.json");
        } else if (config->cached) {
            dir = plan.snapshot;
        } else {
            hub::HubOptions o = options;
            o.cache_dir = tmp;
            o.notice = {};
            hub::DownloadRequest req = plan.request;
            req.revision = plan.commit;
            req.include = {"config.json"};
            dir = hub::download(req, o);
        }
        estimateFit(dir, r);
    } catch (const std::exception& e) {
        r.fit = QObject::tr("Cannot tell whether it fits: config.json could not be read (%1).")
                    .arg(QString::fromUtf8(e.what()));
        r.fitTone = static_cast<int>(Tone::Warning);
    }
    fs::remove_all(tmp, ec);
}

}  // namespace

bool parseRepoSpec(const QString& spec, QString* repoId, QString* revision) {
    const QString s = spec.trimmed();
    const qsizetype at = s.indexOf('@');
    const QString id = at < 0 ? s : s.left(at);
    const QString rev = at < 0 ? QStringLiteral("main") : s.mid(at + 1);
    if (!id.contains('/') || rev.isEmpty() || !hub::is_repo_id(id.toStdString())) return false;
    if (repoId) *repoId = id;
    if (revision) *revision = rev;
    return true;
}

QString hubMessage(ErrorCategory category, const QString& m, RepoType type, const QString& repoId) {
    const QString what = repoWord(type);
    const QString page = hubPageUrl(endpoint(), type, repoId);
    if (category == ErrorCategory::Cancelled)
        return QObject::tr("Download cancelled. Press Download to continue where it stopped: the parts already "
                           "downloaded are kept.");
    if (m.contains(QLatin1String("is gated or private")))
        return QObject::tr("%1 is gated or private and %2. Open %3, log in and accept its licence (or ask for "
                           "access), then create a read token in your Hugging Face account settings and save it "
                           "in %4 (the file `hf auth login` writes). Then press Check again.")
            .arg(repoId,
                 m.contains(QLatin1String("no token is set")) ? QObject::tr("no Hugging Face token is set")
                                                              : QObject::tr("your token has no access to it"),
                 page, QDir::toNativeSeparators(tokenFile()));
    if (m.contains(QLatin1String("has no revision")))
        return QObject::tr("%1 has no branch, tag or commit named like the part after @. Use one that exists on "
                           "%2, or leave @… out for the main branch.")
            .arg(repoId, page);
    if (m.contains(QLatin1String("was not found")))
        return QObject::tr("No %1 named %2 on the Hugging Face Hub, or it is private. Check the name (ORG/NAME, "
                           "as on its Hub page)%3.")
            .arg(what, repoId,
                 type == RepoType::Model ? QObject::tr("; a dataset is downloaded on the Data page")
                                         : QObject::tr("; a model is downloaded on the Model page"));
    if (m.contains(QLatin1String("cannot reach")))
        return QObject::tr("Cannot reach the Hugging Face Hub (%1): check the network connection. What is "
                           "already downloaded stays usable offline.")
            .arg(endpoint());
    if (m.contains(QLatin1String("only pickle weights")))
        return QObject::tr("%1 has only PyTorch pickle weights: loading them can run code, so Tandem reads "
                           "safetensors only. Look for a safetensors version of this model on the Hub.")
            .arg(repoId);
    if (m.contains(QLatin1String("HF_HUB_OFFLINE")))
        return QObject::tr("The studio runs offline (HF_HUB_OFFLINE is set) and %1 is not fully in the cache. "
                           "Start the studio without offline mode to download it.")
            .arg(repoId);
    if (m.contains(QLatin1String("failed its")))
        return QObject::tr("A file of %1 arrived damaged (its checksum is wrong) and was removed. Press Download "
                           "to try again.")
            .arg(repoId);
    if (m.contains(QLatin1String("asks to wait")) || m.contains(QLatin1String("try again later")))
        return QObject::tr("The Hugging Face Hub is busy or failing right now. Try again in a few minutes.");
    QString text = inScreenWords(m);
    text.replace(QLatin1String("the --include patterns"), QLatin1String("the chosen files"));
    return text;
}

HubCheck checkHubRepo(RepoType type, const QString& repoId, const QString& revision) {
    HubCheck r;
    try {
        const hub::HubOptions options = hub::hub_options_from_env();
        hub::DownloadRequest req;
        req.type = type;
        req.repo_id = repoId.toStdString();
        req.revision = revision.toStdString();
        auto plan = std::make_shared<hub::RepoPlan>(hub::plan_download(req, options));
        const qint64 missing = plan->total_bytes - plan->cached_bytes;
        const QString files = QObject::tr("%1, %2").arg(countOf(static_cast<qint64>(plan->files.size()), QObject::tr("file")),
                                                         humanBytes(static_cast<uint64_t>(plan->total_bytes)));
        if (missing <= 0)
            r.preview = QObject::tr("Nothing to download: %1, all already downloaded.").arg(files);
        else if (plan->cached_bytes > 0)
            r.preview = QObject::tr("%1 to download of %2 (%3 already downloaded).")
                            .arg(humanBytes(static_cast<uint64_t>(missing)), files,
                                 humanBytes(static_cast<uint64_t>(plan->cached_bytes)));
        else
            r.preview = QObject::tr("%1 to download: %2.").arg(humanBytes(static_cast<uint64_t>(missing)), files);
        if (!plan->skipped.empty())
            r.preview += ' ' + QObject::tr("%1 of the repo not needed for training, skipped.")
                                   .arg(countOf(static_cast<qint64>(plan->skipped.size()), QObject::tr("file")));
        if (type == RepoType::Model) checkFit(*plan, options, r);
        r.plan = std::move(plan);
    } catch (const Error& e) {
        r.error = hubMessage(e.category(), QString::fromUtf8(e.what()), type, repoId);
    } catch (const std::exception& e) {
        r.error = hubMessage(ErrorCategory::Internal, QString::fromUtf8(e.what()), type, repoId);
    }
    return r;
}

// ----- the box ------------------------------------------------------------------------------------------------

struct HubDownloadBox::Transfer {
    std::atomic<bool> cancel{false};
    std::mutex m;
    hub::DownloadProgress last;
    bool fresh = false;
    QString notice;
};

namespace {
struct DownloadResult {
    QString snapshot;
    QStringList files;
    QString error;
};
}  // namespace

HubDownloadBox::HubDownloadBox(RepoType type, QWidget* parent)
    : QGroupBox(type == RepoType::Model ? tr("Download a model from the Hugging Face Hub")
                                        : tr("Download a dataset from the Hugging Face Hub"),
                parent),
      m_type(type) {
    setObjectName(QStringLiteral("hubDownloadBox"));
    m_repo = new QLineEdit;
    m_repo->setObjectName(QStringLiteral("hubRepoEdit"));
    m_repo->setPlaceholderText(type == RepoType::Model ? tr("ORG/NAME, e.g. Qwen/Qwen3-0.6B (add @revision for "
                                                            "another branch)")
                                                       : tr("ORG/NAME, e.g. tatsu-lab/alpaca (add @revision for "
                                                            "another branch)"));
    m_repo->setToolTip(tr("The repo id as on its Hugging Face page; files go to the Hugging Face cache, shared "
                          "with Python tools"));
    m_check = new QPushButton(tr("Check"));
    m_check->setObjectName(QStringLiteral("hubCheckButton"));
    m_check->setToolTip(tr("Show what would be downloaded, and its size, before downloading"));
    m_download = new QPushButton(tr("Download"));
    m_download->setObjectName(QStringLiteral("hubDownloadButton"));
    m_download->setToolTip(tr("Download into the Hugging Face cache; after a cancel, continues where it stopped"));
    m_cancel = new QPushButton(tr("Cancel"));
    m_cancel->setObjectName(QStringLiteral("hubCancelButton"));
    m_cancel->setToolTip(tr("Stop the download; the parts already downloaded are kept for the next Download"));
    m_preview = new QLabel;
    m_preview->setObjectName(QStringLiteral("hubPreviewLabel"));
    wrapMessage(m_preview);
    m_fit = new QLabel;
    m_fit->setObjectName(QStringLiteral("hubFitLabel"));
    wrapMessage(m_fit);
    m_fit->setVisible(false);
    m_progress = new QProgressBar;
    m_progress->setObjectName(QStringLiteral("hubProgress"));
    m_progress->setRange(0, 1000);
    m_progress->setValue(0);
    m_progress->setVisible(false);
    m_status = new QLabel;
    m_status->setObjectName(QStringLiteral("hubStatusLabel"));
    m_status->setTextInteractionFlags(Qt::TextSelectableByMouse);
    wrapMessage(m_status);
    m_preview->setVisible(false);
    m_status->setVisible(false);

    auto* row = new QHBoxLayout;
    row->addWidget(m_repo, 1);
    row->addWidget(m_check);
    row->addWidget(m_download);
    row->addWidget(m_cancel);
    auto* layout = new QVBoxLayout(this);
    layout->addLayout(row);
    layout->addWidget(m_preview);
    layout->addWidget(m_fit);
    layout->addWidget(m_progress);
    layout->addWidget(m_status);

    connect(m_check, &QPushButton::clicked, this, &HubDownloadBox::check);
    connect(m_repo, &QLineEdit::returnPressed, this, &HubDownloadBox::check);
    connect(m_download, &QPushButton::clicked, this, &HubDownloadBox::download);
    connect(m_cancel, &QPushButton::clicked, this, &HubDownloadBox::cancel);
    connect(m_repo, &QLineEdit::textChanged, this, [this] {
        ++m_checkGeneration;  // a preview for another id is stale
        setShown(m_preview, QString(), Tone::Neutral);
        m_fit->setVisible(false);
        setBusy(m_busy);
    });
    m_poll.setInterval(150);
    connect(&m_poll, &QTimer::timeout, this, &HubDownloadBox::pollProgress);
    setBusy(false);
}

HubDownloadBox::~HubDownloadBox() {
    if (m_transfer) m_transfer->cancel = true;  // the worker stops; its result is dropped with the watcher
}

void HubDownloadBox::setBusy(bool busy) {
    m_busy = busy;
    const bool hasText = !m_repo->text().trimmed().isEmpty();
    m_repo->setReadOnly(busy);
    m_check->setEnabled(!busy && hasText);
    m_download->setEnabled(!busy && hasText);
    m_cancel->setEnabled(busy && m_transfer != nullptr);
}

void HubDownloadBox::check() {
    if (m_busy) return;
    QString id, revision;
    if (!parseRepoSpec(m_repo->text(), &id, &revision)) {
        setShown(m_status,
                      tr("\"%1\" is not a Hugging Face repo id: write ORG/NAME as on its Hub page (letters, digits, "
                         "'-', '_', '.'), optionally followed by @ and a branch, tag or commit.")
                          .arg(m_repo->text().trimmed()),
                      Tone::Bad);
        return;
    }
    const quint64 generation = ++m_checkGeneration;
    setShown(m_preview, QString(), Tone::Neutral);
    m_fit->setVisible(false);
    setShown(m_status, tr("Checking %1…").arg(id), Tone::Neutral);
    setBusy(true);
    const RepoType type = m_type;
    runAsync(
        this, [type, id, revision] { return checkHubRepo(type, id, revision); },
        [this, generation, id](const HubCheck& r) {
            setBusy(false);
            if (generation != m_checkGeneration) return;
            if (!r.error.isEmpty()) {
                setShown(m_status, r.error, Tone::Bad);
                return;
            }
            setShown(m_preview, r.preview, Tone::Neutral);
            if (!r.fit.isEmpty()) {
                setStatusText(m_fit, r.fit, static_cast<Tone>(r.fitTone));
                m_fit->setVisible(true);
            }
            setShown(m_status,
                          r.plan->cached_bytes == r.plan->total_bytes
                              ? tr("%1 is already downloaded: press Download to use it.").arg(id)
                              : tr("Press Download to get %1.").arg(id),
                          Tone::Neutral);
        });
}

void HubDownloadBox::download() {
    if (m_busy) return;
    QString id, revision;
    if (!parseRepoSpec(m_repo->text(), &id, &revision)) {
        check();  // says what is wrong with the id
        return;
    }
    auto transfer = std::make_shared<Transfer>();
    m_transfer = transfer;
    setBusy(true);
    m_progress->setValue(0);
    m_progress->setVisible(true);
    setShown(m_status, tr("Starting the download of %1…").arg(id), Tone::Neutral);
    m_poll.start();
    const RepoType type = m_type;
    runAsync(
        this,
        [transfer, type, id, revision] {
            DownloadResult r;
            try {
                hub::HubOptions options = hub::hub_options_from_env();
                options.notice = [transfer](const std::string& note) {
                    std::lock_guard lock(transfer->m);
                    transfer->notice = QString::fromStdString(note);
                };
                hub::DownloadRequest req;
                req.type = type;
                req.repo_id = id.toStdString();
                req.revision = revision.toStdString();
                const hub::RepoPlan plan = hub::plan_download(req, options);
                const fs::path snapshot = hub::download(
                    plan, options,
                    [transfer](const hub::DownloadProgress& p) {
                        std::lock_guard lock(transfer->m);
                        transfer->last = p;
                        transfer->fresh = true;
                    },
                    &transfer->cancel);
                r.snapshot = QDir::cleanPath(QString::fromStdString(snapshot.string()));
                for (const auto& f : plan.files) r.files.append(QString::fromStdString(f.path));
            } catch (const Error& e) {
                r.error = hubMessage(e.category(), QString::fromUtf8(e.what()), type, id);
            } catch (const std::exception& e) {
                r.error = hubMessage(ErrorCategory::Internal, QString::fromUtf8(e.what()), type, id);
            }
            return r;
        },
        [this, id](const DownloadResult& r) {
            pollProgress();
            m_poll.stop();
            m_transfer.reset();
            setBusy(false);
            if (!r.error.isEmpty()) {
                setShown(m_status, r.error, r.error.startsWith(tr("Download cancelled")) ? Tone::Warning : Tone::Bad);
                return;
            }
            m_progress->setValue(1000);
            setShown(m_status,
                          tr("Downloaded %1 (%2) into the Hugging Face cache.")
                              .arg(id, countOf(r.files.size(), tr("file"))),
                          Tone::Good);
            emit downloaded(r.snapshot, r.files);
        });
}

void HubDownloadBox::cancel() {
    if (!m_transfer) return;
    m_transfer->cancel = true;
    m_cancel->setEnabled(false);
    setShown(m_status, tr("Cancelling…"), Tone::Neutral);
}

void HubDownloadBox::pollProgress() {
    if (!m_transfer) return;
    hub::DownloadProgress p;
    QString notice;
    {
        std::lock_guard lock(m_transfer->m);
        if (!m_transfer->fresh) return;
        m_transfer->fresh = false;
        p = m_transfer->last;
        notice = m_transfer->notice;
    }
    if (m_transfer->cancel) return;  // "Cancelling…" stays until the worker stops
    if (p.bytes_total > 0)
        m_progress->setValue(static_cast<int>(1000.0 * static_cast<double>(p.bytes_done) / static_cast<double>(p.bytes_total)));
    QString text = tr("%1 of %2").arg(humanBytes(static_cast<uint64_t>(p.bytes_done)),
                                     humanBytes(static_cast<uint64_t>(p.bytes_total)));
    if (p.bytes_per_s > 0) text += tr(", %1/s").arg(humanBytes(static_cast<uint64_t>(p.bytes_per_s)));
    if (p.eta_s >= 0) text += tr(", about %1 left").arg(formatDuration(p.eta_s));
    text += tr(" (%1 of %2 files done)").arg(p.files_done).arg(p.files_total);
    if (!notice.isEmpty()) text += '\n' + notice;
    setShown(m_status, text, Tone::Neutral);
}

}  // namespace tandem::ui
