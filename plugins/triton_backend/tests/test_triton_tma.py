"""TMA_B launch configurations (weight tiles loaded through a tensor descriptor by Hopper's tensor memory
accelerator) give the reference's result for every scheme they serve, in both formats, with tiles that run
past an expert's rows and past K. Tuned data files may pick them; the heuristic never does, so these tests
force them. Weight-only codes, weight rows that are no multiple of 16 bytes and GPUs before sm_90 load
through pointers instead."""

import dataclasses

import pytest
import torch

from moe_core.config import MoEConfig, ParallelConfig
from moe_core.presets import random_inputs
from moe_core.quant import scheme
from moe_core.routing import BatchedRouting, Routing
from moe_core.testing import conformance
from moe_core_triton.compile_check import with_launch_fields
from moe_core_triton.configs import LaunchConfig
from moe_core_triton.kernel import TritonBatchedKernel, TritonKernel, has_tma, weight_descriptor
from moe_core_triton.plugin import STANDARD_SCHEMES, WEIGHT_ONLY_SCHEMES

GPU = torch.cuda.is_available()
DEVICE = "cuda" if GPU else "cpu"
DTYPE = torch.bfloat16 if GPU else torch.float16  # bfloat16 is garbage in the interpreter
TMA_SCHEMES = [s for s in STANDARD_SCHEMES if s not in WEIGHT_ONLY_SCHEMES]
#: Hidden 224 and intermediate 160: neither is a multiple of 64-column tiles or 64/128-element K steps, and
#: both are whole multiples of 16 bytes in 8-bit codes, so every scheme keeps TMA_B.
HIDDEN, INTERMEDIATE = 224, 160
TmaKernel = with_launch_fields(TritonKernel, TMA_B=True)
TmaBatched = with_launch_fields(TritonBatchedKernel, TMA_B=True)


def picks_tma(kernel_cls, cfg: MoEConfig, scheme_name: str, k: int, rows: int = 40) -> bool:
    kernel = kernel_cls(cfg, *scheme(scheme_name).keys)
    return kernel._config(torch.device(DEVICE), rows, 64, k, gemm=1, tokens=rows // cfg.top_k).TMA_B


@pytest.mark.parametrize("name", TMA_SCHEMES)
def test_standard_format_matches_the_reference(name):
    cfg = MoEConfig(8, 2, HIDDEN, INTERMEDIATE, dtype=DTYPE, parallel=ParallelConfig(ep_size=2))
    assert picks_tma(TmaKernel, cfg, name, HIDDEN) and picks_tma(TmaKernel, cfg, name, INTERMEDIATE)
    x, routing = random_inputs(cfg, 9, device=DEVICE, seed=11)
    ids = torch.where(routing.topk_ids == 5, 6, routing.topk_ids)  # local expert 1 (global 5) gets no token
    expert_map = torch.tensor([-1, -1, -1, -1, 0, 1, 2, 3], dtype=torch.int32, device=DEVICE)
    conformance.check_against_reference(TmaKernel, cfg, name, x, Routing(ids, routing.topk_weights), expert_map)
    conformance.check_against_reference(TmaKernel, dataclasses.replace(cfg, parallel=ParallelConfig()), name, x, routing)


@pytest.mark.parametrize("name", ["unquantized", "fp8-block"])
@pytest.mark.parametrize("fields", [{"SWAP_AB": True}, {"SPLIT_K": 2}, {"BLOCK_N": 128, "BLOCK_K": 128, "num_stages": 3}],
                         ids=["swap-ab", "split-k", "wide-tile"])
def test_with_the_other_launch_options(name, fields):
    cfg = MoEConfig(4, 2, HIDDEN, INTERMEDIATE, dtype=DTYPE)
    x, routing = random_inputs(cfg, 7, device=DEVICE, seed=5)
    conformance.check_against_reference(with_launch_fields(TritonKernel, TMA_B=True, **fields), cfg, name, x, routing)


@pytest.mark.parametrize("name", ["unquantized", "fp8-block", "fp8-channel"])
def test_batched_format_matches_the_reference(name):
    cfg = MoEConfig(4, 1, HIDDEN, INTERMEDIATE, dtype=DTYPE, parallel=ParallelConfig(use_batched_activation_format=True))
    counts = torch.tensor([3, 0, 5, 1], dtype=torch.int32, device=DEVICE)
    x = torch.randn(4, 5, HIDDEN, generator=torch.Generator().manual_seed(3)).to(DEVICE, DTYPE)
    conformance.check_against_reference(TmaBatched, cfg, name, x, BatchedRouting(counts))


def test_pointer_loads_where_a_descriptor_cannot_serve():
    cfg = MoEConfig(8, 2, 200, 72, dtype=DTYPE)
    assert picks_tma(TmaKernel, cfg, "unquantized", 200)  # 400-byte rows
    assert not picks_tma(TmaKernel, cfg, "fp8-block", 200)  # 200-byte rows: a descriptor's stride must be a multiple of 16
    assert not picks_tma(TmaKernel, cfg, "w8a16", 256)  # weight-only codes are dequantized from pointer loads
    assert not picks_tma(TritonKernel, cfg, "unquantized", 200)  # off unless a data file picks it


@pytest.fixture
def simulated_capability(monkeypatch):
    """Set the compute capability torch reports (a GPU we do not have); has_tma's cache is emptied around it."""
    def simulate(capability):
        has_tma.cache_clear()
        monkeypatch.setattr(torch.cuda, "get_device_capability", lambda device=None: capability)
    yield simulate
    has_tma.cache_clear()


@pytest.mark.parametrize("capability, tma", [((8, 0), False), ((8, 9), False), ((9, 0), True), ((10, 0), True)])
def test_tma_only_on_gpus_that_have_it(simulated_capability, capability, tma):
    simulated_capability(capability)
    kernel = TritonKernel(MoEConfig(8, 2, 256, 128, dtype=DTYPE), None, None)
    assert kernel.as_run(LaunchConfig(64, 128, 64, 8, 4, 3, TMA_B=True), 256, torch.device("cuda", 0)).TMA_B is tma
    assert has_tma(torch.device("cpu"))  # the interpreter emulates descriptors


def test_the_descriptor_sees_every_expert_as_one_matrix():
    w = torch.zeros(6, 96, 256, dtype=torch.float8_e4m3fn)
    desc = weight_descriptor(w, LaunchConfig(64, 128, 128, 8, 8, 3, TMA_B=True))
    assert (list(desc.shape), list(desc.strides), list(desc.block_shape)) == ([576, 256], [256, 1], [128, 128])
    assert desc.base is w


@pytest.mark.skipif(not GPU, reason="CUDA graphs need a GPU")
@pytest.mark.parametrize("name", ["unquantized", "fp8-block"])
def test_apply_is_cuda_graph_capturable(name):
    cfg = MoEConfig(8, 2, 256, 128, dtype=DTYPE)
    conformance.check_graph_replay(TmaKernel, cfg, name, tokens=40)
