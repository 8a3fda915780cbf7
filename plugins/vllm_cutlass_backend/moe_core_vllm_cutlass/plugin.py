"""Registers `vllm_cutlass` (standard format) and `batched_vllm_cutlass` (batched-experts format): vLLM's
compiled CUTLASS grouped fp8 GEMM for fp8 w8a8 MoE, CUDA sm90+.

The provider is one file, vLLM's ``_C`` ops library (:mod:`moe_core_vllm_cutlass.library`); the glue is
this plugin's own. On the real machine the backends are supported only where that file is found; a
simulated platform stands for a machine with it when it lists the ``vllm`` package. LoRA is refused by
the declaration (``supports_lora=False``), with the core's reason.

Priority: the seeds' fp8 order (FP8_ORDER in tests/parity/seed_backends.py) is ... > deepgemm >
batched_deepgemm > vllm_cutlass > batched_vllm_cutlass > triton > triton_batched > marlin > xpu, ten
apart; triton holds 500, so `batched_vllm_cutlass` takes 510 and `vllm_cutlass` 520 (above triton,
below the DeepGEMM plugin's 700/690). The seeds rank vllm_cutlass in nvfp4 too (960 there), but this
plugin binds only the fp8 GEMM, so it claims no nvfp4 scheme.
"""

from __future__ import annotations

import torch

from moe_core.config import ActivationFormat
from moe_core.hookspecs import backend_hooks, hookimpl
from moe_core.platform import DeviceKind
from moe_core.quant import QuantFamily, scheme
from moe_core.spec import BackendSpec, Validation
from moe_core.support import Support

from moe_core_vllm_cutlass import library
from moe_core_vllm_cutlass.contract import MIN_CAPABILITY, SCHEMES

#: The seeds' fp8 order puts vllm_cutlass two steps of ten above triton (500), batched_vllm_cutlass one.
FP8_PRIORITY = 520
BATCHED_FP8_PRIORITY = 510
#: The CUTLASS sm90 grouped kernel loads 128 bits at a time: 16 fp8 values of A and B along K, 8 16-bit values of C.
K_MULTIPLE = 16
#: ``get_group_gemm_starts`` runs one thread per local expert in a single block.
MAX_LOCAL_EXPERTS = 1024

#: ``python -m moe_core_vllm_cutlass.gpu_check`` with the current glue: 38 of 40 checks passed (numerics of each scheme
#: in both formats at 1, 7, 333 and 4096 tokens, Mixtral-8x7B's intermediate size, hot experts, an expert map, gelu,
#: the clamp, graph replay, the robustness kit); the two that failed are refused by :data:`FAILED_ON_GPU`.
VALIDATION = Validation(
    hardware="NVIDIA H200", provider="vLLM 0.26.0 _C_stable_libtorch.abi3.so, torch 2.11.0+cu130, triton 3.6.0",
    date="2026-11-28", log="docs/benchmarks/raw/2026-11-28-vllm-cutlass-h200/rebuilt-glue/gpu_check.log",
)
#: (scheme, layer dtype) pairs whose GPU numerics failed, refused with what was measured until they pass.
FAILED_ON_GPU = {
    ("fp8-tensor-dyn", torch.float16): "its numerics failed on an NVIDIA H200 (2026-11-28: relative error 0.017 over the "
                                       "0.016 tolerance at 333 tokens, both formats)",
}

_COMMON = dict(
    family="vllm", schemes=[scheme(s) for s in SCHEMES], devices=frozenset({DeviceKind.CUDA}),
    supports_lora=False, applies_swiglu_clamp=True, supports_expert_map=True, validation=VALIDATION,
)

SPECS = [
    BackendSpec(
        name="vllm_cutlass", priority=FP8_PRIORITY, family_priorities={QuantFamily.FP8: FP8_PRIORITY},
        kernel="moe_core_vllm_cutlass.kernel:VllmCutlassKernel", formats=frozenset({ActivationFormat.STANDARD}),
        batched_variant="batched_vllm_cutlass",
        description="vLLM's compiled CUTLASS grouped fp8 GEMM with this plugin's glue (CUDA sm90+; fp8 per-tensor / per-channel w8a8)",
        **_COMMON,
    ),
    BackendSpec(
        name="batched_vllm_cutlass", priority=BATCHED_FP8_PRIORITY, family_priorities={QuantFamily.FP8: BATCHED_FP8_PRIORITY},
        kernel="moe_core_vllm_cutlass.kernel:VllmCutlassBatchedKernel", formats=frozenset({ActivationFormat.BATCHED_EXPERTS}),
        description="vLLM's compiled CUTLASS grouped fp8 GEMM for the batched-experts (expert-parallel) format",
        **_COMMON,
    ),
]


def _supports(backend, config, weight_key, activation_key, platform) -> Support:
    """The grouped GEMM's capability, dtype and alignment rules, and the library file."""
    reasons = []
    if platform.is_cuda() and not platform.has_capability(*MIN_CAPABILITY):
        cap = platform.capability
        have = f"sm_{cap[0]}{cap[1]}" if cap else "of unknown compute capability"
        reasons.append(f"vLLM's CUTLASS grouped fp8 GEMM needs compute capability {MIN_CAPABILITY[0]}.{MIN_CAPABILITY[1]}+ "
                       f"(cutlass_group_gemm_supported), this GPU is {have}; use triton")
    if config.dtype not in (torch.float16, torch.bfloat16):
        reasons.append(f"the CUTLASS MoE GEMM writes float16/bfloat16 only, not {config.dtype_name}; set the layer dtype to one of them")
    for name in ("hidden_size", "intermediate_size"):
        size = getattr(config, name)
        if size % K_MULTIPLE:
            reasons.append(f"{name}={size} is not a multiple of {K_MULTIPLE}, the CUTLASS kernel's fp8 alignment; pad it")
    if config.num_experts > MAX_LOCAL_EXPERTS:
        reasons.append(f"{config.num_experts} experts: the GEMM's per-expert set-up runs one thread per expert, at most {MAX_LOCAL_EXPERTS}")
    reasons += failed_on_gpu(config, weight_key, activation_key)
    reasons += library.LIBRARY.platform_reasons(platform)
    return Support.from_reasons(reasons)


def failed_on_gpu(config, weight_key, activation_key) -> list[str]:
    """The reasons of :data:`FAILED_ON_GPU` that apply to this layer."""
    return [f"{name} in {config.dtype_name}: {why}; use bfloat16, or triton"
            for (name, dtype), why in FAILED_ON_GPU.items()
            if config.dtype == dtype and (weight_key, activation_key) == (scheme(name).weight_key, scheme(name).activation_key)]


@hookimpl
def moe_core_doctor():
    """Which _C ops library this machine would load, its vLLM version, and whether its CUTLASS MoE ops match."""
    return library.LIBRARY.report_lines()


moe_core_backends, moe_core_supports = backend_hooks(SPECS, _supports)
