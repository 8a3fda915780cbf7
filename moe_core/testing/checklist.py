"""Named checks that print one PASS/FAIL line each, and ``moe-core bench`` runs, for a plugin's one-command GPU validation script."""

from __future__ import annotations

import json
import subprocess
import sys
import time
import traceback
from pathlib import Path


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
