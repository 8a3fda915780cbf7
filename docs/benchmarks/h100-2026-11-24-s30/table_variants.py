"""Experiment (issue 12, block table <= 5 us at 512 pairs): one-program table kernels, timed against the package's.

Run on a GPU: python docs/benchmarks/h100-2026-11-24-s30/table_variants.py
(the interpreter also runs it, TRITON_INTERPRET=1, for the equality checks only).

Variants of the one-program launch (<= 1024 pairs):
- ``package``: blocks.standard_table as it is (BLOCK = 1024 lanes, 4 warps; ranks by global atomics on a zeroed
  count, each expert's first row stored and gathered back through global memory);
- ``package-lanes=P``: the same kernel with BLOCK = next power of two of the pairs;
- ``sorted``: ranks with no atomics and no global round trip after the ids' load: the (expert, pair) keys sorted in
  registers (tl.sort), each pair's row = its sorted position + the padding before its expert (tl.gather);
  warps 4 and 8, lanes = next power of two of the pairs.
Each is checked against the package's table (same blocks, the same set of pairs per block, same experts and
padded count) and timed: per kernel from torch.profiler (CUPTI), over 200 eager launches.
"""

from __future__ import annotations

import os
import sys

import torch
import triton
import triton.language as tl

from moe_core_triton.blocks import _capacity, _table_launcher, local_experts, next_power_of_2, record_invalid, standard_table, table_words
from moe_core_triton.launch import Launcher


@triton.jit
def sorted_table_kernel(ids_ptr, map_ptr, err_ptr, table_ptr, pairs, num_experts, num_local, capacity,
                        HAS_MAP: tl.constexpr, GUARD: tl.constexpr, BLOCK_M: tl.constexpr, E_P2: tl.constexpr,
                        BLOCK: tl.constexpr, SHIFT: tl.constexpr, BLOCKS: tl.constexpr):
    num_blocks = capacity // BLOCK_M
    block_expert_ptr = table_ptr + capacity
    lane = tl.arange(0, BLOCK)
    experts = tl.arange(0, E_P2)
    e, bad, offending = local_experts(ids_ptr, map_ptr, lane, lane < pairs, num_experts, num_local, HAS_MAP)
    valid = e >= 0
    if GUARD:
        record_invalid(err_ptr, bad, offending)
    for start in range(0, capacity, BLOCK):
        tl.store(table_ptr + start + lane, pairs, mask=start + lane < capacity)
    counts = tl.histogram(e, E_P2, mask=valid)
    padded = (counts + BLOCK_M - 1) // BLOCK_M * BLOCK_M
    ends = tl.cumsum(padded, axis=0)
    shift = (ends - padded) - (tl.cumsum(counts, axis=0) - counts)  # padded minus unpadded start of each expert
    keys = tl.sort((tl.where(valid, e, E_P2) << SHIFT) | lane)  # valid pairs by expert, then pair; invalid last
    expert = keys >> SHIFT
    placed = expert < E_P2
    row = lane + tl.gather(shift, tl.where(placed, expert, 0), 0)
    tl.debug_barrier()  # the sentinel fill above lands first
    tl.store(table_ptr + row, keys & (BLOCK - 1), mask=placed)
    for start in range(0, num_blocks, BLOCKS):
        blocks = start + tl.arange(0, BLOCKS)
        owner = tl.sum(((blocks[:, None] * BLOCK_M) >= ends[None, :]).to(tl.int32) * (experts[None, :] < num_local).to(tl.int32), axis=1)
        tl.store(block_expert_ptr + blocks, tl.minimum(owner, num_local - 1), mask=blocks < num_blocks)
    tl.store(block_expert_ptr + num_blocks, tl.sum(padded, axis=0))


def sorted_table(ids, experts, block_m, warps):
    pairs = ids.numel()
    capacity = _capacity(pairs, experts, block_m)
    table = torch.empty(table_words(capacity, block_m), dtype=torch.int32, device=ids.device)
    block = next_power_of_2(pairs)
    e_p2 = next_power_of_2(experts)
    launch = Launcher(sorted_table_kernel, num_warps=warps, HAS_MAP=False, GUARD=False, BLOCK_M=block_m, E_P2=e_p2, BLOCK=block,
                      SHIFT=block.bit_length() - 1, BLOCKS=max(16, 16384 // e_p2))
    launch((1,), ids, ids, ids, table, pairs, experts, experts, capacity)
    return table, capacity


def package_table(ids, experts, block_m, lanes):
    pairs = ids.numel()
    capacity = _capacity(pairs, experts, block_m)
    words = table_words(capacity, block_m)
    table = torch.empty(words + 2 * experts, dtype=torch.int32, device=ids.device)
    launch = _table_launcher(False, False, block_m, next_power_of_2(experts), lanes, False)
    launch((1,), ids, ids, ids, table, table, pairs, experts, experts, capacity, words)
    return table, capacity


def same_table(a, b, capacity, block_m, pairs):
    blocks = capacity // block_m
    assert torch.equal(a[capacity:capacity + blocks + 1], b[capacity:capacity + blocks + 1]), "block experts or padded count differ"
    for blk in range(blocks):
        x = a[blk * block_m:(blk + 1) * block_m].sort().values
        y = b[blk * block_m:(blk + 1) * block_m].sort().values
        assert torch.equal(x, y), f"block {blk} holds other pairs"


def kernel_us(fn, name_part, calls=200):
    from torch.profiler import ProfilerActivity, profile
    for _ in range(10):
        fn()
    torch.cuda.synchronize()
    with profile(activities=[ProfilerActivity.CUDA]) as prof:
        for _ in range(calls):
            fn()
        torch.cuda.synchronize()
    times = [e.device_time for e in prof.events() if e.device_type.name == "CUDA" and name_part in e.name]
    times.sort()
    return times[len(times) // 2], len(times)


def main() -> int:
    gpu = torch.cuda.is_available() and not os.environ.get("TRITON_INTERPRET")
    device = torch.device("cuda" if gpu else "cpu")
    gen = torch.Generator().manual_seed(0)
    for experts in (128, 8):
        for pairs in (72, 128, 512, 1000, 1024):
            for block_m in (16, 64):
                ids = torch.randint(0, experts, (pairs,), generator=gen, dtype=torch.int32).to(device)
                ref = standard_table(ids.view(-1, 1), experts, experts, block_m)
                capacity = ref.capacity
                for warps in (4, 8):
                    table, cap = sorted_table(ids, experts, block_m, warps)
                    assert cap == capacity
                    same_table(table, ref.buffer, capacity, block_m, pairs)
                    # within an expert, pairs in pair order
                    sid = table[:capacity]
                    for blk in range(capacity // block_m):
                        run = sid[blk * block_m:(blk + 1) * block_m]
                        run = run[run < pairs]
                        assert torch.equal(run, run.sort().values)
                if not gpu:
                    print(f"E={experts} pairs={pairs} BLOCK_M={block_m}: equal", flush=True)
                    continue
                row = {"package": kernel_us(lambda: standard_table(ids.view(-1, 1), experts, experts, block_m), "_table_kernel")}
                lanes = next_power_of_2(pairs)
                row[f"package-lanes={lanes}"] = kernel_us(lambda: package_table(ids, experts, block_m, lanes), "_table_kernel")
                for warps in (4, 8):
                    row[f"sorted-w{warps}"] = kernel_us(lambda: sorted_table(ids, experts, block_m, warps), "sorted_table_kernel")
                print(f"E={experts} pairs={pairs} BLOCK_M={block_m}: " + "  ".join(f"{k} {v[0]:.2f} us" for k, v in row.items()), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
