"""MoELayer: selection + weight preparation + apply, with logged run-time shape fallback."""

from __future__ import annotations

import logging
from typing import Mapping

import torch

from moe_core.config import MoEConfig
from moe_core.dispatch.base import Dispatched, Dispatcher, ExpertParallelGroup
from moe_core.dispatch.fp8_rows import check_fp8_dispatch
from moe_core.dispatch.overlap import MicroBatchOverlap, half_group, micro_batches
from moe_core.errors import KernelInputError, MoECoreError
from moe_core.kernel import MoEKernel
from moe_core.platform import Platform
from moe_core.quant import QuantKey
from moe_core.registry import Registry, default_registry
from moe_core.pair import PairSelection, select_pair
from moe_core.resolver import select
from moe_core.routing import BatchedRouting, Routing
from moe_core.routing_guard import RoutingErrorCounter
from moe_core.selection import Selection
from moe_core.weights import ExpertWeights

logger = logging.getLogger("moe_core")


class ShapeFallbackExhaustedError(MoECoreError, RuntimeError):
    """Every eligible backend refused the run-time shape."""


class MoELayer:
    """Runs one MoE layer on the selected backend.

    Weights are prepared once for the selected kernel (and once for any other backend on first
    use). Invalid routing values never crash a kernel: their pairs are dropped, counted on the device,
    and reported as :class:`~moe_core.routing_guard.InvalidRoutingError` by a later call once the
    count has reached the host without a sync, or at once by :meth:`check` (docs/robustness.md).
    With a measured ranking in force, each call runs the measured-fastest eligible backend
    for its token count. When that kernel's ``check_shapes``
    refuses an input, the next eligible backend of the selection (in rank order) runs it; the
    switch is logged at WARNING, and that backend's weights are prepared on first use.

    An expert-parallel layer (``config.parallel.ep_size > 1``) holds this rank's experts only
    (``weights`` has ``num_experts / ep_size`` of them: global experts ``[rank * L, (rank + 1) * L)``),
    takes this rank's tokens with routing over global expert ids, and runs the (dispatcher, experts
    backend) pair of :func:`~moe_core.pair.select_pair` (:attr:`pair`) over ``ep_group`` (default:
    the world group); every rank must call it together (docs/expert-parallel.md). Forwards run as two
    overlapped micro-batches where ``ep_group.micro_batches`` says so (:mod:`moe_core.dispatch.overlap`).
    """

    def __init__(
        self,
        config: MoEConfig,
        weights: ExpertWeights,
        weight_key: QuantKey | None = None,
        activation_key: QuantKey | None = None,
        *,
        platform: Platform | None = None,
        registry: Registry | None = None,
        environ: Mapping[str, str] | None = None,
        ep_group: ExpertParallelGroup | None = None,
    ):
        self.registry = default_registry() if registry is None else registry
        self.pair: PairSelection | None = None
        self.dispatcher: Dispatcher | None = None
        self._ep_group: ExpertParallelGroup | None = None
        self._overlap: MicroBatchOverlap | None = None
        if config.parallel.use_ep:
            ep_group = ep_group if ep_group is not None else ExpertParallelGroup()
            # A measured dispatcher ranking is keyed by tokens per rank: the layer's fixed buffer size, when it has one.
            self.pair = select_pair(config, weight_key, activation_key, platform=platform, registry=self.registry, environ=environ,
                                    num_tokens=ep_group.max_tokens_per_rank)
            config = self.pair.config  # the activation format the pair chose
            self.dispatcher = self.pair.dispatcher.load()(config, ep_group)
            self._ep_group = ep_group
            micro_batches(ep_group, self.dispatcher)  # a request the dispatcher cannot honour fails here
            check_fp8_dispatch(ep_group, self.dispatcher, weight_key, activation_key)
        elif ep_group is not None:
            raise KernelInputError("ep_group", "was given but the layer is not expert-parallel: set MoEConfig.parallel.ep_size")
        self._select = lambda tokens: select(  # noqa: E731 - cached by the resolver
            config, weight_key, activation_key, platform=platform, registry=self.registry, environ=environ, num_tokens=tokens
        )
        self.selection: Selection = self._select(None)
        self.config = config
        self._raw = weights
        self._kernels: dict[str, tuple[MoEKernel, ExpertWeights]] = {}
        self._kernel(self.selection.name)

    def _kernel(self, name: str) -> tuple[MoEKernel, ExpertWeights]:
        if name not in self._kernels:
            spec = self.registry.specs[name]
            q = self.selection.query
            kernel = spec.load_kernel()(self.config, q.weight_key, q.activation_key)
            self._kernels[name] = (kernel, kernel.prepare_weights(self._raw))
        return self._kernels[name]

    @property
    def backend(self) -> str:
        return self.selection.name

    @property
    def dispatcher_name(self) -> str | None:
        """The expert-parallel dispatcher's name; None when the layer is not expert-parallel."""
        return None if self.pair is None else self.pair.dispatcher.name

    def check(self) -> None:
        """Synchronise and raise :class:`~moe_core.routing_guard.InvalidRoutingError` if any earlier call
        met invalid routing values (ids, expert-map entries or batched counts); resets the count.

        Engines call this where a host sync is acceptable, and after replaying CUDA graphs (a graph
        replay records bad values on the device, but only a host-side call can report them).
        """
        for counter in self._counters():
            counter.check()

    def _counters(self) -> list[RoutingErrorCounter]:
        return [kernel.routing_errors for kernel, _ in self._kernels.values()] + self._dispatcher_counters()

    def _dispatcher_counters(self) -> list[RoutingErrorCounter]:
        built = [self.dispatcher] if self.dispatcher is not None else []
        built += list(self._overlap.dispatchers) if self._overlap is not None else []
        return [counter for dispatcher in built for counter in dispatcher.counters()]

    def __call__(
        self,
        hidden_states: torch.Tensor,
        routing: Routing | BatchedRouting,
        *,
        expert_map: torch.Tensor | None = None,
        apply_router_weight_on_input: bool = False,
    ) -> torch.Tensor:
        for counter in self._counters():  # bad routing of an earlier call, if its report reached the host
            counter.poll()
        if self.dispatcher is None:
            return self._run(hidden_states, routing, expert_map, apply_router_weight_on_input, hidden_states.shape[0])
        if expert_map is not None or apply_router_weight_on_input:
            raise KernelInputError("expert_map" if expert_map is not None else "apply_router_weight_on_input",
                                   "is not taken by an expert-parallel layer: its dispatcher places the experts")
        self.dispatcher.check_inputs(hidden_states, routing)
        tokens = hidden_states.shape[0]
        overlap = self._micro_batches()
        if overlap is not None:
            self.dispatcher.check_token_limit(tokens)
            out = overlap(hidden_states, routing, lambda sent: self._experts(sent, tokens))
        else:
            sent = self.dispatcher.dispatch(hidden_states, routing)
            out = self.dispatcher.combine(self._experts(sent, tokens), sent)
        for counter in self._dispatcher_counters():
            counter.snapshot()
        return out

    def _experts(self, sent: Dispatched, tokens: int) -> torch.Tensor:
        """This rank's experts on what a dispatch delivered (``tokens``: the caller's count, for the ranking)."""
        return self._run(sent.hidden_states, sent.routing, sent.expert_map, False, tokens)

    def _micro_batches(self) -> MicroBatchOverlap | None:
        """The two-micro-batch schedule when this forward overlaps (its dispatchers made on first use), else None."""
        if micro_batches(self._ep_group, self.dispatcher) == 1:
            return None
        if self._overlap is None:
            make, halves = type(self.dispatcher), half_group(self._ep_group)
            self._overlap = MicroBatchOverlap(make(self.config, halves), make(self.config, halves))
        return self._overlap

    def _run(self, hidden_states, routing, expert_map, apply_router_weight_on_input, tokens: int) -> torch.Tensor:
        """The experts on this rank: the selected kernel, or the next eligible one that accepts the shape.

        ``tokens``: the caller's token count, which a measured ranking is keyed by (an expert-parallel
        layer's own tokens, not the rows its dispatcher delivered)."""
        refusals = []
        selection = self._select(tokens)  # a measured ranking may prefer another backend here
        for name in dict.fromkeys((selection.name, *selection.fallbacks)):
            kernel, weights = self._kernel(name)
            verdict = kernel.check_shapes(hidden_states, routing)
            if verdict.ok:
                if refusals:
                    logger.warning("MoE backend fallback to %s: %s", name, "; ".join(refusals))
                out = kernel.apply(hidden_states, weights, routing, expert_map=expert_map, apply_router_weight_on_input=apply_router_weight_on_input)
                kernel.routing_errors.snapshot()
                return out
            refusals.append(f"{name} refused shape {tuple(hidden_states.shape)}: {verdict.explain()}")
        raise ShapeFallbackExhaustedError("no eligible MoE backend accepts this input: " + "; ".join(refusals))
