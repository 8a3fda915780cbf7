"""Registry: in-process registration, isolation of misbehaving plugins, name clashes, versions."""

import logging

import pytest

from moe_core import hookimpl, quant
from moe_core.config import MoEConfig
from moe_core.platform import preset
from moe_core.registry import PluginStatus, Registry
from moe_core.resolver import select
from moe_core.spec import BackendSpec, SupportQuery
from moe_core.support import Support
from moe_core.testing.fakes import FakeBackend, FakeKernel, FakePlugin, VetoPlugin

CFG = MoEConfig(num_experts=8, top_k=2, hidden_size=128, intermediate_size=64)
H100 = preset("h100")


def spec(name, priority=100, **kw):
    return BackendSpec(name=name, family=kw.pop("family", "acme"), priority=priority, schemes=[quant.scheme("unquantized")], kernel=FakeKernel, **kw)


def registry(*plugins, builtin=False):
    reg = Registry(autoload=False, builtin=builtin, environ={})
    for i, p in enumerate(plugins):
        reg.register(p, name=f"p{i}")
    return reg


class RaisingBackends:
    @hookimpl
    def moe_core_backends(self):
        raise RuntimeError("boom in backends")


class GarbageBackends:
    @hookimpl
    def moe_core_backends(self):
        return ["not a spec", spec("garbage_ok")]


class RaisingSupports:
    @hookimpl
    def moe_core_backends(self):
        return [spec("flaky", priority=900)]

    @hookimpl
    def moe_core_supports(self, backend):
        if backend.name == "flaky":
            raise ZeroDivisionError("division in supports")
        return None


class GarbageSupports:
    @hookimpl
    def moe_core_backends(self):
        return [spec("liar", priority=900)]

    @hookimpl
    def moe_core_supports(self, backend):
        return True if backend.name == "liar" else None


def test_builtin_reference_is_registered_like_a_plugin():
    reg = Registry(autoload=False, environ={})
    assert list(reg.specs) == ["reference"]
    rec = reg.plugins[0]
    assert (rec.name, rec.distribution, rec.status) == ("reference", "moe-core", PluginStatus.LOADED)


def test_hook_that_raises_at_registration_is_isolated(caplog):
    good = FakePlugin([FakeBackend(spec("good"))])
    with caplog.at_level(logging.WARNING, logger="moe_core"):
        reg = registry(RaisingBackends(), good)
    assert list(reg.specs) == ["good"]
    assert any("boom in backends" in str(p) for p in reg.problems)
    assert "boom in backends" in caplog.text


def test_garbage_specs_are_dropped_and_reported():
    reg = registry(GarbageBackends())
    assert list(reg.specs) == ["garbage_ok"]
    assert any("not a BackendSpec" in p.message for p in reg.problems)


def test_supports_that_raises_is_not_supported_with_the_error_as_reason(caplog):
    good = FakePlugin([FakeBackend(spec("good", priority=100))])
    reg = registry(RaisingSupports(), good)
    with caplog.at_level(logging.WARNING, logger="moe_core"):
        sel = select(CFG, platform=H100, registry=reg, environ={})
        select(MoEConfig(num_experts=16, top_k=2, hidden_size=128, intermediate_size=64), platform=H100, registry=reg, environ={})
    assert sel.name == "good"
    flaky = next(c for c in sel.candidates if c.name == "flaky")
    assert not flaky.support.ok and "ZeroDivisionError: division in supports" in flaky.support.explain()
    assert caplog.text.count("division in supports") == 1  # warned once
    assert any(p.stage == "moe_core_supports" for p in reg.problems)


def test_supports_returning_garbage_is_not_supported():
    reg = registry(GarbageSupports(), FakePlugin([FakeBackend(spec("good"))]))
    sel = select(CFG, platform=H100, registry=reg, environ={})
    assert sel.name == "good"
    assert "not a Support" in next(c for c in sel.candidates if c.name == "liar").support.explain()


def test_name_clash_keeps_the_first_distribution_whatever_the_order():
    a = FakePlugin([FakeBackend(spec("dup", priority=1))])
    b = FakePlugin([FakeBackend(spec("dup", priority=2))])
    for order in ((a, b), (b, a)):
        reg = Registry(autoload=False, builtin=False, environ={})
        for plugin in order:
            dist = "aaa-dist" if plugin is a else "zzz-dist"
            reg.register(plugin, name=dist.split("-")[0], distribution=dist, version="1.0")
        assert reg.specs["dup"].priority == 1
        (problem,) = reg.problems
        assert problem.stage == "name clash" and "aaa-dist" in problem.message and problem.distribution == "zzz-dist"


