#!/usr/bin/env bash
# Runs the parser fuzzer for a bounded number of inputs, from a fixed seed,
# starting from the test kernels and the diagnostics inputs. Any crash, hang
# (over 10 s per input), sanitizer report or round-trip failure fails the test.
# For a longer local run: bazel build //tests:parser_fuzzer, then
#   bazel-bin/tests/parser_fuzzer -max_total_time=600 CORPUS_DIR tests/kernels tests/diag
set -euo pipefail
fuzzer="$1"
runs="${TGRAD_FUZZ_RUNS:-6000}"
corpus="${TEST_TMPDIR:-$(mktemp -d)}/corpus"
mkdir -p "$corpus"
artifacts="${TEST_UNDECLARED_OUTPUTS_DIR:-${TEST_TMPDIR:-/tmp}}/"
"$fuzzer" -seed=1 -runs="$runs" -max_len=8192 -timeout=10 -rss_limit_mb=4096 \
  -artifact_prefix="$artifacts" -print_final_stats=1 \
  "$corpus" tests/kernels tests/diag
