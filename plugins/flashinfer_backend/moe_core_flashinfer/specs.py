"""The backends this plugin declares: one :class:`~moe_core.spec.BackendSpec` each, with its priorities,
schemes (the bindings of :mod:`moe_core_flashinfer.contract`) and kernel class.

Kept apart from :mod:`moe_core_flashinfer.plugin` (which registers them and answers ``supports()``) so that
:mod:`moe_core_flashinfer.report` can list them without importing the plugin whose doctor hook calls it.
"""

from __future__ import annotations

from moe_core.config import ActivationFormat
from moe_core.platform import DeviceKind
from moe_core.quant import QuantFamily, scheme
from moe_core.spec import NOT_VALIDATED, BackendSpec, Validation

from moe_core_flashinfer.contract import BINDINGS

_COMMON = dict(family="flashinfer", devices=frozenset({DeviceKind.CUDA}), requires=frozenset({"flashinfer"}), supports_lora=False,
               supports_expert_map=True)  # the kernel maps global ids to local ones and zeroes remote pairs


def _spec(name: str, priority: int, families: dict, description: str, **kw) -> BackendSpec:
    return BackendSpec(
        name=name, priority=priority, family_priorities=families, schemes=[scheme(s) for s in BINDINGS[name]],
        kernel=f"moe_core_flashinfer.kernel:{KERNELS[name]}", description=description, validation=kw.pop("validation", NOT_VALIDATED),
        **_COMMON, **kw,
    )


KERNELS = {
    "flashinfer_trtllm": "TrtllmKernel", "flashinfer_cutlass": "CutlassKernel", "flashinfer_cutedsl": "CuteDslKernel",
    "flashinfer_cutedsl_batched": "BatchedCuteDslKernel", "flashinfer_b12x": "B12xKernel", "flashinfer_cutile": "CuTileKernel",
}

SPECS = [
    _spec("flashinfer_trtllm", 1000, {QuantFamily.FP8: 1000, QuantFamily.NVFP4: 1000, QuantFamily.UNQUANTIZED: 1995},
          "FlashInfer TRT-LLM-gen routed MoE (bf16, fp8 block/per-tensor, nvfp4; Blackwell)", applies_swiglu_clamp=True),
    _spec("flashinfer_cutlass", 990, {QuantFamily.FP8: 990, QuantFamily.NVFP4: 970, QuantFamily.UNQUANTIZED: 1990},
          "FlashInfer CUTLASS fused MoE (bf16, fp8 per-tensor, nvfp4; JIT-built with nvcc)"),
    _spec("flashinfer_cutedsl", 990, {QuantFamily.NVFP4: 990}, "FlashInfer CuTe-DSL nvfp4 fused MoE (Blackwell)",
          batched_variant="flashinfer_cutedsl_batched"),
    _spec("flashinfer_cutedsl_batched", 980, {QuantFamily.NVFP4: 980},
          "FlashInfer CuTe-DSL nvfp4 MoE on the batched-experts (expert-parallel) format",
          formats=frozenset({ActivationFormat.BATCHED_EXPERTS})),
    _spec("flashinfer_b12x", 100, {QuantFamily.NVFP4: 100}, "FlashInfer b12x nvfp4 MoE for sm_120/121 (opt-in: request it by name)",
          auto_select=False),
    _spec("flashinfer_cutile", 480, {QuantFamily.UNQUANTIZED: 480, QuantFamily.FP8: 480},
          "FlashInfer cuTile fused MoE (bf16, fp8 per-tensor; compiled by cuda-tile's tileiras, sm_89/90/120/121)",
          applies_swiglu_clamp=True, validation=Validation(
              hardware="NVIDIA H100 80GB HBM3",
              provider="flashinfer-python 0.7.2.post1, cuda-tile 1.7.0 with tileiras/ptxas/libnvvm 13.4.92, torch 2.11.0+cu130",
              date="2026-11-23", log="docs/benchmarks/raw/2026-11-23-plugins-and-host/flashinfer_gpu_tests.log")),
]
