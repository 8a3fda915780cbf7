"""Experiment (issue 13, weight-only at 4096 tokens >= 0.85x bf16): prefill tiles of 256 token rows.

Run on a GPU: python docs/benchmarks/h100-2026-11-24-s30/wo_prefill_tiles.py preset:scheme:tokens ...

The tuner's candidates stop at BLOCK_M = 128. A weight-only GEMM dequantizes each [BLOCK_N, BLOCK_K] weight tile once
per row block, so its dequantization work per FLOP is 1 / BLOCK_M: 256 rows halve it. For each case this times
(``moe_core_triton.tune.tune_case``, each GEMM step as a forward runs it) the config the layer picks now and tiles of
128 and 256 rows, swapped and not, and prints every candidate's time, fastest first.
"""

from __future__ import annotations

import sys

from moe_core_triton import configs, tune

TILES = [(64, 64, 4, 3), (64, 64, 4, 4), (128, 64, 8, 3), (128, 64, 8, 4), (64, 128, 4, 3), (128, 128, 8, 3), (128, 64, 4, 4)]


def candidates(rows_per_expert, block_k_limit, weight_only=False, tma=False):
    out = []
    for bm in (128, 256):
        for bn, bk, warps, stages in TILES:
            for swap in (True, False):
                out.append(configs.LaunchConfig(bm, bn, bk, 8, warps, stages, swap, 1, False))
    return out


def fastest(timings):
    for seconds, lc in sorted(timings, key=lambda t: t[0]):
        print(f"    {seconds * 1e6:9.1f} us  {lc.BLOCK_M}x{lc.BLOCK_N}x{lc.BLOCK_K} w{lc.num_warps} s{lc.num_stages} swap={lc.SWAP_AB} tma={lc.TMA_B}", flush=True)
    return ORIGINAL_FASTEST(timings)


ORIGINAL_FASTEST = tune.fastest


def main(argv: list[str]) -> int:
    tune.candidates = globals()["candidates"]  # another experiment may set this module's candidates first
    tune.fastest = fastest
    for job in argv:
        preset, scheme, tokens = job.split(":")
        for t in tokens.split(","):
            print(f"== {preset} {scheme} T={t}", flush=True)
            tune.tune_case(preset, scheme, int(t))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
