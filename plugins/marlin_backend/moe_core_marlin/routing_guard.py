"""Marlin's routing guard: one Triton launch that makes a forward's routing safe for the compiled ops and counts
what it drops (the contract of ``MoEKernel.guards_routing``, :mod:`moe_core.routing_guard`).

``moe_align_block_size`` reads ``expert_map[id]`` for every pair without a bounds check and skips pairs whose
entry is -1 (and, in one of its two kernels, ids at or past ``num_experts``). So the align is given local
expert ids and the :func:`local_map` of the L local experts, and the guard writes, in one kernel:

* each pair's local expert as int32 (moe-core-triton's ``local_experts``: the expert map applied where there
  is one), and L for a pair on another rank or an invalid one (an id outside ``[0, E)``, a map entry outside
  ``[-1, L)``): entry L of the local map is -1, so the align leaves exactly those pairs out;
* the router weights as float32 (what the GEMMs read);

and counts the invalid pairs into the kernel's :class:`~moe_core.routing_guard.RoutingErrorCounter` buffer with
atomics (moe-core-triton's ``record_invalid``). Nothing is read back on the host; the caller's expert map is
read only here, in whatever integer dtype it has.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
import triton
import triton.language as tl

from moe_core_triton.blocks import local_experts, record_invalid

BLOCK = 512


@dataclass(frozen=True)
class GuardedRouting:
    """A forward's routing as the compiled ops take it (see the module docstring)."""

    #: int32 [T, k]: each pair's local expert; L (the number of local experts) where it is dropped.
    ids: torch.Tensor
    #: float32 [T, k]: the router weights.
    weights: torch.Tensor


def local_map(num_local: int, device: torch.device) -> torch.Tensor:
    """int32 [L + 1]: the identity on the L local experts, and -1 at L (the id of every dropped pair)."""
    ids = torch.arange(num_local + 1, dtype=torch.int32, device=device)
    return ids.masked_fill_(ids == num_local, -1)


def guard(topk_ids: torch.Tensor, topk_weights: torch.Tensor, expert_map: torch.Tensor | None, *, num_experts: int,
          num_local: int, errors: torch.Tensor) -> GuardedRouting:
    """One launch: the :class:`GuardedRouting` of these inputs; invalid pairs counted into ``errors`` (int64
    ``[count, smallest, largest]``, a :meth:`~moe_core.routing_guard.RoutingErrorCounter.buffer`)."""
    ids = topk_ids.contiguous()
    out = GuardedRouting(torch.empty(ids.shape, dtype=torch.int32, device=ids.device),
                         torch.empty(ids.shape, dtype=torch.float32, device=ids.device))
    pairs = ids.numel()
    _guard_kernel[(triton.cdiv(pairs, BLOCK),)](
        ids, topk_weights.contiguous(), ids if expert_map is None else expert_map.contiguous(), out.ids, out.weights, errors,
        pairs, num_experts, num_local, HAS_MAP=expert_map is not None, BLOCK=BLOCK,
    )
    return out


@triton.jit
def _guard_kernel(ids_ptr, weights_ptr, map_ptr, ids_out, weights_out, errors_ptr, pairs, num_experts, num_local,
                  HAS_MAP: tl.constexpr, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    live = offs < pairs
    expert, bad, offending = local_experts(ids_ptr, map_ptr, offs, live, num_experts, num_local, HAS_MAP)
    tl.store(ids_out + offs, tl.where(expert >= 0, expert, num_local), mask=live)
    tl.store(weights_out + offs, tl.load(weights_ptr + offs, mask=live, other=0.0).to(tl.float32), mask=live)
    record_invalid(errors_ptr, bad, offending)
