"""A plugin's required sibling plugins (moe_core_requires): every backend of a plugin whose sibling does not import
is unsupported with the reason, and doctor reports it, before any layer runs."""

import importlib.util
import sys
from importlib.machinery import ModuleSpec

import pytest
import torch

from moe_core import hookimpl, quant
from moe_core.cli import main
from moe_core.config import MoEConfig
from moe_core.errors import InvalidConfigError
from moe_core.platform import DeviceKind, preset
from moe_core.registry import Registry
from moe_core.requirements import PluginRequirement, unmet
from moe_core.resolver import select
from moe_core.spec import BackendSpec, SupportQuery
from moe_core.testing.fakes import FakeKernel

UNQ = quant.scheme("unquantized")
CFG = MoEConfig(num_experts=4, top_k=2, hidden_size=64, intermediate_size=32, dtype=torch.float32)
SIBLING = PluginRequirement("acme-moe-base", "acme_moe_base", "pip install ./acme_base")


class Dependent:
    """A plugin with one CPU backend of priority 500 whose code imports ``requirement.module``."""

    def __init__(self, *requirements):
        self.requirements = requirements

    @hookimpl
    def moe_core_backends(self):
        return [BackendSpec(name="dependent", family="acme", priority=500, schemes=[UNQ], kernel=FakeKernel, devices={DeviceKind.CPU})]

    @hookimpl
    def moe_core_requires(self):
        return list(self.requirements)


@pytest.fixture
def sibling_installed(monkeypatch):
    """Whether ``acme_moe_base`` imports: a module object in sys.modules, or None there (import fails)."""

    def _set(present: bool):
        module = importlib.util.module_from_spec(ModuleSpec(SIBLING.module, None)) if present else None
        monkeypatch.setitem(sys.modules, SIBLING.module, module)

    return _set


def _registry(plugin) -> Registry:
    reg = Registry(autoload=False, environ={})
    reg.register(plugin, name="dependent_plugin")
    return reg


def test_a_missing_sibling_makes_every_backend_of_the_plugin_unsupported_with_its_reason(sibling_installed):
    sibling_installed(False)
    reg = _registry(Dependent(SIBLING))
    support = reg.supports(reg.specs["dependent"], SupportQuery(CFG, None, None, preset("cpu")))
    assert not support.ok and support.reasons == ("acme-moe-base is not installed (pip install ./acme_base)",)
    selection = select(CFG, platform=preset("cpu"), registry=reg, environ={})
    assert selection.name == "reference"
    assert "acme-moe-base is not installed (pip install ./acme_base)" in selection.explain()
    (problem,) = reg.problems
    assert (problem.plugin, problem.stage, problem.message) == ("dependent_plugin", "moe_core_requires", SIBLING.reason())


def test_an_installed_sibling_changes_nothing(sibling_installed):
    sibling_installed(True)
    reg = _registry(Dependent(SIBLING))
    assert select(CFG, platform=preset("cpu"), registry=reg, environ={}).name == "dependent"
    assert reg.problems == ()


def test_unregistering_the_plugin_forgets_its_unmet_requirements(sibling_installed):
    sibling_installed(False)
    reg = _registry(Dependent(SIBLING))
    reg.unregister("dependent_plugin")
    sibling_installed(True)
    reg.register(Dependent(SIBLING), name="dependent_plugin")
    assert reg.problems == () and select(CFG, platform=preset("cpu"), registry=reg, environ={}).name == "dependent"


def test_a_requires_hook_returning_garbage_is_a_problem_not_a_crash():
    reg = _registry(Dependent("acme_moe_base"))
    (problem,) = reg.problems
    assert problem.stage == "moe_core_requires" and "not a PluginRequirement" in problem.message
    assert select(CFG, platform=preset("cpu"), registry=reg, environ={}).name == "dependent"


def test_unmet_keeps_the_declaration_order_and_skips_what_imports():
    present = PluginRequirement("moe-core", "moe_core", "pip install .")
    gone = [PluginRequirement(f"gone-{i}", f"moe_core_no_such_module_{i}", f"pip install ./gone{i}") for i in (2, 1)]
    assert unmet([gone[0], present, gone[1]]) == (gone[0].reason(), gone[1].reason())
    with pytest.raises(InvalidConfigError, match="PluginRequirement.install must be a non-empty string"):
        PluginRequirement("x", "x", "")


def test_doctor_reports_a_missing_sibling_as_a_problem(sibling_installed, monkeypatch, capsys):
    sibling_installed(False)
    reg = _registry(Dependent(SIBLING))
    monkeypatch.setattr("moe_core.registry.default_registry", lambda: reg)
    assert main(["doctor"]) == 1
    out = capsys.readouterr().out
    assert "dependent_plugin (<in-process> ) [moe_core_requires]: acme-moe-base is not installed (pip install ./acme_base)" in out
    assert "status: problems found" in out
