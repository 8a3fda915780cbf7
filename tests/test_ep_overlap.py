"""Two overlapped micro-batches (moe_core.dispatch.overlap): when a layer runs them, the halves' buffers, the
order of the transfers every rank must share, and the refusal of a dispatcher that cannot run twice at once.
Their numerics over gloo, for every built-in dispatcher, are cases of tests/test_expert_parallel.py."""

from __future__ import annotations

from dataclasses import dataclass

import pytest
import torch

import moe_core.dispatch.base as dispatch_base
from moe_core import ExpertParallelGroup, Routing
from moe_core.dispatch.base import Dispatched
from moe_core.dispatch.overlap import MicroBatchOverlap, half_group, micro_batches
from moe_core.errors import InvalidConfigError


class _Safe:
    micro_batch_safe = True


class _Shared:
    micro_batch_safe = False


@pytest.fixture
def groups(monkeypatch):
    """ExpertParallelGroup without a process group (only its fields are read here)."""
    monkeypatch.setattr(dispatch_base.dist, "is_initialized", lambda: True)
    return lambda **kw: ExpertParallelGroup(**kw)


def test_micro_batches_are_the_groups_choice_and_two_refuse_a_shared_buffer(groups):
    assert micro_batches(groups(max_tokens_per_rank=8), _Safe()) == 1  # the default: whole forwards
    assert micro_batches(groups(max_tokens_per_rank=8, micro_batches=2), _Safe()) == 2
    assert micro_batches(groups(micro_batches=1), _Shared()) == 1
    with pytest.raises(InvalidConfigError, match="_Shared shares one between instances"):
        micro_batches(groups(micro_batches=2), _Shared())


@pytest.mark.parametrize("bad", [0, 3, None, True, 2.0, "2"])
def test_micro_batches_must_be_one_or_two(groups, bad):
    with pytest.raises(InvalidConfigError, match="micro_batches must be 1 or 2"):
        groups(micro_batches=bad)


def test_each_half_holds_half_the_tokens_rounded_up_and_runs_whole(groups):
    half = half_group(groups(max_tokens_per_rank=9, expert_capacity=3, micro_batches=2))
    assert (half.max_tokens_per_rank, half.expert_capacity, half.micro_batches) == (5, 3, 1)
    assert half_group(groups(micro_batches=2)).max_tokens_per_rank is None


@dataclass
class _Recorder:
    """A dispatcher stand-in: records its transfers in a shared log (a combine, with the dispatch it was handed), and
    combines by adding 1000 * its index."""

    index: int
    log: list

    def dispatch(self, hidden_states, routing):
        self.log.append(("dispatch", self.index, hidden_states.shape[0], routing.num_tokens))
        return Dispatched(hidden_states, routing, None, ("sent by", self.index))

    def combine(self, expert_output, dispatched):
        self.log.append(("combine", self.index, expert_output.shape[0], dispatched.state))
        return expert_output + 1000 * self.index


@pytest.mark.parametrize("tokens", [0, 1, 2, 7])
def test_the_transfers_keep_one_order_and_the_halves_come_back_in_token_order(tokens):
    log = []
    overlap = MicroBatchOverlap(_Recorder(0, log), _Recorder(1, log))
    x = torch.arange(tokens, dtype=torch.float32).view(tokens, 1)
    routing = Routing(torch.zeros(tokens, 1, dtype=torch.int64), torch.ones(tokens, 1))

    def experts(sent):
        log.append(("experts", sent.hidden_states.shape[0]))
        return sent.hidden_states * 2

    out = overlap(x, routing, experts)
    first, second = (tokens + 1) // 2, tokens // 2
    assert log == [("dispatch", 0, first, first), ("dispatch", 1, second, second), ("experts", first),
                   ("combine", 0, first, ("sent by", 0)), ("experts", second), ("combine", 1, second, ("sent by", 1))]
    want = torch.cat((x[:first] * 2, x[first:] * 2 + 1000))
    assert torch.equal(out, want)


def _over_the_limit(rank: int, world: int) -> str:
    from moe_core import MoEConfig, MoELayer, ParallelConfig, Registry
    from moe_core.presets import random_layer
    from moe_core.quant import scheme

    cfg = MoEConfig(8, 2, 16, 8, dtype=torch.float32, parallel=ParallelConfig(ep_size=world, dispatch_backend="packed_all_to_all"))
    weights = random_layer(MoEConfig(8, 2, 16, 8, dtype=torch.float32), scheme("unquantized")).shard(rank, world)
    layer = MoELayer(cfg, weights, registry=Registry(autoload=False), environ={},
                     ep_group=ExpertParallelGroup(max_tokens_per_rank=3, micro_batches=2))
    try:
        layer(torch.randn(4, 16), Routing.from_logits(torch.randn(4, 8), 2))  # halves of 2 would fit buffers of 2
    except Exception as exc:  # noqa: BLE001 - returned to the test
        return f"{type(exc).__name__}: {exc}"
    return "no error"


def test_micro_batches_keep_the_layers_token_limit():
    from moe_core.testing.distributed import spawn_group

    for raised in spawn_group(2, _over_the_limit, "gloo"):
        assert raised.startswith("KernelInputError") and "more than max_tokens_per_rank=3" in raised
