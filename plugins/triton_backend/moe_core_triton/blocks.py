"""Block tables: which rows each GEMM program reads, grouped by expert and padded to BLOCK_M.

Both activation formats become the same table, so one GEMM kernel serves both. The table is one
int32 buffer (one allocation, one kernel argument) holding, in this order:

* ``sorted_ids`` [EM]: row ids (a (token, slot) pair index, or a batched row), grouped by
  expert, each expert's run padded to a multiple of BLOCK_M with the sentinel ``num_valid``;
* ``block_expert`` [EM / BLOCK_M]: the local expert of each block;
* ``num_padded`` [1]: rows in use; blocks at or past it exit at once;
* scratch of the kernels that build it.

Built by one Triton launch at every size, with no host synchronisation, so the layer is CUDA-graph
capturable: one program up to 1024 pairs, above that a cooperative grid of up to one program per SM,
counts, ranks and places the pairs in three phases separated by grid barriers (:func:`grid_barrier`).
``EM`` is a static upper bound so the launch grid never depends on routing. Invalid pairs (see
:func:`local_experts`) are dropped and counted, never used as an index.

A forward of few pairs builds no table at all (a :class:`PairTable`): each GEMM program works out the
rows of its own block from the routing (:func:`pairs_of_block`), which saves the table's launch.
"""

from __future__ import annotations

from dataclasses import dataclass

import functools
import threading

import torch
import triton
import triton.language as tl

from moe_core.routing_guard import RoutingErrorCounter
from moe_core_triton.launch import Launcher
from moe_core_triton.scratch import Empty, new_empty

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


    @property
    def kernel_args(self) -> tuple:
        """What the GEMM kernel takes for its rows: (table, expert map, error counter, num_valid, capacity,
        num_experts, num_local); a table built beforehand needs only the first, num_valid and capacity."""
        return self.buffer, self.buffer, self.buffer, self.num_valid, self.capacity, 0, 0


@dataclass(frozen=True, eq=False)
class PairTable:
    """The block table of a forward of few pairs, never built: every GEMM program groups the pairs of ``topk_ids``
    itself (:func:`pairs_of_block`; at most ``pairs_p2`` pairs), the first program of GEMM1 counting invalid
    ones in ``errors``. Its blocks are those of :func:`standard_table`, over the same ``capacity`` rows."""

    topk_ids: torch.Tensor  # flat, contiguous
    expert_map: torch.Tensor | None
    errors: torch.Tensor | None  # the int64 [count, smallest, largest] buffer of a RoutingErrorCounter
    num_experts: int
    num_local: int
    capacity: int
    num_valid: int  # pairs
    block_m: int

    @property
    def pairs_p2(self) -> int:
        return next_power_of_2(self.num_valid)

    @property
    def kernel_args(self) -> tuple:
        """As :attr:`BlockTable.kernel_args`: the routing itself in place of a table."""
        ids = self.topk_ids
        return (ids, self.expert_map if self.expert_map is not None else ids, self.errors if self.errors is not None else ids,
                self.num_valid, self.capacity, self.num_experts, self.num_local)


def pair_table(topk_ids: torch.Tensor, num_experts: int, num_local: int, block_m: int, expert_map: torch.Tensor | None = None,
               errors: RoutingErrorCounter | None = None) -> PairTable:
    """The :class:`PairTable` of ``topk_ids`` [T, k] (arguments as for :func:`standard_table`)."""
    ids = _flat(topk_ids)
    pairs = ids.numel()
    return PairTable(ids, expert_map, errors.buffer(ids.device) if errors is not None else None, num_experts, num_local,
                     _capacity(pairs, num_local, block_m), pairs, block_m)


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
    """Count the ``bad`` lanes of one program, and the range of their ``offending`` values, in the int64
    [count, smallest, largest] counter."""
    count = tl.sum(bad.to(tl.int64), axis=0)
    if count > 0:
        tl.atomic_add(err_ptr, count)
        tl.atomic_min(err_ptr + 1, tl.min(tl.where(bad, offending, 9223372036854775807), axis=0))
        tl.atomic_max(err_ptr + 2, tl.max(tl.where(bad, offending, -9223372036854775807 - 1), axis=0))


