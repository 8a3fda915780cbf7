"""Facts only FlashInfer has (its ``supported(arch)`` answers, its limits), and the JIT toolchains here.

FlashInfer is imported lazily, through :data:`PROVIDER`, the first time a fact is needed; the
version is read from the distribution's metadata without importing it. Toolchain probes look at
this machine (PATH, importable modules), never at a GPU, and are cached for the process.

JIT-built modules (:data:`JIT_MODULES`, :func:`jit_state`): which nvcc module FlashInfer's CUTLASS and
TRT-LLM runners build on their first call, per architecture, and whether it is already there
(prebuilt by flashinfer-jit-cache, or compiled earlier into FlashInfer's JIT cache), read from
``flashinfer.jit.env`` the way FlashInfer's own ``JitSpecNvcc.is_compiled`` does.
"""

from __future__ import annotations

import functools
import importlib.metadata
import importlib.util
import os
import shutil
from dataclasses import dataclass
from pathlib import Path

from moe_core.provider import Provider, ProviderUnavailableError
from moe_core_flashinfer import contract

INSTALL_HINT = (
    f"install FlashInfer (`pip install 'flashinfer-python{contract.VERSION_RANGE}'`, which "
    "`pip install ./plugins/flashinfer_backend` pulls in from a clone of moe-core); its kernels need an NVIDIA GPU"
)

#: Compute capabilities (major * 10 + minor) probed when a refusal lists where a config runs.
ARCH_SCAN = tuple(range(70, 131))


class FlashInferUnavailableError(ProviderUnavailableError):
    """FlashInfer (or a module of it this binding uses) does not import in this process."""


PROVIDER = Provider("flashinfer", f"flashinfer-python{contract.VERSION_RANGE}", INSTALL_HINT, FlashInferUnavailableError)


def arch(platform) -> int | None:
    """The platform's compute capability as FlashInfer numbers it (major * 10 + minor), None when unknown."""
    cap = platform.capability
    return None if cap is None else cap[0] * 10 + cap[1]


def version() -> str | None:
    """The installed flashinfer-python version, read without importing it (None when absent)."""
    try:
        return importlib.metadata.version(contract.FLASHINFER_DISTRIBUTION)
    except importlib.metadata.PackageNotFoundError:
        return None


def api():
    """``flashinfer.fused_moe.api`` (imports FlashInfer on first use; typed error when absent)."""
    return PROVIDER.module(contract.API_MODULE)


def config_class(name: str) -> type:
    """A backend config class of the unified API, e.g. ``CuTileBf16Config``."""
    return getattr(api(), name)


@functools.lru_cache(maxsize=None)
def supported(config: str, arch: int) -> bool:
    """FlashInfer's own ``<config>.supported(arch)``: does it ship this backend for ``sm_<arch>``."""
    return bool(config_class(config).supported(arch))


@functools.lru_cache(maxsize=None)
def supported_archs(config: str) -> tuple[int, ...]:
    """Every compute capability in :data:`ARCH_SCAN` for which FlashInfer says ``config`` runs."""
    return tuple(a for a in ARCH_SCAN if supported(config, a))


@functools.lru_cache(maxsize=None)
def trtllm_limits() -> tuple[int, int]:
    """(max top_k, max experts) of the TRT-LLM routed kernels, from FlashInfer's api module."""
    module = api()
    return tuple(int(getattr(module, name)) for name in contract.TRTLLM_LIMITS)


@functools.lru_cache(maxsize=None)
def cutile_activations() -> frozenset[str]:
    """Names of the ``ActivationType`` members cuTile's kernels implement."""
    return frozenset(a.name for a in getattr(api(), contract.CUTILE_ACTIVATIONS_ATTR))


def activation_type_name(activation_class: str) -> str:
    """The ``ActivationType`` member name behind a FlashInfer ActivationConfig class (``SwiGLU`` -> ``Swiglu``)."""
    return getattr(api(), activation_class).type.name


# ------------------------------------------------------------------ toolchains
@dataclass(frozen=True)
class Toolchain:
    """Whether one way FlashInfer gets its kernels works here, and what was found or is missing."""

    name: str
    usable: bool
    detail: str


def _has_module(name: str) -> bool:
    try:
        return importlib.util.find_spec(name) is not None
    except (ImportError, ValueError):
        return False


def nvcc_path() -> str | None:
    """The nvcc FlashInfer's JIT would run (PATH, then $CUDA_HOME/bin), or None."""
    return shutil.which("nvcc") or _in_cuda_home("nvcc")


