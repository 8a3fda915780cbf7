"""Weight-only schemes in the Triton GEMMs (codes dequantized in the K loop) against the reference backend.

CPU: the Triton interpreter, float16 (bfloat16 is garbage there). GPU: compiled, both 16-bit dtypes,
DeepSeek-sized K, the batched format and CUDA-graph capture.
"""

from dataclasses import replace

import pytest
import torch
import triton
import triton.language as tl

from moe_core import quant
from moe_core.config import MoEConfig, ParallelConfig
from moe_core.errors import KernelInputError
from moe_core.numerics import relative_error, tolerance
from moe_core.platform import preset
from moe_core.presets import random_layer
from moe_core.reference.kernel import ReferenceKernel
from moe_core.resolver import select
from moe_core.routing import BatchedRouting, Routing
from moe_core.testing import conformance
from moe_core_triton.compile_check import layer_sizes, with_launch_fields
from moe_core_triton.configs import LaunchConfig
from moe_core_triton.e2m1_words import SCALE_FOLD
from moe_core_triton.dequantize import biased_int4, e2m1_values, e4m3_values, int4_minus_zero, int_codes_minus
from moe_core_triton.kernel import TritonBatchedKernel, TritonKernel, WeightOnly, weight_only, wgmma_gpu
from moe_core_triton.plugin import WEIGHT_ONLY_SCHEMES

GPU = torch.cuda.is_available()
DEVICE = "cuda" if GPU else "cpu"
DTYPES = [torch.float16, torch.bfloat16] if GPU else [torch.float16]


def problem(cfg, name, tokens, seed=0):
    g = torch.Generator().manual_seed(seed)
    x = torch.randn(tokens, cfg.hidden_size, generator=g).to(DEVICE, cfg.dtype)
    routing = Routing.from_logits(torch.randn(tokens, cfg.num_experts, generator=g).to(DEVICE), cfg.top_k)
    return random_layer(cfg, quant.scheme(name), device=DEVICE, seed=seed), x, routing


def against_reference(kernel_cls, cfg, name, weights, x, routing, **kw) -> float:
    sch = quant.scheme(name)
    kernel, oracle = kernel_cls(cfg, sch.weight_key, None), ReferenceKernel(cfg, sch.weight_key, None)
    got = kernel.apply(x, kernel.prepare_weights(weights), routing, **kw)
    want = oracle.apply(x, oracle.prepare_weights(weights), routing, **kw)
    assert got.dtype == cfg.dtype and torch.isfinite(got).all()
    return relative_error(got, want)


@pytest.mark.parametrize("dtype", DTYPES, ids=str)
@pytest.mark.parametrize("name", WEIGHT_ONLY_SCHEMES)
def test_odd_sizes_partial_groups_empty_experts_and_an_expert_map(name, dtype):
    h, i = layer_sizes(name)  # no multiple of the tiles: partial K tiles and scale groups
    cfg = MoEConfig(8, 2, h, i, dtype=dtype, parallel=ParallelConfig(ep_size=2))
    weights, x, routing = problem(cfg, name, tokens=7)
    ids = torch.where(routing.topk_ids == 5, 6, routing.topk_ids)  # local expert 1 (global 5) gets no token
    expert_map = torch.tensor([-1, -1, -1, -1, 0, 1, 2, 3], dtype=torch.int32, device=DEVICE)
    err = against_reference(TritonKernel, cfg, name, weights, x, Routing(ids, routing.topk_weights), expert_map=expert_map)
    assert err <= tolerance(None, dtype), err


@pytest.mark.parametrize("name", WEIGHT_ONLY_SCHEMES)
def test_swiglu_clamp_and_gelu_stay_fused(name):
    h, i = layer_sizes(name)  # no multiple of the tiles: partial K tiles and scale groups
    for cfg in (MoEConfig(4, 2, h, i, dtype=torch.float16, swiglu_limit=0.05), MoEConfig(4, 2, h, i, dtype=torch.float16, activation="gelu")):
        weights, x, routing = problem(cfg, name, tokens=3, seed=2)
        assert against_reference(TritonKernel, cfg, name, weights, x, routing) <= tolerance(None, cfg.dtype)


@pytest.mark.parametrize("block_m", [16, 64])
@pytest.mark.parametrize("name", WEIGHT_ONLY_SCHEMES)
def test_scales_on_the_tile_product_or_on_the_weights(name, block_m):
    """Decode tiles with one scale group per K step multiply the tile product by the scales; larger tiles, and
    tiles spanning several groups (fp4), scale the dequantized weights. Both match the reference, swapped or not."""
    h, i = layer_sizes(name)
    cfg = MoEConfig(4, 2, h, i, dtype=torch.float16)
    weights, x, routing = problem(cfg, name, tokens=6, seed=4)
    keys = quant.scheme(name).keys
    on_product = block_m == 16 and name not in ("nvfp4-w4a16", "mxfp4")  # fp4 groups (16, 32) are narrower than the tile
    for swap_ab in (False, True):
        kernel_cls = with_launch_fields(TritonKernel, BLOCK_M=block_m, SWAP_AB=swap_ab)
        kernel = kernel_cls(cfg, *keys)
        lc = kernel._config(torch.device(DEVICE), 12, i, h, gemm=1, tokens=6)
        block_k, _ = kernel.k_steps(lc, h)
        assert kernel._scales_after_dot(lc, block_k, h) is on_product
        assert against_reference(kernel_cls, cfg, name, weights, x, routing) <= tolerance(None, cfg.dtype)


