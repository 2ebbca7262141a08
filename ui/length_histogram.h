// SPDX-FileCopyrightText: 2026 The Tandem developers
// SPDX-License-Identifier: GPL-3.0-or-later
// The Data page's token-length histogram: samples per length bin (QCPBars) with the max_seq_len cut-off as
// a dashed vertical line, so a user sees at a glance how many samples the limit truncates.
// Decisions a reader must know:
//  - Bins are "nice" widths (1, 2, 5 x 10^k) chosen for about 40 bars up to the longest sample;
//    the data only changes when the dataset or model does, so there is no replot timer: a change queues one
//    replot (rpQueuedReplot), which also coalesces the cut-off moving while a spin box is dragged.
#pragma once

#include <qcustomplot.h>

#include <cstdint>
#include <span>

namespace tandem::ui {

class LengthHistogram : public QCustomPlot {
    Q_OBJECT
    Q_DISABLE_COPY_MOVE(LengthHistogram)

public:
    explicit LengthHistogram(QWidget* parent = nullptr);

    void setLengths(std::span<const int32_t> lengths);  // token count per sample
    void clearLengths();
    void setCutoff(int maxSeqLen);  // 0: no limit (no line)

    QCPBars* bars() const { return m_bars; }
    QCPItemStraightLine* cutoffLine() const { return m_cutoff; }
    int binWidth() const { return m_binWidth; }

protected:
    void changeEvent(QEvent* event) override;  // palette change: restyle (light / dark theme)

private:
    void rescale();
    void placeCutoffLabel();

    QCPBars* m_bars = nullptr;
    QCPItemStraightLine* m_cutoff = nullptr;
    QCPItemText* m_cutoffText = nullptr;
    int m_cutoffValue = 0;
    int m_binWidth = 1;
    int m_longest = 0;
    double m_tallest = 0;
};

}  // namespace tandem::ui
