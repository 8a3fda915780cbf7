"""Measure and write the ranking moe-core ships for a GPU (``moe_core/rankings/<device-slug>.json``).

Two steps, one command on the GPU:

  python benchmarks/ship_ranking.py run     # time the presets x schemes x token counts, then merge
  python benchmarks/ship_ranking.py merge   # only merge recorded bench JSONs (any machine)

``run`` calls ``moe-core bench`` once per group of cases (:data:`GROUPS`; DeepSeek-V3 bf16, the
largest, alone and last) so that a group that fails (out of memory, say) loses only itself; it
starts no group once ``--budget-s`` has passed and says which it skipped. Its JSONs go to ``$OUT/ship-ranking/`` (else ``./ship-ranking-out/``). ``merge``
reads every ``moe-core bench --json`` document under ``docs/benchmarks`` plus the new ones, keeps
those measured on the device, and writes the ranking (rules: moe_core/ranking_merge.py) to
``moe_core/rankings/`` and, under ``run``, to the output folder too. Backends ranked: the
first-party ones (those of the plugins in this repository and the reference).
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from moe_core.ranking import device_slug  # noqa: E402
from moe_core.ranking_merge import deciding, merge, points  # noqa: E402

#: Backends of the first-party plugins (plugins/*) and the core's reference: the ones a shipped ranking orders.
FIRST_PARTY = frozenset({"reference", "triton", "triton_batched", "deepgemm", "batched_deepgemm", "marlin", "aiter",
                         "flashinfer_trtllm", "flashinfer_cutlass", "flashinfer_cutedsl", "flashinfer_cutedsl_batched",
                         "flashinfer_cutile", "flashinfer_b12x", "vllm_cutlass", "batched_vllm_cutlass",
                         "triton_ws_sm90"})
#: (preset, comma-separated schemes) per bench process, most wanted first.
GROUPS = (("deepseek-v3", "fp8-block"), ("qwen3-30b-a3b", "fp8-block,unquantized,w4a16,w8a16"),
          ("mixtral-8x7b", "fp8-block,unquantized"), ("deepseek-v3", "unquantized"))
TOKENS = "1,16,64,256,1024,4096,16384"


def recorded(roots: list[Path]) -> list[tuple[Path, dict]]:
    """Every ``moe-core bench --json`` document under ``roots``."""
    found = []
    for root in roots:
        for path in sorted(root.rglob("*.json")) if root.is_dir() else [root]:
            try:
                doc = json.loads(path.read_text())
            except (OSError, ValueError):
                continue
            if isinstance(doc, dict) and isinstance(doc.get("cases"), list) and "environment" in doc:
                found.append((path, doc))
    return found


def write_ranking(roots: list[Path], device: str, targets: list[Path], command: str) -> None:
    docs = recorded(roots)
    pts = [p for path, doc in docs for p in points(doc, device, FIRST_PARTY, str(path.relative_to(REPO) if path.is_relative_to(REPO) else path))]
    ranking = merge(pts, device, command)
    if not ranking.entries:
        print(f"FAIL: no bench results measured on {device!r} under {', '.join(map(str, roots))}")
        raise SystemExit(1)
    for target in targets:
        target.parent.mkdir(parents=True, exist_ok=True)
        ranking.save(target)
        print(f"wrote {target}: {len(ranking.entries)} entries from {len(docs)} bench documents")
    for (shape, tokens), p in sorted(deciding(pts).items()):
        print(f"  {'/'.join(map(str, shape))} T={tokens}: {', '.join(p.order)}  ({p.date[:10]} {p.where})")


def run(args) -> None:
    import torch

    if not torch.cuda.is_available():
        print("FAIL: run needs a GPU; use `merge` to rebuild the ranking from recorded results")
        raise SystemExit(1)
    device = torch.cuda.get_device_name()
    out = Path(os.environ.get("OUT") or "ship-ranking-out") / "ship-ranking"
    out.mkdir(parents=True, exist_ok=True)
    start = time.perf_counter()
    failed = []
    for preset, schemes in GROUPS:
        label = f"{preset} {schemes}"
        if time.perf_counter() - start > args.budget_s:
            print(f"SKIPPED {label}: the {args.budget_s:.0f} s budget was spent")
            continue
        group_start = time.perf_counter()
        name = f"bench_{preset}_{schemes.replace(',', '_')}"
        cmd = [sys.executable, "-m", "moe_core.cli", "bench", "--quiet", "--preset", preset, "--scheme", schemes,
               "--tokens", args.tokens, "--peers", "reference", "--reference-max-tokens", str(args.reference_max_tokens),
               "--json", str(out / f"{name}.json")]
        code = _run_logged(cmd, out / f"{name}.txt", args.deadline_s - (time.perf_counter() - start))
        if code != 0:
            failed.append(label)
        print(f"{'PASS' if code == 0 else 'FAIL'} {label}: {time.perf_counter() - group_start:.0f} s (exit {code}; see {name}.txt)", flush=True)
    slug = device_slug(device)
    write_ranking([REPO / "docs" / "benchmarks", out], device, [REPO / "moe_core" / "rankings" / f"{slug}.json", out / f"{slug}.json"],
                  "python benchmarks/ship_ranking.py run")
    print(f"benchmarks and merge: {time.perf_counter() - start:.0f} s; " + (f"FAIL: {', '.join(failed)}" if failed else "PASS: every group ran"))
    if args.tune_check:
        # What autotuning costs here: the same measurement at run time would cost this per (shape, token bucket).
        env = {**os.environ, "MOE_CORE_CACHE_DIR": str(out / "tune-cache")}
        cmd = [sys.executable, "-m", "moe_core.cli", "tune", "--preset", "qwen3-30b-a3b,deepseek-v3",
               "--scheme", "fp8-block", "--tokens", "64,4096"]
        code = _run_logged(cmd, out / "tune_check.txt", 75, env)
        print(f"{'PASS' if code == 0 else 'FAIL'} moe-core tune check (exit {code}):")
        print((out / "tune_check.txt").read_text())
    print(f"total {time.perf_counter() - start:.0f} s")


def _run_logged(cmd: list[str], log: Path, timeout_s: float, env: dict | None = None) -> int:
    """Run ``cmd`` from the repository root, its command line and output into ``log``; 124 when it ran out of time."""
    try:
        done = subprocess.run(cmd, cwd=REPO, capture_output=True, text=True, timeout=max(timeout_s, 10), env=env)
    except subprocess.TimeoutExpired as exc:
        log.write_text(" ".join(cmd[1:]) + f"\ntimed out after {exc.timeout:.0f} s\n" + (exc.stdout or b"").decode() + (exc.stderr or b"").decode())
        return 124
    log.write_text(" ".join(cmd[1:]) + "\n" + done.stdout + done.stderr)
    return done.returncode


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = parser.add_subparsers(dest="step", required=True)
    p = sub.add_parser("run", help="benchmark on this GPU, then merge")
    p.add_argument("--tokens", default=TOKENS)
    p.add_argument("--reference-max-tokens", type=int, default=64, help="time the (slow) reference only up to here")
    p.add_argument("--budget-s", type=float, default=220.0, help="start no group after this many seconds")
    p.add_argument("--deadline-s", type=float, default=300.0, help="stop a group still running at this many seconds")
    p.add_argument("--no-tune-check", dest="tune_check", action="store_false", help="skip timing `moe-core tune` afterwards")
    p = sub.add_parser("merge", help="merge recorded bench JSONs into the shipped ranking")
    p.add_argument("--device", default="NVIDIA H100 80GB HBM3")
    p.add_argument("roots", nargs="*", type=Path, help="bench JSONs or folders (default: docs/benchmarks)")
    args = parser.parse_args()
    if args.step == "run":
        run(args)
    else:
        write_ranking(args.roots or [REPO / "docs" / "benchmarks"], args.device,
                      [REPO / "moe_core" / "rankings" / f"{device_slug(args.device)}.json"], "python benchmarks/ship_ranking.py merge")


if __name__ == "__main__":
    main()
