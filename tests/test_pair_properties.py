"""Hypothesis properties of the joint (dispatcher, experts backend) selection over random fake registries."""

from __future__ import annotations

import dataclasses

import pytest
from hypothesis import HealthCheck, event, given, settings
from hypothesis import strategies as st

from moe_core import resolver
from moe_core.config import ActivationFormat, ParallelConfig
from moe_core.errors import BackendUnsupportedError, InvalidEnvironmentError, NoBackendError, UnknownBackendError
from moe_core.pair import select_pair
from moe_core.registry import Registry
from moe_core.spec import SupportQuery
from moe_core.testing.fakes import FakeDispatchPlugin, FakePlugin, able_backend, able_dispatcher, expected_dispatch_support, expected_support
from moe_core.testing.strategies import DISPATCH_NAMES, configs, fake_backends, fake_dispatchers, platforms, schemes

SETTINGS = settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
FORMATS = (ActivationFormat.STANDARD, ActivationFormat.BATCHED_EXPERTS)


@st.composite
def worlds(draw, ep: bool = True):
    """(backends, dispatchers, cfg, scheme, platform), most fakes claiming the scheme and the device kind."""
    sch, plat = draw(schemes()), draw(platforms())
    cfg = draw(configs(lora=False, clamp=False))  # the experts' own policies are the resolver properties' concern
    if ep and not cfg.parallel.use_ep:
        cfg = dataclasses.replace(cfg, parallel=dataclasses.replace(cfg.parallel, ep_size=2), num_experts=2 * cfg.num_experts)
    if not ep:
        cfg = dataclasses.replace(cfg, parallel=ParallelConfig(use_batched_activation_format=cfg.parallel.use_batched_activation_format))
    backends = draw(fake_backends(likely_scheme=sch, likely_device=plat.kind))
    if draw(st.integers(0, 3)):  # most backends can take an expert map, so that pairs are often possible
        backends = [dataclasses.replace(b, spec=dataclasses.replace(b.spec, supports_expert_map=True)) for b in backends]
    return backends, draw(fake_dispatchers(likely_device=plat.kind, min_size=1)), cfg, sch, plat


def make_registry(backends, dispatchers) -> Registry:
    reg = Registry(autoload=False, builtin=False, environ={})
    reg.register(FakePlugin(backends), name="fake_backends")
    reg.register(FakeDispatchPlugin(dispatchers), name="fake_dispatchers")
    return reg


def with_format(cfg, fmt):
    return dataclasses.replace(cfg, parallel=dataclasses.replace(cfg.parallel, use_batched_activation_format=fmt is ActivationFormat.BATCHED_EXPERTS))


def experts_oracle(backends, cfg, sch, plat):
    """(priority, name) of the automatic experts choice for this config, computed without the resolver."""
    query = SupportQuery(cfg, sch.weight_key, sch.activation_key, plat)
    eligible = [b for b in backends if b.spec.claims(sch.weight_key, sch.activation_key) and expected_support(b, query).ok and b.spec.auto_select]
    if not eligible:
        return None
    best = min(eligible, key=lambda b: (-b.spec.priority_for(query.family), b.spec.name))
    return best.spec.priority_for(query.family), best.spec.name


def eligible_dispatchers(dispatchers, cfg, sch, plat):
    query = SupportQuery(cfg, sch.weight_key, sch.activation_key, plat)
    batched_only = cfg.parallel.use_batched_activation_format
    return [d for d in dispatchers if expected_dispatch_support(d, query).ok and d.spec.auto_select
            and (d.spec.output_format is ActivationFormat.BATCHED_EXPERTS or not batched_only)]


def pair_oracle(backends, dispatchers, cfg, sch, plat):
    """(dispatcher, experts) names of the automatic pair, or None, following docs/expert-parallel.md."""
    eligible = eligible_dispatchers(dispatchers, cfg, sch, plat)
    options = []
    for fmt in FORMATS:
        producing = [d for d in eligible if d.spec.output_format is fmt]
        experts = experts_oracle(backends, with_format(cfg, fmt), sch, plat) if producing else None
        if experts is not None:
            best = min(producing, key=lambda d: (-d.spec.priority, d.spec.name))
            options.append(((experts[0], best.spec.priority, -FORMATS.index(fmt)), best.spec.name, experts[1]))
    return max(options)[1:] if options else None


def attempt(reg, cfg, sch, plat, environ=None):
    resolver.clear_cache()
    try:
        return select_pair(cfg, sch.weight_key, sch.activation_key, platform=plat, registry=reg, environ=environ or {})
    except (NoBackendError, BackendUnsupportedError) as exc:
        return exc


