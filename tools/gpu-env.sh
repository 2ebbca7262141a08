#!/usr/bin/env bash
# SPDX-FileCopyrightText: 2026 The Tandem developers
# SPDX-License-Identifier: GPL-3.0-or-later
# The build dependencies of the headless engine + tandem-cli (nlohmann_json, CLI11, PCRE2, utf8proc, OpenBLAS),
# carried to the lent GPU machine, which has CUDA, cmake, ninja and gcc but no network and none of these.
#
#   tools/gpu-env.sh pack          here (Debian 12, network): apt-get download + dpkg-deb -x into .carry/gpu-env/root
#   tools/gpu-env.sh check         here, after pack: configure the repo and link a small program against the
#                                  carried copies only, in a clean environment (writes /tmp/gpuenv-check)
#   . tools/gpu-env.sh env         there, from the repo root, before bench/gpu_checks.sh: exports
#                                  PKG_CONFIG_PATH, CMAKE_PREFIX_PATH, LD_LIBRARY_PATH (and PKG_CONFIG if needed)
#
# Decisions a reader must know:
# - OpenBLAS's shared library is 35 MiB (every CPU's kernels), too big for the 64 MiB the device tool carries
#   with the tree, so pack stores files over 4 MiB xz-compressed (about 4 MiB) and `env` unpacks them in place,
#   inside .carry/gpu-env/root (never into /). `check` removes the unpacked copies again, so the folder
#   carried from here stays small; run pack or check last before a run, not `env`.
# - The GCC runtime that OpenBLAS needs (libgfortran5, libquadmath0) and pkgconf are fallbacks: `env` puts
#   them on the paths only when the machine has none of its own, so a newer system copy is not shadowed
#   (TANDEM_GPU_ENV_FORCE=1 uses them regardless; check does, to test them). Everything is Debian 12's
#   amd64 build and needs glibc >= 2.34 (Ubuntu 22.04 and later).
if [[ "${BASH_SOURCE[0]}" == "$0" ]]; then set -euo pipefail; fi   # not when sourced: it would change the caller's shell

_gpuenv_packages="nlohmann-json3-dev libcli11-dev libpcre2-dev libpcre2-8-0 libutf8proc-dev libutf8proc2
  libopenblas-pthread-dev libopenblas0-pthread libgfortran5 libquadmath0 pkgconf-bin libpkgconf3
  libsnappy-dev libsnappy1v5"
_gpuenv_ma=x86_64-linux-gnu

_gpuenv_dir() { echo "$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)/.carry/gpu-env"; }

