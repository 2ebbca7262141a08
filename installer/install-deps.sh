#!/usr/bin/env bash
# SPDX-FileCopyrightText: 2026 The Tandem developers
# SPDX-License-Identifier: GPL-3.0-or-later
# Installs Tandem's build, test and packaging dependencies from Debian 12 packages. Idempotent: packages
# already present are not touched, and apt-get runs only when something is missing. The CUDA toolkit is
# detected by CMake, never downloaded here.
set -euo pipefail

PACKAGES=(
  build-essential cmake ninja-build pkg-config git
  qt6-base-dev qt6-base-dev-tools libgl-dev libqcustomplot-dev   # studio (Qt 6 Widgets, QCustomPlot Qt6 build) + Qt Test
  libqt6svg6                                                      # the studio's SVG icons (Qt's icon engine plugin)
  nlohmann-json3-dev libcli11-dev                                 # JSON, command line
  libpcre2-dev libutf8proc-dev                                    # tokenizer: pre-tokenizer regexes, Unicode normalisation
  libopenblas-dev                                                 # CPU backend GEMMs
  libsnappy-dev libzstd-dev zlib1g-dev                            # Parquet datasets: SNAPPY, ZSTD, GZIP pages
  libcurl4-openssl-dev libssl-dev                                 # Hub downloads (HTTP, sha256)
  dpkg-dev file                                                   # cpack -G DEB: dpkg-shlibdeps computes Depends
  clang libclang-rt-14-dev                                        # fuzz preset: clang 14, libFuzzer + ASan/UBSan runtimes
)

missing=()
for p in "${PACKAGES[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if [ ${#missing[@]} -eq 0 ]; then
  echo "install-deps: all ${#PACKAGES[@]} packages present"
  exit 0
fi

SUDO=""
if [ "$(id -u)" -ne 0 ]; then
  command -v sudo >/dev/null || { echo "install-deps: run as root (missing: ${missing[*]})" >&2; exit 1; }
  SUDO="sudo"
fi
echo "install-deps: installing ${missing[*]}"
$SUDO apt-get update -qq
$SUDO env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "${missing[@]}"
