"""``peer_copy``: token rows copied straight into the peers' receive buffers over NVLink.

The data path is :mod:`moe_core.dispatch.token_rows`; the transport is PyTorch's symmetric memory
(``torch.distributed._symmetric_memory``): every rank's receive buffers are mapped into every other
rank's address space, so sending is one device-to-device copy per rank into the peer's buffer and a
device-side barrier — no collective through ``torch.distributed``, no host sync, a few launches, and
CUDA graphs capture it. Two barriers per forward suffice: a rank writes into a peer's buffers only
after a barrier that the peer reaches after it has read them in the previous forward.

Multicast is never used (only copies and the barrier): ``TORCH_SYMM_MEM_DISABLE_MULTICAST`` defaults
to 1 before the first buffer is made. CUDA only, one process per GPU, peers reachable by P2P (NVLink
or PCIe); the first forward allocates and exchanges the buffers (a host synchronisation), so it must
run eagerly before a CUDA graph captures the layer.
"""

from __future__ import annotations

import os

import torch
import torch.distributed as dist

from moe_core.dispatch.token_rows import TokenRowsDispatcher
from moe_core.errors import MoECoreError


class TransportUnavailableError(MoECoreError, RuntimeError):
    """The dispatcher's transport cannot run here; the message names a dispatcher that can."""


class PeerCopyDispatcher(TokenRowsDispatcher):
    """Token rows by copies into the peers' symmetric memory (STANDARD format, CUDA only, CUDA-graph safe)."""

    def __init__(self, config, group):
        super().__init__(config, group)
        self._peers: dict[int, tuple] = {}  # data_ptr of a receive buffer -> (its handle, every rank's view of it)
        # Eager forwards run their steps as ops: the transport makes no collective call to save, and on two H200s
        # (torch 2.11) eager forwards replaying the steps' own graphs, barrier included, never finished.
        self.graph_steps = False

    def allocate_received(self, shape, dtype, device):
        if device.type != "cuda":
            raise TransportUnavailableError(f"peer_copy moves CUDA tensors only, got {device}: use dispatch_backend='packed_all_to_all'")
        if torch.cuda.is_current_stream_capturing():
            raise TransportUnavailableError("peer_copy allocates its buffers on the first forward: run the layer once eagerly before capture")
        os.environ.setdefault("TORCH_SYMM_MEM_DISABLE_MULTICAST", "1")
        try:
            import torch.distributed._symmetric_memory as symm_mem

            name = (self.group.group or dist.group.WORLD).group_name
            if hasattr(symm_mem, "enable_symm_mem_for_group"):
                symm_mem.enable_symm_mem_for_group(name)
            buffer = symm_mem.empty(shape, dtype=dtype, device=device)
            buffer.zero_()
            torch.cuda.synchronize(device)  # zeroed on every rank before any peer can write into it
            handle = symm_mem.rendezvous(buffer, name)
            views = [handle.get_buffer(peer, tuple(shape), dtype) for peer in range(self.config.parallel.ep_size)]
        except (ImportError, RuntimeError, AttributeError, TypeError) as exc:
            raise TransportUnavailableError(
                f"peer_copy could not set up symmetric memory ({type(exc).__name__}: {exc}); "
                "use dispatch_backend='packed_all_to_all'") from exc
        self._peers[buffer.data_ptr()] = (handle, views)
        return buffer

    def _make_buffers(self, device, rows):
        live = {b.data_ptr() for bufs in self._buffers.values() for b in (bufs.recv, bufs.back)}
        self._peers = {ptr: peers for ptr, peers in self._peers.items() if ptr in live}  # the peers of dropped sets go
        return super()._make_buffers(device, rows)

    def send_rows(self, send: torch.Tensor, recv: torch.Tensor) -> None:
        handle, views = self._peers[recv.data_ptr()]
        ep, rank = self.config.parallel.ep_size, self.rank
        rows = send.shape[0] // ep
        for step in range(ep):  # start with the next rank, so that ranks do not all write to one peer at once
            peer = (rank + step) % ep
            views[peer][rank * rows: (rank + 1) * rows].copy_(send[peer * rows: (peer + 1) * rows])
        handle.barrier()
