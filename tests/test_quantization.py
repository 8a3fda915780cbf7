"""Round-trip properties of every quantization scheme: error bounds, scale shapes, special values."""

import math

import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from moe_core import quant
from moe_core.errors import KernelInputError
from moe_core.quant import QuantDtype, ScaleDtype
from moe_core.quantization import fp4
from moe_core.quantization.qtensor import FP8_MAX, _expand, dequantize, quantize, scale_shape

KEYS = sorted({k for s in quant.SCHEMES for k in s.keys if k is not None}, key=str)


def step_of(q):
    """Per-element quantization step (the value of one code unit) of a QTensor."""
    rows, cols = q.shape[-2:]
    if q.key.dtype is QuantDtype.FP4_E2M1:
        s = q.scale.float() * q.global_scale if q.key.scale_dtype is ScaleDtype.FP8_E4M3 else fp4.e8m0_to_float(q.scale)
    else:
        s = q.scale.float()
    return _expand(s, q.key.group, rows, cols)


def bound(key, x, step):
    """The largest |dequant(quant(x)) - x| the scheme's resolution allows, per element."""
    ax = x.abs()
    if key.dtype is QuantDtype.FP8_E4M3:  # 3 mantissa bits; subnormal spacing 2^-9 of the scale
        return ax * 2.0**-4 + step * 2.0**-9
    if key.dtype in (QuantDtype.INT8, QuantDtype.INT4):
        return step * 0.5 * (1 + 1e-5)
    # e2m1: half a gap is at most a quarter of the magnitude (or a quarter step near 0); nvfp4's
    # e4m3 block scale adds up to 2^-4 relative; mxfp4 saturates values in [6, 8) steps to 6.
    extra = 6 * step * 2.0**-4 if key.scale_dtype is ScaleDtype.FP8_E4M3 else 0
    return ax * 0.25 + step * 0.25 + extra


