"""The reference backend against an independent float64 loop over tokens and experts, every scheme, both formats.

The loop shares no quantization code with the reference: weights are decoded from their stored
layout and activations quantized by tests/quant_oracle.py. Both compute the same function, the
reference in float32 and the loop in float64, so they agree to float32 rounding over the layer's
reductions (``TOL``); a skipped or misplaced activation quantization moves the output by ~1e-2.
"""

import dataclasses

import pytest
import torch

from moe_core import quant
from moe_core.numerics import relative_error as rel_err
from moe_core.batched import combine, dispatch
from moe_core.config import Activation, MoEConfig, ParallelConfig
from moe_core.errors import KernelInputError
from moe_core.presets import random_layer
from moe_core.reference.kernel import ReferenceKernel
from moe_core.routing import BatchedRouting, Routing
from moe_core.weights import ExpertWeights, GateUpOrder
from tests import quant_oracle

#: ||ref - naive|| / ||naive||: float32 against float64 over reductions of 64 (about sqrt(64) * 2^-24
#: = 5e-7), with headroom; an activation code that rounds the other way (the intermediate lies
#: within float32 rounding of a rounding boundary) would cost ~1e-2 and is not expected with these seeds.
TOL = 1e-5


def float_weights(w: ExpertWeights):
    """Both projections in float64, decoded from the stored codes and scales."""
    if w.weight_key is None:
        return w.w13.double(), w.w2.double()
    e, i2, h = w.w13.shape[0], w.w13.shape[1], w.w2.shape[1]
    return (
        quant_oracle.stored_values(w.w13, w.w13_scale, w.weight_key, (e, i2, h), w.w13_zero, w.w13_global_scale),
        quant_oracle.stored_values(w.w2, w.w2_scale, w.weight_key, (e, h, i2 // 2), w.w2_zero, w.w2_global_scale),
    )


def fake_quantize(x, key, scale):
    """The oracle's quantization of ``x`` rounded to float32, the precision in which the reference
    holds activations (identity for key=None)."""
    if key is None or x.shape[0] == 0:
        return x
    return quant_oracle.fake_quantize(x.float(), key, scale)["values"]


def naive_moe(x, weights, ids, topk_w, cfg, akey, expert_map=None, on_input=False):
    """Token-by-token, slot-by-slot, float64 (activation quantization where kernels do it)."""
    w13, w2 = float_weights(weights)
    xs = x.double() * (topk_w.double() if on_input else 1.0)
    xq = fake_quantize(xs, akey, weights.a13_scale)
    pairs, inters = [], []
    for t in range(x.shape[0]):
        for k in range(ids.shape[1]):
            e = int(ids[t, k])
            if expert_map is not None:
                e = int(expert_map[e])
                if e < 0:
                    continue
            h = w13[e] @ xq[t]
            i = h.shape[0] // 2
            gate, up = h[:i], h[i:]
            if cfg.swiglu_limit is not None:
                gate, up = gate.clamp(max=cfg.swiglu_limit), up.clamp(-cfg.swiglu_limit, cfg.swiglu_limit)
            act = torch.nn.functional.silu(gate) if cfg.activation is Activation.SILU else torch.nn.functional.gelu(gate)
            pairs.append((t, k, e))
            inters.append(act * up)
    out = torch.zeros(x.shape[0], cfg.hidden_size, dtype=torch.float64)
    if not pairs:
        return out
    inter = fake_quantize(torch.stack(inters), akey, weights.a2_scale)
    for (t, k, e), a in zip(pairs, inter):
        y = w2[e] @ a
        out[t] += y if on_input else topk_w[t, k].double() * y
    return out


def make(cfg, scheme, seed=0):
    weights = random_layer(cfg, scheme, seed=seed)
    kernel = ReferenceKernel(cfg, scheme.weight_key, scheme.activation_key)
    return kernel, kernel.prepare_weights(weights)


def tiny(**kw):
    base = dict(num_experts=6, top_k=2, hidden_size=64, intermediate_size=32, dtype=torch.float32)
    base.update(kw)
    return MoEConfig(**base)


SCHEMES = list(quant.SCHEMES)
CASES = ["random", "one_expert", "single_token", "gelu_clamp", "many_tokens"]


@pytest.mark.parametrize("scheme", SCHEMES, ids=lambda s: s.name)
@pytest.mark.parametrize("case", CASES)
def test_standard_format_matches_the_naive_loop(scheme, case):
    cfg = tiny(activation=Activation.GELU, swiglu_limit=0.5) if case == "gelu_clamp" else tiny()
    kernel, weights = make(cfg, scheme)
    g = torch.Generator().manual_seed(100 * SCHEMES.index(scheme) + CASES.index(case))
    t = {"single_token": 1, "many_tokens": 40}.get(case, 9)  # 40 tokens: more routed pairs than hidden units
    x = torch.randn(t, cfg.hidden_size, generator=g)
    routing = Routing.from_logits(torch.randn(t, cfg.num_experts, generator=g), cfg.top_k)
    if case == "one_expert":
        routing = Routing(topk_ids=torch.stack([torch.full((t,), 3), torch.full((t,), 1)], 1), topk_weights=routing.topk_weights)
    got = kernel.apply(x, weights, routing)
    want = naive_moe(x, weights, routing.topk_ids, routing.topk_weights, cfg, scheme.activation_key)
    assert got.dtype == cfg.dtype and torch.isfinite(got).all()
    assert rel_err(got, want) < TOL


@pytest.mark.parametrize("scheme", SCHEMES, ids=lambda s: s.name)
def test_batched_format_matches_the_standard_path(scheme):
    std_cfg = tiny()
    cfg = dataclasses.replace(std_cfg, parallel=ParallelConfig(use_batched_activation_format=True))
    kernel, weights = make(cfg, scheme)
    g = torch.Generator().manual_seed(7)
    x = torch.randn(11, cfg.hidden_size, generator=g)
    routing = Routing.from_logits(torch.randn(11, cfg.num_experts, generator=g), cfg.top_k)
    xb, brouting, layout = dispatch(x, routing, cfg.num_experts, max_tokens=12)
    counts = brouting.expert_num_tokens
    padding = torch.arange(xb.shape[1]).unsqueeze(0) >= counts.unsqueeze(1)
    xb[padding] = 100 * torch.randn(int(padding.sum()), cfg.hidden_size, generator=g)  # rows beyond the counts are ignored
    yb = kernel.apply(xb, weights, brouting)
    for e in range(cfg.num_experts):  # ... and come back zero
        assert yb[e, int(counts[e]):].abs().sum() == 0
    want = naive_moe(x, weights, routing.topk_ids, routing.topk_weights, std_cfg, scheme.activation_key)
    assert rel_err(combine(yb, layout, routing), want) < TOL


@pytest.mark.parametrize("batched", [False, True], ids=["standard", "batched"])
@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16], ids=str)
def test_16_bit_layers_return_their_dtype_rounded_once(dtype, batched):
    std_cfg = tiny(dtype=dtype)
    cfg = dataclasses.replace(std_cfg, parallel=ParallelConfig(use_batched_activation_format=batched))
    kernel, weights = make(cfg, quant.scheme("unquantized"))
    g = torch.Generator().manual_seed(11)
    x = torch.randn(7, cfg.hidden_size, generator=g).to(dtype)
    routing = Routing.from_logits(torch.randn(7, cfg.num_experts, generator=g), cfg.top_k)
    if batched:
        xb, brouting, layout = dispatch(x, routing, cfg.num_experts, max_tokens=8)
        yb = kernel.apply(xb, weights, brouting)
        assert yb.dtype == dtype
        got = combine(yb.float(), layout, routing)
    else:
        got = kernel.apply(x, weights, routing)
        assert got.dtype == dtype
    want = naive_moe(x, weights, routing.topk_ids, routing.topk_weights, std_cfg, None)
    assert rel_err(got, want) < 2 * torch.finfo(dtype).eps  # float32 compute, one rounding (per pair when batched)


