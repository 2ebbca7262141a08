// SPDX-FileCopyrightText: 2026 The Tandem developers
// SPDX-License-Identifier: GPL-3.0-or-later
// tandem::Error — the one exception type the engine throws across its public API.
// Every error carries a category (what kind of failure, which decides tandem-cli's exit code) and a message
// written for a user: what was wrong, where (file, line, tensor name) and what to do about it.
#pragma once

#include <stdexcept>
#include <string>
#include <string_view>

namespace tandem {

enum class ErrorCategory {
    InvalidInput,  // the user's files, flags or config are wrong         -> exit 2
    Unsupported,   // valid input we do not handle (yet)                  -> exit 4
    OutOfMemory,   // host or device memory ran out                       -> exit 3
    Io,            // a file could not be read or written                 -> exit 2
    Device,        // CUDA / driver failure                               -> exit 1
    Cancelled,     // the user asked to stop                              -> exit 130
    Internal,      // a bug in Tandem                                     -> exit 1
};

class Error : public std::runtime_error {
public:
    Error(ErrorCategory category, const std::string& message)
        : std::runtime_error(message), category_(category) {}
    ErrorCategory category() const noexcept { return category_; }

private:
    ErrorCategory category_;
};

// "invalid input", "unsupported", ...
std::string_view error_category_name(ErrorCategory category) noexcept;

// tandem-cli's exit code for an error of this category (0 ok, 1 internal, 2 invalid input, 3 out of memory,
// 4 unsupported, 130 cancelled).
int exit_code_for(ErrorCategory category) noexcept;

// Shorthands used throughout the engine: throw_invalid(path.string() + ": ...").
[[noreturn]] void throw_invalid(const std::string& message);
[[noreturn]] void throw_unsupported(const std::string& message);
[[noreturn]] void throw_io(const std::string& message);
[[noreturn]] void throw_internal(const std::string& message);

}  // namespace tandem
