// SPDX-FileCopyrightText: 2026 The Tandem developers
// SPDX-License-Identifier: GPL-3.0-or-later
// ScreenshotTour: a chain of waits and grabs on the event loop (no nested loops, no sleeps).
#include "screenshot_tour.h"

#include <QAbstractItemView>
#include <QApplication>
#include <QDir>
#include <QElapsedTimer>
#include <QLineEdit>
#include <QPixmap>
#include <QPushButton>
#include <QTimer>

#include <cstdio>
#include <memory>
#include <utility>

#include "ui/about_dialog.h"
#include "ui/export_dialog.h"
#include "ui/main_window.h"
#include "ui/train_page.h"
#include "ui/training_session.h"

using tandem::ui::MainWindow;

ScreenshotTour::ScreenshotTour(MainWindow& window, QString dir, QString dataset)
    : QObject(&window), m_window(window), m_dir(std::move(dir)), m_dataset(std::move(dataset)) {}

namespace {

QPushButton* trainButton(MainWindow& w) {
    return w.trainPage()->findChild<QPushButton*>(QStringLiteral("trainButton"));
}

}  // namespace

void ScreenshotTour::start() {
    QDir().mkpath(m_dir);
    m_window.resize(1280, 820);
    m_window.selectDemo(m_dataset);
    auto ready = [this] {
        QPushButton* b = trainButton(m_window);
        return b && b->isEnabled();
    };
    waitFor(QStringLiteral("the Train button to be enabled with the demo model and dataset"), ready, 120000, [this] {
        shoot(MainWindow::ModelPageIndex, QStringLiteral("01-model"), [this] {
            shoot(MainWindow::DataPageIndex, QStringLiteral("02-data"), [this] {
                shoot(MainWindow::TrainPageIndex, QStringLiteral("03-train"), [this] { startRun(); });
            });
        });
    });
}

void ScreenshotTour::startRun() {
    tandem::RunConfig c = m_window.trainPage()->config();
    c.training.max_steps = 150;
    c.training.batch_tokens = 512;
    c.training.eval_every = 10;
    c.data.max_seq_len = 256;
    c.data.validation_fraction = 0.1;
    c.device = tandem::DeviceChoice::Cpu;
    m_window.trainPage()->setConfig(c);
    auto* session = m_window.session();
    connect(session, &tandem::ui::TrainingSession::stepCompleted, this, [this] { ++m_steps; });
    connect(session, &tandem::ui::TrainingSession::finished, this, [this] { m_ended = true; });
    connect(session, &tandem::ui::TrainingSession::diverged, this, [this] { m_ended = true; });
    connect(session, &tandem::ui::TrainingSession::failed, this, [this](const tandem::ui::RunFailure& f) {
        std::fprintf(stderr, "tandem: screenshot run failed: %s\n", qPrintable(f.message));
        m_ended = true;
    });
    // Let the Train page re-estimate the new settings before pressing Train.
    auto settled = std::make_shared<QElapsedTimer>();
    settled->start();
    auto ready = [this, settled] {
        QPushButton* b = trainButton(m_window);
        return settled->elapsed() > 800 && b && b->isEnabled();
    };
    waitFor(QStringLiteral("the Train button after the tiny settings"), ready, 60000, [this] {
        trainButton(m_window)->click();
        waitFor(QStringLiteral("20 training steps"), [this] { return m_steps >= 20 || m_ended; }, 300000, [this] {
            shoot(MainWindow::MonitorPageIndex, QStringLiteral("04-monitor-running"), [this] {
                waitFor(QStringLiteral("the run to end"), [this] { return m_ended; }, 300000, [this] {
                    shoot(MainWindow::MonitorPageIndex, QStringLiteral("05-monitor-finished"), [this] {
                        selectFirstRun();
                        shoot(MainWindow::RunsPageIndex, QStringLiteral("06-runs"), [this] {
                            tandem::ui::ExportDialog* dialog = m_window.exportRun();
                            QTimer::singleShot(500, this, [this, dialog] {
                                if (dialog) {
                                    grabWindow(dialog, QStringLiteral("07-export"));
                                    dialog->close();
                                }
                                auto* about = new tandem::ui::AboutDialog(&m_window);
                                about->setAttribute(Qt::WA_DeleteOnClose);
                                about->show();
                                QTimer::singleShot(500, this, [this, about] {
                                    grabWindow(about, QStringLiteral("08-about"));
                                    about->close();
                                    divergedRun();
                                });
                            });
                        });
                    });
                });
            });
        });
    });
}

