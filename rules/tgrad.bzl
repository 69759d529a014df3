"""Bazel rules that run tgrad at build time.

    load("//rules:tgrad.bzl", "tgrad_jit_source")

    tgrad_jit_source(
        name = "softmax_jit",        # writes softmax_jit.py
        src = "softmax.py",
        fn = "softmax_kernel",       # optional: one function only
    )

`tgrad_jit_source` extracts the @triton.jit code of a kernel file (its jit
functions, module constants and imports), checked by tgrad's parser and
printed in tgrad's stable formatting. A kernel file tgrad cannot read fails
the build with tgrad's located diagnostics. The action is hermetic: its only
inputs are the tgrad binary and the kernel file, and its output is
byte-identical across runs.

`tgrad_backward` writes the backward of a tile function (tgrad FILE --fn
NAME --wrt ... --arg ...): readable Triton source, checked by tgrad.

    tgrad_backward(
        name = "fn1_bwd",            # writes fn1_bwd.py
        src = "fn1.py",
        fn = "fn1",
        wrt = ["x", "y"],
        args = ["x=fp32[N]", "y=fp32[N]"],
    )

`tgrad_gradient` differentiates a kernel (or a tile function) and writes,
as three declared outputs, what the command line's --emit modes print:

    tgrad_gradient(
        name = "gelu_bias_grad",
        src = "gelu_bias.py",
        kernel = "bias_gelu_kernel",
        wrt = ["X", "B"],
        # optional: args = ["X=*fp16", ...], defines = ["BLOCK=1024"],
        # no_grad = ["Mean"], deps = ["utils.py"], deterministic = True,
        # tiling = ["BLOCK_M", "BLOCK_N"]
    )

  gelu_bias_grad.py      the backward kernel(s), Triton source (--emit python)
  gelu_bias_grad.json    its launch protocol (--emit json;
                         include/tgrad/launch_protocol.schema.json)
  gelu_bias_grad_op.py   the kernel as a PyTorch op with autograd (--emit
                         torch), its ops in torch.ops.tgrad_gelu_bias_grad_op

Each output group (`backward`, `protocol`, `torch`) holds one of them. The
PTX of both kernels and a cc_library with typed C++ launch functions
(DESIGN.md §6) wait for the PTX backend, which does not exist yet.

Every action here is hermetic: its only inputs are the tgrad binary, the
kernel file and its `deps`; it names files by their paths relative to the
workspace root, so its outputs are byte-identical across builds and across
checkouts at different paths (tools/hermeticity_check builds the examples in
two checkouts and compares them), and it can run under remote execution.

Each rule takes `warnings = False` to pass tgrad -w: tgrad's warnings are not
printed (its errors still fail the build), for kernels whose warnings are
known and expected, as the test kernels' (tests/BUILD).
"""

def _tgrad_jit_source_impl(ctx):
    out = ctx.actions.declare_file(ctx.label.name + ".py")
    args = ctx.actions.args()
    args.add(ctx.file.src)
    args.add("--emit", "source")
    if ctx.attr.fn:
        args.add("--fn", ctx.attr.fn)
    if not ctx.attr.warnings:
        args.add("-w")
    args.add("-o", out)
    ctx.actions.run(
        executable = ctx.executable._tgrad,
        arguments = [args],
        inputs = [ctx.file.src],
        outputs = [out],
        mnemonic = "TgradJitSource",
        progress_message = "tgrad: extracting the jit code of %s" % ctx.file.src.short_path,
    )
    return [DefaultInfo(files = depset([out]), runfiles = ctx.runfiles(files = [out]))]

tgrad_jit_source = rule(
    implementation = _tgrad_jit_source_impl,
    doc = "The @triton.jit code of a kernel file, parsed and printed by tgrad.",
    attrs = {
        "src": attr.label(allow_single_file = [".py"], mandatory = True, doc = "The kernel file."),
        "fn": attr.string(doc = "Only this jit function (tgrad --fn)."),
        "warnings": attr.bool(
            default = True,
            doc = "False: tgrad -w, no warnings printed (errors still fail the build), for kernels whose " +
                  "warnings are known and expected, such as test inputs.",
        ),
        "_tgrad": attr.label(
            default = Label("//tools/cli:tgrad"),
            executable = True,
            cfg = "exec",
        ),
    },
)


def _differentiate(ctx, function_flag, function, emit, out):
    """Runs `tgrad SRC --fn|--kernel NAME --wrt ... [--emit EMIT] -o OUT`."""
    args = ctx.actions.args()
    args.add(ctx.file.src)
    args.add(function_flag, function)
    if emit != "python":
        args.add("--emit", emit)
    args.add("--wrt", ",".join(ctx.attr.wrt))
    if ctx.attr.no_grad:
        args.add("--no-grad", ",".join(ctx.attr.no_grad))
    for a in ctx.attr.args:
        args.add("--arg", a)
    for d in ctx.attr.defines:
        args.add("-D", d)
    if getattr(ctx.attr, "deterministic", False):
        args.add("--deterministic")
    if getattr(ctx.attr, "tiling", []):
        args.add("--tiling", ",".join(ctx.attr.tiling))
    if not ctx.attr.warnings:
        args.add("-w")
    args.add("-o", out)
    ctx.actions.run(
        executable = ctx.executable._tgrad,
        arguments = [args],
        inputs = [ctx.file.src] + ctx.files.deps,
        outputs = [out],
        mnemonic = "TgradBackward",
        progress_message = "tgrad: differentiating %s in %s (%s)" % (function, ctx.file.src.short_path, emit),
    )

