"""Environment variables that steer selection and plugin loading (all documented in docs/environment.md).

Values are parsed once per distinct snapshot of the relevant variables; names that must match
registered backends are checked against the registry by :meth:`EnvSettings.validate`, so an
invalid value is always an error that lists the valid ones, never silently ignored.
"""

from __future__ import annotations

import functools
import os
from dataclasses import dataclass
from typing import Mapping

from moe_core.errors import InvalidEnvironmentError
from moe_core.quant import QuantFamily

PREFIX = "MOE_CORE_"
BACKEND = "MOE_CORE_BACKEND"
DISABLE = "MOE_CORE_DISABLE"
ONLY = "MOE_CORE_ONLY"
PRIORITY = "MOE_CORE_PRIORITY"
PLUGINS_AUTOLOAD = "MOE_CORE_PLUGINS_AUTOLOAD"
PLUGINS_ALLOW = "MOE_CORE_PLUGINS_ALLOW"
PLUGINS_DENY = "MOE_CORE_PLUGINS_DENY"
FULL_CHECKS = "MOE_CORE_FULL_CHECKS"
RANKING_FILE = "MOE_CORE_RANKING_FILE"
COMPAT = "MOE_CORE_COMPAT"
DISPATCH = "MOE_CORE_DISPATCH"
DISPATCH_RANKING_FILE = "MOE_CORE_DISPATCH_RANKING_FILE"
AUTOTUNE = "MOE_CORE_AUTOTUNE"
#: Also where the autotune cache is read from (moe_core/autotune_cache.py), so it keys the selection cache.
CACHE_DIR = "MOE_CORE_CACHE_DIR"
#: The file of compiled Marlin MoE ops the marlin plugin loads (vLLM's _moe_C library); whether the file is
#: there decides whether `marlin` can run on this machine, so it keys the selection cache.
MARLIN_OPS_LIBRARY = "MOE_CORE_MARLIN_OPS_LIBRARY"
#: The file of compiled ops the vllm_cutlass plugin loads (vLLM's _C library, with the CUTLASS grouped fp8 GEMM);
#: whether it is there decides whether `vllm_cutlass` can run on this machine, so it keys the selection cache.
VLLM_CUTLASS_OPS_LIBRARY = "MOE_CORE_VLLM_CUTLASS_OPS_LIBRARY"

_TRUE = ("1", "true", "yes", "on")
_FALSE = ("0", "false", "no", "off")

#: Every variable that can change a selection: ours, then those read by compatibility modes.
VARIABLES: list[str] = [BACKEND, DISABLE, ONLY, PRIORITY, PLUGINS_AUTOLOAD, PLUGINS_ALLOW, PLUGINS_DENY, FULL_CHECKS, RANKING_FILE, COMPAT, DISPATCH,
                        DISPATCH_RANKING_FILE, AUTOTUNE, CACHE_DIR, MARLIN_OPS_LIBRARY, VLLM_CUTLASS_OPS_LIBRARY]


def snapshot(environ: Mapping[str, str] | None = None) -> tuple[tuple[str, str], ...]:
    """The (name, value) pairs of every set variable that can change a selection (cheap: a few lookups)."""
    if environ is None or environ is os.environ:
        raw = getattr(os.environ, "_data", None)
        if isinstance(raw, dict) and os.name == "posix":
            # Fast path on every cached selection: CPython keeps os.environ as a bytes dict on POSIX,
            # and Mapping.get on os.environ costs an encode plus a KeyError per unset variable.
            return tuple((k, raw[b].decode("utf-8", "surrogateescape")) for k, b in _ENCODED if b in raw)
        environ = os.environ
    return tuple((k, environ[k]) for k in VARIABLES if k in environ)


def _vllm_variables() -> list[str]:
    from moe_core.compat.vllm import VARIABLES as names

    return names


VARIABLES += _vllm_variables()
_ENCODED = [(k, k.encode()) for k in VARIABLES]


