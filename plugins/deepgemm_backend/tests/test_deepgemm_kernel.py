"""Both kernels end to end (glue compiled on a GPU, interpreted on a CPU) with a pure-torch stand-in for DeepGEMM (tests only), against the reference."""

import dataclasses
import sys

import pytest
import torch

from moe_core.batched import combine, dispatch
from moe_core.config import Activation, MoEConfig, ParallelConfig
from moe_core.numerics import relative_error, tolerance
from moe_core.presets import random_inputs, random_layer
from moe_core.quant import scheme
from moe_core.reference.kernel import ReferenceKernel
from moe_core.routing import Routing
from moe_core_deepgemm import BUILD_SCRIPT
from moe_core_deepgemm.kernel import BatchedDeepGemmKernel, DeepGemmKernel, DeepGemmUnavailableError
from moe_core_deepgemm.layout import weight_scales_for_sm90

import deep_gemm_standin

# fp16: the Triton interpreter has no bfloat16 (the real DeepGEMM needs bf16; supports() says so).
DEVICE = "cuda" if torch.cuda.is_available() else "cpu"
CFG = MoEConfig(num_experts=4, top_k=2, hidden_size=256, intermediate_size=128, dtype=torch.float16)


@pytest.fixture
def standin(monkeypatch):
    monkeypatch.setitem(sys.modules, "deep_gemm", deep_gemm_standin)


def _check(kernel_cls, cfg, scheme_name, tokens, *, expert_map=None, batched=False):
    sch = scheme(scheme_name)
    kernel, oracle = kernel_cls(cfg, sch.weight_key, sch.activation_key), ReferenceKernel(cfg, sch.weight_key, sch.activation_key)
    raw = random_layer(cfg, sch, seed=tokens, device=DEVICE)
    weights, ref_weights = kernel.prepare_weights(raw), oracle.prepare_weights(raw)
    x, routing = random_inputs(cfg, tokens, seed=tokens, device=DEVICE)
    if batched:
        xb, brouting, layout = dispatch(x, routing, cfg.num_experts)
        got = combine(kernel.apply(xb, weights, brouting), layout, routing)
        want = combine(oracle.apply(xb, ref_weights, brouting), layout, routing)
    else:
        got = kernel.apply(x, weights, routing, expert_map=expert_map)
        want = oracle.apply(x, ref_weights, routing, expert_map=expert_map)
    assert relative_error(got, want) <= tolerance(sch.activation_key, cfg.dtype)
    return kernel


@pytest.mark.parametrize("scheme_name", ["fp8-block", "unquantized"])
@pytest.mark.parametrize("tokens", [1, 7])
def test_standard(standin, scheme_name, tokens):
    _check(DeepGemmKernel, CFG, scheme_name, tokens)


def test_standard_gelu_clamp_and_expert_map(standin):
    cfg = dataclasses.replace(CFG, activation=Activation.GELU, swiglu_limit=0.5, parallel=ParallelConfig(ep_size=2))
    expert_map = torch.tensor([-1, -1, 0, 1], dtype=torch.int32, device=DEVICE)
    _check(DeepGemmKernel, cfg, "fp8-block", 5, expert_map=expert_map)


@pytest.mark.parametrize("scheme_name", ["fp8-block", "unquantized"])
def test_batched(standin, scheme_name):
    cfg = dataclasses.replace(CFG, parallel=ParallelConfig(use_batched_activation_format=True))
    _check(BatchedDeepGemmKernel, cfg, scheme_name, 6, batched=True)


def test_invalid_ids_are_dropped_and_reported(standin):
    sch = scheme("fp8-block")
    kernel = DeepGemmKernel(CFG, sch.weight_key, sch.activation_key)
    weights = kernel.prepare_weights(random_layer(CFG, sch, device=DEVICE))
    x, routing = random_inputs(CFG, 3, device=DEVICE)
    ids = routing.topk_ids.clone()
    ids[1, 0] = 99
    out = kernel.forward(x, weights, Routing(ids, routing.topk_weights), expert_map=None, apply_router_weight_on_input=False)
    kept = Routing(torch.where(ids == 99, 0, ids), torch.where(ids == 99, 0.0, routing.topk_weights))
    want = ReferenceKernel(CFG, sch.weight_key, sch.activation_key)
    ref = want.apply(x, want.prepare_weights(random_layer(CFG, sch, device=DEVICE)), kept)
    assert relative_error(out, ref) <= tolerance(sch.activation_key, CFG.dtype)
    with pytest.raises(Exception, match="routing.topk_ids"):
        kernel.routing_errors.check()


def test_prepare_weights_keeps_canonical_block_scales_as_fp32_contiguous():
    sch = scheme("fp8-block")
    raw = random_layer(CFG, sch)
    prepared = DeepGemmKernel(CFG, sch.weight_key, sch.activation_key).prepare_weights(raw)
    assert prepared.prepared_by == "deepgemm"
    for name in ("w13_scale", "w2_scale"):
        got = getattr(prepared, name)
        assert got.dtype == torch.float32 and got.is_contiguous() and torch.equal(got, getattr(raw, name))
    transposed = raw.w13_scale.transpose(1, 2).contiguous().transpose(1, 2)
    assert weight_scales_for_sm90(transposed).is_contiguous()


def test_missing_deep_gemm_is_a_typed_error_that_says_how_to_build_it(monkeypatch):
    monkeypatch.setitem(sys.modules, "deep_gemm", None)
    sch = scheme("unquantized")
    kernel = DeepGemmKernel(CFG, None, None)
    weights = kernel.prepare_weights(random_layer(CFG, sch, device=DEVICE))
    x, routing = random_inputs(CFG, 2, device=DEVICE)
    with pytest.raises(DeepGemmUnavailableError, match="build_deepgemm.sh") as raised:
        kernel.apply(x, weights, routing)
    assert f"bash {BUILD_SCRIPT} SOURCE_DIR" in str(raised.value) and BUILD_SCRIPT.is_file()
