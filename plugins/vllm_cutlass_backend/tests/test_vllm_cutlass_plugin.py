"""The vllm_cutlass plugin's declaration and supports(), on simulated platforms, without vLLM."""

import dataclasses
import re
import subprocess
import sys

import pytest
import torch

from moe_core.config import ActivationFormat, MoEConfig, ParallelConfig
from moe_core.env import VARIABLES, VLLM_CUTLASS_OPS_LIBRARY
from moe_core.errors import BackendUnsupportedError
from moe_core.platform import DeviceKind, Platform, preset
from moe_core.quant import QuantFamily, scheme
from moe_core.resolver import select
from moe_core.testing.conformance import check_specs, check_supports, registry_with

CFG = MoEConfig(num_experts=128, top_k=8, hidden_size=2048, intermediate_size=768, dtype=torch.bfloat16)
CLAIMED = ("fp8-tensor", "fp8-tensor-dyn", "fp8-channel")
#: The seeds' fp8 order from vllm_cutlass down (FP8_ORDER in tests/parity/seed_backends.py).
SEED_FP8_RUN = ["vllm_cutlass", "batched_vllm_cutlass", "triton", "triton_batched"]


def with_vllm(name):
    plat = preset(name)
    return dataclasses.replace(plat, packages=plat.packages | {"vllm"})


@pytest.fixture(scope="module")
def reg():
    return registry_with("moe_core_vllm_cutlass.plugin", "vllm_cutlass")


@pytest.fixture(scope="module")
def reg_with_triton():
    reg = registry_with("moe_core_vllm_cutlass.plugin", "vllm_cutlass")
    reg.register(__import__("moe_core_triton.plugin", fromlist=["plugin"]), name="triton")
    return reg


def test_conformance(reg):
    check_specs(reg, "vllm_cutlass")
    check_supports(reg, "vllm_cutlass", [with_vllm(p) for p in ("h100", "a100", "l40s", "t4", "mi300x", "cpu")])


@pytest.mark.parametrize("name, fmt, priority", [
    ("vllm_cutlass", ActivationFormat.STANDARD, 520), ("batched_vllm_cutlass", ActivationFormat.BATCHED_EXPERTS, 510),
])
def test_specs_declare_vllms_three_fp8_pairs_validated_on_the_h200(reg, name, fmt, priority):
    from pathlib import Path

    spec = reg.specs[name]
    assert spec.family == "vllm" and not spec.supports_lora and spec.formats == {fmt}
    assert spec.validation.validated and spec.validation.hardware == "NVIDIA H200"
    log = Path(__file__).resolve().parents[3] / spec.validation.log
    assert "38/40 checks passed" in log.read_text()
    assert all(spec.claims(*scheme(s).keys) for s in CLAIMED)
    for other in ("fp8-tensor-token", "fp8-block", "fp8-w8a16", "nvfp4", "unquantized", "int8"):
        assert not spec.claims(*scheme(other).keys), other  # not among CutlassExpertsFp8's pairs, or not this GEMM
    assert spec.priority_for(QuantFamily.FP8) == priority
    assert reg.specs["vllm_cutlass"].batched_variant == "batched_vllm_cutlass"


def test_what_failed_on_the_gpu_is_refused_with_the_measurement(reg_with_triton):
    from pathlib import Path

    from moe_core_vllm_cutlass.plugin import FAILED_ON_GPU, VALIDATION

    log = (Path(__file__).resolve().parents[3] / VALIDATION.log).read_text()
    failed = {(m[0], m[1]) for m in re.findall(r"^FAIL numerics \S+ (\S+) (\S+) tokens", log, re.M)}
    assert failed == {(name, str(dtype).removeprefix("torch.")) for name, dtype in FAILED_ON_GPU}
    fp16 = dataclasses.replace(CFG, dtype=torch.float16)
    refused = select(fp16, *scheme("fp8-tensor-dyn").keys, platform=with_vllm("h100"), registry=reg_with_triton, environ={})
    assert refused.name == "triton" and "fp8-tensor-dyn in float16: its numerics failed on an NVIDIA H200" in refused.explain()
    for dtype, name in ((torch.bfloat16, "fp8-tensor-dyn"), (torch.float16, "fp8-tensor"), (torch.float16, "fp8-channel")):
        layer = dataclasses.replace(CFG, dtype=dtype)
        assert select(layer, *scheme(name).keys, platform=with_vllm("h100"), registry=reg_with_triton, environ={}).name == "vllm_cutlass"


