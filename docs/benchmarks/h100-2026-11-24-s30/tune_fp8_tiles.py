"""Tune with fp8_prefill_tiles.py's candidates (plus the 128 x 128 x 128, 8 warps, 5 stages tile of Mixtral's current
fp8-block GEMM2 entry) and write the fastest into the data file, as ``python -m moe_core_triton.tune`` does.

Run on a GPU: python docs/benchmarks/h100-2026-11-24-s30/tune_fp8_tiles.py --preset mixtral-8x7b --scheme fp8-block --tokens 4096
"""

from __future__ import annotations

import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import fp8_prefill_tiles  # noqa: E402
import wo_prefill_tiles  # noqa: E402
from moe_core_triton import tune  # noqa: E402

if __name__ == "__main__":
    fp8_prefill_tiles.TILES.append((128, 128, 8, 5))
    tune.candidates = fp8_prefill_tiles.candidates
    tune.fastest = wo_prefill_tiles.fastest  # prints every candidate
    sys.exit(tune.main(sys.argv[1:]))
