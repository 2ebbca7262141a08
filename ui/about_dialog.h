// SPDX-FileCopyrightText: 2026 The Tandem developers
// SPDX-License-Identifier: GPL-3.0-or-later
// tandem::ui::AboutDialog — what this build is: Tandem's version, Qt (built against and running), the
// backends compiled in, and the GPU details as far as the engine's public API reports them; then the
// licences: Tandem's (GPL-3.0-or-later) and those of the libraries it links (as in installer/copyright).
// Known limit: the public engine API (engine/include/tandem) has no function that reports the CUDA
// runtime/driver, cuDNN versions or the GPU name (tandem-cli --version prints only its own version; the
// bench reads them through engine internals). Until one exists the dialog says which backend is built in
// and that those details are not available, instead of guessing.
#pragma once

#include <QDialog>
#include <QString>

namespace tandem::ui {

class AboutDialog : public QDialog {
    Q_OBJECT
    Q_DISABLE_COPY_MOVE(AboutDialog)

public:
    explicit AboutDialog(QWidget* parent = nullptr);

    // "Tandem 0.1.0", "Qt 6.4.2 (built with 6.4.2)", ... one line per component, as shown.
    static QStringList versionLines();
    static QString tandemVersion();
    // "Tandem is free software: GPL-3.0-or-later ...", then one line per linked library with its licence.
    static QStringList licenseLines();
};

}  // namespace tandem::ui
