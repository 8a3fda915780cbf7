"""Block-scaled (fp8-block) GEMMs multiply each K step by one scalar weight scale when every N tile lies in
one 128-row weight block (and GEMM1's up rows start on a block boundary), and by a per-column vector
otherwise. Both ways give the reference's result, swapped or not, for tiles inside and across blocks."""

import pytest
import torch

from moe_core.config import MoEConfig
from moe_core.presets import random_inputs
from moe_core.quant import scheme
from moe_core.testing import conformance
from moe_core_triton.compile_check import with_launch_fields
from moe_core_triton.configs import LaunchConfig
from moe_core_triton.kernel import TritonKernel

GPU = torch.cuda.is_available()
DEVICE = "cuda" if GPU else "cpu"
DTYPE = torch.bfloat16 if GPU else torch.float16  # bfloat16 is garbage in the interpreter


def one_scale_per_tile(cfg: MoEConfig, block_n: int, gated: bool) -> bool:
    lc = LaunchConfig(16, block_n, 128, 1, 4, 4)
    return TritonKernel(cfg, *scheme("fp8-block").keys)._one_weight_scale_per_tile(lc, gated)


def test_a_scalar_weight_scale_only_where_the_tile_and_its_up_rows_lie_in_one_block():
    aligned, unaligned = MoEConfig(4, 2, 384, 256, dtype=DTYPE), MoEConfig(4, 2, 384, 192, dtype=DTYPE)
    assert one_scale_per_tile(aligned, 64, gated=True) and one_scale_per_tile(aligned, 128, gated=False)
    assert not one_scale_per_tile(aligned, 256, gated=False)  # a tile across two blocks
    assert not one_scale_per_tile(unaligned, 64, gated=True)  # the up rows start at 192, inside a block
    assert one_scale_per_tile(unaligned, 64, gated=False)  # GEMM2 has no up rows
    unquantized = TritonKernel(aligned, None, None)._one_weight_scale_per_tile(LaunchConfig(16, 64, 128, 1, 4, 4), True)
    assert not unquantized


@pytest.mark.parametrize("swap_ab", [False, True])
@pytest.mark.parametrize("block_n", [32, 64, 128, 256])
@pytest.mark.parametrize("intermediate", [256, 192])
def test_weight_block_scales_match_the_reference(block_n, swap_ab, intermediate):
    cfg = MoEConfig(4, 2, 384, intermediate, dtype=DTYPE)  # N spans 2-3 weight blocks in both GEMMs
    x, routing = random_inputs(cfg, 7, device=DEVICE, seed=block_n + intermediate)
    stages = {"num_stages": 3} if block_n == 256 else {}  # a 16x256x128 tile in 4 stages exceeds the H100's shared memory
    kernel_cls = with_launch_fields(TritonKernel, BLOCK_N=block_n, SWAP_AB=swap_ab, **stages)
    conformance.check_against_reference(kernel_cls, cfg, "fp8-block", x, routing)
