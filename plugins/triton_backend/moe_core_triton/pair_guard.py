"""A forward's routing made safe for compiled ops that index by expert id, in one Triton launch.

Ops such as vLLM's ``moe_align_block_size`` or ``get_cutlass_moe_mm_data`` read an expert id (or an expert-map
entry) for every (token, k) pair without a bounds check. :func:`guard_pairs` gives them each pair's *local*
expert as int32 (the expert map applied where there is one), and ``dropped_id`` for a pair that is on another
rank or invalid (an id outside ``[0, E)``, a map entry outside ``[-1, L)``: the rule of
:func:`moe_core.routing_guard.invalid_pairs`, written once in :func:`moe_core_triton.blocks.local_experts`). The
router weights come out as float32, zero for an invalid pair. Invalid pairs are counted on the device into a
:class:`~moe_core.routing_guard.RoutingErrorCounter` buffer; nothing is read back on the host.
"""

from __future__ import annotations

import functools

import torch
import triton
import triton.language as tl

from moe_core_triton.blocks import cdiv, local_experts, record_invalid
from moe_core_triton.launch import Launcher

#: Pairs per program.
BLOCK = 256


@triton.jit
def _pair_guard_kernel(ids_ptr, map_ptr, w_ptr, err_ptr, ids_out, w_out, pairs, num_experts, num_local, dropped_id,
                       HAS_MAP: tl.constexpr, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    ok = offs < pairs
    expert, bad, offending = local_experts(ids_ptr, map_ptr, offs, ok, num_experts, num_local, HAS_MAP)
    tl.store(ids_out + offs, tl.where(expert >= 0, expert, dropped_id), mask=ok)
    w = tl.load(w_ptr + offs, mask=ok, other=0.0).to(tl.float32)
    tl.store(w_out + offs, tl.where(bad, 0.0, w), mask=ok)
    record_invalid(err_ptr, bad, offending)


@functools.lru_cache(maxsize=4)
def _launcher(has_map: bool) -> Launcher:
    return Launcher(_pair_guard_kernel, num_warps=4, HAS_MAP=has_map, BLOCK=BLOCK)


def guard_pairs(topk_ids: torch.Tensor, topk_weights: torch.Tensor, expert_map: torch.Tensor | None, *, num_experts: int,
                num_local: int, errors: torch.Tensor, dropped_id: int) -> tuple[torch.Tensor, torch.Tensor]:
    """(int32 [T, k] local expert ids, ``dropped_id`` for remote or invalid pairs; float32 [T, k] router weights, 0 for
    invalid pairs). ``expert_map`` may have any integer dtype; ``errors`` is the counter's int64
    [count, smallest, largest] buffer on the device."""
    ids = topk_ids.contiguous()
    local = torch.empty(ids.shape, dtype=torch.int32, device=ids.device)
    weights = torch.empty(ids.shape, dtype=torch.float32, device=ids.device)
    pairs = ids.numel()
    if pairs:
        _launcher(expert_map is not None)(
            (cdiv(pairs, BLOCK),), ids, ids if expert_map is None else expert_map.contiguous(), topk_weights.contiguous(),
            errors, local, weights, pairs, num_experts, num_local, dropped_id)
    return local, weights
