"""From moe-core's canonical weight-only tensors (docs/quantization.md) to the codes and scales Marlin's layout takes.

moe-core stores a projection of shape [E, N, K] (rows: output channels, cols: reduction) as codes
[E, N, K] (int8), [E, N, K/2] (int4, element 2j in the low nibble) or float8_e4m3fn [E, N, K], with
scales and zero points [E, N, K/group]. :mod:`moe_core_marlin.repack` takes unsigned codes [E, N, K]
and scales / zero points [E, K/group, N].

fp8 weights have per-channel scales [E, N, 1] or 128x128 block scales [E, ceil(N/128), K/128];
Marlin reads both as groups along K, [E, 1, N] or [E, K/128, N].

fp4 (e2m1) weights are uint8 [E, N, K/2], element 2j in the low nibble: their codes unpack like int4
(vLLM reads the same bytes as little-endian int32, code k in bits 4(k % 8) of word k // 8, which is
the same order). nvfp4 scales are float8_e4m3fn [E, N, K/16], mxfp4 scales biased e8m0 exponents
(uint8) [E, N, K/32].
"""

from __future__ import annotations

import torch


def unsigned_codes(data: torch.Tensor, bits: int) -> torch.Tensor:
    """Codes [E, N, K] as non-negative int64: int4 nibbles unpacked (uint4b8 / uint4 already); signed int8 biased by 128 (uint8b128)."""
    if bits == 4:
        low, high = data & 0x0F, data >> 4
        return torch.stack((low, high), dim=-1).flatten(-2).to(torch.int64)
    if data.dtype == torch.int8:
        return data.to(torch.int64) + 128
    return data.to(torch.int64)


def fp8_codes(data: torch.Tensor) -> torch.Tensor:
    """float8_e4m3fn [E, N, K] -> its raw bytes as int64 codes; Marlin dequantizes the bit patterns itself."""
    return data.contiguous().view(torch.uint8).to(torch.int64)


def by_group(tensor: torch.Tensor, dtype: torch.dtype) -> torch.Tensor:
    """Scales or zero points [E, N, K/group] -> [E, K/group, N] in ``dtype``, contiguous."""
    return tensor.transpose(1, 2).to(dtype).contiguous()


def fp8_scales_by_group(scale: torch.Tensor, size_n: int, block_n: int, dtype: torch.dtype) -> torch.Tensor:
    """fp8 weight scales -> [E, K/group, N] in ``dtype``, contiguous.

    Per-channel [E, N, 1] becomes [E, 1, N]. 128x128 blocks [E, ceil(N/block_n), K/128] become
    groups of 128 along K, each block's scale repeated over its ``block_n`` output channels and
    cut to N (vLLM's ``prepare_fp8_moe_layer_for_marlin`` does the same with ``weight_block_size``).
    """
    by_k = scale.transpose(1, 2)
    if block_n > 1:
        by_k = by_k.repeat_interleave(block_n, dim=2)[..., :size_n]
    return by_k.to(dtype).contiguous()


def fp4_scales_by_group(scale: torch.Tensor, dtype: torch.dtype) -> torch.Tensor:
    """nvfp4 (float8_e4m3fn) or mxfp4 (uint8 biased exponents) block scales [E, N, K/group] ->
    [E, K/group, N] in ``dtype``, contiguous; mxfp4 exponents are read as float8_e8m0fnu first
    (exact in bfloat16: every power of two of e8m0 except its NaN code fits)."""
    if scale.dtype == torch.uint8:
        scale = scale.view(torch.float8_e8m0fnu)
    return scale.transpose(1, 2).to(dtype).contiguous()
