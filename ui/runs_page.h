// The Runs page: every run in the runs folder (name, model, dataset, status, steps, final loss, date),
// their loss curves overlaid for the selected runs, and the actions on a run: reopen its config in the
// Train page, resume it, export its adapter, delete it (after a confirmation).
// Decisions a reader must know:
//  - The folder scan and the metrics files are read on worker threads (run_scan.h); a result that lands
//    after a newer refresh or selection is dropped. A refresh keeps the selected runs selected.
//  - The page does not know which run the session is training: the main window refreshes it when a run
//    ends, and the delete confirmation names what will be removed.
//  - A diverged run is not offered for Resume (with the same settings it diverges again); Reopen settings
//    is the way on, and Export warns first (ExportDialog).
#pragma once

#include <QString>
#include <QStringList>
#include <QWidget>

#include "tandem/run_config.h"
#include "ui/run_scan.h"

class QCustomPlot;
class QLabel;
class QPushButton;
class QTableWidget;

namespace tandem::ui {

class RunsPage : public QWidget {
    Q_OBJECT
    Q_DISABLE_COPY_MOVE(RunsPage)

public:
    explicit RunsPage(QWidget* parent = nullptr);

    QString runsFolder() const { return m_folder; }
    QStringList selectedRunDirs() const;

public slots:
    void setRunsFolder(const QString& folder);
    void refresh();

signals:
    void reopenConfig(const tandem::RunConfig& config);
    void resumeRequested(const QString& runDir);
    void exportRequested(const QString& runDir);

protected:
    void showEvent(QShowEvent* event) override;

private:
    void showRuns(const QList<RunEntry>& runs);
    void onSelectionChanged();
    void loadCurves(const QStringList& dirs);
    void showCurves(const QList<LossCurve>& curves);
    void reopenSelected();
    void deleteSelected();
    const RunEntry* entry(const QString& dir) const;

    QString m_folder;
    QList<RunEntry> m_runs;
    quint64 m_scanGeneration = 0;
    quint64 m_curveGeneration = 0;
    QStringList m_keepSelected;  // dirs to reselect after a refresh

    QTableWidget* m_table = nullptr;
    QCustomPlot* m_plot = nullptr;
    QLabel* m_folderLabel = nullptr;
    QLabel* m_status = nullptr;
    QPushButton* m_reopen = nullptr;
    QPushButton* m_resume = nullptr;
    QPushButton* m_export = nullptr;
    QPushButton* m_delete = nullptr;
    QPushButton* m_refresh = nullptr;
};

}  // namespace tandem::ui