def register_variables(names: list[str]) -> None:
    """Add variables (read by a compatibility mode) to those that key the selection cache."""
    for name in names:
        if name not in VARIABLES:
            VARIABLES.append(name)
            _ENCODED.append((name, name.encode()))


#: Read by the set-up scripts and the test suite, never part of a selection.
SETUP_VARIABLES = ("MOE_CORE_TORCH", "MOE_CORE_VENV")


def unknown_variables(environ: Mapping[str, str] | None = None) -> list[str]:
    """MOE_CORE_* variables that moe-core does not read (typos), for a warning."""
    environ = os.environ if environ is None else environ
    return sorted(k for k in environ if k.startswith(PREFIX) and k not in VARIABLES and k not in SETUP_VARIABLES)


def parse_bool(variable: str, value: str) -> bool:
    text = value.strip().lower()
    if text in _TRUE:
        return True
    if text in _FALSE:
        return False
    raise InvalidEnvironmentError(variable, value, "not a boolean", _TRUE + _FALSE)


def _split(value: str) -> tuple[str, ...]:
    return tuple(part.strip().lower() for part in value.split(",") if part.strip())


@dataclass(frozen=True)
class Selector:
    """``TARGET[@QUANT_FAMILY]``: a backend name or backend family, optionally for one quant family."""

    target: str
    quant_family: QuantFamily | None = None

    @classmethod
    def parse(cls, variable: str, text: str) -> "Selector":
        target, _, fam = text.partition("@")
        if not target:
            raise InvalidEnvironmentError(variable, text, "an entry has no backend or family name before '@'")
        if not fam:
            return cls(target)
        try:
            return cls(target, QuantFamily(fam))
        except ValueError:
            raise InvalidEnvironmentError(
                variable, text, f"unknown quant family {fam!r}", (f.value for f in QuantFamily)
            ) from None

    def matches(self, name: str, family: str, quant: QuantFamily) -> bool:
        return self.target in (name, family) and self.quant_family in (None, quant)

    def __str__(self) -> str:
        return self.target if self.quant_family is None else f"{self.target}@{self.quant_family.value}"


@dataclass(frozen=True)
class EnvSettings:
    """Parsed selection and plugin-loading settings.

    Attributes:
        force: MOE_CORE_BACKEND, a backend to use as if explicitly requested.
        disable: MOE_CORE_DISABLE, selectors removed from automatic selection.
        only: MOE_CORE_ONLY, when set, automatic selection keeps only matching backends.
        priorities: MOE_CORE_PRIORITY, ``name=int`` overrides of backend priorities.
        autoload: MOE_CORE_PLUGINS_AUTOLOAD, load entry-point plugins (default true).
        allow: MOE_CORE_PLUGINS_ALLOW, when set, only these plugins (entry-point or distribution names) load.
        deny: MOE_CORE_PLUGINS_DENY, plugins never imported.
        full_checks: MOE_CORE_FULL_CHECKS, costly input checks (NaN/inf scans, id range on GPU).
        compat: MOE_CORE_COMPAT, ``"vllm"`` to read the vLLM variables of the seeds (docs/vllm-compat.md).
        dispatch: MOE_CORE_DISPATCH, a dispatcher to use in expert-parallel layers as if requested
            (docs/expert-parallel.md).
        autotune: MOE_CORE_AUTOTUNE, measure the eligible backends of a layer with no measured ranking
            on this device and cache the order (docs/ranking.md, moe_core/autotune.py).
    """

    force: str | None = None
    disable: tuple[Selector, ...] = ()
    only: tuple[Selector, ...] | None = None
    priorities: tuple[tuple[str, int], ...] = ()
    autoload: bool = True
    allow: tuple[str, ...] | None = None
    deny: tuple[str, ...] = ()
    full_checks: bool = False
    compat: str | None = None
    dispatch: str | None = None
    autotune: bool = False

    @classmethod
    def from_environ(cls, environ: Mapping[str, str] | None = None) -> "EnvSettings":
        return parse_snapshot(snapshot(environ))

    def excluded_by(self, name: str, family: str, quant: QuantFamily) -> str | None:
        """Why the environment removes this backend from automatic selection, or None."""
        for sel in self.disable:
            if sel.matches(name, family, quant):
                return f"disabled by {DISABLE} ({sel})"
        if self.only is not None and not any(sel.matches(name, family, quant) for sel in self.only):
            return f"not in {ONLY}={','.join(map(str, self.only))}"
        return None

    def validate(self, backend_names: set[str], families: set[str]) -> None:
        """Raise InvalidEnvironmentError for any name that matches no registered backend or family."""
        if self.force is not None and self.force not in backend_names:
            raise InvalidEnvironmentError(BACKEND, self.force, "no registered backend has this name", sorted(backend_names))
        targets = backend_names | families
        for variable, selectors in ((DISABLE, self.disable), (ONLY, self.only or ())):
            for sel in selectors:
                if sel.target not in targets:
                    raise InvalidEnvironmentError(variable, str(sel), "matches no registered backend or family", sorted(targets))
        for name, _ in self.priorities:
            if name not in backend_names:
                raise InvalidEnvironmentError(PRIORITY, name, "no registered backend has this name", sorted(backend_names))

    def validate_dispatch(self, dispatcher_names: set[str]) -> None:
        """Raise InvalidEnvironmentError when MOE_CORE_DISPATCH names no registered dispatcher."""
        if self.dispatch is not None and self.dispatch not in dispatcher_names:
            raise InvalidEnvironmentError(DISPATCH, self.dispatch, "no registered dispatcher has this name", sorted(dispatcher_names))


