"""The plugin's declarations: conformance kit, priorities, and supports() on simulated platforms."""

import dataclasses
import sys

import pytest
import torch

from moe_core import quant
from moe_core.cli import main
from moe_core.config import MoEConfig, ParallelConfig
from moe_core.platform import preset
from moe_core.quant import QuantFamily
from moe_core.registry import Registry, reset_default_registry
from moe_core.resolver import select
from moe_core.spec import SupportQuery
from moe_core.testing import conformance

CFG = MoEConfig(num_experts=256, top_k=8, hidden_size=7168, intermediate_size=2048, dtype=torch.bfloat16)


@pytest.fixture(scope="module")
def reg():
    return conformance.registry_with("moe_core_deepgemm.plugin", name="deepgemm")


@pytest.fixture(scope="module")
def reg_with_triton(reg):
    reg.register(__import__("moe_core_triton.plugin", fromlist=["plugin"]), name="triton")
    return reg


def test_conformance(reg):
    conformance.check_specs(reg, "deepgemm")
    conformance.check_supports(reg, "deepgemm")


def test_discovered_through_its_entry_point():
    reg = Registry(environ={})
    assert reg.specs["deepgemm"].plugin == "deepgemm"
    assert reg.specs["batched_deepgemm"].requires == {"deep_gemm"}
    assert next(p for p in reg.plugins if p.name == "deepgemm").distribution == "moe-core-deepgemm"


def test_fp8_priorities_keep_the_seeds_order(reg_with_triton):
    fp8 = [reg_with_triton.specs[n].priority_for(QuantFamily.FP8) for n in ("deepgemm", "batched_deepgemm", "triton", "triton_batched")]
    assert fp8 == sorted(fp8, reverse=True) and len(set(fp8)) == 4
    # the seeds' unquantized oracle never picks DeepGEMM: below Triton unless a ranking file says otherwise
    assert reg_with_triton.specs["deepgemm"].priority_for(QuantFamily.UNQUANTIZED) < reg_with_triton.specs["triton"].priority_for(QuantFamily.UNQUANTIZED)


def _support(reg, name, platform, scheme="fp8-block", **changes):
    s = quant.scheme(scheme)
    plat = preset(platform)
    plat = dataclasses.replace(plat, packages=plat.packages | {"deep_gemm"}) if plat.is_cuda() else plat  # a machine that has it
    return reg.supports(reg.specs[name], SupportQuery(dataclasses.replace(CFG, **changes), s.weight_key, s.activation_key, plat))


@pytest.mark.parametrize("name", ["deepgemm", "batched_deepgemm"])
@pytest.mark.parametrize(
    "platform,scheme,changes,reason",
    [
        ("h100", "fp8-block", {}, None),
        ("h200", "unquantized", {}, None),
        ("b200", "unquantized", {}, None),
        ("b200", "fp8-block", {}, "UE8M0"),
        ("a100", "fp8-block", {}, "sm_90 (Hopper) and sm_100 (Blackwell) only; this is sm_80"),
        ("mi300x", "fp8-block", {}, "it runs on cuda, not rocm"),
        ("cpu", "unquantized", {}, "it runs on cuda, not cpu"),
        ("t4", "unquantized", {}, "this is sm_75"),
        ("h100", "fp8-block", {"dtype": torch.float16}, "bfloat16 outputs only"),
        ("h100", "fp8-block", {"intermediate_size": 1408 + 64}, "intermediate_size=1472 must be a multiple of 128"),
        ("h100", "unquantized", {"hidden_size": 4100}, "hidden_size=4100 must be a multiple of 64"),
        ("h100", "fp8-block", {"lora_enabled": True}, "not LoRA-capable"),
    ],
)
def test_supports_on_simulated_platforms(reg, name, platform, scheme, changes, reason):
    batched = name.startswith("batched")
    changes = {**changes, "parallel": ParallelConfig(use_batched_activation_format=batched)}
    got = _support(reg, name, platform, scheme, **changes)
    if reason is None:
        assert got.ok, got.explain()
    else:
        assert not got.ok and reason in got.explain(), got.explain()


