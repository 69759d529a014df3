
# ---------------------------------------------------------------- launching
# What every module tgrad writes with --emit torch holds (no dependency on tgrad).


def _tgrad_new_like(t):
    """A new buffer shaped and strided like `t`: the kernel indexes it with t's strides. None (a
    pointer the caller passes as None, as kernels take optional buffers) stays None."""
    if t is None:
        return None
    return torch.empty_strided(t.shape, t.stride(), dtype=t.dtype, device=t.device)


def _tgrad_zeros_like(t):
    return None if t is None else _tgrad_new_like(t).zero_()


def _tgrad_float32_zeros_like(t):
    """Zeros laid out like `t` in float32: a gradient the backward adds to (atomics, additions in place)
    keeps float32 sums, cast to t's dtype once at the end."""
    if t is None:
        return None
    return torch.empty_strided(t.shape, t.stride(), dtype=torch.float32, device=t.device).zero_()


def _tgrad_numel(t):
    return 0 if t is None else t.numel()


def _tgrad_device_of(*tensors):
    """The device of the first tensor argument (a pointer may be None, or a number where a flag says so)."""
    for t in tensors:
        if isinstance(t, torch.Tensor):
            return t.device
    raise TypeError("tgrad: the kernel was given no tensor")


def _tgrad_out(t):
    """What an op returns for a buffer: a tensor, an empty one in place of None (an op's results are
    tensors); the launcher and the autograd function give None back where the argument was None."""
    return torch.empty(0) if t is None else t


def _tgrad_clone(t):
    return None if t is None else t.clone()


def _tgrad_cast_like(t, like):
    return None if t is None else t.to(like.dtype)


def _tgrad_if_given(value, argument):
    return None if argument is None else value


def _tgrad_save(ctx, *values):
    """save_for_backward takes tensors (and None); a pointer parameter that a flag makes a number
    (flash-attention's SEQLEN_OFFSETS) is kept beside them."""
    ctx.save_for_backward(*(v if v is None or isinstance(v, torch.Tensor) else None for v in values))
    ctx.tgrad_numbers = tuple(None if v is None or isinstance(v, torch.Tensor) else v for v in values)


def _tgrad_split(value):
    """A pointer-or-number argument in the op's two slots: (the tensor or None, the number or None)."""
    return (value, None) if value is None or isinstance(value, torch.Tensor) else (None, value)


def _tgrad_saved(ctx):
    return tuple(n if t is None else t for t, n in zip(ctx.saved_tensors, ctx.tgrad_numbers))


def _tgrad_upstream(g, like):
    """An upstream gradient laid out as the output it belongs to (the backward reads it with the
    output's strides): None (the loss does not use that output) becomes zeros, another layout
    (a broadcast gradient of .sum(), a transposed one) is copied. An output the caller passed as
    None has none."""
    if like is None:
        return None
    if g is None:
        return _tgrad_zeros_like(like)
    if g.shape == like.shape and g.stride() == like.stride():
        return g
    out = torch.empty_strided(like.shape, like.stride(), dtype=g.dtype, device=g.device)
    out.copy_(g)
    return out


def _tgrad_consumed_upstream(g, like):
    """An upstream gradient the backward overwrites (the forward may write an address of `like` more
    than once): a float32 copy laid out as the output."""
    if like is None:
        return None
    out = torch.empty_strided(like.shape, like.stride(), dtype=torch.float32, device=like.device)
    if g is None:
        return out.zero_()
    out.copy_(g)
    return out


def _tgrad_grid3(grid):
    return list(grid) + [1] * (3 - len(grid))


def _tgrad_multi_processor_count(device):
    return torch.cuda.get_device_properties(device).multi_processor_count


def _tgrad_max_over_programs(value, grid, axes):
    """The largest value(pid) over the forward's programs (pid: (axis 0, axis 1, axis 2)); only the
    axes `value` depends on are walked."""
    best = None
    for ids in itertools.product(*(range(grid[a]) if a in axes else (0,) for a in range(3))):
        v = value(ids)
        best = v if best is None else max(best, v)
    return best


def _tgrad_options(num_warps, num_stages):
    options = {}
    if num_warps is not None:
        options["num_warps"] = num_warps
    if num_stages is not None:
        options["num_stages"] = num_stages
    return options