def test_seed_fp8_order_places_vllm_cutlass_two_steps_above_triton():
    seeds = pytest.importorskip("tests.parity.seed_backends")
    order = seeds.FP8_ORDER
    assert [n for n in order if n in SEED_FP8_RUN] == SEED_FP8_RUN
    assert order.index("triton") - order.index("vllm_cutlass") == 2 and seeds.BATCHED_VARIANT["vllm_cutlass"] == "batched_vllm_cutlass"


def test_batched_layers_pick_the_batched_variant_above_triton_batched(reg_with_triton):
    batched = dataclasses.replace(CFG, parallel=ParallelConfig(ep_size=2, use_batched_activation_format=True))
    sel = select(batched, *scheme("fp8-channel").keys, platform=with_vllm("h100"), registry=reg_with_triton, environ={})
    assert sel.name == "batched_vllm_cutlass", sel.explain()
    assert [c.name for c in sel.candidates if c.name in SEED_FP8_RUN[1::2]] == SEED_FP8_RUN[1::2]


@pytest.mark.parametrize("key", CLAIMED)
def test_on_an_h100_with_the_library_it_is_chosen_over_triton(reg_with_triton, key):
    sel = select(CFG, *scheme(key).keys, platform=with_vllm("h100"), registry=reg_with_triton, environ={})
    assert sel.name == "vllm_cutlass", sel.explain()
    assert [c.name for c in sel.candidates if c.name in ("vllm_cutlass", "triton")] == ["vllm_cutlass", "triton"]
    triton = next(c for c in sel.candidates if c.name == "triton")
    assert triton.priority == 500 and triton.status.value == "runner-up"


def test_elsewhere_the_explanation_says_why_not(reg_with_triton):
    keys = scheme("fp8-channel").keys
    a100 = select(CFG, *keys, platform=with_vllm("a100"), registry=reg_with_triton, environ={})
    assert a100.name != "vllm_cutlass" and "needs compute capability 9.0+ (cutlass_group_gemm_supported), this GPU is sm_80" in a100.explain()
    bare = select(CFG, *keys, platform=preset("h100"), registry=reg_with_triton, environ={})
    assert bare.name == "triton" and "vllm not importable on this simulated platform" in bare.explain()
    block = select(CFG, *scheme("fp8-block").keys, platform=with_vllm("h100"), registry=reg_with_triton, environ={})
    assert block.name != "vllm_cutlass"


@pytest.mark.parametrize("name, ok, reason", [
    ("h100", True, None),
    ("a100", False, "needs compute capability 9.0+ (cutlass_group_gemm_supported), this GPU is sm_80"),
    ("l40s", False, "this GPU is sm_89"),
    ("mi300x", False, "runs on cuda, not rocm"), ("cpu", False, "runs on cuda, not cpu"),
])
def test_requests_on_presets(reg, name, ok, reason):
    request = dataclasses.replace(CFG, moe_backend="vllm_cutlass")
    keys = scheme("fp8-tensor").keys
    if ok:
        assert select(request, *keys, platform=with_vllm(name), registry=reg, environ={}).name == "vllm_cutlass"
    else:
        with pytest.raises(BackendUnsupportedError, match=re.escape(reason)):
            select(request, *keys, platform=with_vllm(name), registry=reg, environ={})