# ---------------------------------------------------------------------------------------------------- pack
gpuenv_pack() {
  local top root lib tmp deb link target pc rel
  top=$(_gpuenv_dir); root=$top/root; lib=$root/usr/lib/$_gpuenv_ma
  tmp=$(mktemp -d); trap "rm -rf '$tmp'" EXIT
  # apt's download sandbox user cannot write into a root-owned temp dir.
  local sandbox=(); [[ $EUID == 0 ]] && sandbox=(-o APT::Sandbox::User=root)
  # shellcheck disable=SC2086
  (cd "$tmp" && apt-get -q "${sandbox[@]}" download $_gpuenv_packages) \
    || { echo "gpu-env: apt-get download failed (stale package lists? run apt-get update)" >&2; return 1; }

  rm -rf "$top"; mkdir -p "$root"
  for deb in "$tmp"/*.deb; do
    dpkg-deb -x "$deb" "$root"
    dpkg-deb --showformat='${Package} ${Version}\n' -W "$deb" >> "$top/PACKAGES"
  done

  # Keep what a build and a run need: no docs, static archives, LAPACK/BLAS aliases (they would shadow the
  # machine's libblas.so.3 on LD_LIBRARY_PATH), OpenBLAS's cmake files (absolute paths; the build uses its
  # .pc), nor the 16/32-bit and POSIX PCRE2 variants (not shipped: their .so links dangle).
  rm -rf "$root"/usr/share/{doc,man,lintian,bug} "$root"/usr/bin/pcre2-config \
         "$lib/cmake" "$lib/openblas-pthread/cmake" \
         "$lib"/openblas-pthread/{libblas,liblapack}.* "$lib"/openblas-pthread/pkgconfig/{blas,lapack}-openblas.pc \
         "$lib"/pkgconfig/libpcre2-{16,32,posix}.pc
  find "$root" -name '*.a' -delete

  # Absolute links become relative ones when their target is carried; dangling links go.
  while IFS= read -r -d '' link; do
    target=$(readlink "$link")
    [[ $target == /* ]] || continue
    rm "$link"
    if [[ -e $root$target ]]; then ln -s "$(realpath -s --relative-to="$(dirname "$link")" "$root$target")" "$link"; fi
  done < <(find "$root" -type l -print0)
  find "$root" -xtype l -delete
  find "$root" -depth -type d -empty -delete

  # The GCC runtime and pkgconf's library live apart, so `env` can leave them off LD_LIBRARY_PATH.
  mkdir -p "$lib/fallback" "$lib/pkgconf"
  mv "$lib"/libgfortran.so.5* "$lib"/libquadmath.so.0* "$lib/fallback/"
  mv "$lib"/libpkgconf.so.3* "$lib/pkgconf/"
  cat > "$root/usr/bin/pkg-config" <<EOF
#!/bin/sh
# pkgconf from Debian 12 with its library beside it (written by tools/gpu-env.sh pack).
here=\$(cd "\$(dirname "\$0")" && pwd)
LD_LIBRARY_PATH="\$here/../lib/$_gpuenv_ma/pkgconf\${LD_LIBRARY_PATH:+:\$LD_LIBRARY_PATH}" exec "\$here/pkgconf" "\$@"
EOF
  chmod 755 "$root/usr/bin/pkg-config"

  # pkg-config files: every absolute /usr becomes ${gpuenv_root}/usr, with gpuenv_root relative to ${pcfiledir}.
  while IFS= read -r -d '' pc; do
    rel=$(realpath --relative-to="$(dirname "$pc")" "$root")
    sed -E -i -e "1i gpuenv_root=\${pcfiledir}/$rel" \
      -e 's#(^|[=[:space:]]|-I|-L)/usr(/|[[:space:]]|$)#\1${gpuenv_root}/usr\2#g' "$pc"
    if grep -Eq '(^|[=[:space:]]|-I|-L)/(usr|etc|opt)' "$pc"; then
      echo "gpu-env: absolute path left in $pc" >&2; return 1
    fi
  done < <(find "$root" -name '*.pc' -print0)
  # The cmake package files of nlohmann_json and CLI11 already compute their prefix from their own location.
  if grep -rEl '"/usr' "$root/usr/share/cmake"; then echo "gpu-env: absolute path in a cmake file above" >&2; return 1; fi

  # Big files travel compressed (see the header); `env` unpacks them.
  find "$root" -type f -size +4M -print0 | xargs -0 -r xz -9 -T1
  echo "gpu-env: $(wc -l < "$top/PACKAGES") packages in $top (list: PACKAGES)"
  echo "gpu-env: size $(du -sh "$top" | cut -f1) as carried, $(_gpuenv_unpacked_size "$root") once unpacked by env"
}

_gpuenv_unpacked_size() {   # du of the folder plus the uncompressed size of each .xz not yet unpacked
  local root=$1 bytes f
  bytes=$(du -sb "$root" | cut -f1)
  while IFS= read -r -d '' f; do
    [[ -e ${f%.xz} ]] || bytes=$((bytes - $(stat -c %s "$f") + $(xz -l --robot "$f" | awk '$1=="totals"{print $5}')))
  done < <(find "$root" -name '*.xz' -print0)
  echo "$((bytes / 1048576))M"
}

# ---------------------------------------------------------------------------------------------------- env
# Sourced: no set -e here, errors return instead of ending the caller's shell.
gpuenv_env() {
  local top root lib f cache
  top=$(_gpuenv_dir); root=$top/root; lib=$root/usr/lib/$_gpuenv_ma
  [[ -d $root ]] || { echo "gpu-env: no $root (run tools/gpu-env.sh pack and carry .carry)" >&2; return 1; }

  while IFS= read -r -d '' f; do
    [[ -e ${f%.xz} ]] && continue
    { xz -dc "$f" 2>/dev/null || python3 -c 'import lzma, shutil, sys; shutil.copyfileobj(lzma.open(sys.argv[1]), sys.stdout.buffer)' "$f"; } \
      > "${f%.xz}.tmp" && mv "${f%.xz}.tmp" "${f%.xz}" \
      || { rm -f "${f%.xz}.tmp"; echo "gpu-env: could not unpack $f" >&2; return 1; }
  done < <(find "$root" -name '*.xz' -print0)

  _gpuenv_prepend PKG_CONFIG_PATH "$root/usr/share/pkgconfig"
  _gpuenv_prepend PKG_CONFIG_PATH "$lib/openblas-pthread/pkgconfig"
  _gpuenv_prepend PKG_CONFIG_PATH "$lib/pkgconfig"
  _gpuenv_prepend CMAKE_PREFIX_PATH "$root/usr"
  cache=$( { /sbin/ldconfig -p || ldconfig -p; } 2>/dev/null)
  if [[ ${TANDEM_GPU_ENV_FORCE:-0} == 1 ]] || ! grep -qE '^\s*libgfortran\.so\.5 .*x86-64' <<< "$cache" \
     || ! grep -qE '^\s*libquadmath\.so\.0 .*x86-64' <<< "$cache"; then
    _gpuenv_prepend LD_LIBRARY_PATH "$lib/fallback"
  fi
  _gpuenv_prepend LD_LIBRARY_PATH "$lib/openblas-pthread"
  _gpuenv_prepend LD_LIBRARY_PATH "$lib"
  if [[ ${TANDEM_GPU_ENV_FORCE:-0} == 1 ]] || ! command -v pkg-config > /dev/null; then
    export PKG_CONFIG=$root/usr/bin/pkg-config   # FindPkgConfig takes it from here
  fi
  export TANDEM_GPU_ENV=$root
  echo "gpu-env: using $root"
}

_gpuenv_prepend() {   # VAR DIR: put DIR first in the colon list VAR, once
  local var=$1 dir=$2 cur=${!1:-}
  case ":$cur:" in *":$dir:"*) ;; *) export "$var=$dir${cur:+:$cur}" ;; esac
}

# ---------------------------------------------------------------------------------------------------- check
gpuenv_check() {
  local top root repo bld tmp
  top=$(_gpuenv_dir); root=$top/root; repo=$(cd "$top/../.." && pwd); bld=/tmp/gpuenv-check
  tmp=$(mktemp -d)
  # On any exit, back to the packed state (no unpacked copies), so what is carried from here stays small.
  trap "rm -rf '$tmp'; find '$root' -name '*.xz' -print0 | sed -z 's/[.]xz\$//' | xargs -0 rm -f" EXIT
  # A clean environment: the system's .pc files and cmake packages are not looked at.
  env -i HOME="$HOME" PATH=/usr/local/bin:/usr/bin:/bin TANDEM_GPU_ENV_FORCE=1 \
      bash -euo pipefail -c '
    script=$1 bld=$2 tmp=$3 repo=$4
    . "$script" env
    export PKG_CONFIG_LIBDIR=$PKG_CONFIG_PATH
    echo "== configure (CUDA off) into $bld"
    rm -rf "$bld"
    cmake -S "$repo" -B "$bld" -G Ninja -DTANDEM_UI=OFF -DTANDEM_TESTS=OFF -DTANDEM_CUDA=OFF \
      -DCMAKE_FIND_USE_CMAKE_SYSTEM_PATH=OFF > "$tmp/configure.log" || { cat "$tmp/configure.log"; exit 1; }
    bad=0
    for v in nlohmann_json_DIR CLI11_DIR PKG_CONFIG_EXECUTABLE PCRE2_INCLUDE_DIRS pkgcfg_lib_PCRE2_pcre2-8 \
             UTF8PROC_INCLUDE_DIRS pkgcfg_lib_UTF8PROC_utf8proc OPENBLAS_INCLUDE_DIRS pkgcfg_lib_OPENBLAS_openblas; do
      line=$(grep -E "^$v:" "$bld/CMakeCache.txt" || echo "$v: (missing)")
      case $line in *".carry/gpu-env/"*) echo "ok   $line" ;; *) echo "BAD  $line"; bad=1 ;; esac
    done
    [ $bad = 0 ]

    echo "== compile, link and run a program against the carried libraries only"
    cat > "$tmp/t.cpp" <<"EOF"
#include <cblas.h>
#include <pcre2.h>
#include <utf8proc.h>
#include <nlohmann/json.hpp>
#include <CLI/CLI.hpp>
#include <cstdio>
int main() {
  float a[4] = {1, 2, 3, 4}, b[4] = {1, 0, 0, 1}, c[4] = {};
  cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, 2, 2, 2, 1.f, a, 2, b, 2, 0.f, c, 2);
  int err; PCRE2_SIZE off;
  pcre2_code* re = pcre2_compile((PCRE2_SPTR)"\\p{L}+", PCRE2_ZERO_TERMINATED, PCRE2_UTF, &err, &off, nullptr);
  nlohmann::json j = {{"sgemm", c[3]}, {"pcre2", re != nullptr}, {"utf8proc", utf8proc_version()}};
  std::printf("%s %s\n", j.dump().c_str(), openblas_get_config());
  pcre2_code_free(re);
  return c[3] == 4.f && re ? 0 : 1;
}
EOF
    flags=$($PKG_CONFIG --cflags --libs openblas libpcre2-8 libutf8proc nlohmann_json CLI11)
    g++ -std=c++20 -DPCRE2_CODE_UNIT_WIDTH=8 -MMD -MF "$tmp/t.d" "$tmp/t.cpp" -o "$tmp/t" $flags
    for h in cblas.h pcre2.h utf8proc.h nlohmann/json.hpp CLI/CLI.hpp; do
      grep -m1 -oE "[^ ]*/$h" "$tmp/t.d" | grep -q .carry/gpu-env/ || { echo "BAD  $h not from .carry"; exit 1; }
      echo "ok   $h from .carry"
    done
    "$tmp/t"
    ldd "$tmp/t" | tee "$tmp/ldd.txt" | grep -E "openblas|pcre2|utf8proc|gfortran|quadmath"
    for l in libopenblas.so.0 libpcre2-8.so.0 libutf8proc.so.2 libgfortran.so.5 libquadmath.so.0; do
      grep -E "^\s*$l => .*\.carry/gpu-env/" "$tmp/ldd.txt" > /dev/null || { echo "BAD  $l not from .carry"; exit 1; }
    done
    echo "ok   all five libraries resolve into .carry"
  ' _ "$repo/tools/gpu-env.sh" "$bld" "$tmp" "$repo"
  echo "gpu-env: check passed"
}

# ---------------------------------------------------------------------------------------------------- main
if [[ "${BASH_SOURCE[0]}" != "$0" ]]; then
  case ${1:-env} in
    env) gpuenv_env; _gpuenv_rc=$? ;;
    *) echo "gpu-env: sourced, the mode is env (. tools/gpu-env.sh env)" >&2; _gpuenv_rc=2 ;;
  esac
  unset -f gpuenv_pack gpuenv_env gpuenv_check _gpuenv_dir _gpuenv_prepend _gpuenv_unpacked_size
  unset _gpuenv_packages _gpuenv_ma
  return $_gpuenv_rc
else
  case ${1:-} in
    pack) gpuenv_pack ;;
    check) gpuenv_check ;;
    env) echo "gpu-env: env must be sourced: . tools/gpu-env.sh env" >&2; exit 2 ;;
    *) echo "usage: tools/gpu-env.sh pack|check, or . tools/gpu-env.sh env" >&2; exit 2 ;;
  esac
fi
