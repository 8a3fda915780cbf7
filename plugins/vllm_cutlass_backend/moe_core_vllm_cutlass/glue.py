"""The fused MoE around vLLM's CUTLASS grouped fp8 GEMM, STANDARD and BATCHED_EXPERTS formats.

``ops`` is ``torch.ops._C`` of the loaded library (``moe_core_vllm_cutlass.library.LIBRARY.ops_namespace()``);
the calls follow the recorded schemas of :mod:`moe_core_vllm_cutlass.contract` positionally. What depends
only on the weights and the layer (the GEMMs' float32 weight scales, the stride tensors, the static
activation scales) is built once, in a :class:`CutlassLayer`; a forward makes only the launches below.

Steps (the standard format takes the pairs' int32 local ids from :func:`moe_core_triton.pair_guard.guard_pairs`:
-1 for experts on other ranks and for invalid routing): quantize the layer input with the scheme's
activation scales (one Triton launch, :func:`moe_core_triton.quantize.quantize_activations`; router
weights first when they apply to the input); ``get_cutlass_moe_mm_data`` sorts the (token, k) pairs by
local expert (pairs of id -1 are left out); gather the rows (and their per-token scales) with its int32
input permutation; GEMM1 [T*k, H] -> [T*k, 2I]; act(gate) * up (SwiGLU clamp when declared) and requantization in
one launch (:mod:`moe_core_vllm_cutlass.rows`); GEMM2 -> [T*k, H]; one launch gathers each token's rows with
the output permutation, applies the router weights and sums over k in float32.
The batched format (:func:`batched_moe`) needs no sorting: ``get_cutlass_batched_moe_mm_data`` gives
expert e the rows [e * M, e * M + expert_num_tokens[e]) of the flattened [E * M, H] batch.
Nothing reads a device value on the host, so the whole forward can be captured in a CUDA graph.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch

from moe_core.config import Activation
from moe_core.quant import PER_ROW, QuantKey
from moe_core.quantization.qtensor import FP8_MAX
from moe_core_triton.quantize import quantize_activations
from moe_core_vllm_cutlass.rows import Ending, combine, gated_quantize

#: The floor of an amax in moe-core's dynamic scale rule, max(amax, TINY) / 448 (:mod:`moe_core.quantization.qtensor`).
TINY = 1e-12


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

    @property
    def tensor_amax(self) -> bool:
        """A dynamic per-tensor activation scale: it is the amax of every row, so rows no pair owns must read zero."""
        return not self.per_act_token and not self.activation_key.static

    @property
    def intermediate_ending(self) -> Ending:
        """How the gated activation's launch ends: codes with per-row or the static scale, or float32 for a tensor amax."""
        if self.per_act_token:
            return Ending.PER_ROW_CODES
        return Ending.FLOAT32 if self.tensor_amax else Ending.GIVEN_SCALE_CODES


@dataclass(frozen=True)
class GemmOperand:
    """One projection as ``cutlass_moe_mm`` takes it, built once per layer.

    ``scales`` is a view of the layer's scales where they are float32 already (so an in-place weight
    update is seen); the stride tensors are every expert's leading dimension (all experts have the same).
    """

    weight: torch.Tensor  # fp8 [E, N, K], row-major per expert: the GEMM's B
    scales: torch.Tensor  # float32 [E] (per tensor) or [E, N] (per channel)
    ab_strides: torch.Tensor  # int64 [E] of K: A's and B's row stride
    c_strides: torch.Tensor  # int64 [E] of N: the output's row stride
    activation_scale: torch.Tensor | None  # float32 [1, 1]: the static per-tensor scale of this GEMM's input

    @classmethod
    def of(cls, weight: torch.Tensor, scale: torch.Tensor, activation_scale: torch.Tensor | None) -> "GemmOperand":
        """From moe-core's fp8 codes, [E, 1, 1] or [E, N, 1] scales and optional [1, 1] activation scale."""
        local, n, k = weight.shape
        flat = scale.reshape(local, -1).float()
        scales = (flat[:, 0] if flat.shape[1] == 1 else flat).contiguous()
        static = None if activation_scale is None else activation_scale.float().reshape(1, 1).contiguous()
        return cls(weight, scales, strides(local, k, weight.device), strides(local, n, weight.device), static)

    @property
    def per_out_ch(self) -> bool:
        """One weight scale per output channel (``b_scales`` [E, N]), else one per expert."""
        return self.scales.dim() == 2


