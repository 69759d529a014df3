#!/usr/bin/env bash
# Speed of the reference interpreter on the matmul and attention test
# kernels (not a test: a table for the record). Each case runs 3 times; the
# table shows the median wall time and the arithmetic rate it implies.
# Usage: bench/interp_bench.sh   (builds the CLI first)
set -euo pipefail
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
cd "$root"
bazel build --noshow_progress --ui_event_filters=-info //tools/cli:tgrad >/dev/null 2>&1
tgrad="$root/bazel-bin/tools/cli/tgrad"

median_seconds() {  # runs "$@" three times, prints the median wall time
  local times=()
  for _ in 1 2 3; do
    local start end
    start=$(date +%s.%N)
    "$@" >/dev/null
    end=$(date +%s.%N)
    times+=("$(echo "$end - $start" | bc -l)")
  done
  printf '%s\n' "${times[@]}" | sort -g | sed -n 2p
}

printf '%-34s %-14s %10s %14s\n' "case" "mode" "median s" "MFLOP/s"
row() {  # name mode flops command...
  local name="$1" mode="$2" flops="$3"
  shift 3
  local s
  s=$(median_seconds "$@")
  printf '%-34s %-14s %10.3f %14.1f\n' "$name" "$mode" "$s" "$(echo "$flops / $s / 1000000" | bc -l)"
}

for mode in fp32 float64; do
  extra=()
  [[ $mode == float64 ]] && extra=(--float64)
  for size in 128 256; do
    M=$size N=$size K=$size
    row "matmul ${M}x${N}x${K} (64x64x32 tiles)" "$mode" "$((2 * M * N * K))" \
      "$tgrad" run tests/kernels/matmul.py --kernel matmul_kernel --grid "$((M / 64)),$((N / 64))" \
      --arg "a_ptr=fp16[$M,$K]" --arg "b_ptr=fp16[$K,$N]" --arg "c_ptr=fp16[$M,$N]:zeros" \
      --arg M=$M --arg N=$N --arg K=$K --arg stride_am=$K --arg stride_ak=1 --arg stride_bk=$N --arg stride_bn=1 \
      --arg stride_cm=$N --arg stride_cn=1 -D BLOCK_SIZE_M=64 -D BLOCK_SIZE_N=64 -D BLOCK_SIZE_K=32 \
      -D "ACTIVATION=''" "${extra[@]}"
  done
  for ctx in 128 256; do
    D=64 H=2
    flops=$((4 * H * ctx * ctx * D))
    row "attention H=$H N_CTX=$ctx D=$D" "$mode" "$flops" \
      "$tgrad" run tests/kernels/attention.py --kernel attn_fwd_kernel --grid "$((ctx / 64)),$H" \
      --arg "Q=fp16[$H,$ctx,$D]" --arg "K=fp16[$H,$ctx,$D]" --arg "V=fp16[$H,$ctx,$D]" --arg sm_scale=0.125 \
      --arg "M=fp32[$H,$ctx]:zeros" --arg "Out=fp16[$H,$ctx,$D]:zeros" \
      --arg stride_qz=$((H * ctx * D)) --arg stride_qh=$((ctx * D)) --arg stride_qm=$D --arg stride_qk=1 \
      --arg stride_kz=$((H * ctx * D)) --arg stride_kh=$((ctx * D)) --arg stride_kn=$D --arg stride_kk=1 \
      --arg stride_vz=$((H * ctx * D)) --arg stride_vh=$((ctx * D)) --arg stride_vn=$D --arg stride_vk=1 \
      --arg stride_oz=$((H * ctx * D)) --arg stride_oh=$((ctx * D)) --arg stride_om=$D --arg stride_ok=1 \
      --arg H=$H --arg N_CTX=$ctx -D HEAD_DIM=$D -D BLOCK_M=64 -D BLOCK_N=64 -D IS_CAUSAL=False "${extra[@]}"
  done
done
