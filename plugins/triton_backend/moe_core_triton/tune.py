"""Tune launch configurations on the GPU at hand and store them as a data file.

    python -m moe_core_triton.tune --preset qwen3-30b-a3b --scheme unquantized,fp8-block \\
        --tokens 1,16,64,256,1024,4096,16384 [--out configs/<device>.json] [--jobs 16] [--fused]

For each (shape, scheme, GEMM, token count) every candidate configuration is timed on random
routing (CUDA events, median, the L2 emptied before each run: moe_core.bench.timing.cold_l2_seconds), then the
fastest again with ``MMA_IN_FLIGHT`` on, and the fastest of all is written; existing entries of the file are kept
unless re-tuned. Each candidate's output is checked against the first candidate's before it is timed. ``--jobs N``
first compiles every case's candidates in N processes at once (:func:`compile_ahead`): compiling takes most of a full
search's time, and runs on one CPU core per candidate.
``--fused`` searches the one-launch layer instead (:func:`tune_fused_case`, unquantized layers, forwards of a PairTable).
"""

from __future__ import annotations

import argparse
import functools
import itertools
import json
import os
import subprocess
import sys
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import replace
from pathlib import Path

from collections.abc import Callable

import torch

from moe_core.bench.timing import cold_l2_seconds
from moe_core.numerics import relative_error, tolerance
from moe_core.presets import model, random_inputs, random_layer
from moe_core.quant import scheme
from moe_core_triton import configs
from moe_core_triton.kernel import SCALE_AFTER_DOT_MAX_BLOCK_M, TritonKernel, has_tma
from moe_core_triton.scratch import new_empty

_TILES = [  # (BLOCK_N, BLOCK_K, num_warps, num_stages)
    (64, 64, 4, 4), (64, 128, 4, 4), (128, 64, 4, 4), (128, 64, 8, 3), (128, 128, 8, 3), (32, 128, 4, 5), (32, 64, 4, 4),
    (128, 128, 8, 4), (256, 64, 8, 4),  # the fastest prefill tiles with TMA_B on the H100 (docs/benchmarks/triton-h100.md)
    (256, 128, 8, 3), (128, 128, 4, 3),  # the fastest fp8 prefill tiles of Qwen3 at 4096 tokens, 64 rows (same file)
    # K steps of 256: Mixtral's fastest decode tiles of int4, int8 and e4m3 codes, 2 to 8% faster GEMM steps than
    # tiles of 128 (docs/benchmarks/weight-only-h100.md, 2026-11-25)
    (64, 256, 4, 4), (64, 256, 4, 6), (128, 256, 8, 4),
]


def candidates(rows_per_expert: float, block_k_limit: int | None, weight_only: bool = False, tma: bool = False,
               swapped_only: bool = False, gate_up: bool = False) -> list[configs.LaunchConfig]:
    """The configurations tried for GEMMs with ``rows_per_expert`` rows per expert on average. SWAP_AB
    (the transposed product) is tried for few rows per expert, and at every size for weight-only schemes,
    whose dequantized weights can then feed the MMA from registers; split K (2 and 4) for decode, at most
    8 rows per expert, where one token's experts give too few tiles to keep every SM busy; with ``tma`` (the
    GPU has it) TMA weight loads for prefill, more than 32 rows per expert, where the GEMMs are compute-bound
    (weight-only schemes dequantize from pointer loads). Rows stop at 128: weight-only tiles of 256 rows, which
    dequantize half as often per FLOP, measured slower on the H100 on K-ordered codes (docs/benchmarks/weight-only-h100.md).
    ``swapped_only``: SWAP_AB alone, for weight-only codes stored in fragment order (the swapped tile was the fastest
    in every full search of them on the H100, same file, 2026-11-25), and 256 rows beyond 128 rows per expert (the
    MMA's N = 256: Mixtral's GEMM2 at 4096 tokens 1 to 26% faster than with 128, same file). ``gate_up`` (a weight-only
    GEMM1): its 256-row tiles are tried with GATE_UP too, one accumulator for gate and up rows (two of 256 rows do not
    fit the registers), so each dequantized weight serves 256 rows as GEMM2's do. Weight-only decode tiles (at most 32
    rows per expert) are tried with ``GROUP_STEPS`` too, which ``TritonKernel.as_run`` keeps only where the K step
    spans several scale groups."""
    if rows_per_expert <= 8:
        block_ms = (16,)
    elif rows_per_expert <= 32:
        block_ms = (16, 32)
    elif rows_per_expert <= 128:
        block_ms = (32, 64)
    else:
        block_ms = (64, 128, 256) if swapped_only else (64, 128)
    swaps = (True,) if swapped_only else (False, True) if rows_per_expert <= 32 or weight_only else (False,)
    splits = (1, 2, 4) if rows_per_expert <= 8 else (1,)
    tmas = (False, True) if tma and rows_per_expert > 32 and not weight_only else (False,)
    out = []
    gate_ups = (False, True) if gate_up else (False,)
    group_steps = (False, True) if weight_only and rows_per_expert <= 32 else (False,)
    for bm, (bn, bk, warps, stages), swap, split, tma_b, one_acc, steps in itertools.product(block_ms, _TILES, swaps, splits, tmas,
                                                                                          gate_ups, group_steps):
        if (block_k_limit is not None and bk > block_k_limit) or (one_acc and bm < 256):
            continue
        out.append(configs.LaunchConfig(bm, bn, bk, 1 if bm <= 32 else 8, warps, stages, swap, split, tma_b, one_acc, steps))
    return out


