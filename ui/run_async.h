// SPDX-FileCopyrightText: 2026 The Tandem developers
// SPDX-License-Identifier: GPL-3.0-or-later
// The one way the pages run engine work off the GUI thread: `job` runs on the global QThreadPool
// (QtConcurrent::run), `done(result)` runs on `owner`'s thread when it finishes — unless `owner` was
// destroyed first (the watcher is its child). Jobs capture values only, never the page, so a page may
// close while its job still runs. Callers drop stale results with their own generation counters.
#pragma once

#include <QFutureWatcher>
#include <QObject>
#include <QtConcurrent>

#include <utility>

namespace tandem::ui {

template <typename Job, typename Done>
void runAsync(QObject* owner, Job job, Done done) {
    using Result = decltype(job());
    auto* watcher = new QFutureWatcher<Result>(owner);
    QObject::connect(watcher, &QFutureWatcher<Result>::finished, owner, [watcher, done = std::move(done)] {
        watcher->deleteLater();
        done(watcher->result());
    });
    watcher->setFuture(QtConcurrent::run(std::move(job)));
}

}  // namespace tandem::ui
