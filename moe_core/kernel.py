"""The kernel contract every backend implements.

A kernel is built for one (config, weight key, activation key). The engine calls
:meth:`MoEKernel.prepare_weights` once, then :meth:`MoEKernel.apply` per forward. Before
``apply`` it may call :meth:`MoEKernel.check_shapes`: a "no" there makes
:class:`~moe_core.layer.MoELayer` fall back to the next ranked backend (logged), as the seeds'
"shape-specific fallbacks may still occur at runtime" require.
"""

from __future__ import annotations

import abc
import functools
import os
from dataclasses import replace

import torch

from moe_core import env as env_vars
from moe_core.config import ActivationFormat, MoEConfig
from moe_core.errors import KernelInputError
from moe_core.quant import QuantKey
from moe_core.routing import BatchedRouting, Routing
from moe_core.routing_guard import RoutingErrorCounter, drop_invalid_routing, routing_counter
from moe_core.support import Support
from moe_core.weights import ExpertWeights


def full_checks_enabled() -> bool:
    """MOE_CORE_FULL_CHECKS=1 turns on costly input checks (NaN/inf scans, id ranges on GPU).

    Read on every call (one environment lookup; the parse is cached per value), so tests and
    engines may flip it at run time.
    """
    return _parse_full_checks(os.environ.get(env_vars.FULL_CHECKS))


@functools.lru_cache(maxsize=8)
def _parse_full_checks(value: str | None) -> bool:
    return value is not None and env_vars.parse_bool(env_vars.FULL_CHECKS, value)


