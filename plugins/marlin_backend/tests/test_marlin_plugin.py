"""The marlin plugin's declaration and supports(), on simulated platforms, without vLLM."""

import dataclasses
import re
import subprocess
import sys

import pytest
import torch

from moe_core.config import Activation, MoEConfig
from moe_core.errors import BackendUnsupportedError
from moe_core.platform import preset
from moe_core.quant import GroupShape, QuantDtype, QuantFamily, QuantKey, ScaleDtype, scheme
from moe_core.resolver import select
from moe_core.testing.conformance import check_specs, check_supports, registry_with

CFG = MoEConfig(num_experts=8, top_k=2, hidden_size=2048, intermediate_size=768, dtype=torch.bfloat16)
W4 = scheme("w4a16")
FP8 = scheme("fp8-w8a16")
FP8_BLOCK = scheme("fp8-block-w8a16")
NVFP4_W4A16 = scheme("nvfp4-w4a16")
MXFP4 = scheme("mxfp4")
#: The seeds' fp8 order around marlin (FP8_ORDER in tests/parity/seed_backends.py).
SEED_FP8_TAIL = ["triton", "triton_batched", "marlin"]


def with_vllm(name):
    plat = preset(name)
    return dataclasses.replace(plat, packages=plat.packages | {"vllm"})


@pytest.fixture(scope="module")
def reg():
    return registry_with("moe_core_marlin.plugin", "marlin")


def supports(reg, cfg=CFG, key=W4, platform="h100"):
    return reg.supports(reg.specs["marlin"], _query(cfg, key, with_vllm(platform)))


def _query(cfg, key, plat):
    from moe_core.spec import SupportQuery

    return SupportQuery(cfg, key.weight_key, key.activation_key, plat)


def test_conformance(reg):
    check_specs(reg, "marlin")
    check_supports(reg, "marlin", [with_vllm(p) for p in ("h100", "a100", "l40s", "t4", "mi300x", "cpu")])


def test_spec_declares_weight_only_schemes_validated_on_the_h200(reg):
    from pathlib import Path

    spec = reg.specs["marlin"]
    assert spec.family == "marlin" and spec.validation.validated and spec.validation.hardware == "NVIDIA H200"
    log = (Path(__file__).resolve().parents[3] / spec.validation.log).read_text()
    assert "35/35 checks passed" in log and "\nFAIL " not in log
    assert spec.claims(W4.weight_key, None) and spec.claims(*scheme("w4a16-zp").keys) and spec.claims(*scheme("w8a16").keys)
    assert not spec.claims(*scheme("w8a16-zp").keys)  # vLLM's Marlin has no uint8 + zero-point type


def test_spec_declares_fp8_weight_only_with_the_seeds_fp8_rank(reg):
    spec = reg.specs["marlin"]
    assert spec.claims(*FP8.keys) and spec.claims(*FP8_BLOCK.keys)
    for w8a8 in ("fp8-tensor", "fp8-channel", "fp8-block"):  # fp8 activations: Marlin W8A8 is not bound
        assert not spec.claims(*scheme(w8a8).keys)
    assert spec.priority_for(QuantFamily.FP8) == 480 and spec.priority_for(QuantFamily.WEIGHT_ONLY) == 400


def test_seed_fp8_tail_matches_the_parity_seeds():
    seeds = pytest.importorskip("tests.parity.seed_backends")
    order = seeds.FP8_ORDER
    assert [n for n in order if n in SEED_FP8_TAIL] == SEED_FP8_TAIL
    assert order.index("marlin") == order.index("triton_batched") + 1  # directly below triton_batched


@pytest.mark.parametrize("name, ok, reason", [
    ("h100", True, None), ("a100", True, None), ("l40s", True, None),
    ("t4", False, "needs compute capability 8.0+, this GPU is sm_75"),
    ("mi300x", False, "runs on cuda, not rocm"), ("mi355x", False, "runs on cuda, not rocm"),
    ("cpu", False, "runs on cuda, not cpu"),
])
def test_supports_on_presets(reg, name, ok, reason):
    request = dataclasses.replace(CFG, moe_backend="marlin")
    if ok:
        assert select(request, *W4.keys, platform=with_vllm(name), registry=reg, environ={}).name == "marlin"
    else:
        with pytest.raises(BackendUnsupportedError, match=re.escape(reason)):
            select(request, *W4.keys, platform=with_vllm(name), registry=reg, environ={})


