"""Quantize and dequantize a tensor into any :class:`~moe_core.quant.QuantKey`.

Layouts (documented in docs/quantization.md). A tensor ``x`` of shape ``[..., R, C]`` (weights:
``[E, N, K]``; activations: ``[T, K]``) quantizes to:

* ``data``: fp8 -> ``float8_e4m3fn [..., R, C]``; int8 -> ``int8 [..., R, C]`` (``uint8`` with zero
  points); int4 and fp4 -> ``uint8 [..., R, C/2]`` two 4-bit codes per byte (see :mod:`.fp4`;
  symmetric int4 codes are ``q + 8``);
* ``scale``: always ``[..., ceil(R/gr), ceil(C/gc)]`` for group shape (gr, gc), ``-1`` meaning the
  whole extent: per-tensor weights ``[E, 1, 1]``, per-channel ``[E, N, 1]``, 128-blocks
  ``[E, N/128, K/128]``, groups ``[E, N, K/g]``; per-token activations ``[T, 1]``, 1x128 groups
  ``[T, K/128]``, per-tensor activations ``[1, 1]``. float32, except nvfp4 (``float8_e4m3fn``)
  and mxfp4 (``uint8`` biased exponents);
* ``zero``: integer zero points, shaped like ``scale`` (asymmetric keys only);
* ``global_scale``: nvfp4 only, float32 ``[..., 1, 1]``.

Dequantized value = (code - zero) * scale [* global_scale].
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import torch

from moe_core.errors import KernelInputError
from moe_core.quant import GroupShape, QuantDtype, QuantKey, ScaleDtype
from moe_core.quantization import fp4

FP8_MAX = 448.0
_TINY = 1e-12


@dataclass(frozen=True, eq=False)
class QTensor:
    """A quantized tensor: codes, scales and the key that says how to read them."""

    data: torch.Tensor
    scale: torch.Tensor
    key: QuantKey
    shape: tuple[int, ...]
    zero: torch.Tensor | None = None
    global_scale: torch.Tensor | None = None

    def __getitem__(self, index) -> "QTensor":
        """Slice along the leading (expert) dimension."""
        pick = (lambda t: None if t is None else t[index])
        sliced = self.data[index]
        shape = tuple(sliced.shape[:-1]) + (self.shape[-1],)
        return QTensor(sliced, self.scale[index], self.key, shape, pick(self.zero), pick(self.global_scale))


def group_extent(group: GroupShape, rows: int, cols: int) -> tuple[int, int]:
    """(rows, cols) covered by one scale for a [rows, cols] matrix."""
    return (rows if group.rows == -1 else group.rows, cols if group.cols == -1 else group.cols)


def scale_shape(group: GroupShape, shape: tuple[int, ...]) -> tuple[int, ...]:
    """Shape of the scale tensor for a tensor of ``shape`` quantized with ``group``."""
    *lead, rows, cols = shape
    gr, gc = group_extent(group, rows, cols)
    return (*lead, math.ceil(rows / gr), math.ceil(cols / gc))


def _blocks(x: torch.Tensor, group: GroupShape) -> torch.Tensor:
    """View [..., R, C] as [..., nR, nC, gr, gc] (zero-padded to whole groups)."""
    *lead, rows, cols = x.shape
    gr, gc = group_extent(group, rows, cols)
    nr, nc = math.ceil(rows / gr), math.ceil(cols / gc)
    pad = torch.nn.functional.pad(x, (0, nc * gc - cols, 0, nr * gr - rows))
    return pad.reshape(*lead, nr, gr, nc, gc).transpose(-3, -2)


def _expand(s: torch.Tensor, group: GroupShape, rows: int, cols: int) -> torch.Tensor:
    """Broadcast a per-group tensor [..., nR, nC] back to [..., R, C]."""
    gr, gc = group_extent(group, rows, cols)
    return s.repeat_interleave(gr, dim=-2)[..., :rows, :].repeat_interleave(gc, dim=-1)[..., :cols]


def _amax(x: torch.Tensor, group: GroupShape) -> torch.Tensor:
    return _blocks(x.abs(), group).amax(dim=(-2, -1))


def quantize(x: torch.Tensor, key: QuantKey, scale: torch.Tensor | None = None) -> QTensor:
    """Quantize ``x`` ([..., R, C], any float dtype) into ``key``.

    ``scale`` supplies a precomputed (static) scale in the documented shape; otherwise scales are
    computed from ``x``. Zeros, huge values and subnormals never produce NaN or inf.
    """
    if not x.is_floating_point():
        raise KernelInputError("x", f"quantize expects a floating-point tensor, got {x.dtype}")
    if x.dim() < 2:
        raise KernelInputError("x", f"quantize expects at least 2 dimensions [..., R, C], got shape {tuple(x.shape)}")
    xf = x.float()
    rows, cols = xf.shape[-2:]
    expected = scale_shape(key.group, tuple(xf.shape))
    if scale is not None and tuple(scale.shape) != expected:
        raise KernelInputError("scale", f"expected shape {expected} for {key}, got {tuple(scale.shape)}")
    if key.dtype is QuantDtype.FP4_E2M1:
        return _quantize_fp4(xf, key)
    if cols % 2 and key.dtype is QuantDtype.INT4:
        raise KernelInputError("x", f"int4 packs two values per byte: the last dimension must be even, got {cols}")
    if key.symmetric:
        return _quantize_symmetric(xf, key, scale)
    return _quantize_asymmetric(xf, key, scale)


_SYM_MAX = {QuantDtype.FP8_E4M3: FP8_MAX, QuantDtype.INT8: 127.0, QuantDtype.INT4: 7.0}


def _quantize_symmetric(xf: torch.Tensor, key: QuantKey, scale: torch.Tensor | None) -> QTensor:
    qmax = _SYM_MAX[key.dtype]
    if scale is None:
        scale = _amax(xf, key.group).clamp(min=_TINY) / qmax
    scale = scale.float()
    rows, cols = xf.shape[-2:]
    scaled = xf / _expand(scale, key.group, rows, cols).clamp(min=_TINY)
    if key.dtype is QuantDtype.FP8_E4M3:
        data = scaled.clamp(-FP8_MAX, FP8_MAX).to(torch.float8_e4m3fn)
    elif key.dtype is QuantDtype.INT8:
        data = scaled.round().clamp(-128, 127).to(torch.int8)
    else:  # INT4, stored as offset-binary codes q + 8
        data = fp4.pack_nibbles((scaled.round().clamp(-8, 7) + 8).to(torch.uint8))
    return QTensor(data, scale, key, tuple(xf.shape))


def _quantize_asymmetric(xf: torch.Tensor, key: QuantKey, scale: torch.Tensor | None) -> QTensor:
    if scale is not None:
        raise KernelInputError("scale", "asymmetric keys compute their scales and zero points from the data; pass scale=None")
    levels = 15 if key.dtype is QuantDtype.INT4 else 255
    blocks = _blocks(xf, key.group)
    lo = blocks.amin(dim=(-2, -1)).clamp(max=0.0)
    hi = blocks.amax(dim=(-2, -1)).clamp(min=0.0)
    scale = ((hi - lo) / levels).clamp(min=_TINY)
    zero = (-lo / scale).round().clamp(0, levels)
    rows, cols = xf.shape[-2:]
    q = (xf / _expand(scale, key.group, rows, cols)).round() + _expand(zero, key.group, rows, cols)
    q = q.clamp(0, levels).to(torch.uint8)
    data = fp4.pack_nibbles(q) if key.dtype is QuantDtype.INT4 else q
    return QTensor(data, scale, key, tuple(xf.shape), zero=zero.to(torch.uint8))


def _quantize_fp4(xf: torch.Tensor, key: QuantKey) -> QTensor:
    rows, cols = xf.shape[-2:]
    if cols % key.group.cols:
        raise KernelInputError("x", f"fp4 needs the last dimension to be a multiple of {key.group.cols}, got {cols}")
    block_amax = _amax(xf, key.group)
    if key.scale_dtype is ScaleDtype.FP8_E4M3:  # nvfp4
        tensor_amax = xf.abs().amax(dim=(-2, -1), keepdim=True)
        global_scale = fp4.nvfp4_global_scale(tensor_amax)
        scale = fp4.nvfp4_block_scales(block_amax, global_scale)
        step = scale.float() * global_scale
    else:  # mxfp4
        global_scale = None
        scale = fp4.mxfp4_block_exponents(block_amax)
        step = fp4.e8m0_to_float(scale)
    step = _expand(step, key.group, rows, cols)
    scaled = torch.where(step > 0, xf / step.clamp(min=_TINY), torch.zeros_like(xf))
    return QTensor(fp4.pack_nibbles(fp4.encode_e2m1(scaled)), scale, key, tuple(xf.shape), global_scale=global_scale)


def dequantize(q: QTensor) -> torch.Tensor:
    """Float32 values of a quantized tensor, shape ``q.shape``."""
    key = q.key
    rows, cols = q.shape[-2:]
    if key.dtype is QuantDtype.FP4_E2M1:
        values = fp4.decode_e2m1(fp4.unpack_nibbles(q.data))
        if key.scale_dtype is ScaleDtype.FP8_E4M3:
            step = q.scale.float() * q.global_scale.float()
        else:
            step = fp4.e8m0_to_float(q.scale)
        return values * _expand(step, key.group, rows, cols)
    if key.dtype is QuantDtype.INT4:
        codes = fp4.unpack_nibbles(q.data).float()
        values = codes - 8.0 if key.symmetric else codes
    else:
        values = q.data.float()
    if q.zero is not None:
        values = values - _expand(q.zero.float(), key.group, rows, cols)
    return values * _expand(q.scale.float(), key.group, rows, cols)


def fake_quantize(x: torch.Tensor, key: QuantKey | None, scale: torch.Tensor | None = None) -> torch.Tensor:
    """dequantize(quantize(x)) in float32; the identity (as float32) for ``key=None``."""
    if key is None:
        return x.float()
    return dequantize(quantize(x, key, scale))
