"""The resolver: one algorithm, for every quant family, from a layer description to a Selection.

Steps (DESIGN.md): rank the backends that claim the scheme by priority (ties by name); apply the
config's policies (LoRA, SwiGLU clamp, activation format) and the environment (disable / only /
priority overrides); honour an explicit request exactly (config.moe_backend first, then
MOE_CORE_BACKEND); otherwise take the highest-ranked supported candidate; raise with the whole
table when nothing qualifies. Results are cached by everything that can change them.

Precedence: ``config.moe_backend`` > ``MOE_CORE_BACKEND`` > a backend forced by a compatibility
mode (``MOE_CORE_COMPAT=vllm``, docs/vllm-compat.md) > automatic selection, where a measured
ranking may prefer another eligible backend for the actual token count (the user's ranking >
the autotune cache > plugins' rankings > the ranking shipped for this device: moe_core/ranking_sources.py,
docs/ranking.md) > static priority. An explicit
request (from either) is honoured even if MOE_CORE_DISABLE / MOE_CORE_ONLY would exclude it from
automatic selection; policies (LoRA, clamp, format) and supports() still apply to it.
"""

from __future__ import annotations

import functools
import logging
import os
from dataclasses import replace
from typing import Mapping

from moe_core import autotune, ranking_sources
from moe_core import env as env_vars
from moe_core.compat import vllm as vllm_compat
from moe_core.compat.vllm import NO_OVERLAY, EnvOverlay
from moe_core.config import AUTO, ActivationFormat, MoEConfig
from moe_core.env import EnvSettings
from moe_core.errors import BackendUnsupportedError, NoBackendError, UnknownBackendError
from moe_core.platform import Platform, detect
from moe_core.quant import QuantKey, describe_keys
from moe_core.ranking_sources import Measurement
from moe_core.registry import Registry, default_registry
from moe_core.selection import Candidate, CandidateStatus, Selection, SelectionSource, render_table
from moe_core.spec import BackendSpec, SupportQuery
from moe_core.support import Support

logger = logging.getLogger("moe_core")

_CACHE_SIZE = 4096
_cache: dict[tuple, Selection] = {}
#: Selections by token count (keyed on the rankings' state), in front of _cache, which is keyed by the deciding entry.
_by_tokens: dict[tuple, Selection] = {}
_logged: set[str] = set()


@functools.lru_cache(maxsize=1)
def current_platform() -> Platform:
    """The detected platform of this process (computed once)."""
    return detect()


def clear_cache() -> None:
    """Drop cached selections (they are also invalidated by any registry change)."""
    _cache.clear()
    _by_tokens.clear()


def _log_once(level: int, message: str) -> None:
    if message not in _logged:
        _logged.add(message)
        logger.log(level, message)


def select(
    config: MoEConfig,
    weight_key: QuantKey | None = None,
    activation_key: QuantKey | None = None,
    *,
    platform: Platform | None = None,
    registry: Registry | None = None,
    environ: Mapping[str, str] | None = None,
    num_tokens: int | None = None,
) -> Selection:
    """Choose the backend for one MoE layer; see the module docstring for the rules.

    Args:
        config: the layer.
        weight_key, activation_key: quantization of weights and activations (None: unquantized).
        platform: the machine to select for; default: this process's (simulate with
            ``moe_core.platform.preset("h100")``).
        registry: default: the process-wide registry with every installed plugin.
        environ: environment mapping; default ``os.environ``.
        num_tokens: tokens of the forward about to run; where a measured ranking in force covers the
            layer at that count (the user's, the autotune cache, a plugin's, the one shipped for this
            device) the measured-fastest eligible backend is chosen (source ``ranking``;
            ``Selection.decided_by`` names the ranking). With autotuning on, a layer no ranking covers
            is measured first on this machine (moe_core/autotune.py).

    Raises:
        UnknownBackendError: a requested backend name is not registered.
        BackendUnsupportedError: a requested backend cannot run the layer.
        NoBackendError: no candidate can (a NotImplementedError).
        InvalidEnvironmentError: an environment variable has an invalid value.
        RankingFileError: the ranking file or the autotune cache is unreadable or malformed.
    """
    platform = current_platform() if platform is None else platform
    registry = default_registry() if registry is None else registry
    snap = env_vars.snapshot(os.environ if environ is None else environ)
    by_tokens = None
    if num_tokens is not None:
        by_tokens = (config, weight_key, activation_key, platform, snap, registry.id, registry.version, num_tokens,
                     autotune.api_state(), ranking_sources.state(snap))
        hit = _by_tokens.get(by_tokens)
        if hit is not None:
            return hit
    measured = None if num_tokens is None else _measurement(config, weight_key, activation_key, platform, registry, snap, num_tokens)
    key = _cache_key(config, weight_key, activation_key, platform, snap, registry, num_tokens, measured)
    hit = _cache.get(key)
    if hit is not None:
        return _remember(by_tokens, hit)
    query = SupportQuery(config, weight_key, activation_key, platform)
    settings = env_vars.parse_snapshot(snap)
    overlay = _overlay(settings, snap, query)
    selection = _resolve(query, registry, settings, measured, overlay, num_tokens is not None)
    if measured is None and num_tokens is not None and autotune.enabled(settings):
        miss = autotune.on_miss(query, [c.name for c in selection.candidates if c.eligible], num_tokens, registry, dict(snap), _is_real)
        if miss is autotune.Miss.DEFERRED:
            return selection  # not measured during CUDA-graph capture, nor cached: a later call measures
        if miss is autotune.Miss.TUNED:
            measured = _measurement(config, weight_key, activation_key, platform, registry, snap, num_tokens)
            key = _cache_key(config, weight_key, activation_key, platform, snap, registry, num_tokens, measured)
            selection = _resolve(query, registry, settings, measured, overlay, True)
    if len(_cache) >= _CACHE_SIZE:
        del _cache[next(iter(_cache))]  # evict the oldest entry
    _cache[key] = selection
    return _remember(by_tokens, selection)


