#!/usr/bin/env bash
# `tgrad check` on every pure tile function of tests/kernels/: each argument
# after the tgrad binary is FILE|FUNCTION|WRT|ARG SPECS (separated by ";": Bazel splits
# test arguments at spaces).
set -u
tgrad="$1"
shift
failures=0
for spec in "$@"; do
  IFS='|' read -r file fn wrt argspecs <<<"$spec"
  args=()
  IFS=";" read -r -a specs <<<"$argspecs"
  for a in "${specs[@]}"; do args+=(--arg "$a"); done
  echo "== tgrad check tests/kernels/$file.py --fn $fn --wrt $wrt ${args[*]}"
  if ! "$tgrad" check "tests/kernels/$file.py" --fn "$fn" --wrt "$wrt" "${args[@]}"; then
    failures=$((failures + 1))
  fi
done
echo "$# functions checked, $failures failed"
[[ $failures -eq 0 ]]
