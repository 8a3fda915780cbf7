"""The binding against a fake ``aiter`` built from the contract: every call binds, layouts and dtypes are right.

Plumbing only: the fake ``fused_moe`` returns zeros, so nothing here checks AITER's numerics
(tests/test_aiter_gpu.py runs the conformance numerics on a ROCm GPU). What the binding hands
AITER is checked against AITER's documented layout, read independently of the binding
(:func:`aiter_reading`).
"""

import dataclasses
import sys

import pytest
import torch

from fake_aiter import FakeAiter
from moe_core import quant
from moe_core.config import Activation, MoEConfig, ParallelConfig
from moe_core.routing import Routing
from moe_core.weights import quantize_experts
from moe_core_aiter import contract
from moe_core_aiter.kernel import ACTIVATION_TYPES, QUANT_TYPES, AiterKernel
from moe_core_aiter.provider import AiterUnavailableError

E, H, I, T, K = 4, 256, 128, 5, 2
FNUZ, FN = torch.float8_e4m3fnuz, torch.float8_e4m3fn
WANT_QUANT_TYPE = {"unquantized": "No", "fp8-tensor": "per_Tensor", "fp8-tensor-token": "per_Token",
                   "fp8-channel": "per_Token", "fp8-block": "per_128x128"}
WEIGHT_SCALE_SHAPES = {  # (w1_scale, w2_scale) as AITER reads them for each scheme
    "fp8-tensor": ((E, 1, 1), (E, 1, 1)),
    "fp8-tensor-token": ((E, 2 * I, 1), (E, H, 1)),
    "fp8-channel": ((E, 2 * I, 1), (E, H, 1)),
    "fp8-block": ((E, 2 * I // 128, H // 128), (E, H // 128, I // 128)),
}


def _layer(scheme_name, activation=Activation.SILU, top_k=K):
    s = quant.scheme(scheme_name)
    cfg = MoEConfig(num_experts=E, top_k=top_k, hidden_size=H, intermediate_size=I, dtype=torch.bfloat16, activation=activation)
    torch.manual_seed(0)
    weights = quantize_experts(torch.randn(E, 2 * I, H) / 16, torch.randn(E, H, I) / 16, s.weight_key)
    if s.activation_key is not None and s.activation_key.static:
        weights = dataclasses.replace(weights, a13_scale=torch.full((1, 1), 0.02), a2_scale=torch.full((1, 1), 0.03))
    kernel = AiterKernel(cfg, s.weight_key, s.activation_key)
    routing = Routing(torch.randint(0, E, (T, top_k)), torch.rand(T, top_k))
    return kernel, weights, routing


def _run(monkeypatch, scheme_name, fp8=FNUZ, activation=Activation.SILU, on_input=False):
    fake = FakeAiter(fp8)
    fake.install(monkeypatch)
    kernel, weights, routing = _layer(scheme_name, activation, top_k=1 if on_input else K)
    x = torch.randn(T, H, dtype=torch.bfloat16)
    prepared = kernel.prepare_weights(weights)
    out = kernel.apply(x, prepared, routing, apply_router_weight_on_input=on_input)
    return fake, weights, prepared, routing, x, out


@pytest.mark.parametrize("scheme_name", list(WANT_QUANT_TYPE))
def test_calls_bind_to_the_recorded_signatures_with_aiters_layouts(monkeypatch, scheme_name):
    fake, weights, prepared, routing, x, out = _run(monkeypatch, scheme_name)
    assert out.shape == x.shape and out.dtype == x.dtype
    shuffles = fake.called(contract.SHUFFLE_WEIGHT.qualname)
    assert [tuple(c["x"].shape) for c in shuffles] == [(E, 2 * I, H), (E, H, I)]
    assert all(c["layout"] == contract.SHUFFLE_LAYOUT and c["x"].is_contiguous() for c in shuffles)
    (call,) = fake.called(contract.FUSED_MOE.qualname)
    assert call["w1"] is prepared.w13 and call["w2"] is prepared.w2
    assert tuple(call["w1"].shape) == (E, 2 * I, H) and tuple(call["w2"].shape) == (E, H, I)
    assert call["topk_ids"].dtype == torch.int32 and torch.equal(call["topk_ids"], routing.topk_ids.int())
    assert call["topk_weight"].dtype == torch.float32 and call["dtype"] == torch.bfloat16
    assert call["hidden_states"] is x
    assert call["activation"].name == "Silu"
    assert call["quant_type"].name == WANT_QUANT_TYPE[scheme_name]
    if scheme_name == "unquantized":
        assert call["w1"].dtype == weights.w13.dtype and call["w2"].dtype == weights.w2.dtype
        assert all(call[k] is None for k in ("w1_scale", "w2_scale", "a1_scale", "a2_scale"))
        return
    assert call["w1"].dtype == FNUZ and call["w2"].dtype == FNUZ
    assert (tuple(call["w1_scale"].shape), tuple(call["w2_scale"].shape)) == WEIGHT_SCALE_SHAPES[scheme_name]
    static = scheme_name == "fp8-tensor"
    assert (call["a1_scale"] is not None, call["a2_scale"] is not None) == (static, static)


def aiter_reading(weight, scale, quant_type):
    """The float64 values AITER's fused_moe reads from an fp8 weight [E, N, K] and its scale (aiter/fused_moe.py):
    per_Tensor one scale per expert [E, 1, 1], per_Token one per output row [E, N, 1], per_128x128 one per
    128x128 block [E, ceil(N/128), ceil(K/128)]."""
    s = scale.double()
    if quant_type == "per_128x128":
        s = s.repeat_interleave(128, 1)[:, : weight.shape[1]].repeat_interleave(128, 2)[:, :, : weight.shape[2]]
    return weight.double() * s


@pytest.mark.parametrize("fp8", [FNUZ, FN], ids=str)
@pytest.mark.parametrize("scheme_name", [n for n in WANT_QUANT_TYPE if n != "unquantized"])
def test_fused_moe_reads_the_layers_weights(monkeypatch, scheme_name, fp8):
    """w1/w2 and their scales, read as AITER documents them, are the layer's float weights (w1: gate rows then up
    rows) within fp8's rounding: a wrong scale layout, order or fnuz conversion reads as other numbers."""
    fake, *_ = _run(monkeypatch, scheme_name, fp8=fp8)
    torch.manual_seed(0)  # the float weights _layer quantized
    w13, w2 = torch.randn(E, 2 * I, H) / 16, torch.randn(E, H, I) / 16
    (call,) = fake.called(contract.FUSED_MOE.qualname)
    quant_type = WANT_QUANT_TYPE[scheme_name]
    for got, want in ((aiter_reading(call["w1"], call["w1_scale"], quant_type), w13), (aiter_reading(call["w2"], call["w2_scale"], quant_type), w2)):
        assert ((got - want).norm() / want.norm()).item() < 2.0**-4  # e4m3: 3 mantissa bits


def test_gelu_maps_to_aiters_gelu(monkeypatch):
    fake, *_ = _run(monkeypatch, "unquantized", activation=Activation.GELU)
    assert fake.called(contract.FUSED_MOE.qualname)[0]["activation"].name == "Gelu"


def test_router_weight_on_input_scales_the_input(monkeypatch):
    fake, _, _, routing, x, _ = _run(monkeypatch, "unquantized", on_input=True)
    (call,) = fake.called(contract.FUSED_MOE.qualname)
    torch.testing.assert_close(call["hidden_states"], (x.float() * routing.topk_weights.float()).to(x.dtype))
    assert torch.equal(call["topk_weight"], torch.ones_like(call["topk_weight"]))


def test_gfx942_gets_e4m3fnuz_with_doubled_scales(monkeypatch):
    fake, weights, prepared, *_ = _run(monkeypatch, "fp8-tensor", fp8=FNUZ)
    assert weights.w13.dtype == FN and prepared.w13.dtype == FNUZ
    assert torch.equal(prepared.w13.view(torch.int8), torch.where(weights.w13.view(torch.int8) == -128, 0, weights.w13.view(torch.int8)))
    fn_values = weights.w13.float() * weights.w13_scale
    torch.testing.assert_close(prepared.w13.float() * prepared.w13_scale, fn_values)
    assert torch.equal(prepared.a13_scale, weights.a13_scale * 2) and torch.equal(prepared.a2_scale, weights.a2_scale * 2)


def test_gfx950_keeps_e4m3fn(monkeypatch):
    _, weights, prepared, *_ = _run(monkeypatch, "fp8-block", fp8=FN)
    assert prepared.w13.dtype == FN and torch.equal(prepared.w13_scale, weights.w13_scale)


def test_the_binding_uses_only_recorded_enum_members():
    assert set(ACTIVATION_TYPES.values()) <= set(contract.ENUMS["ActivationType"])
    assert set(QUANT_TYPES.values()) <= set(contract.ENUMS["QuantType"])
    assert set(QUANT_TYPES) == set(WANT_QUANT_TYPE)


def test_without_aiter_a_typed_error_says_how_to_install(monkeypatch):
    for name in [m for m in sys.modules if m == "aiter" or m.startswith("aiter.")]:
        monkeypatch.delitem(sys.modules, name)
    monkeypatch.setitem(sys.modules, "aiter", None)  # import aiter -> ImportError
    kernel, weights, _ = _layer("unquantized")
    with pytest.raises(AiterUnavailableError, match="github.com/ROCm/aiter") as info:
        kernel.prepare_weights(weights)
    assert isinstance(info.value, ImportError)


def test_an_expert_map_becomes_local_ids_with_remote_pairs_weighted_zero(monkeypatch):
    fake = FakeAiter(FNUZ)
    fake.install(monkeypatch)
    s = quant.scheme("unquantized")
    cfg = MoEConfig(num_experts=2 * E, top_k=K, hidden_size=H, intermediate_size=I, dtype=torch.bfloat16,
                    parallel=ParallelConfig(ep_size=2))
    kernel = AiterKernel(cfg, None, None)
    weights = quantize_experts(torch.randn(E, 2 * I, H) / 16, torch.randn(E, H, I) / 16, s.weight_key)  # this rank's E experts
    expert_map = torch.cat((torch.full((E,), -1), torch.arange(E))).int()  # rank 1 holds global experts E..2E-1
    routing = Routing(torch.randint(0, 2 * E, (T, K)), torch.rand(T, K))
    kernel.apply(torch.randn(T, H, dtype=torch.bfloat16), kernel.prepare_weights(weights), routing, expert_map=expert_map)
    (call,) = fake.called(contract.FUSED_MOE.qualname)
    remote = routing.topk_ids < E
    assert torch.equal(call["topk_ids"], torch.where(remote, 0, routing.topk_ids - E).int())
    assert torch.equal(call["topk_weight"], torch.where(remote, 0.0, routing.topk_weights))
