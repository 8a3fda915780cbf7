"""The whole layer in one launch for a few tokens: GEMM2 fused into GEMM1 along the intermediate (decode).

The two-GEMM layer makes GEMM2 wait for all of GEMM1: on the H100, a one-token Qwen3-30B-A3B layer (bf16) took
38.5 µs as two launches, where one kernel that only reads its 75.5 MB of weights takes 29.2 µs
(docs/benchmarks/triton-h100.md). Here each program takes one block of (token, expert) pairs of one expert (a
:class:`~moe_core_triton.blocks.PairTable` block, worked out in registers: no table launch) and ``COLS`` columns of the
intermediate:

1. GEMM1 for those columns over the whole hidden size: the gate and up products of the block's token rows (the
   transposed product, weights as the MMA's first operand), the gated activation (SwiGLU clamp optional), rounded to
   the activations' dtype as the two-GEMM layer stores its intermediate;
2. GEMM2 restricted to the same columns of w2 (its reduction split along the intermediate): the block's [H] partial
   rows, times each pair's router weight, added into a float32 sum per token with atomics;
3. the last program to arrive casts the sums into the output and leaves the sums and its counter at zero for the
   next launch on the stream (:func:`cast_sums_if_last`).

GEMM2's weights stream in the same launch as GEMM1's, with no grid-wide wait between them. Each pair's expert weights
are read once per block of its expert, as in the two-GEMM layer, but every program adds H values per pair into the
sums: the fused layer pays where the layer is short and its pairs few. It runs unquantized 16-bit layers in the
standard format, where a tuned data file names a :class:`FusedConfig` for the token count (kernel.py); the float32
sums make the last bits of a result vary from run to run, as split-K tiles do (``TritonKernel.deterministic`` turns it
off). Measured on the H100 against the two GEMMs in one process (docs/benchmarks/triton-h100.md, 2026-11-26): Qwen3
at 1 token 38.7 → 36.4 µs, 2 tokens 70.0 → 61.1 µs; the twelve fastest of 228 candidate tiles lie within 2% of
36.1 µs at one token, the floor of this design, where a bare read of the bytes takes 29.3 µs.
"""

from __future__ import annotations

import functools

import torch
import triton
import triton.language as tl

from moe_core_triton.configs import FusedConfig
from moe_core_triton.blocks import FUSED_SUMS, PairTable, cdiv, next_power_of_2, pairs_of_block, stream_words
from moe_core_triton.gemm import gated, k_step_mask
from moe_core_triton.launch import Launcher

#: Sums the last program casts per step (8 per thread with 4 warps); a constexpr, as compiled kernels read no other
#: globals.
CAST_BLOCK = tl.constexpr(1024)


