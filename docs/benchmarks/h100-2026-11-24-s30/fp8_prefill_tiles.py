"""Experiment (issue 12, fp8 vs bf16 at 4096 tokens): fp8 prefill tiles with fewer pipeline stages (two programs per
SM, so one's epilogue overlaps the other's K loop) and BLOCK_K 256 (half the K steps of Qwen3's short GEMM2, K = 768).

Run on a GPU: python docs/benchmarks/h100-2026-11-24-s30/fp8_prefill_tiles.py preset:scheme:tokens ...
Prints every candidate's time per GEMM step, fastest first (wo_prefill_tiles.py's printer), TMA weight loads on and off.
"""

from __future__ import annotations

import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import wo_prefill_tiles as base  # noqa: E402
from moe_core_triton import configs  # noqa: E402

TILES = [(128, 128, 8, 2), (128, 128, 8, 3), (128, 128, 8, 4), (128, 256, 8, 2), (128, 256, 8, 3), (256, 128, 8, 2),
         (256, 128, 8, 3), (128, 128, 4, 3), (64, 128, 4, 3), (64, 256, 4, 3), (128, 256, 4, 2)]


def candidates(rows_per_expert, block_k_limit, weight_only=False, tma=False):
    out = []
    for bm in (64, 128):
        for bn, bk, warps, stages in TILES:
            if block_k_limit is not None and bk > block_k_limit:
                continue
            for tma_b in (False, True):
                out.append(configs.LaunchConfig(bm, bn, bk, 8, warps, stages, False, 1, tma_b))
    return out


if __name__ == "__main__":
    base.candidates = candidates
    sys.exit(base.main(sys.argv[1:]))
