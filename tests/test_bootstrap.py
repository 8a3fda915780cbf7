"""The set-up scripts: where the venv's torch comes from (scripts/prepare_venv.py) and an offline
bootstrap that reuses the torch of the Python it starts from (scripts/bootstrap.sh). No network.

The starting Pythons are throwaway venvs without pip whose site-packages hold a stand-in ``torch``
package (and ``pip``, when a test wants one), so every case runs in a fraction of a second.
"""

from __future__ import annotations

import importlib.util
import os
import subprocess
import sys
import venv
from pathlib import Path

import pytest
import torch

ROOT = Path(__file__).resolve().parents[1]
PREPARE = ROOT / "scripts" / "prepare_venv.py"
BOOTSTRAP = ROOT / "scripts" / "bootstrap.sh"

CUDA_TORCH = '__version__ = "2.11.0+cu130"\nclass version:\n    cuda = "13.0"\n    hip = None\n'
ROCM_TORCH = '__version__ = "2.9.1+rocm6.4"\nclass version:\n    cuda = None\n    hip = "6.4.43482"\n'
CPU_TORCH = '__version__ = "2.13.0+cpu"\nclass version:\n    cuda = None\n    hip = None\n'
OLD_TORCH = '__version__ = "2.3.1+cu121"\nclass version:\n    cuda = "12.1"\n    hip = None\n'
BROKEN_TORCH = 'raise OSError("libcudart.so.13: cannot open shared object file")\n'


def clean_env(**overrides: str) -> dict[str, str]:
    """This process's environment without set-up, moe-core or pip settings and PYTHONPATH, plus ``overrides``."""
    env = {k: v for k, v in os.environ.items() if not k.startswith(("MOE_CORE_", "PIP_")) and k != "PYTHONPATH"}
    return {**env, **overrides}


def starting_python(where: Path, torch_source: str | None, pip: bool = True) -> Path:
    """A throwaway Python: a venv without pip whose site-packages holds ``torch_source`` as torch (and a pip)."""
    venv.EnvBuilder(with_pip=False).create(where)
    site = next(where.glob("lib/python*/site-packages"))
    packages = {"torch": torch_source, "pip": "" if pip else None}
    for name, source in packages.items():
        if source is not None:
            (site / name).mkdir()
            (site / name / "__init__.py").write_text(source)
    return where / "bin" / "python"


def prepare(python: Path, target: Path, mode: str | None = None, dry_run: bool = True) -> subprocess.CompletedProcess:
    """Run prepare_venv.py with ``python`` for the venv at ``target``, MOE_CORE_TORCH=``mode`` (None: unset)."""
    env = clean_env() if mode is None else clean_env(MOE_CORE_TORCH=mode)
    command = [str(python), str(PREPARE), str(target)] + (["--dry-run"] if dry_run else [])
    return subprocess.run(command, env=env, capture_output=True, text=True, timeout=60)


@pytest.mark.parametrize(
    "torch_source, pip, mode, expected, says",
    [
        (CUDA_TORCH, True, None, "system", "reusing torch 2.11.0+cu130 (CUDA 13.0)"),
        (ROCM_TORCH, True, "auto", "system", "reusing torch 2.9.1+rocm6.4 (ROCm 6.4.43482)"),
        (CPU_TORCH, True, "", "system", "reusing torch 2.13.0+cpu (CPU)"),
        (None, True, None, "cpu", "No module named 'torch'"),
        (BROKEN_TORCH, True, None, "cpu", "OSError: libcudart.so.13"),
        (OLD_TORCH, True, None, "cpu", "2.3.1+cu121, outside pyproject.toml's torch>=2.4"),
        (CUDA_TORCH, False, None, "cpu", "has torch but no pip"),
        (CUDA_TORCH, True, "cpu", "cpu", "MOE_CORE_TORCH=cpu"),
        (None, False, "cpu", "cpu", "MOE_CORE_TORCH=cpu"),
        (CUDA_TORCH, True, "system", "system", "reusing torch 2.11.0+cu130"),
    ],
    ids=["cuda", "rocm", "cpu-build-in-range", "absent", "broken", "too-old", "no-pip", "forced-cpu",
         "forced-cpu-no-torch", "forced-system"],
)
def test_decision(tmp_path, torch_source, pip, mode, expected, says):
    python = starting_python(tmp_path / "start", torch_source, pip)
    result = prepare(python, tmp_path / "venv", mode)
    assert result.returncode == 0, result.stderr
    assert result.stdout == f"{expected}\n"
    assert says in result.stderr
    assert not (tmp_path / "venv").exists(), "--dry-run created the venv"


