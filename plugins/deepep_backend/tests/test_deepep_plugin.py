"""The deepep plugin without DeepEP: registration, declarations, honest refusals, and the binding's plumbing
against a stand-in ``deep_ep`` (tests/fake_deep_ep.py) over gloo. The stand-in routes rows as DeepEP documents
it does, so the dispatchers' own work — id and weight conversion, the expert map, the batched format, invalid
ids — is checked end to end against moe-core's single-process reference layer. DeepEP's kernels are not:
scripts/gpu_check.sh runs the same checks on two GPUs with the real library."""

from __future__ import annotations

import sys

import pytest
import torch

from moe_core import ExpertParallelGroup, MoEConfig, MoELayer, ParallelConfig, Registry, Routing, select_pair
from moe_core.errors import InvalidConfigError
from moe_core.numerics import relative_error, tolerance
from moe_core.platform import Platform, DeviceKind, preset
from moe_core.presets import random_layer
from moe_core.quant import scheme
from moe_core.spec import SupportQuery
from moe_core.testing.distributed import spawn_group
from moe_core.testing.expert_parallel import check_dispatch_specs

import fake_deep_ep
from moe_core_deepep import plugin
from moe_core_deepep.dispatcher import release_buffers

H100 = preset("h100")


def registry() -> Registry:
    reg = Registry(autoload=False)
    reg.register(plugin, name="deepep")
    return reg


def answer(name: str, platform: Platform = H100, **config) -> "Support":  # noqa: F821
    reg = registry()
    args = dict(num_experts=16, top_k=2, hidden_size=4096, intermediate_size=256, parallel=ParallelConfig(ep_size=2)) | config
    return reg.dispatch_supports(reg.dispatchers[name], SupportQuery(MoEConfig(**args), None, None, platform))


def test_registers_both_dispatchers_and_their_traits_without_importing_deep_ep():
    reg = registry()
    assert {"deepep", "deepep_low_latency"} <= set(reg.dispatchers)
    assert not [p for p in reg.problems if p.plugin == "deepep"]
    assert reg.dispatchers["deepep"].host_sync and not reg.dispatchers["deepep"].cuda_graph_safe
    assert reg.dispatchers["deepep_low_latency"].cuda_graph_safe and not reg.dispatchers["deepep_low_latency"].host_sync
    assert "deep_ep" not in sys.modules  # registration and the supports answers never import it


def test_conformance_kit_passes_deepep_and_stops_at_the_low_latency_hidden_sizes():
    # The kit asks at hidden_size=256, a size DeepEP's low-latency kernels are not compiled for, so that spec
    # is (rightly) supported nowhere there; every check before it, deepep's included, passed.
    with pytest.raises(AssertionError, match="deepep_low_latency: supported on no simulated platform"):
        check_dispatch_specs(registry(), "deepep")


@pytest.mark.parametrize("name", ["deepep", "deepep_low_latency"])
def test_supported_on_hopper_in_bf16_with_the_assumptions_said(name):
    got = answer(name)
    assert got.ok and "assumed to be joined by NVLink" in " ".join(got.reasons)


@pytest.mark.parametrize("name, config, reason", [
    ("deepep", dict(dtype=torch.float32), "bfloat16"),
    ("deepep", dict(hidden_size=4100), "multiple of 8"),
    ("deepep", dict(parallel=ParallelConfig(ep_size=3), num_experts=15), "runs expert-parallel sizes 2, 4, 8"),
    ("deepep_low_latency", dict(hidden_size=4000), "compiled for hidden sizes"),
    ("deepep_low_latency", dict(top_k=12, num_experts=32), "top_k=12"),
])
def test_refusals_name_the_reason(name, config, reason):
    got = answer(name, **config)
    assert not got.ok and reason in " ".join(got.reasons)


def test_architecture_limits_differ_by_mode():
    a100 = preset("a100")
    assert answer("deepep", a100).ok
    assert "sm_90" in " ".join(answer("deepep_low_latency", a100).reasons)
    assert "cuda, not rocm" in " ".join(answer("deepep", preset("mi300x")).reasons)


