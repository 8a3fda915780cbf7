"""The grouped expert GEMM: C[row] = epilogue(A[row // row_div] @ B[expert]^T) for every row of a block table.

One kernel, specialised at compile time, serves both expert GEMMs:

* GEMM1 (``GATED``): each program accumulates the gate rows ``[n]`` and the up rows ``[I + n]`` of
  w13 for the same tokens and writes ``act(gate) * up`` (SwiGLU clamp optional) — the gather of
  token rows is fused into the A loads (``row_div = top_k`` maps a pair to its token);
* GEMM2: multiplies each row by its router weight (``MUL_ROUTED_WEIGHT``) and writes one row per
  (token, slot) pair, reduced over top-k by a separate pass; or (``ATOMIC_OUT``) adds it into a
  float32 [tokens, H] output with atomics (measured slower or equal, see docs/benchmarks).

``SWAP_AB`` (a launch-config choice, off unless a tuned data file picks it) computes the transposed
tile product, weights [BLOCK_N, BLOCK_K] @ activations [BLOCK_K, BLOCK_M], and transposes the
accumulator back before the epilogue: with few tokens per expert the weight tile fills the MMA's M
dimension instead of a mostly empty token tile. Weight tiles are then read as stored (K contiguous).
Without it the compiled code is the same as before the option existed (checked on the PTX).

``SPLIT_K`` (a launch-config choice too, standard format only; 1 unless a tuned data file picks more)
splits each tile's K loop over SPLIT_K programs (grid axis 1), for decode, where one token's few
experts give too few tiles to keep every SM streaming weights. The partial products are summed with
float32 atomics, so the last bits of a result may differ from run to run: GEMM1 adds its scaled gate
and up sums into a zeroed float32 [rows, 2N] buffer, and :func:`gated_rows_kernel` applies the gated
activation to the sums afterwards; GEMM2 runs with ``ATOMIC_OUT``. Everything the epilogue does before
the activation (scales, the routing weight) is linear, so it applies to each partial sum alike.

Quantization (``SCALES``): 0 none; 1 per-tensor or per-row activation scales times per-tensor or
per-channel weight scales, applied once after the K loop (fp8 and int8, int8 accumulating in
int32); 2 block scales (activation groups of GROUP_K, weight blocks of GROUP_N x GROUP_K) applied
inside the K loop; with ``ONE_B_SCALE`` (every tile's columns inside one weight block) each step multiplies by
one scalar weight scale rather than a column vector. fp8 products are promoted to full float32 accumulation every BLOCK_K
(``PROMOTE_EVERY``): Hopper's fp8 MMA otherwise accumulates in reduced precision for the whole K
loop, which drifted visibly at K = 7168 (DeepSeek-V3).

Weight-only schemes (``W_ONLY``, 16-bit activations): each B tile is dequantized in registers inside
the K loop — never a dequantized copy in memory — and fed to the 16-bit MMA with float32
accumulation. Codes are bytes (int8 / uint8) or, ``W_PACKED``, two 4-bit codes per byte along K
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

``GATE_UP`` (a launch-config choice for weight-only GEMM1; off unless a tuned data file picks it) loads one tile of
BLOCK_N weight rows holding BLOCK_N / 2 columns' gate rows and their up rows, in runs of :data:`GATE_UP_RUN` of each
(:func:`gate_up_rows`), into one accumulator, and splits it into gate and up after the K loop (:func:`gate_and_up`).
Two accumulators of 256 token rows do not fit the registers; one does, so each dequantized weight serves 256 rows
instead of 128 (on the H100, Mixtral-8x7B's mxfp4 GEMM1 at 4096 tokens took 3691 µs against 4724 µs with two). GEMM1
over e2m1 words (``W_CODES`` 4) always runs GATE_UP tiles, split K included: a word spans a gate row and its up row;
over int4 words (5) never: a word spans gate rows x and x + 8 (:mod:`moe_core_triton.words`).

``EVEN_K`` (K a multiple of BLOCK_K) drops the K part of every load mask.

``TABLE_M``: the BLOCK_M the block table was built with, BLOCK_M itself unless GEMM2 reads GEMM1's table with a
BLOCK_M that divides GEMM1's (:meth:`moe_core_triton.kernel.TritonKernel.shares_table`): each table block is then
TABLE_M / BLOCK_M blocks of this launch, all of one expert, and a forward builds one table instead of two. An expert's
padding ends its blocks, so a block that starts in padding is padding only, as with a table of its own.

``PAIR_TABLE`` (forwards of few pairs, :class:`moe_core_triton.blocks.PairTable`): ``table_ptr`` is the routing's
expert ids, and each program works out its block's rows itself (:func:`moe_core_triton.blocks.pairs_of_block`)
instead of reading a table built by an earlier launch; with ``GUARD`` the first program counts invalid pairs.
``SUM_PAIRS`` (GEMM2 of such a forward) adds the top-k reduction: the last program of each column tile sums the
tokens' rows into ``sum_ptr`` (:func:`moe_core_triton.reduce.sum_pairs_if_last`, counters at ``count_ptr``).

``QUANT_OUT`` (GEMM1 of a scheme whose intermediate is quantized to fp8 in groups of BLOCK_N columns,
dynamically: fp8-block's 1x128 with 128-column tiles) quantizes the intermediate in the epilogue with the rules
of :mod:`moe_core_triton.quantize`, writing the codes to ``c`` and one scale per row and tile to
``out_scale_ptr`` [rows, groups]: no separate pass reads the intermediate back, and half the bytes are written.

``QUANT_IN`` (eager forwards of few pairs of a small layer, :data:`moe_core_triton.kernel.QUANT_IN_MAX_ELEMENTS`,
of a scheme with dynamic per-token or 1 x BLOCK_K activation groups, fp8 or int8) reads 16-bit activations and
quantizes each A tile in registers with the rules of :mod:`moe_core_triton.quantize` (1: one scale per row over the
whole K, from a first pass over the tile's rows; 2: one scale per row and K step, the group being the tile): the
same codes and scales as the separate pass, which is not launched (GEMM1: the layer's input; GEMM2: the
intermediate, which GEMM1 then writes in 16 bits). Every column tile repeats the quantization of its rows: GPU time
that pays only where the pass's launch costs more host time than that.

``TMA_B`` (a launch-config choice for 8- and 16-bit weights on Hopper; off unless a tuned data file picks it)
loads each weight tile through ``b_desc``, a tensor descriptor of the weights seen as one [E * rows, K]
matrix, with the tensor memory accelerator instead of per-thread async copies: no address arithmetic or
masks in the K loop, fewer registers. A tile's rows past its expert read the next expert's rows (or
zeros past the last), whose output columns are masked; columns past K read zeros. The gathered token
rows are still loaded through pointers.
"""

