"""``AiterKernel``: moe-core's fused-MoE contract on top of ``aiter.fused_moe.fused_moe``.

prepare_weights converts fp8 weights to AITER's fp8 dtype (:func:`provider.fp8_dtype`), widens
per-tensor weight scales where AITER's per-token kernels want per-channel ones, and shuffles both
weights with ``aiter.ops.shuffle.shuffle_weight``. forward passes moe-core's canonical layouts
(w13 = [gate; up] as [E, 2I, H], w2 [E, H, I]) straight through: they are AITER's w1 and w2.
"""

from __future__ import annotations

from dataclasses import replace

import torch

from moe_core.config import Activation
from moe_core.kernel import MoEKernel
from moe_core.quant import scheme_for_keys
from moe_core.weights import ExpertWeights
from moe_core_aiter import contract, provider
from moe_core_aiter.layout import fp8_scale_factor, per_row_scale, to_provider_fp8

#: moe-core activation -> ``aiter.ActivationType`` member.
ACTIVATION_TYPES = {Activation.SILU: "Silu", Activation.GELU: "Gelu"}
#: moe-core scheme -> ``aiter.QuantType`` member (AITER remaps per_128x128 to its per_1x128 kernels).
QUANT_TYPES = {
    "unquantized": "No",
    "fp8-tensor": "per_Tensor",
    "fp8-tensor-token": "per_Token",
    "fp8-channel": "per_Token",
    "fp8-block": "per_128x128",
}


class AiterKernel(MoEKernel):
    """AMD AITER fused MoE, STANDARD activation format, ROCm gfx942/gfx950."""

    backend_name = "aiter"

    @property
    def scheme_name(self) -> str:
        return scheme_for_keys(self.weight_key, self.activation_key).name

    def prepare_weights(self, weights: ExpertWeights) -> ExpertWeights:
        """Validate, put w13 in gate/up order, convert fp8 for this GPU and shuffle (once)."""
        weights = super().prepare_weights(weights)
        shuffle = provider.function(contract.SHUFFLE_WEIGHT)
        fix = {}
        w13, w2 = weights.w13, weights.w2
        if self.weight_key is not None:
            fp8 = provider.fp8_dtype()
            factor = fp8_scale_factor(w13.dtype, fp8)
            w13, w2 = to_provider_fp8(w13, fp8), to_provider_fp8(w2, fp8)
            for name in ("w13_scale", "w2_scale", "a13_scale", "a2_scale"):  # static activation scales too
                scale = getattr(weights, name)
                if scale is not None:
                    fix[name] = scale * factor
            if self.scheme_name == "fp8-tensor-token":
                fix["w13_scale"] = per_row_scale(fix["w13_scale"], w13.shape[1])
                fix["w2_scale"] = per_row_scale(fix["w2_scale"], w2.shape[1])
        fix["w13"] = shuffle(x=w13.contiguous(), layout=contract.SHUFFLE_LAYOUT)
        fix["w2"] = shuffle(x=w2.contiguous(), layout=contract.SHUFFLE_LAYOUT)
        return replace(weights, **fix)

    def forward(self, hidden_states, weights, routing, *, expert_map, apply_router_weight_on_input):
        fused_moe = provider.function(contract.FUSED_MOE)
        x = hidden_states
        if expert_map is not None:  # local ids; remote pairs weigh 0 (AITER's own expert_mask is not validated here)
            routing = routing.localized(expert_map)
        topk_weights = routing.topk_weights.float()
        if apply_router_weight_on_input:  # top_k == 1: scale the input, then weigh the output by 1
            x = (x.float() * topk_weights).to(x.dtype)
            topk_weights = torch.ones_like(topk_weights)
        return fused_moe(
            hidden_states=x,
            w1=weights.w13,
            w2=weights.w2,
            topk_weight=topk_weights,
            topk_ids=routing.topk_ids.to(torch.int32),
            activation=provider.enum_member("ActivationType", ACTIVATION_TYPES[self.config.activation]),
            quant_type=provider.enum_member("QuantType", QUANT_TYPES[self.scheme_name]),
            w1_scale=weights.w13_scale,
            w2_scale=weights.w2_scale,
            a1_scale=weights.a13_scale,
            a2_scale=weights.a2_scale,
            dtype=x.dtype,
        )
