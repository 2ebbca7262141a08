#!/usr/bin/env bash
# SPDX-FileCopyrightText: 2026 The Tandem developers
# SPDX-License-Identifier: GPL-3.0-or-later
# Tandem's GGUF export checked by llama.cpp itself (see gguf_llamacpp_check.py for what is compared).
#   tests/reference/gguf_llamacpp_check.sh LLAMA_SRC OUT [TANDEM_CLI]
# LLAMA_SRC: a llama.cpp source tree outside the repository (nothing of it is copied into Tandem); built here
# CPU-only (OUT/llama-build) together with our driver tests/reference/gguf_llamacpp_logits.cpp, which only calls
# llama.cpp's C API. TANDEM_CLI: a built tandem-cli; without it a CPU-only tandem-cli is built in OUT/tandem-build.
# Needs a C++ toolchain, CMake, python3 with torch, transformers, peft and numpy; no network.
# Environment: TANDEM_ASSETS (default ../shared/assets beside the repo, else shared/assets inside it),
# FAMILIES (default llama,mistral,qwen2,qwen3,phi3,gemma2,gemma3), GGML_NATIVE=OFF when llama.cpp dies of an
# illegal instruction (it did on the 2-core dev VM for quantized types). Builds are incremental when OUT is kept.
# Results: OUT/results.json (written after each family, so a cut-off run still reports what it did).
set -euo pipefail
if [ $# -lt 2 ]; then
  echo "usage: $0 LLAMA_SRC OUT [TANDEM_CLI]" >&2
  exit 2
fi
SRC=$(realpath "$1")
mkdir -p "$2"
OUT=$(realpath "$2")
REPO=$(cd "$(dirname "$0")/../.." && pwd)
JOBS=$(nproc)
GEN=()
command -v ninja >/dev/null && GEN=(-G Ninja)

CLI=${3:-${TANDEM_CLI:-}}
if [ -z "$CLI" ]; then
  cmake -S "$REPO" -B "$OUT/tandem-build" "${GEN[@]}" -DCMAKE_BUILD_TYPE=Release -DTANDEM_CUDA=OFF -DTANDEM_UI=OFF \
    -DTANDEM_TESTS=OFF -DTANDEM_BENCH=OFF > "$OUT/tandem-configure.log"
  cmake --build "$OUT/tandem-build" --target tandem-cli -j"$JOBS" > "$OUT/tandem-build.log"
  CLI="$OUT/tandem-build/app/cli/tandem-cli"
fi
CLI=$(realpath "$CLI")

# llama.cpp as a subproject of a two-line project that adds our driver.
mkdir -p "$OUT/driver"
cat > "$OUT/driver/CMakeLists.txt" <<CMAKE
cmake_minimum_required(VERSION 3.14)
project(tandem_gguf_check C CXX)
add_subdirectory("$SRC" llama.cpp)
add_executable(gguf_llamacpp_logits "$REPO/tests/reference/gguf_llamacpp_logits.cpp")
target_link_libraries(gguf_llamacpp_logits PRIVATE llama)
CMAKE
cmake -S "$OUT/driver" -B "$OUT/llama-build" "${GEN[@]}" -DCMAKE_BUILD_TYPE=Release -DGGML_CUDA=OFF \
  -DGGML_VULKAN=OFF -DGGML_METAL=OFF -DGGML_NATIVE="${GGML_NATIVE:-ON}" -DLLAMA_CURL=OFF -DLLAMA_OPENSSL=OFF -DLLAMA_BUILD_UI=OFF \
  -DLLAMA_BUILD_TESTS=OFF -DLLAMA_BUILD_TOOLS=OFF -DLLAMA_BUILD_EXAMPLES=OFF -DLLAMA_BUILD_SERVER=OFF \
  -DLLAMA_BUILD_COMMON=OFF -DBUILD_SHARED_LIBS=OFF > "$OUT/llama-configure.log"
cmake --build "$OUT/llama-build" --target gguf_llamacpp_logits -j"$JOBS" > "$OUT/llama-build.log"
DRIVER=$(find "$OUT/llama-build" -name gguf_llamacpp_logits -type f -perm -u+x | head -1)

ASSETS=${TANDEM_ASSETS:-$REPO/../shared/assets}
[ -d "$ASSETS" ] || ASSETS=$REPO/shared/assets
python3 "$REPO/tests/reference/gguf_llamacpp_check.py" --llama-src "$SRC" --out "$OUT" --tandem-cli "$CLI" \
  --driver "$DRIVER" --assets "$ASSETS" --families "${FAMILIES:-llama,mistral,qwen2,qwen3,phi3,gemma2,gemma3}" \
  2>&1 | tee "$OUT/check.log"
echo "results: $OUT/results.json"
