// SPDX-FileCopyrightText: 2026 The Tandem developers
// SPDX-License-Identifier: GPL-3.0-or-later
// Data parallelism across processes, with the processes played by threads over real sockets on 127.0.0.1
// (train/rendezvous.h, train/socket_communicator.h): the rendezvous' good path (3 nodes, node 0's blob and the
// peer list reach every node), malformed addresses, refused runs (fingerprint, node count, duplicate rank) and
// timeouts (short, so the suite is fast); the socket communicator gives exactly HostThreadCommunicator's bits
// (1 and 2 ranks per node), stops promptly on an abort, a closed connection or a silent peer; and
// DataParallelModel over sockets trains bit-identically to the same world of threads, and agrees on a stop. The
// watched communicator (how GPU processes keep their rendezvous links beside NCCL) stops every node at once when
// one is killed or fails, relayed by node 0, and lets a node that ends normally go without stopping the others.
#include <QTest>

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>

#include <atomic>
#include <chrono>
#include <cmath>
#include <cstring>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include <nlohmann/json.hpp>

#include "core/files.h"
#include "export/peft_adapter.h"
#include "tandem/data.h"
#include "tandem/error.h"
#include "tandem/model_config.h"
#include "tandem/run_config.h"
#include "data_parallel_support.h"
#include "test_support.h"
#include "train/backends.h"
#include "train/communicator.h"
#include "train/data_parallel.h"
#include "train/rendezvous.h"
#include "train/socket_communicator.h"
#include "train/watched_communicator.h"

using namespace tandem;
using tandem::test::expect_error;
namespace fs = std::filesystem;
using Seconds = std::chrono::duration<double>;

