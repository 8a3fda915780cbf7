"""Compiled torch ops libraries of a vLLM wheel, found without importing vLLM and loaded lazily.

A plugin that calls ops a vLLM wheel compiles (``vllm/_moe_C_stable_libtorch.abi3.so``,
``vllm/_C_stable_libtorch.abi3.so``, ...) describes the file once as an :class:`OpsLibrary`: its file
name, the torch namespace its ops register under, the environment variable that may point at it, the
vLLM release the schemas were read from, and one :class:`OpContract` per op it calls.

Where the file is looked for, in order: the path the library's environment variable names, else
``<vllm package directory>/<file>`` of an installed vLLM (located with ``importlib.util.find_spec``,
which does not run vLLM's ``__init__``). :meth:`OpsLibrary.ops` loads it (``torch.ops.load_library``)
once, at a plugin's first forward and never during selection, then compares every recorded schema
with the one the library registers and refuses a library that differs, naming the op.
"""

from __future__ import annotations

import functools
import importlib.metadata
import importlib.util
import os
from dataclasses import dataclass
from pathlib import Path

import torch

from moe_core.provider import ProviderUnavailableError


#: A doctor report names every op of a library up to this many (vLLM's _moe_C), else only the contract's (vLLM's _C has hundreds).
MAX_LISTED_OPS = 40


class OpsLibraryUnavailableError(ProviderUnavailableError):
    """A compiled ops library is not here, does not load, or registers ops other than its contract's."""


@dataclass(frozen=True)
class OpContract:
    """One op of a library: its namespace, name and schema as the library registers it (without the namespace)."""

    namespace: str
    name: str
    schema: str

    @property
    def qualname(self) -> str:
        return f"{self.namespace}::{self.name}"

    def parsed(self) -> "torch._C.FunctionSchema":
        """The recorded schema, parsed by torch's own schema parser."""
        return torch._C.parse_schema(f"{self.namespace}::{self.schema}")

    def signature(self) -> tuple:
        """What a caller relies on, from :meth:`parsed`: see :func:`schema_signature`."""
        return schema_signature(self.parsed())

    def argument_names(self) -> list[str]:
        return [a.name for a in self.parsed().arguments]


def schema_signature(schema: "torch._C.FunctionSchema") -> tuple:
    """An op's calling contract: per argument (name, type, written-to, default), then the return types.

    Alias-set names (``Tensor(a!)`` against ``Tensor($0!)``) differ between a parsed text and a
    registered op and mean nothing to a caller, so only whether an argument is written is kept.
    """
    def argument(a) -> tuple:
        writes = a.alias_info is not None and a.alias_info.is_write
        return (a.name, str(a.type), writes, repr(a.default_value) if a.has_default_value() else None)

    return tuple(argument(a) for a in schema.arguments), tuple(str(r.type) for r in schema.returns)


@dataclass(frozen=True)
class LibraryLocation:
    """Where the library file is and where that answer came from; ``vllm_version`` when an installed vLLM holds it."""

    path: Path
    source: str
    vllm_version: str | None = None


