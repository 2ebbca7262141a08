// SPDX-FileCopyrightText: 2026 The Tandem developers
// SPDX-License-Identifier: GPL-3.0-or-later
// The "Download from the Hugging Face Hub" box of the Model and Data pages: a repo id (ORG/NAME, optionally
// @REVISION), Check (the size preview: files, total bytes, bytes already cached; for a model also whether it
// fits this machine's GPU at default settings), Download with a progress bar (bytes, speed, ETA), Cancel.
// Decisions a reader must know:
//  - Everything that touches the network runs on a worker (run_async.h): plan_download for Check, plan_download
//    + download for Download (re-planned each time, so a second Download after a cancel or a crash continues the
//    cache's .incomplete files, as the engine resumes them).
//  - Progress crosses threads through a shared state (mutex + latest DownloadProgress) that a GUI timer polls;
//    the worker never touches a QObject, so the page may close mid-download (its destructor sets the cancel
//    flag, the worker stops at its next poll).
//  - "Fits your GPU?" fetches config.json alone into a throw-away cache folder (the real cache must not get a
//    snapshot holding only config.json: the Model page would list it as a model) and runs estimate_memory at
//    the Train page's default settings; when the config cannot be read, it says so instead of guessing.
//  - The engine's messages name environment variables and tandem-cli flags; hubMessage() turns the known ones
//    (gated, not found, no such revision, unreachable, pickle only, cancelled) into what to do in the studio.
#pragma once

#include <QGroupBox>
#include <QString>
#include <QStringList>
#include <QTimer>

#include <memory>

#include "tandem/error.h"
#include "tandem/hub.h"

class QLabel;
class QLineEdit;
class QProgressBar;
class QPushButton;

namespace tandem::ui {

// "ORG/NAME" or "ORG/NAME@REVISION" -> id and revision ("main" when none); false when the id is not one.
bool parseRepoSpec(const QString& spec, QString* repoId, QString* revision);

// The engine's Hub error (category + message) in the studio's words: what happened and what to do.
QString hubMessage(tandem::ErrorCategory category, const QString& engineMessage, tandem::hub::RepoType type,
                   const QString& repoId);

// What Check found (worker result).
struct HubCheck {
    QString error;  // screen words; empty when the plan was made
    std::shared_ptr<const tandem::hub::RepoPlan> plan;
    QString preview;  // "5 files, 1.2 GB (300 MB already downloaded)"
    QString fit;      // models: fits the GPU or not, or why that cannot be told
    int fitTone = 0;  // a Tone (status_text.h)
};
HubCheck checkHubRepo(tandem::hub::RepoType type, const QString& repoId, const QString& revision);

class HubDownloadBox : public QGroupBox {
    Q_OBJECT
    Q_DISABLE_COPY_MOVE(HubDownloadBox)

public:
    explicit HubDownloadBox(tandem::hub::RepoType type, QWidget* parent = nullptr);
    ~HubDownloadBox() override;

    bool busy() const { return m_busy; }

public slots:
    void check();
    void download();
    void cancel();

signals:
    // A download finished: the snapshot folder and the repo paths of the files it holds.
    void downloaded(const QString& snapshot, const QStringList& files);

private:
    struct Transfer;  // shared with the worker: cancel flag + latest progress
    void setBusy(bool busy);
    void pollProgress();

    tandem::hub::RepoType m_type;
    bool m_busy = false;
    quint64 m_checkGeneration = 0;
    std::shared_ptr<Transfer> m_transfer;
    QTimer m_poll;

    QLineEdit* m_repo = nullptr;
    QPushButton* m_check = nullptr;
    QPushButton* m_download = nullptr;
    QPushButton* m_cancel = nullptr;
    QLabel* m_preview = nullptr;
    QLabel* m_fit = nullptr;
    QProgressBar* m_progress = nullptr;
    QLabel* m_status = nullptr;
};

}  // namespace tandem::ui
