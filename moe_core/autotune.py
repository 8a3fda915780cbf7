"""Autotuning: measure the eligible backends for a layer on this device when no ranking covers it.

Opt-in: ``MOE_CORE_AUTOTUNE=1`` or :func:`enable`. The first time a (layer shape, scheme, token
bucket) with no measurement in force is selected for on this machine (a real platform, not a
simulated one), every eligible backend is built for the layer, checked against the reference on
random inputs of the layer (as ``moe-core bench`` gates its rows), and timed on inputs of the
requested token count; the order is written to the device's autotune cache
(:mod:`moe_core.autotune_cache`) and decides from then on, in this process and in later ones.
``moe-core tune`` does the same ahead of time for a list of layers.

Bounds: timing stops starting new backends once :data:`BUDGET_S` seconds have passed (those left
are reported as not timed); the correctness check runs at most :data:`GATE_TOKENS` tokens, so the
slow reference never runs a large batch, and on a GPU the reference itself is timed only when no
other backend passed; nothing is measured while a CUDA graph is being captured
(the selection falls back to priority for that call and is not cached). Token buckets are powers
of two: a count T is measured as itself and stands for (2^(k-1), 2^k], the bucket holding it.
"""

from __future__ import annotations

import enum
import logging
import time
from dataclasses import dataclass, field
from datetime import datetime, timezone
from typing import Callable, Mapping, Sequence

import torch

from moe_core import autotune_cache
from moe_core.config import ActivationFormat
from moe_core.env import EnvSettings
from moe_core.numerics import relative_error, tolerance
from moe_core.platform import Platform
from moe_core.ranking import MeasuredWith, RankingEntry, shape_key
from moe_core.spec import SupportQuery

logger = logging.getLogger("moe_core")

#: Seconds of timing per (shape, token bucket): no backend is started after this.
BUDGET_S = 2.0
#: Tokens of the correctness check against the reference.
GATE_TOKENS = 64

_api: bool | None = None


def enable(on: bool = True) -> None:
    """Turn autotuning on (or off) for this process, whatever ``MOE_CORE_AUTOTUNE`` says."""
    global _api
    _api = on


def reset() -> None:
    """Back to ``MOE_CORE_AUTOTUNE`` deciding."""
    global _api
    _api = None


def api_state() -> bool | None:
    """What :func:`enable` set (None: the environment decides); part of the selection cache key."""
    return _api


def enabled(settings: EnvSettings) -> bool:
    """Whether autotuning is on: :func:`enable` if it was called, else ``MOE_CORE_AUTOTUNE``."""
    return settings.autotune if _api is None else _api


