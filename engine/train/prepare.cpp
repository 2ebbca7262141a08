// SPDX-FileCopyrightText: 2026 The Tandem developers
// SPDX-License-Identifier: GPL-3.0-or-later
// Trainer::prepare: validates a RunConfig, resolves the device and the limits, plans CUDA memory (refusing
// a run that cannot fit before anything is loaded), then loads the tokenizer, the data and the model, and
// hands them to the trainer loop (trainer.cpp). Kept apart from trainer.cpp so the trainer and its tests
// link without the models' definitions.
#include <filesystem>
#include <optional>
#include <vector>

#include "tandem/data.h"
#include "tandem/error.h"
#include "tandem/system_info.h"
#include "tandem/tokenizer.h"
#include "tandem/trainer.h"
#include "train/backends.h"
#include "train/data_parallel.h"
#include "train/rendezvous.h"
#include "train/socket_communicator.h"
#include "train/trainer_impl.h"
#include "train/watched_communicator.h"

namespace tandem {

namespace {

// Several processes: the options are checked (and the address parsed) before anything is loaded.
std::optional<RendezvousAddress> check_distributed(const DistributedOptions& d, DeviceChoice device,
                                                  const std::vector<int>& devices) {
    if (d.nodes < 1) throw_invalid("--nodes " + std::to_string(d.nodes) + ": at least 1");
    if (d.node_rank < 0 || d.node_rank >= d.nodes)
        throw_invalid("--node-rank " + std::to_string(d.node_rank) + " is outside 0.." + std::to_string(d.nodes - 1) +
                      " for --nodes " + std::to_string(d.nodes) + "; give each node its own rank, node rank 0 listening");
    if (d.nodes == 1) return std::nullopt;
    if (!(d.timeout_s > 0)) throw_invalid("--dist-timeout must be a positive number of seconds");
    if (device == DeviceChoice::Cuda && !(devices.empty() || (devices.size() == 1 && devices[0] == 0)))
        throw_unsupported("--nodes " + std::to_string(d.nodes) + " with --devices: on the GPU each process of a world "
                          "across processes trains on one GPU, its GPU 0. Start one process per GPU and choose its GPU "
                          "with CUDA_VISIBLE_DEVICES (e.g. CUDA_VISIBLE_DEVICES=1 tandem-cli train --nodes ...), or "
                          "train the GPUs of one machine in one process with --devices and no --nodes");
    if (d.rendezvous.empty())
        throw_invalid("--nodes " + std::to_string(d.nodes) + " needs --rendezvous HOST:PORT, the address node rank 0 "
                      "listens on (the same on every node)");
    return parse_rendezvous_address(d.rendezvous);
}

}  // namespace

Trainer Trainer::prepare(RunConfig config, TrainerOptions options) {
    validate_run_config(config);
    namespace fs = std::filesystem;
    const DistributedOptions dist = options.distributed;
    const std::optional<RendezvousAddress> address = check_distributed(dist, config.device, config.devices);
    if (!fs::is_directory(config.model)) throw_invalid("model: " + config.model + " is not a folder");
    if (!fs::is_regular_file(config.data.dataset)) throw_invalid("data.dataset: " + config.data.dataset + " is not a file");
    if (!config.data.validation.empty() && !fs::is_regular_file(config.data.validation))
        throw_invalid("data.validation: " + config.data.validation + " is not a file");

    // Continuing an adapter: its LoRA settings define the function being trained, so they replace the run's
    // (only the dropout, a training choice, is kept). The resolved config.json shows what was used.
    std::optional<PeftAdapter> init;
    if (!config.init_adapter.empty()) {
        if (!fs::is_directory(config.init_adapter))
            throw_invalid("init_adapter: " + config.init_adapter + " is not a folder");
        init = read_peft_adapter(config.init_adapter, load_model_config(config.model));
        const double dropout = config.lora.dropout;
        config.lora = init->config;
        config.lora.dropout = dropout;
    }

    std::vector<std::string> notes;
    train::resolve_limits_and_device(config, notes);
    if (address) {
        (void)check_distributed(dist, config.device, config.devices);  // device auto may have chosen the GPU
        // Across processes the GPUs sum over NCCL: a node without it fails here, before the others wait on it.
        if (config.device == DeviceChoice::Cuda) {
            const SystemInfo info = system_info();
            if (info.nccl.empty())
                throw_unsupported("--nodes " + std::to_string(dist.nodes) + " on the GPU sums the gradients with NCCL, "
                                  "which cannot be loaded here: " + info.nccl_unavailable_reason +
                                  ". Install NCCL (libnccl2), or train with --device cpu");
        }
    }
    // On CUDA the memory plan is made (and a run that cannot fit refused) before anything is loaded.
    std::optional<MemoryPlan> planned;
    if (config.device == DeviceChoice::Cuda) planned = train::plan_cuda_run(config, notes);

    const Tokenizer tok = Tokenizer::load(config.model);
    DataOptions opt;
    opt.path = config.data.dataset;
    opt.validation_path = config.data.validation;
    opt.validation_fraction = config.data.validation_fraction;
    opt.seed = config.seed;
    opt.read.format = *parse_dataset_format(config.data.format == "completion" ? "prompt_completion" : config.data.format);
    opt.read.columns = config.data.columns;
    opt.render.max_seq_len = config.data.max_seq_len;
    opt.render.chat_template = config.data.chat_template;
    opt.render.train_on_all_tokens = config.data.train_on_all_tokens;
    opt.pack.token_budget = config.training.batch_tokens;
    opt.pack.packing = config.data.packing;
    opt.pack.seed = config.seed;
    if (auto pad = tok.pad_id()) opt.pack.pad_id = *pad;
    PreparedData data = prepare_data(opt, tok);

    train::TrainerInputs in;
    in.model = config.device == DeviceChoice::Cuda ? train::load_cuda_model(config, init)
                                                   : train::load_cpu_model(config, init);
    if (const auto* dp = dynamic_cast<const DataParallelModel*>(in.model.get())) {
        std::string gpus;
        for (const int d : config.devices) {
            if (!gpus.empty()) gpus += ',';
            gpus += std::to_string(d);
        }
        notes.push_back("data parallel: " + std::to_string(dp->world_size()) + " replicas on GPUs " + gpus + " over " +
                        dp->transport() + "; micro-batch i of a step runs on replica i mod " +
                        std::to_string(dp->world_size()) + ", gradients summed per layer during the backward");
    }
    in.planned = planned;
    in.notes = std::move(notes);
    in.train = std::move(data.train_tokens);
    in.validation = std::move(data.validation_tokens);
    in.pad_id = opt.pack.pad_id;
    in.config = std::move(config);
    if (address) {
        in.notes.push_back("data parallel: node rank " + std::to_string(dist.node_rank) + " of " +
                           std::to_string(dist.nodes) + " (rendezvous " + address->text() + "); micro-batch i of a "
                           "step runs on node rank i mod " + std::to_string(dist.nodes) +
                           (dist.node_rank == 0 ? "; this node writes the run folder"
                                                : "; node rank 0 writes the run folder, this one only reports here"));
        const bool on_gpu = in.config.device == DeviceChoice::Cuda;
        in.distribute = [dist, address = *address, on_gpu](std::unique_ptr<TrainableModel> model,
                                                           const std::vector<FingerprintPart>& fingerprint) {
            RendezvousOptions o;
            o.address = address;
            o.nodes = dist.nodes;
            o.node_rank = dist.node_rank;
            o.fingerprint = fingerprint;
            o.timeout_s = dist.timeout_s;
            if (on_gpu) {
                // NCCL: node 0's unique id travels as the rendezvous blob; every process then joins NCCL's world
                // on this thread, which loaded the model (a CUDA model stays on its thread), and the gradients are
                // summed on the device during the backward as with --devices. The rendezvous links stay open,
                // watched: a node that dies or fails stops the others (train/watched_communicator.h).
                if (dist.node_rank == 0) o.blob = train::nccl_unique_id();
                Rendezvous met = rendezvous(o);
                std::unique_ptr<Communicator> nccl = train::nccl_communicator(dist.nodes, dist.node_rank, met.blob);
                return std::make_unique<DataParallelModel>(
                    std::move(model), std::make_unique<WatchedCommunicator>(std::move(nccl), std::move(met)),
                    DataParallelModel::OnThisThread{});
            }
            std::vector<std::unique_ptr<TrainableModel>> ranks;
            ranks.push_back(std::move(model));
            return std::make_unique<DataParallelModel>(std::move(ranks),
                                                       std::make_unique<SocketCommunicator>(rendezvous(o), 1));
        };
    }
    return train::make_trainer(std::move(in), options);
}

}  // namespace tandem
