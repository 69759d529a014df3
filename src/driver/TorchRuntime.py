
# ---------------------------------------------------------------- launching
# What every module tgrad writes with --emit torch holds (no dependency on tgrad).


def _tgrad_new_like(t):
    """A new buffer shaped and strided like `t`: the kernel indexes it with t's strides. None (a
    pointer the caller passes as None, as kernels take optional buffers) stays None."""
    if t is None:
        return None
    return torch.empty_strided(t.shape, t.stride(), dtype=t.dtype, device=t.device)


def _tgrad_cells(t, dtype):
    """Zeros for the memory cells of `t`, an input whose elements share cells (an expanded view): one flat
    buffer over the span its strides reach, which the kernel indexes with t's strides as it would a
    buffer strided like t. Not a tensor with t's overlapping strides: torch.compile may give a kernel that
    writes into such a tensor a dense copy instead (measured: the matmul's dB of a column expanded over N,
    all wrong under torch.compile(fullgraph=True) before 2026-11-27)."""
    span = 1 + sum((size - 1) * stride for size, stride in zip(t.shape, t.stride()) if size > 0)
    return torch.zeros(span, dtype=dtype, device=t.device)


def _tgrad_zeros_like(t, dtype=None):
    """Zeros laid out like `t` (in `dtype`, else t's): strided like it, or its cells where its elements share them."""
    if t is None:
        return None
    dtype = t.dtype if dtype is None else dtype
    if _tgrad_overlaps(t):
        return _tgrad_cells(t, dtype)
    return torch.empty_strided(t.shape, t.stride(), dtype=dtype, device=t.device).zero_()


def _tgrad_float32_zeros_like(t):
    """Zeros laid out like `t` in float32: a gradient the backward adds to (atomics, additions in place)
    keeps float32 sums, cast to t's dtype once at the end."""
    return _tgrad_zeros_like(t, torch.float32)


def _tgrad_overlaps(t):
    """Whether two elements of `t` share memory: an expanded view (a stride 0 over a dimension of more
    than one element, as `expand` and einops.repeat make), or strides that interleave."""
    if t.is_contiguous():  # (the common case, answered without Python: a contiguous tensor never overlaps)
        return False
    return not _tgrad_disjoint(t.shape, t.stride())


def _tgrad_unaliased(g, like):
    """The gradient of an input passed with overlapping strides. The backward indexes its gradient
    buffer with the input's strides, so the elements that share a memory cell share their gradient
    cell too, which holds the sum of their gradients: the gradient of the memory itself. Autograd's
    backward of the view (a sum over an expanded dimension) would add that cell once per element
    sharing it; it is returned once per cell instead, at the first element that shares it, zeros at
    the others. An input without overlap gets its buffer back as it is."""
    if g is None or like is None or not _tgrad_overlaps(like):
        return g
    offsets = torch.zeros((), dtype=torch.int64, device=g.device)
    for size, stride in zip(like.shape, like.stride()):
        offsets = offsets.unsqueeze(-1) + torch.arange(size, dtype=torch.int64, device=g.device) * stride
    flat = offsets.reshape(-1)
    order = torch.argsort(flat, stable=True)
    ordered = flat[order]
    first = torch.ones_like(ordered, dtype=torch.bool)
    first[1:] = ordered[1:] != ordered[:-1]
    keep = torch.zeros_like(first)
    keep[order[first]] = True
    # Each element's cell: gathered from the flat buffer of cells (_tgrad_cells), or copied by reshape from a
    # buffer strided like the input.
    values = g.reshape(-1) if tuple(g.shape) == tuple(like.shape) else g[flat]
    return torch.where(keep, values, torch.zeros((), dtype=g.dtype, device=g.device)).reshape(like.shape)


def _tgrad_gradient_like(t):
    """A tensor laid out as the gradient the backward op returns for `t` (what torch.compile traces)."""
    if t is None:
        return None
    if _tgrad_overlaps(t):
        return torch.empty(t.shape, dtype=t.dtype, device=t.device)
    return _tgrad_new_like(t)


def _tgrad_disjoint(extents, strides):
    """Whether no two cells of the box of indices i_k in [0, extents[k]) at sum(i_k * strides[k]) meet: by
    increasing |stride|, each beyond the reach of the smaller ones (PyTorch's non-overlapping test)."""
    reach = 0
    for stride, extent in sorted((abs(s), e) for e, s in zip(extents, strides) if e > 1):
        if stride <= reach:
            return False
        reach += (extent - 1) * stride
    return True


