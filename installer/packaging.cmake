# SPDX-FileCopyrightText: 2026 The Tandem developers
# SPDX-License-Identifier: GPL-3.0-or-later
# Install layout of the desktop integration and the CPack configuration: a .deb for Debian 12 and a .tar.gz.
# Included (not add_subdirectory) from the top-level CMakeLists.txt, last: include(CPack) must run in the
# top-level directory so that CPackConfig.cmake lands in the build root where `cpack` looks for it, and the
# `tandem` target must already exist to decide whether the desktop entry is installed.
# Decisions a reader must know:
# - The .deb's Depends come from dpkg-shlibdeps (exact sonames and minimum versions of what the binaries
#   link: Qt 6, QCustomPlot Qt6, OpenBLAS, PCRE2, utf8proc, libgomp, libstdc++, and for Parquet and Hub
#   downloads libsnappy1v5, libzstd1, zlib1g, libcurl4 and libssl3), plus libqt6svg6 listed by
#   hand: Qt loads the SVG icon engine as a plugin at run time, which dpkg-shlibdeps cannot see.
# - CUDA builds: the CUDA backend is the plugin libtandem-cuda.so (engine/cuda_plugin/, installed by
#   engine/CMakeLists.txt into lib/<multiarch>/tandem), which alone links the CUDA runtime, cuBLAS(Lt) and cuDNN;
#   tandem and tandem-cli load it on first use. So the NVIDIA driver and those libraries are Recommends: without
#   them the plugin does not load (or finds no device), and both programs start and run on the CPU, saying which
#   library is missing and which package provides it (docs/packaging.md, "CUDA"). dpkg-shlibdeps sees the plugin
#   too; NVIDIA's packages carry no shlibs information, so they add no Depends (.ci/run checks that none does).
include(GNUInstallDirs)

set(CPACK_PACKAGE_CONTACT "Seed bd5d4c7f maintainers <maintainers@users.noreply.a-seed-bd5d4c7f.example>")
set(TANDEM_PKG_DIR ${CMAKE_CURRENT_LIST_DIR})
set(TANDEM_PKG_SOURCE ${CMAKE_CURRENT_LIST_DIR}/..)

# The demo datasets, read by `tandem --demo` from <prefix>/share/tandem/datasets.
install(DIRECTORY ${TANDEM_PKG_SOURCE}/datasets/ DESTINATION ${CMAKE_INSTALL_DATADIR}/tandem/datasets
        FILES_MATCHING PATTERN "*.jsonl" PATTERN "*.json" PATTERN "*.txt" PATTERN "README.md")

