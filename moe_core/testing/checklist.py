"""Named checks that print one PASS/FAIL line each, and ``moe-core bench`` runs, for a plugin's one-command GPU validation script."""

from __future__ import annotations

import dataclasses
import json
import os
import subprocess
import sys
import time
import traceback
from pathlib import Path

import torch


class Checks:
    """Runs named checks, printing PASS/FAIL lines and keeping a record of each; a failure never stops the next check."""

    def __init__(self):
        self.records = []

    def run(self, name, check):
        """Run ``check()`` (its return value is the detail printed after the name); True when it raised nothing."""
        started = time.monotonic()
        try:
            detail = check()
            ok = True
        except Exception as exc:  # noqa: BLE001 - every failure is reported, the next check still runs
            detail = f"{type(exc).__name__}: {exc}"
            traceback.print_exc()
            ok = False
        seconds = round(time.monotonic() - started, 1)
        print(f"{'PASS' if ok else 'FAIL'} {name} ({seconds} s){': ' + str(detail) if detail else ''}", flush=True)
        self.records.append({"check": name, "ok": ok, "detail": detail if isinstance(detail, (str, list, dict)) else str(detail), "seconds": seconds})
        return ok

    def failed(self) -> list[str]:
        return [r["check"] for r in self.records if not r["ok"]]

    def write(self, path: Path, **context) -> None:
        """``results.json``: ``context`` (device, versions, ...) and every check's record."""
        path.write_text(json.dumps({**context, "checks": self.records}, indent=1, default=str))

    def finish(self, out: Path, name: str, **context) -> int:
        """Write ``out/results.json``, print the summary line of ``name``'s check; the exit status (1 when any failed)."""
        self.write(out / "results.json", **context)
        failed = self.failed()
        print(f"{'FAIL' if failed else 'PASS'} {name} gpu_check: {len(self.records) - len(failed)}/{len(self.records)} checks passed; results in {out}")
        return 1 if failed else 0


def bench_command(out: Path, backends: str, scheme_name: str, preset: str, tokens: str) -> tuple[Path, list[str]]:
    """(output stem, argv) of one ``moe-core bench`` of ``backends`` on CUDA, its JSON under ``out``."""
    stem = out / f"bench-{preset}-{scheme_name}"
    return stem, [sys.executable, "-m", "moe_core.cli", "bench", "--preset", preset, "--scheme", scheme_name,
                  "--backends", backends, "--tokens", tokens, "--peers", "", "--device", "cuda",
                  "--json", f"{stem}.json", "--quiet"]


def run_bench(stem: Path, argv: list[str], timeout_s: int = 120) -> str:
    """Run a :func:`bench_command`, keep its output in ``<stem>.log``, print it; the JSON's path, or RuntimeError."""
    done = subprocess.run(argv, capture_output=True, text=True, timeout=timeout_s)
    stem.with_suffix(".log").write_text(" ".join(argv) + "\n" + done.stdout + done.stderr)
    print(done.stdout)
    if done.returncode:
        raise RuntimeError(f"exit {done.returncode}: {done.stderr[-2000:]}")
    return f"{stem}.json"


def run_benches(checks: Checks, out: Path, backends: str, scheme_names, preset: str, shape: str, tokens: str, *,
                began: float, deadline_s: float) -> None:
    """One ``moe-core bench`` check of ``backends`` per scheme on ``preset`` (``shape`` names it in the check); once
    ``deadline_s`` seconds have passed since ``began``, the rest are skipped with the command that runs each alone."""
    for scheme_name in scheme_names:
        stem, argv = bench_command(out, backends, scheme_name, preset, tokens)
        if time.monotonic() - began > deadline_s:
            print(f"SKIP moe-core bench {scheme_name}: past {deadline_s} s; alone: {' '.join(argv)}")
            continue
        checks.run(f"moe-core bench {backends.replace(',', ' vs ')}, {scheme_name}, {shape}", lambda s=stem, a=argv: run_bench(s, a))


def start(name: str, library, default_library: Path) -> Path | None:
    """Begin a GPU check of a plugin on ``library`` (an :class:`moe_core.ops_library.OpsLibrary`).

    Points the library's variable at ``default_library`` when it is unset and that file exists, prints
    the library's doctor lines, and returns the results folder ``$OUT/<name>`` (created); None, after a
    FAIL line, when no CUDA GPU is visible.
    """
    if library.variable not in os.environ and default_library.is_file():
        os.environ[library.variable] = str(default_library.resolve())
    out = Path(os.environ.get("OUT") or "out") / name
    out.mkdir(parents=True, exist_ok=True)
    if not torch.cuda.is_available():
        print("FAIL no CUDA GPU visible")
        return None
    for line in library.report_lines():
        print(line)
    return out


def check_hot_experts(kernel_cls, cfg, scheme_name: str, tokens: int = 333) -> float:
    """Every token on experts 3 and 5 (top_k 2), against the reference on CUDA: the relative error."""
    from moe_core.presets import random_inputs
    from moe_core.routing import Routing
    from moe_core.testing.conformance import check_against_reference

    x, routing = random_inputs(cfg, tokens, device="cuda")
    ids = torch.stack([torch.full_like(routing.topk_ids[:, 0], 3), torch.full_like(routing.topk_ids[:, 1], 5)], dim=1)
    return check_against_reference(kernel_cls, cfg, scheme_name, x, Routing(ids, routing.topk_weights))


def check_expert_map(kernel_cls, cfg, scheme_name: str, tokens: int) -> float:
    """Experts 0, 2, 4, 6 of 8 on this rank (expert-parallel size 2), against the reference on CUDA: the relative error."""
    from moe_core.config import ParallelConfig
    from moe_core.presets import random_inputs
    from moe_core.testing.conformance import check_against_reference

    cfg = dataclasses.replace(cfg, parallel=ParallelConfig(ep_size=2))
    emap = torch.tensor([0, -1, 1, -1, 2, -1, 3, -1], dtype=torch.int32, device="cuda")
    return check_against_reference(kernel_cls, cfg, scheme_name, *random_inputs(cfg, tokens, device="cuda"), emap)


def check_activations(checks: Checks, kernel_cls, cfg, scheme_name: str, tokens: int = 33) -> None:
    """Two checks against the reference on CUDA: ``cfg`` with gelu, and with the SwiGLU clamp at 0.5."""
    from moe_core.config import Activation
    from moe_core.presets import random_inputs
    from moe_core.testing.conformance import check_against_reference

    for label, change in (("gelu", dict(activation=Activation.GELU)), ("SwiGLU clamp 0.5", dict(swiglu_limit=0.5))):
        variant = dataclasses.replace(cfg, **change)
        checks.run(f"{label}, {scheme_name}", lambda c=variant: check_against_reference(
            kernel_cls, c, scheme_name, *random_inputs(c, tokens, device="cuda")))


def check_scheme_numerics(reg, backend: str, cfg, scheme_name: str, tokens) -> list[dict]:
    """:func:`moe_core.testing.conformance.check_numerics` for one scheme and layer: (tokens, error, tolerance) per case."""
    from moe_core.testing.conformance import check_numerics

    records = check_numerics(reg, backend, configs=[cfg], tokens=tokens, schemes=[scheme_name])
    return [{k: r[k] for k in ("tokens", "rel_err", "tolerance")} for r in records if "rel_err" in r]
