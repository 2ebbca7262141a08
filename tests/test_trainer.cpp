// SPDX-FileCopyrightText: 2026 The Tandem developers
// SPDX-License-Identifier: GPL-3.0-or-later
// engine/train: the trainer loop with a small exact fake model (a least-squares "model" whose parameters are
// real PEFT-shaped LoRA tensors): LR schedules vs transformers' formulas, exact gradient accumulation,
// clipping, bitwise reproducibility, stop + resume == uninterrupted, the run directory and its atomicity,
// non-finite steps (skipped, then a diverged stop that keeps only good checkpoints), RunConfig JSON and
// validation, export. The end-to-end SIGKILL test runs tandem-cli train (skipped until
// the CPU model is merged and tandem-cli can train).
#include <QtTest>

#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <deque>
#include <functional>
#include <cmath>
#include <fstream>
#include <numbers>
#include <set>
#include <thread>

#include <nlohmann/json.hpp>

#include "core/files.h"
#include "kernels/cpu/adamw.h"
#include "tandem/demo_model.h"
#include "tandem/model_config.h"
#include "tandem/run_config.h"
#include "tandem/safetensors.h"
#include "tandem/trainer.h"
#include "core/random.h"
#include "test_support.h"
#include "train/schedule.h"
#include "train/backends.h"
#include "train/trainer_impl.h"
#include "train/communicator.h"
#include "train/data_parallel.h"

using namespace tandem;
using namespace tandem::test;
namespace fs = std::filesystem;
using json = nlohmann::json;

namespace {

ModelConfig tiny_model_config() {
    const json j = {{"architectures", {"LlamaForCausalLM"}}, {"model_type", "llama"}, {"hidden_size", 4},
                    {"intermediate_size", 8}, {"num_hidden_layers", 1}, {"num_attention_heads", 2},
                    {"num_key_value_heads", 2}, {"vocab_size", 32}, {"max_position_embeddings", 64},
                    {"rms_norm_eps", 1e-6}, {"rope_theta", 10000.0}, {"hidden_act", "silu"}};
    return parse_model_config(j, "tiny");
}

// Least squares over the LoRA parameters theta (all tensors flattened, P values): for every predicted
// position t (labels[t+1] != -100), pred = sum_i theta_i x_i(token t), y = f(labels[t+1]),
// loss += 0.5 (pred - y)^2. Gradients are exact; with dropout > 0 each x_i is masked (x2 or 0) by a
// hash of (dropout_seed, t, i), so the dropout seed matters for the result.
class FakeModel final : public TrainableModel {
public:
    FakeModel(const LoraConfig& lora, uint64_t seed) : config_(tiny_model_config()), dropout_(lora.dropout) {
        uint64_t s = seed;
        for (const auto& spec : lora_tensor_specs(config_, lora)) {
            size_t n = 1;
            for (auto d : spec.shape) n *= static_cast<size_t>(d);
            LoraParam p;
            p.spec = spec;
            p.value.resize(n);
            p.grad.assign(n, 0.0f);
            for (auto& v : p.value) v = static_cast<float>((splitmix64(++s) % 2001) / 1000.0 - 1.0) * 0.1f;
            params_.push_back(std::move(p));
        }
    }
    const ModelConfig& model_config() const override { return config_; }
    std::vector<LoraParam>& lora_params() override { return params_; }
    void zero_grads() override {
        for (auto& p : params_) std::fill(p.grad.begin(), p.grad.end(), 0.0f);
    }
    static double feature(int32_t token, size_t i) { return static_cast<double>((token * 31 + i * 7) % 13) / 6.0 - 1.0; }

    double run(const PackedBatch& b, float scale, uint64_t dropout_seed, bool backward) {
        ++calls;
        if (stop_flag && calls == stop_at_call) stop_flag->store(true);
        if (backward && delay.count() > 0) std::this_thread::sleep_for(delay);  // a step that takes wall time
        if (backward && nan_backward_calls.count(++backward_calls)) {  // a step gone wrong: NaN loss and gradients
            for (auto& p : params_) std::fill(p.grad.begin(), p.grad.end(), std::numeric_limits<float>::quiet_NaN());
            return std::numeric_limits<double>::quiet_NaN();
        }
        size_t P = 0;
        for (auto& p : params_) P += p.value.size();
        std::vector<double> grad(P, 0.0);
        double loss = 0;
        for (int32_t t = 0; t + 1 < b.token_budget; ++t) {
            const int32_t target = b.labels[t + 1];
            if (target == -100) continue;
            std::vector<double> x(P);
            for (size_t i = 0; i < P; ++i) {
                x[i] = feature(b.tokens[t], i);
                if (backward && dropout_ > 0)
                    x[i] *= (splitmix64(dropout_seed ^ splitmix64(uint64_t(t) * 1000003ULL + i)) & 1) ? 2.0 : 0.0;
            }
            double pred = 0;
            size_t k = 0;
            for (auto& p : params_)
                for (float v : p.value) pred += static_cast<double>(v) * x[k++];
            const double y = static_cast<double>(target % 7) / 7.0 - 0.5;
            loss += 0.5 * (pred - y) * (pred - y);
            for (size_t i = 0; i < P; ++i) grad[i] += (pred - y) * x[i];
        }
        if (backward) {
            size_t k = 0;
            for (auto& p : params_)
                for (auto& g : p.grad) g += static_cast<float>(grad[k++] * scale);
        }
        return loss;
    }
    double forward_backward(const PackedBatch& b, float scale, uint64_t seed) override { return run(b, scale, seed, true); }
    double forward_loss(const PackedBatch& b) override { return run(b, 0, 0, false); }
    void set_lora(const LoraTensors& t) override {
        for (auto& p : params_) p.value = t.at(p.spec.name);
    }
    LoraTensors lora_tensors() override {
        LoraTensors t;
        for (const auto& p : params_) t[p.spec.name] = p.value;
        return t;
    }
    size_t weight_bytes() const override { return 1000; }
    size_t lora_bytes() const override { return 2 * 4 * 32; }
    size_t activation_bytes() const override { return 500; }
    bool runs_ahead() const override { return ahead; }  // true: the trainer collects each step one step late
    MemoryStats memory_stats() override {
        MemoryStats m = TrainableModel::memory_stats();
        m.gpus = gpus;
        return m;
    }