@SETTINGS
@given(worlds())
def test_the_automatic_pair_is_the_oracles_and_its_formats_match(world):
    backends, dispatchers, cfg, sch, plat = world
    got = attempt(make_registry(backends, dispatchers), cfg, sch, plat)
    want = pair_oracle(backends, dispatchers, cfg, sch, plat)
    event("no pair" if want is None else f"pair in the {got.activation_format.value if not isinstance(got, Exception) else '?'} format")
    if want is None:
        assert isinstance(got, NoBackendError)
        return
    assert not isinstance(got, Exception), got
    assert (got.dispatcher.name, got.experts.name) == want
    assert got.dispatcher.output_format is got.activation_format is got.config.activation_format
    assert got.config.parallel.ep_size == cfg.parallel.ep_size


@SETTINGS
@given(worlds(ep=False))
def test_without_expert_parallelism_there_is_no_dispatcher_and_nothing_changes(world):
    backends, dispatchers, cfg, sch, plat = world
    reg = make_registry(backends, dispatchers)
    got = attempt(reg, cfg, sch, plat)
    try:
        alone = resolver.select(cfg, sch.weight_key, sch.activation_key, platform=plat, registry=reg, environ={})
    except (NoBackendError, BackendUnsupportedError) as exc:
        assert type(got) is type(exc)
        return
    assert got.dispatcher is None and got.experts == alone and "no dispatcher" in got.explain()


@SETTINGS
@given(worlds(), st.sampled_from(DISPATCH_NAMES), st.booleans())
def test_a_requested_dispatcher_is_honoured_or_the_call_raises(world, name, from_env):
    backends, dispatchers, cfg, sch, plat = world
    reg = make_registry(backends, dispatchers)
    environ = {"MOE_CORE_DISPATCH": name} if from_env else {}
    if not from_env:
        cfg = dataclasses.replace(cfg, parallel=dataclasses.replace(cfg.parallel, dispatch_backend=name))
    fake = next((d for d in dispatchers if d.spec.name == name), None)
    if fake is None:
        with pytest.raises(InvalidEnvironmentError if from_env else UnknownBackendError):
            attempt(reg, cfg, sch, plat, environ)
        return
    got = attempt(reg, cfg, sch, plat, environ)
    query = SupportQuery(cfg, sch.weight_key, sch.activation_key, plat)
    fmt = fake.spec.output_format
    usable = expected_dispatch_support(fake, query).ok and (fmt is ActivationFormat.BATCHED_EXPERTS or not cfg.parallel.use_batched_activation_format)
    experts = experts_oracle(backends, with_format(cfg, fmt), sch, plat)
    if usable and experts is not None:  # auto_select=False does not matter for a request
        assert not isinstance(got, Exception), got
        assert got.dispatcher.name == name and got.experts.name == experts[1]
    else:
        assert isinstance(got, (BackendUnsupportedError, NoBackendError))


def most_examples_succeed(prop):
    """Run ``prop(world, data)`` (which returns whether its example reached the success assertion) under
    SETTINGS and check that most examples did: a property whose examples mostly end in an error proves little."""
    reached = []

    @SETTINGS
    @given(worlds(), st.data())
    def run(world, data):
        reached.append(prop(world, data))
        event("reached the success assertion" if reached[-1] else "ended in an error")

    run()
    assert sum(reached) > len(reached) / 2, f"only {sum(reached)} of {len(reached)} examples reached the success assertion"


def test_the_config_request_beats_the_environment():
    def prop(world, data):
        backends, dispatchers, cfg, sch, plat = world
        names = sorted({d.spec.name for d in dispatchers})  # drawn from the world's own (at least one): no example is filtered
        in_config, in_env = data.draw(st.sampled_from(names), label="in_config"), data.draw(st.sampled_from(names), label="in_env")
        if data.draw(st.integers(0, 3), label="servable"):  # mostly: the config's request can be served
            dispatchers = [able_dispatcher(d, cfg, plat) if d.spec.name == in_config else d for d in dispatchers]
            backends = [able_backend(backends[0], sch, plat), *backends[1:]]
        cfg = dataclasses.replace(cfg, parallel=dataclasses.replace(cfg.parallel, dispatch_backend=in_config))
        got = attempt(make_registry(backends, dispatchers), cfg, sch, plat, {"MOE_CORE_DISPATCH": in_env})
        if isinstance(got, Exception):
            return False
        assert got.dispatcher.name == in_config
        return True

    most_examples_succeed(prop)


def test_a_requested_experts_backend_is_honoured_or_the_call_raises():
    def prop(world, data):
        backends, dispatchers, cfg, sch, plat = world
        index = data.draw(st.integers(0, len(backends) - 1), label="wanted")
        if data.draw(st.integers(0, 3), label="servable"):  # mostly: the request can be served
            backends = [able_backend(b, sch, plat) if i == index else b for i, b in enumerate(backends)]
            dispatchers = [able_dispatcher(dispatchers[0], cfg, plat), *dispatchers[1:]]
        wanted = backends[index].spec
        cfg = dataclasses.replace(cfg, moe_backend=wanted.name)
        got = attempt(make_registry(backends, dispatchers), cfg, sch, plat)
        if isinstance(got, Exception):
            return False
        assert got.experts.name in {wanted.name, wanted.batched_variant}
        assert got.dispatcher.output_format is got.activation_format
        return True

    most_examples_succeed(prop)
