#!/usr/bin/env python3
"""tools/ptx_check: tgrad's own PTX against the interpreter and Triton, on the GPU.

Two halves, because tgrad (linked with LLVM) runs on the build machine and the
GPU machine has no LLVM:

  tools/ptx_check/ptx_check.py prepare DIR   (here) for every case: the kernel
      (or its backward, written by `tgrad --wrt`) compiled by `tgrad compile`
      to DIR/CASE/k*.ptx + .json, checked by ptxas -arch=sm_90; the
      interpreter's run of it (`tgrad run --out`) on seeded inputs: a
      backward's kernels one after another as its launch protocol says, each
      on the buffers the last one left (`--arg NAME=DTYPE[..]:npy(PATH)`);
      DIR/manifest.json says how to launch each and where its inputs and the
      interpreter's results are.
  tools/ptx_check/ptx_check.py check DIR RUNNER [--shard K/N] [NAME...]   (on the GPU
      machine) runs each PTX with RUNNER (tools/runner) on the interpreter's
      inputs, and compares every buffer it writes with the interpreter's
      results and with Triton's compilation of the same kernel source (same
      grid, warps and constexprs) on the same inputs. Exit 1 on any mismatch.

Every kernel of tests/kernels that `tgrad compile` accepts, and the backward
tgrad writes for it where that backward is Triton the backend compiles (the
others: bench/PTX.md). Sizes are ragged (rows of 781, 300 and 3000 elements
under blocks of 512 or 1024, 1000 elements under blocks of 256, 37x300 under
16x128 tiles, sequences of 37, 63 and 50 rows under tiles of 16), in fp32,
fp16 and bf16 where the kernel takes them (tl.exp, tl.log and tl.sigmoid take
fp32 alone, as in Triton). Buffers a kernel updates in place, the backwards'
upstream gradients and `values(...)` fills are written here (`drawn_inputs`),
the rest drawn by the interpreter.
"""
import json
import os
import re
import subprocess
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
TGRAD = os.environ.get("TGRAD", os.path.join(ROOT, "bazel-bin/tools/cli/tgrad"))
PTXAS = "/usr/local/cuda/bin/ptxas"


