// SPDX-FileCopyrightText: 2026 The Tandem developers
// SPDX-License-Identifier: GPL-3.0-or-later
// The studio's claim on a run folder while it trains it: RUN/studio.lock, created when a session starts or
// resumes the run, held with an exclusive flock(2) for as long as the session runs, and removed when the run
// ends in any way (finished, stopped, diverged, failed). A studio.lock that nobody holds therefore marks a run
// whose studio died mid-run (SIGKILL, a crash, a power cut): the Runs page shows it as interrupted and the
// main window offers to resume it.
// Decisions a reader must know:
//  - The kernel drops a flock when its holder dies, however it dies, so "held" needs no pid test and no
//    clock, and a reused pid cannot fool it. The file's content (pid, host, start time) is for messages only.
//  - flock belongs to an open file, not to a process: a second claim from the same process conflicts, so
//    the studio's own running run reads as held, like a run of another window.
//  - Released by unlinking while still locked, then closing; a claimant checks after flock that the path
//    still names the file it locked (else it tries again), so two sessions never hold one run.
//  - Where the filesystem has no flock (some network mounts) nothing is claimed, and such a run is never
//    reported as held or interrupted.
#pragma once

#include <QDateTime>
#include <QString>
#include <QtGlobal>

namespace tandem::ui {

inline constexpr char kRunLockName[] = "studio.lock";

enum class RunLockState {
    None,  // no studio.lock: no studio session claims the run
    Held,  // a live session (of this or another studio) trains the run now
    Stale  // studio.lock is left but nobody holds it: the session died mid-run
};

struct RunLockProbe {
    RunLockState state = RunLockState::None;
    qint64 pid = 0;     // the session's process, from the file (0 when unreadable)
    QString host;       // the machine it ran on
    QDateTime started;  // when that session started or resumed the run (UTC)
};

// What runDir/studio.lock says. Reads only, never blocks, never throws.
RunLockProbe probeRunLock(const QString& runDir);

// "process 1234 on host" for messages; "another process" when the file said nothing.
QString describeLockHolder(const RunLockProbe& probe);

class RunLock {
    Q_DISABLE_COPY_MOVE(RunLock)

public:
    // Claims runDir (an existing folder), taking over a stale studio.lock. Throws tandem::Error:
    // InvalidInput when a live session holds the run (naming it and what to do), Io when studio.lock cannot
    // be written (naming the file and the reason).
    explicit RunLock(const QString& runDir);
    ~RunLock();  // removes studio.lock and drops the claim

    bool claimed() const { return m_fd >= 0; }  // false where the filesystem has no flock

private:
    QString m_path;
    int m_fd = -1;
};

}  // namespace tandem::ui