@pytest.mark.parametrize("change, reason", [
    (dict(dtype=torch.float32), "float16/bfloat16 activations only"),
    (dict(hidden_size=2000), "hidden_size=2000 is not a multiple of 128"),
    (dict(intermediate_size=704), "intermediate_size=704 is not a multiple of 128"),
])
def test_refusals_are_sentences(reg, change, reason):
    answer = supports(reg, cfg=dataclasses.replace(CFG, **change))
    assert not answer.ok and reason in answer.explain()


def test_lora_is_refused_by_the_declaration(reg):
    with pytest.raises(BackendUnsupportedError, match="LoRA is enabled"):
        select(dataclasses.replace(CFG, lora_enabled=True, moe_backend="marlin"), *W4.keys, platform=with_vllm("h100"), registry=reg, environ={})


def test_selection_with_provider_present_and_absent(reg):
    assert select(CFG, *W4.keys, platform=with_vllm("h100"), registry=reg, environ={}).name == "marlin"
    absent = select(CFG, *W4.keys, platform=preset("h100"), registry=reg, environ={})
    assert absent.name == "reference" and "vllm not importable" in absent.explain()


def test_importing_and_selecting_never_imports_vllm():
    code = (
        "import sys, torch, dataclasses\n"
        "from moe_core.config import MoEConfig\nfrom moe_core.platform import preset\nfrom moe_core.quant import scheme\n"
        "from moe_core.resolver import select\nfrom moe_core.testing.conformance import registry_with\n"
        "reg = registry_with('moe_core_marlin.plugin', 'marlin')\n"
        "p = preset('h100'); p = dataclasses.replace(p, packages=p.packages | {'vllm'})\n"
        "cfg = MoEConfig(num_experts=8, top_k=2, hidden_size=2048, intermediate_size=768, dtype=torch.bfloat16)\n"
        "sel = select(cfg, *scheme('w4a16').keys, platform=p, registry=reg, environ={})\n"
        "assert sel.name == 'marlin', sel.name\n"
        "assert not any(m == 'vllm' or m.startswith('vllm.') for m in sys.modules), 'vllm was imported'\n"
    )
    subprocess.run([sys.executable, "-c", code], check=True)


@pytest.fixture(scope="module")
def reg_with_triton():
    reg = registry_with("moe_core_marlin.plugin", "marlin")
    reg.register(__import__("moe_core_triton.plugin", fromlist=["plugin"]), name="triton")
    return reg


@pytest.mark.parametrize("key", [FP8, FP8_BLOCK], ids=lambda k: k.name)
def test_fp8_ranks_below_triton_as_the_seeds_do(reg_with_triton, key):
    sel = select(CFG, *key.keys, platform=with_vllm("h100"), registry=reg_with_triton, environ={})
    ranked = [c.name for c in sel.candidates if c.name in SEED_FP8_TAIL]
    assert ranked == SEED_FP8_TAIL and sel.name == "triton", sel.explain()
    marlin = next(c for c in sel.candidates if c.name == "marlin")
    assert marlin.priority == 480 and marlin.status.value == "runner-up"
    # Without triton, marlin is the fp8 weight-only kernel; vLLM's force switch picks it over triton.
    no_triton = dataclasses.replace(with_vllm("a100"), packages=frozenset({"vllm"}))
    assert select(CFG, *key.keys, platform=no_triton, registry=reg_with_triton, environ={}).name == "marlin"
    forced = select(CFG, *key.keys, platform=with_vllm("h100"), registry=reg_with_triton,
                    environ={"MOE_CORE_COMPAT": "vllm", "VLLM_TEST_FORCE_FP8_MARLIN": "1"})
    assert forced.name == "marlin"


@pytest.mark.parametrize("key, change, reason", [
    (FP8_BLOCK, dict(intermediate_size=704), "intermediate_size=704 is not a multiple of 128"),
    (FP8, dict(hidden_size=2000), "hidden_size=2000 is not a multiple of 128"),
    (FP8, dict(dtype=torch.float32), "float16/bfloat16 activations only"),
], ids=lambda v: getattr(v, "name", None))
def test_fp8_refusals_are_sentences(reg, key, change, reason):
    answer = supports(reg, cfg=dataclasses.replace(CFG, **change), key=key)
    assert not answer.ok and reason in answer.explain()


