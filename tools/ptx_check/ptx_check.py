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
  tools/ptx_check/ptx_check.py check DIR RUNNER [NAME...]   (on the GPU
      machine) runs each PTX with RUNNER (tools/runner) on the interpreter's
      inputs, and compares every buffer it writes with the interpreter's
      results and with Triton's compilation of the same kernel source (same
      grid, warps and constexprs) on the same inputs. Exit 1 on any mismatch.

Sizes are ragged (rows of 781 and 3000 elements under blocks of 1024, 1000
elements under blocks of 256, 37x300 under 16x128 tiles), in fp32, fp16 and
bf16.
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
    for dt in ("fp32", "fp16"):
        out.append(dict(name=f"argmax_{dt}", file="tools/ptx_check/argmax_kernel.py", kernel="row_argmax_kernel",
                        grid=[8], warps=4, defines={"BLOCK": 1024, "ROWS": 8},
                        args={"X": f"{dt}[8,700]", "I": "int32[16]:zeros", "J": "int32[64]:zeros", "n_cols": 700}))
    out.append(dict(name="misc_ops_fp32", file="tests/kernels/misc_ops.py", kernel="misc_ops_kernel", grid=[3, 2],
                    warps=4, defines={"BLOCK": 128, "CLAMP": True, "OUT_FP16": False},
                    args={"X": "fp32[2,1000]", "Y": "fp32[2,1000]:zeros", "Partial": "fp32[6]:zeros",
                          "n_elements": 1000, "stride_xb": 1000, "stride_yb": 1000, "scale": 1.5, "clip": 0.75}))
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
        sys.stderr.write(f"$ {' '.join(map(str, cmd))}\n{r.stdout}{r.stderr}")
        raise SystemExit(1)
    return r


def compile_step(src, step, types, path):
    cmd = [TGRAD, "compile", src, "--kernel", step["kernel"], "--num-warps", str(step["warps"]), "-o", path]
    cmd += [f"-D{k}={v}" for k, v in step["defines"].items()]
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
    for p in protocol["parameters"]:
        if "gradient" in p:
            spec = case["args"][p["name"]].split(":")[0]
            is_output = p["role"] == "output"
            buffers[p["gradient"]] = spec + ("" if is_output else ":zeros")
            if not is_output:
                outputs.append(p["gradient"])
    for sb in protocol.get("scratch_buffers", []):
        shape = [G if d.get("value") == "G" else numel(case["args"][d["numel"]]) for d in sb["shape"]]
        buffers[sb["name"]] = "fp32[" + ",".join(map(str, shape)) + "]:zeros"

    def value(v):
        if isinstance(v, int):
            return v
        if "numel" in v:
            return numel(case["args"][v["numel"]])
        if v.get("value") == "G":
            return G
        if "grid" in v:
            return case["grid"][v["grid"]] if v["grid"] < len(case["grid"]) else 1
        if "cdiv" in v:
            x, y = (value(t) for t in v["cdiv"])
            return -(-x // y)
        raise SystemExit(f"ptx_check: launch value {v} not understood")

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
    return buffers, steps, outputs


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
    cmd += [f"-D{k}={v}" for k, v in step["defines"].items()]
    cmd += [f"--arg={p}=" + (specs[v[1]] if isinstance(v, list) else str(v)) for p, v in step["args"].items()]
    run(cmd)


def prepare_case(out_dir, name, src, source, local_source, buffers, steps, outputs):
    """Compiles every launch of a case and runs them in the interpreter, one after another, each on the buffers the
    last one left. The inputs are the interpreter's seeded draws (what the first launch was given; zeros where the
    spec says so); the references are the buffers after the last launch."""
    d = os.path.join(out_dir, name)
    os.makedirs(d, exist_ok=True)
    latest = {}  # buffer -> the .npy file holding its contents after the launches so far (relative to d)
    inputs = {}
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


def prepare(out_dir):
    manifest = []
    for case in cases():
        src = os.path.join(ROOT, case["file"])
        buffers = {k: v for k, v in case["args"].items() if isinstance(v, str)}
        step = dict(kernel=case["kernel"], warps=case["warps"], grid=case["grid"], defines=case["defines"],
                    args={k: (["buffer", k] if isinstance(v, str) else v) for k, v in case["args"].items()})
        forward = prepare_case(out_dir, case["name"], src, case["file"], False, buffers, [step],
                               [k for k, v in buffers.items() if v.endswith(":zeros")])
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
        bbuffers, steps, outputs = backward_steps(case, protocol)
        # What the forward wrote (its outputs, the statistics it saves) as the forward left it: a layer norm's
        # backward reads back Mean and Rstd.
        for b, path in forward["interp"].items():
            bbuffers[b] = base_spec(bbuffers[b]) + f":npy({os.path.join(out_dir, case['name'], path)})"
        manifest.append(prepare_case(out_dir, name, os.path.join(bd, "bwd.py"), os.path.join(name, "bwd.py"), True,
                                     bbuffers, steps, outputs))
        print("prepared", case["name"], "and its backward,", len(steps), "kernel(s)")
    with open(os.path.join(out_dir, "manifest.json"), "w") as f:
        json.dump(manifest, f, indent=1)


def check(out_dir, runner, only=()):
    import importlib.util
    import shutil

    import numpy as np
    import torch

    torch_dtype = {"fp32": torch.float32, "fp16": torch.float16, "bf16": torch.bfloat16, "int64": torch.int64,
                   "int32": torch.int32}
    tol = {"fp32": (1e-4, 1e-5), "fp16": (1e-2, 2e-3), "bf16": (2e-2, 2e-2), "int64": (0, 0), "int32": (0, 0)}
    manifest = [c for c in json.load(open(os.path.join(out_dir, "manifest.json"))) if not only or c["name"] in only]
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
            inputs[name] = a.astype(np.int64) if dtype == "int64" else a.astype(np.float32)
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
        spec_ = importlib.util.spec_from_file_location("k_" + case["dir"], source)
        mod = importlib.util.module_from_spec(spec_)
        spec_.loader.exec_module(mod)
        tensors = {name: torch.from_numpy(inputs[name]).to("cuda").to(torch_dtype[spec.split("[")[0]])
                   for name, spec in case["buffers"].items()}
        for step in case["steps"]:
            call = {p: (tensors[v[1]] if isinstance(v, list) else v) for p, v in step["args"].items()}
            getattr(mod, step["kernel"])[tuple(step["grid"])](**call, **step["defines"], num_warps=step["warps"])
        torch.cuda.synchronize()
        worst = []
        for name in case["outputs"]:
            dtype = case["buffers"][name].split("[")[0]
            got = np.load(os.path.join(state, name + ".npy")).astype(np.float64)
            refs = {"triton": tensors[name].float().cpu().numpy().astype(np.float64),
                    "interp": np.load(os.path.join(d, case["interp"][name])).astype(np.float64)}
            rtol, atol = tol[dtype]
            for ref_name, ref in refs.items():
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
        prepare(sys.argv[2])
    elif len(sys.argv) >= 4 and sys.argv[1] == "check":
        sys.exit(check(sys.argv[2], sys.argv[3], set(sys.argv[4:])))
    else:
        sys.exit(__doc__)
