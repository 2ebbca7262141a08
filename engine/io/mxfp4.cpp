// SPDX-FileCopyrightText: 2026 The Tandem developers
// SPDX-License-Identifier: GPL-3.0-or-later
#include "io/mxfp4.h"

#include <cmath>
#include <utility>

#include "core/mxfp4.h"
#include "kernels/cpu/mxfp4.h"
#include "tandem/error.h"

namespace tandem {

namespace {

constexpr int64_t kBlock = kMxfp4Block;

}  // namespace

bool is_mxfp4_tensor(const SafetensorsSet& ws, const std::string& name) {
    return ws.find(name) == nullptr && ws.find(name + "_blocks") != nullptr && ws.find(name + "_scales") != nullptr;
}

Mxfp4Tensor find_mxfp4(const SafetensorsSet& ws, const std::string& name, const std::vector<int64_t>& out_in) {
    Mxfp4Tensor t;
    t.blocks = &ws.at(name + "_blocks");
    t.scales = &ws.at(name + "_scales");
    t.shape = out_in;
    const std::string where = ws.source_name() + ": MXFP4 tensor " + name;
    if (out_in.size() < 2 || out_in.back() % kBlock != 0)
        throw_invalid(where + ": the model's " + shape_to_string(out_in) +
                      " has no whole blocks of 32 along its last axis; the checkpoint does not match config.json");
    if (t.blocks->dtype != DType::U8 || t.scales->dtype != DType::U8)
        throw_invalid(where + ": _blocks and _scales must be uint8, found " + std::string(dtype_name(t.blocks->dtype)) +
                      " and " + std::string(dtype_name(t.scales->dtype)));
    std::vector<int64_t> scales(out_in.begin(), out_in.end() - 1);
    scales.push_back(out_in.back() / kBlock);
    std::vector<int64_t> blocks = scales;
    blocks.push_back(kBlock / 2);
    if (t.blocks->shape != blocks || t.scales->shape != scales)
        throw_invalid(where + ": _blocks " + shape_to_string(t.blocks->shape) + " and _scales " +
                      shape_to_string(t.scales->shape) + " do not hold " + shape_to_string(out_in) + " (expected " +
                      shape_to_string(blocks) + " and " + shape_to_string(scales) +
                      "); the checkpoint does not match config.json");
    return t;
}

std::vector<int64_t> mxfp4_out_in(const std::vector<int64_t>& param_shape) {
    std::vector<int64_t> s = param_shape;
    if (s.size() >= 2) std::swap(s[s.size() - 1], s[s.size() - 2]);
    return s;
}

std::vector<float> dequantize_mxfp4(const Mxfp4Tensor& t) {
    const int64_t C = t.shape.back(), R = t.shape[t.shape.size() - 2], G = t.scales->numel() * kBlock / (R * C);
    std::vector<float> out(size_t(G * R * C));
    cpu::dequantize_mxfp4(out.data(), reinterpret_cast<const uint8_t*>(t.blocks->data.data()),
                          reinterpret_cast<const uint8_t*>(t.scales->data.data()), G, int(R), int(C), false);
    return out;
}

}  // namespace tandem
