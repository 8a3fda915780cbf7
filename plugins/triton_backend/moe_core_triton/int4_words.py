"""int4 codes stored as words whose shifted, masked nibbles are the bfloat16 values 128 + code: 6 instructions for 8
values.

A 4-bit code c ORed into the mantissa of bfloat16 128 (bits 0x4300) is the value 128 + c, exact (the GEMM subtracts 128
with the zero point: :func:`moe_core_triton.dequantize.int4_minus_zero`). The MMA takes a register of two K-consecutive values
of a row: a byte's two codes, at bits 0 and 16. Bytes as they are hold a byte's two codes 4 bits apart, so their
values come out of 4 bytes' low nibbles and high nibbles apart (:data:`moe_core_triton.dequantize.INT4_BF16_PTX`, 8
instructions for 8 values) and are paired afterwards by byte permutes (one a register the MMA takes).

:func:`to_words` (``prepare_weights``, once, on codes already in fragment order, :mod:`moe_core_triton.k_order`)
re-stores each group of 4 bytes a thread hands the MMA together (:mod:`moe_core_triton.words`; bytes B0 to B3) as
bytes S0 to S3 whose nibbles are transposed in each half: nibble c of S(2a + b) is nibble b of B(2a + c). The PTX
gets each byte twice (S0 S0 S1 S1, S2 S2 S3 S3), so B(2a + c)'s low code sits at bit 4c of register a and its high
code at bit 16 + 4c: the register shifted right by 4c, masked with 0x000F000F and ORed with 0x43004300 is that byte's
pair of values (:data:`WORD_BF16_PTX`: 6 instructions for 8 values, no permute to pair them; handing it each byte
twice costs two permutes per 8 values, sm_90 SASS). Both GEMMs' words span rows x and x + 8 of each 16 as stored (w13's
gate rows with gate rows), so GEMM1 over int4 words runs tiles that are not GATE_UP.
"""

from __future__ import annotations

import torch
import triton
import triton.language as tl

from moe_core_triton import words

#: The bits of bfloat16 128 in both halves of a register: ORed with a code in each half's low nibble, 128 + code.
BIAS_BITS = 0x43004300
#: bfloat16 128: what the values exceed the codes by.
BIAS = 128.0


def _rearranged(old: torch.Tensor) -> torch.Tensor:
    """The 4 bytes of words (uint8 [..., 4], two codes a byte) with each half's nibbles transposed (module docstring)."""
    halves = old.reshape(*old.shape[:-1], 2, 2)  # [..., a, c]
    nibbles = torch.stack((halves & 15, halves >> 4), dim=-1)  # [..., a, c, b]: nibble b of B(2a + c)
    moved = nibbles.transpose(-1, -2)  # [..., a, b, c]: nibble c of S(2a + b)
    return (moved[..., 0] | (moved[..., 1] << 4)).reshape(old.shape)


def to_words(codes: torch.Tensor) -> torch.Tensor:
    """Packed int4 codes [E, rows, bytes] (uint8, element 2j in the low nibble of byte j; in fragment order, rows a
    multiple of 16) with each word's 4 bytes (:mod:`moe_core_triton.words`, rows x and x + 8 of each 16) re-stored
    with their nibbles where :data:`WORD_BF16_PTX` reads them; same shape and dtype. Its own inverse."""
    return words.to_words(codes, False, _rearranged)


#: PTX turning a word of :func:`to_words`, each byte twice ($4: bytes 0, 0, 1, 1; $5: bytes 2, 2, 3, 3), into the
#: bfloat16 values 128 + code of its codes, a byte's two a register ($0: byte 0 ... $3: byte 3), as the MMA takes them.
WORD_BF16_PTX = tl.constexpr(f"""{{
.reg .b32 t;
lop3.b32 $0, $4, 0x000f000f, {BIAS_BITS:#x}, 0xea;
shr.u32 t, $4, 4;
lop3.b32 $1, t, 0x000f000f, {BIAS_BITS:#x}, 0xea;
lop3.b32 $2, $5, 0x000f000f, {BIAS_BITS:#x}, 0xea;
shr.u32 t, $5, 4;
lop3.b32 $3, t, 0x000f000f, {BIAS_BITS:#x}, 0xea;
}}""")

_BIAS_BITS = tl.constexpr(BIAS_BITS)


@triton.jit
def _pair(low_byte, high_byte, SHIFT: tl.constexpr):
    """The values 128 + code (bfloat16 bits, uint32, low half first) of nibble SHIFT / 4 of two bytes (uint32)."""
    return ((low_byte >> SHIFT) & 15) | (((high_byte >> SHIFT) & 15) << 16) | _BIAS_BITS


@triton.jit
def word_bits(raw, BLOCK_N: tl.constexpr, BYTES: tl.constexpr):
    """A tile of words (:func:`to_words`) [BLOCK_N, BYTES] (uint8, rows as the GEMM's tile holds them) as the bfloat16
    bits of 128 + code, [BLOCK_N, 2 BYTES] uint16 in stored order, by integer operations (what the PTX computes),
    whatever the tile's layout."""
    s0, s1, s2, s3 = words.tile_bytes(raw, BLOCK_N, BYTES)
    return words.pairs_in_stored_order(_pair(s0, s1, 0), _pair(s0, s1, 4), _pair(s2, s3, 0), _pair(s2, s3, 4), BLOCK_N, BYTES)


@triton.jit
def word_values(raw, W_PTX: tl.constexpr, BLOCK_N: tl.constexpr, BYTES: tl.constexpr):
    """A tile of words (:func:`to_words`) [BLOCK_N, BYTES] (uint8) as the bfloat16 values 128 + code,
    [BLOCK_N, 2 BYTES] in stored order: by :data:`WORD_BF16_PTX` with ``W_PTX`` (only where the values feed Hopper's
    wgmma register operand: :func:`moe_core_triton.kernel.words_by_ptx`), else by :func:`word_bits`."""
    if W_PTX:
        values = words.by_ptx(raw, WORD_BF16_PTX)
    else:
        values = word_bits(raw, BLOCK_N, BYTES).to(tl.bfloat16, bitcast=True)
    return values
