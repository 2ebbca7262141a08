// SPDX-FileCopyrightText: 2026 The Tandem developers
// SPDX-License-Identifier: GPL-3.0-or-later
// See run_lock.h. POSIX open/flock/fstat; the file's JSON through QJsonDocument.
#include "ui/run_lock.h"

#include <QCoreApplication>
#include <QDir>
#include <QFile>
#include <QJsonDocument>
#include <QJsonObject>
#include <QSysInfo>
#include <QThread>

#include <fcntl.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include "tandem/error.h"

namespace tandem::ui {
namespace {

QString lockPath(const QString& runDir) { return QDir(runDir).filePath(QString::fromLatin1(kRunLockName)); }

QString tr(const char* text) { return QCoreApplication::translate("tandem::ui::RunLock", text); }

QString errnoText(int err) {
    if (err == ENOSPC) return tr("no space left on the device; free some space there");
    return QString::fromLocal8Bit(std::strerror(err));
}

// True when `path` still names the file open as `fd` (it was not unlinked, or replaced, meanwhile).
bool pathNamesFile(const QByteArray& path, int fd) {
    struct stat opened {}, named {};
    return ::fstat(fd, &opened) == 0 && ::stat(path.constData(), &named) == 0 && opened.st_dev == named.st_dev &&
           opened.st_ino == named.st_ino;
}

// The pid, host and start time the session wrote (a few hundred bytes); fields it lacks stay empty.
void readContent(int fd, RunLockProbe& probe) {
    char buf[4096];
    const ssize_t n = ::pread(fd, buf, sizeof buf, 0);
    if (n <= 0) return;
    const QJsonObject o = QJsonDocument::fromJson(QByteArray(buf, static_cast<qsizetype>(n))).object();
    probe.pid = o.value(QStringLiteral("pid")).toInteger();
    probe.host = o.value(QStringLiteral("host")).toString();
    probe.started = QDateTime::fromString(o.value(QStringLiteral("started")).toString(), Qt::ISODateWithMs);
}

QByteArray content() {
    const QJsonObject o{
        {QStringLiteral("pid"), static_cast<qint64>(::getpid())},
        {QStringLiteral("host"), QSysInfo::machineHostName()},
        {QStringLiteral("started"), QDateTime::currentDateTimeUtc().toString(Qt::ISODateWithMs)},
    };
    return QJsonDocument(o).toJson(QJsonDocument::Compact) + '\n';
}

}  // namespace

RunLockProbe probeRunLock(const QString& runDir) {
    RunLockProbe probe;
    const QByteArray path = QFile::encodeName(lockPath(runDir));
    const int fd = ::open(path.constData(), O_RDONLY | O_CLOEXEC);
    if (fd < 0) return probe;
    readContent(fd, probe);
    if (::flock(fd, LOCK_SH | LOCK_NB) == 0) {
        // Nobody holds it. Stale, unless its session removed it a moment ago (then there is nothing to report).
        if (pathNamesFile(path, fd)) probe.state = RunLockState::Stale;
        ::flock(fd, LOCK_UN);
    } else if (errno == EWOULDBLOCK) {
        probe.state = RunLockState::Held;
    }
    ::close(fd);
    return probe;
}

QString describeLockHolder(const RunLockProbe& probe) {
    if (probe.pid <= 0) return tr("another Tandem process");
    const QString process = tr("Tandem process %1").arg(probe.pid);
    return probe.host.isEmpty() || probe.host == QSysInfo::machineHostName()
               ? process
               : tr("%1 on %2").arg(process, probe.host);
}

RunLock::RunLock(const QString& runDir) : m_path(lockPath(runDir)) {
    const QByteArray path = QFile::encodeName(m_path);
    // A probe holds its shared lock for microseconds: a few tries tell it from a session that trains the run.
    constexpr int kTries = 5;
    for (int attempt = 1;; ++attempt) {
        const int fd = ::open(path.constData(), O_RDWR | O_CREAT | O_CLOEXEC, 0644);
        if (fd < 0) {
            const int err = errno;
            throw tandem::Error(
                tandem::ErrorCategory::Io,
                tr("%1: cannot create the run's lock file (%2). The run folder must be writable to train in it: "
                   "check its permissions and free space.")
                    .arg(m_path, errnoText(err))
                    .toStdString());
        }
        if (::flock(fd, LOCK_EX | LOCK_NB) != 0) {
            const int err = errno;
            if (err != EWOULDBLOCK) {  // no flock on this filesystem: claim nothing (run_lock.h), leave nothing
                struct stat st {};
                if (::fstat(fd, &st) == 0 && st.st_size == 0) ::unlink(path.constData());
                ::close(fd);
                return;
            }
            if (attempt < kTries) {
                ::close(fd);
                QThread::msleep(20);
                continue;
            }
            RunLockProbe holder;
            readContent(fd, holder);
            ::close(fd);
            throw tandem::Error(tandem::ErrorCategory::InvalidInput,
                                tr("%1 is being trained by %2 right now. Stop it there first, or wait until it "
                                   "ends.")
                                    .arg(runDir, describeLockHolder(holder))
                                    .toStdString());
        }
        if (pathNamesFile(path, fd)) {
            m_fd = fd;
            break;
        }
        ::close(fd);  // its session removed it between our open and flock: claim a new one
    }
    const QByteArray bytes = content();
    const ssize_t written = ::ftruncate(m_fd, 0) == 0 ? ::pwrite(m_fd, bytes.constData(), bytes.size(), 0) : -1;
    if (written != bytes.size()) {
        const int err = written < 0 ? errno : ENOSPC;  // a short write of a few bytes: the disk is full
        ::unlink(path.constData());
        ::close(m_fd);
        m_fd = -1;
        throw tandem::Error(tandem::ErrorCategory::Io,
                            tr("%1: cannot write the run's lock file (%2).").arg(m_path, errnoText(err)).toStdString());
    }
}

RunLock::~RunLock() {
    if (m_fd < 0) return;
    ::unlink(QFile::encodeName(m_path).constData());  // while still locked: see run_lock.h
    ::close(m_fd);
}

}  // namespace tandem::ui
