"""Where moe-core writes what a user produces: tuned launch configurations, autotune caches.

Nothing is ever written into an installed package (``pip uninstall`` would leave it behind, and
site-packages may be read-only). Everything goes under one per-user directory:

1. ``$MOE_CORE_CACHE_DIR`` when set (must be an absolute path);
2. else ``$XDG_CACHE_HOME/moe-core`` when ``XDG_CACHE_HOME`` is set;
3. else ``~/.cache/moe-core``.

Readers look there first and then at the data a package ships, so a user's own measurement
overrides a shipped one. docs/environment.md documents the variable.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Mapping

from moe_core.env import CACHE_DIR
from moe_core.errors import InvalidEnvironmentError

__all__ = ["CACHE_DIR", "cache_dir", "cache_path"]


def cache_dir(environ: Mapping[str, str] | None = None) -> Path:
    """The per-user directory for files moe-core writes (not created here)."""
    environ = os.environ if environ is None else environ
    chosen = environ.get(CACHE_DIR, "").strip()
    if chosen:
        path = Path(chosen).expanduser()
        if not path.is_absolute():
            raise InvalidEnvironmentError(CACHE_DIR, chosen, "not an absolute path; name a directory such as /home/me/.cache/moe-core")
        return path
    xdg = environ.get("XDG_CACHE_HOME", "").strip()
    base = Path(xdg) if xdg and Path(xdg).is_absolute() else Path.home() / ".cache"
    return base / "moe-core"


def cache_path(*parts: str, environ: Mapping[str, str] | None = None, create: bool = False) -> Path:
    """A path under :func:`cache_dir`; with ``create`` its parent directory is made."""
    path = cache_dir(environ).joinpath(*parts)
    if create:
        path.parent.mkdir(parents=True, exist_ok=True)
    return path
