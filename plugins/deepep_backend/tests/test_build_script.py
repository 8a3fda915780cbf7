"""build_deepep.sh on a stand-in DeepEP tree (a pure-Python package with DeepEP's file layout): where the wheel
lands and that the tree pointed at stays untouched. The compile itself runs on a GPU machine (scripts/gpu_check.sh)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

SCRIPT = Path(__file__).resolve().parents[1] / "moe_core_deepep" / "build_deepep.sh"


def _stand_in_tree(root: Path) -> Path:
    src = root / "DeepEP"
    for f in ("deep_ep/buffer.py", "csrc/deep_ep.cpp", "csrc/kernels/intranode.cu"):
        (src / f).parent.mkdir(parents=True, exist_ok=True)
        (src / f).write_text("")
    (src / "deep_ep/__init__.py").write_text("")
    (src / "setup.py").write_text("from setuptools import setup\nsetup(name='deep_ep', version='1.2.1', packages=['deep_ep'])\n")
    return src


def test_a_relative_wheel_folder_is_taken_from_where_the_script_was_called(tmp_path):
    src = _stand_in_tree(tmp_path)
    before = sorted(p.relative_to(src) for p in src.rglob("*"))
    env = {**os.environ, "PYTHON": sys.executable, "TMPDIR": str(tmp_path), "NVSHMEM_DIR": str(tmp_path)}
    done = subprocess.run(["bash", str(SCRIPT), str(src), "--wheel", "out/wheel"], cwd=tmp_path, env=env,
                          capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-2000:]
    assert [p.name for p in (tmp_path / "out/wheel").iterdir()] == ["deep_ep-1.2.1-py3-none-any.whl"]
    assert sorted(p.relative_to(src) for p in src.rglob("*")) == before  # built in a copy
    assert not list(tmp_path.glob("deepep-build.*"))  # the copy is removed


def test_a_tree_that_is_not_deepep_v1_is_refused_with_the_tag_to_check_out(tmp_path):
    done = subprocess.run(["bash", str(SCRIPT), str(tmp_path)], capture_output=True, text=True, timeout=60)
    assert done.returncode == 2 and "tag v1.2.1" in done.stderr
