"""Lazy access to the ``aiter`` package, through the records of :mod:`moe_core_aiter.contract`."""

from __future__ import annotations

import importlib
from typing import Any, Callable

from moe_core.errors import MoECoreError
from moe_core_aiter.contract import ENUM_MODULE, FunctionContract

INSTALL_HINT = (
    "install AMD's AITER on the ROCm machine: `git clone --recursive https://github.com/ROCm/aiter && "
    "cd aiter && python3 setup.py develop` (needs ROCm and a ROCm build of PyTorch; see the ROCm/aiter README)"
)


class AiterUnavailableError(MoECoreError, ImportError):
    """The ``aiter`` package (or one of the modules the binding uses) does not import in this process."""


def _import(module: str) -> Any:
    try:
        return importlib.import_module(module)
    except ImportError as exc:
        raise AiterUnavailableError(f"the aiter backend needs the aiter package; {module} failed to import ({exc}). To fix it, {INSTALL_HINT}") from exc


def function(contract: FunctionContract) -> Callable[..., Any]:
    """The provider function a contract names, importing its module on first use."""
    return getattr(_import(contract.module), contract.name)


def enum_member(enum_name: str, member: str) -> Any:
    """A member of one of AITER's enums (``ActivationType``, ``QuantType``)."""
    return getattr(getattr(_import(ENUM_MODULE), enum_name), member)


def fp8_dtype() -> Any:
    """``aiter.dtypes.fp8``: the fp8 dtype AITER's kernels take on this GPU (e4m3fnuz on gfx942)."""
    return _import("aiter.utility.dtypes").fp8