def _tgrad_assume(holds, assumes, message, kernel, **values):
    """Refuses a backward launch that breaks what the backward assumes of it: rows that do not overlap (`stride >=
    n_cols`: each program stores its rows' gradient), one program along an axis whose programs store values of their
    own at shared addresses. A launch that breaks one has programs race for a cell (an input passed as an expanded
    view, stride 0; a forward whose last store wins): the gradient would be wrong. `message` says what to do."""
    if not holds:
        given = ", ".join(f"{name}={value}" for name, value in values.items())
        raise ValueError(f"tgrad: the backward of {kernel} assumes {assumes}, and this launch has {given}: {message}")


def _tgrad_refuse_overlapping(**buffers):
    """A buffer the kernel stores to, passed with overlapping strides, gets several values at one
    memory cell from one launch: which one stays is up to the order of the GPU's writes, and no
    gradient describes it."""
    for name, t in buffers.items():
        if isinstance(t, torch.Tensor) and _tgrad_overlaps(t):
            raise ValueError(f"tgrad: {name} is passed with overlapping strides {tuple(t.stride())} for shape "
                             f"{tuple(t.shape)} (an expanded view) and the kernel stores to it: several of its "
                             f"elements share memory, so the stored values overwrite each other; pass "
                             f"{name}.contiguous() (or a new tensor) instead")


def _tgrad_numel(t):
    return 0 if t is None else t.numel()


def _tgrad_device_of(*tensors):
    """The device of the first tensor argument (a pointer may be None, or a number where a flag says so)."""
    for t in tensors:
        if isinstance(t, torch.Tensor):
            return t.device
    raise TypeError("tgrad: the kernel was given no tensor")


def _tgrad_is_host_descriptor(value):
    """A triton.tools.tensor_descriptor.TensorDescriptor (a TMA descriptor the host built over a tensor)."""
    return (type(value).__name__ == "TensorDescriptor" and dataclasses.is_dataclass(value)
            and isinstance(getattr(value, "base", None), torch.Tensor))


def _tgrad_same_values(one, other):
    """Bit for bit, NaNs where the other has NaNs."""
    if not one.is_floating_point():
        return torch.equal(one, other)
    return torch.equal(one.isnan(), other.isnan()) and torch.equal(one.nan_to_num(0.0), other.nan_to_num(0.0))


def _tgrad_layout(t):
    """What the backward keeps of an output whose values it does not read: its layout."""
    return None if t is None else (tuple(t.shape), tuple(t.stride()), t.dtype, t.device)


def _tgrad_stand_in(layout):
    """A buffer laid out as that output was, for the backward kernels that take its address and read nothing
    through it. (TGRAD_CHECK_STAND_INS=1, as tools/gpu_check sets it: filled with NaN, so that a read would show.)"""
    if layout is None:
        return None
    t = torch.empty_strided(layout[0], layout[1], dtype=layout[2], device=layout[3])
    if os.environ.get("TGRAD_CHECK_STAND_INS", "0") == "1" and t.is_floating_point():
        t.fill_(float("nan"))
    return t


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


def _tgrad_cdiv(x, y):
    return (x + y - 1) // y


def _tgrad_grid3(grid):
    return list(grid) + [1] * (3 - len(grid))


def _tgrad_multi_processor_count(device):
    # (Tensors on the CPU: Triton's interpreter, TRITON_INTERPRET=1, runs the kernels there.)
    if torch.device(device).type != "cuda":
        return os.cpu_count() or 1
    return torch.cuda.get_device_properties(device).multi_processor_count


def _tgrad_max_over_programs(value, grid, axes):
    """The largest value(pid) over the forward's programs (pid: (axis 0, axis 1, axis 2)); only the
    axes `value` depends on are walked."""
    if not axes:
        return value((0, 0, 0))
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


def _tgrad_launcher(kernel):
    """What a triton_op's body launches a kernel through: wrap_triton wherever PyTorch traces it (torch.compile,
    and the fake-tensor and functionalization modes its tracing runs the body under), the kernel itself in plain
    eager mode, where wrap_triton's dispatch costs ~0.3 ms of host time per launch on the H100 (two launches of
    a 2048^3 matmul's backward: 0.61 against 0.06 ms), more than the kernels take."""
    if torch.compiler.is_compiling() or _get_current_dispatch_mode() is not None:
        return wrap_triton(kernel)
    return _TgradUnpipelinedFallback(kernel)


