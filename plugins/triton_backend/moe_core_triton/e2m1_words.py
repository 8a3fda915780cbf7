"""e2m1 codes stored as words whose rotated bits are bfloat16 bit patterns: two instructions a pair of values.

An e2m1 code (sign s, exponent bits e1 e0, mantissa bit m) with its bits at bfloat16 bits 15, 8, 7 and 6 and every
other bit zero is the bfloat16 value of the code times 2^-126: exponent field e1 e0 and mantissa m / 2 give
2^(E - 127) (1 + m / 2) for E >= 1 and the subnormal m 2^-127 for E = 0, against 2^(E - 1) (1 + m / 2) and m / 2.

:func:`to_words` (``prepare_weights``, once, on codes already in fragment order, :mod:`moe_core_triton.k_order`)
re-stores each group of 4 bytes a thread hands the MMA together (:mod:`moe_core_triton.words`) as one 32-bit word W,
its bits placed so that the bfloat16 bits of each byte's two codes (the register the MMA takes) are W rotated right and
masked, :data:`DECODE`: bytes 0 to 2 by one rotation each, byte 3 by two (four rotations of the pattern cannot tile 32
bits). :data:`WORD_BF16_PTX` decodes a word in 10 instructions for 8 values (one a byte permute that gathers the word),
against 21 for the table lookup of :data:`moe_core_triton.dequantize.E2M1_BF16_PTX`, and the values need no interleave.
w13's words hold a gate row and its up row, so GEMM1 over e2m1 words always runs GATE_UP tiles.

The 2^-126 is made up by the scales and the accumulator: the GEMM multiplies the patterns by scale x 2^62 in
bfloat16 (:data:`SCALE_FOLD`; exact, subnormal inputs included) and the tile product by 2^64 (:data:`PRODUCT_FOLD`)
after the K loop, so the MMA's inputs are the weights x 2^-64. Exact for scales from 2^-68 to 2^65 (e8m0 codes 59 to
192): a weight below 2^-133 x 2^64 becomes 0 in bfloat16, and a larger scale overflows it.
"""

from __future__ import annotations

import torch
import triton
import triton.language as tl

from moe_core_triton import words

#: The bfloat16 bit (in a 16-bit half) each bit of an e2m1 code moves to: m, e0, e1, sign.
CODE_BITS_AT = (6, 7, 8, 15)
#: Those bits in both halves.
PAIR_MASK = sum(1 << (b + h) for b in CODE_BITS_AT for h in (0, 16))
#: Per byte i of a word (codes 2i and 2i + 1): the terms (right rotation, mask) whose OR makes its codes' bfloat16 bits.
DECODE = (((0, PAIR_MASK),), ((4, PAIR_MASK),), ((10, PAIR_MASK),), ((6, 0x81808180), (14, 0x00400040)))
#: A code's bfloat16 pattern is the code times 2^-PATTERN_EXPONENT.
PATTERN_EXPONENT = 126
#: The power of two the GEMM multiplies the scales by (:data:`SCALE_FOLD`); the tile product makes up the rest.
SCALE_FOLD_EXPONENT = 62
#: What the GEMM multiplies the scales by: the pattern of code x 2^-126 times scale x 2^62 is the weight x 2^-64.
SCALE_FOLD = 2.0**SCALE_FOLD_EXPONENT
#: What the GEMM multiplies the tile product by after the K loop.
PRODUCT_FOLD = 2.0 ** (PATTERN_EXPONENT - SCALE_FOLD_EXPONENT)


