#!/usr/bin/env bash
# tgrad -w (--no-warnings): the warnings and their notes are not printed,
# errors are, the output and the command it records are unchanged.
#   $1 the tgrad binary; run from the runfiles root.
set -u
tgrad=$1
tmp=${TEST_TMPDIR:-$(mktemp -d)}
failures=0
fail() { echo "FAIL: $*"; failures=$((failures + 1)); }

# tests/kernels/helper_module.py binds 'activation' in two module-level branches: a warning.
request=(tests/kernels/imports_helper.py --fn activation_cast_kernel --wrt X)
"$tgrad" "${request[@]}" >"$tmp/out" 2>"$tmp/err" || fail "without -w: exit status $?"
grep -q ': warning: ' "$tmp/err" || fail "without -w: no warning printed (the test needs a kernel that warns)"
for w in -w --no-warnings; do
  "$tgrad" "${request[@]}" "$w" >"$tmp/out_w" 2>"$tmp/err_w" || fail "$w: exit status $?"
  [[ -s "$tmp/err_w" ]] && fail "$w: printed $(head -3 "$tmp/err_w")"
  cmp -s "$tmp/out" "$tmp/out_w" || fail "$w: the backward (or the command in its header) changed"
done

# Errors are still printed.
printf 'import triton\n@triton.jit\ndef k(x):\n    return x +\n' >"$tmp/bad.py"
"$tgrad" "$tmp/bad.py" --emit source -w >/dev/null 2>"$tmp/bad_err"
rc=$?
[[ $rc -eq 1 ]] || fail "-w on a file with errors: exit status $rc, not 1"
grep -q ': error: ' "$tmp/bad_err" || fail "-w hid an error"

if [[ $failures -eq 0 ]]; then echo "PASS"; else echo "$failures failures"; fi
[[ $failures -eq 0 ]]
