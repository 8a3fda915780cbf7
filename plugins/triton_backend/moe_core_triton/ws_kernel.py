"""The kernel behind ``triton_ws_sm90``: decode forwards by the warp-specialized Gluon layer (ws_decode.py), the rest
by the ``triton`` backend's kernels it inherits."""

from __future__ import annotations

import torch

from moe_core.routing import Routing
from moe_core_triton.blocks import pair_table, standard_table
from moe_core_triton.kernel import TritonKernel
from moe_core_triton.ws_plan import DecodePlan, decode_plan
from moe_core_triton.ws_spec import DECODE_MAX_TOKENS, WS_SM90


class WarpSpecializedKernel(TritonKernel):
    """:class:`TritonKernel` whose standard-format forwards of at most :data:`DECODE_MAX_TOKENS` tokens, router weight on
    the output, run :func:`moe_core_triton.ws_decode.ws_decode_layer`: one launch for one token, a block table's launch
    and the layer's for more."""

    backend_name = WS_SM90.name

    def decode_plan_for(self, hidden_states: torch.Tensor, routing, expert_map, apply_router_weight_on_input: bool) -> DecodePlan | None:
        """The Gluon layer's plan for this forward; None runs the inherited kernels (longer, batched-format or
        router-weight-on-input forwards, expert maps, deterministic kernels)."""
        tokens = hidden_states.shape[0]
        if (not isinstance(routing, Routing) or expert_map is not None or apply_router_weight_on_input or self.deterministic
                or not 1 <= tokens <= DECODE_MAX_TOKENS or not hidden_states.is_cuda):
            return None
        cfg = self.config
        return decode_plan(tokens, cfg.hidden_size, cfg.intermediate_size, hidden_states.element_size())

    def _forward(self, hidden_states, weights, routing, expert_map, apply_router_weight_on_input):
        plan = self.decode_plan_for(hidden_states, routing, expert_map, apply_router_weight_on_input)
        if plan is None:
            return super()._forward(hidden_states, weights, routing, expert_map, apply_router_weight_on_input)
        from moe_core_triton.ws_decode import weight_descriptors, ws_decode_layer

        cfg = self.config
        errors = self.routing_errors if self.count_routing_errors else None
        rows = pair_table if plan.pair_items else standard_table
        table = rows(routing.topk_ids, cfg.num_experts, cfg.local_num_experts, plan.block_m, None, errors)
        x = hidden_states if hidden_states.stride(1) == 1 else hidden_states.contiguous()
        return ws_decode_layer(plan, x, weight_descriptors(weights.w13, weights.w2), routing.topk_weights.contiguous(), table,
                               cfg.intermediate_size, cfg.top_k)
