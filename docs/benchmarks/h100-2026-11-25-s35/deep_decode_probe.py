"""Session 35: do decode tiles with more bytes in flight per CTA (deeper pipelines, K steps of 256) beat the tuned
ones? At 1 token a Qwen3 w4a16 GEMM1 streams 12.6 MB in about 17 us, near 4x what HBM allows; each CTA holds at most
num_stages K steps of loads in flight. The tuner's search (tune.tune_case) over the tuned entries of both GEMMs and
their variants (BLOCK_N 32/64/128, BLOCK_K 128/256, 4 to 8 stages; swapped, unsplit), nothing written.

    python deep_decode_probe.py PRESET SCHEME TOKENS [--compile-only]
"""
import itertools
import sys
from dataclasses import replace

import torch

from moe_core.presets import model
from moe_core.quant import scheme
from moe_core_triton import tune
from moe_core_triton.kernel import TritonKernel

preset, name, tokens = sys.argv[1], sys.argv[2], int(sys.argv[3])
compile_only = "--compile-only" in sys.argv
cfg = model(preset).config()
kernel = TritonKernel(cfg, *scheme(name).keys)
here = torch.device("cuda")
rows = tokens * cfg.top_k
tuned = {gemm: kernel._config(here, rows, n, k, gemm, tokens)
         for gemm, n, k in ((1, cfg.intermediate_size, cfg.hidden_size), (2, cfg.hidden_size, cfg.intermediate_size))}


def tiles(rows_per_expert, *args, **kwargs):
    """The tuned entries of both GEMMs, then swapped unsplit variants with more bytes in flight."""
    base = tuned[1]
    variants = [replace(base, BLOCK_N=bn, BLOCK_K=bk, num_warps=w, num_stages=st, SWAP_AB=True, SPLIT_K=1)
                for bn, bk, st in itertools.product((32, 64, 128), (128, 256), (4, 6, 8)) for w in ((4, 8) if bn == 128 else (4,))]
    return list(dict.fromkeys([*tuned.values(), *variants]))


def timer(run):
    """The tuner's timer, printing each candidate's time."""
    seconds = tune.cuda_median_seconds(run)
    lc = run.args[0].config
    print(f"  {preset} {name} T={tokens} {lc.BLOCK_M}x{lc.BLOCK_N}x{lc.BLOCK_K} w{lc.num_warps} s{lc.num_stages} "
          f"swap={int(lc.SWAP_AB)} split={lc.SPLIT_K}: {seconds * 1e6:.1f} us", flush=True)
    return seconds


tune.candidates = tiles
tune.tune_case(preset, name, tokens, timer=tune.untimed if compile_only else timer)