from __future__ import annotations

import triton
import triton.language as tl

from moe_core_triton import int4_words
from moe_core_triton.blocks import pairs_of_block
from moe_core_triton.e2m1_words import PRODUCT_FOLD, folded_e8m0_scales, word_values
from moe_core_triton.k_order import codes_in_k_order
from moe_core_triton.quantize import FP8_QMAX, INT8_QMAX, codes, row_scales
from moe_core_triton.reduce import sum_pairs_if_last


WORDS_PRODUCT_FOLD = tl.constexpr(PRODUCT_FOLD)


@triton.jit
def gated(gate, up, limit, ACT: tl.constexpr, CLAMP: tl.constexpr):
    """act(gate) * up in float32 (ACT 0: SiLU, 1: GELU), with the SwiGLU clamp (gate <= limit, |up| <= limit) first."""
    if CLAMP:
        gate = tl.minimum(gate, limit)
        up = tl.minimum(tl.maximum(up, -limit), limit)
    if ACT == 0:
        act = gate * tl.sigmoid(gate)
    else:
        act = 0.5 * gate * (1.0 + tl.erf(gate * 0.7071067811865476))
    return act * up


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
        fold = WORDS_PRODUCT_FOLD
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
    docs/benchmarks/weight-only-h100.md, session 39). int4 codes keep that interleave (:func:`biased_int4`): for them
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


@triton.jit
def weight_tile_by_tma(b_desc, row, k0, SWAP_AB: tl.constexpr):
    """The weight tile at (``row``, ``k0``) of the [E * rows, K] descriptor: [BLOCK_N, BLOCK_K] as stored, or
    transposed to [BLOCK_K, BLOCK_N] for the unswapped product."""
    tile = b_desc.load([row, k0])
    if not SWAP_AB:
        tile = tl.trans(tile)
    return tile


