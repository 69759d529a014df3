#!/usr/bin/env python3
"""Backward-kernel benchmark (GPU machine, not a test): tgrad's generated
backward vs a hand-written Triton backward written the classic way vs
torch.autograd of the PyTorch reference, for softmax, rms norm, layer norm,
matmul and attention.

    python3 bench/bwd_bench.py [--out bench/RESULTS.md] [--only softmax,attention]

Times are medians of triton.testing.do_bench (CUDA events, warm-up first).
GB/s counts the bytes each backward must move at least: softmax reads x (or
y) and dy and writes dx; rms norm reads x, dy and writes dx (w and rstd are
small); layer norm also writes dw, db; matmul counts 4*M*N*K flops (two
matmuls). The generated kernels come from tests/golden/backward/ (fp32
pointers; the same source runs on fp16 buffers, loads upcast explicitly).
Kernels with partial sums are launched as `tgrad --emit json` says: over G
programs, then the reduction. The row "tgrad through its torch module" calls
the backward op of the module `tgrad --emit torch` wrote (tests/golden/torch/,
generic: one source for every dtype) as autograd would: it allocates the
gradients, scratch and tapes and picks its launch values itself (G = the
smaller of the rows and the SM count), so its time includes all of that. For matmul and attention
the row "tgrad through its torch module (launcher, autograd)" runs what a user runs: the forward
through the module's launcher with the grid a function of the config, then torch.autograd.grad,
timed after the first backward (which tunes the module's backward launch values). The row-looping kernels (tgrad's and the
hand-written ones alike) are timed at G in {2, 4} x SMs and num_warps in
{4, 8, 16}, the softmax kernels at num_warps in {4, 8, 16}, and each reports
its best: the same tuning for both.
"""
import argparse
import datetime
import importlib.util
import json
import os
import sys
import tempfile

import torch
import triton
import triton.language as tl
from triton.testing import do_bench


# ----------------------------------------------------------- hand-written

@triton.jit
def softmax_bwd_hand(dx_ptr, y_ptr, dy_ptr, stride, n_cols, BLOCK: tl.constexpr):
    # dx = y * (dy - sum(dy * y)), one program per row, reading the saved output y.
    row = tl.program_id(0)
    cols = tl.arange(0, BLOCK)
    mask = cols < n_cols
    y = tl.load(y_ptr + row * stride + cols, mask=mask, other=0.0).to(tl.float32)
    dy = tl.load(dy_ptr + row * stride + cols, mask=mask, other=0.0).to(tl.float32)
    dx = y * (dy - tl.sum(dy * y, axis=0))
    tl.store(dx_ptr + row * stride + cols, dx.to(dx_ptr.dtype.element_ty), mask=mask)


@triton.jit
def rms_norm_bwd_hand(dx_ptr, dw_partial_ptr, x_ptr, w_ptr, dy_ptr, rstd_ptr, stride, n_rows, n_cols,
                      BLOCK: tl.constexpr):
    # Classic two-stage dW: each program walks rows pid, pid + G, ... and keeps
    # its partial dW in registers, stored once; a second pass sums the partials.
    pid = tl.program_id(0)
    programs = tl.num_programs(0)
    cols = tl.arange(0, BLOCK)
    mask = cols < n_cols
    w = tl.load(w_ptr + cols, mask=mask, other=0.0).to(tl.float32)
    dw = tl.zeros([BLOCK], dtype=tl.float32)
    for row in range(pid, n_rows, programs):
        x = tl.load(x_ptr + row * stride + cols, mask=mask, other=0.0).to(tl.float32)
        dy = tl.load(dy_ptr + row * stride + cols, mask=mask, other=0.0).to(tl.float32)
        rstd = tl.load(rstd_ptr + row)
        xhat = x * rstd
        wdy = w * dy
        c = tl.sum(xhat * wdy, axis=0) / n_cols
        dx = (wdy - xhat * c) * rstd
        tl.store(dx_ptr + row * stride + cols, dx.to(dx_ptr.dtype.element_ty), mask=mask)
        dw += dy * xhat
    tl.store(dw_partial_ptr + pid * n_cols + cols, dw, mask=mask)


@triton.jit
def layer_norm_bwd_hand(dx_ptr, dw_partial_ptr, db_partial_ptr, x_ptr, w_ptr, dy_ptr, mean_ptr, rstd_ptr, stride,
                        n_rows, n_cols, BLOCK: tl.constexpr):
    # The classic two-stage backward: rows pid, pid + G, ...; dW and dB partials in registers.
    pid = tl.program_id(0)
    programs = tl.num_programs(0)
    cols = tl.arange(0, BLOCK)
    mask = cols < n_cols
    w = tl.load(w_ptr + cols, mask=mask, other=0.0).to(tl.float32)
    dw = tl.zeros([BLOCK], dtype=tl.float32)
    db = tl.zeros([BLOCK], dtype=tl.float32)
    for row in range(pid, n_rows, programs):
        x = tl.load(x_ptr + row * stride + cols, mask=mask, other=0.0).to(tl.float32)
        dy = tl.load(dy_ptr + row * stride + cols, mask=mask, other=0.0).to(tl.float32)
        mean = tl.load(mean_ptr + row)
        rstd = tl.load(rstd_ptr + row)
        xhat = tl.where(mask, (x - mean) * rstd, 0.0)
        wdy = w * dy
        c1 = tl.sum(xhat * wdy, axis=0) / n_cols
        c2 = tl.sum(wdy, axis=0) / n_cols
        dx = (wdy - (xhat * c1 + c2)) * rstd
        tl.store(dx_ptr + row * stride + cols, dx.to(dx_ptr.dtype.element_ty), mask=mask)
        dw += dy * xhat
        db += dy
    tl.store(dw_partial_ptr + pid * n_cols + cols, dw, mask=mask)
    tl.store(db_partial_ptr + pid * n_cols + cols, db, mask=mask)


@triton.jit
def relu_mask_hand(dc_ptr, c_ptr, out_ptr, n, BLOCK: tl.constexpr):
    # dC masked by relu'(acc) = (C > 0): the pass a hand-written relu-matmul backward runs before its two matmuls.
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    m = offs < n
    c = tl.load(c_ptr + offs, mask=m, other=0.0)
    dc = tl.load(dc_ptr + offs, mask=m, other=0.0)
    tl.store(out_ptr + offs, tl.where(c > 0, dc, 0.0), mask=m)


@triton.jit
def matmul_hand(a_ptr, b_ptr, c_ptr, M, N, K, stride_am, stride_ak, stride_bk, stride_bn, stride_cm, stride_cn,
                BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr):
    # A plain tiled matmul; the hand-written backward is two of them: dA = dC B^T, dB = A^T dC.
    pid_m = tl.program_id(0)
    pid_n = tl.program_id(1)
    offs_m = pid_m * BLOCK_M + tl.arange(0, BLOCK_M)
    offs_n = pid_n * BLOCK_N + tl.arange(0, BLOCK_N)
    offs_k = tl.arange(0, BLOCK_K)
    a_ptrs = a_ptr + offs_m[:, None] * stride_am + offs_k[None, :] * stride_ak
    b_ptrs = b_ptr + offs_k[:, None] * stride_bk + offs_n[None, :] * stride_bn
    acc = tl.zeros((BLOCK_M, BLOCK_N), dtype=tl.float32)
    for k in range(0, tl.cdiv(K, BLOCK_K)):
        a = tl.load(a_ptrs, mask=(offs_m[:, None] < M) & (offs_k[None, :] < K - k * BLOCK_K), other=0.0)
        b = tl.load(b_ptrs, mask=(offs_k[:, None] < K - k * BLOCK_K) & (offs_n[None, :] < N), other=0.0)
        acc = tl.dot(a, b, acc)
        a_ptrs += BLOCK_K * stride_ak
        b_ptrs += BLOCK_K * stride_bk
    c_ptrs = c_ptr + offs_m[:, None] * stride_cm + offs_n[None, :] * stride_cn
    tl.store(c_ptrs, acc.to(c_ptr.dtype.element_ty), mask=(offs_m[:, None] < M) & (offs_n[None, :] < N))