    int64_t calls = 0;
    int64_t stop_at_call = -1;
    std::atomic<bool>* stop_flag = nullptr;
    int64_t backward_calls = 0;
    std::set<int64_t> nan_backward_calls;  // 1-based forward_backward calls that return NaN
    bool ahead = false;
    std::chrono::microseconds delay{0};  // slept in every forward_backward
    std::vector<GpuStats> gpus;          // what memory_stats reports as the run's GPUs

private:
    ModelConfig config_;
    double dropout_;
    std::vector<LoraParam> params_;
};

// n samples of the given lengths: token j of sample i is (i*7 + j*3) % 32; labels = tokens, first -100.
TokenizedDataset make_data(const std::vector<int32_t>& lengths, int salt = 0) {
    TokenizedDataset d;
    d.offsets.push_back(0);
    for (size_t i = 0; i < lengths.size(); ++i) {
        for (int32_t j = 0; j < lengths[i]; ++j) {
            const int32_t tok = static_cast<int32_t>((i * 7 + j * 3 + salt) % 32);
            d.tokens.push_back(tok);
            d.labels.push_back(j == 0 ? -100 : tok);
        }
        d.offsets.push_back(static_cast<int64_t>(d.tokens.size()));
        d.record.push_back(static_cast<uint32_t>(i));
    }
    return d;
}

std::vector<int32_t> default_lengths() {
    std::vector<int32_t> l;
    for (int i = 0; i < 24; ++i) l.push_back(3 + (i * 5) % 8);
    return l;
}

RunConfig base_config(const fs::path& model_dir, const fs::path& out) {
    RunConfig c;
    c.model = model_dir.string();
    c.data.dataset = "train.jsonl";
    c.data.max_seq_len = 16;
    c.lora.r = 2;
    c.lora.alpha = 4;
    c.lora.dropout = 0.1;
    c.lora.target_modules = {"q_proj", "v_proj"};
    c.training.lr = 1e-2;
    c.training.schedule = LrSchedule::Cosine;
    c.training.warmup_steps = 2;
    c.training.epochs = 3;
    c.training.batch_tokens = 24;
    c.training.grad_accum = 2;
    c.training.max_grad_norm = 1.0;
    c.training.weight_decay = 0.01;
    c.training.eval_every = 3;
    c.device = DeviceChoice::Cpu;
    c.seed = 7;
    c.output_dir = out.string();
    return c;
}

struct Built {
    Trainer trainer;
    FakeModel* model;
};

Built build(const RunConfig& c, bool resume = false, std::vector<int32_t> lengths = default_lengths(), int salt = 0) {
    train::TrainerInputs in;
    in.config = c;
    auto m = std::make_unique<FakeModel>(c.lora, c.seed);
    FakeModel* raw = m.get();
    in.model = std::move(m);
    in.train = make_data(lengths, salt);
    in.validation = make_data({5, 6, 7}, 3);
    Trainer t = train::make_trainer(std::move(in), TrainerOptions{.resume = resume});
    return {std::move(t), raw};
}

struct RecordingSink : ProgressSink {
    std::vector<StepMetrics> steps;
    std::vector<RunEvent> events;
    void on_step(const StepMetrics& m) override { steps.push_back(m); }
    void on_event(const RunEvent& e) override { events.push_back(e); }
    bool has(RunEventKind k) const {
        for (const auto& e : events)
            if (e.kind == k) return true;
        return false;
    }
};

// Builds c's trainer and runs it to the end; setup may change the model first.
Built build_and_run(const RunConfig& c, RecordingSink& sink, const std::function<void(FakeModel&)>& setup = {}) {
    Built b = build(c);
    if (setup) setup(*b.model);
    std::atomic<bool> stop{false};
    b.trainer.run(sink, stop);
    return b;
}

std::vector<json> read_metrics(const fs::path& out) {
    std::vector<json> v;
    std::ifstream in(out / "metrics.jsonl");
    std::string line;
    while (std::getline(in, line))
        if (!line.empty()) v.push_back(json::parse(line));
    return v;
}

std::string file_bytes(const fs::path& p) { return read_file(p); }

bool any_tmp_under(const fs::path& dir) {
    for (const auto& e : fs::recursive_directory_iterator(dir))
        if (e.path().filename().string().find(".tmp") != std::string::npos) return true;
    return false;
}

fs::path make_model_dir(const fs::path& root) {
    const fs::path dir = root / "model";
    const json j = {{"architectures", {"LlamaForCausalLM"}}, {"model_type", "llama"}, {"hidden_size", 4},
                    {"intermediate_size", 8}, {"num_hidden_layers", 1}, {"num_attention_heads", 2},
                    {"num_key_value_heads", 2}, {"vocab_size", 32}, {"max_position_embeddings", 64},
                    {"rms_norm_eps", 1e-6}, {"rope_theta", 10000.0}, {"hidden_act", "silu"}};
    write_file(dir / "config.json", j.dump(2));
    return dir;
}


// ---- Two processes whose models run ahead with device collectives (how GPU processes train with --nodes), played
// by two threads: each process's share of a world of 2 ranks (on_device, so DataParallelModel takes the device
// path), and a rank that sums its gradients, loss and vote with the world's host collectives when its optimizer
// step is queued, and is collected one step late like a GPU.
class ProcessShare final : public Communicator {
public:
    ProcessShare(HostThreadCommunicator& world, int rank) : world_(world), rank_(rank) {}
    int size() const override { return 2; }
    int first_rank() const override { return rank_; }
    int local_size() const override { return 1; }
    void all_reduce_sum(int rank, float* d, size_t n) override { world_.all_reduce_sum(rank, d, n); }
    void all_reduce_sum(int rank, double* d, size_t n) override { world_.all_reduce_sum(rank, d, n); }
    void abort(const std::string& reason) override { world_.abort(reason); }
    bool on_device() const override { return true; }
    void all_reduce_sum_device(int, float*, size_t, void*) override { throw_internal("test: no device"); }
    void all_reduce_sum_device(int, double*, size_t, void*) override { throw_internal("test: no device"); }
    std::string transport() const override { return "test"; }

private:
    HostThreadCommunicator& world_;
    int rank_;
};

class AheadRank final : public TrainableModel {
public:
    explicit AheadRank(std::unique_ptr<FakeModel> m) : m_(std::move(m)) {}
    const ModelConfig& model_config() const override { return m_->model_config(); }
    std::vector<LoraParam>& lora_params() override { return m_->lora_params(); }
    void zero_grads() override { m_->zero_grads(); }
    void begin_step(int) override {
        m_->zero_grads();
        loss_ = 0;
    }
    double forward_backward(const PackedBatch& b, float s, uint64_t seed) override { return m_->forward_backward(b, s, seed); }
    double forward_loss(const PackedBatch& b) override { return m_->forward_loss(b); }
    void set_lora(const LoraTensors& t) override { m_->set_lora(t); }
    LoraTensors lora_tensors() override { return m_->lora_tensors(); }
    size_t weight_bytes() const override { return m_->weight_bytes(); }
    size_t lora_bytes() const override { return m_->lora_bytes(); }
    size_t activation_bytes() const override { return m_->activation_bytes(); }
    bool attach_communicator(Communicator& comm, int rank) override {
        comm_ = &comm;
        rank_ = rank;
        return true;
    }
    void set_step_vote(double vote) override { vote_ = vote; }
    void queue_forward_backward(const PackedBatch& b, float s, uint64_t seed) override {
        loss_ += m_->forward_backward(b, s, seed);
    }
    void queue_optimizer_step(const OptimizerStep& step) override {
        for (LoraParam& p : m_->lora_params()) comm_->all_reduce_sum(rank_, p.grad.data(), p.grad.size());
        double tail[2] = {loss_, vote_};
        comm_->all_reduce_sum(rank_, tail, 2);
        vote_ = 0;
        const double norm = m_->optimizer_step(step);
        steps_.push_back({tail[0], norm, tail[1]});
    }
    StepResult collect_step() override {
        const StepResult r = steps_.front();
        steps_.pop_front();
        return r;
    }
    int queued_steps() const override { return int(steps_.size()); }
    bool runs_ahead() const override { return true; }

    FakeModel& fake() { return *m_; }

private:
    std::unique_ptr<FakeModel> m_;
    Communicator* comm_ = nullptr;
    int rank_ = 0;
    double loss_ = 0, vote_ = 0;
    std::deque<StepResult> steps_;
};

struct NodeRun {
    RecordingSink sink;
    bool stopped = false, diverged = false;
    std::string error;
};

// Two processes of one world train config c (node 0 writes c.output_dir); tweak(r, fake) sets up a node's model.
// A node still running 20 s after the other ended is stopped through the world's abort (an error, not a hang).
std::vector<NodeRun> run_two_nodes(const RunConfig& c, const std::function<void(int, FakeModel&, std::atomic<bool>&)>& tweak) {
    HostThreadCommunicator world(2);
    std::vector<NodeRun> out(2);
    std::atomic<int> done{0};
    std::vector<std::thread> nodes;
    for (int r = 0; r < 2; ++r)
        nodes.emplace_back([&, r] {
            std::atomic<bool> stop{false};
            try {
                train::TrainerInputs in;
                in.config = c;
                auto fake = std::make_unique<FakeModel>(c.lora, c.seed);
                tweak(r, *fake, stop);
                in.model = std::make_unique<AheadRank>(std::move(fake));
                in.train = make_data(default_lengths());
                in.validation = make_data({5, 6, 7}, 3);
                in.distribute = [&world, r](std::unique_ptr<TrainableModel> m, const std::vector<FingerprintPart>&) {
                    return std::make_unique<DataParallelModel>(std::move(m), std::make_unique<ProcessShare>(world, r),
                                                               DataParallelModel::OnThisThread{});
                };
                TrainerOptions o;
                o.distributed.nodes = 2;
                o.distributed.node_rank = r;
                Trainer t = train::make_trainer(std::move(in), o);
                t.run(out[size_t(r)].sink, stop);
                out[size_t(r)].stopped = t.stopped();
                out[size_t(r)].diverged = t.diverged();
            } catch (const std::exception& e) {
                out[size_t(r)].error = e.what();
            }
            ++done;
        });
    const auto t0 = std::chrono::steady_clock::now();
    while (done.load() < 1) std::this_thread::sleep_for(std::chrono::milliseconds(10));
    while (done.load() < 2 && std::chrono::steady_clock::now() - t0 < std::chrono::seconds(20))
        std::this_thread::sleep_for(std::chrono::milliseconds(10));
    if (done.load() < 2) world.abort("test: a node still waits in a collective the other never joins (a hang)");
    for (auto& n : nodes) n.join();
    return out;
}
}  // namespace

