# SPDX-FileCopyrightText: 2026 The Tandem developers
# SPDX-License-Identifier: GPL-3.0-or-later
# Compiler warnings and optional sanitizers shared by every target of the project.
add_library(tandem_options INTERFACE)
if(CMAKE_CXX_COMPILER_ID MATCHES "GNU|Clang")
  target_compile_options(tandem_options INTERFACE
    $<$<COMPILE_LANGUAGE:CXX>:-Wall -Wextra -Wno-unused-parameter>)
endif()
if(TANDEM_SANITIZE)
  target_compile_options(tandem_options INTERFACE
    $<$<COMPILE_LANGUAGE:CXX>:-fsanitize=${TANDEM_SANITIZE} -fno-omit-frame-pointer -fno-sanitize-recover=all>)
  target_link_options(tandem_options INTERFACE -fsanitize=${TANDEM_SANITIZE})
endif()