# Debian's per-package documents: the copyright file and a changelog generated for this version (its date
# is SOURCE_DATE_EPOCH when set, for reproducible packages).
string(TIMESTAMP _tandem_pkg_date "%a, %d %b %Y %H:%M:%S +0000" UTC)
file(WRITE ${CMAKE_CURRENT_BINARY_DIR}/installer/changelog
"tandem (${PROJECT_VERSION}) unstable; urgency=medium

  * Tandem ${PROJECT_VERSION}; the changes are in the project's git history.

 -- ${CPACK_PACKAGE_CONTACT}  ${_tandem_pkg_date}
")
file(ARCHIVE_CREATE OUTPUT ${CMAKE_CURRENT_BINARY_DIR}/installer/changelog.gz
     PATHS ${CMAKE_CURRENT_BINARY_DIR}/installer/changelog FORMAT raw COMPRESSION GZip
     COMPRESSION_LEVEL 9)
install(FILES ${TANDEM_PKG_DIR}/copyright ${CMAKE_CURRENT_BINARY_DIR}/installer/changelog.gz
        DESTINATION ${CMAKE_INSTALL_DATADIR}/doc/tandem)   # Debian: the package name, lower case

# Desktop integration only when the studio is built (a headless build packages tandem-cli alone).
if(TARGET tandem)
  install(FILES ${TANDEM_PKG_DIR}/tandem.desktop DESTINATION ${CMAKE_INSTALL_DATADIR}/applications)
  install(FILES ${TANDEM_PKG_SOURCE}/resources/icons/tandem.svg
          DESTINATION ${CMAKE_INSTALL_DATADIR}/icons/hicolor/scalable/apps)
  install(FILES ${TANDEM_PKG_DIR}/io.github.tandem.Tandem.metainfo.xml DESTINATION ${CMAKE_INSTALL_DATADIR}/metainfo)
else()
  message(STATUS "Tandem: packages hold tandem-cli only (the studio is not built)")
endif()

set(CPACK_PACKAGE_NAME tandem)
set(CPACK_PACKAGE_VENDOR "The Tandem developers")
set(CPACK_PACKAGE_VERSION ${PROJECT_VERSION})
set(CPACK_PACKAGE_DESCRIPTION_SUMMARY "fine-tuning studio for large language models (LoRA)")
set(CPACK_PACKAGE_DESCRIPTION
    "Tandem is a desktop studio for LoRA fine-tuning of large language models:
choose a Hugging Face model folder and a dataset, set the LoRA and optimizer
options, watch loss, throughput and memory live, stop and resume from
checkpoints, and export the adapter in PEFT format. It trains on an NVIDIA
GPU when the build has CUDA and the machine an NVIDIA driver, else on the
CPU. The tandem-cli command runs the same engine headless.")
set(CPACK_PACKAGE_CHECKSUM SHA256)
set(CPACK_STRIP_FILES ON)          # Release binaries without symbols; build RelWithDebInfo to debug
set(CPACK_THREADS 0)               # compress with every core
set(CPACK_GENERATOR DEB TGZ)
set(CPACK_VERBATIM_VARIABLES ON)

# .deb (cpack -G DEB): tandem_<version>_<arch>.deb, installed under /usr.
set(CPACK_DEBIAN_FILE_NAME DEB-DEFAULT)
set(CPACK_DEBIAN_PACKAGE_MAINTAINER ${CPACK_PACKAGE_CONTACT})
set(CPACK_DEBIAN_PACKAGE_SECTION science)
set(CPACK_DEBIAN_PACKAGE_PRIORITY optional)
set(CPACK_DEBIAN_PACKAGE_SHLIBDEPS ON)
set(CPACK_DEBIAN_PACKAGE_CONTROL_STRICT_PERMISSION ON)
set(CPACK_DEBIAN_PACKAGE_DEPENDS "")
if(TARGET tandem)
  set(CPACK_DEBIAN_PACKAGE_DEPENDS "libqt6svg6 (>= 6.4)")
endif()
if(TANDEM_WITH_CUDA)
  # Let dpkg-shlibdeps find the CUDA and cuDNN libraries wherever the toolkit lives (/usr/local/cuda...):
  # libraries that no Debian package owns add no dependency (CPack passes --ignore-missing-info).
  get_filename_component(_tandem_cudnn_dir "${CUDNN_LIBRARY}" DIRECTORY)
  set(CPACK_DEBIAN_PACKAGE_SHLIBDEPS_PRIVATE_DIRS ${CUDAToolkit_LIBRARY_DIR} ${_tandem_cudnn_dir})
  # The driver (Debian non-free or NVIDIA's repository) and the runtime libraries under the names of
  # NVIDIA's CUDA repository for Debian 12.
  set(_v ${CUDAToolkit_VERSION_MAJOR}-${CUDAToolkit_VERSION_MINOR})
  set(CPACK_DEBIAN_PACKAGE_RECOMMENDS
      "libcuda1 | libcuda1-any, cuda-cudart-${_v}, libcublas-${_v}, libcudnn9-cuda-${CUDAToolkit_VERSION_MAJOR}")
  # NCCL (loaded at run time): data parallelism over several GPUs (--devices prefers it, --nodes on the GPU
  # needs it); one GPU never does.
  set(CPACK_DEBIAN_PACKAGE_SUGGESTS "libnccl2")
endif()

# .tar.gz (cpack -G TGZ): a relocatable tree bin/, share/ for machines that have the runtime libraries.
set(CPACK_PACKAGE_FILE_NAME "tandem-${PROJECT_VERSION}-linux-${CMAKE_SYSTEM_PROCESSOR}")

include(CPack)