@dataclass(frozen=True)
class OpsLibrary:
    """One compiled ops file of a vLLM wheel, as a plugin relies on it.

    Attributes:
        title: what the file is, for messages ("vLLM's Marlin MoE ops library").
        backend: the backend that needs it, for messages.
        file: the file name inside the vLLM package.
        namespace: the ``torch.ops`` namespace its ops register under.
        variable: the environment variable that may name the file (declared in :mod:`moe_core.env`).
        vllm_version: the vLLM release the schemas were read from.
        ops: every op the plugin calls; each must be registered with exactly this schema.
        error: the typed error raised when the library cannot be used (a subclass of
            :class:`OpsLibraryUnavailableError`).
        runtime_note: what loading the file needs besides torch, for the how-to-get text.
    """

    title: str
    backend: str
    file: str
    namespace: str
    variable: str
    vllm_version: str
    ops: tuple[OpContract, ...]
    error: type = OpsLibraryUnavailableError
    runtime_note: str = "it needs torch 2.11 and libcudart.so.13"

    def how_to_get(self) -> str:
        v = self.vllm_version
        return (
            f"take it from the vLLM {v} wheel: `pip download --no-deps vllm=={v}` then "
            f"`unzip -j vllm-{v}-*.whl vllm/{self.file} -d <dir>` and set {self.variable}=<dir>/{self.file} "
            f"({self.runtime_note}); or install vllm=={v}, whose package holds the file"
        )

    def locate(self, environ=None) -> LibraryLocation | None:
        """The library file this process would load, or None (cheap: no import of vLLM, no loading)."""
        environ = os.environ if environ is None else environ
        given = environ.get(self.variable, "").strip()
        if given:
            path = Path(given).expanduser()
            return LibraryLocation(path, self.variable) if path.is_file() else None
        try:
            spec = importlib.util.find_spec("vllm")
        except (ImportError, ValueError):
            return None
        for folder in (spec.submodule_search_locations or ()) if spec else ():
            path = Path(folder) / self.file
            if path.is_file():
                return LibraryLocation(path, "installed vLLM", _vllm_version())
        return None

    def missing_reason(self, environ=None) -> str:
        """Why :meth:`locate` finds nothing, with how to get the file."""
        environ = os.environ if environ is None else environ
        given = environ.get(self.variable, "").strip()
        where = f"{self.variable}={given} is not a file" if given else f"{self.variable} is unset and no installed vLLM holds it"
        return f"{self.title} ({self.file}) is not here: {where}. To fix it, {self.how_to_get()}"

    def platform_reasons(self, platform) -> list[str]:
        """Why ``platform`` lacks the library, for a plugin's supports(): on the real machine the file must be found
        (CUDA only); a simulated platform stands for a machine with it when it lists the ``vllm`` package."""
        if platform.simulated:
            return [] if platform.has_package("vllm") else [f"vllm not importable on this simulated platform (it stands for {self.title})"]
        if not platform.is_cuda() or self.locate() is not None:
            return []
        return [self.missing_reason()]

    def print_report(self) -> int:
        """Print :meth:`report_lines` (a plugin's ``python -m`` entry); exit status 0."""
        for line in self.report_lines():
            print(line)
        return 0

    def schema_mismatches(self, ops_namespace) -> list[str]:
        """One sentence per contract op that ``ops_namespace`` lacks or registers with another schema."""
        problems = []
        for op in self.ops:
            packet = getattr(ops_namespace, op.name, None)
            if packet is None:
                problems.append(f"{op.qualname} is not registered")
                continue
            if schema_signature(packet.default._schema) != op.signature():
                problems.append(f"{op.qualname} is registered as `{packet.default._schema}`, the contract records `{op.parsed()}`")
        return problems

    def ops_namespace(self) -> object:
        """``torch.ops.<namespace>`` with the library loaded and checked; :attr:`error` when it cannot be."""
        location = self.locate()
        if location is None:
            raise self.error(f"the {self.backend} backend needs {self.missing_reason()}")
        return _load(self, str(location.path))

    def registered_ops(self) -> list[str]:
        """The ops registered under the library's namespace in this process (after :meth:`ops_namespace`)."""
        prefix = f"{self.namespace}::"
        return sorted(name[len(prefix):] for name in torch._C._dispatch_get_all_op_names() if name.startswith(prefix))

    def report_lines(self) -> list[str]:
        """For ``moe-core doctor``: the file and where it was found, its vLLM version, and (where it loads) its ops."""
        location = self.locate()
        if location is None:
            return [self.missing_reason()]
        version = location.vllm_version or f"not recorded with the file (the contract was read from vLLM {self.vllm_version})"
        out = [f"ops library: {location.path} (from {location.source})", f"vLLM version: {version}"]
        try:
            self.ops_namespace()
        except OpsLibraryUnavailableError as exc:
            return out + [f"not usable: {exc}"]
        names = self.registered_ops()
        listed = f": {', '.join(names)}" if len(names) <= MAX_LISTED_OPS else f" (the contract's: {', '.join(op.name for op in self.ops)})"
        out.append(f"registers {len(names)} ops under torch.ops.{self.namespace}{listed}")
        out.append(f"schemas of {', '.join(op.name for op in self.ops)} match the contract (vLLM {self.vllm_version})")
        return out


@functools.lru_cache(maxsize=None)
def _load(library: OpsLibrary, path: str) -> object:
    """Load ``path`` once and return ``torch.ops.<namespace>``, checked against ``library``'s contract."""
    try:
        torch.ops.load_library(path)
    except OSError as exc:
        raise library.error(f"the {library.backend} backend could not load {path}: {exc}. {library.how_to_get()}") from exc
    namespace = getattr(torch.ops, library.namespace)
    problems = library.schema_mismatches(namespace)
    if problems:
        raise library.error(
            f"{path} is not the {library.title} this plugin was written against (vLLM {library.vllm_version}): "
            + "; ".join(problems) + f". To fix it, {library.how_to_get()}"
        )
    return namespace


def _vllm_version() -> str | None:
    try:
        return importlib.metadata.version("vllm")
    except importlib.metadata.PackageNotFoundError:
        return None
