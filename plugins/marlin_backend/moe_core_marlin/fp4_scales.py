"""Marlin's fp4 scale formats (nvfp4 and mxfp4 weights, 16-bit activations), written in torch.

Learnt from ``nvfp4_marlin_process_scales``, ``_nvfp4_compute_scale_factor``,
``nvfp4_marlin_process_global_scale`` and ``mxfp4_marlin_process_scales`` of vLLM
:data:`moe_core_marlin.contract.VLLM_VERSION`; they act on scales already in Marlin's grouped order
(:func:`moe_core_marlin.repack.permute_scales`, [E, K/group, N]).

* Both kinds then swap the middle two of every four columns (:data:`FOUR_COLUMN_ORDER`), the order
  Marlin's fp8-style dequantization reads them in.
* **nvfp4**: each e4m3 block scale s becomes one byte "S0E5M3": the float16 bits of
  ``s * factor * 2**7`` shifted left by one (dropping the sign) and cut to the high byte -- five
  exponent bits (bias 15) and the top three mantissa bits. Values below 2 (after the multiplication)
  would lose their leading bit and are written as 0. ``factor`` is a power of two >= 1 shared by all
  experts of a projection: with bfloat16 activations, the largest that keeps the largest scale
  <= 448 (so small scales keep their bits); 1 with float16. The global scale becomes float32
  ``global * 2**(b - 7) / factor`` with b = 14 (float16) or 126 (bfloat16), the fp4 -> 16-bit
  exponent bias Marlin's dequantization leaves out.
* **mxfp4**: the e8m0 exponents, reordered, as float8_e8m0fnu.
"""

from __future__ import annotations

import torch

FOUR_COLUMN_ORDER = (0, 2, 1, 3)
#: Largest e4m3 value: the nvfp4 scale factor keeps every scale at or below it.
E4M3_MAX = 448.0
#: fp4 (e2m1) -> activation exponent bias, 2**(e - 1) - 2**(2 - 1) for e exponent bits.
FP4_EXPONENT_BIAS = {torch.float16: 14, torch.bfloat16: 126}


def reorder_fours(scales: torch.Tensor) -> torch.Tensor:
    """Columns 0, 2, 1, 3 of every run of four along the last dimension."""
    order = torch.tensor(FOUR_COLUMN_ORDER, device=scales.device)
    return scales.reshape(*scales.shape[:-1], -1, 4)[..., order].reshape(scales.shape)


def nvfp4_scale_factor(scales: torch.Tensor, dtype: torch.dtype) -> float:
    """The power of two (>= 1) that lifts the largest non-zero scale of a projection closest to 448 without passing it."""
    if dtype == torch.float16:
        return 1.0
    positive = scales.float()[scales.float() > 0]
    if positive.numel() == 0 or float(positive.max()) >= E4M3_MAX:
        return 1.0
    return float(2.0 ** torch.floor(torch.log2(E4M3_MAX / positive.max())))


def nvfp4_scale_bytes(permuted: torch.Tensor, factor: float) -> torch.Tensor:
    """Permuted nvfp4 block scales [E, K/16, N] -> Marlin's S0E5M3 bytes, as float8_e4m3fn of the same shape."""
    half = reorder_fours(permuted.to(torch.float16))
    half = (half.float() * factor).to(torch.float16) * 2.0**7
    half = torch.where(half < 2, torch.zeros_like(half), half)
    bits = half.view(torch.int16).to(torch.int32) & 0xFFFF
    return (((bits << 1) >> 8) & 0xFF).to(torch.uint8).view(torch.float8_e4m3fn)


def nvfp4_global_scale(global_scale: torch.Tensor, dtype: torch.dtype, factor: float) -> torch.Tensor:
    """moe-core's float32 global scale [E, 1, 1] -> Marlin's float32 [E], with the exponent bias folded in."""
    return (global_scale.float().reshape(-1) * 2.0 ** (FP4_EXPONENT_BIAS[dtype] - 7) / factor).contiguous()


def mxfp4_scale_exponents(permuted: torch.Tensor) -> torch.Tensor:
    """Permuted mxfp4 scales [E, K/32, N] (powers of two in bfloat16) -> float8_e8m0fnu, columns reordered."""
    return reorder_fours(permuted).to(torch.float8_e8m0fnu)
