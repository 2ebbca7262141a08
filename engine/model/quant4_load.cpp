// SPDX-FileCopyrightText: 2026 The Tandem developers
// SPDX-License-Identifier: GPL-3.0-or-later
// Loading 4-bit projections (see quant4_load.h).
#include "model/quant4_load.h"

#include <algorithm>
#include <cstring>

#include "kernels/cpu/nf4.h"
#include "model/expert_layout.h"
#include "model/fp8_load.h"
#include "tandem/error.h"

namespace tandem {

Quant4Consts quant4_consts(const float* code16, const float* nested256, float offset) {
    Quant4Consts c{};
    std::copy(code16, code16 + kQuant4Codes, c.begin());
    if (nested256) std::copy(nested256, nested256 + kNestedCodes, c.begin() + kQuant4Codes);
    c[kQuant4Codes + kNestedCodes] = offset;
    return c;
}

Quant4Consts nf4_consts(float offset) {
    return quant4_consts(nf4_code().data(), dynamic_code_8bit().data(), offset);
}

Quant4Consts checkpoint_consts(const Quant4Tensors& q) {
    // The code table its quant_type names (find_quant4 checked the stored quant_map against it): FP4's stored
    // table rounds a few values differently from the constants bitsandbytes dequantizes with.
    const std::array<float, kQuant4Codes>& code = q.quant_type == "fp4" ? fp4_code() : nf4_code();
    std::array<float, kNestedCodes> nested{};
    if (q.nested) std::memcpy(nested.data(), q.nested_code->data.data(), sizeof nested);
    return quant4_consts(code.data(), q.nested ? nested.data() : nullptr, q.offset);
}

const TensorInfo& float_tensor(const SafetensorsSet& ws, const std::string& name, int64_t numel,
                               const std::string& reader) {
    const TensorInfo& t = ws.at(name);
    if (t.numel() != numel)
        throw_invalid(ws.source_name() + ": tensor " + name + " has " + std::to_string(t.numel()) +
                      " elements, the config implies " + std::to_string(numel));
    if (!dtype_converts_to_f32(t.dtype))
        throw_unsupported(ws.source_name() + ": tensor " + name + " has dtype " + std::string(dtype_name(t.dtype)) +
                          " (" + reader + " reads BF16, F16, F32 and F64)");
    return t;
}

bool checkpoint_is_quant4(const SafetensorsSet& ws, const WeightEntry& e) {
    return is_quant4_tensor(ws, e.name);
}

Quant4Tensors checkpoint_quant4(const SafetensorsSet& ws, const WeightEntry& e, const Dims& d) {
    Quant4Tensors q = find_quant4(ws, e.name, {e.q.out, e.q.in});
    if (q.blocksize != d.quant_blocksize || q.nested != d.quant_nested || (q.nested && q.nested_blocksize != 256))
        throw_unsupported(ws.source_name() + ": tensor '" + e.name + "' is quantized in blocks of " +
                          std::to_string(q.blocksize) + (q.nested ? " with" : " without") +
                          " double quantization (nested blocks of " + std::to_string(q.nested_blocksize) +
                          "); this model's other 4-bit weights use blocks of " + std::to_string(d.quant_blocksize) +
                          (d.quant_nested ? " with" : " without") +
                          " double quantization (nested blocks of 256), and mixed layouts are not supported");
    return q;
}

void check_not_quant4(const SafetensorsSet& ws, const WeightEntry& e) {
    if (checkpoint_is_quant4(ws, e))
        throw_unsupported(ws.source_name() + ": tensor " + e.name +
                          " is stored 4-bit, but the config's quantization_config keeps it in float "
                          "(llm_int8_skip_modules); the checkpoint and its config.json disagree");
}

void load_weights_fp32(const ModelPlan& y, void* base, const Dims& d, const SafetensorsSet& ws) {
    for (const WeightEntry& e : weight_entries(y, d)) {
        if (e.f8.codes >= 0) {
            load_fp8_host(y.weights, base, e, ws);
            continue;
        }
        if (e.handle < 0) {
            load_quant4_host(y.weights, base, e, d, ws);
            continue;
        }
        if (e.expert.experts > 0) {  // gpt-oss's experts: transposed / interleaved / MXFP4
            const std::vector<float> v = read_expert_tensor(ws, e);
            std::memcpy(y.weights.ptr<float>(base, e.handle) + e.offset, v.data(), v.size() * sizeof(float));
            continue;
        }
        check_not_quant4(ws, e);
        const std::vector<float> v = tensor_to_f32(ws.at(e.name));
        if (int64_t(v.size()) != e.numel)
            throw_invalid(ws.source_name() + ": tensor " + e.name + " has " + std::to_string(v.size()) +
                          " elements, the config implies " + std::to_string(e.numel));
        std::memcpy(y.weights.ptr<float>(base, e.handle) + e.offset, v.data(), v.size() * sizeof(float));
    }
}

std::vector<std::string> entry_tensors(const WeightEntry& e) {
    return e.parts.empty() ? std::vector<std::string>{e.name} : e.parts;
}

std::vector<float> entry_floats(const SafetensorsSet& ws, const WeightEntry& e, int64_t n) {
    const std::vector<std::string> names = entry_tensors(e);
    const int64_t per = n / int64_t(names.size());
    std::vector<float> v;
    v.reserve(size_t(n));
    for (const std::string& name : names) {
        const std::vector<float> x = tensor_to_f32(float_tensor(ws, name, per, "4-bit quantization"));
        v.insert(v.end(), x.begin(), x.end());
    }
    return v;
}

void load_quant4_host(const ArenaLayout& W, void* base, const WeightEntry& e, const Dims& d,
                      const SafetensorsSet& ws) {
    const Quant4Pieces& p = e.q;
    uint8_t* codes = W.ptr<uint8_t>(base, p.codes);
    float* consts = W.ptr<float>(base, p.consts);
    const int64_t blocks = quant4_blocks(p.n, d.quant_blocksize);
    Quant4Consts c{};
    if (checkpoint_is_quant4(ws, e)) {
        const Quant4Tensors q = checkpoint_quant4(ws, e, d);
        std::memcpy(codes, q.codes->data.data(), q.codes->data.size());
        std::memcpy(W.ptr<uint8_t>(base, p.absmax), q.absmax->data.data(), q.absmax->data.size());
        if (q.nested)
            std::memcpy(W.ptr<float>(base, p.nested_absmax), q.nested_absmax->data.data(),
                        q.nested_absmax->data.size());
        c = checkpoint_consts(q);
    } else {
        const std::vector<float> v = entry_floats(ws, e, p.n);
        std::vector<float> absmax(static_cast<size_t>(blocks));
        cpu::quantize_4bit(codes, absmax.data(), v.data(), p.n, d.quant_blocksize);
        float offset = 0.0f;
        if (d.quant_nested) {
            offset = cpu::absmax_mean(absmax.data(), blocks);
            cpu::quantize_blockwise_8bit(W.ptr<uint8_t>(base, p.absmax), W.ptr<float>(base, p.nested_absmax),
                                         absmax.data(), offset, dynamic_code_8bit().data(), blocks, 256);
        } else {
            std::memcpy(W.ptr<float>(base, p.absmax), absmax.data(), absmax.size() * sizeof(float));
        }
        c = nf4_consts(offset);
    }
    std::memcpy(consts, c.data(), sizeof c);
}

}  // namespace tandem