def cases():
    """Every case: a kernel of tests/kernels, its launch, and which buffers it writes."""
    out = []
    for dt in ("fp32", "fp16", "bf16"):
        rows, cols = 7, 781
        out.append(dict(name=f"softmax_{dt}", file="tests/kernels/softmax.py", kernel="softmax_kernel", grid=[rows],
                        warps=4, defines={"BLOCK_SIZE": 1024},
                        args={"out_ptr": f"{dt}[{rows},{cols}]:zeros", "in_ptr": f"{dt}[{rows},{cols}]",
                              "in_row_stride": cols, "out_row_stride": cols, "n_cols": cols},
                        wrt="in_ptr"))
        out.append(dict(name=f"log_softmax_{dt}", file="tests/kernels/cross_entropy.py", kernel="log_softmax_kernel",
                        grid=[rows], warps=4, defines={"BLOCK_SIZE": 1024},
                        args={"out_ptr": f"{dt}[{rows},{cols}]:zeros", "in_ptr": f"{dt}[{rows},{cols}]",
                              "in_row_stride": cols, "out_row_stride": cols, "n_cols": cols},
                        wrt="in_ptr"))
        out.append(dict(name=f"rms_norm_{dt}", file="tests/kernels/rms_norm.py", kernel="rms_norm_fwd_kernel",
                        grid=[rows], warps=4, defines={"BLOCK_SIZE": 1024},
                        args={"X": f"{dt}[{rows},{cols}]", "W": f"{dt}[{cols}]", "Y": f"{dt}[{rows},{cols}]:zeros",
                              "Rstd": f"fp32[{rows}]:zeros", "stride_x_row": cols, "stride_y_row": cols, "N": cols,
                              "eps": 1e-6},
                        wrt="X,W", no_grad="Rstd"))
        n = 3000
        out.append(dict(name=f"layer_norm_{dt}", file="tests/kernels/layer_norm.py", kernel="layer_norm_fwd_kernel",
                        grid=[5], warps=4, defines={"BLOCK_SIZE": 1024},
                        args={"X": f"{dt}[5,{n}]", "Y": f"{dt}[5,{n}]:zeros", "W": f"{dt}[{n}]", "B": f"{dt}[{n}]",
                              "Mean": "fp32[5]:zeros", "Rstd": "fp32[5]:zeros", "stride_x_row": n,
                              "stride_y_row": n, "N": n, "eps": 1e-5},
                        wrt="X,W,B", no_grad="Mean,Rstd"))
        out.append(dict(name=f"vector_add_{dt}", file="tests/kernels/vector_add.py", kernel="add_kernel", grid=[4],
                        warps=4, defines={"BLOCK_SIZE": 256},
                        args={"x_ptr": f"{dt}[1000]", "y_ptr": f"{dt}[1000]", "out_ptr": f"{dt}[1000]:zeros",
                              "n_elements": 1000},
                        wrt="x_ptr,y_ptr"))
        # GELU, tanh from libdevice (imported under a try/except, as activation libraries do).
        out.append(dict(name=f"gelu_tanh_{dt}", file="tests/kernels/gelu_conditional_import.py",
                        kernel="gelu_tanh_kernel", grid=[4], warps=4, defines={"BLOCK": 256},
                        args={"X": f"{dt}[1000]:uniform(-4,4)", "Y": f"{dt}[1000]:zeros", "n_elements": 1000},
                        wrt="X"))
        # Exact GELU (libdevice erf) through jit helpers, on a 2-D tile with a bias row; and its derivative stored.
        out.append(dict(name=f"bias_gelu_{dt}", file="tests/kernels/helper_call.py", kernel="bias_gelu_kernel",
                        grid=[3, 3], warps=4,
                        defines={"APPROX": False, "STORE_GRAD": True, "BLOCK_M": 16, "BLOCK_N": 128},
                        args={"X": f"{dt}[37,300]:uniform(-3,3)", "Bias": f"{dt}[300]", "Y": f"{dt}[37,300]:zeros",
                              "G": "fp32[37,300]:zeros", "M": 37, "N": 300, "stride_xm": 300, "stride_ym": 300,
                              "stride_gm": 300},
                        wrt="X,Bias", no_grad="G"))
        # The tanh approximation (tanh as 2 * sigmoid(2x) - 1), without the derivative stored.
        out.append(dict(name=f"bias_gelu_approx_{dt}", file="tests/kernels/helper_call.py", kernel="bias_gelu_kernel",
                        grid=[3, 3], warps=4,
                        defines={"APPROX": True, "STORE_GRAD": False, "BLOCK_M": 16, "BLOCK_N": 128},
                        args={"X": f"{dt}[37,300]:uniform(-3,3)", "Bias": f"{dt}[300]", "Y": f"{dt}[37,300]:zeros",
                              "G": "fp32[37,300]:zeros", "M": 37, "N": 300, "stride_xm": 300, "stride_ym": 300,
                              "stride_gm": 300},
                        wrt="X,Bias", no_grad="G"))
    for dt in ("fp32", "fp16"):
        out.append(dict(name=f"argmax_{dt}", file="tools/ptx_check/argmax_kernel.py", kernel="row_argmax_kernel",
                        grid=[8], warps=4, defines={"BLOCK": 1024, "ROWS": 8},
                        args={"X": f"{dt}[8,700]", "I": "int32[16]:zeros", "J": "int32[64]:zeros", "n_cols": 700}))
    for out_fp16, clamp, y_dt in ((False, True, "fp32"), (True, False, "fp16")):
        out.append(dict(name=f"misc_ops_{y_dt}", file="tests/kernels/misc_ops.py", kernel="misc_ops_kernel",
                        grid=[3, 2], warps=4, defines={"BLOCK": 128, "CLAMP": clamp, "OUT_FP16": out_fp16},
                        args={"X": "fp32[2,1000]", "Y": f"{y_dt}[2,1000]:zeros", "Partial": "fp32[6]:zeros",
                              "n_elements": 1000, "stride_xb": 1000, "stride_yb": 1000, "scale": 1.5,
                              "clip": 0.75}))
    out.append(dict(name="online_stats_fp32", file="tests/kernels/online_stats.py", kernel="online_stats_kernel",
                    grid=[5], warps=4, defines={"BLOCK": 256},
                    args={"X": "fp32[5,700]", "MEAN": "fp32[5]:zeros", "LSE": "fp32[5]:zeros",
                          "ARGMAX": "int32[5]:zeros", "n_cols": 700}))
    out.append(dict(name="atomics_fp32", file="tests/kernels/atomics.py", kernel="weighted_colsum_kernel", grid=[6],
                    warps=4, defines={"BLOCK": 512},
                    args={"X": "fp32[6,300]", "W": "fp32[300]", "Y": "fp32[300]:zeros", "n_cols": 300},
                    wrt="X,W"))
    out.append(dict(name="cross_entropy_fp32", file="tests/kernels/cross_entropy.py", kernel="cross_entropy_kernel",
                    grid=[7], warps=4, defines={"BLOCK_SIZE": 1024},
                    args={"logits_ptr": "fp32[7,781]", "targets_ptr": "int64[7]:uniform(0,781)",
                          "loss_ptr": "fp32[7]:zeros", "stride": 781, "n_cols": 781},
                    wrt="logits_ptr"))
    # libdevice's tanh, erf and pow under three spellings; the where that discards exp(x) = inf past 20; KL
    # divergence of two rows whose padding lanes are -inf.
    out.append(dict(name="libdevice_spellings_fp32", file="tests/kernels/libdevice_imports.py",
                    kernel="module_spellings_kernel", grid=[4], warps=4, defines={"BLOCK": 256},
                    args={"X": "fp32[1000]", "Y": "fp32[1000]:zeros", "G": "fp32[1000]", "N": 1000}, wrt="X,G"))
    out.append(dict(name="softplus_fp32", file="tests/kernels/masked_lanes.py", kernel="softplus_kernel", grid=[4],
                    warps=4, defines={"BLOCK": 256},
                    args={"X": "fp32[1000]:uniform(-30,30)", "Y": "fp32[1000]:zeros", "n": 1000}, wrt="X"))
    out.append(dict(name="kl_rows_fp32", file="tests/kernels/masked_lanes.py", kernel="kl_rows_kernel", grid=[7],
                    warps=4, defines={"BLOCK": 1024},
                    args={"P": "fp32[7,781]", "Q": "fp32[7,781]", "Loss": "fp32[7]:zeros", "stride": 781,
                          "n_cols": 781},
                    wrt="P,Q"))
    for mode in (1, -1, 0):
        out.append(dict(name=f"runtime_if_mode{mode}".replace("-", "m"), file="tests/kernels/runtime_if.py",
                        kernel="scaled_act_kernel", grid=[4], warps=4, defines={"BLOCK_SIZE": 256},
                        args={"x_ptr": "fp32[1000]", "out_ptr": "fp32[1000]:zeros", "n_elements": 1000,
                              "mode": mode, "scale": 1.5},
                        wrt="x_ptr"))

    # The rest of tests/kernels' kernels in the backend's subset (bench/PTX.md lists those outside it). F: every
    # float dtype; fp32 alone where a kernel's result is a long chain (recurrences, atomics' order, libdevice).
    F = ("fp32", "fp16", "bf16")

    def add(name, file, kernel, grid, defines, args, dtypes=F, **kw):
        for dt in dtypes:
            a = {k: (v.replace("DT", dt) if isinstance(v, str) else v) for k, v in args.items()}
            case = dict(name=f"{name}_{dt}", file="tests/kernels/" + file, kernel=kernel, grid=grid, warps=4,
                        defines=defines, args=a, **kw)
            out.append(case)

    for hw in (True, False):
        add(f"weight_rows_w{int(hw)}", "accumulators.py", "weight_rows_kernel", [4], {"BLOCK": 512, "HAS_WEIGHT": hw},
            {"X": "DT[13,300]", "DY": "DT[13,300]", "W": "DT[300]", "RSTD": "DT[13]", "DX": "DT[13,300]:zeros",
             "DW": "DT[4,300]:zeros", "n_rows": 13, "n_cols": 300, "stride": 300}, wrt="X,DY,W")
    add("repeated_update_inplace", "accumulators.py", "repeated_update_inplace_kernel", [4], {"BLOCK": 256},
        {"X": "DT[1000]", "n": 1000, "n_steps": 3}, inplace="X", wrt="X")
    add("block_rows_max", "accumulators.py", "block_rows_max_kernel", [3], {"BR": 8, "BC": 512},
        {"X": "DT[37,300]", "Y": "DT[3,300]:zeros", "n_rows": 37, "n_cols": 300}, wrt="X")
    add("scatter_rows", "atomics.py", "scatter_rows_kernel", [6], {"BLOCK": 512},
        {"X": "DT[6,300]", "IDX": "int32[6]:uniform(0,3)", "Y": "DT[3,300]:zeros", "n_cols": 300}, ("fp32",),
        wrt="X")
    # 9 programs for 8 rows (the last returns at once); rows whose target is 1 write zeros.
    add("masked_rows", "early_return.py", "masked_rows_kernel", [9], {"BLOCK": 512},
        {"X": "DT[9,300]", "Y": "DT[9,300]:zeros", "T": "int32[9]:uniform(0,3)", "n_rows": 8, "n_cols": 300,
         "ignore_index": 1}, ("fp32",), wrt="X")
    add("fn2", "fn1.py", "fn2_kernel", [1], {"BLOCK": 64}, {"X": "DT[64]", "Y": "DT[64]", "Out": "DT[64]:zeros"},
        ("fp32",), wrt="X,Y")
    for act, twice, dts in (("square", True, F), ("exp", False, ("fp32",))):  # tl.exp takes fp32 (as Triton's)
        add(f"helper_flag_{act}", "helper_flags.py", "helper_flag_kernel", [4],
            {"ACT": act, "TWICE": twice, "BLOCK": 256}, {"X": "DT[1000]", "Y": "DT[1000]:zeros", "n": 1000}, dts,
            wrt="X")
    add("softplus_scale", "imports_helper.py", "softplus_scale_kernel", [4], {"BLOCK": 256},
        {"X": "DT[1000]:uniform(-30,30)", "W": "DT[1000]", "Y": "DT[1000]:zeros", "n_elements": 1000}, ("fp32",),
        wrt="X,W")
    for dt_in, dt_out in (("fp32", "fp16"), ("bf16", "fp32"), ("fp16", "bf16")):
        add(f"activation_cast_{dt_in}_to", "imports_helper.py", "activation_cast_kernel", [4],
            {"OUT_DTYPE": "tl." + {"fp32": "float32", "fp16": "float16", "bf16": "bfloat16"}[dt_out], "BLOCK": 256},
            {"X": f"{dt_in}[1000]", "Y": "DT[1000]:zeros", "n_elements": 1000}, (dt_out,), wrt="X")
    # Rows of 104 elements under blocks of 128 (a descriptor's row stride is a multiple of 16 bytes).
    add("descriptor_scale", "imports_helper.py", "descriptor_scale_kernel", [3], {"BM": 16, "BN": 128},
        {"X": "DT[37,104]", "W": "DT[104]", "Y": "DT[37,104]:zeros", "M": 37, "N": 104}, wrt="X,W")
    add("rotary_inplace", "in_place.py", "rotary_inplace_kernel", [5], {"HEADS": 4, "HALF": 32},
        {"Q": "DT[5,192]", "COS": "DT[5,32]", "SIN": "DT[5,32]", "n_heads": 3}, inplace="Q", wrt="Q,COS,SIN")
    add("rotary", "in_place.py", "rotary_kernel", [5], {"HEADS": 4, "HALF": 32},
        {"Q": "DT[5,192]", "COS": "DT[5,32]", "SIN": "DT[5,32]", "OUT": "DT[5,192]:zeros", "n_heads": 3},
        wrt="Q,COS,SIN")
    add("square_positive_inplace", "in_place.py", "square_positive_inplace_kernel", [4], {"BLOCK": 256},
        {"X": "DT[1000]", "n": 1000}, inplace="X", wrt="X")
    add("staged_rows", "launch_options.py", "_staged_rows_kernel", [4], {"BLOCK": 512, "num_stages": 2},
        {"X": "DT[13,300]", "Y": "DT[13,300]:zeros", "n_rows": 13, "n_cols": 300}, wrt="X")
    for k in ("tanh_scale", "tanh_alias", "rsqrt", "rsqrt_alias", "erf", "erf_alias", "pow", "pow_alias", "exp2",
              "exp2_alias", "tl_math_names"):
        add(k, "libdevice_imports.py", k + "_kernel", [4], {"BLOCK": 256},
            {"X": "DT[1000]:uniform(0.25,2)", "Y": "DT[1000]:zeros", "G": "DT[1000]", "N": 1000}, ("fp32",),
            wrt="X,G")
    add("padded_scale", "masked_lanes.py", "padded_scale_kernel", [7], {"BLOCK": 512},
        {"X": "DT[7,300]", "S": "DT[1]", "Y": "DT[7,300]:zeros", "n_cols": 300}, wrt="X,S")
    add("reshaped_scale", "masked_lanes.py", "reshaped_scale_kernel", [1], {"B": 512},
        {"X": "DT[300]", "S": "DT[1]", "Out": "DT[1]:zeros", "n": 300}, wrt="X,S")
    add("log_rows", "masked_lanes.py", "log_rows_kernel", [7], {"BLOCK": 512},
        {"X": "DT[7,300]:uniform(0.5,2)", "W": "DT[1]:uniform(0.5,2)", "Out": "DT[7]:zeros", "n_cols": 300},
        ("fp32",), wrt="X,W")
    for hb in (True, False):
        add(f"bias_act_b{int(hb)}", "merges.py", "bias_act_kernel", [4], {"HAS_BIAS": hb, "BLOCK": 256},
            {"X": "DT[1000]", "B": "DT[1000]", "Y": "DT[1000]:zeros", "N": 1000}, wrt="X,B")
    add("row_sum", "merges.py", "row_sum_kernel", [7], {"BLOCK": 128},
        {"X": "DT[7,300]", "Y": "DT[7]:zeros", "n_cols": 300, "n_chunks": 3}, wrt="X")
    for mode in (1, -1):
        add(f"pick_mode{mode}".replace("-", "m"), "merges.py", "pick_kernel", [5], {"BLOCK": 128},
            {"X": "DT[5,128]", "Y": "DT[5]:zeros", "mode": mode}, ("fp32",), wrt="X")
    for c, w in ((True, True), (False, False), (True, False)):
        add(f"centered_rows_c{int(c)}w{int(w)}", "merges.py", "centered_rows_kernel", [7],
            {"IS_CENTERED": c, "HAS_WEIGHT": w, "BLOCK": 512},
            {"X": "DT[7,300]", "W": "DT[7]", "Y": "DT[7,300]:zeros", "Mean": "fp32[7]:zeros", "n_cols": 300},
            wrt="X,W")
    for w, b in ((True, True), (False, True), (True, False)):
        add(f"gated_affine_w{int(w)}b{int(b)}", "merges.py", "gated_affine_kernel", [7],
            {"HAS_WEIGHT": w, "HAS_BIAS": b, "BLOCK": 512},
            {"X": "DT[7,300]", "W": "DT[300]", "B": "DT[300]", "Y": "DT[7,300]:zeros", "n_cols": 300}, wrt="X,W,B")
    for hz in (True, False):
        add(f"optional_accumulator_z{int(hz)}", "merges.py", "optional_accumulator_kernel", [5],
            {"HAS_Z": hz, "BLOCK": 128},
            {"X": "DT[5,3,128]", "W": "DT[3,128]", "Y": "DT[5,128]:zeros", "Z": "DT[5,128]:zeros", "n_chunks": 3},
            wrt="X,W")
    for mode in (0, 2, 1):
        add(f"mode_select_mode{mode}", "misc_ops.py", "mode_select_kernel", [4], {"BLOCK": 256},
            {"X": "DT[1000]", "Y": "DT[1000]:zeros", "n_elements": 1000, "mode": mode}, wrt="X")
    for n, even in ((1000, False), (1024, True)):
        add(f"silu_scale_fwd_n{n}", "mixed_module.py", "_silu_scale_fwd_kernel", [4],
            {"BLOCK_N": 256, "EVEN_N": even}, {"X": f"DT[{n}]", "Y": f"DT[{n}]:zeros", "N": n, "scale": 1.5},
            wrt="X")
    add("silu_scale_bwd", "mixed_module.py", "_silu_scale_bwd_kernel", [4], {"BLOCK_N": 256},
        {"X": "DT[1000]", "DY": "DT[1000]", "DX": "DT[1000]:zeros", "N": 1000, "scale": 1.5}, wrt="X,DY")
    add("l2_normalize", "mixed_module.py", "_l2_normalize_kernel", [7], {"BLOCK_SIZE": 128},
        {"X": "DT[7,300]", "Y": "DT[7,300]:zeros", "stride_x": 300, "stride_y": 300, "n": 300}, wrt="X")
    for hb in (True, False):
        add(f"biased_scale_b{int(hb)}", "name_reuse.py", "biased_scale_kernel", [4], {"HAS_BIAS": hb, "BLOCK": 256},
            {"X": "DT[1000]", "bias": "DT[1000]", "Y": "DT[1000]:zeros", "n": 1000}, wrt="X,bias")
    add("dequant_scale", "name_reuse.py", "dequant_scale_kernel", [4], {"BLOCK": 256},
        {"S": "DT[1000]", "Z": "int32[1000]:uniform(0,256)", "Y": "DT[1000]:zeros", "n": 1000}, wrt="S")
    # Rows of 304: the pointer hints' alignment holds in every dtype (Triton vectorizes on it).
    add("hinted_rows", "name_reuse.py", "hinted_rows_kernel", [7], {"BLOCK": 512},
        {"X": "DT[7,304]", "W": "DT[304]", "Y": "DT[7,304]:zeros", "n_cols": 304}, wrt="X,W")
    add("shifted_with_state", "name_reuse.py", "shifted_with_state_kernel", [7], {"SHIFT": 3, "BLOCK": 512},
        {"X": "DT[7,300]", "S": "DT[7,3]", "Y": "DT[7,300]:zeros", "n_cols": 300}, wrt="X,S")
    add("segment_decay", "online_stats.py", "segment_decay_kernel", [3], {"BLOCK": 128},
        {"X": "DT[5,300]", "DECAY": "DT[5]", "SEQ": "int32[5]:uniform(0,2)", "Y": "DT[5,300]:zeros", "n_chunks": 5,
         "dim": 300}, ("fp32",), wrt="X,DECAY")  # tl.exp takes fp32
    for by_rows in (True, False):
        add(f"running_norm_r{int(by_rows)}", "online_stats.py", "running_norm_kernel", [2],
            {"BR": 8, "BC": 32, "BY_ROWS": by_rows}, {"X": "DT[2,3,8,32]", "Y": "DT[2,8,32]:zeros", "n_steps": 3},
            ("fp32",), wrt="X")
    add("running_max", "recurrence.py", "running_max_kernel", [3], {"BLOCK": 128},
        {"X": "DT[3,4,128]", "Y": "DT[3,128]:zeros", "n_chunks": 4}, ("fp32",), wrt="X")
    add("linear_scan", "recurrence.py", "linear_scan_kernel", [3], {"BLOCK": 128},
        {"X": "DT[3,5,128]", "A": "DT[3,5,128]", "H": "DT[3,128]:zeros", "n_steps": 5}, ("fp32",), wrt="X,A")
    add("nested_scan", "recurrence.py", "nested_scan_kernel", [3], {"BLOCK": 128},
        {"X": "DT[3,2,3,128]", "Y": "DT[3,128]:zeros", "n_outer": 2, "n_inner": 3}, ("fp32",), wrt="X")
    for mode in (1, 0):
        add(f"branch_scan_mode{mode}", "recurrence.py", "branch_scan_kernel", [3], {"BLOCK": 128},
            {"X": "DT[3,4,128]", "Y": "DT[3,128]:zeros", "n": 4, "mode": mode}, ("fp32",), wrt="X")
    add("nested_taped", "recurrence.py", "nested_taped_kernel", [3], {"BLOCK": 128},
        {"X": "DT[3,2,3,128]", "Y": "DT[3,128]:zeros", "n_outer": 2, "n_inner": 3}, ("fp32",), wrt="X")
    add("reverse_scan", "recurrence.py", "reverse_scan_kernel", [3], {"BLOCK": 128},
        {"X": "DT[3,5,128]", "A": "DT[3,5,128]", "H": "DT[3,5,128]:zeros", "n_steps": 5}, ("fp32",), wrt="X,A")
    add("weighted_running_max", "recurrence.py", "weighted_running_max_kernel", [3], {"BLOCK": 128},
        {"X": "DT[3,4,128]", "W": "DT[128]", "Y": "DT[3,128]:zeros", "n_chunks": 4}, wrt="X,W")
    add("offset_recurrence", "recurrence.py", "offset_recurrence_kernel", [5], {"SKIP": 3, "BLOCK": 512},
        {"X": "DT[5,300]", "Y": "DT[5,512]:zeros", "n_cols": 300}, ("fp32",), wrt="X")
    add("rotary_pairs_inplace", "rotary_pairs.py", "rotary_pairs_inplace_kernel", [5], {"HALF": 100, "BLOCK": 64},
        {"X": "DT[5,200]", "COS": "DT[5,100]", "SIN": "DT[5,100]", "row_stride": 200}, inplace="X",
        wrt="X,COS,SIN")
    add("scale_ifexp", "runtime_ifexp.py", "scale_kernel", [4], {"BLOCK": 256},
        {"X": "DT[1000]", "Y": "DT[1000]:zeros", "S": "DT[4]", "n": 1000}, wrt="X,S")
    for split in (False, True):
        add(f"centered_ifexp_s{int(split)}", "runtime_ifexp.py", "centered_kernel", [7],
            {"SPLIT": split, "BLOCK": 512},
            {"X": "DT[7,300]", "Y": "DT[7,300]:zeros", "L": "DT[7]", "S": "DT[7]", "n_cols": 300}, ("fp32",),
            wrt="X,L")
    # Three sequences of 37, 63 and 50 rows of 40 (cu_seqlens), under 16x64 tiles; or two of 37.
    for name, kernel, extra in (("varlen_gate", "varlen_gate_kernel", {}),
                                ("varlen_tail_gate_g1", "varlen_tail_gate_kernel", {"USE_G": True}),
                                ("varlen_tail_gate_g0", "varlen_tail_gate_kernel", {"USE_G": False})):
        # Not varlen_tail_gate with IS_VARLEN: `(BT - 1) if ... else (T % BT - 1)` joins a constexpr and an int64
        # (T = eos - bos), which tgrad rejects as Triton does.
        if kernel != "varlen_tail_gate_kernel":
            add(name + "_varlen", "varlen.py", kernel, [4, 3], dict(IS_VARLEN=True, **extra, BT=16, BD=64),
                {"X": "DT[150,40]", "G": "DT[150,40]", "Y": "DT[150,40]:zeros",
                 "cu_seqlens": "int32[4]:values(0,37,100,150)", "T": 0, "D": 40}, wrt="X,G")
        add(name + "_fixed", "varlen.py", kernel, [3, 2], dict(IS_VARLEN=False, **extra, BT=16, BD=64),
            {"X": "DT[74,40]", "G": "DT[74,40]", "Y": "DT[74,40]:zeros", "cu_seqlens": "int32[4]:values(0,0,0,0)",
             "T": 37, "D": 40}, wrt="X,G")
    add("causal_taps", "varlen.py", "causal_taps_kernel", [4], {"NTAPS": 4, "BT": 256},
        {"X": "DT[1000]", "W": "DT[4]", "Y": "DT[1000]:zeros", "T": 1000}, wrt="X,W")
    add("shifted_rows_scalar", "varlen.py", "shifted_rows_kernel", [3], {"D": 32, "BR": 16, "OFFSETS_TENSOR": False},
        {"X": "DT[37,32]", "TABLE": "DT[45,32]", "Y": "DT[37,32]:zeros", "offsets": 5, "n_rows": 37}, wrt="X,TABLE")
    add("shifted_rows_tensor", "varlen.py", "shifted_rows_kernel", [3], {"D": 32, "BR": 16, "OFFSETS_TENSOR": True},
        {"X": "DT[37,32]", "TABLE": "DT[45,32]", "Y": "DT[37,32]:zeros", "offsets": "int32[3]:uniform(0,8)",
         "n_rows": 37}, wrt="X,TABLE")
    return out