class MoEKernel(abc.ABC):
    """Base class of fused-MoE kernels.

    Subclasses set ``backend_name`` and implement :meth:`forward`; they may override
    :meth:`prepare_weights` (repacking, shuffling) and :meth:`check_shapes`.
    """

    backend_name: str = ""
    #: True when ``apply`` never synchronises with the host, so engines may capture it in a CUDA graph.
    cuda_graph_safe: bool = False
    #: True when :meth:`forward` itself drops invalid routing values (ids outside [0, E), map entries
    #: outside [-1, local E), batched counts outside [0, max_tokens]) without touching memory out of
    #: bounds, and records them in :attr:`routing_errors`. When False, :meth:`apply` does that with
    #: torch ops before :meth:`forward` (a few extra launches, no host sync). See docs/robustness.md.
    guards_routing: bool = False

    def __init__(self, config: MoEConfig, weight_key: QuantKey | None, activation_key: QuantKey | None):
        self.config = config
        self.weight_key = weight_key
        self.activation_key = activation_key
        #: Device-side count of invalid routing values this kernel met (see :mod:`moe_core.routing_guard`).
        self.routing_errors: RoutingErrorCounter = routing_counter(config)

    @property
    def activation_format(self) -> ActivationFormat:
        return self.config.activation_format

    # ------------------------------------------------------------------ contract
    def prepare_weights(self, weights: ExpertWeights) -> ExpertWeights:
        """One-time weight preparation; returns the container ``apply`` takes.

        The default validates, puts w13 in GATE_UP order and tags the result with this backend.
        """
        weights.validate(self.config, self.weight_key, self.activation_key)
        return replace(weights.in_gate_up_order(), prepared_by=self.backend_name)

    def check_shapes(self, hidden_states: torch.Tensor, routing: Routing | BatchedRouting) -> Support:
        """Run-time shape check: can this kernel run these inputs? Default: yes."""
        return Support.yes()

    def apply(
        self,
        hidden_states: torch.Tensor,
        weights: ExpertWeights,
        routing: Routing | BatchedRouting,
        *,
        expert_map: torch.Tensor | None = None,
        apply_router_weight_on_input: bool = False,
    ) -> torch.Tensor:
        """Run the layer: validate inputs (cheaply; fully under MOE_CORE_FULL_CHECKS=1), then :meth:`forward`.

        STANDARD format: ``hidden_states`` [T, H], ``routing`` a :class:`Routing` with global
        expert ids; returns [T, H]. BATCHED_EXPERTS: ``hidden_states`` [E, M, H], ``routing`` a
        :class:`BatchedRouting`; returns [E, M, H] (rows past each expert's count are zero).
        ``expert_map`` [global E] maps global ids to local experts (-1: not on this rank; such
        pairs contribute nothing). ``apply_router_weight_on_input`` scales the input instead of
        the output (top_k must be 1).
        """
        self.validate_inputs(hidden_states, weights, routing, expert_map, apply_router_weight_on_input)
        if not self.guards_routing:
            routing, expert_map = drop_invalid_routing(self.config, hidden_states, routing, expert_map, self.routing_errors)
        return self.forward(hidden_states, weights, routing, expert_map=expert_map, apply_router_weight_on_input=apply_router_weight_on_input)

    @abc.abstractmethod
    def forward(
        self,
        hidden_states: torch.Tensor,
        weights: ExpertWeights,
        routing: Routing | BatchedRouting,
        *,
        expert_map: torch.Tensor | None,
        apply_router_weight_on_input: bool,
    ) -> torch.Tensor:
        """Compute the layer on validated inputs."""

    # ------------------------------------------------------------------ validation
    def validate_inputs(self, hidden_states, weights, routing, expert_map, apply_router_weight_on_input) -> None:
        """Cheap checks always; NaN/inf scans and id ranges on GPU only under MOE_CORE_FULL_CHECKS=1."""
        cfg = self.config
        if not isinstance(weights, ExpertWeights):
            raise KernelInputError("weights", f"must be an ExpertWeights, got {type(weights).__name__}")
        if weights.prepared_by != self.backend_name:
            raise KernelInputError(
                "weights", f"were prepared by {weights.prepared_by!r}, not {self.backend_name!r}: call this kernel's prepare_weights() once first"
            )
        if not isinstance(hidden_states, torch.Tensor) or not hidden_states.is_floating_point():
            raise KernelInputError("hidden_states", f"must be a floating-point tensor, got {getattr(hidden_states, 'dtype', type(hidden_states))}")
        if hidden_states.dtype != cfg.dtype:
            raise KernelInputError("hidden_states", f"dtype {hidden_states.dtype} differs from the config's {cfg.dtype}")
        if hidden_states.device != weights.device:
            raise KernelInputError("hidden_states", f"is on {hidden_states.device} but the weights are on {weights.device}")
        full = full_checks_enabled()
        if self.activation_format is ActivationFormat.STANDARD:
            self._validate_standard(hidden_states, routing, expert_map, apply_router_weight_on_input, full)
        else:
            self._validate_batched(hidden_states, routing, expert_map, apply_router_weight_on_input, full)
        if full and not torch.isfinite(hidden_states).all():
            raise KernelInputError("hidden_states", "contains NaN or inf (MOE_CORE_FULL_CHECKS=1)")

    def _validate_standard(self, x, routing, expert_map, on_input, full) -> None:
        cfg = self.config
        if not isinstance(routing, Routing):
            raise KernelInputError("routing", f"the standard format takes a Routing, got {type(routing).__name__}")
        if x.dim() != 2 or x.shape[1] != cfg.hidden_size:
            raise KernelInputError("hidden_states", f"expected [tokens, {cfg.hidden_size}], got {tuple(x.shape)}")
        if routing.num_tokens != x.shape[0]:
            raise KernelInputError("routing", f"has {routing.num_tokens} tokens, hidden_states has {x.shape[0]}")
        if routing.top_k != cfg.top_k:
            raise KernelInputError("routing.topk_ids", f"has top_k={routing.top_k}, the config says {cfg.top_k}")
        if routing.topk_ids.device != x.device:
            raise KernelInputError("routing", f"is on {routing.topk_ids.device} but hidden_states is on {x.device}")
        if on_input and cfg.top_k != 1:
            raise KernelInputError("apply_router_weight_on_input", f"needs top_k == 1, the config has top_k={cfg.top_k}")
        if expert_map is not None:
            if expert_map.dim() != 1 or expert_map.shape[0] != cfg.num_experts or expert_map.is_floating_point():
                raise KernelInputError("expert_map", f"must be an integer tensor [{cfg.num_experts}] (global -> local id, -1 if remote)")
            if expert_map.device != x.device:
                raise KernelInputError("expert_map", f"is on {expert_map.device} but hidden_states is on {x.device}")
        elif cfg.parallel.use_ep:
            raise KernelInputError("expert_map", f"is required when ep_size={cfg.parallel.ep_size}")
        if full or x.device.type == "cpu":
            _check_range("routing.topk_ids", routing.topk_ids, 0, cfg.num_experts)
            if expert_map is not None:
                _check_range("expert_map", expert_map, -1, cfg.local_num_experts)
        if full and not torch.isfinite(routing.topk_weights).all():
            raise KernelInputError("routing.topk_weights", "contains NaN or inf (MOE_CORE_FULL_CHECKS=1)")

    def _validate_batched(self, x, routing, expert_map, on_input, full) -> None:
        cfg = self.config
        if not isinstance(routing, BatchedRouting):
            raise KernelInputError("routing", f"the batched-experts format takes a BatchedRouting, got {type(routing).__name__}")
        if expert_map is not None:
            raise KernelInputError("expert_map", "the batched-experts format already holds local experts; pass no expert_map")
        if on_input:
            raise KernelInputError("apply_router_weight_on_input", "router weights are applied when batched outputs are combined, not by the kernel")
        e = cfg.local_num_experts
        if x.dim() != 3 or x.shape[0] != e or x.shape[2] != cfg.hidden_size:
            raise KernelInputError("hidden_states", f"expected [{e}, max_tokens, {cfg.hidden_size}], got {tuple(x.shape)}")
        if routing.expert_num_tokens.shape[0] != e:
            raise KernelInputError("expert_num_tokens", f"has {routing.expert_num_tokens.shape[0]} entries, expected {e}")
        if full or x.device.type == "cpu":
            _check_range("expert_num_tokens", routing.expert_num_tokens, 0, x.shape[1] + 1)


def _check_range(argument: str, values: torch.Tensor, low: int, high: int) -> None:
    """Synchronous check that every value lies in [low, high) (CPU inputs, or MOE_CORE_FULL_CHECKS=1)."""
    if values.numel():
        lo, hi = int(values.min()), int(values.max())
        if lo < low or hi >= high:
            raise KernelInputError(argument, f"values must lie in [{low}, {high}), got range [{lo}, {hi}]")