class TestTrainer : public QObject {
    Q_OBJECT

private slots:
    void schedules_match_hf_formulas() {
        using train::lr_multiplier;
        // linear, W = 10, T = 100
        QCOMPARE(lr_multiplier(LrSchedule::Linear, 0, 10, 100), 0.0);
        QCOMPARE(lr_multiplier(LrSchedule::Linear, 5, 10, 100), 0.5);
        QCOMPARE(lr_multiplier(LrSchedule::Linear, 10, 10, 100), 1.0);
        QCOMPARE(lr_multiplier(LrSchedule::Linear, 55, 10, 100), 0.5);
        QCOMPARE(lr_multiplier(LrSchedule::Linear, 99, 10, 100), 1.0 / 90.0);
        QCOMPARE(lr_multiplier(LrSchedule::Linear, 100, 10, 100), 0.0);
        QCOMPARE(lr_multiplier(LrSchedule::Linear, 3, 0, 4), 0.25);
        // cosine: 0.5 * (1 + cos(pi * (s - W) / (T - W)))
        QCOMPARE(lr_multiplier(LrSchedule::Cosine, 3, 10, 100), 0.3);
        QCOMPARE(lr_multiplier(LrSchedule::Cosine, 10, 10, 100), 1.0);
        QVERIFY(std::abs(lr_multiplier(LrSchedule::Cosine, 55, 10, 100) - 0.5) < 1e-15);
        QCOMPARE(lr_multiplier(LrSchedule::Cosine, 40, 10, 100),
                 0.5 * (1.0 + std::cos(std::numbers::pi * 2.0 * 0.5 * (30.0 / 90.0))));
        QCOMPARE(lr_multiplier(LrSchedule::Cosine, 100, 10, 100), 0.0);
        // constant with warmup
        QCOMPARE(lr_multiplier(LrSchedule::Constant, 2, 4, 100), 0.5);
        QCOMPARE(lr_multiplier(LrSchedule::Constant, 4, 4, 100), 1.0);
        QCOMPARE(lr_multiplier(LrSchedule::Constant, 0, 0, 100), 1.0);
        // warmup_ratio -> ceil(ratio * T); warmup_steps wins
        TrainingConfig t;
        t.warmup_ratio = 0.1;
        QCOMPARE(train::resolve_warmup_steps(t, 95), int64_t(10));
        t.warmup_steps = 3;
        QCOMPARE(train::resolve_warmup_steps(t, 95), int64_t(3));
    }

    void run_reports_schedule_and_metrics() {
        QTemporaryDir tmp;
        const fs::path root = tmp.path().toStdString();
        RunConfig c = base_config(make_model_dir(root), root / "run");
        auto b = build(c);
        const Plan plan = b.trainer.plan();
        QVERIFY(plan.total_steps > 3);
        QCOMPARE(plan.config.training.warmup_steps, int64_t(2));
        QCOMPARE(plan.memory.total, plan.memory.weights + plan.memory.lora_optimizer + plan.memory.activations);
        QCOMPARE(plan.trainable_parameters, int64_t(32));
        RecordingSink sink;
        std::atomic<bool> stop{false};
        b.trainer.run(sink, stop);
        QVERIFY(!b.trainer.stopped());
        QCOMPARE(int64_t(sink.steps.size()), plan.total_steps);
        for (const auto& m : sink.steps) {
            QCOMPARE(m.lr, c.training.lr * train::lr_multiplier(LrSchedule::Cosine, m.step - 1, 2, plan.total_steps));
            QVERIFY(std::isfinite(m.loss) && m.loss > 0);
            QVERIFY(m.tokens > 0 && m.label_tokens > 0);
            QCOMPARE(std::isfinite(m.eval_loss), m.step % 3 == 0 || m.step == plan.total_steps);
        }
        QCOMPARE(sink.steps.front().lr, 0.0);  // HF: the first step of a warmup runs at lr 0
        QVERIFY(sink.has(RunEventKind::Started) && sink.has(RunEventKind::Finished) && sink.has(RunEventKind::Eval));
        // The loss goes down on this convex problem.
        QVERIFY(sink.steps.back().eval_loss < [&] {
            for (const auto& m : sink.steps)
                if (std::isfinite(m.eval_loss)) return m.eval_loss + 1e-12;
            return 0.0;
        }());
    }

    void accumulation_is_exact() {
        // Two samples of the same length L: budget L with grad_accum 2 (one sample per micro-batch) must
        // give the same steps as budget 2L with grad_accum 1 (both samples in one micro-batch).
        QTemporaryDir tmp;
        const fs::path root = tmp.path().toStdString();
        const fs::path model = make_model_dir(root);
        RunConfig a = base_config(model, root / "a");
        a.lora.dropout = 0;  // the dropout masks depend on the micro-batch index
        a.data.max_seq_len = 8;
        a.training.batch_tokens = 8;
        a.training.grad_accum = 2;
        a.training.epochs = 4;
        RunConfig big = a;
        big.output_dir = (root / "b").string();
        big.training.batch_tokens = 16;
        big.training.grad_accum = 1;
        auto ta = build(a, false, {8, 8});
        auto tb = build(big, false, {8, 8});
        QCOMPARE(ta.trainer.plan().total_steps, int64_t(4));
        QCOMPARE(tb.trainer.plan().total_steps, int64_t(4));
        RecordingSink sa, sb;
        std::atomic<bool> stop{false};
        ta.trainer.run(sa, stop);
        tb.trainer.run(sb, stop);
        QCOMPARE(sa.steps.size(), sb.steps.size());
        for (size_t i = 0; i < sa.steps.size(); ++i) {
            QVERIFY2(std::abs(sa.steps[i].loss - sb.steps[i].loss) <= 1e-6 * std::abs(sb.steps[i].loss),
                     qPrintable(QString("step %1: %2 vs %3").arg(i + 1).arg(sa.steps[i].loss).arg(sb.steps[i].loss)));
            QVERIFY(std::abs(sa.steps[i].grad_norm - sb.steps[i].grad_norm) <= 1e-5 * sb.steps[i].grad_norm);
            QCOMPARE(sa.steps[i].label_tokens, sb.steps[i].label_tokens);
        }
        const auto la = ta.model->lora_tensors(), lb = tb.model->lora_tensors();
        for (const auto& [name, v] : la)
            for (size_t i = 0; i < v.size(); ++i) QVERIFY(std::abs(v[i] - lb.at(name)[i]) <= 1e-5f);
    }

    void clipping_reports_pre_clip_norm() {
        QTemporaryDir tmp;
        const fs::path root = tmp.path().toStdString();
        const fs::path model = make_model_dir(root);
        RunConfig c = base_config(model, root / "clip");
        c.training.max_steps = 1;
        c.training.max_grad_norm = 1e-3;
        auto b = build(c);
        RecordingSink sink;
        std::atomic<bool> stop{false};
        b.trainer.run(sink, stop);
        QCOMPARE(sink.steps.size(), size_t(1));
        const double reported = sink.steps[0].grad_norm;
        QVERIFY(reported > 1e-3);
        // The gradients left in the model are the clipped ones: norm = max * norm / (norm + 1e-6).
        std::vector<cpu::GradSpan> spans;
        for (auto& p : b.model->lora_params()) spans.push_back({p.grad.data(), int64_t(p.grad.size())});
        const double after = cpu::global_grad_norm(spans);
        QVERIFY(std::abs(after - 1e-3 * reported / (reported + 1e-6)) < 1e-8);
        // Without clipping the same step reports the same norm and leaves the gradient untouched.
        RunConfig off = c;
        off.output_dir = (root / "noclip").string();
        off.training.max_grad_norm = 0;
        auto b2 = build(off);
        RecordingSink s2;
        b2.trainer.run(s2, stop);
        QCOMPARE(s2.steps[0].grad_norm, reported);
        spans.clear();
        for (auto& p : b2.model->lora_params()) spans.push_back({p.grad.data(), int64_t(p.grad.size())});
        QCOMPARE(cpu::global_grad_norm(spans), reported);
    }

    void runs_are_bitwise_reproducible() {
        QTemporaryDir tmp;
        const fs::path root = tmp.path().toStdString();
        const fs::path model = make_model_dir(root);
        RunConfig c1 = base_config(model, root / "r1");
        RunConfig c2 = c1;
        c2.output_dir = (root / "r2").string();
        auto a = build(c1);
        auto b = build(c2);
        RecordingSink sa, sb;
        std::atomic<bool> stop{false};
        a.trainer.run(sa, stop);
        b.trainer.run(sb, stop);
        QCOMPARE(sa.steps.size(), sb.steps.size());
        for (size_t i = 0; i < sa.steps.size(); ++i) {
            QCOMPARE(sa.steps[i].loss, sb.steps[i].loss);
            QCOMPARE(sa.steps[i].grad_norm, sb.steps[i].grad_norm);
        }
        QVERIFY(a.model->lora_tensors() == b.model->lora_tensors());
        QCOMPARE(file_bytes(root / "r1/adapter/adapter_model.safetensors"),
                 file_bytes(root / "r2/adapter/adapter_model.safetensors"));
        // A different seed changes the run (the data order, the init and the dropout masks).
        RunConfig c3 = c1;
        c3.output_dir = (root / "r3").string();
        c3.seed = 8;
        auto d = build(c3);
        RecordingSink sd;
        d.trainer.run(sd, stop);
        QVERIFY(sd.steps[0].loss != sa.steps[0].loss);
    }