def test_empty_experts_and_zero_tokens():
    cfg = tiny(num_experts=16)
    kernel, weights = make(cfg, quant.scheme("fp8-block"))
    routing = Routing(topk_ids=torch.tensor([[0, 1]] * 3), topk_weights=torch.full((3, 2), 0.5))
    x = torch.randn(3, cfg.hidden_size)
    assert rel_err(kernel.apply(x, weights, routing), naive_moe(x, weights, routing.topk_ids, routing.topk_weights, cfg, quant.kFp8Dynamic128Sym)) < TOL
    empty = kernel.apply(torch.zeros(0, cfg.hidden_size), weights, Routing(topk_ids=torch.zeros(0, 2, dtype=torch.int64), topk_weights=torch.zeros(0, 2)))
    assert empty.shape == (0, cfg.hidden_size)


def test_expert_map_drops_remote_experts():
    cfg = tiny(num_experts=8, parallel=ParallelConfig(ep_size=2))
    kernel, weights = make(cfg, quant.scheme("int8"))
    expert_map = torch.tensor([-1, -1, -1, -1, 0, 1, 2, 3])
    g = torch.Generator().manual_seed(3)
    x = torch.randn(10, cfg.hidden_size, generator=g)
    routing = Routing.from_logits(torch.randn(10, 8, generator=g), 2)
    got = kernel.apply(x, weights, routing, expert_map=expert_map)
    want = naive_moe(x, weights, routing.topk_ids, routing.topk_weights, cfg, quant.kInt8DynamicTokenSym, expert_map=expert_map)
    assert rel_err(got, want) < TOL
    only_remote = Routing(topk_ids=torch.tensor([[0, 1]]), topk_weights=torch.ones(1, 2))
    assert kernel.apply(x[:1], weights, only_remote, expert_map=expert_map).abs().sum() == 0
    with pytest.raises(KernelInputError, match="expert_map: is required when ep_size=2"):
        kernel.apply(x, weights, routing)


