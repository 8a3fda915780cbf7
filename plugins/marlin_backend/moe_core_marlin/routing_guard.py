"""Marlin's routing guard: moe-core-triton's :func:`~moe_core_triton.pair_guard.guard_pairs`, one Triton launch that
makes a forward's routing safe for the compiled ops and counts what it drops (the contract of
``MoEKernel.guards_routing``, :mod:`moe_core.routing_guard`).

``moe_align_block_size`` reads ``expert_map[id]`` for every pair without a bounds check and skips pairs whose
entry is -1 (and, in one of its two kernels, ids at or past ``num_experts``). So the align is given local
expert ids and the :func:`local_map` of the L local experts: each pair's local expert as int32, and L for a pair
on another rank or an invalid one, whose entry in the local map is -1, so the align leaves exactly those pairs
out. The router weights come out as float32 (what the GEMMs read). The caller's expert map is read only here, in
whatever integer dtype it has.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch

from moe_core_triton.pair_guard import guard_pairs


@dataclass(frozen=True)
class GuardedRouting:
    """A forward's routing as the compiled ops take it (see the module docstring)."""

    #: int32 [T, k]: each pair's local expert; L (the number of local experts) where it is dropped.
    ids: torch.Tensor
    #: float32 [T, k]: the router weights (0 for an invalid pair).
    weights: torch.Tensor


def local_map(num_local: int, device: torch.device) -> torch.Tensor:
    """int32 [L + 1]: the identity on the L local experts, and -1 at L (the id of every dropped pair)."""
    ids = torch.arange(num_local + 1, dtype=torch.int32, device=device)
    return ids.masked_fill_(ids == num_local, -1)


def guard(topk_ids: torch.Tensor, topk_weights: torch.Tensor, expert_map: torch.Tensor | None, *, num_experts: int,
          num_local: int, errors: torch.Tensor) -> GuardedRouting:
    """One launch: the :class:`GuardedRouting` of these inputs; invalid pairs counted into ``errors`` (int64
    ``[count, smallest, largest]``, a :meth:`~moe_core.routing_guard.RoutingErrorCounter.buffer`)."""
    ids, weights = guard_pairs(topk_ids, topk_weights, expert_map, num_experts=num_experts, num_local=num_local,
                               errors=errors, dropped_id=num_local)
    return GuardedRouting(ids, weights)