    void stop_and_resume_match_uninterrupted() {
        QTemporaryDir tmp;
        const fs::path root = tmp.path().toStdString();
        const fs::path model = make_model_dir(root);
        RunConfig full = base_config(model, root / "full");
        full.training.checkpoint_every = 2;
        auto a = build(full);
        RecordingSink sa;
        std::atomic<bool> no{false};
        a.trainer.run(sa, no);
        const auto full_metrics = read_metrics(root / "full");

        // Stop in the middle of an optimizer step (between its two micro-batches), twice, then finish.
        RunConfig part = full;
        part.output_dir = (root / "part").string();
        const int64_t stops[] = {7, 4};  // forward_backward calls into each attempt
        int64_t last_step = -1;
        for (int64_t at : stops) {
            const bool resume = last_step >= 0;
            auto b = build(part, resume);
            std::atomic<bool> stop{false};
            b.model->stop_flag = &stop;
            b.model->stop_at_call = at;
            RecordingSink sb;
            b.trainer.run(sb, stop);
            QVERIFY(b.trainer.stopped());
            QVERIFY(sb.has(RunEventKind::Stopped));
            QCOMPARE(sb.has(RunEventKind::Resumed), resume);
            QVERIFY(!fs::exists(root / "part/adapter"));
            const auto latest = latest_checkpoint(root / "part");
            QVERIFY(latest.has_value());
            QVERIFY(!any_tmp_under(root / "part"));
            last_step = sb.events.back().step;
        }
        QVERIFY(last_step > 0);
        auto c = build(part, true);
        RecordingSink sc;
        c.trainer.run(sc, no);
        QVERIFY(!c.trainer.stopped());
        QVERIFY(sc.has(RunEventKind::Resumed));
        QCOMPARE(sc.steps.front().step, last_step + 1);

        const auto part_metrics = read_metrics(root / "part");
        QCOMPARE(part_metrics.size(), full_metrics.size());
        for (size_t i = 0; i < full_metrics.size(); ++i) {
            QCOMPARE(part_metrics[i]["step"].get<int64_t>(), full_metrics[i]["step"].get<int64_t>());
            QCOMPARE(part_metrics[i]["loss"].get<double>(), full_metrics[i]["loss"].get<double>());
            QCOMPARE(part_metrics[i]["grad_norm"].get<double>(), full_metrics[i]["grad_norm"].get<double>());
            QCOMPARE(part_metrics[i]["eval_loss"].dump(), full_metrics[i]["eval_loss"].dump());
        }
        QVERIFY(c.model->lora_tensors() == a.model->lora_tensors());
        QCOMPARE(file_bytes(root / "part/adapter/adapter_model.safetensors"),
                 file_bytes(root / "full/adapter/adapter_model.safetensors"));
        QCOMPARE(file_bytes(root / "part/adapter/adapter_config.json"),
                 file_bytes(root / "full/adapter/adapter_config.json"));
    }

    // Non-finite steps: a lone one is skipped (weights unchanged) and the run goes on; max_nonfinite_steps in a
    // row stop the run as diverged, mark the metrics, remove the checkpoints whose weights gave the bad loss,
    // keep the last good one, write no adapter and say what to change.
    void nonfinite_steps_skip_then_diverge() {
        QTemporaryDir tmp;
        const fs::path root = tmp.path().toStdString();
        RunConfig c = base_config(make_model_dir(root), root / "lone");
        c.training.grad_accum = 1;  // one forward_backward call per step
        c.training.eval_every = 0;
        c.training.max_steps = 10;
        c.training.checkpoint_every = 1;
        {
            auto b = build(c);
            b.model->nan_backward_calls = {4, 6, 7};  // never 3 in a row
            RecordingSink sink;
            std::atomic<bool> no{false};
            b.trainer.run(sink, no);
            QVERIFY(!b.trainer.diverged());
            QVERIFY(!sink.has(RunEventKind::Diverged));
            QVERIFY(sink.has(RunEventKind::Finished));
            QCOMPARE(int(sink.steps.size()), 10);
            QVERIFY(!std::isfinite(sink.steps[3].loss) && std::isfinite(sink.steps[4].loss));
            QVERIFY(fs::exists(root / "lone/adapter/adapter_config.json"));
            // No checkpoint holds the weights of a non-finite step.
            QVERIFY(!fs::exists(root / "lone/checkpoints/step-4") && fs::exists(root / "lone/checkpoints/step-5"));
            for (const auto& line : read_metrics(root / "lone")) QVERIFY(!line.contains("status"));
        }
        c.output_dir = (root / "diverged").string();
        auto b = build(c);
        b.model->nan_backward_calls = {6, 7, 8, 9, 10};  // steps 6.. are not finite: diverged at step 8
        RecordingSink sink;
        std::atomic<bool> no{false};
        b.trainer.run(sink, no);
        QVERIFY(b.trainer.diverged());
        QVERIFY(!b.trainer.stopped());
        QCOMPARE(int(sink.steps.size()), 8);  // stopped at once, not at max_steps
        QVERIFY(!sink.has(RunEventKind::Finished));
        QCOMPARE(sink.events.back().kind, RunEventKind::Diverged);
        QCOMPARE(sink.events.back().step, int64_t(8));
        const std::string msg = b.trainer.diverged_message();
        QCOMPARE(sink.events.back().message, msg);
        for (const char* needle :
             {"diverged at step 8", "3 steps in a row", "Lower the learning rate", "checkpoints/step-4"})
            QVERIFY2(msg.find(needle) != std::string::npos, msg.c_str());
        QCOMPARE(std::string(run_event_kind_name(RunEventKind::Diverged)), std::string("diverged"));
        const auto metrics = read_metrics(root / "diverged");
        QCOMPARE(metrics.size(), size_t(8));
        QCOMPARE(metrics.back()["status"].get<std::string>(), std::string("diverged"));
        QVERIFY(metrics.back()["loss"].is_null());
        for (size_t i = 0; i + 1 < metrics.size(); ++i) QVERIFY(!metrics[i].contains("status"));
        // Step 5's weights gave step 6 its NaN: checkpoints 5.. are gone, 1..4 stay; no adapter.
        QCOMPARE(latest_checkpoint(root / "diverged").value(), root / "diverged/checkpoints/step-4");
        QVERIFY(!fs::exists(root / "diverged/checkpoints/step-5"));
        QVERIFY(fs::exists(root / "diverged/checkpoints/step-1"));
        QVERIFY(!fs::exists(root / "diverged/adapter"));
        // The kept checkpoint exports (the front ends warn first).
        QCOMPARE(export_run_adapter(root / "diverged", root / "exp", false), std::string("checkpoints/step-4"));

        // One non-finite step is enough when max_nonfinite_steps is 1; and the setting may change on resume.
        c.output_dir = (root / "strict").string();
        c.training.max_nonfinite_steps = 1;
        auto s = build(c);
        s.model->nan_backward_calls = {3};
        RecordingSink ss;
        s.trainer.run(ss, no);
        QVERIFY(s.trainer.diverged());
        QCOMPARE(int(ss.steps.size()), 3);
        const std::string strict = s.trainer.diverged_message();
        QVERIFY2(strict.find("in a row") == std::string::npos, strict.c_str());
        c.training.max_nonfinite_steps = 5;
        build(c, true);  // resuming with another value is allowed (not a different training)

        // A backend that runs ahead (CUDA): the step queued behind the diverged one runs but is not reported.
        c.output_dir = (root / "ahead").string();
        c.training.max_nonfinite_steps = 3;
        c.training.checkpoint_every = 0;
        auto a = build(c);
        a.model->ahead = true;
        a.model->nan_backward_calls = {6, 7, 8, 9, 10};
        RecordingSink sa;
        a.trainer.run(sa, no);
        QVERIFY(a.trainer.diverged());
        QCOMPARE(int(sa.steps.size()), 8);
        QCOMPARE(a.model->queued_steps(), 0);
        QCOMPARE(a.model->backward_calls, int64_t(9));  // step 9 was queued before step 8 was collected
        const auto ahead_metrics = read_metrics(root / "ahead");
        QCOMPARE(ahead_metrics.size(), size_t(8));
        QCOMPARE(ahead_metrics.back()["status"].get<std::string>(), std::string("diverged"));
        QVERIFY(!latest_checkpoint(root / "ahead").has_value());
        QVERIFY2(a.trainer.diverged_message().find("No checkpoint from before the divergence") != std::string::npos,
                 a.trainer.diverged_message().c_str());
    }

    // Processes that run ahead learn of a stop or a divergence at different points (node 0 collects its timed
    // checkpoints' steps at once, node 1 runs a step ahead): each still takes it effect after the same step, so
    // none waits in a step the other never runs.
    void nodes_that_run_ahead_stop_and_diverge_at_the_same_step() {
        QTemporaryDir tmp;
        const fs::path root = tmp.path().toStdString();
        const fs::path model = make_model_dir(root);
        RunConfig c = base_config(model, root / "stop");
        c.training.checkpoint_minutes = 1e-9;  // node 0: a timed checkpoint after every step
        c.training.eval_every = 0;
        std::vector<NodeRun> got = run_two_nodes(c, [](int r, FakeModel& f, std::atomic<bool>& stop) {
            if (r == 1) {  // Ctrl-C on node 1 during its 5th micro-batch
                f.stop_flag = &stop;
                f.stop_at_call = 5;
            }
        });
        for (int r = 0; r < 2; ++r) QVERIFY2(got[size_t(r)].error.empty(), got[size_t(r)].error.c_str());
        QVERIFY(got[0].stopped && got[1].stopped);
        QVERIFY(!got[0].sink.steps.empty());
        QCOMPARE(got[0].sink.steps.back().step, got[1].sink.steps.back().step);
        qInfo("both nodes stopped after step %lld", static_cast<long long>(got[0].sink.steps.back().step));
        QVERIFY(latest_checkpoint(root / "stop").has_value());

        c.output_dir = (root / "diverge").string();
        c.training.max_nonfinite_steps = 1;
        got = run_two_nodes(c, [](int r, FakeModel& f, std::atomic<bool>&) {
            if (r == 1) f.nan_backward_calls = {4};  // the sums of step 4 are NaN on both nodes
        });
        for (int r = 0; r < 2; ++r) QVERIFY2(got[size_t(r)].error.empty(), got[size_t(r)].error.c_str());
        QVERIFY(got[0].diverged && got[1].diverged);
    }