def _nvcc() -> Toolchain:
    if _has_module("flashinfer_jit_cache"):
        return Toolchain("nvcc", True, "prebuilt modules from flashinfer-jit-cache")
    found = nvcc_path()
    if found:
        return Toolchain("nvcc", True, f"{found} (CUTLASS/TRT-LLM modules JIT-build on first use; a backend whose module is "
                                       f"not built yet is refused until `{BUILD_COMMAND.format(family='cutlass|trtllm')}` builds it)")
    return Toolchain("nvcc", False, "no nvcc on PATH or in $CUDA_HOME/bin, and flashinfer-jit-cache is not installed")


def _cubins() -> Toolchain:
    if _has_module("flashinfer_cubin"):
        return Toolchain("cubins", True, "TRT-LLM-gen cubins from flashinfer-cubin")
    return Toolchain("cubins", False, "flashinfer-cubin is not installed: TRT-LLM-gen cubins are downloaded on first use (needs network)")


def _cutlass_dsl() -> Toolchain:
    if _has_module("cutlass") and _has_module("cutlass.cute"):
        try:
            return Toolchain("cutlass-dsl", True, f"nvidia-cutlass-dsl {importlib.metadata.version('nvidia-cutlass-dsl')}")
        except importlib.metadata.PackageNotFoundError:
            return Toolchain("cutlass-dsl", True, "cutlass.cute importable")
    return Toolchain("cutlass-dsl", False, "nvidia-cutlass-dsl is not installed (`pip install nvidia-cutlass-dsl[cu13]`)")


def _cuda_tile() -> Toolchain:
    if not _has_module("cuda.tile"):
        return Toolchain("cuda-tile", False, "the cuda-tile package is not installed (`pip install cuda-tile[tileiras]`)")
    try:
        from flashinfer.cutile.cutile_common import _find_tileiras_binary  # FlashInfer's own search order
        tileiras = _find_tileiras_binary()
    except Exception as exc:  # noqa: BLE001 - FlashInfer absent or changed: say so
        return Toolchain("cuda-tile", False, f"cannot look for tileiras through FlashInfer ({type(exc).__name__}: {exc})")
    if tileiras is None:
        return Toolchain("cuda-tile", False, "cuda-tile is installed but its compiler tileiras is not (pip nvidia-cuda-tileiras, "
                                             "PATH or $CUDA_HOME/bin; CUDA 13.1+)")
    return Toolchain("cuda-tile", True, f"cuda-tile {importlib.metadata.version('cuda-tile')}, tileiras {tileiras}")


def _in_cuda_home(tool: str) -> str | None:
    home = os.environ.get("CUDA_HOME") or os.environ.get("CUDA_PATH") or "/usr/local/cuda"
    path = os.path.join(home, "bin", tool)
    return path if os.access(path, os.X_OK) else None


@functools.lru_cache(maxsize=None)
def toolchains() -> dict[str, Toolchain]:
    """Every toolchain a binding may need (:attr:`contract.Binding.toolchain` names them, joined by '+')."""
    return {t.name: t for t in (_nvcc(), _cubins(), _cutlass_dsl(), _cuda_tile())}


def missing_toolchains(binding: contract.Binding) -> list[str]:
    """Reasons a binding's toolchain is unusable here (empty when all of it works)."""
    found = toolchains()
    return [f"{found[name].name}: {found[name].detail}" for name in binding.toolchain.split("+") if not found[name].usable]


# ------------------------------------------------------------------ JIT-built modules
#: FlashInfer's JIT locations: ``FLASHINFER_JIT_DIR`` (``<cache>/<version>/<archs>/cached_ops``, where a
#: module ``m`` builds to ``m/m.so``), ``get_aot_artifacts(m)`` (prebuilt copies: flashinfer-python's
#: ``data/aot`` and the flashinfer-jit-cache providers) and ``FLASHINFER_CSRC_DIR`` (the CUDA sources).
JIT_ENV_MODULE = "flashinfer.jit.env"
#: Where the JitSpec generators live (``flashinfer/jit/fused_moe.py``).
JIT_GENERATORS_MODULE = "flashinfer.jit.fused_moe"
#: Where the runners' build-and-load functions live (``flashinfer/fused_moe/core.py``).
JIT_LOADERS_MODULE = "flashinfer.fused_moe.core"
#: With this variable set, FlashInfer raises ``MissingJITCacheError`` instead of compiling (``jit/core.py``).
DISABLE_JIT_ENV = "FLASHINFER_DISABLE_JIT"
#: The command that builds a family's module once for this machine's GPU (``__main__.py``).
BUILD_COMMAND = "python -m moe_core_flashinfer build {family}"
#: Cold builds at least this large take tens of minutes on many cores, hours on few.
LONG_BUILD_UNITS = 100


