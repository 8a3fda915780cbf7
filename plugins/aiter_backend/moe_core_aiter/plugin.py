"""Registers `aiter`: AMD AITER's fused MoE, ROCm gfx942 (MI300X) and gfx950 (MI355X) only.

Priorities follow the seeds' orders (tests/parity/seed_backends.py): first in the fp8 order
(2000) and third in the unquantized one (1980), below the FlashInfer backends that never run on ROCm.
"""

from __future__ import annotations

import torch

from moe_core.hookspecs import backend_hooks
from moe_core.platform import DeviceKind
from moe_core.quant import QuantFamily, quant_family, scheme
from moe_core.spec import NOT_VALIDATED, BackendSpec
from moe_core.support import Support

from moe_core_aiter.contract import FP8_DTYPE_BY_ARCH, SHUFFLE_LAYOUT

SCHEMES = ("unquantized", "fp8-tensor", "fp8-tensor-token", "fp8-channel", "fp8-block")
ARCHS = tuple(FP8_DTYPE_BY_ARCH)
#: ``shuffle_weight`` tiles rows by 16 and columns by 32; w13 [E, 2I, H] and w2 [E, H, I] both go through it.
DIM_MULTIPLE = 2 * SHUFFLE_LAYOUT[1]

SPECS = [
    BackendSpec(
        name="aiter", family="aiter", priority=2000, family_priorities={QuantFamily.UNQUANTIZED: 1980},
        schemes=[scheme(s) for s in SCHEMES], kernel="moe_core_aiter.kernel:AiterKernel",
        devices=frozenset({DeviceKind.ROCM}), requires=frozenset({"aiter"}),
        supports_lora=False, applies_swiglu_clamp=False, supports_expert_map=True,
        description="AMD AITER fused MoE (ROCm gfx942/gfx950; bf16/fp16, fp8 per-tensor, per-token, block-128)",
        validation=NOT_VALIDATED,
    ),
]


def _supports(backend, config, weight_key, activation_key, platform) -> Support:
    """AITER's architectures, dtypes and weight-shuffle alignment."""
    reasons = []
    if not platform.is_rocm() or platform.arch not in ARCHS:
        found = (platform.arch or "of unknown architecture") if platform.is_rocm() else platform.describe()
        reasons.append(f"AITER's fused MoE runs on ROCm gfx942 (MI300X) and gfx950 (MI355X) only, this device is {found}; use the triton backend")
    if config.dtype not in (torch.bfloat16, torch.float16):
        reasons.append(f"AITER's fused MoE outputs bfloat16/float16 only, not {config.dtype_name}; set the layer dtype to one of them")
    for what, size in (("hidden_size", config.hidden_size), ("intermediate_size", config.intermediate_size)):
        if size % DIM_MULTIPLE:
            reasons.append(f"{what}={size} is not a multiple of {DIM_MULTIPLE}, which AITER's weight shuffle needs; pad it")
    if reasons or quant_family(weight_key, activation_key) is not QuantFamily.FP8:
        return Support.from_reasons(reasons)
    return Support.yes(f"fp8 runs in AITER's {FP8_DTYPE_BY_ARCH[platform.arch]} on {platform.arch}; prepare_weights converts e4m3fn weights once")


moe_core_backends, moe_core_supports = backend_hooks(SPECS, _supports)
