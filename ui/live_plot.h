// SPDX-FileCopyrightText: 2026 The Tandem developers
// SPDX-License-Identifier: GPL-3.0-or-later
// tandem::ui::LivePlot — a QCustomPlot that receives points while a run goes on. Appending only stores the
// point and marks the plot dirty; a 200 ms timer copies the buffers into the graphs and replots, only when
// dirty and visible (a hidden page costs nothing; it catches up when shown).
// Decisions a reader must know:
//  - Each series keeps its points in a SeriesBuffer of kMaxPoints, so memory is bounded whatever the run
//    length; pointCount() tells tests how many points a series holds.
//  - Series live on the left or the right value axis (two units in one plot: steps/s and tokens/s).
//  - Colours follow the widget's palette (Theme::plotColors), re-applied on a palette change.
//  - clearData() keeps the layout: without data the legend keeps its entries (an empty legend would squeeze
//    the plot into a strip) and the axes show a neutral 0..1 instead of the last run's ranges.
#pragma once

#include <QString>
#include <QTimer>

#include <qcustomplot.h>

#include <vector>

#include "ui/series_buffer.h"

namespace tandem::ui {

// Background, axes, ticks, labels and grid of any QCustomPlot in the colours of its palette (light or dark
// theme); LivePlot and the Data page's histogram use it, and call it again on a palette change.
void applyPlotPalette(QCustomPlot& plot);

class LivePlot : public QCustomPlot {
    Q_OBJECT
    Q_DISABLE_COPY_MOVE(LivePlot)

public:
    enum class Axis { Left, Right };
    static constexpr int kMaxPoints = 4000;
    static constexpr int kReplotIntervalMs = 200;

    explicit LivePlot(const QString& title, QWidget* parent = nullptr);

    void setTitle(const QString& title);
    void setAxisLabels(const QString& x, const QString& left, const QString& right = {});
    // colorIndex picks from Theme::plotColors; dashed draws a reference line (e.g. the device total).
    void addSeries(const QString& name, const QString& label, int colorIndex, Axis axis = Axis::Left,
                   bool dashed = false, bool dots = false);
    void setIncludeZero(bool on) { m_includeZero = on; }  // value axes start at 0 (sizes, rates)
    void append(const QString& name, double x, double y);
    void clearData();

    int pointCount(const QString& name) const;  // -1 for an unknown series
    bool isDirty() const { return m_dirty; }
    int replotCount() const { return m_replots; }
    // Copies the buffers into the graphs and replots now when dirty (the timer calls it while visible).
    void refresh();

protected:
    // Copies each buffer into its graph and rescales; subclasses add derived graphs (smoothing).
    virtual void updateGraphs();
    virtual void applyColors();
    void showEvent(QShowEvent* event) override;
    void changeEvent(QEvent* event) override;

    struct Series {
        QString name;
        QCPGraph* graph = nullptr;
        SeriesBuffer data{kMaxPoints};
        int colorIndex = 0;
        bool dashed = false;
        bool dots = false;
    };
    Series* find(const QString& name);
    const Series* find(const QString& name) const;
    QColor seriesColor(int index) const;
    void markDirty();

private:
    void onTimer();

    std::vector<Series> m_series;
    QCPTextElement* m_title = nullptr;
    QTimer m_timer;
    bool m_dirty = false;
    bool m_includeZero = false;
    int m_replots = 0;
};

}  // namespace tandem::ui
