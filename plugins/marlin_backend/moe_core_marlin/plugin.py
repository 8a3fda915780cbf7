"""Registers `marlin`: vLLM's compiled Marlin MoE GEMM for int4/int8/fp8/fp4 weight-only schemes, CUDA sm80+.

The provider is one file, vLLM's Marlin ops library (:mod:`moe_core_marlin.library`); weight repacking
and the glue are this plugin's own. On the real machine the backend is supported only where that file
is found; a simulated platform stands for a machine with it when it lists the ``vllm`` package.
LoRA is refused by the declaration (``supports_lora=False``), with the core's reason.

Priority: the seeds rank Marlin as the lowest CUDA fp8 backend (FP8_ORDER in
tests/parity/seed_backends.py: ... > triton > triton_batched > marlin > xpu, ten apart), so in the fp8
family (fp8-w8a16, fp8-block-w8a16) `marlin` takes 480, the next step below triton_batched (490) and
triton (500); it is chosen there when triton cannot run the layer, or when
VLLM_TEST_FORCE_FP8_MARLIN=1 forces it. The seeds have no weight-only oracle; there 400 puts it above
the reference (0) and below triton (500).

nvfp4 (nvfp4-w4a16): the seeds' NVFP4_ORDER is flashinfer_trtllm > flashinfer_cutedsl >
flashinfer_cutedsl_batched > flashinfer_cutlass > vllm_cutlass > marlin > emulation, ten apart; the
FlashInfer plugin holds 1000 / 990 / 980 / 970, so vllm_cutlass's place is 960 and marlin takes 950. The
seeds do not rank triton for nvfp4, so marlin (vLLM's weight-only nvfp4 kernel for GPUs without fp4 MMA)
comes before triton's 500 there. mxfp4: no seed order; 400, as in weight_only: below triton (500, moe-core's
own kernel, which also runs float16 mxfp4 layers Marlin has no kernel for) and above the reference.
"""

from __future__ import annotations

import torch

from moe_core.hookspecs import backend_hooks, hookimpl
from moe_core.platform import DeviceKind
from moe_core.quant import QuantDtype, QuantFamily, scheme
from moe_core.spec import BackendSpec, Validation
from moe_core.support import Support

from moe_core_marlin import library
from moe_core_marlin.contract import (
    FP8_GROUP_SIZES, HIDDEN_MULTIPLE, INTERMEDIATE_MIN_MULTIPLE, MXFP4_DTYPES, MXFP4_GROUP_SIZE, NVFP4_GROUP_SIZE,
    SCALAR_TYPE_BY_SCHEME, SUPPORTED_GROUP_SIZES,
)

SCHEMES = tuple(SCALAR_TYPE_BY_SCHEME)
MIN_CAPABILITY = (8, 0)
#: The seeds' fp8 order puts marlin right after triton_batched (490 here), ten apart.
FP8_PRIORITY = 480
#: The seeds' nvfp4 order puts marlin right after vllm_cutlass (960 by the FlashInfer plugin's steps of ten).
NVFP4_PRIORITY = 950
#: No seed order for mxfp4: below triton (500), as in weight_only.
MXFP4_PRIORITY = 400
#: Every check of ``python -m moe_core_marlin.gpu_check`` passed (35 of 35: numerics of each scheme at 1, 7 and 333
#: tokens in bf16 and fp16, hot experts, an expert map, gelu, the clamp, graph replay, the robustness kit).
VALIDATION = Validation(
    hardware="NVIDIA H200", provider="vLLM 0.26.0 _moe_C_stable_libtorch.abi3.so, torch 2.11.0+cu130, triton 3.6.0",
    date="2026-11-28", log="docs/benchmarks/raw/2026-11-28-marlin-h200/rebuilt-glue/gpu_check.log",
)

SPECS = [
    BackendSpec(
        name="marlin", family="marlin", priority=400,
        family_priorities={QuantFamily.FP8: FP8_PRIORITY, QuantFamily.NVFP4: NVFP4_PRIORITY, QuantFamily.MXFP4: MXFP4_PRIORITY},
        schemes=[scheme(s) for s in SCHEMES], kernel="moe_core_marlin.kernel:MarlinKernel",
        devices=frozenset({DeviceKind.CUDA}),
        supports_lora=False, applies_swiglu_clamp=True, supports_expert_map=True,
        description="vLLM's compiled Marlin MoE GEMM with this plugin's repacking and glue (CUDA sm80+; int4/int8/fp8/nvfp4/mxfp4 weight-only, 16-bit activations)",
        validation=VALIDATION,
    ),
]


def _supports(backend, config, weight_key, activation_key, platform) -> Support:
    """Marlin's capability, dtype, activation and tile-size rules."""
    reasons = []
    if platform.is_cuda() and not platform.has_capability(*MIN_CAPABILITY):
        cap = platform.capability
        have = f"sm_{cap[0]}{cap[1]}" if cap else "of unknown compute capability"
        reasons.append(f"vLLM's Marlin MoE needs compute capability {MIN_CAPABILITY[0]}.{MIN_CAPABILITY[1]}+, this GPU is {have}; use the reference backend")
    if config.dtype not in (torch.float16, torch.bfloat16):
        reasons.append(f"Marlin computes in float16/bfloat16 activations only, not {config.dtype_name}; set the layer dtype to one of them")
    group = weight_key.group.cols if weight_key is not None else -1
    kind, allowed = _group_rule(weight_key)
    if kind == "mxfp4 weight " and config.dtype in (torch.float16, torch.bfloat16) and config.dtype not in MXFP4_DTYPES:
        reasons.append(f"vLLM builds Marlin's mxfp4 MoE kernels for bfloat16 activations only, not {config.dtype_name}; "
                       "set the layer dtype to bfloat16")
    if group not in allowed:
        reasons.append(f"Marlin supports {kind}groups of {allowed} along K, not {group}")
    if config.hidden_size % HIDDEN_MULTIPLE:
        reasons.append(f"hidden_size={config.hidden_size} is not a multiple of {HIDDEN_MULTIPLE}, which Marlin's MoE tiles need; pad it")
    multiple = max(INTERMEDIATE_MIN_MULTIPLE, group)
    if config.intermediate_size % multiple:
        reasons.append(f"intermediate_size={config.intermediate_size} is not a multiple of {multiple} (Marlin's tile and the weight group size); pad it")
    reasons += library.LIBRARY.platform_reasons(platform)
    return Support.from_reasons(reasons)


def _group_rule(weight_key) -> tuple[str, tuple[int, ...]]:
    """(what the weights are, the group sizes along K Marlin's kernels are built for)."""
    dtype = weight_key.dtype if weight_key is not None else None
    if dtype is QuantDtype.FP4_E2M1:
        return ("nvfp4 weight ", (NVFP4_GROUP_SIZE,)) if weight_key.global_scale else ("mxfp4 weight ", (MXFP4_GROUP_SIZE,))
    if dtype is QuantDtype.FP8_E4M3:
        return "fp8 weight ", FP8_GROUP_SIZES
    return "weight ", SUPPORTED_GROUP_SIZES


@hookimpl
def moe_core_doctor():
    """Which Marlin ops library this machine would load, its vLLM version, and the ops it registers."""
    return library.LIBRARY.report_lines()


moe_core_backends, moe_core_supports = backend_hooks(SPECS, _supports)
