"""The autotune cache: one ranking file per device under :func:`moe_core.user_dirs.cache_dir`.

``<cache dir>/autotune/<device-slug>.json`` holds a ``moe-core-ranking/1`` document written by
``moe-core tune`` and by autotuning at run time (``MOE_CORE_AUTOTUNE=1``). It is read once per
process (and again before each autotuning, so entries other processes wrote are reused), never
per selection. Writers take an exclusive lock on ``<file>.lock``, re-read the file, merge their
entries in (a new entry replaces one for the same shape and token bucket), write a temporary file
and ``os.replace`` it: concurrent writers never lose each other's entries and a reader never sees
half a file.
"""

from __future__ import annotations

import contextlib
import itertools
import json
import os
import tempfile
import threading
from dataclasses import dataclass
from pathlib import Path
from typing import Iterator, Mapping, Sequence

from moe_core.errors import RankingFileError
from moe_core.ranking import MeasuredWith, Ranking, RankingEntry, device_slug
from moe_core.user_dirs import CACHE_DIR, cache_dir

try:
    import fcntl
except ImportError:  # not POSIX: re-read-merge and os.replace still keep the file whole
    fcntl = None  # type: ignore[assignment]


class AutotuneCacheError(RankingFileError):
    """The autotune cache file cannot be used; the message names the file and what to do."""

    def __init__(self, path: Path, problem: str):
        super().__init__(f"{path}: the autotune cache is unusable ({problem}). Delete the file: it only holds measurements, "
                         f"which `moe-core tune` or MOE_CORE_AUTOTUNE=1 measure again")
        self.path = path


def cache_file(device_name: str, environ: Mapping[str, str] | None = None) -> Path:
    """Where the autotune cache of ``device_name`` lives."""
    return cache_dir(environ) / "autotune" / f"{device_slug(device_name) or 'unknown-device'}.json"


def read(path: Path) -> Ranking | None:
    """The cache at ``path`` (None when there is none yet); :class:`AutotuneCacheError` when it is corrupt."""
    try:
        return Ranking.load(path)
    except RankingFileError as exc:
        if not path.exists():
            return None
        raise AutotuneCacheError(path, str(exc).removeprefix(f"{path}: ")) from None


@contextlib.contextmanager
def _locked(path: Path) -> Iterator[None]:
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(f"{path}.lock", "a") as lock:
        if fcntl is not None:
            fcntl.flock(lock, fcntl.LOCK_EX)
        try:
            yield
        finally:
            if fcntl is not None:
                fcntl.flock(lock, fcntl.LOCK_UN)


def merge(old: Ranking | None, device_name: str, entries: Sequence[RankingEntry], measured_with: MeasuredWith) -> Ranking:
    """``old`` with ``entries`` added; a new entry replaces an old one for the same shape and token bucket."""
    kept = {(e.shape, e.tokens_min, e.tokens_max): e for e in (old.entries if old is not None else ())}
    kept.update({(e.shape, e.tokens_min, e.tokens_max): e for e in entries})
    return Ranking(device_name, tuple(kept[k] for k in sorted(kept)), measured_with)


def write(path: Path, device_name: str, entries: Sequence[RankingEntry], measured_with: MeasuredWith) -> Ranking:
    """Merge ``entries`` into the file under its lock (temporary file, then ``os.replace``); return what was written."""
    with _locked(path):
        merged = merge(read(path), device_name, entries, measured_with)
        fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", dir=path.parent)
        try:
            with os.fdopen(fd, "w") as fh:
                json.dump(merged.to_dict(), fh, indent=1)
            os.replace(tmp, path)
        except BaseException:
            with contextlib.suppress(OSError):
                os.unlink(tmp)
            raise
    return merged


_generation = itertools.count(1)
_current = 0


def generation() -> int:
    """A number that changes whenever any store's ranking does (memoized lookups key on it)."""
    return _current


@dataclass
class Store:
    """This process's view of one device's cache; ``generation`` changes whenever ``ranking`` does."""

    device_name: str
    path: Path
    ranking: Ranking | None = None
    generation: int = 0

    def reload(self) -> None:
        """Read the file again (entries other processes wrote)."""
        self._set(read(self.path))

    def add(self, entries: Sequence[RankingEntry], measured_with: MeasuredWith) -> None:
        """Write ``entries`` (merged with what the file holds now) and keep the result."""
        self._set(write(self.path, self.device_name, entries, measured_with))

    def _set(self, ranking: Ranking | None) -> None:
        global _current
        self.ranking = ranking
        self.generation = _current = next(_generation)


_stores: dict[tuple[str, str | None], Store] = {}
_lock = threading.Lock()


def store(device_name: str, environ: Mapping[str, str]) -> Store:
    """The cache store of ``device_name`` (read from disk the first time only). ``environ`` may set ``MOE_CORE_CACHE_DIR``;
    without it the default directory comes from the process environment."""
    key = (device_name, environ.get(CACHE_DIR))
    found = _stores.get(key)
    if found is not None:
        return found
    with _lock:
        found = _stores.get(key)
        if found is None:
            found = Store(device_name, cache_file(device_name, environ if key[1] else None))
            found.reload()
            _stores[key] = found
    return found


def forget() -> None:
    """Drop every store, so the next use reads the files again (tests, tools)."""
    global _current
    with _lock:
        _stores.clear()
        _current = next(_generation)
