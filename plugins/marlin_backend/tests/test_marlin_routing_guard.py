"""Marlin's routing guard (moe_core_marlin.routing_guard) against the core's definition of invalid routing
(moe_core.routing_guard.invalid_pairs and RoutingErrorCounter.record), in Triton's interpreter on the CPU."""

import torch
from hypothesis import given, settings, strategies as st

from moe_core.routing_guard import RoutingErrorCounter, invalid_pairs
from moe_core_marlin.routing_guard import BLOCK, guard, local_map

E, LOCAL = 8, 4


def fresh_errors() -> torch.Tensor:
    return RoutingErrorCounter("ids", "[0, 8)").buffer(torch.device("cpu"))


def counted(values, bad) -> list[int]:
    counter = RoutingErrorCounter("ids", "[0, 8)")
    counter.record(values, bad)
    return counter.buffer(torch.device("cpu")).tolist()


ID = st.one_of(st.integers(0, E - 1), st.integers(-(2**40), 2**40), st.sampled_from([-1, E, -(2**63), 2**63 - 1]))
ENTRY = st.one_of(st.integers(-1, LOCAL - 1), st.sampled_from([-7, -2, LOCAL, 2**31 - 1, -(2**31)]))


@settings(max_examples=30, deadline=None, derandomize=True)
@given(ids=st.lists(st.tuples(ID, ID), min_size=1, max_size=12), entries=st.one_of(st.none(), st.lists(ENTRY, min_size=E, max_size=E)),
       ids_dtype=st.sampled_from([torch.int32, torch.int64]), map_dtype=st.sampled_from([torch.int32, torch.int64]))
def test_the_guard_drops_and_counts_what_the_core_calls_invalid(ids, entries, ids_dtype, map_dtype):
    if ids_dtype == torch.int32:
        ids = [[max(-(2**31), min(2**31 - 1, i)) for i in pair] for pair in ids]
    topk = torch.tensor(ids, dtype=ids_dtype)  # [tokens, top_k = 2]
    weights = torch.rand(topk.shape, dtype=torch.float16)
    emap = None if entries is None else torch.tensor(entries, dtype=map_dtype)
    local = LOCAL if emap is not None else E
    errors = fresh_errors()
    got = guard(topk, weights, emap, num_experts=E, num_local=local, errors=errors)
    want_local, bad, offending = invalid_pairs(topk, E, emap, local)
    # The align reads local_map[id]: a pair is sorted exactly when the core gives it a local expert, to that expert.
    assert got.ids.dtype == torch.int32
    assert torch.equal(local_map(local, torch.device("cpu")).long()[got.ids.long()], want_local)
    assert torch.equal(got.weights, weights.float())
    assert errors.tolist() == counted(offending, bad)


def test_counts_add_up_over_calls_and_blocks():
    topk = torch.full((BLOCK + 3, 2), 3)
    topk[0, 0], topk[-1, 1] = -5, 2**40  # one invalid id in the first block, one in the last
    errors = fresh_errors()
    for _ in range(2):
        guard(topk, torch.ones(topk.shape), None, num_experts=E, num_local=E, errors=errors)
    assert errors.tolist() == [4, -5, 2**40]


def test_the_local_map_sends_the_dropped_slot_to_minus_one():
    assert local_map(3, torch.device("cpu")).tolist() == [0, 1, 2, -1]
