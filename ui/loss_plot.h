// SPDX-FileCopyrightText: 2026 The Tandem developers
// SPDX-License-Identifier: GPL-3.0-or-later
// tandem::ui::LossPlot — training and evaluation loss against the step, with TensorBoard's smoothing and a
// log-scale option. Series names: "train" (every reported step), "eval" (the steps that evaluated).
// Decisions a reader must know:
//  - Smoothing is TensorBoard's debiased exponential moving average over the kept points, drawn as its own
//    line over a faint raw curve; it is recomputed at each replot from the raw buffer (at most kMaxPoints).
//  - Eval loss is drawn with dots: it exists only at eval steps.
#pragma once

#include "ui/live_plot.h"

namespace tandem::ui {

class LossPlot : public LivePlot {
    Q_OBJECT
    Q_DISABLE_COPY_MOVE(LossPlot)

public:
    explicit LossPlot(QWidget* parent = nullptr);

    double smoothing() const { return m_smoothing; }
    bool logScale() const { return m_logScale; }
    // weight in [0, 1): 0 draws the raw curve only.
    void setSmoothing(double weight);
    void setLogScale(bool on);
    int smoothedPointCount() const;  // points of the drawn smoothed line (0 when smoothing is off)

    // TensorBoard's smoothing: last = last * w + (1 - w) * y, divided by 1 - w^n (debiased).
    static QVector<double> smooth(const QVector<double>& values, double weight);

protected:
    void updateGraphs() override;
    void applyColors() override;

private:
    QCPGraph* m_smoothed = nullptr;
    double m_smoothing = 0.6;
    bool m_logScale = false;
};

}  // namespace tandem::ui
