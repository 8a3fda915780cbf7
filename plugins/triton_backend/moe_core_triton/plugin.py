"""Registers `triton` (standard format), `triton_batched` (batched-experts format) and `triton_ws_sm90` (ws_spec.py)
with moe-core."""

from __future__ import annotations

import torch

from moe_core.config import ActivationFormat
from moe_core.hookspecs import backend_hooks
from moe_core.platform import DeviceKind
from moe_core.quant import QuantDtype, QuantFamily, quant_family, scheme
from moe_core.spec import BackendSpec, Validation
from moe_core.support import Support
from moe_core_triton import ws_spec

#: Weight-only schemes: codes dequantized in registers inside the GEMMs' K loop, 16-bit MMA (gemm.py).
WEIGHT_ONLY_SCHEMES = ("w4a16", "w4a16-zp", "w8a16", "w8a16-zp", "fp8-w8a16", "fp8-block-w8a16", "nvfp4-w4a16", "mxfp4")
STANDARD_SCHEMES = ("unquantized", "fp8-tensor", "fp8-tensor-dyn", "fp8-tensor-token", "fp8-channel", "fp8-block", "int8") + WEIGHT_ONLY_SCHEMES
# As in the seeds' history: no int8 in the batched format; per-tensor dynamic scales would need
# an amax over valid rows only, which the batched path does not compute.
BATCHED_SCHEMES = ("unquantized", "fp8-tensor", "fp8-tensor-token", "fp8-channel", "fp8-block") + WEIGHT_ONLY_SCHEMES

#: Minimum CUDA compute capability per quant family of the w8a8 / 16-bit schemes (bfloat16 layers need 8.0 in any case).
MIN_CAPABILITY = {QuantFamily.UNQUANTIZED: (8, 0), QuantFamily.FP8: (8, 9), QuantFamily.INT8: (7, 5)}
#: Weight-only schemes of any family run 16-bit MMA on dequantized codes (fp8 codes decoded from their bytes).
WEIGHT_ONLY_CAPABILITY = (7, 5)

_COMMON = dict(
    family="triton",
    devices=frozenset({DeviceKind.CUDA, DeviceKind.ROCM}),
    requires=frozenset({"triton"}),
    supports_lora=True,  # the seeds' LoRA fallback: engines wrap these GEMMs with their LoRA deltas
    applies_swiglu_clamp=True,
    supports_expert_map=True,
    validation=Validation(
        hardware="NVIDIA H100 80GB HBM3", provider="triton 3.6.0, torch 2.11.0+cu130", date="2026-11-23",
        log="docs/benchmarks/raw/2026-11-23-robustness/pytest_robustness_h100.log",
    ),
)

SPECS = [
    BackendSpec(
        name="triton", priority=500, schemes=[scheme(s) for s in STANDARD_SCHEMES],
        kernel="moe_core_triton.kernel:TritonKernel", formats=frozenset({ActivationFormat.STANDARD}),
        batched_variant="triton_batched",
        description="moe-core's Triton fused MoE: fused gather + gated GEMM1, weighted GEMM2 (bf16/fp16, fp8, int8, weight-only int4/int8/fp4)",
        **_COMMON,
    ),
    BackendSpec(
        name="triton_batched", priority=490, schemes=[scheme(s) for s in BATCHED_SCHEMES],
        kernel="moe_core_triton.kernel:TritonBatchedKernel", formats=frozenset({ActivationFormat.BATCHED_EXPERTS}),
        description="moe-core's Triton fused MoE for the batched-experts (expert-parallel) format",
        **_COMMON,
    ),
]


def _supports(backend, config, weight_key, activation_key, platform) -> Support:
    """What the Triton kernels cannot do for this layer on this platform (capability, dtype, packing)."""
    family = quant_family(weight_key, activation_key)
    reasons = []
    if config.dtype not in (torch.float16, torch.bfloat16):
        reasons.append(f"the Triton kernels compute in float16/bfloat16, not {config.dtype_name}")
    reasons += _packing_reasons(config, weight_key)
    if platform.is_cuda():
        need = WEIGHT_ONLY_CAPABILITY if weight_key is not None and activation_key is None else MIN_CAPABILITY[family]
        if config.dtype is torch.bfloat16:
            need = max(need, (8, 0))
        if not platform.has_capability(*need):
            cap = platform.capability
            have = f"sm_{cap[0]}{cap[1]}" if cap else "unknown"
            reasons.append(f"{family.value} with {config.dtype_name} needs compute capability {need[0]}.{need[1]}+, this is {have}")
    elif platform.is_rocm():
        if family is QuantFamily.FP8:
            reasons.append("fp8 on ROCm uses e4m3fnuz, which these kernels do not implement")
        if not reasons:
            return Support.yes("ROCm is declared but untested")
    return Support.from_reasons(reasons)


def _packing_reasons(config, weight_key) -> list[str]:
    """4-bit codes come two per byte along K, and fp4 scales cover whole groups: K must fit both."""
    if weight_key is None or weight_key.dtype not in (QuantDtype.INT4, QuantDtype.FP4_E2M1):
        return []
    multiple = weight_key.group.cols if weight_key.dtype is QuantDtype.FP4_E2M1 else 2
    return [f"{what}={size} is not a multiple of {multiple}, which {weight_key.dtype.value} weights need along K"
            for what, size in (("hidden_size", config.hidden_size), ("intermediate_size", config.intermediate_size)) if size % multiple]


#: Each backend's supports() by name.
SUPPORTS = {spec.name: _supports for spec in SPECS} | {ws_spec.WS_SM90.name: ws_spec.supports}


def _supports_of(backend, config, weight_key, activation_key, platform) -> Support:
    return SUPPORTS[backend.name](backend, config, weight_key, activation_key, platform)


moe_core_backends, moe_core_supports = backend_hooks([*SPECS, ws_spec.WS_SM90], _supports_of)
