"""Registers `marlin`: vLLM's compiled Marlin MoE GEMM for int4/int8/fp8 weight-only schemes, CUDA sm80+.

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

Not declared: nvfp4-w4a16 and mxfp4. Marlin runs them, but their scales need vLLM's conversions
(nvfp4's "S0E5M3" scale bytes and exponent-biased global scale, mxfp4's e8m0 column order) that this
plugin does not implement yet; the triton backend runs both.
"""

from __future__ import annotations

import torch

from moe_core.hookspecs import backend_hooks, hookimpl
from moe_core.platform import DeviceKind
from moe_core.quant import QuantDtype, QuantFamily, scheme
from moe_core.spec import NOT_VALIDATED, BackendSpec
from moe_core.support import Support

from moe_core_marlin import library
from moe_core_marlin.contract import (
    FP8_GROUP_SIZES, HIDDEN_MULTIPLE, INTERMEDIATE_MIN_MULTIPLE, SCALAR_TYPE_BY_SCHEME, SUPPORTED_GROUP_SIZES,
)

SCHEMES = tuple(SCALAR_TYPE_BY_SCHEME)
MIN_CAPABILITY = (8, 0)
#: The seeds' fp8 order puts marlin right after triton_batched (490 here), ten apart.
FP8_PRIORITY = 480

SPECS = [
    BackendSpec(
        name="marlin", family="marlin", priority=400,
        family_priorities={QuantFamily.FP8: FP8_PRIORITY},
        schemes=[scheme(s) for s in SCHEMES], kernel="moe_core_marlin.kernel:MarlinKernel",
        devices=frozenset({DeviceKind.CUDA}),
        supports_lora=False, applies_swiglu_clamp=True, supports_expert_map=True,
        description="vLLM's compiled Marlin MoE GEMM with this plugin's repacking and glue (CUDA sm80+; int4/int8/fp8 weight-only, 16-bit activations)",
        validation=NOT_VALIDATED,
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
    fp8 = weight_key is not None and weight_key.dtype is QuantDtype.FP8_E4M3
    kind, allowed = ("fp8 weight ", FP8_GROUP_SIZES) if fp8 else ("weight ", SUPPORTED_GROUP_SIZES)
    if group not in allowed:
        reasons.append(f"Marlin supports {kind}groups of {allowed} along K, not {group}")
    if config.hidden_size % HIDDEN_MULTIPLE:
        reasons.append(f"hidden_size={config.hidden_size} is not a multiple of {HIDDEN_MULTIPLE}, which Marlin's MoE tiles need; pad it")
    multiple = max(INTERMEDIATE_MIN_MULTIPLE, group)
    if config.intermediate_size % multiple:
        reasons.append(f"intermediate_size={config.intermediate_size} is not a multiple of {multiple} (Marlin's tile and the weight group size); pad it")
    reasons += _library_reasons(platform)
    return Support.from_reasons(reasons)


def _library_reasons(platform) -> list[str]:
    """The ops library: on the real machine the file must be found; a simulated one lists the vllm package."""
    if platform.simulated:
        return [] if platform.has_package("vllm") else ["vllm not importable on this simulated platform (it stands for the Marlin ops library)"]
    if not platform.is_cuda() or library.locate() is not None:
        return []
    return [library.missing_reason()]


@hookimpl
def moe_core_doctor():
    """Which Marlin ops library this machine would load, its vLLM version, and the ops it registers."""
    from moe_core_marlin import report

    return report.lines()


moe_core_backends, moe_core_supports = backend_hooks(SPECS, _supports)
