"""Test-only plugin: every backend the four seed oracles name, with the seeds' per-family orders.

Whether a backend supports a scenario is data (the ``supported`` set), as the seeds' kernels'
``is_supported_config`` would answer; the declared formats, LoRA and clamp capabilities are the
seeds' too.
"""

from __future__ import annotations

from moe_core.config import ActivationFormat
from moe_core.hookspecs import hookimpl
from moe_core.platform import DeviceKind
from moe_core.quant import SCHEMES, QuantFamily
from moe_core.spec import BackendSpec
from moe_core.support import Support
from moe_core.testing.fakes import FakeKernel

FP8_ORDER = ["aiter", "flashinfer_trtllm", "flashinfer_cutlass", "deepgemm", "batched_deepgemm", "vllm_cutlass",
             "batched_vllm_cutlass", "triton", "triton_batched", "marlin", "xpu"]
NVFP4_ORDER = ["flashinfer_trtllm", "flashinfer_cutedsl", "flashinfer_cutedsl_batched", "flashinfer_cutlass", "vllm_cutlass", "marlin", "emulation"]
INT8_ORDER = ["triton"]
UNQUANTIZED_ORDER = ["flashinfer_trtllm", "flashinfer_cutlass", "aiter", "triton", "xpu", "cpu_native"]
ORDERS = {QuantFamily.FP8: FP8_ORDER, QuantFamily.NVFP4: NVFP4_ORDER, QuantFamily.INT8: INT8_ORDER, QuantFamily.UNQUANTIZED: UNQUANTIZED_ORDER}
MANUAL = {"flashinfer_b12x": QuantFamily.NVFP4}

BATCHED = {"batched_deepgemm", "batched_vllm_cutlass", "triton_batched", "flashinfer_cutedsl_batched"}
BATCHED_VARIANT = {"deepgemm": "batched_deepgemm", "vllm_cutlass": "batched_vllm_cutlass", "triton": "triton_batched",
                   "flashinfer_cutedsl": "flashinfer_cutedsl_batched"}
LORA = {"triton"}
CLAMP = {"flashinfer_trtllm", "triton"}
FAMILY = {"aiter": "aiter", "xpu": "xpu", "cpu_native": "cpu", "marlin": "marlin", "emulation": "emulation", "triton": "triton",
          "triton_batched": "triton", "deepgemm": "deepgemm", "batched_deepgemm": "deepgemm", "vllm_cutlass": "vllm",
          "batched_vllm_cutlass": "vllm"}
DEVICES = {"aiter": {DeviceKind.ROCM}, "xpu": {DeviceKind.XPU}, "cpu_native": {DeviceKind.CPU}}


def _specs() -> list[BackendSpec]:
    names = sorted({n for order in ORDERS.values() for n in order} | set(MANUAL))
    specs = []
    for name in names:
        families = {f: 2000 - 10 * order.index(name) for f, order in ORDERS.items() if name in order}
        if name in MANUAL:
            families[MANUAL[name]] = 1
        schemes = [s for s in SCHEMES if s.family in families]
        specs.append(BackendSpec(
            name=name, family=FAMILY.get(name, "flashinfer"), priority=0, family_priorities=families, schemes=schemes,
            kernel=FakeKernel, formats={ActivationFormat.BATCHED_EXPERTS if name in BATCHED else ActivationFormat.STANDARD},
            devices=DEVICES.get(name, set(DeviceKind)), supports_lora=name in LORA, applies_swiglu_clamp=name in CLAMP,
            auto_select=name not in MANUAL, batched_variant=BATCHED_VARIANT.get(name),
        ))
    return specs


SPECS = _specs()


class SeedPlugin:
    """Registers the seed backends; ``supported`` says which accept the scenario."""

    def __init__(self, supported: set[str]):
        self.supported = set(supported)

    @hookimpl
    def moe_core_backends(self):
        return SPECS

    @hookimpl
    def moe_core_supports(self, backend):
        return Support.yes() if backend.name in self.supported else Support.no("the scenario says this kernel does not support the configuration")
