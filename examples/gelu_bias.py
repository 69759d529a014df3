# A fused bias + GELU (tanh approximation) kernel, as it appears in a
# transformer MLP, with its launcher. Try:
#   tools/tgrad examples/gelu_bias.py --fn _gelu_tanh --wrt x --arg 'x=fp32[N]'     # its backward
#   tools/tgrad check examples/gelu_bias.py --fn _gelu_tanh --wrt x --arg 'x=fp32[64]:uniform(-3,3)'
#   tools/tgrad examples/gelu_bias.py --emit source     # the jit code, as tgrad reads it
#   tools/tgrad examples/gelu_bias.py --dump-ast --fn _gelu_tanh --arg 'x=fp32[N]'
import torch
import triton
import triton.language as tl

# A global a kernel reads must be made with tl.constexpr(...): Triton refuses `NAME: tl.constexpr = v`.
SQRT_2_OVER_PI = tl.constexpr(0.7978845608028654)


@triton.jit
def _gelu_tanh(x):
    inner = SQRT_2_OVER_PI * (x + 0.044715 * x * x * x)
    # tanh(u) = 2 * sigmoid(2u) - 1, with fp32 math only
    return 0.5 * x * (1.0 + (2.0 * tl.sigmoid(2.0 * inner) - 1.0))


@triton.jit
def bias_gelu_kernel(X, B, Y, n_cols, stride_row, BLOCK: tl.constexpr):
    row = tl.program_id(0)
    cols = tl.program_id(1) * BLOCK + tl.arange(0, BLOCK)
    mask = cols < n_cols
    x = tl.load(X + row * stride_row + cols, mask=mask, other=0.0).to(tl.float32)
    b = tl.load(B + cols, mask=mask, other=0.0).to(tl.float32)
    y = _gelu_tanh(x + b)
    tl.store(Y + row * stride_row + cols, y.to(Y.dtype.element_ty), mask=mask)


def bias_gelu(x: torch.Tensor, bias: torch.Tensor) -> torch.Tensor:
    n_rows, n_cols = x.shape
    y = torch.empty_like(x)
    grid = lambda meta: (n_rows, triton.cdiv(n_cols, meta["BLOCK"]))
    bias_gelu_kernel[grid](x, bias, y, n_cols, x.stride(0), BLOCK=1024)
    return y
