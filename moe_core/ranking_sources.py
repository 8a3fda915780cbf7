"""Which measured rankings are in force, in what order, and which one decides for a layer.

Precedence, highest first (docs/ranking.md):

1. the user's ranking: :func:`moe_core.ranking.use_ranking`, else ``MOE_CORE_RANKING_FILE``;
2. the autotune cache of this device (``moe-core tune``, ``MOE_CORE_AUTOTUNE=1``; :mod:`moe_core.autotune_cache`);
3. rankings contributed by plugins (the ``moe_core_rankings`` hook) for this device;
4. the ranking shipped with moe-core for this device (``moe_core/rankings/<device-slug>.json``).

Explicit requests (``moe_backend``, ``MOE_CORE_BACKEND``) rank above all of them and the static
priority below: the resolver applies those. The first source with an entry for the layer and token
count decides; sources without one are skipped. A ranking other than the user's is used only on
the device it was measured on (``Platform.device_name``, simulated platforms included).

The pieces are generic over what is ranked: anything with ``entries[i].order`` and
``entry_for(key, tokens)`` can stand in for :class:`~moe_core.ranking.Ranking`, so a ranking of
dispatchers can reuse :class:`RankingSource`, :func:`first_measurement` and the same precedence.
"""

from __future__ import annotations

import enum
import functools
import importlib.metadata
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Hashable, Iterable, Mapping, Sequence

from moe_core import autotune_cache, ranking
from moe_core import env as env_vars
from moe_core.ranking import Ranking, device_slug, shape_key

SHIPPED_DIR = Path(__file__).parent / "rankings"


class SourceKind(enum.Enum):
    """Where a ranking comes from, in precedence order (the first decides)."""

    USER = "user"  # moe_core.ranking.use_ranking() or MOE_CORE_RANKING_FILE
    AUTOTUNE = "autotune"  # the per-device autotune cache
    PLUGIN = "plugin"  # a plugin's moe_core_rankings hook
    SHIPPED = "shipped"  # moe_core/rankings/, package data


@dataclass(frozen=True)
class RankingSource:
    """One ranking in force and where it came from (``label`` is what ``explain`` and ``doctor`` print)."""

    kind: SourceKind
    label: str
    ranking: Any  # a Ranking, or anything with the same entry_for / entries / measured_with

    def describe(self) -> str:
        """``shipped ranking for NVIDIA H100 80GB HBM3, 2026-11-28`` (the date when the ranking records one)."""
        date = self.ranking.measured_with.date[:10]
        return f"{self.label}, {date}" if date else self.label

    @functools.cached_property
    def version_note(self) -> str:
        """Installed versions that differ from those the ranking was measured with ('' when none do or none were recorded)."""
        names = [name for name, _ in self.ranking.measured_with.versions]
        differ = self.ranking.measured_with.differences({name: installed_version(name) for name in names})
        return f"installed versions differ: {', '.join(differ)}; the ranking is used all the same" if differ else ""


@dataclass(frozen=True)
class Measurement:
    """The entry that decides: its order (fastest first), the source and the entry's index in it."""

    order: tuple[str, ...]
    source: RankingSource
    entry: int

    def describe(self) -> str:
        """``measured: <source>`` plus the version note, for ``explain``."""
        note = self.source.version_note
        return f"measured: {self.source.describe()}" + (f"; {note}" if note else "")


def first_measurement(sources: Iterable[RankingSource], key: Hashable, tokens: int) -> Measurement | None:
    """The entry of the first source (in precedence order) measured for ``key`` at ``tokens``, or None."""
    for source in sources:
        index = source.ranking.entry_for(key, tokens)
        if index is not None:
            return Measurement(source.ranking.entries[index].order, source, index)
    return None


@functools.lru_cache(maxsize=None)
def installed_version(name: str) -> str | None:
    """The installed version of an import package (torch's ``__version__``, ``cuda``: the CUDA torch was built with;
    else the package's distribution's), None if absent."""
    if name in ("torch", "cuda"):
        import torch

        return torch.__version__ if name == "torch" else torch.version.cuda
    try:
        return importlib.metadata.version(name)  # the distribution is usually named as the package: no scan
    except importlib.metadata.PackageNotFoundError:
        pass
    for dist in importlib.metadata.packages_distributions().get(name, ()):
        try:
            return importlib.metadata.version(dist)
        except importlib.metadata.PackageNotFoundError:
            continue
    return None


@functools.lru_cache(maxsize=None)
def shipped(device_name: str) -> RankingSource | None:
    """The ranking moe-core ships for this device, if any (read once per process)."""
    path = SHIPPED_DIR / f"{device_slug(device_name)}.json" if device_name else None
    if path is None or not path.is_file():
        return None
    return RankingSource(SourceKind.SHIPPED, f"shipped ranking for {device_name}", Ranking.load(path))


def _user(path_from_env: str | None) -> RankingSource | None:
    api = ranking.api_ranking()
    if api is not None:
        return RankingSource(SourceKind.USER, "moe_core.ranking.use_ranking()", api)
    if path_from_env:
        return RankingSource(SourceKind.USER, f"{env_vars.RANKING_FILE} {path_from_env}", ranking.load(path_from_env))
    return None


def _plugin_sources(contributed: Sequence[tuple[str, Any]], device_name: str) -> list[RankingSource]:
    return [RankingSource(SourceKind.PLUGIN, f"ranking of plugin {plugin} for {device_name}", r)
            for plugin, r in contributed if r.device == device_name]


_cache: dict[tuple, tuple[RankingSource, ...]] = {}


def state(snap: tuple[tuple[str, str], ...]) -> tuple[int, int]:
    """A key that changes whenever the rankings in force may have (the user's ranking object, the autotune caches);
    cheap: no file is read, except a ``stat`` of ``MOE_CORE_RANKING_FILE`` when it is set (an edited file is read again)."""
    user = ranking.api_ranking()
    if user is None:
        path = next((value for name, value in snap if name == env_vars.RANKING_FILE), None)
        user = ranking.load(path) if path else None
    return id(user), autotune_cache.generation()


def measurement(config, weight_key, activation_key, device_name: str, snap: tuple[tuple[str, str], ...], registry,
                tokens: int) -> Measurement | None:
    """The measurement that decides for this layer at ``tokens``: :func:`first_measurement` over :func:`in_force`."""
    sources = in_force(device_name, dict(snap), registry)
    return first_measurement(sources, shape_key(config, weight_key, activation_key), tokens)


def in_force(device_name: str, environ: Mapping[str, str], registry) -> tuple[RankingSource, ...]:
    """Every ranking in force for ``device_name``, highest precedence first (memoized: no file is read per call).

    ``environ``: the selection's environment (``MOE_CORE_RANKING_FILE``, ``MOE_CORE_CACHE_DIR``);
    ``registry``: where plugin-contributed rankings were collected.
    """
    user = _user(environ.get(env_vars.RANKING_FILE))
    tuned = autotune_cache.store(device_name, environ)
    key = (device_name, id(user.ranking) if user else None, user.label if user else None, tuned.path, tuned.generation,
           registry.id, registry.version)
    hit = _cache.get(key)
    if hit is not None:
        return hit
    sources = [user] if user else []
    if tuned.ranking is not None:
        sources.append(RankingSource(SourceKind.AUTOTUNE, f"autotune cache {tuned.path}", tuned.ranking))
    sources += _plugin_sources(registry.rankings, device_name)
    ship = shipped(device_name)
    if ship is not None:
        sources.append(ship)
    if len(_cache) > 64:
        _cache.clear()
    _cache[key] = result = tuple(sources)
    return result
