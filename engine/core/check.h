// SPDX-FileCopyrightText: 2026 The Tandem developers
// SPDX-License-Identifier: GPL-3.0-or-later
// Argument checks shared by the CPU and CUDA kernels. A failed check is a bug in the caller (the model code sized
// a buffer wrongly or passed a null pointer), never something a user can cause, so it throws
// Error{Internal} naming the function and the condition. The checks are O(1) or O(S): cheap enough to keep
// in release builds. Never throw from inside an OpenMP region (that terminates): validate before it.
#pragma once

#include <string>

#include "tandem/error.h"

#define TANDEM_KCHECK(cond)                                                                      \
    do {                                                                                         \
        if (!(cond)) ::tandem::throw_internal(std::string(__func__) + ": check failed: " #cond); \
    } while (0)

// A required pointer argument.
#define TANDEM_KCHECK_PTR(p) TANDEM_KCHECK((p) != nullptr)
