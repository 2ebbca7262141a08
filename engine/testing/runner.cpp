// SPDX-FileCopyrightText: 2026 The Tandem developers
// SPDX-License-Identifier: GPL-3.0-or-later
// The CUDA self-test's entry points (tandem/selftest.h; run by `tandem-cli selftest --device cuda` and
// tests/test_cuda.cpp): the op registry, the case list in its fixed order and the loop that runs it, one Check per
// case, stopping at a device that broke. Harness and decisions: harness.h; generators and case bodies: op_cases,
// gemm_op_cases, flat_op_cases, moe_cases, quant4_cases, fp8_cases, infer_op_cases.cpp; step_cases and
// step_check_cases.cpp (with step_support.h), fixture_cases.cpp.
// Without TANDEM_WITH_CUDA only the stub at the end: no names, Error{Unsupported}.
// Decisions a reader must know:
//  - kOpRegistry lists every op of TANDEM_BACKEND_OPS (backend/backend.h) with the generator of its cases; a
//    static_assert checks at compile time that its names are exactly kBackendOps (as a set, each once), so an op
//    added to the table without a generator is a compile error here. Siblings tested by one case body (forward
//    and backward) name the same generator, which runs once; its cases carry all their names (Case::ops).
//  - The "op table: every op has a case" case is the run-time half: it fails when an entry's generator made no
//    case (a grid that came out empty).
//  - kOtherKernels does the same for the kernels outside the table that are checked like ops (the optimizer,
//    fill_uniform, the collectives' sum, the 4-bit weights, sampling), with no completeness check.
//  - Order: the table's generators in registry order, the other kernels', whole steps, fixtures, the op table
//    check. Inputs are seeded by case name, so the order changes no numbers.
#include "tandem/selftest.h"

#include <string>
#include <vector>

#include "model/cuda_model.h"
#include "tandem/error.h"

#if TANDEM_WITH_CUDA
#include <exception>
#include <filesystem>
#include <array>
#include <cstddef>
#include <functional>
#include <string_view>

#include "backend/backend.h"
#include "core/cuda/context.h"
#include "kernels/cuda/cudnn_attention.h"
#include "testing/harness.h"
#endif

