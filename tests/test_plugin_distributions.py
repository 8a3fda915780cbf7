"""Isolation of misbehaving plugins, each shipped as a real installed distribution (dist-info + entry point)."""

import sys
import textwrap

import pytest

from moe_core.cli import main
from moe_core.config import MoEConfig
from moe_core.platform import preset
from moe_core.registry import PluginStatus, Registry, reset_default_registry
from moe_core.resolver import select

CFG = MoEConfig(num_experts=8, top_k=2, hidden_size=128, intermediate_size=64)
CPU = preset("cpu")

GOOD = """
from moe_core import BackendSpec, DeviceKind, hookimpl
from moe_core.quant import scheme

@hookimpl
def moe_core_backends():
    return [BackendSpec(name={name!r}, family="good", priority={priority}, schemes=[scheme("unquantized")],
                        kernel="moe_core.reference.kernel:ReferenceKernel", devices={{DeviceKind.CPU}})]
"""


@pytest.fixture
def install(tmp_path, monkeypatch):
    """Install a distribution: a module plus NAME-VERSION.dist-info with a moe_core.plugins entry point."""
    site = tmp_path / "site"
    site.mkdir()
    monkeypatch.syspath_prepend(str(site))
    installed = []

    def _install(dist: str, module: str, source: str, version: str = "1.2.3", entry: str | None = None):
        (site / f"{module}.py").write_text(textwrap.dedent(source))
        info = site / f"{dist.replace('-', '_')}-{version}.dist-info"
        info.mkdir()
        (info / "METADATA").write_text(f"Metadata-Version: 2.1\nName: {dist}\nVersion: {version}\n")
        (info / "entry_points.txt").write_text(f"[moe_core.plugins]\n{entry or module} = {module}\n")
        installed.append(module)

    yield _install
    for module in installed:
        sys.modules.pop(module, None)


def test_plugin_raising_at_import_is_recorded_and_isolated(install, capsys):
    install("broken-moe", "broken_moe", "raise ImportError('needs libfoo.so')")
    install("good-moe", "good_moe", GOOD.format(name="good", priority=10))
    reg = Registry(environ={"MOE_CORE_PLUGINS_ALLOW": "broken-moe,good-moe"})
    broken = next(p for p in reg.plugins if p.name == "broken_moe")
    assert broken.status is PluginStatus.FAILED and broken.distribution == "broken-moe" and broken.version == "1.2.3"
    assert "needs libfoo.so" in broken.error
    assert select(CFG, platform=CPU, registry=reg, environ={}).name == "good"
    reset_default_registry()
    assert main(["doctor"]) == 1
    out = capsys.readouterr().out
    assert "broken_moe" in out and "broken-moe 1.2.3" in out and "[failed]" in out and "needs libfoo.so" in out


def test_hook_raising_and_garbage_are_reported_by_doctor(install, capsys):
    install("raising-moe", "raising_moe", """
        from moe_core import hookimpl
        @hookimpl
        def moe_core_backends():
            raise RuntimeError("cannot enumerate devices")
    """)
    install("garbage-moe", "garbage_moe", """
        from moe_core import hookimpl
        @hookimpl
        def moe_core_backends():
            return [{"name": "dict_is_not_a_spec"}]
    """)
    reg = Registry(environ={"MOE_CORE_PLUGINS_ALLOW": "raising-moe,garbage-moe"})
    stages = {(p.plugin, p.distribution, p.version) for p in reg.problems}
    assert ("raising_moe", "raising-moe", "1.2.3") in stages and ("garbage_moe", "garbage-moe", "1.2.3") in stages
    assert select(CFG, platform=CPU, registry=reg, environ={}).name == "reference"
    reset_default_registry()
    assert main(["doctor"]) == 1
    out = capsys.readouterr().out
    assert "cannot enumerate devices" in out and "not a BackendSpec" in out and "garbage-moe 1.2.3" in out


def test_name_clash_between_distributions(install):
    install("zzz-moe", "zzz_moe", GOOD.format(name="shared", priority=99))
    install("aaa-moe", "aaa_moe", GOOD.format(name="shared", priority=11))
    reg = Registry(environ={})
    assert reg.specs["shared"].plugin == "aaa_moe" and reg.specs["shared"].priority == 11
    (clash,) = [p for p in reg.problems if p.stage == "name clash"]
    assert clash.distribution == "zzz-moe" and "'aaa-moe'" in clash.message


def test_supports_raising_during_selection_is_not_supported(install):
    install("flaky-moe", "flaky_moe", GOOD.format(name="flaky", priority=500) + """
from moe_core import hookimpl as _h
@_h
def moe_core_supports(backend, config):
    if backend.name == "flaky":
        raise KeyError(config.hidden_size)
""")
    reg = Registry(environ={"MOE_CORE_PLUGINS_ALLOW": "flaky-moe"})
    sel = select(CFG, platform=CPU, registry=reg, environ={})
    assert sel.name == "reference"
    flaky = next(c for c in sel.candidates if c.name == "flaky")
    assert "plugin 'flaky_moe' raised KeyError: 128" in flaky.support.explain()


MARKER = """
import pathlib
pathlib.Path({path!r}).write_text("imported")
""" + GOOD


@pytest.mark.parametrize(
    "env,status",
    [({"MOE_CORE_PLUGINS_AUTOLOAD": "0"}, None), ({"MOE_CORE_PLUGINS_DENY": "spy-moe"}, PluginStatus.DENIED),
     ({"MOE_CORE_PLUGINS_DENY": "spy_moe"}, PluginStatus.DENIED), ({"MOE_CORE_PLUGINS_ALLOW": "other"}, PluginStatus.NOT_ALLOWED)],
)
def test_env_switches_keep_a_plugin_from_being_imported_at_all(install, tmp_path, env, status):
    marker = tmp_path / "imported.txt"
    install("spy-moe", "spy_moe", MARKER.format(path=str(marker), name="spy", priority=5))
    reg = Registry(environ=env)
    assert not marker.exists() and "spy_moe" not in sys.modules
    assert "spy" not in reg.specs
    if status is not None:
        assert next(p for p in reg.plugins if p.name == "spy_moe").status is status
    Registry(environ={"MOE_CORE_PLUGINS_ALLOW": "spy-moe"})
    assert marker.exists()


def test_allow_list_keeps_only_named_plugins(install):
    install("one-moe", "one_moe", GOOD.format(name="one", priority=5))
    install("two-moe", "two_moe", GOOD.format(name="two", priority=5))
    reg = Registry(environ={"MOE_CORE_PLUGINS_ALLOW": "two_moe"})
    assert "two" in reg.specs and "one" not in reg.specs
    assert "reference" in reg.specs  # the built-in backend is part of the core
