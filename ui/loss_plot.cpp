// SPDX-FileCopyrightText: 2026 The Tandem developers
// SPDX-License-Identifier: GPL-3.0-or-later
// LossPlot: the smoothed graph is not a buffered series; it is derived from "train" at each refresh.
#include "ui/loss_plot.h"

#include <algorithm>
#include <cmath>

namespace tandem::ui {

LossPlot::LossPlot(QWidget* parent) : LivePlot(tr("Loss"), parent) {
    setAxisLabels(tr("step"), tr("loss"));
    addSeries(QStringLiteral("train"), tr("train"), 0);
    m_smoothed = addGraph(xAxis, yAxis);
    m_smoothed->setName(tr("train (smoothed)"));
    addSeries(QStringLiteral("eval"), tr("eval"), 1, Axis::Left, false, true);
    applyColors();
}

void LossPlot::setSmoothing(double weight) {
    weight = std::clamp(weight, 0.0, 0.999);
    if (weight == m_smoothing) return;
    m_smoothing = weight;
    applyColors();
    markDirty();
}

void LossPlot::setLogScale(bool on) {
    if (on == m_logScale) return;
    m_logScale = on;
    if (on) {
        yAxis->setScaleType(QCPAxis::stLogarithmic);
        yAxis->setTicker(QSharedPointer<QCPAxisTickerLog>::create());
    } else {
        yAxis->setScaleType(QCPAxis::stLinear);
        yAxis->setTicker(QSharedPointer<QCPAxisTicker>::create());
    }
    markDirty();
}

int LossPlot::smoothedPointCount() const { return m_smoothing > 0 ? m_smoothed->dataCount() : 0; }

QVector<double> LossPlot::smooth(const QVector<double>& values, double weight) {
    QVector<double> out;
    out.reserve(values.size());
    double last = 0;
    int n = 0;
    for (double v : values) {
        if (!std::isfinite(v)) {
            out.append(v);
            continue;
        }
        last = last * weight + (1 - weight) * v;
        ++n;
        const double debias = weight == 1 ? 1 : 1 - std::pow(weight, n);
        out.append(last / debias);
    }
    return out;
}

void LossPlot::updateGraphs() {
    if (m_smoothing > 0) {
        QVector<double> keys, values;
        if (const Series* s = find(QStringLiteral("train"))) s->data.copyTo(keys, values);
        m_smoothed->setData(keys, smooth(values, m_smoothing), /*alreadySorted=*/true);
    } else {
        m_smoothed->data()->clear();
    }
    m_smoothed->setVisible(m_smoothing > 0);
    LivePlot::updateGraphs();
}

void LossPlot::applyColors() {
    LivePlot::applyColors();
    if (!m_smoothed) return;
    Series* raw = find(QStringLiteral("train"));
    const QColor c = seriesColor(0);
    if (raw) {
        QColor faint = c;
        faint.setAlpha(m_smoothing > 0 ? 80 : 255);
        raw->graph->setPen(QPen(faint, m_smoothing > 0 ? 1.0 : 1.6));
    }
    m_smoothed->setPen(QPen(c, 2.0));
}

}  // namespace tandem::ui