@triton.jit
def expert_mlp_columns(x_ptr, w13_ptr, w2_ptr, weights_ptr, sums_ptr, ids, expert, pairs, H, I, cols, limit,
                       stride_xm, stride_w1e, stride_w1n, stride_w2e, stride_w2n,
                       ACT: tl.constexpr, CLAMP: tl.constexpr, TOP_K: tl.constexpr, EVEN_K: tl.constexpr, EVEN_H: tl.constexpr,
                       BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr, BLOCK_H: tl.constexpr):
    """Steps 1 and 2 of the module docstring for the pair rows ``ids`` [BLOCK_M] (``pairs``: padding) of ``expert``
    and this program's ``cols`` intermediate columns."""
    row_ok = ids < pairs
    token = ids // TOP_K
    first_col = tl.program_id(1) * cols
    offs_n = first_col + tl.arange(0, BLOCK_N)
    n_ok = (tl.arange(0, BLOCK_N) < cols) & (offs_n < I)
    offs_k = tl.arange(0, BLOCK_K)
    a_ptrs = x_ptr + token[None, :] * stride_xm + offs_k[:, None]  # [BLOCK_K, BLOCK_M]
    w_ptrs = w13_ptr + expert * stride_w1e + offs_n[:, None] * stride_w1n + offs_k[None, :]  # [BLOCK_N, BLOCK_K]
    gate = tl.zeros((BLOCK_N, BLOCK_M), dtype=tl.float32)
    up = tl.zeros((BLOCK_N, BLOCK_M), dtype=tl.float32)
    for k in range(0, tl.cdiv(H, BLOCK_K)):
        k_ok = k_step_mask(offs_k, H, k, BLOCK_K, EVEN_K)
        a = tl.load(a_ptrs, mask=k_ok[:, None] & row_ok[None, :], other=0.0)
        w_ok = n_ok[:, None] & k_ok[None, :]
        gate = tl.dot(tl.load(w_ptrs, mask=w_ok, other=0.0), a, gate)
        up = tl.dot(tl.load(w_ptrs + I * stride_w1n, mask=w_ok, other=0.0), a, up)
        a_ptrs += BLOCK_K
        w_ptrs += BLOCK_K
    inter = gated(gate, up, limit, ACT, CLAMP).to(x_ptr.dtype.element_ty)  # [BLOCK_N, BLOCK_M]
    router = tl.load(weights_ptr + ids, mask=row_ok, other=0.0).to(tl.float32)
    offs_h = tl.arange(0, BLOCK_H)
    d_ptrs = w2_ptr + expert * stride_w2e + offs_h[:, None] * stride_w2n + offs_n[None, :]  # [BLOCK_H, BLOCK_N]
    s_ptrs = sums_ptr + token[None, :] * H + offs_h[:, None]  # [BLOCK_H, BLOCK_M]
    for h in range(0, tl.cdiv(H, BLOCK_H)):
        h_ok = k_step_mask(offs_h, H, h, BLOCK_H, EVEN_H)
        w2 = tl.load(d_ptrs, mask=h_ok[:, None] & n_ok[None, :], other=0.0)
        part = tl.dot(w2, inter) * router[None, :]
        tl.atomic_add(s_ptrs, part, mask=h_ok[:, None] & row_ok[None, :], sem="relaxed")
        d_ptrs += BLOCK_H * stride_w2n
        s_ptrs += BLOCK_H


