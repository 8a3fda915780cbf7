"""Weight-only tiles (``W_ONLY``, 16-bit activations) for the grouped GEMM (:mod:`moe_core_triton.gemm`): codes loaded as
stored, made values in registers inside the K loop (never a dequantized copy in memory) and scaled, for the 16-bit MMA
with float32 accumulation. The GEMM calls :func:`stored_weight_tile` for each weight tile, :func:`group_scales` where
it scales the tile product instead (``SCALE_AFTER_DOT``), and :func:`product_fold` after the K loop.

Codes are bytes (int8 / uint8) or, ``W_PACKED``, two 4-bit codes per byte along K
(element 2j in the low nibble); ``W_CODES`` says what a code is: an integer (0), e2m1 (1), the
bits of an e4m3 float (2, fp8 weights read as uint8, so no fp8 hardware is needed; made exact 16-bit values by moving
their bits), or e2m1 made exact 16-bit values and scaled in 16 bits (3: where the scales are exact in the activations'
dtype; the per-expert global scale then multiplies the accumulator after the K loop), or e2m1 codes stored as words
whose bits, rotated and masked, are bfloat16 patterns of the codes times 2^-126 (4, in fragment order under bfloat16:
:mod:`moe_core_triton.e2m1_words`; the 2^-126 made up by the scales and the accumulator), or symmetric int4 codes
stored as words whose shifted, masked nibbles are the bfloat16 values 128 + code (5, in fragment order under bfloat16:
:mod:`moe_core_triton.int4_words`; the 128 subtracted with the zero point); e2m1 codes scaled in float32 (1)
become float16 by moving their bits (the exponent-bias difference folds into the scale). The
codes are read as stored ([BLOCK_N, K bytes], K contiguous: vectorized loads, each byte once) and
the dequantized tile is transposed for the MMA (or, with SWAP_AB, used as it is). Value = (code -
zero) * scale with the zero implicit 8 (``W_ZERO`` 1: symmetric int4) or a uint8 tensor
shaped like the scales (``W_ZERO`` 2); one scale per ``W_GROUP_N`` rows and ``W_GROUP`` elements
along K (the whole K: per channel), a float type (``W_SCALE`` 0: float32, or the activations' dtype for nvfp4's e4m3
scales, :attr:`moe_core_triton.kernel.WeightOnly.scales_in_dtype`) or e8m0 bits (2: mxfp4); nvfp4 adds a per-expert
float32 global scale (``W_GLOBAL``). With ``SCALE_AFTER_DOT`` (decode tiles whose K step
lies in one scale group) the scales multiply each step's tile product instead of the weights; else, with ``SCALE_16``
(:meth:`moe_core_triton.kernel.WeightOnly.scales_in`), the weights are made exact 16-bit values and scaled in the
activations' dtype, not in float32. ``W_PERMUTED``: the codes are stored in the K order of the MMA's register fragments
in chunks of 64 values (:mod:`moe_core_triton.k_order`); each tile is put back in K order as it is loaded.
"""

from __future__ import annotations

import triton
import triton.language as tl

from moe_core_triton import int4_words
from moe_core_triton.e2m1_words import PRODUCT_FOLD, folded_e8m0_scales, word_values
from moe_core_triton.k_order import codes_in_k_order

E2M1_WORDS_PRODUCT_FOLD = tl.constexpr(PRODUCT_FOLD)


@triton.jit
def as_float16(bits):
    """The float16 whose bit pattern is the low 16 bits of ``bits`` (int32)."""
    return bits.to(tl.uint16).to(tl.float16, bitcast=True)


@triton.jit
def e2m1_times_2_pow_minus_14(codes):
    """e2m1 codes (int32 holding a nibble) as float16 / 2^14: the sign and the 3 exponent/mantissa bits moved into a
    float16 (exponent bias 15 instead of 1; the subnormal 0.5 maps to a subnormal)."""
    return as_float16(((codes & 8) << 12) | ((codes & 7) << 9))