def test_router_weight_on_input():
    cfg = tiny(top_k=1)
    kernel, weights = make(cfg, quant.scheme("unquantized"))
    x = torch.randn(5, cfg.hidden_size)
    routing = Routing.from_logits(torch.randn(5, cfg.num_experts), 1, renormalize=False)
    got = kernel.apply(x, weights, routing, apply_router_weight_on_input=True)
    want = naive_moe(x, weights, routing.topk_ids, routing.topk_weights, cfg, None, on_input=True)
    assert rel_err(got, want) < TOL
    assert rel_err(got, kernel.apply(x, weights, routing)) > 1e-3  # it is a different function
    with pytest.raises(KernelInputError, match="needs top_k == 1"):
        k2, w2 = make(tiny(), quant.scheme("unquantized"))
        k2.apply(x, w2, Routing.from_logits(torch.randn(5, 6), 2), apply_router_weight_on_input=True)


def test_up_gate_order_is_reordered_once():
    cfg = tiny()
    kernel, weights = make(cfg, quant.scheme("fp8-block"))
    raw = random_layer(cfg, quant.scheme("fp8-block"))
    i = cfg.intermediate_size
    flipped = dataclasses.replace(
        raw, w13=torch.cat([raw.w13[:, i:], raw.w13[:, :i]], 1), w13_scale=torch.cat([raw.w13_scale[:, 1:], raw.w13_scale[:, :1]], 1) if raw.w13_scale.shape[1] > 1 else raw.w13_scale,
        order=GateUpOrder.UP_GATE,
    )
    x = torch.randn(4, cfg.hidden_size)
    routing = Routing.from_logits(torch.randn(4, 6), 2)
    assert torch.equal(kernel.apply(x, kernel.prepare_weights(flipped), routing), kernel.apply(x, weights, routing))


def test_routing_from_logits():
    logits = torch.tensor([[0.0, 1.0, 2.0, 3.0]])
    r = Routing.from_logits(logits, 2)
    assert r.topk_ids.tolist() == [[3, 2]] and r.topk_weights.sum().item() == pytest.approx(1.0)
    s = Routing.from_logits(logits, 2, scoring="sigmoid", renormalize=False)
    assert s.topk_weights[0, 0].item() == pytest.approx(torch.sigmoid(torch.tensor(3.0)).item())
    with pytest.raises(KernelInputError, match="top_k: must be in"):
        Routing.from_logits(logits, 5)


