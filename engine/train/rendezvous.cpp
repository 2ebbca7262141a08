// SPDX-FileCopyrightText: 2026 The Tandem developers
// SPDX-License-Identifier: GPL-3.0-or-later
// The TCP rendezvous of a multi-process data-parallel run and the deadline-bound socket helpers (see
// rendezvous.h). Every socket is non-blocking and every wait is a poll of at most kSliceMs, so a deadline, an
// abort (Check) or a signal is noticed promptly.
#include "train/rendezvous.h"

#include <fcntl.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <map>
#include <optional>
#include <sstream>
#include <thread>

#include "tandem/error.h"

namespace tandem {

Socket& Socket::operator=(Socket&& o) noexcept {
    if (this != &o) {
        if (fd_ >= 0) ::close(fd_);
        fd_ = std::exchange(o.fd_, -1);
    }
    return *this;
}

Socket::~Socket() {
    if (fd_ >= 0) ::close(fd_);
}

void Socket::shutdown() {
    if (fd_ >= 0) ::shutdown(fd_, SHUT_RDWR);
}

namespace net {

namespace {

constexpr int kSliceMs = 100;

std::string seconds(double s) {
    std::ostringstream o;
    o << s << " s";
    return o.str();
}

// Waits until fd is ready for `events` (or has an error, which the next call reports); false at the deadline.
bool wait_ready(int fd, short events, Clock::time_point deadline, const Check& check) {
    while (true) {
        if (check) check();
        const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - Clock::now()).count();
        pollfd p{fd, events, 0};
        const int r = ::poll(&p, 1, int(std::clamp<long long>(left, 0, kSliceMs)));
        if (r > 0) return true;
        if (r < 0 && errno != EINTR) return true;  // the send/recv that follows reports the error
        if (Clock::now() >= deadline) return false;
    }
}

[[noreturn]] void throw_lost(const std::string& peer, const std::string& during, const std::string& how) {
    throw_io("data parallel: " + peer + " " + how + " during " + during +
             ": that process ended (stopped, killed or failed; see its output) or the network between the nodes failed");
}

}  // namespace

void send_all(const Socket& s, const void* data, size_t n, Clock::time_point deadline, double timeout_s,
              const std::string& peer, const std::string& during, const Check& check) {
    const char* p = static_cast<const char*>(data);
    while (n > 0) {
        if (!wait_ready(s.fd(), POLLOUT, deadline, check))
            throw_io("data parallel: " + peer + " took no data for " + seconds(timeout_s) + " during " + during +
                     ": it is hung, or slower than this node by that much (raise --dist-timeout then)");
        const ssize_t k = ::send(s.fd(), p, n, MSG_NOSIGNAL);
        if (k < 0) {
            if (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR) continue;
            throw_lost(peer, during, std::string("dropped the connection (") + std::strerror(errno) + ")");
        }
        p += k;
        n -= size_t(k);
    }
}

void recv_all(const Socket& s, void* data, size_t n, Clock::time_point deadline, double timeout_s,
              const std::string& peer, const std::string& during, const Check& check) {
    char* p = static_cast<char*>(data);
    while (n > 0) {
        if (!wait_ready(s.fd(), POLLIN, deadline, check))
            throw_io("data parallel: " + peer + " sent nothing for " + seconds(timeout_s) + " during " + during +
                     ": it is hung, or slower than this node by that much (raise --dist-timeout then)");
        const ssize_t k = ::recv(s.fd(), p, n, 0);
        if (k == 0) throw_lost(peer, during, "closed the connection");
        if (k < 0) {
            if (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR) continue;
            throw_lost(peer, during, std::string("dropped the connection (") + std::strerror(errno) + ")");
        }
        p += k;
        n -= size_t(k);
    }
}

void put_u32(std::string& out, uint32_t v) {
    for (int i = 0; i < 4; ++i) out.push_back(char((v >> (8 * i)) & 0xff));
}
void put_u64(std::string& out, uint64_t v) {
    for (int i = 0; i < 8; ++i) out.push_back(char((v >> (8 * i)) & 0xff));
}
void put_str(std::string& out, std::string_view s) {
    put_u32(out, uint32_t(s.size()));
    out.append(s);
}
uint32_t get_u32(std::string_view& in) {
    if (in.size() < 4) throw_io("data parallel: a truncated message from another node");
    uint32_t v = 0;
    for (int i = 0; i < 4; ++i) v |= uint32_t(uint8_t(in[size_t(i)])) << (8 * i);
    in.remove_prefix(4);
    return v;
}
uint64_t get_u64(std::string_view& in) {
    const uint64_t lo = get_u32(in);
    return lo | (uint64_t(get_u32(in)) << 32);
}
std::string get_str(std::string_view& in) {
    const uint32_t n = get_u32(in);
    if (in.size() < n) throw_io("data parallel: a truncated message from another node");
    std::string s(in.substr(0, n));
    in.remove_prefix(n);
    return s;
}

}  // namespace net

