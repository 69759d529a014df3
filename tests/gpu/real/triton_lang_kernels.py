# triton-lang/kernels' cross entropy forward (kernels/cross_entropy.py, fetched, not committed) through the module tgrad
# wrote, launched as its host code launches it (grid (M,), the @heuristics' BLOCK and num_warps, labels as int32),
# against torch in float64: both outputs (the negative log-probabilities PROBS and the LOSS the kernel reads back
# from PROBS at each row's label) in a loss with random fp64 weights; max abs error over max(1, max|ref|).
# Usage: python3 tests/gpu/real/triton_lang_kernels.py [MODULES_DIR] (default scratch/tlk), where MODULES_DIR holds
#   tgrad kernels/cross_entropy.py --kernel _forward --wrt LOGITS --emit torch -o MODULES_DIR/ce_forward_op.py
import importlib.util
import os
import sys

import torch

FOLDER = sys.argv[1] if len(sys.argv) > 1 else "scratch/tlk"
spec = importlib.util.spec_from_file_location("ce", os.path.join(FOLDER, "ce_forward_op.py"))
m = importlib.util.module_from_spec(spec)
sys.modules["ce"] = m
spec.loader.exec_module(m)
fails = 0
for dtype in (torch.float32, torch.float16, torch.bfloat16):
    for M, N in ((128, 1000), (33, 32000), (5, 7)):
        torch.manual_seed(M + N)
        logits = (torch.randn(M, N, device="cuda") * 2).to(dtype).requires_grad_()
        idx = torch.randint(0, N, (M,), device="cuda", dtype=torch.int32)
        probs = torch.empty(M, N, device="cuda", dtype=torch.float32)
        loss = torch.empty(M, device="cuda", dtype=torch.float32)
        out = m._forward[(M,)](logits, probs, idx, loss, N)
        P, L = out.PROBS, out.LOSS
        wp = torch.randn(M, N, device="cuda", dtype=torch.float64)
        wl = torch.randn(M, device="cuda", dtype=torch.float64)
        ((P.double() * wp).sum() + (L.double() * wl).sum()).backward()
        x = logits.detach().double().requires_grad_()
        ref_p = -torch.log_softmax(x, 1)
        ref_l = ref_p.gather(1, idx.long()[:, None])[:, 0]
        ((ref_p * wp).sum() + (ref_l * wl).sum()).backward()
        scale = max(1.0, x.grad.abs().max().item())
        err = (logits.grad.double() - x.grad).abs().max().item() / scale
        ferr = (L.double() - ref_l).abs().max().item() / max(1.0, ref_l.abs().max().item())
        tol = 2e-5 if dtype == torch.float32 else 6e-2
        ok = err < tol and ferr < tol
        fails += not ok
        print(f"{str(dtype):16} M={M:4} N={N:6}: loss err {ferr:.2e}, dLOGITS err {err:.2e} {'PASS' if ok else 'FAIL'}")
print("failures:", fails)
sys.exit(1 if fails else 0)
