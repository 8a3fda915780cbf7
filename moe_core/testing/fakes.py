"""Fake backends with declared ground truth, for property tests of the resolver (any plugin set).

A :class:`FakeBackend` is a BackendSpec plus a rule its plugin applies in ``moe_core_supports``
(minimum compute capability, maximum experts). :func:`expected_support` recomputes the same truth
independently of the registry, so tests can check the resolver against it.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Sequence

from moe_core.config import ActivationFormat, MoEConfig
from moe_core.dispatch.spec import DispatchSpec
from moe_core.hookspecs import hookimpl
from moe_core.kernel import MoEKernel
from moe_core.platform import Platform
from moe_core.quant import QuantScheme
from moe_core.spec import BackendSpec, SupportQuery
from moe_core.support import Support


class FakeKernel(MoEKernel):
    """A kernel that must never run: fake backends exist for selection tests only."""

    backend_name = "fake"

    def forward(self, hidden_states, weights, routing, *, expert_map, apply_router_weight_on_input):
        raise AssertionError("fake backends are for selection tests; they do not compute")


@dataclass(frozen=True)
class FakeBackend:
    """A spec and the run-time rule its plugin enforces."""

    spec: BackendSpec
    min_capability: tuple[int, int] | None = None
    max_experts: int | None = None

    def rule(self, query: SupportQuery) -> Support:
        reasons = []
        if self.min_capability is not None and query.platform.is_gpu() and not query.platform.has_capability(*self.min_capability):
            reasons.append(f"needs compute capability {self.min_capability[0]}.{self.min_capability[1]}+")
        if self.max_experts is not None and query.config.num_experts > self.max_experts:
            reasons.append(f"supports at most {self.max_experts} experts")
        return Support.from_reasons(reasons)


class SpecPlugin:
    """A plugin object serving these backend specs as they are, with no supports() rule of its own
    (register it with ``Registry.register``)."""

    def __init__(self, *specs: BackendSpec):
        self.specs = list(specs)

    @hookimpl
    def moe_core_backends(self):
        return self.specs


class FakePlugin:
    """A plugin object serving a list of fake backends (register it with ``Registry.register``)."""

    def __init__(self, backends: Sequence[FakeBackend]):
        self.backends = {b.spec.name: b for b in backends}

    @hookimpl
    def moe_core_backends(self):
        return [b.spec for b in self.backends.values()]

    @hookimpl
    def moe_core_supports(self, backend, config, weight_key, activation_key, platform):
        fake = self.backends.get(backend.name)
        if fake is None:
            return None
        return fake.rule(SupportQuery(config, weight_key, activation_key, platform))


class VetoPlugin:
    """A site-policy plugin that vetoes the named backends with a fixed reason."""

    def __init__(self, vetoed: set[str], reason: str = "site policy"):
        self.vetoed = set(vetoed)
        self.reason = reason

    @hookimpl
    def moe_core_supports(self, backend):
        return Support.no(self.reason) if backend.name in self.vetoed else None


def expected_support(fake: FakeBackend, query: SupportQuery) -> Support:
    """Ground truth for a fake backend: its declaration, then its rule."""
    declared = fake.spec.declared_reasons(query)
    return Support.no(*declared) if declared else fake.rule(query)


@dataclass(frozen=True)
class FakeDispatch:
    """A dispatcher spec and the run-time rule its plugin enforces (largest hidden size its buffers take)."""

    spec: DispatchSpec
    max_hidden: int | None = None

    def rule(self, query: SupportQuery) -> Support:
        if self.max_hidden is not None and query.config.hidden_size > self.max_hidden:
            return Support.no(f"buffers take hidden sizes up to {self.max_hidden}")
        return Support.yes()


class FakeDispatchPlugin:
    """A plugin object serving fake dispatchers (selection tests only: they never move data)."""

    def __init__(self, dispatchers: Sequence[FakeDispatch]):
        self.dispatchers = {d.spec.name: d for d in dispatchers}

    @hookimpl
    def moe_core_dispatchers(self):
        return [d.spec for d in self.dispatchers.values()]

    @hookimpl
    def moe_core_dispatch_supports(self, dispatcher, config, weight_key, activation_key, platform):
        fake = self.dispatchers.get(dispatcher.name)
        return None if fake is None else fake.rule(SupportQuery(config, weight_key, activation_key, platform))


def expected_dispatch_support(fake: FakeDispatch, query: SupportQuery) -> Support:
    """Ground truth for a fake dispatcher: its declaration, then its rule."""
    declared = fake.spec.declared_reasons(query)
    return Support.no(*declared) if declared else fake.rule(query)


def able_backend(fake: FakeBackend, scheme: QuantScheme, platform: Platform) -> FakeBackend:
    """``fake`` made able to run ``scheme`` on ``platform`` in either format, with an expert map, and selected automatically."""
    spec = replace(fake.spec, schemes=fake.spec.schemes | {scheme.keys}, devices=fake.spec.devices | {platform.kind},
                   formats=frozenset(ActivationFormat), supports_expert_map=True, auto_select=True)
    return replace(fake, spec=spec, min_capability=None, max_experts=None)


def able_dispatcher(fake: FakeDispatch, config: MoEConfig, platform: Platform) -> FakeDispatch:
    """``fake`` made able to serve ``config`` on ``platform`` (any world size and hidden size, a format the config
    accepts) and selected automatically."""
    fmt = ActivationFormat.BATCHED_EXPERTS if config.parallel.use_batched_activation_format else fake.spec.output_format
    spec = replace(fake.spec, devices=fake.spec.devices | {platform.kind}, world_sizes=frozenset(), output_format=fmt, auto_select=True)
    return replace(fake, spec=spec, max_hidden=None)
