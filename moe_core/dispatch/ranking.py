"""Measured dispatcher rankings: which dispatcher ran an expert-parallel layer fastest, per world size,
layer shape and tokens per rank.

Written by ``benchmarks/ep_gpu.py --write-dispatch-ranking FILE`` (the whole layer — dispatch, experts,
combine — timed eagerly for every dispatcher, ranks aligned); read by :func:`moe_core.select_pair`
from :func:`use_dispatch_ranking`, else ``MOE_CORE_DISPATCH_RANKING_FILE``, else the ranking shipped for
the platform's device (``moe_core/rankings/dispatch/<device-slug>.json``). With a ranking and a token
count, the pair's dispatcher is the first *eligible* one in the measured order of the entry for the
layer's world size and shape whose measured token count is nearest (geometrically) to the count; an
explicit request always wins, and without a matching entry the priorities decide. Format in
docs/expert-parallel.md.
"""

from __future__ import annotations

import functools
import json
import math
import os
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any, Mapping

from moe_core import env as env_vars
from moe_core.config import MoEConfig
from moe_core.errors import RankingFileError
from moe_core.ranking import device_slug

FORMAT = "moe-core-dispatch-ranking/1"
RANKING_FILE = env_vars.DISPATCH_RANKING_FILE
#: Dispatcher rankings shipped with moe-core, one per device, used on the device they name.
SHIPPED_DIR = Path(__file__).resolve().parents[1] / "rankings" / "dispatch"

_FIELDS = {"world_size": int, "num_experts": int, "top_k": int, "hidden_size": int, "dtype": str, "tokens": int,
           "order": list, "times_us": list}


@dataclass(frozen=True)
class DispatchRankingEntry:
    """Dispatchers in measured order (fastest first) for one world size, layer shape and tokens per rank;
    ``times_us`` holds each one's eager layer time, in the same order."""

    world_size: int
    num_experts: int
    top_k: int
    hidden_size: int
    dtype: str
    tokens: int
    order: tuple[str, ...]
    times_us: tuple[float, ...]

    def fits(self, config: MoEConfig) -> bool:
        return ((self.world_size, self.num_experts, self.top_k, self.hidden_size, self.dtype)
                == (config.parallel.ep_size, config.num_experts, config.top_k, config.hidden_size, config.dtype_name))

    def describe(self) -> str:
        """``naive 412 µs, packed_all_to_all 455 µs`` (measured eager layer times)."""
        return ", ".join(f"{name} {us:.0f} µs" for name, us in zip(self.order, self.times_us))