using net::Clock;

namespace {

constexpr char kMagic[8] = {'T', 'A', 'N', 'D', 'M', 'R', 'D', 'V'};
constexpr uint32_t kProtocol = 1;
constexpr uint32_t kMaxMessage = 64u << 20;  // a hello or reply larger than this is not from a Tandem node
constexpr uint32_t kOk = 0, kRefused = 1, kGaveUp = 2;

std::string seconds(double s) {
    std::ostringstream o;
    o << s << " s";
    return o.str();
}

std::string errno_text(int e) { return std::strerror(e); }

std::string sockaddr_text(const sockaddr_storage& sa, socklen_t len) {
    char host[NI_MAXHOST] = "?", serv[NI_MAXSERV] = "?";
    ::getnameinfo(reinterpret_cast<const sockaddr*>(&sa), len, host, sizeof host, serv, sizeof serv,
                  NI_NUMERICHOST | NI_NUMERICSERV);
    const std::string h = host;
    return (h.find(':') != std::string::npos ? "[" + h + "]" : h) + ":" + serv;
}

void set_nodelay(int fd) {
    const int one = 1;
    ::setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);  // small collectives (a loss) go out at once
}

// A framed message: magic, protocol, payload length, payload.
void send_message(const Socket& s, const std::string& payload, Clock::time_point deadline, double timeout_s,
                  const std::string& peer) {
    std::string m(kMagic, sizeof kMagic);
    net::put_u32(m, kProtocol);
    net::put_u32(m, uint32_t(payload.size()));
    m += payload;
    net::send_all(s, m.data(), m.size(), deadline, timeout_s, peer, "the rendezvous");
}

struct Message {
    bool tandem = false;  // the magic matched
    uint32_t protocol = 0;
    std::string payload;
};
Message recv_message(const Socket& s, Clock::time_point deadline, double timeout_s, const std::string& peer) {
    char head[sizeof kMagic + 8];
    net::recv_all(s, head, sizeof head, deadline, timeout_s, peer, "the rendezvous");
    Message m;
    m.tandem = std::memcmp(head, kMagic, sizeof kMagic) == 0;
    if (!m.tandem) return m;
    std::string_view rest(head + sizeof kMagic, 8);
    m.protocol = net::get_u32(rest);
    const uint32_t n = net::get_u32(rest);
    if (m.protocol != kProtocol) return m;
    if (n > kMaxMessage) {
        m.tandem = false;
        return m;
    }
    m.payload.resize(n);
    net::recv_all(s, m.payload.data(), n, deadline, timeout_s, peer, "the rendezvous");
    return m;
}

std::string shorten(const std::string& v) { return v.size() <= 80 ? v : v.substr(0, 77) + "..."; }

// "" when equal; else what differs, part by part.
std::string fingerprint_difference(const std::vector<FingerprintPart>& mine, const std::vector<FingerprintPart>& theirs,
                                   int rank) {
    std::map<std::string, std::string> a(mine.begin(), mine.end()), b(theirs.begin(), theirs.end());
    std::vector<std::string> diffs;
    for (const auto& [k, v] : a) {
        const auto it = b.find(k);
        if (it == b.end()) diffs.push_back(k + " (missing on node rank " + std::to_string(rank) + ")");
        else if (it->second != v)
            diffs.push_back(k + ": node rank 0 has " + shorten(v) + ", node rank " + std::to_string(rank) + " has " +
                            shorten(it->second));
    }
    for (const auto& [k, v] : b)
        if (!a.count(k)) diffs.push_back(k + " (missing on node rank 0)");
    std::string out;
    for (size_t i = 0; i < diffs.size() && i < 8; ++i) out += (i ? "; " : "") + diffs[i];
    if (diffs.size() > 8) out += "; and " + std::to_string(diffs.size() - 8) + " more";
    return out;
}

