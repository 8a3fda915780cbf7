"""Create moe-core's venv when it is missing, deciding where its torch comes from; print the choice.

scripts/bootstrap.sh runs it with the Python the venv starts from (``PYTHON``, default ``python3``)::

    python3 scripts/prepare_venv.py VENV [--dry-run]

and acts on the one word it prints on stdout (the reason goes to stderr):

``system``
    The venv reuses the starting Python's packages. A ``.pth`` file in the venv adds every
    site-packages directory that Python sees — the equivalent of ``--system-site-packages``, which
    would miss them when the starting Python is itself a venv, as on the GPU image. The venv gets
    no pip of its own either, so pip and setuptools are the starting Python's too, and pip finds
    torch, triton, pytest, ... already satisfied: with all of them present, set-up needs no network.
``cpu``
    An isolated venv with its own pip; bootstrap.sh installs the CPU torch wheel into it.

``MOE_CORE_TORCH`` chooses. ``auto`` (the default) reuses the starting Python's torch when it is
usable: it imports, its version is within pyproject.toml's ``torch>=`` bound, and pip imports
beside it. A CUDA, ROCm or CPU build alike: an installed torch in range satisfies the requirement,
and replacing it would mean a download. ``system`` insists on reusing it (an error says why it
cannot); ``cpu`` always builds the isolated venv. The choice is made once, when the venv is
created: an existing venv keeps it, and forcing the other choice on it is an error saying how to
start over.
"""

from __future__ import annotations

import argparse
import importlib.util
import os
import re
import sys
import venv as venv_module
from dataclasses import dataclass
from pathlib import Path
from typing import Mapping

ENV_VAR = "MOE_CORE_TORCH"
AUTO, SYSTEM, CPU = "auto", "system", "cpu"
MODES = (AUTO, SYSTEM, CPU)
#: Links a venv to the starting Python's site-packages; its presence marks a venv set up as "system".
LINK_FILE = "_moe_core_base_site.pth"
PYPROJECT = Path(__file__).resolve().parent.parent / "pyproject.toml"


class BootstrapError(Exception):
    """The venv cannot be set up as asked; the message says what to do instead."""


@dataclass(frozen=True)
class Torch:
    """The torch installed in the running Python."""

    version: str
    build: str  # "CUDA 13.0", "ROCm 6.2" or "CPU"
    location: str  # the site-packages directory it was imported from


@dataclass(frozen=True)
class StartingPython:
    """What the running Python (the one the venv starts from) offers for reuse."""

    torch: Torch | None
    torch_error: str  # why torch does not import ("" when it does)
    has_pip: bool
    site_dirs: tuple[str, ...]  # its site-packages / dist-packages directories, in sys.path order


@dataclass(frozen=True)
class Decision:
    """How the venv is (to be) set up, and why."""

    mode: str  # SYSTEM or CPU
    reason: str
    site_dirs: tuple[str, ...] = ()  # what a SYSTEM venv links to


def requested_mode(environ: Mapping[str, str]) -> str:
    """The value of MOE_CORE_TORCH (unset or empty: auto); an invalid value is an error listing the valid ones."""
    value = environ.get(ENV_VAR, "").strip() or AUTO
    if value not in MODES:
        raise BootstrapError(f"{ENV_VAR}={value!r} is not valid; use one of: {', '.join(MODES)}")
    return value


def torch_minimum(pyproject: Path = PYPROJECT) -> tuple[int, int]:
    """The lower bound of pyproject.toml's ``torch>=X.Y`` requirement."""
    match = re.search(r'"torch\s*>=\s*(\d+)\.(\d+)', pyproject.read_text())
    if match is None:
        raise BootstrapError(f"{pyproject} has no \"torch>=X.Y\" dependency; restore it or update {__file__}")
    return int(match[1]), int(match[2])


def release(version: str) -> tuple[int, int] | None:
    """(major, minor) of a torch version string such as ``2.11.0+cu130``; None if it has none."""
    match = re.match(r"(\d+)\.(\d+)", version)
    return (int(match[1]), int(match[2])) if match else None