@triton.jit
def e4m3_value(bits):
    """The float32 value of e4m3 bits (int32 holding a byte): sign, exponent and mantissa bits moved into a float16
    (exponent bias 15 instead of 7, so the value / 2^8; subnormals map to subnormals), times 2^8 in float32."""
    return as_float16(((bits & 0x80) << 8) | ((bits & 0x7F) << 7)).to(tl.float32) * 256.0


@triton.jit
def scale_values(raw, W_SCALE: tl.constexpr):
    """Scales as float32: stored as a float type (0) or as e8m0 bits in uint8 (2)."""
    if W_SCALE == 0:
        return raw.to(tl.float32)
    return tl.exp2((raw.to(tl.int32) - 127).to(tl.float32))


@triton.jit
def per_group(values, factors, GROUPS: tl.constexpr, W_GROUP: tl.constexpr, BLOCK_N: tl.constexpr, OP: tl.constexpr):
    """values [BLOCK_N, GROUPS * W_GROUP] combined with factors [BLOCK_N, GROUPS], one per run of W_GROUP
    elements along K: OP 0 subtracts (zero points), 1 multiplies (scales)."""
    grouped = tl.reshape(values, (BLOCK_N, GROUPS, W_GROUP))
    if OP == 0:
        grouped = grouped - factors[:, :, None]
    else:
        grouped = grouped * factors[:, :, None]
    return tl.reshape(grouped, (BLOCK_N, GROUPS * W_GROUP))


@triton.jit
def code_factor(W_CODES: tl.constexpr):
    """What the float16 bit trick of :func:`dequantize_tile` leaves out of e2m1 values (``W_CODES`` 1): 2^14, folded
    into the scales; every other code's values are exact."""
    if W_CODES == 1:
        factor = 16384.0
    else:
        factor = 1.0
    return factor


@triton.jit
def product_fold(W_CODES: tl.constexpr):
    """What the tile product is multiplied by after the K loop: :data:`moe_core_triton.e2m1_words.PRODUCT_FOLD` for
    e2m1 words (``W_CODES`` 4), whose MMA inputs are the weights times its inverse; else 1."""
    if W_CODES == 4:
        fold = E2M1_WORDS_PRODUCT_FOLD
    else:
        fold = 1.0
    return fold


@triton.jit
def group_scales(ptrs, mask, global_scale, W_CODES: tl.constexpr, W_SCALE: tl.constexpr):
    """The weight scales at ``ptrs`` (one group's [BLOCK_N], or [BLOCK_N, groups]) as float32, the expert's
    global scale and the code factor folded in; e8m0 scales of e2m1 words as bfloat16 times the words' fold
    (:func:`moe_core_triton.e2m1_words.folded_e8m0_scales`; stored float scales of words carry it already)."""
    raw = tl.load(ptrs, mask=mask, other=0)
    if W_CODES == 4 and W_SCALE == 2:
        scales = folded_e8m0_scales(raw)
    else:
        scales = scale_values(raw, W_SCALE) * (global_scale * code_factor(W_CODES))
    return scales


@triton.jit
def int_codes_minus(codes, bias: tl.constexpr):
    """Integer codes (int32 in [-2^22, 2^22)) minus ``bias`` as float32, exactly, with no integer-to-float conversion
    (a quarter-rate instruction per element): the bits 0x4B400000 + code are the float 1.5 x 2^23 + code, and
    subtracting 1.5 x 2^23 + bias leaves code - bias (small integers: exact)."""
    return (codes + 0x4B400000).to(tl.float32, bitcast=True) - (12582912.0 + bias)