def _tgrad_backward_impl(ctx):
    out = ctx.actions.declare_file(ctx.label.name + (".json" if ctx.attr.emit == "json" else ".py"))
    _differentiate(ctx, "--fn", ctx.attr.fn, ctx.attr.emit, out)
    return [DefaultInfo(files = depset([out]), runfiles = ctx.runfiles(files = [out]))]

tgrad_backward = rule(
    implementation = _tgrad_backward_impl,
    doc = "The backward of a tile function, as Triton source written by tgrad.",
    attrs = {
        "src": attr.label(allow_single_file = [".py"], mandatory = True, doc = "The kernel file."),
        "fn": attr.string(mandatory = True, doc = "The jit function to differentiate."),
        "wrt": attr.string_list(mandatory = True, doc = "Parameters to differentiate with respect to."),
        "args": attr.string_list(doc = "Parameter types, NAME=TYPE (fp32[N], *fp16, i32)."),
        "defines": attr.string_list(doc = "tl.constexpr values, NAME=VALUE."),
        "no_grad": attr.string_list(doc = "Kernels: outputs without upstream gradients (tgrad --no-grad)."),
        "tiling": attr.string_list(doc = "Kernels: tl.constexpr block sizes that only tile the computation, which " +
                                         "the torch module tunes for the backward (tgrad --tiling)."),
        "deps": attr.label_list(
            allow_files = [".py"],
            doc = "The modules the kernel file imports that tgrad reads (helpers in sibling files), at their " +
                  "paths relative to it.",
        ),
        "emit": attr.string(
            default = "python",
            values = ["python", "json", "torch"],
            doc = "python: the backward's source (NAME.py); json: its launch protocol (NAME.json, " +
                  "include/tgrad/launch_protocol.schema.json); torch: the kernel as a PyTorch op with " +
                  "autograd (NAME.py, ops in the namespace tgrad_NAME).",
        ),
        "warnings": attr.bool(
            default = True,
            doc = "False: tgrad -w, no warnings printed (errors still fail the build), for kernels whose " +
                  "warnings are known and expected, such as test inputs.",
        ),
        "_tgrad": attr.label(
            default = Label("//tools/cli:tgrad"),
            executable = True,
            cfg = "exec",
        ),
    },
)


def _tgrad_gradient_impl(ctx):
    backward = ctx.actions.declare_file(ctx.label.name + ".py")
    protocol = ctx.actions.declare_file(ctx.label.name + ".json")
    torch = ctx.actions.declare_file(ctx.label.name + "_op.py")

    # Three runs rather than one: each output is exactly what its --emit mode
    # prints, and Bazel runs and caches them independently.
    _differentiate(ctx, "--kernel", ctx.attr.kernel, "python", backward)
    _differentiate(ctx, "--kernel", ctx.attr.kernel, "json", protocol)
    _differentiate(ctx, "--kernel", ctx.attr.kernel, "torch", torch)
    outputs = [backward, protocol, torch]
    return [
        DefaultInfo(files = depset(outputs), runfiles = ctx.runfiles(files = outputs)),
        OutputGroupInfo(
            backward = depset([backward]),
            protocol = depset([protocol]),
            torch = depset([torch]),
        ),
    ]

tgrad_gradient = rule(
    implementation = _tgrad_gradient_impl,
    doc = "A kernel's backward (NAME.py), its launch protocol (NAME.json) and a PyTorch op with autograd " +
          "(NAME_op.py), written by tgrad at build time. PTX and a cc_library wait for the PTX backend.",
    attrs = {
        "src": attr.label(allow_single_file = [".py"], mandatory = True, doc = "The kernel file."),
        "kernel": attr.string(mandatory = True, doc = "The @triton.jit kernel (or tile function) to differentiate."),
        "wrt": attr.string_list(mandatory = True, doc = "Parameters to differentiate with respect to (names or indices)."),
        "args": attr.string_list(doc = "Parameter types, NAME=TYPE (*fp16, i32, fp32[N]); none: a generic backward."),
        "defines": attr.string_list(doc = "tl.constexpr values, NAME=VALUE; none: a backward for every value."),
        "no_grad": attr.string_list(doc = "Outputs without upstream gradients (saved statistics): tgrad --no-grad."),
        "deterministic": attr.bool(doc = "Prefer bitwise-reproducible gradients: tgrad --deterministic."),
        "tiling": attr.string_list(doc = "tl.constexpr block sizes that only tile the computation (the forward " +
                                         "computes the same for any power of two): the torch module tunes them " +
                                         "for the backward (tgrad --tiling)."),
        "deps": attr.label_list(
            allow_files = [".py"],
            doc = "The modules the kernel file imports that tgrad reads (helpers in sibling files), at their " +
                  "paths relative to it.",
        ),
        "warnings": attr.bool(
            default = True,
            doc = "False: tgrad -w, no warnings printed (errors still fail the build), for kernels whose " +
                  "warnings are known and expected, such as test inputs.",
        ),
        "_tgrad": attr.label(
            default = Label("//tools/cli:tgrad"),
            executable = True,
            cfg = "exec",
        ),
    },
)
