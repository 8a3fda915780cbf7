"""The provider: vLLM's compiled ``_C`` ops library, described for :mod:`moe_core.ops_library`.

Where it is looked for, in order: the file :data:`moe_core.env.VLLM_CUTLASS_OPS_LIBRARY` names, else
``<vllm package directory>/_C_stable_libtorch.abi3.so`` of an installed vLLM (found without importing
vLLM). ``LIBRARY.ops_namespace()`` loads it at the first forward, never during selection, and refuses a
library whose ops differ from the schemas :mod:`moe_core_vllm_cutlass.contract` records.
"""

from __future__ import annotations

from moe_core.env import VLLM_CUTLASS_OPS_LIBRARY
from moe_core.ops_library import OpsLibrary, OpsLibraryUnavailableError
from moe_core_vllm_cutlass import contract


class VllmCutlassUnavailableError(OpsLibraryUnavailableError):
    """vLLM's _C ops library is not here, does not load, or registers ops other than the contract's."""


LIBRARY = OpsLibrary(
    title="vLLM's compiled ops library with the CUTLASS MoE GEMM", backend="vllm_cutlass", file=contract.LIBRARY_FILE,
    namespace=contract.NAMESPACE, variable=VLLM_CUTLASS_OPS_LIBRARY, vllm_version=contract.VLLM_VERSION, ops=contract.OPS,
    error=VllmCutlassUnavailableError,
)
