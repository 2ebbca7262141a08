// SPDX-FileCopyrightText: 2026 The Tandem developers
// SPDX-License-Identifier: GPL-3.0-or-later
// See runs_page.h.
#include "ui/runs_page.h"

#include <QCheckBox>
#include <QComboBox>
#include <QDesktopServices>
#include <QDir>
#include <QFileDialog>
#include <QFileInfo>
#include <QHBoxLayout>
#include <QHeaderView>
#include <QLabel>
#include <QLocale>
#include <QMessageBox>
#include <QPushButton>
#include <QSettings>
#include <QSlider>
#include <QSplitter>
#include <QStandardPaths>
#include <QTableWidget>
#include <QUrl>
#include <QVBoxLayout>

#include <cmath>
#include <exception>

#include <qcustomplot.h>

#include "ui/app_paths.h"
#include "ui/loss_plot.h"
#include "ui/run_async.h"
#include "ui/run_lock.h"
#include "ui/screen_words.h"
#include "ui/status_text.h"

namespace tandem::ui {
namespace {

enum Column {
    ColName,
    ColModel,
    ColDataset,
    ColStatus,
    ColSteps,
    ColLoss,
    ColLr,
    ColRank,
    ColBatchTokens,
    ColSeqLen,
    ColDuration,
    ColDevice,
    ColDate,
    ColumnCount
};

const QList<QColor> kCurveColors = {QColor(0x3b, 0x82, 0xc4), QColor(0xe0, 0x7b, 0x24), QColor(0x2e, 0x9d, 0x4f),
                                    QColor(0xd6, 0x45, 0x41), QColor(0x8e, 0x5c, 0xc2), QColor(0x8c, 0x6d, 0x3f),
                                    QColor(0xd4, 0x6a, 0xb8), QColor(0x6f, 0x7c, 0x85)};

QTableWidgetItem* item(const QString& text, const QVariant& sortValue = {}) {
    auto* i = new QTableWidgetItem;
    i->setFlags(Qt::ItemIsSelectable | Qt::ItemIsEnabled);
    if (sortValue.isValid())
        i->setData(Qt::DisplayRole, sortValue);
    else
        i->setText(text);
    return i;
}

// Shown in the locale's short format, sorted by the time itself.
class DateItem : public QTableWidgetItem {
public:
    explicit DateItem(const QDateTime& date) {
        setFlags(Qt::ItemIsSelectable | Qt::ItemIsEnabled);
        setText(QLocale().toString(date, QLocale::ShortFormat));
        setData(Qt::UserRole, date);
    }
    bool operator<(const QTableWidgetItem& other) const override {
        return data(Qt::UserRole).toDateTime() < other.data(Qt::UserRole).toDateTime();
    }
};

// Shown as text, sorted by a number (a duration shown as "3m12s").
class NumberItem : public QTableWidgetItem {
public:
    NumberItem(const QString& text, double value) {
        setFlags(Qt::ItemIsSelectable | Qt::ItemIsEnabled);
        setText(text);
        setData(Qt::UserRole, value);
    }
    bool operator<(const QTableWidgetItem& other) const override {
        return data(Qt::UserRole).toDouble() < other.data(Qt::UserRole).toDouble();
    }
};

QPushButton* button(const QString& text, const char* name, const QString& tip) {
    auto* b = new QPushButton(text);
    b->setObjectName(QString::fromLatin1(name));
    b->setToolTip(tip);
    return b;
}

}  // namespace

RunsPage::RunsPage(QWidget* parent) : QWidget(parent) {
    setObjectName(QStringLiteral("runsPage"));

    m_folderLabel = new QLabel;
    m_folderLabel->setObjectName(QStringLiteral("runsFolderLabel"));
    m_folderLabel->setTextInteractionFlags(Qt::TextSelectableByMouse);
    wrapMessage(m_folderLabel);
    m_refresh = button(tr("Refresh"), "refreshButton", tr("Read the runs folders again"));
    m_addFolder =
        button(tr("Add folder…"), "addRunsFolderButton",
               tr("Also list the runs of another folder (an older runs folder, a copy from another machine)"));
    m_removeFolders = button(tr("Remove other folders"), "removeRunsFoldersButton",
                             tr("List only the runs folder of the Train page again (nothing is deleted)"));
    connect(m_addFolder, &QPushButton::clicked, this, [this] {
        const QString folder = QFileDialog::getExistingDirectory(this, tr("Add a folder of runs"), m_folder);
        if (!folder.isEmpty() && !m_otherFolders.contains(folder))
            setOtherFolders(m_otherFolders + QStringList{folder});
    });
    connect(m_removeFolders, &QPushButton::clicked, this, [this] { setOtherFolders({}); });
    auto* top = new QHBoxLayout;
    top->addWidget(m_folderLabel, 1);
    top->addWidget(m_addFolder);
    top->addWidget(m_removeFolders);
    top->addWidget(m_refresh);

    m_table = new QTableWidget(0, ColumnCount);
    m_table->setObjectName(QStringLiteral("runsTable"));
    m_table->setHorizontalHeaderLabels({tr("Run"), tr("Model"), tr("Dataset"), tr("Status"), tr("Steps"),
                                        tr("Final loss"), tr("Learning rate"), tr("Rank"), tr("Batch tokens"),
                                        tr("Max seq len"), tr("Duration"), tr("Device"), tr("Date")});
    m_table->horizontalHeaderItem(ColDuration)
        ->setToolTip(tr("From the start to the last step written (a stopped run's pause included)"));
    m_table->setSelectionBehavior(QAbstractItemView::SelectRows);
    m_table->setSelectionMode(QAbstractItemView::ExtendedSelection);
    m_table->setEditTriggers(QAbstractItemView::NoEditTriggers);
    m_table->verticalHeader()->hide();
    m_table->horizontalHeader()->setStretchLastSection(true);
    m_table->setToolTip(tr("Runs in the runs folder. Select two or more to compare their loss curves"));
    m_table->horizontalHeader()->setSortIndicator(ColDate, Qt::DescendingOrder);  // newest first, until the user sorts
    connect(m_table, &QTableWidget::itemSelectionChanged, this, &RunsPage::onSelectionChanged);

    m_plot = new QCustomPlot;
    m_plot->setObjectName(QStringLiteral("runsLossPlot"));
    m_plot->setToolTip(tr("Loss of the selected runs: training (lines) and eval (dots)"));
    m_plot->setMinimumHeight(200);
    m_plot->xAxis->setLabel(tr("step"));
    m_plot->yAxis->setLabel(tr("loss"));
    m_plot->legend->setVisible(true);
    m_plot->setInteractions(QCP::iRangeDrag | QCP::iRangeZoom);

    m_logScale = new QCheckBox(tr("Log scale"));
    m_logScale->setObjectName(QStringLiteral("runsLogScaleCheck"));
    m_logScale->setToolTip(tr("Show the loss on a logarithmic axis"));
    m_showEval = new QCheckBox(tr("Eval loss"));
    m_showEval->setObjectName(QStringLiteral("runsEvalCheck"));
    m_showEval->setChecked(true);
    m_showEval->setToolTip(tr("Show the eval loss of runs that have validation data (dots)"));
    m_smoothing = new QSlider(Qt::Horizontal);
    m_smoothing->setObjectName(QStringLiteral("runsSmoothingSlider"));
    m_smoothing->setRange(0, 99);
    m_smoothing->setValue(0);
    m_smoothing->setMaximumWidth(160);
    m_smoothing->setToolTip(tr("Smoothing of the training loss (as on the Monitor); 0 shows the raw values"));
    m_xAxis = new QComboBox;
    m_xAxis->setObjectName(QStringLiteral("runsXAxisCombo"));
    m_xAxis->addItem(tr("step"), QStringLiteral("step"));
    m_xAxis->addItem(tr("tokens seen"), QStringLiteral("tokens"));
    m_xAxis->setToolTip(tr("Compare by optimizer step, or by tokens seen (runs with different batch sizes)"));
    connect(m_logScale, &QCheckBox::toggled, this, &RunsPage::drawCurves);
    connect(m_showEval, &QCheckBox::toggled, this, &RunsPage::drawCurves);
    connect(m_smoothing, &QSlider::valueChanged, this, &RunsPage::drawCurves);
    connect(m_xAxis, &QComboBox::currentIndexChanged, this, &RunsPage::drawCurves);
    auto* plotControls = new QHBoxLayout;
    plotControls->addWidget(new QLabel(tr("x axis")));
    plotControls->addWidget(m_xAxis);
    plotControls->addSpacing(12);
    plotControls->addWidget(m_logScale);
    plotControls->addWidget(m_showEval);
    plotControls->addSpacing(12);
    plotControls->addWidget(new QLabel(tr("Smoothing")));
    plotControls->addWidget(m_smoothing);
    plotControls->addStretch(1);
    m_summary = new QLabel;
    m_summary->setObjectName(QStringLiteral("runSummaryLabel"));
    m_summary->setTextInteractionFlags(Qt::TextSelectableByMouse);
    wrapMessage(m_summary);
    auto* plotBox = new QWidget;
    auto* plotLayout = new QVBoxLayout(plotBox);
    plotLayout->setContentsMargins(0, 0, 0, 0);
    plotLayout->addLayout(plotControls);
    plotLayout->addWidget(m_plot, 1);
    plotLayout->addWidget(m_summary);

    m_openFolder = button(tr("Open folder"), "openRunFolderButton",
                          tr("Show the run's folder (config, metrics, checkpoints, adapter) in the file manager"));
    connect(m_openFolder, &QPushButton::clicked, this, [this] {
        if (selectedRunDirs().size() == 1) QDesktopServices::openUrl(QUrl::fromLocalFile(selectedRunDirs().first()));
    });
    m_reopen = button(tr("Reopen settings"), "reopenButton", tr("Load this run's settings into the Train page"));
    m_resume = button(tr("Resume"), "resumeButton",
                      tr("Continue a stopped or interrupted run from its latest checkpoint (same settings, same "
                         "result as an uninterrupted run); without a checkpoint it starts again from the first step"));
    m_export = button(tr("Export adapter…"), "exportRunButton",
                      tr("Write the run's LoRA adapter (PEFT format) to a folder of your choice"));
    m_delete = button(tr("Delete…"), "deleteRunButton", tr("Remove the selected run folders from disk"));
    connect(m_refresh, &QPushButton::clicked, this, &RunsPage::refresh);
    connect(m_reopen, &QPushButton::clicked, this, &RunsPage::reopenSelected);
    connect(m_resume, &QPushButton::clicked, this, [this] {
        if (selectedRunDirs().size() == 1) emit resumeRequested(selectedRunDirs().first());
    });
    connect(m_export, &QPushButton::clicked, this, [this] {
        if (selectedRunDirs().size() == 1) emit exportRequested(selectedRunDirs().first());
    });
    connect(m_delete, &QPushButton::clicked, this, &RunsPage::deleteSelected);
    m_status = new QLabel;
    m_status->setObjectName(QStringLiteral("runsStatusLabel"));
    wrapMessage(m_status);
    auto* buttons = new QHBoxLayout;
    buttons->addWidget(m_status, 1);
    for (QPushButton* b : {m_reopen, m_resume, m_export, m_openFolder, m_delete}) buttons->addWidget(b);

    auto* splitter = new QSplitter(Qt::Vertical);
    splitter->addWidget(m_table);
    splitter->addWidget(plotBox);
    splitter->setSizes({300, 300});  // proportions: half table, half plot
    auto* layout = new QVBoxLayout(this);
    layout->addLayout(top);
    layout->addWidget(splitter, 1);
    layout->addLayout(buttons);

    m_otherFolders = QSettings().value(QStringLiteral("runs/otherFolders")).toStringList();
    onSelectionChanged();
    setRunsFolder(QSettings().value(QStringLiteral("runs/folder"), defaultRunsFolder()).toString());
}

void RunsPage::setRunsFolder(const QString& folder) {
    if (folder == m_folder) return;
    m_folder = folder;
    m_keepSelected.clear();
    updateFolderLabel();
    refresh();
}

void RunsPage::setOtherFolders(const QStringList& folders) {
    m_otherFolders = folders;
    QSettings().setValue(QStringLiteral("runs/otherFolders"), folders);
    updateFolderLabel();
    refresh();
}

void RunsPage::updateFolderLabel() {
    QStringList shown;
    for (const QString& f : m_otherFolders) shown.append(QDir::toNativeSeparators(f));
    m_folderLabel->setText(
        shown.isEmpty()
            ? tr("Runs in %1").arg(QDir::toNativeSeparators(m_folder))
            : tr("Runs in %1, and in %2").arg(QDir::toNativeSeparators(m_folder), shown.join(QStringLiteral(", "))));
    m_removeFolders->setVisible(!m_otherFolders.isEmpty());
}

void RunsPage::refresh() {
    const quint64 generation = ++m_scanGeneration;
    if (m_keepSelected.isEmpty()) m_keepSelected = selectedRunDirs();
    const QStringList folders = QStringList{m_folder} + m_otherFolders;
    runAsync(
        this, [folders] { return scanRunsFolders(folders); },
        [this, generation](const QList<RunEntry>& runs) {
            if (generation == m_scanGeneration) showRuns(runs);
        });
}

void RunsPage::showEvent(QShowEvent* event) {
    QWidget::showEvent(event);
    if (!m_folder.isEmpty()) refresh();
}

void RunsPage::showRuns(const QList<RunEntry>& runs) {
    m_runs = runs;
    const QStringList keep = m_keepSelected;
    m_keepSelected.clear();
    const QSignalBlocker block(m_table);
    m_table->setSortingEnabled(false);
    m_table->clearContents();
    m_table->setRowCount(static_cast<int>(runs.size()));
    for (int row = 0; row < runs.size(); ++row) {
        const RunEntry& r = runs[row];
        auto* name = item(r.name);
        name->setData(Qt::UserRole, r.dir);
        name->setToolTip(r.dir);
        m_table->setItem(row, ColName, name);
        auto* model = item(r.configError.isEmpty() ? r.model : tr("(unreadable config.json)"));
        model->setToolTip(r.configError.isEmpty() ? r.modelPath : r.configError);
        m_table->setItem(row, ColModel, model);
        auto* dataset = item(r.dataset);
        dataset->setToolTip(r.datasetPath);
        m_table->setItem(row, ColDataset, dataset);
        auto* status = item(runStatusName(r.status));
        status->setToolTip(r.statusDetail);
        m_table->setItem(row, ColStatus, status);
        m_table->setItem(row, ColSteps, item({}, QVariant::fromValue<qlonglong>(r.steps)));
        m_table->setItem(row, ColLoss, std::isfinite(r.finalLoss) ? item({}, r.finalLoss) : item(QStringLiteral("—")));
        const bool config = r.configError.isEmpty();
        m_table->setItem(row, ColLr,
                         new NumberItem(config ? QString::number(r.lr, 'g', 6) : QStringLiteral("—"), r.lr));
        m_table->setItem(row, ColRank, config ? item({}, r.rank) : item(QStringLiteral("—")));
        m_table->setItem(row, ColBatchTokens, config ? item({}, r.batchTokens) : item(QStringLiteral("—")));
        m_table->setItem(row, ColSeqLen, config ? item({}, r.maxSeqLen) : item(QStringLiteral("—")));
        m_table->setItem(row, ColDuration, new NumberItem(formatDuration(r.durationS), r.durationS));
        m_table->setItem(row, ColDevice, item(r.device));
        m_table->setItem(row, ColDate, new DateItem(r.date));
    }
    m_table->resizeColumnsToContents();
    m_table->setSortingEnabled(true);
    for (int row = 0; row < m_table->rowCount(); ++row)
        if (keep.contains(m_table->item(row, ColName)->data(Qt::UserRole).toString()))
            m_table->selectionModel()->select(m_table->model()->index(row, 0),
                                              QItemSelectionModel::Select | QItemSelectionModel::Rows);
    setStatusText(
        m_status,
        runs.isEmpty() ? tr("No runs yet: train one on the Train page.") : countOf(runs.size(), tr("run")) + '.',
        Tone::Neutral);
    onSelectionChanged();
    emit runsListed(runs);
}

QStringList RunsPage::selectedRunDirs() const {
    QStringList dirs;
    for (const QModelIndex& index : m_table->selectionModel()->selectedRows(ColName))
        dirs.append(index.data(Qt::UserRole).toString());
    return dirs;
}

const RunEntry* RunsPage::entry(const QString& dir) const {
    for (const RunEntry& r : m_runs)
        if (r.dir == dir) return &r;
    return nullptr;
}

void RunsPage::onSelectionChanged() {
    const QStringList dirs = selectedRunDirs();
    const RunEntry* one = dirs.size() == 1 ? entry(dirs.first()) : nullptr;
    m_reopen->setEnabled(one && one->configError.isEmpty());
    m_resume->setEnabled(one && canResume(*one));
    m_export->setEnabled(one && (one->hasAdapter || one->hasCheckpoint));
    m_openFolder->setEnabled(one != nullptr);
    m_delete->setEnabled(!dirs.isEmpty());
    loadCurves(dirs);
}

void RunsPage::loadCurves(const QStringList& dirs) {
    const quint64 generation = ++m_curveGeneration;
    if (dirs.isEmpty()) {
        showCurves({});
        return;
    }
    runAsync(
        this,
        [dirs] {
            QList<LossCurve> curves;
            for (const QString& dir : dirs) curves.append(readLossCurve(dir));
            return curves;
        },
        [this, generation](const QList<LossCurve>& curves) {
            if (generation == m_curveGeneration) showCurves(curves);
        });
}

void RunsPage::showCurves(const QList<LossCurve>& curves) {
    m_curves = curves;
    QStringList summaries;
    for (const LossCurve& c : curves) summaries.append(runSummary(c));
    m_summary->setText(summaries.join('\n'));
    drawCurves();
}

// Per run: the training loss (raw, or faint raw under the smoothed line) and its eval loss as dots.
void RunsPage::drawCurves() {
    m_plot->clearGraphs();
    const bool byTokens = m_xAxis->currentData().toString() == QLatin1String("tokens");
    const double smoothing = m_smoothing->value() / 100.0;
    int colour = 0;
    for (const LossCurve& c : m_curves) {
        const QColor col = kCurveColors[colour++ % kCurveColors.size()];
        QCPGraph* g = m_plot->addGraph();
        g->setName(c.name);
        g->setData(byTokens ? c.tokens : c.steps, c.loss, true);
        if (smoothing > 0) {
            QColor faint = col;
            faint.setAlpha(70);
            g->setPen(QPen(faint, 1.0));
            g->removeFromLegend();
            QCPGraph* smooth = m_plot->addGraph();
            smooth->setName(c.name);
            smooth->setPen(QPen(col, 2.0));
            smooth->setData(byTokens ? c.tokens : c.steps, LossPlot::smooth(c.loss, smoothing), true);
        } else {
            g->setPen(QPen(col, 1.5));
        }
        if (m_showEval->isChecked() && !c.evalLoss.isEmpty()) {
            QCPGraph* e = m_plot->addGraph();
            e->setName(tr("%1 (eval)").arg(c.name));
            e->setPen(QPen(col, 1.0, Qt::DashLine));
            e->setScatterStyle(QCPScatterStyle(QCPScatterStyle::ssDisc, col, col, 6));
            e->setData(byTokens ? c.evalTokens : c.evalSteps, c.evalLoss, true);
        }
    }
    m_plot->xAxis->setLabel(byTokens ? tr("tokens seen") : tr("step"));
    if (m_logScale->isChecked()) {
        m_plot->yAxis->setScaleType(QCPAxis::stLogarithmic);
        m_plot->yAxis->setTicker(QSharedPointer<QCPAxisTickerLog>::create());
    } else {
        m_plot->yAxis->setScaleType(QCPAxis::stLinear);
        m_plot->yAxis->setTicker(QSharedPointer<QCPAxisTicker>::create());
    }
    m_plot->legend->setVisible(!m_curves.isEmpty());
    m_plot->rescaleAxes();
    m_plot->replot(QCustomPlot::rpQueuedReplot);
}

void RunsPage::reopenSelected() {
    const QStringList dirs = selectedRunDirs();
    if (dirs.size() != 1) return;
    try {
        const RunConfig c = load_run_config((QDir(dirs.first()).filePath(QStringLiteral("config.json"))).toStdString());
        setStatusText(m_status, tr("Settings of %1 opened in the Train page.").arg(QDir(dirs.first()).dirName()),
                      Tone::Neutral);
        emit reopenConfig(c);
    } catch (const std::exception& e) {
        setStatusText(m_status, tr("Cannot reopen: %1").arg(inScreenWords(QString::fromUtf8(e.what()))), Tone::Bad);
    }
}

void RunsPage::deleteSelected() {
    const QStringList dirs = selectedRunDirs();
    if (dirs.isEmpty()) return;
    QStringList names;
    for (const QString& d : dirs) names.append(QDir(d).dirName());
    QMessageBox box(QMessageBox::Warning, tr("Delete runs"),
                    tr("Delete %n run folder(s) with their checkpoints and adapters? This cannot be undone.", nullptr,
                       static_cast<int>(dirs.size())),
                    QMessageBox::Yes | QMessageBox::No, this);
    box.setObjectName(QStringLiteral("deleteRunConfirm"));
    box.setInformativeText(names.join('\n'));
    box.setDefaultButton(QMessageBox::No);
    const int answer = box.exec();
    if (answer != QMessageBox::Yes && answer != QDialog::Accepted) return;
    QStringList failed, running;
    for (const QString& d : dirs) {
        // Only folders this page listed (a run: a config.json inside, directly under the runs folder).
        const QString parent = QDir::cleanPath(QFileInfo(d).absolutePath());
        bool listed = false;
        for (const QString& f : QStringList{m_folder} + m_otherFolders)
            listed = listed || parent == QDir(f).absolutePath();
        if (!entry(d) || !listed) continue;
        if (probeRunLock(d).state == RunLockState::Held) {  // its session would fail at its next write
            running.append(QDir(d).dirName());
            continue;
        }
        if (!QDir(d).removeRecursively()) failed.append(QDir(d).dirName());
    }
    if (!running.isEmpty())
        setStatusText(m_status, tr("Not deleted, being trained now: %1. Stop the run first.").arg(running.join(", ")),
                      Tone::Bad);
    else if (!failed.isEmpty())
        setStatusText(m_status, tr("Could not delete everything in: %1").arg(failed.join(", ")), Tone::Bad);
    m_keepSelected.clear();
    m_table->clearSelection();
    refresh();
}

}  // namespace tandem::ui