@pytest.mark.parametrize("split_k", [1, 2])
@pytest.mark.parametrize("name", ["w4a16", "w4a16-zp", "w8a16", "w8a16-zp", "fp8-block-w8a16"])
def test_group_steps_run_a_decode_step_of_two_groups_a_group_a_step(name, split_k):
    """With GROUP_STEPS, a decode tile whose K step spans two scale groups of 128 runs one group a step, two steps an
    iteration of the K loop, and scales each group's product (TritonKernel.k_steps); without it, in prefill tiles and
    for groups narrower than UNROLLED_GROUP_MIN the step stays, and as_run drops the field where it changes nothing. It
    matches the reference where K is an odd number of groups (the unrolled loop's last iteration runs one step) and
    with the K loop split."""
    cfg = MoEConfig(4, 2, 640, 384, dtype=torch.float16)
    keys = quant.scheme(name).keys
    here = torch.device(DEVICE)
    stepped = with_launch_fields(TritonKernel, BLOCK_M=16, BLOCK_K=256, SWAP_AB=True, SPLIT_K=split_k, GROUP_STEPS=True)
    kernel = stepped(cfg, *keys)
    for gemm, k in ((1, cfg.hidden_size), (2, cfg.intermediate_size)):
        lc = kernel._config(here, 8, cfg.intermediate_size, k, gemm=gemm, tokens=4)
        assert lc.BLOCK_K == 256 and lc.GROUP_STEPS and kernel.k_steps(lc, k) == (128, 2)
        assert kernel._scales_after_dot(lc, 128, k) and not kernel._scales_after_dot(lc, 256, k)
        assert kernel.k_steps(replace(lc, GROUP_STEPS=False), k) == (256, 1)
        prefill = kernel.as_run(replace(lc, BLOCK_M=64), k, here, gemm)
        assert not prefill.GROUP_STEPS and kernel.k_steps(replace(prefill, GROUP_STEPS=True), k) == (256, 1)
        assert not kernel.as_run(replace(lc, BLOCK_K=128), k, here, gemm).GROUP_STEPS  # one group a step already
    fp4 = stepped(cfg, *quant.scheme("mxfp4").keys)  # groups of 32
    assert not fp4._config(here, 8, cfg.intermediate_size, 640, gemm=1, tokens=4).GROUP_STEPS
    weights, x, routing = problem(cfg, name, tokens=4, seed=11)
    assert against_reference(stepped, cfg, name, weights, x, routing) <= tolerance(None, cfg.dtype)


