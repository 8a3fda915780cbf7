"""Joint selection for expert-parallel layers: the (dispatcher, experts backend) pair.

The dispatcher decides the activation format the experts receive, so the two are chosen together
(docs/expert-parallel.md):

1. rank the registered dispatchers (priority, then name) and ask each whether it serves the layer;
   an explicit request (``ParallelConfig.dispatch_backend``, then ``MOE_CORE_DISPATCH``) keeps only
   that one, or raises with the reasons;
2. for each activation format an eligible dispatcher produces (only BATCHED_EXPERTS when the layer sets
   ``use_batched_activation_format``), select the experts backend as :func:`moe_core.select` does;
3. with a measured dispatcher ranking (:mod:`moe_core.dispatch.ranking`) that has an entry for the
   layer's world size and shape, and a token count: the first eligible dispatcher in its measured order
   whose format has an experts backend, with that backend; otherwise
4. take the format whose chosen experts backend ranks highest (ties: the better dispatcher, then the
   STANDARD format), and the highest-ranked eligible dispatcher producing it.

Without expert parallelism there is no dispatcher and the experts selection is :func:`select`'s.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, replace
from typing import Any, Mapping

from moe_core import env as env_vars
from moe_core.config import AUTO, ActivationFormat, MoEConfig
from moe_core.dispatch import ranking as dispatch_ranking
from moe_core.dispatch.spec import DispatchSpec
from moe_core.errors import BackendUnsupportedError, NoBackendError, UnknownBackendError
from moe_core.platform import Platform
from moe_core.quant import QuantKey, describe_keys
from moe_core.registry import Registry, default_registry
from moe_core.resolver import current_platform, select
from moe_core.selection import Candidate, CandidateStatus, Selection, SelectionSource, candidate_lines
from moe_core.spec import SupportQuery
from moe_core.support import Support

_FORMAT_ORDER = (ActivationFormat.STANDARD, ActivationFormat.BATCHED_EXPERTS)
#: What to do when no dispatcher can be chosen (MOE_CORE_DISABLE / MOE_CORE_ONLY filter experts backends only).
NO_DISPATCHER_ADVICE = (f"Install a plugin whose dispatcher runs here, request a manual one by name ({env_vars.DISPATCH} or "
                        "ParallelConfig(dispatch_backend=...)), or change the expert-parallel configuration.")


@dataclass(frozen=True)
class FormatOutcome:
    """The experts selection for one activation format, or why none was possible."""

    format: ActivationFormat
    selection: Selection | None
    error: str = ""


@dataclass(frozen=True)
class PairSelection:
    """The resolver's answer for an expert-parallel layer.

    Attributes:
        experts: the experts backend's Selection, made for the chosen activation format.
        dispatcher: the chosen DispatchSpec (None when the layer is not expert-parallel).
        dispatch_source: why that dispatcher (priority, request or env).
        dispatchers: every dispatcher in rank order, with its Support and status.
        outcomes: the experts selection tried for each format an eligible dispatcher produces.
        reason: one sentence on why this pair.
    """

    experts: Selection
    dispatcher: DispatchSpec | None
    dispatch_source: SelectionSource | None
    dispatchers: tuple[Candidate, ...]
    outcomes: tuple[FormatOutcome, ...]
    reason: str

    @property
    def config(self) -> MoEConfig:
        """The layer as the experts kernel runs it (its activation format set to the pair's)."""
        return self.experts.query.config

    @property
    def activation_format(self) -> ActivationFormat:
        """The format the dispatcher produces and the experts backend runs."""
        return self.experts.query.activation_format

    def explain(self) -> str:
        """The dispatcher table, the experts table of each format tried, and the pair chosen."""
        if self.dispatcher is None:
            return f"{self.experts.explain()}\n(no expert parallelism: no dispatcher)"
        parts = [f"Dispatchers (expert-parallel size {self.config.parallel.ep_size}):",
                 *candidate_lines(self.dispatchers, "dispatcher", "(no dispatcher registered)")]
        for outcome in self.outcomes:
            parts.append(f"\nExperts backends for the {outcome.format.value} format:")
            parts.append(outcome.selection.explain() if outcome.selection is not None else outcome.error)
        parts.append(f"\n=> pair: {self.dispatcher.name} + {self.experts.name} ({self.activation_format.value}); {self.reason}")
        return "\n".join(parts)

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready: both choices, the reason, the dispatcher table and the experts selection."""
        return {
            "dispatcher": None if self.dispatcher is None else self.dispatcher.name,
            "dispatch_source": None if self.dispatch_source is None else self.dispatch_source.value,
            "format": self.activation_format.value,
            "reason": self.reason,
            "dispatchers": [c.to_dict() for c in self.dispatchers],
            "experts": self.experts.to_dict(),
            "formats": {o.format.value: (o.selection.name if o.selection else o.error) for o in self.outcomes},
        }


def select_pair(
    config: MoEConfig,
    weight_key: QuantKey | None = None,
    activation_key: QuantKey | None = None,
    *,
    platform: Platform | None = None,
    registry: Registry | None = None,
    environ: Mapping[str, str] | None = None,
    num_tokens: int | None = None,
) -> PairSelection:
    """Choose the dispatcher and the experts backend of a layer together; see the module docstring.

    Arguments as for :func:`moe_core.select`.

    Raises:
        UnknownBackendError: a requested dispatcher or experts backend is not registered.
        BackendUnsupportedError: a requested dispatcher cannot serve the layer.
        NoBackendError: no eligible dispatcher, or no experts backend runs a format one produces.
        InvalidEnvironmentError: an environment variable has an invalid value.
    """
    platform = current_platform() if platform is None else platform
    registry = default_registry() if registry is None else registry
    environ = os.environ if environ is None else environ
    experts = lambda cfg: select(cfg, weight_key, activation_key, platform=platform, registry=registry,  # noqa: E731
                                 environ=environ, num_tokens=num_tokens)
    if not config.parallel.use_ep:
        return PairSelection(experts(config), None, None, (), (), "the layer is not expert-parallel")
    query = SupportQuery(config, weight_key, activation_key, platform)
    settings = env_vars.EnvSettings.from_environ(environ)
    settings.validate_dispatch(set(registry.dispatchers))
    request = _dispatch_request(config, settings.dispatch)
    rows = _dispatcher_rows(registry, query, request)
    eligible = [c for c in rows if c.status is CandidateStatus.RUNNER_UP]
    if request is not None and not eligible:
        found = next(c for c in rows if c.name == request[0])
        raise BackendUnsupportedError(found.name, f"requested by {request[2]}", found.support.reasons, _dispatch_table(query, rows), kind="dispatcher")
    if not eligible:
        raise NoBackendError(f"expert parallelism of size {config.parallel.ep_size} on {platform.describe()}", _dispatch_table(query, rows),
                             subject="dispatcher", advice=NO_DISPATCHER_ADVICE)
    outcomes = tuple(_experts_for(fmt, config, experts) for fmt in _offered_formats(eligible, registry))
    measured = _measured_pair(outcomes, eligible, registry, config, num_tokens, environ, platform.device_name) if request is None else None
    if measured is not None:
        dispatcher, best, why = measured
        rows = tuple(replace(c, status=CandidateStatus.SELECTED) if c.name == dispatcher.name else c for c in rows)
        return PairSelection(best.selection, dispatcher, SelectionSource.RANKING, rows, outcomes, why)
    best = _best_outcome(outcomes, eligible, registry)
    if best is None:
        tables = "\n".join([_dispatch_table(query, rows)] + [f"{o.format.value} format: {o.error}" for o in outcomes])
        raise NoBackendError(f"{describe_keys(weight_key, activation_key)} with expert parallelism: no experts backend runs a format "
                             "an eligible dispatcher produces", tables, subject="(dispatcher, experts backend) pair")
    dispatcher = next(registry.dispatchers[c.name] for c in eligible if registry.dispatchers[c.name].output_format is best.format)
    rows = tuple(replace(c, status=CandidateStatus.SELECTED) if c.name == dispatcher.name else c for c in rows)
    source = SelectionSource.PRIORITY if request is None else request[1]
    return PairSelection(best.selection, dispatcher, source, rows, outcomes, _reason(best, dispatcher, source))


def _dispatch_request(config: MoEConfig, from_env: str | None) -> tuple[str, SelectionSource, str] | None:
    """(name, source, where) of an explicitly requested dispatcher, if any."""
    if config.parallel.dispatch_backend != AUTO:
        return config.parallel.dispatch_backend, SelectionSource.REQUEST, "dispatch_backend"
    if from_env is not None:
        return from_env, SelectionSource.ENV, env_vars.DISPATCH
    return None


def _dispatcher_rows(registry: Registry, query: SupportQuery, request: tuple[str, SelectionSource, str] | None) -> tuple[Candidate, ...]:
    specs = registry.dispatchers
    if request is not None and request[0] not in specs:
        raise UnknownBackendError(request[0], specs, request[2], kind="dispatcher")
    ranked = sorted(specs.values(), key=lambda s: (-s.priority, s.name))
    return tuple(_dispatcher_row(spec, registry.dispatch_supports(spec, query), query, request) for spec in ranked)


def _dispatcher_row(spec: DispatchSpec, support: Support, query: SupportQuery, request: tuple[str, SelectionSource, str] | None) -> Candidate:
    """One dispatcher's line: its support and where it stands; the note lists its traits."""
    note = spec.traits()
    if request is not None:
        status = CandidateStatus.NOT_REQUESTED if spec.name != request[0] else (
            CandidateStatus.RUNNER_UP if support.ok else CandidateStatus.UNSUPPORTED)
        if spec.name == request[0] and support.ok and not _format_allowed(spec, query.config):
            support = Support.no("it produces the standard format and the layer sets use_batched_activation_format")
            status = CandidateStatus.UNSUPPORTED
    elif not _format_allowed(spec, query.config):
        status, note = CandidateStatus.EXCLUDED_POLICY, f"{note}; the layer sets use_batched_activation_format"
    elif not support.ok:
        status = CandidateStatus.UNSUPPORTED
    elif not spec.auto_select:
        status, note = CandidateStatus.MANUAL_ONLY, f"{note}; never auto-selected, request it by name"
    else:
        status = CandidateStatus.RUNNER_UP
    return Candidate(spec.name, spec.family, spec.plugin, spec.priority, support, status, note)


def _format_allowed(spec: DispatchSpec, config: MoEConfig) -> bool:
    return spec.output_format is ActivationFormat.BATCHED_EXPERTS or not config.parallel.use_batched_activation_format


def _offered_formats(eligible: list[Candidate], registry: Registry) -> list[ActivationFormat]:
    offered = {registry.dispatchers[c.name].output_format for c in eligible}
    return [f for f in _FORMAT_ORDER if f in offered]


def _experts_for(fmt: ActivationFormat, config: MoEConfig, experts) -> FormatOutcome:
    """The experts selection in one format, or the reason there is none (requests that cannot run it included)."""
    cfg = replace(config, parallel=replace(config.parallel, use_batched_activation_format=fmt is ActivationFormat.BATCHED_EXPERTS))
    try:
        return FormatOutcome(fmt, experts(cfg))
    except (NoBackendError, BackendUnsupportedError) as exc:
        return FormatOutcome(fmt, None, str(exc).split("\n", 1)[0])


def _best_outcome(outcomes: tuple[FormatOutcome, ...], eligible: list[Candidate], registry: Registry) -> FormatOutcome | None:
    """The format whose experts choice ranks highest; ties go to the better dispatcher, then STANDARD."""
    def dispatcher_priority(fmt: ActivationFormat) -> int:
        return max(c.priority for c in eligible if registry.dispatchers[c.name].output_format is fmt)

    def chosen_priority(selection: Selection) -> int:
        return next(c.priority for c in selection.candidates if c.name == selection.name)

    found = [o for o in outcomes if o.selection is not None]
    if not found:
        return None
    return max(found, key=lambda o: (chosen_priority(o.selection), dispatcher_priority(o.format), -_FORMAT_ORDER.index(o.format)))


def _measured_pair(outcomes: tuple[FormatOutcome, ...], eligible: list[Candidate], registry: Registry, config: MoEConfig,
                   num_tokens: int | None, environ: Mapping[str, str], device_name: str) -> tuple[DispatchSpec, FormatOutcome, str] | None:
    """(dispatcher, its format's experts outcome, reason) from the measured dispatcher ranking in force on
    ``device_name``: the first eligible dispatcher of the nearest entry whose format has an experts backend;
    None without such an entry."""
    in_force = dispatch_ranking.active(environ, device_name) if num_tokens is not None else None
    entry = in_force.entry_for(config, num_tokens) if in_force is not None else None
    if entry is None:
        return None
    usable = {o.format: o for o in outcomes if o.selection is not None}
    names = {c.name for c in eligible}
    for name in entry.order:
        spec = registry.dispatchers.get(name)
        if name in names and spec.output_format in usable:
            outcome = usable[spec.output_format]
            return spec, outcome, (f"{name} is the first eligible dispatcher of the measured ranking for expert-parallel size "
                                   f"{entry.world_size} at {entry.tokens} tokens per rank ({in_force.device}: {entry.describe()}); "
                                   f"{outcome.selection.name} (by {outcome.selection.source.value}) runs its {spec.output_format.value} format")
    return None


def _reason(best: FormatOutcome, dispatcher: DispatchSpec, source: SelectionSource) -> str:
    experts = best.selection
    why_dispatcher = ("requested" if source is not SelectionSource.PRIORITY
                      else f"the highest-ranked eligible dispatcher producing the {best.format.value} format")
    return (f"{experts.name} (by {experts.source.value}) ranks highest among the experts backends that run a format an eligible "
            f"dispatcher produces; {dispatcher.name} is {why_dispatcher} ({dispatcher.traits()})")


def _dispatch_table(query: SupportQuery, rows: tuple[Candidate, ...]) -> str:
    head = f"Dispatchers for ep_size={query.config.parallel.ep_size} | platform: {query.platform.describe()}"
    return "\n".join([head, *candidate_lines(rows, "dispatcher", "(no dispatcher registered)")])
