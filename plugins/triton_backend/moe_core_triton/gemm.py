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
accumulation (:mod:`moe_core_triton.dequantize`, which says what the ``W_*`` constexprs and ``SCALE_AFTER_DOT`` and
``SCALE_16`` mean).

``GATE_UP`` (a launch-config choice for weight-only GEMM1; off unless a tuned data file picks it) loads one tile of
BLOCK_N weight rows holding BLOCK_N / 2 columns' gate rows and their up rows, in runs of :data:`GATE_UP_RUN` of each
(:func:`gate_up_rows`), into one accumulator, and splits it into gate and up after the K loop (:func:`gate_and_up`).
Two accumulators of 256 token rows do not fit the registers; one does, so each dequantized weight serves 256 rows
instead of 128 (on the H100, Mixtral-8x7B's mxfp4 GEMM1 at 4096 tokens took 3691 µs against 4724 µs with two). GEMM1
over e2m1 words (``W_CODES`` 4) always runs GATE_UP tiles, split K included: a word spans a gate row and its up row;
over int4 words (5) never: a word spans gate rows x and x + 8 (:mod:`moe_core_triton.words`).

``EVEN_K`` (K a multiple of BLOCK_K) drops the K part of every load mask.

``UNROLL``: K steps per iteration of the K loop (:meth:`moe_core_triton.kernel.TritonKernel.k_steps`), 1 unless a
weight-only decode tile's K step of several scale groups runs as one step a group (the launch config's
``GROUP_STEPS``): the software pipeline then keeps the bytes of UNROLL steps a stage in flight, as the wider step did,
and each group's product is scaled (``SCALE_AFTER_DOT``) instead of every weight.

``MMA_IN_FLIGHT`` (a launch-config choice; off unless a tuned data file picks it): the K loop is compiled with no
path around it (its trip count taken as at least one; a split-K program with no K steps returns first). Else the path
that skips the loop sets the accumulators between a wgmma and its wait, and where the compiler lays it out so, ptxas
serializes every wgmma of the kernel, each waiting for the one before (its message C7515). On the H100 (Triton 3.6,
ptxas 12.8) that was so in 10 of the 33 GEMMs that the w4a16, nvfp4 and mxfp4 layers of Qwen3-30B-A3B and
Mixtral-8x7B compile at 1 to 64 tokens, and in none with MMA_IN_FLIGHT. Whether waiting costs depends on the tile: with
it on, the 8-bit weight-only layers at 4096 tokens measured 0.3 to 4.8% faster and some fp4 decode layers 1.3 to 7.6%,
while other decode layers lost up to 10%, bf16 prefill 1 to 5% and fp8-block prefill 28 to 35%, whose registers the
MMAs in flight crowd (docs/benchmarks/weight-only-h100.md, 2026-11-27).

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

from moe_core_triton.blocks import pairs_of_block
from moe_core_triton.dequantize import group_scales, product_fold, stored_weight_tile
from moe_core_triton.quantize import FP8_QMAX, INT8_QMAX, codes, row_scales
from moe_core_triton.reduce import sum_pairs_if_last


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
    SPLIT_K: tl.constexpr, UNROLL: tl.constexpr, MMA_IN_FLIGHT: tl.constexpr, EVEN_K: tl.constexpr, TMA_B: tl.constexpr,
    QUANT_OUT: tl.constexpr, QUANT_IN: tl.constexpr,
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
        if MMA_IN_FLIGHT and first >= last:  # no K steps: nothing to add to the split-K sums
            return
        a_ptrs += first * BLOCK_K * stride_ak
        b_ptrs += first * BYTES_K * stride_bk
    else:
        first = 0
        last = tl.maximum(k_tiles, 1) if MMA_IN_FLIGHT else k_tiles  # K >= 1: the same steps, and no path around the loop
    for k in tl.range(first, last, loop_unroll_factor=UNROLL):
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