@pytest.mark.parametrize("split_k", [1, 4])
@pytest.mark.parametrize("name", ["w8a16", "mxfp4", "w4a16-zp"])
def test_mma_in_flight_runs_the_same_k_steps(name, split_k):
    """MMA_IN_FLIGHT compiles the K loop with no path around it (gemm.py): the same K steps, so the same output as
    without it, with split K too, where GEMM2's K of two steps of 64 leaves two of four programs no steps (they return
    before the loop instead of adding zeros)."""
    cfg = MoEConfig(4, 2, 640, 96, dtype=torch.float16)
    weights, x, routing = problem(cfg, name, tokens=5, seed=3)
    fields = dict(BLOCK_M=16, BLOCK_K=64, SWAP_AB=True, SPLIT_K=split_k)
    plain, in_flight = (with_launch_fields(TritonKernel, **fields, MMA_IN_FLIGHT=on) for on in (False, True))
    kernel = in_flight(cfg, *quant.scheme(name).keys)
    lc = kernel._config(torch.device(DEVICE), 10, cfg.hidden_size, cfg.intermediate_size, gemm=2, tokens=5)
    assert lc.MMA_IN_FLIGHT and lc.SPLIT_K == split_k and -(-cfg.intermediate_size // lc.BLOCK_K) == 2
    got = kernel.apply(x, kernel.prepare_weights(weights), routing)
    without = plain(cfg, *quant.scheme(name).keys)
    want = without.apply(x, without.prepare_weights(weights), routing)
    if GPU and split_k > 1:  # float32 atomics add in a varying order
        assert relative_error(got, want) <= 1e-3
    else:
        assert torch.equal(got, want)
    oracle = ReferenceKernel(cfg, quant.scheme(name).weight_key, None)
    assert relative_error(got, oracle.apply(x, oracle.prepare_weights(weights), routing)) <= tolerance(None, cfg.dtype)


def test_a_wrong_scale_is_caught_so_the_comparison_is_not_vacuous():
    cfg = MoEConfig(4, 2, 128, 64, dtype=torch.float16)
    weights, x, routing = problem(cfg, "w4a16", tokens=5)
    sch = quant.scheme("w4a16")
    kernel, oracle = TritonKernel(cfg, sch.weight_key, None), ReferenceKernel(cfg, sch.weight_key, None)
    want = oracle.apply(x, oracle.prepare_weights(weights), routing)
    prepared = kernel.prepare_weights(weights)
    prepared.w2_scale.mul_(1.5)  # the kernel must read the scales it is given
    assert relative_error(kernel.apply(x, prepared, routing), want) > 0.3


@pytest.mark.parametrize("name", WEIGHT_ONLY_SCHEMES)
def test_batched_format(name):
    h, i = layer_sizes(name)  # no multiple of the tiles: partial K tiles and scale groups
    cfg = MoEConfig(4, 1, h, i, dtype=torch.float16, parallel=ParallelConfig(use_batched_activation_format=True))
    weights = random_layer(cfg, quant.scheme(name), device=DEVICE, seed=3)
    g = torch.Generator().manual_seed(4)
    x = torch.randn(4, 5, h, generator=g).to(DEVICE, cfg.dtype)
    counts = BatchedRouting(torch.tensor([5, 0, 2, 3], dtype=torch.int32, device=DEVICE))
    gate_up = with_launch_fields(TritonBatchedKernel, 1, GATE_UP=True, BLOCK_N=32)  # GEMM1's gate and up in one tile too
    for kernel_cls in (TritonBatchedKernel, gate_up):
        assert against_reference(kernel_cls, cfg, name, weights, x, counts) <= tolerance(None, cfg.dtype)


def test_the_dequantization_each_scheme_declares():
    wo = {name: weight_only(*quant.scheme(name).keys) for name in WEIGHT_ONLY_SCHEMES}
    assert wo["w4a16"] == WeightOnly(packed=True, codes=0, zero=1, scale=0, global_scale=False, group=128)
    assert wo["w4a16-zp"].zero == 2 and wo["w8a16"].zero == 0 and not wo["w8a16"].packed
    assert wo["nvfp4-w4a16"] == WeightOnly(packed=True, codes=1, zero=0, scale=1, global_scale=True, group=16)
    assert wo["mxfp4"] == WeightOnly(packed=True, codes=1, zero=0, scale=2, global_scale=False, group=32)
    assert wo["fp8-w8a16"] == WeightOnly(packed=False, codes=2, zero=0, scale=0, global_scale=False, group=-1)
    assert wo["fp8-block-w8a16"] == WeightOnly(packed=False, codes=2, zero=0, scale=0, global_scale=False, group=128, group_n=128)
    assert weight_only(*quant.scheme("fp8-channel").keys) is None and weight_only(None, None) is None
    # A K tile never straddles two groups unevenly: groups and tiles divide one another, or one group spans K.
    assert wo["w4a16"].block_k(64, 7168) == 64 and wo["nvfp4-w4a16"].block_k(64, 7168) == 64
    assert WeightOnly(True, 0, 1, 0, False, 48).block_k(64, 7168) == 16
    assert WeightOnly(True, 0, 1, 0, False, -1).block_k(64, 200) == 64
    # Codes stored in fragment order (K whole chunks of 64, groups whole in a chunk or chunks whole in a group) are read
    # in whole chunks: BLOCK_K at least 64.
    assert [wo["w4a16"].permutes(k) for k in (7168, 768, 200, 96)] == [True, True, False, False]
    assert all(wo[name].permutes(2048) for name in WEIGHT_ONLY_SCHEMES)
    assert wo["mxfp4"].permutes(2880) and wo["fp8-block-w8a16"].block_k(16, 768) == 64  # gpt-oss: 45 chunks
    assert not WeightOnly(True, 0, 1, 0, False, 48).permutes(7168) and WeightOnly(True, 0, 1, 0, False, 32).permutes(7168)
    assert wo["w4a16"].block_k(32, 7168) == 64 and wo["mxfp4"].block_k(16, 2880) == 64 and wo["w4a16"].block_k(32, 200) == 32
    assert wo["nvfp4-w4a16"].block_k(16, 2880) == 64 and wo["nvfp4-w4a16"].block_k(16, 200) == 16  # K order: any power of two dividing its groups
    # nvfp4's e4m3 scales are stored in the activations' dtype (exact there), every other scheme's as they come.
    assert [name for name in WEIGHT_ONLY_SCHEMES if wo[name].scales_in_dtype] == ["nvfp4-w4a16"]
    assert wo["nvfp4-w4a16"].stored_scale == 0 and wo["mxfp4"].stored_scale == 2 and wo["w4a16"].stored_scale == 0
    assert WeightOnly(True, 0, 1, 0, False, 192).block_k(128, 7168) == 64


@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16], ids=str)
def test_nvfp4_scales_are_stored_as_exact_16_bit_values_and_mxfp4_scales_as_their_bytes(dtype):
    """prepare_weights stores nvfp4's e4m3 scales as values of the activations' dtype, equal to the scales they encode,
    extremes included (the smallest subnormal, 448, zero), times the fold of e2m1 words where the layer stores them
    (compiled GEMMs under bfloat16: e2m1_words, exactly); mxfp4 keeps its e8m0 bytes (stored as bfloat16 they measured 4 to 21% slower at 16 to 4096 tokens on
    the H100, docs/benchmarks/weight-only-h100.md, 2026-11-27)."""
    for name in ("nvfp4-w4a16", "mxfp4"):
        cfg = MoEConfig(4, 2, 128, 64, dtype=dtype)
        weights = random_layer(cfg, quant.scheme(name), device="cpu", seed=5)
        if name == "nvfp4-w4a16":
            weights.w2_scale.view(-1)[:3] = torch.tensor([2.0**-9, 448.0, 0.0]).to(torch.float8_e4m3fn)
        kernel = TritonKernel(cfg, quant.scheme(name).weight_key, None)
        prepared = kernel.prepare_weights(weights)
        assert kernel.e2m1_words == (GPU and dtype == torch.bfloat16 and wgmma_gpu())  # compiled for an sm_90, whole chunks
        if name == "mxfp4":
            assert prepared.w2_scale.dtype == torch.uint8 and torch.equal(prepared.w2_scale, weights.w2_scale)
        else:
            fold = SCALE_FOLD if kernel.e2m1_words else 1.0
            assert prepared.w2_scale.dtype == dtype and torch.equal(prepared.w2_scale.float(), weights.w2_scale.float() * fold)


