"""The whole layer in one warp-specialized launch for decode on sm_90, written in Gluon (triton 3.6).

The one-launch layer of :mod:`moe_core_triton.fused` splits the work the same way, but each program's warps both load
and multiply, so a program's loads wait for its own MMAs, and each program ramps its loads up from nothing. Here a
persistent grid (at most one program per SM) walks work items, each one block of pairs of one expert (below) and
``TILE_SIZE`` (64) columns of the intermediate. Each program is two partitions that share a ring of ``STAGES``
shared-memory slots, each slot two 64 x 64 weight tiles, guarded by ``ready`` and ``empty`` mbarriers:

* the producer, one warp with few registers, streams each item's weights by TMA: first the gate and up rows of its
  columns along the hidden size (GEMM1), then the ``w2`` columns of the same intermediate columns (GEMM2), then the
  next item's, so GEMM2's first tiles are in flight while GEMM1 finishes, and the next item's while GEMM2 finishes;
* the consumer, one warpgroup, gathers the block's token rows of ``x`` into shared memory, runs GEMM1 with wgmma
  (weights as the MMA's first operand, the tokens as its N: the transposed product, as the ``triton`` backend's small
  tiles do), SiLU(gate) * up rounded to the activations' dtype into shared memory, then GEMM2 restricted to those
  columns; each pair's ``[H]`` partial row times its router weight is added into the float32 sums per token with
  atomics (the top-k sum), as in fused.py (the float32 atomics make the last bits vary from run to run, as there).

After a grid barrier (the launch is cooperative: at most one program per SM), every program casts its share of the sums
into the output and leaves them at zero for the next launch: fused.py's last program casts them all, which costs one
program's serial loop over tokens x H sums, nothing at one token but a long tail at 64.

A forward of one token takes one block per pair (its top-k experts are distinct), worked out from the routing in the
kernel, invalid ids counted by program 0: one launch in all. Longer forwards take the blocks of a
:func:`~moe_core_triton.blocks.standard_table` (one table launch before the layer's). Tiles, and the layers it takes:
:mod:`moe_core_triton.ws_plan`.
"""

from __future__ import annotations

import functools

import torch
from triton.experimental import gluon
from triton.experimental.gluon import language as gl
from triton.experimental.gluon.language.nvidia.hopper import async_copy, fence_async_shared, mbarrier, tma, warpgroup_mma, warpgroup_mma_wait
from triton.experimental.gluon.nvidia.hopper import TensorDescriptor

from moe_core_triton.blocks import (FUSED_SUMS, GRID_BARRIER, BlockTable, PairTable, cdiv, grid_barrier, max_programs, next_power_of_2,
                                   record_invalid, stream_words)
from moe_core_triton.launch import Launcher
from moe_core_triton.ws_plan import TILE_SIZE, DecodePlan

#: Warps of the consumer partition (the kernel's num_warps: one warpgroup) and of the producer partition.
CONSUMER_WARPS = 4
PRODUCER_WARPS = gl.constexpr(1)
#: Registers the producer keeps per thread (setmaxnreg); the consumer gets the rest of the register file.
PRODUCER_REGISTERS = gl.constexpr(40)
#: Sums a program casts per step: 4 per thread over the consumer warpgroup.
CAST_BLOCK = gl.constexpr(4 * 32 * CONSUMER_WARPS)