#: PTX turning four bytes of packed 4-bit codes ($4) into the 16-bit floats bias + code of their low nibbles ($0: bytes 0
#: and 1, $1: bytes 2 and 3) and high nibbles ($2, $3), two instructions a pair of values: a byte permute spreads two
#: bytes to the low byte of each 16-bit half, one lop3 keeps a nibble of each and ORs in the bias's bits (the
#: exponent of 128 in bfloat16, 0x4300, or of 1024 in float16, 0x6400), and the high nibbles are shifted down first.
_INT4_PTX = """{{
.reg .b32 lo, hi;
prmt.b32 lo, $4, 0, 0x4140;
prmt.b32 hi, $4, 0, 0x4342;
lop3.b32 $0, lo, 0x000f000f, {bias}, 0xea;
lop3.b32 $1, hi, 0x000f000f, {bias}, 0xea;
shr.u32 lo, lo, 4;
shr.u32 hi, hi, 4;
lop3.b32 $2, lo, 0x000f000f, {bias}, 0xea;
lop3.b32 $3, hi, 0x000f000f, {bias}, 0xea;
}}"""
INT4_BF16_PTX = tl.constexpr(_INT4_PTX.format(bias="0x43004300"))
INT4_FP16_PTX = tl.constexpr(_INT4_PTX.format(bias="0x64006400"))


#: PTX turning packed e2m1 codes, each byte twice ($4: bytes j, j, j + 1, j + 1; $5: bytes j + 2, j + 2, j + 3, j + 3;
#: element 2j in the low nibble of byte j), into their exact 16-bit float values in K order, a byte's two values in one
#: register ($0: byte j's low and high nibble, ... $3: byte j + 3's), as the MMA takes them. A byte permute gathers the
#: four distinct bytes. Byte permutes look the magnitudes up: the 3 magnitude bits of four codes (two bytes) select
#: bytes from an 8-byte table of the high bytes of the values 0, 0.5, 1, 1.5, 2, 3, 4, 6 and from one of their low
#: bytes, and a third permute pairs a byte's two values. Each code's sign bit is moved to its value's bit 15 by a
#: permute of the bytes and of the bytes shifted 4 bits (an even value's sign is bit 3 of its byte, an odd value's
#: bit 7) and ORed in by a lop3. 21 instructions for 8 values.
_E2M1_PTX = """{{
.reg .b32 th0, th1, tl0, tl1, b, sel, h, l, x4, sg;
mov.b32 th0, {th0};
mov.b32 th1, {th1};
mov.b32 tl0, {tl0};
mov.b32 tl1, {tl1};
prmt.b32 b, $4, $5, 0x6420;
and.b32 sel, b, 0x7777;
prmt.b32 h, th0, th1, sel;
prmt.b32 l, tl0, tl1, sel;
prmt.b32 $0, l, h, 0x5140;
prmt.b32 $1, l, h, 0x7362;
shr.u32 sel, b, 16;
and.b32 sel, sel, 0x7777;
prmt.b32 h, th0, th1, sel;
prmt.b32 l, tl0, tl1, sel;
prmt.b32 $2, l, h, 0x5140;
prmt.b32 $3, l, h, 0x7362;
shl.b32 x4, b, 4;
prmt.b32 sg, x4, b, 0x4000;
lop3.b32 $0, $0, sg, 0x80008000, 0xf8;
prmt.b32 sg, x4, b, 0x5111;
lop3.b32 $1, $1, sg, 0x80008000, 0xf8;
prmt.b32 sg, x4, b, 0x6222;
lop3.b32 $2, $2, sg, 0x80008000, 0xf8;
prmt.b32 sg, x4, b, 0x7333;
lop3.b32 $3, $3, sg, 0x80008000, 0xf8;
}}"""
#: bfloat16 0, 0.5, 1, 1.5, 2, 3, 4, 6: high bytes 00 3F 3F 3F 40 40 40 40, low bytes 00 00 80 C0 00 40 80 C0.
E2M1_BF16_PTX = tl.constexpr(_E2M1_PTX.format(th0="0x3F3F3F00", th1="0x40404040", tl0="0xC0800000", tl1="0xC0804000"))
#: float16 0, 0.5, 1, 1.5, 2, 3, 4, 6: high bytes 00 38 3C 3E 40 42 44 46, low bytes all 0.
E2M1_FP16_PTX = tl.constexpr(_E2M1_PTX.format(th0="0x3E3C3800", th1="0x46444240", tl0="0", tl1="0"))


