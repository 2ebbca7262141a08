// SPDX-FileCopyrightText: 2026 The Tandem developers
// SPDX-License-Identifier: GPL-3.0-or-later
// Shared by `tandem-cli download` and `train --model ORG/NAME`: a one-line progress meter on stderr (bytes,
// speed, ETA; redrawn in place on a terminal, a line every few seconds otherwise) and Ctrl-C as the hub's
// cancel flag while a download runs.
#pragma once

#include <unistd.h>

#include <atomic>
#include <chrono>
#include <csignal>
#include <memory>
#include <cstdio>
#include <string>

#include "tandem/hub.h"

namespace tandem::cli {

inline std::atomic<bool> g_hub_cancel{false};
extern "C" inline void on_hub_sigint(int) { g_hub_cancel.store(true); }

// Installs the SIGINT handler for its lifetime.
class HubSigint {
   public:
    HubSigint() {
        g_hub_cancel.store(false);
        struct sigaction sa {};
        sa.sa_handler = on_hub_sigint;
        sigemptyset(&sa.sa_mask);
        sigaction(SIGINT, &sa, &old_);
    }
    ~HubSigint() { sigaction(SIGINT, &old_, nullptr); }
    HubSigint(const HubSigint&) = delete;
    HubSigint& operator=(const HubSigint&) = delete;

   private:
    struct sigaction old_ {};
};

inline std::string format_duration(double s) {
    if (s < 0) return "?";
    const long t = static_cast<long>(s + 0.5);
    char buf[32];
    if (t >= 3600) std::snprintf(buf, sizeof buf, "%ldh%02ldm", t / 3600, (t / 60) % 60);
    else if (t >= 60) std::snprintf(buf, sizeof buf, "%ldm%02lds", t / 60, t % 60);
    else std::snprintf(buf, sizeof buf, "%lds", t);
    return buf;
}

// A progress callback printing to stderr.
inline hub::ProgressFn stderr_progress() {
    const bool tty = isatty(STDERR_FILENO) != 0;
    auto last = std::make_shared<std::chrono::steady_clock::time_point>(std::chrono::steady_clock::now());
    return [tty, last](const hub::DownloadProgress& p) {
        const auto now = std::chrono::steady_clock::now();
        const bool end = p.files_done == p.files_total && p.file.empty();
        if (!tty && !end && now - *last < std::chrono::seconds(5)) return;
        *last = now;
        const double pct = p.bytes_total > 0 ? 100.0 * static_cast<double>(p.bytes_done) / static_cast<double>(p.bytes_total) : 100.0;
        std::fprintf(stderr, "%s%5.1f%% %s / %s  %s/s  ETA %s  files %d/%d%s", tty ? "\r\033[K" : "", pct,
                     hub::format_bytes(p.bytes_done).c_str(), hub::format_bytes(p.bytes_total).c_str(),
                     hub::format_bytes(static_cast<int64_t>(p.bytes_per_s)).c_str(), format_duration(p.eta_s).c_str(),
                     p.files_done, p.files_total, tty && !end ? "" : "\n");
        std::fflush(stderr);
    };
}

// Options from the environment, with notices printed on stderr.
inline hub::HubOptions cli_hub_options() {
    hub::HubOptions o = hub::hub_options_from_env();
    o.notice = [](const std::string& s) { std::fprintf(stderr, "\nnote: %s\n", s.c_str()); };
    return o;
}

}  // namespace tandem::cli