def inspect_python() -> StartingPython:
    """Import torch in this process (proving it loads) and list the site directories to link to."""
    site_dirs = dict.fromkeys(
        p for p in sys.path if os.path.basename(p) in ("site-packages", "dist-packages") and os.path.isdir(p)
    )
    has_pip = importlib.util.find_spec("pip") is not None
    try:
        import torch
    except Exception as exc:  # a broken build raises OSError, RuntimeError, ... as well as ImportError
        return StartingPython(None, f"{type(exc).__name__}: {exc}", has_pip, tuple(site_dirs))
    if torch.version.hip:
        build = f"ROCm {torch.version.hip}"
    elif torch.version.cuda:
        build = f"CUDA {torch.version.cuda}"
    else:
        build = "CPU"
    found = Torch(torch.__version__, build, os.path.dirname(os.path.dirname(os.path.abspath(torch.__file__))))
    return StartingPython(found, "", has_pip, tuple(site_dirs))


def why_not_reusable(python: StartingPython, minimum: tuple[int, int]) -> str | None:
    """Why the running Python's packages cannot serve the venv, or None when they can."""
    bound = f"torch>={minimum[0]}.{minimum[1]}"
    if python.torch is None:
        return f"torch does not import in {sys.executable} ({python.torch_error})"
    version = release(python.torch.version)
    if version is None or version < minimum:
        return f"the torch of {sys.executable} is {python.torch.version}, outside pyproject.toml's {bound}"
    if not python.has_pip:
        return f"{sys.executable} has torch but no pip, which the venv would borrow"
    return None


def decide(requested: str, minimum: tuple[int, int]) -> Decision:
    """How a new venv is set up for MOE_CORE_TORCH=``requested`` (inspects this Python unless cpu is forced)."""
    if requested == CPU:
        return Decision(CPU, f"{ENV_VAR}=cpu: an isolated venv with its own CPU torch")
    python = inspect_python()
    problem = why_not_reusable(python, minimum)
    if problem is None:
        found = python.torch
        reason = f"{ENV_VAR}={requested}: reusing torch {found.version} ({found.build}) from {found.location}"
        return Decision(SYSTEM, reason, python.site_dirs)
    if requested == SYSTEM:
        raise BootstrapError(
            f"{ENV_VAR}=system, but {problem}. Install a usable torch and pip into that Python, start from "
            f"another one (PYTHON=/path/to/python3), or set {ENV_VAR}=cpu for an isolated venv with the CPU torch"
        )
    return Decision(CPU, f"{ENV_VAR}=auto: not reusing packages, {problem}; the venv gets its own CPU torch")


def site_packages(venv: Path) -> Path | None:
    """The venv's own site-packages directory (None when there is no venv at ``venv``)."""
    return next(venv.glob("lib/python*/site-packages"), None)


def existing(venv: Path, requested: str) -> Decision | None:
    """The choice an existing venv was set up with (None: no venv yet); forcing the other one is an error."""
    own = site_packages(venv)
    if own is None or not (venv / "bin" / "python").exists():
        return None
    mode = SYSTEM if (own / LINK_FILE).exists() else CPU
    if requested not in (AUTO, mode):
        raise BootstrapError(
            f"{venv} was set up as '{mode}'; {ENV_VAR}={requested} applies to a new venv: remove this one "
            f"(rm -rf {venv}) or set MOE_CORE_VENV to another directory, then run the command again"
        )
    return Decision(mode, f"{venv} exists, set up as '{mode}'")


def create(venv: Path, decision: Decision) -> None:
    """Create the venv: linked to this Python's site directories and without pip (system), or isolated with pip (cpu)."""
    reuse = decision.mode == SYSTEM
    venv_module.EnvBuilder(with_pip=not reuse).create(venv)
    if reuse:
        # `import` lines run site.addsitedir, which also processes the .pth files found there
        # (editable installs, ...), as for the starting Python itself.
        lines = [f"import site; site.addsitedir({d!r})\n" for d in decision.site_dirs]
        (site_packages(venv) / LINK_FILE).write_text("".join(lines))


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("venv", type=Path, help="the venv's directory")
    parser.add_argument("--dry-run", action="store_true", help="print the decision, create nothing")
    args = parser.parse_args(argv)
    venv = args.venv.absolute()
    try:
        requested = requested_mode(os.environ)
        kept = existing(venv, requested)
        decision = kept or decide(requested, torch_minimum())
    except BootstrapError as exc:
        print(f"bootstrap: error: {exc}", file=sys.stderr)
        return 2
    if kept is None or args.dry_run:
        print(f"bootstrap: {decision.reason}", file=sys.stderr)
    if kept is None and not args.dry_run:
        create(venv, decision)
    print(decision.mode)
    return 0


if __name__ == "__main__":
    sys.exit(main())