@dataclass(frozen=True)
class CutlassLayer:
    """Everything a forward needs that depends only on the weights and the layer: built once, by :func:`cutlass_layer`."""

    problem: CutlassProblem
    gemm1: GemmOperand  # w13 [E, 2I, H]
    gemm2: GemmOperand  # w2 [E, H, I]

    @property
    def local_experts(self) -> int:
        return self.gemm2.weight.shape[0]

    @property
    def hidden(self) -> int:
        return self.gemm2.weight.shape[1]

    @property
    def inter(self) -> int:
        return self.gemm2.weight.shape[2]


def cutlass_layer(weights, problem: CutlassProblem) -> CutlassLayer:
    """The layer on fp8 ``weights`` (w13 [E, 2I, H] gate first, w2 [E, H, I], as moe-core holds them)."""
    return CutlassLayer(problem, GemmOperand.of(weights.w13, weights.w13_scale, weights.a13_scale),
                        GemmOperand.of(weights.w2, weights.w2_scale, weights.a2_scale))


@dataclass(frozen=True)
class SortedPairs:
    """``get_cutlass_moe_mm_data``'s answer: where each local expert's rows start and how the rows move."""

    expert_offsets: torch.Tensor  # int64 [E_local]: the GEMM's per-expert row offsets
    row_ends: torch.Tensor  # int32 [E_local + 1]: prefix sums of the pair counts; the last, how many rows the GEMMs write
    problem_sizes1: torch.Tensor  # int32 [E_local, 3]
    problem_sizes2: torch.Tensor  # int32 [E_local, 3]
    input_permutation: torch.Tensor  # int32 [T*k]: sorted row -> token (rows past the valid pairs: token 0)
    output_permutation: torch.Tensor  # int32 [T*k]: (token, k) pair -> sorted row


def sort_pairs(ops, ids: torch.Tensor, layer: CutlassLayer) -> SortedPairs:
    """Run ``get_cutlass_moe_mm_data`` on int32 local ids (gated GEMM1, no fp4 block-scale offsets).

    The input permutation starts zeroed: where pairs are left out (id -1), the rows past the valid pairs
    are never written by the op and are gathered from token 0 (the GEMMs never read them), so no index is
    out of range. Whether any pair is left out is known on the device only.
    """
    pairs, device, local = ids.numel(), ids.device, layer.local_experts
    offsets = torch.empty(local + 1, dtype=torch.int32, device=device)
    sizes1 = torch.empty((local, 3), dtype=torch.int32, device=device)
    sizes2 = torch.empty((local, 3), dtype=torch.int32, device=device)
    a_map = torch.zeros(pairs, dtype=torch.int32, device=device)
    c_map = torch.empty(pairs, dtype=torch.int32, device=device)
    ops.get_cutlass_moe_mm_data(ids, offsets, sizes1, sizes2, a_map, c_map, local, layer.inter, layer.hidden, None, True)
    return SortedPairs(offsets[:-1].to(torch.int64), offsets, sizes1, sizes2, a_map, c_map)


def strides(local_experts: int, value: int, device) -> torch.Tensor:
    """int64 [E_local] of one row stride (every expert's A, B or C has the same leading dimension)."""
    return torch.full((local_experts,), value, dtype=torch.int64, device=device)


def grouped_gemm(ops, a, a_scale, operand: GemmOperand, out, expert_offsets, sizes, per_act_token: bool):
    """One ``cutlass_moe_mm`` into ``out``, arguments in the schema's order (``expert_offsets`` int64 [E])."""
    ops.cutlass_moe_mm(out, a, operand.weight, a_scale, operand.scales, expert_offsets, sizes,
                       operand.ab_strides, operand.ab_strides, operand.c_strides, per_act_token, operand.per_out_ch)
    return out


def fused_moe(ops, x: torch.Tensor, layer: CutlassLayer, ids: torch.Tensor, router: torch.Tensor, *,
              apply_router_weight_on_input: bool) -> torch.Tensor:
    """The STANDARD layer: x [T, H], ``ids`` int32 [T, k] local experts (-1: not here), ``router`` float32 [T, k]
    (see :func:`moe_core_triton.pair_guard.guard_pairs`); [T, H] out."""
    if x.shape[0] == 0:  # nothing to sort or multiply: no op is called
        return torch.zeros_like(x)
    problem = layer.problem
    source = x.float() * router if apply_router_weight_on_input else x  # top_k == 1 there: [T, 1] broadcasts
    xq, x_scale = quantize_activations(source, problem.activation_key, layer.gemm1.activation_scale)
    pairs = sort_pairs(ops, ids, layer)
    a1 = xq.view(torch.uint8).index_select(0, pairs.input_permutation).view(xq.dtype)  # gathered as bytes
    a1_scale = x_scale.index_select(0, pairs.input_permutation) if problem.per_act_token else x_scale
    c2 = both_gemms(ops, a1, a1_scale, layer, pairs.expert_offsets, pairs.problem_sizes1, pairs.problem_sizes2,
                    row_ends=pairs.row_ends)
    return combine(c2, pairs.output_permutation, ids, None if apply_router_weight_on_input else router, x.dtype)


