"""Marlin's nvfp4 / mxfp4 scale formats (moe_core_marlin.fp4_scales), on the CPU.

The expected values are decoded here from the formats' definitions: an S0E5M3 byte b is
2**((b >> 3) - 15) * (1 + (b & 7) / 8) (five exponent bits with float16's bias, three mantissa bits, no
sign); columns come in the order 0, 2, 1, 3 of every four.
"""

import dataclasses

import pytest
import torch

from moe_core.config import MoEConfig
from moe_core.errors import KernelInputError
from moe_core.quant import scheme
from moe_core.weights import quantize_experts
from moe_core_marlin.fp4_scales import mxfp4_scale_exponents, nvfp4_global_scale, nvfp4_scale_bytes, nvfp4_scale_factor
from moe_core_marlin.kernel import MarlinKernel
from moe_core_marlin.repack import unpack_weights, unpermute_scales

SWAP = [0, 2, 1, 3, 4, 6, 5, 7]  # where each output column of a run of eight reads from


def s0e5m3(byte_tensor):
    b = byte_tensor.view(torch.uint8).to(torch.int64)
    value = 2.0 ** ((b >> 3) - 15).double() * (1 + (b & 7).double() / 8)
    return torch.where(b == 0, torch.zeros_like(value), value)


def test_nvfp4_bytes_decode_to_the_scale_times_factor_and_2_to_the_7():
    # The factor keeps every scale at or below 448 (nvfp4_scale_factor), so 448 only meets factor 1.
    for largest, factor in ((448.0, 1.0), (64.0, 4.0)):
        scales = torch.tensor([[[1.0, 0.5, largest, 2.0**-6, 3.5, 0.0, 0.75, 10.0]]], dtype=torch.float8_e4m3fn).to(torch.bfloat16)
        got = s0e5m3(nvfp4_scale_bytes(scales, factor))[0, 0]
        want = scales.double()[0, 0, SWAP] * factor * 2**7
        assert torch.equal(got, want), (factor, got, want)


def test_nvfp4_scales_below_the_format_become_zero():
    tiny = torch.tensor([[[2.0**-9, 1.0, 0.0, 1.0]]], dtype=torch.bfloat16)  # 2**-9 * 2**7 < 2
    assert s0e5m3(nvfp4_scale_bytes(tiny, 1.0))[0, 0].tolist() == [0.0, 0.0, 128.0, 128.0]


@pytest.mark.parametrize("largest, dtype, factor", [
    (3.5, torch.bfloat16, 128.0),   # 3.5 * 128 = 448
    (3.6, torch.bfloat16, 64.0),    # 3.6 * 128 > 448
    (448.0, torch.bfloat16, 1.0),
    (3.5, torch.float16, 1.0),      # float16: never rescaled
])
def test_nvfp4_scale_factor_is_the_largest_power_of_two_keeping_448(largest, dtype, factor):
    scales = torch.tensor([[[0.0, 0.25, largest, 1.0]]], dtype=torch.bfloat16)
    assert nvfp4_scale_factor(scales, dtype) == factor


def test_nvfp4_global_scale_takes_the_exponent_bias_and_gives_back_the_factor():
    g = torch.tensor([0.5, 2.0]).reshape(2, 1, 1)
    assert nvfp4_global_scale(g, torch.bfloat16, 8.0).tolist() == [0.5 * 2.0**119 / 8, 2.0 * 2.0**119 / 8]
    assert nvfp4_global_scale(g, torch.float16, 1.0).tolist() == [0.5 * 2**7, 2.0 * 2**7]
    assert nvfp4_global_scale(g, torch.float16, 1.0).dtype == torch.float32


def test_mxfp4_exponents_are_reordered():
    codes = torch.arange(120, 128, dtype=torch.uint8).reshape(1, 1, 8)
    got = mxfp4_scale_exponents(codes.view(torch.float8_e8m0fnu).to(torch.bfloat16))
    assert got.dtype == torch.float8_e8m0fnu and got.view(torch.uint8)[0, 0].tolist() == [120 + i for i in SWAP]


CFG = MoEConfig(num_experts=2, top_k=1, hidden_size=128, intermediate_size=128, dtype=torch.bfloat16)


def prepared(name, cfg=CFG, edit=None):
    keys = scheme(name).keys
    gen = torch.Generator().manual_seed(0)
    raw = quantize_experts(torch.randn(2, 256, 128, generator=gen), torch.randn(2, 128, 128, generator=gen), keys[0])
    raw = edit(raw) if edit else raw
    return raw, MarlinKernel(cfg, *keys).prepare_weights(raw)


@pytest.mark.parametrize("name", ["nvfp4-w4a16", "mxfp4"])
def test_prepare_weights_lays_out_fp4(name):
    raw, done = prepared(name)
    nibbles = torch.stack((raw.w2.to(torch.int64) & 15, raw.w2.to(torch.int64) >> 4), dim=-1).flatten(-2)
    assert torch.equal(unpack_weights(done.w2, 4, 128), nibbles)
    group = 16 if name == "nvfp4-w4a16" else 32
    swap = torch.tensor(SWAP * (128 // 8)) + torch.arange(128) // 8 * 8
    if name == "mxfp4":
        exponents = done.w2_scale.view(torch.uint8)[..., torch.argsort(swap)]
        assert torch.equal(unpermute_scales(exponents, 128, group), raw.w2_scale.transpose(1, 2))
    else:
        decoded = s0e5m3(done.w2_scale)[..., torch.argsort(swap)]
        factor = done.w2_global_scale.double() / (raw.w2_global_scale.double().reshape(-1) * 2.0**119)
        assert torch.allclose(factor, factor[:1].expand(2)) and bool((factor >= 1).all())
        want = raw.w2_scale.transpose(1, 2).double() * factor[0] * 2**7
        assert torch.equal(unpermute_scales(decoded, 128, group), want)


def test_nvfp4_scales_that_marlin_would_drop_are_refused():
    def tiny(w):
        scale = w.w13_scale.clone()
        scale[0, 0, 0] = torch.tensor(2.0**-9, dtype=torch.float8_e4m3fn)
        return dataclasses.replace(w, w13_scale=scale)

    with pytest.raises(KernelInputError, match="fall below Marlin's scale format"):
        prepared("nvfp4-w4a16", cfg=dataclasses.replace(CFG, dtype=torch.float16), edit=tiny)
