// SPDX-FileCopyrightText: 2026 The Tandem developers
// SPDX-License-Identifier: GPL-3.0-or-later
// Finding and loading libtandem-cuda.so (see loader.h). Compile definitions from engine/CMakeLists.txt:
// TANDEM_CUDA_PLUGIN_BUILT (0/1), TANDEM_CUDA_PLUGIN_DIR (the install folder relative to the prefix),
// TANDEM_BUILD_DIR and TANDEM_CUDA_PLUGIN_BUILD_FILE (the plugin this build made), TANDEM_CUDA_MAJOR/MINOR
// (the toolkit it was built with; 0 without CUDA).
#include "cuda_plugin/loader.h"

#include <dlfcn.h>

#include <cstdlib>
#include <cstring>
#include <system_error>
#include <utility>

namespace tandem::cuda_plugin {

namespace fs = std::filesystem;

namespace {

constexpr const char* kEnvVar = "TANDEM_CUDA_PLUGIN";

// The package name with the toolkit's version: "cuda-cudart-13-0" (or "cuda-cudart-13-*" when the minor
// version of the library's major is not this build's).
std::string nvidia_name(const std::string& base, int so_major, int cuda_major, int cuda_minor) {
    return base + "-" + std::to_string(so_major) + "-" +
           (so_major == cuda_major ? std::to_string(cuda_minor) : std::string("*"));
}

#if TANDEM_CUDA_PLUGIN_BUILT
bool is_inside(const fs::path& file, const fs::path& folder) {
    std::error_code ec;
    const fs::path f = fs::weakly_canonical(file, ec);
    const fs::path d = fs::weakly_canonical(folder, ec);
    if (ec || d.empty()) return false;
    const auto rel = f.lexically_relative(d);
    return !rel.empty() && *rel.begin() != "..";
}
#endif

// Where the plugin is looked for, and how that place was chosen ("TANDEM_CUDA_PLUGIN" or "").
std::pair<fs::path, std::string> locate() {
    if (const char* env = std::getenv(kEnvVar); env && *env) return {fs::path(env), kEnvVar};
#if TANDEM_CUDA_PLUGIN_BUILT
    std::error_code ec;
    const fs::path exe = fs::read_symlink("/proc/self/exe", ec);
    if (!ec && is_inside(exe, TANDEM_BUILD_DIR)) return {fs::path(TANDEM_CUDA_PLUGIN_BUILD_FILE), ""};
    if (!ec) return {(exe.parent_path().parent_path() / TANDEM_CUDA_PLUGIN_DIR / kFileName).lexically_normal(), ""};
    return {fs::path("/usr") / TANDEM_CUDA_PLUGIN_DIR / kFileName, ""};
#else
    return {fs::path(), ""};
#endif
}

std::string where(const std::string& path, std::string_view origin) {
    return origin.empty() ? path : std::string(origin) + "=" + path;
}

}  // namespace

bool built() { return TANDEM_CUDA_PLUGIN_BUILT != 0; }

std::string missing_library_package(std::string_view soname, int cuda_major, int cuda_minor) {
    const size_t so = soname.find(".so");
    if (so == std::string_view::npos) return "";
    const std::string stem(soname.substr(0, so));
    const std::string version = so + 4 <= soname.size() ? std::string(soname.substr(so + 4)) : std::string();
    const int v = std::atoi(version.c_str());
    if (stem == "libcuda") return "the NVIDIA driver (libcuda1 from Debian's non-free, or NVIDIA's cuda-drivers)";
    if (stem.starts_with("libcudnn"))
        return "libcudnn" + (version.empty() ? std::string("9") : version.substr(0, version.find('.'))) + "-cuda-" +
               (cuda_major > 0 ? std::to_string(cuda_major) : std::string("*")) + " (NVIDIA's CUDA repository)";
    if (v <= 0) return "";
    std::string nvidia, debian;
    if (stem == "libcudart") {
        nvidia = nvidia_name("cuda-cudart", v, cuda_major, cuda_minor);
        if (v == 12) debian = "libcudart12";
        if (v == 11) debian = "libcudart11.0";
    } else if (stem == "libcublasLt" || stem == "libcublas") {
        nvidia = nvidia_name("libcublas", v, cuda_major, cuda_minor);
        if (v == 11 || v == 12) debian = (stem == "libcublasLt" ? "libcublaslt" : "libcublas") + std::to_string(v);
    } else if (stem == "libnvrtc") {
        nvidia = nvidia_name("cuda-nvrtc", v, cuda_major, cuda_minor);
    } else if (stem == "libnvJitLink") {
        nvidia = nvidia_name("libnvjitlink", v, cuda_major, cuda_minor);
    } else {
        return "";
    }
    std::string out = nvidia + " (NVIDIA's CUDA repository)";
    if (!debian.empty()) out += " or " + debian + " (Debian's non-free)";
    return out;
}

std::string explain_dlopen_error(const std::string& path, const std::string& text) {
    const std::string head = "the CUDA backend (" + path + ") cannot be loaded: ";
    const std::string marker = ": cannot open shared object file";
    const size_t at = text.find(marker);
    if (at != std::string::npos) {
        const std::string lib = text.substr(0, at);
        if (lib != path && fs::path(lib).filename() != fs::path(path).filename()) {
            const std::string package = missing_library_package(fs::path(lib).filename().string(), TANDEM_CUDA_MAJOR,
                                                                TANDEM_CUDA_MINOR);
            return head + lib + " is missing; " +
                   (package.empty() ? std::string("install the package that provides it") : "install " + package);
        }
    }
    return head + text;
}

Loaded load(const fs::path& path, std::string_view origin) {
    Loaded out;
    out.path = path.string();
    std::error_code ec;
    if (!fs::is_regular_file(path, ec)) {
        out.reason = origin.empty() ? "the CUDA backend is not installed: " + out.path + " does not exist"
                                    : "the CUDA backend " + where(out.path, origin) + " does not exist";
        return out;
    }
    dlerror();
    void* handle = dlopen(out.path.c_str(), RTLD_NOW | RTLD_LOCAL);
    if (!handle) {
        const char* e = dlerror();
        out.reason = explain_dlopen_error(out.path, e ? e : "unknown dlopen error");
        return out;
    }
    using Entry = const Api* (*)();
    auto entry = reinterpret_cast<Entry>(dlsym(handle, kEntrySymbol));
    if (!entry) {
        out.reason = where(out.path, origin) + " is not a Tandem CUDA backend (it has no " + kEntrySymbol + ")";
        return out;  // left loaded: unloading a library that may have started threads is not safe
    }
    const Api* api = entry();
    if (!api || api->abi_version != kAbiVersion || std::strcmp(api->tandem_version, TANDEM_VERSION) != 0 ||
        api->layout != layout_fingerprint()) {
        out.reason = "the CUDA backend " + where(out.path, origin) + " comes from another build (Tandem " +
                     (api ? std::string(api->tandem_version) : std::string("?")) + ") than this program (Tandem " +
                     TANDEM_VERSION "); install both from one build";
        return out;
    }
    out.api = api;
    return out;
}

const Loaded& plugin() {
    static const Loaded loaded = [] {
        const auto [path, origin] = locate();
        if (path.empty()) {
            Loaded none;
            none.reason = "this build of Tandem has no CUDA backend (built without nvcc/cuDNN)";
            return none;
        }
        return load(path, origin);
    }();
    return loaded;
}

}  // namespace tandem::cuda_plugin