@pytest.mark.parametrize("block_m", [16, 64])
@pytest.mark.parametrize("name", WEIGHT_ONLY_SCHEMES)
def test_codes_stored_in_fragment_order_match_the_reference(name, block_m):
    """Layers whose K are whole chunks of 64 (256 and 192 here) store int4, 8-bit integer, e4m3 and e2m1 codes in
    fragment order (k_order) and every GEMM reads them back in K order (W_PERMUTED): decode and prefill tiles, swapped
    or not, match the reference; odd sizes keep K order (and match it too)."""
    from moe_core_triton.compile_check import launches_of

    cfg = MoEConfig(8, 2, 256, 192, dtype=DTYPES[-1])
    weights, x, routing = problem(cfg, name, tokens=6, seed=7)
    for swap_ab in (False, True):
        kernel_cls = with_launch_fields(TritonKernel, BLOCK_M=block_m, SWAP_AB=swap_ab)
        assert against_reference(kernel_cls, cfg, name, weights, x, routing) <= tolerance(None, cfg.dtype)
    assert {dict(launch.options)["W_PERMUTED"] for launch in launches_of(name, 2, False, cfg.dtype, (256, 192))
            if launch.name == "moe_gemm_kernel"} == {True}
    assert {dict(launch.options)["W_PERMUTED"] for launch in launches_of(name, 2, False, cfg.dtype) if launch.name == "moe_gemm_kernel"} == {False}


@pytest.mark.parametrize("name", ["w4a16", "mxfp4"])
def test_256_row_gemm2_tiles_after_a_128_row_gemm1_match_the_reference(name):
    """The H100 file's Mixtral w4a16 and mxfp4 GEMM2 tiles at 4096 tokens: swapped, 256 rows (the MMA's N) on permuted
    codes, after a 128-row GEMM1, so the forward builds a second block table for GEMM2."""
    cfg = MoEConfig(4, 2, 256, 192, dtype=DTYPES[-1])
    weights, x, routing = problem(cfg, name, tokens=300, seed=3)

    class Tall(TritonKernel):
        def _config(self, device, rows, n, k, gemm, tokens):
            rows_n = (128, 64) if gemm == 1 else (256, 128)
            return self.as_run(LaunchConfig(*rows_n, 64, 8, 4, 4, SWAP_AB=True), k, device)

    assert against_reference(Tall, cfg, name, weights, x, routing) <= tolerance(None, cfg.dtype)


