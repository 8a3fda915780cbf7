"""``python -m moe_core_flashinfer``: this plugin's part of ``moe-core doctor`` (FlashInfer's version, the
JIT toolchains usable here, the JIT-built modules, which FlashInfer backends would run on this machine).

``python -m moe_core_flashinfer build cutlass`` (or ``trtllm``) builds, once, the nvcc module that
family's runners would otherwise compile on their first call, through FlashInfer's own JitSpec (its
generator, then ``build_and_load``, under FlashInfer's file lock, into FlashInfer's JIT cache), printing
progress. Until it is built (or prebuilt by flashinfer-jit-cache), supports() refuses those backends
on the real machine, so automatic selection never starts that build unannounced.
"""

from __future__ import annotations

import argparse
import os
import shutil
import sys
import threading
import time
from typing import Callable, Sequence

from moe_core.errors import MoECoreError

#: Seconds between two progress lines of a build.
PROGRESS_INTERVAL_S = 30.0


class JitBuildError(MoECoreError, RuntimeError):
    """The ``build`` command cannot build the requested module here (bad arguments, missing tools, a failed build)."""


def parser() -> argparse.ArgumentParser:
    """The command line: no subcommand prints the report; ``build FAMILY`` builds a JIT module."""
    from moe_core_flashinfer import facts

    p = argparse.ArgumentParser(prog="python -m moe_core_flashinfer", description=__doc__.split("\n\n")[0])
    sub = p.add_subparsers(dest="command")
    b = sub.add_parser("build", help="build the nvcc module a FlashInfer backend family JIT-builds on first use",
                       description="Build, once, the nvcc module FlashInfer's runners of FAMILY build on their first call "
                                   "(through FlashInfer's own JitSpec, into its JIT cache). Afterwards the backends are selected normally.")
    b.add_argument("family", choices=sorted(facts.JIT_MODULES), help="cutlass: flashinfer_cutlass; trtllm: flashinfer_trtllm")
    b.add_argument("--arch", type=_arch_argument, default=None,
                   help="compute capability as 90 or 9.0 (default: this machine's GPU; without a GPU, FlashInfer builds for "
                        "FLASHINFER_CUDA_ARCH_LIST, set from --arch when unset)")
    b.add_argument("--jobs", type=_positive_int, default=None, help="parallel compile jobs (FlashInfer's MAX_JOBS; default: ninja's)")
    b.add_argument("--dry-run", action="store_true", help="say what would be built and whether it already is; build nothing")
    b.add_argument("--verbose", action="store_true", help="show every compiler command (FLASHINFER_JIT_VERBOSE=1)")
    return p


def _arch_argument(text: str) -> int:
    """``90``, ``9.0`` or ``sm_90`` -> 90."""
    raw = text.strip().lower().removeprefix("sm_").removeprefix("sm")
    try:
        if "." in raw:
            major, minor = raw.split(".", 1)
            return int(major) * 10 + int(minor)
        return int(raw)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a compute capability: {text!r} (write 90, 9.0 or sm_90)") from None


