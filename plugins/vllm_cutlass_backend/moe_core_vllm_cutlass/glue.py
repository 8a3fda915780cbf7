"""The fused MoE around vLLM's CUTLASS grouped fp8 GEMM, STANDARD and BATCHED_EXPERTS formats.

``ops`` is ``torch.ops._C`` of the loaded library (``moe_core_vllm_cutlass.library.LIBRARY.ops_namespace()``);
the calls follow the recorded schemas of :mod:`moe_core_vllm_cutlass.contract` positionally.

Steps: quantize the layer input with the scheme's activation scales (moe-core's quantizer; router
weights first when they apply to the input); ``get_cutlass_moe_mm_data`` sorts the (token, k) pairs by
local expert (pairs of experts on other ranks carry id -1 and are left out); gather the rows (and their
per-token scales); GEMM1 [T*k, H] -> [T*k, 2I]; act(gate) * up (SwiGLU clamp when declared);
requantize; GEMM2 -> [T*k, H]; scatter back to (token, k) order, router weights, sum over k in float32.
The batched format (:func:`batched_moe`) needs no sorting: ``get_cutlass_batched_moe_mm_data`` gives
expert e the rows [e * M, e * M + expert_num_tokens[e]) of the flattened [E * M, H] batch.
Nothing reads a device value on the host, so the whole forward can be captured in a CUDA graph.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch

from moe_core.config import Activation
from moe_core.quant import PER_ROW, QuantKey
from moe_core.quantization.qtensor import quantize
from moe_core.reference.compute import gated_activation


@dataclass(frozen=True)
class CutlassProblem:
    """What the two GEMMs need besides the tensors: the activation key, the layer's activation and output dtype."""

    activation_key: QuantKey
    activation: Activation
    swiglu_limit: float | None
    out_dtype: torch.dtype

    @property
    def per_act_token(self) -> bool:
        """One activation scale per row (the GEMM reads ``a_scales`` at the row's offset), else one per tensor."""
        return self.activation_key.group == PER_ROW


@dataclass(frozen=True)
class SortedPairs:
    """``get_cutlass_moe_mm_data``'s answer: where each local expert's rows start and how the rows move."""

    expert_offsets: torch.Tensor  # int64 [E_local]: the GEMM's per-expert row offsets
    problem_sizes1: torch.Tensor  # int32 [E_local, 3]
    problem_sizes2: torch.Tensor  # int32 [E_local, 3]
    input_permutation: torch.Tensor  # int64 [T*k]: sorted row -> token (rows past the valid pairs: token 0)
    output_permutation: torch.Tensor  # int64 [T*k]: (token, k) pair -> sorted row


def local_ids(topk_ids: torch.Tensor, expert_map: torch.Tensor | None) -> torch.Tensor:
    """int32 [T, k] expert ids on this rank; -1 for pairs whose expert lives on another rank."""
    ids = topk_ids.to(torch.int32)
    return ids if expert_map is None else expert_map.to(torch.int32)[ids.long()].contiguous()


def sort_pairs(ops, ids: torch.Tensor, local_experts: int, inter: int, hidden: int) -> SortedPairs:
    """Run ``get_cutlass_moe_mm_data`` (gated GEMM1, no fp4 block-scale offsets).

    The input permutation starts zeroed: rows past the valid pairs are never written by the op and are
    gathered from token 0 (the GEMMs never read them), so no index is out of range.
    """
    pairs, device = ids.numel(), ids.device
    offsets = torch.empty(local_experts + 1, dtype=torch.int32, device=device)
    sizes1 = torch.empty((local_experts, 3), dtype=torch.int32, device=device)
    sizes2 = torch.empty((local_experts, 3), dtype=torch.int32, device=device)
    a_map = torch.zeros(pairs, dtype=torch.int32, device=device)
    c_map = torch.empty(pairs, dtype=torch.int32, device=device)
    ops.get_cutlass_moe_mm_data(ids, offsets, sizes1, sizes2, a_map, c_map, local_experts, inter, hidden, None, True)
    return SortedPairs(offsets[:-1].to(torch.int64), sizes1, sizes2, a_map.long(), c_map.long())


def strides(local_experts: int, value: int, device) -> torch.Tensor:
    """int64 [E_local] of one row stride (every expert's A, B or C has the same leading dimension)."""
    return torch.full((local_experts,), value, dtype=torch.int64, device=device)


def weight_scales(scale: torch.Tensor) -> torch.Tensor:
    """moe-core's [E, 1, 1] (per tensor) or [E, N, 1] (per channel) scales as the GEMM's float32 [E] or [E, N]."""
    flat = scale.reshape(scale.shape[0], -1).float()
    return (flat[:, 0] if flat.shape[1] == 1 else flat).contiguous()


