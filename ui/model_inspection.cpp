// SPDX-FileCopyrightText: 2026 The Tandem developers
// SPDX-License-Identifier: GPL-3.0-or-later
// See model_inspection.h. Mirrors app/cli/cmd_info.cpp: a folder without tokenizer.json is still described,
// but it cannot be trained (the data pipeline needs the tokenizer), so it is reported unsupported.
#include "ui/model_inspection.h"

#include <QFile>
#include <QFileInfo>
#include <QJsonDocument>
#include <QJsonObject>
#include <QStringList>

#include <exception>

#include "tandem/demo_model.h"
#include "tandem/error.h"
#include "tandem/model_dir.h"
#include "tandem/tokenizer.h"

namespace tandem::ui {
namespace {

QString categoryPrefix(const Error& e) {
    switch (e.category()) {
        case ErrorCategory::Unsupported:
            return QStringLiteral("Not supported: ");
        case ErrorCategory::InvalidInput:
            return QStringLiteral("Not a usable model folder: ");
        case ErrorCategory::Io:
            return QStringLiteral("Cannot read the folder: ");
        default:
            return QStringLiteral("Error: ");
    }
}

bool isDemoConfig(const QString& configPath) {
    QFile f(configPath);
    if (!f.open(QIODevice::ReadOnly)) return false;
    return QJsonDocument::fromJson(f.readAll()).object().contains(QStringLiteral("tandem_demo"));
}

}  // namespace

QString describeQuantization(const WeightQuantization& q, bool trainable) {
    if (!q.prequantized) return {};
    QStringList how{QStringLiteral("bitsandbytes")};
    if (q.double_quant) how.append(QStringLiteral("double quantization"));
    if (!q.skip_modules.empty()) {
        QStringList kept;
        for (const std::string& m : q.skip_modules) kept.append(QString::fromStdString(m));
        how.append(QStringLiteral("kept in float: %1").arg(kept.join(QStringLiteral(", "))));
    }
    QString text = QStringLiteral("4-bit %1 (%2)")
                       .arg(QString::fromStdString(q.quant_type).toUpper(), how.join(QStringLiteral(", ")));
    if (trainable) text += QStringLiteral(": trains as QLoRA");
    return text;
}

ModelInspection inspectModelFolder(const QString& folder) {
    ModelInspection r;
    r.folder = folder;
    try {
        const ModelInfo info = inspect_model_dir(folder.toStdString());
        const ModelConfig& c = info.config;
        r.inspected = true;
        r.architecture = QString::fromStdString(c.architecture);
        r.modelType = QString::fromStdString(c.model_type);
        r.layers = c.num_hidden_layers;
        r.hiddenSize = c.hidden_size;
        r.contextLength = c.max_position_embeddings;
        r.parameters = info.parameter_count;
        r.experts = c.num_experts;
        r.expertsPerToken = c.num_experts_per_tok;
        r.activeParameters = c.active_parameter_count();
        for (const auto& d : info.dtypes) r.dtypes.append(QString::fromStdString(d));
        r.quantization = describeQuantization(c.quantization, c.supported);
        r.weightBytes = info.weight_bytes;
        r.hasChatTemplate = info.has_chat_template;
        for (const auto& n : info.notes) r.notes.append(QString::fromStdString(n));
        r.demo = isDemoConfig(QString::fromStdString(info.config_path.string()));
        r.supported = c.supported;
        if (!c.supported)
            r.reason = QStringLiteral("Not yet supported: ") + QString::fromStdString(c.unsupported_reason);
        if (info.has_tokenizer_json) {
            try {
                const Tokenizer tok = Tokenizer::load(info.dir);
                r.hasTokenizer = true;
                r.tokenizer =
                    QStringLiteral("%1, %2 ids").arg(QString::fromStdString(tok.kind())).arg(tok.vocab_size());
            } catch (const Error& e) {
                r.tokenizer = QStringLiteral("unreadable");
                r.supported = false;
                r.reason = categoryPrefix(e) + QString::fromUtf8(e.what());
            }
        } else {
            r.tokenizer = QStringLiteral("none (tokenizer.json missing)");
            if (r.supported) {
                r.supported = false;
                r.reason = QStringLiteral(
                    "No tokenizer.json in the folder: training needs the model's tokenizer. "
                    "Copy tokenizer.json (and tokenizer_config.json) from the model's repository.");
            }
        }
    } catch (const Error& e) {
        r.reason = categoryPrefix(e) + QString::fromUtf8(e.what());
    } catch (const std::exception& e) {
        r.reason = QStringLiteral("Error: ") + QString::fromUtf8(e.what());
    }
    return r;
}

ModelInspection createAndInspectDemo(const QString& folder) {
    try {
        if (!QFileInfo::exists(folder + "/config.json") || !QFileInfo::exists(folder + "/model.safetensors") ||
            !QFileInfo::exists(folder + "/tokenizer.json"))
            create_demo_model(folder.toStdString());
    } catch (const std::exception& e) {
        ModelInspection r;
        r.folder = folder;
        r.reason = QStringLiteral("Could not write the demo model to %1: %2").arg(folder, QString::fromUtf8(e.what()));
        return r;
    }
    return inspectModelFolder(folder);
}

QString humanCount(int64_t n) {
    if (n >= 1'000'000'000) return QString::number(n / 1e9, 'f', 2) + "B";
    if (n >= 1'000'000) return QString::number(n / 1e6, 'f', 2) + "M";
    if (n >= 1'000) return QString::number(n / 1e3, 'f', 1) + "K";
    return QString::number(n);
}

QString humanBytes(uint64_t bytes) {
    const double b = static_cast<double>(bytes);
    if (bytes >= (1ull << 30)) return QString::number(b / double(1ull << 30), 'f', 2) + " GiB";
    if (bytes >= (1ull << 20)) return QString::number(b / double(1ull << 20), 'f', 1) + " MiB";
    return QString::number(b / 1024.0, 'f', 1) + " KiB";
}

}  // namespace tandem::ui
