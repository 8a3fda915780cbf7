"""GEMM1 quantizes the intermediate in its epilogue (``QUANT_OUT``) when its tiles are exactly the scale groups
(fp8-block's 1x128 with 128-column tiles): no separate pass, the reference's result, with partial last groups,
weight tiles loaded by TMA (whose columns past I are another expert's rows) and both activation formats."""

import pytest
import torch

from moe_core.config import MoEConfig, ParallelConfig
from moe_core.presets import random_inputs, random_layer
from moe_core.quant import scheme
from moe_core.routing import BatchedRouting
from moe_core.testing import conformance
from moe_core_triton import quantize
from moe_core_triton.compile_check import launches_of, with_launch_fields
from moe_core_triton.configs import LaunchConfig
from moe_core_triton.kernel import TritonBatchedKernel, TritonKernel
from moe_core_triton.tune import values

GPU = torch.cuda.is_available()
DEVICE = "cuda" if GPU else "cpu"
DTYPE = torch.bfloat16 if GPU else torch.float16  # bfloat16 is garbage in the interpreter


def quant_out(name: str, lc: LaunchConfig) -> bool:
    return TritonKernel(MoEConfig(8, 2, 256, 256, dtype=DTYPE), *scheme(name).keys)._quantizes_intermediate(lc)


def test_only_tiles_that_are_whole_scale_groups_quantize_in_the_epilogue():
    wide, narrow = LaunchConfig(64, 128, 128, 8, 4, 3), LaunchConfig(64, 64, 128, 8, 4, 3)
    assert quant_out("fp8-block", wide)
    assert not quant_out("fp8-block", narrow)  # a group spans two tiles
    assert not quant_out("fp8-block", LaunchConfig(64, 128, 128, 8, 4, 3, SPLIT_K=2))  # partial sums are not the intermediate
    for name in ("unquantized", "fp8-channel", "fp8-tensor", "fp8-tensor-dyn", "int8", "w4a16"):  # whole rows, static or none
        assert not quant_out(name, wide), name


def test_the_layer_skips_the_quantization_pass():
    kernels = [launch.name for launch in launches_of("fp8-block", 300, False, DTYPE, (256, 256), BLOCK_N=128)]
    assert kernels.count("_quant_rows_kernel") == 1 and kernels.count("moe_gemm_kernel") == 2, kernels
    kernels = [launch.name for launch in launches_of("fp8-block", 300, False, DTYPE, (256, 256), BLOCK_N=64)]
    assert kernels.count("_quant_rows_kernel") == 2, kernels


@pytest.mark.parametrize("intermediate", [256, 160])  # 160: the second group of each row has 32 columns
@pytest.mark.parametrize("tma", [False, True])
def test_standard_format_matches_the_reference(intermediate, tma):
    cfg = MoEConfig(8, 2, 224, intermediate, dtype=DTYPE)
    x, routing = random_inputs(cfg, 9, device=DEVICE, seed=intermediate)
    kernel_cls = with_launch_fields(TritonKernel, BLOCK_N=128, TMA_B=tma, num_stages=3)
    conformance.check_against_reference(kernel_cls, cfg, "fp8-block", x, routing)


def test_the_codes_and_scales_are_those_of_the_quantization_pass():
    cfg = MoEConfig(4, 2, 256, 160, dtype=DTYPE)
    x, routing = random_inputs(cfg, 6, device=DEVICE, seed=2)

    fused, plain = (with_launch_fields(TritonKernel, BLOCK_N=bn)(cfg, *scheme("fp8-block").keys) for bn in (128, 64))
    weights = fused.prepare_weights(random_layer(cfg, scheme("fp8-block"), device=DEVICE))
    rows = 6 * cfg.top_k
    out = {}
    for kernel in (fused, plain):
        g1, _ = kernel._gemm_launches(torch.device(DEVICE), rows, 6, True, False)
        table = kernel.rows_of(g1, routing.topk_ids)
        out[kernel is fused] = kernel._run_gemm1(g1, x, weights, table, rows, cfg.top_k, quantize.new_empty)
    (q, scale), (q_plain, scale_plain) = out[True], out[False]
    assert q.dtype == q_plain.dtype == torch.float8_e4m3fn and scale.shape == scale_plain.shape == (rows, 2)
    # The pass quantizes the 16-bit intermediate, the epilogue its float32 value: scales agree to 16-bit rounding,
    # and where the 16-bit rounding moved a value across an e4m3 rounding boundary the codes are one step apart
    # (an e4m3 step is at most 1/8 of the value, or 2^-9 of the scale among subnormals), never more.
    torch.testing.assert_close(scale, scale_plain, rtol=1e-2, atol=0)
    fused_values, plain_values = values((q, scale)), values((q_plain, scale_plain))
    per_row = scale_plain.repeat_interleave(128, dim=1)[:, : q.shape[1]]
    step = 0.125 * plain_values.abs() + 2.0**-9 * per_row
    assert ((fused_values - plain_values).abs() <= 1.02 * step + 0.01 * plain_values.abs()).all()
    assert (q.float() != q_plain.float()).float().mean() < 0.1  # most codes are the same


def test_batched_format_matches_the_reference():
    cfg = MoEConfig(4, 1, 224, 160, dtype=DTYPE, parallel=ParallelConfig(use_batched_activation_format=True))
    counts = torch.tensor([3, 0, 5, 1], dtype=torch.int32, device=DEVICE)
    x = torch.randn(4, 5, 224, generator=torch.Generator().manual_seed(3)).to(DEVICE, DTYPE)
    conformance.check_against_reference(with_launch_fields(TritonBatchedKernel, BLOCK_N=128, num_stages=3), cfg, "fp8-block", x,
                                        BatchedRouting(counts))
