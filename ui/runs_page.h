// SPDX-FileCopyrightText: 2026 The Tandem developers
// SPDX-License-Identifier: GPL-3.0-or-later
// The Runs page: every run in the runs folder and in other folders the user adds (name, model, dataset,
// status, steps, final loss, learning rate, rank, batch tokens, seq len, duration, device, date), the loss
// curves of the selected runs overlaid (training and eval, smoothing, log scale, x by step or by tokens
// seen), a summary of the selected run (training time, tokens seen, best eval loss), and the actions on a
// run: reopen its config in the Train page, resume it, export its adapter, open its folder, delete it (after
// a confirmation).
// Decisions a reader must know:
//  - The folder scan and the metrics files are read on worker threads (run_scan.h); a result that lands
//    after a newer refresh or selection is dropped. A refresh keeps the selected runs selected.
//  - The page does not talk to the session: a run being trained shows as running through its studio.lock
//    (run_lock.h); the main window refreshes the page when a run starts and ends, and the delete
//    confirmation names what will be removed.
//  - Other folders (QSettings "runs/otherFolders") are listed beside the runs folder; delete acts only on
//    runs directly under a listed folder.
//  - A diverged run is not offered for Resume (with the same settings it diverges again); Reopen settings
//    is the way on, and Export warns first (ExportDialog). Neither is a running one (its studio.lock is held,
//    run_lock.h), and delete leaves it alone. An interrupted one is, with or without a checkpoint (canResume).
//  - Every listing is announced (runsListed), so that the main window can offer to resume an interrupted run
//    at start without reading the folders again.
#pragma once

#include <QString>
#include <QStringList>
#include <QWidget>

#include "tandem/run_config.h"
#include "ui/run_scan.h"

class QCheckBox;
class QComboBox;
class QCustomPlot;
class QLabel;
class QSlider;
class QPushButton;
class QTableWidget;

namespace tandem::ui {

class RunsPage : public QWidget {
    Q_OBJECT
    Q_DISABLE_COPY_MOVE(RunsPage)

public:
    explicit RunsPage(QWidget* parent = nullptr);

    QString runsFolder() const { return m_folder; }
    QStringList otherFolders() const { return m_otherFolders; }
    QStringList selectedRunDirs() const;

public slots:
    void setRunsFolder(const QString& folder);
    void setOtherFolders(const QStringList& folders);  // also stored in QSettings
    void refresh();

signals:
    void reopenConfig(const tandem::RunConfig& config);
    void resumeRequested(const QString& runDir);
    void exportRequested(const QString& runDir);
    void runsListed(const QList<tandem::ui::RunEntry>& runs);  // after each refresh, as the table shows them

protected:
    void showEvent(QShowEvent* event) override;

private:
    void showRuns(const QList<RunEntry>& runs);
    void onSelectionChanged();
    void loadCurves(const QStringList& dirs);
    void showCurves(const QList<LossCurve>& curves);
    void drawCurves();
    void updateFolderLabel();
    void reopenSelected();
    void deleteSelected();
    const RunEntry* entry(const QString& dir) const;

    QString m_folder;
    QList<RunEntry> m_runs;
    quint64 m_scanGeneration = 0;
    quint64 m_curveGeneration = 0;
    QStringList m_keepSelected;  // dirs to reselect after a refresh
    QStringList m_otherFolders;
    QList<LossCurve> m_curves;  // of the selected runs, as last loaded

    QTableWidget* m_table = nullptr;
    QCustomPlot* m_plot = nullptr;
    QLabel* m_folderLabel = nullptr;
    QLabel* m_status = nullptr;
    QPushButton* m_reopen = nullptr;
    QPushButton* m_resume = nullptr;
    QPushButton* m_export = nullptr;
    QPushButton* m_delete = nullptr;
    QPushButton* m_refresh = nullptr;
    QPushButton* m_openFolder = nullptr;
    QPushButton* m_addFolder = nullptr;
    QPushButton* m_removeFolders = nullptr;
    QCheckBox* m_logScale = nullptr;
    QCheckBox* m_showEval = nullptr;
    QSlider* m_smoothing = nullptr;
    QComboBox* m_xAxis = nullptr;
    QLabel* m_summary = nullptr;
};

}  // namespace tandem::ui
