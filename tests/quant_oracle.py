"""Quantization written again from each format's definition, in float64: the oracle of the quantizer and reference tests.

It shares no code with :mod:`moe_core.quantization`: groups are sliced one by one, values are
rounded by a generic minifloat rule (nearest, ties to an even significand, saturating) and stored
codes are decoded from their bit layout as docs/quantization.md documents it. Only the format
definitions are repeated here: code ranges, the e4m3/e2m1 bit budgets, where the scales live.

``fake_quantize`` returns the dequantized values and a mask of the elements whose scaled value
(or whose fp4 block scale or zero point) lies within float32 rounding of a rounding boundary; there a
float32 implementation may pick either neighbour, anywhere else it must agree exactly.
"""

from __future__ import annotations

import math

import torch

from moe_core.quant import QuantDtype, QuantKey, ScaleDtype

# (mantissa bits, exponent of the smallest normal, largest finite value) of the minifloats.
E4M3 = (3, -6, 448.0)
E2M1 = (1, 0, 6.0)
INT_RANGE = {QuantDtype.INT8: (-128, 127), QuantDtype.INT4: (-8, 7)}
SYMMETRIC_MAX = {QuantDtype.FP8_E4M3: 448.0, QuantDtype.INT8: 127.0, QuantDtype.INT4: 7.0}
ASYMMETRIC_LEVELS = {QuantDtype.INT8: 255, QuantDtype.INT4: 15}
#: Relative distance from a rounding boundary inside which float32 arithmetic may round either way.
NEAR_TIE = 2.0**-20
#: moe_core's documented floor on scales, so all-zero groups divide by a positive number.
TINY_SCALE = 1e-12


def spacing(v: torch.Tensor, fmt: tuple[int, int, float]) -> torch.Tensor:
    """Distance between neighbouring values of the minifloat ``fmt`` around ``v`` (float64)."""
    mantissa, min_exp, _ = fmt
    exp = torch.floor(torch.log2(v.abs().clamp(min=2.0**min_exp))).clamp(min=min_exp)
    return torch.exp2(exp - mantissa)


def round_minifloat(v: torch.Tensor, fmt: tuple[int, int, float]) -> tuple[torch.Tensor, torch.Tensor]:
    """Nearest value of ``fmt`` (ties to an even significand, saturating at its largest value) and the near-tie mask."""
    _, _, largest = fmt
    v = v.clamp(-largest, largest)
    step = spacing(v, fmt)
    units = v / step
    return torch.round(units) * step, near_tie(units)


def round_integer(v: torch.Tensor, lo: int, hi: int) -> tuple[torch.Tensor, torch.Tensor]:
    """Nearest integer (ties to even), saturated to [lo, hi], and the near-tie mask."""
    return torch.round(v).clamp(lo, hi), near_tie(v)


def near_tie(units: torch.Tensor) -> torch.Tensor:
    """Elements whose value in units of the code spacing is within float32 rounding of a half-integer."""
    return ((units - torch.floor(units) - 0.5).abs() <= NEAR_TIE * units.abs().clamp(min=1.0)) & torch.isfinite(units)


def group_slices(rows: int, cols: int, group_rows: int, group_cols: int):
    """(row slice, col slice, group row index, group col index) of every group, -1 meaning the whole extent."""
    gr = rows if group_rows == -1 else group_rows
    gc = cols if group_cols == -1 else group_cols
    for i, r in enumerate(range(0, rows, gr)):
        for j, c in enumerate(range(0, cols, gc)):
            yield slice(r, r + gr), slice(c, c + gc), i, j


def n_groups(extent: int, group: int) -> int:
    return 1 if group == -1 else math.ceil(extent / group)


