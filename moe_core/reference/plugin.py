"""The reference backend's plugin module, registered by the core like any other plugin."""

from __future__ import annotations

from moe_core.config import ActivationFormat
from moe_core.hookspecs import hookimpl
from moe_core.platform import DeviceKind
from moe_core.quant import SCHEMES
from moe_core.reference.kernel import BACKEND_NAME
from moe_core.spec import BackendSpec, Validation

#: Lowest priority: any real kernel that supports a layer outranks the oracle.
REFERENCE_PRIORITY = 0

SPEC = BackendSpec(
    name=BACKEND_NAME,
    family="torch",
    priority=REFERENCE_PRIORITY,
    schemes=SCHEMES,
    kernel="moe_core.reference.kernel:ReferenceKernel",
    formats=frozenset(ActivationFormat),
    devices=frozenset({DeviceKind.CPU, DeviceKind.CUDA, DeviceKind.ROCM, DeviceKind.XPU}),
    supports_lora=False,
    applies_swiglu_clamp=True,
    supports_expert_map=True,
    description="torch reference: dequantize and compute in float32 (numerics oracle; slow)",
    validation=Validation(
        hardware="x86-64 CPU, against an independent float64 loop", provider="torch 2.13.0+cpu", date="2026-11-23",
        log="tests/test_reference.py (every CI run)",
    ),
)


@hookimpl
def moe_core_backends():
    return [SPEC]
