#!/usr/bin/env bash
# What tgrad_gradient (rules/tgrad.bzl) generates, as a build's consumer sees
# it. Arguments: SCHEMA, then for each target NAME its three outputs
# NAME.py NAME.json NAME_op.py (any order: told apart by their names).
set -u
schema=$1
shift
failures=0
fail() { echo "FAIL: $*"; failures=$((failures + 1)); }

for f in "$@"; do
  [[ -s "$f" ]] || fail "$f is missing or empty"
  # Hermetic outputs name files relative to the workspace: no sandbox, output
  # base or home directory in them.
  if grep -nE 'execroot|sandbox|bazel-out|/home/|/root/|/tmp/' "$f" | head -3 | grep .; then
    fail "$f holds a machine-specific path"
  fi
  case "$f" in
    *.json)
      /usr/bin/python3 tests/driver/check_protocol.py "$schema" "$f" || fail "$f: not a valid launch protocol"
      ;;
    *_op.py)
      stem=$(basename "$f" .py)
      grep -q "tgrad_$stem" "$f" || fail "$f: its ops are not in the namespace tgrad_$stem"
      /usr/bin/python3 -c 'import ast, sys; ast.parse(open(sys.argv[1]).read(), sys.argv[1])' "$f" || fail "$f: not Python"
      ;;
    *.py)
      grep -qE '^def [A-Za-z_0-9]+_bwd\(' "$f" || fail "$f: no backward kernel"
      grep -qE '^#   tgrad examples/[a-z_/]+\.py --kernel [a-z_]+ ' "$f" || fail "$f: the header does not record the command"
      /usr/bin/python3 -c 'import ast, sys; ast.parse(open(sys.argv[1]).read(), sys.argv[1])' "$f" || fail "$f: not Python"
      ;;
  esac
done
echo "$# files checked, $failures failures"
[[ $failures -eq 0 ]]
