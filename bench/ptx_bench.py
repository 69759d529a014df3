#!/usr/bin/env python3
"""bench/ptx_bench.py: tgrad's PTX against Triton's compilation of the same kernel, on the H100.

  python3 bench/ptx_bench.py prepare DIR        (build machine) compiles every case with
      `tgrad compile` (timed: the median of 5 runs of the whole command) into DIR,
      with the backward source `tgrad --wrt` writes; DIR/manifest.json.
  python3 bench/ptx_bench.py run DIR RUNNER     (GPU machine) times each PTX with
      tools/runner and Triton's compilation of the same source with the same grid,
      num_warps and constexprs, on the same inputs (drawn on the GPU, given to the
      runner as .npy files), the same way: CUDA events around 20 launches back
      to back (so that neither host's launch cost shows), the median of 50 such
      samples after 3 warm-up launches; and Triton's compile time (its first launch
      with an empty cache, less a warm launch); prints a markdown table.

Cases: softmax, rms norm and layer norm, forward and the backward tgrad writes
(with respect to the input rows), at 4096x4096 in fp32 and fp16, BLOCK_SIZE=4096
and num_warps=8 (what each kernel file's own launcher picks for 4096 columns).
GB/s counts each row's bytes read once and written once.
"""
import json
import os
import statistics
import subprocess
import sys
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
TGRAD = os.environ.get("TGRAD", os.path.join(ROOT, "bazel-bin/tools/cli/tgrad"))
M = N = 4096
SIG = {"int32": "i32", "int64": "i64"}


def cases():
    out = []
    for dt in ("fp32", "fp16"):
        rows = {"softmax": dict(file="tests/kernels/softmax.py", kernel="softmax_kernel", wrt="in_ptr",
                                args={"out_ptr": f"{dt}[{M},{N}]:zeros", "in_ptr": f"{dt}[{M},{N}]",
                                      "in_row_stride": N, "out_row_stride": N, "n_cols": N},
                                rows_moved=2),
                "rms_norm": dict(file="tests/kernels/rms_norm.py", kernel="rms_norm_fwd_kernel", wrt="X",
                                 no_grad="Rstd",
                                 args={"X": f"{dt}[{M},{N}]", "W": f"{dt}[{N}]", "Y": f"{dt}[{M},{N}]:zeros",
                                       "Rstd": f"fp32[{M}]:ones", "stride_x_row": N, "stride_y_row": N, "N": N,
                                       "eps": 1e-6},
                                 rows_moved=2),
                "layer_norm": dict(file="tests/kernels/layer_norm.py", kernel="layer_norm_fwd_kernel", wrt="X",
                                   no_grad="Mean,Rstd",
                                   args={"X": f"{dt}[{M},{N}]", "Y": f"{dt}[{M},{N}]:zeros", "W": f"{dt}[{N}]",
                                         "B": f"{dt}[{N}]", "Mean": f"fp32[{M}]:zeros", "Rstd": f"fp32[{M}]:ones",
                                         "stride_x_row": N, "stride_y_row": N, "N": N, "eps": 1e-5},
                                   rows_moved=2)}
        for name, c in rows.items():
            out.append(dict(c, name=f"{name} {dt}", dtype=dt, grid=[M], warps=8, defines={"BLOCK_SIZE": N}))
    return out


def arg_type(spec):
    if isinstance(spec, str):
        d = spec.split("[")[0]
        return "*" + SIG.get(d, d)
    return "fp32" if isinstance(spec, float) else "i32"


def compile_timed(src, kernel, case, args, path):
    cmd = [TGRAD, "compile", src, "--kernel", kernel, "--num-warps", str(case["warps"]), "-o", path]
    cmd += [f"-D{k}={v}" for k, v in case["defines"].items()]
    cmd += [f"--arg={k}={arg_type(v)}" for k, v in args.items()]
    times = []
    for _ in range(5):
        t = time.perf_counter()
        subprocess.run(cmd, check=True)
        times.append(time.perf_counter() - t)
    return statistics.median(times) * 1e3


def prepare(out_dir):
    manifest = []
    for k, case in enumerate(cases()):
        d = os.path.join(out_dir, f"case{k}")
        os.makedirs(d, exist_ok=True)
        src = os.path.join(ROOT, case["file"])
        ms = compile_timed(src, case["kernel"], case, case["args"], os.path.join(d, "fwd.ptx"))
        manifest.append(dict(case, dir=f"case{k}", ptx="fwd.ptx", source=case["file"], which="forward",
                             tgrad_compile_ms=ms))
        cmd = [TGRAD, src, "--kernel", case["kernel"], "--wrt", case["wrt"], "--no-grad", case["no_grad"]] \
            if "no_grad" in case else [TGRAD, src, "--kernel", case["kernel"], "--wrt", case["wrt"]]
        subprocess.run(cmd + ["-o", os.path.join(d, "bwd.py")], check=True)
        protocol = json.loads(subprocess.run(cmd + ["--emit", "json"], check=True, capture_output=True).stdout)
        kernel = protocol["kernels"][0]
        bargs = {k2: (v.split(":")[0] if isinstance(v, str) and v.endswith(":zeros") else v)
                 for k2, v in case["args"].items()}
        for g in kernel["call"]["keyword"]:
            forward = next(p for p in protocol["parameters"] if p.get("gradient") == g)
            spec = case["args"][forward["name"]].split(":")[0]
            bargs[g] = spec + (":zeros" if forward["role"] != "output" else "")
        ms = compile_timed(os.path.join(d, "bwd.py"), kernel["name"], case, bargs, os.path.join(d, "bwd.ptx"))
        manifest.append(dict(case, dir=f"case{k}", ptx="bwd.ptx", source=os.path.join(f"case{k}", "bwd.py"), local_source=True,
                             kernel=kernel["name"], args=bargs, which="backward", rows_moved=3, tgrad_compile_ms=ms))
        print("prepared", case["name"])
    with open(os.path.join(out_dir, "manifest.json"), "w") as f:
        json.dump(manifest, f, indent=1)


