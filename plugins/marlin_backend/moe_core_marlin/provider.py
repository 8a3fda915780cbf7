"""Lazy access to vLLM's Marlin MoE functions, through the records of :mod:`moe_core_marlin.contract`."""

from __future__ import annotations

from moe_core.provider import Provider, ProviderUnavailableError
from moe_core_marlin.contract import SCALAR_TYPES_ATTR, SCALAR_TYPES_MODULE

INSTALL_HINT = (
    "install vLLM built for this CUDA and torch (`pip install vllm`, or `pip install './plugins/marlin_backend[vllm]'` from a clone of moe-core); "
    "its compiled _C/_moe_C extensions provide the Marlin MoE ops"
)


class MarlinUnavailableError(ProviderUnavailableError):
    """vLLM (or one of the modules the binding uses) does not import in this process."""


PROVIDER = Provider("marlin", "vLLM", INSTALL_HINT, MarlinUnavailableError)
function = PROVIDER.function


def scalar_type_id(name: str) -> int:
    """``vllm.scalar_type.scalar_types.<name>.id``: the ``quant_type_id`` fused_marlin_moe takes."""
    return getattr(getattr(PROVIDER.module(SCALAR_TYPES_MODULE), SCALAR_TYPES_ATTR), name).id