@triton.jit
def pairs_of_block(ids_ptr, map_ptr, err_ptr, pid_m, pairs, num_experts, num_local, record,
                   HAS_MAP: tl.constexpr, GUARD: tl.constexpr, BLOCK_M: tl.constexpr, P_P2: tl.constexpr, E_P2: tl.constexpr):
    """Block ``pid_m`` of the block table of ``pairs`` (at most P_P2) pairs, worked out in registers from the routing
    (a :class:`PairTable`): its row ids [BLOCK_M] (int64; padding is ``pairs``), its local expert (int64), and whether
    it holds any pair. The blocks are the table's (experts in order, each expert's run padded to BLOCK_M); within
    an expert, pairs are in pair order. With GUARD, a program whose ``record`` is true counts the invalid pairs."""
    p = tl.arange(0, P_P2)
    e, bad, offending = local_experts(ids_ptr, map_ptr, p, p < pairs, num_experts, num_local, HAS_MAP)
    if GUARD:
        if record:
            record_invalid(err_ptr, bad, offending)
    valid = e >= 0
    padded = (tl.histogram(e, E_P2, mask=valid) + BLOCK_M - 1) // BLOCK_M * BLOCK_M
    ends = tl.cumsum(padded, axis=0)
    first_row = pid_m * BLOCK_M
    expert = tl.sum((ends <= first_row).to(tl.int32), axis=0)  # experts whose runs end at or before this block
    start = tl.sum(tl.where(tl.arange(0, E_P2) == expert, ends - padded, 0), axis=0)
    mine = valid & (e == expert)
    slot = tl.where(mine, start + tl.cumsum(mine.to(tl.int32), axis=0) - 1 - first_row, -1)  # row in this block
    hit = slot[None, :] == tl.arange(0, BLOCK_M)[:, None]
    ids = tl.min(tl.where(hit, p[None, :], pairs), axis=1)
    return ids.to(tl.int64), expert.to(tl.int64), first_row < tl.sum(padded, axis=0)


@triton.jit
def grid_barrier(bar_ptr):
    """Wait until every program of the launch has arrived here, their memory writes visible to each other.

    The launch must be cooperative (all programs resident). ``bar_ptr``: int32 [arrived, generation],
    zero before a launch's first barrier and left with ``arrived`` zero after each, so the same state
    serves the next launch on the stream. A launch of one program never touches it."""
    tl.debug_barrier()
    programs = tl.num_programs(0)
    if programs > 1:
        generation = tl.atomic_add(bar_ptr + 1, 0, sem="acquire")
        if tl.atomic_add(bar_ptr, 1, sem="acq_rel") == programs - 1:
            tl.atomic_xchg(bar_ptr, 0, sem="relaxed")
            tl.atomic_add(bar_ptr + 1, 1, sem="release")
        else:
            while tl.atomic_add(bar_ptr + 1, 0, sem="acquire") == generation:
                pass
    tl.debug_barrier()


