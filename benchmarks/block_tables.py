"""Experiment: the Triton block table, one-program kernel vs the two-launch parallel kernels.

Run on a GPU: python benchmarks/block_tables.py [--json OUT]
For several expert counts and pair counts: GPU time (CUDA-graph replay, do_bench median) and host
time (``moe_core.bench.timing.host_time``) of building one table with BLOCK_M = 16; the one-program
kernel only up to its limit (SMALL_TABLE_PAIRS).
"""

from __future__ import annotations

import argparse
import sys

import torch

from moe_core.bench.harness import _capture
from moe_core.bench.report import save_experiment
from moe_core.bench.timing import Timer, host_time
from moe_core_triton.blocks import SMALL_TABLE_PAIRS, _large_table, _small_table


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--json")
    args = parser.parse_args()
    timer = Timer("cuda")
    rows = []
    for experts in (8, 128, 256):
        for pairs in (8, 64, 512, 2048, 4096, 32768):
            ids = torch.randint(0, experts, (pairs, 1), device="cuda", dtype=torch.int32)
            row = {"experts": experts, "pairs": pairs}
            for name, build in (("one_program", _small_table), ("parallel", _large_table)):
                if name == "one_program" and pairs > SMALL_TABLE_PAIRS:
                    continue
                fn = lambda b=build: b(ids, experts, experts, 16, None, None)  # noqa: E731
                graph = _capture(lambda: fn(), [()])[0]
                row[f"{name}_graph_us"] = timer.time(graph.replay) * 1e6
                row[f"{name}_host_us"] = host_time(fn) * 1e6
            rows.append(row)
            print("  ".join(f"{k}={v:.1f}" if isinstance(v, float) else f"{k}={v}" for k, v in row.items()), flush=True)
    if args.json:
        save_experiment(args.json, rows)
    return 0


if __name__ == "__main__":
    sys.exit(main())
