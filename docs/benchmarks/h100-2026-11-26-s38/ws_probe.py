"""Session 38 probe: does a persistent, TMA-fed grouped fp8-block GEMM pay on the H100, and does Triton's warp
specialization (``tl.range(..., warp_specialize=True)``) compile and pay for it on Hopper?

Issue 12's fp8 targets at 4096+ tokens were left as "needing a persistent, warp-specialized schedule". This probe
times, on the prefill shapes of those targets, a grouped GEMM of expert-sorted fp8 rows (the layout a TMA load needs:
each expert's rows contiguous, padded to BLOCK_M) with 1x128 activation and 128x128 weight block scales, three ways:
one program per tile (``grid``), one program per SM looping over tiles (``persistent``), and the same with warp
specialization (``ws``). Beside them, in the same process: the plugin's own layer profiled per kernel
(``torch.profiler``) at the same token count, and ``torch._scaled_mm`` on one dense matrix of the same work as the
fp8 ceiling. Every kernel's output is checked against a float32 product of the dequantized operands first.

    python ws_probe.py --preset qwen3-30b-a3b --tokens 4096 [--configs all]
"""

from __future__ import annotations

import argparse
import itertools
import sys
import traceback

import torch
import triton
import triton.language as tl
from triton.tools.tensor_descriptor import TensorDescriptor

from moe_core.bench.timing import cold_l2_seconds

GROUP = 128  # block-scale group: 1 x 128 activations, 128 x 128 weights
FP8 = torch.float8_e4m3fn
DEVICE = "cuda" if torch.cuda.is_available() else "cpu"


