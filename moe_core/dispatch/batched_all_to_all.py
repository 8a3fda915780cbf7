"""``batched_all_to_all``: fixed-capacity per-expert buffers, one all-to-all each way, no host sync.

Each rank writes every routed (token, expert) pair into a send buffer ``[ep, L, C, H]`` — destination
rank, its local expert, a row below the capacity ``C`` — and one equal-split all-to-all delivers the
buffers with the per-expert counts. The receiving rank packs each expert's rows from all sources
into the BATCHED_EXPERTS format ``[L, ep * C + 1, H]`` (the last row takes the unused slots), its
batched experts kernel runs, and the same index sends every result back to the slot it came from; the
sender weights and sums them in float32. Buffer sizes never depend on the data, so CUDA graphs can
capture it (with a fixed ``max_tokens_per_rank``). Pairs beyond the capacity are dropped and counted
on the device (:class:`~moe_core.dispatch.base.ExpertCapacityError` at the next check), never silently.
"""

from __future__ import annotations

import math

import torch
import torch.distributed as dist

from moe_core.config import ActivationFormat
from moe_core.batched import expert_rows
from moe_core.dispatch.base import CapacityCounter, Dispatched, Dispatcher
from moe_core.routing import BatchedRouting, Routing
from moe_core.routing_guard import RoutingErrorCounter


class BatchedAllToAllDispatcher(Dispatcher):
    """Fixed-capacity ``all_to_all_single`` over ``torch.distributed`` (BATCHED_EXPERTS format)."""

    micro_batch_safe = True  # every buffer belongs to the instance

    output_format = ActivationFormat.BATCHED_EXPERTS

    def __init__(self, config, group):
        super().__init__(config, group)
        if group.expert_capacity_factor is not None:
            argument, valid = "expert_capacity_factor", f"expert_capacity_factor={group.expert_capacity_factor} times the mean rows"
        else:
            argument, valid = "expert_capacity", f"expert_capacity={group.expert_capacity or group.max_tokens_per_rank or 'max_tokens_per_rank'} rows"
        self.overflow = CapacityCounter(argument, f"{valid} per (expert, source rank)")

    def capacity(self, num_tokens: int, device: torch.device) -> int:
        """Rows per (expert, source rank) for a forward of ``num_tokens`` on this rank (the same on every rank)."""
        group = self.group
        if group.expert_capacity is not None:
            return group.expert_capacity
        rows = self.tokens_per_rank(num_tokens, device)
        if group.expert_capacity_factor is None:
            return rows
        mean = rows * self.config.top_k / self.config.num_experts
        return max(1, min(rows, math.ceil(group.expert_capacity_factor * mean)))

    def counters(self) -> tuple[RoutingErrorCounter, ...]:
        return (self.routing_errors, self.overflow)

    def dispatch(self, hidden_states: torch.Tensor, routing: Routing) -> Dispatched:
        ep, pg = self.config.parallel.ep_size, self.group.group
        e, k, n_local = self.config.num_experts, self.config.top_k, self.local_experts
        t, h = hidden_states.shape
        device = hidden_states.device
        cap = self.capacity(t, device)

        ids = routing.topk_ids.reshape(-1).long()
        bad = self.record_invalid(ids)
        # Invalid pairs sort last, into a bin nobody receives.
        order, sorted_expert, demand, row = expert_rows(torch.where(bad, e, ids), e + 1)
        kept = (sorted_expert < e) & (row < cap)
        self.overflow.record(row, (sorted_expert < e) & (row >= cap))
        # Slot of every pair in the flat send buffer [E * cap (+1 trash row), H]; dropped pairs use the trash row.
        slot = torch.full_like(ids, e * cap)
        slot[order] = torch.where(kept, sorted_expert * cap + row, e * cap)
        send = hidden_states.new_zeros(e * cap + 1, h)
        send.index_copy_(0, slot, hidden_states.repeat_interleave(k, dim=0))
        send_counts = demand[:e].clamp(max=cap).to(torch.int32)

        recv = send.new_empty(e * cap, h)
        counts = torch.empty_like(send_counts)
        dist.all_to_all_single(recv, send[: e * cap], group=pg)
        dist.all_to_all_single(counts, send_counts, group=pg)
        # counts[src * L + j]: rows expert j received from rank src; pack them per expert, sources in rank order.
        per_source = counts.view(ep, n_local).long()
        offset = torch.cumsum(per_source, 0) - per_source
        r = torch.arange(cap, device=device)
        valid = r.view(1, 1, cap) < per_source.view(ep, n_local, 1)
        width = ep * cap + 1
        local = torch.arange(n_local, device=device).view(1, n_local, 1) * width
        target = torch.where(valid, local + offset.view(ep, n_local, 1) + r.view(1, 1, cap), local + width - 1).reshape(-1)
        packed = send.new_zeros(n_local * width, h)
        packed.index_copy_(0, target, recv)
        batch = BatchedRouting(per_source.sum(0).to(torch.int32))
        return Dispatched(packed.view(n_local, width, h), batch, None, (t, cap, slot, target, routing.topk_weights))

    def combine(self, expert_output: torch.Tensor, dispatched: Dispatched) -> torch.Tensor:
        t, cap, slot, target, weights = dispatched.state
        e, h = self.config.num_experts, expert_output.shape[-1]
        reply = expert_output.reshape(-1, h)[target]
        back = expert_output.new_zeros(e * cap + 1, h)
        dist.all_to_all_single(back[: e * cap], reply, group=self.group.group)
        # Each pair's result (the trash row, zero, for dropped pairs), weighted and summed per token in float32.
        picked = back[slot].float() * weights.reshape(-1, 1).float()
        return picked.view(t, self.config.top_k, h).sum(1).to(expert_output.dtype)
