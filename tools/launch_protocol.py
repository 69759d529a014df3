"""Evaluates the expressions of tgrad's launch protocol (tgrad FILE --wrt ... --emit json).

The grammar is include/tgrad/launch_protocol.schema.json ($defs/expr). A launch is
described by a LaunchEnv: the forward's arguments (scalars and constexprs by name),
the element count of each tensor passed for a pointer, the forward's grid, the
values the caller chose for the protocol's launch_values, the values passed for
size parameters tgrad could not express, and the device's SM count.

    env = LaunchEnv(args={"N": 1000, "BLOCK": 256}, numel={"X": 4000}, grid=(16,))
    evaluate({"cdiv": [{"numel": "X"}, 32]}, env)  # 125

launch() runs a generated backward by its protocol (tools/gpu_check does, for
every test kernel).
"""
import itertools
import math


class LaunchEnv:
    def __init__(self, args=None, numel=None, grid=(1,), values=None, params=None, multi_processor_count=132):
        self.args = args if args is not None else {}    # any mapping
        self.numel = numel if numel is not None else {}
        self.grid = tuple(grid) + (1,) * (3 - len(grid))
        self.values = dict(values or {})
        self.params = dict(params or {})
        self.multi_processor_count = multi_processor_count
        self.program_id = (0, 0, 0)


def _program_axes(expr, out):
    if isinstance(expr, dict):
        if "program_id" in expr:
            out.add(expr["program_id"])
        for v in expr.values():
            _program_axes(v, out)
    elif isinstance(expr, list):
        for v in expr:
            _program_axes(v, out)
    return out


