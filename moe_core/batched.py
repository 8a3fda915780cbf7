"""Conversion between the STANDARD and BATCHED_EXPERTS activation formats (single-rank dispatch).

Expert-parallel engines produce the batched format with all-to-all communication; these helpers
do the same on one rank, so that batched kernels can be tested and benchmarked against the
standard path.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch

from moe_core.routing import BatchedRouting, Routing


@dataclass(frozen=True, eq=False)
class BatchedLayout:
    """Where each (token, slot) pair went: ``expert``, ``row`` and ``pair`` index tensors of length P."""

    num_tokens: int
    token: torch.Tensor
    slot: torch.Tensor
    expert: torch.Tensor
    row: torch.Tensor


def expert_rows(ids: torch.Tensor, bins: int) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor]:
    """(Token, slot) pairs grouped by expert, pairs in their original order within an expert (no host sync).

    ``ids`` [P] int64 expert per pair, each in ``[0, bins)``. Returns ``order`` (pair indices sorted by
    expert), ``expert`` (the expert of each sorted pair), ``counts`` [bins] (pairs per expert) and ``row``
    (each sorted pair's row within its expert).
    """
    order = torch.argsort(ids, stable=True)
    expert = ids[order]
    # Where each expert's run starts in the sorted ids. (torch.bincount would size its output from the
    # largest id on the host: a sync, which CUDA-graph capture refuses.)
    start = torch.searchsorted(expert, torch.arange(bins + 1, device=ids.device))
    counts = start.diff()
    row = torch.arange(ids.numel(), device=ids.device) - start[expert]
    return order, expert, counts, row


def dispatch(hidden_states: torch.Tensor, routing: Routing, num_experts: int, max_tokens: int | None = None) -> tuple[torch.Tensor, BatchedRouting, BatchedLayout]:
    """Scatter [T, H] tokens into [E, max_tokens, H] by their top-k experts (stable order by token)."""
    t, h = hidden_states.shape
    ids = routing.topk_ids.reshape(-1).long()
    order, expert, counts, row = expert_rows(ids, num_experts)
    cap = int(counts.max().item()) if max_tokens is None and ids.numel() else (max_tokens or 1)
    if counts.numel() and int(counts.max().item()) > cap:
        raise ValueError(f"max_tokens={cap} is smaller than the busiest expert's {int(counts.max().item())} tokens")
    out = hidden_states.new_zeros(num_experts, max(cap, 1), h)
    token = order // routing.top_k
    out[expert, row] = hidden_states[token]
    layout = BatchedLayout(t, token, order % routing.top_k, expert, row)
    return out, BatchedRouting(counts.to(torch.int32)), layout


def combine(expert_outputs: torch.Tensor, layout: BatchedLayout, routing: Routing) -> torch.Tensor:
    """Weighted sum of [E, max_tokens, H] expert outputs back into [T, H] (float32 accumulation)."""
    picked = expert_outputs[layout.expert, layout.row].float()
    weights = routing.topk_weights[layout.token, layout.slot].float().unsqueeze(-1)
    out = torch.zeros(layout.num_tokens, expert_outputs.shape[-1], dtype=torch.float32, device=expert_outputs.device)
    out.index_add_(0, layout.token, picked * weights)
    return out.to(expert_outputs.dtype)