@triton.jit
def tile_dot(a, b, acc, acc_dtype: tl.constexpr, PROMOTE_EVERY: tl.constexpr, SWAP_AB: tl.constexpr):
    """``acc`` (None: zeros) plus activations x weights: a [BLOCK_M, BLOCK_K] @ b [BLOCK_K, BLOCK_N], or with
    SWAP_AB the transposed product b [BLOCK_N, BLOCK_K] @ a [BLOCK_K, BLOCK_M] (weights as the MMA's first
    operand, tokens as its N: few tokens fill less of the MMA's M)."""
    if SWAP_AB:
        out = tl.dot(b, a, acc, out_dtype=acc_dtype, max_num_imprecise_acc=PROMOTE_EVERY)
    else:
        out = tl.dot(a, b, acc, out_dtype=acc_dtype, max_num_imprecise_acc=PROMOTE_EVERY)
    return out


@triton.jit
def weight_block_scales(ptrs, n_ok, ONE_B_SCALE: tl.constexpr):
    """One K step's weight block scales: one per column of the tile, or with ONE_B_SCALE the single scale
    of the weight block that holds every column of the tile (``ptrs`` then one pointer)."""
    if ONE_B_SCALE:
        b_s = tl.load(ptrs)
    else:
        b_s = tl.load(ptrs, mask=n_ok, other=0.0)
    return b_s


@triton.jit
def scaled(product, a_s, b_s, SWAP_AB: tl.constexpr, ONE_B_SCALE: tl.constexpr):
    """A tile product times its activation scales (one per token row) and weight scales (one per column, or
    one for the tile with ONE_B_SCALE: then a single multiply per element, which the accumulation fuses)."""
    token_scales = a_s * b_s if ONE_B_SCALE else a_s  # the tile's one weight scale folds into the token scales
    if SWAP_AB:
        out = product * token_scales[None, :]
    else:
        out = product * token_scales[:, None]
    if not ONE_B_SCALE:
        out = times_column_scales(out, b_s, SWAP_AB)
    return out


@triton.jit
def times_column_scales(product, b_s, SWAP_AB: tl.constexpr):
    """A tile product times one weight scale per output column (``b_s`` [BLOCK_N])."""
    if SWAP_AB:
        out = product * b_s[:, None]
    else:
        out = product * b_s[None, :]
    return out


@triton.jit
def activation_qmax(INT8: tl.constexpr):
    """The largest code of the activations a QUANT_IN GEMM quantizes: 127 (int8) or 448 (fp8 e4m3)."""
    if INT8:
        qmax = INT8_QMAX
    else:
        qmax = FP8_QMAX
    return qmax


@triton.jit
def tile_row_amax(a, SWAP_AB: tl.constexpr):
    """max |a| of each token row of a 16-bit activation tile ([BLOCK_M, BLOCK_K], or [BLOCK_K, BLOCK_M] with
    SWAP_AB), in float32."""
    if SWAP_AB:
        amax = tl.max(tl.abs(a.to(tl.float32)), axis=0)
    else:
        amax = tl.max(tl.abs(a.to(tl.float32)), axis=1)
    return amax


@triton.jit
def k_step_mask(offs_k, K, k, BLOCK_K: tl.constexpr, EVEN_K: tl.constexpr):
    """Which of K step ``k``'s BLOCK_K columns lie inside K: all of them with EVEN_K (no mask along K, so the copies
    of a row's bytes vectorize)."""
    if EVEN_K:
        k_ok = tl.full((BLOCK_K,), True, tl.int1)
    else:
        k_ok = offs_k < K - k * BLOCK_K
    return k_ok


@triton.jit
def activation_tile(ptrs, offset, row_ok, k_ok, SWAP_AB: tl.constexpr):
    """One K step's activation tile at ``ptrs + offset``, [BLOCK_M, BLOCK_K] (or [BLOCK_K, BLOCK_M] with SWAP_AB),
    zeros outside the valid rows and K."""
    if SWAP_AB:
        a = tl.load(ptrs + offset, mask=k_ok[:, None] & row_ok[None, :], other=0.0)
    else:
        a = tl.load(ptrs + offset, mask=row_ok[:, None] & k_ok[None, :], other=0.0)
    return a


