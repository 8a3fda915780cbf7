"""moe-core installed as users install it: every package of the repository (the core, each plugin, the example
vendor plugin) built as a wheel, installed non-editable into a fresh venv, and the ``moe-core`` command run from
outside the source tree. A data file a wheel lacks, an entry point it does not declare, a dependency that names
no package or a write into the installed packages fails here.

Offline: the venv reuses this environment's torch and the other dependencies through one ``.pth`` line naming a
folder of links to them (this environment's own installs of the repository's packages, editable ones, are left
out, so the venv sees only the wheels). Deselect with ``-m "not wheels"``.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
import venv
from dataclasses import dataclass
from pathlib import Path

import pytest

from tests.test_bootstrap import clean_env

pytestmark = pytest.mark.wheels

ROOT = Path(__file__).resolve().parents[1]
#: The provider of this plugin declares GPU toolchain dependencies that a CPU environment leaves out (see
#: plugins/flashinfer_backend/requirements-nodeps.txt): installed without dependencies, as scripts/bootstrap.sh does.
WITHOUT_DEPENDENCIES = "moe-core-flashinfer"


@dataclass(frozen=True)
class Project:
    """One package of the repository: its folder, distribution name and import package (the name, normalized)."""

    folder: Path

    @property
    def name(self) -> str:
        return re.search(r'^name = "([^"]+)"', (self.folder / "pyproject.toml").read_text(), re.M)[1]

    @property
    def package(self) -> str:
        return self.name.replace("-", "_")


PROJECTS = [Project(ROOT)] + [Project(p.parent) for p in sorted([*ROOT.glob("plugins/*/pyproject.toml"), *ROOT.glob("examples/*/pyproject.toml")])]


def source_files(folder: Path) -> set[Path]:
    """Every file under ``folder`` but compiled bytecode, relative to it."""
    return {p.relative_to(folder) for p in folder.rglob("*") if p.is_file() and "__pycache__" not in p.parts}


def link_dependencies(into: Path) -> None:
    """Links in ``into`` to everything this Python's site-packages directories hold, except the repository's packages
    (their import packages, dist-info folders and editable-install hooks) and .pth files; the first directory on
    sys.path wins a name, as in imports."""
    ours = tuple(p.package for p in PROJECTS) + ("__editable__",)
    into.mkdir()
    for directory in dict.fromkeys(p for p in sys.path if os.path.basename(p) in ("site-packages", "dist-packages") and os.path.isdir(p)):
        for entry in os.scandir(directory):
            if not entry.name.startswith(ours) and not entry.name.endswith(".pth") and not (into / entry.name).exists():
                (into / entry.name).symlink_to(entry.path)


def run(command: list, cwd: Path) -> subprocess.CompletedProcess:
    done = subprocess.run([str(c) for c in command], cwd=cwd, env=clean_env(), capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, f"{' '.join(map(str, command))} failed ({done.returncode}):\n{done.stdout[-3000:]}\n{done.stderr[-3000:]}"
    return done


@dataclass(frozen=True)
class Installed:
    """The fresh venv with every wheel installed, and a working directory outside the source tree."""

    venv: Path
    site: Path
    wheels: Path
    cwd: Path

    def moe_core(self, *args: str) -> subprocess.CompletedProcess:
        return subprocess.run([str(self.venv / "bin" / "moe-core"), *args], cwd=self.cwd, env=clean_env(), capture_output=True, text=True, timeout=300)

    def pip(self, *args: str) -> subprocess.CompletedProcess:
        return run([self.venv / "bin" / "python", "-m", "pip", *args, "--disable-pip-version-check"], self.cwd)

    def install(self, *args) -> subprocess.CompletedProcess:
        """pip install offline, without compiling bytecode."""
        return self.pip("install", "-q", "--no-index", "--no-compile", *args)


@pytest.fixture(scope="module")
def installed(tmp_path_factory) -> Installed:
    tmp = tmp_path_factory.mktemp("wheels")
    sources, wheels, cwd = tmp / "src", tmp / "wheels", tmp / "cwd"
    cwd.mkdir()
    for project in PROJECTS:  # a copy, so that building leaves no build/ or egg-info folder in the repository
        copy = sources / project.package
        shutil.copytree(project.folder / project.package, copy / project.package, ignore=shutil.ignore_patterns("__pycache__"))
        for name in ("pyproject.toml", "README.md"):
            shutil.copy(project.folder / name, copy / name)
    run([sys.executable, "-m", "pip", "wheel", "-q", "--no-deps", "--no-build-isolation", "--no-index", "-w", wheels,
         *sorted(sources.iterdir())], cwd)
    link_dependencies(tmp / "dependencies")
    venv.EnvBuilder(with_pip=False).create(tmp / "venv")
    site = next((tmp / "venv").glob("lib/python*/site-packages"))
    (site / "_dependencies.pth").write_text(f"{tmp / 'dependencies'}\n")
    found = Installed(tmp / "venv", site, wheels, cwd)
    wheel = {p.name: next(wheels.glob(f"{p.package}-*.whl")) for p in PROJECTS}
    # One command, so that pip finds moe-core and moe-core-triton (which plugins require) among the wheels it is given.
    found.install(*(w for name, w in wheel.items() if name != WITHOUT_DEPENDENCIES))
    found.install("--no-deps", wheel[WITHOUT_DEPENDENCIES])
    return found


def test_every_package_installs_from_its_wheel_with_every_file_of_its_package(installed):
    """Each installed package holds every file of its source package (modules and data files alike), and the venv
    imports it from there, not from the repository."""
    where = run([installed.venv / "bin" / "python", "-c", "import importlib, json, sys; "
                 "print(json.dumps({m: importlib.import_module(m).__file__ for m in sys.argv[1:]}))",
                 *(p.package for p in PROJECTS)], installed.cwd)
    for package, init in json.loads(where.stdout).items():
        assert Path(init).parent == installed.site / package
    for project in PROJECTS:
        missing = source_files(project.folder / project.package) - source_files(installed.site / project.package)
        assert not missing, f"the {project.name} wheel lacks {sorted(map(str, missing))}: add them to its pyproject.toml's package data"


def test_list_shows_every_plugin_loaded_from_its_distribution(installed):
    listed = installed.moe_core("list", "--json")
    assert listed.returncode == 0, listed.stderr
    plugins = json.loads(listed.stdout)["plugins"]
    assert all(p["status"] == "loaded" for p in plugins) and {p["distribution"] for p in plugins} == {p.name for p in PROJECTS}, plugins


def test_doctor_explain_and_run_work_and_write_nothing_into_the_installed_packages(installed):
    before = source_files(installed.site)
    doctor = installed.moe_core("doctor")
    assert doctor.returncode == 0 and "status: ok" in doctor.stdout, doctor.stdout + doctor.stderr
    explain = installed.moe_core("explain", "--preset", "tiny", "--scheme", "unquantized", "--platform", "h100")
    assert explain.returncode == 0, explain.stderr
    assert re.search(r"^\d+\s+deepgemm\s", explain.stdout, re.M) and re.search(r"^\d+\s+acme\s", explain.stdout, re.M)
    ran = installed.moe_core("run", "--preset", "tiny", "--tokens", "4", "--dtype", "float32", "--device", "cpu")
    assert ran.returncode == 0 and re.search(r"output \(4, 128\) torch.float32: checksum .* on cpu via ", ran.stdout), ran.stdout + ran.stderr
    assert source_files(installed.site) == before


def test_uninstalling_the_triton_plugin_shows_in_deepgemms_answers_and_doctor(installed):
    installed.pip("uninstall", "-y", "-q", "moe-core-triton")
    try:
        explain = installed.moe_core("explain", "--preset", "tiny", "--scheme", "unquantized", "--platform", "h100")
        assert re.search(r"^\d+\s+deepgemm\s.*moe-core-triton is not installed \(pip install ./plugins/triton_backend\)", explain.stdout, re.M), explain.stdout
        assert not re.search(r"^\d+\s+triton\s", explain.stdout, re.M)
        doctor = installed.moe_core("doctor")
        assert doctor.returncode == 1 and "[moe_core_requires]: moe-core-triton is not installed" in doctor.stdout, doctor.stdout
    finally:
        installed.install("--no-deps", next(installed.wheels.glob("moe_core_triton-*.whl")))
