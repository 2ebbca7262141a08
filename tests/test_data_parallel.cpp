// SPDX-FileCopyrightText: 2026 The Tandem developers
// SPDX-License-Identifier: GPL-3.0-or-later
// Data parallelism on the CPU backend (train/data_parallel.h, train/communicator.h): ranks are threads with a
// host-thread communicator. An N-rank step with the trainer's micro-batches, grad scale and dropout seeds equals
// a one-rank step over the same micro-batches up to the order of the gradient sums (2 and 3 ranks, LoRA dropout
// on, two optimizer steps); the replicas stay bit-identical; the gradient buckets cover every tensor by layer;
// a failing rank stops the step with its error instead of a hang; the communicator's sums are in rank order.
#include <QTest>

#include <atomic>
#include <cmath>
#include <cstring>
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
#include "kernels/cpu/collective.h"
#include "train/communicator.h"
#include "train/data_parallel.h"

using namespace tandem;
namespace fs = std::filesystem;

namespace {

using test::dp::fixture_config;
using test::dp::micro_batches;
using test::dp::replica;
using test::dp::StepLog;
using test::dp::train_two_steps;

std::unique_ptr<DataParallelModel> parallel(const RunConfig& c, int ranks) {
    std::vector<std::unique_ptr<TrainableModel>> rs;
    for (int r = 0; r < ranks; ++r) rs.push_back(replica(c));
    return std::make_unique<DataParallelModel>(std::move(rs), std::make_unique<HostThreadCommunicator>(ranks));
}


// A rank that records what the step protocol told it (and on which thread it was made and told).
class Recorder final : public TrainableModel {
public:
    Recorder() : made_on(std::this_thread::get_id()) {}
    const ModelConfig& model_config() const override { return config_; }
    std::vector<LoraParam>& lora_params() override { return params_; }
    void zero_grads() override {}
    void begin_step(int n) override {
        told.push_back(n);
        told_on = std::this_thread::get_id();
    }
    double forward_backward(const PackedBatch&, float, uint64_t) override { return 0; }
    double forward_loss(const PackedBatch&) override { return 0; }
    void set_lora(const LoraTensors&) override {}
    LoraTensors lora_tensors() override { return {}; }
    size_t weight_bytes() const override { return 0; }
    size_t lora_bytes() const override { return 0; }
    size_t activation_bytes() const override { return 0; }
    std::vector<int> told;
    std::thread::id made_on, told_on;

private:
    ModelConfig config_;
    std::vector<LoraParam> params_;
};

}  // namespace

class TestDataParallel : public QObject {
    Q_OBJECT

private slots:
    void buckets_cover_every_tensor_by_layer() {
        const RunConfig c = fixture_config();
        auto m = replica(c);
        const std::vector<LoraParam>& p = m->lora_params();
        const std::vector<GradBucket> b = gradient_buckets(p);
        const int layers = int(m->model_config().num_hidden_layers);
        QCOMPARE(int(b.size()), layers);
        size_t next = 0, numel = 0;
        for (int l = 0; l < layers; ++l) {
            QCOMPARE(b[size_t(l)].layer, l);
            QCOMPARE(b[size_t(l)].first, next);
            size_t n = 0;
            for (size_t i = b[size_t(l)].first; i < b[size_t(l)].first + b[size_t(l)].count; ++i) {
                QCOMPARE(p[i].spec.layer, l);
                n += p[i].grad.size();
            }
            QCOMPARE(b[size_t(l)].numel, n);
            next += b[size_t(l)].count;
            numel += n;
        }
        QCOMPARE(next, p.size());
        size_t all = 0;
        for (const auto& x : p) all += x.grad.size();
        QCOMPARE(numel, all);
        // A layer's tensors that are not consecutive start a new bucket.
        std::vector<LoraParam> mixed = {p[0], p.back(), p[1]};
        QCOMPARE(gradient_buckets(mixed).size(), size_t(3));
    }