@triton.jit
def input_row_amax(a_ptrs, row_ok, offs_k, K, stride_ak, k_tiles, SWAP_AB: tl.constexpr, EVEN_K: tl.constexpr,
                   BLOCK_M: tl.constexpr, BLOCK_K: tl.constexpr):
    """max |a| of each token row over the whole K (QUANT_IN 1: per-token scales), one pass over the rows' tiles."""
    amax = tl.zeros((BLOCK_M,), dtype=tl.float32)
    for k in range(0, k_tiles):
        k_ok = k_step_mask(offs_k, K, k, BLOCK_K, EVEN_K)
        a = activation_tile(a_ptrs, k * BLOCK_K * stride_ak, row_ok, k_ok, SWAP_AB)
        amax = tl.maximum(amax, tile_row_amax(a, SWAP_AB))
    return amax


@triton.jit
def quantized_tile(a, scale, qmax, code_dtype, INT8: tl.constexpr, ROUND_FP8: tl.constexpr, SWAP_AB: tl.constexpr):
    """A 16-bit activation tile as codes of ``code_dtype``, one ``scale`` per token row (as quantize.py's pass)."""
    divisor = tl.maximum(scale, 1e-12)
    if SWAP_AB:
        y = a.to(tl.float32) / divisor[None, :]
    else:
        y = a.to(tl.float32) / divisor[:, None]
    return codes(y, qmax, INT8, ROUND_FP8).to(code_dtype)


#: Rows of each run of gate rows, then of up rows, in a GATE_UP tile: the MMA's accumulator gives a thread rows r and
#: r + 8 of every 16 (and columns c and c + 8 of every 16 unswapped), so a gate row and its up row meet in one thread.
GATE_UP_RUN = tl.constexpr(8)