    // Each step's GPUs (data parallelism: several) go to metrics.jsonl with their memory and utilisation, which the
    // Monitor shows and reads back after a resume.
    void metrics_list_each_gpu() {
        QTemporaryDir tmp;
        const fs::path root = tmp.path().toStdString();
        RunConfig c = base_config(make_model_dir(root), root / "run");
        c.training.epochs = 1;
        RecordingSink sink;
        build_and_run(c, sink, [](FakeModel& m) {
            m.gpus = {{0, 34ull << 30, 140ull << 30, 30ull << 30, 97}, {1, 33ull << 30, 140ull << 30, 29ull << 30, -1}};
        });
        const auto metrics = read_metrics(root / "run");
        QVERIFY(!metrics.empty());
        QCOMPARE(sink.steps.front().memory.gpus.size(), size_t(2));
        for (const json& m : metrics) {
            const json& g = m["memory"]["gpus"];
            QCOMPARE(g.size(), size_t(2));
            QCOMPARE(g[0]["device"].get<int>(), 0);
            QCOMPARE(g[0]["used"].get<uint64_t>(), 34ull << 30);
            QCOMPARE(g[0]["total"].get<uint64_t>(), 140ull << 30);
            QCOMPARE(g[0]["peak_allocated"].get<uint64_t>(), 30ull << 30);
            QCOMPARE(g[0]["utilization"].get<int>(), 97);
            QCOMPARE(g[1]["device"].get<int>(), 1);
            QCOMPARE(g[1]["utilization"].get<int>(), -1);
        }
    }

    void run_directory_contents() {
        QTemporaryDir tmp;
        const fs::path root = tmp.path().toStdString();
        RunConfig c = base_config(make_model_dir(root), root / "run");
        c.training.checkpoint_every = 3;
        RecordingSink sink;
        auto b = build_and_run(c, sink);
        const fs::path out = root / "run";
        const RunConfig stored = load_run_config(out / "config.json");
        QCOMPARE(stored.device, DeviceChoice::Cpu);
        QCOMPARE(stored.memory.checkpointing, CheckpointPolicy::Off);
        QCOMPARE(stored.training.lr, c.training.lr);
        QVERIFY(fs::path(stored.output_dir).is_absolute());
        const auto metrics = read_metrics(out);
        QCOMPARE(int64_t(metrics.size()), b.trainer.plan().total_steps);
        for (size_t i = 0; i < metrics.size(); ++i) {
            QCOMPARE(metrics[i]["step"].get<int64_t>(), int64_t(i + 1));
            for (const char* k : {"loss", "lr", "grad_norm", "tokens", "epoch", "eval_loss", "tokens_per_s"})
                QVERIFY2(metrics[i].contains(k), k);
            // The memory of each step (the studio's memory plot after a resume), as StepMetrics reported it.
            QVERIFY(metrics[i].contains("memory"));
            QCOMPARE(metrics[i]["memory"]["weights"].get<uint64_t>(), sink.steps[i].memory.weights);
            QCOMPARE(metrics[i]["memory"]["lora_optimizer"].get<uint64_t>(), sink.steps[i].memory.lora_optimizer);
            QVERIFY(!metrics[i]["memory"].contains("gpus"));  // no GPU: no list
        }
        int checkpoints = 0;
        for (const auto& e : fs::directory_iterator(out / "checkpoints")) {
            ++checkpoints;
            const std::string name = e.path().filename().string();
            QVERIFY2(name.rfind("step-", 0) == 0, name.c_str());
            const int64_t s = std::stoll(name.substr(5));
            QCOMPARE(s % 3, int64_t(0));
            for (const char* f : {"lora.safetensors", "optimizer.safetensors", "state.json"})
                QVERIFY2(fs::is_regular_file(e.path() / f), f);
            const json state = read_json_file(e.path() / "state.json");
            QCOMPARE(state["step"].get<int64_t>(), s);
            QVERIFY(state.contains("data_fingerprint") && state.contains("epoch") && state.contains("batch_in_epoch"));
            const SafetensorsFile opt(e.path() / "optimizer.safetensors");
            QCOMPARE(opt.size(), size_t(8));  // 4 LoRA tensors x (exp_avg, exp_avg_sq)
            QCOMPARE(opt.metadata().at("step"), std::to_string(s));
        }
        QCOMPARE(int64_t(checkpoints), b.trainer.plan().total_steps / 3);
        QVERIFY(fs::is_regular_file(out / "adapter/adapter_config.json"));
        QVERIFY(fs::is_regular_file(out / "adapter/adapter_model.safetensors"));
        QCOMPARE(b.trainer.adapter_dir(), out / "adapter");
        QVERIFY(!any_tmp_under(out));
        // The adapter reads back as PEFT with the trained values.
        const PeftAdapter ad = read_peft_adapter(out / "adapter", tiny_model_config());
        QVERIFY(ad.tensors == b.model->lora_tensors());
        // A fresh run refuses a folder that holds a run.
        expect_error([&] { build(c); }, ErrorCategory::InvalidInput, {"already holds a run", "--resume"});
    }

    void incomplete_checkpoint_is_ignored_and_removed() {
        QTemporaryDir tmp;
        const fs::path root = tmp.path().toStdString();
        RunConfig c = base_config(make_model_dir(root), root / "run");
        c.training.checkpoint_every = 2;
        c.training.max_steps = 6;
        auto b = build(c);
        std::atomic<bool> stop{false};
        b.model->stop_flag = &stop;
        b.model->stop_at_call = 9;  // the flag is seen before step 5
        RecordingSink s1;
        b.trainer.run(s1, stop);
        QVERIFY(b.trainer.stopped());
        const fs::path ck = root / "run/checkpoints";
        QCOMPARE(latest_checkpoint(root / "run").value(), ck / "step-4");
        // What a kill in the middle of writing step 6 leaves: a .tmp folder with everything but state.json,
        // and (defensively) a step folder without state.json.
        fs::copy(ck / "step-4", ck / ".step-6.tmp", fs::copy_options::recursive);
        fs::remove(ck / ".step-6.tmp/state.json");
        fs::create_directories(ck / "step-9");
        write_file(ck / "step-9/lora.safetensors", "garbage");
        QCOMPARE(latest_checkpoint(root / "run").value(), ck / "step-4");
        // Also a metrics line past the checkpoint and half a line, as a crash may leave.
        {
            std::ofstream m(root / "run/metrics.jsonl", std::ios::app);
            m << "{\"step\": 5, \"loss\": 1.0}\n{\"step\": 6, \"lo";
        }
        auto r = build(c, true);
        RecordingSink s2;
        std::atomic<bool> no{false};
        r.trainer.run(s2, no);
        QVERIFY(!r.trainer.stopped());
        QCOMPARE(s2.steps.front().step, int64_t(5));
        QVERIFY(!fs::exists(ck / ".step-6.tmp"));
        QVERIFY(fs::is_regular_file(ck / "step-6/state.json"));
        const auto metrics = read_metrics(root / "run");
        QCOMPARE(metrics.size(), size_t(6));
        for (size_t i = 0; i < metrics.size(); ++i) QCOMPARE(metrics[i]["step"].get<int64_t>(), int64_t(i + 1));
        QVERIFY(!any_tmp_under(root / "run"));
    }

    void resume_refuses_changed_config_or_data() {
        QTemporaryDir tmp;
        const fs::path root = tmp.path().toStdString();
        RunConfig c = base_config(make_model_dir(root), root / "run");
        auto b = build(c);
        std::atomic<bool> stop{false};
        b.model->stop_flag = &stop;
        b.model->stop_at_call = 5;
        RecordingSink s;
        b.trainer.run(s, stop);
        QVERIFY(b.trainer.stopped());
        RunConfig other = c;
        other.training.lr = 5e-3;
        expect_error([&] { build(other, true); }, ErrorCategory::InvalidInput, {"training.lr", "differ"});
        other = c;
        other.lora.r = 4;
        expect_error([&] { build(other, true); }, ErrorCategory::InvalidInput, {"lora.r"});
        expect_error([&] { build(c, true, default_lengths(), 1); }, ErrorCategory::InvalidInput, {"data changed"});
        // checkpoint_every may change, and so may the timed checkpoints (checkpoint_minutes, keep_checkpoints).
        other = c;
        other.training.checkpoint_every = 5;
        build(other, true);
        other.training.checkpoint_minutes = 0.5;
        other.training.keep_checkpoints = 7;
        build(other, true);
        {  // a run written before these fields existed still resumes
            json old = read_json_file(root / "run" / "config.json");
            old["training"].erase("checkpoint_minutes");
            old["training"].erase("keep_checkpoints");
            write_file(root / "run" / "config.json", old.dump(2));
            build(c, true);
        }
        // Nothing to resume.
        RunConfig none = c;
        none.output_dir = (root / "empty").string();
        expect_error([&] { build(none, true); }, ErrorCategory::InvalidInput, {"no run to resume"});
    }

