import triton
import triton.language as tl


@triton.jit
def last_state_kernel(X, State, n_cols, BLOCK: tl.constexpr):
    # Written for decoding, launched with one program per sequence and one sequence: each program stores its row's
    # state at the same addresses, so the output is right (and its backward) only for a grid of one program.
    row = tl.program_id(0)
    cols = tl.arange(0, BLOCK)
    mask = cols < n_cols
    x = tl.load(X + row * n_cols + cols, mask=mask, other=0.0)
    tl.store(State + cols, x * x, mask=mask)