def source_bits() -> list[tuple[int, int]]:
    """For each bit of a word (0 to 31): the code (0 to 7) and the code's bit (0: m, 1: e0, 2: e1, 3: sign) it holds."""
    held: dict[int, tuple[int, int]] = {}
    for pair, terms in enumerate(DECODE):
        for rotation, mask in terms:
            for target in range(32):
                if mask >> target & 1:
                    held[(target + rotation) % 32] = (2 * pair + target // 16, CODE_BITS_AT.index(target % 16))
    assert sorted(held) == list(range(32)), "DECODE must place every bit of a word once"
    return [held[bit] for bit in range(32)]


def _rearranged(old: torch.Tensor) -> torch.Tensor:
    """The 4 bytes of words (uint8 [..., 4], codes as packed) with their bits where :data:`DECODE` reads them."""
    old = old.contiguous().view(torch.int32).to(torch.int64) & 0xFFFFFFFF
    moves: dict[int, int] = {}  # left rotation -> mask of the old bits it moves
    for bit, (code, code_bit) in enumerate(source_bits()):
        origin = 4 * code + code_bit
        moves[(bit - origin) % 32] = moves.get((bit - origin) % 32, 0) | 1 << origin
    new = torch.zeros_like(old)
    for rotation, mask in moves.items():
        part = old & mask
        new |= ((part << rotation) | (part >> (32 - rotation))) & 0xFFFFFFFF
    return torch.where(new >= 1 << 31, new - (1 << 32), new).to(torch.int32).view(torch.uint8)


def to_words(codes: torch.Tensor, gate_up: bool) -> torch.Tensor:
    """Packed e2m1 codes [E, rows, bytes] (uint8, element 2j in the low nibble of byte j; in fragment order) with each
    word's 4 bytes (:mod:`moe_core_triton.words`; ``gate_up``: w13, whose rows are its gate rows then its up rows)
    re-stored as the word :data:`DECODE` reads; same shape and dtype."""
    return words.to_words(codes, gate_up, _rearranged)


def _ptx() -> str:
    """The PTX of :data:`WORD_BF16_PTX`, written from :data:`DECODE`."""
    lines = [".reg .b32 w, t, u;", "prmt.b32 w, $4, $5, 0x6420;"]  # the word from the doubled bytes
    for pair, terms in enumerate(DECODE):
        if len(terms) == 1 and terms[0][0] == 0:
            lines.append(f"and.b32 ${pair}, w, {terms[0][1]:#010x};")
        elif len(terms) == 1:
            lines += [f"shf.r.wrap.b32 t, w, w, {terms[0][0]};", f"and.b32 ${pair}, t, {terms[0][1]:#010x};"]
        else:
            (r1, m1), (r2, m2) = terms
            lines += [f"shf.r.wrap.b32 t, w, w, {r1};", f"shf.r.wrap.b32 u, w, w, {r2};", f"and.b32 u, u, {m2:#010x};",
                      f"lop3.b32 ${pair}, t, {m1:#010x}, u, 0xea;"]  # (t & m1) | u
    return "{\n" + "\n".join(lines) + "\n}"


#: PTX turning a word of :func:`to_words`, each byte twice ($4: bytes 0, 0, 1, 1; $5: bytes 2, 2, 3, 3), into the
#: bfloat16 patterns of its codes times 2^-126, a byte's two codes a register ($0: byte 0 ... $3: byte 3), K-consecutive
#: in one row as the MMA takes them.
WORD_BF16_PTX = tl.constexpr(_ptx())

_E8M0_FOLD = tl.constexpr(SCALE_FOLD_EXPONENT)  # e8m0 codes are biased exponents: the fold adds to them
_P0_ROT, _P0_MASK = tl.constexpr(DECODE[0][0][0]), tl.constexpr(DECODE[0][0][1])
_P1_ROT, _P1_MASK = tl.constexpr(DECODE[1][0][0]), tl.constexpr(DECODE[1][0][1])
_P2_ROT, _P2_MASK = tl.constexpr(DECODE[2][0][0]), tl.constexpr(DECODE[2][0][1])
_P3_ROT, _P3_MASK = tl.constexpr(DECODE[3][0][0]), tl.constexpr(DECODE[3][0][1])
_P3_ROT2, _P3_MASK2 = tl.constexpr(DECODE[3][1][0]), tl.constexpr(DECODE[3][1][1])


@triton.jit
def _rotated_masked(w, ROT: tl.constexpr, MASK: tl.constexpr):
    """``w`` (uint32) rotated right by ROT bits, ANDed with MASK."""
    if ROT == 0:
        rotated = w
    else:
        rotated = (w >> ROT) | (w << (32 - ROT))
    return rotated & MASK


@triton.jit
def word_bits(raw, BLOCK_N: tl.constexpr, BYTES: tl.constexpr):
    """A tile of words (:func:`to_words`) [BLOCK_N, BYTES] (uint8, rows as the GEMM's tile holds them: a word's rows 8
    apart in each 16) as the bfloat16 patterns of its codes times 2^-126, [BLOCK_N, 2 BYTES] uint16 in stored order,
    by integer operations (:data:`DECODE`, what the PTX computes), whatever the tile's layout."""
    b0, b1, b2, b3 = words.tile_bytes(raw, BLOCK_N, BYTES)
    w = b0 | (b1 << 8) | (b2 << 16) | (b3 << 24)
    p0 = _rotated_masked(w, _P0_ROT, _P0_MASK)
    p1 = _rotated_masked(w, _P1_ROT, _P1_MASK)
    p2 = _rotated_masked(w, _P2_ROT, _P2_MASK)
    p3 = _rotated_masked(w, _P3_ROT, _P3_MASK) | _rotated_masked(w, _P3_ROT2, _P3_MASK2)
    return words.pairs_in_stored_order(p0, p1, p2, p3, BLOCK_N, BYTES)


@triton.jit
def word_values(raw, W_PTX: tl.constexpr, BLOCK_N: tl.constexpr, BYTES: tl.constexpr):
    """A tile of words (:func:`to_words`) [BLOCK_N, BYTES] (uint8) as bfloat16 codes times 2^-126, [BLOCK_N, 2 BYTES]
    in stored order: by :data:`WORD_BF16_PTX` with ``W_PTX`` (only where the values feed Hopper's wgmma register
    operand, whose layout hands the PTX a word's 4 bytes together: :func:`moe_core_triton.kernel.words_by_ptx`), else by
    :func:`word_bits`."""
    if W_PTX:
        values = words.by_ptx(raw, WORD_BF16_PTX)
    else:
        values = word_bits(raw, BLOCK_N, BYTES).to(tl.bfloat16, bitcast=True)
    return values


@triton.jit
def folded_e8m0_scales(raw):
    """e8m0 scale bytes (uint8) as bfloat16 scale x :data:`SCALE_FOLD`, 2^(e - 65), by their bits: exponent field
    e + 62. Codes above 192 (scales above 2^65) give infinity."""
    field = tl.minimum(raw.to(tl.int32) + _E8M0_FOLD, 255)
    return (field << 7).to(tl.uint16).to(tl.bfloat16, bitcast=True)
