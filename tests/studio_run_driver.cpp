// SPDX-FileCopyrightText: 2026 The Tandem developers
// SPDX-License-Identifier: GPL-3.0-or-later
// studio_run_driver RUN_CONFIG.json — a studio process for test_ui_resume to kill: the main window (as
// `tandem` opens it) starts the run of RUN_CONFIG.json through MainWindow::startRun, the slot the Train page's
// Train button is wired to, and prints "checkpoint N" on stdout each time a checkpoint is complete, so the test
// knows when to send SIGKILL. Exit 0 when the run finishes, 2 for a bad argument, 3 when the run fails (the
// message on stderr), 4 when it diverges or stops. QSettings and the data folder follow XDG_CONFIG_HOME and
// XDG_DATA_HOME, which the test points at its own folders.
#include <QApplication>

#include <cstdio>
#include <exception>

#include "tandem/run_config.h"
#include "tandem/trainer.h"
#include "ui/main_window.h"
#include "ui/run_types.h"
#include "ui/training_session.h"

int main(int argc, char** argv) {
    Q_INIT_RESOURCE(icons);
    QApplication app(argc, argv);
    QApplication::setOrganizationName(QStringLiteral("Tandem"));
    QApplication::setApplicationName(QStringLiteral("Tandem"));
    if (argc != 2) {
        std::fprintf(stderr, "usage: studio_run_driver RUN_CONFIG.json\n");
        return 2;
    }
    tandem::RunConfig config;
    try {
        config = tandem::load_run_config(argv[1]);
    } catch (const std::exception& e) {
        std::fprintf(stderr, "studio_run_driver: %s\n", e.what());
        return 2;
    }

    tandem::ui::MainWindow window;
    window.show();
    tandem::ui::TrainingSession* session = window.session();
    QObject::connect(session, &tandem::ui::TrainingSession::event, [](const tandem::RunEvent& e) {
        if (e.kind != tandem::RunEventKind::CheckpointSaved) return;
        std::printf("checkpoint %lld\n", static_cast<long long>(e.step));
        std::fflush(stdout);
    });
    QObject::connect(session, &tandem::ui::TrainingSession::finished, &app,
                     [](bool stopped) { QCoreApplication::exit(stopped ? 4 : 0); });
    QObject::connect(session, &tandem::ui::TrainingSession::diverged, &app, [] { QCoreApplication::exit(4); });
    QObject::connect(session, &tandem::ui::TrainingSession::failed, &app, [](const tandem::ui::RunFailure& f) {
        std::fprintf(stderr, "studio_run_driver: %s\n", qPrintable(f.message));
        QCoreApplication::exit(3);
    });
    window.startRun(config);
    return app.exec();
}
