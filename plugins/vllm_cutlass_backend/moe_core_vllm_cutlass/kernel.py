"""``VllmCutlassKernel``: moe-core's fused-MoE contract on vLLM's CUTLASS grouped fp8 GEMM.

The GEMM reads moe-core's fp8 weights as they are: w13 [E, 2I, H] (gate first) and w2 [E, H, I] are
row-major [N, K] per expert, the layout ``cutlass_moe_mm`` takes for B; per-tensor scales [E, 1, 1]
and per-channel scales [E, N, 1] become float32 [E] and [E, N]. prepare_weights validates, makes the
codes contiguous and builds the layer's :class:`moe_core_vllm_cutlass.glue.CutlassLayer` (scales, stride
tensors), kept on the kernel; the first forward loads the library (:mod:`moe_core_vllm_cutlass.library`),
kept on the kernel too; every forward runs
:func:`moe_core_triton.pair_guard.guard_pairs` (local expert ids, -1 for remote pairs; invalid routing dropped and
counted) and
:func:`moe_core_vllm_cutlass.glue.fused_moe` (:func:`moe_core_vllm_cutlass.glue.batched_moe` for the
batched-experts format, whose counts ``MoEKernel.apply`` guards) with it.
"""

from __future__ import annotations

from dataclasses import replace

from moe_core.kernel import MoEKernel
from moe_core.weights import ExpertWeights
from moe_core_triton.pair_guard import guard_pairs
from moe_core_vllm_cutlass import glue, library


class VllmCutlassKernel(MoEKernel):
    """vLLM's CUTLASS grouped fp8 GEMM, STANDARD activation format, fp8 w8a8 (per-tensor / per-channel), CUDA sm90+."""

    backend_name = "vllm_cutlass"
    cuda_graph_safe = True  # the glue never reads device values on the host
    guards_routing = True  # route.route drops and counts invalid ids and expert-map entries in its one launch

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self._ops = None
        self._built: tuple[ExpertWeights, glue.CutlassLayer] | None = None

    def prepare_weights(self, weights: ExpertWeights) -> ExpertWeights:
        """Validate, put w13 in gate/up order, make the fp8 codes contiguous and build the layer's constants (once),
        so that no forward, even the first one inside a CUDA-graph capture, builds them."""
        weights = super().prepare_weights(weights)
        prepared = replace(weights, w13=weights.w13.contiguous(), w2=weights.w2.contiguous())
        self.layer(prepared)
        return prepared

    def ops(self):
        """``torch.ops._C`` of the library, loaded and checked at the first call, then kept."""
        if self._ops is None:
            self._ops = library.LIBRARY.ops_namespace()
        return self._ops

    def layer(self, weights: ExpertWeights) -> glue.CutlassLayer:
        """The :class:`~moe_core_vllm_cutlass.glue.CutlassLayer` of ``weights``: built by :meth:`prepare_weights`, or at the
        first forward on another container, and kept while forwards pass the same container (the last one only)."""
        if self._built is None or self._built[0] is not weights:
            problem = glue.CutlassProblem(self.activation_key, self.config.activation, self.config.swiglu_limit, self.config.dtype)
            self._built = (weights, glue.cutlass_layer(weights, problem))
        return self._built[1]

    def forward(self, hidden_states, weights, routing, *, expert_map, apply_router_weight_on_input):
        layer = self.layer(weights)
        ids, router = guard_pairs(routing.topk_ids, routing.topk_weights, expert_map, num_experts=self.config.num_experts,
                                  num_local=layer.local_experts, errors=self.routing_errors.buffer(hidden_states.device),
                                  dropped_id=-1)
        return glue.fused_moe(self.ops(), hidden_states, layer, ids, router, apply_router_weight_on_input=apply_router_weight_on_input)


class VllmCutlassBatchedKernel(VllmCutlassKernel):
    """The same GEMM for the BATCHED_EXPERTS activation format ([E, M, H], valid rows counted per expert)."""

    backend_name = "batched_vllm_cutlass"
    guards_routing = False  # counts above the batch's rows are clamped (and counted) by MoEKernel.apply

    def forward(self, hidden_states, weights, routing, *, expert_map, apply_router_weight_on_input):
        return glue.batched_moe(self.ops(), hidden_states, self.layer(weights), routing.expert_num_tokens)
