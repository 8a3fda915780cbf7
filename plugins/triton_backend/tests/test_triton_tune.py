"""The tuner launches each GEMM as the layer does (weight-only schemes included) and keeps the fastest
candidate; on a CPU it runs in the interpreter with a stand-in timer (timing itself needs CUDA events)."""

import itertools

import pytest
import torch

from moe_core.presets import model
from moe_core.quant import GroupShape, QuantDtype, QuantKey, scheme
from moe_core_triton import configs
from moe_core_triton.kernel import TritonKernel
from moe_core_triton.tune import candidates, tune_case

DEVICE = "cuda" if torch.cuda.is_available() else "cpu"


@pytest.mark.parametrize("name", ["unquantized", "w4a16-zp", "nvfp4-w4a16"])
def test_tune_case_runs_every_candidate_and_keeps_the_fastest(name):
    timed = []
    times = itertools.count(100, -1)  # each candidate is "faster" than the one before: the last one wins

    def timer(run):
        timed.append(run)
        return next(times) * 1e-6

    best = tune_case("tiny", name, tokens=3, device=DEVICE, timer=timer)
    cfg = model("tiny").config()
    kernel = TritonKernel(cfg, *scheme(name).keys)
    wo = kernel.weight_only is not None
    per_gemm = {gemm: list(dict.fromkeys(kernel.fit_block_k(c, k) for c in candidates(3 * cfg.top_k / cfg.num_experts, None, wo)))
                for gemm, k in ((1, cfg.hidden_size), (2, cfg.intermediate_size))}
    assert best == {gemm: found[-1] for gemm, found in per_gemm.items()}
    assert len(timed) == sum(map(len, per_gemm.values()))  # none was skipped as failing


def test_the_transposed_product_is_a_candidate_for_few_rows_per_expert_or_weight_only_schemes():
    decode, prefill = candidates(2.0, None), candidates(512.0, None)
    assert {c.SWAP_AB for c in decode} == {False, True} and len(decode) == 2 * len({c for c in decode if not c.SWAP_AB})
    assert not any(c.SWAP_AB for c in prefill)
    assert {c.SWAP_AB for c in candidates(512.0, None, weight_only=True)} == {False, True}


def test_candidates_are_adjusted_as_the_kernel_adjusts_block_k():
    cfg = model("tiny").config()
    lc = configs.LaunchConfig(16, 64, 64, 1, 4, 4)
    groups_of_48 = QuantKey(QuantDtype.INT4, GroupShape(1, 48), static=True, symmetric=True)
    assert TritonKernel(cfg, groups_of_48, None).fit_block_k(lc, 7168).BLOCK_K == 16  # a tile never straddles groups unevenly
    assert TritonKernel(cfg, *scheme("nvfp4-w4a16").keys).fit_block_k(lc, 256) == lc  # 4 whole groups of 16 per tile
    assert TritonKernel(cfg, None, None).fit_block_k(lc, 7168) is lc