@pytest.mark.parametrize("name", WEIGHT_ONLY_SCHEMES)
def test_gate_and_up_rows_in_one_tile_match_the_reference(name):
    """GATE_UP GEMM1 tiles (gemm.py): runs of 8 gate rows and the same columns' up rows in one tile and one
    accumulator, split into gate and up after the K loop. Swapped or not on K-ordered codes of odd sizes (a partial
    last tile of columns, partial scale groups, an expert map), and the 256-row swapped tile the tuner tries for
    prefill on codes in fragment order (GATE_UP then turned off over int4 words, kernel.int4_words)."""
    from moe_core_triton.compile_check import launches_of

    h, i = layer_sizes(name)
    cfg = MoEConfig(8, 2, h, i, dtype=DTYPES[-1], parallel=ParallelConfig(ep_size=2))
    weights, x, routing = problem(cfg, name, tokens=7, seed=11)
    expert_map = torch.tensor([-1, -1, -1, -1, 0, 1, 2, 3], dtype=torch.int32, device=DEVICE)
    for swap_ab in (False, True):
        gate_up = with_launch_fields(TritonKernel, 1, GATE_UP=True, BLOCK_M=16, BLOCK_N=32, SWAP_AB=swap_ab)
        assert against_reference(gate_up, cfg, name, weights, x, routing, expert_map=expert_map) <= tolerance(None, cfg.dtype)
    cfg = MoEConfig(4, 2, 256, 192, dtype=DTYPES[-1])
    weights, x, routing = problem(cfg, name, tokens=200, seed=12)
    tall = with_launch_fields(TritonKernel, 1, GATE_UP=True, BLOCK_M=256, BLOCK_N=64, BLOCK_K=64, SWAP_AB=True)
    assert against_reference(tall, cfg, name, weights, x, routing) <= tolerance(None, cfg.dtype)
    gemm1 = [dict(launch.options) for launch in launches_of(name, 2, False, cfg.dtype, (256, 192), kernel_cls=tall)
             if launch.name == "moe_gemm_kernel" and dict(launch.options)["GATED"]]
    int4_words = TritonKernel(cfg, *quant.scheme(name).keys).int4_words  # words of gate rows x and x + 8: never GATE_UP,
    assert [(o["GATE_UP"], o["W_PERMUTED"], o["BLOCK_M"]) for o in gemm1] == [(False, True, 128) if int4_words else (True, True, 256)]  # nor 256 rows


def test_gate_up_tiles_are_weight_only_gemm1_tiles_with_k_unsplit():
    """TritonKernel.as_run turns GATE_UP off where a tile cannot take it (layers that are not weight-only, split K),
    and a GEMM2 entry asking for it is refused with what to fix."""
    cfg = MoEConfig(8, 2, 256, 192, dtype=torch.float16)
    here = torch.device(DEVICE)
    lc = LaunchConfig(256, 64, 64, 8, 4, 4, SWAP_AB=True, GATE_UP=True)
    kernel = TritonKernel(cfg, *quant.scheme("mxfp4").keys)
    assert kernel.as_run(lc, 256, here).GATE_UP
    assert not kernel.as_run(replace(lc, SPLIT_K=2), 256, here).GATE_UP
    assert not TritonKernel(cfg, None, None).as_run(lc, 256, here).GATE_UP
    assert kernel.gemm_launch(kernel.as_run(lc, 256, here), 1, weighted=True, batched=False).columns == 32
    with pytest.raises(ValueError, match="GEMM2 has no up rows"):
        kernel.gemm_launch(kernel.as_run(lc, 192, here), 2, weighted=True, batched=False)


@pytest.mark.parametrize("name", ["w4a16", "w4a16-zp", "w8a16", "w8a16-zp", "fp8-w8a16", "fp8-block-w8a16"])
def test_weights_scaled_in_16_bits_match_the_reference(name, monkeypatch):
    """Prefill tiles with SCALE_16 (WeightOnly.scales_in; bfloat16 on a GPU) make exact 16-bit values, subtract the
    zero point (int4: with the bias of biased_int4) and scale in 16 bits. Forced here for float16, the interpreter's
    dtype, on K-ordered and permuted layers alike."""
    monkeypatch.setattr(WeightOnly, "scales_in", lambda self, dtype: True)
    for sizes in (layer_sizes(name), (256, 192)):
        cfg = MoEConfig(4, 2, *sizes, dtype=torch.float16)
        weights, x, routing = problem(cfg, name, tokens=6, seed=8)
        kernel_cls = with_launch_fields(TritonKernel, BLOCK_M=64)
        assert {dict(launch.options)["SCALE_16"] for launch in _gemm_launches(name, cfg)} == {True}
        assert against_reference(kernel_cls, cfg, name, weights, x, routing) <= tolerance(None, cfg.dtype)


def _gemm_launches(name, cfg):
    from moe_core_triton.compile_check import launches_of

    return [launch for launch in launches_of(name, 6, False, cfg.dtype, (cfg.hidden_size, cfg.intermediate_size))
            if launch.name == "moe_gemm_kernel"]


