"""Registers the `acme` backend with moe-core (found through the `moe_core.plugins` entry point)."""

from moe_core import BackendSpec, DeviceKind, Support, hookimpl
from moe_core.quant import scheme

SPEC = BackendSpec(
    name="acme",
    family="acme",
    priority=50,  # above the reference backend (0), below real GPU kernels (100+)
    schemes=[scheme("unquantized"), scheme("fp8-channel")],
    kernel="acme_moe.kernel:AcmeKernel",  # imported only when selected
    devices={DeviceKind.CPU, DeviceKind.CUDA},
    description="ACME example kernel: weights dequantized once, GEMMs in the model dtype",
)


@hookimpl
def moe_core_backends():
    return [SPEC]


@hookimpl
def moe_core_supports(backend, config, platform):
    if backend.name != "acme":
        return None  # not ours: no opinion
    if config.hidden_size % 8:
        return Support.no(f"hidden_size must be a multiple of 8, got {config.hidden_size}")
    return Support.yes()
