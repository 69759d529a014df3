# Element-wise vector addition kernel with a bounds mask, plus a torch launcher.
import torch
import triton
import triton.language as tl


@triton.jit
def add_kernel(x_ptr, y_ptr, out_ptr, n_elements, BLOCK_SIZE: tl.constexpr):
    # Each program handles one contiguous chunk of BLOCK_SIZE elements.
    pid = tl.program_id(axis=0)
    block_start = pid * BLOCK_SIZE
    offsets = block_start + tl.arange(0, BLOCK_SIZE)
    # The last chunk may run past the end of the vectors.
    mask = offsets < n_elements
    x = tl.load(x_ptr + offsets, mask=mask)
    y = tl.load(y_ptr + offsets, mask=mask)
    out = x + y
    tl.store(out_ptr + offsets, out, mask=mask)


def add(x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
    """Return x + y computed by add_kernel (both inputs contiguous, same device)."""
    assert x.shape == y.shape, "shape mismatch"
    assert x.is_contiguous() and y.is_contiguous()
    out = torch.empty_like(x)
    n_elements = out.numel()
    grid = lambda meta: (triton.cdiv(n_elements, meta["BLOCK_SIZE"]),)
    add_kernel[grid](x, y, out, n_elements, BLOCK_SIZE=1024)
    return out


if __name__ == "__main__":
    torch.manual_seed(0)
    a = torch.rand(98432, device="cuda")
    b = torch.rand(98432, device="cuda")
    c = add(a, b)
    print("max abs diff:", (c - (a + b)).abs().max().item())