namespace {


std::vector<FingerprintPart> fingerprint(const std::string& data = "d1") {
    return {{"setting training.lr", "0.0002"}, {"data", data}, {"resume step", "0"}};
}

// Runs rendezvous() for every node rank on threads (node 0 on a listener at an OS-chosen port); each slot
// holds the node's Rendezvous or the error it threw. tweak may edit a node's options.
struct NodeResult {
    std::optional<Rendezvous> rv;
    std::optional<Error> error;
    double seconds = 0;
};
std::vector<NodeResult> run_nodes(int nodes, double timeout_s,
                                  const std::function<void(int, RendezvousOptions&)>& tweak = {}) {
    RendezvousListener listener({"127.0.0.1", 0});
    std::vector<NodeResult> out(static_cast<size_t>(nodes));
    std::vector<std::thread> threads;
    for (int r = 0; r < nodes; ++r)
        threads.emplace_back([&, r] {
            RendezvousOptions o;
            o.address = {"127.0.0.1", listener.port()};
            o.nodes = nodes;
            o.node_rank = r;
            o.fingerprint = fingerprint();
            o.blob = "blob of node " + std::to_string(r);
            o.timeout_s = timeout_s;
            if (tweak) tweak(r, o);
            const auto t0 = std::chrono::steady_clock::now();
            try {
                out[size_t(r)].rv = rendezvous(o, o.node_rank == 0 ? &listener : nullptr);
            } catch (const Error& e) {
                out[size_t(r)].error = e;
            }
            out[size_t(r)].seconds = Seconds(std::chrono::steady_clock::now() - t0).count();
        });
    for (auto& t : threads) t.join();
    return out;
}

std::string what(const NodeResult& n) { return n.error ? n.error->what() : std::string("(no error)"); }

// Communicators of a world of nodes x local ranks over sockets, one per node (connected by a rendezvous).
std::vector<std::unique_ptr<SocketCommunicator>> socket_world(int nodes, int local, double timeout_s = 30) {
    std::vector<NodeResult> rv = run_nodes(nodes, timeout_s);
    std::vector<std::unique_ptr<SocketCommunicator>> out;
    for (auto& n : rv) {
        if (!n.rv) qFatal("rendezvous failed: %s", what(n).c_str());
        out.push_back(std::make_unique<SocketCommunicator>(std::move(*n.rv), local));
    }
    return out;
}

// The inner communicator of a watched one: records the abort it gets (the watched one's job is to call it).
class RecordingCommunicator final : public Communicator {
public:
    explicit RecordingCommunicator(int rank) : rank_(rank) {}
    int size() const override { return 3; }
    int first_rank() const override { return rank_; }
    int local_size() const override { return 1; }
    void all_reduce_sum(int, float*, size_t) override {}
    void all_reduce_sum(int, double*, size_t) override {}
    void abort(const std::string& reason) override {
        std::lock_guard<std::mutex> lock(m_);
        if (!reason_.empty()) return;
        reason_ = reason;
    }
    std::string transport() const override { return "recording"; }
    std::string reason() {
        std::lock_guard<std::mutex> lock(m_);
        return reason_;
    }
    // The reason once one came, or "" after timeout_s.
    std::string wait_reason(double timeout_s) {
        const auto t0 = std::chrono::steady_clock::now();
        while (Seconds(std::chrono::steady_clock::now() - t0).count() < timeout_s) {
            const std::string r = reason();
            if (!r.empty()) return r;
            std::this_thread::sleep_for(std::chrono::milliseconds(20));
        }
        return reason();
    }

private:
    int rank_;
    std::mutex m_;
    std::string reason_;
};

// Three watched nodes; inner[r] is node r's recording communicator.
struct WatchedWorld {
    std::vector<RecordingCommunicator*> inner;
    std::vector<std::unique_ptr<WatchedCommunicator>> nodes;
    std::vector<std::optional<Rendezvous>> raw;  // a node left unwatched (its links closed when dropped)
    std::vector<std::unique_ptr<RecordingCommunicator>> spare;  // the unwatched node's inner one
    explicit WatchedWorld(int unwatched = -1) {
        std::vector<NodeResult> rv = run_nodes(3, 30);
        for (int r = 0; r < 3; ++r) {
            if (!rv[size_t(r)].rv) qFatal("rendezvous failed: %s", what(rv[size_t(r)]).c_str());
            auto in = std::make_unique<RecordingCommunicator>(r);
            inner.push_back(in.get());
            raw.emplace_back();
            if (r == unwatched) {
                raw[size_t(r)] = std::move(rv[size_t(r)].rv);
                spare.push_back(std::move(in));
                nodes.push_back(nullptr);
                continue;
            }
            nodes.push_back(std::make_unique<WatchedCommunicator>(std::move(in), std::move(*rv[size_t(r)].rv)));
        }
    }
};

// Values whose float sum depends on the order of the terms.
template <class T>
std::vector<std::vector<T>> summands(int ranks, size_t n) {
    std::vector<std::vector<T>> v(static_cast<size_t>(ranks), std::vector<T>(n));
    for (int r = 0; r < ranks; ++r)
        for (size_t i = 0; i < n; ++i)
            v[size_t(r)][i] = std::ldexp(T(1), -11 * r) * T(double(i % 977) + 1.0) + T(0.1) * T(r) - T(0.3) * T(i % 3);
    return v;
}

// Every rank of the world calls all_reduce_sum(rank, ...) on its own thread; comm_of(g) is g's communicator.
template <class T>
void reduce_all(std::vector<std::vector<T>>& data, const std::function<Communicator&(int)>& comm_of) {
    std::vector<std::thread> t;
    std::vector<std::string> errors(data.size());
    for (size_t g = 0; g < data.size(); ++g)
        t.emplace_back([&, g] {
            try {
                comm_of(int(g)).all_reduce_sum(int(g), data[g].data(), data[g].size());
            } catch (const std::exception& e) {
                errors[g] = e.what();
            }
        });
    for (auto& x : t) x.join();
    for (size_t g = 0; g < errors.size(); ++g) QVERIFY2(errors[g].empty(), errors[g].c_str());
}

template <class T>
void check_socket_sums_equal_thread_sums(int nodes, int local, size_t n) {
    const int world = nodes * local;
    auto want = summands<T>(world, n);
    HostThreadCommunicator threads(world);
    reduce_all<T>(want, [&](int) -> Communicator& { return threads; });
    auto sockets = socket_world(nodes, local);
    QCOMPARE(sockets[0]->size(), world);
    QCOMPARE(sockets[size_t(nodes - 1)]->first_rank(), (nodes - 1) * local);
    auto got = summands<T>(world, n);
    reduce_all<T>(got, [&](int g) -> Communicator& { return *sockets[size_t(g / local)]; });
    // The sums depend on the order (else the test proves nothing), and the sockets keep the threads' order.
    T plain = 0;
    bool order_matters = false;
    const auto in = summands<T>(world, n);
    for (size_t i = 0; i < n && !order_matters; ++i) {
        plain = 0;
        for (int r = world - 1; r >= 0; --r) plain += in[size_t(r)][i];
        order_matters = std::memcmp(&plain, &want[0][i], sizeof(T)) != 0;
    }
    QVERIFY(world < 3 || n < 1000 || order_matters);  // a + b == b + a: two terms have no order
    for (int g = 0; g < world; ++g)
        QVERIFY2(n == 0 || std::memcmp(got[size_t(g)].data(), want[0].data(), n * sizeof(T)) == 0,
                 qPrintable(QString("%1 nodes x %2 ranks, %3 values of %4 bytes: rank %5 differs from the threads' sum")
                                .arg(nodes).arg(local).arg(n).arg(sizeof(T)).arg(g)));
}

using test::dp::replicas;
using test::dp::StepLog;
using test::dp::train_two_steps;

}  // namespace

