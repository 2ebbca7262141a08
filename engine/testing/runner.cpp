// SPDX-FileCopyrightText: 2026 The Tandem developers
// SPDX-License-Identifier: GPL-3.0-or-later
// The CUDA self-test's entry points (tandem/selftest.h; run by `tandem-cli selftest --device cuda` and
// tests/test_cuda.cpp): the case list in its fixed order and the loop that runs it, one Check per case, stopping
// at a device that broke. Harness and decisions: harness.h; cases: op_cases, flat_op_cases, moe_cases,
// quant4_cases, infer_op_cases, step_cases and fixture_cases.cpp. Without TANDEM_WITH_CUDA only the stub at the
// end: no names, Error{Unsupported}.
#include "tandem/selftest.h"

#include <string>
#include <vector>

#include "model/cuda_model.h"
#include "tandem/error.h"

#if TANDEM_WITH_CUDA
#include <exception>
#include <filesystem>
#include <functional>

#include <map>
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

// The op cases that check each op of the op table (backend/backend.h): an op is covered when a case's name
// starts with one of its prefixes. An op added to the table without an entry here, or whose cases are gone,
// fails the "op table" case.
const std::map<std::string_view, std::vector<std::string_view>>& op_case_prefixes() {
    static const std::map<std::string_view, std::vector<std::string_view>> m = {
        {"embedding_forward", {"embedding "}},
        {"embedding_backward", {"embedding "}},
        {"rmsnorm_forward", {"rmsnorm_forward "}},
        {"residual_rmsnorm_forward", {"residual_rmsnorm_forward "}},
        {"rmsnorm_backward", {"rmsnorm_backward "}},
        {"matmul_forward", {"matmul_forward "}},
        {"matmul_backward", {"matmul_backward "}},
        {"lora_forward", {"lora "}},
        {"lora_tmp_forward", {"lora "}},
        {"lora_backward", {"lora "}},
        {"dropout_forward", {"dropout "}},
        {"dropout_backward", {"dropout "}},
        {"rope_forward", {"rope "}},
        {"rope_backward", {"rope "}},
        {"attention_forward", {"attention ", "cudnn_attention "}},
        {"attention_backward", {"attention ", "cudnn_attention "}},
        {"swiglu_forward", {"swiglu "}},
        {"swiglu_backward", {"swiglu "}},
        {"geglu_forward", {"geglu "}},
        {"geglu_backward", {"geglu "}},
        {"clamped_swiglu_forward", {"clamped_swiglu "}},
        {"clamped_swiglu_backward", {"clamped_swiglu "}},
        {"attention_sinks", {"attention_sinks "}},
        {"lm_head_cross_entropy", {"lm_head_cross_entropy "}},
        {"lm_head_logits", {"lm_head_logits "}},
        {"add", {"elementwise "}},
        {"accumulate", {"elementwise "}},
        {"axpy", {"elementwise "}},
        {"scale", {"elementwise "}},
        {"copy", {"elementwise "}},
        {"fill", {"elementwise "}},
        {"zero", {"elementwise "}},
        {"sum", {"sum "}},
        {"dequantize_4bit", {"nf4 "}},
        {"kv_cache_write", {"kv_cache_write "}},
        {"decode_attention", {"decode_attention "}},
        {"moe_router_forward", {"moe_router "}},
        {"moe_router_backward", {"moe_router "}},
        {"moe_sort_count", {"moe_sort_count "}},
        {"moe_aux_stats", {"moe_aux "}},
        {"moe_aux_loss", {"moe_aux "}},
        {"moe_permute", {"moe_permute "}},
        {"moe_permute_backward", {"moe_permute "}},
        {"moe_unpermute", {"moe_unpermute "}},
        {"moe_unpermute_backward", {"moe_unpermute "}},
        {"grouped_matmul_forward", {"grouped_matmul "}},
        {"grouped_matmul_backward", {"grouped_matmul "}},
        {"grouped_matmul_weight_grad", {"grouped_matmul "}},
        {"quantize_fp8_rows", {"fp8 quantize_fp8_rows "}},
        {"fp8_transpose", {"fp8 weight quantize + fp8_transpose "}},
        {"fp8_matmul", {"fp8 fp8_matmul "}},
        {"dequantize_mxfp4", {"dequantize_mxfp4 "}},
    };
    return m;
}

// "op table": every op of kBackendOps has at least one case (runs on the names alone, no device work).
void add_op_table_case(std::vector<Case>& cs) {
    std::vector<std::string> names;
    for (const auto& c : cs) names.push_back(c.name);
    cs.push_back({"op table: every op has a case", [names](Check& c) {
                      std::string missing;
                      for (std::string_view op : kBackendOps) {
                          const auto it = op_case_prefixes().find(op);
                          bool covered = false;
                          if (it != op_case_prefixes().end())
                              for (std::string_view prefix : it->second)
                                  for (const auto& n : names) covered |= n.rfind(prefix, 0) == 0;
                          if (!covered) missing += (missing.empty() ? "" : ", ") + std::string(op);
                      }
                      c.result(std::to_string(kBackendOps.size()) + " ops", missing.empty() ? 0.0 : 1.0, 0.0,
                               missing.empty() ? "all covered" : "no case for: " + missing);
                  }});
}

// Every case in the order they are listed and run: the layer ops, the flat ops, the mixture-of-experts ops,
// whole steps, then (with a fixtures folder) the PyTorch fixtures and out of memory.
std::vector<Case> make_cases(const std::string& fixtures_dir) {
    std::vector<Case> cs;
    testing::add_op_cases(cs);
    testing::add_flat_op_cases(cs);
    testing::add_moe_cases(cs);
    testing::add_quant4_cases(cs, fixtures_dir);
    testing::add_fp8_cases(cs);
    testing::add_infer_op_cases(cs);
    testing::add_step_cases(cs);
    testing::add_fixture_cases(cs, fixtures_dir);
    add_op_table_case(cs);
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
