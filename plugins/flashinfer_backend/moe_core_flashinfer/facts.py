"""Facts only FlashInfer has (its ``supported(arch)`` answers, its limits), and the JIT toolchains here.

FlashInfer is imported lazily, through :data:`PROVIDER`, the first time a fact is needed; the
version is read from the distribution's metadata without importing it. Toolchain probes look at
this machine (PATH, importable modules), never at a GPU, and are cached for the process.
"""

from __future__ import annotations

import functools
import importlib.metadata
import importlib.util
import os
import shutil
from dataclasses import dataclass

from moe_core.provider import Provider, ProviderUnavailableError
from moe_core_flashinfer import contract

INSTALL_HINT = (
    f"install FlashInfer (`pip install 'flashinfer-python{contract.VERSION_RANGE}'`, which "
    "`pip install moe-core-flashinfer` pulls in); its kernels need an NVIDIA GPU"
)

#: Compute capabilities (major * 10 + minor) probed when a refusal lists where a config runs.
ARCH_SCAN = tuple(range(70, 131))


class FlashInferUnavailableError(ProviderUnavailableError):
    """FlashInfer (or a module of it this binding uses) does not import in this process."""


PROVIDER = Provider("flashinfer", f"flashinfer-python{contract.VERSION_RANGE}", INSTALL_HINT, FlashInferUnavailableError)


def version() -> str | None:
    """The installed flashinfer-python version, read without importing it (None when absent)."""
    try:
        return importlib.metadata.version(contract.FLASHINFER_DISTRIBUTION)
    except importlib.metadata.PackageNotFoundError:
        return None


def api():
    """``flashinfer.fused_moe.api`` (imports FlashInfer on first use; typed error when absent)."""
    return PROVIDER.module(contract.API_MODULE)


def config_class(name: str) -> type:
    """A backend config class of the unified API, e.g. ``CuTileBf16Config``."""
    return getattr(api(), name)


@functools.lru_cache(maxsize=None)
def supported(config: str, arch: int) -> bool:
    """FlashInfer's own ``<config>.supported(arch)``: does it ship this backend for ``sm_<arch>``."""
    return bool(config_class(config).supported(arch))


@functools.lru_cache(maxsize=None)
def supported_archs(config: str) -> tuple[int, ...]:
    """Every compute capability in :data:`ARCH_SCAN` for which FlashInfer says ``config`` runs."""
    return tuple(a for a in ARCH_SCAN if supported(config, a))


@functools.lru_cache(maxsize=None)
def trtllm_limits() -> tuple[int, int]:
    """(max top_k, max experts) of the TRT-LLM routed kernels, from FlashInfer's api module."""
    module = api()
    return tuple(int(getattr(module, name)) for name in contract.TRTLLM_LIMITS)


@functools.lru_cache(maxsize=None)
def cutile_activations() -> frozenset[str]:
    """Names of the ``ActivationType`` members cuTile's kernels implement."""
    return frozenset(a.name for a in getattr(api(), contract.CUTILE_ACTIVATIONS_ATTR))


def activation_type_name(activation_class: str) -> str:
    """The ``ActivationType`` member name behind a FlashInfer ActivationConfig class (``SwiGLU`` -> ``Swiglu``)."""
    return getattr(api(), activation_class).type.name


# ------------------------------------------------------------------ toolchains
@dataclass(frozen=True)
class Toolchain:
    """Whether one way FlashInfer gets its kernels works here, and what was found or is missing."""

    name: str
    usable: bool
    detail: str


def _has_module(name: str) -> bool:
    try:
        return importlib.util.find_spec(name) is not None
    except (ImportError, ValueError):
        return False


def _nvcc() -> Toolchain:
    if _has_module("flashinfer_jit_cache"):
        return Toolchain("nvcc", True, "prebuilt modules from flashinfer-jit-cache")
    found = shutil.which("nvcc") or _in_cuda_home("nvcc")
    if found:
        return Toolchain("nvcc", True, f"{found} (CUTLASS/TRT-LLM launcher modules JIT-build on first use; "
                                       "FlashInfer's sm_90 fused_moe module is 248 compile units)")
    return Toolchain("nvcc", False, "no nvcc on PATH or in $CUDA_HOME/bin, and flashinfer-jit-cache is not installed")


def _cubins() -> Toolchain:
    if _has_module("flashinfer_cubin"):
        return Toolchain("cubins", True, "TRT-LLM-gen cubins from flashinfer-cubin")
    return Toolchain("cubins", False, "flashinfer-cubin is not installed: TRT-LLM-gen cubins are downloaded on first use (needs network)")


def _cutlass_dsl() -> Toolchain:
    if _has_module("cutlass") and _has_module("cutlass.cute"):
        try:
            return Toolchain("cutlass-dsl", True, f"nvidia-cutlass-dsl {importlib.metadata.version('nvidia-cutlass-dsl')}")
        except importlib.metadata.PackageNotFoundError:
            return Toolchain("cutlass-dsl", True, "cutlass.cute importable")
    return Toolchain("cutlass-dsl", False, "nvidia-cutlass-dsl is not installed (`pip install nvidia-cutlass-dsl[cu13]`)")


def _cuda_tile() -> Toolchain:
    if not _has_module("cuda.tile"):
        return Toolchain("cuda-tile", False, "the cuda-tile package is not installed (`pip install cuda-tile[tileiras]`)")
    try:
        from flashinfer.cutile.cutile_common import _find_tileiras_binary  # FlashInfer's own search order
        tileiras = _find_tileiras_binary()
    except Exception as exc:  # noqa: BLE001 - FlashInfer absent or changed: say so
        return Toolchain("cuda-tile", False, f"cannot look for tileiras through FlashInfer ({type(exc).__name__}: {exc})")
    if tileiras is None:
        return Toolchain("cuda-tile", False, "cuda-tile is installed but its compiler tileiras is not (pip nvidia-cuda-tileiras, "
                                             "PATH or $CUDA_HOME/bin; CUDA 13.1+)")
    return Toolchain("cuda-tile", True, f"cuda-tile {importlib.metadata.version('cuda-tile')}, tileiras {tileiras}")


def _in_cuda_home(tool: str) -> str | None:
    home = os.environ.get("CUDA_HOME") or os.environ.get("CUDA_PATH") or "/usr/local/cuda"
    path = os.path.join(home, "bin", tool)
    return path if os.access(path, os.X_OK) else None


@functools.lru_cache(maxsize=None)
def toolchains() -> dict[str, Toolchain]:
    """Every toolchain a binding may need (:attr:`contract.Binding.toolchain` names them, joined by '+')."""
    return {t.name: t for t in (_nvcc(), _cubins(), _cutlass_dsl(), _cuda_tile())}


def missing_toolchains(binding: contract.Binding) -> list[str]:
    """Reasons a binding's toolchain is unusable here (empty when all of it works)."""
    found = toolchains()
    return [f"{found[name].name}: {found[name].detail}" for name in binding.toolchain.split("+") if not found[name].usable]
