"""Measured rankings: which backend was fastest for a layer shape, scheme and token-count bucket.

Written by ``moe-core bench --write-ranking FILE``, ``moe-core tune`` (the autotune cache) and
``benchmarks/ship_ranking.py`` (the rankings shipped in ``moe_core/rankings/``). With a ranking in
force and a token count (``select(..., num_tokens=T)``, which :class:`~moe_core.layer.MoELayer`
passes at run time), the resolver picks the measured-fastest backend among the *eligible*
candidates (supported, allowed by policy and environment); outside every measured bucket, or when
none of the measured backends is eligible, the static priority decides. Which rankings are in force
and in what order: :mod:`moe_core.ranking_sources`. Format: docs/ranking.md.
"""

from __future__ import annotations

import functools
import json
import math
import os
import re
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any, Mapping, Sequence

from moe_core.config import MoEConfig
from moe_core.errors import RankingFileError
from moe_core.quant import QuantKey, scheme_for_keys

FORMAT = "moe-core-ranking/1"
#: Layer identity of an entry: (num_experts, top_k, hidden_size, intermediate_size, dtype, scheme).
ShapeKey = tuple[int, int, int, int, str, str]
_FIELDS = {"num_experts": int, "top_k": int, "hidden_size": int, "intermediate_size": int, "dtype": str, "scheme": str,
           "tokens_min": int, "tokens_max": int, "order": list}


@dataclass(frozen=True)
class RankingEntry:
    """Backends in measured order (fastest first) for one shape, scheme and token range (inclusive)."""

    num_experts: int
    top_k: int
    hidden_size: int
    intermediate_size: int
    dtype: str
    scheme: str
    tokens_min: int
    tokens_max: int
    order: tuple[str, ...]

    @property
    def shape(self) -> ShapeKey:
        return (self.num_experts, self.top_k, self.hidden_size, self.intermediate_size, self.dtype, self.scheme)


def shape_key(config: MoEConfig, weight_key: QuantKey | None, activation_key: QuantKey | None) -> ShapeKey | None:
    """The :data:`ShapeKey` of a layer, or None for a pair of keys that names no scheme (nothing is measured for it)."""
    sch = scheme_for_keys(weight_key, activation_key)
    if sch is None:
        return None
    return (config.num_experts, config.top_k, config.hidden_size, config.intermediate_size, config.dtype_name, sch.name)


@dataclass(frozen=True)
class MeasuredWith:
    """What a ranking was measured with: package versions, the date and the command that reproduces it.

    ``versions`` maps a distribution or module name (``torch``, ``triton``, a provider such as
    ``deep_gemm``) to its version. Every field is optional: files written before this record existed
    carry none of it.
    """

    versions: tuple[tuple[str, str], ...] = ()
    date: str = ""
    command: str = ""

    def __post_init__(self) -> None:
        object.__setattr__(self, "versions", tuple(sorted(self.versions)))

    def to_dict(self) -> dict[str, Any]:
        return {"versions": dict(self.versions), "date": self.date, "command": self.command}

    @classmethod
    def from_dict(cls, doc: Any, where: str) -> "MeasuredWith":
        if not isinstance(doc, dict):
            raise RankingFileError(f"{where}: 'measured_with' must be an object with 'versions', 'date' and 'command'")
        versions = doc.get("versions", {})
        if not isinstance(versions, dict) or not all(isinstance(k, str) and isinstance(v, str) for k, v in versions.items()):
            raise RankingFileError(f"{where}: measured_with.versions must map package names to version strings")
        for name in ("date", "command"):
            if not isinstance(doc.get(name, ""), str):
                raise RankingFileError(f"{where}: measured_with.{name} must be a string")
        return cls(tuple(versions.items()), doc.get("date", ""), doc.get("command", ""))

    def differences(self, installed: Mapping[str, str | None]) -> tuple[str, ...]:
        """``name X (measured with Y)`` for every recorded package whose installed version differs (None: not installed)."""
        out = []
        for name, measured in self.versions:
            if name in installed and installed[name] != measured:
                out.append(f"{name} {installed[name] or 'none'} (measured with {measured})")
        return tuple(out)