def test_veto_from_another_plugin():
    reg = registry(FakePlugin([FakeBackend(spec("fast", 900)), FakeBackend(spec("slow", 100))]), VetoPlugin({"fast"}, "known-bad on this site"))
    sel = select(CFG, platform=H100, registry=reg, environ={})
    assert sel.name == "slow"
    assert "vetoed by plugin 'p1': known-bad on this site" in next(c for c in sel.candidates if c.name == "fast").support.explain()


def test_yes_from_a_non_owner_does_not_override_the_owner():
    class Yes:
        @hookimpl
        def moe_core_supports(self):
            return Support.yes()

    fake = FakeBackend(spec("capped", 900), max_experts=4)
    reg = registry(FakePlugin([fake]), Yes())
    q = SupportQuery(CFG, None, None, H100)
    assert not reg.supports(reg.specs["capped"], q).ok


def test_version_changes_and_unregister():
    reg = registry(FakePlugin([FakeBackend(spec("one"))]))
    v = reg.version
    reg.register(FakePlugin([FakeBackend(spec("two"))]), name="second")
    assert reg.version > v and set(reg.specs) == {"one", "two"}
    sel = select(CFG, platform=H100, registry=reg, environ={})
    reg.unregister("second")
    assert set(reg.specs) == {"one"}
    assert select(CFG, platform=H100, registry=reg, environ={}) is not sel  # cache keyed on the registry version
    with pytest.raises(KeyError, match="registered: p0"):
        reg.unregister("nope")
    with pytest.raises(ValueError, match="already registered"):
        reg.register(FakePlugin([]), name="p0")


def test_setup_variables_are_not_reported_as_typos():
    from moe_core.env import unknown_variables

    environ = {"MOE_CORE_TORCH": "system", "MOE_CORE_VENV": "/tmp/v", "MOE_CORE_BACKNED": "triton"}
    assert unknown_variables(environ) == ["MOE_CORE_BACKNED"]


class DoctorPlugin:
    def __init__(self, answer):
        self.answer = answer

    @hookimpl
    def moe_core_doctor(self):
        if isinstance(self.answer, Exception):
            raise self.answer
        return self.answer


def test_doctor_reports_are_collected_and_misbehaviour_is_isolated():
    reg = registry(DoctorPlugin(["provider 1.2 importable", "nvcc: missing"]), DoctorPlugin(RuntimeError("no GPU")),
                   DoctorPlugin("a bare string"), DoctorPlugin(None), DoctorPlugin(5))
    reports = reg.doctor_reports()
    assert reports["p0"] == ["provider 1.2 importable", "nvcc: missing"]
    assert reports["p1"] == ["(moe_core_doctor raised RuntimeError: no GPU)"]
    assert reports["p2"] == ["(moe_core_doctor returned str, not a list of str)"]
    assert "p3" not in reports
    assert reports["p4"] == ["(moe_core_doctor returned int, not a list of str)"]  # not iterable: reported, never raised
    assert {(p.plugin, p.stage) for p in reg.problems} == {("p1", "moe_core_doctor"), ("p2", "moe_core_doctor"), ("p4", "moe_core_doctor")}


def test_backend_hooks_answer_for_their_own_backends_only():
    from types import SimpleNamespace

    from moe_core.hookspecs import backend_hooks

    seen = []

    def rule(backend, config, weight_key, activation_key, platform):
        seen.append(backend.name)
        return Support.no("too many experts") if config.num_experts > 4 else Support.yes()

    module = SimpleNamespace()
    module.moe_core_backends, module.moe_core_supports = backend_hooks([spec("mine")], rule)
    reg = registry(module, FakePlugin([FakeBackend(spec("theirs", priority=50))]))
    assert set(reg.specs) == {"mine", "theirs"}
    chosen = select(CFG, platform=H100, registry=reg, environ={})
    assert chosen.name == "theirs" and seen == ["mine"]  # never asked about "theirs"
    assert next(c for c in chosen.candidates if c.name == "mine").support.reasons == ("too many experts",)
