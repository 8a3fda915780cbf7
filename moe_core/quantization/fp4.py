"""FP4 (e2m1) encoding, nibble packing, and the block scales of nvfp4 and mxfp4.

Codes are 4 bits: bit 3 is the sign, bits 0-2 index :data:`E2M1_VALUES`. Two codes share one
uint8: element ``2j`` in the low nibble, element ``2j+1`` in the high nibble. int4 weights use the
same packing.
"""

from __future__ import annotations

import torch

#: Magnitudes representable by e2m1.
E2M1_VALUES = (0.0, 0.5, 1.0, 1.5, 2.0, 3.0, 4.0, 6.0)
E2M1_MAX = 6.0
E4M3_MAX = 448.0
#: mxfp4: largest power of two of an e2m1 value (6 = 1.5 * 2**2).
E2M1_EMAX = 2
E8M0_BIAS = 127


def encode_e2m1(x: torch.Tensor) -> torch.Tensor:
    """Round float values to the nearest e2m1 code (ties to the even code), saturating at +-6."""
    values = torch.tensor(E2M1_VALUES, dtype=torch.float32, device=x.device)
    mag = x.abs().float().clamp(max=E2M1_MAX)
    hi = torch.bucketize(mag, values).clamp(max=len(E2M1_VALUES) - 1)
    lo = (hi - 1).clamp(min=0)
    d_hi = values[hi] - mag
    d_lo = mag - values[lo]
    take_hi = (d_hi < d_lo) | ((d_hi == d_lo) & (hi % 2 == 0))
    code = torch.where(take_hi, hi, lo)
    sign = ((x < 0) & (code > 0)).to(torch.int64) << 3
    return (code | sign).to(torch.uint8)


def decode_e2m1(codes: torch.Tensor) -> torch.Tensor:
    """Float32 values of e2m1 codes."""
    values = torch.tensor(E2M1_VALUES, dtype=torch.float32, device=codes.device)
    c = codes.to(torch.int64)
    mag = values[c & 7]
    return torch.where((c & 8) != 0, -mag, mag)


def pack_nibbles(codes: torch.Tensor) -> torch.Tensor:
    """Pack 4-bit codes along the last dimension (which must be even) into uint8."""
    if codes.shape[-1] % 2:
        raise ValueError(f"the last dimension must be even to pack 4-bit values, got {codes.shape[-1]}")
    c = codes.to(torch.uint8)
    return c[..., 0::2] | (c[..., 1::2] << 4)


def unpack_nibbles(packed: torch.Tensor) -> torch.Tensor:
    """Inverse of :func:`pack_nibbles`: uint8 [..., K/2] -> codes [..., K]."""
    low = packed & 0x0F
    high = packed >> 4
    return torch.stack((low, high), dim=-1).flatten(-2)


def nvfp4_global_scale(amax: torch.Tensor) -> torch.Tensor:
    """Global (dequantization) scale so that block scales fit e4m3: amax / (6 * 448); never 0."""
    return (amax.float() / (E2M1_MAX * E4M3_MAX)).clamp(min=torch.finfo(torch.float32).tiny)


def nvfp4_block_scales(block_amax: torch.Tensor, global_scale: torch.Tensor) -> torch.Tensor:
    """e4m3 block scales: block_amax / 6 / global_scale, rounded to e4m3."""
    return (block_amax.float() / E2M1_MAX / global_scale).clamp(max=E4M3_MAX).to(torch.float8_e4m3fn)


def mxfp4_block_exponents(block_amax: torch.Tensor) -> torch.Tensor:
    """Biased e8m0 exponents (uint8): floor(log2(amax)) - 2, as the OCP MX spec sets them."""
    safe = block_amax.float().clamp(min=2.0**-127)
    exp = torch.floor(torch.log2(safe)) - E2M1_EMAX
    return (exp.clamp(-E8M0_BIAS, E8M0_BIAS) + E8M0_BIAS).to(torch.uint8)


def e8m0_to_float(exponents: torch.Tensor) -> torch.Tensor:
    return torch.exp2(exponents.float() - E8M0_BIAS)