def test_on_this_machine_without_deep_ep_the_answer_says_how_to_build_it():
    real_gpu = Platform(DeviceKind.CUDA, (9, 0), "NVIDIA H100 80GB HBM3", frozenset())
    reasons = " ".join(answer("deepep", real_gpu).reasons)
    assert "deep_ep is not importable" in reasons and "build_deepep.sh" in reasons


def test_never_chosen_automatically_over_a_validated_builtin():
    cfg = MoEConfig(16, 2, 4096, 256, parallel=ParallelConfig(ep_size=2))
    assert select_pair(cfg, platform=H100, registry=registry()).dispatcher.name not in plugin._NAMES
    requested = MoEConfig(16, 2, 4096, 256, parallel=ParallelConfig(ep_size=2, dispatch_backend="deepep"))
    assert select_pair(requested, platform=H100, registry=registry()).dispatcher.name == "deepep"


def test_doctor_says_where_the_build_script_is():
    lines = plugin.moe_core_doctor()
    assert any("build_deepep.sh" in line for line in lines) and any(line.startswith("NVSHMEM:") for line in lines)


def test_one_buffer_per_group_and_mode_grown_collectively_and_destroyed_explicitly(monkeypatch):
    from moe_core_deepep import dispatcher

    events = []

    class Recorder:
        def __init__(self, group, num_nvl_bytes, num_rdma_bytes, low_latency_mode, num_qps_per_rank, explicitly_destroy):
            assert explicitly_destroy  # never left to the destructor's barrier
            self.num_nvl_bytes, self.num_rdma_bytes = num_nvl_bytes, num_rdma_bytes
            events.append(("build", num_nvl_bytes, num_rdma_bytes, low_latency_mode, num_qps_per_rank))

        def destroy(self):
            events.append(("destroy", self.num_nvl_bytes, self.num_rdma_bytes))

    monkeypatch.setitem(sys.modules, "deep_ep", type(sys)("deep_ep"))
    sys.modules["deep_ep"].Buffer = Recorder
    monkeypatch.setattr(dispatcher, "_BUFFERS", {})
    group = object()
    low_latency = dispatcher.shared_buffer(group, True, 0, 1000, 4)
    first = low_latency.buffer
    assert dispatcher.shared_buffer(group, True, 0, 600, 2) is low_latency and low_latency.buffer is first  # fits: shared
    normal = dispatcher.shared_buffer(group, False, 500, 0, 1)
    assert normal is not low_latency  # the other mode has its own
    # More queue pairs, then more bytes: the same slot (every layer holding it moves along) with a larger buffer,
    # built from the largest of each need so far, after the old one is destroyed.
    assert dispatcher.shared_buffer(group, True, 0, 600, 8) is low_latency and low_latency.buffer is not first
    assert dispatcher.shared_buffer(group, True, 0, 2000, 4) is low_latency
    assert events == [("build", 0, 1000, True, 4), ("build", 500, 0, False, 1),
                      ("destroy", 0, 1000), ("build", 0, 1000, True, 8), ("destroy", 0, 1000), ("build", 0, 2000, True, 8)]
    dispatcher.release_buffers()
    assert sorted(events[6:]) == [("destroy", 0, 2000), ("destroy", 500, 0)] and dispatcher._BUFFERS == {}


# ---------------------------------------------------------------- the binding against the stand-in, over gloo
E, K, HIDDEN, INTER = 8, 3, 2048, 32  # 2048: a low-latency hidden size