#: PTX turning four e4m3 bytes ($2) into their exact 16-bit float values ($0: bytes 0 and 1, $1: bytes 2 and 3): a byte
#: permute puts each byte in the low byte of a 16-bit half with its sign bit repeated over the high byte, a shift and a
#: mask move the exponent and mantissa bits into place with one sign bit (the value / 2^8 as a float16, / 2^120 as a
#: bfloat16, subnormals to subnormals), and a multiply by 2^8 or 2^120 (an fma adding -0, which sm_80 has for bfloat16
#: too) makes the value, exactly. Five instructions for two values.
_E4M3_PTX = """{{
.reg .b32 s, f, z;
mov.b32 f, {factor};
mov.b32 z, 0x80008000;
prmt.b32 s, $2, 0, 0x9180;
shl.b32 s, s, {shift};
and.b32 s, s, {mask};
fma.rn.{kind} $0, s, f, z;
prmt.b32 s, $2, 0, 0xB3A2;
shl.b32 s, s, {shift};
and.b32 s, s, {mask};
fma.rn.{kind} $1, s, f, z;
}}"""
E4M3_BF16_PTX = tl.constexpr(_E4M3_PTX.format(shift=4, mask="0x87F087F0", factor="0x7B807B80", kind="bf16x2"))
E4M3_FP16_PTX = tl.constexpr(_E4M3_PTX.format(shift=7, mask="0xBF80BF80", factor="0x5C005C00", kind="f16x2"))


@triton.jit
def e4m3_values(raw, dtype: tl.constexpr, W_PTX: tl.constexpr):
    """e4m3 bytes (uint8) as their exact ``dtype`` values (bfloat16 or float16), same shape: with ``W_PTX`` by
    :data:`E4M3_BF16_PTX` / :data:`E4M3_FP16_PTX`, else through float16 bits and float32."""
    if W_PTX:
        if dtype == tl.bfloat16:
            values = tl.inline_asm_elementwise(E4M3_BF16_PTX, "=r,=r,r", [raw], dtype=tl.bfloat16, is_pure=True, pack=4)
        else:
            values = tl.inline_asm_elementwise(E4M3_FP16_PTX, "=r,=r,r", [raw], dtype=tl.float16, is_pure=True, pack=4)
    else:
        values = e4m3_value(raw.to(tl.int32)).to(dtype)
    return values


@triton.jit
def unpacked_codes(raw):
    """Packed 4-bit codes [BLOCK_N, BYTES] (uint8; element 2j in the low nibble of byte j) as int32 [BLOCK_N, 2 BYTES]."""
    codes = raw.to(tl.int32)
    return tl.interleave(codes & 15, codes >> 4)


@triton.jit
def integer_codes(raw, W_PACKED: tl.constexpr):
    """Integer codes as int32: bytes as they are, or packed 4-bit codes unpacked (:func:`unpacked_codes`)."""
    if W_PACKED:
        codes = unpacked_codes(raw)
    else:
        codes = raw.to(tl.int32)
    return codes


@triton.jit
def nibble_values_by_ptx(raw, dtype: tl.constexpr, BF16_PTX: tl.constexpr, FP16_PTX: tl.constexpr):
    """Packed 4-bit codes [BLOCK_N, BYTES] (uint8; element 2j in the low nibble of byte j) as ``dtype`` values
    [BLOCK_N, 2 BYTES] by the PTX for ``dtype`` (bfloat16 or float16), which turns four bytes ($4) into the values of
    their low nibbles ($0: bytes 0 and 1, $1: bytes 2 and 3) and of their high nibbles ($2, $3)."""
    if dtype == tl.bfloat16:
        lo, hi = tl.inline_asm_elementwise(BF16_PTX, "=r,=r,=r,=r,r", [raw], dtype=(tl.bfloat16, tl.bfloat16), is_pure=True, pack=4)
    else:
        lo, hi = tl.inline_asm_elementwise(FP16_PTX, "=r,=r,=r,=r,r", [raw], dtype=(tl.float16, tl.float16), is_pure=True, pack=4)
    return tl.interleave(lo, hi)