@gluon.jit
def _fill(desc, first_row, second_row, col, ring, ready, empty, i, STAGES: gl.constexpr):
    """Ring step ``i`` (counted over the program's whole run): wait for its slot to be free, then load the tiles of
    ``desc`` at (``first_row``, ``col``) and (``second_row``, ``col``) into it, signalled on its ``ready`` barrier."""
    s = i % STAGES
    mbarrier.wait(empty.index(s), ((i // STAGES) & 1) ^ 1)  # a fresh barrier's previous phase counts as done
    mbarrier.expect(ready.index(s), 2 * desc.block_type.nbytes)
    tma.async_copy_global_to_shared(desc, [first_row, col], ready.index(s), ring.index(2 * s))
    tma.async_copy_global_to_shared(desc, [second_row, col], ready.index(s), ring.index(2 * s + 1))


@gluon.jit
def _producer(w13_desc, w2_desc, rows_ptr, ring, ready, empty, capacity, num_experts, I, items, H: gl.constexpr, STAGES: gl.constexpr,
              PAIR_ITEMS: gl.constexpr):
    """For each of the program's work items, stream its expert's GEMM1 tiles (gate rows, then up rows, of its columns,
    along H) and then its GEMM2 tiles (``w2``'s rows in pairs of tiles, its columns) into the ring."""
    T: gl.constexpr = w13_desc.block_type.shape[0]
    K_STEPS: gl.constexpr = H // T
    STEPS: gl.constexpr = K_STEPS + H // (2 * T)
    columns = I // T
    pid = gl.program_id(0)
    for item in range(pid, items, gl.num_programs(0)):
        base = (item - pid) // gl.num_programs(0) * STEPS
        expert = _block_expert(rows_ptr, item // columns, capacity, num_experts, PAIR_ITEMS)
        col = item % columns * T
        gate_row = expert * 2 * I + col
        for k in range(K_STEPS):
            _fill(w13_desc, gate_row, gate_row + I, k * T, ring, ready, empty, base + k, STAGES)
        for j in range(H // (2 * T)):
            w2_row = expert * H + 2 * j * T
            _fill(w2_desc, w2_row, w2_row + T, col, ring, ready, empty, base + K_STEPS + j, STAGES)


@gluon.jit
def _work_items(rows_ptr, pairs, capacity, columns, BLOCK_M: gl.constexpr, PAIR_ITEMS: gl.constexpr):
    """The launch's work items: its blocks in use (a block table's padded rows / BLOCK_M, or one block per pair with
    PAIR_ITEMS) times the ``columns`` column tiles of the intermediate."""
    if PAIR_ITEMS:
        blocks = pairs
    else:
        blocks = gl.load(rows_ptr + capacity + capacity // BLOCK_M) // BLOCK_M
    return blocks * columns


@gluon.jit
def _block_expert(rows_ptr, block, capacity, num_experts, PAIR_ITEMS: gl.constexpr):
    """The local expert of block ``block``: the block table's, or with PAIR_ITEMS the pair's (``rows_ptr``: the
    routing's flat ids), 0 for an invalid id, whose row :func:`_block_rows` drops."""
    if PAIR_ITEMS:
        raw = gl.load(rows_ptr + block)
        expert = gl.where((raw >= 0) & (raw < num_experts), raw, 0).to(gl.int32)
    else:
        expert = gl.load(rows_ptr + capacity + block)
    return expert


@gluon.jit
def _block_rows(rows_ptr, block, pairs, num_experts, layout: gl.constexpr, BLOCK_M: gl.constexpr, PAIR_ITEMS: gl.constexpr):
    """The pair id of each of block ``block``'s BLOCK_M rows in ``layout`` (``pairs``: no pair). With PAIR_ITEMS, the
    block's pair in row 0 when its id is valid."""
    rows = gl.arange(0, BLOCK_M, layout=layout)
    if PAIR_ITEMS:
        raw = gl.load(rows_ptr + block)
        ids = gl.where((rows == 0) & (raw >= 0) & (raw < num_experts), block, pairs)
    else:
        ids = gl.load(rows_ptr + block * BLOCK_M + rows)
    return ids


@gluon.jit
def _record_invalid(ids_ptr, err_ptr, pairs, num_experts, P_P2: gl.constexpr):
    """Count the routing's ids outside [0, num_experts), and the range of their values, in the int64 [count, smallest,
    largest] counter, by :func:`~moe_core_triton.blocks.record_invalid`, as the block table's launch does for the other
    forwards (a Gluon kernel calls a ``@triton.jit`` function whose tensors all come from its arguments)."""
    layout: gl.constexpr = gl.BlockedLayout([1], [32], [gl.num_warps()], [0])
    offs = gl.arange(0, P_P2, layout=layout)
    ok = offs < pairs
    raw = gl.load(ids_ptr + offs, mask=ok, other=0).to(gl.int64)
    record_invalid(err_ptr, ok & ((raw < 0) | (raw >= num_experts)), raw)


@gluon.jit
def _gather_rows(x_ptr, rows_ptr, x_smem, block, pairs, num_experts, stride_xm,
                 H: gl.constexpr, TOP_K: gl.constexpr, BLOCK_M: gl.constexpr, T: gl.constexpr, PAIR_ITEMS: gl.constexpr):
    """Block ``block``'s token rows of ``x`` [BLOCK_M, H] into ``x_smem`` [H / T, BLOCK_M, T] (padding rows: zeros), 16
    bytes per thread and copy."""
    layout: gl.constexpr = gl.BlockedLayout([1, 8], [4, 8], [gl.num_warps(), 1], [1, 0])
    ids = _block_rows(rows_ptr, block, pairs, num_experts, gl.SliceLayout(1, layout), BLOCK_M, PAIR_ITEMS)
    ok = ids < pairs
    token = (ids // TOP_K).to(gl.int64)
    offs_k = gl.arange(0, T, layout=gl.SliceLayout(0, layout))
    ptrs = x_ptr + token[:, None] * stride_xm + offs_k[None, :]
    mask = ok[:, None] & (offs_k[None, :] < T)
    for k in range(H // T):  # every chunk in flight at once (cp.async), then one wait
        async_copy.async_copy_global_to_shared(x_smem.index(k), ptrs + k * T, mask=mask)
    async_copy.commit_group()
    async_copy.wait_group(0)
    fence_async_shared()  # the wgmma reads these rows through the async proxy


@gluon.jit
def _consumer(x_ptr, weights_ptr, rows_ptr, err_ptr, sums_ptr, ring, ready, empty, x_smem, inter_smem, pairs, num_experts, I, items,
              stride_xm, H: gl.constexpr, TOP_K: gl.constexpr, BLOCK_M: gl.constexpr, STAGES: gl.constexpr, PAIR_ITEMS: gl.constexpr,
              GUARD: gl.constexpr, P_P2: gl.constexpr):
    """For each of the program's work items: GEMM1 -> SiLU-and-mul -> GEMM2 on the ring's tiles, the router-weighted
    rows added into the sums. With PAIR_ITEMS and GUARD, program 0 first counts the routing's invalid ids."""
    T: gl.constexpr = ring.shape[1]
    K_STEPS: gl.constexpr = H // T
    STEPS: gl.constexpr = K_STEPS + H // (2 * T)
    mma: gl.constexpr = gl.NVMMADistributedLayout(version=[3, 0], warps_per_cta=[gl.num_warps(), 1], instr_shape=[16, BLOCK_M, 16])
    columns = I // T
    pid = gl.program_id(0)
    if PAIR_ITEMS and GUARD:
        if pid == 0:
            _record_invalid(rows_ptr, err_ptr, pairs, num_experts, P_P2)
    offs_h = gl.arange(0, T, layout=gl.SliceLayout(1, mma))
    zero = gl.zeros([T, BLOCK_M], gl.float32, mma)
    for item in range(pid, items, gl.num_programs(0)):
        base = (item - pid) // gl.num_programs(0) * STEPS
        block = item // columns
        _gather_rows(x_ptr, rows_ptr, x_smem, block, pairs, num_experts, stride_xm, H, TOP_K, BLOCK_M, T, PAIR_ITEMS)
        gate = zero
        up = zero
        for k in range(K_STEPS):
            i = base + k
            s = i % STAGES
            mbarrier.wait(ready.index(s), (i // STAGES) & 1)
            rows = x_smem.index(k).permute((1, 0))  # [T, BLOCK_M]: the tokens, K-major
            gate = warpgroup_mma(ring.index(2 * s), rows, gate, is_async=True)
            up = warpgroup_mma(ring.index(2 * s + 1), rows, up, is_async=True)
            gate, up = warpgroup_mma_wait(num_outstanding=0, deps=(gate, up))
            mbarrier.arrive(empty.index(s), count=1)
        inter = (gate / (1.0 + gl.exp(-gate)) * up).to(x_ptr.dtype.element_ty)  # rounded as the two-GEMM layer stores it
        inter_smem.store(gl.permute(inter, [1, 0]))
        fence_async_shared()

        ids = _block_rows(rows_ptr, block, pairs, num_experts, gl.SliceLayout(0, mma), BLOCK_M, PAIR_ITEMS)
        ok = ids < pairs
        router = gl.load(weights_ptr + ids, mask=ok, other=0.0).to(gl.float32)
        sums = sums_ptr + (ids // TOP_K).to(gl.int64)[None, :] * H + offs_h[:, None]  # [T, BLOCK_M]
        mask = ok[None, :] & (offs_h[:, None] < T)
        inter_t = inter_smem.permute((1, 0))  # [T, BLOCK_M]
        for j in range(H // (2 * T)):
            i = base + K_STEPS + j
            s = i % STAGES
            mbarrier.wait(ready.index(s), (i // STAGES) & 1)
            top = warpgroup_mma(ring.index(2 * s), inter_t, zero, use_acc=False, is_async=True)
            bottom = warpgroup_mma(ring.index(2 * s + 1), inter_t, zero, use_acc=False, is_async=True)
            top, bottom = warpgroup_mma_wait(num_outstanding=0, deps=(top, bottom))
            mbarrier.arrive(empty.index(s), count=1)
            gl.atomic_add(sums + 2 * j * T, top * router[None, :], mask=mask, sem="relaxed")
            gl.atomic_add(sums + (2 * j + 1) * T, bottom * router[None, :], mask=mask, sem="relaxed")


@gluon.jit
def _cast_sums(words_ptr, bar_ptr, out_ptr, total, H: gl.constexpr, stride_om, BLOCK: gl.constexpr):
    """Once every program has issued its atomics (a grid barrier: the launch is cooperative), each program casts its
    share of the ``total`` float32 sums (``words_ptr``: their int32 words) into ``out`` in its dtype and leaves them at
    zero. It reads them by atomic exchanges: plain loads after an arrival missed other programs' atomics in fused.py's
    last-program cast. Every program casting a share keeps the cast off one program's critical path (64 tokens of
    Qwen3-30B-A3B: 128 Ki sums)."""
    grid_barrier(bar_ptr)
    share = gl.cdiv(total, gl.num_programs(0))
    start = gl.program_id(0) * share
    end = gl.minimum(start + share, total)
    layout: gl.constexpr = gl.BlockedLayout([BLOCK // (32 * gl.num_warps())], [32], [gl.num_warps()], [0])
    for first in range(start, end, BLOCK):
        offs = first + gl.arange(0, BLOCK, layout=layout)
        ok = offs < end
        bits = gl.atomic_xchg(words_ptr + offs, gl.zeros([BLOCK], gl.int32, layout), mask=ok, sem="relaxed")
        value = bits.to(gl.float32, bitcast=True)
        gl.store(out_ptr + (offs // H) * stride_om + offs % H, value.to(out_ptr.dtype.element_ty), mask=ok)


@gluon.jit
def ws_decode_kernel(x_ptr, w13_desc, w2_desc, weights_ptr, rows_ptr, err_ptr, words_ptr, bar_ptr, out_ptr, pairs, capacity, num_experts, I,
                     stride_xm, stride_om, H: gl.constexpr, TOP_K: gl.constexpr, BLOCK_M: gl.constexpr, STAGES: gl.constexpr,
                     ROWS_LAYOUT: gl.constexpr, PAIR_ITEMS: gl.constexpr, GUARD: gl.constexpr, P_P2: gl.constexpr):
    """The layer's output [pairs / TOP_K, H] (module docstring). A persistent grid of at most one program per SM;
    program ``p`` takes the work items p, p + programs, ... of the blocks in use times the I / TILE_SIZE column tiles
    (item = block * columns + column tile). The blocks: a BlockTable's (``rows_ptr``: its buffer of ``capacity``
    rows), or with PAIR_ITEMS one per pair (``rows_ptr``: the routing's flat ids, at most P_P2 of them, of
    ``num_experts`` experts; GUARD: invalid ones counted in ``err_ptr``, :func:`_record_invalid`). ``words_ptr``: the
    int32 words of the float32 sums [tokens, H] (the words :func:`~moe_core_triton.blocks.stream_words` keeps, which an
    eager forward's replay holds), zero before the launch and left so; ``bar_ptr``: the grid barrier's words
    (:func:`~moe_core_triton.blocks.grid_barrier`); the launch is cooperative. ``ROWS_LAYOUT``: the shared layout of
    ``[BLOCK_M, TILE_SIZE]`` activation tiles."""
    T: gl.constexpr = w13_desc.block_type.shape[0]
    dtype: gl.constexpr = w13_desc.dtype
    items = _work_items(rows_ptr, pairs, capacity, I // T, BLOCK_M, PAIR_ITEMS)
    sums_ptr = words_ptr.to(gl.pointer_type(gl.float32), bitcast=True)
    ring = gl.allocate_shared_memory(dtype, [2 * STAGES, T, T], w13_desc.layout)
    ready = gl.allocate_shared_memory(gl.int64, [STAGES, 1], mbarrier.MBarrierLayout())
    empty = gl.allocate_shared_memory(gl.int64, [STAGES, 1], mbarrier.MBarrierLayout())
    for s in gl.static_range(STAGES):
        mbarrier.init(ready.index(s), count=1)
        mbarrier.init(empty.index(s), count=1)
    x_smem = gl.allocate_shared_memory(dtype, [H // T, BLOCK_M, T], ROWS_LAYOUT)
    inter_smem = gl.allocate_shared_memory(dtype, [BLOCK_M, T], ROWS_LAYOUT)
    gl.warp_specialize([
        (_consumer, (x_ptr, weights_ptr, rows_ptr, err_ptr, sums_ptr, ring, ready, empty, x_smem, inter_smem, pairs, num_experts, I,
                     items, stride_xm, H, TOP_K, BLOCK_M, STAGES, PAIR_ITEMS, GUARD, P_P2)),
        (_producer, (w13_desc, w2_desc, rows_ptr, ring, ready, empty, capacity, num_experts, I, items, H, STAGES, PAIR_ITEMS)),
    ], [PRODUCER_WARPS], [PRODUCER_REGISTERS])
    _cast_sums(words_ptr, bar_ptr, out_ptr, (pairs // TOP_K) * H, H, stride_om, CAST_BLOCK)


_GL_DTYPES = {torch.bfloat16: gl.bfloat16, torch.float16: gl.float16}


@functools.lru_cache(maxsize=8)
def tile_layout(dtype: torch.dtype, rows: int) -> gl.NVMMASharedLayout:
    """The shared layout of a ``[rows, TILE_SIZE]`` tile of ``dtype`` (TMA and wgmma both read it)."""
    return gl.NVMMASharedLayout.get_default_for([rows, TILE_SIZE], _GL_DTYPES[dtype])


def weight_descriptors(w13: torch.Tensor, w2: torch.Tensor) -> tuple[TensorDescriptor, TensorDescriptor]:
    """TMA descriptors of ``w13`` [E, 2I, H] and ``w2`` [E, H, I] (contiguous) as 2-D ``[E * 2I, H]`` and
    ``[E * H, I]`` matrices, in ``[TILE_SIZE, TILE_SIZE]`` tiles. Their base is the weight tensor itself, so an eager
    forward's replay (replay.py) makes them anew for the weights it is given."""
    layout = tile_layout(w13.dtype, TILE_SIZE)
    return tuple(TensorDescriptor(w, [w.shape[0] * w.shape[1], w.shape[2]], [w.shape[2], 1], [TILE_SIZE, TILE_SIZE], layout) for w in (w13, w2))


def ws_decode_args(plan: DecodePlan, x: torch.Tensor, descriptors: tuple, topk_weights: torch.Tensor, table: BlockTable | PairTable,
                   intermediate: int, top_k: int, words: torch.Tensor, barrier: torch.Tensor, out: torch.Tensor,
                   sms: int) -> tuple[tuple, tuple, dict]:
    """(grid, runtime arguments, constexprs) of one :func:`ws_decode_kernel` launch on a GPU of ``sms``
    SMs: one program per SM, or per work item where there can be fewer. ``table``: a :class:`PairTable` (one block per
    pair) where ``plan.pair_items`` says so, else the forward's :class:`BlockTable` of ``plan.block_m``-row blocks."""
    rows, _, errors, pairs, capacity, experts, _ = table.kernel_args
    pair_items = isinstance(table, PairTable)
    assert pair_items == plan.pair_items and table.block_m == plan.block_m, (plan, table)
    args = (x, *descriptors, topk_weights, rows, errors, words, barrier, out, pairs, capacity, experts, intermediate, x.stride(0),
            out.stride(0))
    constexprs = dict(H=x.shape[1], TOP_K=top_k, BLOCK_M=plan.block_m, STAGES=plan.stages, ROWS_LAYOUT=tile_layout(x.dtype, plan.block_m),
                      PAIR_ITEMS=pair_items, GUARD=pair_items and table.errors is not None, P_P2=next_power_of_2(pairs))
    blocks = pairs if pair_items else capacity // plan.block_m
    return (min(sms, blocks * cdiv(intermediate, TILE_SIZE)),), args, constexprs


def ws_decode_layer(plan: DecodePlan, x: torch.Tensor, descriptors: tuple, topk_weights: torch.Tensor, table: BlockTable | PairTable,
                    intermediate: int, top_k: int) -> torch.Tensor:
    """The layer's output [tokens, H] in ``x``'s dtype by one launch: ``x`` [tokens, H] with unit column stride,
    ``descriptors`` from :func:`weight_descriptors`, ``topk_weights`` contiguous, ``table`` as :func:`ws_decode_args`
    takes it."""
    tokens, hidden = x.shape
    words = stream_words(x.device, FUSED_SUMS, tokens * hidden)
    barrier = stream_words(x.device, GRID_BARRIER, 2)
    out = torch.empty((tokens, hidden), dtype=x.dtype, device=x.device)
    grid, args, constexprs = ws_decode_args(plan, x, descriptors, topk_weights, table, intermediate, top_k, words, barrier, out,
                                            max_programs(x.device))
    decode_launcher(tuple(constexprs.items()))(grid, *args)
    return out


@functools.lru_cache(maxsize=64)
def decode_launcher(constexprs: tuple) -> Launcher:
    """The launcher of :func:`ws_decode_kernel` with these ``(name, value)`` constexprs (from :func:`ws_decode_args`): a
    cooperative grid of one consumer warpgroup per program. Its direct launches spare triton's per-call host work, and
    an eager forward's record (replay.py) can repeat them."""
    return Launcher(ws_decode_kernel, num_warps=CONSUMER_WARPS, cooperative=True, **dict(constexprs))
