"""The example out-of-tree plugin, installed as a real distribution: discovery, priority, request, CLI, conformance, uninstall."""

import dataclasses
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
import torch

from moe_core import quant
from moe_core.config import MoEConfig
from moe_core.errors import BackendUnsupportedError
from moe_core.platform import preset
from moe_core.registry import Registry
from moe_core.resolver import select
from moe_core.testing import conformance

HERE = Path(__file__).resolve().parents[1]
CFG = MoEConfig(num_experts=8, top_k=2, hidden_size=256, intermediate_size=128, dtype=torch.float16)
CPU = preset("cpu")


def moe_core_cli(*args):
    exe = Path(sys.executable).with_name("moe-core")
    return subprocess.run([str(exe), *args], capture_output=True, text=True, check=True).stdout


def test_discovered_through_its_entry_point():
    reg = Registry(environ={})
    assert reg.specs["acme"].plugin == "acme"
    record = next(p for p in reg.plugins if p.name == "acme")
    assert record.distribution == "acme-moe" and record.version == "0.1.0"


def test_priority_places_it_above_the_reference_only_where_it_supports_the_layer():
    reg = Registry(environ={})
    assert select(CFG, platform=CPU, registry=reg, environ={}).name == "acme"
    fp8 = quant.scheme("fp8-channel")
    assert select(CFG, fp8.weight_key, fp8.activation_key, platform=CPU, registry=reg, environ={}).name == "acme"
    int8 = quant.scheme("int8")
    assert select(CFG, int8.weight_key, int8.activation_key, platform=CPU, registry=reg, environ={}).name == "reference"
    odd = dataclasses.replace(CFG, hidden_size=100)
    sel = select(odd, platform=CPU, registry=reg, environ={})
    assert sel.name == "reference" and "hidden_size must be a multiple of 8" in sel.explain()


def test_explicit_request():
    reg = Registry(environ={})
    int8 = quant.scheme("int8")
    with pytest.raises(BackendUnsupportedError, match="'acme' .requested by moe_backend. does not support this layer since it does not implement the int8 scheme"):
        select(dataclasses.replace(CFG, moe_backend="acme"), int8.weight_key, int8.activation_key, platform=CPU, registry=reg, environ={})


def test_cli_list_sees_it():
    out = moe_core_cli("list")
    assert "acme" in out and "acme-moe 0.1.0" in out


def test_conformance_kit():
    reg = conformance.registry_with("acme_moe.plugin", name="acme")
    conformance.check_specs(reg, "acme")
    conformance.check_supports(reg, "acme")
    records = conformance.check_numerics(reg, "acme", device="cpu", platform=CPU)
    assert {r["scheme"] for r in records if "rel_err" in r} == {"unquantized", "fp8-channel"}  # numeric cases ran for both
    only = conformance.check_numerics(reg, "acme", device="cpu", platform=CPU, tokens=(3,), schemes=["fp8-channel"])
    assert {r["scheme"] for r in only} == {"fp8-channel"} and any("rel_err" in r for r in only)
    with pytest.raises(AssertionError, match=r"schemes=\['int8'\] are not declared; it declares \['fp8-channel', 'unquantized'\]"):
        conformance.check_numerics(reg, "acme", device="cpu", platform=CPU, schemes=["int8"])


def test_a_hand_made_input_against_the_reference_and_a_wrong_kernel_caught():
    from acme_moe.kernel import AcmeKernel
    from moe_core.presets import random_inputs

    x, routing = random_inputs(CFG, 5, seed=3)
    assert conformance.check_against_reference(AcmeKernel, CFG, "fp8-channel", x, routing) < 1e-2

    class Doubled(AcmeKernel):
        def forward(self, *args, **kwargs):
            return 2 * super().forward(*args, **kwargs)

    with pytest.raises(AssertionError, match="Doubled unquantized: rel. error 1 vs the reference"):
        conformance.check_against_reference(Doubled, CFG, "unquantized", x, routing)


def _listed_backends(site_view: Path) -> set[str]:
    """The backends `moe-core list --json` reports in a Python whose only site-packages is ``site_view``."""
    code = ("import site, sys; site.addsitedir(sys.argv[1]); from moe_core.cli import main; "
            "sys.exit(main(['list', '--json']))")
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH" and not k.startswith("MOE_CORE_")}
    out = subprocess.run([sys.executable, "-S", "-c", code, str(site_view)], capture_output=True, text=True, check=True, env=env)
    return {b["name"] for b in json.loads(out.stdout)["backends"]}


def test_uninstalling_removes_it(tmp_path):
    """Uninstalling acme-moe removes its backend. Simulated without touching this environment (other tests run beside
    this one): a view of the site-packages that holds acme-moe — a link per entry — with or without the files its
    installation record lists, as `pip uninstall` would remove them."""
    from importlib.metadata import distribution

    dist = distribution("acme-moe")
    site_packages = Path(dist.locate_file(""))
    owned = {Path(f).parts[0] for f in dist.files or ()}
    assert any(name.endswith(".dist-info") for name in owned), "acme-moe's installation record lists no metadata"
    views = {}
    for label, skip in (("installed", set()), ("uninstalled", owned)):
        view = views[label] = tmp_path / label
        view.mkdir()
        for entry in site_packages.iterdir():
            if entry.name not in skip:
                (view / entry.name).symlink_to(entry)
    assert "acme" in _listed_backends(views["installed"])  # the view alone finds it: the check below can fail
    without = _listed_backends(views["uninstalled"])
    assert "acme" not in without and "reference" in without