Rendezvous rendezvous_node0(const RendezvousOptions& o, RendezvousListener* listener) {
    std::optional<RendezvousListener> own;
    if (!listener) listener = &own.emplace(o.address);
    const auto deadline = Clock::now() + std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double>(o.timeout_s));
    const std::string where = o.address.text();
    Rendezvous rv;
    rv.nodes = o.nodes;
    rv.node_rank = 0;
    rv.blob = o.blob;
    rv.timeout_s = o.timeout_s;
    rv.links.resize(size_t(o.nodes));
    rv.peers.assign(size_t(o.nodes), "");
    rv.peers[0] = where;
    std::string refusal;
    uint32_t refusal_status = kRefused;
    // The answer: node 0's blob and the peers, or the refusal (the same for every node).
    const auto reply = [&] {
        std::string r;
        net::put_u32(r, refusal.empty() ? kOk : refusal_status);
        net::put_str(r, refusal);
        net::put_str(r, rv.blob);
        net::put_u32(r, uint32_t(o.nodes));
        for (const std::string& peer : rv.peers) net::put_str(r, peer);
        return r;
    };
    std::vector<Socket> others;  // nodes told the refusal (they stay open until node 0 returns)
    const auto refuse = [&](Socket s) {
        try {
            send_message(s, reply(), Clock::now() + std::chrono::seconds(5), 5, "a node");
        } catch (const Error&) {
        }
        others.push_back(std::move(s));
    };
    const auto refuse_joined = [&] {
        for (int r = 1; r < o.nodes; ++r)
            if (rv.links[size_t(r)].valid()) refuse(std::move(rv.links[size_t(r)]));
    };
    int joined = 0;
    // Once the run is refused, node 0 goes on answering the nodes that have not connected yet with the refusal
    // for a short while (they are usually started together), so that they fail at once too, not at their timeout.
    std::optional<Clock::time_point> linger;
    while ((refusal.empty() ? joined : int(others.size())) < o.nodes - 1) {
        pollfd p{listener->socket().fd(), POLLIN, 0};
        const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(linger.value_or(deadline) - Clock::now()).count();
        if (linger && left <= 0) break;
        if (left <= 0) {
            std::string missing, present;
            for (int r = 1; r < o.nodes; ++r) {
                std::string& list = rv.links[size_t(r)].valid() ? present : missing;
                list += (list.empty() ? "" : ", ") + std::to_string(r);
            }
            refusal = "node rank 0 waited " + seconds(o.timeout_s) + " at " + where + " for node rank(s) " + missing +
                      " to join (joined: " + (present.empty() ? "none" : present) + "); start every node with --nodes " +
                      std::to_string(o.nodes) + " --node-rank R --rendezvous " + where +
                      ", check that they reach this address (firewall), or raise --dist-timeout";
            refusal_status = kGaveUp;
            break;
        }
        const int r = ::poll(&p, 1, int(std::min<long long>(left, 100)));
        if (r <= 0) continue;
        sockaddr_storage sa{};
        socklen_t len = sizeof sa;
        const int fd = ::accept4(p.fd, reinterpret_cast<sockaddr*>(&sa), &len, SOCK_NONBLOCK | SOCK_CLOEXEC);
        if (fd < 0) continue;
        Socket c(fd);
        set_nodelay(fd);
        const std::string from = sockaddr_text(sa, len);
        // A node sends its hello right after connecting: a stray connection (a port scan) gets 10 s and is dropped.
        Message m;
        try {
            m = recv_message(c, std::min(deadline, Clock::now() + std::chrono::seconds(10)), 10, "a node at " + from);
        } catch (const Error&) {
            continue;
        }
        if (!m.tandem) continue;
        if (!refusal.empty()) {
            refuse(std::move(c));
            continue;
        }
        if (m.protocol != kProtocol) {
            refusal = "the node at " + from + " speaks rendezvous protocol " + std::to_string(m.protocol) +
                      ", node rank 0 speaks " + std::to_string(kProtocol) + ": run the same Tandem version on every node";
            refuse(std::move(c));
            refuse_joined();
            linger = std::min(deadline, Clock::now() + std::chrono::seconds(5));
            continue;
        }
        int rank = -1, nodes = 0;
        std::vector<FingerprintPart> parts;
        try {
            std::string_view in(m.payload);
            rank = int(net::get_u32(in));
            nodes = int(net::get_u32(in));
            const uint32_t count = net::get_u32(in);
            for (uint32_t i = 0; i < count; ++i) {
                std::string k = net::get_str(in);
                parts.emplace_back(std::move(k), net::get_str(in));
            }
            (void)net::get_str(in);  // its blob: only node 0's is used
        } catch (const Error&) {
            continue;  // not a well-formed hello
        }
        const std::string who = "node rank " + std::to_string(rank) + " (" + from + ")";
        if (nodes != o.nodes) {
            refusal = who + " was started with --nodes " + std::to_string(nodes) + ", node rank 0 with --nodes " +
                      std::to_string(o.nodes) + ": give every node the same --nodes";
        } else if (rank < 1 || rank >= o.nodes) {
            refusal = "the node at " + from + " was started with --node-rank " + std::to_string(rank) +
                      (rank == 0 ? ", which is node rank 0's own (this process at " + where + ")"
                                 : ", outside 0.." + std::to_string(o.nodes - 1) + " for --nodes " + std::to_string(o.nodes)) +
                      ": give each node its own --node-rank from 0 to " + std::to_string(o.nodes - 1);
        } else if (rv.links[size_t(rank)].valid()) {
            refusal = "two nodes claim node rank " + std::to_string(rank) + ": " + rv.peers[size_t(rank)] + " and " +
                      from + "; give each node its own --node-rank";
        } else if (const std::string d = fingerprint_difference(o.fingerprint, parts, rank); !d.empty()) {
            refusal = who + " is set up differently from node rank 0: " + d +
                      ". Every node must train the same settings on the same data and model, and resume from the "
                      "same checkpoint (copy the run folder to every node)";
        }
        if (!refusal.empty()) {
            refuse(std::move(c));
            refuse_joined();
            linger = std::min(deadline, Clock::now() + std::chrono::seconds(5));
            continue;
        }
        rv.links[size_t(rank)] = std::move(c);
        rv.peers[size_t(rank)] = from;
        ++joined;
    }
    if (!refusal.empty()) {
        refuse_joined();  // those that joined before node 0 gave up waiting
    } else {
        const std::string ok = reply();
        const auto reply_deadline = Clock::now() + std::chrono::duration_cast<Clock::duration>(
                                                       std::chrono::duration<double>(o.timeout_s));
        for (int r = 1; r < o.nodes; ++r) send_message(rv.links[size_t(r)], ok, reply_deadline, o.timeout_s, rv.describe(r));
    }
    if (refusal_status == kGaveUp) throw_io("data parallel rendezvous: " + refusal);
    if (!refusal.empty()) throw_invalid("data parallel rendezvous at " + where + ": " + refusal);
    return rv;
}