@triton.jit
def biased_int4(raw, dtype: tl.constexpr, W_PTX: tl.constexpr):
    """Packed 4-bit codes [BLOCK_N, BYTES] (uint8; element 2j in the low nibble of byte j) as ``dtype`` values
    bias + code, [BLOCK_N, 2 BYTES], with no integer-to-float conversion (a quarter-rate instruction per element): the
    code goes into the mantissa of 128 (bfloat16 bits 0x4300) or 1024 (float16 bits 0x6400). With ``W_PTX`` (compiled
    for an NVIDIA GPU; the interpreter runs no PTX) by :data:`INT4_BF16_PTX` / :data:`INT4_FP16_PTX`, one instruction a
    value; else nibble by nibble in 32-bit integers."""
    if W_PTX:
        values = nibble_values_by_ptx(raw, dtype, INT4_BF16_PTX, INT4_FP16_PTX)
    else:
        codes = unpacked_codes(raw)
        if dtype == tl.bfloat16:
            values = (codes | 0x4300).to(tl.uint16).to(tl.bfloat16, bitcast=True)
        else:
            values = as_float16(codes | 0x6400)
    return values


@triton.jit
def e2m1_values(raw, dtype: tl.constexpr, W_PTX: tl.constexpr):
    """Packed e2m1 codes [BLOCK_N, BYTES] (uint8; element 2j in the low nibble of byte j) as their exact ``dtype`` values
    (bfloat16 or float16), [BLOCK_N, 2 BYTES]: with ``W_PTX`` by table lookup (:data:`E2M1_BF16_PTX` /
    :data:`E2M1_FP16_PTX`), else through float16 bits and float32. The PTX takes the bytes interleaved with themselves
    (one element per value), so each register it gives is a pair of K-consecutive values of one row, which the MMA's
    register operand takes as it is; values of low and high nibbles made apart and interleaved afterwards cost two byte
    permutes per four values to pair (H100: fp4 layers −1.0 to +8.1%, 3 to 5% in most cells,
    docs/benchmarks/weight-only-h100.md, 2026-11-27). int4 codes keep that interleave (:func:`biased_int4`): for them
    the duplicated bytes measured slower at 4096 tokens."""
    if W_PTX:
        twice = tl.interleave(raw, raw)  # one element per value: the PTX gives each its own
        if dtype == tl.bfloat16:
            values = tl.inline_asm_elementwise(E2M1_BF16_PTX, "=r,=r,=r,=r,r,r", [twice], dtype=tl.bfloat16, is_pure=True,
                                               pack=8)
        else:
            values = tl.inline_asm_elementwise(E2M1_FP16_PTX, "=r,=r,=r,=r,r,r", [twice], dtype=tl.float16, is_pure=True,
                                               pack=8)
    else:
        values = (e2m1_times_2_pow_minus_14(unpacked_codes(raw)).to(tl.float32) * 16384.0).to(dtype)
    return values


#: What :func:`biased_int4` adds to each int4 code: 128 in bfloat16 (bits 0x4300), 1024 in float16 (bits 0x6400).
INT4_BIAS_BF16 = tl.constexpr(128.0)
INT4_BIAS_FP16 = tl.constexpr(1024.0)


@triton.jit
def biased_int4_values(raw, dtype: tl.constexpr, W_CODES: tl.constexpr, W_PTX: tl.constexpr):
    """int4 codes as ``dtype`` values bias + code: packed bytes made so (:func:`biased_int4`), or with ``W_CODES`` 5
    the values :func:`stored_weight_tile` made of int4 words already (:mod:`moe_core_triton.int4_words`, bfloat16)."""
    if W_CODES == 5:
        values = raw
    else:
        values = biased_int4(raw, dtype, W_PTX)
    return values


@triton.jit
def int4_minus_zero(biased, zero, dtype: tl.constexpr):
    """int4 values bias + code (:func:`biased_int4_values`) minus ``zero`` (float32, 0..15, one per row) as ``dtype``
    (bfloat16 or float16): less bias + zero in ``dtype``. Every value involved is a small integer, so the result is
    exact: the same bits as converting ``code - zero`` itself."""
    if dtype == tl.bfloat16:
        bias = INT4_BIAS_BF16
    else:
        bias = INT4_BIAS_FP16
    return biased - (zero + bias).to(dtype)[:, None]


