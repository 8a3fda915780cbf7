"""Specs, supports() on simulated platforms against FlashInfer's own answers, selection, lazy import.

These tests need flashinfer-python importable (CI installs it without its kernel toolchains:
requirements-light.txt); they compare against the installed package, so an upgrade that changes
FlashInfer's ``supported(arch)`` answers or limits shows up here.
"""

import dataclasses
import subprocess
import sys

import pytest
import torch

from moe_core.config import Activation, ActivationFormat, MoEConfig, ParallelConfig
from moe_core.platform import DeviceKind, preset
from moe_core.quant import QuantFamily, scheme
from moe_core.registry import Registry
from moe_core.resolver import select
from moe_core.spec import SupportQuery
from moe_core.testing import conformance

pytest.importorskip("flashinfer.fused_moe.api", reason="needs flashinfer-python (scripts/bootstrap.sh installs it)")

from flashinfer.fused_moe import api  # noqa: E402

from moe_core_flashinfer import contract, facts, plugin  # noqa: E402

CFG = MoEConfig(num_experts=64, top_k=4, hidden_size=2048, intermediate_size=768, dtype=torch.bfloat16)
PLATFORMS = ("h100", "b200", "a100", "l40s", "rtx5090")
SEED_ORDERS = {  # tests/parity/seed_backends.py, restricted to the backends this plugin registers (+ the real plugins around them)
    QuantFamily.FP8: ["flashinfer_trtllm", "flashinfer_cutlass", "deepgemm", "triton"],
    QuantFamily.NVFP4: ["flashinfer_trtllm", "flashinfer_cutedsl", "flashinfer_cutedsl_batched", "flashinfer_cutlass"],
    QuantFamily.UNQUANTIZED: ["flashinfer_trtllm", "flashinfer_cutlass", "aiter", "triton"],
}
OTHER_PRIORITIES = {  # the other plugins' declared priorities the seeds' orders interleave with
    (QuantFamily.FP8, "deepgemm"): 700, (QuantFamily.FP8, "triton"): 500,
    (QuantFamily.UNQUANTIZED, "aiter"): 1980, (QuantFamily.UNQUANTIZED, "triton"): 500,
}


@pytest.fixture(scope="module")
def reg():
    return conformance.registry_with("moe_core_flashinfer.plugin", name="flashinfer")


def _support(reg, backend, platform, scheme_name="unquantized", **changes):
    cfg = dataclasses.replace(CFG, **changes)
    if reg.specs[backend].formats == frozenset({ActivationFormat.BATCHED_EXPERTS}):
        cfg = dataclasses.replace(cfg, parallel=ParallelConfig(use_batched_activation_format=True))
    sch = scheme(scheme_name)
    plat = preset(platform) if isinstance(platform, str) else platform
    return reg.supports(reg.specs[backend], SupportQuery(cfg, sch.weight_key, sch.activation_key, plat))


def test_conformance_specs_and_supports(reg):
    conformance.check_specs(reg, "flashinfer")
    conformance.check_supports(reg, "flashinfer")


def test_every_seed_backend_is_registered(reg):
    assert {s.name for s in plugin.SPECS} == {
        "flashinfer_trtllm", "flashinfer_cutlass", "flashinfer_cutedsl", "flashinfer_cutedsl_batched", "flashinfer_b12x", "flashinfer_cutile",
    }
    assert not reg.specs["flashinfer_b12x"].auto_select
    assert reg.specs["flashinfer_cutedsl"].batched_variant == "flashinfer_cutedsl_batched"
    assert reg.specs["flashinfer_cutedsl_batched"].formats == frozenset({ActivationFormat.BATCHED_EXPERTS})
    assert {s.name for s in plugin.SPECS if s.applies_swiglu_clamp} == {"flashinfer_trtllm", "flashinfer_cutile"}
    assert not any(s.supports_lora for s in plugin.SPECS)


@pytest.mark.parametrize("family", sorted(SEED_ORDERS, key=lambda f: f.value))
def test_priorities_follow_the_seeds_orders(reg, family):
    mine = {s.name: s.priority_for(family) for s in plugin.SPECS if family in s.quant_families}
    order = [n for n in SEED_ORDERS[family] if n in mine or (family, n) in OTHER_PRIORITIES]
    ranks = [mine.get(n, OTHER_PRIORITIES.get((family, n))) for n in order]
    assert ranks == sorted(ranks, reverse=True) and len(set(ranks)) == len(ranks), dict(zip(order, ranks))


