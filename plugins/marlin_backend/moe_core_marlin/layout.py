"""From moe-core's canonical weight-only tensors (docs/quantization.md) to the inputs of vLLM's Marlin repack.

moe-core stores a projection of shape [E, N, K] (rows: output channels, cols: reduction) as
codes [E, N, K] (int8) or [E, N, K/2] (int4, element 2j in the low nibble), scales and zero points
[E, N, K/group]. Marlin's repack takes GPTQ-packed int32 [E, K * bits/32, N] (code k of a word in
bits ``bits * (k % pack)``), and scales / zero points transposed to [E, K/group, N].

fp8 weights are float8_e4m3fn [E, N, K] with per-channel scales [E, N, 1] or 128x128 block scales
[E, ceil(N/128), K/128]; Marlin reads both as groups along K, [E, 1, N] or [E, K/128, N].

fp4 (e2m1) weights are uint8 [E, N, K/2], element 2j in the low nibble, the same packing vLLM's
Marlin fp4 path reads: its ``prepare_moe_fp4_layer_for_marlin`` reinterprets each expert's [N, K/2]
bytes as int32 [N, K/8] and transposes them to [K/8, N], which on a little-endian machine puts code k
in bits 4 * (k % 8) of word k // 8, i.e. GPTQ packing along K. nvfp4 scales are float8_e4m3fn
[E, N, K/16], mxfp4 scales biased e8m0 exponents (uint8) [E, N, K/32]; both become [E, K/group, N]
in the activation dtype before Marlin's permutation.
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


def fp8_scales_by_group(scale: torch.Tensor, size_n: int, block_n: int, dtype: torch.dtype) -> torch.Tensor:
    """fp8 weight scales -> [E, K/group, N] in ``dtype``, contiguous.

    Per-channel [E, N, 1] becomes [E, 1, N]. 128x128 blocks [E, ceil(N/block_n), K/128] become
    groups of 128 along K, each block's scale repeated over its ``block_n`` output channels and
    cut to N (vLLM's ``prepare_moe_fp8_layer_for_marlin`` does the same with ``weight_block_size``).
    """
    by_k = scale.transpose(1, 2)
    if block_n > 1:
        by_k = by_k.repeat_interleave(block_n, dim=2)[..., :size_n]
    return by_k.to(dtype).contiguous()


def fp4_words(data: torch.Tensor) -> torch.Tensor:
    """Packed e2m1 codes uint8 [E, N, K/2] -> int32 [E, K/8, N]: the bytes of each row read as 32-bit
    words (four bytes, eight codes), then K-major, as ``gptq_marlin_moe_repack`` takes them."""
    if data.dtype != torch.uint8 or data.shape[-1] % 4:
        raise ValueError(f"fp4 codes must be uint8 [E, N, K/2] with K a multiple of 8, got {data.dtype} {tuple(data.shape)}")
    return data.contiguous().view(torch.int32).transpose(1, 2).contiguous()


def fp4_scales_by_group(scale: torch.Tensor, dtype: torch.dtype) -> torch.Tensor:
    """nvfp4 (float8_e4m3fn) or mxfp4 (uint8 biased exponents) block scales [E, N, K/group] ->
    [E, K/group, N] in ``dtype``, contiguous. mxfp4 exponents are read as float8_e8m0fnu first, as
    vLLM does (exact: every power of two of e8m0 except its NaN code fits bfloat16)."""
    if scale.dtype == torch.uint8:
        scale = scale.view(torch.float8_e8m0fnu)
    return scale.transpose(1, 2).to(dtype).contiguous()
