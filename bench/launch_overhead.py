"""What a launch through a generated torch module costs on the CPU, beside the kernels it runs: the softmax
golden module (tests/golden/torch/softmax_kernel.py), forward and backward of a launch-bound size (64 x 256
fp32) and of 4096 x 4096, side by side in one run:

  - the module as a user calls it, `softmax_kernel[grid](...)` then autograd (eager: a torch.autograd.Function
    over the ops' functions);
  - the same through the registered ops (`softmax_kernel_forward` and its autograd: what torch.compile traces);
  - the two kernels launched by hand in a torch.autograd.Function (the floor for a Triton kernel under autograd);
  - torch.softmax.

Median microseconds per forward + backward (wall time over 1000 calls after a synchronize, so CPU time where it
exceeds the GPU's).

    python3 bench/launch_overhead.py
"""
import importlib.util
import time

import torch
import triton


def load(name):
    spec = importlib.util.spec_from_file_location(name + "_golden", f"tests/golden/torch/{name}.py")
    m = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(m)
    return m


m = load("softmax_kernel")


def per_call_us(fn, n=1000, repeats=5):
    for _ in range(50):
        fn()
    torch.cuda.synchronize()
    times = []
    for _ in range(repeats):
        t = time.perf_counter()
        for _ in range(n):
            fn()
        torch.cuda.synchronize()
        times.append((time.perf_counter() - t) / n * 1e6)
    return sorted(times)[len(times) // 2]


print("| rows x cols | module (eager) | through the ops | autograd.Function by hand | torch.softmax |")
print("| --- | --- | --- | --- | --- |")
for rows, cols in ((64, 256), (4096, 4096)):
    block = triton.next_power_of_2(cols)
    x = torch.randn(rows, cols, device="cuda", requires_grad=True)
    dy = torch.randn(rows, cols, device="cuda")
    out = torch.empty_like(x)

    def module():
        (y,) = m.softmax_kernel[(rows,)](out, x, cols, cols, cols, block)
        torch.autograd.grad(y, x, dy)

    def ops():
        y = m.softmax_kernel_forward([rows], out, x, cols, cols, cols, block)
        torch.autograd.grad(y, x, dy)

    class ByHand(torch.autograd.Function):
        @staticmethod
        def forward(ctx, x):
            y = torch.empty_like(x)
            m.softmax_kernel.jit[(rows,)](y, x, cols, cols, cols, block)
            ctx.save_for_backward(y, x)
            return y

        @staticmethod
        def backward(ctx, g):
            y, x = ctx.saved_tensors
            dx = torch.zeros_like(x)
            m.softmax_kernel_bwd[(rows,)](y, x, cols, cols, cols, block, din_ptr=dx, dout_ptr=g.contiguous())
            return dx

    def by_hand():
        torch.autograd.grad(ByHand.apply(x), x, dy)

    def reference():
        torch.autograd.grad(torch.softmax(x, 1), x, dy)

    cells = [per_call_us(f) for f in (module, ops, by_hand, reference)]
    print(f"| {rows} x {cols} | " + " | ".join(f"{c:.0f} us" for c in cells) + " |", flush=True)