def run(out_dir, runner):
    import importlib.util
    import re
    import tempfile

    import numpy
    import torch

    dtypes = {"fp32": torch.float32, "fp16": torch.float16, "int32": torch.int32}
    manifest = json.load(open(os.path.join(out_dir, "manifest.json")))
    print("| kernel | pass | tgrad median ms | Triton median ms | tgrad GB/s | Triton GB/s | tgrad / Triton time "
          "| tgrad compile ms | Triton compile ms |")
    print("| --- | --- | --- | --- | --- | --- | --- | --- | --- |")
    inputs = tempfile.mkdtemp()
    for case in manifest:
        d = os.path.join(out_dir, case["dir"])
        # The inputs: drawn here on the GPU and given to both, the runner through .npy files (its own seeded
        # draws of four 4096x4096 buffers take seconds on the host).
        call = {}
        args = []
        for name, v in case["args"].items():
            if isinstance(v, str):
                dt, shape = re.match(r"(\w+)\[([\d,]+)\]", v).groups()
                shape = [int(s) for s in shape.split(",")]
                t = torch.rand(shape, device="cuda", dtype=torch.float32) * 2 - 1
                if v.endswith(":ones"):
                    t = torch.ones(shape, device="cuda")
                elif v.endswith(":zeros"):
                    t = torch.zeros(shape, device="cuda")
                call[name] = t.to(dtypes[dt])
                path = os.path.join(inputs, name + ".npy")
                numpy.save(path, call[name].float().cpu().numpy())
                args.append(f"--arg={name}={path}")
            else:
                call[name] = v
                args.append(f"--arg={name}={v}")
        r = subprocess.run([runner, os.path.join(d, case["ptx"]), "--grid", ",".join(map(str, case["grid"])),
                            "--bench", "50", "--batch", "20"] + args, capture_output=True, text=True)
        if r.returncode != 0:
            print(f"| {case['name']} | {case['which']} | runner failed: {r.stderr.strip()} |")
            continue
        tgrad_ms = json.loads(r.stdout.strip().splitlines()[-1])["median_ms"]
        # Triton: the same source, grid, warps and constexprs; a fresh cache to time its compilation.
        os.environ["TRITON_CACHE_DIR"] = tempfile.mkdtemp()
        path = os.path.join(out_dir if case.get("local_source") else ROOT, case["source"])
        spec = importlib.util.spec_from_file_location(f"m{id(case)}", path)
        mod = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(mod)
        kernel = getattr(mod, case["kernel"])
        launch = lambda: kernel[tuple(case["grid"])](**call, **case["defines"], num_warps=case["warps"])
        torch.cuda.synchronize()
        t0 = time.perf_counter()
        launch()
        torch.cuda.synchronize()
        first = time.perf_counter() - t0
        t0 = time.perf_counter()
        launch()
        torch.cuda.synchronize()
        warm = time.perf_counter() - t0
        for _ in range(3):
            launch()
        times = []
        for _ in range(50):
            s, e = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
            s.record()
            for _ in range(20):
                launch()
            e.record()
            e.synchronize()
            times.append(s.elapsed_time(e) / 20)
        triton_ms = statistics.median(times)
        elem = 4 if case["dtype"] == "fp32" else 2
        gbytes = case["rows_moved"] * M * N * elem / 1e9
        print(f"| {case['name']} | {case['which']} | {tgrad_ms:.4f} | {triton_ms:.4f} | {gbytes / tgrad_ms * 1e3:.0f} "
              f"| {gbytes / triton_ms * 1e3:.0f} | {tgrad_ms / triton_ms:.2f}x | {case['tgrad_compile_ms']:.0f} "
              f"| {(first - warm) * 1e3:.0f} |", flush=True)


if __name__ == "__main__":
    if len(sys.argv) >= 3 and sys.argv[1] == "prepare":
        prepare(sys.argv[2])
    elif len(sys.argv) >= 4 and sys.argv[1] == "run":
        run(sys.argv[2], sys.argv[3])
    else:
        sys.exit(__doc__)