// Connects to node 0, retrying while nothing listens there yet.
Socket connect_node0(const RendezvousOptions& o, Clock::time_point deadline) {
    const std::string where = o.address.text();
    std::string last = "nothing listened there";
    while (true) {
        if (Clock::now() >= deadline)
            throw_io("data parallel rendezvous: no node rank 0 answered at " + where + " within " + seconds(o.timeout_s) +
                     " (" + last + "); start node rank 0 with --nodes " + std::to_string(o.nodes) + " --node-rank 0 "
                     "--rendezvous " + where + ", check the address and that the port is reachable, or raise --dist-timeout");
        addrinfo hints{};
        hints.ai_family = AF_UNSPEC;
        hints.ai_socktype = SOCK_STREAM;
        hints.ai_flags = AI_NUMERICSERV;
        addrinfo* res = nullptr;
        const int rc = ::getaddrinfo(o.address.host.c_str(), std::to_string(o.address.port).c_str(), &hints, &res);
        if (rc == EAI_NONAME)
            throw_invalid("rendezvous address " + where + ": cannot resolve the host '" + o.address.host + "' (" +
                          ::gai_strerror(rc) + "); give node rank 0's address or name");
        if (rc != 0) last = std::string("cannot resolve the host: ") + ::gai_strerror(rc);
        for (addrinfo* ai = rc == 0 ? res : nullptr; ai; ai = ai->ai_next) {
            Socket s(::socket(ai->ai_family, ai->ai_socktype | SOCK_NONBLOCK | SOCK_CLOEXEC, ai->ai_protocol));
            if (!s.valid()) {
                last = errno_text(errno);
                continue;
            }
            int err = 0;
            if (::connect(s.fd(), ai->ai_addr, ai->ai_addrlen) != 0) {
                err = errno;
                if (err == EINPROGRESS) {
                    pollfd p{s.fd(), POLLOUT, 0};
                    const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - Clock::now()).count();
                    const int r = ::poll(&p, 1, int(std::clamp<long long>(left, 0, 2000)));
                    socklen_t len = sizeof err;
                    if (r <= 0) err = ETIMEDOUT;
                    else if (::getsockopt(s.fd(), SOL_SOCKET, SO_ERROR, &err, &len) != 0) err = errno;
                }
            }
            if (err == 0) {
                ::freeaddrinfo(res);
                set_nodelay(s.fd());
                return s;
            }
            last = errno_text(err);
        }
        if (res) ::freeaddrinfo(res);
        const auto left = deadline - Clock::now();
        std::this_thread::sleep_for(std::min<Clock::duration>(std::max<Clock::duration>(left, Clock::duration(0)),
                                                              std::chrono::milliseconds(200)));
    }
}