def refinements(lc: configs.LaunchConfig, tma: bool) -> list[configs.LaunchConfig]:
    """``lc`` (a tuned entry, or the heuristic's choice) and its neighbours: one pipeline stage more, twice the
    columns per tile (up to 256), twice the rows (up to 128, in 8 warps), and with ``tma`` (the GPU has it) each
    of them with TMA_B off and on, for decode tiles with GROUP_STEPS off and on (``TritonKernel.as_run`` drops it
    where it changes nothing), and each with MMA_IN_FLIGHT off and on (which tile gains from it is up to the compiler:
    gemm.py). For re-tuning after a kernel change with a few candidates per GEMM instead of the whole search."""
    out = []
    for tma_b, stages, block_n, block_m, steps, in_flight in itertools.product(
            (False, True) if tma else (False,), (lc.num_stages, lc.num_stages + 1), (lc.BLOCK_N, min(2 * lc.BLOCK_N, 256)),
            (lc.BLOCK_M, max(lc.BLOCK_M, min(2 * lc.BLOCK_M, 128))),
            (lc.GROUP_STEPS, not lc.GROUP_STEPS) if lc.BLOCK_M <= SCALE_AFTER_DOT_MAX_BLOCK_M else (lc.GROUP_STEPS,),
            (lc.MMA_IN_FLIGHT, not lc.MMA_IN_FLIGHT)):
        warps = lc.num_warps if block_m == lc.BLOCK_M else max(lc.num_warps, 8)
        out.append(replace(lc, TMA_B=tma_b, num_stages=stages, BLOCK_N=block_n, BLOCK_M=block_m, num_warps=warps,
                           GROUP_STEPS=steps, MMA_IN_FLIGHT=in_flight))
    return list(dict.fromkeys(out))


def cuda_median_seconds(run) -> float:
    """The median GPU time of ``run`` in seconds, the L2 emptied before each run (:func:`cold_l2_seconds`)."""
    return cold_l2_seconds(run, warmup_ms=5, rep_ms=25)


