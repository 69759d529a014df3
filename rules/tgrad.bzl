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

`tgrad_gradient` (whole kernels, PTX and C++ launchers) arrives with the
later stages; see DESIGN.md §6.
"""

def _tgrad_jit_source_impl(ctx):
    out = ctx.actions.declare_file(ctx.label.name + ".py")
    args = ctx.actions.args()
    args.add(ctx.file.src)
    args.add("--emit", "source")
    if ctx.attr.fn:
        args.add("--fn", ctx.attr.fn)
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
        "_tgrad": attr.label(
            default = Label("//tools/cli:tgrad"),
            executable = True,
            cfg = "exec",
        ),
    },
)


def _tgrad_backward_impl(ctx):
    out = ctx.actions.declare_file(ctx.label.name + (".json" if ctx.attr.emit == "json" else ".py"))
    args = ctx.actions.args()
    args.add(ctx.file.src)
    args.add("--fn", ctx.attr.fn)
    if ctx.attr.emit != "python":
        args.add("--emit", ctx.attr.emit)
    args.add("--wrt", ",".join(ctx.attr.wrt))
    if ctx.attr.no_grad:
        args.add("--no-grad", ",".join(ctx.attr.no_grad))
    for a in ctx.attr.args:
        args.add("--arg", a)
    for d in ctx.attr.defines:
        args.add("-D", d)
    args.add("-o", out)
    ctx.actions.run(
        executable = ctx.executable._tgrad,
        arguments = [args],
        inputs = [ctx.file.src] + ctx.files.deps,
        outputs = [out],
        mnemonic = "TgradBackward",
        progress_message = "tgrad: differentiating %s in %s" % (ctx.attr.fn, ctx.file.src.short_path),
    )
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
        "_tgrad": attr.label(
            default = Label("//tools/cli:tgrad"),
            executable = True,
            cfg = "exec",
        ),
    },
)
