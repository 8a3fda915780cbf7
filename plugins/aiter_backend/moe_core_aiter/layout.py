"""From moe-core's canonical fp8 weights (docs/quantization.md) to what AITER's kernels read."""

from __future__ import annotations

import torch


def fp8_scale_factor(source: torch.dtype, fp8: torch.dtype) -> float:
    """What scales multiply by when codes of ``source`` dtype are read as ``fp8`` (AITER's dtype).

    e4m3fn -> e4m3fnuz (gfx942) keeps the bits, and the same bits read as fnuz are half the value.
    """
    if source == fp8:
        return 1.0
    if (source, fp8) == (torch.float8_e4m3fn, torch.float8_e4m3fnuz):
        return 2.0
    raise TypeError(f"cannot convert {source} weights to AITER's {fp8}")


def to_provider_fp8(codes: torch.Tensor, fp8: torch.dtype) -> torch.Tensor:
    """The same bits as ``fp8`` codes (scale them by :func:`fp8_scale_factor`); fn's -0 (NaN in fnuz) becomes 0."""
    if codes.dtype == fp8:
        return codes
    fp8_scale_factor(codes.dtype, fp8)  # refuses any other conversion
    bits = codes.view(torch.int8)
    return torch.where(bits == -128, torch.zeros_like(bits), bits).view(fp8)


def per_row_scale(scale: torch.Tensor, rows: int) -> torch.Tensor:
    """A per-tensor weight scale [E, 1, 1] as the per-channel [E, rows, 1] AITER's per_Token kernels read."""
    return scale.expand(scale.shape[0], rows, 1).contiguous()
