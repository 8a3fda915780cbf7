"""Block tables: which rows each GEMM program reads, grouped by expert and padded to BLOCK_M.

Both activation formats become the same table, so one GEMM kernel serves both:

* ``sorted_ids`` [EM] int32: row ids (a (token, slot) pair index, or a batched row), grouped by
  expert, each expert's run padded to a multiple of BLOCK_M with the sentinel ``num_valid``;
* ``block_expert`` [EM / BLOCK_M] int32: the local expert of each block;
* ``num_padded`` [1] int32: rows in use; blocks at or past it exit at once.

Built with a handful of device ops and no host synchronisation; ``EM`` is a static upper bound so
the launch grid never depends on routing.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch


@dataclass(frozen=True, eq=False)
class BlockTable:
    sorted_ids: torch.Tensor
    block_expert: torch.Tensor
    num_padded: torch.Tensor
    num_valid: int
    block_m: int

    @property
    def capacity(self) -> int:
        return self.sorted_ids.shape[0]


def standard_table(topk_ids: torch.Tensor, num_experts: int, block_m: int, expert_map: torch.Tensor | None = None) -> BlockTable:
    """Group the T*k (token, slot) pairs of ``topk_ids`` [T, k] by local expert; remote experts are dropped."""
    device = topk_ids.device
    ids = topk_ids.reshape(-1).long()
    if expert_map is not None:
        ids = expert_map.to(device=device, dtype=torch.long)[ids]
    pairs = ids.numel()
    key = torch.where(ids >= 0, ids, num_experts)  # remote pairs go to a dropped bucket
    counts = torch.bincount(key, minlength=num_experts + 1)
    padded = (counts[:num_experts] + block_m - 1) // block_m * block_m
    ends = torch.cumsum(padded, 0)
    starts = ends - padded
    order = torch.argsort(key, stable=True)
    sorted_key = key[order]
    first = torch.cumsum(counts, 0) - counts
    rank = torch.arange(pairs, device=device) - first[sorted_key]
    capacity = _round_up(pairs + min(num_experts, pairs) * (block_m - 1), block_m) if pairs else block_m
    starts_ext = torch.cat([starts, torch.tensor([capacity], device=device)])
    dest = torch.where(sorted_key < num_experts, starts_ext[sorted_key] + rank, capacity)
    sorted_ids = torch.full((capacity + 1,), pairs, dtype=torch.int32, device=device)
    sorted_ids.scatter_(0, dest, order.to(torch.int32))
    block_start = torch.arange(0, capacity, block_m, device=device)
    block_expert = torch.searchsorted(ends, block_start, right=True).clamp(max=num_experts - 1).to(torch.int32)
    num_padded = ends[-1:].to(torch.int32) if num_experts else torch.zeros(1, dtype=torch.int32, device=device)
    return BlockTable(sorted_ids[:capacity], block_expert, num_padded, pairs, block_m)


def batched_table(expert_num_tokens: torch.Tensor, max_tokens: int, block_m: int) -> BlockTable:
    """Rows ``e * max_tokens + m`` for m < count[e], each expert's rows in ceil(max_tokens / BLOCK_M) blocks."""
    device = expert_num_tokens.device
    experts = expert_num_tokens.shape[0]
    per_expert = _round_up(max(max_tokens, 1), block_m)
    m = torch.arange(per_expert, device=device)
    valid = m.unsqueeze(0) < expert_num_tokens.to(device).unsqueeze(1)
    rows = torch.arange(experts, device=device).unsqueeze(1) * max_tokens + m.unsqueeze(0)
    sentinel = experts * max_tokens
    sorted_ids = torch.where(valid, rows, sentinel).to(torch.int32).reshape(-1)
    block_expert = torch.arange(experts, device=device, dtype=torch.int32).repeat_interleave(per_expert // block_m)
    num_padded = torch.tensor([sorted_ids.numel()], dtype=torch.int32, device=device)
    return BlockTable(sorted_ids, block_expert, num_padded, sentinel, block_m)


def _round_up(x: int, m: int) -> int:
    return (x + m - 1) // m * m
