// SPDX-FileCopyrightText: 2026 The Tandem developers
// SPDX-License-Identifier: GPL-3.0-or-later
// The training loop, checkpoints, resume and the run directory (see tandem/trainer.h for the contract).
// Decisions a reader must know:
//  - Micro-batches are consumed in order across epochs: epoch e's batches are pack_dataset(seed + e); an
//    optimizer step takes the next grad_accum of them (the last step of an epoch may take fewer, so no
//    batch is skipped). The resume position is (step, epoch, batch index in the epoch).
//  - grad_scale = 1 / label tokens of the whole step, computed before the micro-batches run.
//  - Checkpoint = LoRA values + AdamW moments + state.json. Nothing else is needed to continue bitwise:
//    the schedule, the data order and the dropout seeds are pure functions of (seed, step, position).
//  - Divergence is judged on collected steps: a streak of non-finite steps that reaches
//    max_nonfinite_steps ends the run at once (a step already queued behind it runs but is not reported),
//    and the checkpoints whose weights produced the first non-finite step (steps >= the last finite one) go.
#include "tandem/trainer.h"

#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstring>
#include <fstream>
#include <functional>
#include <set>
#include <sstream>

#include <nlohmann/json.hpp>

#include "core/files.h"
#include "export/gguf.h"
#include "export/merged.h"
#include "io/atomic_file.h"
#include "tandem/error.h"
#include "tandem/model_config.h"
#include "tandem/safetensors.h"
#include "train/data_parallel.h"
#include "train/schedule.h"
#include "train/trainer_impl.h"

