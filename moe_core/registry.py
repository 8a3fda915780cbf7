"""The registry: plugins found through entry points or registered in-process, isolated from each other.

A plugin that fails to import, whose hook raises, or that returns garbage is recorded (with its
distribution name, version and error), warned about once, shown by ``moe-core doctor``, and never
breaks selection among the others.
"""

from __future__ import annotations

import enum
import itertools
import logging
import os
import threading
from dataclasses import dataclass, replace
from importlib import metadata
from typing import Any, Iterable, Mapping

import pluggy

from moe_core import hookspecs
from moe_core import env as env_vars
from moe_core.dispatch.spec import DispatchSpec
from moe_core.env import EnvSettings
from moe_core.requirements import PluginRequirement, unmet
from moe_core.spec import BackendSpec, SupportQuery
from moe_core.support import Support

logger = logging.getLogger("moe_core")

ENTRY_POINT_GROUP = "moe_core.plugins"
IN_PROCESS = "<in-process>"
BUILTIN_PLUGIN = "reference"
BUILTIN_MODULE = "moe_core.reference.plugin"
#: Plugins that ship with the core, registered by every Registry(builtin=True): (name, module).
BUILTINS = ((BUILTIN_PLUGIN, BUILTIN_MODULE), ("torch_distributed", "moe_core.dispatch.builtin"))


@dataclass(frozen=True)
class _Kind:
    """One kind of declaration the registry keeps: experts backends or dispatchers."""

    label: str
    declare_hook: str
    supports_hook: str
    spec_type: type
    argument: str


BACKENDS = _Kind("backend", "moe_core_backends", "moe_core_supports", BackendSpec, "backend")
DISPATCHERS = _Kind("dispatcher", "moe_core_dispatchers", "moe_core_dispatch_supports", DispatchSpec, "dispatcher")
_KINDS = (BACKENDS, DISPATCHERS)


class PluginStatus(enum.Enum):
    LOADED = "loaded"
    FAILED = "failed"  # import or registration raised
    DENIED = "denied"  # MOE_CORE_PLUGINS_DENY: never imported
    NOT_ALLOWED = "not allowed"  # MOE_CORE_PLUGINS_ALLOW set and this plugin is not in it


@dataclass(frozen=True)
class PluginRecord:
    """One plugin as the registry saw it."""

    name: str
    distribution: str
    version: str
    status: PluginStatus
    error: str | None = None


@dataclass(frozen=True)
class PluginProblem:
    """A misbehaviour of a loaded plugin (hook raised, returned garbage, name clash)."""

    plugin: str
    distribution: str
    version: str
    stage: str
    message: str

    def __str__(self) -> str:
        return f"{self.plugin} ({self.distribution} {self.version}) [{self.stage}]: {self.message}"


_registry_ids = itertools.count(1)


