"""The top-k reduction: each token's output is the sum of its valid pairs' GEMM2 rows.

A pair whose expert id is invalid or remote (see :func:`moe_core_triton.blocks.local_experts`) has
no GEMM2 row — its row of the buffer was never written — so it is masked here instead of summed.
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
def _topk_sum_kernel(
    rows_ptr, ids_ptr, map_ptr, out_ptr, H, num_experts, num_local, stride_r, stride_o,
    TOP_K: tl.constexpr, K_P2: tl.constexpr, HAS_MAP: tl.constexpr, BLOCK_H: tl.constexpr,
):
    token = tl.program_id(0).to(tl.int64)
    offs = tl.program_id(1) * BLOCK_H + tl.arange(0, BLOCK_H)
    h_ok = offs < H
    slots = tl.arange(0, K_P2)
    pairs = token * TOP_K + slots
    expert, _, _ = local_experts(ids_ptr, map_ptr, pairs, slots < TOP_K, num_experts, num_local, HAS_MAP)
    rows = tl.load(rows_ptr + pairs[:, None] * stride_r + offs[None, :], mask=(expert >= 0)[:, None] & h_ok[None, :], other=0.0)
    tl.store(out_ptr + token * stride_o + offs, tl.sum(rows.to(tl.float32), axis=0).to(out_ptr.dtype.element_ty), mask=h_ok)


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
