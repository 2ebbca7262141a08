// SPDX-FileCopyrightText: 2026 The Tandem developers
// SPDX-License-Identifier: GPL-3.0-or-later
// The Data page's three worker-thread stages, through the engine's public data API (tandem/data.h), the way
// `tandem-cli data` and the trainer read a dataset:
//   1. readDatasetFile: records, detected format, invalid records with their line numbers;
//   2. tokenizeForPreview: the model's tokenizer + the chosen chat template render every record (no length
//      limit, so the histogram shows what max_seq_len would cut), with the run's "train on prompt tokens
//      too"; and templateWarning, when a built-in template's special tokens are unknown to the tokenizer;
//   3. summarizeLimits: the samples cut to max_seq_len as the engine cuts them, then the engine's summary
//      (summarize -> plan_batches) for the packing efficiency at the Train page's batch size.
// Decisions a reader must know:
//  - Stage 1 reads with max_invalid_fraction 1 so that even a badly broken file shows its invalid lines;
//    the 10% limit training applies (ReadOptions' default) then decides `valid`.
//  - Stage 3 re-runs on every limits change without re-tokenizing: truncation keeps a sample's head and
//    drops samples left with no trained token, exactly as engine/data/render.cpp does (see cutToLength).
//  - Every function catches everything: errors come back as text, never as exceptions.
#pragma once

#include <QString>
#include <QStringList>
#include <QVariantMap>

#include <cstdint>
#include <memory>

#include "tandem/data.h"
#include "tandem/tokenizer.h"

namespace tandem::ui {

// The share of invalid records above which training refuses a dataset (ReadOptions' default).
double trainingMaxInvalidFraction();

struct DatasetRead {
    QString path;
    QString format;                          // requested: "auto" or a format name
    std::shared_ptr<const Dataset> dataset;  // null when the file could not be read at all
    QString error;                           // why not (or why training would refuse it)
    QString detectedFormat;                  // "alpaca", ...
    int64_t totalRecords = 0;
    int64_t invalidRecords = 0;
    QStringList invalid;  // "line 3: json_syntax: …", the first ones
    bool valid = false;   // training would accept the records
    // The file's keys / columns are not ones training knows (or a column mapping names one it lacks): the page
    // offers the column-mapping dialog.
    bool columnsUnknown = false;
};
// columns: the column mapping (dataset key -> the file's column), ReadOptions::columns.
DatasetRead readDatasetFile(const QString& path, const QString& format, const QVariantMap& columns = {});

struct DatasetTokens {
    std::shared_ptr<const Tokenizer> tokenizer;
    std::shared_ptr<const TokenizedDataset> tokens;  // untruncated samples
    QString error;                                   // tokenizer or template failure, or no trainable sample
    bool datasetRefused = false;                     // the error is the data's (no trainable sample), not the model's
    QStringList invalid;                             // records the chat template refused
    int64_t invalidRecords = 0;
    int32_t padId = 0;
    QString templateName;     // "model" or "builtin:chatml" (the engine's name)
    QString templateWarning;  // see templateTokenWarning; empty when the template fits the tokenizer
};
// chatTemplate: "auto" (the model's, chatml when it has none) or a built-in name; trainOnAll: the prompts are
// trained too (RenderOptions::train_on_all_tokens).
DatasetTokens tokenizeForPreview(std::shared_ptr<const Dataset> dataset, const QString& modelFolder,
                                 const QString& chatTemplate = QStringLiteral("auto"), bool trainOnAll = false);

// The special tokens a built-in template writes ("<|im_start|>", ...), read from its source.
QStringList builtinTemplateSpecialTokens(const QString& name);
// Empty when the samples were rendered with the model's own template or with a built-in one whose special
// tokens the tokenizer knows. Else a warning naming the unknown tokens and the share of the samples' tokens
// that are the tokenizer's unknown token, and what to choose instead.
QString templateTokenWarning(const Tokenizer& tokenizer, const TokenizedDataset& tokens, bool modelHasTemplate);

struct LimitsSummary {
    DataSummary summary;
    QString error;  // e.g. nothing trainable within max_seq_len, a sample longer than the batch (screen words)
};
LimitsSummary summarizeLimits(std::shared_ptr<const Dataset> dataset, std::shared_ptr<const TokenizedDataset> tokens,
                              int maxSeqLen, int batchTokens, bool packing, int32_t padId);

// The samples of `full` cut to maxSeqLen tokens (0: no limit) with the engine's rules; counts truncated
// and dropped samples.
TokenizedDataset cutToLength(const TokenizedDataset& full, int maxSeqLen);

// "line 12" (or "line 12 (element 3)") for a record location in the file at `path`.
QString shortLocation(const std::string& location, const QString& path);
// "line 12: json_syntax: …" for an invalid record of the file at `path`.
QString describeInvalid(const InvalidRecord& record, const QString& path);

}  // namespace tandem::ui