SIG = {"int64": "i64", "int32": "i32", "int16": "i16", "int8": "i8", "int1": "i1"}


def arg_type(spec):
    if isinstance(spec, str):
        dtype = spec.split("[")[0]
        return "*" + SIG.get(dtype, dtype)
    if isinstance(spec, float):
        return "fp32"
    return "i32"


def run(cmd, **kw):
    r = subprocess.run(cmd, capture_output=True, text=True, **kw)
    if r.returncode != 0:
        raise SystemExit(f"$ {' '.join(map(str, cmd))}\n{r.stdout}{r.stderr}")
    return r


def define(v):
    """A tl.constexpr value as `-D` spells it: a string quoted, a dtype (tl.float16) as it is."""
    if isinstance(v, str) and not v.startswith("tl."):
        return repr(v)
    return str(v)


def write_npy(path, dtype, shape, values):
    """A .npy file without numpy (which the build machine lacks): float32 or int32, C order."""
    import array
    code, descr = ("i", "<i4") if dtype.startswith("int") else ("f", "<f4")
    header = "{'descr': '%s', 'fortran_order': False, 'shape': (%s), }" % (
        descr, "".join(f"{d}," for d in shape))
    header += " " * (63 - (10 + len(header)) % 64) + "\n"
    os.makedirs(os.path.dirname(path), exist_ok=True)
    with open(path, "wb") as f:
        f.write(b"\x93NUMPY\x01\x00" + len(header).to_bytes(2, "little") + header.encode())
        array.array(code, values).tofile(f)