@pytest.mark.parametrize("change, reason", [
    (dict(dtype=torch.float32), "writes float16/bfloat16 only, not float32"),
    (dict(hidden_size=2056), "hidden_size=2056 is not a multiple of 16"),
    (dict(intermediate_size=760), "intermediate_size=760 is not a multiple of 16"),
    (dict(num_experts=1032, top_k=2), "1032 experts"),
])
def test_refusals_are_sentences(reg, change, reason):
    from moe_core.spec import SupportQuery

    query = SupportQuery(dataclasses.replace(CFG, **change), *scheme("fp8-channel").keys, with_vllm("h100"))
    answer = reg.supports(reg.specs["vllm_cutlass"], query)
    assert not answer.ok and reason in answer.explain()


def test_lora_is_refused_and_the_expert_map_and_clamp_are_accepted(reg):
    keys = scheme("fp8-channel").keys
    with pytest.raises(BackendUnsupportedError, match="LoRA is enabled"):
        select(dataclasses.replace(CFG, lora_enabled=True, moe_backend="vllm_cutlass"), *keys, platform=with_vllm("h100"), registry=reg, environ={})
    ep = dataclasses.replace(CFG, swiglu_limit=7.0, parallel=ParallelConfig(ep_size=2))
    assert select(ep, *keys, platform=with_vllm("h100"), registry=reg, environ={}).name == "vllm_cutlass"


def test_on_the_real_machine_the_library_file_decides(monkeypatch, tmp_path):
    from moe_core_vllm_cutlass import plugin

    machine = Platform(DeviceKind.CUDA, (9, 0), "NVIDIA H100 80GB HBM3")  # not simulated, no vllm package
    keys = scheme("fp8-channel").keys
    monkeypatch.setenv(VLLM_CUTLASS_OPS_LIBRARY, str(tmp_path / "absent.so"))
    answer = plugin.moe_core_supports(plugin.SPECS[0], CFG, *keys, machine)
    assert not answer.ok and VLLM_CUTLASS_OPS_LIBRARY in answer.explain() and "pip download --no-deps vllm==0.26.0" in answer.explain()
    (tmp_path / "lib.so").write_bytes(b"")
    monkeypatch.setenv(VLLM_CUTLASS_OPS_LIBRARY, str(tmp_path / "lib.so"))
    assert plugin.moe_core_supports(plugin.SPECS[0], CFG, *keys, machine).ok


def test_the_library_variable_keys_the_selection_cache():
    assert VLLM_CUTLASS_OPS_LIBRARY == "MOE_CORE_VLLM_CUTLASS_OPS_LIBRARY" and VLLM_CUTLASS_OPS_LIBRARY in VARIABLES


def test_importing_and_selecting_never_imports_vllm_or_loads_the_library():
    code = (
        "import sys, torch, dataclasses\n"
        "from moe_core.config import MoEConfig\nfrom moe_core.platform import preset\nfrom moe_core.quant import scheme\n"
        "from moe_core.resolver import select\nfrom moe_core.testing.conformance import registry_with\n"
        "reg = registry_with('moe_core_vllm_cutlass.plugin', 'vllm_cutlass')\n"
        "p = preset('h100'); p = dataclasses.replace(p, packages=p.packages | {'vllm'})\n"
        "cfg = MoEConfig(num_experts=8, top_k=2, hidden_size=2048, intermediate_size=768, dtype=torch.bfloat16)\n"
        "sel = select(cfg, *scheme('fp8-channel').keys, platform=p, registry=reg, environ={})\n"
        "assert sel.name == 'vllm_cutlass', sel.name\n"
        "assert not any(m == 'vllm' or m.startswith('vllm.') for m in sys.modules), 'vllm was imported'\n"
        "assert not hasattr(torch.ops._C, 'cutlass_moe_mm'), 'the library was loaded'\n"
    )
    subprocess.run([sys.executable, "-c", code], check=True)
