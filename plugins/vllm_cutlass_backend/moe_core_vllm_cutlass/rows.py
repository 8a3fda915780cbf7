"""The two row passes between and after the CUTLASS GEMMs, one Triton launch each.

:func:`gated_quantize`: GEMM1's rows [rows, 2I] (gate, then up) to act(gate) * up in float32 and straight to
fp8 codes, with one scale per row (dynamic per token) or a given per-tensor scale. A dynamic per-tensor
scale needs every row's amax first, so that key gets the float32 products and each row's amax instead;
the scale then comes from the amaxes and :func:`moe_core_triton.quantize.quantize_activations` quantizes
with it. Scale rule: moe-core's, max(amax, 1e-12) / 448.

:func:`combine`: GEMM2's rows [rows, H] back to tokens: ``out[t] = sum_j w[t, j] * rows[row_of[t * k + j]]``
summed in float32, written in the layer's dtype (``row_of`` is ``get_cutlass_moe_mm_data``'s output
permutation; a pair of local id -1, on another rank or dropped, is left out: its row was never written).
"""

from __future__ import annotations

import enum
import functools

import torch
import triton
import triton.language as tl

from moe_core.config import Activation
from moe_core_triton.blocks import cdiv, next_power_of_2
from moe_core_triton.gemm import gated
from moe_core_triton.launch import Launcher
from moe_core_triton.quantize import FP8_QMAX, ROUND_IN_FP32, codes, row_scales

#: Columns of one combine program (8 bf16 per thread with 4 warps: 16-byte loads).
COMBINE_BLOCK = 1024
#: Row lengths from which a row program runs 8, and 16, warps instead of 4 (a row is one tile).
WIDE_ROW, WIDER_ROW = 4096, 8192


@triton.jit
def _gated_quantize_kernel(h_ptr, q_ptr, s_ptr, ends_ptr, last, inter, limit, stride_h, stride_q,
                           ACT: tl.constexpr, CLAMP: tl.constexpr, MODE: tl.constexpr, HAS_VALID: tl.constexpr,
                           ROUND_FP8: tl.constexpr, BLOCK: tl.constexpr):
    """One program per row. MODE 0: codes, the row's dynamic scale into s_ptr[row]; 1: codes with the scale at
    s_ptr; 2: the float32 products, the row's amax into s_ptr[row]. With HAS_VALID, rows at and past
    ends_ptr[last] (never written by GEMM1) are read as zeros."""
    row = tl.program_id(0).to(tl.int64)
    cols = tl.arange(0, BLOCK)
    width = inter
    if HAS_VALID:
        width = tl.where(row < tl.load(ends_ptr + last).to(tl.int64), inter, 0)
    ok = cols < width
    gate = tl.load(h_ptr + row * stride_h + cols, mask=ok, other=0.0).to(tl.float32)
    up = tl.load(h_ptr + row * stride_h + inter + cols, mask=ok, other=0.0).to(tl.float32)
    y = gated(gate, up, limit, ACT, CLAMP)  # zero where masked
    if MODE == 2:
        tl.store(q_ptr + row * stride_q + cols, y, mask=ok)
        tl.store(s_ptr + row, tl.max(tl.abs(y), axis=0))
    else:
        if MODE == 0:
            scale = row_scales(y[None, :], FP8_QMAX)
            tl.store(s_ptr + row + tl.arange(0, 1), scale)
            y = y / tl.maximum(tl.sum(scale, axis=0), 1e-12)
        else:
            y = y / tl.maximum(tl.load(s_ptr), 1e-12)
        tl.store(q_ptr + row * stride_q + cols, codes(y, FP8_QMAX, False, ROUND_FP8).to(q_ptr.dtype.element_ty), mask=ok)


