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
from moe_core.quant import scheme
from moe_core.resolver import select
from moe_core.testing.conformance import check_specs, check_supports, registry_with

CFG = MoEConfig(num_experts=8, top_k=2, hidden_size=2048, intermediate_size=768, dtype=torch.bfloat16)
W4 = scheme("w4a16")


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


def test_spec_declares_weight_only_schemes_and_no_validation(reg):
    spec = reg.specs["marlin"]
    assert spec.family == "marlin" and spec.requires == {"vllm"} and not spec.validation.validated
    assert spec.claims(W4.weight_key, None) and spec.claims(*scheme("w4a16-zp").keys) and spec.claims(*scheme("w8a16").keys)
    assert not spec.claims(*scheme("w8a16-zp").keys)  # vLLM's Marlin has no uint8 + zero-point type


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
    (dict(activation=Activation.GELU), "silu only"),
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
