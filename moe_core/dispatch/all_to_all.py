"""``all_to_all``: each token travels once to every rank that holds one of its experts, and back.

The ranks first exchange how many tokens each sends to each (one small all-to-all and a host sync to
size the buffers), then the tokens with their routing, and after the experts ran, the partial outputs
(each already weighted and summed over the rank's own experts), which the sender places per rank and
adds up in float32. Sends exactly the tokens that are needed, so it suits prefill; the host sync rules
out CUDA graphs.
"""

from __future__ import annotations

import torch
import torch.distributed as dist

from moe_core.config import ActivationFormat
from moe_core.dispatch.base import Dispatched, Dispatcher, pack_routing, unpack_routing
from moe_core.routing import Routing


class AllToAllDispatcher(Dispatcher):
    """``all_to_all_single`` with per-rank counts over ``torch.distributed`` (STANDARD format)."""

    micro_batch_safe = True  # every buffer belongs to the instance

    output_format = ActivationFormat.STANDARD

    def dispatch(self, hidden_states: torch.Tensor, routing: Routing) -> Dispatched:
        ep, pg = self.config.parallel.ep_size, self.group.group
        t = hidden_states.shape[0]
        routing = self.drop_invalid(routing)
        owner = torch.div(routing.topk_ids.long(), self.local_experts, rounding_mode="floor")
        wanted = torch.zeros(t, ep, dtype=torch.bool, device=hidden_states.device)
        wanted.scatter_(1, owner, True)
        dest, token = wanted.t().nonzero(as_tuple=True)  # grouped by destination rank, tokens in order
        send_counts = wanted.sum(0)
        recv_counts = torch.empty_like(send_counts)
        dist.all_to_all_single(recv_counts, send_counts, group=pg)
        sizes = torch.stack((send_counts, recv_counts)).tolist()  # the host sync: buffer sizes
        send, recv = sizes[0], sizes[1]
        x = hidden_states[token]
        meta = pack_routing(routing)[token]
        got_x = x.new_empty(sum(recv), x.shape[1])
        got_meta = meta.new_empty(sum(recv), meta.shape[1])
        dist.all_to_all_single(got_x, x, recv, send, group=pg)
        dist.all_to_all_single(got_meta, meta, recv, send, group=pg)
        return Dispatched(got_x, unpack_routing(got_meta), self.expert_map(x.device), (t, dest * t + token, send, recv))

    def combine(self, expert_output: torch.Tensor, dispatched: Dispatched) -> torch.Tensor:
        t, place, send, recv = dispatched.state
        ep, h = self.config.parallel.ep_size, expert_output.shape[1]
        back = expert_output.new_empty(sum(send), h)
        dist.all_to_all_single(back, expert_output.contiguous(), send, recv, group=self.group.group)
        # Each token has at most one partial result per rank: place them in [ep, T, H] (no atomics; rows of a
        # rank that got nothing stay zero) and add the ranks' results in float32.
        parts = back.new_zeros(ep * t, h).index_copy_(0, place, back)
        return parts.view(ep, t, h).sum(0, dtype=torch.float32).to(expert_output.dtype)
