// SPDX-FileCopyrightText: 2026 The Tandem developers
// SPDX-License-Identifier: GPL-3.0-or-later
// Run-config flags that `train` and `plan` share: the comma-separated target list, the checkpointing /
// device choices and the memory flags (quantization, VRAM budget), with the same refusals.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include <CLI/CLI.hpp>

#include "tandem/error.h"
#include "tandem/run_config.h"

namespace tandem::cli {

// "q_proj,v_proj" -> {"q_proj", "v_proj"} (empty entries dropped).
inline std::vector<std::string> split_list(const std::string& s) {
    std::vector<std::string> out;
    size_t pos = 0;
    while (pos <= s.size()) {
        const size_t comma = s.find(',', pos);
        const std::string name = s.substr(pos, comma == std::string::npos ? std::string::npos : comma - pos);
        if (!name.empty()) out.push_back(name);
        if (comma == std::string::npos) break;
        pos = comma + 1;
    }
    return out;
}

// --checkpointing and --device, when given.
inline void apply_choice_flags(RunConfig& c, const std::string& checkpointing, const std::string& device) {
    if (!checkpointing.empty()) {
        const auto p = parse_checkpoint_policy(checkpointing);
        if (!p)
            throw_invalid("--checkpointing " + checkpointing +
                          ": expected off, selective, recompute, smart, smart-single or auto");
        c.memory.checkpointing = *p;
    }
    if (!device.empty()) {
        const auto d = parse_device_choice(device);
        if (!d) throw_invalid("--device " + device + ": expected cpu, cuda or auto");
        c.device = *d;
    }
}

// The memory flags as the user sets them.
struct MemoryFlags {
    std::string quantization;
    std::string precision;
    std::optional<double> vram_budget;
    std::optional<double> host_budget;
    std::string devices;
};

// Registers --quantization, --precision, --vram-budget, --host-budget and --devices on a subcommand.
inline void add_memory_flags(CLI::App* sub, MemoryFlags& f) {
    sub->add_option("--quantization", f.quantization,
                    "none (base weights as the checkpoint stores them) | nf4 (4-bit base weights: QLoRA; a *-bnb-4bit "
                    "checkpoint is 4-bit either way)");
    sub->add_option("--precision", f.precision,
                    "bf16 (default) | fp8 (FP8 base weights and GEMMs with block scales: faster on Hopper GPUs; "
                    "LoRA, norms, attention and loss stay bf16)");
    sub->add_option("--vram-budget", f.vram_budget, "plan and allocate as if the GPU had this many GiB");
    sub->add_option("--host-budget", f.host_budget,
                    "GiB of pinned host memory smart checkpointing may use for block inputs, all GPUs of this process "
                    "together (0, the default: half of the available RAM; long sequences need about layers x tokens x "
                    "hidden x 2 bytes)");
    sub->add_option("--devices", f.devices,
                    "GPUs to train on together, e.g. 0,1 or all: one replica each, micro-batch i of a step on GPU i mod "
                    "N (grad_accum >= N keeps every GPU busy); default: GPU 0");
}

// "0,1" -> {0, 1}; "all" -> {-1}.
inline std::vector<int> parse_devices(const std::string& s) {
    if (s == "all") return {-1};
    std::vector<int> out;
    for (const std::string& item : split_list(s)) {
        size_t used = 0;
        int v = -1;
        try {
            v = std::stoi(item, &used);
        } catch (const std::exception&) {
            used = 0;
        }
        if (used != item.size() || v < 0)
            throw_invalid("--devices " + s + ": '" + item + "' is no GPU index; expected indices like 0,1 or all");
        out.push_back(v);
    }
    if (out.empty()) throw_invalid("--devices: expected GPU indices like 0,1 or all");
    return out;
}

// --quantization, --precision, --vram-budget and --devices, when given.
inline void apply_memory_flags(RunConfig& c, const MemoryFlags& f) {
    if (!f.quantization.empty()) {
        const auto q = parse_quantization(f.quantization);
        if (!q) throw_invalid("--quantization " + f.quantization + ": expected none or nf4");
        c.quantization = *q;
    }
    if (!f.precision.empty()) {
        const auto p = parse_precision(f.precision);
        if (!p) throw_invalid("--precision " + f.precision + ": expected bf16 or fp8");
        c.precision = *p;
    }
    if (f.vram_budget) {
        if (!(*f.vram_budget > 0) || *f.vram_budget > 1e6)
            throw_invalid("--vram-budget " + std::to_string(*f.vram_budget) + ": expected a positive number of GiB");
        c.memory.vram_budget_gib = *f.vram_budget;
    }
    if (f.host_budget) {
        if (!(*f.host_budget >= 0) || *f.host_budget > 1e6)
            throw_invalid("--host-budget " + std::to_string(*f.host_budget) +
                          ": expected a number of GiB (0: half of the available RAM)");
        c.memory.host_budget_gib = *f.host_budget;
    }
    if (!f.devices.empty()) c.devices = parse_devices(f.devices);
}

}  // namespace tandem::cli
