// SPDX-FileCopyrightText: 2026 The Tandem developers
// SPDX-License-Identifier: GPL-3.0-or-later
// `tandem-cli train --config run.json [flags]` — one LoRA fine-tuning run. Every setting of the run config
// also exists as a flag; flags override the file. Progress goes to stderr (one \r-updated line on a TTY,
// a line per step otherwise); stdout gets the adapter path at the end. SIGINT asks the trainer to stop:
// it checkpoints the last completed step and the command exits 130; `--resume` continues from there, and
// `--out RUN --resume` without --config, --model and --dataset reads the settings from RUN/config.json.
// A run that diverges (non-finite loss for --max-nonfinite-steps steps in a row) exits 2 with what to change.
// Several processes (--nodes N --node-rank R --rendezvous HOST:PORT, one per machine, CPU backend): every node
// trains the same run; node rank 0 writes the run folder and prints the adapter path, the others only report on
// stderr. Ctrl-C on any node stops every node after the step in progress (each exits 130); a node that dies or
// fails makes the others stop with an error naming it.
#include <unistd.h>

#include <atomic>
#include <csignal>
#include <cstdio>
#include <filesystem>
#include <iostream>
#include <memory>
#include <string>

#include "commands.h"
#include "run_flags.h"
#include "hub_progress.h"
#include "tandem/hub.h"
#include "tandem/data.h"
#include "tandem/error.h"
#include "tandem/run_config.h"
#include "tandem/trainer.h"