@dataclass(frozen=True)
class JitModule:
    """One nvcc module FlashInfer builds on a runner's first call, as FlashInfer 0.7.2.post1 defines it.

    ``name``: the JitSpec name (its directory and ``<name>.so`` in the JIT cache and in flashinfer-jit-cache).
    ``generator`` / ``kwargs``: the function of :data:`JIT_GENERATORS_MODULE` returning its JitSpec.
    ``compile_units``: the sources of that JitSpec (nvcc and C++ invocations of a cold build), counted
    with the generated CUTLASS instantiations. ``variant``: (predicate of :data:`JIT_GENERATORS_MODULE`,
    module name when it holds): the sm_90 generator builds a separate H20 module.
    """

    name: str
    generator: str
    compile_units: int
    kwargs: tuple[tuple[str, object], ...] = ()
    variant: tuple[str, str] | None = None


_CUTLASS_SM100 = JitModule("fused_moe_100", "gen_cutlass_fused_moe_sm100_module", 270)
_CUTLASS_SM120 = JitModule("fused_moe_120", "gen_cutlass_fused_moe_sm120_module", 96)
_TRTLLM_SM100 = JitModule("fused_moe_trtllm_sm100", "gen_trtllm_gen_fused_moe_sm100_module", 18)

#: family (:attr:`contract.Binding.jit_module`) -> compute capability -> the module its runner builds there.
#: ``cutlass``: ``get_cutlass_fused_moe_module(str(arch))`` (runners.py ``_CutlassRunnerBase._build``);
#: ``trtllm``: ``get_trtllm_moe_sm100_module()`` (``_TrtllmRunnerBase``; the Rubin module on sm_107).
JIT_MODULES: dict[str, dict[int, JitModule]] = {
    "cutlass": {
        89: JitModule("fused_moe_89", "gen_cutlass_fused_moe_sm89_module", 85),
        90: JitModule("fused_moe_90", "gen_cutlass_fused_moe_sm90_module", 248,
                      variant=("_should_enable_sm90_moe_prebuilt_d_descriptor", "fused_moe_90_h20_prebuilt_d")),
        100: _CUTLASS_SM100, 107: _CUTLASS_SM100, 110: _CUTLASS_SM100,
        103: JitModule("fused_moe_103", "gen_cutlass_fused_moe_sm103_module", 282),
        120: _CUTLASS_SM120, 121: _CUTLASS_SM120,
    },
    "trtllm": {
        100: _TRTLLM_SM100, 103: _TRTLLM_SM100,
        107: JitModule("fused_moe_trtllm_sm107", "gen_trtllm_gen_fused_moe_sm100_module", 18, kwargs=(("enable_rubin", True),)),
    },
}
#: family -> the FlashInfer function its runners call to build and load the module.
JIT_LOADERS = {"cutlass": "get_cutlass_fused_moe_module", "trtllm": "get_trtllm_moe_sm100_module"}

PREBUILT, BUILT, NOT_BUILT, UNKNOWN = "prebuilt", "built", "not built", "unknown"


