"""Build one device's ranking from many recorded ``moe-core bench --json`` documents.

Each document's cases give, per token count, the registered backends whose rows passed the
correctness gate, fastest first (as ``moe-core bench --write-ranking`` ranks them). For each
(layer shape, scheme, token count) one run decides: the run that ranked the most backends other
than the reference, the newest among those. So every entry compares only backends timed in the
same run, and a backend only some runs had (a provider not installed in later runs) keeps the
comparison from the newest run that had it. Buckets are then cut between the chosen token counts
as ``moe-core bench`` cuts them. ``benchmarks/ship_ranking.py`` writes the result to
``moe_core/rankings/<device-slug>.json``.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Iterable

from moe_core.ranking import MeasuredWith, Ranking, RankingEntry, ShapeKey, bounds
from moe_core.reference.kernel import BACKEND_NAME as REFERENCE


@dataclass(frozen=True)
class Point:
    """One run's order at one (shape, scheme, token count)."""

    shape: ShapeKey
    tokens: int
    order: tuple[str, ...]
    date: str
    versions: tuple[tuple[str, str], ...]
    where: str

    @property
    def weight(self) -> tuple[int, str]:
        """What decides between runs: backends compared other than the reference, then the date."""
        return sum(name != REFERENCE for name in self.order), self.date


def points(doc: Any, device: str, allowed: frozenset[str], where: str = "") -> list[Point]:
    """The points of one bench document measured on ``device``, ranking only ``allowed`` backends ([] for other documents)."""
    if not isinstance(doc, dict) or not isinstance(doc.get("cases"), list):
        return []
    env = doc.get("environment") or {}
    if env.get("gpu") != device:
        return []
    versions = tuple(sorted((k, v) for k, v in env.items() if k not in ("python", "date", "gpu") and isinstance(v, str)))
    out = []
    for case in doc["cases"]:
        layer = case["layer"]
        shape = (layer["num_experts"], layer["top_k"], layer["hidden_size"], layer["intermediate_size"], layer["dtype"], case["scheme"])
        ranked = [r for r in case["rows"] if r["status"] == "ok" and r["backend"] in allowed
                  and (r["kind"] == "backend" or r["backend"] == REFERENCE)]
        for tokens in sorted({r["tokens"] for r in ranked}):
            order = tuple(r["backend"] for r in sorted((r for r in ranked if r["tokens"] == tokens), key=lambda r: r["time_s"]))
            out.append(Point(shape, tokens, order, env.get("date", ""), versions, where))
    return out


def deciding(all_points: Iterable[Point]) -> dict[tuple[ShapeKey, int], Point]:
    """The deciding point per (shape, token count): most backends other than the reference, then the newest."""
    best: dict[tuple[ShapeKey, int], Point] = {}
    for p in all_points:
        kept = best.get((p.shape, p.tokens))
        if kept is None or p.weight > kept.weight:
            best[(p.shape, p.tokens)] = p
    return best


def merge(all_points: Iterable[Point], device: str, command: str) -> Ranking:
    """One entry per (shape, scheme, token count), from the deciding run (module docstring); buckets between the counts."""
    best = deciding(all_points)
    entries = []
    for shape in sorted({shape for shape, _ in best}):
        counts = sorted(t for s, t in best if s == shape)
        for tokens, (lo, hi) in zip(counts, bounds(counts)):
            entries.append(RankingEntry(*shape, lo, hi, best[(shape, tokens)].order))
    newest = max(best.values(), key=lambda p: p.date, default=None)
    measured = MeasuredWith(newest.versions, newest.date, command) if newest is not None else MeasuredWith(command=command)
    return Ranking(device, tuple(entries), measured)
