#!/usr/bin/env python3
"""How long tgrad takes to differentiate long functions (not a test: a table).

Straight-line code is what unrolled `tl.static_range` loops and long fused
epilogues turn into. The script writes a tile function and a kernel of N
statements (a chain of exp, sin and products, each statement reading the
one before it and one two back), runs `tgrad FILE --wrt ...` on each three
times (with every parameter's type given, and with none: then tgrad
differentiates once per representative type, on as many threads as there
are cores, to prove the backward generic), and prints the median wall time, the time per statement and the
ratio to the size half as large (2.0 is linear).

    python3 bench/ad_time.py [--tgrad bazel-bin/tools/cli/tgrad] [--sizes 1000,2000,4000,8000]

Build the CLI first (`tools/tgrad --help` or `bazel build //tools/cli:tgrad`).
"""
import argparse
import os
import statistics
import subprocess
import tempfile
import time


def chain(n, indent="    "):
    lines = [f"{indent}a0 = x * y"]
    for i in range(1, n):
        if i % 3 == 0:
            lines.append(f"{indent}a{i} = tl.exp(a{i - 1}) * y + x")
        elif i % 3 == 1:
            lines.append(f"{indent}a{i} = a{i - 1} * a{i - 1} - y")
        else:
            lines.append(f"{indent}a{i} = tl.sin(a{i - 1}) + a{i - 2}")
    return lines


def tile_function(n):
    return "\n".join(["import triton", "import triton.language as tl", "", "", "@triton.jit", "def f(x, y):"] +
                     chain(n) + [f"    return a{n - 1}", ""])


def kernel(n):
    head = ["import triton", "import triton.language as tl", "", "", "@triton.jit",
            "def k(x_ptr, y_ptr, out_ptr, n, BLOCK: tl.constexpr):",
            "    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)",
            "    mask = offs < n",
            "    x = tl.load(x_ptr + offs, mask=mask, other=0.0)",
            "    y = tl.load(y_ptr + offs, mask=mask, other=0.0)"]
    return "\n".join(head + chain(n - 5) + [f"    tl.store(out_ptr + offs, a{n - 6}, mask=mask)", ""])


def median_seconds(cmd, runs=3):
    times = []
    for _ in range(runs):
        start = time.perf_counter()
        done = subprocess.run(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
        times.append(time.perf_counter() - start)
        if done.returncode != 0:
            raise SystemExit(f"{' '.join(cmd)} failed:\n{done.stderr}")
    return statistics.median(times)


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--tgrad", default=os.path.join(os.path.dirname(__file__), "..", "bazel-bin/tools/cli/tgrad"))
    parser.add_argument("--sizes", default="1000,2000,4000,8000")
    args = parser.parse_args()
    sizes = [int(s) for s in args.sizes.split(",")]
    print("| function | statements | median s | ms per statement | time / time at half the size |")
    print("| --- | --- | --- | --- | --- |")
    with tempfile.TemporaryDirectory() as tmp:
        typed_tile = ["--arg", "x=fp32[16]", "--arg", "y=fp32[16]"]
        typed_kernel = ["--arg", "x_ptr=*fp32", "--arg", "y_ptr=*fp32", "--arg", "out_ptr=*fp32", "--arg", "n=i32"]
        for what, write, wrt in (("tile function, types given", tile_function, ["--fn", "f", "--wrt", "0,1"] + typed_tile),
                                 ("tile function, generic", tile_function, ["--fn", "f", "--wrt", "0,1"]),
                                 ("kernel, types given", kernel, ["--kernel", "k", "--wrt", "x_ptr,y_ptr"] + typed_kernel),
                                 ("kernel, generic", kernel, ["--kernel", "k", "--wrt", "x_ptr,y_ptr"])):
            previous = {}
            for n in sizes:
                path = os.path.join(tmp, f"{write.__name__}_{n}.py")
                with open(path, "w") as f:
                    f.write(write(n))
                s = median_seconds([args.tgrad, path] + wrt)
                ratio = f"{s / previous[n // 2]:.2f}" if n // 2 in previous else ""
                previous[n] = s
                print(f"| {what} | {n} | {s:.3f} | {1000 * s / n:.3f} | {ratio} |")


if __name__ == "__main__":
    main()
