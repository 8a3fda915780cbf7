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
    return env


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


def write_plot(path: str, results: Sequence[BenchResult], metric: str = "time") -> None:
    """One panel per case: time (log) or percent of the copy-bandwidth roofline against tokens, a line per backend."""
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError as exc:
        raise RuntimeError("--plot needs matplotlib: pip install 'moe-core[plot]'") from exc
    fig, axes = plt.subplots(1, len(results), figsize=(6 * len(results), 4.5), squeeze=False)
    for ax, res in zip(axes[0], results):
        by_backend: dict[str, list[Row]] = {}
        for row in res.rows:
            if row.status == "ok":
                by_backend.setdefault(row.backend + (" (peer)" if row.kind == "peer" else ""), []).append(row)
        for name, rows in sorted(by_backend.items()):
            xs = [r.tokens for r in rows]
            ys = [r.time_s * 1e6 for r in rows] if metric == "time" else [r.pct_copy for r in rows]
            ax.plot(xs, ys, marker="o", label=name)
        ax.set_xscale("log", base=2)
        if metric == "time":
            ax.set_yscale("log")
        ax.set_xlabel("tokens")
        ax.set_ylabel("time (us)" if metric == "time" else "% of copy-bandwidth roofline")
        ax.set_title(res.request.label or res.request.scheme.name)
        ax.grid(True, which="both", alpha=0.3)
        ax.legend(fontsize=8)
    fig.suptitle(f"{results[0].device}: fused MoE forward")
    fig.tight_layout()
    fig.savefig(path, dpi=110)