class _TgradUnpipelinedFallback:
    """A kernel launched in eager mode that, where its pipeline stages' shared memory does not fit (OutOfResources:
    a backward kernel holds more tiles than the forward whose num_stages it takes; mamba's bmm_chunk backward in
    bf16 with a float32 output needed 311 KB of the H100's 227), is launched again unpipelined, num_stages=1, which
    changes no value it computes. Nothing ran in the failed launch: Triton refuses it before it starts."""

    def __init__(self, kernel):
        self._kernel = kernel

    def __getitem__(self, grid):
        launch = self._kernel[grid]

        def run(*args, **kwargs):
            try:
                return launch(*args, **kwargs)
            except Exception as error:  # (triton.runtime.errors.OutOfResources)
                if type(error).__name__ != "OutOfResources" or kwargs.get("num_stages") == 1:
                    raise
                return launch(*args, **{**kwargs, "num_stages": 1})
        return run


def _tgrad_launch_values(launch, grid, constexprs, num_warps, num_stages, kernels, kernel=None):
    """The backward's launch values: those TgradKernel tuned for these arguments (`launch`, encoded by
    TgradKernel._encode_launch), else the forward's. Returns (the forward's grid under them, each of
    `constexprs` under them, the launch options of each of the backward's `kernels`). `kernel`: the
    values of that kernel alone, where each kernel has its own (--tiling, kernels apart: one block per
    kernel, TgradKernel._encode_kernels); the options of the others are the forward's then."""
    if not launch:
        return (grid, *constexprs, [_tgrad_options(num_warps, num_stages)] * kernels)
    if kernel is not None:
        size = 5 + 2 * len(constexprs)
        block = launch[kernel * size:(kernel + 1) * size]
        values = [block[6 + 2 * k] if block[5 + 2 * k] else value for k, value in enumerate(constexprs)]
        options = [_tgrad_options(num_warps, num_stages)] * kernels
        options[kernel] = {"num_warps": block[3], "num_stages": block[4]}
        return (list(block[:3]), *values, options)
    values = list(constexprs)
    first = 3 + 2 * kernels  # after the grid and each kernel's (num_warps, num_stages): (given, value) pairs
    for k in range(len(values)):
        if launch[first + 2 * k]:
            values[k] = launch[first + 2 * k + 1]
    options = [{"num_warps": launch[3 + 2 * k], "num_stages": launch[4 + 2 * k]} for k in range(kernels)]
    return (list(launch[:3]), *values, options)


