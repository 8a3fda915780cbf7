"""moe_core_triton.pair_guard against the core's definition of invalid routing (moe_core.routing_guard.invalid_pairs
and RoutingErrorCounter.record), in Triton's interpreter on the CPU."""

import torch
from hypothesis import given, settings, strategies as st

from moe_core.routing_guard import RoutingErrorCounter, invalid_pairs
from moe_core_triton.pair_guard import BLOCK, guard_pairs

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
       ids_dtype=st.sampled_from([torch.int32, torch.int64]), map_dtype=st.sampled_from([torch.int32, torch.int64]),
       dropped_at_end=st.booleans())
def test_the_guard_drops_and_counts_what_the_core_calls_invalid(ids, entries, ids_dtype, map_dtype, dropped_at_end):
    if ids_dtype == torch.int32:
        ids = [[max(-(2**31), min(2**31 - 1, i)) for i in pair] for pair in ids]
    topk = torch.tensor(ids, dtype=ids_dtype)  # [tokens, top_k = 2]
    weights = torch.rand(topk.shape, dtype=torch.float16)
    emap = None if entries is None else torch.tensor(entries, dtype=map_dtype)
    local = LOCAL if emap is not None else E
    dropped = local if dropped_at_end else -1  # Marlin's align takes L, vLLM's CUTLASS sort -1
    errors = fresh_errors()
    got_ids, got_weights = guard_pairs(topk, weights, emap, num_experts=E, num_local=local, errors=errors, dropped_id=dropped)
    want_local, bad, offending = invalid_pairs(topk, E, emap, local)
    assert got_ids.dtype == torch.int32 and got_weights.dtype == torch.float32
    assert torch.equal(got_ids.long(), torch.where(want_local >= 0, want_local, dropped))
    assert torch.equal(got_weights, torch.where(bad, 0.0, weights.float()))
    assert errors.tolist() == counted(offending, bad)


def test_counts_add_up_over_calls_and_blocks():
    topk = torch.full((BLOCK + 3, 2), 3)
    topk[0, 0], topk[-1, 1] = -5, 2**40  # one invalid id in the first block, one in the last
    errors = fresh_errors()
    for _ in range(2):
        guard_pairs(topk, torch.ones(topk.shape), None, num_experts=E, num_local=E, errors=errors, dropped_id=-1)
    assert errors.tolist() == [4, -5, 2**40]
