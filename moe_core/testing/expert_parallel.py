"""Conformance checks for dispatchers: declarations that hold, and an expert-parallel layer equal to the
single-device layer.

:func:`check_dispatch_specs` checks what a plugin declares (no process group needed). For numerics,

every rank builds the same full layer and the same tokens of every rank from one seed, runs its own
tokens through an expert-parallel :class:`~moe_core.layer.MoELayer` holding its shard of the experts,
and compares with the single-device reference backend on the same weights. Run it on every rank of a
process group (:func:`moe_core.testing.distributed.spawn_group`)::

    results = spawn_group(2, run_cases, "gloo", cases)      # results[rank][case.name] -> CaseResult

A vendor dispatcher runs the same cases with its name in ``EPCase.dispatcher`` and ``autoload=True``.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch

from moe_core.config import MoEConfig, ParallelConfig
from moe_core.dispatch.base import ExpertParallelGroup
from moe_core.layer import MoELayer
from moe_core.numerics import relative_error, tolerance
from moe_core.presets import random_layer
from moe_core.quant import scheme as quant_scheme
from moe_core.registry import Registry
from moe_core.routing import Routing
from moe_core.spec import SupportQuery

def check_dispatch_specs(reg: Registry, plugin: str) -> None:
    """Every dispatcher ``plugin`` declares loads, subclasses Dispatcher and produces the format it declares,
    and its supports() answers (on simulated platforms) are Supports with reasons for every no."""
    from moe_core.dispatch.base import Dispatcher
    from moe_core.platform import PRESETS

    problems = [str(p) for p in reg.problems if p.plugin == plugin]
    assert not problems, f"plugin {plugin!r} misbehaved: {problems}"
    specs = [d for d in reg.dispatchers.values() if d.plugin == plugin]
    assert specs, f"plugin {plugin!r} registered no dispatcher"
    cfg = MoEConfig(8, 2, 256, 128, parallel=ParallelConfig(ep_size=2))
    for spec in specs:
        cls = spec.load()
        assert isinstance(cls, type) and issubclass(cls, Dispatcher), f"{spec.name}: {cls!r} is not a Dispatcher subclass"
        assert cls.output_format is spec.output_format, f"{spec.name}: {cls.__name__} produces {cls.output_format}, the spec says {spec.output_format}"
        answers = []
        for platform in PRESETS.values():
            answer = reg.dispatch_supports(spec, SupportQuery(cfg, None, None, platform))
            assert answer.ok or answer.reasons, f"{spec.name}: a 'no' without a reason on {platform.describe()}"
            answers.append(answer.ok)
        assert any(answers), f"{spec.name}: supported on no simulated platform, so its declaration is never usable"


#: How the case routes tokens: uniformly at random, all to rank 0's experts, or to two experts only.
ROUTINGS = ("random", "skewed", "two_experts")


@dataclass(frozen=True)
class EPCase:
    """One expert-parallel check. ``tokens[r]`` is rank r's token count (the last entry repeats);
    ``invalid_id`` sends rank 0's first pair to a missing expert (it must be dropped and reported)."""

    name: str
    dispatcher: str
    tokens: tuple[int, ...] = (7, 12)
    experts: int = 8
    top_k: int = 2
    hidden: int = 64
    intermediate: int = 32
    routing: str = "random"
    scheme: str = "unquantized"
    dtype: torch.dtype = torch.float32
    max_tokens_per_rank: int | None = None
    expert_capacity: int | None = None
    expert_capacity_factor: float | None = None
    micro_batches: int = 1
    fp8_dispatch: bool = False
    backend: str = "auto"
    invalid_id: bool = False
    seed: int = 0

    def tokens_of(self, rank: int) -> int:
        return self.tokens[min(rank, len(self.tokens) - 1)]


@dataclass(frozen=True)
class CaseResult:
    """What one rank saw: the error vs the reference and its budget, the pair that ran, and any error raised."""

    error: float
    budget: float
    dispatcher: str
    experts: str
    raised: str = ""
    shape_ok: bool = True

    @property
    def ok(self) -> bool:
        return not self.raised and self.shape_ok and self.error <= self.budget


