"""SWAP_AB launch configurations (the transposed tile product: weights as the MMA's first operand) give the
reference's result for every scheme and both formats. Tuned data files may pick them per token count;
the heuristic never does, so these tests force them."""

import dataclasses

import pytest
import torch

from moe_core.config import MoEConfig, ParallelConfig
from moe_core.presets import random_inputs
from moe_core.routing import BatchedRouting, Routing
from moe_core.testing import conformance
from moe_core_triton.compile_check import layer_sizes, with_launch_fields
from moe_core_triton.configs import LaunchConfig
from moe_core_triton.kernel import TritonBatchedKernel, TritonKernel
from moe_core_triton.plugin import BATCHED_SCHEMES, STANDARD_SCHEMES

GPU = torch.cuda.is_available()
DEVICE = "cuda" if GPU else "cpu"
DTYPE = torch.bfloat16 if GPU else torch.float16  # bfloat16 is garbage in the interpreter
Swapped = with_launch_fields(TritonKernel, SWAP_AB=True)
SwappedBatched = with_launch_fields(TritonBatchedKernel, SWAP_AB=True)


def test_the_override_reaches_every_launch_and_defaults_stay_unswapped():
    cfg = MoEConfig(8, 2, 256, 128, dtype=DTYPE)
    assert Swapped(cfg, None, None)._config(torch.device(DEVICE), 40, 128, 256, gemm=1, tokens=20).SWAP_AB
    assert not TritonKernel(cfg, None, None)._config(torch.device(DEVICE), 40, 128, 256, gemm=1, tokens=20).SWAP_AB
    assert LaunchConfig(16, 64, 64, 1, 4, 4).SWAP_AB is False  # data files written before the field read as unswapped


@pytest.mark.parametrize("name", STANDARD_SCHEMES)
def test_standard_format_with_an_expert_map(name):
    hidden, intermediate = layer_sizes(name)
    cfg = MoEConfig(8, 2, hidden, intermediate, dtype=DTYPE, parallel=ParallelConfig(ep_size=2))
    x, routing = random_inputs(cfg, 9, device=DEVICE)
    ids = torch.where(routing.topk_ids == 5, 6, routing.topk_ids)  # local expert 1 (global 5) gets no token
    expert_map = torch.tensor([-1, -1, -1, -1, 0, 1, 2, 3], dtype=torch.int32, device=DEVICE)
    conformance.check_against_reference(Swapped, cfg, name, x, Routing(ids, routing.topk_weights), expert_map)
    conformance.check_against_reference(Swapped, dataclasses.replace(cfg, parallel=ParallelConfig()), name, x, routing)


@pytest.mark.parametrize("name", ["unquantized", "fp8-block", "w4a16-zp", "mxfp4"])
def test_batched_format(name):
    assert name in BATCHED_SCHEMES
    hidden, intermediate = layer_sizes(name)
    cfg = MoEConfig(4, 1, hidden, intermediate, dtype=DTYPE, parallel=ParallelConfig(use_batched_activation_format=True))
    counts = torch.tensor([3, 0, 5, 1], dtype=torch.int32, device=DEVICE)
    x = torch.randn(4, 5, hidden, generator=torch.Generator().manual_seed(3)).to(DEVICE, DTYPE)
    conformance.check_against_reference(SwappedBatched, cfg, name, x, BatchedRouting(counts))