def _remember(by_tokens: tuple | None, selection: Selection) -> Selection:
    if by_tokens is not None:
        if len(_by_tokens) >= 2 * _CACHE_SIZE:
            _by_tokens.clear()
        _by_tokens[by_tokens] = selection
    return selection


def _measurement(config: MoEConfig, weight_key: QuantKey | None, activation_key: QuantKey | None, platform: Platform,
                 registry: Registry, snap: tuple[tuple[str, str], ...], num_tokens: int) -> Measurement | None:
    """The measured order that decides for this layer at ``num_tokens``: the first ranking in force that covers it."""
    return ranking_sources.measurement(config, weight_key, activation_key, platform.device_name, snap, registry, num_tokens)


def _cache_key(config, weight_key, activation_key, platform, snap, registry: Registry, num_tokens: int | None,
               measured: Measurement | None) -> tuple:
    decided = (id(measured.source.ranking), measured.entry) if measured is not None else None
    return (config, weight_key, activation_key, platform, snap, registry.id, registry.version, num_tokens is not None,
            autotune.api_state(), decided)


def _is_real(platform: Platform) -> bool:
    """This process's own machine (autotuning measures only there), not a simulated one."""
    return not platform.simulated and platform == current_platform()


def _request(config: MoEConfig, settings: EnvSettings, overlay: EnvOverlay) -> tuple[str, SelectionSource, str, bool] | None:
    """(name, source, where, map to the batched variant) of an explicit or forced backend, if any."""
    if config.moe_backend != AUTO:
        return config.moe_backend, SelectionSource.REQUEST, "moe_backend", True
    if settings.force is not None:
        return settings.force, SelectionSource.ENV, env_vars.BACKEND, True
    if overlay.force is not None:
        return overlay.force, SelectionSource.ENV, overlay.force_source, overlay.map_batched
    return None


def _overlay(settings: EnvSettings, snap: tuple[tuple[str, str], ...], query: SupportQuery) -> EnvOverlay:
    if settings.compat == "vllm":
        return vllm_compat.overlay(dict(snap), query)
    return NO_OVERLAY


