# unsloth's grouped GEMM forward (unsloth/kernels/moe/grouped_gemm/kernels/forward.py, _grouped_gemm_forward_kernel:
# a persistent kernel that walks each expert's tiles with a while loop, tgrad differentiates it as a counted for loop,
# src/ad/WhileLoops.h) through the module tgrad writes for it, launched as unsloth's grouped_gemm_forward launches it
# (grid (NUM_SMS,), W viewed as (E * N, K), the flags by keyword, topk_weights None unless FUSE_MUL_POST), against a
# float64 PyTorch reference of the grouped GEMM written here: 37 tokens routed to 2 of 4 experts, N 96, K 64, tiles
# 32 x 32 x 32; permute_x, permute_y and fuse_mul_post as unsloth combines them. The output and the gradients of x, W
# and topk_weights (in a loss with random fp64 weights) are compared, max abs error over max(1, max|ref|).
# The module, from a checkout of unsloth at R (run from R; not committed):
#   tgrad unsloth/kernels/moe/grouped_gemm/kernels/forward.py -I . --kernel _grouped_gemm_forward_kernel \
#         --wrt x_ptr,w_ptr,topk_weights_ptr -D USE_TMA_LOAD_W=False -D USE_TMA_LOAD_X=False -D USE_TMA_STORE=False \
#         --emit torch -o MODULE.py
# Usage: python3 tests/gpu/real/unsloth_grouped_gemm.py MODULE.py [--cpu] [--compile]   (--compile: each launch under
# torch.compile(fullgraph=True); --cpu: TRITON_INTERPRET=1, fp32; the
# interpreter needs a shim for float tl.atomic_xchg, which the backward uses for y's upstream gradient)
import importlib.util
import sys
import torch

path = sys.argv[1]
CPU = "--cpu" in sys.argv
COMPILE = "--compile" in sys.argv  # each launch inside torch.compile(fullgraph=True), as a compiled model runs it
dev = "cpu" if CPU else "cuda"
spec = importlib.util.spec_from_file_location("gg", path)
mod = importlib.util.module_from_spec(spec)
sys.modules["gg"] = mod  # (torch.compile imports the module of the ops by name)
spec.loader.exec_module(mod)
kernel = mod._grouped_gemm_forward_kernel
FAILS = CHECKS = 0


