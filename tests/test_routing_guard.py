"""Invalid routing: classification, the generic guard, the device-side counter and how MoELayer reports it."""

import dataclasses

import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from moe_core import quant
from moe_core.config import MoEConfig, ParallelConfig
from moe_core.layer import MoELayer
from moe_core.presets import random_inputs, random_layer
from moe_core.reference.kernel import ReferenceKernel
from moe_core.registry import Registry
from moe_core.routing import BatchedRouting, Routing
from moe_core.routing_guard import InvalidRoutingError, RoutingErrorCounter, drop_invalid_routing, invalid_pairs, routing_counter
from moe_core.testing import conformance
from moe_core.testing.robustness import reported_count

INT32 = st.integers(-(2**31), 2**31 - 1)


def _expected_bad(ids, num_experts, expert_map, num_local):
    """Plain-Python statement of which pairs are invalid."""
    out = []
    for i in ids.reshape(-1).tolist():
        if not 0 <= i < num_experts:
            out.append(True)
        else:
            local = expert_map[i] if expert_map is not None else i
            out.append(not -1 <= local < num_local)
    return out


@st.composite
def routed(draw, with_map: bool):
    """(ids, config, expert map as a list or None): ids of any int64 value, map entries also out of range."""
    ep = draw(st.sampled_from([1, 2, 4])) if with_map else 1
    num_experts = ep * draw(st.integers(1, 8))
    cfg = MoEConfig(num_experts=num_experts, top_k=draw(st.integers(1, min(4, num_experts))), hidden_size=8, intermediate_size=8,
                    parallel=ParallelConfig(ep_size=ep))
    tokens = draw(st.integers(0, 6))
    values = st.one_of(st.integers(-2, num_experts + 2), INT32, st.integers(-(2**40), 2**40))
    size = tokens * cfg.top_k
    ids = torch.tensor(draw(st.lists(values, min_size=size, max_size=size)), dtype=torch.int64).reshape(tokens, cfg.top_k)
    expert_map = None
    if with_map:
        expert_map = draw(st.lists(st.integers(-3, cfg.local_num_experts + 2), min_size=num_experts, max_size=num_experts))
    return ids, cfg, expert_map


@settings(max_examples=150, deadline=None)
@given(st.booleans().flatmap(routed))
def test_invalid_pairs_matches_the_rule(case):
    ids, cfg, expert_map = case
    map_t = torch.tensor(expert_map) if expert_map is not None else None
    local, bad, offending = invalid_pairs(ids, cfg.num_experts, map_t, cfg.local_num_experts)
    assert bad.reshape(-1).tolist() == _expected_bad(ids, cfg.num_experts, expert_map, cfg.local_num_experts)
    assert ((local >= -1) & (local < cfg.local_num_experts)).all()
    assert (local[bad] == -1).all()
    flat = ids.reshape(-1).tolist()
    for i, (b, off) in enumerate(zip(bad.reshape(-1).tolist(), offending.reshape(-1).tolist())):
        if b:  # the value at fault: the id when out of range, else its map entry
            assert off == (flat[i] if not 0 <= flat[i] < cfg.num_experts else expert_map[flat[i]])


@settings(max_examples=100, deadline=None)
@given(st.booleans().flatmap(routed))
def test_generic_guard_leaves_only_valid_routing_and_counts_every_bad_pair(case):
    ids, cfg, expert_map = case
    weights = torch.rand(ids.shape) + 0.5
    map_t = torch.tensor(expert_map) if expert_map is not None else None
    counter = RoutingErrorCounter("routing.topk_ids", "[0, E)")
    routing, new_map = drop_invalid_routing(cfg, torch.zeros(ids.shape[0], 8), Routing(ids, weights), map_t, counter)
    bad = torch.tensor(_expected_bad(ids, cfg.num_experts, expert_map, cfg.local_num_experts), dtype=torch.bool).reshape(ids.shape)
    assert ((routing.topk_ids >= 0) & (routing.topk_ids < cfg.num_experts)).all()
    assert (routing.topk_weights[bad] == 0).all() and torch.equal(routing.topk_weights[~bad], weights[~bad])
    if new_map is not None:
        assert ((new_map >= -1) & (new_map < cfg.local_num_experts)).all()
        if (new_map == -1).any():  # a dropped pair is parked on a remote expert: no kernel computes it
            assert (new_map[routing.topk_ids[bad]] == -1).all()
    assert counter.buffer("cpu")[0].item() == int(bad.sum())
    if bad.any():
        with pytest.raises(InvalidRoutingError) as info:
            counter.poll()
        assert info.value.count == int(bad.sum())
    counter.poll()  # reported once only


