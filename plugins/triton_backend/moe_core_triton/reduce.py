"""The top-k reduction: each token's output is the sum of its valid pairs' GEMM2 rows.

A pair whose expert id is invalid or remote (see :func:`moe_core_triton.blocks.local_experts`) has
no GEMM2 row — its row of the buffer was never written — so it is masked here instead of summed.
A pass after GEMM2 sums (:func:`topk_sum`), or, in a forward of few pairs, GEMM2 itself: the last program
of each column tile (:func:`sum_pairs_if_last`).

Launches that add into float32 sums with atomics (split K, the "atomic" reduction) need them zeroed first
(:func:`zero_`) and, for the layer's output, cast to its dtype after (:func:`cast_into`): two small launches rather
than torch operations, so an eager forward that makes them can still be replayed (:mod:`moe_core_triton.replay`).
"""

from __future__ import annotations

import functools

import torch
import triton
import triton.language as tl

from moe_core_triton.blocks import cdiv, local_experts, next_power_of_2
from moe_core_triton.launch import Launcher

BLOCK_H = 1024  # 8 bf16 per thread and row with 4 warps: 16-byte loads


@triton.jit
def token_sums(rows_ptr, ids_ptr, map_ptr, tokens, cols, col_ok, num_experts, num_local, stride_r,
               TOP_K: tl.constexpr, K_P2: tl.constexpr, HAS_MAP: tl.constexpr):
    """[len(tokens), len(cols)] float32: the rows of each token's valid pairs summed at ``cols`` (``tokens``: int64
    token numbers; -1 reads nothing and sums to zero)."""
    slots = tl.arange(0, K_P2)
    pairs = tokens[:, None] * TOP_K + slots[None, :]
    expert, _, _ = local_experts(ids_ptr, map_ptr, pairs, (slots < TOP_K)[None, :] & (tokens >= 0)[:, None], num_experts, num_local, HAS_MAP)
    ok = (expert >= 0)[:, :, None] & col_ok[None, None, :]
    rows = tl.load(rows_ptr + pairs[:, :, None] * stride_r + cols[None, None, :], mask=ok, other=0.0, cache_modifier=".cg")
    return tl.sum(rows.to(tl.float32), axis=1)


@triton.jit
def _topk_sum_kernel(
    rows_ptr, ids_ptr, map_ptr, out_ptr, H, num_experts, num_local, stride_r, stride_o,
    TOP_K: tl.constexpr, K_P2: tl.constexpr, HAS_MAP: tl.constexpr, BLOCK_H: tl.constexpr,
):
    token = tl.program_id(0).to(tl.int64) + tl.zeros([1], tl.int64)
    offs = tl.program_id(1) * BLOCK_H + tl.arange(0, BLOCK_H)
    h_ok = offs < H
    sums = token_sums(rows_ptr, ids_ptr, map_ptr, token, offs, h_ok, num_experts, num_local, stride_r, TOP_K, K_P2, HAS_MAP)
    tl.store(out_ptr + token[:, None] * stride_o + offs[None, :], sums.to(out_ptr.dtype.element_ty), mask=h_ok[None, :])


@triton.jit
def sum_pairs_if_last(rows_ptr, ids_ptr, map_ptr, out_ptr, count_ptr, pid_n, arrivals, tokens, num_experts, num_local, N,
                      stride_r, stride_o, TOP_K: tl.constexpr, K_P2: tl.constexpr, HAS_MAP: tl.constexpr,
                      BLOCK_N: tl.constexpr, SUM_T: tl.constexpr):
    """The top-k sum inside GEMM2 (a :class:`moe_core_triton.blocks.PairTable` forward): every program of column
    tile ``pid_n`` arrives at that tile's counter once its rows are stored, and the last of the ``arrivals`` sums
    the tile's columns of every token's valid pair rows into ``out`` [tokens, N], SUM_T tokens at a time, then
    leaves the counter at zero for the next launch on the stream. The sums are :func:`_topk_sum_kernel`'s."""
    tl.debug_barrier()  # every thread's row stores come before the release below
    if tl.atomic_add(count_ptr + pid_n, 1, sem="acq_rel") == arrivals - 1:
        cols = pid_n * BLOCK_N + tl.arange(0, BLOCK_N)
        col_ok = cols < N
        for first in range(0, tokens, SUM_T):
            t = first + tl.arange(0, SUM_T)
            t = tl.where(t < tokens, t, -1).to(tl.int64)
            sums = token_sums(rows_ptr, ids_ptr, map_ptr, t, cols, col_ok, num_experts, num_local, stride_r, TOP_K, K_P2, HAS_MAP)
            tl.store(out_ptr + t[:, None] * stride_o + cols[None, :], sums.to(out_ptr.dtype.element_ty), mask=(t >= 0)[:, None] & col_ok[None, :])
        tl.atomic_xchg(count_ptr + pid_n, 0, sem="relaxed")


@functools.lru_cache(maxsize=64)
def _launcher(top_k: int, has_map: bool) -> Launcher:
    return Launcher(_topk_sum_kernel, num_warps=4, TOP_K=top_k, K_P2=next_power_of_2(top_k), HAS_MAP=has_map, BLOCK_H=BLOCK_H)


def topk_sum(rows: torch.Tensor, topk_ids: torch.Tensor, num_experts: int, num_local: int, expert_map: torch.Tensor | None) -> torch.Tensor:
    """[T * k, H] pair rows -> [T, H]: the float32 sum over each token's valid pairs, in ``rows.dtype``."""
    tokens, top_k = topk_ids.shape
    h = rows.shape[1]
    out = torch.empty((tokens, h), dtype=rows.dtype, device=rows.device)
    if tokens:
        ids = topk_ids.contiguous()
        _launcher(top_k, expert_map is not None)(
            (tokens, cdiv(h, BLOCK_H)), rows, ids, expert_map if expert_map is not None else ids, out, h, num_experts, num_local,
            rows.stride(0), out.stride(0),
        )
    return out


#: Elements per program of :func:`zero_` and :func:`cast_into` (8 per thread with 4 warps).
FLAT_BLOCK = 1024


@triton.jit
def _zero_kernel(ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0).to(tl.int64) * BLOCK + tl.arange(0, BLOCK)
    tl.store(ptr + offs, tl.zeros((BLOCK,), ptr.dtype.element_ty), mask=offs < n)


@triton.jit
def _cast_kernel(src_ptr, dst_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0).to(tl.int64) * BLOCK + tl.arange(0, BLOCK)
    ok = offs < n
    tl.store(dst_ptr + offs, tl.load(src_ptr + offs, mask=ok).to(dst_ptr.dtype.element_ty), mask=ok)


_ZERO = Launcher(_zero_kernel, num_warps=4, BLOCK=FLAT_BLOCK)
_CAST = Launcher(_cast_kernel, num_warps=4, BLOCK=FLAT_BLOCK)


def zero_(t: torch.Tensor) -> torch.Tensor:
    """``t`` (contiguous) filled with zeros by a launch; returns ``t``."""
    if t.numel():
        _ZERO((cdiv(t.numel(), FLAT_BLOCK),), t, t.numel())
    return t


def cast_into(src: torch.Tensor, dst: torch.Tensor) -> torch.Tensor:
    """``src``'s values written into ``dst`` in ``dst``'s dtype, by a launch (both contiguous, of one shape); returns
    ``dst``."""
    if src.numel():
        _CAST((cdiv(src.numel(), FLAT_BLOCK),), src, dst, src.numel())
    return dst
