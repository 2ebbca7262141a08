// SPDX-FileCopyrightText: 2026 The Tandem developers
// SPDX-License-Identifier: GPL-3.0-or-later
// Reading base tensors for the merging exports (see base_weights.h).
#include "export/base_weights.h"

#include <cstring>

#include "io/mxfp4.h"
#include "io/quant4_checkpoint.h"
#include "model/expert_layout.h"
#include "kernels/cpu/nf4.h"
#include "tandem/error.h"

namespace tandem {

namespace {

template <class T>
std::vector<T> copy_of(const TensorInfo* t) {  // mapped data need not be aligned for T
    std::vector<T> v(t->data.size() / sizeof(T));
    std::memcpy(v.data(), t->data.data(), v.size() * sizeof(T));
    return v;
}

}  // namespace

namespace {

// The MXFP4 parameter whose blocks t is ("" if none).
std::string mxfp4_param_of(const SafetensorsSet& set, const TensorInfo& t) {
    constexpr std::string_view kBlocks = "_blocks";
    if (t.dtype != DType::U8 || !t.name.ends_with(kBlocks)) return {};
    const std::string param = t.name.substr(0, t.name.size() - kBlocks.size());
    return is_mxfp4_tensor(set, param) ? param : std::string();
}

// Its dequantized [..., OUT, IN] shape (from the blocks: [..., OUT, IN / 32, 16]).
std::vector<int64_t> mxfp4_out_in_of(const TensorInfo& blocks) {
    std::vector<int64_t> s(blocks.shape.begin(), blocks.shape.end() - 1);
    if (!s.empty()) s.back() *= 32;
    return s;
}

}  // namespace

bool is_base_tensor(const SafetensorsSet& set, const std::string& name) {
    if (name.ends_with("_scales")) {
        const std::string param = name.substr(0, name.size() - 7);
        if (is_mxfp4_tensor(set, param)) return false;
    }
    return !is_quant4_part(set, name);
}

std::string base_tensor_name(const SafetensorsSet& set, const TensorInfo& t) {
    const std::string param = mxfp4_param_of(set, t);
    return param.empty() ? t.name : param;
}

std::vector<int64_t> base_tensor_shape(const SafetensorsSet& set, const TensorInfo& t) {
    if (t.dtype == DType::U8 && is_quant4_tensor(set, t.name)) return find_quant4(set, t.name, {}).shape;
    if (!mxfp4_param_of(set, t).empty()) return mxfp4_out_in(mxfp4_out_in_of(t));  // the parameter: [E, in, out]
    return t.shape;
}

void read_base_tensor(const SafetensorsSet& set, const TensorInfo& t, std::vector<float>& out, const std::string& what) {
    if (const std::string param = mxfp4_param_of(set, t); !param.empty()) {  // [E, OUT, IN] -> the parameter [E, IN, OUT]
        const std::vector<int64_t> oi = mxfp4_out_in_of(t);
        const std::vector<float> v = dequantize_mxfp4(find_mxfp4(set, param, oi));
        const int64_t IN = oi.back(), OUT = oi[oi.size() - 2];
        out = expert_tensor_to_checkpoint(v, ExpertLayout{int64_t(v.size()) / (IN * OUT), IN, OUT, true, false});
        return;
    }
    if (t.dtype == DType::U8 && is_quant4_tensor(set, t.name)) {
        const Quant4Tensors q = find_quant4(set, t.name, {});
        const std::vector<uint8_t> codes = copy_of<uint8_t>(q.codes);
        const auto& code = q.quant_type == "fp4" ? fp4_code() : nf4_code();
        Quant4Ref r;
        r.codes = codes.data();
        r.code = code.data();
        r.blocksize = q.blocksize;
        int64_t n = 1;
        for (int64_t d : q.shape) n *= d;
        r.n = n;
        std::vector<uint8_t> absmax_q;
        std::vector<float> absmax, nested_code, nested_absmax;
        const float offset = q.offset;
        if (q.nested) {
            absmax_q = copy_of<uint8_t>(q.absmax);
            nested_code = copy_of<float>(q.nested_code);
            nested_absmax = copy_of<float>(q.nested_absmax);
            r.absmax_q = absmax_q.data();
            r.nested_code = nested_code.data();
            r.nested_absmax = nested_absmax.data();
            r.offset = &offset;
            r.nested_blocksize = q.nested_blocksize;
        } else {
            absmax = copy_of<float>(q.absmax);
            r.absmax = absmax.data();
        }
        out.resize(size_t(n));
        cpu::dequantize_4bit(out.data(), r, 0, n);
        return;
    }
    if (!dtype_converts_to_f32(t.dtype))
        throw_unsupported(set.source_name() + ": tensor " + t.name + " has dtype " + std::string(dtype_name(t.dtype)) +
                          ", which " + what + " cannot convert");
    out.resize(size_t(t.numel()));
    tensor_to_f32(t, out);
}

}  // namespace tandem
