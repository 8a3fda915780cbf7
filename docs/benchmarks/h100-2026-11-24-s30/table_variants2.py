"""Experiment 2 (issue 12, block table <= 5 us at 512 pairs): one-program table kernels, timed against the package's.

Run on a GPU: python docs/benchmarks/h100-2026-11-24-s30/table_variants2.py
(TRITON_INTERPRET=1 runs the equality checks only).

Call 1 (table_variants.py) measured the package's kernel at 8.0 us for 512 pairs of 128 experts (BLOCK_M 16), 7.3 us
with 512 lanes instead of 1024, and ranks by sorting in registers slower (8.5 us). Here the one-program kernel, lanes =
next power of two of the pairs, with these steps changed one at a time (constexpr flags):
- GATHER: each pair's expert first row taken from registers (tl.gather) instead of stored, barrier, loaded back;
- SCATTER: ``block_expert`` written by the pairs that open a block (rank % BLOCK_M == 0) instead of a
  [blocks x experts] count per block (blocks past the padded count filled with num_local - 1 by the sentinel loop);
- CTA: the rank atomics with scope "cta" (one program: no other program reads the counts);
- warps 4 or 8.
Each is checked against the package's table (same blocks, same pairs per block, same block experts for every block,
same padded count; sentinels past it) and timed per kernel with torch.profiler (CUPTI), median of 200 launches.
"""

from __future__ import annotations

import os
import sys

import torch
import triton
import triton.language as tl

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import table_variants  # noqa: E402
from moe_core_triton.blocks import _capacity, local_experts, next_power_of_2, record_invalid, standard_table, table_words
from moe_core_triton.launch import Launcher


