// SPDX-FileCopyrightText: 2026 The Tandem developers
// SPDX-License-Identifier: GPL-3.0-or-later
// Engine functions that only the CUDA backend can answer and that no other engine header declares. Like every
// entry of cuda_plugin/api.h, each has two definitions: the real one inside libtandem-cuda.so, and a forwarder
// to the loaded plugin in the executables (cuda_plugin/forward.cpp).
#pragma once

#include "tandem/system_info.h"

namespace tandem {

// Fills the CUDA part of system_info(): cuda_built, cuda_loaded, cuda_plugin, and the GPU and library versions
// when a GPU is usable, else gpu_unavailable_reason. Never throws.
void cuda_system_info(SystemInfo& info);

}  // namespace tandem
