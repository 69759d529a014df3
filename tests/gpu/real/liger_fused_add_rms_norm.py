# Liger-Kernel's ascend fused add + RMS norm forward (fetched, not committed): S = X + R stored in one inner loop of a
# grid-stride row loop and read back in the next. Through its generated module against torch.autograd in fp64.
import sys
import torch
import triton.language as tl
sys.path.insert(0, sys.argv[1] if len(sys.argv) > 1 else "scratch/fa")
import liger_farn_op as L

torch.manual_seed(0)
fails = 0
for dtype, x_dtype in ((torch.float32, tl.float32), (torch.bfloat16, tl.bfloat16)):
    for casting_mode in (-1, 0, 1):
        for grid in (7, 40):
            rows, cols, offset = 40, 300, 0.5
            X = torch.randn(rows, cols, device="cuda", dtype=dtype, requires_grad=True)
            R = torch.randn(rows, cols, device="cuda", dtype=dtype, requires_grad=True)
            W = torch.randn(cols, device="cuda", dtype=dtype, requires_grad=True)
            Y = torch.empty_like(X); S = torch.empty_like(X)
            RSTD = torch.empty(rows, device="cuda", dtype=torch.float32)
            r = L._fused_add_rms_norm_forward_kernel_npu[(grid,)](
                Y, Y.stride(0), S, S.stride(0), X, X.stride(0), R, R.stride(0), W, RSTD, RSTD.stride(0), rows, cols,
                1e-6, offset, casting_mode, x_dtype, BLOCK_SIZE=128)
            gy, gs = (torch.randn(rows, cols, device="cuda", dtype=torch.float64) for _ in range(2))
            gr = torch.randn(rows, device="cuda", dtype=torch.float64)
            ((r.Y_ptr.double() * gy).sum() + (r.S_ptr.double() * gs).sum() + (r.RSTD_ptr.double() * gr).sum()).backward()
            x, rr, w = (t.detach().double().requires_grad_() for t in (X, R, W))
            s = x + rr
            rstd = 1 / torch.sqrt((s * s).mean(1, keepdim=True) + 1e-6)
            y = s * rstd * (offset + w)
            ((y * gy).sum() + (s * gs).sum() + (rstd[:, 0] * gr).sum()).backward()
            tol = 2e-5 if dtype == torch.float32 else 6e-2
            for name, got, want in (("Y", r.Y_ptr, y), ("S", r.S_ptr, s), ("dX", X.grad, x.grad), ("dR", R.grad, rr.grad),
                                    ("dW", W.grad, w.grad)):
                err = (got.double() - want).abs().max().item() / max(1.0, want.abs().max().item())
                ok = err <= tol
                fails += not ok
                print(f"{'ok  ' if ok else 'FAIL'} {dtype} casting_mode={casting_mode} grid={grid} {name}: {err:.2e}")
print(f"{fails} failures")