Rendezvous rendezvous_other(const RendezvousOptions& o) {
    const auto deadline = Clock::now() + std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double>(o.timeout_s));
    const std::string where = o.address.text();
    const std::string node0 = "node rank 0 (" + where + ")";
    Socket s = connect_node0(o, deadline);
    std::string hello;
    net::put_u32(hello, uint32_t(o.node_rank));
    net::put_u32(hello, uint32_t(o.nodes));
    net::put_u32(hello, uint32_t(o.fingerprint.size()));
    for (const auto& [k, v] : o.fingerprint) {
        net::put_str(hello, k);
        net::put_str(hello, v);
    }
    net::put_str(hello, o.blob);
    send_message(s, hello, deadline, o.timeout_s, node0);
    Message m;
    try {
        // Node 0 answers by its own deadline, at the latest (maybe that it gave up waiting for another node):
        // a little grace lets its answer arrive rather than a timeout of this node's own.
        m = recv_message(s, deadline + std::chrono::seconds(5), o.timeout_s, node0);
    } catch (const Error& e) {
        throw Error(e.category(), std::string(e.what()) + " (node rank 0 answers once all " + std::to_string(o.nodes) +
                                      " nodes have joined: are they all started?)");
    }
    if (!m.tandem) throw_io("data parallel rendezvous: what listens at " + where + " is not a Tandem node rank 0");
    if (m.protocol != kProtocol)
        throw_invalid("data parallel rendezvous: node rank 0 at " + where + " speaks rendezvous protocol " +
                      std::to_string(m.protocol) + ", this node " + std::to_string(kProtocol) +
                      ": run the same Tandem version on every node");
    std::string_view in(m.payload);
    const uint32_t status = net::get_u32(in);
    const std::string message = net::get_str(in);
    if (status == kGaveUp) throw_io("data parallel rendezvous: " + message);
    if (status != kOk) throw_invalid("data parallel rendezvous at " + where + " refused: " + message);
    Rendezvous rv;
    rv.nodes = o.nodes;
    rv.node_rank = o.node_rank;
    rv.timeout_s = o.timeout_s;
    rv.blob = net::get_str(in);
    const uint32_t n = net::get_u32(in);
    if (int(n) != o.nodes) throw_io("data parallel rendezvous: node rank 0 sent a peer list of another size");
    for (uint32_t i = 0; i < n; ++i) rv.peers.push_back(net::get_str(in));
    rv.links.resize(size_t(o.nodes));
    rv.links[0] = std::move(s);
    return rv;
}

}  // namespace

std::string RendezvousAddress::text() const {
    return (host.find(':') != std::string::npos ? "[" + host + "]" : host) + ":" + std::to_string(port);
}

