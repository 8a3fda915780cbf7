"""Experiment: the Triton block table (one cooperative launch at every size).

Run on a GPU: python benchmarks/block_tables.py [--json OUT]
For several expert counts and pair counts: GPU time (CUDA-graph replay, do_bench median), time per call of
eager calls made back to back and host time (``moe_core.bench.timing``) of building one table with
BLOCK_M = 16, and the programs of its launch.
"""

from __future__ import annotations

import argparse
import sys

import torch

from moe_core.bench.harness import _capture
from moe_core.bench.report import save_experiment
from moe_core.bench.timing import Timer, host_time
from moe_core_triton.blocks import standard_table, table_grid


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--json")
    args = parser.parse_args()
    timer = Timer("cuda")
    rows = []
    device = torch.device("cuda")
    for experts in (8, 128, 256):
        for pairs in (8, 64, 512, 2048, 4096, 32768):
            ids = torch.randint(0, experts, (pairs, 1), device=device, dtype=torch.int32)
            fn = lambda: standard_table(ids, experts, experts, 16)  # noqa: E731
            graph = _capture(fn, [()])[0]
            row = {"experts": experts, "pairs": pairs,
                   "programs": table_grid(pairs, device)[1],
                   "graph_us": timer.time(graph.replay) * 1e6, "eager_us": timer.back_to_back(fn) * 1e6, "host_us": host_time(fn) * 1e6}
            rows.append(row)
            print("  ".join(f"{k}={v:.1f}" if isinstance(v, float) else f"{k}={v}" for k, v in row.items()), flush=True)
    if args.json:
        save_experiment(args.json, rows)
    return 0


if __name__ == "__main__":
    sys.exit(main())
