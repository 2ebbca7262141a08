// SPDX-FileCopyrightText: 2026 The Tandem developers
// SPDX-License-Identifier: GPL-3.0-or-later
// LivePlot: one QCPGraph per series; axes rescale to the data on every refresh, with a margin so the
// curves do not touch the frame. The timer only runs while there is something to draw.
// The legend is never left empty: an empty QCPLegend reports a maximum width of its margins, which caps the
// layout column it shares with the axis rect and squeezes the plot into a thin strip. Without any data (a
// run starting) the legend keeps its entries and the axes show a neutral range.
#include "ui/live_plot.h"

#include <QEvent>

#include <algorithm>
#include <cmath>

#include "ui/theme.h"

namespace tandem::ui {

LivePlot::LivePlot(const QString& title, QWidget* parent) : QCustomPlot(parent) {
    setMinimumSize(240, 170);
    plotLayout()->insertRow(0);
    m_title = new QCPTextElement(this, title, QFont(font().family(), font().pointSize(), QFont::Bold));
    plotLayout()->addElement(0, 0, m_title);
    // The legend gets its own row under the title, filled left to right, so it never covers a curve.
    legend->setVisible(true);
    legend->setFont(QFont(font().family(), std::max(7, font().pointSize() - 1)));
    axisRect()->insetLayout()->take(legend);
    plotLayout()->insertRow(1);
    plotLayout()->addElement(1, 0, legend);
    plotLayout()->setRowStretchFactor(1, 0.001);
    plotLayout()->setRowSpacing(0);
    legend->setFillOrder(QCPLayoutGrid::foColumnsFirst);
    legend->setWrap(3);
    legend->setColumnSpacing(12);
    legend->setRowSpacing(0);
    legend->setMargins(QMargins(4, 0, 4, 0));
    legend->setIconSize(18, 10);
    yAxis2->setVisible(false);
    m_timer.setInterval(kReplotIntervalMs);
    connect(&m_timer, &QTimer::timeout, this, &LivePlot::onTimer);
    applyColors();
}

void LivePlot::setTitle(const QString& title) {
    m_title->setText(title);
    replot(QCustomPlot::rpQueuedReplot);
}

void LivePlot::setAxisLabels(const QString& x, const QString& left, const QString& right) {
    xAxis->setLabel(x);
    yAxis->setLabel(left);
    if (!right.isEmpty()) {
        yAxis2->setVisible(true);
        yAxis2->setTickLabels(true);
        yAxis2->setLabel(right);
    }
}

void LivePlot::addSeries(const QString& name, const QString& label, int colorIndex, Axis axis, bool dashed,
                         bool dots) {
    QCPGraph* g = addGraph(xAxis, axis == Axis::Left ? yAxis : yAxis2);
    g->setName(label);
    g->setAdaptiveSampling(true);
    Series s;
    s.name = name;
    s.graph = g;
    s.colorIndex = colorIndex;
    s.dashed = dashed;
    s.dots = dots;
    m_series.push_back(std::move(s));
    applyColors();
}

LivePlot::Series* LivePlot::find(const QString& name) {
    for (auto& s : m_series)
        if (s.name == name) return &s;
    return nullptr;
}

const LivePlot::Series* LivePlot::find(const QString& name) const {
    for (const auto& s : m_series)
        if (s.name == name) return &s;
    return nullptr;
}

void LivePlot::append(const QString& name, double x, double y) {
    Series* s = find(name);
    if (!s || !std::isfinite(x) || !std::isfinite(y)) return;
    s->data.append(x, y);
    markDirty();
}

void LivePlot::clearData() {
    for (auto& s : m_series) {
        s.data.clear();
        s.graph->data()->clear();
    }
    markDirty();
}

int LivePlot::pointCount(const QString& name) const {
    const Series* s = find(name);
    return s ? s->data.size() : -1;
}

void LivePlot::markDirty() {
    m_dirty = true;
    if (!m_timer.isActive()) m_timer.start();
}

void LivePlot::onTimer() {
    if (!m_dirty) {
        m_timer.stop();
        return;
    }
    if (isVisible()) refresh();
    else m_timer.stop();  // showEvent restarts it
}

void LivePlot::refresh() {
    if (!m_dirty) return;
    m_dirty = false;
    updateGraphs();
    replot(QCustomPlot::rpQueuedReplot);
    ++m_replots;
}

void LivePlot::updateGraphs() {
    QVector<double> keys, values;
    bool any = false, anyRight = false;
    for (auto& s : m_series) {
        s.data.copyTo(keys, values);
        s.graph->setData(keys, values, /*alreadySorted=*/true);
        any = any || !keys.isEmpty();
        if (s.graph->valueAxis() == yAxis2 && !keys.isEmpty()) anyRight = true;
    }
    if (!any) {  // cleared: same layout, no axes of an earlier run
        xAxis->setRange(0, 1);
        for (QCPAxis* axis : {yAxis, yAxis2})
            axis->setRange(axis->scaleType() == QCPAxis::stLogarithmic ? QCPRange(0.1, 10) : QCPRange(0, 1));
        return;
    }
    // Series without points (no reserved memory on the CPU) stay out of the legend; the order is the
    // order the graphs were added in.
    legend->clearItems();
    for (int i = 0; i < graphCount(); ++i)
        if (graph(i)->visible() && graph(i)->dataCount() > 0) graph(i)->addToLegend();
    rescaleAxes(/*onlyVisiblePlottables=*/true);
    // A little headroom; a flat series gets a visible range.
    for (QCPAxis* axis : {yAxis, yAxis2}) {
        if (axis == yAxis2 && !anyRight) continue;
        QCPRange r = axis->range();
        if (axis->scaleType() == QCPAxis::stLogarithmic) {
            axis->setRange(r.lower / 1.15, r.upper * 1.15);
            continue;
        }
        const double span = r.size() > 0 ? r.size() : std::max(std::abs(r.upper), 1e-9);
        double lo = r.lower - 0.05 * span;
        if ((r.lower >= 0 && lo < 0) || (m_includeZero && r.lower >= 0)) lo = 0;
        axis->setRange(lo, r.upper + 0.08 * span);
    }
    if (xAxis->range().size() <= 0) xAxis->setRange(xAxis->range().lower - 0.5, xAxis->range().upper + 0.5);
}

QColor LivePlot::seriesColor(int index) const {
    const QList<QColor> colors = Theme::plotColors(palette());
    return colors[index % colors.size()];
}

void applyPlotPalette(QCustomPlot& plot) {
    const QPalette pal = plot.palette();
    const QColor base = pal.color(QPalette::Base), text = pal.color(QPalette::Text);
    const QColor grid = Theme::gridColor(pal);
    plot.setBackground(pal.color(QPalette::Window));
    plot.axisRect()->setBackground(base);
    for (QCPAxis* a : {plot.xAxis, plot.yAxis, plot.xAxis2, plot.yAxis2}) {
        a->setBasePen(QPen(text));
        a->setTickPen(QPen(text));
        a->setSubTickPen(QPen(text));
        a->setTickLabelColor(text);
        a->setLabelColor(text);
        a->grid()->setPen(QPen(grid, 1, Qt::DotLine));
        a->grid()->setZeroLinePen(Qt::NoPen);
    }
}

void LivePlot::applyColors() {
    const QColor text = palette().color(QPalette::Text);
    applyPlotPalette(*this);
    legend->setBrush(Qt::NoBrush);
    legend->setBorderPen(Qt::NoPen);
    legend->setTextColor(text);
    if (m_title) m_title->setTextColor(text);
    for (auto& s : m_series) {
        QPen pen(seriesColor(s.colorIndex), 1.6);
        if (s.dashed) pen.setStyle(Qt::DashLine);
        s.graph->setPen(pen);
        s.graph->setScatterStyle(s.dots ? QCPScatterStyle(QCPScatterStyle::ssDisc, 5) : QCPScatterStyle());
    }
}

void LivePlot::showEvent(QShowEvent* event) {
    QCustomPlot::showEvent(event);
    if (m_dirty) m_timer.start();
}

void LivePlot::changeEvent(QEvent* event) {
    QCustomPlot::changeEvent(event);
    if (event->type() == QEvent::PaletteChange) {
        applyColors();
        replot(QCustomPlot::rpQueuedReplot);
    }
}

}  // namespace tandem::ui
