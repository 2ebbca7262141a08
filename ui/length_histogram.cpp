// SPDX-FileCopyrightText: 2026 The Tandem developers
// SPDX-License-Identifier: GPL-3.0-or-later
// See length_histogram.h.
#include "ui/length_histogram.h"

#include "ui/live_plot.h"

#include <algorithm>
#include <cmath>
#include <vector>

namespace tandem::ui {
namespace {

constexpr int kTargetBins = 40;

// The smallest of 1, 2, 5 x 10^k that splits [0, range] into at most kTargetBins bins.
int niceBinWidth(int range) {
    const double raw = std::max(1.0, static_cast<double>(range) / kTargetBins);
    const double magnitude = std::pow(10.0, std::floor(std::log10(raw)));
    for (double step : {1.0, 2.0, 5.0, 10.0})
        if (step * magnitude >= raw) return std::max(1, static_cast<int>(step * magnitude));
    return static_cast<int>(10 * magnitude);
}

}  // namespace

LengthHistogram::LengthHistogram(QWidget* parent) : QCustomPlot(parent) {
    setObjectName(QStringLiteral("lengthHistogram"));
    setToolTip(
        tr("Tokens per sample after rendering with the model's chat template; the dashed line is max_seq_len "
           "(longer samples keep their first max_seq_len tokens)"));
    setMinimumHeight(180);
    m_bars = new QCPBars(xAxis, yAxis);
    m_bars->setName(tr("samples"));
    m_bars->setPen(Qt::NoPen);
    m_bars->setBrush(QColor(0x3b, 0x82, 0xc4));
    m_bars->setWidthType(QCPBars::wtPlotCoords);
    xAxis->setLabel(tr("tokens per sample"));
    yAxis->setLabel(tr("samples"));

    m_cutoff = new QCPItemStraightLine(this);
    m_cutoff->setPen(QPen(QColor(0xd6, 0x45, 0x41), 2, Qt::DashLine));
    m_cutoffText = new QCPItemText(this);
    m_cutoffText->setColor(QColor(0xd6, 0x45, 0x41));
    m_cutoffText->setPositionAlignment(Qt::AlignLeft | Qt::AlignTop);
    m_cutoffText->position->setTypeY(QCPItemPosition::ptAxisRectRatio);
    m_cutoff->setVisible(false);
    m_cutoffText->setVisible(false);
    applyPlotPalette(*this);
}

void LengthHistogram::changeEvent(QEvent* event) {
    QCustomPlot::changeEvent(event);
    if (event->type() == QEvent::PaletteChange) {
        applyPlotPalette(*this);
        replot(QCustomPlot::rpQueuedReplot);
    }
}

// The label sits right of the line, or left of it when the line is in the right third (never clipped).
void LengthHistogram::placeCutoffLabel() {
    const QCPRange r = xAxis->range();
    const bool right_third = r.size() > 0 && (m_cutoffValue - r.lower) / r.size() > 0.66;
    m_cutoffText->setPositionAlignment((right_third ? Qt::AlignRight : Qt::AlignLeft) | Qt::AlignTop);
    m_cutoffText->setText(right_third ? QStringLiteral("max_seq_len %1 ").arg(m_cutoffValue)
                                      : QStringLiteral(" max_seq_len %1").arg(m_cutoffValue));
}

void LengthHistogram::setLengths(std::span<const int32_t> lengths) {
    m_longest = lengths.empty() ? 0 : *std::max_element(lengths.begin(), lengths.end());
    m_binWidth = niceBinWidth(m_longest + 1);
    std::vector<double> counts(static_cast<size_t>(m_longest / m_binWidth + 1), 0.0);
    for (int32_t len : lengths) counts[static_cast<size_t>(len / m_binWidth)] += 1;
    QVector<double> keys, values;
    for (size_t b = 0; b < counts.size(); ++b) {
        if (counts[b] == 0) continue;
        keys.append((static_cast<double>(b) + 0.5) * m_binWidth);
        values.append(counts[b]);
    }
    m_tallest = values.isEmpty() ? 0 : *std::max_element(values.begin(), values.end());
    m_bars->setWidth(m_binWidth * 0.9);
    m_bars->setData(keys, values, true);
    rescale();
}

void LengthHistogram::clearLengths() {
    m_bars->data()->clear();
    m_longest = 0;
    m_tallest = 0;
    rescale();
}

void LengthHistogram::setCutoff(int maxSeqLen) {
    m_cutoffValue = std::max(0, maxSeqLen);
    const bool shown = m_cutoffValue > 0;
    m_cutoff->setVisible(shown);
    m_cutoffText->setVisible(shown);
    if (shown) {
        m_cutoff->point1->setCoords(m_cutoffValue, 0);
        m_cutoff->point2->setCoords(m_cutoffValue, 1);
        m_cutoffText->position->setCoords(m_cutoffValue, 0.02);
    }
    rescale();
}

void LengthHistogram::rescale() {
    const double right = std::max(m_longest, m_cutoffValue) * 1.08 + m_binWidth;
    xAxis->setRange(0, std::max(right, 16.0));
    yAxis->setRange(0, std::max(1.0, m_tallest * 1.1));
    if (m_cutoffValue > 0) placeCutoffLabel();
    replot(QCustomPlot::rpQueuedReplot);
}

}  // namespace tandem::ui
