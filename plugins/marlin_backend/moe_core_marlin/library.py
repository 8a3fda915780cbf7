"""The provider: vLLM's compiled Marlin MoE ops library, described for :mod:`moe_core.ops_library`.

Where it is looked for, in order: the file :data:`moe_core.env.MARLIN_OPS_LIBRARY` names, else
``<vllm package directory>/_moe_C_stable_libtorch.abi3.so`` of an installed vLLM (found without
importing vLLM). ``LIBRARY.ops_namespace()`` loads it at the first forward, never during selection,
and refuses a library whose ops differ from the schemas :mod:`moe_core_marlin.contract` records.
"""

from __future__ import annotations

from moe_core.env import MARLIN_OPS_LIBRARY
from moe_core.ops_library import OpsLibrary, OpsLibraryUnavailableError
from moe_core_marlin import contract


class MarlinUnavailableError(OpsLibraryUnavailableError):
    """The Marlin ops library is not here, does not load, or registers ops other than the contract's."""


LIBRARY = OpsLibrary(
    title="vLLM's Marlin MoE ops library", backend="marlin", file=contract.LIBRARY_FILE, namespace=contract.NAMESPACE,
    variable=MARLIN_OPS_LIBRARY, vllm_version=contract.VLLM_VERSION, ops=contract.OPS, error=MarlinUnavailableError,
)