    void n_ranks_equal_one_rank_over_the_same_micro_batches() {
        const RunConfig c = fixture_config();
        const std::vector<PackedBatch> micro = micro_batches();
        QCOMPARE(micro.size(), size_t(4));
        auto one = replica(c);
        const StepLog want = train_two_steps(*one, micro);
        for (const int ranks : {2, 3}) {
            auto dp = parallel(c, ranks);
            const StepLog got = train_two_steps(*dp, micro);
            for (size_t s = 0; s < want.steps.size(); ++s) {
                const double dl = std::fabs(got.steps[s].loss_sum - want.steps[s].loss_sum);
                const double dn = std::fabs(got.steps[s].grad_norm - want.steps[s].grad_norm);
                qInfo("%d ranks, step %zu: loss sum %.9g vs %.9g, grad norm %.9g vs %.9g", ranks, s + 1,
                      got.steps[s].loss_sum, want.steps[s].loss_sum, got.steps[s].grad_norm, want.steps[s].grad_norm);
                QVERIFY(dl <= 1e-6 * std::fabs(want.steps[s].loss_sum));
                QVERIFY(dn <= 1e-5 * want.steps[s].grad_norm);
            }
            double worst = 0;
            bool moved = false;
            for (const auto& [name, w] : want.values) {
                const auto& g = got.values.at(name);
                QCOMPARE(g.size(), w.size());
                for (size_t i = 0; i < w.size(); ++i) worst = std::max(worst, std::fabs(double(g[i]) - w[i]));
            }
            const PeftAdapter initial = read_peft_adapter(test::dp::llama() / "adapter", load_model_config(test::dp::llama()));
            for (const auto& [name, w] : want.values) {
                const auto& init = initial.tensors.at(name);
                for (size_t i = 0; i < w.size() && !moved; ++i) moved = std::fabs(w[i] - init[i]) > 1e-4;
            }
            QVERIFY(moved);  // the steps changed the adapter
            qInfo("%d ranks: LoRA values after two steps, max |difference| %.3g (lr 1e-2)", ranks, worst);
            QVERIFY(worst <= 1e-6);
            // Every replica holds the same bits.
            for (int r = 1; r < ranks; ++r) {
                const LoraTensors t = dp->rank(r).lora_tensors();
                for (const auto& [name, v] : got.values)
                    QVERIFY2(std::memcmp(t.at(name).data(), v.data(), v.size() * sizeof(float)) == 0,
                             qPrintable(QString("rank %1 %2").arg(r).arg(name.c_str())));
            }
        }
    }

    // A rank that fails (a token id past the vocabulary) ends the step with its error; no rank hangs.
    void failing_rank_stops_the_step() {
        const RunConfig c = fixture_config();
        auto dp = parallel(c, 2);
        std::vector<PackedBatch> micro = micro_batches();
        micro[1].tokens[0] = 1 << 30;
        dp->zero_grads();
        for (const auto& b : micro) dp->queue_forward_backward(b, 0.01f, 1);
        OptimizerStep s;
        s.lr = 1e-3;
        dp->queue_optimizer_step(s);
        bool threw = false;
        try {
            (void)dp->collect_step();
        } catch (const Error& e) {
            threw = true;
            qInfo("the step stopped with: %s", e.what());
        }
        QVERIFY(threw);
    }

    // One rank on the calling thread (how a GPU process of a world across processes runs): no worker, every call
    // runs the rank's work before it returns, the same bits as the model alone; a failure still ends the step.
    void one_rank_on_this_thread() {
        auto recorder = std::make_unique<Recorder>();
        Recorder* rec = recorder.get();
        DataParallelModel alone(std::move(recorder), std::make_unique<HostThreadCommunicator>(1),
                                DataParallelModel::OnThisThread{});
        alone.begin_step(3);
        QCOMPARE(rec->told, std::vector<int>{3});
        QVERIFY(rec->told_on == std::this_thread::get_id());

        const RunConfig c = fixture_config();
        auto one = replica(c);
        const StepLog want = train_two_steps(*one);
        DataParallelModel dp(replica(c), std::make_unique<HostThreadCommunicator>(1), DataParallelModel::OnThisThread{});
        const StepLog got = train_two_steps(dp);
        for (size_t s = 0; s < want.steps.size(); ++s) {
            QVERIFY(std::memcmp(&got.steps[s].loss_sum, &want.steps[s].loss_sum, sizeof(double)) == 0);
            QVERIFY(std::memcmp(&got.steps[s].grad_norm, &want.steps[s].grad_norm, sizeof(double)) == 0);
        }
        for (const auto& [name, v] : want.values)
            QVERIFY2(std::memcmp(got.values.at(name).data(), v.data(), v.size() * sizeof(float)) == 0, name.c_str());

        std::vector<PackedBatch> micro = micro_batches();
        micro[1].tokens[0] = 1 << 30;  // a token id past the vocabulary
        DataParallelModel bad(replica(c), std::make_unique<HostThreadCommunicator>(1), DataParallelModel::OnThisThread{});
        bad.zero_grads();
        for (const auto& b : micro) bad.queue_forward_backward(b, 0.01f, 1);
        OptimizerStep step;
        step.lr = 1e-3;
        bad.queue_optimizer_step(step);
        bool threw = false;
        try {
            (void)bad.collect_step();
        } catch (const Error& e) {
            threw = true;
            qInfo("the step stopped with: %s", e.what());
        }
        QVERIFY(threw);
    }

