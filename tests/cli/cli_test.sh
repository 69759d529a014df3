#!/usr/bin/env bash
# Tests of the tgrad command line: flags, exit status, output files, stdin,
# diagnostics. Run by Bazel as an sh_test with the tgrad binary as $1; the
# working directory is the runfiles root, where tests/kernels/*.py are.
#
# Exit status contract: 0 success, 1 errors in the input, 2 misuse of the
# command line.
set -u

if [ $# -lt 1 ]; then
  echo "usage: $0 PATH/TO/tgrad" >&2
  exit 2
fi
TGRAD=$1
case "$TGRAD" in
  /*) ;;
  *) TGRAD="$PWD/$TGRAD" ;;
esac

KERNELS=tests/kernels
FN1=$KERNELS/fn1.py

TMP=${TEST_TMPDIR:-}
if [ -z "$TMP" ]; then
  TMP=$(mktemp -d)
  trap 'rm -rf "$TMP"' EXIT
fi
TMP="$TMP/cli_test.$$"
mkdir -p "$TMP"

FAILURES=0
CHECKS=0

fail() {
  FAILURES=$((FAILURES + 1))
  echo "FAIL: $1" >&2
  if [ $# -gt 1 ]; then echo "      $2" >&2; fi
}

# run NAME ARGS...: runs tgrad with ARGS, stdin from /dev/null unless the
# caller redirects; leaves $TMP/NAME.out, $TMP/NAME.err and RC.
run() {
  local name=$1
  shift
  "$TGRAD" "$@" >"$TMP/$name.out" 2>"$TMP/$name.err"
  RC=$?
}

# expect_rc CHECK WANT: the last run exited with WANT.
expect_rc() {
  CHECKS=$((CHECKS + 1))
  if [ "$RC" -ne "$2" ]; then
    fail "$1" "exit status $RC, expected $2; stderr: $(head -c 400 "$TMP/${3:-$1}.err" 2>/dev/null)"
    return 1
  fi
  return 0
}

# expect_grep CHECK FILE PATTERN (extended regex): FILE has a line matching.
expect_grep() {
  CHECKS=$((CHECKS + 1))
  if ! grep -Eq -- "$3" "$2"; then
    fail "$1" "no line matching /$3/ in $(basename "$2"): $(head -c 400 "$2")"
    return 1
  fi
  return 0
}

# expect_line CHECK FILE LINE: FILE has exactly this line (no regex).
expect_line() {
  CHECKS=$((CHECKS + 1))
  if ! grep -Fxq -- "$3" "$2"; then
    fail "$1" "no line '$3' in $(basename "$2"): $(head -c 400 "$2")"
    return 1
  fi
  return 0
}

# expect_no_grep CHECK FILE PATTERN: no line of FILE matches.
expect_no_grep() {
  CHECKS=$((CHECKS + 1))
  if grep -Eq -- "$3" "$2"; then
    fail "$1" "unexpected line matching /$3/ in $(basename "$2"): $(grep -E -- "$3" "$2" | head -3)"
    return 1
  fi
  return 0
}

# expect_empty CHECK FILE
expect_empty() {
  CHECKS=$((CHECKS + 1))
  if [ -s "$2" ]; then
    fail "$1" "expected $(basename "$2") to be empty, it has: $(head -c 400 "$2")"
    return 1
  fi
  return 0
}

# expect_nonempty CHECK FILE
expect_nonempty() {
  CHECKS=$((CHECKS + 1))
  if [ ! -s "$2" ]; then
    fail "$1" "expected $(basename "$2") to be non-empty"
    return 1
  fi
  return 0
}

# expect_same CHECK FILE1 FILE2
expect_same() {
  CHECKS=$((CHECKS + 1))
  if ! cmp -s "$2" "$3"; then
    fail "$1" "$(basename "$2") and $(basename "$3") differ: $(diff "$2" "$3" | head -10)"
    return 1
  fi
  return 0
}

if [ ! -x "$TGRAD" ]; then
  echo "FAIL: binary: '$TGRAD' is not an executable file" >&2
  exit 1
fi
if [ ! -f "$FN1" ]; then
  echo "FAIL: setup: $FN1 not found (working directory $PWD)" >&2
  exit 1
fi

# --- --help and --version -------------------------------------------------------

run help --help
expect_rc help_exit_0 0 help
expect_grep help_mentions_dump_ast "$TMP/help.out" '--dump-ast'
expect_grep help_mentions_emit "$TMP/help.out" '--emit'

run version --version
expect_rc version_exit_0 0 version
expect_grep version_prints_tgrad_and_version "$TMP/version.out" '^tgrad [0-9]+\.[0-9]+(\.[0-9]+)?'

# --- --dump-ast -----------------------------------------------------------------

run dump --dump-ast "$FN1"
expect_rc dump_ast_exit_0 0 dump
expect_empty dump_ast_no_stderr "$TMP/dump.err"
expect_grep dump_ast_has_function_fn1 "$TMP/dump.out" '^ *Function fn1 @[0-9]+:[0-9]+'
expect_grep dump_ast_fn1_location "$TMP/dump.out" 'Function fn1 @8:1$'
expect_grep dump_ast_has_statement_location "$TMP/dump.out" 'Assign @9:5$'
expect_grep dump_ast_has_line_col_locations "$TMP/dump.out" '@[0-9]+:[0-9]+$'
expect_grep dump_ast_has_other_functions "$TMP/dump.out" 'Function fn2_kernel @'
# fn1.py's launcher code under `if __name__ == "__main__":` is skipped.
expect_no_grep dump_ast_skips_launcher "$TMP/dump.out" 'manual_seed'

# Options may come before the file too.
run dump_order "$FN1" --dump-ast
expect_rc dump_ast_flag_after_file_exit_0 0 dump_order
expect_same dump_ast_flag_order_irrelevant "$TMP/dump.out" "$TMP/dump_order.out"

# --- --emit source ----------------------------------------------------------------

HAVE_PYTHON=0
if command -v python3 >/dev/null 2>&1 && python3 -c 'import ast' >/dev/null 2>&1; then
  HAVE_PYTHON=1
else
  echo "note: python3 not found; skipping the checks that the emitted source parses as Python" >&2
fi

for kernel in "$KERNELS"/*.py; do
  base=$(basename "$kernel" .py)
  run "emit_$base" --emit source "$kernel"
  expect_rc "emit_source_${base}_exit_0" 0 "emit_$base" || continue
  expect_nonempty "emit_source_${base}_nonempty" "$TMP/emit_$base.out"
  if [ "$HAVE_PYTHON" = 1 ]; then
    CHECKS=$((CHECKS + 1))
    if ! python3 -c 'import ast,sys; ast.parse(sys.stdin.read())' <"$TMP/emit_$base.out" 2>"$TMP/py_$base.err"; then
      fail "emit_source_${base}_parses_as_python" "$(tail -3 "$TMP/py_$base.err")"
    fi
  fi
done
expect_grep emit_source_has_jit_decorator "$TMP/emit_fn1.out" '^@triton\.jit$'
expect_grep emit_source_has_def_fn1 "$TMP/emit_fn1.out" '^def fn1\(x, y\):$'
expect_no_grep emit_source_skips_launcher "$TMP/emit_fn1.out" 'manual_seed'

# Printing is a fixed point: the emitted source, parsed and emitted again, is the same.
cp "$TMP/emit_fn1.out" "$TMP/emitted_fn1.py"
run emit_again --emit source "$TMP/emitted_fn1.py"
expect_rc emit_source_reparse_exit_0 0 emit_again
expect_same emit_source_fixed_point "$TMP/emit_fn1.out" "$TMP/emit_again.out"

# --- -o FILE ----------------------------------------------------------------------

rm -f "$TMP/written.txt"
run out_file --dump-ast -o "$TMP/written.txt" "$FN1"
expect_rc output_file_exit_0 0 out_file
expect_empty output_file_nothing_on_stdout "$TMP/out_file.out"
CHECKS=$((CHECKS + 1))
if [ -f "$TMP/written.txt" ]; then
  expect_same output_file_content_matches_stdout "$TMP/written.txt" "$TMP/dump.out"
else
  fail output_file_written "$TMP/written.txt was not created"
fi

rm -f "$TMP/written2.py"
run out_file2 --emit source --output "$TMP/written2.py" "$FN1"
expect_rc output_long_flag_exit_0 0 out_file2
expect_empty output_long_flag_nothing_on_stdout "$TMP/out_file2.out"
CHECKS=$((CHECKS + 1))
if [ -f "$TMP/written2.py" ]; then
  expect_same output_long_flag_content "$TMP/written2.py" "$TMP/emit_fn1.out"
else
  fail output_long_flag_written "$TMP/written2.py was not created"
fi

run out_dash --dump-ast -o - "$FN1"
expect_rc output_dash_exit_0 0 out_dash
expect_same output_dash_is_stdout "$TMP/out_dash.out" "$TMP/dump.out"

# --- FILE = - reads standard input --------------------------------------------------

"$TGRAD" --emit source - <"$FN1" >"$TMP/stdin.out" 2>"$TMP/stdin.err"
RC=$?
expect_rc stdin_exit_0 0 stdin
expect_same stdin_emit_same_as_file "$TMP/stdin.out" "$TMP/emit_fn1.out"

"$TGRAD" --dump-ast - <"$FN1" >"$TMP/stdin_dump.out" 2>"$TMP/stdin_dump.err"
RC=$?
expect_rc stdin_dump_ast_exit_0 0 stdin_dump
expect_grep stdin_dump_ast_has_fn1 "$TMP/stdin_dump.out" 'Function fn1 @8:1$'

# --- --fn NAME ----------------------------------------------------------------------

run fn_dump --dump-ast --fn fn1 "$FN1"
expect_rc fn_dump_exit_0 0 fn_dump
expect_grep fn_dump_has_fn1 "$TMP/fn_dump.out" 'Function fn1 @8:1$'
CHECKS=$((CHECKS + 1))
count=$(grep -Ec 'Function [A-Za-z_0-9]+ @' "$TMP/fn_dump.out")
if [ "$count" -ne 1 ]; then
  fail fn_dump_only_one_function "$count functions in the output: $(grep -E 'Function ' "$TMP/fn_dump.out")"
fi
expect_no_grep fn_dump_no_fn2 "$TMP/fn_dump.out" 'fn2|fn1_kernel'

run fn_emit --emit source --fn fn1 "$FN1"
expect_rc fn_emit_exit_0 0 fn_emit
expect_grep fn_emit_has_fn1 "$TMP/fn_emit.out" '^def fn1\('
CHECKS=$((CHECKS + 1))
count=$(grep -Ec '^def ' "$TMP/fn_emit.out")
if [ "$count" -ne 1 ]; then
  fail fn_emit_only_one_function "$count defs in the output: $(grep -E '^def ' "$TMP/fn_emit.out")"
fi
expect_no_grep fn_emit_no_others "$TMP/fn_emit.out" 'def fn2|def fn1_kernel|^import '

# --- input errors: exit 1 -------------------------------------------------------------

run missing --dump-ast "$TMP/does_not_exist.py"
expect_rc missing_file_exit_1 1 missing
expect_grep missing_file_message "$TMP/missing.err" '^tgrad: error: cannot open'
expect_empty missing_file_nothing_on_stdout "$TMP/missing.out"

cat >"$TMP/bad.py" <<'EOF'
import triton
import triton.language as tl


@triton.jit
def f(x, y):
    a = (x +
EOF
run bad --dump-ast "$TMP/bad.py"
expect_rc malformed_exit_1 1 bad
expect_grep malformed_has_file_line_col_error "$TMP/bad.err" '^[^:]*bad\.py:[0-9]+:[0-9]+: error: '
expect_line malformed_exact_location "$TMP/bad.err" "$TMP/bad.py:7:9: error: '(' was never closed"
expect_grep malformed_shows_source_line "$TMP/bad.err" '^    a = \(x \+$'
expect_grep malformed_has_caret_line "$TMP/bad.err" '^ *\^~*$'
expect_grep malformed_caret_under_column "$TMP/bad.err" '^        \^$'
expect_empty malformed_nothing_on_stdout "$TMP/bad.out"

# Flags whose values change the backward: up to 64 combinations, one specialization each (a warning names them);
# past 64, a located error asks for -D (src/ad/SpecializationFlags.h).
cat >"$TMP/seven_flags.py" <<'EOF'
import triton
import triton.language as tl


@triton.jit
def seven_flags_kernel(x_ptr, y_ptr, F0: tl.constexpr, F1: tl.constexpr, F2: tl.constexpr, F3: tl.constexpr,
                       F4: tl.constexpr, F5: tl.constexpr, F6: tl.constexpr):
    offs = tl.arange(0, 16)
    x = tl.load(x_ptr + offs)
    if F0:
        a = x * 2.0
    if F1:
        b = x * 3.0
    if F2:
        c = x * 4.0
    if F3:
        d = x * 5.0
    if F4:
        e = x * 6.0
    if F5:
        f = x * 7.0
    if F6:
        g = x * 8.0
    if F0:
        x = x + a
    if F1:
        x = x + b
    if F2:
        x = x + c
    if F3:
        x = x + d
    if F4:
        x = x + e
    if F5:
        x = x + f
    if F6:
        x = x + g
    tl.store(y_ptr + offs, x)
EOF
run seven_flags "$TMP/seven_flags.py" --wrt x_ptr
expect_rc seven_flags_exit_1 1 seven_flags
expect_grep seven_flags_located "$TMP/seven_flags.err" \
  "seven_flags\.py:6:5: error: the backward of 'seven_flags_kernel' depends on the values of .*\(128 combinations\): give them with -D"
run six_flags "$TMP/seven_flags.py" --wrt x_ptr -D F6=False
expect_rc six_flags_exit_0 0 six_flags
expect_grep six_flags_warns "$TMP/six_flags.err" "holds one specialization per combination of .* \(64\)"

run bad_emit --emit source "$TMP/bad.py"
expect_rc malformed_emit_exit_1 1 bad_emit
expect_empty malformed_emit_nothing_on_stdout "$TMP/bad_emit.out"

"$TGRAD" --dump-ast - <"$TMP/bad.py" >"$TMP/bad_stdin.out" 2>"$TMP/bad_stdin.err"
RC=$?
expect_rc malformed_stdin_exit_1 1 bad_stdin
expect_grep malformed_stdin_named_stdin "$TMP/bad_stdin.err" '^<stdin>:7:9: error: '

# No output file is written when the input has errors.
rm -f "$TMP/not_written.txt"
run bad_out --dump-ast -o "$TMP/not_written.txt" "$TMP/bad.py"
expect_rc malformed_with_output_exit_1 1 bad_out
CHECKS=$((CHECKS + 1))
if [ -s "$TMP/not_written.txt" ]; then
  fail malformed_writes_no_output "$TMP/not_written.txt has content"
fi

# --- command-line misuse: exit 2 --------------------------------------------------------

run noargs
expect_rc no_arguments_exit_2 2 noargs
expect_nonempty no_arguments_message "$TMP/noargs.err"

run unknown --no-such-flag --dump-ast "$FN1"
expect_rc unknown_flag_exit_2 2 unknown
expect_grep unknown_flag_message "$TMP/unknown.err" '^tgrad: error: '

run noaction "$FN1"
expect_rc no_action_exit_2 2 noaction
expect_grep no_action_message "$TMP/noaction.err" '^tgrad: error: '
expect_empty no_action_nothing_on_stdout "$TMP/noaction.out"

run nosuch --dump-ast --fn nosuch "$FN1"
expect_rc fn_nosuch_exit_2 2 nosuch
expect_grep fn_nosuch_message "$TMP/nosuch.err" 'nosuch'
expect_empty fn_nosuch_nothing_on_stdout "$TMP/nosuch.out"

run llvm --emit llvm "$FN1"
expect_rc emit_llvm_exit_2 2 llvm
expect_grep emit_llvm_message "$TMP/llvm.err" '^tgrad: error: '

run both --dump-ast --emit source "$FN1"
expect_rc dump_ast_with_emit_exit_2 2 both
expect_grep dump_ast_with_emit_message "$TMP/both.err" '^tgrad: error: '
expect_empty dump_ast_with_emit_nothing_on_stdout "$TMP/both.out"

run emit_novalue "$FN1" --emit
expect_rc emit_without_value_exit_2 2 emit_novalue

# ---------------------------------------------------------------- tgrad run / tgrad check

VADD=$KERNELS/vector_add.py
VADD_ARGS="--kernel add_kernel --grid 4 --arg x_ptr=fp32[1000] --arg y_ptr=fp32[1000] --arg out_ptr=fp32[1000]:zeros -D BLOCK_SIZE=256"

run run_ok run $VADD $VADD_ARGS --arg n_elements=1000 --out "$TMP/npy"
expect_rc run_exit_0 0 run_ok
expect_grep run_summary "$TMP/run_ok.out" '^out_ptr +fp32\[1000\] +min='
CHECKS=$((CHECKS + 1))
[ -f "$TMP/npy/out_ptr.npy" ] && head -c 6 "$TMP/npy/out_ptr.npy" | grep -q NUMPY || fail run_writes_npy "no $TMP/npy/out_ptr.npy"

# Inputs from the .npy files a run wrote (`:npy(PATH)`): the same inputs, the same results.
run run_from_npy run $VADD --kernel add_kernel --grid 4 -D BLOCK_SIZE=256 --arg n_elements=1000 \
  --arg "x_ptr=fp32[1000]:npy($TMP/npy/x_ptr.npy)" --arg "y_ptr=fp32[1000]:npy($TMP/npy/y_ptr.npy)" \
  --arg "out_ptr=fp32[1000]:zeros"
expect_rc run_from_npy_exit_0 0 run_from_npy
CHECKS=$((CHECKS + 1))
cmp -s "$TMP/run_ok.out" "$TMP/run_from_npy.out" || fail run_reads_npy "inputs read back from .npy gave other results"
run run_npy_shape run $VADD $VADD_ARGS --arg n_elements=1000 --arg "x_ptr=fp32[10,100]:npy($TMP/npy/x_ptr.npy)"
expect_rc run_npy_other_shape_exit_2 2 run_npy_shape
expect_grep run_npy_other_shape_named "$TMP/run_npy_shape.err" "holds an array of another shape"

run run_same_seed run $VADD $VADD_ARGS --arg n_elements=1000
CHECKS=$((CHECKS + 1))
cmp -s "$TMP/run_ok.out" "$TMP/run_same_seed.out" || fail run_is_deterministic "two runs with seed 0 differ"
run run_other_seed run $VADD $VADD_ARGS --arg n_elements=1000 --seed 7
CHECKS=$((CHECKS + 1))
cmp -s "$TMP/run_ok.out" "$TMP/run_other_seed.out" && fail run_seed_changes_inputs "--seed 7 gave the same buffers"

run run_oob run $VADD $VADD_ARGS --arg n_elements=1024
expect_rc run_out_of_bounds_exit_1 1 run_oob
expect_grep run_out_of_bounds_located "$TMP/run_oob.err" "vector_add.py:[0-9]+:[0-9]+: error: out-of-bounds load from 'x_ptr'"

run run_missing run $VADD --kernel add_kernel --grid 4 --arg x_ptr=fp32[8]
expect_rc run_missing_argument_exit_2 2 run_missing
expect_grep run_missing_argument_named "$TMP/run_missing.err" "'y_ptr'"

run run_bad_dtype run $VADD $VADD_ARGS --arg n_elements=1000 --arg x_ptr=fp33[4]
expect_rc run_bad_dtype_exit_2 2 run_bad_dtype
run run_bad_spec run $VADD --kernel add_kernel --grid 4 --arg x_ptr=fp33[1000] --arg y_ptr=fp32[1000] --arg out_ptr=fp32[1000] --arg n_elements=1000 -D BLOCK_SIZE=256
expect_rc run_unknown_dtype_exit_2 2 run_bad_spec
expect_grep run_unknown_dtype_named "$TMP/run_bad_spec.err" "x_ptr=fp33\[1000\]: unknown dtype 'fp33'"
run run_unknown_arg run $VADD $VADD_ARGS --arg n_elements=1000 --arg nope=3
expect_rc run_unknown_argument_exit_2 2 run_unknown_arg
expect_grep run_unknown_argument_named "$TMP/run_unknown_arg.err" "no parameter 'nope'"
run run_no_grid run $VADD --kernel add_kernel
expect_rc run_without_grid_exit_2 2 run_no_grid

run run_fn run $FN1 --fn fn1 --arg x=fp32[16] --arg 'y=fp32[16]:uniform(0.5,2)'
expect_rc run_tile_function_exit_0 0 run_fn
expect_grep run_tile_function_result "$TMP/run_fn.out" '^result +fp32\[16, 16\]'

run check_valid check $FN1 --fn fn1 --arg x=fp32[16] --arg 'y=fp32[16]:uniform(0.5,2)' --wrt 0,y
expect_rc check_fn1_passes_exit_0 0 check_valid
expect_grep check_prints_per_argument "$TMP/check_valid.out" '^  y +fp32\[16\] +rel_err=.* PASS$'
expect_grep check_prints_verdict "$TMP/check_valid.out" '^PASS$'
run kjson $VADD --kernel add_kernel --wrt x_ptr --arg 'x_ptr=*fp32' --arg 'y_ptr=*fp32' --arg 'out_ptr=*fp32' --arg n_elements=i32 --emit json
expect_rc kernel_json_exit_0 0 kjson
expect_grep kernel_json_gradient_role "$TMP/kjson.out" '"role": "input gradient"'
if command -v python3 >/dev/null 2>&1; then
  CHECKS=$((CHECKS + 1))
  python3 -c 'import json,sys; json.load(sys.stdin)' <"$TMP/kjson.out" || fail kernel_json_parses "not valid JSON"
fi
run json_no_wrt --emit json $FN1
expect_rc json_without_wrt_exit_2 2 json_no_wrt

run check_kernel check $VADD $VADD_ARGS --arg n_elements=1000 --wrt x_ptr,y_ptr
expect_rc check_kernel_passes_exit_0 0 check_kernel
expect_grep check_kernel_verdict "$TMP/check_kernel.out" '^PASS$'
run check_kernel_scalar check $VADD $VADD_ARGS --arg n_elements=1000 --wrt n_elements
expect_rc check_kernel_wrt_scalar_exit_2 2 check_kernel_scalar
# A pointer passed as None (`if W is None:` in the kernel), through the generic backward's dispatch on it.
OPT_ARGS="--kernel optional_affine_norm_kernel --grid 3 -D BLOCK=32 --arg X=fp32[3,20] --arg Y=fp32[3,20] --arg n_cols=20 --arg eps=0.001"
run check_none_pointer check $KERNELS/optional_pointers.py $OPT_ARGS --arg W=None --arg B=fp32[20] --wrt X,B --generic
expect_rc check_none_pointer_exit_0 0 check_none_pointer
expect_grep check_none_pointer_verdict "$TMP/check_none_pointer.out" '^PASS$'
run check_none_wrt check $KERNELS/optional_pointers.py $OPT_ARGS --arg W=None --arg B=fp32[20] --wrt X,W
expect_rc check_none_wrt_exit_2 2 check_none_wrt
expect_grep check_none_wrt_message "$TMP/check_none_wrt.err" "'W' is passed as None \\(--arg W=None\\) and has no gradient; leave it out of --wrt"

# A loop reversed with a tape: the JSON sizes the tape, the check sizes it from the interpreter's trip counts.
REC=$KERNELS/recurrence.py
run tape_json $REC --kernel running_max_kernel --wrt X --arg 'X=*fp32' --arg 'Y=*fp32' --arg n_chunks=i32 --emit json
expect_rc tape_json_exit_0 0 tape_json
expect_grep tape_json_scratch "$TMP/tape_json.out" '"name": "m_tape"'
expect_grep tape_json_trips_expression "$TMP/tape_json.out" '"max_over_programs"'
expect_grep tape_json_trips "$TMP/tape_json.out" '"name": "tape_trips"'
run tape_check check $REC --kernel running_max_kernel --grid 3 --arg 'X=fp32[3,5,16]' --arg 'Y=fp32[3,16]:zeros' \
  --arg n_chunks=5 -D BLOCK=16 --wrt X
expect_rc tape_check_passes_exit_0 0 tape_check
expect_grep tape_check_verdict "$TMP/tape_check.out" '^PASS$'

# Owner-computes: without an epilogue, matmul's dA and dB move to kernels of their own (grids in the protocol),
# and the interpreter's gradient check runs them on a grid whose edge tiles wrap (M % 16 != 0, K % 16 != 0).
MM=$KERNELS/matmul.py
MM_ARGS="--arg M=40 --arg N=28 --arg K=24 --arg stride_am=24 --arg stride_ak=1 --arg stride_bk=28 --arg stride_bn=1 \
  --arg stride_cm=28 --arg stride_cn=1 -D BLOCK_SIZE_M=16 -D BLOCK_SIZE_N=16 -D BLOCK_SIZE_K=16"
for act in "''" "'relu'" "'relu' --deterministic"; do
  name=owner_check_$(case "$act" in "''") echo plain ;; "'relu'") echo relu ;; *) echo relu_prologue ;; esac)
  run $name check $MM --kernel matmul_kernel --grid 3,2 --arg 'a_ptr=fp16[40,24]' --arg 'b_ptr=fp16[24,28]' \
    --arg 'c_ptr=fp16[40,28]:zeros' $MM_ARGS -D "ACTIVATION=${act%% *}" $([ "${act#* }" != "$act" ] && echo "${act#* }") \
    --wrt a_ptr,b_ptr
  expect_rc ${name}_exit_0 0 $name
  expect_grep ${name}_verdict "$TMP/$name.out" '^PASS$'
done
run owner_explain $MM --kernel matmul_kernel --wrt a_ptr,b_ptr --arg 'a_ptr=*fp16' --arg 'b_ptr=*fp16' --arg 'c_ptr=*fp16' \
  --arg M=i32 --arg N=i32 --arg K=i32 --arg stride_am=i32 --arg stride_ak=i32 --arg stride_bk=i32 --arg stride_bn=i32 \
  --arg stride_cm=i32 --arg stride_cn=i32 -D "ACTIVATION=''" --explain
expect_rc owner_explain_exit_0 0 owner_explain
expect_grep owner_explain_da "$TMP/owner_explain.err" "\\(da_ptr\\) is gathered by its owners: 'matmul_kernel_bwd_da_ptr'"
expect_grep owner_explain_db "$TMP/owner_explain.err" "\\(db_ptr\\) is gathered by its owners: 'matmul_kernel_bwd_db_ptr'"
# The owner loops over the forward's programs along N: full column blocks without masks, the ragged last one
# with them, unpipelined (src/ad/reverse/MaskPeeling.h).
expect_grep owner_kernel_loops "$TMP/owner_explain.out" 'for pid_n in range\(0, pid_n_last_unmasked\):'
expect_grep owner_kernel_tail "$TMP/owner_explain.out" \
  'for pid_n in tl.range\(pid_n_last_unmasked, num_programs_1, num_stages=1\):'
# With the relu epilogue the owners need relu'(acc): read back from the stored output as (C > 0)
# (src/ad/EpilogueReadBack.h), so the loop is not replayed and dA, dB go to their owners; C is passed as the
# forward left it.
run owner_relu_default $MM --kernel matmul_kernel --wrt a_ptr,b_ptr --arg 'a_ptr=*fp16' --arg 'b_ptr=*fp16' \
  --arg 'c_ptr=*fp16' --arg M=i32 --arg N=i32 --arg K=i32 --arg stride_am=i32 --arg stride_ak=i32 --arg stride_bk=i32 \
  --arg stride_bn=i32 --arg stride_cm=i32 --arg stride_cn=i32 -D "ACTIVATION='relu'" --explain
expect_rc owner_relu_default_exit_0 0 owner_relu_default
expect_grep owner_relu_default_why "$TMP/owner_relu_default.err" \
  "line 52: the relu epilogue's derivative is read from the output the forward stored through 'c_ptr'"
expect_grep owner_relu_default_owner "$TMP/owner_relu_default.err" "\\(da_ptr\\) is gathered by its owners: 'matmul_kernel_bwd_da_ptr'"
expect_grep owner_relu_default_mask "$TMP/owner_relu_default.out" \
  'c_stored_positive = tl.load\(c_ptrs, mask=c_mask, other=0.0\).to\(tl.float32\) > 0.0'
run owner_relu_json $MM --kernel matmul_kernel --wrt a_ptr,b_ptr --arg 'a_ptr=*fp16' --arg 'b_ptr=*fp16' \
  --arg 'c_ptr=*fp16' --arg M=i32 --arg N=i32 --arg K=i32 --arg stride_am=i32 --arg stride_ak=i32 --arg stride_bk=i32 \
  --arg stride_bn=i32 --arg stride_cm=i32 --arg stride_cn=i32 -D "ACTIVATION='relu'" --emit json
expect_rc owner_relu_json_exit_0 0 owner_relu_json
expect_grep owner_relu_json_saved "$TMP/owner_relu_json.out" '"contents": "as the forward left it"'
# Epilogues whose derivative the stored output does not give, or whose output is not stored once: the owners need
# the accumulator, so by default the gradients stay with atomics (and --explain names --deterministic); with
# --deterministic a prologue saves the epilogue's adjoint per program.
cat >"$TMP/act_matmul.py" <<'PY'
import triton
import triton.language as tl


@triton.jit
def act_matmul_kernel(x_ptr, w_ptr, y_ptr, z_ptr, M, N, K, BM: tl.constexpr, BN: tl.constexpr, BK: tl.constexpr,
                      ACT: tl.constexpr):
    rm = tl.program_id(0) * BM + tl.arange(0, BM)
    rn = tl.program_id(1) * BN + tl.arange(0, BN)
    acc = tl.zeros((BM, BN), dtype=tl.float32)
    for k in range(0, tl.cdiv(K, BK)):
        kk = k * BK + tl.arange(0, BK)
        x = tl.load(x_ptr + rm[:, None] * K + kk[None, :], mask=(rm[:, None] < M) & (kk[None, :] < K), other=0.0)
        w = tl.load(w_ptr + kk[:, None] * N + rn[None, :], mask=(kk[:, None] < K) & (rn[None, :] < N), other=0.0)
        acc += tl.dot(x, w)
    if ACT == "leaky":
        acc = tl.where(acc > 0, acc, 0.01 * acc)
    elif ACT == "sigmoid":
        acc = tl.sigmoid(acc)
    elif ACT == "tanh":
        acc = tl.math.tanh(acc * 0.5)
    else:
        acc = tl.maximum(acc, 0.0)
    mask = (rm[:, None] < M) & (rn[None, :] < N)
    tl.store(y_ptr + rm[:, None] * N + rn[None, :], acc, mask=mask)
    if ACT == "twice":
        tl.store(z_ptr + rm[:, None] * N + rn[None, :], acc, mask=mask)
PY
AM="$TMP/act_matmul.py"
AM_CHECK="--kernel act_matmul_kernel --grid 3,2 --arg x_ptr=fp32[40,24] --arg w_ptr=fp32[24,28] --arg y_ptr=fp32[40,28]:zeros \
  --arg z_ptr=fp32[40,28]:zeros --arg M=40 --arg N=28 --arg K=24 -D BM=16 -D BN=16 -D BK=16"
run act_relu "$AM" --wrt x_ptr,w_ptr -D "ACT='relu'" --explain
expect_rc act_relu_exit_0 0 act_relu
expect_grep act_relu_why "$TMP/act_relu.err" "line 23: the relu epilogue's derivative is read from the output the forward stored through 'y_ptr'"
expect_grep act_relu_owner "$TMP/act_relu.err" "\\(dx_ptr\\) is gathered by its owners"
run act_twice "$AM" --wrt x_ptr,w_ptr -D "ACT='twice'" --explain
expect_rc act_twice_exit_0 0 act_twice
expect_grep act_twice_why "$TMP/act_twice.err" \
  "line 23: the epilogue's derivative is computed from its input, as written .*: its value is read by more than the store"
expect_grep act_twice_atomics "$TMP/act_twice.err" "\\(dx_ptr\\) stays with atomics"
# Sigmoid and tanh: their rules need only the output, read back where the buffer holds it exactly (its type given,
# y's); rounded to float16, or with the types not given, the loop is replayed.
AM_TYPES="--arg M=i32 --arg N=i32 --arg K=i32"
for t in fp32 fp16; do
  run act_sigmoid_$t "$AM" --wrt x_ptr,w_ptr --arg "x_ptr=*$t" --arg "w_ptr=*$t" --arg "y_ptr=*$t" --arg "z_ptr=*$t" \
    $AM_TYPES -D "ACT='sigmoid'" --explain
  expect_rc act_sigmoid_${t}_exit_0 0 act_sigmoid_$t
done
expect_grep act_sigmoid_fp32_why "$TMP/act_sigmoid_fp32.err" \
  "line 19: the sigmoid epilogue's value is read from the output the forward stored through 'y_ptr'"
expect_grep act_sigmoid_fp32_load "$TMP/act_sigmoid_fp32.out" 'acc_4 = tl.load\(y_ptr'
expect_grep act_sigmoid_fp16_why "$TMP/act_sigmoid_fp16.err" "line 19: .*: sigmoid's derivative is a function of its \
output, but 'y_ptr' holds it rounded to float16"
run act_sigmoid_generic "$AM" --wrt x_ptr,w_ptr -D "ACT='sigmoid'" --explain
expect_grep act_sigmoid_generic_why "$TMP/act_sigmoid_generic.err" "the buffers' types were not given"
run act_tanh "$AM" --wrt x_ptr,w_ptr --arg x_ptr=*fp32 --arg w_ptr=*fp32 --arg y_ptr=*fp32 --arg z_ptr=*fp32 $AM_TYPES \
  -D "ACT='tanh'" --explain
expect_grep act_tanh_why "$TMP/act_tanh.err" "line 21: the tanh epilogue's value is read from the output"
run owner_relu_default "$AM" --wrt x_ptr,w_ptr -D "ACT='leaky'" --explain
expect_rc owner_leaky_default_exit_0 0 owner_relu_default
expect_grep owner_leaky_default_why "$TMP/owner_relu_default.err" "stays with atomics .*--deterministic saves it"
run owner_prologue "$AM" --wrt x_ptr,w_ptr -D "ACT='leaky'" --explain --deterministic
expect_rc owner_prologue_exit_0 0 owner_prologue
expect_grep owner_prologue_why "$TMP/owner_prologue.err" "\\(dx_ptr\\) is gathered by its owners: .*the prologue kernel replays"
expect_grep owner_prologue_kernel "$TMP/owner_prologue.out" '^def act_matmul_kernel_bwd_prologue\('
expect_grep owner_prologue_load "$TMP/owner_prologue.out" 'bacc_2 = tl.load\(bacc_2_saved \+'
for act in "'relu'" "'twice'" "'sigmoid'" "'tanh'" "'leaky' --deterministic"; do
  name=act_check_$(case "$act" in "'leaky' --deterministic") echo leaky_prologue ;; *) echo "${act//\'/}" ;; esac)
  run $name check "$AM" $AM_CHECK -D "ACT=${act%% *}" $([ "${act#* }" != "$act" ] && echo "${act#* }") --wrt x_ptr,w_ptr
  expect_rc ${name}_exit_0 0 $name
  expect_grep ${name}_verdict "$TMP/$name.out" '^PASS$'
done

# --deterministic says which gradients it leaves to atomics from several programs (a bias every row block
# loads), at the load, and says nothing where every gradient has a deterministic schedule.
cat >"$TMP/linear_bias.py" <<'PY'
import triton
import triton.language as tl


@triton.jit
def linear_bias_kernel(x_ptr, w_ptr, b_ptr, y_ptr, M, N, K, BM: tl.constexpr, BN: tl.constexpr, BK: tl.constexpr):
    rm = tl.program_id(0) * BM + tl.arange(0, BM)
    rn = tl.program_id(1) * BN + tl.arange(0, BN)
    acc = tl.zeros((BM, BN), dtype=tl.float32)
    for k in range(0, tl.cdiv(K, BK)):
        kk = k * BK + tl.arange(0, BK)
        x = tl.load(x_ptr + rm[:, None] * K + kk[None, :], mask=(rm[:, None] < M) & (kk[None, :] < K), other=0.0)
        w = tl.load(w_ptr + kk[:, None] * N + rn[None, :], mask=(kk[:, None] < K) & (rn[None, :] < N), other=0.0)
        acc += tl.dot(x, w)
    b = tl.load(b_ptr + rn, mask=rn < N, other=0.0)
    tl.store(y_ptr + rm[:, None] * N + rn[None, :], acc + b[None, :], mask=(rm[:, None] < M) & (rn[None, :] < N))
PY
run det_bias "$TMP/linear_bias.py" --wrt x_ptr,w_ptr,b_ptr --deterministic
expect_rc det_bias_exit_0 0 det_bias
expect_grep det_bias_warns "$TMP/det_bias.err" "linear_bias.py:15:9: warning: --deterministic: the gradient of 'b_ptr' through this load is still added with tl.atomic_add"
expect_no_grep det_bias_not_x "$TMP/det_bias.err" "gradient of '(x_ptr|w_ptr)'"
run det_bias_default "$TMP/linear_bias.py" --wrt x_ptr,w_ptr,b_ptr
expect_rc det_bias_default_exit_0 0 det_bias_default
expect_no_grep det_bias_default_quiet "$TMP/det_bias_default.err" "deterministic"
run det_owner $MM --kernel matmul_kernel --wrt a_ptr,b_ptr -D "ACTIVATION=''" --deterministic
expect_rc det_owner_exit_0 0 det_owner
expect_no_grep det_owner_quiet "$TMP/det_owner.err" "deterministic"

# Saved statistics: the backward reads Mean and Rstd; --no-grad drops their upstream gradients.
LN=$KERNELS/layer_norm.py
LN_TYPES="--arg X=*fp32 --arg Y=*fp32 --arg W=*fp32 --arg B=*fp32 --arg Mean=*fp32 --arg Rstd=*fp32 --arg stride_x_row=i32 --arg stride_y_row=i32 --arg N=i32 --arg eps=fp32"
run ln_json $LN --kernel layer_norm_fwd_kernel --wrt X,W,B $LN_TYPES --emit json
expect_rc ln_json_exit_0 0 ln_json
expect_grep ln_json_saved "$TMP/ln_json.out" '"contents": "as the forward left it"'
expect_grep ln_json_dmean "$TMP/ln_json.out" '"name": "dMean"'
run ln_no_grad_json $LN --kernel layer_norm_fwd_kernel --wrt X,W,B $LN_TYPES --no-grad Mean,Rstd --emit json
expect_rc ln_no_grad_json_exit_0 0 ln_no_grad_json
expect_no_grep ln_no_grad_json_no_dmean "$TMP/ln_no_grad_json.out" '"name": "dMean"'
expect_no_grep ln_no_grad_json_no_drstd "$TMP/ln_no_grad_json.out" '"name": "dRstd"'
for block in 32 128; do  # the looped backward, then the one-pass one
  run ln_no_grad_check_$block check $LN --kernel layer_norm_fwd_kernel --grid 3 --arg 'X=fp32[3,100]' --arg 'Y=fp32[3,100]' \
    --arg 'W=fp32[100]' --arg 'B=fp32[100]' --arg 'Mean=fp32[3]' --arg 'Rstd=fp32[3]' --arg stride_x_row=100 \
    --arg stride_y_row=100 --arg N=100 --arg eps=0.00001 -D BLOCK_SIZE=$block --wrt X,W,B --no-grad Mean,Rstd
  expect_rc ln_no_grad_check_${block}_exit_0 0 ln_no_grad_check_$block
  expect_grep ln_no_grad_check_${block}_verdict "$TMP/ln_no_grad_check_$block.out" '^PASS$'
done
run ln_no_grad_bad $LN --kernel layer_norm_fwd_kernel --wrt X,W,B $LN_TYPES --no-grad W
expect_rc ln_no_grad_bad_exit_1 1 ln_no_grad_bad
expect_grep ln_no_grad_bad_says "$TMP/ln_no_grad_bad.err" "error: --no-grad W: 'layer_norm_fwd_kernel' does not store through 'W'"
run no_grad_without_wrt $LN --kernel layer_norm_fwd_kernel --no-grad Mean
expect_rc no_grad_without_wrt_exit_2 2 no_grad_without_wrt

run kbwd $VADD --kernel add_kernel --wrt x_ptr --arg 'x_ptr=*fp32' --arg 'y_ptr=*fp32' --arg 'out_ptr=*fp32' --arg n_elements=i32 --explain
expect_rc kernel_backward_exit_0 0 kbwd
expect_grep kernel_backward_signature "$TMP/kbwd.out" '^def add_kernel_bwd\(x_ptr, y_ptr, out_ptr, n_elements, BLOCK_SIZE: tl.constexpr, dx_ptr, dout_ptr\):$'
expect_grep kernel_backward_explains "$TMP/kbwd.err" "explain: line 15: the gradient of the load through 'x_ptr' is a plain store"


run bwd $FN1 --fn fn1 --wrt 0,1 --arg 'x=fp32[N]' --arg 'y=fp32[N]'
expect_rc backward_exit_0 0 bwd
expect_grep backward_signature "$TMP/bwd.out" '^def fn1_bwd\(x, y, bout\):$'
expect_grep backward_grad_comment "$TMP/bwd.out" '^    # Grad of: a = tl.exp\(x\)$'
# The design card's command: a file holding only the seed's fn1, made jit by a call, and no other flag.
cat >"$TMP/seed_fn1.py" <<'EOF'
import triton
import triton.language as tl


def fn1(x, y):
    a = tl.exp(x)
    b = tl.log(tl.expand_dims(y, 1))
    c = a + b
    return a * b + tl.dot(c, c)


fn1_tt = triton.jit(fn1)
EOF
run seed_fn1 "$TMP/seed_fn1.py" --wrt 0,1
expect_rc seed_fn1_exit_0 0 seed_fn1
expect_grep seed_fn1_signature "$TMP/seed_fn1.out" '^def fn1_bwd\(x, y, bout\):$'
expect_grep seed_fn1_helper "$TMP/seed_fn1.out" '^def _tgrad_unbroadcast\(g, x\):$'
expect_grep seed_fn1_unbroadcast "$TMP/seed_fn1.out" '^    ba = _tgrad_unbroadcast\(ba_times_b \* b, a\)$'
expect_grep seed_fn1_assert "$TMP/seed_fn1.out" '^    tl.static_assert\(ba.shape == a.shape\)$'
expect_grep seed_fn1_generic "$TMP/seed_fn1.out" '^# Generic: the same backward for x = fp32\[x_0\], fp32\[x_0, x_1\]; y = fp32\[y_0\]\.$'
# Several jit functions that nothing else calls: --fn picks one.
run bwd_ambiguous $FN1 --wrt 0
expect_rc bwd_ambiguous_exit_2 2 bwd_ambiguous
expect_grep bwd_ambiguous_lists "$TMP/bwd_ambiguous.err" 'several jit functions that none of the others calls \(fn1_kernel, fn2_kernel\): pick one with --kernel NAME'
# A forward beside its hand-written backward (real kernel files): the one not named as a backward is chosen, with a note.
cat >"$TMP/fwd_bwd.py" <<'EOF'
import triton
import triton.language as tl


@triton.jit
def scale_fwd(X, Y, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    tl.store(Y + offs, tl.load(X + offs, mask=offs < n) * 3.0, mask=offs < n)


@triton.jit
def scale_bwd(DY, DX, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    tl.store(DX + offs, tl.load(DY + offs, mask=offs < n) * 3.0, mask=offs < n)


@triton.jit
def scaleBackwardKernel(DY, DX, n, BLOCK: tl.constexpr):
    scale_bwd(DY, DX, n, BLOCK)
EOF
run fwd_bwd "$TMP/fwd_bwd.py" --wrt 0
expect_rc fwd_bwd_exit_0 0 fwd_bwd
expect_grep fwd_bwd_note "$TMP/fwd_bwd.err" "^tgrad: note: differentiating 'scale_fwd', the file's one kernel not named as a backward \(the others: scaleBackwardKernel\); pick another with --kernel NAME$"
expect_grep fwd_bwd_backward "$TMP/fwd_bwd.out" '^def scale_fwd_bwd\(X, Y, n, BLOCK: tl.constexpr, dX, dY\):$'
run bwd_range $FN1 --fn fn1 --wrt 7 --arg 'x=fp32[N]'
expect_rc backward_wrt_out_of_range_exit_2 2 bwd_range
run check_range check $FN1 --fn fn1 --arg x=fp32[16] --arg y=fp32[16] --wrt 5
expect_rc check_wrt_out_of_range_exit_2 2 check_range
expect_grep check_wrt_out_of_range_message "$TMP/check_range.err" 'index 5 is out of range'

# libdevice and tl.math functions imported by name, aliased, or through module imports: `tgrad check` passes on each.
LD=$KERNELS/libdevice_imports.py
for k in tanh_scale_kernel tanh_alias_kernel rsqrt_kernel rsqrt_alias_kernel erf_kernel erf_alias_kernel pow_kernel \
    pow_alias_kernel exp2_kernel exp2_alias_kernel module_spellings_kernel tl_math_names_kernel; do
  run ld_check_$k check $LD --kernel $k --grid 3 --arg 'X=fp32[300]' --arg 'G=fp32[300]' --arg 'Y=fp32[300]:zeros' \
    --arg N=300 -D BLOCK=128 --wrt X,G
  expect_rc ld_check_${k}_exit_0 0 ld_check_$k
  expect_grep ld_check_${k}_verdict "$TMP/ld_check_$k.out" '^PASS$'
  expect_no_grep ld_check_${k}_no_warning "$TMP/ld_check_$k.err" 'warning'
done
# The zero-gradient audit: --explain lists the stores each input's loads reach.
run ld_explain $LD --kernel tanh_scale_kernel --wrt X,G --arg 'X=*fp32' --arg 'Y=*fp32' --arg 'G=*fp32' --arg N=i32 --explain
expect_rc ld_explain_exit_0 0 ld_explain
expect_grep ld_explain_reach "$TMP/ld_explain.err" "'X': what it loads reaches the stores to 'Y'"
# A call into a module tgrad does not read stops with a located error, not a warning and a backward.
printf 'import triton\nimport triton.language as tl\nfrom mylib import tanh\n\n@triton.jit\ndef k(X, Y, B: tl.constexpr):\n    o = tl.arange(0, B)\n    tl.store(Y + o, tanh(tl.load(X + o)))\n' >"$TMP/unread.py"
run unread_module "$TMP/unread.py" --kernel k --wrt X --arg 'X=*fp32' --arg 'Y=*fp32'
expect_rc unread_module_exit_1 1 unread_module
expect_grep unread_module_located "$TMP/unread_module.err" "unread.py:8:21: error: 'tanh' is imported from 'mylib', which tgrad does not read"
expect_no_grep unread_module_no_backward "$TMP/unread_module.out" 'def k_bwd'

# A user module imported as a namespace: `from . import helper_module as hm` then `hm.softplus(x)`, and
# `import pkg.acts as A` then `A.square(x)` through -I (src/lower/ModuleNamespaces.h): `tgrad check` passes.
run ns_check check $KERNELS/namespace_import.py --kernel namespace_softplus_kernel --grid 3 --arg 'X=fp32[300]' \
  --arg 'Y=fp32[300]:zeros' --arg n_elements=300 -D BLOCK=128 --wrt X
expect_rc ns_check_exit_0 0 ns_check
expect_grep ns_check_verdict "$TMP/ns_check.out" '^PASS$'
mkdir -p "$TMP/nsinc/pkg"
: >"$TMP/nsinc/pkg/__init__.py"
printf 'import triton\nimport triton.language as tl\n\n\n@triton.jit\ndef _twice(x):\n    return x * 2.0\n\n\n@triton.jit\ndef square(x):\n    return _twice(x) * x\n' >"$TMP/nsinc/pkg/acts.py"
printf 'import triton\nimport triton.language as tl\nimport pkg.acts as A\n\n\n@triton.jit\ndef k(X, Y, B: tl.constexpr):\n    o = tl.arange(0, B)\n    tl.store(Y + o, A.square(tl.load(X + o)))\n' >"$TMP/ns_abs.py"
run ns_abs check "$TMP/ns_abs.py" -I "$TMP/nsinc" --kernel k --grid 1 --arg 'X=fp32[16]' --arg 'Y=fp32[16]:zeros' -D B=16 --wrt X
expect_rc ns_abs_exit_0 0 ns_abs
expect_grep ns_abs_verdict "$TMP/ns_abs.out" '^PASS$'
# A warning of the file's reading is printed once, not again after the backward is written.
printf 'import triton\nimport triton.language as tl\n\n\n@my_decorator\n@triton.jit\ndef k(X, Y, B: tl.constexpr):\n    o = tl.arange(0, B)\n    tl.store(Y + o, tl.load(X + o) * 2.0)\n' >"$TMP/decorated.py"
run decorated "$TMP/decorated.py" --kernel k --wrt X
expect_rc decorated_exit_0 0 decorated
CHECKS=$((CHECKS + 1))
[ "$(grep -c "decorator '@my_decorator'" "$TMP/decorated.err")" = 1 ] || fail decorated_warning_once "$(cat "$TMP/decorated.err")"

# `and` / `or` on int1 tiles (FlagGems' masks; element-wise in Triton, deprecated there for & and |): `tgrad check`
# passes; on float tiles it is a located error.
printf 'import triton\nimport triton.language as tl\n\n\n@triton.jit\ndef k(X, Y, M, N, BM: tl.constexpr, BN: tl.constexpr):\n    r = tl.arange(0, BM)\n    c = tl.arange(0, BN)\n    mask = r[:, None] < M and c[None, :] < N\n    x = tl.load(X + r[:, None] * N + c[None, :], mask=mask, other=0.0)\n    tl.store(Y + r[:, None] * N + c[None, :], x * x, mask=mask or r[:, None] < 0)\n' >"$TMP/tile_and.py"
run tile_and check "$TMP/tile_and.py" --kernel k --grid 1 --arg 'X=fp32[24]' --arg 'Y=fp32[24]:zeros' --arg M=4 --arg N=6 \
  -D BM=8 -D BN=8 --wrt X
expect_rc tile_and_exit_0 0 tile_and
expect_grep tile_and_verdict "$TMP/tile_and.out" '^PASS$'
printf 'import triton\nimport triton.language as tl\n\n\n@triton.jit\ndef k(X, T, Y, n, ignore_index, B: tl.constexpr):\n    o = tl.arange(0, B)\n    m = o < n\n    t = tl.load(T + o, mask=m, other=0)\n    keep = not (t == ignore_index) and m\n    x = tl.load(X + o, mask=m, other=0.0)\n    tl.store(Y + o, tl.where(keep, x * x, 0.0), mask=m)\n' >"$TMP/tile_not.py"
run tile_not check "$TMP/tile_not.py" --kernel k --grid 1 --arg 'X=fp32[10]' --arg 'T=int32[10]' --arg 'Y=fp32[10]:zeros' \
  --arg n=10 --arg ignore_index=0 -D B=16 --wrt X
expect_grep tile_not_verdict "$TMP/tile_not.out" '^PASS$'
printf 'import triton\nimport triton.language as tl\n\n\n@triton.jit\ndef k(X, Y, B: tl.constexpr):\n    o = tl.arange(0, B)\n    x = tl.load(X + o)\n    tl.store(Y + o, x, mask=x and o < 4)\n' >"$TMP/float_and.py"
run float_and "$TMP/float_and.py" --kernel k --wrt X
expect_rc float_and_exit_1 1 float_and
expect_grep float_and_located "$TMP/float_and.err" "float_and.py:9:29: error: 'and' on fp32 tiles: Triton reinterprets their bits as int1"

# A mask that is None under a tl.constexpr flag (FlagGems' bmm): the upstream gradient's load takes no `other`
# there (Triton refuses one without a mask); the backward generates for both values and passes `tgrad check`.
printf 'import triton\nimport triton.language as tl\n\n\n@triton.jit\ndef k(X, Y, n, EVEN: tl.constexpr, B: tl.constexpr):\n    o = tl.arange(0, B)\n    if EVEN:\n        mask = None\n    else:\n        mask = o < n\n    x = tl.load(X + o, mask=mask)\n    tl.store(Y + o, x * x, mask=mask)\n' >"$TMP/none_mask.py"
run none_mask "$TMP/none_mask.py" --kernel k --wrt X
expect_rc none_mask_exit_0 0 none_mask
for even in True False; do
  run none_mask_check_$even check "$TMP/none_mask.py" --kernel k --grid 1 --arg 'X=fp32[16]' --arg 'Y=fp32[16]:zeros' \
    --arg n=16 -D EVEN=$even -D B=16 --wrt X
  expect_grep none_mask_check_${even}_verdict "$TMP/none_mask_check_$even.out" '^PASS$'
done

# A tl.dtype's predicates and attributes (`dtype.value.is_floating()`, `int_bitwidth`) decide constexpr ifs whose
# branches return constants of different types (FlagGems' limits): typed as the dtype takes, `tgrad check` passes.
run limits_check check $KERNELS/dtype_limits.py --kernel masked_max_kernel --grid 1 --arg 'X=fp32[10]' \
  --arg 'Y=fp32[1]:zeros' --arg n=10 -D BLOCK=16 --wrt X
expect_rc limits_check_exit_0 0 limits_check
expect_grep limits_check_verdict "$TMP/limits_check.out" '^PASS$'
run limits_generic $KERNELS/dtype_limits.py --kernel masked_max_kernel --wrt X
expect_rc limits_generic_exit_0 0 limits_generic

# A helper that computes a program id (FlagGems' `tle.program_id`: `tl.program_id(axis).to(tl.int64)`) is inlined:
# the layout analysis sees the id, and the gradient is stored, not added atomically.
printf 'import triton\nimport triton.language as tl\n\n\n@triton.jit\ndef pid64(axis: tl.constexpr):\n    return tl.program_id(axis).to(tl.int64)\n\n\n@triton.jit\ndef k(X, Y, n, B: tl.constexpr):\n    o = pid64(0) * B + tl.arange(0, B)\n    x = tl.load(X + o, mask=o < n)\n    tl.store(Y + o, x * x, mask=o < n)\n' >"$TMP/pid_helper.py"
run pid_helper "$TMP/pid_helper.py" --kernel k --wrt X
expect_rc pid_helper_exit_0 0 pid_helper
expect_grep pid_helper_store "$TMP/pid_helper.out" '^    tl.store\(dX \+ o'
expect_no_grep pid_helper_no_atomic "$TMP/pid_helper.out" 'atomic_add'
run pid_helper_check check "$TMP/pid_helper.py" --kernel k --grid 3 --arg 'X=fp32[40]' --arg 'Y=fp32[40]:zeros' --arg n=40 \
  -D B=16 --wrt X
expect_grep pid_helper_check_verdict "$TMP/pid_helper_check.out" '^PASS$'

# Builtins tgrad does not type yet (tl.sort) read and round-trip; the interpreter names them (block pointers it runs).
printf 'import triton\nimport triton.language as tl\n\n@triton.jit\ndef k(X, Y, B: tl.constexpr):\n    p = tl.make_block_ptr(X, shape=(16,), strides=(1,), offsets=(0,), block_shape=(B,), order=(0,))\n    x = tl.load(p, boundary_check=(0,))\n    tl.store(Y + tl.arange(0, B), tl.sort(x, 0))\n' >"$TMP/bp.py"
run bp_reads "$TMP/bp.py" --dump-ast
expect_rc bp_reads_exit_0 0 bp_reads
run bp_run run "$TMP/bp.py" --kernel k --grid 1 --arg 'X=fp32[16]' --arg 'Y=fp32[16]' -D B=16
expect_rc bp_run_exit_1 1 bp_run
expect_grep bp_run_names_it "$TMP/bp_run.err" "bp.py:8:35: error: tl.sort\(\) is not supported by tgrad's interpreter yet"

# A kernel parameter without a type gets one: the backward is the same for each representative.
run untyped_stride $KERNELS/softmax.py --kernel softmax_kernel --wrt in_ptr --arg out_ptr=*fp32 --arg in_ptr=*fp32 \
  --arg out_row_stride=i32 --arg n_cols=i32
expect_rc untyped_stride_exit_0 0 untyped_stride
expect_grep untyped_stride_named "$TMP/untyped_stride.out" '^# Generic: the same backward for in_row_stride = int32\.$'
# No types and no --fn (one kernel in the file): every pointer for fp32, fp16 and bf16 data.
run untyped_softmax $KERNELS/softmax.py --wrt in_ptr
expect_rc untyped_softmax_exit_0 0 untyped_softmax
expect_grep untyped_softmax_generic "$TMP/untyped_softmax.out" '^# Generic: the same backward for out_ptr = \*fp32, \*fp16, \*bf16; in_ptr = \*fp32, \*fp16, \*bf16;'
# A runtime scalar the code needs as a float (a conditional expression with a float literal on its other side, as
# FlagGems' bicubic interpolation writes its support; an operand of tl.log): fp32 first, without --arg; int32 is
# refused by the forward, as Triton refuses it.
cat >"$TMP/float_scalar.py" <<'EOF'
import triton
import triton.language as tl


@triton.jit
def k(X, Y, n, scale, gamma, BLOCK: tl.constexpr):
    o = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    support = 2 * scale if scale >= 1.0 else 2.0
    x = tl.load(X + o, mask=o < n, other=0.0)
    tl.store(Y + o, x * support * tl.log(gamma), mask=o < n)
EOF
run float_scalar "$TMP/float_scalar.py" --wrt 0
expect_rc float_scalar_exit_0 0 float_scalar
expect_grep float_scalar_generic "$TMP/float_scalar.out" '^# Generic: the same backward for X = \*fp32, \*fp16, \*bf16; Y = \*fp32, \*fp16, \*bf16; n = int32, fp32; scale = fp32; gamma = fp32\.$'
# Residual add + layer norm whose bias is loaded in its own dtype (`diff * rstd * w + b` widens it): the bias's
# partial sum accumulates the same float32 value for every element type (its fp16 store's upstream gradient is
# widened to the stored value's dtype, which that sum must not skip), so one backward serves all.
cat >"$TMP/add_norm.py" <<'EOF'
import triton
import triton.language as tl


@triton.jit
def k(x_ptr, res_ptr, w_ptr, b_ptr, y_ptr, res_out_ptr, N, eps, BLOCK: tl.constexpr):
    row = tl.program_id(0)
    cols = tl.arange(0, BLOCK)
    mask = cols < N
    h = tl.load(x_ptr + row * N + cols, mask=mask, other=0.0).to(tl.float32) + tl.load(res_ptr + row * N + cols, mask=mask, other=0.0).to(tl.float32)
    tl.store(res_out_ptr + row * N + cols, h.to(res_out_ptr.dtype.element_ty), mask=mask)
    mean = tl.sum(h, axis=0) / N
    diff = tl.where(mask, h - mean, 0.0)
    rstd = 1 / tl.sqrt(tl.sum(diff * diff, axis=0) / N + eps)
    w = tl.load(w_ptr + cols, mask=mask, other=0.0)
    b = tl.load(b_ptr + cols, mask=mask, other=0.0)
    tl.store(y_ptr + row * N + cols, (diff * rstd * w + b).to(y_ptr.dtype.element_ty), mask=mask)
EOF
run add_norm "$TMP/add_norm.py" --wrt 0,1,2,3
expect_rc add_norm_exit_0 0 add_norm
expect_grep add_norm_generic "$TMP/add_norm.out" '^# Generic: the same backward for x_ptr = \*fp32, \*fp16, \*bf16; res_ptr = \*fp32, \*fp16, \*bf16; w_ptr = \*fp32, \*fp16, \*bf16; b_ptr = \*fp32, \*fp16, \*bf16;'
# A flag one of whose branches does not compile in bf16 (tl.exp of a bf16 tile, as Liger's kl_div with log_target):
# specialized on it, bf16 is served by the value whose forward compiles, and not refused for both.
cat >"$TMP/exp_flag.py" <<'EOF'
import triton
import triton.language as tl


@triton.jit
def k(X, T, Y, n, LOG: tl.constexpr = False, BLOCK: tl.constexpr = 128):
    o = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    x = tl.load(X + o, mask=o < n, other=0.0).to(tl.float32)
    t = tl.load(T + o, mask=o < n, other=1.0)
    if LOG:
        y = tl.exp(t) * (t - x)
    else:
        y = t * x
    tl.store(Y + o, y, mask=o < n)
EOF
run exp_flag "$TMP/exp_flag.py" --wrt X,T
expect_rc exp_flag_exit_0 0 exp_flag
expect_grep exp_flag_specialized "$TMP/exp_flag.out" '^# Specialized: one backward per value of LOG = True, False\.$'
expect_grep exp_flag_bf16_served "$TMP/exp_flag.out" '^# Generic: the same backward for X = [^;]*; T = \*fp32, \*fp16, \*bf16;'
# A flag tested with `is not None` and compared with strings: None is one of its values (attorch's plain Linear).
run optional_act $KERNELS/defaulted_flag.py --kernel optional_activation_kernel --wrt X
expect_rc optional_act_exit_0 0 optional_act
expect_grep optional_act_values "$TMP/optional_act.out" "^# Specialized: one backward per value of ACT = None, 'relu', 'softsign', any other value\.$"
expect_grep optional_act_dispatch "$TMP/optional_act.out" '^    if ACT is None:$'
# A backward that really depends on a dtype names the parameter.
cat >"$TMP/dtype_branch.py" <<'EOF'
import triton
import triton.language as tl


@triton.jit
def k(X, Y, B: tl.constexpr):
    o = tl.arange(0, B)
    x = tl.load(X + o)
    if X.dtype.element_ty == tl.float16:
        y = x * 2.0
    else:
        y = x * x
    tl.store(Y + o, y)
EOF
run dtype_branch "$TMP/dtype_branch.py" --wrt X
expect_rc dtype_branch_exit_1 1 dtype_branch
expect_grep dtype_branch_named "$TMP/dtype_branch.err" "dtype_branch.py:6:7: error: the backward of 'k' depends on the element type of 'X': with X=\*fp32 and X=\*fp16 it differs .*give its type: --arg X=TYPE"
run dtype_branch_given "$TMP/dtype_branch.py" --wrt X --arg 'X=*fp16'
expect_rc dtype_branch_given_exit_0 0 dtype_branch_given

# A --wrt pointer loaded only under a flag (fla's causal conv1d: x under HAS_WEIGHT), its base address made by a
# helper: with the flag false its gradient is zero (a warning), not "'x' is a runtime scalar".
cat >"$TMP/flag_only_load.py" <<'EOF'
import triton
import triton.language as tl
@triton.jit
def _row(p, row, N):
    return p + row * N
@triton.jit
def k(x, w, y, N, HAS_WEIGHT: tl.constexpr, BLOCK: tl.constexpr):
    row = tl.program_id(0)
    o = tl.arange(0, BLOCK)
    p_x = _row(x, row, N)
    acc = tl.load(w + o, mask=o < N, other=0.0)
    if HAS_WEIGHT:
        acc = acc * tl.load(p_x + o, mask=o < N, other=0.0)
    tl.store(_row(y, row, N) + o, acc, mask=o < N)
EOF
run flag_only_load "$TMP/flag_only_load.py" --wrt x,w -D HAS_WEIGHT=False --emit json
expect_rc flag_only_load_exit_0 0 flag_only_load
expect_grep flag_only_load_warns "$TMP/flag_only_load.err" "warning: no store of 'k' depends on what it loads through 'x': its gradient is zero"
expect_grep flag_only_load_zero_buffer "$TMP/flag_only_load.out" '"contents": "zeros"'
run flag_only_load_generic "$TMP/flag_only_load.py" --wrt x,w
expect_rc flag_only_load_generic_exit_0 0 flag_only_load_generic

# A tuple parameter (mamba3's stride_q[0]): a located error that names it, not one about tensor indexing.
cat >"$TMP/tuple_param.py" <<'EOF'
import triton
import triton.language as tl
@triton.jit
def k(Q, O, stride_q, B: tl.constexpr):
    o = tl.arange(0, B)
    q = tl.load(Q + tl.program_id(0) * stride_q[0] + o)
    tl.store(O + o, q * q)
EOF
run tuple_param "$TMP/tuple_param.py" --wrt Q
expect_rc tuple_param_exit_1 1 tuple_param
expect_grep tuple_param_named "$TMP/tuple_param.err" "tuple_param.py:6:40: error: 'stride_q' is indexed like a tuple, .*tuple parameters are not supported yet"

# A definition guarded by a condition on a local computed from constexprs (fla's `n_sub = BT // BC`): the error
# names the parameters to give.
cat >"$TMP/derived_flag.py" <<'EOF'
import triton
import triton.language as tl
@triton.jit
def k(X, Y, BT: tl.constexpr, BC: tl.constexpr):
    n_sub = BT // BC
    o = tl.arange(0, BC)
    x = tl.load(X + o)
    if n_sub == 2:
        w = x * 2.0
    tl.store(Y + o, w * x)
EOF
run derived_flag "$TMP/derived_flag.py" --wrt X
expect_rc derived_flag_exit_1 1 derived_flag
expect_grep derived_flag_names_params "$TMP/derived_flag.err" "derived_flag.py:8:8: error: 'w' is assigned only when the tl.constexpr condition 'n_sub == 2' is true .*give BT and BC, which it is computed from, with -D"
run derived_flag_given "$TMP/derived_flag.py" --wrt X -D BT=64 -D BC=32
expect_rc derived_flag_given_exit_0 0 derived_flag_given

# An online softmax under ifs on a tl.constexpr mode not given (`if STAGE == 1:`, `STAGE & 1`): tgrad specializes
# on its values itself, and each specialization reads the stored statistic: no tape, no note.
run softmax_flags tests/kernels/attention_block_ptr.py --fn attn_fwd_block_ptr_kernel --wrt Q,K,V
expect_rc softmax_flags_exit_0 0 softmax_flags
expect_no_grep softmax_flags_no_note "$TMP/softmax_flags.err" "note: the loop's online softmax"
expect_no_grep softmax_flags_no_tape "$TMP/softmax_flags.out" "_tape"
expect_grep softmax_flags_specialized "$TMP/softmax_flags.out" "^def attn_fwd_block_ptr_kernel_bwd_STAGE_3\\("
# A specialized backward has no owner-computes kernels (one dispatcher launches them all): a note says -D gets them.
expect_grep softmax_flags_owner_note "$TMP/softmax_flags.err" "note: the backward, one per value of 'STAGE', adds gradients with tl.atomic_add that owner-computes kernels gather .*(with STAGE=1, those of .*'K'.*); one dispatcher cannot launch them: give 'STAGE' with -D for that backward"
# Under an if on a number it also computes with (`BLOCK_N == 64`), the backward stays generic in it: taped, with
# the note; with a mode beside it (`SPLIT and BLOCK_N == 64`), the specializations where the mode leaves the if
# are dropped with a warning (their launch stops at a static assertion), the others read the statistic.
for variant in number mode; do
  if [[ $variant == number ]]; then cond="BLOCK_N == 64"; else cond="SPLIT and BLOCK_N == 64"; fi
  cat >"$TMP/softmax_$variant.py" <<EOF
import triton
import triton.language as tl


@triton.jit
def online_kernel(S, V, Out, Lse, N, BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, D: tl.constexpr,
                  SPLIT: tl.constexpr):
    rows = tl.program_id(0) * BLOCK_M + tl.arange(0, BLOCK_M)
    offs_d = tl.arange(0, D)
    m_i = tl.zeros([BLOCK_M], dtype=tl.float32) - float("inf")
    l_i = tl.zeros([BLOCK_M], dtype=tl.float32)
    acc = tl.zeros([BLOCK_M, D], dtype=tl.float32)
    for start in range(0, N, BLOCK_N):
        cols = start + tl.arange(0, BLOCK_N)
        s = tl.load(S + rows[:, None] * N + cols[None, :], mask=cols[None, :] < N, other=float("-inf"))
        m_ij = tl.maximum(m_i, tl.max(s, 1))
        p = tl.math.exp2(s - m_ij[:, None])
        alpha = tl.math.exp2(m_i - m_ij)
        l_i = l_i * alpha + tl.sum(p, 1)
        v = tl.load(V + cols[:, None] * D + offs_d[None, :], mask=cols[:, None] < N, other=0.0)
        if $cond:
            acc = acc * alpha[:, None] + tl.dot(p.to(v.dtype), v)
        else:
            acc = acc * alpha[:, None] + tl.dot(p.to(v.dtype), v)
        m_i = m_ij
    tl.store(Out + rows[:, None] * D + offs_d[None, :], acc / l_i[:, None])
    tl.store(Lse + rows, m_i + tl.math.log2(l_i))
EOF
  run softmax_$variant "$TMP/softmax_$variant.py" --wrt S,V --arg 'Lse=*fp32'
  expect_rc softmax_${variant}_exit_0 0 softmax_$variant
done
expect_grep softmax_number_note "$TMP/softmax_number.err" "softmax_number.py:13:5: note: the loop's online softmax keeps its taped backward: .*tl.constexpr values tgrad was not given \\(BLOCK_N\\); give them with -D"
expect_grep softmax_number_taped "$TMP/softmax_number.out" "_tape"
expect_grep softmax_mode_dropped "$TMP/softmax_mode.err" "warning: no backward of 'online_kernel' with SPLIT=True: there ifs on 'BLOCK_N' hide its online softmax"
expect_no_grep softmax_mode_no_tape "$TMP/softmax_mode.out" "_tape"
expect_grep softmax_mode_assertion "$TMP/softmax_mode.out" "tl.static_assert\\(False, \"tgrad found no backward of online_kernel with SPLIT=True: there its online softmax is hidden"
run softmax_flags_given tests/kernels/attention_block_ptr.py --fn attn_fwd_block_ptr_kernel --wrt Q,K,V -D STAGE=1
expect_rc softmax_flags_given_exit_0 0 softmax_flags_given
expect_no_grep softmax_flags_given_no_note "$TMP/softmax_flags_given.err" "note: the loop's online softmax"

# A taped half-precision value comes back from its float32 tape cast to Triton's dtype (`tl.float16`, not the
# undefined `float16`), and a value that is a Python number with a flag's value gets no `.shape` assertion.
run tape_fp16 tests/kernels/accumulators.py --kernel repeated_update_inplace_kernel --wrt X --arg 'X=*fp16' --arg n=i32 --arg n_steps=i32
expect_rc tape_fp16_exit_0 0 tape_fp16
expect_grep tape_fp16_cast "$TMP/tape_fp16.out" "other=float\\('nan'\\)\\)\\.to\\(tl\\.float16\\)"
expect_no_grep tape_fp16_no_bare_dtype "$TMP/tape_fp16.out" "\\.to\\(float16\\)"
run number_shape tests/kernels/runtime_ifexp.py --kernel centered_kernel --wrt X,L
expect_rc number_shape_exit_0 0 number_shape
expect_no_grep number_shape_no_assert "$TMP/number_shape.out" "choice_3\\.shape"

run types $FN1 --dump-ast --fn fn1 --arg 'x=fp32[N]' --arg 'y=fp32[N]'
expect_rc dump_ast_with_types_exit_0 0 types
expect_grep dump_ast_shows_types "$TMP/types.out" 'target: Name c @11:5 : fp32\[N, N\]'
run types_no_fn $FN1 --dump-ast --arg 'x=fp32[N]'
expect_rc typing_needs_fn_exit_2 2 types_no_fn

# --tiling: block sizes declared to only tile the computation; the module tunes them for the backward.
run tiling_module tests/kernels/matmul.py --kernel matmul_kernel --wrt a_ptr,b_ptr --tiling BLOCK_SIZE_M,BLOCK_SIZE_N,BLOCK_SIZE_K --emit torch
expect_rc tiling_module_exit_0 0 tiling_module
expect_grep tiling_module_each_kernel "$TMP/tiling_module.out" "_tgrad_launch_values\(tgrad_launch, \*_tgrad_forward_launch, num_warps, num_stages, 2, 1\)"
run tiling_json tests/kernels/matmul.py --kernel matmul_kernel --wrt a_ptr,b_ptr --tiling BLOCK_SIZE_M --tiling BLOCK_SIZE_K --emit json
expect_rc tiling_json_exit_0 0 tiling_json
expect_grep tiling_json_constexprs "$TMP/tiling_json.out" '"kernels_apart": true'
run tiling_unknown tests/kernels/matmul.py --kernel matmul_kernel --wrt a_ptr,b_ptr --tiling BLOCK_SIZE_Q
expect_rc tiling_unknown_exit_2 2 tiling_unknown
expect_grep tiling_unknown_message "$TMP/tiling_unknown.err" "error: --tiling BLOCK_SIZE_Q: 'matmul_kernel' has no parameter 'BLOCK_SIZE_Q'"
run tiling_runtime tests/kernels/matmul.py --kernel matmul_kernel --wrt a_ptr,b_ptr --tiling M
expect_rc tiling_runtime_exit_2 2 tiling_runtime
expect_grep tiling_runtime_message "$TMP/tiling_runtime.err" "error: --tiling M: 'M' is not a tl.constexpr parameter"
run tiling_defined tests/kernels/matmul.py --kernel matmul_kernel --wrt a_ptr,b_ptr --tiling BLOCK_SIZE_M -D BLOCK_SIZE_M=64
expect_rc tiling_defined_exit_2 2 tiling_defined
expect_grep tiling_defined_message "$TMP/tiling_defined.err" "error: --tiling BLOCK_SIZE_M: 'BLOCK_SIZE_M' has a value from -D"
expect_no_grep tiling_module_no_note "$TMP/tiling_module.err" "note: the module launches the owner-computes kernels"
# A pointer tested against None (Triton compiles one branch per specialization: None, or a tensor): one backward
# each, dispatched on the pointer.
cat > "$TMP/branch_types.py" <<'PY'
import triton
import triton.language as tl


@triton.jit
def k(x, out, seqpos, n, BLOCK: tl.constexpr):
    i = tl.program_id(0)
    if seqpos is not None:
        p = tl.load(seqpos + i)
    else:
        p = i
    c = tl.arange(0, BLOCK)
    a = tl.load(x + i * n + c, mask=c < n)
    tl.store(out + i * n + c, a * tl.cos(p * 0.5), mask=c < n)
PY
run branch_types "$TMP/branch_types.py" --kernel k --wrt x
expect_rc branch_types_exit_0 0 branch_types
expect_grep branch_types_dispatch "$TMP/branch_types.out" "^    if seqpos is None:$"
expect_grep branch_types_generic "$TMP/branch_types.out" "seqpos = \*fp32; n = int32"
# A name assigned values of two types on the two branches of an if on a runtime value (Triton refuses it too): a
# located error naming the name and the types.
cat > "$TMP/branch_runtime_types.py" <<'PY'
import triton
import triton.language as tl


@triton.jit
def k(x, out, seqpos, n, BLOCK: tl.constexpr):
    i = tl.program_id(0)
    if n > 4:
        p = tl.load(seqpos + i)
    else:
        p = i
    c = tl.arange(0, BLOCK)
    a = tl.load(x + i * n + c, mask=c < n)
    tl.store(out + i * n + c, a * tl.cos(p * 0.5), mask=c < n)
PY
run branch_runtime_types "$TMP/branch_runtime_types.py" --kernel k --wrt x
expect_rc branch_runtime_types_exit_1 1 branch_runtime_types
expect_grep branch_runtime_types_names_p "$TMP/branch_runtime_types.err" "'p' is fp32 on one path of this if and int32 on the other"
# A taped loop's trip count under `if IS_VARLEN:` (its branch loads the length): expressible once -D gives the flag.
run varlen_tape tests/kernels/varlen_tape.py --kernel varlen_decay_kernel --wrt X,G --emit torch
expect_rc varlen_tape_exit_1 1 varlen_tape
expect_grep varlen_tape_says_D "$TMP/varlen_tape.err" "cannot size 'tape_trips'.*give the tl.constexpr flags its computation tests .* with -D"
run varlen_tape_D tests/kernels/varlen_tape.py --kernel varlen_decay_kernel --wrt X,G -D IS_VARLEN=False --emit torch
expect_rc varlen_tape_D_exit_0 0 varlen_tape_D
expect_grep varlen_tape_D_trips "$TMP/varlen_tape_D.out" "tape_trips = _tgrad_max_over_programs\(lambda _pid: max\(0, _tgrad_cdiv\(\(_tgrad_cdiv\(T, BT\)"
run tiling_note tests/kernels/matmul.py --kernel matmul_kernel --wrt a_ptr,b_ptr --emit torch
expect_rc tiling_note_exit_0 0 tiling_note
expect_grep tiling_note_names_flag "$TMP/tiling_note.err" "note: the module launches the owner-computes kernels of this backward with the forward's block sizes.*block sizes are BLOCK_SIZE_M,BLOCK_SIZE_N,BLOCK_SIZE_K: those that only tile the computation.*given with --tiling"
run tiling_note_quiet tests/kernels/matmul.py --kernel matmul_kernel --wrt a_ptr,b_ptr --emit torch -w
expect_no_grep tiling_note_quiet_none "$TMP/tiling_note_quiet.err" "note: the module launches"
run tiling_no_wrt tests/kernels/matmul.py --kernel matmul_kernel --tiling BLOCK_SIZE_M --emit json
expect_rc tiling_no_wrt_exit_2 2 tiling_no_wrt

# A load, an addition and a store back whose loaded value is read elsewhere too: no atomic addition, the located error.
run additions_read_back tests/kernels/memory_additions.py --kernel partial_sums_read_back_kernel --wrt X,P
expect_rc additions_read_back_exit_1 1 additions_read_back
expect_grep additions_read_back_error "$TMP/additions_read_back.err" "memory_additions.py:[0-9]+:[0-9]+: error: 'P' is both loaded and stored by this kernel"
run additions_atomic tests/kernels/memory_additions.py --kernel tiled_partial_sums_kernel --wrt X,W,P --explain
expect_rc additions_atomic_exit_0 0 additions_atomic
expect_grep additions_atomic_explained "$TMP/additions_atomic.err" "adds to what it loaded and stores the sum back, every access to that buffer so; differentiated as tl.atomic_add"

# A while loop whose trip count depends on values it computes: no count before it starts, a located error (and no
# crash); one that steps a variable between bounds differentiates with no other flag.
run while_data tests/kernels/while_loops.py --kernel until_converged_kernel --wrt X
expect_rc while_data_exit_1 1 while_data
expect_grep while_data_error "$TMP/while_data.err" "while_loops.py:[0-9]+:5: error: tgrad cannot count this while loop's trips to replay it"
run while_float tests/kernels/while_loops.py --kernel float_step_kernel --wrt X
expect_rc while_float_exit_1 1 while_float
expect_grep while_float_error "$TMP/while_float.err" "while_loops.py:[0-9]+:5: error: tgrad cannot count this while loop's trips to replay it"
run while_persistent tests/kernels/while_loops.py --kernel grouped_tiles_kernel --wrt X,W
expect_rc while_persistent_exit_0 0 while_persistent
expect_grep while_persistent_counted "$TMP/while_persistent.out" "for tidx_k in range\\(0, tidx_trips\\):"

# An in-place state over chunks whose masked lanes reach into the next chunk's block: the located error stays.
run chunk_overlap tests/kernels/in_place.py --kernel chunk_state_overlap_kernel --wrt S,D
expect_rc chunk_overlap_exit_1 1 chunk_overlap
expect_grep chunk_overlap_error "$TMP/chunk_overlap.err" "in_place.py:[0-9]+:[0-9]+: error: 'S' is both loaded and stored by this kernel, and a loop around both"

# A scalar annotated with a dtype (`n: tl.int64`) has that type: the generic backward does not try it as fp32.
cat > "$TMP/annotated_scalar.py" <<'EOF'
import triton
import triton.language as tl


@triton.jit
def scale_kernel(X, Y, n: tl.int64, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    x = tl.load(X + offs, mask=offs < n, other=0.0)
    tl.store(Y + offs, x * x, mask=offs < n)
EOF
run annotated_scalar "$TMP/annotated_scalar.py" --wrt X
expect_rc annotated_scalar_exit_0 0 annotated_scalar
expect_grep annotated_scalar_header "$TMP/annotated_scalar.out" "^# Generic: the same backward for X = \\*fp32, \\*fp16, \\*bf16; Y = \\*fp32, \\*fp16, \\*bf16\\.$"

# A gradient stored under a layout flag inside a runtime if: where the branch is not taken nothing is stored, so
# the buffer's zeros are needed whatever the flag (no "zeros_unless"), as torch's gradient there is 0.
cat > "$TMP/flag_in_branch.py" <<'EOF'
import triton
import triton.language as tl


@triton.jit
def branch_kernel(X, Y, n, stride, BLOCK: tl.constexpr):
    pid = tl.program_id(0)
    offs = tl.arange(0, BLOCK)
    y = tl.zeros([BLOCK], dtype=tl.float32)
    if n > 0:
        x = tl.load(X + pid * stride + offs)
        y = x * 2.0
    tl.store(Y + pid * BLOCK + offs, y)
EOF
run flag_in_branch "$TMP/flag_in_branch.py" --wrt X --emit json
expect_rc flag_in_branch_exit_0 0 flag_in_branch
expect_grep flag_in_branch_flag "$TMP/flag_in_branch.out" '"name": "X_disjoint"'
expect_no_grep flag_in_branch_zeros_kept "$TMP/flag_in_branch.out" '"zeros_unless"'

# Two loads at shifted offsets (a rotary kernel's halves) that together read each address once: plain stores,
# decided from the numbers (a pair per lane: X + 2 * offs and X + 2 * offs + 1 under offs < n).
cat > "$TMP/pairs.py" <<'EOF'
import triton
import triton.language as tl


@triton.jit
def pairs_kernel(X, Y, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    a = tl.load(X + 2 * offs, mask=mask, other=0.0)
    b = tl.load(X + 2 * offs + 1, mask=mask, other=0.0)
    tl.store(Y + offs, a * b, mask=mask)
EOF
run pairs "$TMP/pairs.py" --wrt X
expect_rc pairs_exit_0 0 pairs
expect_no_grep pairs_no_atomics "$TMP/pairs.out" 'atomic_add'
expect_grep pairs_plain_store "$TMP/pairs.out" 'tl.store\(dX'

# An int8 matmul (a product accumulated in int32): the pointers it loads hold integers, with no gradient to give.
cat > "$TMP/int8_dot.py" <<'EOF'
import triton
import triton.language as tl


@triton.jit
def int8_dot_kernel(A, B, C, BLOCK: tl.constexpr):
    r = tl.arange(0, BLOCK)
    a = tl.load(A + r[:, None] * BLOCK + r[None, :])
    b = tl.load(B + r[:, None] * BLOCK + r[None, :])
    tl.store(C + r[:, None] * BLOCK + r[None, :], tl.dot(a, b, out_dtype=tl.int32))
EOF
run int8_dot "$TMP/int8_dot.py" --wrt A
expect_rc int8_dot_exit_1 1 int8_dot
expect_grep int8_dot_error "$TMP/int8_dot.err" "int8_dot.py:[0-9]+:[0-9]+: error: 'A' points to integers, as far as tgrad can tell .*tl.dot accumulated in integers"

# A @triton.constexpr_function Triton runs as Python: one that reads as tile language is a helper the backward keeps
# (math.log2 of a block size); one that does not (a comprehension) stays host Python, and the file still reads.
cat > "$TMP/host_helpers.py" <<'EOF2'
import math
import triton
import triton.language as tl


@triton.constexpr_function
def log2_block(n):
    return int(math.log2(n))


@triton.constexpr_function
def doubled(n):
    return [2 * k for k in range(n)]


@triton.jit
def log_scale_kernel(X, Y, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    LOG: tl.constexpr = log2_block(BLOCK)
    x = tl.load(X + offs, mask=offs < n)
    tl.store(Y + offs, x * LOG, mask=offs < n)
EOF2
run host_helpers_ast "$TMP/host_helpers.py" --dump-ast
expect_rc host_helpers_ast_exit_0 0 host_helpers_ast
run host_helpers "$TMP/host_helpers.py" --wrt 0
expect_rc host_helpers_exit_0 0 host_helpers
expect_grep host_helpers_keeps_helper "$TMP/host_helpers.out" '^def log2_block\(n\):'
expect_grep host_helpers_keeps_call "$TMP/host_helpers.out" 'LOG: tl.constexpr = log2_block\(BLOCK\)'

# A kernel whose gradient depends on what such host Python computes: a located error naming the function.
cat > "$TMP/host_helpers2.py" <<'EOF2'
import triton
import triton.language as tl


@triton.constexpr_function
def doubled(n):
    return [2 * k for k in range(n)]


@triton.jit
def doubled_scale_kernel(X, Y, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    S: tl.constexpr = doubled(BLOCK)[1]
    x = tl.load(X + offs, mask=offs < n)
    tl.store(Y + offs, x * S, mask=offs < n)
EOF2
run host_helpers2 "$TMP/host_helpers2.py" --wrt 0
expect_rc host_helpers2_exit_1 1 host_helpers2
expect_grep host_helpers2_error "$TMP/host_helpers2.err" "host_helpers2.py:[0-9]+:[0-9]+: error: .*'S' comes from 'doubled', a Python function tgrad keeps as host code"

# A loaded value divided with `//` (or tl.cdiv) is an integer: Triton refuses floor division on floats.
cat > "$TMP/floordiv.py" <<'EOF2'
import triton
import triton.language as tl


@triton.jit
def blocks_kernel(Counts, X, Y, BLOCK: tl.constexpr):
    i = tl.program_id(0)
    blocks = tl.cdiv(tl.load(Counts + i), BLOCK)
    rest = tl.load(Counts + i) // 4
    x = tl.load(X + i)
    tl.store(Y + i, x * blocks + rest)
EOF2
run floordiv "$TMP/floordiv.py" --wrt Counts,X
expect_rc floordiv_exit_1 1 floordiv
expect_grep floordiv_error "$TMP/floordiv.err" "floordiv.py:[0-9]+:[0-9]+: error: 'Counts' points to integers, as far as tgrad can tell .*a floor division"
run floordiv_x "$TMP/floordiv.py" --wrt X
expect_rc floordiv_x_exit_0 0 floordiv_x

# A module-level binding that rebinds the name it reads, from a module tgrad follows (FlagGems' `device =
# device.name` after `from flag_gems.runtime import device`): the torch module keeps the import before the binding.
mkdir -p "$TMP/rebind/pkg"
: >"$TMP/rebind/pkg/__init__.py"
echo 'import os as device' >"$TMP/rebind/pkg/rt.py"
cat >"$TMP/rebind/pkg/k.py" <<'EOF2'
import triton
import triton.language as tl
from pkg.rt import device

device = device.sep


@triton.jit
def rebinding_kernel(X, Y, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    x = tl.load(X + offs, mask=offs < n, other=0.0)
    tl.store(Y + offs, x * x, mask=offs < n)
EOF2
run rebinding "$TMP/rebind/pkg/k.py" -I "$TMP/rebind" --wrt X --emit torch
expect_rc rebinding_exit_0 0 rebinding
expect_grep rebinding_keeps_import "$TMP/rebinding.out" '^from pkg.rt import device$'
expect_grep rebinding_keeps_binding "$TMP/rebinding.out" '^device = device.sep$'
CHECKS=$((CHECKS + 1))
[ "$(grep -n '^from pkg.rt import device$' "$TMP/rebinding.out" | cut -d: -f1)0" -lt \
  "$(grep -n '^device = device.sep$' "$TMP/rebinding.out" | cut -d: -f1)0" ] || fail rebinding_import_first

# A binding in the user's file that reads one copied from a module it imports (FlagGems' `rsqrt =
# tl_extra_shim.rsqrt`, with `tl_extra_shim = triton.language.math` in flag_gems.utils): that one comes first.
mkdir -p "$TMP/shim/pk"
: >"$TMP/shim/pk/__init__.py"
printf 'import triton\nimport triton.language as tl\n\nshim = tl.math\n' >"$TMP/shim/pk/utils.py"
cat >"$TMP/shim/pk/k.py" <<'EOF2'
import triton
import triton.language as tl
from pk.utils import shim

rsqrt = shim.rsqrt


@triton.jit
def shim_rsqrt_kernel(X, Y, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    x = tl.load(X + offs, mask=offs < n, other=1.0)
    tl.store(Y + offs, rsqrt(x * x + 1.0), mask=offs < n)
EOF2
run shim_order "$TMP/shim/pk/k.py" -I "$TMP/shim" --wrt X --emit torch
expect_rc shim_order_exit_0 0 shim_order
CHECKS=$((CHECKS + 1))
[ "$(grep -n '^shim = tl.math$' "$TMP/shim_order.out" | cut -d: -f1)0" -lt \
  "$(grep -n '^rsqrt = shim.rsqrt$' "$TMP/shim_order.out" | cut -d: -f1)0" ] || fail shim_order_binding_first
expect_grep shim_order_binding_kept "$TMP/shim_order.out" '^shim = tl.math$'

# A kernel parameter named `output` (FlagGems' weight norm): the module's autograd functions keep their own locals
# apart from the kernel's parameters.
cat >"$TMP/output_param.py" <<'EOF2'
import triton
import triton.language as tl


@triton.jit
def output_param_kernel(output, inputs, ctx, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    x = tl.load(inputs + offs, mask=offs < n, other=0.0)
    tl.store(output + offs, x * tl.load(ctx + offs, mask=offs < n, other=0.0), mask=offs < n)
EOF2
run output_param "$TMP/output_param.py" --wrt inputs,ctx --emit torch
expect_rc output_param_exit_0 0 output_param
# (torch.library passes setup_context's arguments by keyword: its signature keeps PyTorch's names.)
expect_grep output_param_setup "$TMP/output_param.out" '^def _tgrad_setup_context\(ctx, inputs, output\):$'
expect_grep output_param_renamed "$TMP/output_param.out" '^    _tgrad_ctx, _tgrad_inputs, _tgrad_result = ctx, inputs, output$'
expect_no_grep output_param_no_output_local "$TMP/output_param.out" '_tgrad_if_given\(output\[|_tgrad_layout\(_tgrad_if_given\(output,'

# A taped loop whose bound a jit helper computes (FlagGems' softmax: `previous_multiple = prev_multiple_of(N,
# TILE_N)`): the launch protocol sizes the tapes through the helper's returned expression.
cat >"$TMP/helper_bound.py" <<'EOF2'
import triton
import triton.language as tl


@triton.jit
def last_block_start(n, block):
    """The start of the last block of `block` elements that covers n."""
    blocks = tl.cdiv(n, block)
    return blocks * block - block


@triton.jit
def helper_bound_kernel(X, Y, N, BLOCK: tl.constexpr):
    row = tl.program_id(0)
    acc = tl.full([BLOCK], 1.0, dtype=tl.float32)
    for start in range(0, last_block_start(N, BLOCK), BLOCK):
        acc = acc * tl.sin(tl.load(X + row * N + start + tl.arange(0, BLOCK)))
    tl.store(Y + row * BLOCK + tl.arange(0, BLOCK), acc)
EOF2
run helper_bound "$TMP/helper_bound.py" --wrt X --emit torch
expect_rc helper_bound_exit_0 0 helper_bound
expect_grep helper_bound_trips "$TMP/helper_bound.out" "^    tape_trips = _tgrad_max_over_programs\(lambda _pid: max\(0, _tgrad_cdiv\(\(\(\(_tgrad_cdiv\(N, BLOCK\) \* BLOCK\) - BLOCK\) - 0\), BLOCK\)\)"

# A float type the forward takes and whose backward tgrad cannot write (an inline PTX approximation on fp32
# registers, fed an fp16 value): the backward serves the others, and a warning says which type is left out and why.
cat >"$TMP/unserved.py" <<'EOF2'
import triton
import triton.language as tl


@triton.jit
def tanh_approx(x):
    return tl.inline_asm_elementwise("tanh.approx.f32 $0, $1;", "=f,f", [x], dtype=tl.float32, is_pure=True, pack=1)


@triton.jit
def unserved_kernel(X, Y, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    x = tl.load(X + offs, mask=offs < n, other=0.0)
    tl.store(Y + offs, tanh_approx(x), mask=offs < n)
EOF2
run unserved "$TMP/unserved.py" --wrt X
expect_rc unserved_exit_0 0 unserved
expect_grep unserved_header "$TMP/unserved.out" '^# Generic: the same backward for X = \*fp32;'
expect_grep unserved_warning "$TMP/unserved.err" "unserved.py:11:5: warning: the backward is written for the other float types only: with every pointer \*fp16 tgrad could not write it \(line 14: .*\); the module refuses such a launch \(--arg X=\*fp16 --arg Y=\*fp16 shows the error\)"

# A compile-time choice of type on a name computed from an element type (`is_half = elem == tl.float16`, `acc =
# tl.float32 if is_half else elem`): one backward for every float type, the choice kept.
cat >"$TMP/half_choice.py" <<'EOF2'
import triton
import triton.language as tl


@triton.jit
def half_choice_kernel(X, Y, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    elem = X.dtype.element_ty
    is_half = elem == tl.float16
    acc = tl.float32 if is_half else elem
    x = tl.load(X + offs, mask=offs < n, other=0.0).to(acc)
    tl.store(Y + offs, x * x, mask=offs < n)
EOF2
run half_choice "$TMP/half_choice.py" --wrt X
expect_rc half_choice_exit_0 0 half_choice
expect_grep half_choice_generic "$TMP/half_choice.out" '^# Generic: the same backward for X = \*fp32, \*fp16, \*bf16;'
expect_grep half_choice_kept "$TMP/half_choice.out" 'acc = tl.float32 if is_half else elem'

# ----------------------------------------------------------------------------------------

if [ "$FAILURES" -ne 0 ]; then
  echo "$FAILURES of $CHECKS checks failed" >&2
  exit 1
fi
echo "all $CHECKS checks passed"
exit 0
