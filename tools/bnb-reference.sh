#!/usr/bin/env bash
# SPDX-FileCopyrightText: 2026 The Tandem developers
# SPDX-License-Identifier: GPL-3.0-or-later
# bitsandbytes built from source as an outside reference for the 4-bit fixtures (tests/reference/
# make_nf4_fixtures.py). It is never part of Tandem: the source goes into the git-ignored .carry/bnb-src.
#
#   tools/bnb-reference.sh export GITDIR   here: `git archive` a bitsandbytes clone (e.g. the search tool's
#                                          fetch of bitsandbytes-foundation/bitsandbytes) into .carry/bnb-src
#   tools/bnb-reference.sh build [ARCH]    on the GPU machine (CUDA, cmake, ninja, torch): builds the CUDA
#                                          library in place (about 40 s on 16 cores); then
#                                          PYTHONPATH=.carry/bnb-src python3 -c 'import bitsandbytes' works
set -euo pipefail
top=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
src=$top/.carry/bnb-src
case "${1:-}" in
  export)
    rm -rf "$src"; mkdir -p "$src"
    git -C "$2" archive HEAD | tar -x -C "$src"
    echo "bnb-reference: $(du -sh "$src" | cut -f1) in $src" ;;
  build)
    cmake -S "$src" -B /tmp/bnb-build -G Ninja -DCOMPUTE_BACKEND=cuda -DCOMPUTE_CAPABILITY="${2:-90}" >/dev/null
    cmake --build /tmp/bnb-build -j"$(nproc)" >/dev/null
    ls "$src"/bitsandbytes/libbitsandbytes_cuda*.so ;;
  *) echo "usage: $0 export GITDIR | build [ARCH]" >&2; exit 2 ;;
esac