@dataclass(frozen=True)
class DispatchRanking:
    """A validated dispatcher ranking file: the device it was measured on and its entries."""

    device: str
    entries: tuple[DispatchRankingEntry, ...]

    def entry_for(self, config: MoEConfig, tokens: int) -> DispatchRankingEntry | None:
        """The entry of this layer's world size and shape measured at the token count nearest to ``tokens``
        (ratio-wise; ties to the smaller count); None when no entry has this world size and shape."""
        fitting = [e for e in self.entries if e.fits(config)]
        if not fitting or tokens < 1:
            return None
        return min(fitting, key=lambda e: (abs(math.log(e.tokens / tokens)), e.tokens))

    def to_dict(self) -> dict[str, Any]:
        return {"format": FORMAT, "device": self.device,
                "entries": [{**asdict(e), "order": list(e.order), "times_us": list(e.times_us)} for e in self.entries]}

    def save(self, path: str | os.PathLike) -> None:
        Path(path).write_text(json.dumps(self.to_dict(), indent=1))

    @classmethod
    def from_dict(cls, doc: Any, where: str = "dispatch ranking") -> "DispatchRanking":
        """Validate a parsed document; every error names the file, the entry and the field."""
        if not isinstance(doc, dict) or doc.get("format") != FORMAT:
            raise RankingFileError(f"{where}: must be a JSON object with 'format': {FORMAT!r}; write it with "
                                   "`benchmarks/ep_gpu.py --write-dispatch-ranking`")
        if not isinstance(doc.get("device"), str) or not isinstance(doc.get("entries"), list):
            raise RankingFileError(f"{where}: needs 'device' (a string) and 'entries' (a list)")
        entries = []
        for i, item in enumerate(doc["entries"]):
            if not isinstance(item, dict) or set(_FIELDS) - set(item):
                raise RankingFileError(f"{where}: entries[{i}] must be an object with {', '.join(_FIELDS)}")
            for name, kind in _FIELDS.items():
                if not isinstance(item[name], kind) or isinstance(item[name], bool):
                    raise RankingFileError(f"{where}: entries[{i}].{name} must be {kind.__name__}, got {item[name]!r}")
            order, times = item["order"], item["times_us"]
            if not order or len(set(order)) != len(order) or not all(isinstance(n, str) and n for n in order):
                raise RankingFileError(f"{where}: entries[{i}].order must be a non-empty list of distinct dispatcher names")
            if len(times) != len(order) or not all(isinstance(t, (int, float)) and not isinstance(t, bool) and t > 0 for t in times):
                raise RankingFileError(f"{where}: entries[{i}].times_us must hold one positive time per name of 'order'")
            if item["world_size"] < 2 or item["tokens"] < 1:
                raise RankingFileError(f"{where}: entries[{i}] needs world_size >= 2 and tokens >= 1")
            entries.append(DispatchRankingEntry(**{**{k: item[k] for k in _FIELDS}, "order": tuple(order),
                                                   "times_us": tuple(float(t) for t in times)}))
        return cls(doc["device"], tuple(entries))

    @classmethod
    def load(cls, path: str | os.PathLike) -> "DispatchRanking":
        """The validated file at ``path`` (parsed again only when the file changes)."""
        try:
            mtime = os.stat(path).st_mtime
        except OSError as exc:
            raise RankingFileError(f"{path}: cannot read the dispatcher ranking ({exc.strerror}); fix or unset {RANKING_FILE}") from None
        return _parse(str(path), mtime)


@functools.lru_cache(maxsize=8)
def _parse(path: str, mtime: float) -> DispatchRanking:
    """The file's ranking; ``mtime`` keys the cache, so an edited file is read again."""
    text = Path(path).read_text()
    try:
        return DispatchRanking.from_dict(json.loads(text), path)
    except json.JSONDecodeError as exc:
        raise RankingFileError(f"{path}: not valid JSON ({exc.msg} at line {exc.lineno})") from None


_active: DispatchRanking | None = None


def use_dispatch_ranking(ranking: DispatchRanking | None) -> None:
    """Make ``ranking`` the process-wide dispatcher ranking (None: only MOE_CORE_DISPATCH_RANKING_FILE, if set)."""
    global _active
    _active = ranking


def active(environ: Mapping[str, str], device_name: str = "") -> DispatchRanking | None:
    """The dispatcher ranking in force: one set by :func:`use_dispatch_ranking`, else the environment's file, else
    the one shipped for ``device_name`` (the platform's device; a simulated platform has its preset's name)."""
    if _active is not None:
        return _active
    path = environ.get(RANKING_FILE, "").strip()
    return DispatchRanking.load(path) if path else shipped(device_name)


@functools.lru_cache(maxsize=None)
def shipped(device_name: str) -> DispatchRanking | None:
    """The dispatcher ranking moe-core ships for this device, if any (read once per process)."""
    path = SHIPPED_DIR / f"{device_slug(device_name)}.json" if device_name else None
    return DispatchRanking.load(path) if path is not None and path.is_file() else None


def ranking_from_times(device: str, measured: Mapping[tuple, Mapping[str, float]]) -> DispatchRanking:
    """A ranking from eager layer times: ``measured[(world_size, num_experts, top_k, hidden_size, dtype, tokens)]``
    maps each dispatcher that passed to its time in µs."""
    entries = []
    for key in sorted(measured):
        times = sorted(measured[key].items(), key=lambda item: item[1])
        if times:
            entries.append(DispatchRankingEntry(*key, tuple(n for n, _ in times), tuple(float(t) for _, t in times)))
    return DispatchRanking(device, tuple(entries))
