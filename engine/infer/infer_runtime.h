// SPDX-FileCopyrightText: 2026 The Tandem developers
// SPDX-License-Identifier: GPL-3.0-or-later
// The part of an inference runtime both backends share: the decoder's hooks that only training uses (backward,
// block-input offload) as no-ops. Each model adds attention_forward (the KV cache write and the attention).
#pragma once

#include "model/decoder.h"
#include "tandem/error.h"

namespace tandem::infer {

template <class B>
class InferRuntime : public DecoderRuntime<B> {
public:
    using Act = typename B::Act;
    void attention_backward(int, LayerActs<B>&, Act*, Act*, Act*, const Act*, const Step&) override {
        throw_internal("inference: the inference runtime has no backward");
    }
    void offload_input(int) override {}
    void wait_offloaded(int) override {}
    void reload_input(int) override {}
    void wait_reloaded(int) override {}
    void input_used(int) override {}
};

}  // namespace tandem::infer
