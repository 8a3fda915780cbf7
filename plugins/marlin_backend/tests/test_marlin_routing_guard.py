"""Marlin's routing guard (moe_core_marlin.routing_guard) as the align reads it: a pair is sorted exactly when the
core gives it a local expert, to that expert (the guard's own rule is tested with moe-core-triton's pair_guard)."""

import torch

from moe_core.routing_guard import RoutingErrorCounter, invalid_pairs
from moe_core_marlin.routing_guard import guard, local_map

E, LOCAL = 8, 4


def test_the_align_sorts_exactly_the_pairs_the_core_gives_a_local_expert():
    topk = torch.tensor([[0, 1], [2, 9], [-3, 6], [4, 7]])
    emap = torch.tensor([0, -1, 1, -1, 2, LOCAL, 3, -1])  # expert 5's entry is out of range: invalid
    weights = torch.rand(topk.shape)
    errors = RoutingErrorCounter("ids", "[0, 8)").buffer(torch.device("cpu"))
    got = guard(topk, weights, emap, num_experts=E, num_local=LOCAL, errors=errors)
    want_local, bad, _ = invalid_pairs(topk, E, emap, LOCAL)
    assert torch.equal(local_map(LOCAL, torch.device("cpu")).long()[got.ids.long()], want_local)
    assert torch.equal(got.weights, torch.where(bad, 0.0, weights))
    assert errors.tolist()[0] == int(bad.sum()) == 2


def test_the_local_map_sends_the_dropped_slot_to_minus_one():
    assert local_map(3, torch.device("cpu")).tolist() == [0, 1, 2, -1]