def _resolve(
    query: SupportQuery, registry: Registry, settings: EnvSettings, measured: Measurement | None = None, overlay: EnvOverlay = NO_OVERLAY,
    tokens_known: bool = False,
) -> Selection:
    specs = registry.specs
    settings.validate(set(specs), registry.families)
    family = query.family
    overrides = dict(settings.priorities)

    request = _request(query.config, settings, overlay)
    requested: BackendSpec | None = None
    if request is not None:
        name, _, where, map_batched = request
        requested = specs.get(name)
        if requested is None:
            raise UnknownBackendError(name, specs, where)
        if map_batched and query.activation_format is ActivationFormat.BATCHED_EXPERTS and requested.batched_variant in specs:
            requested = specs[requested.batched_variant]
    vetoes = dict(overlay.veto)

    pool = [s for s in specs.values() if s.claims(query.weight_key, query.activation_key) or s is requested]

    def priority(spec: BackendSpec) -> int:
        return overrides.get(spec.name, spec.priority_for(family))

    ranked = sorted(pool, key=lambda s: (-priority(s), s.name))
    rows = []
    for spec in ranked:
        support = registry.supports(spec, query)
        if spec.name in vetoes:
            support = support & Support.no(vetoes[spec.name])
        status, note = _status(spec, support, query, settings, requested, overlay)
        if spec.name in overrides:
            note = "; ".join(filter(None, (note, f"priority from {env_vars.PRIORITY}")))
        rows.append(Candidate(spec.name, spec.family, spec.plugin, priority(spec), support, status, note))

    decided_by = ""
    if requested is not None:
        source = request[1]
        chosen = next(c for c in rows if c.name == requested.name)
        if not chosen.support.ok:
            raise BackendUnsupportedError(chosen.name, f"requested by {request[2]}", chosen.support.reasons, render_table(query, tuple(rows)))
    else:
        source = SelectionSource.PRIORITY
        eligible = [c for c in rows if c.status is CandidateStatus.RUNNER_UP]
        chosen = eligible[0] if eligible else None
        fastest = next((c for name in (measured.order if measured else ()) for c in eligible if c.name == name), None)
        if fastest is not None:
            source, chosen, decided_by = SelectionSource.RANKING, fastest, measured.describe()
        elif tokens_known:
            decided_by = _unmeasured(measured)
        if chosen is None:
            for c in rows:
                _log_once(logging.DEBUG, f"MoE backend {c.name!r} rejected: {c.status.value}: {c.support.explain()}")
            summary = f"{describe_keys(query.weight_key, query.activation_key)}, {query.activation_format.value} format, on {query.platform.describe()}"
            if overlay.only_message:
                summary = f"{overlay.only_message}; {summary}"
            raise NoBackendError(summary, render_table(query, tuple(rows)))
    rows = [replace(c, status=CandidateStatus.SELECTED) if c is chosen else c for c in rows]
    if source is SelectionSource.RANKING:
        rows = [replace(c, note="; ".join(filter(None, (c.note, "measured fastest for this token count")))) if c.name == chosen.name else c for c in rows]

    for c in rows:
        if c.status not in (CandidateStatus.SELECTED, CandidateStatus.RUNNER_UP):
            _log_once(logging.DEBUG, f"MoE backend {c.name!r} not used: {c.status.value}: {c.support.explain()}")
    _warn_if_unvalidated(specs[chosen.name], source, query.platform)
    _log_once(
        logging.INFO,
        f"Using {chosen.name} MoE backend ({source.value}) for {describe_keys(query.weight_key, query.activation_key)} "
        f"out of potential backends: {[c.name for c in rows]}.",
    )
    return Selection(specs[chosen.name], source, tuple(rows), query, decided_by)


def _unmeasured(measured: Measurement | None) -> str:
    """Why the priority decided although the token count was known."""
    if measured is None:
        return "by priority: no measurement for this shape"
    return (f"by priority: none of the measured backends ({', '.join(measured.order)}) is eligible here "
            f"({measured.source.describe()})")


def _warn_if_unvalidated(spec: BackendSpec, source: SelectionSource, platform: Platform) -> None:
    """A backend whose numerics never passed on hardware, run on request or chosen automatically on this machine's
    real hardware: say so, once (a plan for a simulated platform chosen automatically stays quiet)."""
    if spec.validation.validated:
        return
    never = f"its numerics were never validated on hardware (plugin {spec.plugin or 'unknown'})"
    if source in (SelectionSource.REQUEST, SelectionSource.ENV):
        _log_once(logging.WARNING, f"MoE backend {spec.name!r} was requested, but {never}; running it as asked")
    elif not platform.simulated:
        _log_once(logging.WARNING, f"MoE backend {spec.name!r} was chosen automatically ({source.value}), but {never}; "
                                   f"set {env_vars.DISABLE}={spec.name} to keep it out")


def _status(
    spec: BackendSpec, support: Support, query: SupportQuery, settings: EnvSettings, requested: BackendSpec | None, overlay: EnvOverlay
) -> tuple[CandidateStatus, str]:
    """Where one candidate stands, and a note explaining exclusions the Support does not carry."""
    if requested is not None:
        # An explicit request has no run-time substitutes: the others are listed, never used.
        if not support.ok:
            return CandidateStatus.UNSUPPORTED, ""
        return (CandidateStatus.RUNNER_UP if spec is requested else CandidateStatus.NOT_REQUESTED), ""
    if spec.policy_reasons(query.config):
        return CandidateStatus.EXCLUDED_POLICY, ""
    why = settings.excluded_by(spec.name, spec.family, query.family) or _overlay_exclusion(spec.name, overlay)
    if why is not None:
        return CandidateStatus.EXCLUDED_ENV, why
    if not support.ok:
        return CandidateStatus.UNSUPPORTED, ""
    if not spec.auto_select:
        return CandidateStatus.MANUAL_ONLY, "never auto-selected; request it by name"
    return CandidateStatus.RUNNER_UP, ""


def _overlay_exclusion(name: str, overlay: EnvOverlay) -> str | None:
    for disabled, why in overlay.disable:
        if disabled == name:
            return f"disabled by {why} (compat)"
    if overlay.only is not None and name not in overlay.only:
        return f"not in {', '.join(overlay.only)} ({overlay.only_message.split(',')[0]})"
    return None