@pytest.mark.parametrize("block_m", [16, 64])
def test_8_bit_codes_with_zero_points_are_stored_signed_and_match_the_reference_at_the_range_ends(block_m):
    """w8a16-zp's uint8 codes and zero points are stored as int8, each less 128 (kernel.signed_bytes), which Triton
    turns into 16-bit values by bit operations: code - zero is unchanged, here with codes and zero points only 0 and
    255, so values reach -255 and 255 times the scale, on decode and prefill tiles."""
    cfg = MoEConfig(4, 2, 256, 192, dtype=DTYPES[-1])
    weights, x, routing = problem(cfg, "w8a16-zp", tokens=6, seed=9)
    g = torch.Generator().manual_seed(10)

    def ends(t):
        return (torch.randint(0, 2, t.shape, generator=g) * 255).to(torch.uint8).to(t.device)

    weights = replace(weights, w13=ends(weights.w13), w2=ends(weights.w2), w13_zero=ends(weights.w13_zero), w2_zero=ends(weights.w2_zero))
    prepared = TritonKernel(cfg, *quant.scheme("w8a16-zp").keys).prepare_weights(weights)
    assert prepared.w13.dtype == prepared.w13_zero.dtype == torch.int8
    assert torch.equal(prepared.w2_zero.cpu().to(torch.int16), weights.w2_zero.cpu().to(torch.int16) - 128)
    assert sorted(prepared.w2.unique().tolist()) == [-128, 127]
    kernel_cls = with_launch_fields(TritonKernel, BLOCK_M=block_m, SWAP_AB=True)
    assert against_reference(kernel_cls, cfg, "w8a16-zp", weights, x, routing) <= tolerance(None, cfg.dtype)


def test_prepared_weights_are_refused_a_second_preparation():
    """Preparing twice would permute the codes twice: the kernel says to pass the canonical weights."""
    cfg = MoEConfig(4, 2, 128, 64, dtype=torch.float16)
    weights, _, _ = problem(cfg, "w4a16", tokens=1)
    kernel = TritonKernel(cfg, *quant.scheme("w4a16").keys)
    with pytest.raises(KernelInputError, match="already prepared by 'triton': pass the canonical weights"):
        kernel.prepare_weights(kernel.prepare_weights(weights))


@pytest.mark.parametrize("platform", ["h100", "a100", "l40s"])
@pytest.mark.parametrize("name", WEIGHT_ONLY_SCHEMES)
def test_selected_on_gpus_with_16_bit_mma_and_the_reference_on_cpu(name, platform):
    reg = conformance.registry_with("moe_core_triton.plugin", name="triton")
    sch = quant.scheme(name)
    cfg = MoEConfig(8, 2, 256, 128, dtype=torch.bfloat16)
    chosen = select(cfg, *sch.keys, platform=preset(platform), registry=reg, environ={})
    assert chosen.name == "triton"
    assert select(cfg, *sch.keys, platform=preset("cpu"), registry=reg, environ={}).name == "reference"


def test_refusals_name_the_packing_rule_and_the_dtype():
    reg = conformance.registry_with("moe_core_triton.plugin", name="triton")
    h100 = preset("h100")
    for name, cfg, words in (
        ("w4a16", MoEConfig(8, 2, 129, 64, dtype=torch.float16), "hidden_size=129 is not a multiple of 2"),
        ("mxfp4", MoEConfig(8, 2, 256, 48, dtype=torch.float16), "intermediate_size=48 is not a multiple of 32"),
        ("w8a16", MoEConfig(8, 2, 256, 64, dtype=torch.float32), "float16/bfloat16, not float32"),
        ("nvfp4-w4a16", MoEConfig(8, 2, 256, 64, dtype=torch.bfloat16), None),
    ):
        sel = select(cfg, *quant.scheme(name).keys, platform=h100, registry=reg, environ={})
        row = next(c for c in sel.candidates if c.name == "triton")
        assert (row.support.ok, words is None or any(words in r for r in row.support.reasons)) == (words is None, True), row
    t4 = select(MoEConfig(8, 2, 256, 64, dtype=torch.bfloat16), *quant.scheme("w4a16").keys, platform=preset("t4"), registry=reg, environ={})
    assert any("needs compute capability 8.0+" in r for r in next(c for c in t4.candidates if c.name == "triton").support.reasons)


@pytest.mark.skipif(not GPU, reason="DeepSeek-sized K and graph capture run compiled on a GPU")
@pytest.mark.parametrize("name", WEIGHT_ONLY_SCHEMES)
def test_long_k_and_cuda_graph_capture_on_the_gpu(name):
    cfg = MoEConfig(8, 4, 7168, 256, dtype=torch.bfloat16)
    weights, x, routing = problem(cfg, name, tokens=16, seed=5)
    assert against_reference(TritonKernel, cfg, name, weights, x, routing) <= tolerance(None, cfg.dtype)
    conformance.check_graph_replay(TritonKernel, cfg, name)


@pytest.mark.parametrize("group", [16, 32])
@pytest.mark.parametrize("symmetric", [True, False])
def test_groups_smaller_than_a_k_tile_with_and_without_zero_points(group, symmetric):
    """Keys beyond the named schemes (int4 in groups of 16/32): several groups per K tile, zero points repeated too."""
    from moe_core.quant import GroupShape, QuantDtype, QuantKey
    from moe_core.weights import quantize_experts

    key = QuantKey(QuantDtype.INT4, GroupShape(1, group), static=True, symmetric=symmetric)
    cfg = MoEConfig(4, 2, 192, 128, dtype=torch.float16)
    g = torch.Generator().manual_seed(6)
    w13, w2 = (torch.randn(shape, generator=g).to(DEVICE) / 8 for shape in ((4, 256, 192), (4, 192, 128)))
    weights = quantize_experts(w13, w2, key)
    x = torch.randn(5, 192, generator=g).to(DEVICE, torch.float16)
    routing = Routing.from_logits(torch.randn(5, 4, generator=g).to(DEVICE), 2)
    kernel, oracle = TritonKernel(cfg, key, None), ReferenceKernel(cfg, key, None)
    assert kernel._config(torch.device(DEVICE), 10, 128, 192, gemm=1, tokens=5).BLOCK_K > group  # so the tile spans groups
    got = kernel.apply(x, kernel.prepare_weights(weights), routing)
    want = oracle.apply(x, oracle.prepare_weights(weights), routing)
    assert relative_error(got, want) <= tolerance(None, cfg.dtype)