def fake_quantize(x: torch.Tensor, key: QuantKey, static_scale: torch.Tensor | None = None) -> dict[str, torch.Tensor]:
    """Quantize then dequantize ``x`` [..., R, C] by the definition of ``key``, in float64.

    Returns ``values`` (float64, x's shape), ``step`` (the value of one code per group,
    [..., nR, nC]), ``unit`` (the same per element), ``ambiguous`` (near-tie mask, x's shape), ``step_ambiguous`` (groups whose fp4
    block scale or integer zero point is a near-tie; ``scale_tie`` the same per element) and, for
    asymmetric keys, ``zero``.
    """
    x = x.double()
    *lead, rows, cols = x.shape
    shape = (*lead, n_groups(rows, key.group.rows), n_groups(cols, key.group.cols))
    values, ambiguous = torch.zeros_like(x), torch.zeros(x.shape, dtype=torch.bool)
    step, zero = torch.zeros(shape, dtype=torch.float64), torch.zeros(shape, dtype=torch.float64)
    step_ambiguous = torch.zeros(shape, dtype=torch.bool)
    unit, scale_tie = torch.zeros_like(x), torch.zeros(x.shape, dtype=torch.bool)
    global_step = None
    if key.dtype is QuantDtype.FP4_E2M1 and key.scale_dtype is ScaleDtype.FP8_E4M3:
        # nvfp4: a float32 global scale maps the tensor's amax to 6 * 448, the largest e2m1 code
        # times the largest e4m3 block scale.
        amax = x.abs().flatten(-2).amax(-1)
        global_step = (amax / (6 * 448)).float().double().clamp(min=torch.finfo(torch.float32).tiny)
    for rs, cs, i, j in group_slices(rows, cols, key.group.rows, key.group.cols):
        block = x[..., rs, cs]
        if key.dtype is QuantDtype.FP4_E2M1:
            s, block_tie = _fp4_step(block, key, global_step)
            scaled = torch.where(s[..., None, None] > 0, block / s[..., None, None], torch.zeros_like(block))
            q, amb = round_minifloat(scaled, E2M1)
            amb = amb | block_tie[..., None, None]
            step_ambiguous[..., i, j] = block_tie
            values[..., rs, cs], ambiguous[..., rs, cs] = q * s[..., None, None], amb
        elif key.symmetric:
            if static_scale is None:
                amax = block.abs().flatten(-2).amax(-1)
                s = (amax.clamp(min=TINY_SCALE) / SYMMETRIC_MAX[key.dtype]).float().double()  # scales are stored as float32
            else:
                s = static_scale[..., i, j].double()
            scaled = block / s[..., None, None]
            q, amb = round_minifloat(scaled, E4M3) if key.dtype is QuantDtype.FP8_E4M3 else round_integer(scaled, *INT_RANGE[key.dtype])
            values[..., rs, cs], ambiguous[..., rs, cs] = q * s[..., None, None], amb
        else:
            levels = ASYMMETRIC_LEVELS[key.dtype]
            lo = block.flatten(-2).amin(-1).clamp(max=0.0)
            hi = block.flatten(-2).amax(-1).clamp(min=0.0)
            s = ((hi - lo) / levels).float().double().clamp(min=TINY_SCALE)
            z, zero_tie = round_integer(-lo / s, 0, levels)
            scaled = block / s[..., None, None]
            q = (torch.round(scaled) + z[..., None, None]).clamp(0, levels)
            amb = near_tie(scaled) | zero_tie[..., None, None]
            step_ambiguous[..., i, j] = zero_tie
            values[..., rs, cs], ambiguous[..., rs, cs] = (q - z[..., None, None]) * s[..., None, None], amb
            zero[..., i, j] = z
        step[..., i, j] = s
        unit[..., rs, cs] = s[..., None, None]
        scale_tie[..., rs, cs] = step_ambiguous[..., i, j][..., None, None]
    out = {"values": values, "step": step, "unit": unit, "ambiguous": ambiguous, "step_ambiguous": step_ambiguous, "scale_tie": scale_tie}
    if not key.symmetric:
        out["zero"] = zero
    return out


def _fp4_step(block: torch.Tensor, key: QuantKey, global_step: torch.Tensor | None) -> tuple[torch.Tensor, torch.Tensor]:
    """Value of one e2m1 unit in each block (nvfp4: an e4m3 block scale times the global scale; mxfp4:
    2^(floor(log2 amax) - 2)) and whether float32 arithmetic may round that scale the other way."""
    amax = block.abs().flatten(-2).amax(-1)
    amax = torch.where(torch.isfinite(amax), amax, torch.nan)  # no scale represents a block holding inf
    if global_step is not None:
        block_scale, tie = round_minifloat(amax / 6 / global_step, E4M3)
        return block_scale * global_step, tie
    log2 = torch.log2(amax.clamp(min=2.0**-127))
    exponent = torch.floor(log2) - 2  # 6 = 1.5 * 2^2
    near_power = ((log2 - torch.round(log2)).abs() <= NEAR_TIE) & (log2 != torch.round(log2))
    return torch.exp2(exponent.clamp(-127, 127)), near_power


def stored_values(data: torch.Tensor, scale: torch.Tensor, key: QuantKey, shape: tuple[int, ...], zero=None, global_scale=None) -> torch.Tensor:
    """Float64 values of stored codes, decoded from the documented layout (docs/quantization.md)."""
    rows, cols = shape[-2:]
    if key.dtype in (QuantDtype.INT4, QuantDtype.FP4_E2M1):
        byte = data.to(torch.int64)
        nibbles = torch.stack((byte % 16, byte // 16), dim=-1).flatten(-2)  # element 2j low, 2j+1 high
        codes = _e2m1_value(nibbles) if key.dtype is QuantDtype.FP4_E2M1 else nibbles.double() - (8 if key.symmetric else 0)
    else:
        codes = data.double()
    if key.scale_dtype is ScaleDtype.E8M0:
        unit = torch.exp2(scale.double() - 127)
    else:
        unit = scale.double() * (global_scale.double() if global_scale is not None else 1.0)
    out = torch.empty(codes.shape, dtype=torch.float64)
    for rs, cs, i, j in group_slices(rows, cols, key.group.rows, key.group.cols):
        shift = zero[..., i, j].double()[..., None, None] if zero is not None else 0.0
        out[..., rs, cs] = (codes[..., rs, cs] - shift) * unit[..., i, j][..., None, None]
    return out


def _e2m1_value(codes: torch.Tensor) -> torch.Tensor:
    """e2m1 from its bits: sign (bit 3), two exponent bits (bias 1), one mantissa bit; exponent 0 is subnormal."""
    sign = torch.where(codes & 8 != 0, -1.0, 1.0).double()
    exp, man = (codes >> 1) & 3, (codes & 1).double()
    mag = torch.where(exp == 0, man * 0.5, torch.exp2(exp.double() - 1) * (1 + man / 2))
    return sign * mag