@pytest.mark.parametrize("platform", PLATFORMS)
def test_arch_answers_are_flashinfers_own(reg, platform):
    """For every (backend, scheme): supported on a preset exactly when FlashInfer's config says so for its arch."""
    cap = preset(platform).capability
    arch = cap[0] * 10 + cap[1]
    for backend, bindings in contract.BINDINGS.items():
        for scheme_name, binding in bindings.items():
            want = getattr(api, binding.config).supported(arch)
            verdict = _support(reg, backend, platform, scheme_name)
            assert verdict.ok == want, (backend, scheme_name, platform, verdict.explain())
            if not want:
                assert f"not sm_{arch}" in verdict.explain() and binding.config in verdict.explain()


def test_refusals_name_what_is_missing(reg):
    assert "sm_100, sm_103, sm_107 only" in _support(reg, "flashinfer_trtllm", "h100").explain()
    assert "bfloat16" in _support(reg, "flashinfer_cutile", "h100", dtype=torch.float16).explain()
    assert "not a multiple of 32" in _support(reg, "flashinfer_cutile", "h100", "fp8-tensor-dyn", hidden_size=2048 + 16).explain()
    assert _support(reg, "flashinfer_cutile", "h100", "unquantized", hidden_size=2048 + 16).ok  # the 32-multiple is fp8's
    max_top_k, max_experts = facts.trtllm_limits()
    assert f"top_k <= {max_top_k}" in _support(reg, "flashinfer_trtllm", "b200", top_k=max_top_k + 1, num_experts=64).explain()
    assert f"at most {max_experts} experts" in _support(reg, "flashinfer_trtllm", "b200", num_experts=max_experts + 8).explain()
    assert "SwiGLU (silu) only" in _support(reg, "flashinfer_cutlass", "h100", activation=Activation.GELU).explain()
    assert _support(reg, "flashinfer_cutile", "h100", activation=Activation.GELU).ok  # cuTile implements GeGLU
    assert "has no clamp" in _support(reg, "flashinfer_cutile", "h100", activation=Activation.GELU, swiglu_limit=7.0).explain()
    assert _support(reg, "flashinfer_cutile", "h100", swiglu_limit=7.0).ok
    assert "not LoRA-capable" in _support(reg, "flashinfer_cutile", "h100", lora_enabled=True).explain()


def test_limits_are_read_from_flashinfer():
    assert facts.trtllm_limits() == (api.MAX_SUPPORTED_TOP_EXPERTS, api.MAX_SUPPORTED_TOTAL_EXPERTS)
    assert "Geglu" in facts.cutile_activations() and "Swiglu" in facts.cutile_activations()
    with pytest.raises(ValueError, match="divisible by 32"):  # the limit plugin.py enforces for cuTile fp8 is FlashInfer's own
        from flashinfer.fused_moe.prepare import prepare_cutile_fp8_weights

        e, h, i = 1, 48, 64
        prepare_cutile_fp8_weights(
            torch.zeros(e, 2 * i, h, dtype=torch.float8_e4m3fn), torch.ones(e), torch.zeros(e, h, i, dtype=torch.float8_e4m3fn), torch.ones(e),
            num_local_experts=e, hidden_size=h, intermediate_size=i, block_scaled=False,
        )


def test_toolchains_are_checked_on_the_real_machine_only(reg, monkeypatch):
    built = lambda family, arch: facts.JitState(family, arch, "m", 1, facts.BUILT, "/cache/m/m.so")  # noqa: E731 - JIT states: test_flashinfer_jit.py
    monkeypatch.setattr(facts, "jit_state", built)
    missing = facts.Toolchain("cuda-tile", False, "tileiras not found (test)")
    monkeypatch.setattr(facts, "toolchains", lambda: {**{t: facts.Toolchain(t, True, "ok") for t in ("nvcc", "cubins", "cutlass-dsl")}, "cuda-tile": missing})
    real = dataclasses.replace(preset("h100"), simulated=False)
    assert "tileiras not found (test)" in _support(reg, "flashinfer_cutile", real).explain()
    assert _support(reg, "flashinfer_cutile", "h100").ok  # a simulated H100 is asked about its GPU, not this machine
    monkeypatch.setattr(facts, "toolchains", lambda: {**{t: facts.Toolchain(t, True, "ok") for t in ("nvcc", "cutlass-dsl", "cuda-tile")},
                                                      "cubins": facts.Toolchain("cubins", False, "downloaded on first use")})
    verdict = _support(reg, "flashinfer_trtllm", dataclasses.replace(preset("b200"), simulated=False))
    assert verdict.ok and "downloaded on first use" in verdict.explain()  # missing cubins are a note: the network may have them