@triton.jit
def _int4_minus_zero_kernel(codes_ptr, zero_ptr, out_ptr, DTYPE: tl.constexpr, W_PTX: tl.constexpr):
    rows, cols = tl.arange(0, 16), tl.arange(0, 256)
    raw = tl.load(codes_ptr + rows[:, None] * 256 + cols[None, :])
    zero = tl.load(zero_ptr + rows).to(tl.float32)
    tl.store(out_ptr + rows[:, None] * 512 + tl.arange(0, 512)[None, :], int4_minus_zero(biased_int4(raw, DTYPE, W_PTX), zero, DTYPE))


@pytest.mark.parametrize("ptx", [False, True] if GPU else [False], ids=["integer ops", "PTX"][: 2 if GPU else 1])
@pytest.mark.parametrize("dtype", DTYPES)
def test_int4_codes_become_16_bit_values_exactly_without_a_conversion(dtype, ptx):
    """Decode tiles of int4 codes build each value from the code's bits (dequantize.int4_minus_zero), in 32-bit integer
    operations or, compiled for a GPU, in PTX (dequantize.biased_int4): every packed byte (low nibble first) minus every zero
    point (0..15, and the implicit 8) gives the same bits as converting the difference."""
    codes = torch.arange(256, dtype=torch.int32).repeat(16, 1)  # every byte in each row; row r: zero point r
    zeros = torch.arange(16, dtype=torch.uint8)
    out = torch.empty(16, 512, dtype=dtype, device=DEVICE)
    _int4_minus_zero_kernel[(1,)](codes.to(torch.uint8).to(DEVICE), zeros.to(DEVICE), out,
                                  DTYPE=tl.bfloat16 if dtype == torch.bfloat16 else tl.float16, W_PTX=ptx)
    nibbles = torch.stack([codes & 15, codes >> 4], dim=-1).reshape(16, 512)
    want = (nibbles - zeros.int()[:, None]).to(dtype)
    assert torch.equal(out.cpu(), want)


@triton.jit
def _int_codes_minus_kernel(codes_ptr, out_ptr, BIAS: tl.constexpr):
    offs = tl.arange(0, 512)
    tl.store(out_ptr + offs, int_codes_minus(tl.load(codes_ptr + offs), BIAS))


@pytest.mark.parametrize("bias", [0.0, 8.0])
def test_integer_codes_become_float32_exactly_without_a_conversion(bias):
    """Prefill tiles of symmetric int4 codes scaled in float32 (float16 activations) make them float32 by their bits
    (dequantize.int_codes_minus): every code from -128 to 383, minus the implicit zero point where there is one, exactly."""
    codes = torch.arange(-128, 384, dtype=torch.int32)
    out = torch.empty(512, dtype=torch.float32, device=DEVICE)
    _int_codes_minus_kernel[(1,)](codes.to(DEVICE), out, BIAS=bias)
    assert torch.equal(out.cpu(), codes.float() - bias)


#: Every e2m1 value by its 3 magnitude bits (the sign is bit 3).
E2M1_MAGNITUDES = torch.tensor([0.0, 0.5, 1.0, 1.5, 2.0, 3.0, 4.0, 6.0])


@triton.jit
def _e2m1_values_kernel(codes_ptr, out_ptr, DTYPE: tl.constexpr, W_PTX: tl.constexpr):
    rows, cols = tl.arange(0, 16), tl.arange(0, 256)
    raw = tl.load(codes_ptr + rows[:, None] * 256 + cols[None, :])
    tl.store(out_ptr + rows[:, None] * 512 + tl.arange(0, 512)[None, :], e2m1_values(raw, DTYPE, W_PTX))