    void ranks_are_made_on_their_threads_and_told_their_share() {
        // Rank r of 3 gets micro-batches r, r + 3, ...: 7 -> 3, 2, 2; 2 -> 1, 1, 0 (a rank may get none).
        std::vector<Recorder*> made(3, nullptr);
        DataParallelModel dp(
            [&](int r) {
                auto m = std::make_unique<Recorder>();
                made[size_t(r)] = m.get();
                return m;
            },
            std::make_unique<HostThreadCommunicator>(3));
        dp.begin_step(7);
        dp.begin_step(2);
        dp.begin_step(0);
        const std::vector<std::vector<int>> want{{3, 1, 0}, {2, 1, 0}, {2, 0, 0}};
        for (size_t r = 0; r < 3; ++r) {
            QCOMPARE(made[r]->told, want[r]);
            QVERIFY(made[r]->made_on != std::this_thread::get_id());  // a device rank lives on its worker
            QVERIFY(made[r]->told_on == made[r]->made_on);
            for (size_t q = 0; q < r; ++q) QVERIFY(made[r]->made_on != made[q]->made_on);
        }
        QVERIFY(!dp.device_collectives());  // the host transport: the model sums host gradients itself
        QCOMPARE(dp.transport(), std::string("threads"));
        // A rank that fails to load: its error, the others freed on their threads.
        test::expect_error(
            [] {
                DataParallelModel bad(
                    [](int r) -> std::unique_ptr<TrainableModel> {
                        if (r == 1) throw_invalid("rank 1 cannot load");
                        return std::make_unique<Recorder>();
                    },
                    std::make_unique<HostThreadCommunicator>(2));
            },
            ErrorCategory::InvalidInput, {"rank 1 cannot load"});
    }

    void sum_ranks_is_the_rank_ordered_sum() {
        // The CPU twin of the peer transport's kernel: every element summed in rank order into every buffer.
        std::vector<float> a{1e8f, 1.0f, -3.0f}, b{1.0f, 2.0f, 0.5f}, c{-1e8f, 4.0f, 0.25f};
        float* bufs[3] = {a.data(), b.data(), c.data()};
        cpu::sum_ranks(bufs, 3, 0, 2);  // the third element is another rank's share
        const float first = (1e8f + 1.0f) + -1e8f;  // 0: the order matters and is kept
        for (const std::vector<float>* v : {&a, &b, &c}) {
            QCOMPARE((*v)[0], first);
            QCOMPARE((*v)[1], 7.0f);
        }
        QCOMPARE(a[2], -3.0f);
        QCOMPARE(c[2], 0.25f);
    }

    void host_thread_sums_in_rank_order() {
        const int ranks = 3;
        HostThreadCommunicator comm(ranks);
        std::vector<std::vector<float>> data(ranks);
        for (int r = 0; r < ranks; ++r)
            for (int i = 0; i < 1000; ++i) data[size_t(r)].push_back(std::ldexp(1.0f, -r * 12) * float(i + 1) + 0.1f * r);
        std::vector<std::thread> t;
        for (int r = 0; r < ranks; ++r)
            t.emplace_back([&, r] { comm.all_reduce_sum(r, data[size_t(r)].data(), data[size_t(r)].size()); });
        for (auto& x : t) x.join();
        for (int i = 0; i < 1000; ++i) {
            float want = std::ldexp(1.0f, 0) * float(i + 1) + 0.0f;
            want += std::ldexp(1.0f, -12) * float(i + 1) + 0.1f;
            want += std::ldexp(1.0f, -24) * float(i + 1) + 0.2f;
            for (int r = 0; r < ranks; ++r) QCOMPARE(data[size_t(r)][size_t(i)], want);
        }
        // Abort wakes a rank waiting for the others.
        HostThreadCommunicator c2(2);
        std::atomic<bool> threw{false};
        std::thread waiter([&] {
            float x = 1;
            try {
                c2.all_reduce_sum(0, &x, 1);
            } catch (const Error&) {
                threw = true;
            }
        });
        std::this_thread::sleep_for(std::chrono::milliseconds(50));
        c2.abort("test");
        waiter.join();
        QVERIFY(threw.load());
    }
};

QTEST_GUILESS_MAIN(TestDataParallel)
#include "test_data_parallel.moc"