    void export_final_or_latest_checkpoint() {
        QTemporaryDir tmp;
        const fs::path root = tmp.path().toStdString();
        const fs::path model = make_model_dir(root);
        RunConfig c = base_config(model, root / "run");
        c.training.checkpoint_every = 2;
        auto b = build(c);
        std::atomic<bool> stop{false};
        b.model->stop_flag = &stop;
        b.model->stop_at_call = 10;
        RecordingSink s;
        b.trainer.run(s, stop);
        QVERIFY(b.trainer.stopped());
        // Not finished: exports the latest checkpoint, which holds the stopped step's values.
        const std::string from = export_run_adapter(root / "run", root / "exp1", false);
        QCOMPARE(QString::fromStdString(from),
                 QString::fromStdString("checkpoints/" + latest_checkpoint(root / "run")->filename().string()));
        QVERIFY(read_peft_adapter(root / "exp1", tiny_model_config()).tensors == b.model->lora_tensors());
        expect_error([&] { export_run_adapter(root / "run", root / "exp1", false); }, ErrorCategory::InvalidInput,
                     {"--force"});
        auto r = build(c, true);
        std::atomic<bool> no{false};
        r.trainer.run(s, no);
        QCOMPARE(export_run_adapter(root / "run", root / "exp1", true), std::string("adapter"));
        QCOMPARE(file_bytes(root / "exp1/adapter_model.safetensors"),
                 file_bytes(root / "run/adapter/adapter_model.safetensors"));
        expect_error([&] { export_run_adapter(root / "nothing", root / "exp2", false); }, ErrorCategory::Io, {});
    }

    // training.checkpoint_minutes: a checkpoint after the step during which that much wall time passed since
    // the last one; afterwards only the newest keep_checkpoints rolling ones stay (checkpoint_every's stay too).
    void timed_checkpoints_keep_the_newest() {
        QTemporaryDir tmp;
        const fs::path root = tmp.path().toStdString();
        const fs::path model = make_model_dir(root);
        auto checkpoint_steps = [](const fs::path& out) {
            std::set<int64_t> steps;
            for (const auto& e : fs::directory_iterator(out / "checkpoints")) {
                const std::string name = e.path().filename().string();
                if (name.rfind("step-", 0) == 0 && fs::is_regular_file(e.path() / "state.json"))
                    steps.insert(std::stoll(name.substr(5)));
            }
            return steps;
        };
        auto saved_events = [](const RecordingSink& sink) {
            std::vector<int64_t> v;
            for (const auto& e : sink.events)
                if (e.kind == RunEventKind::CheckpointSaved) v.push_back(e.step);
            return v;
        };
        std::atomic<bool> no{false};
        for (const bool ahead : {false, true}) {  // a synchronous backend (CPU) and one that runs ahead (CUDA)
            const std::string tag = ahead ? "ahead" : "sync";
            RunConfig c = base_config(model, root / ("timed-" + tag));
            c.training.checkpoint_every = 0;
            c.training.checkpoint_minutes = 1e-6;  // 60 us: every step here takes longer (delay below)
            c.training.keep_checkpoints = 2;
            auto b = build(c);
            b.model->ahead = ahead;
            b.model->delay = std::chrono::milliseconds(1);
            RecordingSink sink;
            b.trainer.run(sink, no);
            const int64_t T = b.trainer.plan().total_steps;
            QVERIFY(T >= 4);
            std::vector<int64_t> every(T);
            for (int64_t i = 0; i < T; ++i) every[i] = i + 1;
            QCOMPARE(saved_events(sink), every);  // a checkpoint after every step
            QCOMPARE(checkpoint_steps(c.output_dir), (std::set<int64_t>{T - 1, T}));
            QVERIFY(!any_tmp_under(c.output_dir));
            QCOMPARE(b.model->queued_steps(), 0);
            // The newest checkpoint holds the final weights (it was written when its step was collected).
            const SafetensorsFile lora(fs::path(c.output_dir) / ("checkpoints/step-" + std::to_string(T)) /
                                       "lora.safetensors");
            for (const auto& [name, values] : b.model->lora_tensors()) {
                const std::vector<float> stored = tensor_to_f32(lora.at(name));
                QVERIFY2(stored == values, name.c_str());
            }
            QCOMPARE(load_run_config(fs::path(c.output_dir) / "config.json").training.keep_checkpoints, int64_t(2));
        }
        {  // with checkpoint_every: its checkpoints are never pruned; the rolling ones keep the newest N
            RunConfig c = base_config(model, root / "mixed");
            c.training.checkpoint_every = 4;
            c.training.checkpoint_minutes = 1e-6;
            c.training.keep_checkpoints = 1;
            auto b = build(c);
            b.model->delay = std::chrono::milliseconds(1);
            RecordingSink sink;
            b.trainer.run(sink, no);
            const int64_t T = b.trainer.plan().total_steps;
            std::set<int64_t> expected;
            for (int64_t s = 4; s <= T; s += 4) expected.insert(s);
            int64_t last_rolling = T;
            while (last_rolling % 4 == 0) --last_rolling;
            expected.insert(last_rolling);
            QCOMPARE(checkpoint_steps(c.output_dir), expected);
        }
        {  // the default (10 minutes) writes nothing in a short run; 0 turns the timed checkpoints off
            for (const double minutes : {10.0, 0.0}) {
                RunConfig c = base_config(model, root / ("off-" + std::to_string(int(minutes))));
                c.training.checkpoint_every = 0;
                c.training.checkpoint_minutes = minutes;
                auto b = build(c);
                b.model->delay = std::chrono::milliseconds(1);
                RecordingSink sink;
                b.trainer.run(sink, no);
                QVERIFY(saved_events(sink).empty());
                QVERIFY(!latest_checkpoint(c.output_dir).has_value());
            }
        }
    }

    void run_config_json_round_trip() {
        RunConfig c = base_config("/m", "/o");
        c.data.validation = "/v.jsonl";
        c.data.format = "chat";
        c.data.packing = false;
        c.training.schedule = LrSchedule::Linear;
        c.training.beta1 = 0.8;
        c.training.beta2 = 0.95;
        c.training.max_steps = 9;
        c.memory.checkpointing = CheckpointPolicy::Smart;
        c.device = DeviceChoice::Auto;
        c.seed = 123456789012345ULL;
        c.training.max_nonfinite_steps = 7;
        c.training.checkpoint_minutes = 2.5;
        c.training.keep_checkpoints = 5;
        const json j = c;
        QCOMPARE(j["training"]["betas"], json({0.8, 0.95}));
        QCOMPARE(j["training"]["checkpoint_minutes"], json(2.5));
        QCOMPARE(j["training"]["keep_checkpoints"], json(5));
        QCOMPARE(j["training"]["max_nonfinite_steps"], json(7));
        QCOMPARE(j["data"]["template"], json("auto"));
        const RunConfig back = j.get<RunConfig>();
        QVERIFY(back == c);
        QCOMPARE(json(back).dump(), j.dump());
        QVERIFY(!j.contains("devices"));  // written only when set: older runs' config.json still compare equal
        RunConfig gpus = c;
        gpus.devices = {0, 1};
        QCOMPARE(json(gpus)["devices"], json({0, 1}));
        QVERIFY(json(gpus).get<RunConfig>() == gpus);
        QVERIFY(!j["memory"].contains("host_budget_gib"));  // the default (half of the RAM) is not written
        RunConfig host = c;
        host.memory.host_budget_gib = 100;
        QCOMPARE(json(host)["memory"]["host_budget_gib"], json(100.0));
        QVERIFY(json(host).get<RunConfig>() == host);
        // Every checkpointing policy survives a round trip by its name.
        for (CheckpointPolicy p : {CheckpointPolicy::Off, CheckpointPolicy::Recompute, CheckpointPolicy::Smart,
                                   CheckpointPolicy::SmartSingle, CheckpointPolicy::Auto}) {
            RunConfig cp = c;
            cp.memory.checkpointing = p;
            QCOMPARE(json(cp)["memory"]["checkpointing"], json(std::string(checkpoint_policy_name(p))));
            QVERIFY(json(cp).get<RunConfig>() == cp);
        }
        QCOMPARE(parse_checkpoint_policy("smart-single"), std::optional(CheckpointPolicy::SmartSingle));
        // Missing keys keep the defaults.
        const RunConfig small = json{{"model", "/m"}, {"output_dir", "/o"}, {"data", {{"dataset", "d.jsonl"}}}}.get<RunConfig>();
        QCOMPARE(small.training.lr, TrainingConfig{}.lr);
        QCOMPARE(small.training.max_nonfinite_steps, int64_t(3));
        QCOMPARE(small.training.checkpoint_minutes, 10.0);
        QCOMPARE(small.training.keep_checkpoints, int64_t(3));
        QCOMPARE(small.lora.r, LoraConfig{}.r);
    }

