// SPDX-FileCopyrightText: 2026 The Tandem developers
// SPDX-License-Identifier: GPL-3.0-or-later
// The watched communicator (see watched_communicator.h).
#include "train/watched_communicator.h"

#include <poll.h>
#include <sys/socket.h>

#include <chrono>
#include <cstdint>

#include "tandem/error.h"

namespace tandem {

namespace {

constexpr char kGoodbye = 'B', kAbort = 'A';
constexpr size_t kMaxReason = 4096;

}  // namespace

WatchedCommunicator::WatchedCommunicator(std::unique_ptr<Communicator> inner, Rendezvous rv)
    : inner_(std::move(inner)), rv_(std::move(rv)), gone_(rv_.links.size(), 0) {
    if (!inner_) throw_internal("watched communicator: no communicator");
    for (size_t k = 0; k < rv_.links.size(); ++k)
        if (!rv_.links[k].valid()) gone_[k] = 1;  // node 0's own slot; the other nodes' links to each other
    thread_ = std::thread([this] { watch(); });
}

WatchedCommunicator::~WatchedCommunicator() {
    stop_.store(true);
    if (thread_.joinable()) thread_.join();
    if (!aborted_.load()) tell(kGoodbye, {});
}

void WatchedCommunicator::abort(const std::string& reason) {
    if (aborted_.exchange(true)) return;
    tell(kAbort, reason);  // first: the others learn it even if NCCL's abort takes its time
    inner_->abort(reason);
}

void WatchedCommunicator::tell(char type, const std::string& reason) {
    std::string msg(1, type);
    if (type == kAbort) {
        const std::string text = reason.substr(0, kMaxReason);
        net::put_u32(msg, uint32_t(text.size()));
        msg += text;
    }
    std::lock_guard<std::mutex> lock(m_);
    for (size_t k = 0; k < rv_.links.size(); ++k) {
        if (gone_[k]) continue;
        try {  // best effort, briefly: a node that is gone cannot be told
            net::send_all(rv_.links[k], msg.data(), msg.size(), net::Clock::now() + std::chrono::seconds(2), 2,
                          rv_.describe(int(k)), "a message to the other nodes");
        } catch (const std::exception&) {
        }
    }
}

void WatchedCommunicator::watch() {
    while (!stop_.load()) {
        std::vector<pollfd> fds;
        std::vector<size_t> node;
        {
            std::lock_guard<std::mutex> lock(m_);
            for (size_t k = 0; k < rv_.links.size(); ++k)
                if (!gone_[k]) {
                    fds.push_back({rv_.links[k].fd(), POLLIN, 0});
                    node.push_back(k);
                }
        }
        if (fds.empty()) return;
        if (::poll(fds.data(), fds.size(), 100) <= 0) continue;
        for (size_t i = 0; i < fds.size(); ++i) {
            if (!fds[i].revents) continue;
            const size_t k = node[i];
            const std::string who = rv_.describe(int(k));
            char type = 0;
            const ssize_t got = ::recv(fds[i].fd, &type, 1, MSG_DONTWAIT);
            if (got < 0 && (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR)) continue;
            std::string reason;
            if (got == 1 && type == kGoodbye) {
                std::lock_guard<std::mutex> lock(m_);
                gone_[k] = 1;
                continue;
            }
            if (got == 1 && type == kAbort) {
                try {
                    char len[4];
                    const auto deadline = net::Clock::now() + std::chrono::seconds(2);
                    net::recv_all(rv_.links[k], len, 4, deadline, 2, who, "an abort");
                    std::string_view in(len, 4);
                    const uint32_t n = net::get_u32(in);
                    std::string text(std::min<size_t>(n, kMaxReason), '\0');
                    net::recv_all(rv_.links[k], text.data(), text.size(), deadline, 2, who, "an abort");
                    reason = "data parallel: " + who + " stopped the run: " + text;
                } catch (const std::exception&) {
                    reason = "data parallel: " + who + " stopped the run (its reason was cut off)";
                }
            } else {
                reason = "data parallel: " + who + " ended without a word (its process was killed or crashed, or "
                         "the network failed); every node stops. Resume the run from its last checkpoint";
            }
            {
                std::lock_guard<std::mutex> lock(m_);
                gone_[k] = 1;
            }
            abort(reason);
        }
    }
}

}  // namespace tandem