def tune_case(preset: str, scheme_name: str, tokens: int, seed: int = 0, *, device: str = "cuda", refine: bool = False,
              timer: Callable[[Callable[[], None]], float] = cuda_median_seconds) -> dict[int, configs.LaunchConfig]:
    """Best config per GEMM (1, 2) for one (shape, scheme, token count). Each candidate runs its GEMM step as
    a CUDA graph of a forward does (``TritonKernel._run_gemm1`` / ``_run_gemm2``): GEMM1 with the quantization passes
    of its input and of the intermediate and its gated activation, GEMM2 with the router weight and the top-k
    reduction, so split-K candidates pay for their extra pass and atomics, and a GEMM1 that quantizes in its
    epilogue gains the pass it saves. GEMM1 is tuned first; a GEMM2 candidate reads GEMM1's block table where a forward
    would (``TritonKernel.shares_table``), else it is timed with the second table a forward then builds. The candidates
    are :func:`candidates`, then the fastest of them with ``MMA_IN_FLIGHT`` on (one more timing per GEMM instead of
    twice the search: gemm.py), or with ``refine`` the :func:`refinements` of the config the layer picks now.
    ``timer(run)`` -> seconds."""
    sch = scheme(scheme_name)
    cfg = model(preset).config()
    kernel = TritonKernel(cfg, sch.weight_key, sch.activation_key)
    weights = kernel.prepare_weights(random_layer(cfg, sch, device=device, seed=seed))
    x, routing = random_inputs(cfg, tokens, device=device, seed=seed + tokens)
    rows = tokens * cfg.top_k
    i, h = cfg.intermediate_size, cfg.hidden_size
    a2, a2_scale = kernel._quantize(torch.randn(rows, i, device=device).to(cfg.dtype), weights.a2_scale, new_empty)
    steps = {  # gemm: (its reduction size, its step given a GemmLaunch and a block table)
        1: (h, lambda g, table: kernel._run_gemm1(g, x, weights, table, rows, cfg.top_k, new_empty)),
        2: (i, lambda g, table: kernel._run_gemm2(g, a2, a2_scale, weights, table, routing, routing.topk_weights, None, new_empty, None)),
    }

    pairs = kernel.pair_table_pairs(rows, batched=False)  # a forward of few pairs builds no table (PairTable)

    def with_its_own_table(g, table):
        """GEMM2's step when it cannot read GEMM1's table: a forward builds its table too."""
        return steps[2][1](g, kernel.rows_of(g, routing.topk_ids))

    budget = tolerance(sch.activation_key, cfg.dtype)  # fp8 intermediates: one flipped rounding moves a value 1/16
    here = torch.device(device)
    tma = has_tma(here)
    best = {}
    for gemm, (k, step) in steps.items():
        started = time.monotonic()
        timings = []
        reference = None
        if refine:
            n = i if gemm == 1 else h
            tried = refinements(kernel._config(here, rows, n, k, gemm, tokens), tma)
        else:
            tried = candidates(rows / cfg.num_experts, kernel.block_k_limit, kernel.weight_only is not None, tma, kernel.codes_permuted(k),
                               gate_up=gemm == 1 and kernel.weight_only is not None)

        def time_candidate(lc: configs.LaunchConfig) -> None:
            """Run ``lc``'s step once (checked against the first candidate's output), then time it into ``timings``."""
            nonlocal reference
            shared = gemm == 2 and kernel.shares_table(best[1], lc, False, pairs)
            launch = kernel.gemm_launch(lc, gemm, weighted=True, batched=False, pairs=pairs, table_m=best[1].BLOCK_M if shared else None)
            table = kernel.rows_of(launch, routing.topk_ids)
            own_table = gemm == 2 and launch.table_m != best[1].BLOCK_M
            run = functools.partial(with_its_own_table if own_table else step, launch, table)
            try:
                out = run()
            except Exception as exc:  # noqa: BLE001 - e.g. out of shared memory: not a candidate
                print(f"  skip {lc}: {type(exc).__name__}", file=sys.stderr)
                return
            if reference is None:
                reference = values(out)
            else:
                drift = relative_error(values(out), reference)
                if drift > budget:
                    raise AssertionError(f"config {lc} changes the result of GEMM{gemm} (relative difference {drift:.3g} "
                                         f"> {budget:.3g}, the scheme's numerics budget)")
            timings.append((timer(run), lc))

        for lc in dict.fromkeys(kernel.as_run(c, k, here, gemm) for c in tried):
            time_candidate(lc)
        if not refine and timings:  # the full search's winner with MMA_IN_FLIGHT on too (refinements try every candidate so)
            time_candidate(replace(fastest(timings)[1], MMA_IN_FLIGHT=True))
        seconds, best[gemm] = fastest(timings)
        print(f"{preset} {scheme_name} T={tokens} GEMM{gemm}: {seconds * 1e6:.1f} us with {best[gemm]} (fastest {fastest_by_variant(timings)}; "
              f"{len(timings)} candidates in {time.monotonic() - started:.0f} s)", flush=True)
    return best


