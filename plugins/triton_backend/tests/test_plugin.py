"""The plugin's declarations: conformance kit, and supports() on simulated platforms."""

import dataclasses

import pytest
import torch

from moe_core import quant
from moe_core.config import MoEConfig, ParallelConfig
from moe_core.platform import preset
from moe_core.registry import Registry
from moe_core.resolver import select
from moe_core.testing import conformance

CFG = MoEConfig(num_experts=64, top_k=4, hidden_size=2048, intermediate_size=768)


@pytest.fixture(scope="module")
def reg():
    return conformance.registry_with("moe_core_triton.plugin", name="triton")


def test_conformance(reg):
    conformance.check_specs(reg, "triton")
    conformance.check_supports(reg, "triton")


def test_discovered_through_its_entry_point():
    reg = Registry(environ={})
    assert reg.specs["triton"].plugin == "triton"
    assert next(p for p in reg.plugins if p.name == "triton").distribution == "moe-core-triton"


@pytest.mark.parametrize(
    "platform,scheme,dtype,want,reason",
    [
        ("h100", "fp8-block", torch.bfloat16, "triton", None),
        ("l40s", "fp8-channel", torch.bfloat16, "triton", None),
        ("a100", "fp8-channel", torch.bfloat16, "reference", "fp8 with bfloat16 needs compute capability 8.9+, this is sm_80"),
        ("a100", "int8", torch.bfloat16, "triton", None),
        ("t4", "int8", torch.float16, "triton", None),
        ("t4", "int8", torch.bfloat16, "reference", "int8 with bfloat16 needs compute capability 8.0+, this is sm_75"),
        ("t4", "unquantized", torch.float16, "reference", "unquantized with float16 needs compute capability 8.0+"),
        ("h100", "unquantized", torch.float32, "reference", "compute in float16/bfloat16, not float32"),
        ("mi300x", "int8", torch.bfloat16, "triton", None),
        ("mi300x", "fp8-block", torch.bfloat16, "reference", "e4m3fnuz"),
        ("cpu", "unquantized", torch.bfloat16, "reference", "runs on cuda, rocm, not cpu"),
        ("h100", "nvfp4", torch.bfloat16, "reference", None),
    ],
)
def test_selection_on_simulated_platforms(reg, platform, scheme, dtype, want, reason):
    sch = quant.scheme(scheme)
    sel = select(dataclasses.replace(CFG, dtype=dtype), sch.weight_key, sch.activation_key, platform=preset(platform), registry=reg, environ={})
    assert sel.name == want
    if reason:
        assert reason in sel.explain()


def test_rocm_is_declared_untested(reg):
    sch = quant.scheme("int8")
    sel = select(CFG, sch.weight_key, sch.activation_key, platform=preset("mi300x"), registry=reg, environ={})
    assert "ROCm is declared but untested" in sel.explain()


def test_batched_request_maps_to_triton_batched(reg):
    sch = quant.scheme("fp8-block")
    cfg = dataclasses.replace(CFG, moe_backend="triton", parallel=ParallelConfig(use_batched_activation_format=True))
    assert select(cfg, sch.weight_key, sch.activation_key, platform=preset("h100"), registry=reg, environ={}).name == "triton_batched"
    int8 = quant.scheme("int8")
    auto = dataclasses.replace(cfg, moe_backend="auto")
    assert select(auto, int8.weight_key, int8.activation_key, platform=preset("h100"), registry=reg, environ={}).name == "reference"


def test_lora_and_clamp_keep_triton(reg):
    cfg = dataclasses.replace(CFG, lora_enabled=True, swiglu_limit=7.0)
    assert select(cfg, platform=preset("h100"), registry=reg, environ={}).name == "triton"


def _declared(backend: str) -> list[tuple[str, str]]:
    from moe_core_triton.plugin import SPECS

    spec = next(s for s in SPECS if s.name == backend)
    return [(backend, quant.scheme_for_keys(*keys).name) for keys in sorted(spec.schemes, key=str)]


# One test per backend and scheme, so a parallel run spreads the kernels' compiles over its workers.
@pytest.mark.skipif(not torch.cuda.is_available(), reason="the Triton backends run on CUDA/ROCm GPUs")
@pytest.mark.parametrize("backend,scheme", _declared("triton") + _declared("triton_batched"))
def test_conformance_numerics_on_this_gpu(reg, backend, scheme):
    configs = [MoEConfig(num_experts=16, top_k=4, hidden_size=512, intermediate_size=256, dtype=d) for d in (torch.bfloat16, torch.float16)]
    records = conformance.check_numerics(reg, backend, device="cuda", configs=configs, tokens=(1, 3, 64, 257), schemes=[scheme])
    assert {r["scheme"] for r in records if "rel_err" in r} == {scheme}  # the scheme ran on this GPU