def test_generic_guard_clamps_batched_counts():
    cfg = MoEConfig(num_experts=3, top_k=1, hidden_size=8, intermediate_size=8, parallel=ParallelConfig(use_batched_activation_format=True))
    counter = RoutingErrorCounter("expert_num_tokens", "[0, max_tokens]")
    routing, _ = drop_invalid_routing(cfg, torch.zeros(3, 4, 8), BatchedRouting(torch.tensor([5, -2, 4])), None, counter)
    assert routing.expert_num_tokens.tolist() == [4, 0, 4]
    assert counter.buffer("cpu").tolist() == [2, -2, 5]


def test_counter_reports_new_values_once_and_check_resets():
    counter = RoutingErrorCounter("routing.topk_ids", "[0, 4)")
    counter.poll()  # nothing recorded: nothing raised
    counter.check()
    counter.record(torch.tensor([7, 1, -3]), torch.tensor([True, False, True]))
    with pytest.raises(InvalidRoutingError, match=r"routing.topk_ids: 2 value\(s\) outside \[0, 4\).*\[-3, 7\]") as info:
        counter.poll()
    assert (info.value.count, info.value.smallest, info.value.largest) == (2, -3, 7)
    counter.poll()
    counter.record(torch.tensor([9]), torch.tensor([True]))
    with pytest.raises(InvalidRoutingError) as info:
        counter.poll()
    assert info.value.count == 1  # only the value not reported yet
    counter.record(torch.tensor([100]), torch.tensor([True]))
    with pytest.raises(InvalidRoutingError) as info:
        counter.check()
    assert info.value.count == 1 and info.value.largest == 100
    assert counter.buffer("cpu").tolist() == [0, 2**63 - 1, -(2**63)]
    counter.check()


def _layer():
    cfg = MoEConfig(num_experts=4, top_k=2, hidden_size=32, intermediate_size=16, dtype=torch.float32)
    sch = quant.scheme("unquantized")
    return cfg, MoELayer(cfg, random_layer(cfg, sch), registry=Registry(autoload=False, environ={}), environ={})


def test_layer_reports_counted_values_on_the_next_call_then_keeps_working():
    cfg, layer = _layer()
    x, routing = random_inputs(cfg, 3)
    want = layer(x, routing)
    kernel, _ = layer._kernels[layer.backend]
    kernel.routing_errors.record(torch.tensor([99]), torch.tensor([True]))  # as a GPU kernel would
    with pytest.raises(InvalidRoutingError, match="1 value"):
        layer(x, routing)
    assert torch.equal(layer(x, routing), want)
    kernel.routing_errors.record(torch.tensor([-4]), torch.tensor([True]))
    with pytest.raises(InvalidRoutingError, match=r"\[-4, 99\]"):
        layer.check()
    layer.check()


def test_layer_raises_at_once_on_cpu_for_bad_ids():
    cfg, layer = _layer()
    x, routing = random_inputs(cfg, 3)
    with pytest.raises(Exception, match=r"routing.topk_ids: values must lie in \[0, 4\)"):
        layer(x, Routing(torch.full_like(routing.topk_ids, 4), routing.topk_weights))
    layer.check()  # the synchronous check counted nothing on the device


def test_check_robustness_on_the_reference_backend():
    records = conformance.check_robustness(Registry(autoload=False, environ={}), "reference", device="cpu", schemes=("unquantized", "fp8-tensor-dyn"), garbage_calls=10)
    by_case = {(r["scheme"], r["case"]): r["outcome"] for r in records}
    assert by_case[("unquantized", "id = 100000")] == "raised"  # CPU inputs are checked synchronously
    assert by_case[("unquantized", "NaN token")] == "masked"
    assert by_case[("unquantized", "remote experts only (map -1)")] == "masked"
    assert ("fp8-tensor-dyn", "10 garbage routings") in by_case


class StickyKernel(ReferenceKernel):
    """The reference, except that after it has seen a NaN input every later output is 1% off: state a bad call poisoned."""

    backend_name = "sticky"
    poisoned = False

    def apply(self, x, weights, routing, **kwargs):
        out = super().apply(x, weights, routing, **kwargs)
        out, self.poisoned = (out * 1.01 if self.poisoned else out), self.poisoned or not torch.isfinite(x).all()
        return out