# FlashAttention-2's backward, tuned on an H100: dS = P * (dP - Delta) with Delta = rowsum(dO * O) - dLSE, so
# the upstream gradient of the logsumexp comes in for free.  No atomics: dQ walks the key blocks for a resident
# query block, dK/dV walks the query blocks for a resident key block, and each recomputes P.  Without a mask they
# are two kernels, dQ first (it also writes Delta for its rows); with a causal mask they are one launch after a
# Delta pass, where each program pairs a long dK/dV with a short dQ.  The softmax runs in base 2:
# exp2(s * sm_scale * log2(e) - lse * log2(e)), one FMA a score, the forward's natural-log lse converted as it is
# loaded.  N_CTX must be a multiple of every block size (the host asserts it), so only the causal diagonal needs a
# mask: the diagonal blocks go in their own masked steps, everything else in unmasked full steps.

@triton.jit
def attn_bwd_preprocess_hand(O, DO, DLSE, Delta, N_CTX, HEAD_DIM: tl.constexpr, BLOCK_M: tl.constexpr):
    # Delta = rowsum(dO * O) - dLSE, one row per query, in float32.
    rows = tl.program_id(1).to(tl.int64) * N_CTX + tl.program_id(0) * BLOCK_M + tl.arange(0, BLOCK_M)
    cols = tl.arange(0, HEAD_DIM)
    o = tl.load(O + rows[:, None] * HEAD_DIM + cols[None, :]).to(tl.float32)
    do = tl.load(DO + rows[:, None] * HEAD_DIM + cols[None, :]).to(tl.float32)
    tl.store(Delta + rows, tl.sum(o * do, axis=1) - tl.load(DLSE + rows))


@triton.jit
def _attn_bwd_kv_steps(dk, dv, k, v, Q, DO, LSE, Delta, key_ids, first_row, steps, scale2,
                       ROWS: tl.constexpr, HEAD_DIM: tl.constexpr, ON_DIAGONAL: tl.constexpr):
    # Accumulate into dk, dv (this program's key block, k and v resident) the contributions of `steps` blocks of
    # ROWS queries from first_row on.  Everything is kept transposed (keys x queries) so no tile is transposed
    # in registers: sT = K Q^T, dV += P^T dO, dP^T = V dO^T, dK += dS^T Q.
    row_ids = first_row + tl.arange(0, ROWS)
    cols = tl.arange(0, HEAD_DIM)
    q_at = Q + row_ids[:, None] * HEAD_DIM + cols[None, :]
    do_at = DO + row_ids[:, None] * HEAD_DIM + cols[None, :]
    for _ in range(steps):
        q = tl.load(q_at)
        lse2 = tl.load(LSE + row_ids) * 1.4426950408889634
        pT = tl.math.exp2(tl.dot(k, tl.trans(q)) * scale2 - lse2[None, :])
        if ON_DIAGONAL:
            pT = tl.where(row_ids[None, :] >= key_ids[:, None], pT, 0.0)
        do = tl.load(do_at)
        dv = tl.dot(pT.to(do.dtype), do, dv)
        delta = tl.load(Delta + row_ids)
        dsT = pT * (tl.dot(v, tl.trans(do)) - delta[None, :])
        dk = tl.dot(dsT.to(q.dtype), q, dk)
        row_ids += ROWS
        q_at += ROWS * HEAD_DIM
        do_at += ROWS * HEAD_DIM
    return dk, dv


@triton.jit
def _attn_bwd_q_steps(dq, q, do, lse2, delta, K, V, row_ids, first_key, steps, scale2,
                      KEYS: tl.constexpr, HEAD_DIM: tl.constexpr, ON_DIAGONAL: tl.constexpr):
    # Accumulate into dq (this program's query block, q, dO, lse and Delta resident) the contributions of
    # `steps` blocks of KEYS keys from first_key on: s = Q K^T, dP = dO V^T, dQ += dS K.
    key_ids = first_key + tl.arange(0, KEYS)
    cols = tl.arange(0, HEAD_DIM)
    k_at = K + key_ids[:, None] * HEAD_DIM + cols[None, :]
    v_at = V + key_ids[:, None] * HEAD_DIM + cols[None, :]
    for _ in range(steps):
        k = tl.load(k_at)
        v = tl.load(v_at)
        p = tl.math.exp2(tl.dot(q, tl.trans(k)) * scale2 - lse2[:, None])
        if ON_DIAGONAL:
            p = tl.where(row_ids[:, None] >= key_ids[None, :], p, 0.0)
        ds = p * (tl.dot(do, tl.trans(v)) - delta[:, None])
        dq = tl.dot(ds.to(k.dtype), k, dq)
        key_ids += KEYS
        k_at += KEYS * HEAD_DIM
        v_at += KEYS * HEAD_DIM
    return dq


@triton.jit
def _attn_bwd_dkdv_block(Q, K, V, DO, LSE, Delta, DK, DV, sm_scale, N_CTX, first_key, HEAD_DIM: tl.constexpr,
                         BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, DIAG_M: tl.constexpr, IS_CAUSAL: tl.constexpr):
    # dK, dV of keys first_key .. first_key + BLOCK_N (pointers already at this batch-head).
    key_ids = first_key + tl.arange(0, BLOCK_N)
    cols = tl.arange(0, HEAD_DIM)
    k = tl.load(K + key_ids[:, None] * HEAD_DIM + cols[None, :])
    v = tl.load(V + key_ids[:, None] * HEAD_DIM + cols[None, :])
    dk = tl.zeros([BLOCK_N, HEAD_DIM], dtype=tl.float32)
    dv = tl.zeros([BLOCK_N, HEAD_DIM], dtype=tl.float32)
    scale2 = sm_scale * 1.4426950408889634
    first_row = 0
    if IS_CAUSAL:
        # Queries before first_key see none of these keys; the BLOCK_N queries facing them see part of them.
        dk, dv = _attn_bwd_kv_steps(dk, dv, k, v, Q, DO, LSE, Delta, key_ids, first_key, BLOCK_N // DIAG_M, scale2,
                                    DIAG_M, HEAD_DIM, True)
        first_row = first_key + BLOCK_N
    dk, dv = _attn_bwd_kv_steps(dk, dv, k, v, Q, DO, LSE, Delta, key_ids, first_row, (N_CTX - first_row) // BLOCK_M,
                                scale2, BLOCK_M, HEAD_DIM, False)
    tl.store(DV + key_ids[:, None] * HEAD_DIM + cols[None, :], dv.to(DV.dtype.element_ty))
    tl.store(DK + key_ids[:, None] * HEAD_DIM + cols[None, :], (dk * sm_scale).to(DK.dtype.element_ty))


@triton.jit
def _attn_bwd_dq_block(Q, K, V, DO, O, LSE, DLSE, Delta, DQ, sm_scale, N_CTX, first_row, HEAD_DIM: tl.constexpr,
                       BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, DIAG_N: tl.constexpr, IS_CAUSAL: tl.constexpr,
                       MAKE_DELTA: tl.constexpr):
    # dQ of queries first_row .. first_row + BLOCK_M (pointers already at this batch-head).  With MAKE_DELTA the
    # program also computes these rows' Delta from O (it holds dO already) and stores it for the dK/dV kernel
    # that runs next: no separate preprocessing pass.
    row_ids = first_row + tl.arange(0, BLOCK_M)
    cols = tl.arange(0, HEAD_DIM)
    q = tl.load(Q + row_ids[:, None] * HEAD_DIM + cols[None, :])
    do = tl.load(DO + row_ids[:, None] * HEAD_DIM + cols[None, :])
    lse2 = tl.load(LSE + row_ids) * 1.4426950408889634
    if MAKE_DELTA:
        o = tl.load(O + row_ids[:, None] * HEAD_DIM + cols[None, :])
        delta = tl.sum(do.to(tl.float32) * o.to(tl.float32), axis=1) - tl.load(DLSE + row_ids)
        tl.store(Delta + row_ids, delta)
    else:
        delta = tl.load(Delta + row_ids)
    dq = tl.zeros([BLOCK_M, HEAD_DIM], dtype=tl.float32)
    scale2 = sm_scale * 1.4426950408889634
    if IS_CAUSAL:
        # Keys before first_row are all visible (unmasked); the BLOCK_M keys facing these queries partly.
        dq = _attn_bwd_q_steps(dq, q, do, lse2, delta, K, V, row_ids, 0, first_row // BLOCK_N, scale2, BLOCK_N,
                               HEAD_DIM, False)
        dq = _attn_bwd_q_steps(dq, q, do, lse2, delta, K, V, row_ids, first_row, BLOCK_M // DIAG_N, scale2, DIAG_N,
                               HEAD_DIM, True)
    else:
        dq = _attn_bwd_q_steps(dq, q, do, lse2, delta, K, V, row_ids, 0, N_CTX // BLOCK_N, scale2, BLOCK_N,
                               HEAD_DIM, False)
    tl.store(DQ + row_ids[:, None] * HEAD_DIM + cols[None, :], (dq * sm_scale).to(DQ.dtype.element_ty))


