// See runs_page.h.
#include "ui/runs_page.h"

#include <QDir>
#include <QFileInfo>
#include <QHBoxLayout>
#include <QHeaderView>
#include <QLabel>
#include <QLocale>
#include <QMessageBox>
#include <QPushButton>
#include <QSettings>
#include <QSplitter>
#include <QStandardPaths>
#include <QTableWidget>
#include <QVBoxLayout>

#include <cmath>
#include <exception>

#include <qcustomplot.h>

#include "ui/run_async.h"
#include "ui/status_text.h"

namespace tandem::ui {
namespace {

enum Column { ColName, ColModel, ColDataset, ColStatus, ColSteps, ColLoss, ColDate, ColumnCount };

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
    m_refresh = button(tr("Refresh"), "refreshButton", tr("Read the runs folder again"));
    auto* top = new QHBoxLayout;
    top->addWidget(m_folderLabel, 1);
    top->addWidget(m_refresh);

    m_table = new QTableWidget(0, ColumnCount);
    m_table->setObjectName(QStringLiteral("runsTable"));
    m_table->setHorizontalHeaderLabels(
        {tr("Run"), tr("Model"), tr("Dataset"), tr("Status"), tr("Steps"), tr("Final loss"), tr("Date")});
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
    m_plot->setToolTip(tr("Training loss of the selected runs, per optimizer step"));
    m_plot->setMinimumHeight(200);
    m_plot->xAxis->setLabel(tr("step"));
    m_plot->yAxis->setLabel(tr("loss"));
    m_plot->legend->setVisible(true);
    m_plot->setInteractions(QCP::iRangeDrag | QCP::iRangeZoom);

    m_reopen = button(tr("Reopen settings"), "reopenButton", tr("Load this run's settings into the Train page"));
    m_resume = button(tr("Resume"), "resumeButton",
                      tr("Continue a stopped run from its latest checkpoint (same settings, same result as an "
                         "uninterrupted run)"));
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
    for (QPushButton* b : {m_reopen, m_resume, m_export, m_delete}) buttons->addWidget(b);

    auto* splitter = new QSplitter(Qt::Vertical);
    splitter->addWidget(m_table);
    splitter->addWidget(m_plot);
    splitter->setSizes({300, 300});  // proportions: half table, half plot
    auto* layout = new QVBoxLayout(this);
    layout->addLayout(top);
    layout->addWidget(splitter, 1);
    layout->addLayout(buttons);

    onSelectionChanged();
    setRunsFolder(
        QSettings()
            .value(QStringLiteral("runs/folder"),
                   QStandardPaths::writableLocation(QStandardPaths::AppDataLocation) + QStringLiteral("/runs"))
            .toString());
}

void RunsPage::setRunsFolder(const QString& folder) {
    if (folder == m_folder) return;
    m_folder = folder;
    m_keepSelected.clear();
    m_folderLabel->setText(tr("Runs in %1").arg(folder));
    refresh();
}

void RunsPage::refresh() {
    const quint64 generation = ++m_scanGeneration;
    if (m_keepSelected.isEmpty()) m_keepSelected = selectedRunDirs();
    const QString folder = m_folder;
    runAsync(
        this, [folder] { return scanRunsFolder(folder); },
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
        runs.isEmpty() ? tr("No runs yet in this folder.") : tr("%n run(s).", nullptr, static_cast<int>(runs.size())),
        Tone::Neutral);
    onSelectionChanged();
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
    m_resume->setEnabled(one && one->hasCheckpoint && !one->hasAdapter && one->status != RunStatus::Diverged);
    m_export->setEnabled(one && (one->hasAdapter || one->hasCheckpoint));
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
    m_plot->clearGraphs();
    int colour = 0;
    for (const LossCurve& c : curves) {
        QCPGraph* g = m_plot->addGraph();
        g->setName(c.name);
        g->setPen(QPen(kCurveColors[colour++ % kCurveColors.size()], 1.5));
        g->setData(c.steps, c.loss, true);
    }
    m_plot->legend->setVisible(!curves.isEmpty());
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
        setStatusText(m_status, tr("Cannot reopen: %1").arg(QString::fromUtf8(e.what())), Tone::Bad);
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
    QStringList failed;
    for (const QString& d : dirs) {
        // Only folders this page listed (a run: a config.json inside, directly under the runs folder).
        if (!entry(d) || QDir::cleanPath(QFileInfo(d).absolutePath()) != QDir(m_folder).absolutePath()) continue;
        if (!QDir(d).removeRecursively()) failed.append(QDir(d).dirName());
    }
    if (!failed.isEmpty())
        setStatusText(m_status, tr("Could not delete everything in: %1").arg(failed.join(", ")), Tone::Bad);
    m_keepSelected.clear();
    m_table->clearSelection();
    refresh();
}

}  // namespace tandem::ui
