"""Eager forwards of few pairs of a small layer quantize their activations inside the GEMMs (``QUANT_IN``): each GEMM
reads 16-bit rows and quantizes every A tile with the quantization pass's rules, so no pass is launched and the result
is the same bits as with the passes (dynamic per-token or 1 x BLOCK_K scales, fp8 or int8; swapped tiles; partial last
K tiles). CUDA-graph captures launch the passes."""

import pytest
import torch

from moe_core.config import MoEConfig, ParallelConfig
from moe_core.presets import random_inputs, random_layer
from moe_core.quant import scheme
from moe_core.testing import conformance
from moe_core_triton.compile_check import launches_of, with_launch_fields
from moe_core_triton.configs import LaunchConfig
from moe_core_triton.kernel import TritonKernel

GPU = torch.cuda.is_available()
DEVICE = "cuda" if GPU else "cpu"
DTYPE = torch.bfloat16 if GPU else torch.float16  # bfloat16 is garbage in the interpreter
#: The kernel as it was before QUANT_IN: every quantized forward launches the quantization pass.
WITH_PASSES = type("WithQuantizationPasses", (TritonKernel,), {"_input_quantization": lambda self, lc: 0})


def quant_in(name: str, lc: LaunchConfig) -> int:
    return TritonKernel(MoEConfig(8, 2, 256, 256, dtype=DTYPE), *scheme(name).keys)._input_quantization(lc)


def test_which_gemms_quantize_their_input():
    k128, k64 = LaunchConfig(16, 64, 128, 1, 4, 4), LaunchConfig(16, 64, 64, 1, 4, 4)
    assert quant_in("fp8-channel", k128) == quant_in("fp8-channel", k64) == quant_in("int8", k64) == 1  # per token
    assert quant_in("fp8-block", k128) == 2  # each K step is one 1x128 group
    assert quant_in("fp8-block", k64) == 0  # a group spans two K steps: the pass quantizes it
    for name in ("unquantized", "fp8-tensor", "fp8-tensor-dyn", "w4a16", "fp8-block-w8a16"):  # none, static or per tensor
        assert quant_in(name, k128) == 0, name


def test_only_eager_pair_table_forwards_of_small_layers_quantize_inside():
    cfg = MoEConfig(8, 2, 256, 256, dtype=DTYPE)
    cpu, limit = torch.device("cpu"), TritonKernel.pair_table_max_pairs

    def inside(rows, eager=True, config=cfg):
        k = TritonKernel(config, *scheme("fp8-channel").keys)
        return [g.quantizes_input for g in k._gemm_launches(cpu, rows, rows // 2, True, False, eager=eager)]

    assert inside(limit) == [True, True]
    assert inside(limit + 2) == [False, False]  # a block table: the GEMMs are GPU-bound, the passes cheaper
    assert inside(limit, eager=False) == [False, False]  # a CUDA graph replays no host work: the passes are faster
    # Touched weights past QUANT_IN_MAX_ELEMENTS (pairs x 3 x H x I): the repeated quantization costs more than it saves.
    big = MoEConfig(8, 2, 4096, 14336, dtype=DTYPE)
    assert inside(2, config=big) == [False, False]


@pytest.mark.parametrize("name", ["fp8-channel", "fp8-block", "int8"])
def test_forwards_of_few_pairs_launch_no_quantization_pass(name):
    def kernels(tokens, **fields):
        return [launch.name for launch in launches_of(name, tokens, False, DTYPE, (256, 256), BLOCK_K=128, **fields)]

    limit = TritonKernel.pair_table_max_pairs
    assert kernels(limit // 2) == ["moe_gemm_kernel"] * 2  # top-2: the limit's pairs
    assert kernels(limit // 2 + 1).count("_quant_rows_kernel") == 2
    if name == "fp8-block":  # GEMM1 writing the intermediate quantized (QUANT_OUT) leaves GEMM2 nothing to quantize
        assert kernels(1, BLOCK_N=128) == ["moe_gemm_kernel"] * 2


@pytest.mark.parametrize("name", ["fp8-channel", "fp8-block", "int8"])
@pytest.mark.parametrize("swap_ab", [False, True])
@pytest.mark.parametrize("sizes", [(256, 128), (200, 72)])  # (200, 72): partial last K tiles, K no multiple of 16 x 8
def test_the_result_is_that_of_the_quantization_passes(name, swap_ab, sizes):
    hidden, intermediate = sizes
    cfg = MoEConfig(8, 3, hidden, intermediate, dtype=DTYPE)
    sch = scheme(name)
    x, routing = random_inputs(cfg, 5, device=DEVICE, seed=hidden + swap_ab)
    fields = dict(BLOCK_K=128, BLOCK_N=64, SWAP_AB=swap_ab)
    fused, passes = (with_launch_fields(cls, **fields)(cfg, *sch.keys) for cls in (TritonKernel, WITH_PASSES))
    weights = fused.prepare_weights(random_layer(cfg, sch, device=DEVICE, seed=1))
    g1, g2 = fused._gemm_launches(torch.device(DEVICE), 15, 5, True, False)
    assert g1.quantizes_input and g2.quantizes_input
    got, want = (k.forward(x, weights, routing, expert_map=None, apply_router_weight_on_input=False) for k in (fused, passes))
    assert torch.equal(got, want)


@pytest.mark.parametrize("name", ["fp8-channel", "fp8-block", "int8"])
def test_matches_the_reference_with_an_expert_map(name):
    cfg = MoEConfig(8, 2, 256, 128, dtype=DTYPE, parallel=ParallelConfig(ep_size=2))
    x, routing = random_inputs(cfg, 9, device=DEVICE, seed=3)
    expert_map = torch.tensor([-1, 0, -1, 1, 2, -1, 3, -1], device=DEVICE)
    conformance.check_against_reference(TritonKernel, cfg, name, x, routing, expert_map=expert_map)
