"""DeepEP's dispatch/combine behind moe-core's Dispatcher contract (contract.py lists the calls used).

``deep_ep`` is imported on first use, so this module loads without it. One ``deep_ep.Buffer`` per process
group and mode is shared by the layers (:func:`shared_buffer`): a buffer pins NVLink (and, in low-latency
mode, NVSHMEM) memory on every rank, and its construction and destruction are themselves collective.

Invalid expert ids are counted in :attr:`Dispatcher.routing_errors` on the device and become -1,
DeepEP's "no expert": they are never sent and add nothing to the combined output.
"""

from __future__ import annotations

import dataclasses
import importlib
from typing import Any

import torch
import torch.distributed as dist

from moe_core.config import ActivationFormat
from moe_core.dispatch.base import Dispatched, Dispatcher
from moe_core.errors import InvalidConfigError
from moe_core.routing import BatchedRouting, Routing
from moe_core_deepep import how_to_build

_BUFFERS: dict[tuple, "SharedBuffer"] = {}


def deep_ep() -> Any:
    """The ``deep_ep`` module, or an error that says how to build it."""
    try:
        return importlib.import_module("deep_ep")
    except ImportError as exc:
        raise InvalidConfigError(f"the deepep dispatchers need DeepEP ({exc}): {how_to_build()}") from exc


@dataclasses.dataclass
class SharedBuffer:
    """The one ``deep_ep.Buffer`` of a process group and mode, held by every layer that dispatches through it.

    Layers read :attr:`buffer` at each call, so when a later layer needs a larger one, every layer moves to it.
    """

    buffer: Any
    qps: int


def shared_buffer(group: Any, low_latency: bool, nvl_bytes: int, rdma_bytes: int, qps: int) -> SharedBuffer:
    """The shared buffer of this group and mode, built (collectively) on first use and grown when a layer needs more
    bytes or queue pairs than it has.

    Growing is collective too: the old buffer is destroyed explicitly (a barrier across the ranks) and a larger one
    built, at the same point on every rank, because every rank builds its layers in the same order. DeepEP's
    destructor would run that barrier whenever Python collects the buffer, at a different moment on each rank,
    and hang. CUDA graphs captured before a growth hold the old buffer's memory: build every layer first.
    """
    group = dist.group.WORLD if group is None else group
    key = (group, low_latency)
    slot = _BUFFERS.get(key)
    if slot is not None and slot.buffer.num_nvl_bytes >= nvl_bytes and slot.buffer.num_rdma_bytes >= rdma_bytes and slot.qps >= qps:
        return slot
    if slot is not None:
        nvl_bytes, rdma_bytes = max(nvl_bytes, slot.buffer.num_nvl_bytes), max(rdma_bytes, slot.buffer.num_rdma_bytes)
        qps = max(qps, slot.qps)
        slot.buffer.destroy()
    buffer = deep_ep().Buffer(group, nvl_bytes, rdma_bytes, low_latency_mode=low_latency, num_qps_per_rank=qps,
                              explicitly_destroy=True)
    if slot is None:
        slot = _BUFFERS[key] = SharedBuffer(buffer, qps)
    else:
        slot.buffer, slot.qps = buffer, qps
    return slot


def release_buffers() -> None:
    """Destroy the shared buffers (collective: call it on every rank, before
    ``torch.distributed.destroy_process_group``, as a buffer holds its process group)."""
    for slot in _BUFFERS.values():
        slot.buffer.destroy()
    _BUFFERS.clear()


