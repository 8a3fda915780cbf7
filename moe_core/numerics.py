"""How close a backend must come to the reference backend: relative-error budgets from an error model.

The reference backend dequantizes the weights, quantizes activations where a fused kernel does
(the layer input and the gated intermediate), computes in float32 and rounds its output once to
the layer dtype. A correct fused kernel differs from it in three ways; each term below is an rms
error of the output relative to its norm, for a layer dtype of unit roundoff ``u`` (bfloat16
2^-8, float16 2^-11, float32 2^-24):

* **rounding**: the kernel stores the GEMM1 output, each pair's GEMM2 output and the top-k sum in
  the layer dtype; the two outputs may also round to neighbouring values. Bound: ``2u``.
* **accumulation**: a float32 accumulator over a reduction of length K adds about
  ``sqrt(K) * 2^-24``. fp8 tensor-core MMAs keep about 14 bits of the accumulator between
  promotions to float32 (DeepSeek-V3 technical report, section 3.3.2), so with fp8 activations
  the term is ``sqrt(K) * 2^-14``. int8 MMAs accumulate exactly in int32.
* **flips**: the intermediate the kernel quantizes differs from the reference's by its rounding to
  the layer dtype (relative ``u``). An element then lands on the neighbouring code with
  probability about ``u / step`` and is off by one step, so the rms error is ``sqrt(u * step)``,
  where ``step`` is the code spacing relative to a typical element: fp8 e4m3 ``2^-3`` (3 mantissa
  bits), int8 per-token ``4/127`` (amax is about 4 rms for Gaussian rows of thousands of
  elements), e2m1 ``2^-1``. The layer input is quantized from the same values on both sides and
  adds nothing.

The budget is ``SAFETY * sqrt(rounding^2 + accumulation^2 + flips^2)``. The model is an upper
estimate (flips happen with probability ``u/2 / step`` on average), so measured errors of the
known-good kernels sit 2-5x below their budgets; skipping the activation quantization (an error
of ``step / sqrt(12)`` per quantized tensor) exceeds the float16 budgets. tests/test_numerics.py
checks both on the Triton kernels.
"""

from __future__ import annotations

import math
from typing import TYPE_CHECKING

import torch

from moe_core.quant import QuantDtype, QuantKey

if TYPE_CHECKING:
    from moe_core.config import MoEConfig

#: Unit roundoff (half the spacing of the significand at 1) of each layer dtype.
UNIT_ROUNDOFF = {torch.bfloat16: 2.0**-8, torch.float16: 2.0**-11, torch.float32: 2.0**-24}

#: Code spacing of an activation format relative to a typical (rms) element.
CODE_STEP = {QuantDtype.FP8_E4M3: 2.0**-3, QuantDtype.INT8: 4 / 127, QuantDtype.INT4: 4 / 7, QuantDtype.FP4_E2M1: 2.0**-1}

#: Unit roundoff of the accumulator: float32, or fp8 tensor-core MMAs' ~14 bits.
FLOAT32_ACCUMULATOR = 2.0**-24
FP8_MMA_ACCUMULATOR = 2.0**-14

#: Margin of the budget over the model's estimate.
SAFETY = 2.0

#: Reduction length assumed when none is given: the longest of the model presets (Mixtral's
#: intermediate size, 14336), rounded up to a power of two.
LONGEST_REDUCTION = 16384


def error_terms(activation_key: QuantKey | None, dtype: torch.dtype, reduction: int = LONGEST_REDUCTION) -> dict[str, float]:
    """The model's rms relative errors (rounding, accumulation, flips) for one layer; see the module docstring."""
    u = UNIT_ROUNDOFF[dtype]
    fp8_mma = activation_key is not None and activation_key.dtype is QuantDtype.FP8_E4M3
    accumulator = FP8_MMA_ACCUMULATOR if fp8_mma else FLOAT32_ACCUMULATOR
    flips = 0.0 if activation_key is None else math.sqrt(u * CODE_STEP[activation_key.dtype])
    return {"rounding": 2 * u, "accumulation": math.sqrt(reduction) * accumulator, "flips": flips}


def tolerance(activation_key: QuantKey | None, dtype: torch.dtype, reduction: int = LONGEST_REDUCTION) -> float:
    """Relative-error budget of a backend against the reference: ``SAFETY`` times the model's rms error.

    ``reduction`` is the longest GEMM reduction of the layer (max of hidden and intermediate size).
    """
    return SAFETY * math.sqrt(sum(term**2 for term in error_terms(activation_key, dtype, reduction).values()))


def layer_tolerance(activation_key: QuantKey | None, config: "MoEConfig") -> float:
    """:func:`tolerance` for a layer: its dtype, and its longest reduction (hidden or intermediate size)."""
    return tolerance(activation_key, config.dtype, max(config.hidden_size, config.intermediate_size))


def relative_error(got: torch.Tensor, want: torch.Tensor) -> float:
    """||got - want|| / ||want|| in float32 (inf when got has NaN or inf)."""
    if not torch.isfinite(got).all():
        return float("inf")
    return ((got.float() - want.float()).norm() / want.float().norm().clamp(min=1e-12)).item()
