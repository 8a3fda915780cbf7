"""The provider: vLLM's compiled Marlin MoE ops library, found without importing vLLM and loaded lazily.

Where it is looked for, in order: the file :data:`moe_core.env.MARLIN_OPS_LIBRARY` names, else
``<vllm package directory>/_moe_C_stable_libtorch.abi3.so`` of an installed vLLM (located through
``importlib.util.find_spec``, which does not run vLLM's ``__init__``). Loading
(``torch.ops.load_library``) happens at the first forward, never during selection; then every op
the binding calls must be registered with the schema :mod:`moe_core_marlin.contract` records.
"""

from __future__ import annotations

import functools
import importlib.metadata
import importlib.util
import os
from dataclasses import dataclass
from pathlib import Path

from moe_core.env import MARLIN_OPS_LIBRARY
from moe_core.provider import ProviderUnavailableError
from moe_core_marlin import contract

HOW_TO_GET = (
    f"take it from the vLLM {contract.VLLM_VERSION} wheel: `pip download --no-deps vllm=={contract.VLLM_VERSION}` then "
    f"`unzip -j vllm-{contract.VLLM_VERSION}-*.whl vllm/{contract.LIBRARY_FILE} -d <dir>` and set "
    f"{MARLIN_OPS_LIBRARY}=<dir>/{contract.LIBRARY_FILE} (it needs torch 2.11 and libcudart.so.13); or install "
    f"vllm=={contract.VLLM_VERSION}, whose package holds the file"
)


class MarlinUnavailableError(ProviderUnavailableError):
    """The Marlin ops library is not here, does not load, or registers ops other than the contract's."""


@dataclass(frozen=True)
class LibraryLocation:
    """Where the library file is and where that answer came from; ``vllm_version`` when an installed vLLM holds it."""

    path: Path
    source: str
    vllm_version: str | None = None


def locate(environ=None) -> LibraryLocation | None:
    """The library file this process would load, or None (cheap: no import of vLLM, no loading)."""
    environ = os.environ if environ is None else environ
    given = environ.get(MARLIN_OPS_LIBRARY, "").strip()
    if given:
        path = Path(given).expanduser()
        return LibraryLocation(path, MARLIN_OPS_LIBRARY) if path.is_file() else None
    try:
        spec = importlib.util.find_spec("vllm")
    except (ImportError, ValueError):
        return None
    for folder in (spec.submodule_search_locations or ()) if spec else ():
        path = Path(folder) / contract.LIBRARY_FILE
        if path.is_file():
            return LibraryLocation(path, "installed vLLM", _vllm_version())
    return None


def _vllm_version() -> str | None:
    try:
        return importlib.metadata.version("vllm")
    except importlib.metadata.PackageNotFoundError:
        return None


def missing_reason(environ=None) -> str:
    """Why :func:`locate` finds nothing, with how to get the file."""
    environ = os.environ if environ is None else environ
    given = environ.get(MARLIN_OPS_LIBRARY, "").strip()
    where = f"{MARLIN_OPS_LIBRARY}={given} is not a file" if given else f"{MARLIN_OPS_LIBRARY} is unset and no installed vLLM holds it"
    return f"vLLM's Marlin MoE ops library ({contract.LIBRARY_FILE}) is not here: {where}. To fix it, {HOW_TO_GET}"


def schema_mismatches(ops_namespace) -> list[str]:
    """One sentence per contract op that ``ops_namespace`` lacks or registers with another schema."""
    problems = []
    for op in contract.OPS:
        packet = getattr(ops_namespace, op.name, None)
        if packet is None:
            problems.append(f"{op.qualname} is not registered")
            continue
        have = contract.schema_signature(packet.default._schema)
        if have != op.signature():
            problems.append(f"{op.qualname} is registered as `{packet.default._schema}`, the contract records `{op.parsed()}`")
    return problems


@functools.lru_cache(maxsize=1)
def load(path: str) -> object:
    """Load the library at ``path`` once and return ``torch.ops._moe_C``, checked against the contract."""
    import torch

    try:
        torch.ops.load_library(path)
    except OSError as exc:
        raise MarlinUnavailableError(f"the marlin backend could not load {path}: {exc}. {HOW_TO_GET}") from exc
    namespace = getattr(torch.ops, contract.NAMESPACE)
    problems = schema_mismatches(namespace)
    if problems:
        raise MarlinUnavailableError(
            f"{path} is not the Marlin ops library this plugin was written against (vLLM {contract.VLLM_VERSION}): "
            + "; ".join(problems) + f". To fix it, {HOW_TO_GET}"
        )
    return namespace


def ops() -> object:
    """``torch.ops._moe_C`` with the library loaded and checked; :class:`MarlinUnavailableError` when it cannot be."""
    location = locate()
    if location is None:
        raise MarlinUnavailableError(f"the marlin backend needs {missing_reason()}")
    return load(str(location.path))


def registered_ops() -> list[str]:
    """The ops registered under the library's namespace in this process (after :func:`ops`)."""
    import torch

    prefix = f"{contract.NAMESPACE}::"
    return sorted(name[len(prefix):] for name in torch._C._dispatch_get_all_op_names() if name.startswith(prefix))
