"""Lazy access to the ``aiter`` package, through the records of :mod:`moe_core_aiter.contract`."""

from __future__ import annotations

from typing import Any

from moe_core.provider import Provider, ProviderUnavailableError
from moe_core_aiter.contract import ENUM_MODULE

INSTALL_HINT = (
    "install AMD's AITER on the ROCm machine: `git clone --recursive https://github.com/ROCm/aiter && "
    "cd aiter && python3 setup.py develop` (needs ROCm and a ROCm build of PyTorch; see the ROCm/aiter README)"
)


class AiterUnavailableError(ProviderUnavailableError):
    """The ``aiter`` package (or one of the modules the binding uses) does not import in this process."""


PROVIDER = Provider("aiter", "the aiter package", INSTALL_HINT, AiterUnavailableError)
function = PROVIDER.function


def enum_member(enum_name: str, member: str) -> Any:
    """A member of one of AITER's enums (``ActivationType``, ``QuantType``)."""
    return getattr(getattr(PROVIDER.module(ENUM_MODULE), enum_name), member)


def fp8_dtype() -> Any:
    """``aiter.dtypes.fp8``: the fp8 dtype AITER's kernels take on this GPU (e4m3fnuz on gfx942)."""
    return PROVIDER.module("aiter.utility.dtypes").fp8
