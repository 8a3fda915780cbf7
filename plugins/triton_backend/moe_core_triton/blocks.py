"""Block tables: which rows each GEMM program reads, grouped by expert and padded to BLOCK_M.

Both activation formats become the same table, so one GEMM kernel serves both. The table is one
int32 buffer (one allocation, one kernel argument) holding, in this order:

* ``sorted_ids`` [EM]: row ids (a (token, slot) pair index, or a batched row), grouped by
  expert, each expert's run padded to a multiple of BLOCK_M with the sentinel ``num_valid``;
* ``block_expert`` [EM / BLOCK_M]: the local expert of each block;
* ``num_padded`` [1]: rows in use; blocks at or past it exit at once;
* scratch of the kernels that build it.

Built by Triton kernels with no host synchronisation — one program for small tables, two parallel
launches for any size — so the layer is CUDA-graph capturable; ``EM`` is a static upper bound so
the launch grid never depends on routing. Invalid pairs (see :func:`local_experts`) are dropped
and counted, never used as an index.
"""

from __future__ import annotations

from dataclasses import dataclass

import functools

import torch
import triton
import triton.language as tl

from moe_core.routing_guard import RoutingErrorCounter
from moe_core_triton.launch import Launcher
from moe_core_triton.scratch import Empty, new_empty

#: Up to this many (token, slot) pairs the table is built by one Triton program (one launch, least
#: host time); beyond it by the two-launch parallel table, whose GPU time stays 13-23 µs at any size
#: while the one program's grows (H100: 24-48 µs at 512 pairs, 161-254 µs at 4096;
#: docs/benchmarks/raw/block_tables_h100.txt).
SMALL_TABLE_PAIRS = 128


@dataclass(frozen=True, eq=False)
class BlockTable:
    """A block table in one int32 ``buffer`` (layout in the module docstring) of ``capacity`` rows."""

    buffer: torch.Tensor
    capacity: int
    num_valid: int
    block_m: int

    @property
    def num_blocks(self) -> int:
        return self.capacity // self.block_m

    @property
    def sorted_ids(self) -> torch.Tensor:
        return self.buffer[: self.capacity]

    @property
    def block_expert(self) -> torch.Tensor:
        return self.buffer[self.capacity : self.capacity + self.num_blocks]

    @property
    def num_padded(self) -> torch.Tensor:
        end = self.capacity + self.num_blocks
        return self.buffer[end : end + 1]


def table_words(capacity: int, block_m: int) -> int:
    """int32 words of a table's sorted ids, block experts and padded count (scratch follows them)."""
    return capacity + capacity // block_m + 1


@triton.jit
def local_experts(ids_ptr, map_ptr, offs, ok, num_experts, num_local, HAS_MAP: tl.constexpr):
    """Local expert of each pair at ``offs`` (-1: remote, invalid or masked), whether it is invalid, and the
    value at fault: an id outside [0, num_experts) or an expert-map entry outside [-1, num_local).
    Out-of-range ids never index the map."""
    raw = tl.load(ids_ptr + offs, mask=ok, other=0).to(tl.int64)
    in_range = ok & (raw >= 0) & (raw < num_experts)
    local = raw
    if HAS_MAP:
        local = tl.load(map_ptr + raw, mask=in_range, other=-1).to(tl.int64)
    bad = ok & ((in_range == 0) | (local < -1) | (local >= num_local))
    expert = tl.where(ok & (bad == 0), local, -1).to(tl.int32)
    return expert, bad, tl.where(in_range, local, raw)


@triton.jit
def record_invalid(err_ptr, bad, offending):
    """Count the ``bad`` lanes of one program, and the range of their ``offending`` values, in the counter."""
    record_invalid_totals(err_ptr, tl.sum(bad.to(tl.int64), axis=0),
                          tl.min(tl.where(bad, offending, 9223372036854775807), axis=0),
                          tl.max(tl.where(bad, offending, -9223372036854775807 - 1), axis=0))


@triton.jit
def record_invalid_totals(err_ptr, count, smallest, largest):
    """Add one program's invalid-value count and range to the int64 [count, smallest, largest] counter."""
    if count > 0:
        tl.atomic_add(err_ptr, count)
        tl.atomic_min(err_ptr + 1, smallest)
        tl.atomic_max(err_ptr + 2, largest)


