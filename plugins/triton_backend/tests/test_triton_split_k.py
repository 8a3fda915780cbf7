"""SPLIT_K launch configurations (each tile's K loop split over programs, partial sums added with float32
atomics, the gated activation applied after GEMM1's sums) give the reference's result for every scheme.
Tuned data files may pick them for decode; the heuristic never does, so these tests force them. A split
of 3 leaves the last program of these layers' short K loops with no tiles at all. Invalid routing on the
split path: test_robustness.py."""

import dataclasses

import pytest
import torch

from moe_core.config import Activation, MoEConfig, ParallelConfig
from moe_core.presets import random_inputs
from moe_core.routing import BatchedRouting
from moe_core.testing import conformance
from moe_core_triton.compile_check import layer_sizes, with_launch_fields
from moe_core_triton.configs import LaunchConfig
from moe_core_triton.kernel import TritonBatchedKernel, TritonKernel
from moe_core_triton.launch import recording
from moe_core_triton.plugin import STANDARD_SCHEMES

GPU = torch.cuda.is_available()
DEVICE = "cuda" if GPU else "cpu"
DTYPE = torch.bfloat16 if GPU else torch.float16  # bfloat16 is garbage in the interpreter
Split = with_launch_fields(TritonKernel, SPLIT_K=3)


def test_the_override_reaches_every_launch_and_the_batched_format_never_splits():
    cfg = MoEConfig(8, 2, 256, 128, dtype=DTYPE)
    assert Split(cfg, None, None)._config(torch.device(DEVICE), 4, 128, 256, gemm=1, tokens=2).SPLIT_K == 3
    assert TritonKernel(cfg, None, None)._config(torch.device(DEVICE), 4, 128, 256, gemm=1, tokens=2).SPLIT_K == 1
    batched = dataclasses.replace(cfg, parallel=ParallelConfig(use_batched_activation_format=True))
    split_batched = with_launch_fields(TritonBatchedKernel, SPLIT_K=3)(batched, None, None)
    assert split_batched._config(torch.device(DEVICE), 4, 128, 256, gemm=2, tokens=2).SPLIT_K == 1  # its GEMM2 writes rows
    assert LaunchConfig(16, 64, 64, 1, 4, 4).SPLIT_K == 1  # data files written before the field read as unsplit


def test_a_deterministic_kernel_runs_a_split_unsplit_and_adds_nothing_with_atomics():
    cfg = MoEConfig(8, 2, 256, 128, dtype=DTYPE)
    kernel_cls = type("DeterministicSplit", (Split,), {"deterministic": True, "reduce": "atomic"})
    kernel = kernel_cls(cfg, None, None)
    device = torch.device(DEVICE)
    assert kernel._config(device, 4, 128, 256, gemm=1, tokens=2).SPLIT_K == 1
    g1, g2 = kernel._gemm_launches(device, 4, 2, weighted=True, batched=False)
    assert g1.config.SPLIT_K == g2.config.SPLIT_K == 1 and not kernel._atomic(g2.config, batched=False)
    x, routing = random_inputs(cfg, 2, device=DEVICE)
    with recording() as launches:
        conformance.check_against_reference(kernel_cls, cfg, "unquantized", x, routing)
    assert launches and all(not launcher._options.get("ATOMIC_OUT") and launcher._options.get("SPLIT_K", 1) == 1
                            for launcher, _, _ in launches)


@pytest.mark.parametrize("name", STANDARD_SCHEMES)
def test_every_scheme_with_an_expert_map_and_without(name):
    hidden, intermediate = layer_sizes(name)
    cfg = MoEConfig(8, 2, hidden, intermediate, dtype=DTYPE, parallel=ParallelConfig(ep_size=2))
    x, routing = random_inputs(cfg, 5, device=DEVICE)
    expert_map = torch.tensor([-1, -1, -1, -1, 0, 1, 2, 3], dtype=torch.int32, device=DEVICE)
    conformance.check_against_reference(Split, cfg, name, x, routing, expert_map)
    conformance.check_against_reference(Split, dataclasses.replace(cfg, parallel=ParallelConfig()), name, x, routing)


@pytest.mark.parametrize("split", [2, 4])
def test_gelu_and_the_swiglu_clamp_apply_to_the_summed_products(split):
    cfg = MoEConfig(4, 2, 200, 72, dtype=DTYPE, activation=Activation.GELU, swiglu_limit=0.3)
    x, routing = random_inputs(cfg, 3, device=DEVICE)
    for swap in (False, True):
        kernel_cls = with_launch_fields(TritonKernel, SPLIT_K=split, SWAP_AB=swap)
        conformance.check_against_reference(kernel_cls, cfg, "unquantized", x, routing)
        conformance.check_against_reference(kernel_cls, cfg, "w4a16", x, routing)


def test_the_batched_format_ignores_a_split():
    cfg = MoEConfig(4, 1, 200, 72, dtype=DTYPE, parallel=ParallelConfig(use_batched_activation_format=True))
    counts = torch.tensor([3, 0, 5, 1], dtype=torch.int32, device=DEVICE)
    x = torch.randn(4, 5, 200, generator=torch.Generator().manual_seed(3)).to(DEVICE, DTYPE)
    conformance.check_against_reference(with_launch_fields(TritonBatchedKernel, SPLIT_K=3), cfg, "unquantized", x, BatchedRouting(counts))


@pytest.mark.skipif(not GPU, reason="CUDA graphs need a GPU")
@pytest.mark.parametrize("name", ["unquantized", "w4a16", "fp8-block"])
def test_cuda_graph_replay(name):
    hidden, intermediate = layer_sizes(name)
    conformance.check_graph_replay(Split, MoEConfig(8, 2, hidden, intermediate, dtype=DTYPE), name, tokens=3)
