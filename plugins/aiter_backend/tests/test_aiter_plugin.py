"""The plugin's declarations: conformance kit, supports() on simulated platforms, selection, lazy import."""

import dataclasses
import subprocess
import sys

import pytest
import torch

from moe_core import quant
from moe_core.config import MoEConfig
from moe_core.platform import preset
from moe_core.resolver import select
from moe_core.spec import SupportQuery
from moe_core.testing import conformance

CFG = MoEConfig(num_experts=64, top_k=8, hidden_size=4096, intermediate_size=1536, dtype=torch.bfloat16)
SCHEMES = ["unquantized", "fp8-tensor", "fp8-tensor-token", "fp8-channel", "fp8-block"]


@pytest.fixture(scope="module")
def reg():
    return conformance.registry_with("moe_core_aiter.plugin", name="aiter")


def _support(reg, platform, scheme="unquantized", cfg=CFG):
    s = quant.scheme(scheme)
    return reg.supports(reg.specs["aiter"], SupportQuery(cfg, s.weight_key, s.activation_key, platform))


def test_conformance(reg):
    conformance.check_specs(reg, "aiter")
    conformance.check_supports(reg, "aiter")


def test_declaration(reg):
    spec = reg.specs["aiter"]
    assert (spec.family, spec.requires, {d.value for d in spec.devices}) == ("aiter", {"aiter"}, {"rocm"})
    assert {quant.scheme_for_keys(*k).name for k in spec.schemes} == set(SCHEMES)
    assert not spec.validation.validated and spec.validation.describe() == "not validated on hardware"
    # The seeds' numbers (tests/parity/seed_backends.py): first in fp8, third in unquantized.
    assert spec.priority_for(quant.QuantFamily.FP8) == 2000
    assert spec.priority_for(quant.QuantFamily.UNQUANTIZED) == 1980


@pytest.mark.parametrize("platform", ["mi300x", "mi355x"])
@pytest.mark.parametrize("scheme", SCHEMES)
def test_accepts_mi300x_and_mi355x(reg, platform, scheme):
    got = _support(reg, preset(platform), scheme)
    assert got.ok, got.explain()


def test_fp8_names_the_dtype_aiter_uses(reg):
    assert "float8_e4m3fnuz on gfx942" in _support(reg, preset("mi300x"), "fp8-block").explain()
    assert "float8_e4m3fn on gfx950" in _support(reg, preset("mi355x"), "fp8-block").explain()


@pytest.mark.parametrize("platform", ["h100", "a100", "l40s", "cpu"])
def test_refuses_other_platforms_with_reasons(reg, platform):
    got = _support(reg, preset(platform), "fp8-block")
    assert not got.ok and f"it runs on rocm, not {preset(platform).kind.value}" in got.explain(), got.explain()


def test_refusal_names_the_rocm_arch_found(reg):
    mi250 = dataclasses.replace(preset("mi300x"), arch="gfx90a", device_name="AMD Instinct MI250X")
    assert "this device is gfx90a" in _support(reg, mi250).explain()


@pytest.mark.parametrize("changes, reason", [
    ({"dtype": torch.float32}, "bfloat16/float16 only, not float32"),
    ({"hidden_size": 2056}, "hidden_size=2056 is not a multiple of 32"),
    ({"intermediate_size": 1544}, "intermediate_size=1544 is not a multiple of 32"),
    ({"lora_enabled": True}, "LoRA is enabled"),
])
def test_refuses_what_aiter_does_not_run(reg, changes, reason):
    got = _support(reg, preset("mi300x"), cfg=dataclasses.replace(CFG, **changes))
    assert not got.ok and reason in got.explain(), got.explain()


def test_selection_with_aiter_present_and_absent(reg):
    s = quant.scheme("fp8-block")
    assert select(CFG, s.weight_key, s.activation_key, platform=preset("mi300x"), registry=reg, environ={}).name == "aiter"
    absent = dataclasses.replace(preset("mi300x"), packages=frozenset({"triton"}))
    sel = select(CFG, platform=absent, registry=reg, environ={})
    assert sel.name != "aiter"
    aiter = next(c for c in sel.candidates if c.name == "aiter")
    assert "package(s) aiter not importable" in " ".join(aiter.support.reasons)


def test_plugin_and_selection_never_import_aiter():
    code = (
        "import sys\n"
        "from moe_core.config import MoEConfig\n"
        "from moe_core.platform import preset\n"
        "from moe_core.resolver import select\n"
        "from moe_core.testing import conformance\n"
        "reg = conformance.registry_with('moe_core_aiter.plugin', name='aiter')\n"
        "cfg = MoEConfig(num_experts=8, top_k=2, hidden_size=256, intermediate_size=128)\n"
        "sel = select(cfg, platform=preset('mi300x'), registry=reg, environ={})\n"
        "assert sel.name == 'aiter' and sel.kernel_cls.__name__ == 'AiterKernel', sel.name\n"
        "assert not [m for m in sys.modules if m == 'aiter' or m.startswith('aiter.')]\n"
    )
    subprocess.run([sys.executable, "-c", code], check=True)


@pytest.fixture(scope="module")
def reg_with_triton():
    reg = conformance.registry_with("moe_core_aiter.plugin", name="aiter")
    reg.register(__import__("moe_core_triton.plugin", fromlist=["plugin"]), name="triton")
    return reg


@pytest.mark.parametrize("scheme, env, want", [
    ("unquantized", {}, "triton"),  # the seeds' unquantized path uses AITER only when enabled
    ("unquantized", {"VLLM_ROCM_USE_AITER": "1"}, "aiter"),
    ("fp8-tensor-token", {}, "aiter"),  # first in the seeds' fp8 order
    ("fp8-tensor-token", {"VLLM_ROCM_USE_AITER": "1", "VLLM_ROCM_USE_AITER_MOE": "0"}, "reference"),  # triton has no fnuz
    ("fp8-tensor-token", {"VLLM_ROCM_USE_AITER": "1", "VLLM_ROCM_USE_AITER_MOE": "1"}, "aiter"),
])
def test_vllm_compat_on_mi300x(reg_with_triton, scheme, env, want):
    s = quant.scheme(scheme)
    sel = select(CFG, s.weight_key, s.activation_key, platform=preset("mi300x"), registry=reg_with_triton,
                 environ={"MOE_CORE_COMPAT": "vllm", **env})
    assert sel.name == want, sel.explain()


def test_discovered_through_its_entry_point():
    from importlib.metadata import entry_points

    (ep,) = [e for e in entry_points(group="moe_core.plugins") if e.name == "aiter"]
    assert ep.value == "moe_core_aiter.plugin" and ep.dist.name == "moe-core-aiter"