def test_fp8_per_channel_takes_intermediate_multiples_of_64(reg):
    assert supports(reg, cfg=dataclasses.replace(CFG, intermediate_size=704), key=FP8).ok


def test_fp8_on_sm75_is_refused(reg):
    answer = supports(reg, key=FP8, platform="t4")
    assert not answer.ok and "needs compute capability 8.0+, this GPU is sm_75" in answer.explain()


def test_fp8_groups_other_than_channel_or_128_are_refused():
    from moe_core_marlin import plugin

    key = QuantKey(QuantDtype.FP8_E4M3, GroupShape(1, 64), static=True)
    answer = plugin.moe_core_supports(plugin.SPECS[0], CFG, key, None, with_vllm("h100"))
    assert not answer.ok and "fp8 weight groups of (-1, 128) along K, not 64" in answer.explain()


def test_gelu_and_the_swiglu_clamp_are_applied_by_the_glue(reg):
    assert supports(reg, cfg=dataclasses.replace(CFG, activation=Activation.GELU)).ok
    assert supports(reg, cfg=dataclasses.replace(CFG, swiglu_limit=7.0)).ok


def test_on_the_real_machine_the_library_file_decides(monkeypatch, tmp_path):
    from moe_core.env import MARLIN_OPS_LIBRARY
    from moe_core.platform import DeviceKind, Platform
    from moe_core_marlin import plugin

    machine = Platform(DeviceKind.CUDA, (9, 0), "NVIDIA H100 80GB HBM3")  # not simulated, no vllm package
    monkeypatch.setenv(MARLIN_OPS_LIBRARY, str(tmp_path / "absent.so"))
    answer = plugin.moe_core_supports(plugin.SPECS[0], CFG, W4.weight_key, None, machine)
    assert not answer.ok and "MOE_CORE_MARLIN_OPS_LIBRARY" in answer.explain() and "pip download --no-deps vllm==" in answer.explain()
    (tmp_path / "ops.so").write_bytes(b"")
    monkeypatch.setenv(MARLIN_OPS_LIBRARY, str(tmp_path / "ops.so"))
    assert plugin.moe_core_supports(plugin.SPECS[0], CFG, W4.weight_key, None, machine).ok


# fp4 weight-only: nvfp4-w4a16 and mxfp4


def test_spec_declares_fp4_weight_only_with_the_seeds_nvfp4_rank(reg):
    spec = reg.specs["marlin"]
    assert spec.claims(*NVFP4_W4A16.keys) and spec.claims(*MXFP4.keys)
    assert not spec.claims(*scheme("nvfp4").keys)  # w4a4: Marlin would skip the activation quantization
    assert spec.priority_for(QuantFamily.NVFP4) == 950 and spec.priority_for(QuantFamily.MXFP4) == 400


def test_nvfp4_rank_follows_the_seeds_and_the_flashinfer_steps():
    seeds = pytest.importorskip("tests.parity.seed_backends")
    order = seeds.NVFP4_ORDER
    assert order.index("marlin") == order.index("vllm_cutlass") + 1 == order.index("flashinfer_cutlass") + 2
    flashinfer = pytest.importorskip("moe_core_flashinfer.plugin")
    cutlass = next(s for s in flashinfer.SPECS if s.name == "flashinfer_cutlass")
    from moe_core_marlin.plugin import NVFP4_PRIORITY

    assert NVFP4_PRIORITY == cutlass.priority_for(QuantFamily.NVFP4) - 2 * 10  # vllm_cutlass's step skipped


