"""Marlin's weight, scale and zero-point layouts, written in torch (any device; prepare time only).

Learnt from vLLM's ``gptq_marlin_repack`` kernel (16-bit activations, no act-order) and its
``marlin_permute_scales`` / ``marlin_zero_points`` helpers at the release of
:data:`moe_core_marlin.contract.VLLM_VERSION`; this is the plugin's own code, so it needs no vLLM library.

**Weights.** A projection ``[N, K]`` (N outputs, K the reduction) of unsigned codes becomes int32
``[K/16, N * bits/2]``: the matrix is cut into tiles of 16 (k) x 64 (n); tile (kt, nt) fills words
``[(kt * N/64 + nt) * W, ... + W)`` of the flat output, W = 16 * 64 * bits / 32 words per tile.
Inside a tile, warp ``w`` (0..3) owns columns 16w..16w+15 and its thread ``t`` (0..31) the tensor-core
fragment of column ``c = 16w + t // 4`` and rows ``r = 2 * (t % 4)``: rows r, r+1, r+8, r+9 of
columns c and c+8. 4-bit: word ``4t + w`` holds, from its low nibble up, (r, c), (r+8, c), (r, c+8),
(r+8, c+8), (r+1, c), (r+9, c), (r+1, c+8), (r+9, c+8). 8-bit: word ``8t + 2w`` holds column c and word
``8t + 2w + 1`` column c+8, each with rows r, r+8, r+1, r+9 from the low byte up.

**Scales** ``[K/group, N]`` in the activation dtype keep their shape; with groups along K (``group`` not
-1 and below K) each run of 64 columns is read as an 8 x 8 block and transposed (position 8i + j
takes column i + 8j); with one group over K (channelwise) each run of 32 columns takes, at 8i + m,
column ``2i + (0, 1, 8, 9, 16, 17, 24, 25)[m]``.

**Zero points** ``[K/group, N]`` (codes) take the grouped scale permutation, then are packed along N,
``32/bits`` per int32, slot s of word j holding column ``j * 32/bits + (0, 2, 4, 6, 1, 3, 5, 7)[s]``
(4-bit; 8-bit would be ``(0, 2, 1, 3)``, but Marlin has no 8-bit type with zero points).
"""

from __future__ import annotations

import functools

import torch

TILE_K = 16
TILE_N = 64
#: (row, column) offsets of a thread's fragment from its (r, c), in the order a 4-bit word holds them.
_FRAGMENT_4BIT = ((0, 0), (8, 0), (0, 8), (8, 8), (1, 0), (9, 0), (1, 8), (9, 8))
#: Row offsets of an 8-bit word's four bytes, low byte first (one word per column c, c+8).
_ROWS_8BIT = (0, 8, 1, 9)
_ZERO_POINT_INTERLEAVE_4BIT = (0, 2, 4, 6, 1, 3, 5, 7)


@functools.lru_cache(maxsize=None)
def tile_order(bits: int) -> tuple[tuple[int, ...], ...]:
    """For each word of a 16 x 64 tile, the flat tile positions ``k * 64 + n`` of its codes, low bits first."""
    if bits not in (4, 8):
        raise ValueError(f"Marlin packs 4- or 8-bit codes, not {bits}-bit")
    words: dict[int, tuple[int, ...]] = {}
    for w in range(4):
        for t in range(32):
            c, r = 16 * w + t // 4, 2 * (t % 4)
            if bits == 4:
                words[4 * t + w] = tuple((r + dk) * TILE_N + c + dn for dk, dn in _FRAGMENT_4BIT)
            else:
                for half in (0, 1):
                    words[8 * t + 2 * w + half] = tuple((r + dk) * TILE_N + c + 8 * half for dk in _ROWS_8BIT)
    return tuple(words[i] for i in range(len(words)))


def _order(bits: int, device: torch.device) -> torch.Tensor:
    return torch.tensor(tile_order(bits), dtype=torch.long, device=device)


def _check_tiles(size_k: int, size_n: int) -> None:
    if size_k % TILE_K or size_n % TILE_N:
        raise ValueError(f"Marlin tiles are {TILE_K} (K) x {TILE_N} (N); got K={size_k}, N={size_n}")