class TestRendezvous : public QObject {
    Q_OBJECT

private slots:
    void address_parsing() {
        const RendezvousAddress a = parse_rendezvous_address("10.0.0.1:29500");
        QCOMPARE(a.host, std::string("10.0.0.1"));
        QCOMPARE(a.port, 29500);
        const RendezvousAddress b = parse_rendezvous_address("[fd00::1]:1");
        QCOMPARE(b.host, std::string("fd00::1"));
        QCOMPARE(b.text(), std::string("[fd00::1]:1"));
        QCOMPARE(parse_rendezvous_address("node0.lan:65535").port, 65535);
        for (const char* bad : {"", "host", "host:", ":29500", "host:0", "host:65536", "host:12a", "host:-1",
                                "fd00::1:29500", "[fd00::1]29500", "[fd00::1:29500", "host:123456"})
            expect_error([&] { (void)parse_rendezvous_address(bad); }, ErrorCategory::InvalidInput,
                         {"rendezvous address '" + std::string(bad) + "'", "HOST:PORT"});
    }

    void three_nodes_meet() {
        const std::vector<NodeResult> r = run_nodes(3, 10);
        for (int n = 0; n < 3; ++n) QVERIFY2(r[size_t(n)].rv, what(r[size_t(n)]).c_str());
        for (int n = 0; n < 3; ++n) {
            const Rendezvous& rv = *r[size_t(n)].rv;
            QCOMPARE(rv.node_rank, n);
            QCOMPARE(rv.nodes, 3);
            QCOMPARE(rv.blob, std::string("blob of node 0"));  // node 0's reaches everyone
            QCOMPARE(rv.peers.size(), size_t(3));
            QVERIFY(rv.peers[0].find(":") != std::string::npos);
            QVERIFY(rv.peers[1].rfind("127.0.0.1:", 0) == 0);
            QCOMPARE(rv.peers, r[0].rv->peers);  // every node gets node 0's list
            for (int k = 0; k < 3; ++k)
                QCOMPARE(rv.links[size_t(k)].valid(), n == 0 ? k != 0 : k == 0);
        }
        // One node: nothing to meet.
        RendezvousOptions one;
        one.address = {"127.0.0.1", 1};
        one.blob = "b";
        QCOMPARE(rendezvous(one).blob, std::string("b"));
    }

    void mismatched_fingerprint_is_refused_naming_the_part() {
        const std::vector<NodeResult> r = run_nodes(3, 10, [](int n, RendezvousOptions& o) {
            if (n == 2) o.fingerprint = fingerprint("d2");
        });
        for (const NodeResult& n : r) {
            QVERIFY(n.error);
            QCOMPARE(int(n.error->category()), int(ErrorCategory::InvalidInput));
            for (const char* needle : {"node rank 2", "data: node rank 0 has d1, node rank 2 has d2", "same settings"})
                QVERIFY2(what(n).find(needle) != std::string::npos, what(n).c_str());
        }
    }

