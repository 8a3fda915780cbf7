"""The machine a layer runs on: detected from torch, or a named preset to simulate one."""

from __future__ import annotations

import enum
import importlib.metadata
import importlib.util
from dataclasses import dataclass

from moe_core.errors import InvalidConfigError

#: Optional packages whose presence plugins commonly ask about.
OPTIONAL_PACKAGES = ("triton", "flashinfer", "deep_gemm", "aiter", "vllm")


class DeviceKind(enum.Enum):
    CUDA = "cuda"
    ROCM = "rocm"
    XPU = "xpu"
    CPU = "cpu"
    OTHER = "other"


@dataclass(frozen=True)
class Platform:
    """Device kind, compute capability, device name and importable optional packages.

    Injected into the resolver so that tests (and ``moe-core explain --platform``) can ask what an
    H100, B200 or MI300X would pick on any machine. ``capability`` is (major, minor) for CUDA and
    ROCm (gfx942 is reported as (9, 4), as torch does) and None elsewhere. ``arch`` is the ROCm
    architecture name (``"gfx942"``, ``"gfx950"``), empty elsewhere: two ROCm GPUs can share a
    capability tuple but not an instruction set.
    """

    kind: DeviceKind
    capability: tuple[int, int] | None = None
    device_name: str = ""
    packages: frozenset[str] = frozenset()
    simulated: bool = False
    arch: str = ""

    def __post_init__(self) -> None:
        if not isinstance(self.kind, DeviceKind):
            raise InvalidConfigError(f"Platform.kind must be a DeviceKind, got {self.kind!r}")
        if self.capability is not None:
            cap = tuple(self.capability)
            if len(cap) != 2 or not all(isinstance(v, int) and v >= 0 for v in cap):
                raise InvalidConfigError(f"Platform.capability must be (major, minor), got {self.capability!r}")
            object.__setattr__(self, "capability", cap)
        object.__setattr__(self, "packages", frozenset(self.packages))

    def is_cuda(self) -> bool:
        return self.kind is DeviceKind.CUDA

    def is_rocm(self) -> bool:
        return self.kind is DeviceKind.ROCM

    def is_cpu(self) -> bool:
        return self.kind is DeviceKind.CPU

    def is_gpu(self) -> bool:
        return self.kind in (DeviceKind.CUDA, DeviceKind.ROCM, DeviceKind.XPU)

    def has_capability(self, major: int, minor: int = 0) -> bool:
        """True when the compute capability is at least (major, minor)."""
        return self.capability is not None and self.capability >= (major, minor)

    def has_package(self, name: str) -> bool:
        return name in self.packages

    def describe(self) -> str:
        cap = f" sm_{self.capability[0]}{self.capability[1]}" if self.capability and self.is_cuda() else ""
        if self.is_rocm() and (self.arch or self.capability):
            cap = f" {self.arch}" if self.arch else f" gfx{self.capability[0]}{self.capability[1]}"
        sim = " (simulated)" if self.simulated else ""
        name = f" {self.device_name}" if self.device_name else ""
        return f"{self.kind.value}{cap}{name}{sim}"


def _importable(name: str) -> bool:
    try:
        return importlib.util.find_spec(name) is not None
    except (ImportError, ValueError):
        return False


def package_versions(package: str) -> str:
    """The installed distributions providing import package ``package``, as "name version, ..." ("" if none)."""
    names = sorted(set(importlib.metadata.packages_distributions().get(package, ())))
    return ", ".join(f"{name} {importlib.metadata.version(name)}" for name in names)


def detect() -> Platform:
    """The platform of this process, read from torch (CUDA, ROCm, XPU, else CPU)."""
    import torch

    packages = frozenset(p for p in OPTIONAL_PACKAGES if _importable(p))
    if torch.cuda.is_available():
        capability = tuple(torch.cuda.get_device_capability())
        name = torch.cuda.get_device_name()
        if getattr(torch.version, "hip", None):
            arch = getattr(torch.cuda.get_device_properties(), "gcnArchName", "").split(":")[0]
            return Platform(DeviceKind.ROCM, capability, name, packages, arch=arch)
        return Platform(DeviceKind.CUDA, capability, name, packages)
    xpu = getattr(torch, "xpu", None)
    if xpu is not None and xpu.is_available():
        return Platform(DeviceKind.XPU, None, xpu.get_device_name(), packages)
    return Platform(DeviceKind.CPU, None, "cpu", packages)


#: Simulated platforms. Packages are those an engine on that machine typically has installed.
PRESETS: dict[str, Platform] = {
    "h100": Platform(DeviceKind.CUDA, (9, 0), "NVIDIA H100 80GB HBM3", frozenset({"triton", "flashinfer", "deep_gemm"}), simulated=True),
    "h200": Platform(DeviceKind.CUDA, (9, 0), "NVIDIA H200", frozenset({"triton", "flashinfer", "deep_gemm"}), simulated=True),
    "b200": Platform(DeviceKind.CUDA, (10, 0), "NVIDIA B200", frozenset({"triton", "flashinfer", "deep_gemm"}), simulated=True),
    "a100": Platform(DeviceKind.CUDA, (8, 0), "NVIDIA A100-SXM4-80GB", frozenset({"triton", "flashinfer"}), simulated=True),
    "l40s": Platform(DeviceKind.CUDA, (8, 9), "NVIDIA L40S", frozenset({"triton", "flashinfer"}), simulated=True),
    "rtx5090": Platform(DeviceKind.CUDA, (12, 0), "NVIDIA GeForce RTX 5090", frozenset({"triton", "flashinfer"}), simulated=True),
    "t4": Platform(DeviceKind.CUDA, (7, 5), "Tesla T4", frozenset({"triton"}), simulated=True),
    "mi300x": Platform(DeviceKind.ROCM, (9, 4), "AMD Instinct MI300X", frozenset({"triton", "aiter"}), simulated=True, arch="gfx942"),
    "mi355x": Platform(DeviceKind.ROCM, (9, 5), "AMD Instinct MI355X", frozenset({"triton", "aiter"}), simulated=True, arch="gfx950"),
    "xpu": Platform(DeviceKind.XPU, None, "Intel Data Center GPU Max", frozenset(), simulated=True),
    "cpu": Platform(DeviceKind.CPU, None, "cpu", frozenset(), simulated=True),
}


def preset(name: str) -> Platform:
    """A simulated platform by name; the error lists every preset."""
    try:
        return PRESETS[name.lower()]
    except KeyError:
        raise InvalidConfigError(f"unknown platform preset {name!r}; valid presets: {', '.join(PRESETS)}") from None
