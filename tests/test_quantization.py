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
from tests import quant_oracle

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
    else:
        assert q.global_scale is None


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
    assert fp4.encode_e2m1(torch.tensor([-0.1, -0.0, 0.0])).tolist() == [0, 0, 0]  # zero is always code 0, never -0
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
        (torch.ones(4, 4, dtype=torch.int32), quant.kFp8StaticTensorSym, "quantize expects a floating-point tensor, got torch.int32"),
        (torch.ones(4), quant.kFp8StaticTensorSym, r"quantize expects at least 2 dimensions \[..., R, C\], got shape \(4,\)"),
        (torch.ones(4, 3), quant.kInt4StaticGroup128Sym, "int4 packs two values per byte: the last dimension must be even, got 3"),
        (torch.ones(4, 24), quant.kNvfp4Static, "fp4 needs the last dimension to be a multiple of 16, got 24"),
    ],
)
def test_bad_inputs(x, key, msg):
    with pytest.raises(KernelInputError, match=f"^x: {msg}$"):
        quantize(x, key)


def test_asymmetric_rejects_static_scale():
    with pytest.raises(KernelInputError, match="^scale: asymmetric keys compute their scales and zero points from the data; pass scale=None$"):
        quantize(torch.randn(2, 4, 128), quant.kInt4StaticGroup128Asym, scale=torch.ones(2, 4, 1))


def test_ceil_division_for_partial_groups():
    x = torch.randn(1, 130, 200)
    q = quantize(x, quant.kFp8Static128BlockSym)
    assert tuple(q.scale.shape) == (1, math.ceil(130 / 128), math.ceil(200 / 128))
    assert (dequantize(q) - x).abs().max() < 0.1 * x.abs().max()


# --- Against the float64 oracle of tests/quant_oracle.py, which shares no code with the quantizer ---

SOURCE_DTYPES = [torch.float32, torch.float16, torch.bfloat16]


def oracle_input(key, source_dtype, seed, specials=True):
    """[3, R, C] spanning several groups in both dimensions, rows and column chunks of very different
    magnitudes (so a scale shared by the wrong elements shows), an all-zero group, and for expert 0
    a NaN, a +inf and a -inf in three different rows; expert 2 stays finite."""
    rows = 2 * 128 + 4 if key.group.rows > 1 else 36
    cols = 288
    g = torch.Generator().manual_seed(seed)
    x = torch.randn(3, rows, cols, generator=g)
    x = x * 10.0 ** torch.randint(-2, 3, (3, rows, 1), generator=g) * 10.0 ** torch.randint(-2, 3, (1, 1, cols // 16), generator=g).repeat_interleave(16, -1)
    x[1, 0] = 0.0  # an all-zero row: zero groups for every per-row and 1xN key
    if key.group.rows > 1:
        x[1, :, :128] = 0.0  # all-zero 128x128 blocks
    if specials:
        x[0, 3, 5], x[0, 7, 100], x[0, 11, 200] = float("nan"), float("inf"), float("-inf")
    return x.to(source_dtype)


def implementation_step(q):
    """Value of one code per group, as the quantizer stored it (float64)."""
    if q.key.scale_dtype is ScaleDtype.E8M0:
        return torch.exp2(q.scale.double() - 127)
    return q.scale.double() * (q.global_scale.double() if q.global_scale is not None else 1.0)


def assert_matches_oracle(x, key, static_scale=None):
    q = quantize(x, key, static_scale)
    got = dequantize(q).double()
    want = quant_oracle.fake_quantize(x, key, static_scale)
    step, want_step = implementation_step(q), want["step"]
    clean = torch.isfinite(want_step) & ~want["step_ambiguous"]  # groups (nvfp4: matrices) without NaN or inf
    assert torch.allclose(step[clean], want_step[clean], rtol=2**-20, atol=0), f"{key}: scales differ from the oracle's"
    if not key.symmetric:
        assert torch.equal(q.zero.double()[clean], want["zero"][clean]), f"{key}: zero points differ"
    values, unit = want["values"], want["unit"]
    err = (got - values).abs()
    exact = torch.isfinite(values) & ~want["ambiguous"]
    float32_rounding = 2**-20 * (values.abs() + unit)  # the quantizer multiplies code and scale in float32
    off = exact & (err > float32_rounding)
    assert not off.any(), f"{key}: {int(off.sum())} values differ from the oracle's, first at {off.nonzero()[0].tolist()}"
    if key.dtype in (QuantDtype.INT8, QuantDtype.INT4):
        code_gap = unit
    else:
        code_gap = unit * quant_oracle.spacing(values / unit, quant_oracle.E4M3 if key.dtype is QuantDtype.FP8_E4M3 else quant_oracle.E2M1)
    # an element on a rounding boundary may take either neighbouring code; a group whose scale or
    # zero point is on a boundary may differ by a code anywhere (and saturate differently)
    element_tie = torch.isfinite(values) & want["ambiguous"] & ~want["scale_tie"]
    assert (err[element_tie] <= code_gap[element_tie] * (1 + 2**-20) + float32_rounding[element_tie]).all(), f"{key}: a near-tie rounded further than one code"
    return q, got, want


@pytest.mark.parametrize("source_dtype", SOURCE_DTYPES, ids=str)
@pytest.mark.parametrize("key", KEYS, ids=str)
def test_quantize_matches_the_float64_oracle(key, source_dtype):
    seed = KEYS.index(key) * 10 + SOURCE_DTYPES.index(source_dtype)
    x = oracle_input(key, source_dtype, seed)
    q, got, want = assert_matches_oracle(x, key)
    assert torch.isfinite(got[2]).all(), f"{key}: NaN/inf in expert 0 leaked into expert 2"
    assert (got[1, 0] == 0).all() and (key.group.rows <= 1 or (got[1, :, :128] == 0).all())


@pytest.mark.parametrize("key", [k for k in KEYS if k.dtype is not QuantDtype.FP4_E2M1 and k.symmetric], ids=str)
def test_activation_shapes_and_static_scales_match_the_oracle(key):
    """2-D [T, K] activations, and a static scale that saturates the largest values."""
    g = torch.Generator().manual_seed(KEYS.index(key))
    x = (torch.randn(33, 300, generator=g) * 10.0 ** torch.randint(-3, 4, (33, 1), generator=g)).to(torch.bfloat16)
    assert_matches_oracle(x, key)
    static = quant_oracle.fake_quantize(x, key)["step"].float() / 4  # four times too fine: the top values saturate
    _, got, _ = assert_matches_oracle(x, key, static)
    assert (got.abs() < x.double().abs() / 2).any()  # saturated at a quarter of the group's amax


@pytest.mark.parametrize("key", [quant.kNvfp4Static, quant.kMxfp4Static, quant.kInt4StaticGroup128Sym], ids=str)
def test_stored_codes_decode_to_the_dequantized_values(key):
    """The documented layout (nibble order, offsets, scale encodings) read independently gives dequantize's values."""
    x = oracle_input(key, torch.float32, seed=5, specials=False)
    q = quantize(x, key)
    decoded = quant_oracle.stored_values(q.data, q.scale, key, q.shape, q.zero, q.global_scale)
    assert torch.allclose(decoded, dequantize(q).double(), rtol=2**-20, atol=0)
