"""Weight codes stored as words: the 4 bytes a thread hands Hopper's wgmma together, re-stored as one 32-bit word whose
bits a few instructions turn into the 16-bit values the MMA takes. How the bits are placed is the code's own:
:mod:`moe_core_triton.e2m1_words` (nvfp4, mxfp4), :mod:`moe_core_triton.int4_words` (w4a16).

Which 4 bytes: the MMA's 16-bit register operand gives a thread, per 16 x 16 block, the pairs of rows r and r + 8 at
two K positions 8 apart, which fragment order (:mod:`moe_core_triton.k_order`) stores as bytes j and j + 1 (j even) of
a row; a thread's registers list them (r, j), (r + 8, j), (r, j + 1), (r + 8, j + 1): the word's bytes 0 to 3, and
each register is one byte's two values. So a word spans two rows of a tile: rows x and x + 8 of each 16 as stored, or
for w13 (gate rows, then up rows) gate row x and up row x (``gate_up``), which a GATE_UP tile (gemm.py) holds 8 rows
apart. The word's bytes stay where those 4 bytes were stored; only their bits move.

Only Hopper's wgmma register operand is known to hand a thread those bytes
(:func:`moe_core_triton.kernel.words_by_ptx`): there a word's PTX decodes it in one piece (:func:`by_ptx`). Every other
tile gathers each word's bytes by integer operations on its logical rows and bytes (:func:`tile_bytes`), decodes them
as the PTX does, and puts the values back in stored order (:func:`pairs_in_stored_order`), whatever the layout.
"""

from __future__ import annotations

from typing import Callable

import torch
import triton
import triton.language as tl


def word_groups(codes: torch.Tensor, gate_up: bool) -> torch.Tensor:
    """A view of codes [E, rows, bytes] with the 4 bytes of each word last, in order (module docstring): rows x and
    x + rows / 2 (``gate_up``: w13's gate and up rows) or x and x + 8 of each 16, bytes j and j + 1, j even."""
    experts, rows, width = codes.shape
    if width % 2 or (gate_up and rows % 2) or (not gate_up and rows % 16):
        raise ValueError(f"words need an even byte count and {'an even' if gate_up else 'a multiple of 16'} row count; "
                         f"got {rows} rows of {width} bytes")
    if gate_up:  # [E, member, x, j // 2, j % 2]
        return codes.reshape(experts, 2, rows // 2, width // 2, 2).permute(0, 2, 3, 4, 1)
    return codes.reshape(experts, rows // 16, 2, 8, width // 2, 2).permute(0, 1, 3, 4, 5, 2)


def to_words(codes: torch.Tensor, gate_up: bool, rearranged: Callable[[torch.Tensor], torch.Tensor]) -> torch.Tensor:
    """Codes [E, rows, bytes] (uint8, in fragment order) with each word's 4 bytes (module docstring) replaced by
    ``rearranged`` of them: a function of uint8 [..., 4] (the word's bytes 0 to 3) to the same; same shape and dtype."""
    codes = codes.contiguous()
    groups = word_groups(codes, gate_up)
    old = groups.reshape(*groups.shape[:-2], 4)  # byte 2 (j % 2) + member
    out = torch.empty_like(codes)
    word_groups(out, gate_up).copy_(rearranged(old).reshape(groups.shape))
    return out


@triton.jit
def tile_bytes(raw, BLOCK_N: tl.constexpr, BYTES: tl.constexpr):
    """A tile of words [BLOCK_N, BYTES] (uint8, rows as the GEMM's tile holds them: a word's rows 8 apart in each 16)
    as each word's bytes 0 to 3, uint32 [BLOCK_N / 16, 8, BYTES / 2] each (block, row r, j / 2)."""
    groups = tl.permute(tl.reshape(raw.to(tl.uint32), (BLOCK_N // 16, 2, 8, BYTES // 2, 2)), (0, 2, 3, 4, 1))
    by_j, by_j1 = tl.split(tl.permute(groups, (0, 1, 2, 4, 3)))  # [block, r, j // 2, member] at j and at j + 1
    b0, b1 = tl.split(by_j)
    b2, b3 = tl.split(by_j1)
    return b0, b1, b2, b3


@triton.jit
def _halves(pair):
    """A pair of 16-bit values (uint32), low half first, as [..., 2] uint16."""
    return tl.join(pair & 0xFFFF, pair >> 16).to(tl.uint16)


@triton.jit
def pairs_in_stored_order(p0, p1, p2, p3, BLOCK_N: tl.constexpr, BYTES: tl.constexpr):
    """The value pairs (uint32, low half first) of each word's bytes 0 to 3 (shaped as :func:`tile_bytes` gives them)
    as the tile's 16-bit values [BLOCK_N, 2 BYTES] (uint16) in stored order: a byte's two values at its place."""
    # [block, r, j // 2, half, member, j % 2] -> [block, member, r, j // 2, j % 2, half]
    values = tl.join(tl.join(_halves(p0), _halves(p1)), tl.join(_halves(p2), _halves(p3)))
    return tl.reshape(tl.permute(values, (0, 4, 1, 2, 5, 3)), (BLOCK_N, 2 * BYTES))


@triton.jit
def by_ptx(raw, PTX: tl.constexpr):
    """A tile of words [BLOCK_N, BYTES] (uint8) as its bfloat16 values [BLOCK_N, 2 BYTES] in stored order,
    by ``PTX``, which takes a word's bytes each twice ($4: bytes 0, 0, 1, 1; $5: bytes 2, 2, 3, 3: one element per
    value, so each gets its own) and gives byte i's pair of values in ${i}. Only where the tile's layout hands a thread
    a word's bytes in order (module docstring)."""
    twice = tl.interleave(raw, raw)
    return tl.inline_asm_elementwise(PTX, "=r,=r,=r,=r,r,r", [twice], dtype=tl.bfloat16, is_pure=True, pack=8)
