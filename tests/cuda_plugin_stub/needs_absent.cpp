// SPDX-FileCopyrightText: 2026 The Tandem developers
// SPDX-License-Identifier: GPL-3.0-or-later
// A stand-in for libtandem-cuda.so whose dependency (libtandem-test-absent.so.1) cannot be found: built without a
// run path to it, so dlopen fails naming that library, as it names libcudnn.so.9 on a machine without cuDNN
// (test_cuda_plugin).
extern "C" int tandem_test_absent_value();

extern "C" __attribute__((visibility("default"))) int tandem_test_needs_absent() { return tandem_test_absent_value(); }