@pytest.mark.parametrize("ptx", [False, True] if GPU else [False], ids=["float16 bits", "PTX"][: 2 if GPU else 1])
@pytest.mark.parametrize("dtype", DTYPES)
def test_e2m1_codes_become_their_exact_16_bit_values(dtype, ptx):
    """fp4 decode and prefill tiles make e2m1 codes 16-bit values (dequantize.e2m1_values), through float16 bits or, compiled
    for a GPU, by table lookup in PTX: every packed byte (low nibble first), in every position of a tile, gives the
    code's value with its sign (the zero of code 8 negative)."""
    codes = (torch.arange(256, dtype=torch.int32)[None, :] + 17 * torch.arange(16)[:, None]) % 256  # each byte everywhere
    out = torch.empty(16, 512, dtype=dtype, device=DEVICE)
    _e2m1_values_kernel[(1,)](codes.to(torch.uint8).to(DEVICE), out, DTYPE=tl.bfloat16 if dtype == torch.bfloat16 else tl.float16,
                              W_PTX=ptx)
    nibbles = torch.stack([codes & 15, codes >> 4], dim=-1).reshape(16, 512)
    want = torch.where(nibbles >= 8, -1.0, 1.0) * E2M1_MAGNITUDES[nibbles & 7]
    assert torch.equal(out.cpu().view(torch.int16), want.to(dtype).view(torch.int16))  # bits: -0.0 included


@triton.jit
def _e4m3_values_kernel(codes_ptr, out_ptr, DTYPE: tl.constexpr, W_PTX: tl.constexpr):
    offs = tl.arange(0, 16)[:, None] * 256 + tl.arange(0, 256)[None, :]
    tl.store(out_ptr + offs, e4m3_values(tl.load(codes_ptr + offs), DTYPE, W_PTX))


@pytest.mark.parametrize("ptx", [False, True] if GPU else [False], ids=["float16 bits", "PTX"][: 2 if GPU else 1])
@pytest.mark.parametrize("dtype", DTYPES)
def test_e4m3_codes_become_their_exact_16_bit_values(dtype, ptx):
    """fp8 weight-only tiles make e4m3 bytes 16-bit values (dequantize.e4m3_values), through float16 bits or, compiled for a
    GPU, in PTX: every byte but the two NaNs, in every position of a tile, gives torch's float8_e4m3fn value, subnormals
    and -0.0 included."""
    codes = ((torch.arange(256)[None, :] + 17 * torch.arange(16)[:, None]) % 256).to(torch.uint8)
    out = torch.empty(16, 256, dtype=dtype, device=DEVICE)
    _e4m3_values_kernel[(1,)](codes.to(DEVICE), out, DTYPE=tl.bfloat16 if dtype == torch.bfloat16 else tl.float16, W_PTX=ptx)
    want = codes.view(torch.float8_e4m3fn).to(dtype)
    number = (codes & 0x7F) != 0x7F
    assert torch.equal(out.cpu().view(torch.int16)[number], want.view(torch.int16)[number])


@pytest.mark.parametrize("dtype", DTYPES if GPU else [torch.float16, torch.bfloat16], ids=str)
@pytest.mark.parametrize("name", WEIGHT_ONLY_SCHEMES)
def test_values_by_ptx_for_int4_e4m3_and_exact_e2m1_codes_compiled_for_nvidia(name, dtype, monkeypatch):
    """Compiled for an NVIDIA GPU (kernel.NVIDIA_PTX), the GEMMs make values by PTX (W_PTX): int4 codes, e4m3 codes,
    and e2m1 codes whose scales are applied in the activations' dtype (W_CODES 3: nvfp4 in float16); on an sm_90 in
    bfloat16 e2m1 and symmetric int4 codes are stored as words (W_CODES 4 and 5), by PTX only in swapped warpgroup tiles
    (kernel.words_by_ptx); 8-bit integer codes keep Triton's conversions; the interpreter (the CPU tests) never gets PTX,
    nor words."""
    from moe_core_triton import kernel as kernel_module
    from moe_core_triton.compile_check import launches_of

    def gemms():
        return [dict(launch.options) for launch in launches_of(name, 1, False, dtype, (256, 128)) if launch.name == "moe_gemm_kernel"]

    fp4 = name in ("nvfp4-w4a16", "mxfp4")
    exact_e2m1 = name == "nvfp4-w4a16" or (name == "mxfp4" and dtype == torch.bfloat16)
    int4 = name == "w4a16"  # symmetric int4 codes: w4a16-zp keeps bytes
    words = (fp4 or int4) and dtype == torch.bfloat16 and kernel_module.wgmma_gpu()  # K 256 and 128: whole chunks
    compiled_codes = (4 if fp4 else 5) if words else 3 if exact_e2m1 else weight_only(*quant.scheme(name).keys).codes
    assert {g["W_CODES"] for g in gemms()} == {compiled_codes if GPU else 3 if exact_e2m1 else weight_only(*quant.scheme(name).keys).codes}
    if not GPU:
        assert {g["W_PTX"] for g in gemms()} == {False}
    monkeypatch.setattr(kernel_module, "NVIDIA_PTX", True)
    for g in gemms():
        assert g["W_CODES"] == compiled_codes
        by_ptx = kernel_module.words_by_ptx(LaunchConfig(16, g["BLOCK_N"], 64, 1, 4, 4, SWAP_AB=g["SWAP_AB"])) if words else True
        assert g["W_PTX"] == (by_ptx and (name in ("w4a16", "w4a16-zp", "fp8-w8a16", "fp8-block-w8a16") or exact_e2m1))