@triton.jit
def attn_bwd_dkdv_hand(Q, K, V, DO, LSE, Delta, DK, DV, sm_scale, N_CTX, HEAD_DIM: tl.constexpr, BLOCK_M: tl.constexpr,
                       BLOCK_N: tl.constexpr, DIAG_M: tl.constexpr, IS_CAUSAL: tl.constexpr):
    # Grid (N_CTX / BLOCK_N, Z * H): one program per key block.  Under a causal mask the first key blocks see
    # the most queries, and they are already the first programs dispatched.
    head = tl.program_id(1).to(tl.int64) * N_CTX
    _attn_bwd_dkdv_block(Q + head * HEAD_DIM, K + head * HEAD_DIM, V + head * HEAD_DIM, DO + head * HEAD_DIM,
                         LSE + head, Delta + head, DK + head * HEAD_DIM, DV + head * HEAD_DIM, sm_scale, N_CTX,
                         tl.program_id(0) * BLOCK_N, HEAD_DIM, BLOCK_M, BLOCK_N, DIAG_M, IS_CAUSAL)


@triton.jit
def attn_bwd_dq_hand(Q, K, V, DO, O, LSE, DLSE, Delta, DQ, sm_scale, N_CTX, HEAD_DIM: tl.constexpr,
                     BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, DIAG_N: tl.constexpr, IS_CAUSAL: tl.constexpr):
    # Grid (N_CTX / BLOCK_M, Z * H): one program per query block; it runs first and writes Delta for its rows.
    # Under a causal mask the last query blocks see the most keys: hand them out first.
    head = tl.program_id(1).to(tl.int64) * N_CTX
    block = tl.num_programs(0) - 1 - tl.program_id(0) if IS_CAUSAL else tl.program_id(0)
    _attn_bwd_dq_block(Q + head * HEAD_DIM, K + head * HEAD_DIM, V + head * HEAD_DIM, DO + head * HEAD_DIM,
                       O + head * HEAD_DIM, LSE + head, DLSE + head, Delta + head, DQ + head * HEAD_DIM, sm_scale,
                       N_CTX, block * BLOCK_M, HEAD_DIM, BLOCK_M, BLOCK_N, DIAG_N, IS_CAUSAL, True)


@triton.jit
def attn_bwd_fused_hand(Q, K, V, DO, LSE, Delta, DQ, DK, DV, sm_scale, N_CTX, HEAD_DIM: tl.constexpr,
                        BLOCK_M1: tl.constexpr, BLOCK_N1: tl.constexpr, DIAG_M1: tl.constexpr, BLOCK_M2: tl.constexpr,
                        BLOCK_N2: tl.constexpr, DIAG_N2: tl.constexpr, IS_CAUSAL: tl.constexpr):
    # Both halves in one launch, grid (N_CTX / BLOCK_N1, Z * H) with BLOCK_M2 == BLOCK_N1: program j does the dK/dV
    # of key block j, then the dQ of query block j.  Under a causal mask the two halves' work sums to the same for
    # every j (key block j sees N - j*B queries, query block j sees (j+1)*B keys): no program waits on a long one.
    head = tl.program_id(1).to(tl.int64) * N_CTX
    block = tl.program_id(0)
    _attn_bwd_dkdv_block(Q + head * HEAD_DIM, K + head * HEAD_DIM, V + head * HEAD_DIM, DO + head * HEAD_DIM,
                         LSE + head, Delta + head, DK + head * HEAD_DIM, DV + head * HEAD_DIM, sm_scale, N_CTX,
                         block * BLOCK_N1, HEAD_DIM, BLOCK_M1, BLOCK_N1, DIAG_M1, IS_CAUSAL)
    # Delta comes from attn_bwd_preprocess_hand here (O and DLSE are not read: placeholders).
    _attn_bwd_dq_block(Q + head * HEAD_DIM, K + head * HEAD_DIM, V + head * HEAD_DIM, DO + head * HEAD_DIM,
                       DO, LSE + head, LSE, Delta + head, DQ + head * HEAD_DIM, sm_scale, N_CTX, block * BLOCK_M2,
                       HEAD_DIM, BLOCK_M2, BLOCK_N2, DIAG_N2, IS_CAUSAL, False)


# Launch values per (head dim, causal), tuned on an H100 at 4x16x2048 fp16 (bf16 checked): dK/dV blocks (BLOCK_M1
# queries a step, BLOCK_N1 keys resident, DIAG_M1 queries a step on the diagonal), dQ blocks (BLOCK_M2 queries
# resident, BLOCK_N2 keys a step, DIAG_N2 keys a step on the diagonal).  Without a mask the two kernels win (0.48
# against 0.52 ms fused at D=64); with one the fused launch does, its programs all getting the same work.
ATTN_BWD_CONFIG = {
    (64, False): dict(BLOCK_M1=64, BLOCK_N1=64, DIAG_M1=64, BLOCK_M2=64, BLOCK_N2=64, DIAG_N2=64, num_warps=4,
                      num_stages=3, fused=False),
    (64, True): dict(BLOCK_M1=64, BLOCK_N1=64, DIAG_M1=64, BLOCK_M2=64, BLOCK_N2=64, DIAG_N2=64, num_warps=4,
                     num_stages=3, fused=True),
    (128, False): dict(BLOCK_M1=64, BLOCK_N1=128, DIAG_M1=64, BLOCK_M2=128, BLOCK_N2=64, DIAG_N2=64, num_warps=8,
                       num_stages=3, fused=False),
    (128, True): dict(BLOCK_M1=64, BLOCK_N1=128, DIAG_M1=32, BLOCK_M2=128, BLOCK_N2=64, DIAG_N2=32, num_warps=8,
                      num_stages=3, fused=True),
}