class _TgradTuningContext:
    """Stands in for autograd's ctx while TgradKernel times the backward under candidate launch values."""

    def save_for_backward(self, *tensors):
        self.saved_tensors = tensors

    def mark_non_differentiable(self, *outputs):
        pass


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
    computed from the arguments, as Triton does.

    A backward with owner-computes kernels (`tuning` given) has launch values of its own, tuned on the
    first launch for each set of argument shapes (eager mode; under torch.compile a launch uses what the
    eager ones tuned, else the forward's values): the num_warps and num_stages of each backward kernel,
    and, under @triton.autotune with a grid given as a function, the block sizes of any of the
    autotuner's configs, with the forward's grid for them. That is valid because the autotuner's
    configs are interchangeable by its own contract: each computes the same outputs, so the backward of
    the forward under one config is the backward under another. TGRAD_TUNE_BACKWARD=0 in the
    environment keeps the forward's launch values; TGRAD_TUNE_VERBOSE=1 prints each candidate's time."""

    def __init__(self, kernel, op, params, defaults, outputs, eager=None, dtypes=None, output_params=(),
                 split_params=(), tuning=None, packed_params=()):
        self._op = op
        # (the forward op's function, the backward op's, setup_context, backward_with, the constexprs the
        # backward's launch values may set, the number of backward kernels taking launch options), or None.
        self._tuning = tuning
        # --tiling: the constexprs declared to only tile the computation, which the tuning may set to values of
        # its own (not only the autotuner's configs), and whether each backward kernel may take values of its own.
        self._tiling = tuple(tuning[6]) if tuning is not None and len(tuning) > 6 else ()
        self._tiling_apart = bool(tuning[7]) if tuning is not None and len(tuning) > 7 else False
        self._launches = {}
        # Pointer parameters that a flag makes numbers: the op takes them in two slots (a tensor, a number).
        self._split_params = frozenset(split_params)
        # Integer parameters the op takes as one list (its schema would otherwise pass PyTorch's 64 arguments).
        self._packed_params = frozenset(packed_params)
        # The parameters the op returns, in order: one passed as None comes back as None.
        self._output_params = output_params
        # The float dtypes the backward was written and checked for, per pointer (its `# Generic:` line), and as
        # torch dtypes (what a launch compares).
        self._dtypes = dtypes or {}
        self._torch_dtypes = {name: frozenset(getattr(torch, d) for d in served if hasattr(torch, d))
                              for name, served in self._dtypes.items()}
        # Outside torch.compile: the same functions under a torch.autograd.Function, without the op dispatch.
        self._eager = eager.apply if eager is not None else op
        self._params = params
        self._defaults = defaults
        self._outputs = outputs
        self.__name__ = kernel.__name__ if hasattr(kernel, "__name__") else params[0]
        # The decorators' data, read once here (not while torch.compile traces a launch).
        self._heuristics = []  # @triton.heuristics under the autotuner, outermost first
        self._outer_heuristics = []  # those over it (all of them without one), outermost first
        self._autotune_keys = None
        self._autotune_names = frozenset()
        self._configs = {}
        self._config_objects = {}  # the autotuner's Config objects (their pre_hooks), by the same key
        self._descriptors_checked = set()  # layouts of host descriptors _check_descriptors found equivalent
        self._autotuner = None
        # (Under TRITON_INTERPRET=1, @triton.jit gives an InterpretedFunction, which launches the same way.)
        jit_types = (triton.runtime.JITFunction,) + tuple(
            t for t in (getattr(getattr(triton.runtime, "interpreter", None), "InterpretedFunction", None),) if t)
        while not isinstance(kernel, jit_types):
            if isinstance(kernel, triton.runtime.Autotuner):
                self._autotuner = kernel
                self._autotune_keys = tuple(kernel.keys)
                self._autotune_names = frozenset(k for c in kernel.configs for k in c.kwargs)
            elif isinstance(kernel, triton.runtime.Heuristics):
                # Applied as Triton applies them: the outer decorator first. Heuristics outside the autotuner
                # give values its configs are benchmarked with (fla's `@triton.heuristics({...})` over
                # `@triton.autotune`); those inside it may read a config's values (a block size).
                (self._heuristics if self._autotuner is not None else self._outer_heuristics).append(dict(kernel.values))
            elif isinstance(kernel, triton.runtime.KernelInterface) and getattr(kernel, "fn", None) is not None:
                # A wrapper of a project's own around a kernel (FlagGems' @libentry, which caches launches): tgrad
                # warned when it wrote this module that it ignores the wrapper's effect; the op launches the
                # kernel inside it, as the wrapper does.
                pass
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
        # Triton's default of one CTA per program, which the tutorials' layer norm passes explicitly; the op launches
        # every kernel so. Thread-block clusters (num_ctas > 1) it does not launch.
        if "num_ctas" not in self._params and kwargs.get("num_ctas", 1) in (1, None):
            kwargs.pop("num_ctas", None)
        elif "num_ctas" not in self._params:
            raise TypeError(f"tgrad: {self.__name__}: the op launches its kernels with num_ctas=1 (one CTA per "
                            f"program); num_ctas={kwargs['num_ctas']} (thread-block clusters) is not supported")
        if len(args) > len(self._params):
            raise TypeError(f"{self.__name__}() takes {len(self._params)} arguments, {len(args)} given")
        bound = dict(self._defaults)
        bound.update(zip(self._params, args))
        for name, value in kwargs.items():
            if name not in self._params:
                raise TypeError(f"{self.__name__}() got an unexpected keyword argument {name!r}")
            bound[name] = value
        for values in self._outer_heuristics:
            for name, value in values.items():
                if name not in bound:
                    bound[name] = value(bound)
        if self._autotune_keys is not None and not all(n in bound for n in self._autotune_names):
            config = self._config(grid, bound)
            bound.update(config[0])
            num_warps = config[1] if num_warps is None else num_warps
            num_stages = config[2] if num_stages is None else num_stages
        for values in self._heuristics:
            for name, value in values.items():
                if name not in bound:
                    bound[name] = value(bound)
        if len(bound) < len(self._params):
            missing = [p for p in self._params if p not in bound]
            raise TypeError(f"{self.__name__}() missing arguments: {', '.join(missing)}")
        grid_function = grid if callable(grid) else None
        if callable(grid):
            grid = grid(bound)
        if not isinstance(grid, (tuple, list)):
            grid = (grid,)
        # Host tensor descriptors (triton.tools.tensor_descriptor.TensorDescriptor): the op takes tensors, so it
        # runs the kernel on each descriptor's base tensor, where the kernel makes its descriptor itself (`if
        # isinstance(x, tl.tensor_descriptor): ... else: tl.make_tensor_descriptor(x, ...)`, the Triton tutorial's
        # attention). That is the kernel the user launched only where its own shape, strides and block shape are
        # the descriptor's: checked on the first launch of each layout (_check_descriptors).
        descriptors = {n: v for n, v in bound.items()
                       if type(v).__name__ == "TensorDescriptor" and _tgrad_is_host_descriptor(v)}
        if descriptors:
            self._check_descriptors([int(g) for g in grid], bound, descriptors, num_warps, num_stages)
            for name, descriptor in descriptors.items():
                bound[name] = descriptor.base
        for name, allowed in self._torch_dtypes.items():
            value = bound[name]
            if isinstance(value, torch.Tensor) and value.dtype not in allowed and value.is_floating_point():
                served = self._dtypes[name]
                raise TypeError(f"tgrad: {self.__name__}: '{name}' is {value.dtype}, and the backward was written and "
                                f"checked for {', '.join(served)} only (its `# Generic:` line): regenerate the module "
                                f"with --arg {name}=TYPE for this dtype")
        # A dtype crosses the op's schema as its name (the op makes it a dtype again).
        arguments = []
        packed = None  # the integer arguments as one list, where the op's schema would pass 64 arguments
        if not self._packed_params and not self._split_params:  # (most kernels: each argument as itself)
            arguments = [v.name if isinstance(v, triton.language.dtype) else v for v in map(bound.__getitem__, self._params)]
        for p in self._params if self._packed_params or self._split_params else ():
            value = bound[p].name if isinstance(bound[p], triton.language.dtype) else bound[p]
            if p in self._packed_params:
                if packed is None:
                    packed = []
                    arguments.append(packed)
                packed.append(int(value))
                continue
            arguments.extend(_tgrad_split(value) if p in self._split_params else (value,))
        options = {"num_warps": num_warps, "num_stages": num_stages}
        op = self._op if torch.compiler.is_compiling() else self._eager
        grid = [int(g) for g in grid]
        launch = ()
        if self._tuning is not None:
            launch = (self._backward_launch(grid_function, grid, bound, arguments, options),)
        result = op(grid, *launch, *arguments, *(options[o] for o in self._own_options))
        result = result if isinstance(result, (tuple, list)) else (result,)
        # An output buffer passed as None (the kernel does not store it with these flags) comes back None.
        return self._outputs(*(None if bound[n] is None else r for n, r in zip(self._output_params, result)))

    def _check_descriptors(self, grid, bound, descriptors, num_warps, num_stages):
        """Raises TypeError unless the kernel computes the same with these host descriptors as with their base
        tensors: it runs both ways once per layout, on random copies of every float tensor of the launch (two
        copies, one for each run), and compares every buffer afterwards bit for bit."""
        described = tuple((n, tuple(desc.base.shape), tuple(desc.base.stride()), desc.base.dtype, tuple(desc.shape),
                           tuple(desc.strides), str(getattr(desc, "padding", "")))
                          for n, desc in sorted(descriptors.items()))
        others = tuple((n, (tuple(v.shape), tuple(v.stride()), v.dtype) if isinstance(v, torch.Tensor) else repr(v))
                       for n, v in sorted(bound.items()) if n not in descriptors)
        key = (tuple(grid), num_warps, num_stages) + described + others
        if key in self._descriptors_checked:
            return
        names = ", ".join(f"'{n}'" for n in sorted(descriptors))
        if torch.compiler.is_compiling():
            raise RuntimeError(f"tgrad: {self.__name__}: the host TensorDescriptors passed for {names} are checked "
                               "on their first eager launch: launch it once outside torch.compile with these shapes")
        bases = [desc.base for desc in descriptors.values()]
        generator = torch.Generator(device=_tgrad_device_of(*bases)).manual_seed(0)
        copies = {}

        def randomized(t):  # one copy per tensor (a base passed twice stays one buffer); integers kept as they are
            if id(t) not in copies:
                c = t.detach().clone()
                if c.is_floating_point():
                    c.copy_(torch.randn(c.shape, generator=generator, device=c.device, dtype=torch.float32))
                copies[id(t)] = c
            return copies[id(t)]

        first = {}
        for n, v in bound.items():
            if n in descriptors:
                first[n] = randomized(v.base)
            elif isinstance(v, torch.Tensor):
                first[n] = randomized(v)
            else:
                first[n] = v
        twins = {id(t): t.clone() for t in copies.values()}
        second = {n: twins[id(v)] if isinstance(v, torch.Tensor) else v for n, v in first.items()}
        for n, desc in descriptors.items():  # (a dataclass: every field as the user's, over the copy)
            first[n] = dataclasses.replace(desc, base=first[n], shape=list(desc.shape), strides=list(desc.strides),
                                           block_shape=list(desc.block_shape))
        # The autotuner's chosen config sets the descriptors' block shapes in its pre_hook (the tutorial's
        # _host_descriptor_pre_hook), as Triton's launch does.
        config = self._config_objects.get(self._config_key(bound)) if self._autotuner is not None else None
        if config is not None and config.pre_hook is not None:
            config.pre_hook(first)
        options = {k: v for k, v in (("num_warps", num_warps), ("num_stages", num_stages)) if v is not None}
        self.jit[tuple(grid)](**{p: first[p] for p in self._params}, **options)
        self.jit[tuple(grid)](**{p: second[p] for p in self._params}, **options)
        for n in first:
            with_descriptor = first[n].base if n in descriptors else first[n]
            if isinstance(with_descriptor, torch.Tensor) and not _tgrad_same_values(with_descriptor, second[n]):
                raise TypeError(f"tgrad: {self.__name__}: with the host TensorDescriptors passed for {names} the "
                                f"kernel computes other values (in '{n}') than with their base tensors, where it makes "
                                "descriptors of its own (another shape, strides or block shape): the op differentiates "
                                "the kernel on tensors, so it cannot take these descriptors; pass the tensors, or "
                                "descriptors laid out as the kernel lays out its own")
        self._descriptors_checked.add(key)

    def _config_key(self, bound):
        return tuple(bound.get(k) for k in self._autotune_keys) + tuple(
            str(v.dtype) for v in bound.values() if isinstance(v, torch.Tensor))

    def _config(self, grid, bound):
        key = self._config_key(bound)
        if key in self._configs:
            return self._configs[key]
        if torch.compiler.is_compiling():
            raise RuntimeError(f"tgrad: {self.__name__} is autotuned and has no config for {key} yet: call it once "
                               "outside torch.compile with these shapes first, or pass its tuned constexprs")
        # The autotuner benchmarks its configs on these arguments (writing to the buffers passed).
        self._autotuner[grid](**{p: bound[p] for p in self._params if p in bound and p not in self._autotune_names})
        best = self._autotuner.best_config
        self._configs[key] = (dict(best.kwargs), best.num_warps, best.num_stages)
        self._config_objects[key] = best
        return self._configs[key]

    def _backward_launch(self, grid_function, grid, bound, arguments, options):
        """The backward's launch values for these arguments, encoded for the ops (a list of ints; empty:
        the forward's), tuned on their first eager launch."""
        key = tuple(grid) + tuple((tuple(a.shape), tuple(a.stride()), a.dtype) if isinstance(a, torch.Tensor)
                                  else tuple(a) if isinstance(a, list) else a for a in arguments)
        if key in self._launches:
            return self._launches[key]
        # (Triton's interpreter, TRITON_INTERPRET=1, times nothing: the forward's values there too.)
        if (torch.compiler.is_compiling() or os.environ.get("TGRAD_TUNE_BACKWARD", "1") == "0"
                or os.environ.get("TRITON_INTERPRET", "0") == "1"):
            return []
        # No backward will run (inference, torch.no_grad): not worth the tuning's compiles; a later launch with
        # gradients tunes.
        if not torch.is_grad_enabled() or not any(isinstance(a, torch.Tensor) and a.requires_grad for a in arguments):
            return []
        self._launches[key] = self._tune_backward(grid_function, grid, bound, arguments, options)
        return self._launches[key]

    def _encode_launch(self, grid, kernel_options, constexprs):
        """[grid (3), (num_warps, num_stages) of each backward kernel, (given, value) of each constexpr]."""
        names = self._tuning[4]
        out = list(_tgrad_grid3(grid))
        for warps, stages in kernel_options:
            out += [warps, stages]
        for name in names:
            out += [1, constexprs[name]] if name in constexprs else [0, 0]
        return out

    def _encode_kernels(self, launches):
        """The launch list for per-kernel launch values (`launches`: each backward kernel's (grid, (num_warps,
        num_stages), constexprs)): where the kernels may differ in their constexprs (--tiling with kernels apart),
        one block per kernel of [grid (3), num_warps, num_stages, (given, value) of each constexpr]; else the
        shared encoding (_encode_launch), every kernel's grid and constexprs being the first's."""
        if not self._tiling_apart:
            return self._encode_launch(launches[0][0], [o for _, o, _ in launches], launches[0][2])
        out = []
        for grid, (warps, stages), constexprs in launches:
            out += self._encode_launch(grid, [(warps, stages)], constexprs)
        return out

    def _tune_backward(self, grid_function, grid, bound, arguments, options):
        forward, backward, setup_context, backward_with, names, kernels = self._tuning[:6]
        own = [options[o] for o in self._own_options]
        # Triton's defaults where the launch gave none.
        warps = options["num_warps"] if options["num_warps"] is not None else 4
        stages = options["num_stages"] if options["num_stages"] is not None else 3
        # The forward's outputs, which the backward may read (a relu's derivative from its stored output).
        with torch.no_grad():
            output = forward(list(grid), [], *arguments, *own)

        def context(launches):
            ctx = _TgradTuningContext()
            setup_context(ctx, (list(grid), self._encode_kernels(launches), *arguments, *own), output)
            return ctx

        def milliseconds(launches):
            ctx = context(launches)
            upstream = (None,) * len(self._output_params)  # zeros
            try:
                t = triton.testing.do_bench(lambda: backward_with(backward, ctx, *upstream), warmup=5, rep=25,
                                            return_mode="median")
            except Exception as e:  # launch values this backward cannot run with (shared memory, registers)
                failures.append(e)
                t = float("inf")
            if verbose:
                print(f"tgrad: {self.__name__} backward at {launches}: " +
                      (f"{t:.4f} ms" if t != float("inf") else f"fails ({type(failures[-1]).__name__})"))
            return t

        def forward_grid(values):  # the forward's grid under these constexprs (the grid function of them)
            g = grid_function({**bound, **values})
            return [int(x) for x in (g if isinstance(g, (tuple, list)) else (g,))]

        failures = []
        verbose = os.environ.get("TGRAD_TUNE_VERBOSE", "0") != "0"  # each candidate's time, on stdout
        # The forward's launch values first: they need not fit the backward's kernels (the relu matmul's owners
        # at the forward's 128 x 256 x 64 tiles and 3 stages need 360 KB of shared memory).
        candidates = [[(list(grid), (warps, stages), {})] * kernels]
        # The autotuner's configs, each with the forward's grid for it (the grid function of its block sizes).
        if self._autotuner is not None and grid_function is not None:
            for config in self._autotuner.configs:
                values = dict(config.kwargs)
                if not all(n in names and type(v) is int for n, v in values.items()):
                    continue
                candidates.append([(forward_grid(values), (config.num_warps or 4, config.num_stages or 3), values)]
                                  * kernels)
        timed = []
        for k, candidate in enumerate(candidates):
            # A config's own stages may not fit the backward's kernels (they hold more tiles than the forward's):
            # fewer stages, down to 2, before giving its block sizes up.
            # (A config of 1 stage is tried as it is: the range always holds its own stages.)
            first_stages = candidate[0][1][1]
            for fewer in range(first_stages, min(first_stages, 2) - 1, -1):
                launches = [(g, (w, min(s, fewer)), v) for g, (w, s), v in candidate]
                t = milliseconds(launches)
                if t != float("inf") or fewer <= 2:
                    break
            timed.append((t, k, launches))
        best_time, _, best = min(timed)
        if best_time == float("inf"):
            raise failures[0]  # no candidate runs: the forward's values' error
        reference = best  # values of the forward's own configs: what --tiling's values are checked against
        # --tiling: the declared block sizes, each doubled or halved while that is faster, kernel by kernel where
        # the kernels are apart (else all together), with the forward's grid for the values tried; then each
        # kernel's warps and stages, the others held. Rounds of both while a round gains: block sizes that pay only
        # with 8 warps (the relu matmul's owners: 128 x 64 x 256) are found once the warps have changed.
        tiling = [n for n in self._tiling if n in names and type(bound.get(n)) is int]
        tried_values = [set() for _ in range(kernels)]  # each set of values timed once per kernel (and warps)
        # Start points: the declared block sizes' values permuted among them. An owner computes a transposed
        # product (the relu matmul's dA owner is dC B^T over A's tiles), so the forward's tile turned round may
        # suit it where one doubling at a time would pass through worse tiles (the forward's 128 x 256 x 64 is
        # dA's 128 x 64 x 256 and dB's 64 x 128 x 256, its best tiles timed alone).
        if tiling and grid_function is not None and len(tiling) > 1:
            for changed in ([[k] for k in range(kernels)] if self._tiling_apart else [list(range(kernels))]):
                start = best[changed[0]][2]
                values = [start.get(n, bound[n]) for n in tiling]
                for order in sorted(set(itertools.permutations(values))):
                    if list(order) == values:
                        continue
                    permuted = {**start, **dict(zip(tiling, order))}
                    tried_values[changed[0]].add((tuple(sorted(permuted.items())), best[changed[0]][1]))
                    grid_v = forward_grid(permuted)
                    launches = [(grid_v, best[j][1], permuted) if j in changed else best[j] for j in range(kernels)]
                    t = milliseconds(launches)
                    if t < best_time * 0.98:
                        best_time, best = t, launches
        for _ in range(3 if tiling and grid_function is not None else 1):
            round_start = best_time
            if tiling and grid_function is not None:
                # The kernels whose values change together: each on its own, or all at once.
                for changed in ([[k] for k in range(kernels)] if self._tiling_apart else [list(range(kernels))]):
                    improved = True
                    while improved:
                        improved = False
                        for name in tiling:
                            for factor in (2, 0.5):
                                while True:
                                    current = best[changed[0]][2]
                                    tried = int(current.get(name, bound[name]) * factor)
                                    if tried < 16 or tried > 512:
                                        break
                                    values = {**{n: bound[n] for n in tiling}, **current, name: tried}
                                    seen = (tuple(sorted(values.items())), best[changed[0]][1])
                                    if seen in tried_values[changed[0]]:
                                        break
                                    tried_values[changed[0]].add(seen)
                                    grid_v = forward_grid(values)
                                    launches = [(grid_v, best[j][1], values) if j in changed else best[j]
                                                for j in range(kernels)]
                                    t = milliseconds(launches)
                                    if t >= best_time * 0.98:  # (timing noise: a gain under 2 % is not taken)
                                        break
                                    best_time, best, improved = t, launches, True
            for k in range(kernels):
                for option in ((4, 2), (4, 3), (4, 4), (8, 2), (8, 3), (8, 4)):
                    if option == best[k][1]:
                        continue
                    launches = list(best)
                    launches[k] = (best[k][0], option, best[k][2])
                    t = milliseconds(launches)
                    if t < best_time:
                        best_time, best = t, launches
            if best_time >= round_start * 0.98:
                break
        if any(launch[2] != ref[2] for launch, ref in zip(best, reference)):
            best = self._checked_tiling(best, reference, context, backward, backward_with, output)
        return self._encode_kernels(best)

    def _checked_tiling(self, tuned, reference, context, backward, backward_with, output):
        """`tuned` where the backward computes with it what it computes with `reference` (values of the forward's
        own configs), on these arguments with a random upstream gradient, to within what summing in another order
        changes (relative norm 1e-2); else `reference`, with a warning: the constexprs given to --tiling do not only
        tile the computation."""
        import warnings  # (here: only this rare path needs it, and the module's imports stay the kernels')
        outputs = output if isinstance(output, (tuple, list)) else (output,)
        generator = torch.Generator(device=_tgrad_device_of(*[o for o in outputs if isinstance(o, torch.Tensor)]))
        generator.manual_seed(0)
        upstream = tuple(torch.randn(o.shape, generator=generator, device=o.device, dtype=torch.float32).to(o.dtype)
                         if isinstance(o, torch.Tensor) and o.is_floating_point() else None for o in outputs)
        upstream = upstream[:len(self._output_params)]
        results = []
        for launches in (reference, tuned):
            gradients = backward_with(backward, context(launches), *upstream)
            results.append([g.detach().float().clone() if isinstance(g, torch.Tensor) else None for g in gradients])
        for ours, theirs in zip(*results):
            if ours is None or theirs is None:
                continue
            scale = max(theirs.norm().item(), 1e-30)
            if not (ours - theirs).norm().item() <= 1e-2 * scale:
                warnings.warn(f"tgrad: {self.__name__}: with the block sizes --tiling lets it tune ({tuned}), the "
                              f"backward computes other gradients than with the forward's ({reference}): those "
                              "constexprs do not only tile the computation; the backward keeps the forward's values. "
                              "Regenerate the module without --tiling for them.")
                return reference
        return tuned
