#!/usr/bin/env bash
# examples/cpp's program (tgrad's C++ API) against the command line:
#   $1 differentiate_kernel, $2 tgrad; run from the runfiles root.
set -u
example=$1
tgrad=$2
tmp=${TEST_TMPDIR:-$(mktemp -d)}
failures=0
fail() { echo "FAIL: $*"; failures=$((failures + 1)); }

"$example" >"$tmp/out" 2>"$tmp/err" || fail "the example exited with $?: $(cat "$tmp/err")"
[[ -s "$tmp/err" ]] && fail "the example printed diagnostics: $(cat "$tmp/err")"
grep -q '^# Launch protocol:$' "$tmp/out" || fail "no '# Launch protocol:' line"
sed '/^# Launch protocol:$/,$d' "$tmp/out" >"$tmp/source"
sed '1,/^# Launch protocol:$/d' "$tmp/out" >"$tmp/protocol"

grep -q '^def bias_gelu_kernel_bwd(' "$tmp/source" || fail "no backward kernel bias_gelu_kernel_bwd in the source"
"$tgrad" examples/gelu_bias.py --kernel bias_gelu_kernel --wrt X,B >"$tmp/cli_source" 2>/dev/null ||
  fail "tgrad exited with $?"
cmp -s "$tmp/source" "$tmp/cli_source" || fail "the backward differs from tgrad's: $(diff "$tmp/cli_source" "$tmp/source" | head -20)"
"$tgrad" examples/gelu_bias.py --kernel bias_gelu_kernel --wrt X,B --emit json >"$tmp/cli_protocol" 2>/dev/null ||
  fail "tgrad --emit json exited with $?"
cmp -s "$tmp/protocol" "$tmp/cli_protocol" || fail "the protocol differs from tgrad --emit json's"
/usr/bin/python3 -c 'import json, sys; p = json.load(open(sys.argv[1])); assert p["backward"] == "bias_gelu_kernel_bwd", p["backward"]' \
  "$tmp/protocol" || fail "the protocol is not JSON naming the backward bias_gelu_kernel_bwd"

# A request that does not fit: an error value, rendered, exit status 1.
"$example" examples/gelu_bias.py bias_gelu_kernel Q >"$tmp/bad_out" 2>"$tmp/bad_err"
rc=$?
[[ $rc -eq 1 ]] || fail "a bad --wrt exited with $rc, not 1"
grep -q "^tgrad: error: --wrt Q: 'bias_gelu_kernel' has no parameter 'Q'$" "$tmp/bad_err" ||
  fail "a bad --wrt printed: $(cat "$tmp/bad_err")"

if [[ $failures -eq 0 ]]; then echo "PASS"; else echo "$failures failures"; fi
[[ $failures -eq 0 ]]