@triton.jit
def _combine_kernel(rows_ptr, row_of_ptr, ids_ptr, w_ptr, out_ptr, H, stride_r, stride_o,
                    TOP_K: tl.constexpr, WEIGHTED: tl.constexpr, BLOCK: tl.constexpr):
    """One program per (token, BLOCK columns); a pair whose local id is -1 has no row and adds nothing."""
    token = tl.program_id(0).to(tl.int64)
    cols = tl.program_id(1) * BLOCK + tl.arange(0, BLOCK)
    ok = cols < H
    acc = tl.zeros([BLOCK], tl.float32)
    for j in tl.static_range(TOP_K):
        row = tl.load(row_of_ptr + token * TOP_K + j).to(tl.int64)
        width = tl.where(tl.load(ids_ptr + token * TOP_K + j) >= 0, H, 0)
        y = tl.load(rows_ptr + row * stride_r + cols, mask=cols < width, other=0.0).to(tl.float32)
        if WEIGHTED:
            y = y * tl.load(w_ptr + token * TOP_K + j).to(tl.float32)
        acc += y
    tl.store(out_ptr + token * stride_o + cols, acc.to(out_ptr.dtype.element_ty), mask=ok)


class Ending(enum.IntEnum):
    """How :func:`gated_quantize` ends (the kernel's MODE): fp8 codes with a dynamic scale per row, fp8 codes with
    a given per-tensor scale, or the float32 products and each row's amax (for a dynamic per-tensor scale,
    which needs every row's)."""

    PER_ROW_CODES = 0
    GIVEN_SCALE_CODES = 1
    FLOAT32 = 2


@functools.lru_cache(maxsize=64)
def _gated_launcher(activation: Activation, clamp: bool, ending: Ending, has_valid: bool, inter: int) -> Launcher:
    return Launcher(_gated_quantize_kernel, num_warps=16 if inter >= WIDER_ROW else 8 if inter >= WIDE_ROW else 4, ACT=0 if activation is Activation.SILU else 1,
                    CLAMP=clamp, MODE=int(ending), HAS_VALID=has_valid, ROUND_FP8=ROUND_IN_FP32, BLOCK=next_power_of_2(inter))


@functools.lru_cache(maxsize=16)
def _combine_launcher(top_k: int, weighted: bool) -> Launcher:
    return Launcher(_combine_kernel, num_warps=4, TOP_K=top_k, WEIGHTED=weighted, BLOCK=COMBINE_BLOCK)


def gated_quantize(h: torch.Tensor, activation: Activation, swiglu_limit: float | None, ending: Ending,
                   scale: torch.Tensor | None = None, row_ends: torch.Tensor | None = None) -> tuple[torch.Tensor, torch.Tensor | None]:
    """act(gate) * up of ``h`` [rows, 2I] (rows contiguous): (fp8 codes [rows, I], float32 scales [rows, 1], or
    ``scale``, float32 [1, 1], for GIVEN_SCALE_CODES), or for FLOAT32 (float32 [rows, I], float32 row amaxes [rows, 1]).
    ``row_ends`` (int32 [E + 1] on the device, the experts' row prefix sums): rows at and past its last value are
    taken as zeros."""
    rows, inter = h.shape[0], h.shape[1] // 2
    out = torch.empty((rows, inter), dtype=torch.float32 if ending is Ending.FLOAT32 else torch.float8_e4m3fn, device=h.device)
    scales = scale if ending is Ending.GIVEN_SCALE_CODES else torch.empty((rows, 1), dtype=torch.float32, device=h.device)
    if rows:
        _gated_launcher(activation, swiglu_limit is not None, ending, row_ends is not None, inter)(
            (rows,), h, out, scales, row_ends if row_ends is not None else out, 0 if row_ends is None else row_ends.numel() - 1, inter, float(swiglu_limit or 0.0), h.stride(0), out.stride(0))
    return out, scales


def combine(rows: torch.Tensor, row_of: torch.Tensor, ids: torch.Tensor, weights: torch.Tensor | None, dtype: torch.dtype) -> torch.Tensor:
    """[T, H] in ``dtype``: each token's rows of ``rows`` (at ``row_of`` [T * k], int32; pairs whose local id in
    ``ids`` [T, k] is -1 left out), weighted by ``weights`` [T, k] (float32, contiguous) when given, summed in float32."""
    top_k = ids.shape[1]
    tokens, hidden = row_of.numel() // top_k, rows.shape[1]
    out = torch.empty((tokens, hidden), dtype=dtype, device=rows.device)
    if tokens:
        _combine_launcher(top_k, weights is not None)(
            (tokens, cdiv(hidden, COMBINE_BLOCK)), rows, row_of, ids, weights if weights is not None else row_of, out, hidden,
            rows.stride(0), out.stride(0))
    return out
