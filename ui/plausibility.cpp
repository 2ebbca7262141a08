// SPDX-FileCopyrightText: 2026 The Tandem developers
// SPDX-License-Identifier: GPL-3.0-or-later
// See plausibility.h.
#include "ui/plausibility.h"

#include <QLocale>
#include <QObject>

namespace tandem::ui {

QStringList plausibilityWarnings(const RunConfig& c, const ModelShape& model) {
    QStringList out;
    if (c.training.lr > kHighLearningRate)
        out.append(QObject::tr("Learning rate %1 is very high for LoRA (above %2): the loss will likely diverge. "
                               "5e-5 to 5e-4 is typical.")
                       .arg(QLocale::c().toString(c.training.lr, 'g', QLocale::FloatingPointShortest))
                       .arg(QLocale::c().toString(kHighLearningRate, 'g', QLocale::FloatingPointShortest)));
    if (model.hiddenSize > 0 && c.init_adapter.empty() && c.lora.r > model.hiddenSize)
        out.append(QObject::tr("Rank %1 is larger than the model's hidden size (%2): the extra rank adds memory and "
                               "nothing else. Choose a Rank of at most %2.")
                       .arg(c.lora.r)
                       .arg(model.hiddenSize));
    if (model.contextLength > 0 && c.data.max_seq_len > model.contextLength)
        out.append(QObject::tr("Max seq len %1 is above the model's context (%2 tokens): samples are cut at %2 "
                               "tokens. Set Max seq len to %2 or less.")
                       .arg(c.data.max_seq_len)
                       .arg(model.contextLength));
    if (c.precision == Precision::Fp8 && model.hiddenSize > 0 && model.hiddenSize < kFp8GainHiddenSize)
        out.append(QObject::tr("Precision FP8 brings little at hidden size %1: its matrix multiplications are too "
                               "small for the FP8 tensor cores (measured on an H200: Qwen3-0.6B, hidden size 1024, as "
                               "fast as 16-bit, slower with 4-bit base weights; Llama-3.1-8B, 4096: 1.3x). Choose "
                               "Precision 16-bit (bf16) for this model.")
                       .arg(model.hiddenSize));
    return out;
}

}  // namespace tandem::ui
