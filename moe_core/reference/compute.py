"""The reference computation: dequantize, then compute in float32. The numerics oracle.

Activation quantization is simulated exactly where a fused kernel quantizes: the layer input
before GEMM1 (over all tokens) and the gated intermediate before GEMM2 (over all routed pairs).
"""

from __future__ import annotations

import torch

from moe_core.config import Activation, MoEConfig
from moe_core.quant import QuantKey
from moe_core.quantization.qtensor import dequantize, fake_quantize
from moe_core.weights import ExpertWeights


def gated_activation(h: torch.Tensor, activation: Activation, swiglu_limit: float | None) -> torch.Tensor:
    """act(gate) * up for ``h`` = [gate | up] along the last dim.

    With ``swiglu_limit``: gate is clamped to at most the limit and up to [-limit, limit] first.
    """
    i = h.shape[-1] // 2
    gate, up = h[..., :i], h[..., i:]
    if swiglu_limit is not None:
        gate = gate.clamp(max=swiglu_limit)
        up = up.clamp(-swiglu_limit, swiglu_limit)
    act = torch.nn.functional.silu(gate) if activation is Activation.SILU else torch.nn.functional.gelu(gate)
    return act * up


def expert_matrices(weights: ExpertWeights, expert: int) -> tuple[torch.Tensor, torch.Tensor]:
    """Float32 w13 [2I, H] and w2 [H, I] of one local expert."""
    if weights.weight_key is None:
        return weights.w13[expert].float(), weights.w2[expert].float()
    q13, q2 = weights.qtensors()
    return dequantize(q13[expert : expert + 1])[0], dequantize(q2[expert : expert + 1])[0]


def _experts_forward(
    rows: torch.Tensor,
    experts: torch.Tensor,
    weights: ExpertWeights,
    config: MoEConfig,
    activation_key: QuantKey | None,
) -> torch.Tensor:
    """Both GEMMs for already-quantized input rows [P, H] grouped by local expert ids [P]."""
    inter = rows.new_zeros(rows.shape[0], config.intermediate_size)
    mats = {}
    for e in torch.unique(experts).tolist():
        sel = (experts == e).nonzero().squeeze(1)
        w13, w2 = mats[e] = expert_matrices(weights, e)
        inter[sel] = gated_activation(rows[sel] @ w13.T, config.activation, config.swiglu_limit)
    inter = fake_quantize(inter, activation_key, weights.a2_scale) if inter.shape[0] else inter
    out = rows.new_zeros(rows.shape[0], config.hidden_size)
    for e, (_, w2) in mats.items():
        sel = (experts == e).nonzero().squeeze(1)
        out[sel] = inter[sel] @ w2.T
    return out


def reference_moe(
    x: torch.Tensor,
    weights: ExpertWeights,
    topk_ids: torch.Tensor,
    topk_weights: torch.Tensor,
    config: MoEConfig,
    activation_key: QuantKey | None,
    *,
    expert_map: torch.Tensor | None = None,
    apply_router_weight_on_input: bool = False,
) -> torch.Tensor:
    """STANDARD format: [T, H] tokens routed to top-k experts; returns [T, H] in x's dtype."""
    t = x.shape[0]
    xf = x.float()
    w = topk_weights.float()
    if apply_router_weight_on_input:
        xf = xf * w  # top_k == 1: [T, 1] broadcasts over H
    xq = fake_quantize(xf, activation_key, weights.a13_scale) if t else xf
    ids = topk_ids.long()
    local = expert_map.long()[ids] if expert_map is not None else ids
    token, slot = (local >= 0).nonzero(as_tuple=True)
    experts = local[token, slot]
    y = _experts_forward(xq[token], experts, weights, config, activation_key)
    if not apply_router_weight_on_input:
        y = y * w[token, slot].unsqueeze(1)
    out = torch.zeros(t, config.hidden_size, dtype=torch.float32, device=x.device)
    out.index_add_(0, token, y)
    return out.to(x.dtype)


def reference_batched(
    x: torch.Tensor,
    weights: ExpertWeights,
    expert_num_tokens: torch.Tensor,
    config: MoEConfig,
    activation_key: QuantKey | None,
) -> torch.Tensor:
    """BATCHED_EXPERTS format: [E, M, H] rows, the first ``expert_num_tokens[e]`` valid; returns [E, M, H]."""
    e, m, h = x.shape
    valid = torch.arange(m, device=x.device).unsqueeze(0) < expert_num_tokens.to(x.device).unsqueeze(1)
    expert, row = valid.nonzero(as_tuple=True)
    rows = x[expert, row].float()
    rows = fake_quantize(rows, activation_key, weights.a13_scale) if rows.shape[0] else rows
    y = _experts_forward(rows, expert, weights, config, activation_key)
    out = torch.zeros(e, m, h, dtype=torch.float32, device=x.device)
    out[expert, row] = y
    return out.to(x.dtype)