@triton.jit
def _tile_coords(tile, num_m, num_n, GROUP_M: tl.constexpr):
    in_group = GROUP_M * num_n
    first_m = (tile // in_group) * GROUP_M
    size_m = min(num_m - first_m, GROUP_M)
    return first_m + (tile % in_group) % size_m, (tile % in_group) // size_m


@triton.jit
def grouped_fp8_block(a_desc, b_desc, c_desc, a_scale_ptr, b_scale_ptr, block_expert_ptr, num_m, N, K,
                      stride_as, stride_bse, stride_bsn, a_ptr, c_ptr, perm_ptr, STEP: tl.constexpr,
                      BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr, GROUP_M: tl.constexpr,
                      WS: tl.constexpr, A_GATHER: tl.constexpr, C_SCATTER: tl.constexpr):
    """C[rows of block m] = A[rows] @ B[expert of m]^T with block scales; STEP programs share the tiles (the grid
    size: one tile each when it equals the tile count). A_GATHER: block m's A rows (and their scales) are the rows
    ``perm[rows]``, loaded through pointers, as the plugin's GEMM2 gathers its input rows by pair; C_SCATTER: C rows
    are stored at ``perm[rows]`` through pointers, as the plugin's GEMM2 writes one row per pair."""
    num_n = tl.cdiv(N, BLOCK_N)
    k_tiles = tl.cdiv(K, BLOCK_K)
    for tile in tl.range(tl.program_id(0), num_m * num_n, STEP, flatten=False, warp_specialize=WS):
        pid_m, pid_n = _tile_coords(tile, num_m, num_n, GROUP_M)
        expert = tl.load(block_expert_ptr + pid_m)
        rows = pid_m * BLOCK_M + tl.arange(0, BLOCK_M)
        if A_GATHER or C_SCATTER:
            moved = tl.load(perm_ptr + rows).to(tl.int64)
        if A_GATHER == 2:  # pointers, rows in order
            a_rows = rows.to(tl.int64)
        elif A_GATHER:
            a_rows = moved
        else:
            a_rows = rows
        b_row = expert * N + pid_n * BLOCK_N
        b_s_ptr = b_scale_ptr + expert * stride_bse + (pid_n * BLOCK_N // 128) * stride_bsn
        acc = tl.zeros((BLOCK_M, BLOCK_N), tl.float32)
        for ki in range(k_tiles):
            if A_GATHER:
                a = tl.load(a_ptr + a_rows[:, None] * K + (ki * BLOCK_K + tl.arange(0, BLOCK_K))[None, :])
            else:
                a = a_desc.load([pid_m * BLOCK_M, ki * BLOCK_K])
            b = b_desc.load([b_row, ki * BLOCK_K])
            a_s = tl.load(a_scale_ptr + a_rows * stride_as + ki)
            b_s = tl.load(b_s_ptr + ki)
            acc += tl.dot(a, b.T) * (a_s[:, None] * b_s)
        if C_SCATTER:
            cols = pid_n * BLOCK_N + tl.arange(0, BLOCK_N)
            tl.store(c_ptr + moved[:, None] * N + cols[None, :], acc.to(tl.bfloat16))
        else:
            c_desc.store([pid_m * BLOCK_M, pid_n * BLOCK_N], acc.to(tl.bfloat16))


SHAPES = {  # preset: (experts, top_k, hidden, intermediate)
    "qwen3-30b-a3b": (128, 8, 2048, 768),
    "mixtral-8x7b": (8, 2, 4096, 14336),
    "deepseek-v3": (256, 8, 7168, 2048),
}

CONFIGS = [  # BLOCK_M, BLOCK_N, GROUP_M, num_warps, num_stages
    (128, 128, 8, 8, 3), (128, 128, 8, 8, 4), (128, 128, 8, 4, 4), (64, 128, 8, 4, 4), (64, 128, 8, 4, 5),
    (128, 128, 8, 4, 3), (64, 128, 8, 8, 4),
]


class Problem:
    """One grouped GEMM: ``experts`` experts of ``rows`` sorted rows each (padded to 128), [N, K] weights each."""

    def __init__(self, experts: int, rows: int, n: int, k: int, seed: int = 0):
        g = torch.Generator(device=DEVICE).manual_seed(seed)
        self.experts, self.rows, self.n, self.k = experts, rows, n, k
        total = experts * rows
        self.a = (torch.randn(total, k, device=DEVICE, generator=g) * 0.5).to(FP8)
        self.b = (torch.randn(experts * n, k, device=DEVICE, generator=g) * 0.5).to(FP8)
        self.a_scale = torch.rand(total, k // GROUP, device=DEVICE, generator=g) * 0.02 + 0.01
        self.b_scale = torch.rand(experts, n // GROUP, k // GROUP, device=DEVICE, generator=g) * 0.02 + 0.01
        self.out = torch.empty(total, n, device=DEVICE, dtype=torch.bfloat16)
        self.flops = 2.0 * total * n * k
        self.perm = torch.randperm(total, device=DEVICE, generator=g).to(torch.int32)
        self.a_gather = self.c_scatter = False

    def block_experts(self, block_m: int) -> torch.Tensor:
        return torch.arange(self.experts, device=DEVICE, dtype=torch.int32).repeat_interleave(self.rows // block_m)

    def reference_rows(self, expert: int) -> torch.Tensor:
        """Expert ``expert``'s product in the rows of C it lands in (sorted unless C_SCATTER)."""
        r = torch.arange(expert * self.rows, (expert + 1) * self.rows, device=DEVICE)
        src = self.perm[r].long() if self.a_gather is True else r
        a = self.a[src].float() * self.a_scale[src].repeat_interleave(GROUP, dim=1)
        w = self.b[expert * self.n:(expert + 1) * self.n].float()
        w = w * self.b_scale[expert].repeat_interleave(GROUP, dim=0).repeat_interleave(GROUP, dim=1)
        return a @ w.T

    def launcher(self, cfg, mode: str, sms: int):
        bm, bn, gm, warps, stages = cfg
        num_m = self.experts * self.rows // bm
        tiles = num_m * triton.cdiv(self.n, bn)
        step = tiles if mode == "grid" else min(sms, tiles)
        a_desc = TensorDescriptor(self.a, [self.a.shape[0], self.k], [self.k, 1], [bm, GROUP])
        b_desc = TensorDescriptor(self.b, [self.b.shape[0], self.k], [self.k, 1], [bn, GROUP])
        c_desc = TensorDescriptor(self.out, [self.out.shape[0], self.n], [self.n, 1], [bm, bn])
        be = self.block_experts(bm)

        def run():
            grouped_fp8_block[(step,)](a_desc, b_desc, c_desc, self.a_scale, self.b_scale, be, num_m, self.n, self.k,
                                       self.a_scale.stride(0), self.b_scale.stride(0), self.b_scale.stride(1),
                                       self.a, self.out, self.perm, step,
                                       BLOCK_M=bm, BLOCK_N=bn, BLOCK_K=GROUP, GROUP_M=gm, WS=mode == "ws",
                                       A_GATHER={False: 0, True: 1, "rows": 2}[self.a_gather], C_SCATTER=self.c_scatter,
                                       num_warps=warps, num_stages=stages)
        return run


def check(problem: Problem, run) -> float:
    problem.out.zero_()
    run()
    if DEVICE == "cuda":
        torch.cuda.synchronize()
    worst = 0.0
    for e in (0, problem.experts - 1):
        ref = problem.reference_rows(e)
        r = torch.arange(e * problem.rows, (e + 1) * problem.rows, device=DEVICE)
        got = problem.out[problem.perm[r].long() if problem.c_scatter else r].float()
        worst = max(worst, ((got - ref).abs().max() / ref.abs().max()).item())
    return worst


LAYOUTS = {"tma-tma": (False, False), "gather-tma": (True, False), "tma-scatter": (False, True),
           "gather-scatter": (True, True),  # A rows gathered (pointers) or by TMA, C rows scattered or by TMA
           "rows-tma": ("rows", False), "rows-scatter": ("rows", True)}  # A's own rows in order, through pointers


def probe_gemm(name: str, problem: Problem, configs, sms: int, modes: list[str], layouts: list[str]) -> None:
    print(f"\n== {name}: {problem.experts} experts x {problem.rows} rows, N={problem.n}, K={problem.k} "
          f"({problem.flops / 1e9:.0f} GFLOP)", flush=True)
    best = {}
    for cfg, layout, mode in itertools.product(configs, layouts, modes):
        if problem.rows % cfg[0]:
            continue
        problem.a_gather, problem.c_scatter = LAYOUTS[layout]
        mode_name = mode if layout == "tma-tma" else f"{mode} {layout}"
        try:
            run = problem.launcher(cfg, mode, sms)
            err = check(problem, run)
            if err > 2e-2:
                print(f"  {mode_name:10s} {cfg}: WRONG, rel err {err:.3e}", flush=True)
                continue
            t = cold_l2_seconds(run)
        except Exception as exc:  # noqa: BLE001 - a probe reports every failure and goes on
            print(f"  {mode_name:10s} {cfg}: {type(exc).__name__}: {str(exc).splitlines()[0][:150]}", flush=True)
            continue
        tflops = problem.flops / t / 1e12
        print(f"  {mode_name:10s} {cfg}: {t * 1e6:8.1f} us  {tflops:6.0f} TFLOP/s  err {err:.1e}", flush=True)
        if mode_name not in best or t < best[mode_name][0]:
            best[mode_name] = (t, cfg)
    for mode_name, (t, cfg) in best.items():
        print(f"  best {mode_name:10s} {t * 1e6:8.1f} us  {problem.flops / t / 1e12:6.0f} TFLOP/s  {cfg}")


def scaled_mm_ceiling(m: int, n: int, k: int) -> None:
    a = torch.randn(m, k, device=DEVICE).to(FP8)
    b = torch.randn(n, k, device=DEVICE).to(FP8)
    one = torch.ones((), device=DEVICE)
    t = cold_l2_seconds(lambda: torch._scaled_mm(a, b.T, scale_a=one, scale_b=one, out_dtype=torch.bfloat16))
    print(f"  torch._scaled_mm {m}x{n}x{k} (per-tensor scales): {t * 1e6:8.1f} us  {2.0 * m * n * k / t / 1e12:6.0f} TFLOP/s")


def profiled_forwards(kernel, x, weights, routing, forwards: int = 5):
    """torch.profiler's record of ``forwards`` forwards of ``kernel``, after three unrecorded ones."""
    from torch.profiler import ProfilerActivity, profile

    for _ in range(3):
        kernel.apply(x, weights, routing)
    torch.cuda.synchronize()
    with profile(activities=[ProfilerActivity.CUDA]) as prof:
        for _ in range(forwards):
            kernel.apply(x, weights, routing)
        torch.cuda.synchronize()
    return prof


def plugin_profile(preset: str, tokens: int, schemes: list[str]) -> None:
    from moe_core.presets import model, random_inputs, random_layer
    from moe_core.quant import scheme
    from moe_core_triton.kernel import TritonKernel

    for name in schemes:
        cfg, sch = model(preset).config(), scheme(name)
        kernel = TritonKernel(cfg, sch.weight_key, sch.activation_key)
        weights = kernel.prepare_weights(random_layer(cfg, sch, device=DEVICE))
        x, routing = random_inputs(cfg, tokens, device=DEVICE, seed=tokens)
        prof = profiled_forwards(kernel, x, weights, routing)
        events = [e for e in prof.events() if e.device_time_total > 0 and e.device_type.name == "CUDA"]
        per = len(events) // 5
        if not per:
            print(f"  plugin {preset} {name} T={tokens}: {len(events)} CUDA events of {len(prof.events())}; by name:")
            for e in prof.key_averages():
                if e.device_time_total > 0:
                    print(f"    {e.device_time_total / 5:9.1f}  x{e.count // 5}  {e.key[:70]}")
            continue
        print(f"  plugin {preset} {name} T={tokens}, one forward's kernels in order (us, mean of 5):")
        for i in range(per):
            ts = [events[j * per + i].device_time_total for j in range(5)]
            print(f"    {sum(ts) / 5:9.1f}  {events[i].name[:70]}")
        del weights
        torch.cuda.empty_cache()


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--preset", default="qwen3-30b-a3b")
    parser.add_argument("--tokens", type=int, default=4096)
    parser.add_argument("--configs", default="all", help="comma-separated indices into CONFIGS, or all")
    parser.add_argument("--modes", default="grid,persistent,ws")
    parser.add_argument("--layouts", default="tma-tma", help=f"comma-separated, of {', '.join(LAYOUTS)}")
    parser.add_argument("--gemms", default="1,2")
    parser.add_argument("--plugin-schemes", default="unquantized,fp8-block", help="the plugin's layers profiled (empty: none)")
    args = parser.parse_args()
    print(f"torch {torch.__version__}, triton {triton.__version__}, {torch.cuda.get_device_name()}")
    experts, top_k, hidden, inter = SHAPES[args.preset]
    rows = args.tokens * top_k // experts  # the mean rows per expert, every expert alike
    rows = triton.cdiv(rows, 128) * 128
    configs = CONFIGS if args.configs == "all" else [CONFIGS[int(i)] for i in args.configs.split(",")]
    sms = torch.cuda.get_device_properties(0).multi_processor_count
    if args.plugin_schemes:
        try:
            plugin_profile(args.preset, args.tokens, args.plugin_schemes.split(","))
        except Exception:  # noqa: BLE001
            traceback.print_exc()
    for gemm, (n, k) in (("1", (2 * inter, hidden)), ("2", (hidden, inter))):
        if gemm not in args.gemms.split(","):
            continue
        problem = Problem(experts, rows, n, k)
        probe_gemm(f"{args.preset} GEMM{gemm} at {args.tokens} tokens", problem, configs, sms, args.modes.split(","),
                   args.layouts.split(","))
        scaled_mm_ceiling(experts * rows, n, k)
        del problem
        torch.cuda.empty_cache()
    return 0


if __name__ == "__main__":
    sys.exit(main())
