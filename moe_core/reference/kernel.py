"""The torch reference kernel: every scheme, both formats, CPU and CUDA."""

from __future__ import annotations

import torch

from moe_core.kernel import MoEKernel
from moe_core.reference.compute import reference_batched, reference_moe
from moe_core.routing import BatchedRouting, Routing
from moe_core.weights import ExpertWeights

BACKEND_NAME = "reference"


class ReferenceKernel(MoEKernel):
    """Dequantize-and-compute in float32 with a Python loop over the touched experts.

    Slow by design: it is the numerics oracle for every plugin and the embedded default where no
    GPU backend applies.
    """

    backend_name = BACKEND_NAME

    def forward(
        self,
        hidden_states: torch.Tensor,
        weights: ExpertWeights,
        routing: Routing | BatchedRouting,
        *,
        expert_map: torch.Tensor | None,
        apply_router_weight_on_input: bool,
    ) -> torch.Tensor:
        if isinstance(routing, BatchedRouting):
            return reference_batched(hidden_states, weights, routing.expert_num_tokens, self.config, self.activation_key)
        return reference_moe(
            hidden_states, weights, routing.topk_ids, routing.topk_weights, self.config, self.activation_key,
            expert_map=expert_map, apply_router_weight_on_input=apply_router_weight_on_input,
        )