def drawn_inputs(name, d, buffers, drawn):
    """Inputs written here rather than drawn by the interpreter: a `values(...)` fill (cu_seqlens), and buffers a
    kernel updates in place (the interpreter writes them back after its run, so the draws would be lost): uniform
    in [-1, 1), seeded by the case's name. Their specs become npy(PATH); returns {buffer: path relative to d}."""
    import random
    rng = random.Random(name)
    given = {}
    for b, spec in list(buffers.items()):
        base = base_spec(spec)
        dtype = base.split("[")[0]
        m = re.match(r".*:values\(([-\d,]+)\)$", spec)
        if m:
            values = [int(v) for v in m.group(1).split(",")]
        elif b in drawn:
            values = [rng.uniform(-1, 1) for _ in range(numel(base))]
        else:
            continue
        given[b] = os.path.join("init", b + ".npy")
        write_npy(os.path.join(d, given[b]), dtype, [int(x) for x in re.search(r"\[([\d,]+)\]", base).group(1)
                                                     .split(",")], values)
        buffers[b] = base + f":npy({os.path.join(d, given[b])})"
    return given


def compile_step(src, step, types, path):
    cmd = [TGRAD, "compile", src, "--kernel", step["kernel"], "--num-warps", str(step["warps"]), "-o", path]
    cmd += [f"-D{k}={define(v)}" for k, v in step["defines"].items()]
    cmd += [f"--arg={k}={t}" for k, t in types.items()]
    run(cmd)
    run([PTXAS, "-arch=sm_90", path, "-o", "/dev/null"])


