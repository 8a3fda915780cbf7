"""Bindings to kernel libraries moe-core does not ship (AITER, vLLM's Marlin ops, ...).

A binding plugin records each provider function it calls as a :class:`FunctionContract` — module,
name, parameters in order — read from the provider's source at a named commit, and reaches the
functions only through a :class:`Provider`, which imports lazily (selection never imports a
provider) and turns a missing package into a typed error that says how to install it. Tests build
fakes with exactly the recorded signatures (:meth:`FunctionContract.signature`) and check that
every call the binding makes binds to them.
"""

from __future__ import annotations

import importlib
import inspect
from dataclasses import dataclass
from typing import Any, Callable

from moe_core.errors import MoECoreError


@dataclass(frozen=True)
class FunctionContract:
    """One provider function: where it lives and its parameter names, in order.

    The first ``required`` parameters have no default; the rest do.
    """

    module: str
    name: str
    parameters: tuple[str, ...]
    required: int

    @property
    def qualname(self) -> str:
        return f"{self.module}.{self.name}"

    def signature(self) -> inspect.Signature:
        """The recorded signature: required parameters first, the rest defaulting to None."""
        kind = inspect.Parameter.POSITIONAL_OR_KEYWORD
        return inspect.Signature([
            inspect.Parameter(name, kind) if i < self.required else inspect.Parameter(name, kind, default=None)
            for i, name in enumerate(self.parameters)
        ])


class ProviderUnavailableError(MoECoreError, ImportError):
    """A backend's provider package (or one of its modules) does not import in this process."""


@dataclass(frozen=True)
class Provider:
    """Lazy access to one provider package for one backend.

    ``requirement`` names what is needed in words ("vLLM", "the aiter package"); ``install_hint``
    says how to get it; ``error`` is the backend's own :class:`ProviderUnavailableError` subclass.
    """

    backend: str
    requirement: str
    install_hint: str
    error: type[ProviderUnavailableError] = ProviderUnavailableError

    def module(self, name: str) -> Any:
        """Import ``name`` from the provider, or raise :attr:`error` saying how to install it."""
        try:
            return importlib.import_module(name)
        except ImportError as exc:
            raise self.error(
                f"the {self.backend} backend needs {self.requirement}; {name} failed to import ({exc}). To fix it, {self.install_hint}"
            ) from exc

    def function(self, contract: FunctionContract) -> Callable[..., Any]:
        """The provider function a contract names, importing its module on first use."""
        return getattr(self.module(contract.module), contract.name)
