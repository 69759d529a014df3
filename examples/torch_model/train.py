"""A small PyTorch model whose two Triton kernels, a fused bias + GELU (examples/gelu_bias.py) and
a layer norm (examples/torch_model/layer_norm.py), run as PyTorch ops whose backwards tgrad wrote:
no backward is written by hand. From the repository root, generate the two ops, then train on a
machine with a GPU:

    tools/tgrad examples/gelu_bias.py --kernel bias_gelu_kernel --wrt X,B --emit torch -o examples/torch_model/gelu_bias_op.py && tools/tgrad examples/torch_model/layer_norm.py --wrt X,W,B --no-grad Mean,Rstd --emit torch -o examples/torch_model/layer_norm_op.py
    python3 examples/torch_model/train.py [--compile] [--dtype bf16]

It first checks one step's gradients against a twin model in plain PyTorch (same weights), then
trains on a synthetic regression task and prints the loss, which must fall.
"""
import argparse
import os
import sys

import torch
import triton

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import gelu_bias_op  # noqa: E402  (tgrad --emit torch)
import layer_norm_op  # noqa: E402  (tgrad --emit torch)


# The launchers a model author writes for the kernels, now calling the generated modules: the
# same arguments as the Triton kernels take; each call returns the buffers the kernel wrote.
def bias_gelu(x, bias):
    n_rows, n_cols = x.shape
    grid = lambda meta: (n_rows, triton.cdiv(n_cols, meta["BLOCK"]))  # noqa: E731
    return gelu_bias_op.bias_gelu_kernel[grid](x, bias, torch.empty_like(x), n_cols, x.stride(0), BLOCK=1024).Y


def layer_norm(x, weight, bias, eps=1e-5):
    rows, n = x.shape
    stats = torch.empty(rows, device=x.device, dtype=torch.float32)
    out = layer_norm_op.layer_norm_kernel[(rows,)](x, torch.empty_like(x), weight, bias, stats, torch.empty_like(stats),
                                                    x.stride(0), n, eps, BLOCK_SIZE=triton.next_power_of_2(n))
    return out.Y


class Block(torch.nn.Module):
    """x + down(gelu(up(x) + b)), then a layer norm: the kernels above, or PyTorch's own ops."""

    def __init__(self, width, hidden, triton_kernels):
        super().__init__()
        self.up = torch.nn.Linear(width, hidden, bias=False)
        self.up_bias = torch.nn.Parameter(torch.randn(hidden) * 0.1)
        self.down = torch.nn.Linear(hidden, width)
        self.norm = torch.nn.LayerNorm(width)
        self.triton_kernels = triton_kernels

    def forward(self, x):
        if self.triton_kernels:
            h = bias_gelu(self.up(x), self.up_bias)
            return layer_norm(x + self.down(h), self.norm.weight, self.norm.bias)
        h = torch.nn.functional.gelu(self.up(x) + self.up_bias, approximate="tanh")
        return self.norm(x + self.down(h))


class Model(torch.nn.Module):
    def __init__(self, triton_kernels, width=96, hidden=384, depth=2):
        super().__init__()
        self.embed = torch.nn.Linear(16, width)
        self.blocks = torch.nn.Sequential(*[Block(width, hidden, triton_kernels) for _ in range(depth)])
        self.head = torch.nn.Linear(width, 1)

    def forward(self, x):
        return self.head(self.blocks(self.embed(x))).squeeze(-1)


def batch(generator, size, device):
    x = torch.randn(size, 16, generator=generator, device=device)
    y = torch.sin(x[:, :8].sum(1)) * torch.cos(x[:, 8:].sum(1) * 0.5)
    return x, y


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--compile", action="store_true", help="train under torch.compile(fullgraph=True)")
    parser.add_argument("--dtype", default="fp32", choices=["fp32", "bf16"], help="the model's parameters and data")
    parser.add_argument("--steps", type=int, default=300)
    args = parser.parse_args()
    dtype = {"fp32": torch.float32, "bf16": torch.bfloat16}[args.dtype]
    device = "cuda"
    torch.manual_seed(0)
    model = Model(triton_kernels=True).to(device, dtype)
    twin = Model(triton_kernels=False).to(device, dtype)
    twin.load_state_dict(model.state_dict())
    generator = torch.Generator(device=device).manual_seed(0)

    # One step's gradients: the generated backwards against PyTorch's.
    x, y = batch(generator, 512, device)
    for m in (model, twin):
        torch.nn.functional.mse_loss(m(x.to(dtype)).float(), y).backward()
    worst = 0.0
    for (name, p), q in zip(model.named_parameters(), twin.parameters()):
        err = ((p.grad.float() - q.grad.float()).norm() / q.grad.float().norm().clamp_min(1e-30)).item()
        worst = max(worst, err)
    tolerance = 1e-4 if dtype == torch.float32 else 5e-2
    print(f"gradients vs plain PyTorch: worst relative difference {worst:.2e} (tolerance {tolerance:.0e})")
    if not worst <= tolerance:
        sys.exit("the gradients differ from PyTorch's")
    model.zero_grad()

    step_model = torch.compile(model, fullgraph=True) if args.compile else model
    optimizer = torch.optim.Adam(model.parameters(), lr=2e-3)
    first = last = None
    for step in range(args.steps):
        x, y = batch(generator, 512, device)
        loss = torch.nn.functional.mse_loss(step_model(x.to(dtype)).float(), y)
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
        first = loss.item() if first is None else first
        if step % 50 == 0 or step == args.steps - 1:
            last = loss.item()
            print(f"step {step:4d}  loss {last:.4f}")
    print(f"loss {first:.4f} -> {last:.4f}" + (" (torch.compile)" if args.compile else ""))
    if not last < 0.5 * first:
        sys.exit("the loss did not fall")


if __name__ == "__main__":
    main()