    void other_node_count_or_rank_is_refused() {
        {
            const auto r = run_nodes(2, 10, [](int n, RendezvousOptions& o) {
                if (n == 1) o.fingerprint.emplace_back("setting lora.r", "8");
            });
            QVERIFY(r[0].error && r[1].error);
            QVERIFY2(what(r[1]).find("setting lora.r (missing on node rank 0)") != std::string::npos, what(r[1]).c_str());
        }
        {
            // Two processes claim node rank 1 of 3; node rank 2 never comes.
            const auto r = run_nodes(3, 10, [](int n, RendezvousOptions& o) {
                if (n == 2) o.node_rank = 1;
            });
            for (const NodeResult& n : r) {
                QVERIFY(n.error);
                QCOMPARE(int(n.error->category()), int(ErrorCategory::InvalidInput));
                QVERIFY2(what(n).find("two nodes claim node rank 1") != std::string::npos, what(n).c_str());
            }
        }
        {
            // A node started with another --nodes: its own check refuses rank 2 of 2, node 0 names the count.
            RendezvousListener listener({"127.0.0.1", 0});
            std::optional<Error> e0, e1;
            std::thread t0([&] {
                RendezvousOptions o;
                o.address = {"127.0.0.1", listener.port()};
                o.nodes = 2;
                o.timeout_s = 10;
                try {
                    (void)rendezvous(o, &listener);
                } catch (const Error& e) {
                    e0 = e;
                }
            });
            RendezvousOptions o;
            o.address = {"127.0.0.1", listener.port()};
            o.nodes = 3;
            o.node_rank = 1;
            o.timeout_s = 10;
            try {
                (void)rendezvous(o);
            } catch (const Error& e) {
                e1 = e;
            }
            t0.join();
            QVERIFY(e0 && e1);
            QVERIFY2(std::string(e1->what()).find("--nodes 3, node rank 0 with --nodes 2") != std::string::npos, e1->what());
            QCOMPARE(int(e0->category()), int(ErrorCategory::InvalidInput));
        }
        RendezvousOptions o;
        o.address = {"127.0.0.1", 1};
        o.nodes = 2;
        o.node_rank = 2;
        expect_error([&] { (void)rendezvous(o); }, ErrorCategory::InvalidInput, {"--node-rank 2", "0..1"});
    }

    void timeouts_name_the_address_and_the_wait() {
        // Nothing listens (a port that was just free): the node gives up after its timeout.
        int port = 0;
        {
            RendezvousListener l({"127.0.0.1", 0});
            port = l.port();
        }
        RendezvousOptions o;
        o.address = {"127.0.0.1", port};
        o.nodes = 2;
        o.node_rank = 1;
        o.timeout_s = 0.5;
        const auto t0 = std::chrono::steady_clock::now();
        expect_error([&] { (void)rendezvous(o); }, ErrorCategory::Io,
                     {"no node rank 0 answered at 127.0.0.1:" + std::to_string(port), "0.5 s", "--dist-timeout"});
        const double waited = Seconds(std::chrono::steady_clock::now() - t0).count();
        qInfo("gave up after %.2f s", waited);
        QVERIFY(waited >= 0.45 && waited < 3);
        // Node 0 waits for node ranks 1 and 2; only 1 comes: both stop, naming the missing rank.
        const auto r = run_nodes(3, 0.5, [](int n, RendezvousOptions& x) {
            if (n == 2) x.node_rank = -1;  // never connects (refused by its own check at once)
        });
        QVERIFY(r[0].error && r[1].error);
        QCOMPARE(int(r[0].error->category()), int(ErrorCategory::Io));
        for (int n : {0, 1})
            QVERIFY2(what(r[size_t(n)]).find("for node rank(s) 2 to join (joined: 1)") != std::string::npos,
                     what(r[size_t(n)]).c_str());
        QVERIFY(r[0].seconds < 3);
        // Something that is not a Tandem node connects and says nothing: node 0 is not held by it.
        RendezvousListener l2({"127.0.0.1", 0});
        Socket stray(::socket(AF_INET, SOCK_STREAM, 0));
        sockaddr_in sa{};
        sa.sin_family = AF_INET;
        sa.sin_port = htons(uint16_t(l2.port()));
        sa.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
        QCOMPARE(::connect(stray.fd(), reinterpret_cast<sockaddr*>(&sa), sizeof sa), 0);
        RendezvousOptions z;
        z.address = {"127.0.0.1", l2.port()};
        z.nodes = 2;
        z.timeout_s = 0.5;
        expect_error([&] { (void)rendezvous(z, &l2); }, ErrorCategory::Io, {"waited 0.5 s", "node rank(s) 1"});
    }

    void socket_sums_are_the_threads_bits() {
        check_socket_sums_equal_thread_sums<float>(2, 1, 5000);
        check_socket_sums_equal_thread_sums<float>(3, 1, 1 << 20);  // larger than the socket buffers
        check_socket_sums_equal_thread_sums<double>(3, 1, 3000);
        check_socket_sums_equal_thread_sums<float>(2, 2, 5000);     // two ranks per process
        check_socket_sums_equal_thread_sums<float>(2, 1, 0);
        // Many small collectives in a row (a step's loss after each bucket) keep their order.
        auto world = socket_world(2, 1);
        for (int i = 0; i < 200; ++i) {
            std::vector<std::vector<double>> d = {{double(i), 1.0}, {0.5, 2.0}};
            reduce_all<double>(d, [&](int g) -> Communicator& { return *world[size_t(g)]; });
            QCOMPARE(d[1][0], double(i) + 0.5);
            QCOMPARE(d[0][1], 3.0);
        }
    }

