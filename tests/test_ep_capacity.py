"""batched_all_to_all's capacity that fits the routing (expert_capacity_factor): its size, its validation, and
overflow reported as for a fixed expert_capacity (gloo, world size 2)."""

from __future__ import annotations

import pytest
import torch

from moe_core import ExpertParallelGroup, MoEConfig, ParallelConfig
from moe_core.dispatch.batched_all_to_all import BatchedAllToAllDispatcher
from moe_core.errors import InvalidConfigError
from moe_core.testing.distributed import spawn_group
from moe_core.testing.expert_parallel import EPCase, run_cases


class _Group:
    group, expert_capacity = None, None

    def __init__(self, max_tokens_per_rank: int, factor: float | None):
        self.rank, self.world_size, self.max_tokens_per_rank, self.expert_capacity_factor = 0, 2, max_tokens_per_rank, factor


@pytest.mark.parametrize("tokens, factor, want", [
    (4096, 2.0, 512),   # Qwen3-30B-A3B shape: 4096 * 8 / 128 = 256 rows on average, twice that
    (16, 2.0, 2),       # 16 * 8 / 128 = 1
    (12, 100.0, 12),    # never more than the tokens per rank (a token visits an expert once)
    (1, 0.01, 1),       # never less than one row
    (12, None, 12),     # unset: the worst case, which never overflows
])
def test_the_capacity_is_the_factor_times_the_mean_load_within_one_and_the_tokens(tokens, factor, want):
    cfg = MoEConfig(128, 8, 64, 32, dtype=torch.float32, parallel=ParallelConfig(ep_size=2))
    d = BatchedAllToAllDispatcher(cfg, _Group(tokens, factor))
    assert d.capacity(tokens, torch.device("cpu")) == want


def test_factor_and_capacity_are_validated():
    with pytest.raises(InvalidConfigError, match="not both"):
        ExpertParallelGroup(expert_capacity=4, expert_capacity_factor=2.0)
    with pytest.raises(InvalidConfigError, match="positive number"):
        ExpertParallelGroup(expert_capacity_factor=0)


CASES = [
    # 6 tokens x top-2 over experts {0, E-1}: 6 pairs per (expert, source rank) against ceil(1.0 * 6 * 2 / 8) = 2 rows
    EPCase("factor-overflow", "batched_all_to_all", tokens=(6,), routing="two_experts", expert_capacity_factor=1.0),
    # 12 tokens x top-2 over 8 experts, uniform: 3 rows on average, 9 with factor 3; this seed's busiest expert fits
    EPCase("factor-fits", "batched_all_to_all", tokens=(12,), expert_capacity_factor=3.0, max_tokens_per_rank=12),
]


def test_a_fitting_capacity_is_exact_and_its_overflow_is_reported():
    for rank in spawn_group(2, run_cases, "gloo", CASES):
        over, fits = rank["factor-overflow"], rank["factor-fits"]
        assert over.raised.startswith("ExpertCapacityError") and "8 (token, expert) pair(s)" in over.raised, over
        assert "expert_capacity_factor=1.0 times the mean rows" in over.raised and "Raise expert_capacity_factor" in over.raised
        assert fits.ok, fits
