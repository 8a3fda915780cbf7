"""Lazy access to vLLM's Marlin MoE functions, through the records of :mod:`moe_core_marlin.contract`."""

from __future__ import annotations

import importlib
from typing import Any, Callable

from moe_core.errors import MoECoreError
from moe_core_marlin.contract import SCALAR_TYPES_ATTR, SCALAR_TYPES_MODULE, FunctionContract

INSTALL_HINT = (
    "install vLLM built for this CUDA and torch (`pip install vllm`, or `pip install moe-core-marlin[vllm]`); "
    "its compiled _C/_moe_C extensions provide the Marlin MoE ops"
)


class MarlinUnavailableError(MoECoreError, ImportError):
    """vLLM (or one of the modules the binding uses) does not import in this process."""


def _import(module: str) -> Any:
    try:
        return importlib.import_module(module)
    except ImportError as exc:
        raise MarlinUnavailableError(f"the marlin backend needs vLLM; {module} failed to import ({exc}). To fix it, {INSTALL_HINT}") from exc


def function(contract: FunctionContract) -> Callable[..., Any]:
    """The provider function a contract names, importing its module on first use."""
    return getattr(_import(contract.module), contract.name)


def scalar_type_id(name: str) -> int:
    """``vllm.scalar_type.scalar_types.<name>.id``: the ``quant_type_id`` fused_marlin_moe takes."""
    return getattr(getattr(_import(SCALAR_TYPES_MODULE), SCALAR_TYPES_ATTR), name).id