class Registry:
    """Backends, dispatchers and the plugins that provide them.

    ``version`` changes whenever the set of plugins, backends or dispatchers changes, so that cached
    selections are never served from a stale registry.
    """

    def __init__(self, *, autoload: bool | None = None, environ: Mapping[str, str] | None = None, builtin: bool = True):
        self.id = next(_registry_ids)
        self.version = 0
        self._settings = EnvSettings.from_environ(environ)
        for name in env_vars.unknown_variables(environ):
            logger.warning("%s is set but moe-core does not read it; known variables: %s", name, ", ".join(env_vars.VARIABLES))
        self._pm = pluggy.PluginManager(hookspecs.PROJECT)
        self._pm.add_hookspecs(hookspecs)
        self._records: dict[str, PluginRecord] = {}
        self._declared: dict[_Kind, dict[str, tuple[Any, ...]]] = {kind: {} for kind in _KINDS}
        self._tables: dict[_Kind, dict[str, Any]] = {kind: {} for kind in _KINDS}
        self._problems: dict[tuple[str, str, str], PluginProblem] = {}
        self._unmet: dict[str, tuple[str, ...]] = {}  # plugin -> why its required sibling plugins are missing
        self._rankings: dict[str, tuple[Any, ...]] = {}
        self._lock = threading.RLock()
        if builtin:
            import importlib

            for name, module in BUILTINS:
                self.register(importlib.import_module(module), name=name, distribution="moe-core", version=_dist_version("moe-core"))
        if self._settings.autoload if autoload is None else autoload:
            self.load_entry_points()

    # ------------------------------------------------------------------ loading
    def load_entry_points(self) -> None:
        """Import and register every plugin of the ``moe_core.plugins`` entry-point group."""
        for ep in sorted(_entry_points(), key=lambda e: e.name):
            dist = ep.dist.metadata["Name"] if ep.dist is not None else "?"
            version = ep.dist.version if ep.dist is not None else "?"
            if ep.name in self._records:
                continue
            status = self._filter(ep.name, dist)
            if status is not None:
                self._records[ep.name] = PluginRecord(ep.name, dist, version, status)
                continue
            try:
                obj = ep.load()
            except Exception as exc:  # noqa: BLE001 - isolation is the point
                self._fail(ep.name, dist, version, "import", exc)
                continue
            self.register(obj, name=ep.name, distribution=dist, version=version)

    def _filter(self, name: str, dist: str) -> PluginStatus | None:
        names = {name.lower(), dist.lower()}
        if names & set(self._settings.deny):
            return PluginStatus.DENIED
        if self._settings.allow is not None and not names & set(self._settings.allow):
            return PluginStatus.NOT_ALLOWED
        return None

    def register(self, plugin: Any, *, name: str, distribution: str = IN_PROCESS, version: str = "") -> None:
        """Register a plugin object (a module or any object with ``@hookimpl`` functions)."""
        with self._lock:
            if name in self._records and self._records[name].status is PluginStatus.LOADED:
                raise ValueError(f"a plugin named {name!r} is already registered; unregister it first")
            try:
                self._pm.register(plugin, name=name)
            except Exception as exc:  # noqa: BLE001
                self._fail(name, distribution, version, "register", exc)
                return
            self._records[name] = PluginRecord(name, distribution, version, PluginStatus.LOADED)
            for kind in _KINDS:
                self._declared[kind][name] = self._collect_specs(kind, name, distribution, version)
            self._unmet[name] = self._collect_unmet(name, distribution, version)
            self._rankings[name] = self._collect_rankings(name, distribution, version)
            self._rebuild()

    def unregister(self, name: str) -> None:
        """Remove a plugin and its backends."""
        with self._lock:
            if name not in self._records:
                raise KeyError(f"no plugin named {name!r}; registered: {', '.join(sorted(self._records))}")
            if self._pm.has_plugin(name):
                self._pm.unregister(name=name)
            del self._records[name]
            for declared in self._declared.values():
                declared.pop(name, None)
            self._unmet.pop(name, None)
            self._rankings.pop(name, None)
            self._problems = {k: v for k, v in self._problems.items() if v.plugin != name}
            self._rebuild()

    def _collect_specs(self, kind: _Kind, name: str, dist: str, version: str) -> tuple[Any, ...]:
        return tuple(replace(spec, plugin=name) for spec in self._declarations(kind.declare_hook, kind.spec_type, name, dist, version))

    def _collect_unmet(self, name: str, dist: str, version: str) -> tuple[str, ...]:
        """Why the plugin's ``moe_core_requires`` siblings that do not import here are missing; each is also a problem."""
        reasons = unmet(self._declarations("moe_core_requires", PluginRequirement, name, dist, version))
        for reason in reasons:
            self._problem(name, dist, version, "moe_core_requires", reason)
        return reasons

    def _declarations(self, hook: str, item_type: type, name: str, dist: str, version: str) -> list[Any]:
        """What plugin ``name``'s implementations of the declaring ``hook`` return, keeping the ``item_type`` items;
        a hook that raises or returns anything else is a problem."""
        impls = [i for i in getattr(self._pm.hook, hook).get_hookimpls() if i.plugin_name == name]
        declared: list[Any] = []
        for impl in impls:
            try:
                returned = impl.function()
            except Exception as exc:  # noqa: BLE001
                self._problem(name, dist, version, hook, f"raised {type(exc).__name__}: {exc}")
                continue
            if returned is None:
                continue
            items = returned if isinstance(returned, (list, tuple)) else [returned]
            for item in items:
                if not isinstance(item, item_type):
                    self._problem(name, dist, version, hook, f"returned {type(item).__name__} {item!r:.80}, not a {item_type.__name__}")
                    continue
                declared.append(item)
        return declared

    def _collect_rankings(self, name: str, dist: str, version: str) -> tuple[Any, ...]:
        """The plugin's ``moe_core_rankings``, loaded now; what cannot be read becomes a problem."""
        from moe_core.ranking import Ranking

        found: list[Any] = []
        for impl in (i for i in self._pm.hook.moe_core_rankings.get_hookimpls() if i.plugin_name == name):
            try:
                returned = impl.function()
                for item in [returned] if isinstance(returned, (str, os.PathLike, Ranking)) else returned or ():
                    found.append(item if isinstance(item, Ranking) else Ranking.load(item))
            except Exception as exc:  # noqa: BLE001 - isolation is the point
                self._problem(name, dist, version, "moe_core_rankings", f"{type(exc).__name__}: {exc}")
        return tuple(found)

    def _rebuild(self) -> None:
        """Recompute the backend and dispatcher tables; name clashes go to the plugin sorting first."""
        self._problems = {k: v for k, v in self._problems.items() if v.stage != "name clash"}
        for kind in _KINDS:
            self._tables[kind] = self._merge(kind)
        self.version += 1

    def _merge(self, kind: _Kind) -> dict[str, Any]:
        declared = self._declared[kind]
        specs: dict[str, Any] = {}
        for plugin in sorted(declared, key=lambda p: (self._records[p].distribution, p)):
            for spec in declared[plugin]:
                kept = specs.get(spec.name)
                if kept is None:
                    specs[spec.name] = spec
                    continue
                winner, loser = self._records[kept.plugin], self._records[plugin]
                self._problem(
                    plugin, loser.distribution, loser.version, "name clash",
                    f"{kind.label} {spec.name!r} is already registered by plugin {winner.name!r} of distribution "
                    f"{winner.distribution!r}; this plugin's spec is ignored (the plugin whose distribution sorts first keeps the name)",
                )
        return dict(sorted(specs.items()))

    # ------------------------------------------------------------------ problems
    def _fail(self, name: str, dist: str, version: str, stage: str, exc: BaseException) -> None:
        message = f"{type(exc).__name__}: {exc}"
        self._records[name] = PluginRecord(name, dist, version, PluginStatus.FAILED, f"[{stage}] {message}")
        logger.warning("moe-core plugin %r (%s %s) failed at %s and is ignored: %s", name, dist, version, stage, message)
        self.version += 1

    def _problem(self, plugin: str, dist: str, version: str, stage: str, message: str) -> None:
        key = (plugin, stage, message)
        if key not in self._problems:
            self._problems[key] = PluginProblem(plugin, dist, version, stage, message)
            logger.warning("moe-core plugin %r (%s %s) misbehaved in %s: %s", plugin, dist, version, stage, message)

    # ------------------------------------------------------------------ queries
    @property
    def specs(self) -> Mapping[str, BackendSpec]:
        """Registered experts backends by name (sorted by name)."""
        return self._tables[BACKENDS]

    @property
    def dispatchers(self) -> Mapping[str, DispatchSpec]:
        """Registered dispatch/combine backends by name (sorted by name)."""
        return self._tables[DISPATCHERS]

    @property
    def rankings(self) -> tuple[tuple[str, Any], ...]:
        """(plugin name, Ranking) for every ranking a plugin contributed, by plugin name."""
        return tuple((plugin, r) for plugin in sorted(self._rankings) for r in self._rankings[plugin])

    @property
    def plugins(self) -> tuple[PluginRecord, ...]:
        return tuple(self._records[k] for k in sorted(self._records))

    @property
    def problems(self) -> tuple[PluginProblem, ...]:
        return tuple(self._problems.values())

    @property
    def families(self) -> set[str]:
        return {s.family for s in self.specs.values()}

    def get(self, name: str) -> BackendSpec | None:
        return self.specs.get(name)

    def doctor_reports(self) -> dict[str, list[str]]:
        """Each plugin's ``moe_core_doctor`` lines; a hook that raises or returns garbage becomes a problem and a line."""
        reports: dict[str, list[str]] = {}
        for impl in sorted(self._pm.hook.moe_core_doctor.get_hookimpls(), key=lambda i: i.plugin_name):
            try:
                lines = impl.function()
            except Exception as exc:  # noqa: BLE001 - isolation is the point
                problem = f"moe_core_doctor raised {type(exc).__name__}: {exc}"
            else:
                if lines is None:
                    continue
                if isinstance(lines, (list, tuple)) and all(isinstance(line, str) for line in lines):
                    reports[impl.plugin_name] = list(lines)
                    continue
                problem = f"moe_core_doctor returned {type(lines).__name__}, not a list of str"
            record = self._records[impl.plugin_name]
            self._problem(record.name, record.distribution, record.version, "moe_core_doctor", problem)
            reports[impl.plugin_name] = [f"({problem})"]
        return reports

    def supports(self, spec: BackendSpec, query: SupportQuery) -> Support:
        """Declared checks, then the owner's answer and every other plugin's veto."""
        return self._ask(BACKENDS, spec, query)

    def dispatch_supports(self, spec: DispatchSpec, query: SupportQuery) -> Support:
        """The same for a dispatcher: declared checks, the owner's answer, every other plugin's veto."""
        return self._ask(DISPATCHERS, spec, query)

    def _ask(self, kind: _Kind, spec: Any, query: SupportQuery) -> Support:
        declared = [*self._unmet.get(spec.plugin, ()), *spec.declared_reasons(query)]
        if declared:
            return Support.no(*declared)
        kwargs = {
            kind.argument: spec,
            "config": query.config,
            "weight_key": query.weight_key,
            "activation_key": query.activation_key,
            "activation_format": query.activation_format,
            "platform": query.platform,
        }
        result = Support.yes()
        for impl in sorted(getattr(self._pm.hook, kind.supports_hook).get_hookimpls(), key=lambda i: i.plugin_name):
            record = self._records[impl.plugin_name]
            try:
                answer = impl.function(**{a: kwargs[a] for a in impl.argnames})
            except Exception as exc:  # noqa: BLE001
                message = f"raised {type(exc).__name__}: {exc}"
                self._problem(record.name, record.distribution, record.version, kind.supports_hook, message)
                result = result & Support.no(f"plugin {record.name!r} {message}")
                continue
            if answer is None:
                continue
            if not isinstance(answer, Support):
                message = f"returned {type(answer).__name__} {answer!r:.80}, not a Support"
                self._problem(record.name, record.distribution, record.version, kind.supports_hook, message)
                result = result & Support.no(f"plugin {record.name!r} {message}")
                continue
            if impl.plugin_name == spec.plugin:
                result = result & answer
            elif not answer.ok:
                result = result & Support.no(*(f"vetoed by plugin {record.name!r}: {r}" for r in answer.reasons))
        return result


def _entry_points() -> Iterable[metadata.EntryPoint]:
    return metadata.entry_points(group=ENTRY_POINT_GROUP)


def _dist_version(name: str) -> str:
    try:
        return metadata.version(name)
    except metadata.PackageNotFoundError:
        return "?"


_default: Registry | None = None
_default_lock = threading.Lock()


def default_registry() -> Registry:
    """The process-wide registry, built (and plugins discovered) on first use."""
    global _default
    with _default_lock:
        if _default is None:
            _default = Registry()
        return _default


def reset_default_registry() -> None:
    """Forget the process-wide registry, so the next use rediscovers plugins (for tests and tools)."""
    global _default
    with _default_lock:
        _default = None