def _positive_int(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        value = 0
    if value < 1:
        raise argparse.ArgumentTypeError(f"needs a positive integer, got {text!r}")
    return value


def report() -> int:
    """Print :func:`moe_core_flashinfer.report.lines` (what ``moe-core doctor`` shows under this plugin)."""
    from moe_core_flashinfer import report as doctor

    for line in doctor.lines():
        print(line)
    return 0


def local_arch() -> int | None:
    """This machine's GPU as major * 10 + minor, or None without a visible CUDA GPU."""
    import torch

    if not torch.cuda.is_available():
        return None
    major, minor = torch.cuda.get_device_capability()
    return major * 10 + minor


def build(family: str, arch: int | None = None, *, jobs: int | None = None, dry_run: bool = False, verbose: bool = False,
          out: Callable[[str], None] = print, interval: float = PROGRESS_INTERVAL_S) -> int:
    """Build ``family``'s module for ``arch`` (default: this GPU) through FlashInfer, unless it is already there.

    Raises :class:`JitBuildError` when it cannot (unknown family or architecture, no GPU and no
    ``arch``, FlashInfer's JIT disabled, no sources, nvcc or ninja, or the build failing).
    """
    from moe_core import resolver
    from moe_core_flashinfer import facts

    if family not in facts.JIT_MODULES:
        raise JitBuildError(f"unknown module family {family!r}; choose one of {', '.join(sorted(facts.JIT_MODULES))}")
    here = local_arch()
    arch = arch if arch is not None else here
    if arch is None:
        raise JitBuildError("no CUDA GPU is visible here: pass --arch (e.g. --arch 90) to build for another GPU")
    module = facts.jit_module(family, arch)
    if module is None:
        archs = ", ".join(f"sm_{a}" for a in sorted(facts.JIT_MODULES[family]))
        raise JitBuildError(f"FlashInfer's {family} runners build no module for sm_{arch}; they run on {archs}")
    if arch != here and "FLASHINFER_CUDA_ARCH_LIST" not in os.environ:
        # FlashInfer targets the visible GPUs unless told otherwise; read before it is imported.
        os.environ["FLASHINFER_CUDA_ARCH_LIST"] = f"{arch // 10}.{arch % 10}"
    state = _state(family, arch)
    if state.ready:
        out(f"{state.module} for sm_{arch} is already {state.status}: {state.where}. Nothing to build.")
        return 0
    plan = f"{state.module} for sm_{arch} ({state.size}) with flashinfer.jit.fused_moe.{module.generator}"
    if dry_run:
        out(f"would build {plan}, into {state.where}" + (f"; but it cannot be built here: {state.blocker}" if state.blocker else ""))
        return 0
    if state.blocker:
        raise JitBuildError(f"cannot build {state.module} here: {state.blocker}")
    if shutil.which("ninja") is None:
        raise JitBuildError("FlashInfer builds with ninja, which is not on PATH (pip install ninja)")
    if jobs is not None:
        os.environ["MAX_JOBS"] = str(jobs)
    if verbose:
        os.environ["FLASHINFER_JIT_VERBOSE"] = "1"
    out(f"building {plan}")
    out("  generating its JitSpec (FlashInfer writes the CUTLASS instantiations first)...")
    spec = facts.jit_generator(module)()
    objects = list(spec.get_object_paths())
    out(f"  compiling {len(objects)} units in {spec.build_dir}" + (f" with {jobs} jobs" if jobs else ""))
    started = time.monotonic()
    done = threading.Event()
    watcher = threading.Thread(target=_progress, args=(spec.name, objects, started, done, out, interval), daemon=True)
    watcher.start()
    try:
        if here == arch:
            spec.build_and_load()  # FlashInfer's own path: its file lock, the build, then loading the library
        else:
            spec.build(need_lock=True)  # no GPU of that architecture here to load it on
    except Exception as exc:  # noqa: BLE001 - FlashInfer's build errors carry ninja's output
        raise JitBuildError(f"FlashInfer failed to build {spec.name}: {type(exc).__name__}: {exc}") from exc
    finally:
        done.set()
        watcher.join()
    facts.jit_state.cache_clear()
    resolver.clear_cache()  # this process's cached selections were made without the module
    state = _state(family, arch)
    minutes = (time.monotonic() - started) / 60
    if not state.ready:
        raise JitBuildError(f"FlashInfer built {spec.name} in {minutes:.1f} min but it is not where its JIT cache is read: {state.where}")
    out(f"built {state.module} in {minutes:.1f} min: {state.where}. FlashInfer's {family} backends are now selected normally.")
    return 0


def _state(family: str, arch: int):
    from moe_core_flashinfer import facts

    state = facts.jit_state(family, arch)
    assert state is not None  # jit_module(family, arch) exists
    return state


def _progress(name: str, objects, started: float, done: threading.Event, out: Callable[[str], None], interval: float) -> None:
    """Every ``interval`` seconds until ``done``: how many of the module's object files exist."""
    while not done.wait(interval):
        built = sum(1 for o in objects if o.exists())
        elapsed = int(time.monotonic() - started)
        out(f"  [{name}] {built}/{len(objects)} compile units done after {elapsed // 60}m{elapsed % 60:02d}s")


def main(argv: Sequence[str] | None = None) -> int:
    """Run the command line; errors of ``build`` print one line and exit 1 (bad arguments exit 2, as argparse does)."""
    args = parser().parse_args(argv)
    if args.command is None:
        return report()
    try:
        return build(args.family, args.arch, jobs=args.jobs, dry_run=args.dry_run, verbose=args.verbose)
    except JitBuildError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 1


if __name__ == "__main__":
    sys.exit(main())