    void peers_stop_promptly() {
        {
            // An abort on node 1 reaches node 0, waiting in a collective, with its reason.
            auto world = socket_world(2, 1);
            std::optional<Error> e0;
            const auto t0 = std::chrono::steady_clock::now();
            std::thread n0([&] {
                float x = 1;
                try {
                    world[0]->all_reduce_sum(0, &x, 1);
                } catch (const Error& e) {
                    e0 = e;
                }
            });
            std::this_thread::sleep_for(std::chrono::milliseconds(100));
            world[1]->abort("rank 1 failed: out of memory");
            n0.join();
            QVERIFY(e0);
            QVERIFY2(std::string(e0->what()).find("node rank 1 (127.0.0.1:") != std::string::npos, e0->what());
            QVERIFY2(std::string(e0->what()).find("stopped the run: rank 1 failed: out of memory") != std::string::npos, e0->what());
            QVERIFY(Seconds(std::chrono::steady_clock::now() - t0).count() < 3);
            float y = 1;  // an aborted communicator refuses later collectives
            expect_error([&] { world[1]->all_reduce_sum(1, &y, 1); }, ErrorCategory::Io, {"stopped"});
        }
        {
            // Node 1 goes away (its process died: the connection closes without a word).
            auto world = socket_world(2, 1);
            std::optional<Error> e0;
            std::thread n0([&] {
                std::vector<float> x(1000, 1.0f);
                try {
                    world[0]->all_reduce_sum(0, x.data(), x.size());
                } catch (const Error& e) {
                    e0 = e;
                }
            });
            std::this_thread::sleep_for(std::chrono::milliseconds(100));
            world[1].reset();
            n0.join();
            QVERIFY(e0);
            QVERIFY2(std::string(e0->what()).find("node rank 1") != std::string::npos &&
                         std::string(e0->what()).find("closed the connection") != std::string::npos,
                     e0->what());
        }
        {
            // Node 1 is alive but never joins the collective: node 0 gives up after the timeout.
            auto world = socket_world(2, 1, 0.5);
            float x = 1;
            const auto t0 = std::chrono::steady_clock::now();
            expect_error([&] { world[0]->all_reduce_sum(0, &x, 1); }, ErrorCategory::Io,
                         {"node rank 1", "sent nothing for 0.5 s", "--dist-timeout"});
            QVERIFY(Seconds(std::chrono::steady_clock::now() - t0).count() < 3);
        }
        {
            // Nodes in different collectives (another element count) stop instead of summing unrelated data.
            auto world = socket_world(2, 1);
            std::vector<std::vector<float>> d = {std::vector<float>(10, 1.0f), std::vector<float>(11, 1.0f)};
            std::vector<std::string> errors(2);
            std::vector<std::thread> t;
            for (int g = 0; g < 2; ++g)
                t.emplace_back([&, g] {
                    try {
                        world[size_t(g)]->all_reduce_sum(g, d[size_t(g)].data(), d[size_t(g)].size());
                    } catch (const Error& e) {
                        errors[size_t(g)] = e.what();
                    }
                });
            for (auto& x : t) x.join();
            QVERIFY2(errors[0].find("another collective") != std::string::npos, errors[0].c_str());
            QVERIFY2(errors[1].find("node rank 0") != std::string::npos, errors[1].c_str());
        }
    }