def test_check_robustness_catches_a_backend_that_a_bad_call_leaves_broken():
    from moe_core.reference.plugin import SPEC
    from moe_core.testing.fakes import SpecPlugin

    reg = Registry(autoload=False, environ={})
    reg.register(SpecPlugin(dataclasses.replace(SPEC, name="sticky", kernel=f"{__name__}:StickyKernel")), name="sticky")
    with pytest.raises(AssertionError, match=r"sticky unquantized after \[NaN token\]: a valid call no longer matches the reference"):
        conformance.check_robustness(reg, "sticky", device="cpu", schemes=("unquantized",))


def test_localized_routing_maps_ids_and_zeroes_remote_pairs():
    routing = Routing(torch.tensor([[0, 5], [3, 7]], dtype=torch.int32), torch.tensor([[0.25, 0.75], [0.5, 0.5]]))
    expert_map = torch.tensor([-1, -1, -1, -1, 0, 1, 2, 3], dtype=torch.int32)  # this rank holds global 4..7
    local = routing.localized(expert_map)
    assert torch.equal(local.topk_ids, torch.tensor([[0, 1], [0, 3]], dtype=torch.int32))
    assert torch.equal(local.topk_weights, torch.tensor([[0.0, 0.75], [0.0, 0.5]]))


def test_reported_count_is_what_check_raises_and_then_zero():
    counter = RoutingErrorCounter("routing.topk_ids", "[0, 8)")
    assert reported_count(counter) == 0
    values = torch.tensor([3, 9, -1, 2])
    counter.record(values, (values < 0) | (values >= 8))
    assert reported_count(counter) == 2
    assert reported_count(counter) == 0  # check() reset the counter


def test_the_error_says_what_happened_and_what_to_do():
    counter = RoutingErrorCounter("routing.topk_ids", "[0, 8)")
    counter.record(torch.tensor([9, -2, 3]), torch.tensor([True, True, False]))
    with pytest.raises(InvalidRoutingError) as info:
        counter.check()
    assert str(info.value) == (
        "routing.topk_ids: 2 value(s) outside [0, 8) were met by the GPU kernels (seen range [-2, 9]); those pairs "
        "contributed nothing to the outputs of the calls that received them. Fix the router, or set "
        "MOE_CORE_FULL_CHECKS=1 to raise synchronously at the offending call"
    )


@pytest.mark.parametrize(
    "parallel,argument,valid",
    [
        (ParallelConfig(), "routing.topk_ids", "[0, 8)"),
        (ParallelConfig(ep_size=2), "routing.topk_ids", "[0, 8) (expert_map entries: [-1, 4))"),
        (ParallelConfig(use_batched_activation_format=True), "expert_num_tokens", "[0, max_tokens]"),
    ],
    ids=["standard", "expert-parallel", "batched"],
)
def test_the_counter_names_what_it_counts(parallel, argument, valid):
    counter = routing_counter(MoEConfig(num_experts=8, top_k=2, hidden_size=32, intermediate_size=16, parallel=parallel))
    assert (counter.argument, counter.valid) == (argument, valid)


def test_a_counter_reports_afresh_after_check():
    counter = RoutingErrorCounter("routing.topk_ids", "[0, 8)")
    counter.record(torch.tensor([9]), torch.tensor([True]))
    with pytest.raises(InvalidRoutingError):
        counter.check()
    counter.record(torch.tensor([10]), torch.tensor([True]))
    with pytest.raises(InvalidRoutingError) as info:
        counter.poll()
    assert (info.value.count, info.value.smallest, info.value.largest) == (1, 10, 10)


def test_the_generic_guard_keeps_valid_values():
    cfg = MoEConfig(num_experts=8, top_k=2, hidden_size=32, intermediate_size=16, parallel=ParallelConfig(ep_size=2))
    counter = routing_counter(cfg)
    routing = Routing(torch.tensor([[0, 5], [7, 2]]), torch.ones(2, 2))
    expert_map = torch.tensor([0, 1, 2, 3, -1, -1, -1, -1])
    safe, safe_map = drop_invalid_routing(cfg, torch.zeros(2, 32), routing, expert_map, counter)
    assert torch.equal(safe.topk_ids, routing.topk_ids) and torch.equal(safe_map, expert_map)
    counts = BatchedRouting(torch.tensor([0, 3, 4], dtype=torch.int32))
    same, _ = drop_invalid_routing(cfg, torch.zeros(3, 4, 32), counts, None, counter)
    assert torch.equal(same.expert_num_tokens, counts.expert_num_tokens)
    counter.check()  # a zero count and a full expert are valid: nothing counted