RendezvousAddress parse_rendezvous_address(std::string_view text) {
    const auto bad = [&](const std::string& why) {
        throw_invalid("rendezvous address '" + std::string(text) + "': " + why +
                      "; expected HOST:PORT, the address node rank 0 listens on and the others reach it at, e.g. "
                      "10.0.0.1:29500 (IPv6: [fd00::1]:29500)");
    };
    std::string_view host, port;
    if (!text.empty() && text.front() == '[') {
        const size_t close = text.find(']');
        if (close == std::string_view::npos) bad("no ']' after the IPv6 address");
        host = text.substr(1, close - 1);
        if (close + 1 >= text.size() || text[close + 1] != ':') bad("no ':PORT' after the address");
        port = text.substr(close + 2);
    } else {
        const size_t colon = text.rfind(':');
        if (colon == std::string_view::npos) bad("no ':PORT'");
        host = text.substr(0, colon);
        port = text.substr(colon + 1);
        if (host.find(':') != std::string_view::npos) bad("an IPv6 address goes in brackets");
    }
    if (host.empty()) bad("no HOST");
    if (port.empty() || port.size() > 5 || !std::all_of(port.begin(), port.end(), [](char c) { return c >= '0' && c <= '9'; }))
        bad("PORT must be a number from 1 to 65535");
    const int p = std::stoi(std::string(port));
    if (p < 1 || p > 65535) bad("PORT must be a number from 1 to 65535");
    return {std::string(host), p};
}

RendezvousListener::RendezvousListener(const RendezvousAddress& address) {
    const std::string where = address.text();
    addrinfo hints{};
    hints.ai_family = AF_UNSPEC;
    hints.ai_socktype = SOCK_STREAM;
    hints.ai_flags = AI_PASSIVE | AI_NUMERICSERV;
    addrinfo* res = nullptr;
    const int rc = ::getaddrinfo(address.host.c_str(), std::to_string(address.port).c_str(), &hints, &res);
    if (rc != 0)
        throw_invalid("rendezvous address " + where + ": cannot resolve the host '" + address.host + "' (" +
                      ::gai_strerror(rc) + ")");
    int err = 0;
    for (addrinfo* ai = res; ai && !socket_.valid(); ai = ai->ai_next) {
        Socket s(::socket(ai->ai_family, ai->ai_socktype | SOCK_NONBLOCK | SOCK_CLOEXEC, ai->ai_protocol));
        if (!s.valid()) {
            err = errno;
            continue;
        }
        const int one = 1;
        ::setsockopt(s.fd(), SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
        if (::bind(s.fd(), ai->ai_addr, ai->ai_addrlen) != 0 || ::listen(s.fd(), 64) != 0) {
            err = errno;
            continue;
        }
        socket_ = std::move(s);
    }
    ::freeaddrinfo(res);
    if (!socket_.valid()) {
        if (err == EADDRINUSE)
            throw_io("data parallel rendezvous: " + where + " is in use (another run or program listens on port " +
                     std::to_string(address.port) + "); give every node another --rendezvous port");
        if (err == EADDRNOTAVAIL)
            throw_invalid("data parallel rendezvous: " + address.host + " is not an address of this machine, and node "
                          "rank 0 listens on the --rendezvous address: run node rank 0 on the machine that has " +
                          address.host + ", or give one of this machine's addresses");
        throw_io("data parallel rendezvous: cannot listen on " + where + " (" + errno_text(err) + ")");
    }
    sockaddr_storage sa{};
    socklen_t len = sizeof sa;
    ::getsockname(socket_.fd(), reinterpret_cast<sockaddr*>(&sa), &len);
    port_ = sa.ss_family == AF_INET6 ? ntohs(reinterpret_cast<sockaddr_in6*>(&sa)->sin6_port)
                                     : ntohs(reinterpret_cast<sockaddr_in*>(&sa)->sin_port);
}

std::string Rendezvous::describe(int node) const {
    const std::string addr = node >= 0 && size_t(node) < peers.size() ? peers[size_t(node)] : "";
    return "node rank " + std::to_string(node) + (addr.empty() ? "" : " (" + addr + ")");
}

Rendezvous rendezvous(const RendezvousOptions& o, RendezvousListener* listener) {
    if (o.nodes < 1) throw_invalid("data parallel: --nodes " + std::to_string(o.nodes) + ": at least 1");
    if (o.node_rank < 0 || o.node_rank >= o.nodes)
        throw_invalid("data parallel: --node-rank " + std::to_string(o.node_rank) + " is outside 0.." +
                      std::to_string(o.nodes - 1) + " for --nodes " + std::to_string(o.nodes));
    if (!(o.timeout_s > 0)) throw_invalid("data parallel: the timeout must be positive");
    if (o.nodes == 1) {
        Rendezvous rv;
        rv.blob = o.blob;
        rv.peers = {o.address.text()};
        rv.links.resize(1);
        rv.timeout_s = o.timeout_s;
        return rv;
    }
    return o.node_rank == 0 ? rendezvous_node0(o, listener) : rendezvous_other(o);
}

}  // namespace tandem
