// SPDX-FileCopyrightText: 2026 The Tandem developers
// SPDX-License-Identifier: GPL-3.0-or-later
// A stand-in for libtandem-cuda.so from another build: the entry symbol is there, but its table names another
// ABI number and version and has no entries, so the loader must refuse it before using any (test_cuda_plugin).
#include "cuda_plugin/api.h"

extern "C" const tandem::cuda_plugin::Api* tandem_cuda_plugin_v2() {
    static tandem::cuda_plugin::Api api = [] {
        tandem::cuda_plugin::Api a;
        a.abi_version = tandem::cuda_plugin::kAbiVersion + 1;
        a.tandem_version = "0.0.0-other";
        return a;
    }();
    return &api;
}