    void run_config_errors_name_the_field() {
        const json good = base_config("/m", "/o");
        auto bad = [&](const std::function<void(json&)>& edit, std::vector<std::string> needles) {
            json j = good;
            edit(j);
            expect_error([&] { (void)j.get<RunConfig>(); }, ErrorCategory::InvalidInput, needles);
        };
        bad([](json& j) { j["bogus"] = 1; }, {"bogus", "unknown key"});
        bad([](json& j) { j["training"]["learning_rate"] = 1; }, {"training.learning_rate", "unknown key"});
        bad([](json& j) { j["data"]["max_len"] = 1; }, {"data.max_len"});
        bad([](json& j) { j["memory"]["x"] = 1; }, {"memory.x"});
        bad([](json& j) { j["lora"]["rank"] = 1; }, {"lora.rank"});
        bad([](json& j) { j["schema_version"] = 2; }, {"schema_version"});
        bad([](json& j) { j["model"] = ""; }, {"model"});
        bad([](json& j) { j["model"] = 3; }, {"model", "string"});
        bad([](json& j) { j["output_dir"] = ""; }, {"output_dir"});
        bad([](json& j) { j["device"] = "tpu"; }, {"device", "tpu"});
        bad([](json& j) { j["devices"] = "0,1"; }, {"devices", "list"});
        bad([](json& j) { j["devices"] = {0, -2}; }, {"devices", "-2"});
        bad([](json& j) { j["devices"] = {-1, 0}; }, {"devices", "-1"});
        bad([](json& j) { j["device"] = "cpu"; j["devices"] = {0, 1}; }, {"devices", "cpu"});
        bad([](json& j) { j["seed"] = -1; }, {"seed"});
        bad([](json& j) { j["data"]["dataset"] = ""; }, {"data.dataset"});
        bad([](json& j) { j["data"]["validation_fraction"] = 1.0; }, {"data.validation_fraction"});
        bad([](json& j) { j["data"]["format"] = "csv"; }, {"data.format", "csv"});
        bad([](json& j) { j["data"]["max_seq_len"] = -1; }, {"data.max_seq_len"});
        bad([](json& j) { j["data"]["packing"] = 3; }, {"data.packing"});
        bad([](json& j) { j["data"]["template"] = ""; }, {"data.template"});
        bad([](json& j) { j["lora"]["r"] = 0; }, {"lora", "r"});
        bad([](json& j) { j["lora"]["dropout"] = 1.5; }, {"lora", "dropout"});
        bad([](json& j) { j["training"]["lr"] = 0; }, {"training.lr"});
        bad([](json& j) { j["training"]["lr"] = "fast"; }, {"training.lr", "number"});
        bad([](json& j) { j["training"]["schedule"] = "step"; }, {"training.schedule", "step"});
        bad([](json& j) { j["training"]["warmup_steps"] = -1; }, {"training.warmup_steps"});
        bad([](json& j) { j["training"]["warmup_ratio"] = 1.5; }, {"training.warmup_ratio"});
        bad([](json& j) { j["training"]["epochs"] = -1; }, {"training.epochs"});
        bad([](json& j) { j["training"]["epochs"] = 0; j["training"]["max_steps"] = 0; }, {"training.epochs"});
        bad([](json& j) { j["training"]["max_steps"] = -2; }, {"training.max_steps"});
        bad([](json& j) { j["training"]["batch_tokens"] = 0; }, {"training.batch_tokens"});
        bad([](json& j) { j["training"]["batch_tokens"] = 8; }, {"training.batch_tokens", "data.max_seq_len"});
        bad([](json& j) { j["training"]["grad_accum"] = 0; }, {"training.grad_accum"});
        bad([](json& j) { j["training"]["grad_accum"] = 1.5; }, {"training.grad_accum", "integer"});
        bad([](json& j) { j["training"]["max_grad_norm"] = -1; }, {"training.max_grad_norm"});
        bad([](json& j) { j["training"]["weight_decay"] = -0.1; }, {"training.weight_decay"});
        bad([](json& j) { j["training"]["betas"] = {0.9}; }, {"training.betas"});
        bad([](json& j) { j["training"]["betas"] = {1.0, 0.9}; }, {"training.betas", "beta1"});
        bad([](json& j) { j["training"]["betas"] = {0.9, 1.0}; }, {"training.betas", "beta2"});
        bad([](json& j) { j["training"]["eps"] = 0; }, {"training.eps"});
        bad([](json& j) { j["training"]["eval_every"] = -1; }, {"training.eval_every"});
        bad([](json& j) { j["training"]["checkpoint_every"] = -1; }, {"training.checkpoint_every"});
        bad([](json& j) { j["training"]["max_nonfinite_steps"] = 0; }, {"training.max_nonfinite_steps"});
        bad([](json& j) { j["training"]["checkpoint_minutes"] = -1; }, {"training.checkpoint_minutes", ">= 0"});
        bad([](json& j) { j["training"]["checkpoint_minutes"] = "often"; }, {"training.checkpoint_minutes", "number"});
        bad([](json& j) { j["training"]["keep_checkpoints"] = 0; }, {"training.keep_checkpoints", ">= 1"});
        bad([](json& j) { j["training"]["keep_checkpoints"] = 1.5; }, {"training.keep_checkpoints", "integer"});
        bad([](json& j) { j["training"]["max_nonfinite_steps"] = "x"; }, {"training.max_nonfinite_steps", "integer"});
        bad([](json& j) { j["memory"]["checkpointing"] = "always"; }, {"memory.checkpointing", "always"});
        bad([](json& j) { j["memory"]["host_budget_gib"] = -1; }, {"memory.host_budget_gib", "positive number of GiB"});
        bad([](json& j) { j["training"] = 3; }, {"training", "object"});
        bad([](json& j) { j["data"]["columns"] = {{"answer", "output"}}; }, {"answer", "not a dataset key"});
        bad([](json& j) { j["data"]["columns"] = {{"output", 3}}; }, {"data.columns.output"});
        {  // data.columns round-trips through config.json; without it the file has no "columns" key
            json with = good;
            with["data"]["columns"] = {{"instruction", "question"}};
            const RunConfig rc = with.get<RunConfig>();
            QCOMPARE(rc.data.columns.at("instruction"), std::string("question"));
            const json back = rc;
            QCOMPARE(back.at("data").at("columns"), with.at("data").at("columns"));
            QVERIFY(!json(good.get<RunConfig>()).at("data").contains("columns"));
        }
        // load_run_config names the file.
        QTemporaryDir tmp;
        const fs::path p = fs::path(tmp.path().toStdString()) / "run.json";
        json j = good;
        j["training"]["lr"] = -1;
        write_file(p, j.dump());
        expect_error([&] { load_run_config(p); }, ErrorCategory::InvalidInput, {p.string(), "training.lr"});
        // device cuda without a usable GPU (CI) is refused with the reason and what to do instead.
        std::string no_gpu;
        if (!train::cuda_usable(&no_gpu)) {
            RunConfig cuda = base_config(make_model_dir(tmp.path().toStdString()), fs::path(tmp.path().toStdString()) / "o");
            cuda.device = DeviceChoice::Cuda;
            cuda.data.dataset = (fs::path(tmp.path().toStdString()) / "train.txt").string();
            write_file(cuda.data.dataset, "hello\n");
            expect_error([&] { Trainer::prepare(cuda); }, ErrorCategory::Unsupported, {"cuda", "--device cpu", no_gpu});
        }
    }

    // A sliding window is implemented by the attention kernels: max_seq_len is not capped by it.
    void max_seq_len_not_capped_by_sliding_window() {
        QTemporaryDir tmp;
        const fs::path dir = fs::path(tmp.path().toStdString()) / "model";
        const json j = {{"architectures", {"MistralForCausalLM"}}, {"model_type", "mistral"}, {"hidden_size", 4},
                        {"intermediate_size", 8}, {"num_hidden_layers", 1}, {"num_attention_heads", 2},
                        {"num_key_value_heads", 2}, {"vocab_size", 32}, {"max_position_embeddings", 64},
                        {"sliding_window", 16}, {"rms_norm_eps", 1e-6}, {"rope_theta", 10000.0},
                        {"hidden_act", "silu"}};
        write_file(dir / "config.json", j.dump(2));
        RunConfig c;
        c.model = dir.string();
        c.device = DeviceChoice::Cpu;
        c.data.max_seq_len = 48;
        std::vector<std::string> notes;
        const ModelConfig mc = train::resolve_limits_and_device(c, notes);
        QCOMPARE(mc.sliding_window, int64_t(16));
        QCOMPARE(c.data.max_seq_len, 48);
        QVERIFY(notes.empty());
    }