def _layer_error(rank: int, world: int, dispatcher: str, tokens: tuple[int, ...], max_tokens: int | None):
    sys.modules["deep_ep"] = fake_deep_ep.module()
    reg = registry()
    sch = scheme("unquantized")
    full = MoEConfig(E, K, HIDDEN, INTER, moe_backend="reference")
    weights = random_layer(full, sch, seed=0)
    gen = torch.Generator().manual_seed(1)
    xs = [torch.randn(t, HIDDEN, generator=gen).bfloat16() for t in tokens]
    routes = []
    for t in tokens:  # skewed: most pairs go to rank 0's experts
        logits = torch.randn(t, E, generator=gen)
        logits[:, : E // world] += 2.0
        routes.append(Routing.from_logits(logits, K))
    ids, w = routes[0].topk_ids.clone(), routes[0].topk_weights.clone()
    ids[0, 1] = E + 3  # rank 0 routes one pair to a missing expert: dropped, counted, reported
    dropped = w.clone()
    dropped[0, 1] = 0.0
    want = MoELayer(full, weights, sch.weight_key, sch.activation_key, registry=reg)(
        torch.cat(xs), Routing(torch.cat([r.topk_ids for r in routes]), torch.cat([dropped] + [r.topk_weights for r in routes[1:]])))
    start = sum(tokens[:rank])
    want = want[start: start + tokens[rank]]
    cfg = MoEConfig(E, K, HIDDEN, INTER, moe_backend="reference", parallel=ParallelConfig(ep_size=world, dispatch_backend=dispatcher))
    layer = MoELayer(cfg, weights.shard(rank, world), sch.weight_key, sch.activation_key, registry=reg, platform=H100,
                     ep_group=ExpertParallelGroup(max_tokens_per_rank=max_tokens))
    mine = Routing(ids, w) if rank == 0 else routes[rank]
    got = layer(xs[rank], mine)
    release_buffers()
    try:
        layer.check()
        raised = ""
    except Exception as exc:  # noqa: BLE001 - the test decides
        raised = type(exc).__name__
    err = relative_error(got, want) if want.numel() else 0.0
    return layer.dispatcher_name, tuple(got.shape) == tuple(want.shape), err, tolerance(sch.activation_key, torch.bfloat16), raised


@pytest.mark.parametrize("dispatcher, max_tokens", [("deepep", None), ("deepep_low_latency", 16)])
def test_layer_over_the_stand_in_equals_the_reference(dispatcher, max_tokens):
    tokens = (11, 0)  # rank 1 has no tokens
    results = spawn_group(2, _layer_error, "gloo", dispatcher, tokens, max_tokens, timeout_s=120)
    for rank, (name, shape_ok, err, budget, raised) in enumerate(results):
        assert name == dispatcher and shape_ok, results
        assert err <= budget, f"rank {rank}: error {err} over {budget}"
        assert raised == ("InvalidRoutingError" if rank == 0 else ""), results


def _earlier_layer_after_a_larger_one(rank: int, world: int):
    sys.modules["deep_ep"] = fake_deep_ep.module()
    reg, sch = registry(), scheme("unquantized")
    layers, outputs = [], []
    for hidden in (HIDDEN, 2 * HIDDEN):  # the second needs a larger normal-mode buffer
        cfg = MoEConfig(E, K, hidden, INTER, moe_backend="reference", parallel=ParallelConfig(ep_size=world, dispatch_backend="deepep"))
        weights = random_layer(MoEConfig(E, K, hidden, INTER), sch, seed=0).shard(rank, world)
        layers.append(MoELayer(cfg, weights, sch.weight_key, sch.activation_key, registry=reg, platform=H100))
        if hidden == HIDDEN:
            gen = torch.Generator().manual_seed(rank)
            x = torch.randn(5, HIDDEN, generator=gen).bfloat16()
            routing = Routing.from_logits(torch.randn(5, E, generator=gen), K)
            outputs.append(layers[0](x, routing))
    outputs.append(layers[0](x, routing))  # through the grown buffer; the stand-in refuses a destroyed one
    release_buffers()
    return torch.equal(outputs[0], outputs[1])


def test_a_layer_built_before_the_buffer_grew_dispatches_through_the_larger_one():
    assert spawn_group(2, _earlier_layer_after_a_larger_one, "gloo", timeout_s=120) == [True, True]


def test_low_latency_needs_a_fixed_token_count():
    with pytest.raises(Exception, match=f"{InvalidConfigError.__name__}: deepep_low_latency sizes its buffers for a fixed token count"):
        spawn_group(2, _layer_error, "gloo", "deepep_low_latency", (4, 4), None, timeout_s=60)