def _as_int32(words: torch.Tensor) -> torch.Tensor:
    """Unsigned 32-bit words held in int64 -> the same bits as int32."""
    return torch.where(words >= 2**31, words - 2**32, words).to(torch.int32)


def repack_weights(codes: torch.Tensor, bits: int) -> torch.Tensor:
    """Unsigned codes [E, N, K] (each < 2**bits) -> Marlin's int32 [E, K/16, N * bits/2]."""
    experts, size_n, size_k = codes.shape
    _check_tiles(size_k, size_n)
    kt, nt = size_k // TILE_K, size_n // TILE_N
    tiles = codes.transpose(1, 2).reshape(experts, kt, TILE_K, nt, TILE_N).permute(0, 1, 3, 2, 4)
    picked = tiles.reshape(experts, kt, nt, TILE_K * TILE_N)[..., _order(bits, codes.device)].to(torch.int64)
    shifts = bits * torch.arange(32 // bits, device=codes.device)
    words = (picked << shifts).sum(-1)  # disjoint bit fields: the sum is their OR
    return _as_int32(words).reshape(experts, kt, -1)


def unpack_weights(words: torch.Tensor, bits: int, size_n: int) -> torch.Tensor:
    """The inverse of :func:`repack_weights`: int32 [E, K/16, N * bits/2] -> codes [E, N, K] (int64)."""
    experts, kt, _ = words.shape
    nt = size_n // TILE_N
    order = _order(bits, words.device)
    shifts = bits * torch.arange(32 // bits, device=words.device)
    fields = ((words.to(torch.int64) & 0xFFFFFFFF).reshape(experts, kt, nt, -1, 1) >> shifts) & ((1 << bits) - 1)
    tiles = torch.empty((experts, kt, nt, TILE_K * TILE_N), dtype=torch.int64, device=words.device)
    tiles[..., order.flatten()] = fields.flatten(-2)
    by_k = tiles.reshape(experts, kt, nt, TILE_K, TILE_N).permute(0, 1, 3, 2, 4).reshape(experts, kt * TILE_K, size_n)
    return by_k.transpose(1, 2).contiguous()


@functools.lru_cache(maxsize=None)
def scale_permutation(grouped: bool) -> tuple[int, ...]:
    """Source column of each position in a run of 64 (grouped) or 32 (channelwise) scale columns."""
    if grouped:
        return tuple(i + 8 * j for i in range(8) for j in range(8))
    return tuple(2 * i + m for i in range(4) for m in (0, 1, 8, 9, 16, 17, 24, 25))


def is_grouped(group_size: int, size_k: int) -> bool:
    """Marlin reads groups along K when there are several; one group over K is read channelwise."""
    return group_size != -1 and group_size < size_k


def permute_scales(scales: torch.Tensor, size_k: int, group_size: int) -> torch.Tensor:
    """Scales [E, K/group, N] -> the same shape in Marlin's order (contiguous)."""
    perm = torch.tensor(scale_permutation(is_grouped(group_size, size_k)), device=scales.device)
    experts, groups, size_n = scales.shape
    return scales.reshape(experts, -1, perm.numel())[..., perm].reshape(experts, groups, size_n).contiguous()


def unpermute_scales(scales: torch.Tensor, size_k: int, group_size: int) -> torch.Tensor:
    """The inverse of :func:`permute_scales`."""
    perm = torch.tensor(scale_permutation(is_grouped(group_size, size_k)), device=scales.device)
    experts, groups, size_n = scales.shape
    return scales.reshape(experts, -1, perm.numel())[..., torch.argsort(perm)].reshape(experts, groups, size_n)


def pack_zero_points(zero: torch.Tensor, bits: int = 4) -> torch.Tensor:
    """Zero-point codes [E, K/group, N] -> Marlin's int32 [E, K/group, N * bits/32]."""
    if bits != 4:
        raise ValueError("Marlin takes zero points with 4-bit codes only (uint4)")
    experts, groups, size_n = zero.shape
    grouped = zero.reshape(experts, -1, TILE_N)[..., torch.tensor(scale_permutation(True), device=zero.device)]
    slots = grouped.reshape(experts, groups, -1, 8)[..., torch.tensor(_ZERO_POINT_INTERLEAVE_4BIT, device=zero.device)]
    words = (slots.to(torch.int64) << (4 * torch.arange(8, device=zero.device))).sum(-1)
    return _as_int32(words)