def bucket(tokens: int) -> tuple[int, int]:
    """The power-of-two token bucket holding ``tokens``: (2^(k-1) + 1, 2^k), and (1, 1) for one token."""
    if tokens < 1:
        raise ValueError(f"tokens must be >= 1, got {tokens}")
    high = 1 << (tokens - 1).bit_length()
    return (high // 2 + 1 if high > 1 else 1), high


class Outcome(enum.Enum):
    """What became of a backend during one tuning."""

    TIMED = "timed"
    FAILED = "failed"  # output differs from the reference
    ERROR = "error"  # raised
    REFUSED = "refused"  # check_shapes refused the input
    NOT_TIMED = "not timed"  # the time budget was spent before it started


@dataclass
class TuneResult:
    """The measured order (fastest first) and what happened to every backend."""

    tokens: int
    times: dict[str, float] = field(default_factory=dict)
    outcomes: dict[str, tuple[Outcome, str]] = field(default_factory=dict)
    elapsed_s: float = 0.0

    @property
    def order(self) -> tuple[str, ...]:
        return tuple(sorted(self.times, key=self.times.__getitem__))


def measured_with(command: str) -> MeasuredWith:
    """The versions and date recorded with an autotune measurement."""
    from moe_core.bench.report import provider_versions

    versions = {"torch": torch.__version__, **provider_versions()}
    try:
        import triton

        versions["triton"] = triton.__version__
    except ImportError:
        pass
    return MeasuredWith(tuple(sorted(versions.items())), datetime.now(timezone.utc).isoformat(timespec="seconds"), command)


def _device(platform: Platform) -> torch.device | None:
    if platform.is_cpu():
        return torch.device("cpu")
    if platform.is_cuda() or platform.is_rocm():
        return torch.device("cuda")
    return None


def measure(query: SupportQuery, backends: Sequence[str], tokens: int, registry, device: torch.device, *,
            budget_s: float | None = None, seed: int = 0) -> TuneResult:
    """Gate and time ``backends`` (names, in the order to try) for ``query``'s layer at ``tokens`` on ``device``;
    no backend is started after ``budget_s`` seconds (default :data:`BUDGET_S`)."""
    from moe_core.batched import dispatch
    from moe_core.bench.timing import Timer
    from moe_core.presets import random_inputs, random_layer
    from moe_core.quant import scheme_for_keys
    from moe_core.reference.kernel import BACKEND_NAME as REFERENCE, ReferenceKernel

    budget_s = BUDGET_S if budget_s is None else budget_s
    start = time.perf_counter()
    cfg, sch = query.config, scheme_for_keys(query.weight_key, query.activation_key)
    raw = random_layer(cfg, sch, device=device, seed=seed)
    gate = [random_inputs(cfg, min(tokens, GATE_TOKENS), device=device, seed=seed + 1)]
    timed = [random_inputs(cfg, tokens, device=device, seed=seed + 2)]
    if cfg.activation_format is ActivationFormat.BATCHED_EXPERTS:  # what an expert-parallel dispatch would hand over
        gate, timed = ([dispatch(x, r, cfg.local_num_experts)[:2] for x, r in inputs] for inputs in (gate, timed))
    oracle = ReferenceKernel(cfg, query.weight_key, query.activation_key)
    want = oracle.apply(gate[0][0], oracle.prepare_weights(raw), gate[0][1])
    tol = tolerance(query.activation_key, cfg.dtype)
    timer = Timer(device.type, warmup_ms=5.0, rep_ms=20.0, cpu_repeats=3)
    result = TuneResult(tokens)
    for name in sorted(backends, key=lambda n: n == REFERENCE):  # the reference last
        if time.perf_counter() - start > budget_s:
            result.outcomes[name] = (Outcome.NOT_TIMED, f"the {budget_s:g} s budget was spent")
            continue
        if name == REFERENCE and device.type != "cpu" and result.times:
            result.outcomes[name] = (Outcome.NOT_TIMED, "on a GPU the reference (the oracle) is timed only when no other backend passed")
            continue
        result.outcomes[name] = _time_one(registry.specs[name], query, raw, gate[0], timed[0], want, tol, timer, result)
    del raw
    result.elapsed_s = time.perf_counter() - start
    return result


def _time_one(spec, query, raw, gate, timed, want, tol, timer, result: TuneResult) -> tuple[Outcome, str]:
    try:
        kernel = spec.load_kernel()(query.config, query.weight_key, query.activation_key)
        weights = kernel.prepare_weights(raw)
        if not kernel.check_shapes(*timed).ok:
            return Outcome.REFUSED, "check_shapes refused the input"
        err = relative_error(kernel.apply(gate[0], weights, gate[1]), want)
        if not err <= tol:
            return Outcome.FAILED, f"output differs from the reference: rel err {err:.3g} > {tol:.3g}"
        result.times[spec.name] = timer.time(lambda: kernel.apply(timed[0], weights, timed[1]))
    except Exception as exc:  # noqa: BLE001 - a broken backend is an outcome, not a crash
        return Outcome.ERROR, f"{type(exc).__name__}: {exc}"
    return Outcome.TIMED, f"{result.times[spec.name] * 1e6:.1f} us"


def tune(query: SupportQuery, backends: Sequence[str], tokens: int, registry, *, environ: Mapping[str, str],
         command: str, budget_s: float | None = None) -> TuneResult:
    """Measure ``backends`` at ``tokens`` on this machine and write the order to the device's autotune cache."""
    device = _device(query.platform)
    if device is None:
        raise NotImplementedError(f"autotuning runs on CPUs and CUDA/ROCm GPUs, not on {query.platform.describe()}")
    result = measure(query, backends, tokens, registry, device, budget_s=budget_s)
    if result.order:
        key = shape_key(query.config, query.weight_key, query.activation_key)
        lo, hi = bucket(tokens)
        entry = RankingEntry(*key, lo, hi, result.order)
        autotune_cache.store(query.platform.device_name, environ).add([entry], measured_with(command))
    return result


class Miss(enum.Enum):
    """What autotuning did about a selection with no measurement."""

    TUNED = "tuned"  # the cache now has an entry: select again
    DEFERRED = "deferred"  # not now (a CUDA graph is being captured): do not cache the selection
    NOTHING = "nothing"  # nothing to measure here, or measuring failed


_given_up: set[tuple] = set()


def on_miss(query: SupportQuery, eligible: Sequence[str], tokens: int, registry, environ: Mapping[str, str],
            is_real: Callable[[Platform], bool]) -> Miss:
    """Called by the resolver when autotuning is on and no ranking covers the layer at ``tokens``."""
    key = shape_key(query.config, query.weight_key, query.activation_key)
    if key is None or not eligible or not is_real(query.platform) or _device(query.platform) is None:
        return Miss.NOTHING
    if torch.cuda.is_available() and torch.cuda.is_current_stream_capturing():
        return Miss.DEFERRED
    memo = (query.platform.device_name, key, bucket(tokens), tuple(eligible))
    if memo in _given_up:
        return Miss.NOTHING
    store = autotune_cache.store(query.platform.device_name, environ)
    store.reload()  # another process may have measured it meanwhile
    if store.ranking is not None and store.ranking.entry_for(key, tokens) is not None:
        return Miss.TUNED
    result = tune(query, eligible, tokens, registry, environ=environ, command="MOE_CORE_AUTOTUNE=1 (at selection)")
    logger.info("autotuned %s at %d tokens in %.2f s: %s", "/".join(map(str, key)), tokens, result.elapsed_s,
                ", ".join(f"{n} {o.value} ({why})" for n, (o, why) in result.outcomes.items()))
    if not result.order:
        _given_up.add(memo)
        return Miss.NOTHING
    return Miss.TUNED