def attn_bwd_hand(q, k, v, out, do, lse, dlse, sm_scale, causal, dq, dk, dv, delta, cfg=None):
    """FlashAttention-2 backward into dq, dk, dv (same shape and dtype as q, k, v: [Z, H, N, D] contiguous); lse and
    dlse [Z, H, N] float32, lse in natural log; delta a float32 [Z, H, N] scratch."""
    Z, H, N, D = q.shape
    c = dict(ATTN_BWD_CONFIG[(D, bool(causal))] if cfg is None else cfg)
    bm1, bn1, dm1 = c["BLOCK_M1"], c["BLOCK_N1"], c["DIAG_M1"]
    bm2, bn2, dn2 = c["BLOCK_M2"], c["BLOCK_N2"], c["DIAG_N2"]
    assert all(t.is_contiguous() for t in (q, k, v, out, do, lse, dlse, dq, dk, dv, delta))
    assert N % 128 == 0 and N % bn1 == 0 and N % bm2 == 0 and bn1 % bm1 == 0 and bm2 % bn2 == 0
    assert bn1 % dm1 == 0 and bm2 % dn2 == 0
    launch = dict(num_warps=c["num_warps"], num_stages=c["num_stages"])
    if c["fused"]:
        assert bn1 == bm2
        attn_bwd_preprocess_hand[(N // 128, Z * H)](out, do, dlse, delta, N, HEAD_DIM=D, BLOCK_M=128)
        attn_bwd_fused_hand[(N // bn1, Z * H)](q, k, v, do, lse, delta, dq, dk, dv, sm_scale, N, HEAD_DIM=D,
                                               BLOCK_M1=bm1, BLOCK_N1=bn1, DIAG_M1=dm1, BLOCK_M2=bm2, BLOCK_N2=bn2,
                                               DIAG_N2=dn2, IS_CAUSAL=causal, **launch)
    else:
        # dQ first: it also writes Delta, which dK/dV reads.
        attn_bwd_dq_hand[(N // bm2, Z * H)](q, k, v, do, out, lse, dlse, delta, dq, sm_scale, N, HEAD_DIM=D,
                                            BLOCK_M=bm2, BLOCK_N=bn2, DIAG_N=dn2, IS_CAUSAL=causal, **launch)
        attn_bwd_dkdv_hand[(N // bn1, Z * H)](q, k, v, do, lse, delta, dk, dv, sm_scale, N, HEAD_DIM=D, BLOCK_M=bm1,
                                              BLOCK_N=bn1, DIAG_M=dm1, IS_CAUSAL=causal, **launch)


def load(path, tmp):
    with open(path) as f:
        source = f.read()
    file = os.path.join(tmp, os.path.basename(path))
    with open(file, "w") as f:
        f.write(source)
    spec = importlib.util.spec_from_file_location(os.path.basename(path)[:-3] + "_bench", file)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


_MODULES = {}


def torch_module(name, tmp):
    """The module `tgrad --emit torch` wrote for a test kernel (tests/golden/torch/NAME.py), loaded once
    (its ops are registered with PyTorch on import)."""
    if name not in _MODULES:
        _MODULES[name] = load(f"tests/golden/torch/{name}.py", tmp)
    return _MODULES[name]


def module_row(case, op, args, kwargs, work, reference):
    """The backward as autograd runs it through the generated module: its backward op allocates the
    gradients and scratch and launches the kernels with the module's own launch values."""
    fn = lambda: op(*args, **kwargs)  # noqa: E731
    got = fn()
    got = got if isinstance(got, (tuple, list)) else (got,)
    err = max((a.float() - b.float()).norm().item() / b.float().norm().item() for a, b in zip(got, reference))
    return (case, "tgrad through its torch module", do_bench(fn, quantiles=[0.5]), work, err)


def launcher_row(case, launch, inputs, upstream, work, reference):
    """The backward as a user runs it: the forward launched through the generated module's launcher
    (`kernel[grid](...)`, the grid a function of the config, as under @triton.autotune), then
    torch.autograd.grad on its outputs, timed. The first backward for a shape tunes the module's
    backward launch values (TgradKernel), outside the timing."""
    inputs = [t.detach().requires_grad_(True) for t in inputs]
    outputs = launch(*inputs)
    outputs = [o for o, g in zip(outputs, upstream) if g is not None]
    grads = [g for g in upstream if g is not None]
    fn = lambda: torch.autograd.grad(outputs, inputs, grads, retain_graph=True)  # noqa: E731
    got = fn()
    err = max((a.float() - b.float()).norm().item() / b.float().norm().item() for a, b in zip(got, reference))
    return (case, "tgrad through its torch module (launcher, autograd)", do_bench(fn, quantiles=[0.5]), work, err)


def tuned(make):
    """The best median over the launch configurations, and that configuration."""
    sms = torch.cuda.get_device_properties(0).multi_processor_count
    results = [(do_bench(make(g, w), quantiles=[0.5]), f"G={g}, {w} warps") for g in (2 * sms, 4 * sms) for w in (4, 8, 16)]
    return min(results)


def warps(block):
    return 4 if block <= 2048 else (8 if block <= 4096 else 16)


def bench_softmax(gen, M, N, dtype, tmp):
    bwd = load("tests/golden/backward/softmax_kernel.py", tmp)
    x = (torch.randn(M, N, generator=gen, device="cuda")).to(dtype)
    y = torch.softmax(x.float(), dim=1).to(dtype)
    dy = torch.randn(M, N, generator=gen, device="cuda").to(dtype)
    dx = torch.empty_like(x)
    block = triton.next_power_of_2(N)
    w = warps(block)
    make_gen = lambda w: lambda: bwd.softmax_kernel_bwd[(M,)](y, x, N, N, N, BLOCK_SIZE=block, din_ptr=dx, dout_ptr=dy,
                                                               num_warps=w)
    make_hand = lambda w: lambda: softmax_bwd_hand[(M,)](dx, y, dy, N, N, BLOCK=block, num_warps=w)
    gen_fn, hand_fn = make_gen(w), make_hand(w)
    xt = x.detach().float().requires_grad_(True) if dtype == torch.float32 else x.detach().requires_grad_(True)
    yt = torch.softmax(xt, dim=1)
    torch_fn = lambda: torch.autograd.grad(yt, xt, dy, retain_graph=True)
    # Correctness first: the generated backward against the hand-written one.
    gen_fn(); dx_gen = dx.clone(); hand_fn(); dx_hand = dx.clone()
    err = (dx_gen.float() - dx_hand.float()).norm().item() / dx_hand.float().norm().item()
    bytes_moved = 3 * M * N * x.element_size()
    case = f"softmax {M}x{N} {str(dtype)[6:]}"
    best = lambda make: min((do_bench(make(w), quantiles=[0.5]), f"{w} warps") for w in (4, 8, 16))
    (gen_ms, gen_cfg), (hand_ms, hand_cfg) = best(make_gen), best(make_hand)
    module = torch_module("softmax_kernel", tmp)
    through_module = module_row(case, module.softmax_kernel_backward, ([M], y, x, N, N, N, block, dy),
                                {"num_warps": w}, bytes_moved, [dx_hand])
    return [(case, f"tgrad ({gen_cfg})", gen_ms, bytes_moved, err), through_module,
            (case, f"hand-written ({hand_cfg})", hand_ms, bytes_moved, None),
            (case, "torch.autograd", do_bench(torch_fn, quantiles=[0.5]), bytes_moved, None)]


def bench_rms(gen, M, N, dtype, tmp):
    bwd = load("tests/golden/backward/rms_norm_kernel.py", tmp)
    x = torch.randn(M, N, generator=gen, device="cuda").to(dtype)
    wt = (torch.rand(N, generator=gen, device="cuda") + 0.5).to(dtype)
    dy = torch.randn(M, N, generator=gen, device="cuda").to(dtype)
    rstd = torch.rsqrt((x.float() * x.float()).mean(dim=1) + 1e-6)
    y = torch.empty_like(x)
    dx = torch.empty_like(x)
    dw = torch.zeros(N, device="cuda", dtype=torch.float32)
    drstd = torch.zeros(M, device="cuda")
    block = triton.next_power_of_2(N)
    w = warps(block)

    def make_gen(groups, w):
        dw_partial = torch.empty(groups, N, device="cuda")

        def gen_fn():
            # `tgrad --emit json`: dX, dW and the scratch may hold anything (nothing to clear).
            bwd.rms_norm_fwd_kernel_bwd[(groups,)](x, wt, y, rstd, N, N, N, 1e-6, BLOCK_SIZE=block,
                                                   dX=dx, dW=dw, dY=dy, dRstd=drstd, dW_partial=dw_partial, W_numel=N,
                                                   num_programs=M, num_warps=w)
            bwd.rms_norm_fwd_kernel_bwd_reduce[(triton.cdiv(N, 32),)](dw_partial, dw, N, groups, BLOCK=32, ROWS=64)
        return gen_fn

    def make_hand(groups, w):
        partial = torch.empty(groups, N, device="cuda")

        def hand_fn():
            rms_norm_bwd_hand[(groups,)](dx, partial, x, wt, dy, rstd, N, M, N, BLOCK=block, num_warps=w)
            return partial.sum(0)
        return hand_fn

    sms = torch.cuda.get_device_properties(0).multi_processor_count
    gen_fn, hand_fn = make_gen(2 * sms, w), make_hand(2 * sms, w)

    xt = x.detach().float().requires_grad_(True)
    wtt = wt.detach().float().requires_grad_(True)
    yt = xt * torch.rsqrt((xt * xt).mean(dim=1, keepdim=True) + 1e-6) * wtt
    torch_fn = lambda: torch.autograd.grad(yt, [xt, wtt], dy.float(), retain_graph=True)
    gen_fn(); dx_gen = dx.clone(); dw_gen = dw.clone()
    dw_hand = hand_fn(); dx_hand = dx.clone()
    err = max((dx_gen.float() - dx_hand.float()).norm().item() / dx_hand.float().norm().item(),
              (dw_gen - dw_hand).norm().item() / dw_hand.norm().item())
    bytes_moved = 3 * M * N * x.element_size()
    case = f"rms norm {M}x{N} {str(dtype)[6:]}"
    (gen_ms, gen_cfg), (hand_ms, hand_cfg) = tuned(make_gen), tuned(make_hand)
    module = torch_module("rms_norm_kernel", tmp)
    through_module = module_row(case, module.rms_norm_fwd_kernel_backward,
                                ([M], x, wt, y, rstd, N, N, N, 1e-6, block, dy, drstd), {"num_warps": w}, bytes_moved,
                                [dx_hand, dw_hand])
    return [(case, f"tgrad ({gen_cfg})", gen_ms, bytes_moved, err), through_module,
            (case, f"hand-written ({hand_cfg})", hand_ms, bytes_moved, None),
            (case, "torch.autograd", do_bench(torch_fn, quantiles=[0.5]), bytes_moved, None)]


def bench_layer_norm(gen, M, N, dtype, tmp):
    bwd = load("tests/golden/backward/layer_norm_kernel.py", tmp)
    x = torch.randn(M, N, generator=gen, device="cuda").to(dtype)
    wt = (torch.rand(N, generator=gen, device="cuda") + 0.5).to(dtype)
    bt = (torch.rand(N, generator=gen, device="cuda") - 0.5).to(dtype)
    dy = torch.randn(M, N, generator=gen, device="cuda").to(dtype)
    mean = x.float().mean(dim=1)
    rstd = torch.rsqrt(x.float().var(dim=1, unbiased=False) + 1e-5)
    y, dx = torch.empty_like(x), torch.empty_like(x)
    dw = torch.zeros(N, device="cuda", dtype=dtype)
    db = torch.zeros(N, device="cuda", dtype=dtype)
    dmean, drstd = torch.zeros(M, device="cuda"), torch.zeros(M, device="cuda")  # the statistics carry no upstream gradient
    block = min(triton.next_power_of_2(N), 65536 // x.element_size())  # the forward's own choice
    w = warps(block)
    # `--no-grad Mean,Rstd`: the statistics take no upstream gradient (no dMean, dRstd), as with the hand-written one.
    bwd_no_grad = load("tests/golden/backward/layer_norm_no_grad_stats_kernel.py", tmp)

    def make_gen(groups, w, no_grad=False):
        dw_partial, db_partial = torch.empty(groups, N, device="cuda"), torch.empty(groups, N, device="cuda")
        module = bwd_no_grad if no_grad else bwd
        upstream = {} if no_grad else {"dMean": dmean, "dRstd": drstd}

        def gen_fn():
            # `tgrad --emit json`: dX, dW, dB and the scratch may hold anything (nothing to clear); Mean and Rstd
            # hold the statistics of the forward (the backward reads them).
            module.layer_norm_fwd_kernel_bwd[(groups,)](x, y, wt, bt, mean, rstd, N, N, N, 1e-5, BLOCK_SIZE=block, dX=dx,
                                                        dW=dw, dB=db, dY=dy, dW_partial=dw_partial,
                                                        dB_partial=db_partial, W_numel=N, B_numel=N, num_programs=M,
                                                        num_warps=w, **upstream)
            for part, grad in ((dw_partial, dw), (db_partial, db)):
                module.layer_norm_fwd_kernel_bwd_reduce[(triton.cdiv(N, 32),)](part, grad, N, groups, BLOCK=32, ROWS=64)
        return gen_fn

    def make_hand(groups, w):
        hw, hb = torch.empty(groups, N, device="cuda"), torch.empty(groups, N, device="cuda")

        def hand_fn():
            layer_norm_bwd_hand[(groups,)](dx, hw, hb, x, wt, dy, mean, rstd, N, M, N, BLOCK=triton.next_power_of_2(N),
                                           num_warps=w)
            return hw.sum(0), hb.sum(0)
        return hand_fn

    sms = torch.cuda.get_device_properties(0).multi_processor_count
    gen_fn, hand_fn = make_gen(2 * sms, w), make_hand(2 * sms, w)

    xt = x.detach().float().requires_grad_(True)
    wtt, btt = wt.detach().float().requires_grad_(True), bt.detach().float().requires_grad_(True)
    yt = torch.nn.functional.layer_norm(xt, (N,), wtt, btt, 1e-5)
    torch_fn = lambda: torch.autograd.grad(yt, [xt, wtt, btt], dy.float(), retain_graph=True)
    gen_fn(); dx_gen, dw_gen, db_gen = dx.clone(), dw.clone(), db.clone()
    dw_hand, db_hand = hand_fn(); dx_hand = dx.clone()
    err = max((a.float() - b.float()).norm().item() / b.float().norm().item()
              for a, b in ((dx_gen, dx_hand), (dw_gen, dw_hand), (db_gen, db_hand)))
    bytes_moved = 3 * M * N * x.element_size()
    make_gen(2 * sms, w, no_grad=True)(); dx_ng, dw_ng, db_ng = dx.clone(), dw.clone(), db.clone()
    err_ng = max((a.float() - b.float()).norm().item() / b.float().norm().item()
                 for a, b in ((dx_ng, dx_hand), (dw_ng, dw_hand), (db_ng, db_hand)))
    case = f"layer norm {M}x{N} {str(dtype)[6:]}"
    (gen_ms, gen_cfg), (hand_ms, hand_cfg) = tuned(make_gen), tuned(make_hand)
    ng_ms, ng_cfg = tuned(lambda g, w: make_gen(g, w, no_grad=True))
    module = torch_module("layer_norm_no_grad_stats_kernel", tmp)
    through_module = module_row(case, module.layer_norm_fwd_kernel_backward,
                                ([M], x, y, wt, bt, mean, rstd, N, N, N, 1e-5, block, dy), {"num_warps": w},
                                bytes_moved, [dx_hand, dw_hand, db_hand])
    return [(case, f"tgrad ({gen_cfg})", gen_ms, bytes_moved, err),
            (case, f"tgrad --no-grad Mean,Rstd ({ng_cfg})", ng_ms, bytes_moved, err_ng), through_module,
            (case, f"hand-written ({hand_cfg})", hand_ms, bytes_moved, None),
            (case, "torch.autograd", do_bench(torch_fn, quantiles=[0.5]), bytes_moved, None)]


def bench_matmul(gen, M, N, K, tmp):
    """C = relu(A B): tgrad's dA and dB from owner-computes kernels that read relu'(acc) = (C > 0) back from the
    forward's output (src/ad/EpilogueReadBack.h), against the hand-written two matmuls on dC masked by C > 0
    beforehand (the masking not timed)."""
    bwd = load("tests/golden/backward/matmul_kernel.py", tmp)
    fwd = load("tests/kernels/matmul.py", tmp)
    a = torch.randn(M, K, generator=gen, device="cuda").half()
    b = torch.randn(K, N, generator=gen, device="cuda").half()
    dc = torch.randn(M, N, generator=gen, device="cuda").half()
    # The backward reads C as the forward left it (the launch protocol: "as the forward left it").
    c = fwd.matmul(a, b, activation="relu")
    da, db = torch.zeros_like(a), torch.zeros_like(b)
    bm, bn, bk = 128, 128, 32
    # The hand-written one masks the upstream gradient first, as a hand-written backward does.
    dc_eff = (dc.float() * (c > 0)).half()

    flags_a = matmul_flags("matmul_kernel", fwd, a, b, c, RELU_OWNER_CONFIG["da"], ACTIVATION="relu")
    flags_b = matmul_flags("matmul_kernel", fwd, a, b, c, RELU_OWNER_CONFIG["db"], ACTIVATION="relu")
    zeroed = zeroed_gradients("matmul_kernel", {"a_ptr": da, "b_ptr": db}, flags_a, flags_b)

    # The masked upstream gradient, which the prologue computes once per element, in the dtype each owner casts it
    # to (B's for dA, A's for dB), laid out like C (the launch protocol's scratch buffers with dtype_of).
    saved_b, saved_a = torch.empty_like(c, dtype=b.dtype), torch.empty_like(c, dtype=a.dtype)
    saved = {"baccumulator_2_saved": saved_b, "baccumulator_2_saved_2": saved_a}
    pbm, pbn = RELU_PROLOGUE_BLOCKS

    def gen_fn():
        for g in zeroed:
            g.zero_()
        bwd.matmul_kernel_bwd_prologue[(triton.cdiv(M, pbm), triton.cdiv(N, pbn))](
            a, b, c, M, N, K, K, 1, N, 1, N, 1, BLOCK_SIZE_M=pbm, BLOCK_SIZE_N=pbn, BLOCK_SIZE_K=32,
            ACTIVATION="relu", da_ptr=da, db_ptr=db, dc_ptr=dc, **saved, **flags_a)
        obm, obn, obk, warps, stages = RELU_OWNER_CONFIG["da"]
        bwd.matmul_kernel_bwd_da_ptr[(triton.cdiv(M, obm), triton.cdiv(K, obk))](
            a, b, c, M, N, K, K, 1, N, 1, N, 1, BLOCK_SIZE_M=obm, BLOCK_SIZE_N=obn, BLOCK_SIZE_K=obk,
            ACTIVATION="relu", da_ptr=da, db_ptr=db, dc_ptr=dc, num_programs_1=triton.cdiv(N, obn), num_warps=warps,
            num_stages=stages, baccumulator_2_saved=saved_b, **flags_a)
        obm, obn, obk, warps, stages = RELU_OWNER_CONFIG["db"]
        bwd.matmul_kernel_bwd_db_ptr[(triton.cdiv(K, obk), triton.cdiv(N, obn))](
            a, b, c, M, N, K, K, 1, N, 1, N, 1, BLOCK_SIZE_M=obm, BLOCK_SIZE_N=obn, BLOCK_SIZE_K=obk,
            ACTIVATION="relu", da_ptr=da, db_ptr=db, dc_ptr=dc, num_programs_0=triton.cdiv(M, obm), num_warps=warps,
            num_stages=stages, baccumulator_2_saved_2=saved_a, **flags_b)

    hda, hdb = torch.empty_like(a), torch.empty_like(b)

    def hand_fn():
        # dA = dC B^T  (M x K, reduce over N);  dB = A^T dC  (K x N, reduce over M)
        matmul_hand[(triton.cdiv(M, bm), triton.cdiv(K, bn))](dc_eff, b, hda, M, K, N, N, 1, 1, N, K, 1,
                                                              BLOCK_M=bm, BLOCK_N=bn, BLOCK_K=bk, num_warps=8)
        matmul_hand[(triton.cdiv(K, bm), triton.cdiv(N, bn))](a, dc_eff, hdb, K, N, M, 1, K, N, 1, N, 1,
                                                              BLOCK_M=bm, BLOCK_N=bn, BLOCK_K=bk, num_warps=8)

    dc_masked = torch.empty_like(dc)

    def masked_hand_fn():
        # What the hand-written row leaves out: the mask pass before the matmuls (0.0145 ms at 2048^3 on the H100).
        relu_mask_hand[(triton.cdiv(M * N, 4096),)](dc, c, dc_masked, M * N, BLOCK=4096)
        matmul_hand[(triton.cdiv(M, bm), triton.cdiv(K, bn))](dc_masked, b, hda, M, K, N, N, 1, 1, N, K, 1,
                                                              BLOCK_M=bm, BLOCK_N=bn, BLOCK_K=bk, num_warps=8)
        matmul_hand[(triton.cdiv(K, bm), triton.cdiv(N, bn))](a, dc_masked, hdb, K, N, M, 1, K, N, 1, N, 1,
                                                              BLOCK_M=bm, BLOCK_N=bn, BLOCK_K=bk, num_warps=8)

    at, bt = a.detach().requires_grad_(True), b.detach().requires_grad_(True)
    ct = torch.relu(at @ bt)
    torch_fn = lambda: torch.autograd.grad(ct, [at, bt], dc, retain_graph=True)
    gen_fn(); hand_fn()
    first = (da.clone(), db.clone())
    gen_fn()
    deterministic = torch.equal(first[0], da) and torch.equal(first[1], db)
    err = max((da.float() - hda.float()).norm().item() / hda.float().norm().item(),
              (db.float() - hdb.float()).norm().item() / hdb.float().norm().item())
    flops = 4 * M * N * K
    case = f"matmul {M}x{N}x{K} fp16 (relu)"
    tgrad = "tgrad owner-computes, relu' from C" + ("" if deterministic else " (NOT bitwise deterministic)")
    module = torch_module("matmul_kernel", tmp)
    grid = lambda META: (triton.cdiv(M, META["BLOCK_SIZE_M"]), triton.cdiv(N, META["BLOCK_SIZE_N"]))  # noqa: E731
    through_module = launcher_row(
        case, lambda a_, b_: module.matmul_kernel[grid](a_, b_, torch.empty_like(c), M, N, K, K, 1, N, 1, N, 1,
                                                        ACTIVATION="relu"),
        [a, b], [dc], -flops, [hda, hdb])
    return [(case, label, do_bench(fn, quantiles=[0.5]), -flops, err if label.startswith("tgrad") else None)
            for label, fn in ((tgrad, gen_fn), ("hand-written", hand_fn), ("torch.autograd", torch_fn),
                              ("(for reference) the hand-written matmuls with their relu mask pass timed", masked_hand_fn))
            ] + [through_module]


# Launch values of the owner-computes kernels (tests/golden/backward/matmul_kernel_no_activation.py), by which the
# gradient does not change: (BLOCK_SIZE_M, BLOCK_SIZE_N, BLOCK_SIZE_K, num_warps, num_stages) for dA (a tile of
# BLOCK_SIZE_M x BLOCK_SIZE_K, stepping BLOCK_SIZE_N along N) and for dB (BLOCK_SIZE_K x BLOCK_SIZE_N, stepping
# BLOCK_SIZE_M along M). Tuned on the H100 (bench/matmul_owner_tune.py); the hand-written one's, as before.
OWNER_CONFIG = {"da": (128, 64, 128, 4, 3), "db": (64, 128, 128, 4, 3)}
# The same for the relu epilogue's owners (tests/golden/backward/matmul_kernel.py, which also load C and mask dC by
# C > 0): `python3 bench/matmul_owner_tune.py --size 2048 --relu` on the H100, 2026-11-27.
RELU_OWNER_CONFIG = {"da": (128, 64, 256, 8, 4), "db": (64, 128, 256, 8, 3)}
# The relu backward's prologue (an elementwise pass over C: any blocks; its saved tiles are laid out like C).
RELU_PROLOGUE_BLOCKS = (64, 128)


def bench_matmul_owner(gen, M, N, K, dtype, tmp, tutorial_order=False):
    """C = A B without an epilogue: tgrad's dA and dB from owner-computes kernels (one addition per element, no
    contention) against the hand-written two matmuls. `tutorial_order`: the forward is the tutorial's 1-D grid in
    grouped order (tutorial_order_matmul_kernel), whose owners run on the 2-D grid that order enumerates."""
    golden = "tutorial_order_matmul_kernel" if tutorial_order else "matmul_kernel_no_activation"
    bwd = load(f"tests/golden/backward/{golden}.py", tmp)
    a = torch.randn(M, K, generator=gen, device="cuda").to(dtype)
    b = torch.randn(K, N, generator=gen, device="cuda").to(dtype)
    c = torch.empty(M, N, device="cuda", dtype=dtype)
    dc = torch.randn(M, N, generator=gen, device="cuda").to(dtype)
    da, db = torch.zeros_like(a), torch.zeros_like(b)
    fwd_bm, fwd_bn = 128, 128  # the forward's grid the backward sums over

    fwd = load("tests/kernels/matmul.py", tmp)
    given = dict(GROUP_SIZE_M=8) if tutorial_order else dict(ACTIVATION="")
    flags_a = matmul_flags(golden, fwd, a, b, c, OWNER_CONFIG["da"], tutorial_order, **given)
    flags_b = matmul_flags(golden, fwd, a, b, c, OWNER_CONFIG["db"], tutorial_order, **given)
    zeroed = zeroed_gradients(golden, {"a_ptr": da, "b_ptr": db}, flags_a, flags_b)

    def gen_fn():
        for g in zeroed:
            g.zero_()
        if tutorial_order:
            bm, bn, bk, warps, stages = OWNER_CONFIG["da"]
            bwd.tutorial_order_matmul_kernel_bwd_da_ptr[(triton.cdiv(M, bm), triton.cdiv(K, bk))](
                a, b, c, M, N, K, K, 1, N, 1, N, 1, BLOCK_SIZE_M=bm, BLOCK_SIZE_N=bn, BLOCK_SIZE_K=bk, GROUP_SIZE_M=8,
                da_ptr=da, db_ptr=db, dc_ptr=dc, num_warps=warps, num_stages=stages, **flags_a)
            bm, bn, bk, warps, stages = OWNER_CONFIG["db"]
            bwd.tutorial_order_matmul_kernel_bwd_db_ptr[(triton.cdiv(K, bk), triton.cdiv(N, bn))](
                a, b, c, M, N, K, K, 1, N, 1, N, 1, BLOCK_SIZE_M=bm, BLOCK_SIZE_N=bn, BLOCK_SIZE_K=bk, GROUP_SIZE_M=8,
                da_ptr=da, db_ptr=db, dc_ptr=dc, num_warps=warps, num_stages=stages, **flags_b)
            return
        bm, bn, bk, warps, stages = OWNER_CONFIG["da"]
        bwd.matmul_kernel_bwd_da_ptr[(triton.cdiv(M, bm), triton.cdiv(K, bk))](
            a, b, c, M, N, K, K, 1, N, 1, N, 1, BLOCK_SIZE_M=bm, BLOCK_SIZE_N=bn, BLOCK_SIZE_K=bk, ACTIVATION="",
            da_ptr=da, db_ptr=db, dc_ptr=dc, num_programs_1=triton.cdiv(N, bn), num_warps=warps, num_stages=stages,
            **flags_a)
        bm, bn, bk, warps, stages = OWNER_CONFIG["db"]
        bwd.matmul_kernel_bwd_db_ptr[(triton.cdiv(K, bk), triton.cdiv(N, bn))](
            a, b, c, M, N, K, K, 1, N, 1, N, 1, BLOCK_SIZE_M=bm, BLOCK_SIZE_N=bn, BLOCK_SIZE_K=bk, ACTIVATION="",
            da_ptr=da, db_ptr=db, dc_ptr=dc, num_programs_0=triton.cdiv(M, bm), num_warps=warps, num_stages=stages,
            **flags_b)

    hda, hdb = torch.empty_like(a), torch.empty_like(b)
    bm, bn, bk = 128, 128, 32

    def hand_fn():
        matmul_hand[(triton.cdiv(M, bm), triton.cdiv(K, bn))](dc, b, hda, M, K, N, N, 1, 1, N, K, 1,
                                                              BLOCK_M=bm, BLOCK_N=bn, BLOCK_K=bk, num_warps=8)
        matmul_hand[(triton.cdiv(K, bm), triton.cdiv(N, bn))](a, dc, hdb, K, N, M, 1, K, N, 1, N, 1,
                                                              BLOCK_M=bm, BLOCK_N=bn, BLOCK_K=bk, num_warps=8)

    at, bt = a.detach().requires_grad_(True), b.detach().requires_grad_(True)
    ct = at @ bt
    torch_fn = lambda: torch.autograd.grad(ct, [at, bt], dc, retain_graph=True)
    gen_fn(); hand_fn()
    first = (da.clone(), db.clone())
    gen_fn()
    deterministic = torch.equal(first[0], da) and torch.equal(first[1], db)
    err = max((da.float() - hda.float()).norm().item() / hda.float().norm().item(),
              (db.float() - hdb.float()).norm().item() / hdb.float().norm().item())
    flops = 4 * M * N * K
    name = {torch.float16: "fp16", torch.bfloat16: "bf16"}[dtype]
    case = f"matmul {M}x{N}x{K} {name} (no epilogue{', tutorial 1-D grouped grid' if tutorial_order else ''})"
    tgrad = "tgrad owner-computes" + ("" if deterministic else " (NOT bitwise deterministic)")
    return [(case, label, do_bench(fn, quantiles=[0.5]), -flops, err if label.startswith("tgrad") else None)
            for label, fn in ((tgrad, gen_fn), ("hand-written", hand_fn), ("torch.autograd", torch_fn))]


# Launch values of tgrad's attention backward kernels, by (HEAD_DIM, causal): the prologue and the dK/dV owners
# (BLOCK_M, BLOCK_N, warps, stages: they must agree on BLOCK_M, the rows of the saved statistics) and the dQ kernel.
# From `python3 bench/attention_tune.py` (2026-11-26); the backward's blocks need not be the forward's. Shapes not
# tuned keep the forward's launch (64, 64, 4 warps, 3 stages).
TGRAD_ATTN_CONFIG = {
    (64, False): {"dkdv": (32, 128, 4, 4), "dq": (128, 64, 8, 3)},
    (64, True): {"dkdv": (32, 64, 4, 3), "dq": (64, 64, 4, 3)},
    # bench/attention_tune.py --shape 4,16,2048,128 on an H100 (2026-11-27): the best of its grid.
    (128, False): {"dkdv": (64, 128, 8, 3), "dq": (128, 64, 8, 4)},
    (128, True): {"dkdv": (64, 64, 4, 2), "dq": (128, 64, 8, 3)},
}


def layout_flags(protocol, forward, args, grid, **constexprs):
    """The backward's layout flags (1 where the strides keep a gradient's cells apart: its plain stores), from the
    launch protocol's expressions for this launch."""
    sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "tools"))
    import launch_protocol  # noqa: E402
    env = launch_protocol.LaunchEnv(args=dict(zip(forward.arg_names, args), **constexprs), grid=grid)
    return {p["name"]: launch_protocol.evaluate(p["value"], env) for p in protocol["parameters"]
            if p.get("role") == "size" and p["name"].endswith("_disjoint")}


def matmul_flags(golden, fwd, a, b, c, config, tutorial_order=False, **constexprs):
    """The layout flags of a matmul backward (tests/golden/backward/GOLDEN.py) for the forward's launch whose blocks
    are the owner kernel's (`config`: BLOCK_SIZE_M, _N, _K, warps, stages); `tutorial_order`: the forward is
    tutorial_order_matmul_kernel, on its 1-D grid."""
    M, K = a.shape
    N = b.shape[1]
    bm, bn, bk = config[:3]
    protocol = json.load(open(f"tests/golden/backward/protocol_{golden}.json"))
    kernel = fwd.tutorial_order_matmul_kernel if tutorial_order else fwd.matmul_kernel
    grid = (triton.cdiv(M, bm) * triton.cdiv(N, bn),) if tutorial_order else (triton.cdiv(M, bm), triton.cdiv(N, bn))
    return layout_flags(protocol, kernel, (a, b, c, M, N, K, *a.stride(), *b.stride(), *c.stride()), grid,
                        BLOCK_SIZE_M=bm, BLOCK_SIZE_N=bn, BLOCK_SIZE_K=bk, **constexprs)


def owner_grid(protocol, kernel, blocks, others):
    """An owner-computes kernel's grid: (its blocks, the other axis), or the two swapped where the launch protocol
    launches it longest first (src/ad/reverse/LongestFirst.h: its axis 1 is the protocol's axis 0 of the forward)."""
    name = kernel.fn.__name__ if hasattr(kernel, "fn") else kernel.__name__
    entry = next(k for k in protocol["kernels"] if k["name"] == name)
    return (others, blocks) if entry["grid"][0] == {"grid": 1} else (blocks, others)


def zeroed_gradients(golden, gradients, *flag_sets):
    """The gradient buffers the launch protocol says must start at zero, given the layout flags (zeros_unless)."""
    protocol = json.load(open(f"tests/golden/backward/protocol_{golden}.json"))
    flags = {k: v for f in flag_sets for k, v in f.items()}
    return [gradients[p["of"]] for p in protocol["parameters"]
            if p.get("role") == "input gradient" and p.get("contents") == "zeros"
            and flags.get(p.get("zeros_unless")) != 1 and p.get("of") in gradients]


def bench_attention(gen, Z, H, N, D, causal, tmp, through_module=True):
    fwd = load("tests/kernels/attention.py", tmp)
    bwd = load(f"tests/golden/backward/attention{'_causal' if causal else ''}_kernel.py", tmp)
    q, k, v = (torch.randn(Z, H, N, D, generator=gen, device="cuda").half() for _ in range(3))
    sm_scale = D ** -0.5
    out, lse = fwd.attention(q, k, v, causal=causal, sm_scale=sm_scale)
    do = torch.randn(Z, H, N, D, generator=gen, device="cuda").half()
    dlse = torch.zeros(Z, H, N, device="cuda")  # the logsumexp output carries no upstream gradient here
    bm = bn = 64
    grid = (triton.cdiv(N, bm), Z * H)
    strides = [s for t in (q, k, v, out) for s in t.stride()]
    dq, dk, dv = torch.zeros_like(q), torch.zeros_like(k), torch.zeros_like(v)
    # `tgrad --emit json`: the backward kernel on the forward's grid (dQ), and where tgrad derived them the
    # owner-computes kernels of dK and dV, one program per key block and (batch, head), each looping over the
    # forward's query blocks (num_programs_0). The logsumexp M and the output are read back: no tape. dQ, dK, dV
    # start at zero (one addition per element).
    owners = [getattr(bwd, n) for n in dir(bwd) if n.startswith("attn_fwd_kernel_bwd_d")]
    # Where the owners read per-program row statistics (rowsum(dO * O)), a prologue kernel computes them on the
    # forward's grid into float32 scratch rows of BLOCK_M; where the protocol lays the scratch out like the
    # logsumexp M ("like"), the dQ kernel saves them at M's rows itself and there is no prologue.
    prologue = getattr(bwd, "attn_fwd_kernel_bwd_prologue", None)
    saved = {p: torch.empty(grid[0] * grid[1] * bm, device="cuda") for p in (prologue.arg_names if prologue else [])
             if p.endswith("_saved")}
    like_m = {p["name"]: torch.empty_like(lse)
              for p in json.load(open(f"tests/golden/backward/protocol_attention{'_causal' if causal else ''}"
                                      "_kernel.json"))["parameters"] if p.get("role") == "scratch" and p.get("like") == "M"}

    tuned = TGRAD_ATTN_CONFIG.get((D, bool(causal)), {"dkdv": (bm, bn, 4, 3), "dq": (bm, bn, 4, 3)})
    obm, obn, owarps, ostages = tuned["dkdv"]
    qbm, qbn, qwarps, qstages = tuned["dq"]
    ogrid = (triton.cdiv(N, obm), Z * H)  # the prologue's: the forward's programs at the owners' BLOCK_M
    osaved = {p: torch.empty(ogrid[0] * ogrid[1] * obm, device="cuda") for p in saved}

    # The gradient buffers the launch protocol says must start at zero (atomic additions); the others the
    # backward writes wherever the forward loaded, which this grid covers.
    protocol = json.load(open(f"tests/golden/backward/protocol_attention{'_causal' if causal else ''}_kernel.json"))
    flags = layout_flags(protocol, fwd.attn_fwd_kernel, (q, k, v, sm_scale, lse, out, *strides, H, N), grid,
                         HEAD_DIM=D, BLOCK_M=bm, BLOCK_N=bn, IS_CAUSAL=causal)
    zeroed = zeroed_gradients(f"attention{'_causal' if causal else ''}_kernel", {"Q": dq, "K": dk, "V": dv}, flags)

    def gen_fn():
        for g in zeroed:
            g.zero_()
        args = (q, k, v, sm_scale, lse, out, *strides, H, N)
        common = dict(HEAD_DIM=D, IS_CAUSAL=causal, dQ=dq, dK=dk, dV=dv, dM=dlse, dOut=do, **flags, **like_m)
        okw = dict(common, BLOCK_M=obm, BLOCK_N=obn, num_warps=owarps, num_stages=ostages)
        if prologue:
            prologue[ogrid](*args, **okw, **osaved)
        bwd.attn_fwd_kernel_bwd[(triton.cdiv(N, qbm), Z * H)](*args, **common, BLOCK_M=qbm, BLOCK_N=qbn,
                                                              num_warps=qwarps, num_stages=qstages)
        for kernel in owners:
            programs = [p for p in kernel.arg_names if p.startswith("num_programs_0")][0]
            kernel[owner_grid(protocol, kernel, triton.cdiv(N, obn), Z * H)](*args, **okw, **{programs: ogrid[0]},
                                                 **{p: t for p, t in osaved.items() if p in kernel.arg_names})

    hq, hk, hv = torch.empty_like(q), torch.empty_like(k), torch.empty_like(v)
    delta = torch.empty(Z, H, N, device="cuda")

    def hand_fn():
        attn_bwd_hand(q, k, v, out, do, lse, dlse, sm_scale, causal, hq, hk, hv, delta)

    qt, kt, vt = (t.detach().requires_grad_(True) for t in (q, k, v))
    ot = torch.nn.functional.scaled_dot_product_attention(qt, kt, vt, is_causal=causal, scale=sm_scale)
    torch_fn = lambda: torch.autograd.grad(ot, [qt, kt, vt], do, retain_graph=True)
    gen_fn(); hand_fn()
    err = max((a.float() - b.float()).norm().item() / b.float().norm().item() for a, b in ((dq, hq), (dk, hk), (dv, hv)))
    flops = 5 * 2 * Z * H * N * N * D // (2 if causal else 1)  # five N x N x D matmuls, half of them masked if causal
    case = f"attention {Z}x{H}x{N}x{D} fp16{' causal' if causal else ''}"
    module = torch_module("attention_kernel", tmp)  # one generic module serves IS_CAUSAL True and False
    through_module = [] if not through_module else [launcher_row(
        case, lambda q_, k_, v_: module.attn_fwd_kernel[grid](q_, k_, v_, sm_scale, torch.empty_like(lse),
                                                              torch.empty_like(out), *strides, H, N, HEAD_DIM=D,
                                                              BLOCK_M=bm, BLOCK_N=bn, IS_CAUSAL=causal, num_warps=4),
        [q, k, v], [None, do], -flops, [hq, hk, hv])]
    hand_name = f"hand-written (FA2: {'dK/dV and dQ in one launch' if causal else 'a dQ, then a dK/dV kernel'})"
    return [(case, name, do_bench(fn, quantiles=[0.5]), -flops, err if name == "tgrad" else None)
            for name, fn in (("tgrad", gen_fn), (hand_name, hand_fn),
                             ("torch.autograd (SDPA)", torch_fn))] + through_module


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--out")
    parser.add_argument("--only", help="comma-separated subset of softmax,rms,layer_norm,matmul,attention")
    parser.add_argument("--attention-shapes", default="4,16,2048,64",
                        help="Z,H,N,D of each attention case, separated by ';' (fp16; N a multiple of 128, as the "
                             "hand-written backward asserts)")
    parser.add_argument("--no-module", action="store_true",
                        help="attention: leave out the rows through the torch module (each new shape tunes it first)")
    args = parser.parse_args()
    only = set(args.only.split(",")) if args.only else {"softmax", "rms", "layer_norm", "matmul", "attention"}
    gen = torch.Generator(device="cuda").manual_seed(0)
    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        for dtype in (torch.float32, torch.float16):
            if "softmax" in only:
                rows += bench_softmax(gen, 4096, 4096, dtype, tmp)
            if "rms" in only:
                rows += bench_rms(gen, 4096, 4096, dtype, tmp)
            if "layer_norm" in only:
                rows += bench_layer_norm(gen, 4096, 4096, dtype, tmp)
        if "matmul" in only:
            rows += bench_matmul(gen, 2048, 2048, 2048, tmp)
            for size in (2048, 4096):
                for dtype in (torch.float16, torch.bfloat16):
                    rows += bench_matmul_owner(gen, size, size, size, dtype, tmp)
                    rows += bench_matmul_owner(gen, size, size, size, dtype, tmp, tutorial_order=True)
        if "attention" in only:
            for shape in args.attention_shapes.split(";"):
                Z, H, N, D = (int(x) for x in shape.split(","))
                for causal in (False, True):
                    rows += bench_attention(gen, Z, H, N, D, causal, tmp, through_module=not args.no_module)
    table = "| case | backward | median ms | GB/s or TFLOP/s | tgrad / hand-written speed | tgrad vs hand-written rel. diff |\n| --- | --- | --- | --- | --- | --- |\n"
    hand = {case: ms for case, name, ms, _, _ in rows if name.startswith("hand-written")}
    for case, name, ms, work, err in rows:
        ratio = f"{hand[case] / ms:.2f}x" if name.startswith("tgrad") else ""
        rate = f"{-work / ms / 1e9:.0f} TFLOP/s" if work < 0 else f"{work / ms / 1e6:.0f} GB/s"
        table += f"| {case} | {name} | {ms:.4f} | {rate} | {ratio} | {'' if err is None else f'{err:.1e}'} |\n"
    device = torch.cuda.get_device_name()
    print(table + f"\n{device}, Triton {triton.__version__}, PyTorch {torch.__version__}")
    if args.out:
        with open(args.out, "w") as f:
            f.write(f"# Backward benchmark\n\n{datetime.date.today().isoformat()}: `python3 bench/bwd_bench.py` on {device} "
                    f"(Triton {triton.__version__}, PyTorch {torch.__version__}).\n\n{table}")


if __name__ == "__main__":
    main()