namespace tandem {

namespace fs = std::filesystem;
using json = nlohmann::json;

std::string_view run_event_kind_name(RunEventKind kind) noexcept {
    switch (kind) {
        case RunEventKind::Started: return "started";
        case RunEventKind::Info: return "info";
        case RunEventKind::Warning: return "warning";
        case RunEventKind::CheckpointSaved: return "checkpoint_saved";
        case RunEventKind::Eval: return "eval";
        case RunEventKind::Finished: return "finished";
        case RunEventKind::Stopped: return "stopped";
        case RunEventKind::Resumed: return "resumed";
        case RunEventKind::Diverged: return "diverged";
    }
    return "?";
}

namespace {

constexpr const char* kStateName = "state.json";
constexpr const char* kLoraName = "lora.safetensors";
constexpr const char* kOptimizerName = "optimizer.safetensors";

void fsync_dir(const fs::path& dir) {
    const int fd = ::open(dir.c_str(), O_RDONLY | O_DIRECTORY);
    if (fd >= 0) {
        ::fsync(fd);
        ::close(fd);
    }
}

// FNV-1a 64 over the bytes of arrays, for the data fingerprint.
struct Fnv {
    uint64_t h = 0xcbf29ce484222325ULL;
    void bytes(const void* p, size_t n) {
        const auto* b = static_cast<const unsigned char*>(p);
        for (size_t i = 0; i < n; ++i) h = (h ^ b[i]) * 0x100000001b3ULL;
    }
    template <typename T>
    void vec(const std::vector<T>& v) {
        const uint64_t n = v.size();
        bytes(&n, sizeof n);
        bytes(v.data(), v.size() * sizeof(T));
    }
};

std::string hex64(uint64_t v) {
    char buf[17];
    std::snprintf(buf, sizeof buf, "%016llx", static_cast<unsigned long long>(v));
    return buf;
}

// Step number of "step-N" (or -1).
int64_t step_of_dir_name(const std::string& name) {
    if (name.rfind("step-", 0) != 0 || name.size() == 5) return -1;
    int64_t v = 0;
    for (size_t i = 5; i < name.size(); ++i) {
        if (name[i] < '0' || name[i] > '9') return -1;
        v = v * 10 + (name[i] - '0');
        if (v > (int64_t(1) << 50)) return -1;
    }
    return v;
}

std::vector<float> read_f32(const SafetensorsFile& file, const std::string& name, size_t numel) {
    const TensorInfo& t = file.at(name);
    if (static_cast<size_t>(t.numel()) != numel)
        throw_invalid(file.path().string() + ": tensor '" + name + "' has " + std::to_string(t.numel()) +
                      " elements, expected " + std::to_string(numel));
    return tensor_to_f32(t);
}

// An integer field of a checkpoint's state.json. A damaged or hand-edited file is refused naming it and the
// way on (the checkpoint before it), never as an internal error.
int64_t state_int(const json& state, const fs::path& file, const char* key) {
    const auto it = state.find(key);
    if (it == state.end() || !it->is_number_integer())
        throw_invalid(file.string() + ": \"" + key + "\" is missing or not an integer, so this checkpoint cannot be " +
                      "resumed from. Remove its folder to resume from the checkpoint before it, or start a new run");
    return it->get<int64_t>();
}

// Keys whose values may change between a run and its resume.
json comparable(json j) {
    j.erase("output_dir");
    j.erase("devices");  // which GPUs run it, not what is trained (N replicas compute what one GPU computes)
    if (j.contains("training")) {
        j["training"].erase("checkpoint_every");
        j["training"].erase("checkpoint_minutes");  // when to save, not what is trained (older runs lack them)
        j["training"].erase("keep_checkpoints");
        j["training"].erase("eval_every");
        j["training"].erase("max_nonfinite_steps");  // when to give up, not what is trained (older runs lack it)
    }
    return j;
}

void diff_json(const json& a, const json& b, const std::string& where, std::vector<std::string>& out) {
    if (a.is_object() && b.is_object()) {
        std::set<std::string> keys;
        for (const auto& [k, v] : a.items()) keys.insert(k);
        for (const auto& [k, v] : b.items()) keys.insert(k);
        for (const auto& k : keys) {
            const std::string p = where.empty() ? k : where + "." + k;
            if (!a.contains(k)) out.push_back(p + " (new)");
            else if (!b.contains(k)) out.push_back(p + " (missing)");
            else diff_json(a.at(k), b.at(k), p, out);
        }
        return;
    }
    if (a != b) out.push_back(where + ": run has " + a.dump() + ", now " + b.dump());
}

// What the processes of a multi-process run must agree on, as named parts (rendezvous.h): the settings that
// change what is trained (paths and when-to-save settings may differ between machines), the data, the model
// files, the LoRA values the run starts from (seed, init adapter, resumed checkpoint) and the resume step.
std::vector<FingerprintPart> run_fingerprint(const RunConfig& config, const std::string& data_fingerprint,
                                             TrainableModel& model, int64_t step) {
    std::vector<FingerprintPart> parts;
    parts.emplace_back("Tandem version", TANDEM_VERSION);
    json j = config;
    for (const char* k : {"output_dir", "model", "init_adapter"}) j.erase(k);
    if (j.contains("data"))
        for (const char* k : {"dataset", "validation"}) j["data"].erase(k);
    if (j.contains("training"))
        for (const char* k : {"checkpoint_every", "checkpoint_minutes", "keep_checkpoints", "eval_every"})
            j["training"].erase(k);
    const json flat = j.flatten();
    for (const auto& [pointer, value] : flat.items()) {
        std::string key = pointer.substr(pointer.empty() ? 0 : 1);
        std::replace(key.begin(), key.end(), '/', '.');
        parts.emplace_back("setting " + key, value.dump());
    }
    parts.emplace_back("data", data_fingerprint);
    Fnv m;
    const std::string model_config = read_file(fs::path(config.model) / "config.json");
    m.bytes(model_config.data(), model_config.size());
    std::vector<std::pair<std::string, uintmax_t>> weights;
    std::error_code ec;
    for (const auto& e : fs::directory_iterator(config.model, ec))
        if (e.path().extension() == ".safetensors") weights.emplace_back(e.path().filename().string(), e.file_size(ec));
    std::sort(weights.begin(), weights.end());
    for (const auto& [name, size] : weights) {
        m.bytes(name.data(), name.size());
        m.bytes(&size, sizeof size);
    }
    parts.emplace_back("model (config.json and weight file sizes)", hex64(m.h));
    model.sync_to_host();
    Fnv l;
    for (const LoraParam& p : model.lora_params()) l.vec(p.value);
    parts.emplace_back("LoRA values at the start", hex64(l.h));
    parts.emplace_back("resume step", std::to_string(step));
    return parts;
}

}  // namespace

std::optional<fs::path> latest_checkpoint(const fs::path& run_dir) {
    const fs::path dir = run_dir / "checkpoints";
    std::error_code ec;
    if (!fs::is_directory(dir, ec)) return std::nullopt;
    int64_t best = -1;
    fs::path best_path;
    for (const auto& entry : fs::directory_iterator(dir, ec)) {
        const int64_t s = step_of_dir_name(entry.path().filename().string());
        if (s < 0 || !fs::is_regular_file(entry.path() / kStateName, ec)) continue;
        if (s > best) {
            best = s;
            best_path = entry.path();
        }
    }
    if (best < 0) return std::nullopt;
    return best_path;
}

struct Trainer::Impl {
    RunConfig config;  // resolved
    TrainerOptions options;
    std::unique_ptr<TrainableModel> model;
    TokenizedDataset train;
    TokenizedDataset validation;
    PackOptions pack;                       // seed set per epoch
    std::vector<PackedBatch> eval_batches;  // built once
    std::vector<int64_t> batches_per_epoch; // only for epoch mode
    int64_t total_steps = 0;
    int64_t warmup_steps = 0;
    std::string data_fingerprint;
    fs::path out;
    std::optional<MemoryPlan> planned;  // CUDA: the plan prepare() checked before loading
    std::vector<std::string> notes;     // what prepare() chose and why, emitted as Info events at start
    // Several processes: node rank 0 alone writes the run folder (config, metrics, checkpoints, adapter); the
    // others train alike and report on the sink only. dp is the model when it is this process's share.
    bool writer = true;
    int node_rank = 0;
    DataParallelModel* dp = nullptr;

    // Position state (the optimizer state lives in the model: TrainableModel::optimizer_step).
    int64_t step = 0;       // completed optimizer steps
    int64_t epoch = 0;
    int64_t batch_pos = 0;  // next micro-batch index within the epoch
    bool resume_loaded = false;
    bool stopped = false;
    std::chrono::steady_clock::time_point last_checkpoint_time;  // run start or the latest checkpoint written
    bool diverged = false;
    std::string diverged_message;

    std::vector<PackedBatch> epoch_batches;
    int64_t epoch_batches_of = -1;

    const std::vector<PackedBatch>& batches_of_epoch(int64_t e) {
        if (epoch_batches_of != e) {
            PackOptions p = pack;
            p.seed = config.seed + static_cast<uint64_t>(e);
            epoch_batches = pack_dataset(train, p);
            epoch_batches_of = e;
        }
        return epoch_batches;
    }