class TestBadInput:
    @pytest.fixture
    def setup(self):
        cfg = tiny()
        kernel, weights = make(cfg, quant.scheme("fp8-channel"))
        x = torch.randn(4, cfg.hidden_size)
        routing = Routing.from_logits(torch.randn(4, cfg.num_experts), 2)
        return cfg, kernel, weights, x, routing

    def test_swapped_ids_and_weights(self, setup):
        _, _, _, _, r = setup
        with pytest.raises(KernelInputError, match="topk_ids: is torch.float32 and topk_weights is torch.int32: they look swapped"):
            Routing(r.topk_weights, r.topk_ids)

    @pytest.mark.parametrize(
        "ids,weights,msg",
        [
            (torch.zeros(4, 2, dtype=torch.bool), torch.ones(4, 2), "topk_ids: must be an integer tensor"),
            (torch.zeros(4, 2, dtype=torch.int64), torch.ones(4, 2, dtype=torch.int64), "topk_weights: must be a floating-point"),
            (torch.zeros(8, dtype=torch.int64), torch.ones(8), "must be 2-D"),
            (torch.zeros(4, 2, dtype=torch.int64), torch.ones(4, 3), "differs from topk_ids shape"),
        ],
    )
    def test_routing_validation(self, ids, weights, msg):
        with pytest.raises(KernelInputError, match=msg):
            Routing(ids, weights)

    def test_ids_out_of_range(self, setup):
        _, kernel, weights, x, r = setup
        bad = Routing(torch.tensor([[0, 6]] * 4), r.topk_weights)
        with pytest.raises(KernelInputError, match=r"routing.topk_ids: values must lie in \[0, 6\), got range \[0, 6\]"):
            kernel.apply(x, weights, bad)

    def test_hidden_states(self, setup):
        cfg, kernel, weights, x, r = setup
        with pytest.raises(KernelInputError, match="hidden_states: dtype torch.float16 differs"):
            kernel.apply(x.half(), weights, r)
        with pytest.raises(KernelInputError, match=r"hidden_states: expected \[tokens, 64\]"):
            kernel.apply(torch.randn(4, 32), weights, r)
        with pytest.raises(KernelInputError, match="routing: has 4 tokens, hidden_states has 3"):
            kernel.apply(x[:3], weights, r)
        with pytest.raises(KernelInputError, match="hidden_states: is on meta"):
            kernel.apply(x.to("meta"), weights, r)
        with pytest.raises(KernelInputError, match="routing: the standard format takes a Routing"):
            kernel.apply(x, weights, BatchedRouting(torch.zeros(6, dtype=torch.int32)))

    def test_weights(self, setup):
        cfg, kernel, weights, x, r = setup
        with pytest.raises(KernelInputError, match="weights: were prepared by None"):
            kernel.apply(x, random_layer(cfg, quant.scheme("fp8-channel")), r)
        with pytest.raises(KernelInputError, match="weights.w13: has 5 experts, the config says 6"):
            kernel.prepare_weights(dataclasses.replace(weights, w13=weights.w13[:5]))
        with pytest.raises(KernelInputError, match=r"weights.w13_scale: expected shape \(6, 64, 1\)"):
            kernel.prepare_weights(dataclasses.replace(weights, w13_scale=weights.w13_scale[:, :3]))
        with pytest.raises(KernelInputError, match="weights.w2: fp8_e4m3 weights must be stored as torch.float8_e4m3fn"):
            kernel.prepare_weights(dataclasses.replace(weights, w2=weights.w2.float()))
        with pytest.raises(KernelInputError, match="weights.weight_key: is None but the kernel was built for"):
            kernel.prepare_weights(random_layer(cfg, quant.scheme("unquantized")))

    def test_full_checks_scan_for_nan(self, setup, monkeypatch):
        _, kernel, weights, x, r = setup
        x[0, 0] = float("nan")
        kernel.apply(x, weights, r)  # cheap checks only: no scan
        monkeypatch.setenv("MOE_CORE_FULL_CHECKS", "1")
        with pytest.raises(KernelInputError, match="hidden_states: contains NaN or inf"):
            kernel.apply(x, weights, r)

    def test_batched_validation(self):
        cfg = tiny(parallel=ParallelConfig(use_batched_activation_format=True))
        kernel, weights = make(cfg, quant.scheme("unquantized"))
        xb = torch.randn(6, 4, cfg.hidden_size)
        with pytest.raises(KernelInputError, match=r"expert_num_tokens: values must lie in \[0, 5\), got range \[5, 5\]"):
            kernel.apply(xb, weights, BatchedRouting(torch.full((6,), 5, dtype=torch.int32)))
        with pytest.raises(KernelInputError, match="expert_num_tokens: has 5 entries, expected 6"):
            kernel.apply(xb, weights, BatchedRouting(torch.ones(5, dtype=torch.int32)))
        with pytest.raises(KernelInputError, match="expert_num_tokens: must be an integer tensor"):
            BatchedRouting(torch.ones(6))
        counts = BatchedRouting(torch.ones(6, dtype=torch.int32))
        with pytest.raises(KernelInputError, match="expert_map: the batched-experts format already holds local experts"):
            kernel.apply(xb, weights, counts, expert_map=torch.arange(6))
        with pytest.raises(KernelInputError, match="apply_router_weight_on_input: router weights are applied when batched outputs are combined"):
            kernel.apply(xb, weights, counts, apply_router_weight_on_input=True)
