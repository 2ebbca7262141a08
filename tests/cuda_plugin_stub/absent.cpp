// SPDX-FileCopyrightText: 2026 The Tandem developers
// SPDX-License-Identifier: GPL-3.0-or-later
// libtandem-test-absent.so.1: a library that is built but never on the loader's path, so that a plugin linking
// it (needs_absent.cpp) fails to load the way the CUDA plugin does where cuDNN is missing (test_cuda_plugin).
// Loaded by its full path it is a shared library without Tandem's entry symbol.
extern "C" __attribute__((visibility("default"))) int tandem_test_absent_value() { return 42; }
