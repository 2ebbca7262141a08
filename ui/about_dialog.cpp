// AboutDialog: versions are compile-time facts (TANDEM_VERSION from CMake, QT_VERSION_STR, the engine's
// public TANDEM_WITH_CUDA definition) plus qVersion() at run time.
#include "ui/about_dialog.h"

#include <QDialogButtonBox>
#include <QGuiApplication>
#include <QIcon>
#include <QLabel>
#include <QVBoxLayout>

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
#ifdef TANDEM_WITH_CUDA
    lines << tr("Backends: CPU and CUDA");
    lines << tr("CUDA runtime, driver, cuDNN, GPU: not reported by this engine version's public API");
#else
    lines << tr("Backends: CPU only (this build has no CUDA backend)");
    lines << tr("CUDA runtime, driver, cuDNN, GPU: not used by this build");
#endif
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
    auto* buttons = new QDialogButtonBox(QDialogButtonBox::Close, this);
    connect(buttons, &QDialogButtonBox::rejected, this, &QDialog::reject);

    auto* layout = new QVBoxLayout(this);
    layout->addWidget(icon, 0, Qt::AlignHCenter);
    layout->addWidget(title, 0, Qt::AlignHCenter);
    layout->addWidget(versions);
    layout->addWidget(buttons);
}

}  // namespace tandem::ui