class DeepEPDispatcher(Dispatcher):
    """DeepEP intranode normal mode (NVLink, STANDARD format; a host sync learns the receive counts)."""

    output_format = ActivationFormat.STANDARD

    def __init__(self, config, group):
        super().__init__(config, group)
        ep, hidden_bytes = config.parallel.ep_size, config.hidden_size * 2
        buffer_cls = deep_ep().Buffer
        configs = (buffer_cls.get_dispatch_config(ep), buffer_cls.get_combine_config(ep))
        nvl_bytes = max(c.get_nvl_buffer_size_hint(hidden_bytes, ep) for c in configs)
        self.shared = shared_buffer(group.group, False, nvl_bytes, 0, 1)

    def dispatch(self, hidden_states: torch.Tensor, routing: Routing) -> Dispatched:
        ids, weights = deepep_routing(self, routing)
        per_rank, _, per_expert, in_rank, _ = self.shared.buffer.get_dispatch_layout(ids, self.config.num_experts)
        recv_x, recv_ids, recv_weights, _, handle, _ = self.shared.buffer.dispatch(
            hidden_states, num_tokens_per_rank=per_rank, is_token_in_rank=in_rank, num_tokens_per_expert=per_expert,
            topk_idx=ids, topk_weights=weights)
        # DeepEP gives local ids, -1 for experts held elsewhere; moe-core's STANDARD contract takes global ids and
        # the expert map. A -1 becomes the first expert of the next rank: held elsewhere, so it adds nothing.
        mine = recv_ids >= 0
        first = self.rank * self.local_experts
        elsewhere = (first + self.local_experts) % self.config.num_experts
        global_ids = torch.where(mine, recv_ids + first, elsewhere)
        local_routing = Routing(global_ids, torch.where(mine, recv_weights, 0.0))
        return Dispatched(recv_x, local_routing, self.expert_map(recv_x.device), handle)

    def combine(self, expert_output: torch.Tensor, dispatched: Dispatched) -> torch.Tensor:
        combined, _, _ = self.shared.buffer.combine(expert_output.contiguous(), dispatched.state)
        return combined


class DeepEPLowLatencyDispatcher(Dispatcher):
    """DeepEP low-latency mode (NVSHMEM, BATCHED_EXPERTS format, no host sync, CUDA-graph safe).

    DeepEP alternates two buffers, one switch per dispatch and per combine, so every layer call starts on the
    same one: captured calls and eager calls can alternate on a shared buffer.
    """

    output_format = ActivationFormat.BATCHED_EXPERTS

    def __init__(self, config, group):
        super().__init__(config, group)
        if group.max_tokens_per_rank is None:
            raise InvalidConfigError(
                "deepep_low_latency sizes its buffers for a fixed token count: give "
                "ExpertParallelGroup(max_tokens_per_rank=...) (the most tokens one rank passes to one forward)")
        ep, e = config.parallel.ep_size, config.num_experts
        rdma_bytes = deep_ep().Buffer.get_low_latency_rdma_size_hint(group.max_tokens_per_rank, config.hidden_size, ep, e)
        # DeepEP asks for one queue pair per local expert in low-latency mode.
        self.shared = shared_buffer(group.group, True, 0, rdma_bytes, self.local_experts)

    def dispatch(self, hidden_states: torch.Tensor, routing: Routing) -> Dispatched:
        rows = self.tokens_per_rank(hidden_states.shape[0], hidden_states.device)  # raises above max_tokens_per_rank
        ids, weights = deepep_routing(self, routing)
        recv_x, counts, handle, _, _ = self.shared.buffer.low_latency_dispatch(
            hidden_states, ids, rows, self.config.num_experts, use_fp8=False)
        return Dispatched(recv_x, BatchedRouting(counts), None, (ids, weights, handle))

    def combine(self, expert_output: torch.Tensor, dispatched: Dispatched) -> torch.Tensor:
        ids, weights, handle = dispatched.state
        combined, _, _ = self.shared.buffer.low_latency_combine(expert_output.contiguous(), ids, weights, handle)
        return combined


def deepep_routing(dispatcher: Dispatcher, routing: Routing) -> tuple[torch.Tensor, torch.Tensor]:
    """int64 ids (invalid ones counted, then -1) and float32 weights (0 for the invalid), contiguous, as DeepEP takes them."""
    bad = dispatcher.record_invalid(routing.topk_ids)
    ids = torch.where(bad, -1, routing.topk_ids.long()).contiguous()
    weights = torch.where(bad, 0.0, routing.topk_weights.float()).contiguous()
    return ids, weights
