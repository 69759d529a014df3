#!/usr/bin/env bash
# Compares generated files with their golden copies in tests/golden/KIND/.
# Usage: compare.sh KIND GENERATED... (each generated KIND_<stem>.py or .json
# is compared with tests/golden/KIND/<stem>.py or .json, byte for byte).
set -u
kind="$1"
shift
failures=0
for generated in "$@"; do
  ext="${generated##*.}"
  stem=$(basename "$generated" ".$ext")
  stem="${stem#"${kind}"_}"
  golden="tests/golden/$kind/$stem.$ext"
  if [[ ! -f "$golden" ]]; then
    echo "MISSING golden file $golden (run tools/test --update)"
    failures=$((failures + 1))
  elif ! diff -u "$golden" "$generated"; then
    echo "DIFFERS: $golden (expected, above) vs the output (run tools/test --update if the change is intended)"
    failures=$((failures + 1))
  fi
done
echo "$# files compared, $failures failures"
[[ $failures -eq 0 ]]
