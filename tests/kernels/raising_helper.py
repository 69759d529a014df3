import triton
import triton.language as tl


@triton.jit
def _activation(x, ACTIVATION: tl.constexpr):
    # The helper supports two activations and raises for any other: Triton compiles the raise only for a value that
    # takes that branch.
    if ACTIVATION == "relu":
        y = tl.maximum(x, 0.0, propagate_nan=tl.PropagateNan.ALL)
    elif ACTIVATION == "silu":
        y = x * tl.sigmoid(x)
    else:
        raise ValueError(f"unsupported activation: {ACTIVATION}")
    return y


@triton.jit
def activation_kernel(X, Y, n, ACTIVATION: tl.constexpr, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    x = tl.load(X + offs, mask=mask, other=0.0)
    tl.store(Y + offs, _activation(x, ACTIVATION), mask=mask)
