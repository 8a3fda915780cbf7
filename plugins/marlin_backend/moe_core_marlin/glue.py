"""The fused MoE around Marlin's GEMM: routing guard, align, GEMM1, gated activation, GEMM2 with router weights, top-k sum.

``ops`` is ``torch.ops._moe_C`` of the loaded library (``moe_core_marlin.library.LIBRARY.ops_namespace()``); the calls
follow the recorded schemas of :mod:`moe_core_marlin.contract` positionally, in their order.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch

from moe_core.config import Activation
from moe_core.reference.compute import gated_activation
from moe_core_marlin.contract import BLOCK_FILL, BLOCK_SIZES_M, WORKSPACE_BLOCKS_PER_SM
from moe_core_marlin.routing_guard import GuardedRouting, guard, local_map


@dataclass(frozen=True)
class MarlinProblem:
    """What the two GEMMs need besides the tensors: the codes' scalar-type id and the layer's activation."""

    b_type_id: int
    global_num_experts: int
    activation: Activation
    swiglu_limit: float | None


def block_size_m(tokens: int, top_k: int, local_experts: int, global_experts: int) -> int:
    """The smallest row block whose average fill per local expert stays below :data:`BLOCK_FILL`, else the largest."""
    rows_per_expert = -(-tokens * local_experts // global_experts) * top_k / local_experts
    return next((size for size in BLOCK_SIZES_M if rows_per_expert / size < BLOCK_FILL), BLOCK_SIZES_M[-1])


def align(ops, routing: GuardedRouting, block: int, num_local: int, local_map: torch.Tensor):
    """(sorted_token_ids, expert_ids, num_tokens_post_pad): the (token, k) pairs, sorted by local expert into blocks;
    the pairs the guard dropped (id L, -1 in ``local_map``) are left out."""
    pairs = routing.ids.numel()
    padded = pairs + num_local * (block - 1)
    if pairs < num_local:
        padded = min(pairs * block, padded)
    device = routing.ids.device
    sorted_ids = torch.empty(padded, dtype=torch.int32, device=device)
    expert_ids = torch.empty(-(-padded // block), dtype=torch.int32, device=device)
    post_pad = torch.empty(1, dtype=torch.int32, device=device)
    ops.moe_align_block_size(routing.ids, num_local, block, sorted_ids, expert_ids, post_pad, local_map)
    return sorted_ids, expert_ids, post_pad


@dataclass(frozen=True)
class DeviceScratch:
    """What a kernel keeps on a device between forwards: Marlin's locks and the align's local map."""

    workspace: torch.Tensor
    local_map: torch.Tensor


def device_scratch(device: torch.device, num_local: int) -> DeviceScratch:
    """A :class:`DeviceScratch` for ``num_local`` local experts on ``device``."""
    return DeviceScratch(workspace(device), local_map(num_local, device))


def workspace(device: torch.device) -> torch.Tensor:
    """Zeroed int32 locks, :data:`WORKSPACE_BLOCKS_PER_SM` per SM of ``device``. Marlin leaves every lock at 0 when
    a GEMM ends, so one workspace serves every later GEMM on the same stream (vLLM keeps one per layer too)."""
    sms = torch.cuda.get_device_properties(device).multi_processor_count if device.type == "cuda" else 1
    return torch.zeros(sms * WORKSPACE_BLOCKS_PER_SM, dtype=torch.int32, device=device)


def gemm(ops, a, c, w, scales, global_scale, zeros, sorted_ids, expert_ids, post_pad, topk_weights, *, block, top_k, mul_weights,
         problem: MarlinProblem, size_m, size_n, size_k, scratch):
    """One ``moe_wna16_marlin_gemm``, arguments in the schema's order: no bias, no activation scales, the
    global scale (nvfp4 only), no act-order g_idx or perm; full K; no atomic adds; fp32 reduction;
    integer zero points; the kernel's own thread tile and blocks per SM (-1)."""
    return ops.moe_wna16_marlin_gemm(
        a, c, w, None, scales, None, global_scale, zeros, None, None, scratch, sorted_ids, expert_ids, post_pad, topk_weights,
        block, top_k, mul_weights, problem.b_type_id, size_m, size_n, size_k, True, False, True, False, -1, -1, -1,
    )


def fused_moe(ops, x: torch.Tensor, weights, topk_ids: torch.Tensor, topk_weights: torch.Tensor, *, problem: MarlinProblem,
              expert_map: torch.Tensor | None, apply_router_weight_on_input: bool, scratch: DeviceScratch,
              errors: torch.Tensor) -> torch.Tensor:
    """The layer on Marlin-packed ``weights`` (w13 [E, H/16, 2I * bits/2], w2 [E, I/16, H * bits/2]); ``scratch`` is
    ``x``'s device's :func:`device_scratch`; invalid routing values are dropped and counted into ``errors`` (a
    :class:`~moe_core.routing_guard.RoutingErrorCounter` buffer) by :func:`moe_core_marlin.routing_guard.guard`.

    Launches: the guard, the align, the two GEMMs, the activation (two ops; four with the SwiGLU clamp), the zero
    fill of GEMM2's output (rows of dropped and remote pairs are never written) and the sum over top-k (none for
    top_k 1).
    """
    tokens, hidden = x.shape
    if tokens == 0:  # nothing to sort or multiply: no op is called
        return torch.zeros_like(x)
    top_k = topk_ids.shape[1]
    local = weights.w13.shape[0]
    inter = weights.w2.shape[1] * 16
    routing = guard(topk_ids, topk_weights, expert_map, num_experts=problem.global_num_experts, num_local=local, errors=errors)
    block = block_size_m(tokens, top_k, local, problem.global_num_experts)
    sorted_ids, expert_ids, post_pad = align(ops, routing, block, local, scratch.local_map)
    h = torch.empty((tokens * top_k, 2 * inter), dtype=x.dtype, device=x.device)
    h = gemm(ops, x.contiguous(), h, weights.w13, weights.w13_scale, weights.w13_global_scale, weights.w13_zero, sorted_ids, expert_ids, post_pad,
             routing.weights, block=block, top_k=top_k, mul_weights=apply_router_weight_on_input, problem=problem,
             size_m=tokens, size_n=2 * inter, size_k=hidden, scratch=scratch.workspace)
    act = gated_activation(h, problem.activation, problem.swiglu_limit)
    y = torch.zeros((tokens * top_k, hidden), dtype=x.dtype, device=x.device)
    y = gemm(ops, act, y, weights.w2, weights.w2_scale, weights.w2_global_scale, weights.w2_zero, sorted_ids, expert_ids, post_pad,
             routing.weights, block=block, top_k=1, mul_weights=not apply_router_weight_on_input, problem=problem,
             size_m=tokens * top_k, size_n=hidden, size_k=inter, scratch=scratch.workspace)
    if top_k == 1:
        return y
    return y.view(tokens, top_k, hidden).sum(dim=1)  # accumulates in float32, rounds once to x's dtype
