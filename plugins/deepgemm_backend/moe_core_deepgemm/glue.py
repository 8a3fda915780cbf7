"""Triton kernels for what DeepGEMM does not do: routing into its layouts, the gated activation, un-permute.

STANDARD format, per forward (no host synchronisation anywhere; launch grids depend on shapes only):

1. :func:`build_layout` — ``_route_kernel`` maps each (token, slot) pair to its local expert (guarded:
   an id outside ``[0, E)``, an expert-map entry outside ``[-1, local E)`` or ``-1`` drops the pair,
   and invalid values are counted in the kernel's routing-error counter) and takes a rank inside
   its expert with an atomic add; ``_layout_kernel`` turns the per-expert counts into aligned
   start rows and writes DeepGEMM's M-index tensor (``-1`` on padding rows).
2. :func:`permute` — ``_permute_kernel`` copies each kept pair's (already quantized) token row and
   its 1x128 scales to row ``start[e] + rank``, scales in DeepGEMM's MN-major TMA-aligned layout.
3. :func:`gated_activation` — ``_act_quant_kernel``: SwiGLU clamp, SiLU/GELU(gate) * up and, for
   fp8, the 1x128 quantization of the result, in one pass; rows DeepGEMM leaves unwritten (padding,
   rows past a batched count) are skipped.
4. :func:`unpermute` — ``_unpermute_kernel`` sums each token's top-k rows times its router weights;
   dropped pairs contribute nothing (their weights are never read, so a NaN there cannot leak).
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
import triton
import triton.language as tl

from moe_core.config import Activation
from moe_core.routing_guard import RoutingErrorCounter
from moe_core_deepgemm.layout import contiguous_capacity, empty_mn_major_scales, tma_aligned_rows
from moe_core_triton.blocks import local_experts, record_invalid
from moe_core_triton.gemm import gated
from moe_core_triton.quantize import ROUND_IN_FP32, round_to_e4m3_grid

#: Activation quantization groups (1x128) — also the K block of DeepGEMM's fp8 kernels.
GROUP = 128
FP8_MAX = 448.0


# ---------------------------------------------------------------------------------------- kernels
@triton.jit
def _route_kernel(
    ids_ptr, map_ptr, err_ptr, counts_ptr, pair_expert_ptr, pair_rank_ptr, pairs, num_experts, num_local,
    HAS_MAP: tl.constexpr, BLOCK: tl.constexpr,
):
    """Local expert and rank within it of BLOCK pairs; invalid ids/map entries dropped and counted."""
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    ok = offs < pairs
    expert, bad, offending = local_experts(ids_ptr, map_ptr, offs, ok, num_experts, num_local, HAS_MAP)
    keep = expert >= 0
    rank = tl.atomic_add(counts_ptr + expert, 1, mask=keep)
    tl.store(pair_expert_ptr + offs, expert, mask=ok)
    tl.store(pair_rank_ptr + offs, rank, mask=keep)
    record_invalid(err_ptr, bad, offending)


@triton.jit
def _layout_kernel(
    counts_ptr, starts_ptr, m_indices_ptr, num_local, capacity,
    ALIGN: tl.constexpr, E_P2: tl.constexpr, BLOCK_R: tl.constexpr,
):
    """Aligned start row of each expert (program 0 stores them) and the M index of BLOCK_R rows."""
    experts = tl.arange(0, E_P2)
    real = experts < num_local
    counts = tl.load(counts_ptr + experts, mask=real, other=0)
    padded = (counts + ALIGN - 1) // ALIGN * ALIGN
    ends = tl.cumsum(padded, axis=0)
    starts = ends - padded
    if tl.program_id(0) == 0:
        tl.store(starts_ptr + experts, starts, mask=real)
    rows = tl.program_id(0) * BLOCK_R + tl.arange(0, BLOCK_R)
    owner = tl.sum(((rows[:, None] >= ends[None, :]) & real[None, :]).to(tl.int32), axis=1)
    mine = experts[None, :] == owner[:, None]
    first = tl.sum(tl.where(mine, starts[None, :], 0), axis=1)
    count = tl.sum(tl.where(mine, counts[None, :], 0), axis=1)
    used = (owner < num_local) & (rows - first < count)
    tl.store(m_indices_ptr + rows, tl.where(used, owner, -1), mask=rows < capacity)


@triton.jit
def _permute_kernel(
    x_ptr, xs_ptr, a_ptr, as_ptr, pair_expert_ptr, pair_rank_ptr, starts_ptr, pair_row_ptr,
    hidden, groups, as_ld, stride_x, stride_xs_m, stride_xs_g, stride_a,
    TOP_K: tl.constexpr, HAS_SCALES: tl.constexpr, BLOCK_H: tl.constexpr, GROUPS_P2: tl.constexpr,
):
    """One pair: its token's row (and scales) to row start[e] + rank; dropped pairs get row -1."""
    pair = tl.program_id(0)
    expert = tl.load(pair_expert_ptr + pair)
    keep = expert >= 0
    rank = tl.load(pair_rank_ptr + pair, mask=keep, other=0)
    start = tl.load(starts_ptr + expert, mask=keep, other=0)
    row = tl.where(keep, start + rank, -1)
    tl.store(pair_row_ptr + pair, row)
    token = (pair // TOP_K).to(tl.int64)
    dst = row.to(tl.int64)
    keep_h = tl.arange(0, BLOCK_H) * 0 + row >= 0  # as a block: the interpreter cannot broadcast a scalar mask
    for h in range(0, hidden, BLOCK_H):
        offs = h + tl.arange(0, BLOCK_H)
        m = (offs < hidden) & keep_h
        v = tl.load(x_ptr + token * stride_x + offs, mask=m)
        tl.store(a_ptr + dst * stride_a + offs, v, mask=m)
    if HAS_SCALES:
        g = tl.arange(0, GROUPS_P2)
        m = (g < groups) & (g * 0 + row >= 0)
        s = tl.load(xs_ptr + token * stride_xs_m + g * stride_xs_g, mask=m)
        tl.store(as_ptr + g.to(tl.int64) * as_ld + dst, s, mask=m)


@triton.jit
def _act_quant_kernel(
    h_ptr, q_ptr, s_ptr, valid_ptr, inter, stride_h, stride_q, s_ld, s_batch, rows_per_batch, limit,
    ACT: tl.constexpr, CLAMP: tl.constexpr, QUANT: tl.constexpr, MASKED: tl.constexpr, ROUND_FP8: tl.constexpr,
    GROUP: tl.constexpr,
):
    """One row of [gate | up]: gated activation, then (QUANT) fp8 1x128 groups with MN-major scales.

    A row is used when its M index is >= 0 (contiguous layout) or, with MASKED, when its position
    in its expert's batch is below that expert's count; other rows are left untouched."""
    row = tl.program_id(0).to(tl.int64)
    if MASKED:
        batch = row // rows_per_batch
        m = row % rows_per_batch
        used = m < tl.load(valid_ptr + batch)
    else:
        batch = row * 0
        m = row
        used = tl.load(valid_ptr + row) >= 0
    c = tl.arange(0, GROUP)
    used_c = (c * 0 + used.to(tl.int32)) > 0  # as a block: the interpreter cannot broadcast a scalar mask
    for g0 in range(0, inter, GROUP):
        offs = g0 + c
        ok = (offs < inter) & used_c
        gate = tl.load(h_ptr + row * stride_h + offs, mask=ok, other=0.0).to(tl.float32)
        up = tl.load(h_ptr + row * stride_h + inter + offs, mask=ok, other=0.0).to(tl.float32)
        y = gated(gate, up, limit, ACT, CLAMP)
        if QUANT:
            scale = tl.maximum(tl.max(tl.abs(y), axis=0), 1e-12) / 448.0
            y = tl.minimum(tl.maximum(y / scale, -448.0), 448.0)
            if ROUND_FP8:
                y = round_to_e4m3_grid(y)
            tl.store(s_ptr + batch * s_batch + (g0 // GROUP) * s_ld + m, scale, mask=used)
        tl.store(q_ptr + row * stride_q + offs, y.to(q_ptr.dtype.element_ty), mask=ok)


@triton.jit
def _unpermute_kernel(
    y_ptr, out_ptr, pair_row_ptr, w_ptr, hidden, stride_y, stride_o,
    TOP_K: tl.constexpr, WEIGHTED: tl.constexpr, BLOCK_H: tl.constexpr,
):
    """out[t] = sum over kept pairs j of w[t, j] * y[row(t, j)], in float32."""
    t = tl.program_id(0).to(tl.int64)
    offs = tl.program_id(1) * BLOCK_H + tl.arange(0, BLOCK_H)
    in_h = offs < hidden
    acc = tl.zeros([BLOCK_H], dtype=tl.float32)
    for j in range(TOP_K):
        row = tl.load(pair_row_ptr + t * TOP_K + j)
        keep = row >= 0
        keep_h = offs * 0 + row >= 0  # as a block: the interpreter cannot broadcast a scalar mask
        v = tl.load(y_ptr + row.to(tl.int64) * stride_y + offs, mask=in_h & keep_h, other=0.0).to(tl.float32)
        if WEIGHTED:
            v = v * tl.load(w_ptr + t * TOP_K + j, mask=keep, other=0.0).to(tl.float32)
        acc += tl.where(keep_h, v, 0.0)
    tl.store(out_ptr + t * stride_o + offs, acc.to(out_ptr.dtype.element_ty), mask=in_h)


# ---------------------------------------------------------------------------------------- wrappers
@dataclass(frozen=True, eq=False)
class ContiguousLayout:
    """Where each routed pair goes in DeepGEMM's expert-contiguous layout.

    ``m_indices`` [capacity] int32: each row's local expert, -1 on padding rows; ``starts`` [E]
    int32: first row of each expert; ``pair_expert`` / ``pair_rank`` [T*k] int32: each pair's local
    expert (-1: dropped) and its rank among that expert's rows.
    """

    m_indices: torch.Tensor
    starts: torch.Tensor
    pair_expert: torch.Tensor
    pair_rank: torch.Tensor
    top_k: int

    @property
    def capacity(self) -> int:
        return self.m_indices.shape[0]


def build_layout(
    topk_ids: torch.Tensor, num_experts: int, num_local: int, alignment: int,
    expert_map: torch.Tensor | None, errors: RoutingErrorCounter,
) -> ContiguousLayout:
    """Route ``topk_ids`` [T, k] (global ids) into an expert-contiguous layout aligned to ``alignment`` rows."""
    device = topk_ids.device
    ids = topk_ids.reshape(-1)
    pairs = ids.numel()
    capacity = contiguous_capacity(pairs, num_local, alignment)
    counts = torch.zeros(num_local, dtype=torch.int32, device=device)
    pair_expert = torch.empty(pairs, dtype=torch.int32, device=device)
    pair_rank = torch.empty(pairs, dtype=torch.int32, device=device)
    block = 256
    _route_kernel[(triton.cdiv(pairs, block),)](
        ids, expert_map if expert_map is not None else ids, errors.buffer(device), counts, pair_expert, pair_rank,
        pairs, num_experts, num_local, HAS_MAP=expert_map is not None, BLOCK=block,
    )
    starts = torch.empty(num_local, dtype=torch.int32, device=device)
    m_indices = torch.empty(capacity, dtype=torch.int32, device=device)
    block_r = 64
    _layout_kernel[(triton.cdiv(capacity, block_r),)](
        counts, starts, m_indices, num_local, capacity, ALIGN=alignment, E_P2=triton.next_power_of_2(num_local), BLOCK_R=block_r,
    )
    return ContiguousLayout(m_indices, starts, pair_expert, pair_rank, topk_ids.shape[1])


def permute(x: torch.Tensor, x_scales: torch.Tensor | None, layout: ContiguousLayout) -> tuple[torch.Tensor, torch.Tensor | None, torch.Tensor]:
    """Gather token rows ``x`` [T, H] (and their 1x128 scales [T, H/128]) into the layout.

    Returns ``(a [capacity, H], a_scales [capacity, H/128] MN-major or None, pair_row [T*k])``;
    padding rows of ``a`` are left uninitialised (DeepGEMM's outputs for them are never read).
    """
    pairs = layout.pair_expert.numel()
    hidden = x.shape[1]
    a = torch.empty((layout.capacity, hidden), dtype=x.dtype, device=x.device)
    pair_row = torch.empty(pairs, dtype=torch.int32, device=x.device)
    groups = x_scales.shape[1] if x_scales is not None else 1
    a_scales = empty_mn_major_scales(layout.capacity, groups, x.device) if x_scales is not None else None
    xs = x_scales if x_scales is not None else x
    if pairs:
        _permute_kernel[(pairs,)](
            x, xs, a, a_scales if a_scales is not None else a, layout.pair_expert, layout.pair_rank, layout.starts, pair_row,
            hidden, groups, tma_aligned_rows(layout.capacity), x.stride(0), xs.stride(0), xs.stride(1), a.stride(0),
            TOP_K=layout.top_k, HAS_SCALES=x_scales is not None, BLOCK_H=min(1024, triton.next_power_of_2(hidden)),
            GROUPS_P2=triton.next_power_of_2(groups),
        )
    return a, a_scales, pair_row


def gated_activation(
    h: torch.Tensor, activation: Activation, swiglu_limit: float | None, quantize: bool, *,
    m_indices: torch.Tensor | None = None, counts: torch.Tensor | None = None,
) -> tuple[torch.Tensor, torch.Tensor | None]:
    """act(gate) * up of ``h`` ([rows, 2I] contiguous layout with ``m_indices``, or [E, M, 2I] with ``counts``).

    With ``quantize``: fp8 e4m3 values and 1x128 scales in DeepGEMM's MN-major layout (the
    reference's rule: scale = max(amax, 1e-12) / 448). Otherwise values in ``h``'s dtype.
    """
    masked = counts is not None
    inter = h.shape[-1] // 2
    rows_per_batch = h.shape[1] if masked else h.shape[0]
    flat = h.reshape(-1, 2 * inter)
    rows = flat.shape[0]
    q = torch.empty((rows, inter), dtype=torch.float8_e4m3fn if quantize else h.dtype, device=h.device)
    scales = None
    if quantize:
        groups = triton.cdiv(inter, GROUP)
        scales = empty_mn_major_scales(rows_per_batch, groups, h.device, batch=h.shape[0] if masked else None)
    ld = tma_aligned_rows(rows_per_batch)
    if rows:
        _act_quant_kernel[(rows,)](
            flat, q, scales if scales is not None else q, counts if masked else m_indices, inter, flat.stride(0), q.stride(0),
            ld, ld * (scales.shape[-1] if scales is not None else 0), rows_per_batch, float(swiglu_limit or 0.0),
            ACT=0 if activation is Activation.SILU else 1, CLAMP=swiglu_limit is not None, QUANT=quantize, MASKED=masked,
            ROUND_FP8=ROUND_IN_FP32, GROUP=GROUP, num_warps=1,
        )
    return q.view(*h.shape[:-1], inter), scales


def unpermute(y: torch.Tensor, pair_row: torch.Tensor, topk_weights: torch.Tensor | None, top_k: int, dtype: torch.dtype) -> torch.Tensor:
    """[T, H] output: each token's kept rows of ``y`` [capacity, H], weighted by ``topk_weights`` [T, k] when given."""
    tokens, hidden = pair_row.numel() // top_k, y.shape[1]
    out = torch.empty((tokens, hidden), dtype=dtype, device=y.device)
    block_h = min(1024, triton.next_power_of_2(hidden))
    if tokens:
        w = topk_weights.contiguous() if topk_weights is not None else pair_row
        _unpermute_kernel[(tokens, triton.cdiv(hidden, block_h))](
            y, out, pair_row, w, hidden, y.stride(0), out.stride(0), TOP_K=top_k, WEIGHTED=topk_weights is not None, BLOCK_H=block_h,
        )
    return out
