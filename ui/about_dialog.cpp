// SPDX-FileCopyrightText: 2026 The Tandem developers
// SPDX-License-Identifier: GPL-3.0-or-later
// AboutDialog: the Tandem and Qt versions, and what tandem::system_info() reports about the CUDA backend (the
// plugin's file) and the GPU (name, memory, CUDA runtime and driver, cuDNN), or why the GPU is not usable (also
// a CUDA library missing, with its package); then the licences
// (keep them in step with installer/copyright, which the .deb installs with the full texts).
#include "ui/about_dialog.h"

#include <QDialogButtonBox>
#include <QGuiApplication>
#include <QIcon>
#include <QLabel>
#include <QVBoxLayout>

#include "tandem/system_info.h"

#ifndef TANDEM_VERSION
#define TANDEM_VERSION "unknown"
#endif

namespace tandem::ui {

QString AboutDialog::tandemVersion() { return QStringLiteral(TANDEM_VERSION); }

QStringList AboutDialog::versionLines() {
    QStringList lines;
    lines << tr("Tandem %1").arg(tandemVersion());
    lines << tr("Qt %1 (built with %2), platform %3")
                 .arg(QString::fromLatin1(qVersion()), QStringLiteral(QT_VERSION_STR), QGuiApplication::platformName());
    const SystemInfo info = system_info();
    if (info.cuda_loaded)
        lines << tr("Backends: CPU and CUDA (%1)").arg(QString::fromStdString(info.cuda_plugin).toHtmlEscaped());
    else
        lines << (info.cuda_built ? tr("Backends: CPU only (the CUDA backend cannot be loaded here; see below)")
                                  : tr("Backends: CPU only (this build has no CUDA backend)"));
    if (info.gpu_usable) {
        lines << tr("GPU: %1, %2 GiB, compute capability %3")
                     .arg(QString::fromStdString(info.gpu_name))
                     .arg(double(info.gpu_memory) / double(1ull << 30), 0, 'f', 1)
                     .arg(QString::fromStdString(info.compute_capability));
        lines << tr("CUDA runtime %1, driver (CUDA %2), cuDNN %3")
                     .arg(QString::fromStdString(info.cuda_runtime), QString::fromStdString(info.cuda_driver),
                          QString::fromStdString(info.cudnn));
    } else {
        lines << tr("GPU: not usable: %1").arg(QString::fromStdString(info.gpu_unavailable_reason).toHtmlEscaped());
    }
    return lines;
}

QStringList AboutDialog::licenseLines() {
    QStringList lines;
    lines << tr("Tandem is free software under the GNU General Public License, version 3 or later "
                "(GPL-3.0-or-later), and comes with ABSOLUTELY NO WARRANTY.");
    lines << tr("It uses these libraries:");
    lines << tr("Qt 6: LGPL-3.0");
    lines << tr("QCustomPlot: GPL-3.0-or-later");
    lines << tr("nlohmann/json: MIT");
    lines << tr("CLI11 (tandem-cli): BSD-3-Clause");
    lines << tr("PCRE2: BSD-3-Clause with the PCRE2 exception");
    lines << tr("utf8proc: MIT");
    lines << tr("OpenBLAS: BSD-3-Clause");
    lines << tr("CUDA runtime, cuBLAS, cuDNN (CUDA builds): NVIDIA proprietary licences, not shipped with Tandem");
    lines << tr("Full texts: /usr/share/doc/tandem/copyright and the LICENSE file of the sources.");
    return lines;
}

AboutDialog::AboutDialog(QWidget* parent) : QDialog(parent) {
    setObjectName(QStringLiteral("aboutDialog"));
    setWindowTitle(tr("About Tandem"));
    setWindowIcon(QIcon(QStringLiteral(":/icons/tandem.svg")));

    auto* icon = new QLabel(this);
    icon->setPixmap(QIcon(QStringLiteral(":/icons/tandem.svg")).pixmap(64, 64));
    auto* title = new QLabel(tr("<h2>Tandem</h2><p>LoRA fine-tuning studio for LLMs.</p>"), this);
    auto* versions = new QLabel(versionLines().join(QStringLiteral("<br>")), this);
    versions->setObjectName(QStringLiteral("versionLabel"));
    versions->setTextFormat(Qt::RichText);
    versions->setTextInteractionFlags(Qt::TextSelectableByMouse);
    auto* licenses = new QLabel(licenseLines().join(QStringLiteral("<br>")), this);
    licenses->setObjectName(QStringLiteral("licenseLabel"));
    licenses->setTextFormat(Qt::RichText);
    licenses->setWordWrap(true);
    licenses->setTextInteractionFlags(Qt::TextSelectableByMouse);
    auto* buttons = new QDialogButtonBox(QDialogButtonBox::Close, this);
    connect(buttons, &QDialogButtonBox::rejected, this, &QDialog::reject);

    auto* layout = new QVBoxLayout(this);
    layout->addWidget(icon, 0, Qt::AlignHCenter);
    layout->addWidget(title, 0, Qt::AlignHCenter);
    layout->addWidget(versions);
    layout->addWidget(licenses);
    layout->addWidget(buttons);
}

}  // namespace tandem::ui