namespace tandem {

#if TANDEM_WITH_CUDA
namespace {

namespace fs = std::filesystem;
using testing::Case;
using testing::Check;
using testing::device_healthy;
using testing::Reporter;

// The op registry: every op of the op table (backend/backend.h, TANDEM_BACKEND_OPS) with the generator of its
// cases. Sibling ops tested by one case body (forward and backward, lora's three) name the same generator;
// it runs once, at its first entry, and its cases carry every op that names it. The order is the order of
// --list and of a run.
struct OpEntry {
    std::string_view op;
    testing::OpGenerator generate;
};

using namespace testing;
constexpr std::array kOpRegistry = {
    OpEntry{"embedding_forward", gen_embedding},
    OpEntry{"embedding_backward", gen_embedding},
    OpEntry{"rmsnorm_forward", gen_rmsnorm_forward},
    OpEntry{"residual_rmsnorm_forward", gen_residual_rmsnorm_forward},
    OpEntry{"rmsnorm_backward", gen_rmsnorm_backward},
    OpEntry{"rope_forward", gen_rope},
    OpEntry{"rope_backward", gen_rope},
    OpEntry{"swiglu_forward", gen_swiglu},
    OpEntry{"swiglu_backward", gen_swiglu},
    OpEntry{"geglu_forward", gen_geglu},
    OpEntry{"geglu_backward", gen_geglu},
    OpEntry{"clamped_swiglu_forward", gen_clamped_swiglu},
    OpEntry{"clamped_swiglu_backward", gen_clamped_swiglu},
    OpEntry{"attention_sinks", gen_attention_sinks},
    OpEntry{"dequantize_mxfp4", gen_dequantize_mxfp4},
    OpEntry{"matmul_forward", gen_matmul_forward},
    OpEntry{"matmul_backward", gen_matmul_backward},
    OpEntry{"lora_forward", gen_lora},
    OpEntry{"lora_tmp_forward", gen_lora},
    OpEntry{"lora_backward", gen_lora},
    OpEntry{"lm_head_cross_entropy", gen_lm_head_cross_entropy},
    OpEntry{"lm_head_logits", gen_lm_head_logits},
    OpEntry{"attention_forward", gen_attention},
    OpEntry{"attention_backward", gen_attention},
    OpEntry{"dropout_forward", gen_dropout},
    OpEntry{"dropout_backward", gen_dropout},
    OpEntry{"add", gen_elementwise},
    OpEntry{"accumulate", gen_elementwise},
    OpEntry{"axpy", gen_elementwise},
    OpEntry{"scale", gen_elementwise},
    OpEntry{"copy", gen_elementwise},
    OpEntry{"fill", gen_elementwise},
    OpEntry{"zero", gen_elementwise},
    OpEntry{"sum", gen_sum},
    OpEntry{"moe_router_forward", gen_moe_router},
    OpEntry{"moe_router_backward", gen_moe_router},
    OpEntry{"moe_aux_stats", gen_moe_aux},
    OpEntry{"moe_aux_loss", gen_moe_aux},
    OpEntry{"moe_sort_count", gen_moe_sort_count},
    OpEntry{"moe_permute", gen_moe_permute},
    OpEntry{"moe_permute_backward", gen_moe_permute},
    OpEntry{"moe_unpermute", gen_moe_unpermute},
    OpEntry{"moe_unpermute_backward", gen_moe_unpermute},
    OpEntry{"grouped_matmul_forward", gen_grouped_matmul},
    OpEntry{"grouped_matmul_backward", gen_grouped_matmul},
    OpEntry{"grouped_matmul_weight_grad", gen_grouped_matmul},
    OpEntry{"quantize_fp8_rows", gen_quantize_fp8_rows},
    OpEntry{"quantize_fp8_grad_rows", gen_quantize_fp8_grad_rows},
    OpEntry{"fp8_transpose", gen_fp8_transpose},
    OpEntry{"fp8_matmul", gen_fp8_matmul},
    OpEntry{"dequantize_4bit_fp8", gen_dequantize_4bit_fp8},
    OpEntry{"activation_forward_fp8", gen_activation_fp8},
    OpEntry{"activation_backward_fp8", gen_activation_fp8},
    OpEntry{"rmsnorm_forward_fp8", gen_rmsnorm_forward_fp8},
    OpEntry{"rmsnorm_backward_fp8", gen_rmsnorm_backward_fp8},
    OpEntry{"kv_cache_write", gen_kv_cache_write},
    OpEntry{"decode_attention", gen_decode_attention},
};

// Kernels outside the op table that the self-test checks the same way (backend/backend.h says why they are
// not in it), each with its generator; they run after the table's.
constexpr std::array kOtherKernels = {
    OpEntry{"adamw_update", gen_adamw},
    OpEntry{"fill_uniform", gen_fill_uniform},
    OpEntry{"sum_ranks", gen_sum_ranks},
    OpEntry{"dequantize_4bit", gen_nf4},
    OpEntry{"quantize_4bit", gen_nf4},
    OpEntry{"repetition_penalty", gen_sampling},
    OpEntry{"sample_tokens", gen_sampling},
};

template <size_t N>
constexpr bool has_op(const std::array<OpEntry, N>& entries, std::string_view op) {
    for (const OpEntry& e : entries)
        if (e.op == op) return true;
    return false;
}

// The registry names exactly the ops of kBackendOps: as many entries, every op of the table, no op twice, and
// no kernel outside the table among the table's.
consteval bool registry_matches_table() {
    if (kOpRegistry.size() != kBackendOps.size()) return false;
    for (std::string_view op : kBackendOps)
        if (!has_op(kOpRegistry, op)) return false;
    for (size_t i = 0; i < kOpRegistry.size(); ++i)
        for (size_t j = i + 1; j < kOpRegistry.size(); ++j)
            if (kOpRegistry[i].op == kOpRegistry[j].op) return false;
    for (const OpEntry& e : kOtherKernels)
        if (has_op(kOpRegistry, e.op)) return false;
    for (const OpEntry& e : kOpRegistry)
        if (e.generate == nullptr) return false;
    return true;
}
static_assert(registry_matches_table(),
              "every op of TANDEM_BACKEND_OPS (backend/backend.h) needs exactly one entry in kOpRegistry, with the "
              "generator of its cases");

// Runs each generator once, at its first entry, and gives its cases the names of every entry that names it.
// Returns the number of cases of each entry (0 for an entry whose generator made none).
template <size_t N>
std::vector<size_t> run_generators(const std::array<OpEntry, N>& entries, std::vector<Case>& cs,
                             const std::string& fixtures_dir) {
    std::vector<size_t> counts(N, 0);
    for (size_t i = 0; i < N; ++i) {
        bool ran = false;
        for (size_t j = 0; j < i; ++j) ran |= entries[j].generate == entries[i].generate;
        if (ran) continue;
        const size_t first = cs.size();
        CaseList list(cs, fixtures_dir);
        entries[i].generate(list);
        std::vector<std::string_view> ops;
        for (size_t j = i; j < N; ++j)
            if (entries[j].generate == entries[i].generate) ops.push_back(entries[j].op);
        for (size_t k = first; k < cs.size(); ++k) cs[k].ops = ops;
        for (size_t j = i; j < N; ++j)
            if (entries[j].generate == entries[i].generate) counts[j] = cs.size() - first;
    }
    return counts;
}

// "op table": every op of kBackendOps has at least one case (the registry's entries are the table's, checked at
// compile time above; here, that each generator produced a case). Runs on the names alone, no device work.
void add_op_table_case(std::vector<Case>& cs, const std::vector<size_t>& counts) {
    std::string missing;
    for (size_t i = 0; i < kOpRegistry.size(); ++i)
        if (counts[i] == 0) missing += (missing.empty() ? "" : ", ") + std::string(kOpRegistry[i].op);
    cs.push_back({"op table: every op has a case", [missing](Check& c) {
                      c.result(std::to_string(kBackendOps.size()) + " ops", missing.empty() ? 0.0 : 1.0, 0.0,
                               missing.empty() ? "all covered" : "no case for: " + missing);
                  }});
}

// Every case in the order they are listed and run: the op table's generators, the other kernels', whole steps,
// then (with a fixtures folder) the PyTorch fixtures and out of memory, then the op table check.
std::vector<Case> make_cases(const std::string& fixtures_dir) {
    std::vector<Case> cs;
    const std::vector<size_t> counts = run_generators(kOpRegistry, cs, fixtures_dir);
    run_generators(kOtherKernels, cs, fixtures_dir);
    testing::add_step_cases(cs);
    testing::add_fixture_cases(cs, fixtures_dir);
    add_op_table_case(cs, counts);
    return cs;
}

}  // namespace
#endif  // TANDEM_WITH_CUDA

std::vector<std::string> selftest_case_names() {
    std::vector<std::string> names;
#if TANDEM_WITH_CUDA
    for (const auto& c : make_cases("fixtures")) names.push_back(c.name);
#endif
    return names;
}

std::vector<SelftestResult> run_selftest(const SelftestOptions& options,
                                         const std::function<void(const SelftestResult&)>& on_result) {
    if (options.device == "cpu")
        throw_invalid(
            "selftest: device 'cpu' has nothing to compare against (the CPU backend is the reference); "
            "use --device cuda");
    if (options.device != "cuda") throw_invalid("selftest: unknown device '" + options.device + "'; use cuda");
    std::string why;
    if (!cuda_backend_available(&why)) throw_unsupported("selftest: the CUDA backend cannot run here: " + why);
#if TANDEM_WITH_CUDA
    if (!cuda::device_available(&why)) throw_unsupported("selftest: no usable CUDA device: " + why);
    cuda::context();  // a device that cannot even start fails the command (Error{Device}), not every case
    if (!options.fixtures_dir.empty() && !fs::is_directory(fs::path(options.fixtures_dir) / "models"))
        throw_invalid("selftest: " + options.fixtures_dir + " has no models/ folder (pass tests/fixtures)");
    std::vector<Case> cases = make_cases(options.fixtures_dir);
    std::erase_if(cases, [&](const Case& c) { return c.name.find(options.filter) == std::string::npos; });
    if (cases.empty())
        throw_invalid("selftest: no case name contains '" + options.filter +
                      "' (tandem-cli selftest --list shows them)");

    std::vector<SelftestResult> results;
    Reporter out{on_result, results};
    std::string broken;  // the case after which the device stopped working
    for (const auto& cs : cases) {
        Check check(cs.name, options.seed, out);
        if (!broken.empty()) {
            check.fail("not run", "the device failed in '" + broken + "'");
            continue;
        }
        try {
            cs.run(check);
            if (check.count() == 0) check.fail("no result", "the case compared nothing (a self-test bug)");
        } catch (const Error& e) {
            check.fail("error", std::string(error_category_name(e.category())) + ": " + e.what());
        } catch (const std::exception& e) {
            check.fail("error", e.what());
        }
        if (!device_healthy()) broken = cs.name;
    }
    if (broken.empty()) cuda::cudnn_attention_clear_cache();
    return results;
#else
    (void)on_result;
    throw_unsupported(
        "selftest: this build has no CUDA backend (configure with -DTANDEM_CUDA=ON on a machine with "
        "the CUDA toolkit and cuDNN)");
#endif
}

}  // namespace tandem