// Learning rate 1e5: the loss turns non-finite within a few steps and the run stops itself as diverged.
void ScreenshotTour::divergedRun() {
    tandem::RunConfig c = m_window.session()->config();
    c.output_dir = m_window.trainPage()->config().output_dir;  // a new folder
    c.training.lr = 1e5;
    c.training.checkpoint_every = 1;
    m_ended = false;
    m_window.startRun(c);
    waitFor(QStringLiteral("the diverged run to end"), [this] { return m_ended; }, 300000, [this] {
        shoot(MainWindow::MonitorPageIndex, QStringLiteral("09-monitor-diverged"), [this] {
            selectFirstRun();
            shoot(MainWindow::RunsPageIndex, QStringLiteral("10-runs-diverged"), [this] {
                tandem::ui::ExportDialog* dialog = m_window.exportRun();
                QTimer::singleShot(500, this, [this, dialog] {
                    if (dialog) {
                        grabWindow(dialog, QStringLiteral("11-export-diverged"));
                        dialog->close();
                    }
                    unwritableRunsFolder();
                });
            });
        });
    });
}

// A runs folder below a file: the Train page says what to do; a start into it fails at once.
void ScreenshotTour::unwritableRunsFolder() {
    auto* edit = m_window.trainPage()->findChild<QLineEdit*>(QStringLiteral("runsFolderEdit"));
    const QString before = edit ? edit->text() : QString();
    const QString bad = QDir(m_dir).filePath(QStringLiteral("01-model.png/runs"));
    if (edit) edit->setText(bad);
    shoot(MainWindow::TrainPageIndex, QStringLiteral("12-train-unwritable-runs-folder"), [this, edit, before, bad] {
        if (edit) edit->setText(before);
        tandem::RunConfig c = m_window.session()->config();
        c.output_dir = QDir(bad).filePath(QStringLiteral("run")).toStdString();
        m_ended = false;
        m_window.startRun(c);
        waitFor(QStringLiteral("the failed start"), [this] { return m_ended; }, 60000, [this] {
            shoot(MainWindow::MonitorPageIndex, QStringLiteral("13-monitor-failed-start"), [this] { finish(0); });
        });
    });
}

// The Runs page lists the run just made: select it so the page shows its loss curve.
void ScreenshotTour::selectFirstRun() {
    m_window.showPage(MainWindow::RunsPageIndex);
    QTimer::singleShot(300, this, [this] {
        if (auto* view = m_window.findChild<QAbstractItemView*>(QStringLiteral("runsTable"));
            view && view->model() && view->model()->rowCount() > 0)
            view->setCurrentIndex(view->model()->index(0, 0));
    });
}

void ScreenshotTour::waitFor(const QString& what, std::function<bool()> ready, int timeoutMs,
                             std::function<void()> next) {
    auto timer = new QTimer(this);
    auto clock = std::make_shared<QElapsedTimer>();
    clock->start();
    timer->setInterval(200);
    connect(timer, &QTimer::timeout, this, [=, this] {
        if (ready()) {
            timer->deleteLater();
            timer->stop();
            next();
        } else if (clock->elapsed() > timeoutMs) {
            timer->deleteLater();
            timer->stop();
            std::fprintf(stderr, "tandem: screenshots: gave up waiting for %s\n", qPrintable(what));
            grabWindow(&m_window, QStringLiteral("99-timeout"));
            finish(1);
        }
    });
    timer->start();
}

void ScreenshotTour::shoot(int page, const QString& name, std::function<void()> next) {
    m_window.showPage(page);
    QTimer::singleShot(800, this, [this, name, next = std::move(next)] {
        grabWindow(&m_window, name);
        next();
    });
}

void ScreenshotTour::grabWindow(QWidget* widget, const QString& name) {
    const QString path = QDir(m_dir).filePath(name + QStringLiteral(".png"));
    if (!widget->grab().save(path)) std::fprintf(stderr, "tandem: cannot write %s\n", qPrintable(path));
    else std::fprintf(stderr, "tandem: wrote %s\n", qPrintable(path));
}

void ScreenshotTour::finish(int exitCode) {
    if (m_window.session()->isRunning()) m_window.session()->requestStop();
    QApplication::exit(exitCode);
}
