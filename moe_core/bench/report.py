"""Benchmark outputs: JSON (everything), CSV (one line per row), PNG plot (matplotlib, optional)."""

from __future__ import annotations

import csv
import json
import platform as pyplatform
from datetime import datetime, timezone
from typing import Sequence

import torch

from moe_core.bench.harness import BenchResult, Row


def environment() -> dict:
    env = {"torch": torch.__version__, "python": pyplatform.python_version(), "date": datetime.now(timezone.utc).isoformat(timespec="seconds")}
    try:
        import triton

        env["triton"] = triton.__version__
    except ImportError:
        pass
    if torch.cuda.is_available():
        env["cuda"] = torch.version.cuda
        env["gpu"] = torch.cuda.get_device_name()
    env.update(provider_versions())
    return env


def provider_versions() -> dict[str, str]:
    """Versions of the optional providers installed here (deep_gemm, flashinfer, ...), recorded with measured rankings."""
    from moe_core.platform import OPTIONAL_PACKAGES
    from moe_core.ranking_sources import installed_version
    from moe_core.resolver import current_platform

    here = current_platform()
    found = {pkg: installed_version(pkg) for pkg in OPTIONAL_PACKAGES if pkg != "triton" and here.has_package(pkg)}
    return {pkg: version for pkg, version in found.items() if version}


def save_experiment(path: str, rows: list[dict]) -> None:
    """Write an experiment script's rows (benchmarks/*.py ``--json``) with the environment they ran in."""
    with open(path, "w") as fh:
        json.dump({"environment": environment(), "rows": rows}, fh, indent=1)


def to_json(results: Sequence[BenchResult], command: str) -> dict:
    return {
        "command": command,
        "environment": environment(),
        "ceilings": results[0].ceilings.to_dict() if results else None,
        "timing": results[0].timing if results else None,
        "cases": [
            {
                "label": r.request.label,
                "scheme": r.request.scheme.name,
                "layer": {"num_experts": r.request.config.num_experts, "top_k": r.request.config.top_k,
                          "hidden_size": r.request.config.hidden_size, "intermediate_size": r.request.config.intermediate_size,
                          "dtype": r.request.config.dtype_name},
                "rows": [row.to_dict() for row in r.rows],
            }
            for r in results
        ],
    }


def write_json(path: str, results: Sequence[BenchResult], command: str) -> None:
    with open(path, "w") as fh:
        json.dump(to_json(results, command), fh, indent=2)


def write_csv(path: str, results: Sequence[BenchResult]) -> None:
    names = list(Row.__dataclass_fields__)
    with open(path, "w", newline="") as fh:
        writer = csv.DictWriter(fh, fieldnames=["scheme", *names])
        writer.writeheader()
        for res in results:
            for row in res.rows:
                writer.writerow({"scheme": res.request.scheme.name, **row.to_dict()})


def write_plot(path: str, doc: dict, metric: str = "time") -> None:
    """From a ``to_json`` document: one panel per case, time (log) or percent of the copy roofline against tokens."""
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError as exc:
        raise RuntimeError("--plot needs matplotlib: pip install 'matplotlib>=3.7' (from a clone of moe-core: pip install '.[plot]')") from exc
    cases = doc["cases"]
    cols = min(4, len(cases))
    rows = -(-len(cases) // cols)
    fig, axes = plt.subplots(rows, cols, figsize=(max(7, 5 * cols), 4 * rows + 0.6), squeeze=False)
    for ax in axes.flat[len(cases):]:
        ax.set_visible(False)
    names = sorted({r["backend"] + (" (peer)" if r["kind"] == "peer" else "") for c in cases for r in c["rows"] if r["status"] == "ok"})
    colors = {name: f"C{i % 10}" for i, name in enumerate(names)}  # one color per backend across panels
    for ax, case in zip(axes.flat, cases):
        lines: dict[str, list[dict]] = {}
        for row in case["rows"]:
            if row["status"] == "ok":
                lines.setdefault(row["backend"] + (" (peer)" if row["kind"] == "peer" else ""), []).append(row)
        for name, points in sorted(lines.items()):
            ys = [p["time_s"] * 1e6 for p in points] if metric == "time" else [p["pct_copy"] for p in points]
            ax.plot([p["tokens"] for p in points], ys, marker="o", label=name, color=colors[name])
        ax.set_xscale("log", base=2)
        if metric == "time":
            ax.set_yscale("log")
        ax.set_xlabel("tokens")
        ax.set_ylabel("time (us)" if metric == "time" else "% of copy-bandwidth roofline")
        ax.set_title(case["label"] or case["scheme"], fontsize=10)
        ax.grid(True, which="both", alpha=0.3)
        ax.legend(fontsize=7)
    device = (doc.get("ceilings") or {}).get("device", "")
    fig.suptitle(f"{device}: fused MoE forward\n{doc.get('timing', '')}", fontsize=10)
    fig.tight_layout()
    fig.savefig(path, dpi=100)