@triton.jit
def one_program_table(ids_ptr, map_ptr, err_ptr, table_ptr, pairs, num_experts, num_local, capacity, scratch,
                      HAS_MAP: tl.constexpr, GUARD: tl.constexpr, BLOCK_M: tl.constexpr, E_P2: tl.constexpr,
                      BLOCK: tl.constexpr, BLOCKS: tl.constexpr, GATHER: tl.constexpr, SCATTER: tl.constexpr,
                      CTA: tl.constexpr):
    num_blocks = capacity // BLOCK_M
    block_expert_ptr = table_ptr + capacity
    counts_ptr = table_ptr + scratch
    first_row_ptr = counts_ptr + num_local
    experts = tl.arange(0, E_P2)
    lane = tl.arange(0, BLOCK)
    ok = lane < pairs
    e, bad, offending = local_experts(ids_ptr, map_ptr, lane, ok, num_experts, num_local, HAS_MAP)
    valid = e >= 0
    if GUARD:
        record_invalid(err_ptr, bad, offending)
    tl.store(counts_ptr + experts, tl.zeros([E_P2], dtype=tl.int32), mask=experts < num_local)
    for start in range(0, capacity, BLOCK):
        tl.store(table_ptr + start + lane, pairs, mask=start + lane < capacity)
    if SCATTER:
        for start in range(0, num_blocks, BLOCK):
            tl.store(block_expert_ptr + start + lane, num_local - 1, mask=start + lane < num_blocks)
    tl.debug_barrier()
    if CTA:
        rank = tl.atomic_add(counts_ptr + e, tl.full([BLOCK], 1, tl.int32), mask=valid, sem="relaxed", scope="cta")
    else:
        rank = tl.atomic_add(counts_ptr + e, tl.full([BLOCK], 1, tl.int32), mask=valid, sem="relaxed")
    counts = tl.histogram(e, E_P2, mask=valid)
    padded = (counts + BLOCK_M - 1) // BLOCK_M * BLOCK_M
    ends = tl.cumsum(padded, axis=0)
    if GATHER:
        first_row = tl.gather(ends - padded, tl.where(valid, e, 0), 0)
    else:
        tl.store(first_row_ptr + experts, ends - padded, mask=experts < num_local)
        tl.debug_barrier()
        first_row = tl.load(first_row_ptr + e, mask=valid, other=0)
    row = first_row + rank
    tl.debug_barrier()  # the fills above land first
    tl.store(table_ptr + row, lane, mask=valid)
    if SCATTER:
        tl.store(block_expert_ptr + row // BLOCK_M, e, mask=valid & (rank % BLOCK_M == 0))
    else:
        for start in range(0, num_blocks, BLOCKS):
            blocks = start + tl.arange(0, BLOCKS)
            owner = tl.sum(((blocks[:, None] * BLOCK_M) >= ends[None, :]).to(tl.int32) * (experts[None, :] < num_local).to(tl.int32), axis=1)
            tl.store(block_expert_ptr + blocks, tl.minimum(owner, num_local - 1), mask=blocks < num_blocks)
    tl.store(block_expert_ptr + num_blocks, tl.sum(padded, axis=0))


def variant_table(ids, experts, block_m, warps=4, gather=False, scatter=False, cta=False, lanes=None):
    pairs = ids.numel()
    capacity = _capacity(pairs, experts, block_m)
    words = table_words(capacity, block_m)
    table = torch.empty(words + 2 * experts, dtype=torch.int32, device=ids.device)
    e_p2 = next_power_of_2(experts)
    launch = Launcher(one_program_table, num_warps=warps, HAS_MAP=False, GUARD=False, BLOCK_M=block_m, E_P2=e_p2,
                      BLOCK=lanes or next_power_of_2(pairs), BLOCKS=max(16, 16384 // e_p2), GATHER=gather, SCATTER=scatter, CTA=cta)
    launch((1,), ids, ids, ids, table, pairs, experts, experts, capacity, words)
    return table, capacity


def check(table, ref, capacity, block_m, pairs):
    """Same block experts (every block) and padded count; each expert's run holds the same pairs (which of an expert's
    blocks a pair lands in follows the order of the rank atomics, so it may differ), then sentinels."""
    blocks = capacity // block_m
    assert torch.equal(table[capacity:capacity + blocks + 1], ref[capacity:capacity + blocks + 1]), "block experts or count differ"
    owners = ref[capacity:capacity + blocks].tolist()
    used = int(ref[capacity + blocks]) // block_m

    def runs(t):
        out = {}
        for blk in range(used):
            out.setdefault(owners[blk], []).extend(t[blk * block_m:(blk + 1) * block_m].tolist())
        return {e: sorted(rows) for e, rows in out.items()}

    assert runs(table) == runs(ref), "an expert's run holds other pairs"
    assert set(table[used * block_m:capacity].tolist()) <= {pairs}, "no sentinel past the padded count"


def kernel_us(fn):
    """Median kernel time (µs) of ``fn``'s table launch: table_variants.py's CUPTI timing."""
    return table_variants.kernel_us(fn, "table")[0]


VARIANTS = {
    "old (1024 lanes)": dict(lanes=1024),  # the package's one-program kernel before call 3 (ad1ea7c)
    "lanes": {},
    "gather": dict(gather=True),
    "scatter": dict(scatter=True),
    "gather+scatter": dict(gather=True, scatter=True),
    "gather+scatter+cta": dict(gather=True, scatter=True, cta=True),
    "gather+scatter w8": dict(gather=True, scatter=True, warps=8),
    "all w8": dict(gather=True, scatter=True, cta=True, warps=8),
    "gather+scatter w2": dict(gather=True, scatter=True, warps=2),
}


def main() -> int:
    gpu = torch.cuda.is_available() and not os.environ.get("TRITON_INTERPRET")
    device = torch.device("cuda" if gpu else "cpu")
    gen = torch.Generator().manual_seed(0)
    for experts in (128, 8, 256):
        for pairs in (72, 128, 512, 1024):
            for block_m in (16, 64):
                ids = torch.randint(0, experts, (pairs,), generator=gen, dtype=torch.int32).to(device)
                ref = standard_table(ids.view(-1, 1), experts, experts, block_m)
                row = {"package": kernel_us(lambda: standard_table(ids.view(-1, 1), experts, experts, block_m))} if gpu else {}
                for name, kw in VARIANTS.items():
                    table, capacity = variant_table(ids, experts, block_m, **kw)
                    try:
                        check(table, ref.buffer, capacity, block_m, pairs)
                    except AssertionError as exc:
                        row[name] = f"DIFFERS ({exc})"
                        continue
                    if gpu:
                        row[name] = kernel_us(lambda: variant_table(ids, experts, block_m, **kw))
                print(f"E={experts} pairs={pairs} BLOCK_M={block_m}: " + "  ".join(f"{k} {v:.2f}" if isinstance(v, float) else f"{k} {v}"
                                                                           for k, v in row.items()), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