def test_without_deep_gemm_the_core_says_so(reg):
    s = quant.scheme("fp8-block")
    got = reg.supports(reg.specs["deepgemm"], SupportQuery(CFG, s.weight_key, s.activation_key, preset("a100")))
    assert not got.ok and "deep_gemm not importable" in got.explain()


@pytest.fixture
def triton_plugin_uninstalled(monkeypatch):
    """moe-core-triton as after ``pip uninstall moe-core-triton``: its package does not import, its entry point is gone."""
    monkeypatch.setitem(sys.modules, "moe_core_triton", None)
    monkeypatch.setenv("MOE_CORE_PLUGINS_DENY", "moe-core-triton")
    reset_default_registry()
    yield
    reset_default_registry()


MISSING_TRITON = "moe-core-triton is not installed (pip install ./plugins/triton_backend)"


@pytest.mark.parametrize("name", ["deepgemm", "batched_deepgemm"])
def test_without_the_triton_plugin_supports_says_so_before_any_layer_runs(triton_plugin_uninstalled, name):
    reg = conformance.registry_with("moe_core_deepgemm.plugin", name="deepgemm")
    got = _support(reg, name, "h100", parallel=ParallelConfig(use_batched_activation_format=name.startswith("batched")))
    assert not got.ok and got.reasons == (MISSING_TRITON,)
    s = quant.scheme("fp8-block")
    assert select(CFG, s.weight_key, s.activation_key, platform=preset("h100"), registry=reg, environ={}).name == "reference"


def test_without_the_triton_plugin_doctor_reports_it(triton_plugin_uninstalled, capsys):
    assert main(["doctor"]) == 1
    out = capsys.readouterr().out
    assert f"[moe_core_requires]: {MISSING_TRITON}" in out and "status: problems found" in out


def test_with_the_triton_plugin_nothing_is_missing(reg):
    assert not [p for p in reg.problems if p.stage == "moe_core_requires"]
    assert _support(reg, "deepgemm", "h100").ok


def test_sm100_bf16_says_it_is_not_validated(reg):
    assert "not been validated" in _support(reg, "deepgemm", "b200", "unquantized").explain()


def test_expert_parallel_layers_are_supported(reg):
    assert _support(reg, "deepgemm", "h100", parallel=ParallelConfig(ep_size=8)).ok


@pytest.mark.parametrize(
    "platform,scheme,batched,want",
    [
        ("h100", "fp8-block", False, "deepgemm"),
        ("h100", "fp8-block", True, "batched_deepgemm"),
        ("h100", "unquantized", False, "triton"),  # below Triton without a ranking
        ("b200", "fp8-block", False, "triton"),
        ("a100", "fp8-channel", False, "reference"),  # DeepGEMM claims fp8-block only; Triton needs sm_89 for fp8
    ],
)
def test_selection_next_to_triton(reg_with_triton, platform, scheme, batched, want):
    s = quant.scheme(scheme)
    cfg = dataclasses.replace(CFG, parallel=ParallelConfig(use_batched_activation_format=batched))
    if want == "triton" and batched:
        want = "triton_batched"
    assert select(cfg, s.weight_key, s.activation_key, platform=preset(platform), registry=reg_with_triton, environ={}).name == want


def test_lora_goes_to_triton(reg_with_triton):
    s = quant.scheme("fp8-block")
    cfg = dataclasses.replace(CFG, lora_enabled=True)
    sel = select(cfg, s.weight_key, s.activation_key, platform=preset("h100"), registry=reg_with_triton, environ={})
    assert sel.name == "triton"


def test_doctor_says_how_to_build_deep_gemm_where_it_is_missing(monkeypatch):
    from moe_core_deepgemm import BUILD_SCRIPT, plugin

    monkeypatch.setattr("moe_core.resolver.current_platform", lambda: preset("h100"))
    assert plugin.moe_core_doctor() is None
    monkeypatch.setattr("moe_core.resolver.current_platform", lambda: preset("a100"))
    (line,) = plugin.moe_core_doctor()
    assert line.startswith(f"deep_gemm is not installed: build it from source with `bash {BUILD_SCRIPT} SOURCE_DIR`")
    assert BUILD_SCRIPT.is_file() and BUILD_SCRIPT.read_text().startswith("#!/usr/bin/env bash")
