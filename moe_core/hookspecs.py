"""The plugin author's manual: pluggy hook specifications of moe-core.

A plugin is a module (or any object) with functions marked ``@hookimpl``. Packaged plugins are
found through the ``moe_core.plugins`` entry-point group; code that is not packaged calls
``moe_core.registry.default_registry().register(obj, name=...)``. Minimal plugin::

    from moe_core import BackendSpec, Support, hookimpl, schemes

    @hookimpl
    def moe_core_backends():
        return [BackendSpec(name="acme", family="acme", priority=500,
                            schemes=[schemes.scheme("unquantized")],
                            kernel="acme_moe.kernel:AcmeKernel")]

    @hookimpl
    def moe_core_supports(backend, config, platform):
        if backend.name != "acme":
            return None            # not ours: no opinion
        if not platform.has_capability(9, 0):
            return Support.no("needs sm_90+")
        return Support.yes()

Hook implementations may accept any subset of a hook's arguments (pluggy passes them by name).
"""

from __future__ import annotations

from typing import Sequence

import pluggy

PROJECT = "moe_core"

hookspec = pluggy.HookspecMarker(PROJECT)
hookimpl = pluggy.HookimplMarker(PROJECT)


@hookspec
def moe_core_backends() -> "Sequence[BackendSpec]":  # noqa: F821
    """Return the :class:`~moe_core.spec.BackendSpec` objects this plugin provides.

    Called once when the plugin is registered. Return a list (possibly empty). Each name must be
    unique across all installed plugins: when two plugins claim one name, the plugin whose
    (distribution, plugin name) sorts first keeps it, and the other's spec is dropped and
    reported by ``moe-core doctor`` naming both distributions. Must be cheap: no GPU work, no
    import of heavy kernel libraries (point ``kernel`` at ``"module:Class"`` so it is imported
    only when selected).
    """


@hookspec
def moe_core_supports(backend, config, weight_key, activation_key, activation_format, platform) -> "Support | None":  # noqa: F821
    """Say whether ``backend`` can run this layer; return a :class:`~moe_core.support.Support` or None.

    Called for every candidate backend, on every plugin:

    * the plugin that registered ``backend`` answers for it (compute capability, dtypes, sizes
      the kernel cannot handle, ...); return ``Support.no(reason, ...)`` with reasons a user can act on;
    * every other plugin returns ``None`` (no opinion) or may **veto** with ``Support.no(reason)``:
      a site policy or a vendor's known-bad configuration. Returning ``Support.yes()`` for a
      backend that is not yours adds nothing: one veto is enough to reject.

    The core has already checked the declaration (scheme, formats, devices, required packages,
    LoRA, SwiGLU clamp, expert map); do not repeat those checks. Arguments: ``backend`` (the
    BackendSpec), ``config`` (MoEConfig), ``weight_key`` / ``activation_key`` (QuantKey or None
    for unquantized), ``activation_format`` (ActivationFormat), ``platform`` (Platform, possibly
    simulated: never query the real GPU here). Must be deterministic and cheap: answers are
    cached. An exception or a non-Support return value counts as "not supported", with the error
    as the reason, and is reported by ``moe-core doctor``; it never breaks selection.
    """


@hookspec
def moe_core_dispatchers() -> "Sequence[DispatchSpec]":  # noqa: F821
    """Return the :class:`~moe_core.dispatch.spec.DispatchSpec` objects (expert-parallel
    dispatch/combine backends) this plugin provides.

    Same rules as :func:`moe_core_backends`: called once at registration, cheap, names unique
    across plugins (a clash keeps the spec of the plugin whose distribution sorts first).
    Dispatcher names live apart from experts-backend names. docs/expert-parallel.md shows a
    vendor transport plugged in this way.
    """


@hookspec
def moe_core_dispatch_supports(dispatcher, config, weight_key, activation_key, platform) -> "Support | None":  # noqa: F821
    """Say whether ``dispatcher`` can serve this expert-parallel layer; a Support or None.

    The plugin that registered the dispatcher answers (NVLink or RDMA present, hidden size its
    buffers allow, ...); every other plugin returns None or vetoes, as in :func:`moe_core_supports`.
    The core has already checked the declaration (world size, devices, required packages).
    ``platform`` may be simulated: never query the real GPUs here.
    """


@hookspec
def moe_core_requires() -> "Sequence[PluginRequirement]":  # noqa: F821
    """Return the other moe-core plugins this plugin's code imports, as
    :class:`~moe_core.requirements.PluginRequirement` objects (distribution, import name, install command).

    Called once when the plugin is registered. While one does not import, every backend and dispatcher
    of this plugin is unsupported with the reason "<distribution> is not installed (<install>)", and
    ``moe-core doctor`` reports it as a problem: the user learns it before a layer runs, not from an
    ImportError at its first forward. Declare a sibling here and in ``pyproject.toml``'s dependencies.
    """


@hookspec
def moe_core_rankings() -> "Sequence[str | os.PathLike | Ranking]":  # noqa: F821
    """Return measured rankings of this plugin's backends: paths of ``moe-core-ranking/1`` files
    (docs/ranking.md; ship them as package data of the plugin) or :class:`~moe_core.ranking.Ranking` objects.

    Called once when the plugin is registered; files are read then, never during selection. A
    ranking is used only on the device it names (``device``, compared with the platform's device
    name) and ranks below the user's ranking and the autotune cache, above the ranking moe-core
    ships (docs/ranking.md, precedence). Order only backends you measured; other plugins' backends
    may appear when you timed them in the same run. A path that cannot be read or a malformed file
    is reported by ``moe-core doctor`` and ignored; it never breaks selection.
    """


@hookspec
def moe_core_doctor() -> "Sequence[str] | None":  # noqa: F821
    """Return lines ``moe-core doctor`` prints under this plugin: the provider's version, which
    toolchains work here, which backends can really run on this machine and what to install otherwise.

    Called only by ``moe-core doctor`` (never during selection), so it may import the provider and
    look at the real machine. An exception is shown as a plugin problem, never breaks the command.
    """


def backend_hooks(specs, supports):
    """``moe_core_backends`` and ``moe_core_supports`` for a plugin that declares ``specs`` and answers for them.

    ``supports(backend, config, weight_key, activation_key, platform)`` is called for this plugin's own
    backends only (others get no opinion, ``None``). In the plugin module::

        moe_core_backends, moe_core_supports = backend_hooks(SPECS, _supports)

    A plugin that also vetoes other plugins' backends writes its own ``moe_core_supports`` instead.
    """
    declared = list(specs)
    names = frozenset(s.name for s in declared)

    @hookimpl
    def moe_core_backends():
        return declared

    @hookimpl
    def moe_core_supports(backend, config, weight_key, activation_key, platform):
        return supports(backend, config, weight_key, activation_key, platform) if backend.name in names else None

    return moe_core_backends, moe_core_supports
