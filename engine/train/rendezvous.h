// SPDX-FileCopyrightText: 2026 The Tandem developers
// SPDX-License-Identifier: GPL-3.0-or-later
// The TCP rendezvous of a data-parallel run over several processes (tandem-cli train --nodes N --node-rank R
// --rendezvous HOST:PORT), and the socket helpers the socket communicator shares with it.
// Decisions a reader must know:
//  - Node 0 listens on HOST:PORT; every other node connects (retrying while nothing listens yet) and sends a
//    hello: its node rank, the node count, a fingerprint of what it is about to train (named parts: settings,
//    data, model, starting adapter, resume step) and an opaque blob. Node 0 checks them all (ranks in range
//    and unique, same node count, same fingerprint as its own) and answers every node at once: either its
//    blob (where a transport's id travels, e.g. an NCCL unique id) and the peer list, or one refusal message
//    that every node throws, naming what differs. The connections stay open: the socket communicator's
//    collectives run over them (a star around node 0).
//  - Nothing blocks without a deadline: every connect, accept, send and receive polls in short slices until
//    the options' timeout, so a node that never comes is an error naming HOST:PORT and how long it waited.
//  - Error categories: a malformed address, a node rank out of range or claimed twice, a node count or
//    fingerprint that differs -> InvalidInput (exit 2); a timeout, a refused or dropped connection -> Io.
//  - Integers travel little-endian; gradients travel as the host's IEEE floats (every supported host is
//    little-endian).
#pragma once

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace tandem {

// An owned socket file descriptor (closed on destruction).
class Socket {
public:
    Socket() = default;
    explicit Socket(int fd) : fd_(fd) {}
    Socket(Socket&& o) noexcept : fd_(std::exchange(o.fd_, -1)) {}
    Socket& operator=(Socket&& o) noexcept;
    Socket(const Socket&) = delete;
    Socket& operator=(const Socket&) = delete;
    ~Socket();
    int fd() const { return fd_; }
    bool valid() const { return fd_ >= 0; }
    void shutdown();  // wakes any poll on it; the fd stays open until destruction

private:
    int fd_ = -1;
};

namespace net {

using Clock = std::chrono::steady_clock;

// Called between poll slices while waiting; throws to give up (e.g. the communicator was aborted).
using Check = std::function<void()>;

// Sends / receives exactly n bytes before the deadline. `peer` names the other end in errors ("node rank 1
// (10.0.0.2:41234)"), `during` what was going on ("the rendezvous", "an all-reduce"). Errors: Io, naming the
// peer: it closed the connection, reset it, or sent nothing until the deadline (`timeout_s` is the figure the
// message gives, and what to raise).
void send_all(const Socket& s, const void* data, size_t n, Clock::time_point deadline, double timeout_s,
              const std::string& peer, const std::string& during, const Check& check = {});
void recv_all(const Socket& s, void* data, size_t n, Clock::time_point deadline, double timeout_s,
              const std::string& peer, const std::string& during, const Check& check = {});

// Little-endian framing of the rendezvous messages.
void put_u32(std::string& out, uint32_t v);
void put_u64(std::string& out, uint64_t v);
void put_str(std::string& out, std::string_view s);
uint32_t get_u32(std::string_view& in);  // Error{Io} when the message is too short
uint64_t get_u64(std::string_view& in);
std::string get_str(std::string_view& in);

}  // namespace net

struct RendezvousAddress {
    std::string host;  // a name or an address; IPv6 written in brackets on the command line: [::1]:29500
    int port = 0;
    std::string text() const;  // "host:port" ("[::1]:port" for IPv6)
};
// Parses HOST:PORT (PORT 1..65535). Error{InvalidInput} naming the text and the expected form.
RendezvousAddress parse_rendezvous_address(std::string_view text);

// One named part of what a node is about to train, compared with node 0's ("data" -> a hash).
using FingerprintPart = std::pair<std::string, std::string>;

struct RendezvousOptions {
    RendezvousAddress address;  // where node 0 listens
    int nodes = 1;
    int node_rank = 0;
    std::vector<FingerprintPart> fingerprint;  // every node's must equal node 0's, part by part
    std::string blob;                          // node 0's reaches every node (opaque here)
    double timeout_s = 600;                    // the whole rendezvous, for node 0 and for the others
};

// Node 0's listening socket. Opened before the rendezvous so that a test can listen on port 0 and hand the
// port the OS chose to the other nodes; rendezvous() opens one itself when given none.
class RendezvousListener {
public:
    explicit RendezvousListener(const RendezvousAddress& address);  // Error{Io}/{InvalidInput} naming it
    int port() const { return port_; }
    const Socket& socket() const { return socket_; }

private:
    Socket socket_;
    int port_ = 0;
};

struct Rendezvous {
    int nodes = 1;
    int node_rank = 0;
    std::string blob;                // node 0's
    std::vector<std::string> peers;  // [node rank] its address as node 0 saw it (node 0: the listen address)
    // The connections, by node rank: node 0 holds one to every other node ([0] is empty); every other node
    // holds only links[0], to node 0.
    std::vector<Socket> links;
    double timeout_s = 600;
    std::string describe(int node) const;  // "node rank 1 (10.0.0.2:41234)"
};

// Runs the rendezvous (see the top of this file). nodes == 1: returns at once with no links.
Rendezvous rendezvous(const RendezvousOptions& options, RendezvousListener* listener = nullptr);

}  // namespace tandem
