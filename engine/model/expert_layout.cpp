// SPDX-FileCopyrightText: 2026 The Tandem developers
// SPDX-License-Identifier: GPL-3.0-or-later
#include "model/expert_layout.h"

#include <algorithm>

#include "io/mxfp4.h"
#include "tandem/error.h"

namespace tandem {

namespace {

// Output row o of an interleaved tensor (gate j at 2j, up j at 2j + 1) for piece row r (gate rows, then up).
int64_t interleaved_row(int64_t r, int64_t out) {
    const int64_t half = out / 2;
    return r < half ? 2 * r : 2 * (r - half) + 1;
}

}  // namespace

std::vector<float> expert_tensor_from_checkpoint(std::vector<float> v, const ExpertLayout& x, bool out_in) {
    const int64_t E = x.experts, IN = x.in, OUT = x.out;
    if (int64_t(v.size()) != E * IN * OUT || (x.interleaved && OUT % 2 != 0))
        throw_internal("expert_tensor_from_checkpoint: inconsistent layout");
    if (x.transposed && !out_in) {  // [E, IN, OUT] -> [E, OUT, IN]
        std::vector<float> t(v.size());
        for (int64_t ex = 0; ex < E; ++ex) {
            const float* src = v.data() + ex * IN * OUT;
            float* dst = t.data() + ex * IN * OUT;
            for (int64_t i = 0; i < IN; ++i)
                for (int64_t o = 0; o < OUT; ++o) dst[o * IN + i] = src[i * OUT + o];
        }
        v.swap(t);
    }
    if (!x.interleaved) return v;
    std::vector<float> out(v.size());
    for (int64_t ex = 0; ex < E; ++ex)
        for (int64_t r = 0; r < OUT; ++r) {
            const float* src = v.data() + (ex * OUT + interleaved_row(r, OUT)) * IN;
            std::copy(src, src + IN, out.data() + (ex * OUT + r) * IN);
        }
    return out;
}

std::vector<float> read_expert_tensor(const SafetensorsSet& ws, const WeightEntry& e) {
    const ExpertLayout& x = e.expert;
    const int64_t E = x.experts, IN = x.in, OUT = x.out;
    if (E * IN * OUT != e.numel) throw_internal("read_expert_tensor: entry " + e.name + " has an inconsistent layout");
    if (ws.find(e.name) == nullptr && x.transposed && is_mxfp4_tensor(ws, e.name))  // blocks: [E, OUT, IN] already
        return expert_tensor_from_checkpoint(dequantize_mxfp4(find_mxfp4(ws, e.name, {E, OUT, IN})), x, true);
    std::vector<float> v = tensor_to_f32(ws.at(e.name));
    if (int64_t(v.size()) != e.numel)
        throw_invalid(ws.source_name() + ": tensor " + e.name + " has " + std::to_string(v.size()) +
                      " elements, the config implies " + std::to_string(e.numel));
    return expert_tensor_from_checkpoint(std::move(v), x);
}

std::vector<float> expert_tensor_to_checkpoint(const std::vector<float>& piece, const ExpertLayout& x) {
    const int64_t E = x.experts, IN = x.in, OUT = x.out;
    if (int64_t(piece.size()) != E * IN * OUT) throw_internal("expert_tensor_to_checkpoint: wrong size");
    std::vector<float> rows(piece.size());  // [E, OUT, IN] in the checkpoint's row order
    for (int64_t ex = 0; ex < E; ++ex)
        for (int64_t r = 0; r < OUT; ++r) {
            const int64_t o = x.interleaved ? interleaved_row(r, OUT) : r;
            const float* src = piece.data() + (ex * OUT + r) * IN;
            std::copy(src, src + IN, rows.data() + (ex * OUT + o) * IN);
        }
    if (!x.transposed) return rows;
    std::vector<float> out(rows.size());
    for (int64_t ex = 0; ex < E; ++ex)
        for (int64_t o = 0; o < OUT; ++o)
            for (int64_t i = 0; i < IN; ++i) out[(ex * IN + i) * OUT + o] = rows[(ex * OUT + o) * IN + i];
    return out;
}

}  // namespace tandem
