"""The pairs' local experts in one Triton launch, invalid routing dropped and counted on the device.

``get_cutlass_moe_mm_data`` takes int32 local expert ids and leaves out pairs of id -1 (experts on
other ranks). :func:`route` gives it exactly that: each pair's local expert (through the expert map when
there is one), with an id outside ``[0, num_experts)`` or a map entry outside ``[-1, local experts)``
turned into -1 as well, so that no op indexes out of range, and counted in the kernel's
:class:`~moe_core.routing_guard.RoutingErrorCounter` (the rule and the counting are moe_core_triton's
``local_experts`` and ``record_invalid``). The router weights come out as float32, zero for a dropped
pair, as :func:`moe_core.routing_guard.drop_invalid_routing` leaves them.
"""

from __future__ import annotations

import functools

import torch
import triton
import triton.language as tl

from moe_core_triton.blocks import cdiv, local_experts, record_invalid
from moe_core_triton.launch import Launcher

#: Pairs per program.
ROUTE_BLOCK = 256


@triton.jit
def _route_kernel(ids_ptr, map_ptr, w_ptr, err_ptr, local_ptr, w_out_ptr, pairs, num_experts, num_local,
                  HAS_MAP: tl.constexpr, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    ok = offs < pairs
    expert, bad, offending = local_experts(ids_ptr, map_ptr, offs, ok, num_experts, num_local, HAS_MAP)
    tl.store(local_ptr + offs, expert, mask=ok)
    w = tl.load(w_ptr + offs, mask=ok, other=0.0).to(tl.float32)
    tl.store(w_out_ptr + offs, tl.where(bad, 0.0, w), mask=ok)
    record_invalid(err_ptr, bad, offending)


@functools.lru_cache(maxsize=4)
def _launcher(has_map: bool) -> Launcher:
    return Launcher(_route_kernel, num_warps=4, HAS_MAP=has_map, BLOCK=ROUTE_BLOCK)


def route(topk_ids: torch.Tensor, topk_weights: torch.Tensor, expert_map: torch.Tensor | None, num_experts: int, num_local: int,
          errors: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """(int32 [T, k] local expert ids, -1 for remote or invalid pairs; float32 [T, k] router weights, 0 for invalid
    pairs). ``errors`` is the counter's int64 [count, smallest, largest] buffer on the device."""
    ids = topk_ids.contiguous()
    weights = topk_weights.contiguous()
    local = torch.empty(ids.shape, dtype=torch.int32, device=ids.device)
    w_out = torch.empty(ids.shape, dtype=torch.float32, device=ids.device)
    pairs = ids.numel()
    if pairs:
        _launcher(expert_map is not None)(
            (cdiv(pairs, ROUTE_BLOCK),), ids, expert_map.contiguous() if expert_map is not None else ids, weights, errors, local, w_out,
            pairs, num_experts, num_local)
    return local, w_out