@functools.lru_cache(maxsize=64)
def parse_snapshot(snap: tuple[tuple[str, str], ...]) -> EnvSettings:
    env = dict(snap)
    priorities = []
    for item in _split(env.get(PRIORITY, "")):
        name, sep, value = item.partition("=")
        try:
            priorities.append((name.strip(), int(value)))
        except ValueError:
            raise InvalidEnvironmentError(PRIORITY, item, "entries must be NAME=INTEGER, e.g. triton=900") from None
        if not sep or not name.strip():
            raise InvalidEnvironmentError(PRIORITY, item, "entries must be NAME=INTEGER, e.g. triton=900")
    only = env.get(ONLY)
    allow = env.get(PLUGINS_ALLOW)
    force = env.get(BACKEND, "").strip().lower()
    dispatch = env.get(DISPATCH, "").strip().lower()
    return EnvSettings(
        force=None if force in ("", "auto") else force,
        disable=tuple(Selector.parse(DISABLE, s) for s in _split(env.get(DISABLE, ""))),
        only=None if only is None or not only.strip() else tuple(Selector.parse(ONLY, s) for s in _split(only)),
        priorities=tuple(priorities),
        autoload=parse_bool(PLUGINS_AUTOLOAD, env[PLUGINS_AUTOLOAD]) if PLUGINS_AUTOLOAD in env else True,
        allow=None if allow is None or not allow.strip() else _split(allow),
        deny=_split(env.get(PLUGINS_DENY, "")),
        full_checks=parse_bool(FULL_CHECKS, env[FULL_CHECKS]) if FULL_CHECKS in env else False,
        compat=_compat(env.get(COMPAT, "")),
        dispatch=None if dispatch in ("", "auto") else dispatch,
        autotune=parse_bool(AUTOTUNE, env[AUTOTUNE]) if AUTOTUNE in env else False,
    )


COMPAT_MODES = ("vllm",)


def _compat(value: str) -> str | None:
    mode = value.strip().lower()
    if mode in ("", "none", "off"):
        return None
    if mode not in COMPAT_MODES:
        raise InvalidEnvironmentError(COMPAT, value, "unknown compatibility mode", COMPAT_MODES)
    return mode
