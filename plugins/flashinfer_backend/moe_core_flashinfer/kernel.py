"""Kernels running moe-core's contract on FlashInfer's unified MoE runners.

One kernel per backend; each (backend, scheme) names a FlashInfer config and runner
(:data:`moe_core_flashinfer.contract.BINDINGS`). ``prepare_weights`` maps moe-core's canonical
weights (w13 = [gate; up] as [E, 2I, H], w2 [E, H, I]) to FlashInfer's canonical input (w1 rows
[up; gate]) and hands them to the config's own ``prepare_weights``, once; the resulting view lives
in :class:`FlashInferWeights`. ``forward`` builds a ``MoEActivationPack`` (activations quantized by
FlashInfer's ``prepare_activations`` where its kernel wants them quantized) and runs the runner
with FlashInfer's default tactic (no autotuning).

Expert parallelism: FlashInfer's bf16/cuTile runners take no expert map, so the kernel maps global
ids to local ones itself and gives pairs of remote experts weight 0 (their rows are still computed
on local expert 0: wasted work, never wrong results).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Mapping

import torch

from moe_core.kernel import MoEKernel
from moe_core.quant import scheme_for_keys
from moe_core.quantization.qtensor import dequantize
from moe_core.routing import BatchedRouting, Routing
from moe_core.support import Support
from moe_core.weights import ExpertWeights

from moe_core_flashinfer import contract, facts


@dataclass(frozen=True, eq=False)
class FlashInferWeights(ExpertWeights):
    """Expert weights prepared for one FlashInfer runner: ``pack`` is its ``MoEWeightPack``.

    ``w13`` / ``w2`` hold the runner's ``w1`` / ``w2`` view tensors (FlashInfer's layout, not moe-core's).
    """

    pack: Any = None
    view: Mapping[str, torch.Tensor] = field(default_factory=dict)


def to_flashinfer_w1(w13: torch.Tensor) -> torch.Tensor:
    """moe-core's [gate; up] rows -> FlashInfer's canonical [up; gate] rows (dim 1 of [E, 2I, H])."""
    raw = w13.view(torch.uint8) if w13.element_size() == 1 else w13  # fp8 codes: concatenate their bytes
    gate, up = raw.chunk(2, dim=1)
    return torch.cat((up, gate), dim=1).view(w13.dtype)


class FlashInferKernel(MoEKernel):
    """A moe-core kernel on one FlashInfer runner (STANDARD format, bfloat16 activations)."""

    cuda_graph_safe = True  # the runners launch without host syncs once a token bucket's workspace exists

    def __init__(self, config, weight_key, activation_key):
        super().__init__(config, weight_key, activation_key)
        self.scheme = scheme_for_keys(weight_key, activation_key).name
        self.binding: contract.Binding = contract.BINDINGS[self.backend_name][self.scheme]
        self._runners: dict[torch.device, Any] = {}

    # ------------------------------------------------------------------ FlashInfer objects
    @property
    def fi_top_k(self) -> int:
        return self.config.top_k

    def flashinfer_activation(self):
        """The FlashInfer ActivationConfig of this layer (SwiGLU carries moe-core's clamp as ``limit``)."""
        api = facts.api()
        cls = getattr(api, contract.ACTIVATIONS[self.config.activation.value])
        return cls(limit=self.config.swiglu_limit) if self.config.swiglu_limit is not None else cls()

    def flashinfer_quant(self):
        api = facts.api()
        return api.QuantConfig(weight=getattr(api.QuantFormat, self.binding.weight), activation=getattr(api.QuantFormat, self.binding.activation))

    def flashinfer_config(self):
        """FlashInfer's ``MoEConfig`` for this layer, with this backend's config as the only candidate."""
        api = facts.api()
        return api.MoEConfig(
            routing=api.RoutingConfig(num_experts=self.config.local_num_experts, top_k=self.fi_top_k),
            quant=self.flashinfer_quant(),
            experts=api.ExpertConfig(intermediate_size=self.config.intermediate_size),
            activation=self.flashinfer_activation(),
            backend=api.BackendOptions(candidates=(getattr(api, self.binding.config)(),)),
            execution=api.ExecutionConfig(tune_max_num_tokens=contract.MAX_TOKENS),
        )

    def runner_class(self) -> type:
        return getattr(facts.PROVIDER.module(contract.RUNNERS_MODULE), self.binding.runner)

    def runner(self, device: torch.device):
        """The built FlashInfer runner on ``device`` (checked with its own ``check_support`` once)."""
        runner = self._runners.get(device)
        if runner is None:
            runner = self.runner_class()(self.flashinfer_config(), device)
            runner.check_support()
            runner.build()
            self._runners[device] = runner
        return runner

    # ------------------------------------------------------------------ weights
    def prepare_kwargs(self, weights: ExpertWeights) -> tuple[tuple, dict]:
        """Arguments of the config's ``prepare_weights`` for these (validated, gate/up-ordered) weights."""
        cfg, b = self.config, self.binding
        geometry = dict(num_local_experts=cfg.local_num_experts, hidden_size=cfg.hidden_size, intermediate_size=cfg.intermediate_size,
                        activation=self.flashinfer_activation(), device=weights.device)
        if b.weights_in == "fp8":
            per_expert = (weights.w13_scale.reshape(-1).float(), weights.w2_scale.reshape(-1).float())
            return (to_flashinfer_w1(weights.w13), per_expert[0], weights.w2, per_expert[1]), geometry
        if weights.weight_key is None:
            w13, w2 = weights.w13, weights.w2
        else:
            q13, q2 = weights.qtensors()
            w13, w2 = dequantize(q13), dequantize(q2)
        args = (to_flashinfer_w1(w13.to(torch.bfloat16)), w2.to(torch.bfloat16).contiguous())
        if b.passes_quant:
            geometry["quant"] = self.flashinfer_quant()
        if b.static_scales:
            geometry["hidden_states_scale_global"] = weights.a13_scale.reshape(()).float()
            geometry["intermediate_scale_global"] = weights.a2_scale.reshape(()).float()
        return args, geometry

    def prepare_weights(self, weights: ExpertWeights) -> FlashInferWeights:
        """Validate, order gate/up, then FlashInfer's own ``prepare_weights`` for this backend (once)."""
        weights = super().prepare_weights(weights)
        args, kwargs = self.prepare_kwargs(weights)
        view = dict(facts.config_class(self.binding.config).prepare_weights(*args, **kwargs))
        pack = facts.api().MoEWeightPack()
        pack.prepare_for(self.runner_class().backend_key, view)
        w1, w2 = view.get("w1", weights.w13), view.get("w2", weights.w2)
        base = {f: getattr(weights, f) for f in ExpertWeights.__dataclass_fields__}
        base.update(w13=w1, w2=w2)
        return FlashInferWeights(**base, pack=pack, view=view)

    # ------------------------------------------------------------------ forward
    def check_shapes(self, hidden_states, routing) -> Support:
        tokens = hidden_states.shape[0] * (hidden_states.shape[1] if hidden_states.dim() == 3 else 1)
        if tokens > contract.MAX_TOKENS:
            return Support.no(f"{tokens} rows exceed the {contract.MAX_TOKENS} this kernel sizes FlashInfer's workspace for")
        return Support.yes()

    def activation_pack(self, x: torch.Tensor, ids: torch.Tensor, weights: torch.Tensor, prepared: FlashInferWeights):
        """FlashInfer's ``MoEActivationPack``: activations quantized by its own helper where the kernel needs it."""
        api, b = facts.api(), self.binding
        q, scale = x.contiguous(), None
        if b.activations_by:
            kwargs = {}
            if "quant" in b.activation_params:
                kwargs["quant"] = self.flashinfer_quant()
            if "hidden_states_scale_global" in b.activation_params:
                kwargs["hidden_states_scale_global"] = prepared.a13_scale.reshape(()).float()
            out = getattr(api, b.activations_by).prepare_activations(q, **kwargs)
            q, scale = out if isinstance(out, tuple) else (out, None)
        return api.MoEActivationPack(hidden_states_q=q, hidden_states_scale=scale,
                                     topk_ids=ids.to(torch.int32).contiguous(), topk_weights=weights.float().contiguous())

    def run(self, x: torch.Tensor, ids: torch.Tensor, weights: torch.Tensor, prepared: FlashInferWeights) -> torch.Tensor:
        runner = self.runner(x.device)
        inputs = runner.pack_inputs(self.activation_pack(x, ids, weights, prepared), prepared.pack)
        return runner.forward(inputs, tactic=-1)

    def forward(self, hidden_states, weights, routing: Routing, *, expert_map, apply_router_weight_on_input):
        if hidden_states.shape[0] == 0:
            return torch.zeros_like(hidden_states)
        if expert_map is not None:
            routing = routing.localized(expert_map)
        ids, w = routing.topk_ids, routing.topk_weights.float()
        x = hidden_states
        if apply_router_weight_on_input:  # top_k == 1 (checked by apply)
            x = (x.float() * w).to(x.dtype)
            w = torch.ones_like(w)
        return self.run(x, ids, w, weights)


class TrtllmKernel(FlashInferKernel):
    """FlashInfer's TRT-LLM-gen routed MoE (Blackwell)."""

    backend_name = "flashinfer_trtllm"


class CutlassKernel(FlashInferKernel):
    """FlashInfer's CUTLASS fused MoE (JIT-built with nvcc)."""

    backend_name = "flashinfer_cutlass"


class CuteDslKernel(FlashInferKernel):
    """FlashInfer's CuTe-DSL nvfp4 MoE (Blackwell)."""

    backend_name = "flashinfer_cutedsl"


class B12xKernel(FlashInferKernel):
    """FlashInfer's b12x nvfp4 MoE for sm_120/121."""

    backend_name = "flashinfer_b12x"


class CuTileKernel(FlashInferKernel):
    """FlashInfer's cuTile fused MoE (kernels compiled by cuda-tile's tileiras)."""

    backend_name = "flashinfer_cutile"


class BatchedCuteDslKernel(FlashInferKernel):
    """The CuTe-DSL runner on the batched-experts format: row m of expert e is one token routed to e alone.

    Rows at or past an expert's count get router weight 0, so their outputs are zero.
    """

    backend_name = "flashinfer_cutedsl_batched"

    @property
    def fi_top_k(self) -> int:
        return 1

    def forward(self, hidden_states, weights, routing: BatchedRouting, *, expert_map, apply_router_weight_on_input):
        experts, rows, hidden = hidden_states.shape
        if experts * rows == 0:
            return torch.zeros_like(hidden_states)
        device = hidden_states.device
        ids = torch.arange(experts, device=device, dtype=torch.int32).repeat_interleave(rows).unsqueeze(1)
        valid = torch.arange(rows, device=device).unsqueeze(0) < routing.expert_num_tokens.to(device).unsqueeze(1)
        out = self.run(hidden_states.reshape(experts * rows, hidden), ids, valid.reshape(-1, 1).float(), weights)
        return out.reshape(experts, rows, hidden)
