"""benchmarks/ep_gpu.py --phases profile on CPUs (gloo, tiny shapes): every dispatcher's dispatch + combine is
profiled, its ops listed per call with the collective among them, and the table printed by rank 0."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def test_the_profile_phase_lists_each_dispatchers_ops_per_call(tmp_path):
    out = tmp_path / "profile.json"
    done = subprocess.run([sys.executable, str(ROOT / "benchmarks" / "ep_gpu.py"), "--world", "2", "--device", "cpu", "--small",
                           "--phases", "profile", "--tokens", "16", "--json", str(out)],
                          capture_output=True, text=True, timeout=600, cwd=ROOT)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    ranks = json.loads(out.read_text())["ranks"]
    profiled = {d: rows for group in ranks.values() for d, rows in group[0]["profile"].items()}
    assert {"naive", "all_to_all", "packed_all_to_all", "batched_all_to_all"} <= set(profiled)
    packed = {row["op"]: row for row in profiled["packed_all_to_all"]}
    assert packed["c10d::alltoall_base_"]["count"] == 2  # one all-to-all each way per dispatch + combine
    assert all(row["us_per_call"] >= 0 and row["count"] >= 1 for rows in profiled.values() for row in rows)
    assert done.stdout.count("PROFILE tiny 16 tok/rank") == len(profiled)  # rank 0 prints one table per dispatcher
