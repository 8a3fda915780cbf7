"""The dispatcher contract, the group an expert-parallel layer spans, and helpers dispatchers share.

Experts are placed contiguously: rank ``r`` of an expert-parallel group of size ``ep`` holds the
global experts ``[r * L, (r + 1) * L)`` with ``L = num_experts / ep``, as local experts ``0..L-1``.
"""

from __future__ import annotations

import abc
from dataclasses import dataclass
from typing import Any

import torch
import torch.distributed as dist

from moe_core.config import ActivationFormat, MoEConfig
from moe_core.errors import InvalidConfigError, KernelInputError, MoECoreError
from moe_core.routing import BatchedRouting, Routing
from moe_core.routing_guard import RoutingErrorCounter


class ExpertCapacityError(MoECoreError, RuntimeError):
    """Routed pairs found their expert's fixed-capacity buffer full; they were dropped from those calls."""

    def __init__(self, argument: str, count: int, smallest: int, largest: int, valid: str):
        self.count, self.largest_row = count, largest
        super().__init__(
            f"{count} (token, expert) pair(s) did not fit {valid}: the busiest expert needed {largest + 1} rows from one "
            f"rank, so those pairs contributed nothing to the outputs of the calls that sent them. Raise {argument} "
            "(or leave the capacity unset: max_tokens_per_rank rows, which can never overflow) or use a dispatcher "
            "without a fixed capacity"
        )


class CapacityCounter(RoutingErrorCounter):
    """Device-side count of pairs dropped for lack of capacity; reported like invalid routing (no sync)."""

    error = ExpertCapacityError


@dataclass(frozen=True, eq=False)
class ExpertParallelGroup:
    """The ranks an expert-parallel layer spans and the sizes its buffers are built for.

    Attributes:
        group: a ``torch.distributed`` process group; None: the default (world) group. Its size is
            the layer's ``ep_size``.
        max_tokens_per_rank: the most tokens one rank passes to one forward. Fixed-buffer dispatchers
            (``naive``, ``batched_all_to_all``) size their buffers with it and never synchronise with
            the host; None: they agree on the largest count of each forward with one all-reduce and a
            host sync (not capturable in a CUDA graph).
        expert_capacity: ``batched_all_to_all`` only: rows each expert accepts from one source rank;
            default ``max_tokens_per_rank`` (a token is routed to an expert at most once, so that never
            overflows). Smaller saves memory and bandwidth; pairs beyond it are dropped and reported
            (:class:`ExpertCapacityError`), never silently.
        expert_capacity_factor: ``batched_all_to_all`` only, instead of ``expert_capacity``: a capacity
            that fits the routing rather than the worst case, ``factor`` times the mean rows per (expert,
            source rank) — ``ceil(factor * tokens * top_k / num_experts)``, at most the tokens per rank —
            so the buffers scale with the load; overflow is reported as for ``expert_capacity``.
        micro_batches: 1 (default) runs each forward whole; 2 runs it as two micro-batches whose transfers
            overlap the other one's experts on a GPU (:mod:`moe_core.dispatch.overlap`; each has buffers for
            half the tokens). docs/expert-parallel.md says where two paid in measurements and where not.
        fp8_dispatch: fp8-block layers only, token-row dispatchers (``packed_all_to_all``, ``peer_copy``): send the
            hidden states as the fp8 codes and per-128 scales the experts compute anyway, about half the bytes of
            16-bit rows (:mod:`moe_core.dispatch.fp8_rows`). Default False.
    """

    group: Any = None
    max_tokens_per_rank: int | None = None
    expert_capacity: int | None = None
    expert_capacity_factor: float | None = None
    micro_batches: int = 1
    fp8_dispatch: bool = False

    def __post_init__(self) -> None:
        for name in ("max_tokens_per_rank", "expert_capacity"):
            value = getattr(self, name)
            if value is not None and (not isinstance(value, int) or isinstance(value, bool) or value < 1):
                raise InvalidConfigError(f"ExpertParallelGroup.{name} must be a positive int or None, got {value!r}")
        factor = self.expert_capacity_factor
        if factor is not None and (not isinstance(factor, (int, float)) or isinstance(factor, bool) or not factor > 0):
            raise InvalidConfigError(f"ExpertParallelGroup.expert_capacity_factor must be a positive number or None, got {factor!r}")
        if type(self.micro_batches) is not int or self.micro_batches not in (1, 2):
            raise InvalidConfigError(f"ExpertParallelGroup.micro_batches must be 1 or 2, got {self.micro_batches!r}")
        if not isinstance(self.fp8_dispatch, bool):
            raise InvalidConfigError(f"ExpertParallelGroup.fp8_dispatch must be True or False, got {self.fp8_dispatch!r}")
        if factor is not None and self.expert_capacity is not None:
            raise InvalidConfigError("ExpertParallelGroup: give expert_capacity or expert_capacity_factor, not both")
        if not dist.is_available() or not dist.is_initialized():
            raise InvalidConfigError(
                "expert parallelism needs torch.distributed initialised: call torch.distributed.init_process_group "
                "(or launch with torchrun) before building an expert-parallel layer"
            )

    @property
    def rank(self) -> int:
        """This process's rank in the group (its experts are ``[rank * L, (rank + 1) * L)``)."""
        return dist.get_rank(self.group)

    @property
    def world_size(self) -> int:
        """The group's size: the layer's ``ep_size``."""
        return dist.get_world_size(self.group)