@triton.jit
def gate_up_rows(first_col, N, up_offset, BLOCK_N: tl.constexpr):
    """The weight rows of a GATE_UP tile for output columns [first_col, first_col + BLOCK_N / 2): runs of
    :data:`GATE_UP_RUN` gate rows and the same columns' up rows (``up_offset`` further) alternating, and which of
    them lie inside N."""
    r = tl.arange(0, BLOCK_N)
    col = first_col + (r // (2 * GATE_UP_RUN)) * GATE_UP_RUN + r % GATE_UP_RUN
    return col + ((r // GATE_UP_RUN) % 2) * up_offset, col < N


@triton.jit
def gate_and_up(acc, BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr):
    """A GATE_UP tile's product [BLOCK_M, BLOCK_N] (rows as :func:`gate_up_rows` orders them) as its gate and up
    products, [BLOCK_M, BLOCK_N / 2] each, in column order."""
    runs = tl.reshape(acc, (BLOCK_M, BLOCK_N // (2 * GATE_UP_RUN), 2, GATE_UP_RUN))
    gate, up = tl.split(tl.permute(runs, (0, 1, 3, 2)))
    return tl.reshape(gate, (BLOCK_M, BLOCK_N // 2)), tl.reshape(up, (BLOCK_M, BLOCK_N // 2))


@triton.jit
def moe_gemm_kernel(
    a_ptr, b_ptr, c_ptr, a_scale_ptr, b_scale_ptr, weights_ptr, b_zero_ptr, b_global_ptr, b_desc, out_scale_ptr, sum_ptr, count_ptr,
    table_ptr, map_ptr, err_ptr, num_valid, capacity, num_experts, num_local,
    N, K, row_div, c_row_div, up_offset, limit,
    stride_am, stride_ak, stride_be, stride_bn, stride_bk, stride_cm, stride_cn,
    stride_asm, stride_ask, stride_bse, stride_bsn, stride_bsk, stride_osm, stride_sm,
    GATED: tl.constexpr, ACT: tl.constexpr, CLAMP: tl.constexpr, MUL_ROUTED_WEIGHT: tl.constexpr, ATOMIC_OUT: tl.constexpr,
    SCALES: tl.constexpr, A_PER_ROW: tl.constexpr, B_PER_COL: tl.constexpr, INT8: tl.constexpr,
    GROUP_N: tl.constexpr, GROUP_K: tl.constexpr, ONE_B_SCALE: tl.constexpr, PROMOTE_EVERY: tl.constexpr,
    W_ONLY: tl.constexpr, W_PACKED: tl.constexpr, W_CODES: tl.constexpr, W_ZERO: tl.constexpr, W_SCALE: tl.constexpr,
    W_GLOBAL: tl.constexpr, W_GROUP: tl.constexpr, W_GROUP_N: tl.constexpr, GROUPS_PER_TILE: tl.constexpr,
    SCALE_AFTER_DOT: tl.constexpr, SCALE_16: tl.constexpr, W_PTX: tl.constexpr, W_PERMUTED: tl.constexpr,
    BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr, GROUP_M: tl.constexpr, SWAP_AB: tl.constexpr,
    SPLIT_K: tl.constexpr, EVEN_K: tl.constexpr, TMA_B: tl.constexpr, QUANT_OUT: tl.constexpr, QUANT_IN: tl.constexpr,
    ROUND_FP8: tl.constexpr, GATE_UP: tl.constexpr,
    PAIR_TABLE: tl.constexpr, HAS_MAP: tl.constexpr, GUARD: tl.constexpr, P_P2: tl.constexpr, E_P2: tl.constexpr,
    SUM_PAIRS: tl.constexpr, TOP_K: tl.constexpr, K_P2: tl.constexpr, SUM_T: tl.constexpr, TABLE_M: tl.constexpr,
):
    sorted_ids_ptr = table_ptr  # the block table's layout: see moe_core_triton.blocks
    block_expert_ptr = table_ptr + capacity
    num_padded_ptr = block_expert_ptr + capacity // TABLE_M
    pid = tl.program_id(0)
    num_pid_m = tl.cdiv(capacity, BLOCK_M)
    COLS: tl.constexpr = BLOCK_N // 2 if GATE_UP else BLOCK_N  # output columns per tile
    num_pid_n = tl.cdiv(N, COLS)
    in_group = GROUP_M * num_pid_n
    first_m = (pid // in_group) * GROUP_M
    size_m = min(num_pid_m - first_m, GROUP_M)
    pid_m = first_m + ((pid % in_group) % size_m)
    pid_n = (pid % in_group) // size_m
    if PAIR_TABLE:
        first_program = (pid == 0) & (tl.program_id(1) == 0)
        ids, expert, live = pairs_of_block(table_ptr, map_ptr, err_ptr, pid_m, num_valid, num_experts, num_local, first_program,
                                           HAS_MAP, GUARD, BLOCK_M, P_P2, E_P2)
        if not live:
            if SUM_PAIRS:
                sum_pairs_if_last(c_ptr, table_ptr, map_ptr, sum_ptr, count_ptr, pid_n, num_pid_m, num_valid // TOP_K, num_experts,
                                  num_local, N, stride_cm, stride_sm, TOP_K, K_P2, HAS_MAP, BLOCK_N, SUM_T)
            return
    else:
        if pid_m * BLOCK_M >= tl.load(num_padded_ptr):
            return
        if tl.load(sorted_ids_ptr + pid_m * BLOCK_M) >= num_valid:  # a block of padding only
            return
        ids = tl.load(sorted_ids_ptr + pid_m * BLOCK_M + tl.arange(0, BLOCK_M)).to(tl.int64)
        expert = tl.load(block_expert_ptr + pid_m * BLOCK_M // TABLE_M).to(tl.int64)
    row_ok = ids < num_valid
    a_rows = ids // row_div
    offs_n = pid_n * COLS + tl.arange(0, COLS)  # output columns
    n_ok = offs_n < N
    if GATE_UP:  # one tile of gate and up rows, one accumulator
        w_rows, w_ok = gate_up_rows(pid_n * COLS, N, up_offset, BLOCK_N)
    else:
        w_rows, w_ok = offs_n, n_ok
    offs_k = tl.arange(0, BLOCK_K)

    if SWAP_AB:  # activation tiles [BLOCK_K, BLOCK_M]
        a_ptrs = a_ptr + a_rows[None, :] * stride_am + offs_k[:, None] * stride_ak
    else:
        a_ptrs = a_ptr + a_rows[:, None] * stride_am + offs_k[None, :] * stride_ak
    STORED: tl.constexpr = W_ONLY or SWAP_AB  # weight tiles read as stored, [BLOCK_N, bytes along K]
    BYTES_K: tl.constexpr = BLOCK_K // 2 if W_PACKED else BLOCK_K
    offs_byte = tl.arange(0, BYTES_K)
    if TMA_B:  # the tile's first row in the [E * rows, K] view of the weights (contiguous: stride_bn = K)
        b_row = (expert * (stride_be // stride_bn) + pid_n * BLOCK_N).to(tl.int32)
    if STORED:
        b_ptrs = b_ptr + expert * stride_be + w_rows[:, None] * stride_bn + offs_byte[None, :] * stride_bk
    else:
        b_ptrs = b_ptr + expert * stride_be + offs_n[None, :] * stride_bn + offs_k[:, None] * stride_bk
    # Weight-only: scale (and zero-point) rows of the gate / plain rows and of the up rows (unused otherwise).
    w_s_ptrs = b_scale_ptr + expert * stride_bse + (w_rows // W_GROUP_N) * stride_bsn
    w_z_ptrs = b_zero_ptr + expert * stride_bse + (w_rows // W_GROUP_N) * stride_bsn
    w_s_up_ptrs = b_scale_ptr + expert * stride_bse + ((offs_n + up_offset) // W_GROUP_N) * stride_bsn
    w_z_up_ptrs = b_zero_ptr + expert * stride_bse + ((offs_n + up_offset) // W_GROUP_N) * stride_bsn
    global_scale = 1.0  # folded into the weight scales, except for e2m1 values scaled in 16 bits (W_CODES 3 and 4): after the K loop
    if W_GLOBAL and W_CODES < 3:
        global_scale = tl.load(b_global_ptr + expert)
    acc_dtype: tl.constexpr = tl.int32 if INT8 else tl.float32
    if SWAP_AB:  # accumulated transposed, [BLOCK_N, BLOCK_M], and transposed back after the K loop
        acc = tl.zeros((BLOCK_N, BLOCK_M), dtype=acc_dtype)
        acc_up = tl.zeros((BLOCK_N, BLOCK_M), dtype=acc_dtype)
    else:
        acc = tl.zeros((BLOCK_M, BLOCK_N), dtype=acc_dtype)
        acc_up = tl.zeros((BLOCK_M, BLOCK_N), dtype=acc_dtype)
    if SCALES == 2:
        a_s_ptrs = a_scale_ptr + a_rows * stride_asm
        if ONE_B_SCALE:  # the tile's columns, and its up rows', lie in one weight block each
            b_s_ptrs = b_scale_ptr + expert * stride_bse + (pid_n * BLOCK_N // GROUP_N) * stride_bsn
            b_s_up_ptrs = b_s_ptrs + (up_offset // GROUP_N) * stride_bsn
        else:
            b_s_ptrs = b_scale_ptr + expert * stride_bse + (offs_n // GROUP_N) * stride_bsn
            b_s_up_ptrs = b_scale_ptr + expert * stride_bse + ((offs_n + up_offset) // GROUP_N) * stride_bsn

    k_tiles = tl.cdiv(K, BLOCK_K)
    if QUANT_IN != 0:
        qmax = activation_qmax(INT8)
    if QUANT_IN == 1:  # per-token scales: the rows' amax over the whole K first (before any split-K offset)
        a_row_scale = tl.maximum(input_row_amax(a_ptrs, row_ok, offs_k, K, stride_ak, k_tiles, SWAP_AB, EVEN_K, BLOCK_M, BLOCK_K),
                                 1e-12) / qmax
    if SPLIT_K > 1:  # this program's share of the K tiles: [first, last), empty for trailing splits of a short K
        per_split = tl.cdiv(k_tiles, SPLIT_K)
        first = tl.program_id(1) * per_split
        last = tl.minimum(first + per_split, k_tiles)
        a_ptrs += first * BLOCK_K * stride_ak
        b_ptrs += first * BYTES_K * stride_bk
    else:
        first = 0
        last = k_tiles
    for k in range(first, last):
        k_ok = k_step_mask(offs_k, K, k, BLOCK_K, EVEN_K)
        if EVEN_K:  # every K tile is whole
            byte_ok = tl.full((BYTES_K,), True, tl.int1)
        else:
            byte_ok = offs_byte < (K - k * BLOCK_K) // (2 if W_PACKED else 1)  # packed: K is even
        a = activation_tile(a_ptrs, 0, row_ok, k_ok, SWAP_AB)
        if QUANT_IN == 1:
            a = quantized_tile(a, a_row_scale, qmax, b_ptr.dtype.element_ty, INT8, ROUND_FP8, SWAP_AB)
        elif QUANT_IN == 2:  # the tile's BLOCK_K columns are one group of each row
            a_group_scale = tl.maximum(tile_row_amax(a, SWAP_AB), 1e-12) / qmax
            a = quantized_tile(a, a_group_scale, qmax, b_ptr.dtype.element_ty, INT8, ROUND_FP8, SWAP_AB)
        if TMA_B:
            b = weight_tile_by_tma(b_desc, b_row, k * BLOCK_K, SWAP_AB)
            if GATED:
                b_up = weight_tile_by_tma(b_desc, b_row + up_offset, k * BLOCK_K, SWAP_AB)
        elif STORED:
            b_ok = w_ok[:, None] & byte_ok[None, :]
            b = stored_weight_tile(b_ptrs, b_ok, a.dtype, k * BLOCK_K, K, w_s_ptrs, w_z_ptrs, stride_bsk, w_ok, global_scale,
                                   W_ONLY, W_PACKED, W_CODES, W_ZERO, W_SCALE, W_GROUP, GROUPS_PER_TILE, SCALE_AFTER_DOT,
                                   SCALE_16, W_PTX, W_PERMUTED, BLOCK_K, BLOCK_N)
            if not SWAP_AB:
                b = tl.trans(b)
            if GATED and not GATE_UP:
                b_up = stored_weight_tile(b_ptrs + up_offset * stride_bn, b_ok, a.dtype, k * BLOCK_K, K, w_s_up_ptrs, w_z_up_ptrs,
                                          stride_bsk, n_ok, global_scale, W_ONLY, W_PACKED, W_CODES, W_ZERO, W_SCALE, W_GROUP,
                                          GROUPS_PER_TILE, SCALE_AFTER_DOT, SCALE_16, W_PTX, W_PERMUTED, BLOCK_K, BLOCK_N)
                if not SWAP_AB:
                    b_up = tl.trans(b_up)
        else:
            b = tl.load(b_ptrs, mask=k_ok[:, None] & n_ok[None, :], other=0.0)
            if GATED:
                b_up = tl.load(b_ptrs + up_offset * stride_bn, mask=k_ok[:, None] & n_ok[None, :], other=0.0)
        if SCALES == 2:
            group = (k * BLOCK_K) // GROUP_K
            if QUANT_IN == 2:
                a_s = a_group_scale
            else:
                a_s = tl.load(a_s_ptrs + group * stride_ask, mask=row_ok, other=0.0)
            b_s = weight_block_scales(b_s_ptrs + group * stride_bsk, n_ok, ONE_B_SCALE)
            acc += scaled(tile_dot(a, b, None, acc_dtype, PROMOTE_EVERY, SWAP_AB), a_s, b_s, SWAP_AB, ONE_B_SCALE)
            if GATED:
                b_s_up = weight_block_scales(b_s_up_ptrs + group * stride_bsk, n_ok, ONE_B_SCALE)
                acc_up += scaled(tile_dot(a, b_up, None, acc_dtype, PROMOTE_EVERY, SWAP_AB), a_s, b_s_up, SWAP_AB, ONE_B_SCALE)
        elif SCALE_AFTER_DOT:  # weight-only, one scale group per tile: the product of unscaled codes, then its scales
            group = (k * BLOCK_K) // W_GROUP
            w_s = group_scales(w_s_ptrs + group * stride_bsk, w_ok, global_scale, W_CODES, W_SCALE)
            acc += times_column_scales(tile_dot(a, b, None, acc_dtype, PROMOTE_EVERY, SWAP_AB), w_s, SWAP_AB)
            if GATED and not GATE_UP:
                w_s_up = group_scales(w_s_up_ptrs + group * stride_bsk, n_ok, global_scale, W_CODES, W_SCALE)
                acc_up += times_column_scales(tile_dot(a, b_up, None, acc_dtype, PROMOTE_EVERY, SWAP_AB), w_s_up, SWAP_AB)
        else:
            acc = tile_dot(a, b, acc, acc_dtype, PROMOTE_EVERY, SWAP_AB)
            if GATED and not GATE_UP:
                acc_up = tile_dot(a, b_up, acc_up, acc_dtype, PROMOTE_EVERY, SWAP_AB)
        a_ptrs += BLOCK_K * stride_ak
        b_ptrs += BYTES_K * stride_bk

    if SWAP_AB:
        acc = tl.trans(acc)
        acc_up = tl.trans(acc_up)
    out = acc.to(tl.float32)
    out_up = acc_up.to(tl.float32)
    if GATE_UP:
        out, out_up = gate_and_up(out, BLOCK_M, BLOCK_N)
    if W_CODES == 4 or (W_GLOBAL and W_CODES == 3):  # the global scale, and the fold of e2m1 words
        expert_scale = product_fold(W_CODES)
        if W_GLOBAL:
            expert_scale = expert_scale * tl.load(b_global_ptr + expert)
        out = out * expert_scale
        out_up = out_up * expert_scale
    if SCALES == 1:
        if QUANT_IN == 1:
            a_s = a_row_scale[:, None]
        elif A_PER_ROW:
            a_s = tl.load(a_scale_ptr + a_rows * stride_asm, mask=row_ok, other=0.0)[:, None]
        else:
            a_s = tl.load(a_scale_ptr)
        if B_PER_COL:
            b_s = tl.load(b_scale_ptr + expert * stride_bse + offs_n * stride_bsn, mask=n_ok, other=0.0)[None, :]
        else:
            b_s = tl.load(b_scale_ptr + expert * stride_bse)
        out = out * a_s * b_s
        if GATED:
            if B_PER_COL:
                b_s_up = tl.load(b_scale_ptr + expert * stride_bse + (offs_n + up_offset) * stride_bsn, mask=n_ok, other=0.0)[None, :]
                out_up = out_up * a_s * b_s_up
            else:
                out_up = out_up * a_s * b_s
    if GATED and SPLIT_K > 1:  # partial sums: gate columns [0, N), up columns [N, 2N); gated_rows_kernel follows
        partial_ptrs = c_ptr + ids[:, None] * stride_cm + offs_n[None, :] * stride_cn
        tl.atomic_add(partial_ptrs, out, mask=row_ok[:, None] & n_ok[None, :], sem="relaxed")
        tl.atomic_add(partial_ptrs + N * stride_cn, out_up, mask=row_ok[:, None] & n_ok[None, :], sem="relaxed")
    else:
        if GATED:
            out = gated(out, out_up, limit, ACT, CLAMP)
        if QUANT_OUT:  # the intermediate written quantized: the tile's BLOCK_N columns are one scale group of each row
            out = tl.where(n_ok[None, :], out, 0.0)  # columns past N (with TMA_B: the next expert's rows) are not in it
            out_scale = row_scales(out, FP8_QMAX)
            tl.store(out_scale_ptr + ids * stride_osm + pid_n, out_scale, mask=row_ok)
            out = codes(out / tl.maximum(out_scale, 1e-12)[:, None], FP8_QMAX, False, ROUND_FP8)
        if MUL_ROUTED_WEIGHT:
            w = tl.load(weights_ptr + ids, mask=row_ok, other=0.0).to(tl.float32)
            out = out * w[:, None]
        c_ptrs = c_ptr + (ids // c_row_div)[:, None] * stride_cm + offs_n[None, :] * stride_cn
        if ATOMIC_OUT:  # GEMM2 summing the top-k rows of each token (and split-K partials) into a float32 output
            tl.atomic_add(c_ptrs, out, mask=row_ok[:, None] & n_ok[None, :], sem="relaxed")
        else:
            tl.store(c_ptrs, out.to(c_ptr.dtype.element_ty), mask=row_ok[:, None] & n_ok[None, :])
            if SUM_PAIRS:
                sum_pairs_if_last(c_ptr, table_ptr, map_ptr, sum_ptr, count_ptr, pid_n, num_pid_m, num_valid // TOP_K, num_experts,
                                  num_local, N, stride_cm, stride_sm, TOP_K, K_P2, HAS_MAP, BLOCK_N, SUM_T)


@triton.jit
def gated_rows_kernel(partial_ptr, out_ptr, N, limit, stride_pm, stride_om,
                      ACT: tl.constexpr, CLAMP: tl.constexpr, BLOCK_N: tl.constexpr):
    """out[row] = act(gate) * up from a split-K GEMM1's float32 sums [rows, 2N] (gate, then up); rows no
    block wrote (dropped pairs) hold zeros and give zeros."""
    row = tl.program_id(0).to(tl.int64)
    cols = tl.program_id(1) * BLOCK_N + tl.arange(0, BLOCK_N)
    ok = cols < N
    gate = tl.load(partial_ptr + row * stride_pm + cols, mask=ok, other=0.0)
    up = tl.load(partial_ptr + row * stride_pm + N + cols, mask=ok, other=0.0)
    out = gated(gate, up, limit, ACT, CLAMP)
    tl.store(out_ptr + row * stride_om + cols, out.to(out_ptr.dtype.element_ty), mask=ok)