@triton.jit
def dequantize_tile(raw, k0, K, s_ptrs, z_ptrs, stride_bsk, n_ok, global_scale, dtype,
                    W_PACKED: tl.constexpr, W_CODES: tl.constexpr, W_ZERO: tl.constexpr, W_SCALE: tl.constexpr,
                    W_GROUP: tl.constexpr, GROUPS_PER_TILE: tl.constexpr, SCALE_AFTER_DOT: tl.constexpr, SCALE_16: tl.constexpr,
                    W_PTX: tl.constexpr, BLOCK_K: tl.constexpr, BLOCK_N: tl.constexpr):
    """One tile of weight codes as stored, [BLOCK_N, BLOCK_K] bytes (K contiguous; [BLOCK_N, BLOCK_K / 2]
    when packed), as values [BLOCK_N, BLOCK_K] for the K rows from k0: float32, or with ``SCALE_16`` exact ``dtype``
    values less their zero points, scaled in ``dtype`` (the scales rounded to it). With SCALE_AFTER_DOT (one group per
    tile) the scales are left out: the caller multiplies the tile product by them instead; 4-bit integer codes and
    e4m3 codes are then returned as ``dtype`` (:func:`int4_minus_zero`, :func:`e4m3_values`). Values are made by PTX
    with ``W_PTX`` where the functions named have a PTX path."""
    INT4: tl.constexpr = W_PACKED and (W_CODES == 0 or W_CODES == 5)  # int4 codes, as bytes or as words
    INT4_DIRECT: tl.constexpr = SCALE_AFTER_DOT and INT4 and (dtype == tl.bfloat16 or dtype == tl.float16)
    IN_DTYPE: tl.constexpr = SCALE_16 and not SCALE_AFTER_DOT  # scaled weights made in dtype
    # int4 codes made in dtype are bias + code (biased_int4_values): the bias is subtracted with the zero point.
    INT4_BIAS: tl.constexpr = (INT4_BIAS_BF16 if dtype == tl.bfloat16 else INT4_BIAS_FP16) if IN_DTYPE and INT4 else 0.0
    if INT4_DIRECT:  # decode tiles of int4 codes: one group per tile, no scales here
        if W_ZERO == 2:
            zero = tl.load(z_ptrs + (k0 // W_GROUP) * stride_bsk, mask=n_ok, other=0).to(tl.float32)
        elif W_ZERO == 1:
            zero = tl.full((BLOCK_N,), 8.0, tl.float32)
        else:
            zero = tl.zeros((BLOCK_N,), tl.float32)
        values = int4_minus_zero(biased_int4_values(raw, dtype, W_CODES, W_PTX), zero, dtype)
    elif W_CODES == 4:  # e2m1 words: stored_weight_tile made the values (times 2^-126), scaled in dtype below
        values = raw
    elif W_CODES == 3:  # e2m1 as exact dtype values, scaled in dtype below
        values = e2m1_values(raw, dtype, W_PTX)
    elif W_CODES == 1:  # e2m1 (times 2^-14)
        values = e2m1_times_2_pow_minus_14(unpacked_codes(raw)).to(tl.float32)
    elif W_CODES == 2:  # e4m3 bits: exact dtype values
        values = e4m3_values(raw, dtype, W_PTX)
        if not SCALE_AFTER_DOT and not SCALE_16:
            values = values.to(tl.float32)
    elif W_PACKED and IN_DTYPE:  # int4: bias + code, less bias + 8 here or bias + zero point below (exact)
        values = biased_int4_values(raw, dtype, W_CODES, W_PTX)
        if W_ZERO == 1:
            values = values - (INT4_BIAS + 8.0)
    elif not W_PACKED:  # 8-bit integer codes (int8: moe_core_triton.kernel.signed_bytes): exact dtype values
        values = raw.to(dtype)  # Triton's bit operations, two instructions a value (sm_90 SASS)
        if not SCALE_AFTER_DOT and not IN_DTYPE:
            values = values.to(tl.float32)
    elif W_ZERO == 2:  # 4-bit integer codes with zero points in float32 (float16 prefill), converted: int_codes_minus
        # measured slower for them on the H100 (docs/benchmarks/weight-only-h100.md)
        values = integer_codes(raw, W_PACKED).to(tl.float32)
    else:  # symmetric 4-bit integer codes, scaled in float32 next
        values = int_codes_minus(integer_codes(raw, W_PACKED), 8.0 if W_ZERO == 1 else 0.0)
    if INT4_DIRECT:
        pass
    elif GROUPS_PER_TILE == 1:  # the tile lies in one group along K
        group = k0 // W_GROUP
        if W_ZERO == 2:
            zero = tl.load(z_ptrs + group * stride_bsk, mask=n_ok, other=0).to(tl.float32) + INT4_BIAS
            values = values - zero.to(values.dtype)[:, None]
        if not SCALE_AFTER_DOT:
            values = values * group_scales(s_ptrs + group * stride_bsk, n_ok, global_scale, W_CODES, W_SCALE).to(values.dtype)[:, None]
    else:  # GROUPS_PER_TILE whole groups along K (a compiled kernel traces both branches: no early return)
        groups = k0 // W_GROUP + tl.arange(0, GROUPS_PER_TILE)
        g_ok = n_ok[:, None] & (groups[None, :] * W_GROUP < K)
        scale = group_scales(s_ptrs[:, None] + groups[None, :] * stride_bsk, g_ok, global_scale, W_CODES, W_SCALE).to(values.dtype)
        if W_ZERO == 2:
            zero = tl.load(z_ptrs[:, None] + groups[None, :] * stride_bsk, mask=g_ok, other=0).to(tl.float32) + INT4_BIAS
            values = per_group(values, zero.to(values.dtype), GROUPS_PER_TILE, W_GROUP, BLOCK_N, 0)
        values = per_group(values, scale, GROUPS_PER_TILE, W_GROUP, BLOCK_N, 1)
    return values


@triton.jit
def stored_weight_tile(ptrs, mask, dtype, k0, K, s_ptrs, z_ptrs, stride_bsk, n_ok, global_scale,
                       W_ONLY: tl.constexpr, W_PACKED: tl.constexpr, W_CODES: tl.constexpr, W_ZERO: tl.constexpr,
                       W_SCALE: tl.constexpr, W_GROUP: tl.constexpr, GROUPS_PER_TILE: tl.constexpr,
                       SCALE_AFTER_DOT: tl.constexpr, SCALE_16: tl.constexpr, W_PTX: tl.constexpr, W_PERMUTED: tl.constexpr,
                       BLOCK_K: tl.constexpr, BLOCK_N: tl.constexpr):
    """A weight tile as stored, [BLOCK_N, BLOCK_K] (K contiguous): loaded, and dequantized to ``dtype`` when W_ONLY
    (codes stored in fragment order, ``W_PERMUTED``, put back in K order first: :mod:`moe_core_triton.k_order`; e2m1
    or int4 words, ``W_CODES`` 4 or 5, made values in their stored order first, which then go back in K order)."""
    raw = tl.load(ptrs, mask=mask, other=0.0)
    if W_CODES == 4 or W_CODES == 5:
        if W_CODES == 4:
            raw = word_values(raw, W_PTX, BLOCK_N, BLOCK_K // 2)
        else:
            raw = int4_words.word_values(raw, W_PTX, BLOCK_N, BLOCK_K // 2)
        if W_PERMUTED:
            raw = codes_in_k_order(raw, False, BLOCK_N, BLOCK_K)
    elif W_PERMUTED:
        raw = codes_in_k_order(raw, W_PACKED, BLOCK_N, BLOCK_K // 2 if W_PACKED else BLOCK_K)
    if W_ONLY:
        tile = dequantize_tile(raw, k0, K, s_ptrs, z_ptrs, stride_bsk, n_ok, global_scale, dtype, W_PACKED, W_CODES, W_ZERO,
                               W_SCALE, W_GROUP, GROUPS_PER_TILE, SCALE_AFTER_DOT, SCALE_16, W_PTX, BLOCK_K, BLOCK_N).to(dtype)
    else:
        tile = raw
    return tile