def grouped_gemm(ops, a, a_scale, w, w_scale, out, expert_offsets, sizes, problem: CutlassProblem):
    """One ``cutlass_moe_mm`` into ``out``, arguments in the schema's order (``expert_offsets`` int64 [E])."""
    local, n, k = w.shape
    b_scales = weight_scales(w_scale)
    ops.cutlass_moe_mm(out, a, w, a_scale.float().contiguous(), b_scales, expert_offsets, sizes,
                       strides(local, k, a.device), strides(local, k, a.device), strides(local, n, a.device),
                       problem.per_act_token, b_scales.dim() == 2)
    return out


def fused_moe(ops, x: torch.Tensor, weights, topk_ids: torch.Tensor, topk_weights: torch.Tensor, *, problem: CutlassProblem,
              expert_map: torch.Tensor | None, apply_router_weight_on_input: bool) -> torch.Tensor:
    """The layer on fp8 ``weights`` (w13 [E, 2I, H] gate first, w2 [E, H, I], as moe-core holds them)."""
    tokens, hidden = x.shape
    if tokens == 0:  # nothing to sort or multiply: no op is called
        return torch.zeros_like(x)
    local, inter = weights.w13.shape[0], weights.w2.shape[2]
    router = topk_weights.float()
    source = x.float() * router if apply_router_weight_on_input else x  # top_k == 1 there: [T, 1] broadcasts
    xq = quantize(source, problem.activation_key, weights.a13_scale)
    pairs = sort_pairs(ops, local_ids(topk_ids, expert_map), local, inter, hidden)
    a1 = xq.data[pairs.input_permutation]
    a1_scale = xq.scale[pairs.input_permutation] if problem.per_act_token else xq.scale
    c2 = both_gemms(ops, a1, a1_scale, weights, pairs.expert_offsets, pairs.problem_sizes1, pairs.problem_sizes2, problem)
    y = c2[pairs.output_permutation].view(tokens, -1, hidden).float()
    if not apply_router_weight_on_input:
        y = y * router.unsqueeze(-1)
    return y.sum(dim=1).to(x.dtype)


def both_gemms(ops, a1, a1_scale, weights, expert_offsets, sizes1, sizes2, problem: CutlassProblem) -> torch.Tensor:
    """GEMM1, act(gate) * up, requantization, GEMM2 on rows grouped by expert: [rows, H] in the output dtype.

    Both outputs start zeroed: rows no expert owns (past the valid pairs, or padding) stay zero, so a
    per-tensor dynamic scale of the intermediate sees only valid rows, and such a row reads back as zero.
    """
    rows, inter, hidden = a1.shape[0], weights.w2.shape[2], weights.w2.shape[1]
    c1 = torch.zeros((rows, 2 * inter), dtype=problem.out_dtype, device=a1.device)
    grouped_gemm(ops, a1, a1_scale, weights.w13, weights.w13_scale, c1, expert_offsets, sizes1, problem)
    act = gated_activation(c1.float(), problem.activation, problem.swiglu_limit)
    aq = quantize(act, problem.activation_key, weights.a2_scale)
    c2 = torch.zeros((rows, hidden), dtype=problem.out_dtype, device=a1.device)
    return grouped_gemm(ops, aq.data, aq.scale, weights.w2, weights.w2_scale, c2, expert_offsets, sizes2, problem)


def batched_moe(ops, x: torch.Tensor, weights, expert_num_tokens: torch.Tensor, *, problem: CutlassProblem) -> torch.Tensor:
    """The BATCHED_EXPERTS layer: x [E, M, H], the first ``expert_num_tokens[e]`` rows of expert e valid; [E, M, H] out.

    Padding rows are zeroed before quantization, so a per-tensor dynamic scale is taken over the valid
    rows only, as the reference takes it; their outputs are zero. Router weights are not applied here.
    """
    local, m, hidden = x.shape
    if local * m == 0:
        return torch.zeros_like(x)
    inter = weights.w2.shape[2]
    counts = expert_num_tokens.to(torch.int32).contiguous()
    valid = torch.arange(m, device=x.device).unsqueeze(0) < counts.unsqueeze(1)
    rows = torch.where(valid.unsqueeze(-1), x, torch.zeros((), dtype=x.dtype, device=x.device)).reshape(local * m, hidden)
    xq = quantize(rows, problem.activation_key, weights.a13_scale)
    offsets = torch.empty(local, dtype=torch.int32, device=x.device)
    sizes1 = torch.empty((local, 3), dtype=torch.int32, device=x.device)
    sizes2 = torch.empty((local, 3), dtype=torch.int32, device=x.device)
    ops.get_cutlass_batched_moe_mm_data(offsets, sizes1, sizes2, counts, local, m, inter, hidden)
    out = both_gemms(ops, xq.data, xq.scale, weights, offsets.to(torch.int64), sizes1, sizes2, problem)
    return out.view(local, m, hidden).to(x.dtype)
