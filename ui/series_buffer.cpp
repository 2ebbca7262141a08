// SPDX-FileCopyrightText: 2026 The Tandem developers
// SPDX-License-Identifier: GPL-3.0-or-later
// SeriesBuffer: kept points are the appended points whose index is a multiple of the stride; halving the
// kept points (even positions) and doubling the stride keeps that invariant.
#include "ui/series_buffer.h"

#include <algorithm>

namespace tandem::ui {

SeriesBuffer::SeriesBuffer(int capacity) : m_capacity(std::max(capacity, 2)) {
    m_keys.reserve(m_capacity);
    m_values.reserve(m_capacity);
}

void SeriesBuffer::append(double x, double y) {
    const bool keep = m_appended % m_stride == 0;
    ++m_appended;
    if (!keep) {
        m_hasTail = true;
        m_tailX = x;
        m_tailY = y;
        return;
    }
    m_hasTail = false;
    m_keys.append(x);
    m_values.append(y);
    if (m_keys.size() >= m_capacity) decimate();
}

void SeriesBuffer::decimate() {
    const qsizetype n = m_keys.size();
    const double lastX = m_keys.back(), lastY = m_values.back();
    qsizetype j = 0;
    for (qsizetype i = 0; i < n; i += 2, ++j) {
        m_keys[j] = m_keys[i];
        m_values[j] = m_values[i];
    }
    m_keys.resize(j);
    m_values.resize(j);
    m_stride *= 2;
    // The newest kept point may have been dropped (odd position): show it as the tail.
    if ((n - 1) % 2 != 0) {
        m_hasTail = true;
        m_tailX = lastX;
        m_tailY = lastY;
    }
}

void SeriesBuffer::clear() {
    m_keys.clear();
    m_values.clear();
    m_stride = 1;
    m_appended = 0;
    m_hasTail = false;
}

int SeriesBuffer::size() const { return static_cast<int>(m_keys.size()) + (m_hasTail ? 1 : 0); }

void SeriesBuffer::copyTo(QVector<double>& keys, QVector<double>& values) const {
    keys = m_keys;
    values = m_values;
    if (m_hasTail) {
        keys.append(m_tailX);
        values.append(m_tailY);
    }
}

}  // namespace tandem::ui
