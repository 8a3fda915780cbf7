"""The tile search of moe_core_triton.tune with three deeper-pipeline decode tiles added to its candidates (session 43):
(BLOCK_N, BLOCK_K, warps, stages) = (64, 128, 4, 6), (64, 128, 4, 8), (64, 256, 4, 8). The tuned K-256 decode tiles
of int4 codes keep twice the bytes in flight of the K-128 tiles at 4 stages, which cost fewer instructions a K step.

    python deeper_stages.py --jobs 16 --preset mixtral-8x7b --scheme w4a16 --tokens 16   (the tuner's arguments)
"""
import sys

from moe_core_triton import tune

tune._TILES.extend([(64, 128, 4, 6), (64, 128, 4, 8), (64, 256, 4, 8)])

sys.exit(tune.main(sys.argv[1:]))
