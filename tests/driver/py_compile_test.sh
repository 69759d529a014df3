#!/usr/bin/env bash
# Every generated Python module given compiles (python3 -m py_compile): the
# --emit torch modules cannot be imported here (no PyTorch, no GPU), their
# runs are tools/gpu_check's.
set -u
failures=0
for f in "$@"; do
  if ! /usr/bin/python3 -c 'import ast, sys; ast.parse(open(sys.argv[1]).read(), sys.argv[1])' "$f"; then
    failures=$((failures + 1))
  fi
done
echo "$# modules parsed, $failures failures"
[[ $failures -eq 0 ]]