    std::vector<int32_t> lengths() const {
        std::vector<int32_t> l(train.size());
        for (size_t i = 0; i < train.size(); ++i) l[i] = train.length(i);
        return l;
    }

    double eval_loss() {
        double sum = 0;
        int64_t labels = 0;
        for (const auto& b : eval_batches) {
            sum += model->forward_loss(b);
            labels += b.num_label_tokens;
        }
        return labels > 0 ? sum / static_cast<double>(labels) : std::numeric_limits<double>::quiet_NaN();
    }

    MemoryStats memory() const { return model->memory_stats(); }

    fs::path checkpoint_dir(int64_t s) const { return out / "checkpoints" / ("step-" + std::to_string(s)); }

    void write_checkpoint(ProgressSink& sink) {
        if (!writer) return;
        const fs::path final_dir = checkpoint_dir(step);
        if (fs::is_regular_file(final_dir / kStateName)) return;  // this step is saved already
        const fs::path tmp = out / "checkpoints" / (".step-" + std::to_string(step) + ".tmp");
        fs::remove_all(tmp);
        fs::create_directories(tmp);
        struct RemoveUnlessDone {  // a failed write (a full disk) leaves no partial checkpoint folder
            fs::path dir;
            bool done = false;
            ~RemoveUnlessDone() {
                std::error_code ec;
                if (!done) fs::remove_all(dir, ec);
            }
        } guard{tmp};
        model->sync_to_host();
        auto& params = model->lora_params();
        for (auto& p : params) {  // no optimizer step yet: zero moments
            if (p.exp_avg.size() != p.value.size()) p.exp_avg.assign(p.value.size(), 0.0f);
            if (p.exp_avg_sq.size() != p.value.size()) p.exp_avg_sq.assign(p.value.size(), 0.0f);
        }
        const std::map<std::string, std::string> meta{{"step", std::to_string(step)}};
        {
            std::vector<TensorToWrite> t;
            for (const auto& p : params)
                t.push_back({p.spec.name, DType::F32, p.spec.shape, std::as_bytes(std::span(p.value))});
            write_safetensors(tmp / kLoraName, t, meta);
        }
        {
            std::vector<TensorToWrite> t;
            for (size_t i = 0; i < params.size(); ++i) {
                t.push_back({params[i].spec.name + ".exp_avg", DType::F32, params[i].spec.shape,
                             std::as_bytes(std::span(params[i].exp_avg))});
                t.push_back({params[i].spec.name + ".exp_avg_sq", DType::F32, params[i].spec.shape,
                             std::as_bytes(std::span(params[i].exp_avg_sq))});
            }
            write_safetensors(tmp / kOptimizerName, t, meta);
        }
        const json state = {
            {"schema_version", 1},
            {"step", step},
            {"total_steps", total_steps},
            {"epoch", epoch},
            {"batch_in_epoch", batch_pos},
            {"seed", config.seed},
            {"data_order", "pack_dataset(seed + epoch)"},
            {"dropout_seed", "splitmix64(seed, step, micro)"},
            {"data_fingerprint", data_fingerprint},
        };
        write_file_atomic(tmp / kStateName, state.dump(2) + "\n");  // last: marks the folder complete
        if (fs::exists(final_dir)) fs::remove_all(final_dir);       // an incomplete leftover
        fs::rename(tmp, final_dir);
        guard.done = true;
        fsync_dir(out / "checkpoints");
        last_checkpoint_time = std::chrono::steady_clock::now();
        sink.on_event({RunEventKind::CheckpointSaved, final_dir.string(), step});
    }

    // After a timed checkpoint (training.checkpoint_minutes): keeps the newest keep_checkpoints complete
    // checkpoints among the rolling ones, i.e. those checkpoint_every did not ask for (steps that are not a
    // multiple of it; every one when it is 0). The checkpoint of the current step and incomplete .tmp folders
    // are never touched.
    void prune_checkpoints() {
        if (!writer) return;
        const int64_t every = config.training.checkpoint_every;
        const auto keep = static_cast<size_t>(std::max<int64_t>(1, config.training.keep_checkpoints));
        std::error_code ec;
        std::vector<int64_t> rolling;
        for (const auto& e : fs::directory_iterator(out / "checkpoints", ec)) {
            const int64_t s = step_of_dir_name(e.path().filename().string());
            if (s < 0 || s == step || !fs::is_regular_file(e.path() / kStateName, ec)) continue;
            if (every > 0 && s % every == 0) continue;  // asked for by checkpoint_every: kept
            rolling.push_back(s);
        }
        // The current step's checkpoint counts as the newest one kept (when it is a rolling one).
        const bool current_rolling = !(every > 0 && step % every == 0);
        const size_t keep_others = current_rolling ? keep - 1 : keep;
        if (rolling.size() <= keep_others) return;
        std::sort(rolling.begin(), rolling.end(), std::greater<>());
        for (size_t i = keep_others; i < rolling.size(); ++i) fs::remove_all(checkpoint_dir(rolling[i]), ec);
        fsync_dir(out / "checkpoints");
    }

