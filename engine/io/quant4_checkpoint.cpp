// SPDX-FileCopyrightText: 2026 The Tandem developers
// SPDX-License-Identifier: GPL-3.0-or-later
// Finding and validating a 4-bit projection's tensors (see quant4_checkpoint.h).
#include "io/quant4_checkpoint.h"

#include <cmath>
#include <cstring>

#include <nlohmann/json.hpp>

#include "core/quant4.h"
#include "tandem/error.h"

namespace tandem {

namespace {

const TensorInfo* state_tensor(const SafetensorsSet& set, const std::string& w) {
    for (const char* t : {".quant_state.bitsandbytes__nf4", ".quant_state.bitsandbytes__fp4"})
        if (const TensorInfo* s = set.find(w + t)) return s;
    return nullptr;
}

std::string shape_str(const std::vector<int64_t>& s) { return shape_to_string(s); }

}  // namespace

bool is_quant4_part(const SafetensorsSet& set, const std::string& name) {
    for (const char* s : {".absmax", ".nested_absmax", ".nested_quant_map", ".quant_map",
                          ".quant_state.bitsandbytes__nf4", ".quant_state.bitsandbytes__fp4"}) {
        const std::string suffix = s;
        if (name.size() > suffix.size() && name.compare(name.size() - suffix.size(), suffix.size(), suffix) == 0 &&
            is_quant4_tensor(set, name.substr(0, name.size() - suffix.size())))
            return true;
    }
    return false;
}

bool is_quant4_tensor(const SafetensorsSet& set, const std::string& weight_name) {
    const TensorInfo* t = set.find(weight_name);
    return t && t->dtype == DType::U8 && state_tensor(set, weight_name) != nullptr;
}

Quant4Tensors find_quant4(const SafetensorsSet& set, const std::string& w, const std::vector<int64_t>& shape) {
    const std::string src = set.source_name();
    auto bad = [&](const std::string& tensor, const std::string& what) {
        throw_invalid(src + ": tensor '" + tensor + "' " + what +
                      "; the 4-bit checkpoint is damaged or was not written by bitsandbytes");
    };
    Quant4Tensors q;
    const TensorInfo* st = state_tensor(set, w);
    if (!st) bad(w, "has no quant_state (" + w + ".quant_state.bitsandbytes__nf4)");
    if (st->dtype != DType::U8 || st->shape.size() != 1 || st->numel() > 65536)
        bad(st->name, "must be a uint8 vector holding a short JSON object");
    nlohmann::json j;
    try {
        j = nlohmann::json::parse(std::string(reinterpret_cast<const char*>(st->data.data()), st->data.size()));
    } catch (const std::exception&) {
        bad(st->name, "is not valid JSON");
    }
    if (!j.is_object()) bad(st->name, "is not a JSON object");
    auto field = [&](const char* k) -> const nlohmann::json& {
        if (!j.contains(k)) bad(st->name, std::string("has no '") + k + "'");
        return j[k];
    };
    const auto& qt = field("quant_type");
    if (!qt.is_string()) bad(st->name, "quant_type must be a string");
    q.quant_type = qt.get<std::string>();
    if (q.quant_type != "nf4" && q.quant_type != "fp4")
        throw_unsupported(src + ": tensor '" + st->name + "': quant_type '" + q.quant_type +
                          "' is not supported (nf4 or fp4)");
    const auto& bs = field("blocksize");
    if (!bs.is_number_integer() || bs.get<int64_t>() < 16 || bs.get<int64_t>() > 4096 ||
        (bs.get<int64_t>() & (bs.get<int64_t>() - 1)) != 0)
        bad(st->name, "blocksize must be a power of two in [16, 4096]");
    q.blocksize = int(bs.get<int64_t>());
    const auto& sh = field("shape");
    std::vector<int64_t> got;
    if (!sh.is_array() || sh.size() > 8) bad(st->name, "shape must be a list of integers");
    for (const auto& d : sh) {
        if (!d.is_number_integer()) bad(st->name, "shape must be a list of integers");
        got.push_back(d.get<int64_t>());
    }
    if (!shape.empty() && got != shape)
        bad(st->name, "says shape " + shape_str(got) + ", but the config implies " + shape_str(shape));
    if (j.contains("dtype") && j["dtype"].is_string()) q.dtype = j["dtype"].get<std::string>();
    if (got.empty()) bad(st->name, "has an empty shape");
    int64_t n = 1;
    for (int64_t d : got) {
        if (d <= 0 || d > (int64_t(1) << 40) || n > (int64_t(1) << 46) / d) bad(st->name, "has an absurd shape");
        n *= d;
    }
    q.shape = got;
    const int64_t blocks = quant4_blocks(n, q.blocksize);

    auto need = [&](const std::string& name, DType dt, int64_t numel) -> const TensorInfo* {
        const TensorInfo* t = set.find(name);
        if (!t) bad(name, "is missing (every 4-bit weight has it)");
        if (t->dtype != dt)
            bad(name, "has dtype " + std::string(dtype_name(t->dtype)) + ", expected " + std::string(dtype_name(dt)));
        if (t->numel() != numel)
            bad(name, "has " + std::to_string(t->numel()) + " elements, expected " + std::to_string(numel) +
                          " for a weight of shape " + shape_str(got) + " in blocks of " +
                          std::to_string(q.blocksize));
        return t;
    };
    q.codes = need(w, DType::U8, quant4_code_bytes(n));
    q.code = need(w + ".quant_map", DType::F32, kQuant4Codes);
    q.nested = j.contains("nested_offset");
    if (q.nested) {
        const auto& off = j["nested_offset"];
        if (!off.is_number()) bad(st->name, "nested_offset must be a number");
        q.offset = float(off.get<double>());
        if (!std::isfinite(q.offset)) bad(st->name, "nested_offset must be finite");
        const auto& nb = field("nested_blocksize");
        if (!nb.is_number_integer() || nb.get<int64_t>() < 16 || nb.get<int64_t>() > 4096)
            bad(st->name, "nested_blocksize must be an integer in [16, 4096]");
        q.nested_blocksize = int(nb.get<int64_t>());
        q.absmax = need(w + ".absmax", DType::U8, blocks);
        q.nested_absmax = need(w + ".nested_absmax", DType::F32, quant4_blocks(blocks, q.nested_blocksize));
        q.nested_code = need(w + ".nested_quant_map", DType::F32, kNestedCodes);
    } else {
        q.absmax = need(w + ".absmax", DType::F32, blocks);
    }
    // The code table must be the one its quant_type names (the kernels take the stored table, but another
    // table would be another format).
    const auto& table = q.quant_type == "nf4" ? nf4_code() : fp4_code();
    for (int i = 0; i < kQuant4Codes; ++i) {
        float v;
        std::memcpy(&v, q.code->data.data() + size_t(i) * 4, 4);
        if (std::fabs(v - table[size_t(i)]) > 1e-6f)
            throw_unsupported(src + ": tensor '" + q.code->name + "' is not bitsandbytes' " + q.quant_type +
                              " code table (value " + std::to_string(i) + " is " + std::to_string(v) + ")");
    }
    return q;
}

}  // namespace tandem
