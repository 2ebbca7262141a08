// SPDX-FileCopyrightText: 2026 The Tandem developers
// SPDX-License-Identifier: GPL-3.0-or-later
// See screen_words.h.
#include "ui/screen_words.h"

#include <QList>
#include <QPair>

#include <algorithm>

namespace tandem::ui {
namespace {

using Words = QPair<QString, QString>;

// Engine text -> what the studio shows. CLI phrases first (they hold keys of their own).
QList<Words> screenWords() {
    QList<Words> words = {
        {QStringLiteral("; use --device cpu"), QStringLiteral("; choose Device: cpu on the Train page")},
        {QStringLiteral("use --device cpu"), QStringLiteral("choose Device: cpu on the Train page")},
        {QStringLiteral("use --device cuda"), QStringLiteral("choose Device: cuda on the Train page")},
        {QStringLiteral("--device cpu"), QStringLiteral("Device: cpu")},
        {QStringLiteral("--device cuda"), QStringLiteral("Device: cuda")},
        {QStringLiteral("resume with --resume"), QStringLiteral("press Resume to continue")},
        {QStringLiteral("resume it with --resume"), QStringLiteral("resume it from the Runs page")},
        {QStringLiteral("--checkpointing"), QStringLiteral("Checkpointing")},
        {QStringLiteral("--quantization nf4"), QStringLiteral("Base weights: 4-bit (QLoRA) on the Train page")},
        {QStringLiteral("--quantization none"), QStringLiteral("Base weights: 16-bit (as stored) on the Train page")},
        {QStringLiteral("--quantization"), QStringLiteral("Base weights")},
        {QStringLiteral("--precision fp8"),
         QStringLiteral("Precision: 8-bit floating point (FP8, faster) on the Train page")},
        {QStringLiteral("--precision bf16"), QStringLiteral("Precision: 16-bit (bf16) on the Train page")},
        {QStringLiteral("--precision"), QStringLiteral("Precision")},
        {QStringLiteral("--vram-budget"), QStringLiteral("GPU memory budget")},
        {QStringLiteral("--host-budget"), QStringLiteral("Pinned host memory")},
        {QStringLiteral("training.lr"), QStringLiteral("Learning rate")},
        {QStringLiteral("training.schedule"), QStringLiteral("Schedule")},
        {QStringLiteral("training.warmup_steps"), QStringLiteral("Warmup steps")},
        {QStringLiteral("training.warmup_ratio"), QStringLiteral("Warmup ratio")},
        {QStringLiteral("training.epochs"), QStringLiteral("Epochs")},
        {QStringLiteral("training.max_steps"), QStringLiteral("Max steps")},
        {QStringLiteral("training.batch_tokens"), QStringLiteral("Batch tokens")},
        {QStringLiteral("training.grad_accum"), QStringLiteral("Gradient accumulation")},
        {QStringLiteral("training.max_grad_norm"), QStringLiteral("Max grad norm")},
        {QStringLiteral("training.weight_decay"), QStringLiteral("Weight decay")},
        {QStringLiteral("training.eval_every"), QStringLiteral("Evaluate every")},
        {QStringLiteral("training.checkpoint_every"), QStringLiteral("Checkpoint every (steps)")},
        {QStringLiteral("training.checkpoint_minutes"), QStringLiteral("Checkpoint every (minutes)")},
        {QStringLiteral("training.keep_checkpoints"), QStringLiteral("Checkpoints kept")},
        {QStringLiteral("training.max_nonfinite_steps"), QStringLiteral("Non-finite steps before stopping")},
        {QStringLiteral("data.max_seq_len"), QStringLiteral("Max seq len")},
        {QStringLiteral("data.validation_fraction"), QStringLiteral("Validation share")},
        {QStringLiteral("data.validation"), QStringLiteral("Validation file")},
        {QStringLiteral("data.dataset"), QStringLiteral("Dataset")},
        {QStringLiteral("data.format"), QStringLiteral("Format")},
        {QStringLiteral("data.template"), QStringLiteral("Chat template")},
        {QStringLiteral("data.packing"), QStringLiteral("Packing")},
        {QStringLiteral("memory.checkpointing"), QStringLiteral("Checkpointing")},
        {QStringLiteral("memory.vram_budget_gib"), QStringLiteral("GPU memory budget")},
        {QStringLiteral("vram_budget_gib"), QStringLiteral("GPU memory budget")},
        {QStringLiteral("memory.host_budget_gib / --host-budget"), QStringLiteral("Pinned host memory")},
        {QStringLiteral("memory.host_budget_gib"), QStringLiteral("Pinned host memory")},
        // The key alone only where it starts a field's message ("quantization: 'x' is unknown"): the word
        // is also prose ("double quantization", "4-bit quantization reads BF16").
        {QStringLiteral("quantization nf4"), QStringLiteral("Base weights: 4-bit (QLoRA) on the Train page")},
        {QStringLiteral("quantization none"), QStringLiteral("Base weights: 16-bit (as stored) on the Train page")},
        {QStringLiteral("quantization:"), QStringLiteral("Base weights:")},
        // The same for precision ("full precision", "width or precision" are prose).
        {QStringLiteral("precision fp8"),
         QStringLiteral("Precision: 8-bit floating point (FP8, faster) on the Train page")},
        {QStringLiteral("precision bf16"), QStringLiteral("Precision: 16-bit (bf16) on the Train page")},
        {QStringLiteral("precision:"), QStringLiteral("Precision:")},
        {QStringLiteral("init_adapter"), QStringLiteral("Continue from adapter")},
        {QStringLiteral("output_dir"), QStringLiteral("Runs folder")},
        {QStringLiteral("lora: r ="), QStringLiteral("Rank:")},
        {QStringLiteral("lora: alpha ="), QStringLiteral("Alpha:")},
        {QStringLiteral("lora: dropout ="), QStringLiteral("Dropout:")},
        {QStringLiteral("lora: target_modules"), QStringLiteral("Target projections:")},
        {QStringLiteral("lora: unknown target module"), QStringLiteral("Target projections: unknown module")},
        {QStringLiteral("lora: target module"), QStringLiteral("Target projections: module")},
    };
    std::stable_sort(words.begin(), words.end(),
                     [](const Words& a, const Words& b) { return a.first.size() > b.first.size(); });
    return words;
}

bool keyChar(QChar c) {
    return c.isLetterOrNumber() || c == QLatin1Char('_');
}

}  // namespace

QString inScreenWords(const QString& engineMessage) {
    static const QList<Words> words = screenWords();
    QString out;
    out.reserve(engineMessage.size());
    qsizetype i = 0;
    while (i < engineMessage.size()) {
        bool replaced = false;
        const bool atStart = i == 0 || !keyChar(engineMessage[i - 1]);
        if (atStart) {
            for (const Words& w : words) {
                if (!QStringView(engineMessage).mid(i).startsWith(w.first)) continue;
                const qsizetype end = i + w.first.size();
                if (end < engineMessage.size() && keyChar(engineMessage[end]) && keyChar(w.first.back())) continue;
                out += w.second;
                i = end;
                replaced = true;
                break;
            }
        }
        if (!replaced) out += engineMessage[i++];
    }
    return out;
}

QString countOf(qint64 n, const QString& singular, const QString& plural) {
    const QString noun = n == 1 ? singular : (plural.isEmpty() ? singular + QLatin1Char('s') : plural);
    return QStringLiteral("%1 %2").arg(n).arg(noun);
}

}  // namespace tandem::ui