@triton.jit
def _small_table_kernel(
    ids_ptr, map_ptr, err_ptr, table_ptr,
    pairs, num_experts, num_local, capacity,
    HAS_MAP: tl.constexpr, GUARD: tl.constexpr, BLOCK_M: tl.constexpr, E_P2: tl.constexpr, CHUNK: tl.constexpr,
):
    """The whole table in one program: per-expert counts, padded offsets, then a stable scatter.

    Invalid pairs are always dropped; with ``GUARD`` they are also counted in ``err_ptr`` (off only
    to measure the counting's cost). Scratch: ``num_local`` cursors after the table, kept in global memory
    between chunks (cursors in registers, gathered per pair from an [CHUNK, experts] tile, measured slower
    on the H100: 7.4 -> 8.4 us at 8 pairs, 10.4 -> 12.2 us at 128; docs/benchmarks/triton-h100.md)."""
    sorted_ids_ptr = table_ptr
    block_expert_ptr = table_ptr + capacity
    num_padded_ptr = block_expert_ptr + capacity // BLOCK_M
    cursor_ptr = num_padded_ptr + 1
    experts = tl.arange(0, E_P2)
    lane = tl.arange(0, CHUNK)
    counts = tl.zeros([E_P2], dtype=tl.int32)
    num_bad = tl.zeros([CHUNK], dtype=tl.int64)
    smallest = tl.full([CHUNK], 9223372036854775807, dtype=tl.int64)
    largest = tl.full([CHUNK], -9223372036854775807 - 1, dtype=tl.int64)
    for start in range(0, pairs, CHUNK):
        ok = start + lane < pairs
        e, bad, offending = local_experts(ids_ptr, map_ptr, start + lane, ok, num_experts, num_local, HAS_MAP)
        if GUARD:
            num_bad += bad.to(tl.int64)
            smallest = tl.where(bad, tl.minimum(smallest, offending), smallest)
            largest = tl.where(bad, tl.maximum(largest, offending), largest)
        counts += tl.sum((e[:, None] == experts[None, :]).to(tl.int32), axis=0)
    if GUARD:
        record_invalid_totals(err_ptr, tl.sum(num_bad, axis=0), tl.min(smallest, axis=0), tl.max(largest, axis=0))
    padded = (counts + BLOCK_M - 1) // BLOCK_M * BLOCK_M
    ends = tl.cumsum(padded, axis=0)
    tl.store(cursor_ptr + experts, ends - padded, mask=experts < num_local)
    tl.store(num_padded_ptr, tl.sum(padded, axis=0))
    for start in range(0, capacity, CHUNK):
        tl.store(sorted_ids_ptr + start + lane, pairs, mask=start + lane < capacity)
    for first in range(0, capacity // BLOCK_M, CHUNK):
        blocks = first + lane
        owner = tl.sum(((blocks[:, None] * BLOCK_M) >= ends[None, :]).to(tl.int32) * (experts[None, :] < num_local).to(tl.int32), axis=1)
        tl.store(block_expert_ptr + blocks, tl.minimum(owner, num_local - 1), mask=blocks < capacity // BLOCK_M)
    tl.debug_barrier()
    for start in range(0, pairs, CHUNK):
        ok = start + lane < pairs
        e, bad, offending = local_experts(ids_ptr, map_ptr, start + lane, ok, num_experts, num_local, HAS_MAP)
        valid = e >= 0
        same = (e[:, None] == e[None, :]) & (lane[None, :] < lane[:, None])
        rank = tl.sum(same.to(tl.int32), axis=1)
        base = tl.load(cursor_ptr + e, mask=valid, other=0)
        tl.store(sorted_ids_ptr + base + rank, start + lane, mask=valid)
        tl.debug_barrier()
        seen = tl.sum(((e[:, None] == experts[None, :]) & valid[:, None]).to(tl.int32), axis=0)
        cursor = tl.load(cursor_ptr + experts, mask=experts < num_local, other=0)
        tl.store(cursor_ptr + experts, cursor + seen, mask=experts < num_local)
        tl.debug_barrier()


def standard_table(
    topk_ids: torch.Tensor, num_experts: int, num_local: int, block_m: int,
    expert_map: torch.Tensor | None = None, errors: RoutingErrorCounter | None = None, *, empty: Empty = new_empty,
) -> BlockTable:
    """Group the T*k (token, slot) pairs of ``topk_ids`` [T, k] by local expert.

    Remote pairs (expert map entry -1) are dropped; so are invalid pairs (an id outside
    [0, num_experts), a map entry outside [-1, num_local)), which are also counted in ``errors``.
    ``empty`` allocates the table (see :mod:`moe_core_triton.scratch`).
    """
    pairs = topk_ids.numel()
    if 0 < pairs <= SMALL_TABLE_PAIRS and num_local <= 1024:
        return _small_table(topk_ids, num_experts, num_local, block_m, expert_map, errors, empty)
    return _large_table(topk_ids, num_experts, num_local, block_m, expert_map, errors, empty)


def _capacity(pairs: int, num_experts: int, block_m: int) -> int:
    """Rows the table can need: every pair, plus the padding of each expert that can be non-empty."""
    return _round_up(pairs + min(num_experts, pairs) * (block_m - 1), block_m) if pairs else block_m


@functools.lru_cache(maxsize=256)
def _small_launcher(has_map: bool, guard: bool, block_m: int, e_p2: int) -> Launcher:
    return Launcher(_small_table_kernel, num_warps=4, HAS_MAP=has_map, GUARD=guard, BLOCK_M=block_m, E_P2=e_p2, CHUNK=64)


def _small_table(topk_ids, num_experts, num_local, block_m, expert_map, errors, empty: Empty = new_empty) -> BlockTable:
    device = topk_ids.device
    pairs = topk_ids.numel()
    capacity = _capacity(pairs, num_local, block_m)
    table = empty((table_words(capacity, block_m) + num_local,), torch.int32, device)
    ids = _flat(topk_ids)
    launch = _small_launcher(expert_map is not None, errors is not None, block_m, next_power_of_2(num_local))
    launch((1,), ids, expert_map if expert_map is not None else ids, errors.buffer(device) if errors is not None else ids,
           table, pairs, num_experts, num_local, capacity)
    return BlockTable(table, capacity, pairs, block_m)


@triton.jit
def _rank_kernel(ids_ptr, map_ptr, err_ptr, counts_ptr, table_ptr,
                 pairs, capacity, scratch, fill_per_program, num_experts, num_local,
                 HAS_MAP: tl.constexpr, GUARD: tl.constexpr, BLOCK: tl.constexpr):
    """Pass 1 of the parallel table: each pair's local expert and its rank among that expert's pairs
    (an atomic on the expert's count); invalid pairs counted; ``sorted_ids`` filled with the sentinel.
    Scratch at word ``scratch`` of the table: local experts [pairs], then ranks [pairs]."""
    sorted_ids_ptr = table_ptr
    local_ptr = table_ptr + scratch
    rank_ptr = local_ptr + pairs
    pid = tl.program_id(0)
    offs = pid * BLOCK + tl.arange(0, BLOCK)
    ok = offs < pairs
    e, bad, offending = local_experts(ids_ptr, map_ptr, offs, ok, num_experts, num_local, HAS_MAP)
    valid = e >= 0
    rank = tl.atomic_add(counts_ptr + e, tl.full([BLOCK], 1, tl.int32), mask=valid, sem="relaxed")
    tl.store(local_ptr + offs, e, mask=ok)
    tl.store(rank_ptr + offs, rank, mask=ok & valid)
    if GUARD:
        record_invalid(err_ptr, bad, offending)
    first = pid * fill_per_program
    for start in range(first, first + fill_per_program, BLOCK):
        lane = start + tl.arange(0, BLOCK)
        tl.store(sorted_ids_ptr + lane, pairs, mask=(lane < capacity) & (lane < first + fill_per_program))


@triton.jit
def _place_kernel(counts_ptr, table_ptr,
                  pairs, num_local, capacity, scratch, blocks_per_program,
                  BLOCK_M: tl.constexpr, E_P2: tl.constexpr, BLOCK: tl.constexpr):
    """Pass 2: every program derives the padded expert offsets from the counts, places its pairs at
    offset + rank, and writes its share of ``block_expert``; program 0 writes ``num_padded``."""
    sorted_ids_ptr = table_ptr
    num_blocks = capacity // BLOCK_M
    block_expert_ptr = table_ptr + capacity
    num_padded_ptr = block_expert_ptr + num_blocks
    local_ptr = table_ptr + scratch
    rank_ptr = local_ptr + pairs
    pid = tl.program_id(0)
    experts = tl.arange(0, E_P2)
    counts = tl.load(counts_ptr + experts, mask=experts < num_local, other=0)
    padded = (counts + BLOCK_M - 1) // BLOCK_M * BLOCK_M
    ends = tl.cumsum(padded, axis=0)
    offs = pid * BLOCK + tl.arange(0, BLOCK)
    e = tl.load(local_ptr + offs, mask=offs < pairs, other=-1)
    valid = e >= 0
    start = tl.sum(tl.where(experts[None, :] < e[:, None], padded[None, :], 0), axis=1)
    rank = tl.load(rank_ptr + offs, mask=valid, other=0)
    tl.store(sorted_ids_ptr + start + rank, offs, mask=valid)
    first = pid * blocks_per_program
    for chunk in range(first, first + blocks_per_program, BLOCK):
        blocks = chunk + tl.arange(0, BLOCK)
        owner = tl.sum(((blocks[:, None] * BLOCK_M) >= ends[None, :]).to(tl.int32) * (experts[None, :] < num_local).to(tl.int32), axis=1)
        tl.store(block_expert_ptr + blocks, tl.minimum(owner, num_local - 1), mask=(blocks < num_blocks) & (blocks < first + blocks_per_program))
    if pid == 0:
        tl.store(num_padded_ptr, tl.sum(padded, axis=0))


@functools.lru_cache(maxsize=256)
def _parallel_launchers(has_map: bool, guard: bool, block_m: int, e_p2: int, block: int) -> tuple[Launcher, Launcher]:
    return (Launcher(_rank_kernel, num_warps=4, HAS_MAP=has_map, GUARD=guard, BLOCK=block),
            Launcher(_place_kernel, num_warps=4, BLOCK_M=block_m, E_P2=e_p2, BLOCK=block))


def _large_table(topk_ids, num_experts, num_local, block_m, expert_map, errors, empty: Empty = new_empty) -> BlockTable:
    """Any number of pairs in two parallel launches (plus zeroing the counts); within an expert,
    pairs land in atomic order, which changes no output value (each row is computed on its own)."""
    device = topk_ids.device
    ids = _flat(topk_ids)
    pairs = ids.numel()
    capacity = _capacity(pairs, num_local, block_m)
    words = table_words(capacity, block_m)
    if pairs == 0:
        return BlockTable(torch.zeros(words, dtype=torch.int32, device=device), capacity, pairs, block_m)
    table = empty((words + 2 * pairs,), torch.int32, device)
    counts = torch.zeros(num_local, dtype=torch.int32, device=device)
    e_p2 = next_power_of_2(num_local)
    block = max(16, min(1024, 16384 // e_p2))
    programs = cdiv(pairs, block)
    rank, place = _parallel_launchers(expert_map is not None, errors is not None, block_m, e_p2, block)
    rank((programs,), ids, expert_map if expert_map is not None else ids, errors.buffer(device) if errors is not None else ids,
         counts, table, pairs, capacity, words, cdiv(capacity, programs), num_experts, num_local)
    place((programs,), counts, table, pairs, num_local, capacity, words, cdiv(capacity // block_m, programs))
    return BlockTable(table, capacity, pairs, block_m)


def batched_table(expert_num_tokens: torch.Tensor, max_tokens: int, block_m: int, errors: RoutingErrorCounter | None = None) -> BlockTable:
    """Rows ``e * max_tokens + m`` for m < count[e], each expert's rows in ceil(max_tokens / BLOCK_M) blocks.

    Counts outside [0, max_tokens] are clamped into it (and counted in ``errors``), so no row of
    another expert or past the tensor is ever read."""
    device = expert_num_tokens.device
    counts = expert_num_tokens.to(device)
    if errors is not None:
        errors.record(counts, (counts < 0) | (counts > max_tokens))
    experts = counts.shape[0]
    per_expert = _round_up(max(max_tokens, 1), block_m)
    m = torch.arange(per_expert, device=device)
    valid = m.unsqueeze(0) < counts.clamp(0, max_tokens).unsqueeze(1)
    rows = torch.arange(experts, device=device).unsqueeze(1) * max_tokens + m.unsqueeze(0)
    sentinel = experts * max_tokens
    sorted_ids = torch.where(valid, rows, sentinel).to(torch.int32).reshape(-1)
    block_expert = torch.arange(experts, device=device, dtype=torch.int32).repeat_interleave(per_expert // block_m)
    num_padded = sorted_ids.new_full((1,), sorted_ids.numel())  # a fill kernel: no host copy, so graph-capturable
    return BlockTable(torch.cat([sorted_ids, block_expert, num_padded]), sorted_ids.numel(), sentinel, block_m)


def _flat(ids: torch.Tensor) -> torch.Tensor:
    """``ids`` as the kernels read it: contiguous, indexed by flat pair number (no view made when it already is)."""
    return ids if ids.is_contiguous() else ids.contiguous()


def _round_up(x: int, m: int) -> int:
    return (x + m - 1) // m * m


def cdiv(x: int, m: int) -> int:
    """ceil(x / m) for host ints (``triton.cdiv`` costs a few µs of host time in triton 3.6)."""
    return -(-x // m)


def next_power_of_2(x: int) -> int:
    """The smallest power of two >= x (>= 1), for host ints (cheaper than ``triton.next_power_of_2``)."""
    return 1 << (x - 1).bit_length() if x > 1 else 1