def test_without_flashinfer_the_answer_says_so(reg, monkeypatch):
    def absent(*_):
        raise facts.FlashInferUnavailableError("flashinfer failed to import (test)")

    monkeypatch.setattr(facts, "supported", absent)
    verdict = _support(reg, "flashinfer_cutile", preset("h100"))
    assert not verdict.ok and "flashinfer failed to import (test)" in verdict.explain()


def test_sm120_preset():
    rtx = preset("rtx5090")
    assert rtx.kind is DeviceKind.CUDA and rtx.capability == (12, 0) and rtx.simulated and rtx.has_package("flashinfer")


@pytest.mark.parametrize(
    "platform,scheme_name,batched,want",
    [
        ("b200", "nvfp4", False, "flashinfer_trtllm"),
        ("b200", "nvfp4", True, "flashinfer_cutedsl_batched"),
        ("b200", "fp8-block", False, "flashinfer_trtllm"),
        ("h100", "fp8-tensor", False, "flashinfer_cutlass"),
        ("h100", "unquantized", False, "flashinfer_cutlass"),
        ("rtx5090", "nvfp4", False, "flashinfer_cutlass"),  # b12x is opt-in, as in the seeds
        ("h100", "fp8-tensor-dyn", False, "flashinfer_cutile"),
        ("a100", "unquantized", False, "reference"),
    ],
)
def test_selection(reg, platform, scheme_name, batched, want):
    sch = scheme(scheme_name)
    cfg = dataclasses.replace(CFG, parallel=ParallelConfig(use_batched_activation_format=batched))
    assert select(cfg, sch.weight_key, sch.activation_key, platform=preset(platform), registry=reg, environ={}).name == want


def test_b12x_runs_when_requested(reg):
    sch = scheme("nvfp4")
    cfg = dataclasses.replace(CFG, moe_backend="flashinfer_b12x")
    assert select(cfg, sch.weight_key, sch.activation_key, platform=preset("rtx5090"), registry=reg, environ={}).name == "flashinfer_b12x"


def test_discovered_through_its_entry_point():
    reg = Registry(environ={})
    assert reg.specs["flashinfer_cutile"].plugin == "flashinfer"
    assert next(p for p in reg.plugins if p.name == "flashinfer").distribution == "moe-core-flashinfer"


def test_selection_does_not_import_flashinfer():
    code = (
        "import sys, torch\n"
        "from moe_core.config import MoEConfig\nfrom moe_core.platform import preset\nfrom moe_core.quant import scheme\n"
        "from moe_core.resolver import select\nfrom moe_core.testing import conformance\n"
        "reg = conformance.registry_with('moe_core_flashinfer.plugin', name='flashinfer')\n"
        "cfg = MoEConfig(num_experts=8, top_k=2, hidden_size=256, intermediate_size=128, dtype=torch.bfloat16)\n"
        "s = scheme('unquantized')\n"
        "assert select(cfg, s.weight_key, s.activation_key, platform=preset('cpu'), registry=reg, environ={}).name == 'reference'\n"
        "assert select(cfg, s.weight_key, s.activation_key, platform=preset('t4'), registry=reg, environ={}).name == 'reference'\n"
        "assert 'flashinfer' not in sys.modules, 'selection on a platform without FlashInfer imported it'\n"
    )
    subprocess.run([sys.executable, "-c", code], check=True)


def test_doctor_module_reports_version_and_toolchains():
    out = subprocess.run([sys.executable, "-m", "moe_core_flashinfer"], check=True, capture_output=True, text=True).stdout
    assert f"flashinfer-python: {facts.version()}" in out
    for tool in ("nvcc", "cubins", "cutlass-dsl", "cuda-tile"):
        assert f"  {tool}" in out
    assert "flashinfer_cutile" in out and "fp8-tensor-dyn" in out
