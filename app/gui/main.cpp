// SPDX-FileCopyrightText: 2026 The Tandem developers
// SPDX-License-Identifier: GPL-3.0-or-later
// tandem — the desktop studio. Creates the QApplication (organisation and application "Tandem", the names
// QSettings and AppDataLocation use), applies the theme, opens the main window.
// Options: --demo (the built-in demo model and datasets/demo_alpaca.jsonl), --screenshot-dir DIR (a tour of
// every page during a short run, one PNG each, then quit), --quit-after-ms N (quit after N ms, and once the
// backend is known: the packaging smoke test under QT_QPA_PLATFORM=offscreen; it prints "tandem: backend: CUDA"
// or "tandem: backend: CPU: <why not CUDA>" on stderr), --theme system|light|dark.
#include <QApplication>
#include <QCommandLineParser>
#include <QDir>
#include <QFileInfo>
#include <QIcon>
#include <QTimer>

#include <cstdio>
#include <memory>

#include "screenshot_tour.h"
#include "ui/main_window.h"
#include "ui/train_page.h"
#include "ui/theme.h"
#include "ui/training_session.h"

namespace {

// datasets/demo_alpaca.jsonl: installed (share/tandem/datasets beside bin/, or the configured data dir),
// else the source tree this binary was built from.
QString findDemoDataset() {
    const QString name = QStringLiteral("demo_alpaca.jsonl");
    const QString candidates[] = {
        QDir(QCoreApplication::applicationDirPath()).filePath(QStringLiteral("../share/tandem/datasets/") + name),
        QStringLiteral(TANDEM_DATADIR "/tandem/datasets/") + name,
        QStringLiteral("/usr/share/tandem/datasets/") + name,
        QStringLiteral(TANDEM_SOURCE_DIR "/datasets/") + name,
    };
    for (const QString& c : candidates)
        if (QFileInfo::exists(c)) return QFileInfo(c).canonicalFilePath();
    return {};
}

}  // namespace

int main(int argc, char** argv) {
    Q_INIT_RESOURCE(icons);  // resources/icons.qrc lives in the static tandem_ui library: keep it linked
    QApplication app(argc, argv);
    QApplication::setOrganizationName(QStringLiteral("Tandem"));
    QApplication::setApplicationName(QStringLiteral("Tandem"));
    QApplication::setApplicationDisplayName(QStringLiteral("Tandem"));
    QApplication::setApplicationVersion(QStringLiteral(TANDEM_VERSION));
    QApplication::setDesktopFileName(QStringLiteral("tandem"));
    QApplication::setWindowIcon(QIcon(QStringLiteral(":/icons/tandem.svg")));

    QCommandLineParser parser;
    parser.setApplicationDescription(QStringLiteral("Tandem: LoRA fine-tuning studio for LLMs"));
    parser.addHelpOption();
    parser.addVersionOption();
    const QCommandLineOption demo(QStringLiteral("demo"), QStringLiteral("Select the demo model and demo dataset."));
    const QCommandLineOption shots(QStringLiteral("screenshot-dir"),
                                   QStringLiteral("Visit every page during a short demo run, save a PNG of each "
                                                  "into DIR, then quit."),
                                   QStringLiteral("DIR"));
    const QCommandLineOption quitAfter(QStringLiteral("quit-after-ms"), QStringLiteral("Quit after N milliseconds."),
                                       QStringLiteral("N"));
    const QCommandLineOption theme(QStringLiteral("theme"), QStringLiteral("system (default), light or dark."),
                                   QStringLiteral("THEME"), QStringLiteral("system"));
    parser.addOptions({demo, shots, quitAfter, theme});
    parser.process(app);

    const QString themeName = parser.value(theme).toLower();
    if (themeName != QLatin1String("system") && themeName != QLatin1String("light") && themeName != QLatin1String("dark")) {
        std::fprintf(stderr, "tandem: --theme %s: expected system, light or dark\n", qPrintable(themeName));
        return 2;
    }
    tandem::ui::Theme::apply(app, themeName == QLatin1String("dark")    ? tandem::ui::Theme::Mode::Dark
                                  : themeName == QLatin1String("light") ? tandem::ui::Theme::Mode::Light
                                                                        : tandem::ui::Theme::Mode::System);

    int quitMs = -1;
    if (parser.isSet(quitAfter)) {
        bool ok = false;
        quitMs = parser.value(quitAfter).toInt(&ok);
        if (!ok || quitMs < 0) {
            std::fprintf(stderr, "tandem: --quit-after-ms %s: expected a number of milliseconds\n",
                         qPrintable(parser.value(quitAfter)));
            return 2;
        }
    }

    tandem::ui::MainWindow window;
    window.show();

    QString dataset;
    if (parser.isSet(demo) || parser.isSet(shots)) {
        dataset = findDemoDataset();
        if (dataset.isEmpty())
            std::fprintf(stderr, "tandem: demo_alpaca.jsonl not found (looked in share/tandem/datasets and the "
                                 "source tree); selecting the demo model only\n");
    }
    if (parser.isSet(shots)) {
        auto* tour = new ScreenshotTour(window, parser.value(shots), dataset);
        QTimer::singleShot(0, tour, &ScreenshotTour::start);
    } else if (parser.isSet(demo)) {
        window.selectDemo(dataset);
    }
    if (quitMs >= 0) {
        // Quit when the time is up and the Train page has heard from system_info (off the GUI thread: the CUDA
        // plugin loads there), whichever comes last; the backend it found goes to stderr.
        struct QuitState {
            bool timeUp = false, checked = false;
        };
        auto state = std::make_shared<QuitState>();
        auto quitWhenDone = [&window, state] {
            if (!state->timeUp || !state->checked) return;
            if (window.session()->isRunning()) window.session()->requestStop();
            else window.close();  // saves the geometry
            QCoreApplication::quit();
        };
        QObject::connect(window.trainPage(), &tandem::ui::TrainPage::gpuChecked, &app,
                         [state, quitWhenDone](bool usable, const QString& reason) {
                             std::fprintf(stderr, "tandem: backend: %s\n",
                                          usable ? "CUDA" : qPrintable(QStringLiteral("CPU: ") + reason));
                             state->checked = true;
                             quitWhenDone();
                         });
        QTimer::singleShot(quitMs, &app, [state, quitWhenDone] {
            state->timeUp = true;
            quitWhenDone();
        });
    }
    return app.exec();  // the window (and its session, which joins a running thread) is destroyed after
}
