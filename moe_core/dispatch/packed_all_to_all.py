"""``packed_all_to_all``: token rows with their routing, one equal-split ``all_to_all_single`` each way.

The data path is :mod:`moe_core.dispatch.token_rows`: no host sync (with a fixed
``max_tokens_per_rank``), device-side slots, buffers reused, so CUDA graphs capture it. Over
``torch.distributed``, so it runs wherever a collective does (NCCL on GPUs, gloo on CPUs). Each rank
sends ``max_tokens_per_rank`` rows to every rank whatever the routing: set that limit to the batch
the layer runs (a CUDA graph's batch), not far above it.
"""

from __future__ import annotations

import torch
import torch.distributed as dist

from moe_core.dispatch.token_rows import TokenRowsDispatcher


class PackedAllToAllDispatcher(TokenRowsDispatcher):
    """Token rows over ``all_to_all_single`` (STANDARD format, no host sync, CUDA-graph safe)."""

    def allocate_received(self, shape, dtype, device):
        return torch.zeros(shape, dtype=dtype, device=device)

    def send_rows(self, send: torch.Tensor, recv: torch.Tensor) -> None:
        dist.all_to_all_single(recv, send, group=self.group.group)
