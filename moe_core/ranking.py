"""Measured rankings: which backend was fastest for a layer shape, scheme and token-count bucket.

Written by ``moe-core bench --write-ranking FILE``; loaded by the resolver from
``MOE_CORE_RANKING_FILE`` or :func:`use_ranking`. With a ranking and a token count
(``select(..., num_tokens=T)``, which :class:`~moe_core.layer.MoELayer` passes at run time), the
resolver picks the measured-fastest backend among the *eligible* candidates (supported, allowed by
policy and environment); outside every measured bucket, or when none of the measured backends is
eligible, the static priority decides. An explicit request always wins. Format: docs/ranking.md.
"""

from __future__ import annotations

import functools
import json
import math
import os
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any, Sequence

from moe_core.config import MoEConfig
from moe_core.errors import RankingFileError
from moe_core.quant import QuantKey, scheme_for_keys

FORMAT = "moe-core-ranking/1"
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

    def matches(self, config: MoEConfig, scheme: str, tokens: int) -> bool:
        return (
            (self.num_experts, self.top_k, self.hidden_size, self.intermediate_size, self.dtype, self.scheme)
            == (config.num_experts, config.top_k, config.hidden_size, config.intermediate_size, config.dtype_name, scheme)
            and self.tokens_min <= tokens <= self.tokens_max
        )


@dataclass(frozen=True)
class Ranking:
    """A validated ranking file."""

    device: str
    entries: tuple[RankingEntry, ...]

    def order_for(self, config: MoEConfig, weight_key: QuantKey | None, activation_key: QuantKey | None, tokens: int) -> tuple[tuple[str, ...], int] | None:
        """(measured order, entry index) for this layer and token count, or None outside every bucket."""
        sch = scheme_for_keys(weight_key, activation_key)
        if sch is None:
            return None
        for index, entry in enumerate(self.entries):
            if entry.matches(config, sch.name, tokens):
                return entry.order, index
        return None

    def to_dict(self) -> dict[str, Any]:
        return {"format": FORMAT, "device": self.device, "entries": [{**asdict(e), "order": list(e.order)} for e in self.entries]}

    def save(self, path: str | os.PathLike) -> None:
        Path(path).write_text(json.dumps(self.to_dict(), indent=1))

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
        return cls(doc["device"], tuple(entries))

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


_active: Ranking | None = None


def use_ranking(ranking: Ranking | None) -> None:
    """Make ``ranking`` the process-wide ranking (None: only MOE_CORE_RANKING_FILE, if set)."""
    global _active
    _active = ranking


def active(path_from_env: str | None) -> Ranking | None:
    """The ranking in force: one set through :func:`use_ranking`, else the environment's file."""
    if _active is not None:
        return _active
    return load(path_from_env) if path_from_env else None


def _bounds(tokens: Sequence[int]) -> list[tuple[int, int]]:
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


def ranking_from_results(results) -> Ranking:
    """Per (case, measured token count), the backends whose rows passed the correctness gate, fastest first."""
    entries = []
    device = results[0].device if results else ""
    for res in results:
        cfg = res.request.config
        counts = sorted({r.tokens for r in res.rows})
        for tokens, (lo, hi) in zip(counts, _bounds(counts)):
            ok = sorted((r for r in res.rows if r.tokens == tokens and _registered(r) and r.status == "ok"), key=lambda r: r.time_s)
            if ok:
                entries.append(RankingEntry(cfg.num_experts, cfg.top_k, cfg.hidden_size, cfg.intermediate_size, cfg.dtype_name,
                                            res.request.scheme.name, lo, hi, tuple(r.backend for r in ok)))
    return Ranking(device, tuple(entries))