class _HeldCopy:
    """A host copy that lands when the test says so, as a CUDA event completes when the GPU gets there."""

    made: list["_HeldCopy"] = []

    def __init__(self, device):
        self.device, self.starts, self.pending, self.landed = device, 0, None, [0, 0, 0]
        _HeldCopy.made.append(self)

    def start(self, buf):
        self.starts += 1
        self.pending = buf.tolist()

    def land(self):
        self.landed, self.pending = self.pending, None

    def finished(self):
        return self.pending is None

    def values(self):
        assert self.finished(), "read a host copy still in flight (a GPU may be writing it)"
        return list(self.landed)


class _AsyncCounter(RoutingErrorCounter):
    """The counter's GPU path on the CPU: its buffer is read only through host copies."""

    host_copy = _HeldCopy
    read_in_place = frozenset()
    min_interval_s = 0.0


def _async_counter(min_interval_s=0.0):
    _HeldCopy.made.clear()
    counter = _AsyncCounter("routing.topk_ids", "[0, 8)")
    counter.min_interval_s = min_interval_s
    return counter


def _record(counter, *values):
    t = torch.tensor(values)
    counter.record(t, (t < 0) | (t >= 8))


def test_poll_reads_only_a_landed_copy_and_reports_it_once():
    counter = _async_counter()
    _record(counter, 9, 1)
    counter.poll()  # nothing copied yet: a poll never reads the device buffer itself
    counter.snapshot()
    (copy,) = _HeldCopy.made
    assert copy.device == torch.device("cpu") and copy.starts == 1
    counter.poll()  # still in flight
    copy.land()
    with pytest.raises(InvalidRoutingError) as info:
        counter.poll()
    assert (info.value.count, info.value.smallest, info.value.largest) == (1, 9, 9)
    counter.poll()  # reported once


def test_snapshot_skips_a_copy_in_flight_and_a_later_one_reports_only_new_values():
    counter = _async_counter()
    _record(counter, 9)
    counter.snapshot()
    _record(counter, -3)
    counter.snapshot()  # the first copy has not landed: no second copy over it
    (copy,) = _HeldCopy.made
    assert copy.starts == 1
    copy.land()
    with pytest.raises(InvalidRoutingError) as info:
        counter.poll()
    assert info.value.count == 1  # what the first copy saw
    counter.snapshot()  # the counter is cumulative: this copy also carries the value the skipped one missed
    assert copy.starts == 2 and len(_HeldCopy.made) == 1
    copy.land()
    with pytest.raises(InvalidRoutingError) as info:
        counter.poll()
    assert (info.value.count, info.value.smallest, info.value.largest) == (1, -3, 9)


def test_snapshot_waits_out_its_interval_and_check_clears_it():
    counter = _async_counter(min_interval_s=3600.0)
    counter.snapshot()  # no counter made yet: nothing to copy
    assert _HeldCopy.made == []
    _record(counter, 9)
    counter.snapshot()
    (copy,) = _HeldCopy.made
    copy.land()
    counter.snapshot()  # within the interval
    assert copy.starts == 1
    with pytest.raises(InvalidRoutingError):
        counter.check()  # raises what no poll reported, and resets the counter, its copies and the interval
    counter.poll()
    _record(counter, 10)
    counter.snapshot()
    assert len(_HeldCopy.made) == 2 and _HeldCopy.made[1].starts == 1
    _HeldCopy.made[1].land()
    with pytest.raises(InvalidRoutingError) as info:
        counter.poll()
    assert (info.value.count, info.value.smallest, info.value.largest) == (1, 10, 10)


def test_counters_on_the_cpu_are_read_in_place_without_copies():
    counter = RoutingErrorCounter("routing.topk_ids", "[0, 8)")
    counter.host_copy = _HeldCopy
    _HeldCopy.made.clear()
    _record(counter, 9)
    counter.snapshot()
    assert _HeldCopy.made == []
    with pytest.raises(InvalidRoutingError):
        counter.poll()