@triton.jit
def _table_kernel(ids_ptr, map_ptr, err_ptr, table_ptr, bar_ptr,
                  pairs, num_experts, num_local, capacity, scratch,
                  HAS_MAP: tl.constexpr, GUARD: tl.constexpr, BLOCK_M: tl.constexpr, E_P2: tl.constexpr,
                  BLOCK: tl.constexpr):
    """The whole table in one cooperative launch; program ``p`` takes pairs [p * BLOCK, (p + 1) * BLOCK).

    1. Its pairs' local experts (invalid ones counted when ``GUARD``); program 0 zeroes the per-expert
       counts; ``sorted_ids`` filled with the sentinel and ``block_expert`` with the last local expert
       (blocks past the padded count keep it). Barrier.
    2. Each pair's rank among its expert's pairs: an atomic on the expert's count. Barrier.
    3. Padded expert offsets from the counts (a one-program launch counts its pairs in registers);
       each pair placed at its expert's first row + rank (the first row taken from registers,
       ``tl.gather``); a pair whose rank is a multiple of BLOCK_M opens a block and writes its expert to
       ``block_expert``; ``num_padded`` written. Within an expert, pairs land in atomic order, which
       changes no output value (each row is computed on its own).

    Scratch at word ``scratch`` of the table: the counts [num_local]."""
    num_blocks = capacity // BLOCK_M
    sorted_ids_ptr = table_ptr
    block_expert_ptr = table_ptr + capacity
    num_padded_ptr = block_expert_ptr + num_blocks
    counts_ptr = table_ptr + scratch
    pid = tl.program_id(0)
    programs = tl.num_programs(0)
    experts = tl.arange(0, E_P2)
    lane = tl.arange(0, BLOCK)
    offs = pid * BLOCK + lane
    ok = offs < pairs
    e, bad, offending = local_experts(ids_ptr, map_ptr, offs, ok, num_experts, num_local, HAS_MAP)
    valid = e >= 0
    if GUARD:
        record_invalid(err_ptr, bad, offending)
    if pid == 0:
        tl.store(counts_ptr + experts, tl.zeros([E_P2], dtype=tl.int32), mask=experts < num_local)
    for start in range(pid * BLOCK, capacity, programs * BLOCK):
        tl.store(sorted_ids_ptr + start + lane, pairs, mask=start + lane < capacity)
    for start in range(pid * BLOCK, num_blocks, programs * BLOCK):
        tl.store(block_expert_ptr + start + lane, num_local - 1, mask=start + lane < num_blocks)
    grid_barrier(bar_ptr)
    rank = tl.atomic_add(counts_ptr + e, tl.full([BLOCK], 1, tl.int32), mask=valid, sem="relaxed")
    grid_barrier(bar_ptr)
    if programs == 1:
        counts = tl.histogram(e, E_P2, mask=valid)
    else:
        counts = tl.load(counts_ptr + experts, mask=experts < num_local, other=0, cache_modifier=".cg")  # other SMs' atomics
    padded = (counts + BLOCK_M - 1) // BLOCK_M * BLOCK_M
    row = tl.gather(tl.cumsum(padded, axis=0) - padded, tl.where(valid, e, 0), 0) + rank
    tl.store(sorted_ids_ptr + row, offs, mask=valid)
    tl.store(block_expert_ptr + row // BLOCK_M, e, mask=valid & (rank % BLOCK_M == 0))
    if pid == 0:
        tl.store(num_padded_ptr, tl.sum(padded, axis=0))


def standard_table(
    topk_ids: torch.Tensor, num_experts: int, num_local: int, block_m: int,
    expert_map: torch.Tensor | None = None, errors: RoutingErrorCounter | None = None, *, empty: Empty = new_empty,
    block: int | None = None,
) -> BlockTable:
    """Group the T*k (token, slot) pairs of ``topk_ids`` [T, k] by local expert.

    Remote pairs (expert map entry -1) are dropped; so are invalid pairs (an id outside
    [0, num_experts), a map entry outside [-1, num_local)), which are also counted in ``errors``.
    ``empty`` allocates the table (see :mod:`moe_core_triton.scratch`); ``block`` (for tests: 16 makes
    a launch of several programs on a GPU) is the fewest pairs per program (:func:`table_grid`).
    """
    device = topk_ids.device
    ids = _flat(topk_ids)
    pairs = ids.numel()
    capacity = _capacity(pairs, num_local, block_m)
    words = table_words(capacity, block_m)
    if pairs == 0:
        return BlockTable(torch.zeros(words, dtype=torch.int32, device=device), capacity, pairs, block_m)
    table = empty((words + num_local,), torch.int32, device)
    e_p2 = next_power_of_2(num_local)
    block, programs = table_grid(pairs, device, block or MIN_PAIRS_PER_PROGRAM)
    launch = _table_launcher(expert_map is not None, errors is not None, block_m, e_p2, block, programs > 1)
    launch((programs,), ids, expert_map if expert_map is not None else ids, errors.buffer(device) if errors is not None else ids,
           table, stream_words(device, GRID_BARRIER, 2) if programs > 1 else table, pairs, num_experts, num_local, capacity, words)
    return BlockTable(table, capacity, pairs, block_m)


#: Pairs of the smallest program of a table launch of several (up to this many pairs, one program, no barriers).
MIN_PAIRS_PER_PROGRAM = 1024


def table_grid(pairs: int, device: torch.device, least: int = MIN_PAIRS_PER_PROGRAM) -> tuple[int, int]:
    """(pairs per program, programs) of the table launch for ``pairs`` on ``device``: pairs per program a power of
    two, at least ``least`` (or all the pairs, when fewer), such that at most :func:`max_programs` programs cover
    ``pairs``."""
    block = next_power_of_2(max(min(least, pairs), cdiv(pairs, max_programs(device))))
    return block, cdiv(pairs, block)


def _capacity(pairs: int, num_experts: int, block_m: int) -> int:
    """Rows the table can need: every pair, plus the padding of each expert that can be non-empty."""
    return _round_up(pairs + min(num_experts, pairs) * (block_m - 1), block_m) if pairs else block_m


@functools.lru_cache(maxsize=256)
def _table_launcher(has_map: bool, guard: bool, block_m: int, e_p2: int, block: int, cooperative: bool) -> Launcher:
    """A launch of several programs is cooperative: its barriers need every program resident. A launch of one program
    waits at no barrier and is launched plainly (the host time is the same either way on the H100 machine: 13.7
    against 14.2 µs per launch, interleaved A/B, docs/benchmarks/raw/2026-11-23-triton-direct-launch/coop_ab.txt)."""
    return Launcher(_table_kernel, num_warps=4, cooperative=cooperative, HAS_MAP=has_map, GUARD=guard, BLOCK_M=block_m, E_P2=e_p2,
                    BLOCK=block)


def max_programs(device: torch.device) -> int:
    """Programs of one table launch: one per SM on a GPU (a cooperative launch of that many small programs
    always fits); one elsewhere (the interpreter runs programs one after another, so none may wait for another)."""
    return _sm_count(device.index if device.index is not None else torch.cuda.current_device()) if device.type == "cuda" else 1


@functools.lru_cache(maxsize=64)
def _sm_count(index: int) -> int:
    return torch.cuda.get_device_properties(index).multi_processor_count


#: Device words kept between launches, per (purpose, device, stream, thread): launches queued on one stream run one
#: after another, and each leaves its words ready for the next (see :func:`stream_words`). Past MAX_STATES keys
#: (threads come and go) all are dropped; a dropped state's memory goes back to its stream's pool, so a launch still
#: queued there finishes before the memory is used again.
_states: dict[tuple, torch.Tensor] = {}
MAX_STATES = 256
#: Words of a kept state at least.
MIN_STATE_WORDS = 64
#: The purposes of kept words: each has words of its own, since what a launch leaves in them differs.
GRID_BARRIER = "grid barrier"  # [arrived, generation]: arrived left at zero, the generation counts on
ARRIVALS = "arrivals"  # one counter per column tile of a top-k-summing GEMM2, each left at zero
FUSED_SUMS = "fused sums"  # the one-launch layer's float32 sums [tokens, H] and arrival counter, left at zero (fused.py)


def stream_words(device: torch.device, purpose: str, words: int) -> torch.Tensor:
    """At least ``words`` int32 words for ``purpose`` (:data:`GRID_BARRIER`, :data:`ARRIVALS`, :data:`FUSED_SUMS`) on the current stream,
    zero when first made and then left by each launch as the next one needs them. While a CUDA graph is captured,
    new zeroed words the graph zeroes on every replay (a replay may run on any stream)."""
    if device.type == "cuda" and torch.cuda.is_current_stream_capturing():
        return torch.zeros(words, dtype=torch.int32, device=device)
    key = (purpose, device, _current_stream(device), threading.get_ident())
    state = _states.get(key)
    if state is None or state.numel() < words:
        if len(_states) >= MAX_STATES:
            _states.clear()
        state = _states[key] = torch.zeros(max(words, MIN_STATE_WORDS), dtype=torch.int32, device=device)
    return state


def kept_words(tensor: torch.Tensor) -> bool:
    """Whether ``tensor`` is words :func:`stream_words` keeps (any launch on their stream may take them again)."""
    return any(tensor is state for state in _states.values())


def _current_stream(device: torch.device) -> int | None:
    """The current raw stream of a GPU; None elsewhere (the interpreter runs every launch in order)."""
    return torch._C._cuda_getCurrentRawStream(device.index) if device.type == "cuda" else None


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