@pytest.mark.parametrize("torch_source", [None, OLD_TORCH, BROKEN_TORCH])
def test_forced_system_without_a_usable_torch_is_an_error(tmp_path, torch_source):
    python = starting_python(tmp_path / "start", torch_source)
    result = prepare(python, tmp_path / "venv", "system")
    assert result.returncode == 2
    assert result.stdout == ""
    assert "MOE_CORE_TORCH=system, but" in result.stderr
    assert "set MOE_CORE_TORCH=cpu" in result.stderr


@pytest.mark.parametrize("value", ["gpu", "System", "1"])
def test_invalid_value_lists_the_valid_ones(tmp_path, value):
    python = starting_python(tmp_path / "start", CUDA_TORCH)
    result = prepare(python, tmp_path / "venv", value)
    assert result.returncode == 2
    assert result.stdout == ""
    assert f"MOE_CORE_TORCH={value!r} is not valid; use one of: auto, system, cpu" in result.stderr


def test_system_venv_sees_the_starting_packages_and_keeps_its_choice(tmp_path):
    python = starting_python(tmp_path / "start", CUDA_TORCH)
    target = tmp_path / "venv"
    created = prepare(python, target, dry_run=False)
    assert created.returncode == 0, created.stderr
    assert created.stdout == "system\n"
    show = "import pip, torch; print(torch.__version__); print(torch.__file__); print(pip.__file__)"
    seen = subprocess.run([str(target / "bin" / "python"), "-c", show], env=clean_env(),
                          capture_output=True, text=True, check=True).stdout.splitlines()
    start_site = next((tmp_path / "start").glob("lib/python*/site-packages"))
    assert seen == ["2.11.0+cu130", str(start_site / "torch" / "__init__.py"), str(start_site / "pip" / "__init__.py")]
    assert not list(target.glob("lib/python*/site-packages/pip")), "a system venv borrows pip, it has none of its own"
    again = prepare(python, target)
    assert (again.returncode, again.stdout) == (0, "system\n")
    assert "exists, set up as 'system'" in again.stderr
    forced = prepare(python, target, "cpu")
    assert forced.returncode == 2
    assert f"rm -rf {target}" in forced.stderr


def test_bootstrap_reuses_its_pythons_torch_offline(tmp_path):
    """The whole bootstrap, from this test's Python (which has torch, pip and every test requirement),
    with pip forbidden to look anywhere: it succeeds only if nothing needs downloading."""
    target = tmp_path / "venv"
    env = clean_env(PYTHON=sys.executable, MOE_CORE_VENV=str(target), MOE_CORE_TORCH="system",
                    PIP_NO_INDEX="1", PIP_CONFIG_FILE=os.devnull)
    show = "import moe_core, moe_core_triton, torch; print(torch.__file__); print(moe_core.__file__)"
    result = subprocess.run(["bash", str(BOOTSTRAP), "python", "-c", show], env=env, cwd=tmp_path,
                            capture_output=True, text=True, timeout=300)
    assert result.returncode == 0, result.stderr
    assert result.stdout.splitlines() == [torch.__file__, str(ROOT / "moe_core" / "__init__.py")]
    assert "reusing torch" in result.stderr
    own = next(target.glob("lib/python*/site-packages"))
    assert list(own.glob("moe_core-*.dist-info")), "moe-core was not installed into the venv"
    assert not list(own.glob("torch*")), "torch was installed into the venv"
    assert (target / ".moe-core-installed").is_file()
    assert list(own.glob("moe_core_flashinfer-*.dist-info")), "a plugin whose provider is out of reach is installed all the same"
    if importlib.util.find_spec("flashinfer") is None:  # offline without the provider: said, not fatal
        assert "could not install the provider of flashinfer_backend" in result.stderr
    assert (target / "bin" / "moe-core").is_file()