@dataclass(frozen=True)
class JitState:
    """Whether one JIT-built module is ready on this machine, and what to do when it is not.

    ``status``: :data:`PREBUILT` (flashinfer-jit-cache or FlashInfer's AOT directory has it),
    :data:`BUILT` (compiled earlier into the JIT cache), :data:`NOT_BUILT` or :data:`UNKNOWN` (FlashInfer's
    JIT layout could not be read). ``where``: the library found, or the JIT cache directory it would
    build into. ``blocker``: why it cannot be built here ("" when it can).
    """

    family: str
    arch: int
    module: str
    compile_units: int
    status: str
    where: str
    blocker: str = ""

    @property
    def ready(self) -> bool:
        return self.status in (PREBUILT, BUILT)

    @property
    def build_command(self) -> str:
        return BUILD_COMMAND.format(family=self.family)

    @property
    def size(self) -> str:
        """The build's size in words: compile units and a rough duration."""
        duration = "tens of minutes on many cores, hours on few" if self.compile_units >= LONG_BUILD_UNITS else "minutes"
        return f"{self.compile_units} nvcc/C++ compile units, {duration}"

    def reason(self) -> str:
        """Why a backend needing this module is refused (empty when it is ready)."""
        if self.ready:
            return ""
        if self.status == UNKNOWN:
            return (f"cannot tell whether FlashInfer's {self.module} nvcc module for sm_{self.arch} is built ({self.where}), so its "
                    f"first call might compile it ({self.size}); build it once with `{self.build_command}`")
        text = (f"FlashInfer's {self.module} nvcc module for sm_{self.arch} is not built (neither prebuilt by flashinfer-jit-cache "
                f"nor in its JIT cache {self.where}): the first call would compile it ({self.size})")
        if self.blocker:
            return f"{text}, and it cannot be built here: {self.blocker}"
        return f"{text}; build it once with `{self.build_command}`"

    def describe(self) -> str:
        """One line for doctor: the module, its state and where it is (or how to build it)."""
        if self.ready:
            return f"{self.module} (sm_{self.arch}) {self.status}: {self.where}"
        return f"{self.module} (sm_{self.arch}) {self.status}; {self.blocker or f'build with `{self.build_command}`'} ({self.size})"


def jit_module(family: str, arch: int) -> JitModule | None:
    """The module ``family``'s runners build on ``sm_<arch>`` (None: that family builds none there)."""
    return JIT_MODULES.get(family, {}).get(arch)


def jit_module_name(module: JitModule) -> str:
    """The module's name on this machine: FlashInfer's own predicate picks the sm_90 H20 variant."""
    if module.variant is None:
        return module.name
    predicate, name = module.variant
    return name if getattr(PROVIDER.module(JIT_GENERATORS_MODULE), predicate)() else module.name


def jit_generator(module: JitModule):
    """FlashInfer's generator of ``module``'s JitSpec, bound to its arguments (calling it writes sources, builds nothing)."""
    generator = getattr(PROVIDER.module(JIT_GENERATORS_MODULE), module.generator)
    return functools.partial(generator, **dict(module.kwargs))


@functools.lru_cache(maxsize=None)
def jit_state(family: str, arch: int) -> JitState | None:
    """Whether the nvcc module ``family``'s runners build on ``sm_<arch>`` is ready here (None: none is built there).

    Reads what FlashInfer's ``JitSpecNvcc.is_compiled`` reads, without generating the JitSpec (which
    writes hundreds of CUTLASS sources): ``flashinfer.jit.env.get_aot_artifacts(name)`` (prebuilt), then
    ``FLASHINFER_JIT_DIR/<name>/<name>.so`` (compiled earlier). Cached for the process; the ``build``
    command clears it. Raises :class:`FlashInferUnavailableError` when FlashInfer does not import.
    """
    module = jit_module(family, arch)
    if module is None:
        return None
    env = PROVIDER.module(JIT_ENV_MODULE)
    try:
        name = jit_module_name(module)
        artifacts = env.get_aot_artifacts(name)
        if artifacts:
            return JitState(family, arch, name, module.compile_units, PREBUILT, f"{artifacts[0].path} ({artifacts[0].provider_id})")
        library = Path(env.FLASHINFER_JIT_DIR) / name / f"{name}.so"
        if library.exists():
            return JitState(family, arch, name, module.compile_units, BUILT, str(library))
        sources = Path(env.FLASHINFER_CSRC_DIR)
    except FlashInferUnavailableError:
        raise
    except Exception as exc:  # noqa: BLE001 - FlashInfer moved its JIT layout: refuse rather than risk a surprise build
        return JitState(family, arch, module.name, module.compile_units, UNKNOWN, f"{type(exc).__name__}: {exc}")
    blocker = ""
    if os.environ.get(DISABLE_JIT_ENV):
        blocker = f"{DISABLE_JIT_ENV} is set, so FlashInfer raises MissingJITCacheError instead of compiling (install flashinfer-jit-cache)"
    elif not sources.is_dir():
        blocker = (f"FlashInfer's CUDA sources are not installed ({sources} is missing; reinstall flashinfer-python "
                   "or install flashinfer-jit-cache)")
    elif nvcc_path() is None:
        blocker = "no nvcc on PATH or in $CUDA_HOME/bin (install the CUDA toolkit, or flashinfer-jit-cache)"
    return JitState(family, arch, name, module.compile_units, NOT_BUILT, str(library.parent.parent), blocker)
