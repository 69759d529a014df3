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

A second table nests loops: a kernel whose loops are nested 1 to 6 deep, each
loop loading a tile, carrying two values, and holding two ifs on tl.constexpr
flags without values (the shape of fla's NPU kernels, whose analyses once cost
a constant factor per level of nesting). Each level adds the same 15 lines, so
a time per level that stays flat (a ratio near 1 to the depth before, beyond
the growth of the code) is polynomial; a ratio that stays near 2 or more is
exponential in the depth.

    python3 bench/ad_time.py [--tgrad bazel-bin/tools/cli/tgrad] [--sizes 1000,2000,4000,8000]
    python3 bench/ad_time.py --only nested [--depths 1,2,3,4,5,6]

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


def nested_loops(depth):
    """A kernel whose loops are nested `depth` deep (see the module's docstring)."""
    lines = ["import triton", "import triton.language as tl", "", "", "@triton.jit",
             "def k(x_ptr, w_ptr, out_ptr, n, BLOCK: tl.constexpr, USE_W: tl.constexpr, SCALE: tl.constexpr):",
             "    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)",
             "    mask = offs < n",
             "    acc0 = tl.zeros([BLOCK], dtype=tl.float32)",
             "    s0 = tl.zeros([BLOCK], dtype=tl.float32)"]

    def level(d, i):
        out = [f"{i}for i{d} in range(2):",
               f"{i}    x{d} = tl.load(x_ptr + offs + i{d} * n, mask=mask, other=0.0)",
               f"{i}    if USE_W:",
               f"{i}        w{d} = tl.load(w_ptr + offs + i{d} * n, mask=mask, other=0.0)",
               f"{i}        t{d} = x{d} * w{d}",
               f"{i}    else:",
               f"{i}        t{d} = x{d} * 2.0",
               f"{i}    if SCALE:",
               f"{i}        t{d} = t{d} * 0.5",
               f"{i}    acc{d} = acc{d} + t{d} * s{d}",
               f"{i}    s{d} = s{d} + tl.sin(t{d})"]
        if d + 1 < depth:
            out += [f"{i}    acc{d + 1} = acc{d} * 0.5", f"{i}    s{d + 1} = s{d}"]
            out += level(d + 1, i + "    ")
            out += [f"{i}    acc{d} = acc{d} + acc{d + 1}", f"{i}    s{d} = s{d} * s{d + 1}"]
        return out

    return "\n".join(lines + level(0, "    ") + ["    tl.store(out_ptr + offs, acc0 + s0, mask=mask)", ""])


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
    parser.add_argument("--depths", default="1,2,3,4,5,6")
    parser.add_argument("--only", choices=("straight", "nested"), help="one table only")
    args = parser.parse_args()
    if args.only != "nested":
        straight_line(args)
    if args.only != "straight":
        nested(args)


def straight_line(args):
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


def nested(args):
    print()
    print("| kernel | loop depth | lines | median s | time / time at one level less |")
    print("| --- | --- | --- | --- | --- |")
    with tempfile.TemporaryDirectory() as tmp:
        previous = None
        for depth in (int(d) for d in args.depths.split(",")):
            path = os.path.join(tmp, f"nested_{depth}.py")
            source = nested_loops(depth)
            with open(path, "w") as f:
                f.write(source)
            s = median_seconds([args.tgrad, path, "--kernel", "k", "--wrt", "x_ptr,w_ptr"])
            ratio = f"{s / previous:.2f}" if previous else ""
            previous = s
            print(f"| nested loops, generic | {depth} | {source.count(chr(10))} | {s:.3f} | {ratio} |")


if __name__ == "__main__":
    main()
