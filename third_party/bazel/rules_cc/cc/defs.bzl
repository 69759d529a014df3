"""Offline stand-in for rules_cc: Bazel 4.2.3 asks for this repository, and the
Debian package of rules_cc is too new for it. Forwards to the native rules."""

def cc_binary(**kwargs):
    native.cc_binary(**kwargs)

def cc_library(**kwargs):
    native.cc_library(**kwargs)

def cc_test(**kwargs):
    native.cc_test(**kwargs)

def cc_toolchain(**kwargs):
    native.cc_toolchain(**kwargs)

def cc_toolchain_suite(**kwargs):
    native.cc_toolchain_suite(**kwargs)

def cc_import(**kwargs):
    native.cc_import(**kwargs)
