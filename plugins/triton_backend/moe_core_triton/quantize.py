"""Activation quantization in Triton: per-token and per-token-group dynamic scales, or a given static scale.

Scale rule (the same as moe_core's reference): scale = max(amax, 1e-12) / qmax with qmax 448
(fp8 e4m3) or 127 (int8); int8 rounds half away from zero. Output scale layout ``[rows, groups]``.
"""

from __future__ import annotations

import functools
import os

import torch
import triton
import triton.language as tl

from moe_core.quant import QuantDtype, QuantKey
from moe_core_triton.blocks import cdiv, next_power_of_2
from moe_core_triton.launch import Launcher
from moe_core_triton.scratch import Empty, new_empty

QMAX = {QuantDtype.FP8_E4M3: 448.0, QuantDtype.INT8: 127.0}
#: The fp8 (e4m3) qmax as a constant kernels can read (GEMM1's epilogue quantization and QUANT_IN, gemm.py).
FP8_QMAX = tl.constexpr(QMAX[QuantDtype.FP8_E4M3])
#: The int8 qmax, likewise (a GEMM quantizing its int8 input, gemm.py).
INT8_QMAX = tl.constexpr(QMAX[QuantDtype.INT8])
TORCH_DTYPE = {QuantDtype.FP8_E4M3: torch.float8_e4m3fn, QuantDtype.INT8: torch.int8}


#: The Triton interpreter (TRITON_INTERPRET=1, CPU tests) converts some float32 values to the wrong
#: fp8 value when rounding carries into the exponent (-124.5 became -64 with triton 3.9); there the
#: kernel rounds onto the e4m3 grid itself, so the conversion is exact. GPUs convert in hardware.
ROUND_IN_FP32 = os.environ.get("TRITON_INTERPRET") == "1"


@triton.jit
def round_to_e4m3_grid(y):
    """Round to the nearest e4m3 value (ties to even) in float32: 3 mantissa bits, subnormals below 2^-6."""
    mag = tl.abs(y)
    exponent = tl.maximum(tl.floor(tl.log2(tl.maximum(mag, 1e-30))), -6.0)
    step = tl.exp2(exponent - 3.0)
    units = mag / step
    r = tl.floor(units + 0.5)
    odd = (r - 2.0 * tl.floor(r * 0.5)) == 1.0
    r = tl.where((r - units == 0.5) & odd, r - 1.0, r)
    return tl.where(y < 0, -r * step, r * step)


@triton.jit
def _quant_rows_kernel(
    x_ptr, q_ptr, s_ptr, K, groups, stride_xm, stride_qm, stride_sm, stride_sg, qmax,
    GROUP: tl.constexpr, GROUP_P2: tl.constexpr, GROUPS_P2: tl.constexpr, STATIC: tl.constexpr, IS_INT8: tl.constexpr,
    ROUND_FP8: tl.constexpr,
):
    """One program per row: the row as a [groups, GROUP] tile, one scale per group (one group: per token)."""
    row = tl.program_id(0).to(tl.int64)
    g = tl.arange(0, GROUPS_P2)
    c = tl.arange(0, GROUP_P2)
    offs = g[:, None] * GROUP + c[None, :]
    ok = (g[:, None] < groups) & (c[None, :] < GROUP) & (offs < K)
    x = tl.load(x_ptr + row * stride_xm + offs, mask=ok, other=0.0).to(tl.float32)
    if STATIC:
        scale = tl.load(s_ptr)
        y = x / tl.maximum(scale, 1e-12)
    else:
        scale = row_scales(x, qmax)
        tl.store(s_ptr + row * stride_sm + g * stride_sg, scale, mask=g < groups)
        y = x / tl.maximum(scale, 1e-12)[:, None]
    tl.store(q_ptr + row * stride_qm + offs, codes(y, qmax, IS_INT8, ROUND_FP8).to(q_ptr.dtype.element_ty), mask=ok)


@triton.jit
def row_scales(x, qmax):
    """The dynamic scale of each row of a float32 tile: max(amax, 1e-12) / qmax."""
    return tl.maximum(tl.max(tl.abs(x), axis=1), 1e-12) / qmax


@triton.jit
def codes(y, qmax, IS_INT8: tl.constexpr, ROUND_FP8: tl.constexpr):
    """Scaled values as the codes' values (float32): int8 rounds half away from zero and saturates; fp8
    saturates at qmax and, with ROUND_FP8, is rounded onto the e4m3 grid here (see ROUND_IN_FP32)."""
    if IS_INT8:
        y = tl.where(y >= 0, tl.floor(y + 0.5), tl.ceil(y - 0.5))
        y = tl.minimum(tl.maximum(y, -128.0), 127.0)
    else:
        y = tl.minimum(tl.maximum(y, -qmax), qmax)
        if ROUND_FP8:
            y = round_to_e4m3_grid(y)
    return y


@functools.lru_cache(maxsize=256)
def _launcher(group: int, groups: int, static: bool, is_int8: bool, wide: bool) -> Launcher:
    return Launcher(_quant_rows_kernel, num_warps=8 if wide else 4, GROUP=group, GROUP_P2=next_power_of_2(group),
                    GROUPS_P2=next_power_of_2(groups), STATIC=static, IS_INT8=is_int8, ROUND_FP8=ROUND_IN_FP32)


def quantize_activations(x: torch.Tensor, key: QuantKey, static_scale: torch.Tensor | None = None, *,
                         empty: Empty = new_empty) -> tuple[torch.Tensor, torch.Tensor]:
    """Quantize rows of a 2-D tensor into ``key`` (fp8 or int8; per-tensor, per-token or 1xG groups).

    Returns (q [R, K], scale). Per-tensor dynamic scales are one amax reduction on the device
    followed by the static-scale kernel, so there is never a host synchronisation. ``empty``
    allocates the outputs (see :mod:`moe_core_triton.scratch`).
    """
    if x.stride(1) != 1:  # the kernel reads each row as one contiguous run
        x = x.contiguous()
    rows, k = x.shape
    q = empty((rows, k), TORCH_DTYPE[key.dtype], x.device)
    qmax = QMAX[key.dtype]
    if key.group.is_per_tensor:
        if static_scale is None:
            amax = x.abs().amax() if rows else x.new_zeros(())  # amax of no rows is an error in torch
            static_scale = (amax.float().clamp(min=1e-12) / qmax).reshape(1, 1)
        scale = static_scale.float().reshape(1, 1)
        group, groups, static = k, 1, True
    else:
        group = k if key.group.cols == -1 else key.group.cols
        groups = cdiv(k, group)
        scale = empty((rows, groups), torch.float32, x.device)
        static = False
    if rows:
        launch = _launcher(group, groups, static, key.dtype is QuantDtype.INT8, k >= 4096)
        launch((rows,), x, q, scale, k, groups, x.stride(0), q.stride(0), scale.stride(0), scale.stride(1), qmax)
    return q, scale
