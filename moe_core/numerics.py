"""How close a backend must come to the reference backend: relative-error budgets per scheme."""

from __future__ import annotations

import torch

from moe_core.quant import QuantDtype, QuantKey

#: ||out - ref|| / ||ref|| allowed, by activation dtype (None: 16/32-bit activations).
TOLERANCE = {None: 2e-2, QuantDtype.FP8_E4M3: 6e-2, QuantDtype.INT8: 4e-2, QuantDtype.FP4_E2M1: 0.25}


def tolerance(activation_key: QuantKey | None, dtype: torch.dtype) -> float:
    """Relative-error budget: the activation quantization's, tighter for float32 unquantized layers."""
    base = TOLERANCE[None if activation_key is None else activation_key.dtype]
    return base if dtype is not torch.float32 or activation_key is not None else 1e-3


def relative_error(got: torch.Tensor, want: torch.Tensor) -> float:
    """||got - want|| / ||want|| in float32 (inf when got has NaN or inf)."""
    if not torch.isfinite(got).all():
        return float("inf")
    return ((got.float() - want.float()).norm() / want.float().norm().clamp(min=1e-12)).item()
