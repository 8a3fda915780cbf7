"""From moe-core's canonical weight-only tensors (docs/quantization.md) to the inputs of vLLM's Marlin repack.

moe-core stores a projection of shape [E, N, K] (rows: output channels, cols: reduction) as
codes [E, N, K] (int8) or [E, N, K/2] (int4, element 2j in the low nibble), scales and zero points
[E, N, K/group]. Marlin's repack takes GPTQ-packed int32 [E, K * bits/32, N] (code k of a word in
bits ``bits * (k % pack)``), and scales / zero points transposed to [E, K/group, N].
"""

from __future__ import annotations

import torch


def unsigned_codes(data: torch.Tensor, bits: int) -> torch.Tensor:
    """Codes [E, N, K] as non-negative int64: int4 nibbles unpacked; signed int8 biased by 128 (uint8b128)."""
    if bits == 4:
        low, high = data & 0x0F, data >> 4
        return torch.stack((low, high), dim=-1).flatten(-2).to(torch.int64)
    if data.dtype == torch.int8:
        return data.to(torch.int64) + 128
    return data.to(torch.int64)


def gptq_pack(codes: torch.Tensor, bits: int) -> torch.Tensor:
    """Codes [E, N, K] -> GPTQ int32 [E, K * bits/32, N], packed along K, low bits first."""
    pack = 32 // bits
    by_k = codes.transpose(1, 2)
    experts, k, n = by_k.shape
    if k % pack:
        raise ValueError(f"K={k} is not a multiple of {pack}, the {bits}-bit GPTQ packing factor")
    words = torch.zeros((experts, k // pack, n), dtype=torch.int64, device=codes.device)
    for i in range(pack):
        words |= by_k[:, i::pack, :] << (bits * i)
    return _as_int32(words)


def _as_int32(words: torch.Tensor) -> torch.Tensor:
    """Unsigned 32-bit words held in int64 -> the same bits as int32."""
    return torch.where(words >= 2**31, words - 2**32, words).to(torch.int32)


def by_group(tensor: torch.Tensor, dtype: torch.dtype) -> torch.Tensor:
    """Scales or zero points [E, N, K/group] -> [E, K/group, N] in ``dtype``, contiguous."""
    return tensor.transpose(1, 2).to(dtype).contiguous()