@dataclass(frozen=True)
class Ranking:
    """A validated ranking: per layer shape, scheme and token range, backends fastest first."""

    device: str
    entries: tuple[RankingEntry, ...]
    measured_with: MeasuredWith = field(default_factory=MeasuredWith)

    @functools.cached_property
    def _by_shape(self) -> dict[ShapeKey, tuple[tuple[int, int, int], ...]]:
        """Per shape, (tokens_min, tokens_max, entry index) in file order: a lookup is one dict access and a few comparisons."""
        by_shape: dict[ShapeKey, list[tuple[int, int, int]]] = {}
        for index, entry in enumerate(self.entries):
            by_shape.setdefault(entry.shape, []).append((entry.tokens_min, entry.tokens_max, index))
        return {shape: tuple(spans) for shape, spans in by_shape.items()}

    def entry_for(self, shape: ShapeKey | None, tokens: int) -> int | None:
        """Index of the first entry measured for this layer whose bucket holds ``tokens``, or None."""
        for lo, hi, index in self._by_shape.get(shape, ()) if shape is not None else ():
            if lo <= tokens <= hi:
                return index
        return None

    def order_for(self, config: MoEConfig, weight_key: QuantKey | None, activation_key: QuantKey | None, tokens: int) -> tuple[tuple[str, ...], int] | None:
        """(measured order, entry index) for this layer and token count, or None outside every bucket."""
        index = self.entry_for(shape_key(config, weight_key, activation_key), tokens)
        return None if index is None else (self.entries[index].order, index)

    def to_dict(self) -> dict[str, Any]:
        return {"format": FORMAT, "device": self.device, "measured_with": self.measured_with.to_dict(),
                "entries": [{**asdict(e), "order": list(e.order)} for e in self.entries]}

    def save(self, path: str | os.PathLike) -> None:
        Path(path).write_text(json.dumps(self.to_dict(), indent=1) + "\n")

    @classmethod
    def from_dict(cls, doc: Any, where: str = "ranking") -> "Ranking":
        """Validate a parsed document; every error names the file, the entry and the field."""
        if not isinstance(doc, dict):
            raise RankingFileError(f"{where}: the top level must be a JSON object with 'format', 'device' and 'entries'")
        if doc.get("format") != FORMAT:
            raise RankingFileError(f"{where}: 'format' must be {FORMAT!r}, got {doc.get('format')!r}; write the file with `moe-core bench --write-ranking`")
        if not isinstance(doc.get("device"), str):
            raise RankingFileError(f"{where}: 'device' must be a string naming the GPU the ranking was measured on")
        raw = doc.get("entries")
        if not isinstance(raw, list):
            raise RankingFileError(f"{where}: 'entries' must be a list")
        entries = []
        for i, item in enumerate(raw):
            if not isinstance(item, dict):
                raise RankingFileError(f"{where}: entries[{i}] must be an object")
            missing = sorted(set(_FIELDS) - set(item))
            if missing:
                raise RankingFileError(f"{where}: entries[{i}] lacks {', '.join(missing)}")
            for name, kind in _FIELDS.items():
                value = item[name]
                if not isinstance(value, kind) or isinstance(value, bool):
                    raise RankingFileError(f"{where}: entries[{i}].{name} must be {kind.__name__}, got {value!r}")
            if not 1 <= item["tokens_min"] <= item["tokens_max"]:
                raise RankingFileError(f"{where}: entries[{i}] needs 1 <= tokens_min <= tokens_max, got {item['tokens_min']}..{item['tokens_max']}")
            if not item["order"] or not all(isinstance(n, str) and n for n in item["order"]) or len(set(item["order"])) != len(item["order"]):
                raise RankingFileError(f"{where}: entries[{i}].order must be a non-empty list of distinct backend names")
            entries.append(RankingEntry(**{**{k: item[k] for k in _FIELDS}, "order": tuple(item["order"])}))
        measured_with = MeasuredWith.from_dict(doc["measured_with"], where) if "measured_with" in doc else MeasuredWith()
        return cls(doc["device"], tuple(entries), measured_with)

    @classmethod
    def load(cls, path: str | os.PathLike) -> "Ranking":
        try:
            text = Path(path).read_text()
        except OSError as exc:
            raise RankingFileError(f"{path}: cannot read the ranking file ({exc.strerror}); fix or unset MOE_CORE_RANKING_FILE") from None
        try:
            doc = json.loads(text)
        except json.JSONDecodeError as exc:
            raise RankingFileError(f"{path}: not valid JSON ({exc.msg} at line {exc.lineno})") from None
        return cls.from_dict(doc, str(path))


@functools.lru_cache(maxsize=8)
def _load_cached(path: str, mtime: float) -> Ranking:
    return Ranking.load(path)


def load(path: str) -> Ranking:
    """Load (cached until the file changes) and validate a ranking file."""
    try:
        mtime = os.stat(path).st_mtime
    except OSError as exc:
        raise RankingFileError(f"{path}: cannot read the ranking file ({exc.strerror}); fix or unset MOE_CORE_RANKING_FILE") from None
    return _load_cached(path, mtime)


def device_slug(device_name: str) -> str:
    """File-name form of a device name: ``NVIDIA H100 80GB HBM3`` -> ``nvidia-h100-80gb-hbm3``."""
    return re.sub(r"[^a-z0-9]+", "-", device_name.lower()).strip("-")


_active: Ranking | None = None


def use_ranking(ranking: Ranking | None) -> None:
    """Make ``ranking`` the user's process-wide ranking: it outranks MOE_CORE_RANKING_FILE and every other source
    (None: back to MOE_CORE_RANKING_FILE, if set)."""
    global _active
    _active = ranking


def api_ranking() -> Ranking | None:
    """The ranking set through :func:`use_ranking`, if any."""
    return _active


def bounds(tokens: Sequence[int]) -> list[tuple[int, int]]:
    """Inclusive token ranges per measured count: split at geometric midpoints, ends at the measured extremes."""
    ts = sorted(set(tokens))
    cuts = [math.floor(math.sqrt(a * b)) for a, b in zip(ts, ts[1:])]
    lows = [ts[0]] + [c + 1 for c in cuts]
    highs = cuts + [ts[-1]]
    return list(zip(lows, highs))


def _registered(row) -> bool:
    """Registered backends are ranked (the reference too, though the bench times it as a peer); other peers are not."""
    from moe_core.reference.kernel import BACKEND_NAME

    return row.kind == "backend" or row.backend == BACKEND_NAME


def ranking_from_results(results, measured_with: MeasuredWith = MeasuredWith()) -> Ranking:
    """Per (case, measured token count), the backends whose rows passed the correctness gate, fastest first."""
    entries = []
    device = results[0].device if results else ""
    for res in results:
        cfg = res.request.config
        counts = sorted({r.tokens for r in res.rows})
        for tokens, (lo, hi) in zip(counts, bounds(counts)):
            ok = sorted((r for r in res.rows if r.tokens == tokens and _registered(r) and r.status == "ok"), key=lambda r: r.time_s)
            if ok:
                entries.append(RankingEntry(cfg.num_experts, cfg.top_k, cfg.hidden_size, cfg.intermediate_size, cfg.dtype_name,
                                            res.request.scheme.name, lo, hi, tuple(r.backend for r in ok)))
    return Ranking(device, tuple(entries), measured_with)
