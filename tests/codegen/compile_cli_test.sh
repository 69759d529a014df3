#!/usr/bin/env bash
# `tgrad compile`: writes the PTX to -o and the sidecar beside it; an
# unsupported construct exits 1 with a located diagnostic; a bad flag exits 2.
set -uo pipefail
tgrad=$1
dir=${TEST_TMPDIR:-/tmp}
fail() { echo "FAIL: $*"; exit 1; }

"$tgrad" compile tests/kernels/softmax.py --kernel softmax_kernel -D BLOCK_SIZE=1024 --arg out_ptr=*fp32 \
  --arg in_ptr=*fp32 --arg in_row_stride=i32 --arg out_row_stride=i32 --arg n_cols=i32 --num-warps 8 \
  -o "$dir/softmax.ptx" || fail "compile exited $?"
grep -q '.entry softmax_kernel(' "$dir/softmax.ptx" || fail "no entry in the PTX"
grep -q '"num_warps": 8' "$dir/softmax.json" || fail "no sidecar beside the PTX"
grep -q '"type": "\*fp32"' "$dir/softmax.json" || fail "no parameter types in the sidecar"
/usr/local/cuda/bin/ptxas -arch=sm_90 "$dir/softmax.ptx" -o "$dir/softmax.cubin" || fail "ptxas rejected the PTX"

"$tgrad" compile tests/kernels/vector_add.py --kernel add_kernel -D BLOCK_SIZE=256 --arg x_ptr=*fp32 \
  --arg y_ptr=*fp32 --arg out_ptr=*fp32 --arg n_elements=i32 --emit llvm --json "$dir/add.json" > "$dir/add.ll" \
  || fail "--emit llvm exited $?"
grep -q 'define ptx_kernel void @add_kernel' "$dir/add.ll" || fail "no LLVM IR on standard output"
grep -q '"kernel": "add_kernel"' "$dir/add.json" || fail "--json not written"

"$tgrad" compile tests/kernels/vector_add.py --kernel add_kernel -D BLOCK_SIZE=256 > "$dir/out.txt" 2>&1
status=$?
[[ $status == 1 ]] || fail "missing types: exit status $status (want 1)"
grep -q "vector_add.py:8:16: error: parameter 'x_ptr' needs a type to compile" "$dir/out.txt" ||
  fail "no located diagnostic for a missing type: $(cat "$dir/out.txt")"

"$tgrad" compile tests/kernels/matmul.py --kernel matmul_kernel -D BLOCK_SIZE_M=64 -D BLOCK_SIZE_N=64 \
  -D BLOCK_SIZE_K=32 -D ACTIVATION="''" --arg a_ptr=*fp16 --arg b_ptr=*fp16 --arg c_ptr=*fp16 \
  --arg M=i32 --arg N=i32 --arg K=i32 --arg stride_am=i32 --arg stride_ak=i32 --arg stride_bk=i32 \
  --arg stride_bn=i32 --arg stride_cm=i32 --arg stride_cn=i32 > "$dir/out.txt" 2>&1
status=$?
[[ $status == 1 ]] || fail "tl.dot: exit status $status (want 1): $(cat "$dir/out.txt")"
grep -q "error: 'tl.dot' is not supported by the PTX backend yet" "$dir/out.txt" ||
  fail "no located diagnostic for tl.dot: $(cat "$dir/out.txt")"

"$tgrad" compile tests/kernels/fp8_quantize.py --kernel fake_quant_rows_kernel --arg 'X=*fp32' --arg 'Y=*fp32' \
  --arg n_cols=i32 -D BLOCK=32 > "$dir/out.txt" 2>&1
status=$?
[[ $status == 1 ]] || fail "fp8: exit status $status (want 1): $(cat "$dir/out.txt")"
grep -q "fp8_quantize.py:15:10: error: this is fp8e4nv: tgrad's PTX backend does not compile fp8 values yet" "$dir/out.txt" ||
  fail "no located diagnostic for an fp8 cast: $(cat "$dir/out.txt")"
"$tgrad" compile tests/kernels/fp8_quantize.py --kernel fake_quant_rows_kernel --arg 'X=*fp8e4nv' --arg 'Y=*fp32' \
  --arg n_cols=i32 -D BLOCK=32 > "$dir/out.txt" 2>&1
status=$?
[[ $status == 1 ]] || fail "fp8 pointer: exit status $status (want 1): $(cat "$dir/out.txt")"
grep -q "error: 'X' is \*fp8e4nv: tgrad's PTX backend does not compile fp8 values yet" "$dir/out.txt" ||
  fail "no located diagnostic for an fp8 pointer: $(cat "$dir/out.txt")"

"$tgrad" compile tests/kernels/vector_add.py --kernel add_kernel --num-warps 5 > "$dir/out.txt" 2>&1
status=$?
[[ $status == 2 ]] || fail "--num-warps 5: exit status $status (want 2)"
# A backward's kernels: the partial sums of dW and the kernel that adds them up, each with its sidecar.
"$tgrad" tests/kernels/rms_norm.py --kernel rms_norm_fwd_kernel --wrt X,W --no-grad Rstd -D BLOCK_SIZE=1024 \
  --arg X=*fp16 --arg W=*fp16 --arg Y=*fp16 --arg Rstd=*fp32 --arg stride_x_row=i32 --arg stride_y_row=i32 \
  --arg N=i32 --arg eps=fp32 --emit ptx -o "$dir/rms_bwd" || fail "--wrt --emit ptx exited $?"
for k in rms_norm_fwd_kernel_bwd rms_norm_fwd_kernel_bwd_reduce; do
  /usr/local/cuda/bin/ptxas -arch=sm_90 "$dir/rms_bwd/$k.ptx" -o "$dir/$k.cubin" || fail "ptxas rejected $k"
done
grep -q '"name": "dW_partial"' "$dir/rms_bwd/rms_norm_fwd_kernel_bwd.json" || fail "no scratch buffer in the sidecar"
grep -q '"type": "\*fp16"' "$dir/rms_bwd/rms_norm_fwd_kernel_bwd_reduce.json" || fail "the gradient's type did not reach"

"$tgrad" tests/kernels/rms_norm.py --kernel rms_norm_fwd_kernel --wrt X --emit ptx > "$dir/out.txt" 2>&1
status=$?
[[ $status == 2 ]] || fail "--emit ptx without -o DIR: exit status $status (want 2)"
echo PASS