class TgradKernel:
    """A Triton kernel launched as Triton launches it, `kernel[grid](*args, **kwargs)`, through a
    PyTorch op that autograd differentiates: it returns the buffers the kernel stores to as new
    tensors (a named tuple), shaped and strided like the ones passed, which it leaves as they are (an
    element the kernel does not store is unset, as torch.empty leaves it). Input gradients start at
    zero: an element the forward does not load (a grid that does not cover the tensor) gets zero.
    `grid` is a tuple or a function of the arguments (a dict, constexprs included), as for Triton;
    `num_warps` and `num_stages` go to the forward and to the backward's main kernel (a kernel parameter
    of either name is both the parameter and the option, as in Triton).

    Under @triton.autotune, the config is the autotuner's choice for the arguments' key (tuned on
    first use of a key, in eager mode: under torch.compile, call the kernel once eagerly first for
    each key); it is passed to the forward and the backward alike. @triton.heuristics values are
    computed from the arguments, as Triton does."""

    def __init__(self, kernel, op, params, defaults, outputs, eager=None, dtypes=None, output_params=(),
                 split_params=()):
        self._op = op
        # Pointer parameters that a flag makes numbers: the op takes them in two slots (a tensor, a number).
        self._split_params = frozenset(split_params)
        # The parameters the op returns, in order: one passed as None comes back as None.
        self._output_params = output_params
        # The float dtypes the backward was written and checked for, per pointer (its `# Generic:` line).
        self._dtypes = dtypes or {}
        # Outside torch.compile: the same functions under a torch.autograd.Function, without the op dispatch.
        self._eager = eager.apply if eager is not None else op
        self._params = params
        self._defaults = defaults
        self._outputs = outputs
        self.__name__ = kernel.__name__ if hasattr(kernel, "__name__") else params[0]
        # The decorators' data, read once here (not while torch.compile traces a launch).
        self._heuristics = []
        self._autotune_keys = None
        self._autotune_names = frozenset()
        self._configs = {}
        self._autotuner = None
        while not isinstance(kernel, triton.runtime.JITFunction):
            if isinstance(kernel, triton.runtime.Autotuner):
                self._autotuner = kernel
                self._autotune_keys = tuple(kernel.keys)
                self._autotune_names = frozenset(k for c in kernel.configs for k in c.kwargs)
            elif isinstance(kernel, triton.runtime.Heuristics):
                self._heuristics.insert(0, dict(kernel.values))
            else:
                raise TypeError(f"tgrad: cannot launch {type(kernel).__name__}: not a Triton kernel")
            kernel = kernel.fn
        self.jit = kernel  # the kernel the op launches, every constexpr given
        # The launch options the op takes after the kernel's arguments (not those that are parameters).
        self._own_options = tuple(o for o in ("num_warps", "num_stages") if o not in params)

    def __getitem__(self, grid):
        return lambda *args, **kwargs: self.run(grid, *args, **kwargs)

    def run(self, grid, *args, **kwargs):
        num_warps = kwargs.pop("num_warps", None) if "num_warps" in self._own_options else None
        num_stages = kwargs.pop("num_stages", None) if "num_stages" in self._own_options else None
        if len(args) > len(self._params):
            raise TypeError(f"{self.__name__}() takes {len(self._params)} arguments, {len(args)} given")
        bound = dict(self._defaults)
        bound.update(zip(self._params, args))
        for name, value in kwargs.items():
            if name not in self._params:
                raise TypeError(f"{self.__name__}() got an unexpected keyword argument {name!r}")
            bound[name] = value
        if self._autotune_keys is not None and not all(n in bound for n in self._autotune_names):
            config = self._config(grid, bound)
            bound.update(config[0])
            num_warps = config[1] if num_warps is None else num_warps
            num_stages = config[2] if num_stages is None else num_stages
        for values in self._heuristics:
            for name, value in values.items():
                if name not in bound:
                    bound[name] = value(bound)
        missing = [p for p in self._params if p not in bound]
        if missing:
            raise TypeError(f"{self.__name__}() missing arguments: {', '.join(missing)}")
        for name, served in self._dtypes.items():
            value = bound[name]
            if isinstance(value, torch.Tensor) and value.is_floating_point() and str(value.dtype)[6:] not in served:
                raise TypeError(f"tgrad: {self.__name__}: '{name}' is {value.dtype}, and the backward was written and "
                                f"checked for {', '.join(served)} only (its `# Generic:` line): regenerate the module "
                                f"with --arg {name}=TYPE for this dtype")
        if callable(grid):
            grid = grid(bound)
        if not isinstance(grid, (tuple, list)):
            grid = (grid,)
        # A dtype crosses the op's schema as its name (the op makes it a dtype again).
        arguments = []
        for p in self._params:
            value = bound[p].name if isinstance(bound[p], triton.language.dtype) else bound[p]
            arguments.extend(_tgrad_split(value) if p in self._split_params else (value,))
        options = {"num_warps": num_warps, "num_stages": num_stages}
        op = self._op if torch.compiler.is_compiling() else self._eager
        result = op([int(g) for g in grid], *arguments, *(options[o] for o in self._own_options))
        result = result if isinstance(result, (tuple, list)) else (result,)
        # An output buffer passed as None (the kernel does not store it with these flags) comes back None.
        return self._outputs(*(None if bound[n] is None else r for n, r in zip(self._output_params, result)))

    def _config(self, grid, bound):
        key = tuple(bound.get(k) for k in self._autotune_keys) + tuple(
            str(v.dtype) for v in bound.values() if isinstance(v, torch.Tensor))
        if key in self._configs:
            return self._configs[key]
        if torch.compiler.is_compiling():
            raise RuntimeError(f"tgrad: {self.__name__} is autotuned and has no config for {key} yet: call it once "
                               "outside torch.compile with these shapes first, or pass its tuned constexprs")
        # The autotuner benchmarks its configs on these arguments (writing to the buffers passed).
        self._autotuner[grid](**{p: bound[p] for p in self._params if p in bound and p not in self._autotune_names})
        best = self._autotuner.best_config
        self._configs[key] = (dict(best.kwargs), best.num_warps, best.num_stages)
        return self._configs[key]
