// SPDX-FileCopyrightText: 2026 The Tandem developers
// SPDX-License-Identifier: GPL-3.0-or-later
// ScreenshotTour — drives the main window through every page during a real short CPU run and saves one PNG
// per page (QWidget::grab of the whole window), then quits the application. For tools/screenshots.sh
// (`tandem --demo --screenshot-dir DIR`).
// Decisions a reader must know:
//  - It acts like a user: demo model and dataset selected, settings made tiny (150 steps, batch 512 tokens,
//    CPU, eval every 10 steps), Train pressed through the Train page's own button.
//  - After the pages of that run it shows what goes wrong: a run at learning rate 1e5 that diverges
//    (Monitor, Runs, the Export dialog's warning), a runs folder that is not a folder (the Train page's
//    reason), and a start into it (the Monitor after a failed start: cleared plots, the message).
//  - Every wait has a deadline; on a deadline the tour takes the screenshots it can and quits with a
//    non-zero exit code, naming what it waited for.
#pragma once

#include <QObject>
#include <QString>

#include <functional>

namespace tandem::ui {
class MainWindow;
}

class ScreenshotTour : public QObject {
    Q_OBJECT

public:
    ScreenshotTour(tandem::ui::MainWindow& window, QString dir, QString dataset);
    void start();

private:
    // Calls next once ready() holds (checked every 200 ms), or fails after timeoutMs.
    void waitFor(const QString& what, std::function<bool()> ready, int timeoutMs, std::function<void()> next);
    void shoot(int page, const QString& name, std::function<void()> next);
    void grabWindow(QWidget* widget, const QString& name);
    void startRun();
    void divergedRun();
    void unwritableRunsFolder();
    void selectFirstRun();
    void finish(int exitCode);

    tandem::ui::MainWindow& m_window;
    QString m_dir;
    QString m_dataset;
    int m_steps = 0;
    bool m_ended = false;
};