    // Restores the latest complete checkpoint (called by make_trainer when resuming).
    void load_checkpoint(const fs::path& dir) {
        const fs::path file = dir / kStateName;
        json state = read_json_file(file);
        if (!state.is_object()) state = json::object();  // then every field below is reported missing
        const int64_t state_step = state_int(state, file, "step");
        const int64_t state_epoch = state_int(state, file, "epoch");
        const int64_t state_batch = state_int(state, file, "batch_in_epoch");
        const json fp_field = state.value("data_fingerprint", json());
        const std::string fp = fp_field.is_string() ? fp_field.get<std::string>() : "";
        if (fp != data_fingerprint)
            throw_invalid(dir.string() + ": the data changed since this run was started (fingerprint " + fp +
                          ", now " + data_fingerprint + "); resume with the same dataset and settings, or start a new run");
        const json seed_field = state.value("seed", json());
        const uint64_t seed = seed_field.is_number_unsigned() ? seed_field.get<uint64_t>() : 0;
        if (seed != config.seed)
            throw_invalid(dir.string() + ": the run used seed " + std::to_string(seed) + ", now " +
                          std::to_string(config.seed));
        step = state_step;
        epoch = state_epoch;
        batch_pos = state_batch;
        auto& params = model->lora_params();
        const SafetensorsFile lora(dir / kLoraName);
        const SafetensorsFile opt(dir / kOptimizerName);
        LoraTensors tensors;
        for (size_t i = 0; i < params.size(); ++i) {
            const size_t n = params[i].value.size();
            tensors[params[i].spec.name] = read_f32(lora, params[i].spec.name, n);
            params[i].exp_avg = read_f32(opt, params[i].spec.name + ".exp_avg", n);
            params[i].exp_avg_sq = read_f32(opt, params[i].spec.name + ".exp_avg_sq", n);
        }
        model->set_lora(tensors);
        for (auto& p : params) p.value = tensors.at(p.spec.name);
        model->sync_from_host();
        resume_loaded = true;
    }

    // Keeps the metrics lines of steps <= step (a crash may have left later ones, or half a line).
    void truncate_metrics() {
        const fs::path p = out / "metrics.jsonl";
        if (!fs::exists(p)) return;
        std::ifstream in(p);
        std::string line, kept;
        while (std::getline(in, line)) {
            if (line.empty()) continue;
            json j = json::parse(line, nullptr, false);
            if (j.is_discarded() || !j.is_object() || !j.contains("step") || !j["step"].is_number_integer()) continue;
            if (j["step"].get<int64_t>() <= step) kept += line + "\n";
        }
        write_file_atomic(p, kept);
    }

    // Ends a diverged run: removes the checkpoints of steps >= last_finite (their weights give a non-finite
    // loss at the next step) and reports what happened and what to change.
    void finish_diverged(ProgressSink& sink, int64_t diverged_at, int64_t streak, int64_t last_finite) {
        std::error_code ec;
        int64_t kept = -1;
        std::vector<int64_t> removed;
        for (const auto& e : fs::directory_iterator(writer ? out / "checkpoints" : fs::path(), ec)) {
            const int64_t s = step_of_dir_name(e.path().filename().string());
            if (s < 0) continue;
            if (s >= last_finite) {
                fs::remove_all(e.path());
                removed.push_back(s);
            } else if (fs::is_regular_file(e.path() / kStateName)) {
                kept = std::max(kept, s);
            }
        }
        if (writer) fsync_dir(out / "checkpoints");
        std::ostringstream lr;
        lr << config.training.lr;
        const std::string from = std::to_string(diverged_at - streak + 1), to = std::to_string(diverged_at);
        std::string msg =
            "training diverged at step " + to + ": the loss or the gradient norm was not finite" +
            (streak == 1 ? std::string("")
                         : " for " + std::to_string(streak) + " steps in a row (steps " + from + " to " + to + ")") +
            ", so the run was stopped and no adapter was written. Lower the learning rate (it was " + lr.str() +
            ") and start a new run.";
        if (!removed.empty())
            msg += " Checkpoints from step " + std::to_string(*std::min_element(removed.begin(), removed.end())) +
                   " on were removed: their weights give a non-finite loss.";
        if (writer)
            msg += kept >= 0 ? " The last good checkpoint is checkpoints/step-" + std::to_string(kept) + "."
                             : " No checkpoint from before the divergence is left.";
        else
            msg += " Node rank 0 keeps the run's checkpoints.";
        diverged = true;
        diverged_message = msg;
        sink.on_event({RunEventKind::Diverged, msg, diverged_at});
    }