#: (COLS, num_warps, num_stages) of the one-launch layer's candidates (BLOCK_M 16, BLOCK_K and BLOCK_H 128, BLOCK_N the
#: power of two at or above COLS). On the H100, a wider search for Qwen3-30B-A3B at 1 and 2 tokens (228 candidates: K and
#: H steps of 64 to 256, 3 to 6 stages) found its fastest with K and H steps of 128, 8 warps and 3 or 4 stages; its
#: twelve fastest, other steps among them, were within 2% (1 token) and 4% (2 tokens) of that
#: (docs/benchmarks/raw/2026-11-26-fused-decode-layer/fused_sweep3.txt).
_FUSED_COLS = (16, 24, 32, 48, 64, 96, 128)
_FUSED_LAUNCH = ((4, 3), (4, 4), (8, 3), (8, 4))
#: Programs per SM a one-launch candidate may have: fewer leave SMs idle, more make many waves of short programs.
_FUSED_PROGRAMS_PER_SM = (0.5, 3.0)
#: How much faster than the two GEMMs the one-launch layer must be to be written: its float32 atomics vary the last
#: bits of a result from run to run (as SPLIT_K_MARGIN).
FUSED_MARGIN = 0.03


def fused_candidates(blocks: int, intermediate: int, sms: int) -> list[configs.FusedConfig]:
    """The one-launch layer's candidates for ``blocks`` live pair blocks of a layer of ``intermediate`` columns on a
    GPU of ``sms`` SMs: :data:`_FUSED_COLS` whose programs, blocks x cdiv(I, COLS), are within
    :data:`_FUSED_PROGRAMS_PER_SM` of the SMs, each with :data:`_FUSED_LAUNCH`."""
    low, high = _FUSED_PROGRAMS_PER_SM
    return [configs.FusedConfig(16, 1 << (cols - 1).bit_length() if cols > 16 else 16, cols, 128, 128, warps, stages)
            for cols in _FUSED_COLS if low * sms <= blocks * -(-intermediate // cols) <= high * sms
            for warps, stages in _FUSED_LAUNCH]


def tune_fused_case(preset: str, scheme_name: str, tokens: int, seed: int = 0, *, device: str = "cuda",
                    timer: Callable[[Callable[[], None]], float] = cuda_median_seconds) -> configs.FusedConfig | None | bool:
    """The one-launch layer's entry for one (shape, scheme, token count): the fastest :func:`fused_candidates` config
    when it beats the two GEMMs (the layer's forward with its tuned tiles) by :data:`FUSED_MARGIN`, else None; False
    where the forward cannot take it (a quantized scheme, more pairs than a PairTable takes): nothing to write.
    Whole forwards are timed (eager, the L2 emptied first), each candidate's output checked against the two GEMMs'."""
    sch = scheme(scheme_name)
    cfg = model(preset).config()
    kernel = TritonKernel(cfg, sch.weight_key, sch.activation_key)
    here = torch.device(device)
    rows = tokens * cfg.top_k
    kernel.fused_override = configs.FusedConfig(16, 16, 16, 128, 128, 4, 3)
    if kernel._fused_plan(here, rows, tokens, True, False) is None:
        return False
    weights = kernel.prepare_weights(random_layer(cfg, sch, device=device, seed=seed))
    x, routing = random_inputs(cfg, tokens, device=device, seed=seed + tokens)

    def run(fc):
        kernel.fused_override = fc
        return lambda: kernel.apply(x, weights, routing)

    two_gemms = run(False)
    reference = two_gemms().float()
    baseline = timer(two_gemms)
    blocks = len(torch.unique(routing.topk_ids))  # one block of 16 rows per expert at these sizes
    sms = torch.cuda.get_device_properties(here).multi_processor_count if here.type == "cuda" else 132
    timings = []
    for fc in fused_candidates(blocks, cfg.intermediate_size, sms):
        forward = run(fc)
        try:
            drift = relative_error(forward().float(), reference)
        except Exception as exc:  # noqa: BLE001 - e.g. out of shared memory: not a candidate
            print(f"  skip {fc}: {type(exc).__name__}", file=sys.stderr)
            continue
        if drift > tolerance(None, cfg.dtype):
            raise AssertionError(f"fused config {fc} changes the layer's result (relative difference {drift:.3g})")
        timings.append((timer(forward), fc))
    seconds, best = min(timings, key=lambda t: t[0]) if timings else (float("inf"), None)
    chosen = best if seconds < baseline * (1 - FUSED_MARGIN) else None
    print(f"{preset} {scheme_name} T={tokens} fused: {seconds * 1e6:.1f} us with {best} against the two GEMMs' "
          f"{baseline * 1e6:.1f} us: {'fused' if chosen else 'two GEMMs'} ({len(timings)} candidates)", flush=True)
    return chosen


#: How much faster than the fastest unsplit candidate a split-K one must be to be chosen: its float32
#: atomics add the partial sums in a different order on every run, so the result varies in its last bits.
SPLIT_K_MARGIN = 0.03


def fastest(timings: list[tuple[float, configs.LaunchConfig]]) -> tuple[float, configs.LaunchConfig]:
    """The fastest (seconds, config) of ``timings``; a split-K config only when it beats every unsplit one
    by more than SPLIT_K_MARGIN (a deterministic result is worth a few percent)."""
    by_time = sorted(timings, key=lambda t: t[0])
    unsplit = [t for t in by_time if t[1].SPLIT_K == 1]
    if unsplit and unsplit[0][0] <= by_time[0][0] * (1 + SPLIT_K_MARGIN):
        return unsplit[0]
    return by_time[0]


def fastest_by_variant(timings: list[tuple[float, configs.LaunchConfig]]) -> str:
    """The fastest time of each (SWAP_AB, SPLIT_K, TMA_B, GATE_UP) variant among ``timings``, e.g. "unswapped 30.1 us,
    swapped split 2 28.0 us, unswapped tma 25.3 us, swapped gate-up 24.0 us", so the log shows what each option is worth
    at this size."""
    fastest: dict[tuple[bool, int, bool, bool], float] = {}
    for seconds, lc in timings:
        variant = (lc.SWAP_AB, lc.SPLIT_K, lc.TMA_B, lc.GATE_UP)
        fastest[variant] = min(seconds, fastest.get(variant, seconds))
    return ", ".join(f"{'swapped' if swap else 'unswapped'}{f' split {split}' if split > 1 else ''}{' tma' if tma else ''}"
                     f"{' gate-up' if gate_up else ''} {t * 1e6:.1f} us" for (swap, split, tma, gate_up), t in sorted(fastest.items()))


def values(out: torch.Tensor | tuple[torch.Tensor, torch.Tensor | None]) -> torch.Tensor:
    """A GEMM step's result as float32 values: GEMM2's output, or GEMM1's (intermediate, scales), dequantized
    (scales [rows, groups] of equal runs of columns, or [1, 1])."""
    if isinstance(out, torch.Tensor):
        return out.float()
    codes, scales = out
    if scales is None:
        return codes.float()
    group = -(-codes.shape[1] // scales.shape[1])
    return codes.float() * scales.repeat_interleave(group, dim=1)[:, : codes.shape[1]]


def write_atomically(path: Path, text: str) -> None:
    """Replace ``path`` with ``text`` in one rename, so a tuning run stopped at any moment leaves the
    previous complete file or the new one, never half of it."""
    partial = path.with_name(path.name + ".partial")
    partial.write_text(text)
    partial.replace(path)


def untimed(run) -> float:
    """The timer of ``--compile-only``: times nothing (the candidate already ran once, which compiled it)."""
    return 0.0


def compile_ahead(cases: list[tuple[str, str, int]], refine: bool, jobs: int, fused: bool = False) -> None:
    """Compile every candidate of ``cases`` (preset, scheme, tokens) into Triton's on-disk cache in ``jobs``
    processes at once (``--compile-only``, one per case), so the timed search that follows in this process finds
    them compiled. Compiling takes most of a search's time and one CPU core per candidate: on the 16-core H100
    machine, 16 cases of about 130 candidates compiled in 397 s against about 30 minutes one after another
    (docs/benchmarks/weight-only-h100.md, 2026-11-25). Each process holds its own layer on the GPU. A case that
    fails here is only reported: the timed search runs it again and raises."""
    started = time.monotonic()
    env = {**os.environ, "OMP_NUM_THREADS": "1"}

    def compile_case(case):
        preset, scheme_name, tokens = case
        command = [sys.executable, "-m", "moe_core_triton.tune", "--preset", preset, "--scheme", scheme_name,
                   "--tokens", str(tokens), "--compile-only", *(["--refine"] if refine else []), *(["--fused"] if fused else [])]
        done = subprocess.run(command, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
        if done.returncode:
            last = (done.stderr.strip().splitlines() or ["no message"])[-1]
            print(f"  compiling {preset} {scheme_name} T={tokens} failed ({last}); the timed search will run it again", file=sys.stderr)

    with ThreadPoolExecutor(max_workers=jobs) as pool:
        list(pool.map(compile_case, cases))
    print(f"compiled the candidates of {len(cases)} cases in {jobs} processes in {time.monotonic() - started:.0f} s", flush=True)


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--preset", required=True, help="comma-separated model presets")
    parser.add_argument("--scheme", required=True, help="comma-separated schemes")
    parser.add_argument("--tokens", default="1,16,64,256,1024,4096,16384")
    parser.add_argument("--out", help="data file (default: configs/<this device>.json in the package)")
    parser.add_argument("--refine", action="store_true", help="try only the current choice and its neighbours (see refinements())")
    parser.add_argument("--jobs", type=int, default=1,
                        help="compile the candidates of every case in this many processes at once first (compile_ahead())")
    parser.add_argument("--compile-only", action="store_true", help="run each candidate once to compile it; time nothing, write nothing")
    parser.add_argument("--fused", action="store_true", help="search the one-launch layer (tune_fused_case()) instead of the GEMMs' tiles")
    args = parser.parse_args(argv)
    if args.jobs < 1:
        parser.error(f"--jobs must be at least 1, got {args.jobs}")
    cases = list(itertools.product(args.preset.split(","), args.scheme.split(","), [int(t) for t in args.tokens.split(",")]))
    if args.compile_only:
        for case in cases:
            if args.fused:
                tune_fused_case(*case, timer=untimed)
            else:
                tune_case(*case, refine=args.refine, timer=untimed)
        return 0
    if args.jobs > 1:
        compile_ahead(cases, args.refine, args.jobs, args.fused)
    path = Path(args.out) if args.out else configs.CONFIG_DIR / configs.device_file_name(torch.cuda.get_device_name())
    data = json.loads(path.read_text()) if path.exists() else {}
    for preset, scheme_name, tokens in cases:
        cfg = model(preset).config()
        if args.fused:
            entry = tune_fused_case(preset, scheme_name, tokens)
            if entry is not False:
                key = configs.shape_key(cfg.num_experts, cfg.intermediate_size, cfg.hidden_size, scheme_name, "fused")
                data.setdefault(key, {})[str(tokens)] = entry.to_dict() if entry is not None else None
                write_atomically(path, json.dumps(data, indent=1, sort_keys=True))
            continue
        best = tune_case(preset, scheme_name, tokens, refine=args.refine)
        for gemm, lc in best.items():
            n, k = (cfg.intermediate_size, cfg.hidden_size) if gemm == 1 else (cfg.hidden_size, cfg.intermediate_size)
            data.setdefault(configs.shape_key(cfg.num_experts, n, k, scheme_name, gemm), {})[str(tokens)] = lc.to_dict()
        write_atomically(path, json.dumps(data, indent=1, sort_keys=True))
    print(f"wrote {path}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