@pytest.mark.parametrize("platform", ["h100", "a100", "l40s"])
def test_nvfp4_w4a16_ranks_above_triton_as_the_seeds_do(reg_with_triton, platform):
    sel = select(CFG, *NVFP4_W4A16.keys, platform=with_vllm(platform), registry=reg_with_triton, environ={})
    assert sel.name == "marlin", sel.explain()
    ranked = [(c.name, c.priority) for c in sel.candidates if c.name in ("marlin", "triton")]
    assert ranked == [("marlin", 950), ("triton", 500)]
    # Without vLLM, triton runs it; VLLM_TEST_FORCE_FP8_MARLIN (vLLM's nvfp4 selector honours it too) picks marlin.
    assert select(CFG, *NVFP4_W4A16.keys, platform=preset(platform), registry=reg_with_triton, environ={}).name == "triton"
    forced = select(CFG, *NVFP4_W4A16.keys, platform=with_vllm(platform), registry=reg_with_triton,
                    environ={"MOE_CORE_COMPAT": "vllm", "VLLM_TEST_FORCE_FP8_MARLIN": "1"})
    assert forced.name == "marlin"


def test_mxfp4_ranks_below_triton(reg_with_triton):
    sel = select(CFG, *MXFP4.keys, platform=with_vllm("h100"), registry=reg_with_triton, environ={})
    assert sel.name == "triton", sel.explain()
    marlin = next(c for c in sel.candidates if c.name == "marlin")
    assert marlin.priority == 400 and marlin.status.value == "runner-up"
    no_triton = dataclasses.replace(with_vllm("a100"), packages=frozenset({"vllm"}))
    assert select(CFG, *MXFP4.keys, platform=no_triton, registry=reg_with_triton, environ={}).name == "marlin"


def test_mxfp4_float16_falls_to_triton_with_marlins_reason(reg_with_triton):
    cfg = dataclasses.replace(CFG, dtype=torch.float16)
    sel = select(cfg, *MXFP4.keys, platform=with_vllm("h100"), registry=reg_with_triton, environ={})
    assert sel.name == "triton" and "bfloat16 activations only, not float16" in sel.explain()


@pytest.mark.parametrize("key, change, reason", [
    (MXFP4, dict(dtype=torch.float16), "mxfp4 MoE kernels for bfloat16 activations only, not float16"),
    (MXFP4, dict(dtype=torch.float32), "float16/bfloat16 activations only"),
    (NVFP4_W4A16, dict(dtype=torch.float32), "float16/bfloat16 activations only"),
    (NVFP4_W4A16, dict(hidden_size=2000), "hidden_size=2000 is not a multiple of 128"),
    (MXFP4, dict(intermediate_size=736), "intermediate_size=736 is not a multiple of 64"),
], ids=lambda v: getattr(v, "name", None))
def test_fp4_refusals_are_sentences(reg, key, change, reason):
    answer = supports(reg, cfg=dataclasses.replace(CFG, **change), key=key)
    assert not answer.ok and reason in answer.explain()


@pytest.mark.parametrize("key", [NVFP4_W4A16, MXFP4], ids=lambda k: k.name)
def test_fp4_accepts_both_16_bit_dtypes_where_built_and_intermediate_multiples_of_64(reg, key):
    assert supports(reg, cfg=dataclasses.replace(CFG, intermediate_size=704), key=key).ok
    assert supports(reg, cfg=dataclasses.replace(CFG, dtype=torch.float16), key=key).ok == (key is NVFP4_W4A16)


@pytest.mark.parametrize("key", [NVFP4_W4A16, MXFP4], ids=lambda k: k.name)
def test_fp4_on_sm75_is_refused(reg, key):
    answer = supports(reg, key=key, platform="t4")
    assert not answer.ok and "needs compute capability 8.0+, this GPU is sm_75" in answer.explain()


@pytest.mark.parametrize("key, reason", [
    (QuantKey(QuantDtype.FP4_E2M1, GroupShape(1, 32), static=True, scale_dtype=ScaleDtype.FP8_E4M3, global_scale=True),
     "nvfp4 weight groups of (16,) along K, not 32"),
    (QuantKey(QuantDtype.FP4_E2M1, GroupShape(1, 16), static=True, scale_dtype=ScaleDtype.E8M0),
     "mxfp4 weight groups of (32,) along K, not 16"),
])
def test_fp4_groups_other_than_the_compiled_ones_are_refused(key, reason):
    from moe_core_marlin import plugin

    answer = plugin.moe_core_supports(plugin.SPECS[0], CFG, key, None, with_vllm("h100"))
    assert not answer.ok and reason in answer.explain()
