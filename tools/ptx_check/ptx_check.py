#!/usr/bin/env python3
"""tools/ptx_check: tgrad's own PTX against the interpreter and Triton, on the GPU.

Two halves, because tgrad (linked with LLVM) runs on the build machine and the
GPU machine has no LLVM:

  tools/ptx_check/ptx_check.py prepare DIR   (here) for every case: the kernel
      (or its backward, written by `tgrad --wrt`) compiled by `tgrad compile`
      to DIR/CASE/kernel.ptx + .json, checked by ptxas -arch=sm_90; for
      forward kernels the interpreter's run (`tgrad run --out`) on seeded
      inputs; DIR/manifest.json says how to launch each.
  tools/ptx_check/ptx_check.py check DIR RUNNER   (on the GPU machine) runs each
      PTX with RUNNER (tools/runner) on the interpreter's inputs (or on seeded
      inputs for backwards), and compares every buffer it writes with the
      interpreter's results and with Triton's compilation of the same kernel
      source (same grid, warps and constexprs) on the same inputs. Exit 1 on
      any mismatch.

Sizes are ragged (rows of 781 and 3000 elements under blocks of 1024, 1000
elements under blocks of 256), in fp32, fp16 and bf16.
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
                        wrt="X", no_grad="Rstd"))
        n = 3000
        out.append(dict(name=f"layer_norm_{dt}", file="tests/kernels/layer_norm.py", kernel="layer_norm_fwd_kernel",
                        grid=[5], warps=4, defines={"BLOCK_SIZE": 1024},
                        args={"X": f"{dt}[5,{n}]", "Y": f"{dt}[5,{n}]:zeros", "W": f"{dt}[{n}]", "B": f"{dt}[{n}]",
                              "Mean": "fp32[5]:zeros", "Rstd": "fp32[5]:zeros", "stride_x_row": n,
                              "stride_y_row": n, "N": n, "eps": 1e-5},
                        wrt="X", no_grad="Mean,Rstd"))
        out.append(dict(name=f"vector_add_{dt}", file="tests/kernels/vector_add.py", kernel="add_kernel", grid=[4],
                        warps=4, defines={"BLOCK_SIZE": 256},
                        args={"x_ptr": f"{dt}[1000]", "y_ptr": f"{dt}[1000]", "out_ptr": f"{dt}[1000]:zeros",
                              "n_elements": 1000},
                        wrt="x_ptr,y_ptr"))
    out.append(dict(name="cross_entropy_fp32", file="tests/kernels/cross_entropy.py", kernel="cross_entropy_kernel",
                    grid=[7], warps=4, defines={"BLOCK_SIZE": 1024},
                    args={"logits_ptr": "fp32[7,781]", "targets_ptr": "int64[7]:uniform(0,781)",
                          "loss_ptr": "fp32[7]:zeros", "stride": 781, "n_cols": 781},
                    wrt="logits_ptr"))
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


def compile_case(src, kernel, case, args, path):
    cmd = [TGRAD, "compile", src, "--kernel", kernel, "--num-warps", str(case["warps"]), "-o", path]
    cmd += [f"-D{k}={v}" for k, v in case["defines"].items()]
    cmd += [f"--arg={k}={arg_type(v)}" for k, v in args.items()]
    run(cmd)
    run([PTXAS, "-arch=sm_90", path, "-o", "/dev/null"])


def prepare(out_dir):
    manifest = []
    for case in cases():
        d = os.path.join(out_dir, case["name"])
        os.makedirs(d, exist_ok=True)
        src = os.path.join(ROOT, case["file"])
        compile_case(src, case["kernel"], case, case["args"], os.path.join(d, "kernel.ptx"))
        cmd = [TGRAD, "run", src, "--kernel", case["kernel"], "--grid", ",".join(map(str, case["grid"])),
               "--out", os.path.join(d, "interp")]
        cmd += [f"-D{k}={v}" for k, v in case["defines"].items()]
        cmd += [f"--arg={k}={v}" for k, v in case["args"].items()]
        run(cmd)
        manifest.append(dict(case, dir=case["name"], ptx="kernel.ptx", source=case["file"], interp=True))
        # The backward: written by tgrad, compiled by tgrad, checked against Triton running the same source.
        bwd = dict(case, name=case["name"] + "_bwd")
        bd = os.path.join(out_dir, bwd["name"])
        os.makedirs(bd, exist_ok=True)
        cmd = [TGRAD, src, "--kernel", case["kernel"], "--wrt", case["wrt"]]
        if "no_grad" in case:
            cmd += ["--no-grad", case["no_grad"]]
        run(cmd + ["-o", os.path.join(bd, "bwd.py")])
        protocol = json.loads(run(cmd + ["--emit", "json"]).stdout)
        kernel = protocol["kernels"][0]
        bargs = dict(case["args"])
        for g in kernel["call"]["keyword"]:
            forward = next(p for p in protocol["parameters"] if p.get("gradient") == g)
            spec = case["args"][forward["name"]]
            dtype_shape = spec.split(":")[0]
            # Gradients of loads are written (zeros first); gradients of stores are read (seeded).
            bargs[g] = dtype_shape + (":zeros" if forward["role"] != "output" else "")
        for k, v in bargs.items():
            # Outputs of the forward are inputs of the backward only through their gradients.
            if isinstance(v, str) and v.endswith(":zeros") and k in case["args"]:
                bargs[k] = v.split(":")[0]
        compile_case(os.path.join(bd, "bwd.py"), kernel["name"], case, bargs, os.path.join(bd, "kernel.ptx"))
        manifest.append(dict(bwd, kernel=kernel["name"], args=bargs, dir=bwd["name"], ptx="kernel.ptx",
                             source=os.path.join(bwd["name"], "bwd.py"), local_source=True, interp=False,
                             order=list(case["args"]) + kernel["call"]["keyword"]))
        print("prepared", case["name"], "and its backward")
    with open(os.path.join(out_dir, "manifest.json"), "w") as f:
        json.dump(manifest, f, indent=1)


def check(out_dir, runner):
    import importlib.util

    import numpy as np
    import torch

    torch_dtype = {"fp32": torch.float32, "fp16": torch.float16, "bf16": torch.bfloat16, "int64": torch.int64,
                   "int32": torch.int32}
    tol = {"fp32": (1e-4, 1e-5), "fp16": (1e-2, 2e-3), "bf16": (2e-2, 2e-2), "int64": (0, 0), "int32": (0, 0)}
    manifest = json.load(open(os.path.join(out_dir, "manifest.json")))
    failures = 0
    for case in manifest:
        d = os.path.join(out_dir, case["dir"])
        gpu_dir = os.path.join(d, "gpu")
        os.makedirs(gpu_dir, exist_ok=True)
        gen = torch.Generator().manual_seed(0)
        inputs, runner_args = {}, []
        for name, spec in case["args"].items():
            if not isinstance(spec, str):
                runner_args.append(f"--arg={name}={spec}")
                continue
            dtype, shape = re.match(r"(\w+)\[([\d,]+)\]", spec).groups()
            shape = [int(s) for s in shape.split(",")]
            if spec.endswith(":zeros"):
                inputs[name] = np.zeros(shape, dtype=np.float32)
            elif case["interp"]:
                inputs[name] = np.load(os.path.join(d, "interp", name + ".npy"))
            elif dtype.startswith("int"):
                inputs[name] = torch.randint(0, 781, shape, generator=gen).numpy().astype(np.int64)
            else:
                inputs[name] = (torch.rand(shape, generator=gen) * 2 - 1).numpy()
            path = os.path.join(d, "in_" + name + ".npy")
            np.save(path, inputs[name].astype(np.int64) if dtype == "int64" else inputs[name].astype(np.float32))
            runner_args.append(f"--arg={name}={path}")
        r = subprocess.run([runner, os.path.join(d, case["ptx"]), "--grid", ",".join(map(str, case["grid"])),
                            "--out", gpu_dir] + runner_args, capture_output=True, text=True)
        if r.returncode != 0:
            print(f"FAIL {case['name']}: the runner: {r.stderr.strip()}")
            failures += 1
            continue
        # Triton on the same inputs.
        source = os.path.join(out_dir if case.get("local_source") else ROOT, case["source"])
        spec_ = importlib.util.spec_from_file_location("k_" + case["dir"], source)
        mod = importlib.util.module_from_spec(spec_)
        spec_.loader.exec_module(mod)
        tensors, call_args = {}, {}
        for name, spec in case["args"].items():
            if isinstance(spec, str):
                dtype = spec.split("[")[0]
                tensors[name] = torch.from_numpy(np.ascontiguousarray(inputs[name])).to("cuda").to(torch_dtype[dtype])
                call_args[name] = tensors[name]
            else:
                call_args[name] = spec
        # Every argument by keyword: a generated backward takes its gradients after the constexprs.
        getattr(mod, case["kernel"])[tuple(case["grid"])](**call_args, **case["defines"], num_warps=case["warps"])
        torch.cuda.synchronize()
        worst = []
        for name, spec in case["args"].items():
            if not (isinstance(spec, str) and (spec.endswith(":zeros"))):
                continue
            dtype = spec.split("[")[0]
            got = np.load(os.path.join(gpu_dir, name + ".npy")).astype(np.float64)
            refs = {"triton": tensors[name].float().cpu().numpy().astype(np.float64)}
            if case["interp"]:
                refs["interp"] = np.load(os.path.join(d, "interp", name + ".npy")).astype(np.float64)
            rtol, atol = tol[dtype]
            for ref_name, ref in refs.items():
                err = np.abs(got - ref)
                ok = bool(np.all(err <= atol + rtol * np.abs(ref)))
                worst.append(f"{name} vs {ref_name}: max_abs_err={err.max():.3g}{'' if ok else ' MISMATCH'}")
                failures += 0 if ok else 1
        print(("ok   " if all("MISMATCH" not in w for w in worst) else "FAIL ") + case["name"] + ": " + "; ".join(worst))
    print(f"{len(manifest)} cases, {failures} mismatches")
    return 1 if failures else 0


if __name__ == "__main__":
    if len(sys.argv) >= 3 and sys.argv[1] == "prepare":
        prepare(sys.argv[2])
    elif len(sys.argv) >= 4 and sys.argv[1] == "check":
        sys.exit(check(sys.argv[2], sys.argv[3]))
    else:
        sys.exit(__doc__)
