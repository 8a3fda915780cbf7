"""DispatchSpec: what a plugin declares about one dispatch/combine backend of expert parallelism."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from moe_core.config import ActivationFormat
from moe_core.errors import InvalidConfigError
from moe_core.platform import DeviceKind
from moe_core.spec import (NOT_VALIDATED, SupportQuery, Validation, check_class_ref, check_devices, check_name, load_class,
                           platform_reasons)


@dataclass(frozen=True)
class DispatchSpec:
    """Declaration of one dispatch/combine ("prepare/finalize") backend, registered through
    ``moe_core_dispatchers``.

    A dispatcher moves each rank's tokens to the ranks that hold their experts (dispatch) and the
    experts' results back, weighted (combine). The experts backend of an expert-parallel layer must
    run the activation format the dispatcher produces; :func:`moe_core.select_pair` picks the two
    together.

    Attributes:
        name: unique dispatcher name, lowercase ``[a-z][a-z0-9_]*`` (``"all_to_all"``).
        family: shared by a vendor's dispatchers (``"torch_distributed"``, ``"deepep"``).
        priority: default rank; higher is preferred, ties broken by name.
        output_format: the activation format the experts receive (STANDARD or BATCHED_EXPERTS).
        implementation: the :class:`~moe_core.dispatch.base.Dispatcher` subclass, or
            ``"module:Class"`` imported only when selected.
        host_sync: True when a forward waits for the host (e.g. to learn receive sizes).
        cuda_graph_safe: True when a forward can be captured in a CUDA graph (with the fixed
            ``max_tokens_per_rank`` the dispatcher documents).
        world_sizes: the expert-parallel sizes it runs; empty: any size of 2 or more.
        devices: device kinds it runs on.
        requires: optional packages (as in ``Platform.packages``) that must be importable.
        auto_select: False for dispatchers that run only when requested.
        description: one line for ``moe-core list``.
        validation: where its equality with the single-device result last passed on hardware.
    """

    name: str
    family: str
    priority: int
    output_format: ActivationFormat
    implementation: Any
    host_sync: bool
    cuda_graph_safe: bool
    world_sizes: frozenset[int] = frozenset()
    devices: frozenset[DeviceKind] = frozenset({DeviceKind.CUDA})
    requires: frozenset[str] = frozenset()
    auto_select: bool = True
    description: str = ""
    validation: Validation = NOT_VALIDATED
    plugin: str = field(default="", compare=False)

    def __post_init__(self) -> None:
        owner = f"DispatchSpec {self.name!r}"
        check_name("DispatchSpec", "name", self.name)
        check_name("DispatchSpec", "family", self.family)
        if self.name == "auto":
            raise InvalidConfigError("DispatchSpec.name 'auto' is reserved for automatic selection")
        if not isinstance(self.priority, int) or isinstance(self.priority, bool):
            raise InvalidConfigError(f"{owner}: priority must be an int, got {self.priority!r}")
        if not isinstance(self.output_format, ActivationFormat):
            raise InvalidConfigError(f"{owner}: output_format must be an ActivationFormat, got {self.output_format!r}")
        for flag in ("host_sync", "cuda_graph_safe", "auto_select"):
            if not isinstance(getattr(self, flag), bool):
                raise InvalidConfigError(f"{owner}: {flag} must be a bool")
        sizes = frozenset(self.world_sizes)
        if any(not isinstance(s, int) or isinstance(s, bool) or s < 2 for s in sizes):
            raise InvalidConfigError(f"{owner}: world_sizes must be ints >= 2 (empty: any), got {sorted(self.world_sizes)!r}")
        object.__setattr__(self, "world_sizes", sizes)
        object.__setattr__(self, "devices", check_devices(owner, self.devices))
        object.__setattr__(self, "requires", frozenset(self.requires))
        check_class_ref(owner, "implementation", self.implementation)

    def declared_reasons(self, query: SupportQuery) -> list[str]:
        """Reasons against this dispatcher that follow from its declaration alone."""
        reasons = []
        ep = query.config.parallel.ep_size
        if ep < 2:
            reasons.append("the layer is not expert-parallel (ep_size=1)")
        elif self.world_sizes and ep not in self.world_sizes:
            reasons.append(f"it runs expert-parallel sizes {', '.join(map(str, sorted(self.world_sizes)))}, not {ep}")
        return reasons + platform_reasons(self.devices, self.requires, query.platform)

    def traits(self) -> str:
        """``standard, host sync, graph-unsafe``: the facts a user chooses a dispatcher by."""
        return ", ".join((
            self.output_format.value,
            "host sync" if self.host_sync else "no host sync",
            "CUDA-graph safe" if self.cuda_graph_safe else "not CUDA-graph safe",
        ))

    def load(self) -> type:
        """The Dispatcher class, importing ``"module:Class"`` on first use."""
        return load_class(self.implementation)