def both_gemms(ops, a1, a1_scale, layer: CutlassLayer, expert_offsets, sizes1, sizes2, *,
               row_ends: torch.Tensor | None = None, zeroed: bool = False) -> torch.Tensor:
    """GEMM1, act(gate) * up with requantization, GEMM2 on rows grouped by expert: [rows, H] in the output dtype.

    Rows no expert owns (past the valid pairs, or padding) are never written by the GEMMs. Either
    ``row_ends`` (the standard format: they are the rows at and past its last value) makes the activation
    read them as zeros, so that a dynamic per-tensor scale of the intermediate sees valid rows only, and
    the caller never reads them; or, ``zeroed`` (the batched format), both outputs start zeroed, so they
    read back as zero.
    """
    problem, rows = layer.problem, a1.shape[0]
    zero1 = zeroed and problem.tensor_amax
    c1 = (torch.zeros if zero1 else torch.empty)((rows, 2 * layer.inter), dtype=problem.out_dtype, device=a1.device)
    grouped_gemm(ops, a1, a1_scale, layer.gemm1, c1, expert_offsets, sizes1, problem.per_act_token)
    aq, a2_scale = intermediate_codes(c1, layer, row_ends)
    c2 = (torch.zeros if zeroed else torch.empty)((rows, layer.hidden), dtype=problem.out_dtype, device=a1.device)
    return grouped_gemm(ops, aq, a2_scale, layer.gemm2, c2, expert_offsets, sizes2, problem.per_act_token)


def intermediate_codes(c1: torch.Tensor, layer: CutlassLayer, row_ends: torch.Tensor | None) -> tuple[torch.Tensor, torch.Tensor]:
    """GEMM2's input: fp8 codes of act(gate) * up and their float32 scales (per row, or [1, 1])."""
    problem = layer.problem
    ending = problem.intermediate_ending
    act, scale = gated_quantize(c1, problem.activation, problem.swiglu_limit, ending, layer.gemm2.activation_scale, row_ends)
    if ending is Ending.FLOAT32:  # ``scale`` holds the row amaxes: the tensor's scale, then the static-scale launch
        return quantize_activations(act, problem.activation_key, (scale.amax().clamp(min=TINY) / FP8_MAX).reshape(1, 1))
    return act, scale


def batched_moe(ops, x: torch.Tensor, layer: CutlassLayer, expert_num_tokens: torch.Tensor) -> torch.Tensor:
    """The BATCHED_EXPERTS layer: x [E, M, H], the first ``expert_num_tokens[e]`` rows of expert e valid; [E, M, H] out.

    For a dynamic per-tensor scale the padding rows are zeroed before quantization, so the scale is taken
    over the valid rows only, as the reference takes it; other keys quantize each row on its own and the
    GEMMs never read padding rows. Their outputs are zero. Router weights are not applied here.
    """
    local, m, hidden = x.shape
    if local * m == 0:
        return torch.zeros_like(x)
    problem = layer.problem
    counts = expert_num_tokens.to(torch.int32).contiguous()
    rows = x
    if problem.tensor_amax:
        valid = torch.arange(m, device=x.device).unsqueeze(0) < counts.unsqueeze(1)
        rows = torch.where(valid.unsqueeze(-1), x, torch.zeros((), dtype=x.dtype, device=x.device))
    xq, x_scale = quantize_activations(rows.reshape(local * m, hidden), problem.activation_key, layer.gemm1.activation_scale)
    offsets = torch.empty(local, dtype=torch.int32, device=x.device)
    sizes1 = torch.empty((local, 3), dtype=torch.int32, device=x.device)
    sizes2 = torch.empty((local, 3), dtype=torch.int32, device=x.device)
    ops.get_cutlass_batched_moe_mm_data(offsets, sizes1, sizes2, counts, local, m, layer.inter, hidden)
    out = both_gemms(ops, xq, x_scale, layer, offsets.to(torch.int64), sizes1, sizes2, zeroed=True)
    return out.view(local, m, hidden).to(x.dtype)