namespace tandem::cli {

namespace {

std::atomic<bool> g_stop{false};
extern "C" void on_sigint(int) { g_stop.store(true); }

std::string fmt_duration(double s) {
    if (!(s >= 0) || s > 1e7) return "?";
    const long t = static_cast<long>(s + 0.5);
    char buf[32];
    if (t >= 3600) std::snprintf(buf, sizeof buf, "%ldh%02ldm", t / 3600, (t / 60) % 60);
    else std::snprintf(buf, sizeof buf, "%ldm%02lds", t / 60, t % 60);
    return buf;
}

class StderrSink final : public ProgressSink {
public:
    StderrSink() : tty_(::isatty(STDERR_FILENO) == 1) {}
    void on_step(const StepMetrics& m) override {
        const double eta = m.steps_per_s > 0 ? static_cast<double>(m.total_steps - m.step) / m.steps_per_s : -1;
        char buf[256];
        std::snprintf(buf, sizeof buf, "step %lld/%lld  loss %.4f%s  lr %.3g  %.0f tok/s  ETA %s",
                      static_cast<long long>(m.step), static_cast<long long>(m.total_steps), m.loss,
                      m.eval_loss == m.eval_loss ? (std::string("  eval ") + std::to_string(m.eval_loss)).c_str() : "",
                      m.lr, m.tokens_per_s, fmt_duration(eta).c_str());
        std::string line = buf;
        if (m.memory.gpus.size() > 1)  // data parallelism: how busy each GPU is and its memory
            for (const GpuStats& g : m.memory.gpus) {
                char gpu[64];
                std::snprintf(gpu, sizeof gpu, "  GPU%d %s %.1fG", g.device,
                              g.utilization >= 0 ? (std::to_string(g.utilization) + "%").c_str() : "?",
                              static_cast<double>(g.used) / double(1ull << 30));
                line += gpu;
            }
        if (tty_) std::fprintf(stderr, "\r%-100s", line.c_str());
        else std::fprintf(stderr, "%s\n", line.c_str());
        std::fflush(stderr);
        line_open_ = tty_;
    }
    void on_event(const RunEvent& e) override {
        if (e.kind == RunEventKind::Eval) return;      // shown on the step line
        if (e.kind == RunEventKind::Diverged) return;  // the command's error message says it
        if (line_open_) std::fprintf(stderr, "\n");
        line_open_ = false;
        std::fprintf(stderr, "%s: %s\n", std::string(run_event_kind_name(e.kind)).c_str(), e.message.c_str());
    }

private:
    bool tty_;
    bool line_open_ = false;
};

}  // namespace

Run add_train_command(CLI::App& app) {
    struct Opts {
        std::string config, model, init_adapter, dataset, out, targets, packing, device, validation, schedule,
            chat_template;
        std::vector<std::string> columns;
        std::string checkpointing;
        MemoryFlags memory;
        std::optional<int> lora_r, grad_accum, batch_tokens, max_seq_len;
        std::optional<double> lora_alpha, lora_dropout, lr, validation_fraction, max_grad_norm, checkpoint_minutes,
            weight_decay, warmup_ratio;
        bool train_on_all_tokens = false;
        std::optional<int64_t> epochs, max_steps, checkpoint_every, eval_every, warmup_steps, max_nonfinite_steps,
            keep_checkpoints;
        std::optional<uint64_t> seed;
        bool resume = false;
        int nodes = 1, node_rank = 0;
        std::string rendezvous;
        double dist_timeout = 600;
    };
    auto o = std::make_shared<Opts>();
    auto* sub = app.add_subcommand("train", "Fine-tune a LoRA adapter (run config file and/or flags)");
    sub->add_option("--config", o->config, "run config JSON; flags override its values");
    sub->add_option("--model", o->model, "Hugging Face model folder, or a Hub repo id ORG/NAME[@REV] (cached or downloaded)");
    sub->add_option("--init-adapter", o->init_adapter,
                    "continue training this PEFT adapter (its r, alpha, targets replace the --lora-* settings)");
    sub->add_option("--dataset", o->dataset, "dataset file (.json, .jsonl, .txt, .csv, .tsv, .parquet), or a Hub dataset repo ORG/NAME");
    sub->add_option("--validation-file", o->validation, "separate validation dataset");
    sub->add_option("--column", o->columns,
                    "KEY=COLUMN: read the dataset's COLUMN as the key KEY (repeatable), e.g. output=answer");
    sub->add_option("--validation-fraction", o->validation_fraction, "share of records held out for eval");
    sub->add_option("--template", o->chat_template,
                    "chat template: auto (the model's) | chatml | alpaca | llama3 (for models without one)");
    sub->add_flag("--train-on-all-tokens", o->train_on_all_tokens,
                  "train on the prompts too (default: only on the replies)");
    sub->add_option("--out", o->out, "run folder (config, metrics, checkpoints, adapter)");
    sub->add_option("--lora-r", o->lora_r, "LoRA rank");
    sub->add_option("--lora-alpha", o->lora_alpha, "LoRA alpha");
    sub->add_option("--lora-dropout", o->lora_dropout, "LoRA dropout");
    sub->add_option("--targets", o->targets, "comma-separated target modules (q_proj,v_proj,...)");
    sub->add_option("--lr", o->lr, "peak learning rate");
    sub->add_option("--schedule", o->schedule, "constant|linear|cosine");
    sub->add_option("--warmup-steps", o->warmup_steps, "linear warmup steps");
    sub->add_option("--warmup-ratio", o->warmup_ratio, "linear warmup as a share of the steps (instead of steps)");
    sub->add_option("--weight-decay", o->weight_decay, "AdamW weight decay on the LoRA weights");
    sub->add_option("--epochs", o->epochs, "epochs (max-steps wins)");
    sub->add_option("--max-steps", o->max_steps, "optimizer steps");
    sub->add_option("--batch-tokens", o->batch_tokens, "micro-batch token budget");
    sub->add_option("--grad-accum", o->grad_accum, "micro-batches per optimizer step");
    sub->add_option("--max-grad-norm", o->max_grad_norm, "global-norm clipping (0: off)");
    sub->add_option("--max-seq-len", o->max_seq_len, "longer samples are truncated");
    sub->add_option("--packing", o->packing, "on|off");
    sub->add_option("--seed", o->seed, "run seed");
    sub->add_option("--device", o->device, "cpu|cuda|auto");
    sub->add_option("--checkpointing", o->checkpointing,
                    "off (keep every activation) | selective (keep block inputs and attention outputs, recompute "
                    "norms and the MLP in backward; the plan keeps or offloads the MLP's buffers of as many layers as "
                    "memory and the host link allow) | recompute (keep block inputs, recompute in backward) | smart "
                    "(block inputs in pinned host memory, double-buffered reload) | smart-single | auto (the fastest "
                    "that fits the GPU)");
    add_memory_flags(sub, o->memory);
    sub->add_option("--checkpoint-every", o->checkpoint_every, "checkpoint every N steps (0: only on stop)");
    sub->add_option("--checkpoint-minutes", o->checkpoint_minutes,
                    "also checkpoint after the step during which M minutes passed since the last checkpoint "
                    "(default 10; 0: off)");
    sub->add_option("--keep-checkpoints", o->keep_checkpoints,
                    "timed checkpoints keep only the newest N (default 3; --checkpoint-every's are kept)");
    sub->add_option("--eval-every", o->eval_every, "evaluate every N steps (0: at the end)");
    sub->add_option("--max-nonfinite-steps", o->max_nonfinite_steps,
                    "stop the run as diverged after N steps in a row with a non-finite loss (default 3)");
    sub->add_option("--nodes", o->nodes, "data parallel over N processes, one per machine (CPU backend; default 1)");
    sub->add_option("--node-rank", o->node_rank, "this process's rank among --nodes, 0..N-1 (0 writes the run folder)");
    sub->add_option("--rendezvous", o->rendezvous,
                    "HOST:PORT where node rank 0 listens and the other nodes connect (the same on every node)");
    sub->add_option("--dist-timeout", o->dist_timeout,
                    "seconds a node waits for the others, at the rendezvous and in every all-reduce (default 600)");
    sub->add_flag(
        "--resume", o->resume,
        "continue the run in --out from its latest checkpoint (alone: with the settings in --out/config.json)");
    return [o]() {
        RunConfig c;
        if (!o->config.empty()) c = load_run_config(o->config, /*validate=*/false);
        if (o->resume && o->config.empty() && o->model.empty() && o->dataset.empty()) {
            // `train --out RUN --resume` (the hint printed after Ctrl-C): the run's own resolved settings.
            if (o->out.empty()) throw_invalid("--resume: give the run folder to continue with --out RUN");
            const std::filesystem::path stored = std::filesystem::path(o->out) / "config.json";
            if (!std::filesystem::exists(stored))
                throw_invalid(o->out + ": there is no run to resume here (no config.json); start it with --model and "
                                       "--dataset, without --resume");
            c = load_run_config(stored, /*validate=*/false);
        }
        if (!o->model.empty()) c.model = o->model;
        if (!c.model.empty() && !std::filesystem::exists(c.model)) {
            // ORG/NAME[@REV]: from the Hugging Face cache, downloaded first unless HF_HUB_OFFLINE is set.
            const HubSigint sigint;
            c.model = hub::resolve_path_or_repo(c.model, hub::RepoType::Model, cli_hub_options(), stderr_progress(),
                                                &g_hub_cancel)
                          .string();
        }
        if (!o->init_adapter.empty()) c.init_adapter = o->init_adapter;
        if (!o->dataset.empty()) c.data.dataset = o->dataset;
        if (!c.data.dataset.empty() && !std::filesystem::exists(c.data.dataset)) {
            const HubSigint sigint;
            c.data.dataset = hub::resolve_path_or_repo(c.data.dataset, hub::RepoType::Dataset, cli_hub_options(),
                                                       stderr_progress(), &g_hub_cancel)
                                 .string();
        }
        if (!o->validation.empty()) c.data.validation = o->validation;
        for (const auto& spec : o->columns) {
            const auto [key, column] = parse_column_mapping(spec);
            c.data.columns[key] = column;
        }
        if (o->validation_fraction) c.data.validation_fraction = *o->validation_fraction;
        if (!o->chat_template.empty()) c.data.chat_template = o->chat_template;
        if (o->train_on_all_tokens) c.data.train_on_all_tokens = true;
        if (!o->out.empty()) c.output_dir = o->out;
        if (o->lora_r) c.lora.r = *o->lora_r;
        if (o->lora_alpha) c.lora.alpha = *o->lora_alpha;
        if (o->lora_dropout) c.lora.dropout = *o->lora_dropout;
        if (!o->targets.empty()) c.lora.target_modules = split_list(o->targets);
        if (o->lr) c.training.lr = *o->lr;
        if (!o->schedule.empty()) {
            const auto s = parse_lr_schedule(o->schedule);
            if (!s) throw_invalid("--schedule " + o->schedule + ": expected constant, linear or cosine");
            c.training.schedule = *s;
        }
        if (o->warmup_steps) c.training.warmup_steps = *o->warmup_steps;
        if (o->warmup_ratio) c.training.warmup_ratio = *o->warmup_ratio;
        if (o->weight_decay) c.training.weight_decay = *o->weight_decay;
        if (o->epochs) c.training.epochs = *o->epochs;
        if (o->max_steps) c.training.max_steps = *o->max_steps;
        if (o->batch_tokens) c.training.batch_tokens = *o->batch_tokens;
        if (o->grad_accum) c.training.grad_accum = *o->grad_accum;
        if (o->max_grad_norm) c.training.max_grad_norm = *o->max_grad_norm;
        if (o->max_seq_len) c.data.max_seq_len = *o->max_seq_len;
        if (!o->packing.empty()) {
            if (o->packing != "on" && o->packing != "off") throw_invalid("--packing " + o->packing + ": expected on or off");
            c.data.packing = o->packing == "on";
        }
        if (o->seed) c.seed = *o->seed;
        apply_choice_flags(c, o->checkpointing, o->device);
        apply_memory_flags(c, o->memory);
        if (o->checkpoint_every) c.training.checkpoint_every = *o->checkpoint_every;
        if (o->checkpoint_minutes) c.training.checkpoint_minutes = *o->checkpoint_minutes;
        if (o->keep_checkpoints) c.training.keep_checkpoints = *o->keep_checkpoints;
        if (o->eval_every) c.training.eval_every = *o->eval_every;
        if (o->max_nonfinite_steps) c.training.max_nonfinite_steps = *o->max_nonfinite_steps;

        DistributedOptions dist;
        dist.nodes = o->nodes;
        dist.node_rank = o->node_rank;
        dist.rendezvous = o->rendezvous;
        dist.timeout_s = o->dist_timeout;
        if (o->nodes > 1)  // the rendezvous waits silently for the other nodes: say so first
            std::fprintf(stderr, "node rank %d of %d: loading, then meeting the other nodes at %s (for up to %g s)\n",
                         o->node_rank, o->nodes, o->rendezvous.c_str(), o->dist_timeout);
        Trainer trainer = Trainer::prepare(c, TrainerOptions{.resume = o->resume, .distributed = dist});
        const Plan plan = trainer.plan();
        std::fprintf(stderr, "plan: %s, checkpointing %s, %lld steps, %lld micro-batches/epoch, %lld trainable "
                             "parameters, memory %.1f MiB (weights %.1f, LoRA+optimizer %.1f, activations %.1f, "
                             "workspace %.1f, context %.1f; pinned host %.1f)\n",
                     std::string(device_choice_name(plan.config.device)).c_str(),
                     std::string(checkpoint_policy_name(plan.config.memory.checkpointing)).c_str(),
                     static_cast<long long>(plan.total_steps), static_cast<long long>(plan.train_batches),
                     static_cast<long long>(plan.trainable_parameters), plan.memory.total / 1048576.0,
                     plan.memory.weights / 1048576.0, plan.memory.lora_optimizer / 1048576.0,
                     plan.memory.activations / 1048576.0, plan.memory.workspace / 1048576.0,
                     plan.memory.overhead / 1048576.0, plan.memory.pinned_host / 1048576.0);
        g_stop.store(false);
        struct sigaction sa {};
        sa.sa_handler = on_sigint;
        sigemptyset(&sa.sa_mask);
        struct sigaction old {};
        sigaction(SIGINT, &sa, &old);
        StderrSink sink;
        try {
            trainer.run(sink, g_stop);
        } catch (...) {
            sigaction(SIGINT, &old, nullptr);
            throw;
        }
        sigaction(SIGINT, &old, nullptr);
        if (trainer.diverged())
            throw_invalid(trainer.diverged_message() + " Here: a lower --lr, and a new --out.");
        const std::string dist_flags =
            o->nodes > 1 ? " --nodes " + std::to_string(o->nodes) + " --node-rank " + std::to_string(o->node_rank) +
                               " --rendezvous " + o->rendezvous
                         : "";
        if (trainer.stopped()) {
            std::fprintf(stderr, "stopped; resume with: tandem-cli train --out %s --resume%s (same settings)\n",
                         plan.config.output_dir.c_str(), dist_flags.c_str());
            return exit_code_for(ErrorCategory::Cancelled);
        }
        if (o->node_rank != 0) return 0;  // node rank 0 prints the adapter it wrote
        std::cout << trainer.adapter_dir().string() << "\n";
        return 0;
    };
}

}  // namespace tandem::cli
