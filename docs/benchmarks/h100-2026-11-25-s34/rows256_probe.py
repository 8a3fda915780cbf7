"""Session 34, call 6: do swapped weight-only tiles of 256 token rows (the MMA's N = 256, each dequantized weight tile
used by twice the rows) beat the tuned 128-row tiles at 4096 tokens now that the codes are in fragment order? The
tuner's search (tune.tune_case) over the tuned entry and its 256-row variants, nothing written.

    python rows256_probe.py PRESET SCHEME
"""
import sys
from dataclasses import replace

import torch

from moe_core.presets import model
from moe_core.quant import scheme
from moe_core_triton import tune
from moe_core_triton.kernel import TritonKernel

preset, name = sys.argv[1:3]
cfg = model(preset).config()
kernel = TritonKernel(cfg, *scheme(name).keys)
here = torch.device("cuda")
rows = 4096 * cfg.top_k
tuned = {gemm: kernel._config(here, rows, n, k, gemm, 4096)
         for gemm, n, k in ((1, cfg.intermediate_size, cfg.hidden_size), (2, cfg.hidden_size, cfg.intermediate_size))}


def tiles(rows_per_expert, *args, **kwargs):
    """The tuned entries of both GEMMs and 256-row variants (8 warps, 3 or 4 stages, 64 or 128 columns)."""
    variants = [replace(lc, BLOCK_M=256, BLOCK_N=bn, num_warps=8, num_stages=st) for lc in tuned.values()
                for bn in (64, 128) for st in (3, 4)]
    return list(dict.fromkeys([*tuned.values(), *variants]))


def timer(run):
    """The tuner's timer, printing each candidate's time."""
    seconds = tune.cuda_median_seconds(run)
    lc = run.args[0].config
    print(f"  {preset} {name} BLOCK_M={lc.BLOCK_M} BLOCK_N={lc.BLOCK_N} warps={lc.num_warps} stages={lc.num_stages}: "
          f"{seconds * 1e6:.1f} us", flush=True)
    return seconds


tune.candidates = tiles
tune.tune_case(preset, name, 4096, timer=timer)