@triton.jit
def cast_sums_if_last(sums_ptr, count_ptr, out_ptr, total, H, stride_om, BLOCK: tl.constexpr):
    """Step 3 of the module docstring: every program arrives once its atomics are issued; the last of them reads the
    ``total`` float32 sums [tokens, H], writes them into ``out`` in its dtype and zeroes them, then zeroes the counter.
    It reads them by atomic exchanges: on the H100, plain loads after the arrival missed some programs' atomics in 6 to
    16 of 30 forwards, exchanges in none (a probe on 2026-11-25 whose output was not kept; the probe script is in the
    history of docs/benchmarks, see docs/benchmarks/README.md). test_many_programs_give_the_same_sums_every_forward
    repeats the check on the GPU."""
    tl.debug_barrier()  # every thread's atomics come before the release below
    programs = tl.num_programs(0) * tl.num_programs(1)
    if tl.atomic_add(count_ptr, 1, sem="acq_rel") == programs - 1:
        words_ptr = sums_ptr.to(tl.pointer_type(tl.int32))
        for first in range(0, total, BLOCK):
            offs = first + tl.arange(0, BLOCK)
            ok = offs < total
            bits = tl.atomic_xchg(words_ptr + offs, tl.zeros((BLOCK,), tl.int32), mask=ok, sem="relaxed")
            value = bits.to(tl.float32, bitcast=True)
            tl.store(out_ptr + (offs // H) * stride_om + offs % H, value.to(out_ptr.dtype.element_ty), mask=ok)
        tl.atomic_xchg(count_ptr, 0, sem="relaxed")


@triton.jit
def fused_layer_kernel(
    x_ptr, w13_ptr, w2_ptr, weights_ptr, state_ptr, out_ptr,
    ids_ptr, map_ptr, err_ptr, pairs, num_experts, num_local,
    H, I, cols, limit, stride_xm, stride_w1e, stride_w1n, stride_w2e, stride_w2n, stride_om,
    ACT: tl.constexpr, CLAMP: tl.constexpr, HAS_MAP: tl.constexpr, GUARD: tl.constexpr, P_P2: tl.constexpr,
    E_P2: tl.constexpr, TOP_K: tl.constexpr, EVEN_K: tl.constexpr, EVEN_H: tl.constexpr,
    BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr, BLOCK_H: tl.constexpr,
):
    """The layer's output [pairs / TOP_K, H] (module docstring). Grid: (the PairTable's blocks, cdiv(I, cols)).
    ``state_ptr``: int32 words kept on the stream, zero before the launch and left so: the float32 sums
    [tokens, H], then the arrival counter."""
    pid_m = tl.program_id(0)
    ids, expert, live = pairs_of_block(ids_ptr, map_ptr, err_ptr, pid_m, pairs, num_experts, num_local,
                                       (pid_m == 0) & (tl.program_id(1) == 0), HAS_MAP, GUARD, BLOCK_M, P_P2, E_P2)
    sums_ptr = state_ptr.to(tl.pointer_type(tl.float32))
    total = (pairs // TOP_K) * H
    if live:
        expert_mlp_columns(x_ptr, w13_ptr, w2_ptr, weights_ptr, sums_ptr, ids, expert, pairs, H, I, cols, limit,
                           stride_xm, stride_w1e, stride_w1n, stride_w2e, stride_w2n,
                           ACT, CLAMP, TOP_K, EVEN_K, EVEN_H, BLOCK_M, BLOCK_N, BLOCK_K, BLOCK_H)
    cast_sums_if_last(sums_ptr, state_ptr + total, out_ptr, total, H, stride_om, CAST_BLOCK)


@functools.lru_cache(maxsize=256)
def fused_launcher(fc: FusedConfig, act: int, clamp: bool, has_map: bool, pairs: int, local_experts: int, top_k: int,
                   hidden: int) -> Launcher:
    """:func:`fused_layer_kernel` with its constexprs bound for ``pairs`` pairs of a layer (counting invalid pairs)."""
    return Launcher(fused_layer_kernel, num_warps=fc.num_warps, num_stages=fc.num_stages, ACT=act, CLAMP=clamp,
                    HAS_MAP=has_map, GUARD=True, P_P2=next_power_of_2(pairs), E_P2=next_power_of_2(local_experts), TOP_K=top_k,
                    EVEN_K=hidden % fc.BLOCK_K == 0, EVEN_H=hidden % fc.BLOCK_H == 0, BLOCK_M=fc.BLOCK_M, BLOCK_N=fc.BLOCK_N,
                    BLOCK_K=fc.BLOCK_K, BLOCK_H=fc.BLOCK_H)


def fused_layer(launcher: Launcher, fc: FusedConfig, x: torch.Tensor, w13: torch.Tensor, w2: torch.Tensor,
                topk_weights: torch.Tensor, table: PairTable, limit: float) -> torch.Tensor:
    """The layer's output [tokens, H] in ``x``'s dtype, by one launch of ``launcher`` (:func:`fused_launcher` for
    ``fc``): ``x`` [tokens, H] with unit column stride, ``w13`` [E, 2I, H] (gate rows, then up rows) and ``w2``
    [E, H, I] contiguous, ``topk_weights`` contiguous, ``table`` the forward's PairTable."""
    tokens, hidden = x.shape
    inter = w2.shape[2]
    state = stream_words(x.device, FUSED_SUMS, tokens * hidden + 1)
    out = torch.empty((tokens, hidden), dtype=x.dtype, device=x.device)
    ids, expert_map, errors, pairs, capacity, experts, local_experts = table.kernel_args
    launcher((capacity // fc.BLOCK_M, cdiv(inter, fc.COLS)), x, w13, w2, topk_weights, state, out, ids, expert_map, errors, pairs,
             experts, local_experts, hidden, inter, fc.COLS, limit, x.stride(0), w13.stride(0), w13.stride(1), w2.stride(0), w2.stride(1), out.stride(0))
    return out
