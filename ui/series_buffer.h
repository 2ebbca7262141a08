// SPDX-FileCopyrightText: 2026 The Tandem developers
// SPDX-License-Identifier: GPL-3.0-or-later
// tandem::ui::SeriesBuffer — the points of one plotted series, with bounded memory. A 100k-step run must not
// grow the plots without limit, so when the buffer holds `capacity` points it drops every other one and from
// then on keeps only every stride-th appended point (stride doubles at each decimation).
// Decisions a reader must know:
//  - Plain stride decimation: the kept points stay evenly spaced in appended order (a spike between two
//    kept points can be lost; the full history is in the run's metrics.jsonl).
//  - The last appended point is always shown (as a "tail" after the kept points), so the live end of a
//    curve never lags behind by up to stride-1 steps.
#pragma once

#include <QVector>

#include <cstdint>

namespace tandem::ui {

class SeriesBuffer {
public:
    explicit SeriesBuffer(int capacity = 4000);

    void append(double x, double y);
    void clear();

    int size() const;       // points a plot gets: kept points + the tail (at most capacity + 1)
    int capacity() const { return m_capacity; }
    int stride() const { return m_stride; }
    int64_t appended() const { return m_appended; }  // points ever appended since clear()
    bool isEmpty() const { return size() == 0; }

    // Copies the points into keys/values (resized), in append order.
    void copyTo(QVector<double>& keys, QVector<double>& values) const;

private:
    void decimate();

    int m_capacity;
    int m_stride = 1;
    int64_t m_appended = 0;
    QVector<double> m_keys, m_values;  // kept points: appended indices 0, stride, 2*stride, ...
    bool m_hasTail = false;            // the latest point when it is not a kept one
    double m_tailX = 0, m_tailY = 0;
};

}  // namespace tandem::ui