def _cdiv(a, b):
    return -(-a // b)


_OPS = {
    "add": lambda xs: sum(xs),
    "sub": lambda xs: xs[0] - sum(xs[1:]),
    "mul": lambda xs: math.prod(xs),
    "floordiv": lambda xs: xs[0] // xs[1],
    "mod": lambda xs: xs[0] % xs[1],
    "cdiv": lambda xs: _cdiv(xs[0], xs[1]),
    "min": lambda xs: min(xs),
    "max": lambda xs: max(xs),
    "eq": lambda xs: xs[0] == xs[1],
    "ne": lambda xs: xs[0] != xs[1],
    "lt": lambda xs: xs[0] < xs[1],
    "le": lambda xs: xs[0] <= xs[1],
    "gt": lambda xs: xs[0] > xs[1],
    "ge": lambda xs: xs[0] >= xs[1],
    "and": lambda xs: all(xs),
    "or": lambda xs: any(xs),
}


def disjoint(extents, strides):
    """Whether no two cells of the box of indices i_k in [0, extents[k]) at sum(i_k * strides[k]) meet: by
    increasing |stride|, each beyond the reach of the smaller ones (PyTorch's non-overlapping test)."""
    reach = 0
    for stride, extent in sorted((abs(s), e) for e, s in zip(extents, strides) if e > 1):
        if stride <= reach:
            return False
        reach += (extent - 1) * stride
    return True


def evaluate(expr, env):
    """The value of a protocol expression in a launch."""
    if isinstance(expr, (bool, int, str)):
        return expr
    if not isinstance(expr, dict) or len(expr) != 1:
        raise ValueError(f"not a launch expression: {expr!r}")
    (kind, body), = expr.items()
    if kind == "arg":
        return env.args[body]
    if kind == "numel":
        return env.numel[body]
    if kind == "grid":
        return env.grid[body]
    if kind == "program_id":
        return env.program_id[body]
    if kind == "value":
        return env.values[body]
    if kind == "param":
        return env.params[body]
    if kind == "device":
        return env.multi_processor_count
    if kind == "not":
        return not evaluate(body, env)
    if kind == "if":
        return evaluate(body[1], env) if evaluate(body[0], env) else evaluate(body[2], env)
    if kind == "disjoint":
        return disjoint([evaluate(x, env) for x in body[0]], [evaluate(x, env) for x in body[1]])
    if kind == "max_over_programs":
        axes = sorted(_program_axes(body, set()))
        best = None
        saved = env.program_id
        for ids in itertools.product(*(range(env.grid[a]) for a in axes)):
            pid = [0, 0, 0]
            for a, i in zip(axes, ids):
                pid[a] = i
            env.program_id = tuple(pid)
            v = evaluate(body, env)
            best = v if best is None else max(best, v)
        env.program_id = saved
        return best
    if kind in _OPS:
        return _OPS[kind]([evaluate(x, env) for x in body])
    raise ValueError(f"unknown launch expression {kind!r}")


def choose_launch_values(protocol, env):
    """Each launch value at its default (within its bounds), stored in env.values."""
    for name, spec in protocol.get("launch_values", {}).items():
        lo, hi = evaluate(spec["min"], env), evaluate(spec["max"], env)
        env.values[name] = max(lo, min(hi, evaluate(spec["default"], env)))
    return env.values


def check_assumptions(protocol, env):
    """Raises ValueError where the launch breaks what the backward's plain gradient stores assume (the
    protocol's "assumptions": rows that do not overlap); its programs' stores would race."""
    for a in protocol.get("assumptions", []):
        if a["check"] is not None and not evaluate(a["check"], env):
            raise ValueError(f"{protocol['forward']}: the backward assumes {a['assumes']} ({a['message']})")


def launch(protocol, backward, forward_args, grid, tensors, grads, upstream, poison=False):
    """Launches a backward as its launch protocol (--emit json) says, with no knowledge of the kernel
    (needs PyTorch):
    every buffer it allocates, size it passes and grid it uses comes from the protocol's expressions
    (tools/launch_protocol.py). `forward_args`: the forward's arguments by name (tensors, scalars,
    constexprs); `grads`: the input-gradient buffers by forward pointer; `upstream`: the output
    gradients by forward pointer. `poison`: fill every buffer the protocol lets hold anything with NaN
    (checks: an element the backward should write and does not shows up)."""
    import torch  # only launching needs it; evaluating expressions does not

    env = LaunchEnv(
        args={n: v for n, v in forward_args.items() if not torch.is_tensor(v)},
        numel={n: t.numel() for n, t in tensors.items()}, grid=grid,
        multi_processor_count=torch.cuda.get_device_properties(0).multi_processor_count)
    choose_launch_values(protocol, env)
    check_assumptions(protocol, env)
    buffers = {}
    copy_back = []  # (the caller's gradient tensor, the float32 buffer the backward computed it in)
    for p in protocol["parameters"]:
        if not p.get("pass_by_keyword"):
            continue
        role = p["role"]
        if role == "input gradient" and p.get("in_place"):
            # Updated in place: a float32 copy of the upstream gradient of the contents after the
            # kernel, which the backward turns into the gradient of the contents before.
            g = upstream[p["of"]]
            copy = torch.empty_strided(g.shape, g.stride(), dtype=torch.float32, device=g.device)
            copy.copy_(g)
            buffers[p["name"]] = copy
            copy_back.append((grads[p["of"]], copy))
        elif role == "input gradient":
            g = grads[p["of"]]
            if p["contents"] == "zeros":
                g.zero_()
            elif poison:
                g.fill_(float("nan"))
            buffers[p["name"]] = g
        elif role == "output gradient":
            g = upstream[p["of"]]
            if p.get("consumed"):  # the backward overwrites it: a float32 copy, laid out as the output
                copy = torch.empty_strided(g.shape, g.stride(), dtype=torch.float32, device=g.device)
                copy.copy_(g)
                g = copy
            buffers[p["name"]] = g
        elif role == "scratch":
            shape = [evaluate(d, env) for d in p["shape"]]
            # (In the dtype of the tensor passed for "dtype_of" where the protocol names one.)
            dtype = tensors[p["dtype_of"]].dtype if "dtype_of" in p else getattr(torch, p.get("dtype", "float32"))
            if "like" in p:  # addressed with that tensor's offsets: laid out like it
                like = tensors[p["like"]]
                buffer = torch.empty_strided(like.shape, like.stride(), device="cuda", dtype=dtype)
            else:
                buffer = torch.empty(shape, device="cuda", dtype=dtype)
            if poison:  # the backward must write what it reads
                buffer.fill_(float("nan") if dtype.is_floating_point else -12345)
            buffers[p["name"]] = buffer
        elif role == "size":
            if p["value"] is None:
                raise RuntimeError(f"the protocol cannot size {p['name']}: {p['why']}")
            value = evaluate(p["value"], env)
            env.params[p["name"]] = value
            buffers[p["name"]] = value
    for k in protocol["kernels"]:
        kernel_grid = tuple(evaluate(d, env) for d in k["grid"])
        fn = getattr(backward, k["name"])
        if "call" in k:
            fn[kernel_grid](*[forward_args[a] for a in k["call"]["positional"]],
                            **{a: buffers[a] for a in k["call"]["keyword"]})
        else:
            fn[kernel_grid](**{a: buffers[v["buffer"]] if isinstance(v, dict) and "buffer" in v
                               else evaluate(v, env) for a, v in k["arguments"].items()})
    for grad, computed in copy_back:
        grad.copy_(computed)
