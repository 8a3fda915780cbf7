"""Typed errors. Every message says what went wrong and what the user can do next."""

from __future__ import annotations

from typing import Iterable


class MoECoreError(Exception):
    """Base class of every error moe-core raises on purpose."""


class InvalidConfigError(MoECoreError, ValueError):
    """A config, key or spec was constructed with invalid values."""


class InvalidEnvironmentError(MoECoreError, ValueError):
    """An environment variable holds a value moe-core cannot use."""

    def __init__(self, variable: str, value: str, problem: str, valid: Iterable[str] = ()):
        self.variable = variable
        self.value = value
        self.valid = tuple(valid)
        hint = f" Valid values: {', '.join(self.valid)}." if self.valid else ""
        super().__init__(f"{variable}={value!r}: {problem}.{hint} Fix or unset {variable}.")


class UnknownBackendError(MoECoreError, ValueError):
    """A backend name that no installed plugin registers."""

    def __init__(self, name: str, valid: Iterable[str], where: str = "moe_backend", kind: str = "MoE backend"):
        self.name = name
        self.valid = tuple(sorted(valid))
        super().__init__(
            f"{where}={name!r} is not a registered {kind}. Registered {kind.split()[-1]}s: "
            f"{', '.join(self.valid) or '(none)'}. Install the plugin that provides it "
            "(see `moe-core list`) or pick one of these."
        )


class BackendUnsupportedError(MoECoreError, ValueError):
    """An explicitly requested (or environment-forced) backend cannot run this layer."""

    def __init__(self, name: str, source: str, reasons: Iterable[str], table: str, kind: str = "MoE backend"):
        self.name = name
        self.source = source
        self.reasons = tuple(reasons)
        why = "; ".join(self.reasons) or "no reason given"
        super().__init__(
            f"{kind} {name!r} ({source}) does not support this layer since {why}.\n{table}\n"
            "Drop the request to let moe-core choose, or change the layer configuration."
        )


class NoBackendError(MoECoreError, NotImplementedError):
    """No candidate backend supports the layer (the seeds raise NotImplementedError here too)."""

    #: What to do next, for the experts backends MOE_CORE_DISABLE / MOE_CORE_ONLY filter.
    ADVICE = "Install a plugin that supports it, relax MOE_CORE_DISABLE / MOE_CORE_ONLY, or change the layer."

    def __init__(self, summary: str, table: str, subject: str = "MoE backend", advice: str = ADVICE):
        self.table = table
        super().__init__(f"No {subject} supports the deployment configuration ({summary}).\n{table}\n{advice}")


class KernelInputError(MoECoreError, ValueError):
    """An argument handed to a kernel has the wrong shape, dtype, device or value."""

    def __init__(self, argument: str, problem: str):
        self.argument = argument
        super().__init__(f"{argument}: {problem}")


class RankingFileError(MoECoreError, ValueError):
    """A measured-ranking file is malformed."""
