// SPDX-FileCopyrightText: 2026 The Tandem developers
// SPDX-License-Identifier: GPL-3.0-or-later
// Error categories, their names and tandem-cli exit codes.
#include "tandem/error.h"

namespace tandem {

std::string_view error_category_name(ErrorCategory category) noexcept {
    switch (category) {
    case ErrorCategory::InvalidInput: return "invalid input";
    case ErrorCategory::Unsupported: return "unsupported";
    case ErrorCategory::OutOfMemory: return "out of memory";
    case ErrorCategory::Io: return "i/o error";
    case ErrorCategory::Device: return "device error";
    case ErrorCategory::Cancelled: return "cancelled";
    case ErrorCategory::Internal: return "internal error";
    }
    return "error";
}

int exit_code_for(ErrorCategory category) noexcept {
    switch (category) {
    case ErrorCategory::InvalidInput: return 2;
    case ErrorCategory::Io: return 2;
    case ErrorCategory::OutOfMemory: return 3;
    case ErrorCategory::Unsupported: return 4;
    case ErrorCategory::Cancelled: return 130;
    case ErrorCategory::Device: return 1;
    case ErrorCategory::Internal: return 1;
    }
    return 1;
}

void throw_invalid(const std::string& message) { throw Error(ErrorCategory::InvalidInput, message); }
void throw_unsupported(const std::string& message) { throw Error(ErrorCategory::Unsupported, message); }
void throw_io(const std::string& message) { throw Error(ErrorCategory::Io, message); }
void throw_internal(const std::string& message) { throw Error(ErrorCategory::Internal, message); }

}  // namespace tandem
