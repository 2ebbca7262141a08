// SPDX-FileCopyrightText: 2026 The Tandem developers
// SPDX-License-Identifier: GPL-3.0-or-later
// The executables' side of the CUDA plugin (cuda_plugin/api.h): where libtandem-cuda.so is looked for, loading it
// once per process on first use, and the reason in words when it cannot be used.
// Decisions a reader must know:
//  - Where: the environment variable TANDEM_CUDA_PLUGIN (a file) when set and not empty; else, for an
//    executable inside this build's binary folder, the plugin this build made; else the install layout beside
//    the executable: <exe>/../<plugin dir>/libtandem-cuda.so, where the plugin dir is lib/<multiarch>/tandem on
//    Debian (so /usr/bin/tandem-cli loads /usr/lib/x86_64-linux-gnu/tandem/libtandem-cuda.so), also from the
//    relocatable .tar.gz. An installed binary never looks into a build folder.
//  - dlopen(RTLD_NOW | RTLD_LOCAL), never closed. A library the plugin links that is missing (dlopen names the
//    first one) is named in the reason with the package that provides it (missing_library_package): the CUDA
//    runtime, cuBLAS(Lt) and cuDNN are Recommends of the .deb, not Depends.
//  - A plugin of another build (abi version, Tandem version or layout_fingerprint differ) is refused: the
//    entries pass C++ types, so only the build that made the executable may serve it.
#pragma once

#include <filesystem>
#include <string>
#include <string_view>

#include "cuda_plugin/api.h"

namespace tandem::cuda_plugin {

struct Loaded {
    const Api* api = nullptr;  // null: not usable, reason says why
    std::string path;          // the file loaded or looked for ("" in a build without the CUDA backend)
    std::string reason;        // one clause, e.g. "the CUDA backend (PATH) cannot be loaded: libcudnn.so.9 is missing; ..."
};

// Whether this build made the CUDA plugin (it may still be missing or unloadable here).
bool built();

// The plugin of this process: located and loaded by the first call (thread-safe), the same answer after.
const Loaded& plugin();

// Loads the plugin at path now (not cached; a failed dlopen leaves nothing behind). origin says how the path was
// chosen, for the reason ("TANDEM_CUDA_PLUGIN" or empty for the default place).
Loaded load(const std::filesystem::path& path, std::string_view origin);

// The reason for a failed dlopen of the plugin at path, from dlerror()'s text: a missing library named with
// its package, else dlerror's own words.
std::string explain_dlopen_error(const std::string& path, const std::string& dlerror_text);

// The package that provides a library (a soname such as "libcudnn.so.9") the plugin needs, under the names of
// NVIDIA's CUDA repository for the toolkit this build used (cuda_major.cuda_minor), and Debian's own where it
// has one; "" for a library this function does not know.
std::string missing_library_package(std::string_view soname, int cuda_major, int cuda_minor);

}  // namespace tandem::cuda_plugin