def reference(x, w, topk_w, gather, m_sizes, topk, permute_x, permute_y, fuse_post):
    # y in expert-grouped order (or token order with permute_y), float64
    E, N, K = w.shape
    rows = []
    start = 0
    total = int(m_sizes.sum())
    y = torch.zeros(total, N, dtype=torch.float64, device=x.device)
    for e in range(E):
        m = int(m_sizes[e])
        idx = torch.arange(start, start + m, device=x.device)
        if permute_x:
            xin = x[gather[idx].long() // topk]
        else:
            xin = x[idx]
        out = xin @ w[e].T
        if fuse_post:
            out = out * topk_w[gather[idx].long()][:, None]
        if permute_y:
            y = y.index_copy(0, gather[idx].long(), out)
        else:
            y = y.index_copy(0, idx, out)
        start += m
    return y


def run(dtype, permute_x, permute_y, fuse_post, E=4, N=96, K=64, tokens=37, topk=2, BM=32, BN=32, BK=32, warps=4):
    global FAILS, CHECKS
    g = torch.Generator(device=dev).manual_seed(1)
    total = tokens * topk
    # routing: each token to topk distinct experts, sorted by expert
    choice = torch.stack([torch.randperm(E, generator=torch.Generator().manual_seed(t))[:topk] for t in range(tokens)])
    flat = choice.reshape(-1)  # token-expanded index t*topk + j -> expert
    order = torch.argsort(flat, stable=True)
    m_sizes = torch.bincount(flat, minlength=E).to(torch.int32).to(dev)
    gather = order.to(torch.int32).to(dev)  # expert-sorted position -> token-expanded index
    x_rows = tokens if permute_x else total
    x64 = (torch.rand(x_rows, K, generator=g, device=dev, dtype=torch.float64) * 2 - 1)
    w64 = (torch.rand(E, N, K, generator=g, device=dev, dtype=torch.float64) * 2 - 1) / 8
    tw64 = torch.rand(total, generator=g, device=dev, dtype=torch.float64)
    upstream = torch.rand(total, N, generator=g, device=dev, dtype=torch.float64) * 2 - 1
    x = x64.to(dtype).requires_grad_(True)
    w = w64.to(dtype).requires_grad_(True)
    tw = tw64.to(dtype).requires_grad_(True)
    y = torch.empty(total, N, device=dev, dtype=dtype)
    NUM_SMS = 8 if CPU else torch.cuda.get_device_properties(dev).multi_processor_count
    def launch(x, w, tw, y):
        return kernel[lambda META: (NUM_SMS,)](
            x_ptr=x, w_ptr=w.view(-1, K), m_sizes_ptr=m_sizes, gather_indices_ptr=gather,
            topk_weights_ptr=tw if fuse_post else None, y_ptr=y, NUM_TOKENS=tokens, NUM_EXPERTS=E, TOPK=topk, N=N,
            K=K, NUM_SMS=NUM_SMS, PERMUTE_X=permute_x, PERMUTE_Y=permute_y, FUSE_MUL_POST=fuse_post, FLATTEN=True,
            USE_TMA_LOAD_W=False, USE_TMA_LOAD_X=False, USE_TMA_STORE=False, BLOCK_SIZE_M=BM, BLOCK_SIZE_N=BN,
            BLOCK_SIZE_K=BK, num_warps=warps, num_stages=2).y_ptr
    if COMPILE:
        torch._dynamo.reset()
        launch = torch.compile(launch, fullgraph=True)
    yk = launch(x, w, tw, y)
    inputs = [x, w] + ([tw] if fuse_post else [])
    grads = torch.autograd.grad((yk.double() * upstream).sum(), inputs)
    xr, wr, twr = (x64.clone().requires_grad_(True), w64.clone().requires_grad_(True), tw64.clone().requires_grad_(True))
    yr = reference(xr, wr, twr, gather, m_sizes, topk, permute_x, permute_y, fuse_post)
    rinputs = [xr, wr] + ([twr] if fuse_post else [])
    rgrads = torch.autograd.grad((yr * upstream).sum(), rinputs)
    tol = {torch.float32: 2e-3, torch.float16: 2e-2, torch.bfloat16: 6e-2}[dtype]  # tl.dot at tf32 for fp32
    label = (f"{str(dtype)[6:]} permute_x={permute_x} permute_y={permute_y} fuse_mul_post={fuse_post}"
             + (" compiled" if COMPILE else ""))
    for name, got, want in [("y", yk.double(), yr)] + [(f"d{n}", a.double(), b) for n, a, b in
                                                        zip(["x", "w", "topk_weights"], grads, rgrads)]:
        err = (got - want).abs().max().item() / max(1.0, want.abs().max().item())
        CHECKS += 1
        ok = err <= tol
        FAILS += not ok
        print(f"| {label} | {name} | {err:.3e} | {tol:g} | {'PASS' if ok else 'FAIL'} |", flush=True)


dtypes = [torch.float32] if CPU else [torch.float32, torch.bfloat16, torch.float16]
for dtype in dtypes:
    for permute_x, permute_y, fuse_post in [(False, False, False), (True, False, False), (False, True, False),
                                            (False, True, True)]:
        try:
            run(dtype, permute_x, permute_y, fuse_post)
        except Exception as e:  # a failure of one combination is reported, the others still run
            import traceback
            traceback.print_exc()
            FAILS += 1
            CHECKS += 1
print(f"{CHECKS - FAILS} of {CHECKS} pass")