    // DataParallelModel over sockets (1 and 2 replicas per node) trains exactly what the same world of threads
    // trains, and a stop request on one node is agreed by all at the end of the step.
    // A killed node (its links close without a goodbye) stops the others at once, naming it: node 0 sees it,
    // node 1 (linked to node 0 only) learns it from node 0. A failing node's reason reaches every node. A node
    // that ends normally stops nobody.
    void watched_links_stop_every_node() {
        {
            WatchedWorld w(/*unwatched=*/2);  // node 2 "killed": its connection closes with no word
            const auto t0 = std::chrono::steady_clock::now();
            w.raw[2].reset();
            const std::string r0 = w.inner[0]->wait_reason(5), r1 = w.inner[1]->wait_reason(5);
            const double s = Seconds(std::chrono::steady_clock::now() - t0).count();
            qInfo("killed node 2: node 0 '%s', node 1 '%s' within %.2f s", r0.c_str(), r1.c_str(), s);
            QVERIFY2(r0.find("node rank 2") != std::string::npos && r0.find("killed") != std::string::npos, r0.c_str());
            QVERIFY2(r1.find("node rank 0") != std::string::npos && r1.find("node rank 2") != std::string::npos, r1.c_str());
            QVERIFY(s < 3);
        }
        {
            WatchedWorld w;
            w.nodes[1]->abort("node rank 1 failed: the disk is full");
            const std::string r0 = w.inner[0]->wait_reason(5), r2 = w.inner[2]->wait_reason(5);
            QVERIFY2(r0.find("the disk is full") != std::string::npos, r0.c_str());
            QVERIFY2(r2.find("the disk is full") != std::string::npos, r2.c_str());
            QCOMPARE(w.inner[1]->reason(), std::string("node rank 1 failed: the disk is full"));
        }
        {
            WatchedWorld w;
            w.nodes[2].reset();  // ends normally: a goodbye
            w.nodes[1].reset();
            QCOMPARE(w.inner[0]->wait_reason(0.5), std::string());
        }
    }

    void data_parallel_over_sockets_matches_threads() {
        // local 0: one replica per node run on the node's own thread (DataParallelModel::OnThisThread, how a GPU
        // process runs its one rank), the others on worker threads.
        for (const int variant : {1, 2, 0}) {
            const bool on_this_thread = variant == 0;
            const int local = on_this_thread ? 1 : variant;
            const int world = 2 * local;
            DataParallelModel threads(replicas(world), std::make_unique<HostThreadCommunicator>(world));
            const StepLog want = train_two_steps(threads);
            auto comms = socket_world(2, local);
            std::vector<std::unique_ptr<DataParallelModel>> nodes;
            for (auto& c : comms)
                nodes.push_back(on_this_thread ? std::make_unique<DataParallelModel>(std::move(replicas(1)[0]), std::move(c),
                                                                                     DataParallelModel::OnThisThread{})
                                               : std::make_unique<DataParallelModel>(replicas(local), std::move(c)));
            QCOMPARE(nodes[1]->first_rank(), local);
            QCOMPARE(nodes[1]->world_size(), world);
            std::atomic<bool> stop0{false}, stop1{true};
            nodes[0]->set_stop_request(&stop0);
            nodes[1]->set_stop_request(&stop1);
            std::vector<StepLog> got(2);
            std::vector<std::string> errors(2);
            std::vector<std::thread> t;
            for (int n = 0; n < 2; ++n)
                t.emplace_back([&, n] {
                    try {
                        got[size_t(n)] = train_two_steps(*nodes[size_t(n)]);
                    } catch (const std::exception& e) {
                        errors[size_t(n)] = e.what();
                    }
                });
            for (auto& x : t) x.join();
            QVERIFY2(errors[0].empty() && errors[1].empty(), (errors[0] + errors[1]).c_str());
            for (int n = 0; n < 2; ++n) {
                QVERIFY(nodes[size_t(n)]->stop_agreed().load());
                for (size_t s = 0; s < 2; ++s) {
                    QVERIFY(std::memcmp(&got[size_t(n)].steps[s].loss_sum, &want.steps[s].loss_sum, sizeof(double)) == 0);
                    QVERIFY(std::memcmp(&got[size_t(n)].steps[s].grad_norm, &want.steps[s].grad_norm, sizeof(double)) == 0);
                }
                for (const auto& [name, v] : want.values)
                    QVERIFY2(std::memcmp(got[size_t(n)].values.at(name).data(), v.data(), v.size() * sizeof(float)) == 0,
                             qPrintable(QString("%1 ranks per node, node %2, %3").arg(local).arg(n).arg(name.c_str())));
            }
            qInfo("2 nodes x %d ranks%s: losses %.9g, %.9g, LoRA values bit-identical to %d threads", local,
                  on_this_thread ? " (on the nodes' own threads)" : "", want.steps[0].loss_sum, want.steps[1].loss_sum,
                  world);
        }
    }
};

QTEST_GUILESS_MAIN(TestRendezvous)
#include "test_rendezvous.moc"