@dataclass(frozen=True, eq=False)
class Dispatched:
    """What the experts of this rank receive, and what :meth:`Dispatcher.combine` needs to undo it.

    ``hidden_states``/``routing`` are in the dispatcher's output format; ``expert_map`` maps global
    expert ids to this rank's local experts (-1 elsewhere) for the STANDARD format, None for the batched
    format; ``state`` is the dispatcher's own.
    """

    hidden_states: torch.Tensor
    routing: Routing | BatchedRouting
    expert_map: torch.Tensor | None
    state: Any


class Dispatcher(abc.ABC):
    """Base class of dispatch/combine backends, built once per expert-parallel layer.

    ``dispatch`` takes this rank's tokens [T, H] and their top-k routing over global experts and
    returns what this rank's experts run; ``combine`` takes the experts' output and returns [T, H]: for
    every token the sum over its k experts of weight * expert(token), wherever those experts live.
    Every rank of the group must call both, in the same order.
    """

    #: The activation format of :attr:`Dispatched.hidden_states`; must equal the spec's output_format.
    output_format: ActivationFormat = ActivationFormat.STANDARD
    #: Whether two instances may run at once on two streams, each with buffers of its own: what the two
    #: overlapped micro-batches of :mod:`moe_core.dispatch.overlap` need. False for a dispatcher whose instances
    #: share a buffer.
    micro_batch_safe: bool = False
    #: Whether it can send the hidden states as fp8 groups when the group asks (ExpertParallelGroup.fp8_dispatch).
    fp8_rows: bool = False

    def __init__(self, config: MoEConfig, group: ExpertParallelGroup):
        if group.world_size != config.parallel.ep_size:
            raise InvalidConfigError(
                f"the process group has {group.world_size} ranks but the layer's ep_size is {config.parallel.ep_size}: "
                "give MoEConfig.parallel.ep_size the group's size"
            )
        self.config = config
        self.group = group
        self.rank = group.rank
        self.local_experts = config.local_num_experts
        #: Pairs this dispatcher dropped itself (invalid ids in the batched format), reported by MoELayer.check().
        self.routing_errors = RoutingErrorCounter("routing.topk_ids", f"[0, {config.num_experts})")
        self._maps: dict[torch.device, torch.Tensor] = {}

    def expert_map(self, device: torch.device) -> torch.Tensor:
        """int32 [num_experts]: global id -> local id on this rank, -1 for experts held elsewhere."""
        found = self._maps.get(device)
        if found is None:
            ids = torch.arange(self.config.num_experts, device=device, dtype=torch.int32)
            first = self.rank * self.local_experts
            local = (ids >= first) & (ids < first + self.local_experts)
            found = self._maps[device] = torch.where(local, ids - first, -1).to(torch.int32)
        return found

    def counters(self) -> tuple[RoutingErrorCounter, ...]:
        """The device counters of values this dispatcher dropped (checked by MoELayer.check())."""
        return (self.routing_errors,)

    @abc.abstractmethod
    def dispatch(self, hidden_states: torch.Tensor, routing: Routing) -> Dispatched:
        """Send this rank's tokens to the ranks holding their experts."""

    @abc.abstractmethod
    def combine(self, expert_output: torch.Tensor, dispatched: Dispatched) -> torch.Tensor:
        """Bring the experts' results back and sum each token's k weighted results: [T, H]."""

    def check_inputs(self, hidden_states: torch.Tensor, routing: Routing) -> None:
        """Cheap host-side checks before any collective: a wrong shape must fail here, not hang a peer."""
        cfg = self.config
        if not isinstance(routing, Routing):
            raise KernelInputError("routing", f"an expert-parallel layer takes a Routing over global expert ids, got {type(routing).__name__}")
        if not isinstance(hidden_states, torch.Tensor) or hidden_states.dim() != 2 or hidden_states.shape[1] != cfg.hidden_size:
            raise KernelInputError("hidden_states", f"expected [tokens, {cfg.hidden_size}], got {tuple(getattr(hidden_states, 'shape', ()))}")
        if hidden_states.dtype != cfg.dtype:
            raise KernelInputError("hidden_states", f"dtype {hidden_states.dtype} differs from the config's {cfg.dtype}")
        if routing.num_tokens != hidden_states.shape[0] or routing.top_k != cfg.top_k:
            raise KernelInputError("routing", f"is [{routing.num_tokens}, {routing.top_k}], expected [{hidden_states.shape[0]}, {cfg.top_k}]")
        if routing.topk_ids.device != hidden_states.device:
            raise KernelInputError("routing", f"is on {routing.topk_ids.device} but hidden_states is on {hidden_states.device}")

    # ------------------------------------------------------------------ shared helpers
    def record_invalid(self, ids: torch.Tensor) -> torch.Tensor:
        """Where ``ids`` lie outside ``[0, num_experts)``, counted in :attr:`routing_errors` (no host sync)."""
        bad = (ids < 0) | (ids >= self.config.num_experts)
        self.routing_errors.record(ids, bad)
        return bad

    def drop_invalid(self, routing: Routing) -> Routing:
        """Routing with out-of-range ids sent to expert 0 with weight 0, counted in :attr:`routing_errors`.

        Done before any collective, on the rank whose router produced them, without a host sync: a bad id
        must neither reach a peer's kernel nor make one rank raise while the others wait in a collective.
        """
        bad = self.record_invalid(routing.topk_ids)
        return Routing(torch.where(bad, 0, routing.topk_ids), torch.where(bad, 0, routing.topk_weights))

    def check_token_limit(self, num_tokens: int) -> int | None:
        """The group's ``max_tokens_per_rank`` (None: unset), after checking that ``num_tokens`` is within it."""
        limit = self.group.max_tokens_per_rank
        if limit is not None and num_tokens > limit:
            raise KernelInputError(
                "hidden_states", f"has {num_tokens} tokens, more than max_tokens_per_rank={limit} of this expert-parallel layer"
            )
        return limit

    def tokens_per_rank(self, num_tokens: int, device: torch.device) -> int:
        """Rows every rank's fixed buffers hold for this forward (see ExpertParallelGroup.max_tokens_per_rank)."""
        limit = self.check_token_limit(num_tokens)
        if limit is not None:
            return limit
        if torch.cuda.is_available() and torch.cuda.is_current_stream_capturing():
            raise KernelInputError(
                "hidden_states", "CUDA-graph capture of this dispatcher needs a fixed max_tokens_per_rank (ExpertParallelGroup)"
            )
        largest = torch.tensor([num_tokens], device=device)
        dist.all_reduce(largest, op=dist.ReduceOp.MAX, group=self.group.group)
        return max(int(largest.item()), 1)


def pack_routing(routing: Routing) -> torch.Tensor:
    """[T, 2k] int32: the ids and the float32 weights' bits, to travel in one collective."""
    return torch.cat((routing.topk_ids.to(torch.int32), routing.topk_weights.float().view(torch.int32)), dim=1)


def unpack_routing(packed: torch.Tensor) -> Routing:
    """The inverse of :func:`pack_routing`."""
    k = packed.shape[1] // 2
    return Routing(topk_ids=packed[:, :k].contiguous(), topk_weights=packed[:, k:].contiguous().view(torch.float32))
