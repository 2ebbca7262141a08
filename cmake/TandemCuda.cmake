# SPDX-FileCopyrightText: 2026 The Tandem developers
# SPDX-License-Identifier: GPL-3.0-or-later
# CUDA detection. AUTO turns the backend on only when nvcc, cuBLAS and cuDNN are all present; the toolkit is
# detected, never downloaded. Release builds cover every architecture from Ampere to Blackwell that the
# installed nvcc knows; CI passes one architecture (CMAKE_CUDA_ARCHITECTURES) to stay fast.
set(TANDEM_WITH_CUDA OFF)
if(NOT TANDEM_CUDA STREQUAL "OFF")
  include(CheckLanguage)
  check_language(CUDA)
  if(CMAKE_CUDA_COMPILER)
    find_package(CUDAToolkit QUIET)
    find_path(CUDNN_INCLUDE_DIR cudnn.h
      HINTS ${CUDAToolkit_INCLUDE_DIRS} PATHS /usr/include /usr/include/x86_64-linux-gnu)
    # Runtime-only cuDNN installs ship libcudnn.so.9 without the unversioned development link.
    find_library(CUDNN_LIBRARY NAMES cudnn libcudnn.so.9
      HINTS ${CUDAToolkit_LIBRARY_DIR} PATHS /usr/lib/x86_64-linux-gnu /usr/lib64)
    if(CUDAToolkit_FOUND AND TARGET CUDA::cublasLt AND CUDNN_INCLUDE_DIR AND CUDNN_LIBRARY)
      set(TANDEM_WITH_CUDA ON)
    else()
      message(STATUS "Tandem: CUDA backend off: toolkit='${CUDAToolkit_FOUND}' cublasLt='${CUDA_cublasLt_LIBRARY}' "
                     "cudnn.h='${CUDNN_INCLUDE_DIR}' libcudnn='${CUDNN_LIBRARY}'")
    endif()
  else()
    message(STATUS "Tandem: CUDA backend off: no nvcc found (set CMAKE_CUDA_COMPILER or put nvcc on PATH)")
  endif()
  if(TANDEM_CUDA STREQUAL "ON" AND NOT TANDEM_WITH_CUDA)
    message(FATAL_ERROR "TANDEM_CUDA=ON but nvcc, cuBLAS or cuDNN was not found "
                        "(nvcc='${CMAKE_CUDA_COMPILER}', cudnn.h='${CUDNN_INCLUDE_DIR}', libcudnn='${CUDNN_LIBRARY}')")
  endif()
endif()
if(TANDEM_WITH_CUDA)
  if(NOT DEFINED CMAKE_CUDA_ARCHITECTURES)
    # Ampere (80, 86), Ada (89), Hopper (90), Blackwell (100, 120) — those the compiler supports.
    set(_archs 80 86 89 90)
    # (CMAKE_CUDA_COMPILER_VERSION is not known before enable_language; the toolkit version is.)
    if(CUDAToolkit_VERSION VERSION_GREATER_EQUAL 12.8)
      list(APPEND _archs 100 120)
    endif()
    set(CMAKE_CUDA_ARCHITECTURES ${_archs})
  endif()
  enable_language(CUDA)
  # CMake < 3.26 does not know nvcc's C++20 flag (configure fails with "CUDA20 ... not supported").
  if(CMAKE_VERSION VERSION_LESS 3.26)
    set(CMAKE_CUDA20_STANDARD_COMPILE_OPTION "-std=c++20")
    set(CMAKE_CUDA20_EXTENSION_COMPILE_OPTION "-std=c++20")
  endif()
  set(CMAKE_CUDA_STANDARD 20)
  set(CMAKE_CUDA_STANDARD_REQUIRED ON)
  # Host-compiler warnings for .cu files too (the C++ flags of TandemOptions do not reach nvcc).
  add_compile_options("$<$<COMPILE_LANGUAGE:CUDA>:-Xcompiler=-Wall,-Wextra>")
  add_library(tandem_cudnn INTERFACE)
  target_include_directories(tandem_cudnn INTERFACE ${CUDNN_INCLUDE_DIR})
  target_link_libraries(tandem_cudnn INTERFACE ${CUDNN_LIBRARY})
endif()
