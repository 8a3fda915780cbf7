"""``naive``: all-gather every rank's tokens, run the local experts on all of them, reduce-scatter.

Every rank receives every token (padded to the same row count; padding rows are routed to remote
experts, so they cost no expert work), its experts compute the pairs routed to them (the expert map
marks the others remote), and a reduce-scatter sums the partial outputs and hands each rank its own
rows. No host sync with a fixed ``max_tokens_per_rank``, so CUDA graphs can
capture it; it moves ``ep`` times the tokens, so it suits small batches and small groups.
"""

from __future__ import annotations

import torch
import torch.distributed as dist

from moe_core.config import ActivationFormat
from moe_core.dispatch.base import Dispatched, Dispatcher, pack_routing, unpack_routing
from moe_core.routing import Routing


class NaiveDispatcher(Dispatcher):
    """All-gather + reduce-scatter over ``torch.distributed`` (STANDARD format)."""

    micro_batch_safe = True  # every buffer belongs to the instance

    output_format = ActivationFormat.STANDARD

    def dispatch(self, hidden_states: torch.Tensor, routing: Routing) -> Dispatched:
        routing = self.drop_invalid(routing)
        t, h = hidden_states.shape
        rows = self.tokens_per_rank(t, hidden_states.device)
        ep, pg = self.config.parallel.ep_size, self.group.group
        x = hidden_states.new_zeros(rows, h)
        x[:t] = hidden_states
        # Padding rows travel with id -1 (real invalid ids were dropped above, so -1 marks padding only); each
        # receiver points them at an expert of another rank, which its expert map skips: no work is spent on them.
        k = self.config.top_k
        meta = pack_routing(Routing(torch.full((rows, k), -1, dtype=torch.int32, device=x.device), torch.zeros(rows, k, device=x.device)))
        meta[:t] = pack_routing(routing)
        all_x = x.new_empty(ep * rows, h)
        all_meta = meta.new_empty(ep * rows, meta.shape[1])
        dist.all_gather_into_tensor(all_x, x, group=pg)
        dist.all_gather_into_tensor(all_meta, meta, group=pg)
        gathered = unpack_routing(all_meta)
        elsewhere = ((self.rank + 1) % ep) * self.local_experts  # the first expert of the next rank
        ids = torch.where(gathered.topk_ids < 0, elsewhere, gathered.topk_ids)
        return Dispatched(all_x, Routing(ids, gathered.topk_weights), self.expert_map(x.device), (t, rows))

    def combine(self, expert_output: torch.Tensor, dispatched: Dispatched) -> torch.Tensor:
        t, rows = dispatched.state
        mine = expert_output.new_empty(rows, expert_output.shape[1])
        dist.reduce_scatter_tensor(mine, expert_output.contiguous(), group=self.group.group)
        return mine[:t]
