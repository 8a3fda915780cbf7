"""Other moe-core plugins a plugin's code imports, declared as data and checked in one place.

A plugin that builds on another one (the DeepGEMM plugin runs the Triton plugin's quantization and glue
kernels) returns :class:`PluginRequirement` objects from its ``moe_core_requires`` hook. The registry checks
them once, when it registers the plugin (:func:`unmet`): while one does not import, every backend and
dispatcher of that plugin is unsupported with the reason, and ``moe-core doctor`` reports it as a problem,
so a missing sibling shows up where users look instead of as an ImportError at the first forward.
"""

from __future__ import annotations

import importlib.util
from dataclasses import dataclass
from typing import Iterable

from moe_core.errors import InvalidConfigError


@dataclass(frozen=True)
class PluginRequirement:
    """One moe-core plugin distribution that another plugin imports.

    ``distribution`` is its name for pip (``"moe-core-triton"``), ``module`` the package it imports
    (``"moe_core_triton"``), ``install`` the command that installs it (``"pip install ./plugins/triton_backend"``
    from a clone of moe-core).
    """

    distribution: str
    module: str
    install: str

    def __post_init__(self) -> None:
        for attr in ("distribution", "module", "install"):
            if not isinstance(getattr(self, attr), str) or not getattr(self, attr):
                raise InvalidConfigError(f"PluginRequirement.{attr} must be a non-empty string, got {getattr(self, attr)!r}")

    def importable(self) -> bool:
        try:
            return importlib.util.find_spec(self.module) is not None
        except (ImportError, ValueError):  # a parent package that fails to import, or a broken __spec__
            return False

    def reason(self) -> str:
        """What a user reads when it is missing: what is not installed and how to install it."""
        return f"{self.distribution} is not installed ({self.install})"


def unmet(requirements: Iterable[PluginRequirement]) -> tuple[str, ...]:
    """The reason of each requirement whose package does not import here, in declaration order."""
    return tuple(r.reason() for r in requirements if not r.importable())