@st.composite
def tensors(draw, key):
    e = draw(st.integers(1, 3))
    n = draw(st.integers(1, 40))
    mult = key.group.cols if key.dtype is QuantDtype.FP4_E2M1 else (2 if key.dtype is QuantDtype.INT4 else 1)
    k = mult * draw(st.integers(1, max(1, 300 // mult)))
    seed = draw(st.integers(0, 2**31 - 1))
    magnitude = 10.0 ** draw(st.integers(-6, 6))
    kind = draw(st.sampled_from(["normal", "normal", "zeros", "const", "huge", "subnormal", "mixed"]))
    g = torch.Generator().manual_seed(seed)
    x = torch.randn(e, n, k, generator=g) * magnitude
    if kind == "zeros":
        x.zero_()
    elif kind == "const":
        x.fill_(magnitude)
    elif kind == "huge":
        x = x.sign() * 1e30
    elif kind == "subnormal":
        x = torch.randn(e, n, k, generator=g) * 1e-40
    elif kind == "mixed":
        x[..., ::3] = 0.0
    return x


@pytest.mark.parametrize("key", KEYS, ids=str)
@settings(max_examples=40, deadline=None)
@given(data=st.data())
def test_round_trip_error_is_within_the_scheme_resolution(key, data):
    x = data.draw(tensors(key))
    q = quantize(x, key)
    assert tuple(q.scale.shape) == scale_shape(key.group, tuple(x.shape))
    y = dequantize(q)
    assert y.shape == x.shape and torch.isfinite(y).all()
    err = (y - x).abs()
    allowed = bound(key, x, step_of(q))
    worst = (err - allowed).max().item()
    assert worst <= 1e-6 * max(1.0, x.abs().max().item()), f"error exceeds bound by {worst}"


@pytest.mark.parametrize(
    "key,shape,expected",
    [
        (quant.kFp8StaticTensorSym, (4, 256, 512), (4, 1, 1)),
        (quant.kFp8StaticChannelSym, (4, 256, 512), (4, 256, 1)),
        (quant.kFp8Static128BlockSym, (4, 300, 512), (4, 3, 4)),
        (quant.kFp8Dynamic128Sym, (7, 512), (7, 4)),
        (quant.kFp8DynamicTokenSym, (7, 512), (7, 1)),
        (quant.kFp8StaticTensorSym, (7, 512), (1, 1)),
        (quant.kNvfp4Static, (2, 32, 64), (2, 32, 4)),
        (quant.kMxfp4Static, (2, 32, 64), (2, 32, 2)),
        (quant.kInt4StaticGroup128Asym, (2, 16, 256), (2, 16, 2)),
    ],
)
def test_documented_scale_shapes(key, shape, expected):
    q = quantize(torch.randn(shape), key)
    assert tuple(q.scale.shape) == expected
    if not key.symmetric:
        assert q.zero.shape == q.scale.shape and q.zero.dtype == torch.uint8
    if key.global_scale:
        assert tuple(q.global_scale.shape) == (*shape[:-2], 1, 1)


def test_storage_dtypes_and_packing():
    x = torch.randn(2, 8, 32)
    assert quantize(x, quant.kFp8StaticChannelSym).data.dtype == torch.float8_e4m3fn
    assert quantize(x, quant.kInt8StaticChannelSym).data.dtype == torch.int8
    assert quantize(x, quant.kInt8StaticGroup128Asym).data.dtype == torch.uint8
    for key in (quant.kInt4StaticGroup128Sym, quant.kNvfp4Static, quant.kMxfp4Static):
        d = quantize(x, key).data
        assert d.dtype == torch.uint8 and d.shape == (2, 8, 16)


def test_e2m1_codes_round_trip_and_ties_to_even():
    values = torch.tensor([0.0, 0.5, 1, 1.5, 2, 3, 4, 6, -0.5, -6, 7.0, 0.25, 0.75, 2.5, 5.0, -0.0])
    decoded = fp4.decode_e2m1(fp4.encode_e2m1(values))
    assert decoded.tolist() == [0.0, 0.5, 1, 1.5, 2, 3, 4, 6, -0.5, -6, 6.0, 0.0, 1.0, 2.0, 4.0, 0.0]
    codes = torch.randint(0, 16, (3, 10), dtype=torch.uint8)
    assert torch.equal(fp4.unpack_nibbles(fp4.pack_nibbles(codes)), codes)
    with pytest.raises(ValueError, match="must be even"):
        fp4.pack_nibbles(torch.zeros(3, dtype=torch.uint8))


def test_mxfp4_exponents_follow_the_ocp_rule():
    exps = fp4.mxfp4_block_exponents(torch.tensor([6.0, 1.0, 0.0, 1e-30]))
    assert (exps.int() - fp4.E8M0_BIAS).tolist() == [0, -2, -127, -102]


def test_static_scale_is_used_and_checked():
    x = torch.randn(5, 64)
    q = quantize(x, quant.kFp8StaticTensorSym, scale=torch.full((1, 1), 0.01))
    assert q.scale.item() == pytest.approx(0.01)
    assert dequantize(q).abs().max() <= FP8_MAX * 0.01 + 1e-6  # values saturate at the static range
    with pytest.raises(KernelInputError, match=r"scale: expected shape \(1, 1\)"):
        quantize(x, quant.kFp8StaticTensorSym, scale=torch.ones(5, 1))


@pytest.mark.parametrize(
    "x,key,msg",
    [
        (torch.ones(4, 4, dtype=torch.int32), quant.kFp8StaticTensorSym, "floating-point"),
        (torch.ones(4), quant.kFp8StaticTensorSym, "at least 2 dimensions"),
        (torch.ones(4, 3), quant.kInt4StaticGroup128Sym, "must be even"),
        (torch.ones(4, 24), quant.kNvfp4Static, "multiple of 16"),
    ],
)
def test_bad_inputs(x, key, msg):
    with pytest.raises(KernelInputError, match=msg):
        quantize(x, key)


def test_asymmetric_rejects_static_scale():
    with pytest.raises(KernelInputError, match="asymmetric keys compute"):
        quantize(torch.randn(2, 4, 128), quant.kInt4StaticGroup128Asym, scale=torch.ones(2, 4, 1))


def test_ceil_division_for_partial_groups():
    x = torch.randn(1, 130, 200)
    q = quantize(x, quant.kFp8Static128BlockSym)
    assert tuple(q.scale.shape) == (1, math.ceil(130 / 128), math.ceil(200 / 128))
    assert (dequantize(q) - x).abs().max() < 0.1 * x.abs().max()