def _routing(case: EPCase, tokens: int, gen: torch.Generator, world_size: int) -> Routing:
    if case.routing == "random":
        logits = torch.randn(tokens, case.experts, generator=gen)
    elif case.routing == "skewed":  # every token prefers rank 0's experts
        logits = torch.randn(tokens, case.experts, generator=gen)
        logits[:, : case.experts // world_size] += 100.0
    elif case.routing == "two_experts":
        logits = torch.full((tokens, case.experts), -100.0)
        logits[:, [0, case.experts - 1]] = torch.randn(tokens, 2, generator=gen)
    else:
        raise ValueError(f"routing must be one of {ROUTINGS}, got {case.routing!r}")
    return Routing.from_logits(logits, case.top_k)


def run_case(rank: int, world_size: int, case: EPCase, device: str, registry: Registry) -> CaseResult:
    """Run one case on this rank (every rank of the group must call it with the same case)."""
    sch = quant_scheme(case.scheme)
    full = MoEConfig(case.experts, case.top_k, case.hidden, case.intermediate, dtype=case.dtype, moe_backend="reference")
    weights = random_layer(full, sch, device=device, seed=case.seed)
    gen = torch.Generator().manual_seed(case.seed + 1)
    xs, routes = [], []
    for r in range(world_size):
        t = case.tokens_of(r)
        xs.append(torch.randn(t, case.hidden, generator=gen).to(device=device, dtype=case.dtype))
        routes.append(_routing(case, t, gen, world_size))
    sent = routes[0]
    if case.invalid_id:  # rank 0 routes its first pair to a missing expert; the reference drops that pair
        bad_ids = sent.topk_ids.clone()
        bad_ids[0, 0] = case.experts + 5
        sent = Routing(bad_ids, sent.topk_weights)
        dropped_weights = routes[0].topk_weights.clone()
        dropped_weights[0, 0] = 0.0
        routes[0] = Routing(routes[0].topk_ids, dropped_weights)
    want = MoELayer(full, weights, sch.weight_key, sch.activation_key, registry=registry)(
        torch.cat(xs), Routing(torch.cat([r.topk_ids for r in routes]).to(device), torch.cat([r.topk_weights for r in routes]).to(device)))
    start = sum(case.tokens_of(r) for r in range(rank))
    want = want[start: start + case.tokens_of(rank)]

    parallel = ParallelConfig(ep_size=world_size, dispatch_backend=case.dispatcher)
    cfg = MoEConfig(case.experts, case.top_k, case.hidden, case.intermediate, dtype=case.dtype, moe_backend=case.backend, parallel=parallel)
    group = ExpertParallelGroup(max_tokens_per_rank=case.max_tokens_per_rank, expert_capacity=case.expert_capacity,
                                expert_capacity_factor=case.expert_capacity_factor, micro_batches=case.micro_batches,
                                fp8_dispatch=case.fp8_dispatch)
    layer = MoELayer(cfg, weights.shard(rank, world_size), sch.weight_key, sch.activation_key, registry=registry, ep_group=group)
    own = sent if rank == 0 else routes[rank]
    mine = Routing(own.topk_ids.to(device), own.topk_weights.to(device))
    got = layer(xs[rank], mine)
    budget = tolerance(sch.activation_key, case.dtype)
    raised = ""
    try:
        layer.check()
    except Exception as exc:  # noqa: BLE001 - reported to the test, which decides
        raised = f"{type(exc).__name__}: {exc}"
    err = relative_error(got, want) if want.numel() else 0.0
    return CaseResult(err, budget, layer.dispatcher_name, layer.backend, raised, tuple(got.shape) == tuple(want.shape))


def run_cases(rank: int, world_size: int, cases: list[EPCase], device: str = "cpu", autoload: bool = False) -> dict[str, CaseResult]:
    """Every case on this rank; ``autoload`` loads the installed plugins (GPU), else only the built-ins."""
    if device == "cuda":
        device = f"cuda:{torch.cuda.current_device()}"
    registry = Registry(autoload=autoload)
    return {case.name: run_case(rank, world_size, case, device, registry) for case in cases}