    // data.train_on_all_tokens reaches the data pipeline: the prompts are trained too (more label tokens), and
    // the key is written only when set, so a run's config.json from before the key still resumes.
    void train_on_all_tokens_trains_prompts_too() {
        QTemporaryDir tmp;
        const fs::path root = tmp.path().toStdString();
        create_demo_model(root / "demo");
        RunConfig c;
        c.model = (root / "demo").string();
        c.data.dataset = std::string(TANDEM_SOURCE_DIR) + "/datasets/demo_alpaca.jsonl";
        c.data.max_seq_len = 256;
        c.training.batch_tokens = 1024;
        c.training.max_steps = 1;
        c.training.checkpoint_minutes = 0;
        c.lora.r = 2;
        c.device = DeviceChoice::Cpu;
        QVERIFY(!json(c)["data"].contains("train_on_all_tokens"));
        auto label_tokens = [&](bool all, const char* out) {
            RunConfig r = c;
            r.data.train_on_all_tokens = all;
            r.output_dir = (root / out).string();
            RecordingSink sink;
            std::atomic<bool> stop{false};
            Trainer::prepare(r).run(sink, stop);
            return sink.steps.at(0).label_tokens;
        };
        const int64_t replies = label_tokens(false, "replies"), all = label_tokens(true, "all");
        QVERIFY2(all > replies, (std::to_string(all) + " vs " + std::to_string(replies)).c_str());
        const RunConfig stored = load_run_config(root / "all" / "config.json");
        QVERIFY(stored.data.train_on_all_tokens);
        QCOMPARE(json(stored)["data"]["train_on_all_tokens"], json(true));
    }

    void estimate_memory_matches_the_loaded_run() {
        // The front end's memory bar: estimate_memory reads only config.json, yet must predict what
        // Trainer::prepare then holds, byte for byte on the CPU backend.
        const fs::path model = assets() / "babyllama-tok105/hf";
        const fs::path dataset = assets() / "datasets" / "tinystories_train_head.txt";
        TANDEM_REQUIRE_ASSET(model);
        TANDEM_REQUIRE_ASSET(dataset);
        QTemporaryDir tmp;
        RunConfig c;
        c.model = model.string();
        c.data.dataset = dataset.string();
        c.data.max_seq_len = 128;
        c.training.batch_tokens = 512;
        c.training.max_steps = 1;
        c.lora.dropout = 0.1;
        c.device = DeviceChoice::Cpu;
        c.output_dir = (fs::path(tmp.path().toStdString()) / "run").string();
        const MemoryEstimate e = estimate_memory(c);
        QVERIFY2(e.fits, e.message.c_str());
        QCOMPARE(e.device, DeviceChoice::Cpu);
        QVERIFY(e.memory.device_total > 0 && e.memory.device_free > 0);
        const Plan p = Trainer::prepare(c).plan();
        QCOMPARE(e.memory.weights, p.memory.weights);
        QCOMPARE(e.memory.activations, p.memory.activations);
        QCOMPARE(e.memory.lora_optimizer, uint64_t(p.trainable_parameters) * 16);  // value, grad, m, v (fp32)
        // A budget no machine has is reported as not fitting, with what to change; no exception.
        c.training.batch_tokens = 1 << 30;
        c.data.max_seq_len = 1024;
        const MemoryEstimate big = estimate_memory(c);
        QVERIFY(!big.fits);
        QVERIFY2(big.message.find("training.batch_tokens") != std::string::npos, big.message.c_str());
        // A model folder without config.json is an input error naming the folder.
        c.model = tmp.path().toStdString();
        expect_error([&] { estimate_memory(c); }, ErrorCategory::InvalidInput, {tmp.path().toStdString()});
    }

    void cli_sigkill_during_checkpoint_then_resume() {
        // End to end against tandem-cli train with the tiny pretrained Llama of the shared assets: kill -9
        // while checkpoints are being written (one every step), resume, and compare with an uninterrupted run.
        const fs::path cli = TANDEM_CLI_PATH;
        const fs::path model = assets() / "babyllama-tok105/hf";
        const fs::path dataset = assets() / "datasets" / "tinystories_train_head.txt";
        QVERIFY2(fs::exists(cli), "tandem-cli is not built");
        TANDEM_REQUIRE_ASSET(model);
        TANDEM_REQUIRE_ASSET(dataset);
        QTemporaryDir tmp;
        const fs::path root = tmp.path().toStdString();
        auto args = [&](const fs::path& out) {
            return QStringList{"train", "--model", QString::fromStdString(model.string()), "--dataset",
                               QString::fromStdString(dataset.string()), "--out", QString::fromStdString(out.string()),
                               "--max-steps", "12", "--batch-tokens", "512", "--max-seq-len", "128",
                               "--checkpoint-every", "1", "--device", "cpu", "--seed", "3"};
        };
        // Sanitizer builds run this ~50x slower than release: generous limits.
        const int limit_ms = 600000;
        const CliResult full = run_cli(args(root / "full"), {}, limit_ms);
        QVERIFY2(full.exit_code == 0, full.err.right(600).constData());
        QProcess p;
        p.start(QString::fromStdString(cli.string()), args(root / "killed"));
        QVERIFY(p.waitForStarted());
        QTRY_VERIFY_WITH_TIMEOUT(latest_checkpoint(root / "killed").has_value(), limit_ms);
        ::kill(static_cast<pid_t>(p.processId()), SIGKILL);
        p.waitForFinished();
        QVERIFY2(!fs::exists(root / "killed/adapter"), "the run finished before it was killed: the test proves nothing");
        QStringList resume = args(root / "killed");
        resume << "--resume";
        const CliResult r = run_cli(resume, {}, limit_ms);
        QCOMPARE(r.exit_code, 0);
        QVERIFY(!any_tmp_under(root / "killed"));
        QCOMPARE(file_bytes(root / "killed/adapter/adapter_model.safetensors"),
                 file_bytes(root / "full/adapter/adapter_model.safetensors"));
        const auto a = read_metrics(root / "full"), b = read_metrics(root / "killed");
        QCOMPARE(a.size(), b.size());
        for (size_t i = 0; i < a.size(); ++i) QCOMPARE(a[i]["loss"].get<double>(), b[i]["loss"].get<double>());
    }

    // Continue training an exported adapter: its LoRA settings win over --lora-*, and the first step starts from
    // what it learned (same seed and data as the first run, so step 1 sees the same batch).
    void cli_continue_from_adapter() {
        const fs::path model = assets() / "babyllama-tok105/hf";
        const fs::path dataset = assets() / "datasets" / "tinystories_train_head.txt";
        TANDEM_REQUIRE_ASSET(model);
        TANDEM_REQUIRE_ASSET(dataset);
        QTemporaryDir tmp;
        const fs::path root = tmp.path().toStdString();
        auto args = [&](const fs::path& out, int steps, int rank) {
            return QStringList{"train", "--model", QString::fromStdString(model.string()), "--dataset",
                               QString::fromStdString(dataset.string()), "--out", QString::fromStdString(out.string()),
                               "--max-steps", QString::number(steps), "--batch-tokens", "1024", "--max-seq-len", "256",
                               "--lr", "1e-3", "--schedule", "constant", "--seed", "3", "--lora-r", QString::number(rank)};
        };
        const CliResult first = run_cli(args(root / "first", 6, 8), {}, 600000);
        QVERIFY2(first.exit_code == 0, first.err.right(600).constData());
        QStringList cont = args(root / "cont", 1, 4);
        cont << "--init-adapter" << QString::fromStdString((root / "first/adapter").string());
        const CliResult second = run_cli(cont, {}, 600000);
        QVERIFY2(second.exit_code == 0, second.err.right(600).constData());
        std::ifstream cfg_in(root / "cont/config.json");
        const auto cfg = nlohmann::json::parse(cfg_in);
        QCOMPARE(cfg.at("lora").at("r").get<int>(), 8);  // the adapter's rank, not --lora-r 4
        const auto a = read_metrics(root / "first"), b = read_metrics(root / "cont");
        QVERIFY2(b.at(0)["loss"].get<double>() < a.at(0)["loss"].get<double>() - 0.05,
                 qPrintable(QString("continued %1 vs fresh %2").arg(b.at(0)["loss"].get<double>()).arg(a.at(0)["loss"].get<double>())));
        // A folder that is not an adapter is refused, naming it.
        QStringList bad = args(root / "bad", 1, 8);
        bad << "--init-adapter" << QString::fromStdString((root / "first").string());
        const CliResult r = run_cli(bad, {}, 600000);
        QVERIFY(!r.crashed);
        QCOMPARE(r.exit_code, 2);
        QVERIFY2(r.err.contains("first"), r.err.constData());
    }
};

QTEST_GUILESS_MAIN(TestTrainer)
#include "test_trainer.moc"