    void run(ProgressSink& sink, const std::atomic<bool>& stop_requested);
};

void Trainer::Impl::run(ProgressSink& sink, const std::atomic<bool>& stop_requested) {
    using clock = std::chrono::steady_clock;
    stopped = false;
    diverged = false;
    diverged_message.clear();
    // Several processes: a stop request on any of them stops all at the same step (data_parallel.h).
    struct StopRequest {
        DataParallelModel* dp;
        ~StopRequest() {
            if (dp) dp->set_stop_request(nullptr);
        }
    } stop_request{dp};
    if (dp) dp->set_stop_request(&stop_requested);
    const std::atomic<bool>& stop = dp ? dp->stop_agreed() : stop_requested;
    if (writer) {
        fs::create_directories(out / "checkpoints");
        if (!fs::exists(out / "config.json")) {
            json j = config;
            write_file_atomic(out / "config.json", j.dump(2) + "\n");
        }
        // Leftovers of an interrupted checkpoint write are never complete: remove them.
        for (const auto& e : fs::directory_iterator(out / "checkpoints")) {
            const std::string name = e.path().filename().string();
            if (name.rfind(".step-", 0) == 0) fs::remove_all(e.path());
        }
    }
    if (resume_loaded) {
        if (writer) truncate_metrics();
        sink.on_event({RunEventKind::Resumed, "resumed from " + checkpoint_dir(step).string(), step});
    } else if (writer && step == 0 && fs::exists(out / "metrics.jsonl")) {
        write_file_atomic(out / "metrics.jsonl", "");
    }
    sink.on_event({RunEventKind::Started,
                   "training " + std::to_string(total_steps) + " steps, " + std::to_string(model->lora_params().size()) +
                       " LoRA tensors",
                   step});
    for (const auto& note : notes) sink.on_event({RunEventKind::Info, note, step});
    std::ofstream metrics;
    if (writer) {
        metrics.open(out / "metrics.jsonl", std::ios::app | std::ios::binary);
        if (!metrics) throw_io((out / "metrics.jsonl").string() + ": cannot open for appending");
    }

    const TrainingConfig& tc = config.training;
    const auto run_start = clock::now();
    const int64_t first_step = step;
    last_checkpoint_time = run_start;

    // Steps are queued on the model and, on a backend that runs ahead of the host (CUDA), collected one step
    // later (TrainableModel's step protocol): the metrics of step n are read while step n+1 runs, so the
    // device never waits for the host. A step that evaluates, checkpoints or ends the run is collected at
    // once (those read the updated weights); a synchronous backend (CPU) collects every step at once.
    struct Pending {
        StepMetrics m;
        bool eval = false, checkpoint = false, timed = false;  // timed: checkpoint_minutes asked for it
    };
    std::optional<Pending> pending;
    auto last_collect = run_start;
    int64_t nonfinite = 0;            // collected steps in a row whose loss or gradient norm is not finite
    int64_t last_finite = step;       // the latest step with a finite loss and gradient norm (or where this run began)
    int64_t diverged_at = 0;          // the step that made the streak reach max_nonfinite_steps
    // Several processes whose GPUs run a step ahead: the processes learn of a stop or a divergence when they
    // collect the step whose sums carried it, some at once (node 0 collects a checkpoint's step at once), others
    // after queuing the next step, whose collectives then wait for every process. So there a stop or divergence
    // learned from step k takes effect after step k + 1 on every process, whenever each learned it.
    const bool lockstep = dp && dp->world_size() > dp->rank_count() && model->runs_ahead();
    int64_t stop_after = -1;  // lockstep: the last step to run once a stop is agreed
    auto stop_now = [&] { return stop.load() && (!lockstep || (stop_after >= 0 && step >= stop_after)); };
    auto collect = [&] {
        Pending p = std::move(*pending);
        pending.reset();
        const StepResult r = model->collect_step();
        if (lockstep && stop_after < 0 && stop.load()) stop_after = p.m.step + 1;
        StepMetrics& m = p.m;
        m.loss = m.label_tokens > 0 ? r.loss_sum / static_cast<double>(m.label_tokens) : 0.0;
        m.grad_norm = r.grad_norm;
        const bool finite = std::isfinite(m.loss) && std::isfinite(m.grad_norm);
        if (finite) {
            nonfinite = 0;
            last_finite = m.step;
        } else {
            ++nonfinite;
            sink.on_event({RunEventKind::Warning,
                           "step " + std::to_string(m.step) +
                               (std::isfinite(r.grad_norm) ? ": the loss is not finite"
                                                           : ": the gradient norm is not finite; update skipped") +
                               " (" + std::to_string(nonfinite) + " of " + std::to_string(tc.max_nonfinite_steps) +
                               " non-finite steps in a row that stop the run)",
                           m.step});
            if (nonfinite >= tc.max_nonfinite_steps && diverged_at == 0) diverged_at = m.step;
        }
        const auto t1 = clock::now();
        m.step_time_s = std::chrono::duration<double>(t1 - last_collect).count();
        m.tokens_per_s = m.step_time_s > 0 ? static_cast<double>(m.tokens) / m.step_time_s : 0;
        const double elapsed = std::chrono::duration<double>(t1 - run_start).count();
        m.steps_per_s = elapsed > 0 ? static_cast<double>(m.step - first_step) / elapsed : 0;
        m.memory = memory();
        if (p.eval) {
            m.eval_loss = eval_loss();
            std::ostringstream msg;
            msg.precision(6);
            msg << "step " << m.step << ": eval loss " << m.eval_loss;
            sink.on_event({RunEventKind::Eval, msg.str(), m.step});
        }
        json line = {{"step", m.step},         {"epoch", m.epoch},      {"loss", m.loss},
                     {"lr", m.lr},             {"grad_norm", m.grad_norm}, {"tokens", m.tokens},
                     {"label_tokens", m.label_tokens}, {"step_time_s", m.step_time_s},
                     {"tokens_per_s", m.tokens_per_s}};
        line["eval_loss"] = std::isfinite(m.eval_loss) ? json(m.eval_loss) : json(nullptr);
        // Bytes, so that a front end shows a resumed run's memory history too.
        line["memory"] = {{"weights", m.memory.weights},           {"lora_optimizer", m.memory.lora_optimizer},
                          {"activations", m.memory.activations},   {"workspace", m.memory.workspace},
                          {"reserved", m.memory.reserved},         {"device_total", m.memory.device_total},
                          {"device_free", m.memory.device_free},   {"pinned_host", m.memory.pinned_host}};
        if (!m.memory.gpus.empty()) {  // per GPU: memory and how busy it was (utilization -1: unknown)
            json gpus = json::array();
            for (const GpuStats& g : m.memory.gpus)
                gpus.push_back({{"device", g.device}, {"used", g.used}, {"total", g.total},
                                {"peak_allocated", g.peak_allocated}, {"utilization", g.utilization}});
            line["memory"]["gpus"] = std::move(gpus);
        }
        if (diverged_at == m.step) line["status"] = "diverged";
        if (writer) {
            metrics << line.dump() << "\n";
            metrics.flush();
            if (!metrics) throw_io((out / "metrics.jsonl").string() + ": write failed");
        }
        sink.on_step(m);
        if (p.checkpoint && finite) {  // never the weights of a non-finite step
            write_checkpoint(sink);
            if (p.timed) prune_checkpoints();
        }
        last_collect = clock::now();  // evaluation and checkpoints are not step time
    };

    while (step < total_steps) {
        if (batch_pos >= static_cast<int64_t>(batches_of_epoch(epoch).size())) {
            ++epoch;
            batch_pos = 0;
        }
        const auto& batches = batches_of_epoch(epoch);
        const int64_t n = static_cast<int64_t>(batches.size());
        if (n == 0) throw_invalid("the training data packs into no micro-batch");
        const int64_t count = std::min<int64_t>(tc.grad_accum, n - batch_pos);
        int64_t labels = 0, tokens = 0;
        for (int64_t i = 0; i < count; ++i) {
            labels += batches[batch_pos + i].num_label_tokens;
            tokens += batches[batch_pos + i].num_tokens;
        }
        const float grad_scale = labels > 0 ? static_cast<float>(1.0 / static_cast<double>(labels)) : 0.0f;
        model->begin_step(static_cast<int>(count));
        for (int64_t i = 0; i < count; ++i) {
            if (stop_now()) {
                // Drop the partial step; save the last completed one.
                if (pending) collect();
                if (diverged_at > 0) {
                    finish_diverged(sink, diverged_at, nonfinite, last_finite);
                    return;
                }
                write_checkpoint(sink);
                stopped = true;
                sink.on_event({RunEventKind::Stopped,
                               "stopped at step " + std::to_string(step) + "; resume with --resume", step});
                return;
            }
            model->queue_forward_backward(batches[batch_pos + i], grad_scale,
                                          train::dropout_seed(config.seed, step + 1, static_cast<int32_t>(i)));
        }
        const double lr = tc.lr * train::lr_multiplier(tc.schedule, step, warmup_steps, total_steps);
        model->queue_optimizer_step({.lr = lr,
                                     .beta1 = tc.beta1,
                                     .beta2 = tc.beta2,
                                     .eps = tc.eps,
                                     .weight_decay = tc.weight_decay,
                                     .max_grad_norm = tc.max_grad_norm,
                                     .step = step + 1});
        ++step;
        batch_pos += count;
        if (pending) collect();  // the previous step, while this one runs
        if (diverged_at > 0) {
            (void)model->collect_step();  // the step just queued: let it finish, report nothing
            break;
        }

        Pending p;
        StepMetrics& m = p.m;
        m.step = step;
        m.total_steps = total_steps;
        m.epoch = static_cast<double>(epoch) + static_cast<double>(batch_pos) / static_cast<double>(n);
        m.lr = lr;
        m.tokens = tokens;
        m.label_tokens = labels;
        p.eval = !eval_batches.empty() && ((tc.eval_every > 0 && step % tc.eval_every == 0) || step == total_steps);
        // Timed checkpoints: after the step during which checkpoint_minutes of wall time passed since the
        // last checkpoint (or the run start). Decided when the step is queued, so that it is collected at once.
        // Timed ones by the clock of the process that writes them (the others keep running ahead: lockstep).
        p.timed = writer && tc.checkpoint_minutes > 0 &&
                  std::chrono::duration<double>(clock::now() - last_checkpoint_time).count() >= tc.checkpoint_minutes * 60.0;
        p.checkpoint = (tc.checkpoint_every > 0 && step % tc.checkpoint_every == 0) || p.timed;
        pending = std::move(p);
        if (!model->runs_ahead() || pending->eval || pending->checkpoint || step == total_steps) collect();
        // Lockstep: a divergence found at once still runs the next step (its collectives), collected above.
        if (diverged_at > 0 && !(lockstep && diverged_at == step && step < total_steps)) break;
    }
    if (diverged_at > 0) {
        finish_diverged(sink, diverged_at, nonfinite, last_finite);
        return;
    }
    if (pending) collect();

    const fs::path adapter = out / "adapter";
    if (!writer) {
        sink.on_event({RunEventKind::Finished, "node rank 0 writes the adapter (" + adapter.string() + ")", step});
        return;
    }
    write_peft_adapter(adapter, config.lora, model->model_config(), config.model, model->lora_tensors(),
                       PeftWriteOptions{.overwrite = true});
    sink.on_event({RunEventKind::Finished, adapter.string(), step});
}

Trainer::Trainer(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
Trainer::Trainer(Trainer&&) noexcept = default;
Trainer& Trainer::operator=(Trainer&&) noexcept = default;
Trainer::~Trainer() = default;

Plan Trainer::plan() const {
    const Impl& I = *impl_;
    Plan p;
    p.config = I.config;
    if (I.planned) {
        p.memory = *I.planned;  // the device plan made before loading (Trainer::prepare)
    } else {
        const MemoryStats m = I.memory();
        p.memory.weights = m.weights;
        p.memory.lora_optimizer = m.lora_optimizer;
        p.memory.activations = m.activations;
        p.memory.total = m.weights + m.lora_optimizer + m.activations;
    }
    p.total_steps = I.total_steps;
    p.train_batches = I.batches_per_epoch.empty() ? 0 : I.batches_per_epoch.front();
    p.steps_per_epoch = (p.train_batches + I.config.training.grad_accum - 1) / I.config.training.grad_accum;
    p.validation_batches = static_cast<int64_t>(I.eval_batches.size());
    p.train_samples = static_cast<int64_t>(I.train.size());
    for (const auto& lp : I.model->lora_params()) p.trainable_parameters += static_cast<int64_t>(lp.value.size());
    return p;
}

// A run folder that cannot be written (not a folder, no permission, a full disk) is the user's to fix: an I/O
// error naming the path, never an internal one.
void Trainer::run(ProgressSink& sink, const std::atomic<bool>& stop) {
    try {
        try {
            impl_->run(sink, stop);
        } catch (const fs::filesystem_error& e) {
            throw_io((e.path1().empty() ? impl_->out : e.path1()).string() + ": " + e.code().message() +
                     ". The run folder must be a writable folder with free space on its disk");
        }
    } catch (const std::exception& e) {
        // The other processes of the run stop too, told why (no-op when they are the ones that stopped it).
        if (impl_->dp) impl_->dp->abort("node rank " + std::to_string(impl_->node_rank) + " failed: " + e.what());
        throw;
    }
}
bool Trainer::stopped() const { return impl_->stopped; }
bool Trainer::diverged() const { return impl_->diverged; }
std::string Trainer::diverged_message() const { return impl_->diverged_message; }
fs::path Trainer::adapter_dir() const { return impl_->out / "adapter"; }

namespace train {

Trainer make_trainer(TrainerInputs in, TrainerOptions options) {
    validate_run_config(in.config);
    if (!in.model) throw_internal("make_trainer: no model");
    if (in.train.size() == 0) throw_invalid(in.config.data.dataset + ": no training samples");
    auto I = std::make_unique<Trainer::Impl>();
    I->options = options;
    I->model = std::move(in.model);
    I->train = std::move(in.train);
    I->validation = std::move(in.validation);
    I->planned = in.planned;
    I->notes = std::move(in.notes);
    I->node_rank = options.distributed.node_rank;
    I->writer = options.distributed.node_rank == 0;
    RunConfig& c = I->config;
    c = std::move(in.config);
    // Resolve what "auto" means here and make paths absolute, so resume compares like with like.
    // (Trainer::prepare resolves device and checkpointing from the hardware and the memory plan; this covers
    // callers that build a trainer around their own model.)
    if (c.device == DeviceChoice::Auto) c.device = DeviceChoice::Cpu;
    if (c.memory.checkpointing == CheckpointPolicy::Auto) c.memory.checkpointing = CheckpointPolicy::Off;
    auto abs = [](std::string& s) {
        if (!s.empty()) s = fs::weakly_canonical(fs::absolute(s)).string();
    };
    abs(c.model);
    abs(c.data.dataset);
    abs(c.data.validation);
    abs(c.output_dir);
    I->out = c.output_dir;

    I->pack.token_budget = c.training.batch_tokens;
    I->pack.packing = c.data.packing;
    I->pack.pad_id = in.pad_id;
    I->pack.shuffle = true;
    if (I->validation.size() > 0) {
        PackOptions p = I->pack;
        p.shuffle = false;
        p.seed = c.seed;
        I->eval_batches = pack_dataset(I->validation, p);
    }
    const TrainingConfig& t = c.training;
    const auto lengths = I->lengths();
    if (t.max_steps > 0) {
        I->total_steps = t.max_steps;
        PackOptions p = I->pack;
        p.seed = c.seed;
        I->batches_per_epoch.push_back(static_cast<int64_t>(plan_batches(lengths, p).size()));
    } else {
        for (int64_t e = 0; e < t.epochs; ++e) {
            PackOptions p = I->pack;
            p.seed = c.seed + static_cast<uint64_t>(e);
            const int64_t nb = static_cast<int64_t>(plan_batches(lengths, p).size());
            I->batches_per_epoch.push_back(nb);
            I->total_steps += (nb + t.grad_accum - 1) / t.grad_accum;
        }
    }
    I->warmup_steps = resolve_warmup_steps(t, I->total_steps);
    c.training.warmup_steps = I->warmup_steps;

    Fnv f;
    for (const TokenizedDataset* d : {&I->train, &I->validation}) {
        f.vec(d->tokens);
        f.vec(d->labels);
        f.vec(d->offsets);
    }
    f.bytes(&I->pack.pad_id, sizeof I->pack.pad_id);
    I->data_fingerprint = hex64(f.h);

    const fs::path cfg = I->out / "config.json";
    if (options.resume) {
        if (!fs::exists(cfg))
            throw_invalid(I->out.string() + ": there is no run to resume here (no config.json); start it without --resume");
        const json stored = comparable(read_json_file(cfg));
        const json now = comparable(json(c));
        std::vector<std::string> diffs;
        diff_json(stored, now, "", diffs);
        if (!diffs.empty()) {
            std::string msg = cfg.string() + ": the settings differ from the run being resumed: ";
            for (size_t i = 0; i < diffs.size(); ++i) msg += (i ? "; " : "") + diffs[i];
            throw_invalid(msg + ". Resume with the same settings, or start a new run in another folder");
        }
        if (auto latest = latest_checkpoint(I->out)) I->load_checkpoint(*latest);
    } else if (I->writer && (fs::exists(cfg) || fs::exists(I->out / "checkpoints"))) {
        throw_invalid(I->out.string() + ": this folder already holds a run; resume it with --resume or choose another output folder");
    }
    if (in.distribute) {
        const auto parts = run_fingerprint(I->config, I->data_fingerprint, *I->model, I->step);
        auto dp = in.distribute(std::move(I->model), parts);
        I->dp = dp.get();
        I->model = std::move(dp);
    } else {
        // Several GPUs of this process (--devices): a stop takes effect between steps (the ranks' votes), never
        // inside one, where a rank could wait for a collective another rank will not join.
        I->dp = dynamic_cast<DataParallelModel*>(I->model.get());
    }
    return Trainer(std::move(I));
}

}  // namespace train

namespace {

// The adapter a run would export: the final one, else the latest complete checkpoint's LoRA values.
struct RunAdapter {
    RunConfig config;
    ModelConfig model;
    LoraConfig lora;
    LoraTensors tensors;
    std::string from;  // "adapter" or "checkpoints/step-N"
};

RunAdapter load_run_adapter(const fs::path& run_dir) {
    RunAdapter r;
    r.config = load_run_config(run_dir / "config.json");
    r.model = load_model_config(r.config.model);
    if (fs::exists(run_dir / "adapter" / kPeftConfigName)) {
        PeftAdapter a = read_peft_adapter(run_dir / "adapter", r.model);
        r.lora = a.config;
        r.tensors = std::move(a.tensors);
        r.from = "adapter";
        return r;
    }
    const auto latest = latest_checkpoint(run_dir);
    if (!latest)
        throw_invalid(run_dir.string() + ": the run has neither a final adapter nor a complete checkpoint to export");
    const SafetensorsFile lora(*latest / kLoraName);
    for (const auto& spec : lora_tensor_specs(r.model, r.config.lora)) {
        size_t numel = 1;
        for (auto d : spec.shape) numel *= static_cast<size_t>(d);
        r.tensors[spec.name] = read_f32(lora, spec.name, numel);
    }
    r.lora = r.config.lora;
    r.from = "checkpoints/" + latest->filename().string();
    return r;
}

}  // namespace

std::string export_run_adapter(const fs::path& run_dir, const fs::path& out_dir, bool overwrite) {
    ExportOptions o;
    o.overwrite = overwrite;
    return export_run(run_dir, out_dir, o);
}

const std::vector<std::string>& export_formats() {
    static const std::vector<std::string> f = {"peft", "merged", "gguf", "gguf-lora"};
    return f;
}

const std::vector<std::string>& export_gguf_quants() {
    static const std::vector<std::string> q = {"f16", "bf16", "q8_0", "q6_k", "q5_k_m", "q4_k_m"};
    return q;
}

uint64_t estimate_export_bytes(const fs::path& run_dir, const ExportOptions& o) {
    try {
        const RunConfig config = load_run_config(run_dir / "config.json");
        const ModelConfig model = load_model_config(config.model);
        if (o.format == "gguf") return estimate_gguf_model_bytes(config.model, model, parse_gguf_quant(o.quant));
        uint64_t lora = 0;
        for (const auto& s : lora_tensor_specs(model, config.lora)) lora += uint64_t(s.shape.at(0) * s.shape.at(1));
        if (o.format == "peft") return lora * 4;
        if (o.format == "gguf-lora") return lora * (parse_gguf_quant(o.quant) == GgufQuant::F32 ? 4 : 2);
        if (o.format == "merged") return uint64_t(model.parameter_count()) * dtype_size(parse_merge_dtype(o.dtype));
    } catch (const Error&) {
    }
    return 0;
}

std::string export_run(const fs::path& run_dir, const fs::path& out_dir, const ExportOptions& o) {
    if (std::find(export_formats().begin(), export_formats().end(), o.format) == export_formats().end())
        throw_invalid("export format '" + o.format + "': expected peft, merged, gguf or gguf-lora");
    const DType dtype = parse_merge_dtype(o.dtype);  // checked before any work
    const bool gguf = o.format == "gguf" || o.format == "gguf-lora";
    const GgufQuant quant = gguf ? parse_gguf_quant(o.quant) : GgufQuant::F16;
    if (o.format == "peft" && !o.overwrite && fs::exists(out_dir / kPeftConfigName))
        throw_invalid(out_dir.string() + ": already holds an adapter; pass --force to overwrite it");
    const RunAdapter a = load_run_adapter(run_dir);
    if (o.format == "peft") {
        PeftWriteOptions wo;
        wo.overwrite = o.overwrite;
        write_peft_adapter(out_dir, a.lora, a.model, a.config.model, a.tensors, wo);
    } else if (o.format == "merged") {
        MergeOptions m;
        m.dtype = dtype;
        m.overwrite = o.overwrite;
        m.progress = o.progress;
        m.cancel = o.cancel;
        write_merged_model(a.config.model, a.model, a.lora, a.tensors, out_dir, m);
    } else {
        GgufOptions g;
        g.quant = quant;
        g.overwrite = o.overwrite;
        g.progress = o.progress;
        g.cancel = o.cancel;
        if (o.format == "gguf") write_gguf_model(a.config.model, a.model, a.lora, a.tensors, out_dir, g);
        else write_gguf_lora(a.config.model, a.model, a.lora, a.tensors, out_dir, g);
    }
    return a.from;
}

}  // namespace tandem
