// SPDX-FileCopyrightText: 2026 The Tandem developers
// SPDX-License-Identifier: GPL-3.0-or-later
// See dataset_analysis.h.
#include "ui/dataset_analysis.h"

#include <QRegularExpression>

#include <algorithm>
#include <exception>
#include <optional>

#include "tandem/chat_template.h"
#include "tandem/error.h"
#include "ui/screen_words.h"

namespace tandem::ui {
namespace {

constexpr size_t kShownInvalid = 200;
constexpr int32_t kIgnore = -100;

QString message(const std::exception& e) {
    return QString::fromUtf8(e.what());
}

}  // namespace

double trainingMaxInvalidFraction() {
    return ReadOptions{}.max_invalid_fraction;
}

QString shortLocation(const std::string& location, const QString& path) {
    const QString where = QString::fromStdString(location);
    // The engine writes "path:line" or "path:line (element N)"; the page shows one file, so the path goes.
    return where.startsWith(path + ':') ? QStringLiteral("line ") + where.mid(path.size() + 1) : where;
}

QString describeInvalid(const InvalidRecord& record, const QString& path) {
    return QStringLiteral("%1: %2: %3")
        .arg(shortLocation(record.location, path),
             QString::fromUtf8(std::string(invalid_reason_name(record.reason)).c_str()),
             QString::fromStdString(record.message));
}

DatasetRead readDatasetFile(const QString& path, const QString& format, const QVariantMap& columns) {
    DatasetRead r;
    r.path = path;
    r.format = format;
    try {
        ReadOptions options;
        const auto parsed = parse_dataset_format(format.toStdString());
        if (!parsed) throw_invalid("unknown format '" + format.toStdString() + "'");
        options.format = *parsed;
        options.max_invalid_fraction = 1.0;
        options.max_reported_invalid = kShownInvalid;
        for (auto it = columns.begin(); it != columns.end(); ++it)
            options.columns[it.key().toStdString()] = it.value().toString().toStdString();
        auto dataset = std::make_shared<Dataset>(read_dataset(path.toStdString(), options));
        r.detectedFormat = QString::fromUtf8(std::string(dataset_format_name(dataset->format)).c_str());
        r.totalRecords = dataset->total_records;
        r.invalidRecords = dataset->invalid.count;
        for (const auto& rec : dataset->invalid.first) r.invalid.append(describeInvalid(rec, path));
        const double fraction =
            r.totalRecords > 0 ? static_cast<double>(r.invalidRecords) / static_cast<double>(r.totalRecords) : 0;
        r.valid = !dataset->records.empty() && fraction <= trainingMaxInvalidFraction();
        if (dataset->records.empty())
            r.error = QStringLiteral("No valid record: nothing to train on.");
        else if (!r.valid)
            r.error = QStringLiteral(
                          "%1 of %2 records are invalid (%3%): training refuses more than %4%. Fix the lines "
                          "listed, or choose the right format.")
                          .arg(r.invalidRecords)
                          .arg(r.totalRecords)
                          .arg(100.0 * fraction, 0, 'f', 1)
                          .arg(100.0 * trainingMaxInvalidFraction(), 0, 'f', 0);
        r.dataset = std::move(dataset);
    } catch (const std::exception& e) {
        r.error = message(e);
        r.columnsUnknown = r.error.contains(QLatin1String("cannot tell the dataset format")) ||
                           r.error.contains(QLatin1String("no known column set")) ||
                           r.error.contains(QLatin1String("the column mapping")) ||
                           r.error.contains(QLatin1String("the header lacks the columns"));
    }
    return r;
}

QStringList builtinTemplateSpecialTokens(const QString& name) {
    QStringList tokens;
    try {
        const QString source = QString::fromStdString(ChatTemplate::builtin(name.toStdString()).source());
        static const QRegularExpression special(QStringLiteral(R"(<\|[A-Za-z0-9_]+\|>)"));
        for (auto it = special.globalMatch(source); it.hasNext();) {
            const QString t = it.next().captured(0);
            if (!tokens.contains(t)) tokens.append(t);
        }
    } catch (const std::exception&) {
    }
    return tokens;
}

QString templateTokenWarning(const Tokenizer& tokenizer, const TokenizedDataset& tokens, bool modelHasTemplate) {
    const QString name = QString::fromStdString(tokens.template_name);
    if (!name.startsWith(QLatin1String("builtin:"))) return {};
    const QString builtin = name.mid(8);
    QStringList unknown;
    for (const QString& t : builtinTemplateSpecialTokens(builtin))
        if (!tokenizer.token_to_id(t.toStdString())) unknown.append(t);
    if (unknown.isEmpty()) return {};
    int64_t unk = 0;
    const std::string& unkToken = tokenizer.config().unk_token;
    if (const auto unkId = unkToken.empty() ? std::nullopt : tokenizer.token_to_id(unkToken))
        unk = std::count(tokens.tokens.begin(), tokens.tokens.end(), *unkId);
    const double share =
        tokens.tokens.empty() ? 0 : 100.0 * static_cast<double>(unk) / static_cast<double>(tokens.tokens.size());
    QString text =
        modelHasTemplate
            ? QStringLiteral("The %1 template writes special tokens this model's tokenizer does not know (%2).")
                  .arg(builtin, unknown.join(QStringLiteral(", ")))
            : QStringLiteral(
                  "This model has no chat template, so the built-in %1 template is used, but its "
                  "tokenizer does not know that template's special tokens (%2).")
                  .arg(builtin, unknown.join(QStringLiteral(", ")));
    text += unk > 0 ? QStringLiteral(" %1% of the tokens are unknown (%2): the model cannot learn from them.")
                          .arg(share, 0, 'f', 1)
                          .arg(QString::fromStdString(unkToken))
                    : QStringLiteral(
                          " They are split into ordinary text pieces (0% unknown tokens), which the model "
                          "has to learn as a new format.");
    text += modelHasTemplate ? QStringLiteral(" Choose Chat template: model's, or alpaca.")
                             : QStringLiteral(
                                   " Choose Chat template: alpaca (plain-text markers), or a model that has a "
                                   "chat template.");
    return text;
}

DatasetTokens tokenizeForPreview(std::shared_ptr<const Dataset> dataset, const QString& modelFolder,
                                 const QString& chatTemplate, bool trainOnAll) {
    DatasetTokens r;
    std::shared_ptr<Tokenizer> tokenizer;
    try {
        tokenizer = std::make_shared<Tokenizer>(Tokenizer::load(modelFolder.toStdString()));
    } catch (const std::exception& e) {
        r.error = QStringLiteral("The model's tokenizer could not be loaded: ") + message(e);
        return r;
    }
    try {
        if (auto pad = tokenizer->pad_id()) r.padId = *pad;
        RenderOptions render;
        render.max_seq_len = 0;  // no limit: stage 3 applies max_seq_len
        render.chat_template = chatTemplate.toStdString();
        render.train_on_all_tokens = trainOnAll;
        auto tokens = std::make_shared<TokenizedDataset>(tokenize_dataset(*dataset, *tokenizer, render));
        r.templateName = QString::fromStdString(tokens->template_name);
        r.templateWarning = templateTokenWarning(*tokenizer, *tokens, !tokenizer->config().chat_template.empty());
        const QString path = dataset->files.empty() ? QString() : QString::fromStdString(dataset->files[0].string());
        for (const auto& rec : tokens->invalid.first) r.invalid.append(describeInvalid(rec, path));
        r.invalidRecords = tokens->invalid.count;
        r.tokenizer = std::move(tokenizer);
        r.tokens = std::move(tokens);
    } catch (const std::exception& e) {
        r.error = message(e);
        r.datasetRefused = true;
    }
    return r;
}

TokenizedDataset cutToLength(const TokenizedDataset& full, int maxSeqLen) {
    TokenizedDataset out;
    out.offsets.push_back(0);
    out.template_name = full.template_name;
    out.invalid = full.invalid;
    out.split_conversations = full.split_conversations;
    out.dropped = full.dropped;
    out.truncated = full.truncated;
    for (size_t i = 0; i < full.size(); ++i) {
        auto tokens = full.sample_tokens(i);
        auto labels = full.sample_labels(i);
        if (maxSeqLen > 0 && tokens.size() > static_cast<size_t>(maxSeqLen)) {
            tokens = tokens.first(static_cast<size_t>(maxSeqLen));
            labels = labels.first(static_cast<size_t>(maxSeqLen));
            ++out.truncated;
        }
        // labels[0] is already -100 (the engine sets it before this point); a head with nothing trained goes.
        if (std::all_of(labels.begin(), labels.end(), [](int32_t l) { return l == kIgnore; })) {
            ++out.dropped;
            continue;
        }
        out.tokens.insert(out.tokens.end(), tokens.begin(), tokens.end());
        out.labels.insert(out.labels.end(), labels.begin(), labels.end());
        out.offsets.push_back(static_cast<int64_t>(out.tokens.size()));
        out.record.push_back(full.record[i]);
    }
    return out;
}

LimitsSummary summarizeLimits(std::shared_ptr<const Dataset> dataset, std::shared_ptr<const TokenizedDataset> tokens,
                              int maxSeqLen, int batchTokens, bool packing, int32_t padId) {
    LimitsSummary r;
    try {
        const TokenizedDataset cut = cutToLength(*tokens, maxSeqLen);
        if (cut.size() == 0)
            throw_invalid("No sample is left to train on at Max seq len " + std::to_string(maxSeqLen) +
                          ": every sample's trained tokens lie beyond it. Raise Max seq len on the Train page.");
        PackOptions pack;
        pack.token_budget = batchTokens;
        pack.packing = packing;
        pack.pad_id = padId;
        r.summary = summarize(*dataset, cut, pack);
    } catch (const std::exception& e) {
        r.error = inScreenWords(message(e));
    }
    return r;
}

}  // namespace tandem::ui
