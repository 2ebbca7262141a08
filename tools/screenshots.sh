#!/usr/bin/env bash
# SPDX-FileCopyrightText: 2026 The Tandem developers
# SPDX-License-Identifier: GPL-3.0-or-later
# Screenshots of every page of the studio for docs/screenshots/: builds `tandem` (or uses a build), then runs
# `tandem --demo --screenshot-dir DIR` under Xvfb. The app selects the demo model and dataset, starts a short
# CPU run, saves one PNG per page (QWidget::grab) and quits; this script only provides the X server, a fresh
# profile and the checks. Not run in CI (Xvfb is installed here, on first use, not by install-deps.sh).
# A fresh HOME / XDG profile keeps this machine's settings, recent folders, runs and Hugging Face cache out
# of the pictures, so they show what a first start shows.
#
# Usage: tools/screenshots.sh [--build-dir DIR] [--out DIR] [--no-build] [--size WxH] [--theme light|dark]
#   --build-dir DIR  build folder (default build/release; configured with the release preset when absent)
#   --out DIR        where the PNGs go (default docs/screenshots; its old PNGs are removed first)
#   --no-build       use DIR/app/gui/tandem as it is
#   --size WxH       Xvfb screen size (default 1600x1000)
#   --theme T        the studio's --theme (default light: Xvfb has no desktop whose colours to follow)
set -euo pipefail
cd "$(dirname "$0")/.."

build=build/release
out=docs/screenshots
do_build=1
size=1600x1000
theme=light
while [ $# -gt 0 ]; do
  case "$1" in
    --build-dir) build=$2; shift 2 ;;
    --out) out=$2; shift 2 ;;
    --no-build) do_build=0; shift ;;
    --size) size=$2; shift 2 ;;
    --theme) theme=$2; shift 2 ;;
    -h|--help) sed -n '2,16p' "$0"; exit 0 ;;
    *) echo "screenshots: unknown option $1 (see --help)" >&2; exit 2 ;;
  esac
done

# Xvfb, xauth (xvfb-run needs it) and a font, from Debian.
need=()
command -v xvfb-run >/dev/null || need+=(xvfb)
command -v xauth >/dev/null || need+=(xauth)
fc-list 2>/dev/null | grep -q . || need+=(fonts-dejavu-core)
if [ ${#need[@]} -gt 0 ]; then
  SUDO=""
  [ "$(id -u)" -eq 0 ] || SUDO="sudo"
  echo "screenshots: installing ${need[*]}"
  $SUDO apt-get update -qq
  $SUDO env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "${need[@]}"
fi

if [ "$do_build" -eq 1 ]; then
  if [ ! -f "$build/CMakeCache.txt" ]; then
    if [ "$build" = build/release ]; then
      cmake --preset release
    else
      cmake -S . -B "$build" -G Ninja -DCMAKE_BUILD_TYPE=Release -DTANDEM_UI=ON -DTANDEM_TESTS=OFF -DTANDEM_BENCH=OFF
    fi
  fi
  cmake --build "$build" --target tandem
fi
app="$build/app/gui/tandem"
[ -x "$app" ] || { echo "screenshots: $app not found (build it, or drop --no-build)" >&2; exit 1; }

profile=$(mktemp -d)
mkdir -m 700 "$profile/runtime"
trap 'rm -rf "$profile"' EXIT
mkdir -p "$out"
rm -f "$out"/*.png
out_abs=$(cd "$out" && pwd)
app_abs=$(cd "$(dirname "$app")" && pwd)/tandem

echo "screenshots: $app_abs --demo --theme $theme --screenshot-dir $out_abs (Xvfb ${size})"
env HOME="$profile" XDG_CONFIG_HOME="$profile/config" XDG_DATA_HOME="$profile/data" \
    XDG_CACHE_HOME="$profile/cache" XDG_RUNTIME_DIR="$profile/runtime" QT_QPA_PLATFORM=xcb \
    timeout 900 xvfb-run -a -s "-screen 0 ${size}x24 -dpi 96" \
    "$app_abs" --demo --theme "$theme" --screenshot-dir "$out_abs"

shopt -s nullglob
pngs=("$out"/*.png)
if [ ${#pngs[@]} -eq 0 ]; then
  echo "screenshots: no PNG written to $out" >&2
  exit 1
fi
for f in "${pngs[@]}"; do
  file "$f"
done
echo "screenshots: ${#pngs[@]} PNGs in $out"