def numel(spec):
    n = 1
    for d in re.match(r"\w+\[([\d,]+)\]", spec).group(1).split(","):
        n *= int(d)
    return n


def backward_steps(case, protocol):
    """The backward's buffers and kernel launches, from its launch protocol: G (the backward's programs) is the
    forward's grid; scratch starts at zero; gradients of loads start at zero, gradients of stores are seeded."""
    buffers = {k: v.split(":")[0] for k, v in case["args"].items() if isinstance(v, str)}
    scalars = {k: v for k, v in case["args"].items() if not isinstance(v, str)}
    G = case["grid"][0]
    outputs = []
    # The seeded (upstream) gradients are drawn here, not by the interpreter: a backward may overwrite them (it reads
    # and zeroes each with tl.atomic_xchg, or updates an in-place buffer's gradient), and the interpreter writes
    # back only what a buffer holds after its run, so its draws would be lost.
    drawn = []
    params = {p["name"]: p for p in protocol["parameters"]}
    for p in protocol["parameters"]:
        if "gradient" in p:
            spec = case["args"][p["name"]].split(":")[0]
            g = params[p["gradient"]]
            if "dtype" in g:  # a buffer updated in place: its gradient is a float32 copy of the upstream one
                spec = {"float32": "fp32"}[g["dtype"]] + spec[spec.index("["):]
            # An in-place buffer's gradient comes in seeded (after the kernel) and leaves as the gradient of
            # what the buffer held before.
            seeded = p["role"] == "output" or g.get("in_place", False)
            buffers[p["gradient"]] = spec + ("" if seeded else ":zeros")
            if seeded:
                drawn.append(p["gradient"])
            if p["role"] != "output":
                outputs.append(p["gradient"])

    def value(v, pid=None):
        """A launch protocol's size expression; program_id under max_over_programs (a tape's trips)."""
        if isinstance(v, int):
            return v
        if "numel" in v:
            return numel(case["args"][v["numel"]])
        if v.get("value") == "G":
            return G
        if "grid" in v:
            return case["grid"][v["grid"]] if v["grid"] < len(case["grid"]) else 1
        if "arg" in v:
            return case["args"][v["arg"]] if v["arg"] in case["args"] else case["defines"][v["arg"]]
        if "program_id" in v:
            return pid[v["program_id"]]
        ops = {"cdiv": lambda x, y: -(-x // y), "sub": lambda x, y: x - y, "mul": lambda *t: __import__("math").prod(t),
               "max": max, "min": min, "add": lambda *t: sum(t)}
        for op, f in ops.items():
            if op in v:
                return f(*(value(t, pid) for t in v[op]))
        if "max_over_programs" in v:
            g = case["grid"] + [1] * (3 - len(case["grid"]))
            return max(value(v["max_over_programs"], (i, j, k))
                       for i in range(g[0]) for j in range(g[1]) for k in range(g[2]))
        raise SystemExit(f"ptx_check: launch value {v} not understood")

    for sb in protocol.get("scratch_buffers", []):
        shape = [value(d) for d in sb["shape"]]
        # A tape in its own dtype: integers carried by a loop (an index, a segment id) come back as they went.
        dtype = {"float32": "fp32", "int32": "int32", "int64": "int64"}.get(sb.get("dtype", "float32"))
        if dtype is None:
            raise SystemExit(f"ptx_check: scratch buffer {sb['name']} of dtype {sb['dtype']} not handled")
        buffers[sb["name"]] = dtype + "[" + ",".join(map(str, shape)) + "]:zeros"

    steps = []
    for k in protocol["kernels"]:
        step = dict(kernel=k["name"], warps=case["warps"], args={}, defines={})
        if "call" in k:
            step["defines"] = dict(case["defines"])
            for name in k["call"]["positional"] + k["call"]["keyword"]:
                if name in case["defines"]:
                    continue
                if name in buffers:
                    step["args"][name] = ["buffer", name]
                elif name in scalars:
                    step["args"][name] = scalars[name]
                elif name == "num_programs":
                    step["args"][name] = case["grid"][0]
                elif name.endswith("_numel"):
                    step["args"][name] = numel(case["args"][name[:-len("_numel")]])
                elif "value" in params.get(name, {}):  # a size the backward needs (a tape's trips)
                    step["args"][name] = value(params[name]["value"])
                else:
                    raise SystemExit(f"ptx_check: no value for {name}")
        else:
            for name, v in k["arguments"].items():
                if isinstance(v, int):
                    step["defines"][name] = v
                elif "buffer" in v:
                    step["args"][name] = ["buffer", v["buffer"]]
                else:
                    step["args"][name] = value(v)
        step["grid"] = [value(g) for g in k["grid"]]
        steps.append(step)
    return buffers, steps, outputs, drawn


def step_types(step, buffers):
    types = {}
    for name, v in step["args"].items():
        types[name] = arg_type(buffers[v[1]]) if isinstance(v, list) else arg_type(v)
    return types


def base_spec(spec):
    """DTYPE[shape] of a buffer spec, without its fill."""
    return spec.split(":")[0]


def interpret(src, step, specs, out_dir):
    """One launch in the interpreter (`tgrad run`): each buffer parameter from specs (by buffer name), every buffer
    it was given written to out_dir as PARAM.npy."""
    cmd = [TGRAD, "run", src, "--kernel", step["kernel"], "--grid", ",".join(map(str, step["grid"])), "--out", out_dir]
    cmd += [f"-D{k}={define(v)}" for k, v in step["defines"].items()]
    cmd += [f"--arg={p}=" + (specs[v[1]] if isinstance(v, list) else str(v)) for p, v in step["args"].items()]
    run(cmd)


def prepare_case(out_dir, name, src, source, local_source, buffers, steps, outputs, drawn=()):
    """Compiles every launch of a case and runs them in the interpreter, one after another, each on the buffers the
    last one left. The inputs are the interpreter's seeded draws (what the first launch was given; zeros where the
    spec says so); the references are the buffers after the last launch."""
    d = os.path.join(out_dir, name)
    os.makedirs(d, exist_ok=True)
    buffers = dict(buffers)
    inputs = drawn_inputs(name, d, buffers, drawn)
    latest = dict(inputs)  # buffer -> the .npy file holding its contents after the launches so far (relative to d)
    for k, step in enumerate(steps):
        step["ptx"] = f"k{k}.ptx"
        compile_step(src, step, step_types(step, buffers), os.path.join(d, step["ptx"]))
        specs = {b: (base_spec(spec) + f":npy({os.path.join(d, latest[b])})" if b in latest else spec)
                 for b, spec in buffers.items()}
        interpret(src, step, specs, os.path.join(d, f"interp{k}"))
        for p, v in step["args"].items():
            if not isinstance(v, list):
                continue
            if v[1] not in latest and not buffers[v[1]].endswith(":zeros"):
                inputs[v[1]] = os.path.join(f"interp{k}", p + ".npy")  # read only: as drawn
            latest[v[1]] = os.path.join(f"interp{k}", p + ".npy")
    for b, spec in buffers.items():
        if b not in inputs and not spec.endswith(":zeros"):
            raise SystemExit(f"ptx_check: {name}: buffer {b} is neither zeros nor given to a launch")
    return dict(name=name, dir=name, source=source, local_source=local_source,
                buffers={b: base_spec(spec) for b, spec in buffers.items()}, inputs=inputs, steps=steps,
                outputs=outputs, interp={b: latest[b] for b in outputs})


def prepare(out_dir, only=()):
    manifest = []
    for case in cases():
        if only and not any(case["name"].startswith(o) for o in only):
            continue
        src = os.path.join(ROOT, case["file"])
        buffers = {k: v for k, v in case["args"].items() if isinstance(v, str)}
        step = dict(kernel=case["kernel"], warps=case["warps"], grid=case["grid"], defines=case["defines"],
                    args={k: (["buffer", k] if isinstance(v, str) else v) for k, v in case["args"].items()})
        inplace = case.get("inplace", "").split(",") if case.get("inplace") else []
        forward = prepare_case(out_dir, case["name"], src, case["file"], False, buffers, [step],
                               [k for k, v in buffers.items() if v.endswith(":zeros")] + inplace, inplace)
        manifest.append(forward)
        if "wrt" not in case:
            print("prepared", case["name"])
            continue
        # The backward: written by tgrad, compiled by tgrad, run by the interpreter.
        name = case["name"] + "_bwd"
        bd = os.path.join(out_dir, name)
        os.makedirs(bd, exist_ok=True)
        cmd = [TGRAD, src, "--kernel", case["kernel"], "--wrt", case["wrt"]]
        if "no_grad" in case:
            cmd += ["--no-grad", case["no_grad"]]
        run(cmd + ["-o", os.path.join(bd, "bwd.py")])
        protocol = json.loads(run(cmd + ["--emit", "json"]).stdout)
        bbuffers, steps, outputs, drawn = backward_steps(case, protocol)
        # What the forward wrote (its outputs, the statistics it saves) as the forward left it: a layer norm's
        # backward reads back Mean and Rstd. A buffer updated in place is passed as it was before the forward
        # (the launch protocol's "as passed to the forward").
        for b, path in list(forward["interp"].items()) + list(forward["inputs"].items()):
            if b in inplace:
                path = forward["inputs"][b]
            bbuffers[b] = base_spec(bbuffers[b]) + f":npy({os.path.join(out_dir, case['name'], path)})"
        try:
            manifest.append(prepare_case(out_dir, name, os.path.join(bd, "bwd.py"), os.path.join(name, "bwd.py"),
                                         True, bbuffers, steps, outputs, drawn))
        except SystemExit as e:
            # A backward outside the backend's subset: it must stop at the located error the case names.
            if "bwd_error" not in case or f"'{case['bwd_error']}' is not supported by the PTX backend" not in str(e):
                raise
            print("prepared", case["name"], f"(its backward stops at {case['bwd_error']}: not run)")
            continue
        if "bwd_error" in case:
            raise SystemExit(f"ptx_check: {name} compiles: drop its bwd_error")
        print("prepared", case["name"], "and its backward,", len(steps), "kernel(s)")
    with open(os.path.join(out_dir, "manifest.json"), "w") as f:
        json.dump(manifest, f, indent=1)


def check(out_dir, runner, only=(), shard=(0, 1)):
    import importlib.util
    import shutil

    import types

    import numpy as np
    import torch
    import triton
    import triton.language as tl
    from triton.runtime.jit import JITFunction

    # Tensor descriptors made inside a kernel (imports_helper.py) take their scratch from Triton's allocator.
    triton.set_allocator(lambda size, align, stream: torch.empty(size, dtype=torch.int8, device="cuda"))

    torch_dtype = {"fp32": torch.float32, "fp16": torch.float16, "bf16": torch.bfloat16, "int64": torch.int64,
                   "int32": torch.int32}
    tol = {"fp32": (1e-4, 1e-5), "fp16": (1e-2, 2e-3), "bf16": (2e-2, 2e-2), "int64": (0, 0), "int32": (0, 0)}
    manifest = [c for c in json.load(open(os.path.join(out_dir, "manifest.json"))) if not only or c["name"] in only]
    manifest = manifest[shard[0]::shard[1]]  # --shard K/N: every Nth case from the Kth, for N processes at once
    failures = 0
    for case in manifest:
        d = os.path.join(out_dir, case["dir"])
        state = os.path.join(d, "state")
        os.makedirs(state, exist_ok=True)
        inputs = {}
        for name, spec in case["buffers"].items():
            dtype, shape = re.match(r"(\w+)\[([\d,]+)\]", spec).groups()
            shape = [int(x) for x in shape.split(",")]
            a = np.load(os.path.join(d, case["inputs"][name])) if name in case["inputs"] else np.zeros(shape)
            inputs[name] = a.astype({"int64": np.int64, "int32": np.int32}.get(dtype, np.float32))
            np.save(os.path.join(state, name + ".npy"), inputs[name])
        # tgrad's PTX, kernel after kernel, buffers kept in `state` between them.
        error = None
        for k, step in enumerate(case["steps"]):
            out = os.path.join(d, f"gpu{k}")
            os.makedirs(out, exist_ok=True)
            args = [f"--arg={p}=" + (os.path.join(state, v[1] + ".npy") if isinstance(v, list) else str(v))
                    for p, v in step["args"].items()]
            r = subprocess.run([runner, os.path.join(d, step["ptx"]), "--grid", ",".join(map(str, step["grid"])),
                                "--out", out] + args, capture_output=True, text=True)
            if r.returncode != 0:
                error = r.stderr.strip()
                break
            for p, v in step["args"].items():
                if isinstance(v, list):
                    shutil.copy(os.path.join(out, p + ".npy"), os.path.join(state, v[1] + ".npy"))
        if error:
            print(f"FAIL {case['name']}: the runner: {error}")
            failures += 1
            continue
        # Triton on the same inputs, the same launches.
        source = os.path.join(out_dir if case.get("local_source") else ROOT, case["source"])
        # As a module of a package made for its folder: a kernel file's relative imports (imports_helper.py's
        # `from .helper_module import ...`) find its siblings.
        package = "ptx_check_" + re.sub(r"\W", "_", case["dir"])
        pkg = types.ModuleType(package)
        pkg.__path__ = [os.path.dirname(source)]
        sys.modules[package] = pkg
        spec_ = importlib.util.spec_from_file_location(
            package + "." + os.path.splitext(os.path.basename(source))[0], source)
        mod = importlib.util.module_from_spec(spec_)
        sys.modules[spec_.name] = mod
        spec_.loader.exec_module(mod)
        tensors = {name: torch.from_numpy(inputs[name]).to("cuda").to(torch_dtype[spec.split("[")[0]])
                   for name, spec in case["buffers"].items()}
        for step in case["steps"]:
            call = {p: (tensors[v[1]] if isinstance(v, list) else v) for p, v in step["args"].items()}
            kernel = getattr(mod, step["kernel"])
            while not isinstance(kernel, JITFunction):  # under @triton.autotune or @triton.heuristics: the kernel
                kernel = kernel.fn  # itself, with the same constexprs and warps as tgrad's launch
            defines = {k: (getattr(tl, v[3:]) if isinstance(v, str) and v.startswith("tl.") else v)
                       for k, v in step["defines"].items()}
            kernel[tuple(step["grid"])](**call, **defines, num_warps=step["warps"])
        torch.cuda.synchronize()
        worst = []
        # The case's data precision: the narrowest float type among its buffers. An fp32 output computed
        # by half-precision arithmetic (a bf16 row's tl.sum, squared into an fp32 buffer) is defined only
        # to that precision: Triton and tgrad add in different orders (bench/PTX.md measures this), so
        # against Triton it is compared at the data's tolerance, as tools/gpu_check compares every output
        # of a half-precision case. Against the interpreter, each output keeps its own dtype's tolerance.
        floats = [spec.split("[")[0] for spec in case["buffers"].values()]
        data = "bf16" if "bf16" in floats else "fp16" if "fp16" in floats else "fp32"
        for name in case["outputs"]:
            dtype = case["buffers"][name].split("[")[0]
            got = np.load(os.path.join(state, name + ".npy")).astype(np.float64)
            refs = {"triton": tensors[name].float().cpu().numpy().astype(np.float64),
                    "interp": np.load(os.path.join(d, case["interp"][name])).astype(np.float64)}
            for ref_name, ref in refs.items():
                rtol, atol = tol[dtype]
                if ref_name == "triton" and dtype in ("fp32", "fp16", "bf16"):
                    rtol, atol = max(rtol, tol[data][0]), max(atol, tol[data][1])
                err = np.abs(got - ref)
                ok = bool(np.all(err <= atol + rtol * np.abs(ref)))
                worst.append(f"{name} vs {ref_name}: max_abs_err={err.max():.3g}{'' if ok else ' MISMATCH'}")
                failures += 0 if ok else 1
        print(("ok   " if all("MISMATCH" not in w for w in worst) else "FAIL ") + case["name"] +
              f" ({len(case['steps'])} kernel(s)): " + "; ".join(worst), flush=True)
    print(f"{len(manifest)} cases, {failures} mismatches")
    return 1 if failures else 0


if __name__ == "__main__":
    if len(sys.argv) >= 3 and sys.argv[1] == "prepare":
        prepare(sys.argv[2], sys.argv[3:])
    elif len(sys.argv) >= 4 and sys.argv[1] == "check":
        rest = sys.argv[4:]
        shard = (0, 1)
        if rest[:1] == ["--shard"]:
            shard = tuple(int(x) for x in rest[1].split("/"))
            rest = rest[2:]
        sys.exit(check(sys.argv[2], sys.argv[3], set(rest), shard))
    else:
        sys.exit(__doc__)
