"""Registers ``deepgemm`` (standard format) and ``batched_deepgemm`` (batched-experts format) with moe-core.

Priorities keep the seeds' fp8 order (flashinfer > deepgemm > batched_deepgemm > triton >
triton_batched). For unquantized bf16 layers, which the seeds' oracle never routes to DeepGEMM,
both rank below Triton: a measured ranking file (docs/ranking.md) promotes them where faster.
"""

from __future__ import annotations

import torch

from moe_core.config import ActivationFormat
from moe_core.hookspecs import backend_hooks
from moe_core.platform import DeviceKind
from moe_core.quant import QuantFamily, quant_family, scheme
from moe_core.spec import BackendSpec, Validation
from moe_core.support import Support

SCHEMES = ("fp8-block", "unquantized")

#: K alignment per quant family: fp8 scales cover 128-wide K blocks (and the gate/up split must not
#: cut one); bf16 rows are loaded by TMA in 64-wide K blocks.
ALIGNMENT = {QuantFamily.FP8: 128, QuantFamily.UNQUANTIZED: 64}

_COMMON = dict(
    family="deepgemm",
    schemes=[scheme(s) for s in SCHEMES],
    devices=frozenset({DeviceKind.CUDA}),
    requires=frozenset({"deep_gemm"}),
    supports_lora=False,
    applies_swiglu_clamp=True,  # fused into the intermediate's activation + quantization kernel
    supports_expert_map=True,
    validation=Validation(
        hardware="NVIDIA H100 80GB HBM3", provider="deep_gemm 2.6.1 (54e2261), triton 3.6.0, torch 2.11.0+cu130",
        date="2026-11-23", log="docs/benchmarks/raw/2026-11-23-deepgemm/gpu_tests.log",
    ),
)

SPECS = [
    BackendSpec(
        name="deepgemm", priority=700, family_priorities={QuantFamily.UNQUANTIZED: 450},
        kernel="moe_core_deepgemm.kernel:DeepGemmKernel", formats=frozenset({ActivationFormat.STANDARD}),
        batched_variant="batched_deepgemm",
        description="DeepGEMM contiguous grouped GEMMs (fp8 block-128, bf16) with Triton permute/activation/un-permute glue",
        **_COMMON,
    ),
    BackendSpec(
        name="batched_deepgemm", priority=690, family_priorities={QuantFamily.UNQUANTIZED: 440},
        kernel="moe_core_deepgemm.kernel:BatchedDeepGemmKernel", formats=frozenset({ActivationFormat.BATCHED_EXPERTS}),
        description="DeepGEMM masked grouped GEMMs for the batched-experts (expert-parallel) format",
        **_COMMON,
    ),
]


def _supports(backend, config, weight_key, activation_key, platform) -> Support:
    """Architecture, dtype and alignment rules of DeepGEMM's grouped GEMMs."""
    family = quant_family(weight_key, activation_key)
    reasons = []
    if config.dtype is not torch.bfloat16:
        reasons.append(f"DeepGEMM's grouped GEMMs write bfloat16 outputs only; this layer computes in {config.dtype_name} (use dtype=bfloat16)")
    if platform.is_cuda():
        cap = platform.capability
        have = f"sm_{cap[0]}{cap[1]}" if cap else "an unknown compute capability"
        if cap is None or cap[0] not in (9, 10):
            reasons.append(f"DeepGEMM's kernels run on sm_90 (Hopper) and sm_100 (Blackwell) only; this is {have}")
        elif cap[0] == 10 and family is QuantFamily.FP8:
            reasons.append(
                "on sm_100 DeepGEMM takes fp8 scales as packed power-of-two (UE8M0) factors; converting moe-core's fp32 "
                "block scales would change the weights' values, which this plugin does not do yet (use Hopper, or the triton backend)"
            )
    align = ALIGNMENT[family]
    for name, size in (("hidden_size", config.hidden_size), ("intermediate_size", config.intermediate_size)):
        if size % align:
            reasons.append(f"{name}={size} must be a multiple of {align} for DeepGEMM's {family.value} grouped GEMMs (K blocks of {align})")
    if reasons:
        return Support.no(*reasons)
    if platform.is_cuda() and platform.capability[0] == 10:
        return Support.yes("sm_100 follows DeepGEMM's API but has not been validated by this plugin")
    return Support.yes()


moe_core_backends, moe_core_supports = backend_hooks(SPECS, _supports)
