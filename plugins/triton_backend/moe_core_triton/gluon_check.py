"""The GPU check of ``triton_ws_sm90`` (ws_decode.py) on an sm_90 GPU, in one command of a few minutes:

    bash scripts/bootstrap.sh python -m moe_core_triton.gluon_check     # results under $OUT (or ./out)

1. ``compile``: the kernel compiles on this machine for sm_90 and its PTX holds ``setmaxnreg``, ``wgmma.mma_async``,
   ``cp.async.bulk.tensor`` and ``mbarrier.try_wait`` (:mod:`moe_core_triton.ws_compile`);
2. ``first forward``: one forward of a small layer, under a watchdog (a wrong barrier phase hangs the GPU: the
   process then exits with the stacks of its threads after :data:`HANG_S` seconds instead of waiting for ever);
3. ``numerics``: against moe-core's reference backend (``conformance.check_numerics``) at 1, 7, 16 and 64 tokens, for
   Qwen3-30B-A3B's layer in bfloat16 and a small float16 layer; every forward must have taken the Gluon layer;
4. ``few programs``: the small layer at 1, 9 and 64 tokens with three programs, each running several work items
   (one pair per block, and block tables), against the reference;
5. ``robustness``: moe-core's robustness cases (invalid ids dropped and counted, NaN tokens, zero tokens...) and 200
   garbage routings, at 1 token (one block per pair, invalid ids counted in the kernel) and 9 (a block table);
6. ``repeat``: 30 forwards of the same inputs agree with the first within the layer tolerance (the float32 sums and
   the grid barrier's arrival count are left at zero for the next launch);
   ``replay``: eager forwards replayed from the record of an earlier one (replay.py: direct launches, the weights'
   descriptors made anew) agree with full forwards and the reference on new inputs, at 1, 9 and 64 tokens;
7. ``graph``: capture in a CUDA graph, replay on new inputs, compare with the reference, at 1, 16 and 64 tokens;
8. ``sweep``: graph-replay times of the layer with shallower rings than its plan's, and at one token with a block
   table in place of one block per pair: what the plan is worth against its neighbours (reported, not judged);
9. ``bench``: ``moe-core bench`` of ``triton_ws_sm90`` and ``triton`` (graph replays and eager calls), Qwen3-30B-A3B
   bfloat16 at 1, 2, 4, 8, 16 and 64 tokens, each time and share of the copy bandwidth, against the targets at 1, 16
   and 64 (85% at 1 token, 95% at 16 and 64):
   targets print as TARGET MET / TARGET MISSED, which do not fail the check.

One ``PASS`` or ``FAIL`` line per check; ``$OUT/gluon_check.json`` holds every record, ``$OUT/bench.json`` the bench's.
Exit status 0 when every check passed, 1 otherwise, 2 when this machine cannot run the kernel at all.

    bash scripts/bootstrap.sh python -m moe_core_triton.gluon_check --consan

runs only ``consan`` instead: a forward of a small float16 layer (one token, two programs of two work items each, the
ring wrapping within each item) compiled with triton's concurrency sanitizer (``TRITON_INSTRUMENTATION_MODE=consan``),
which stops the kernel at a missing barrier wait or a buffer reused before its readers are done, then compared with the
reference (``$OUT/gluon_check_consan.json``), hence a command of its own. With triton 3.6.0 it does not finish: the
instrumented kernel's PTX is about 560 000 lines with its debug sections, and on an H200 machine ptxas was still at
it after 540 s at its default optimisation and after 430 s with ``DISABLE_PTXAS_OPT=1``
(docs/benchmarks/gluon-decode-h200.md); the watchdog then prints the stacks.
"""

from __future__ import annotations

import argparse
import contextlib
import dataclasses
import faulthandler
import json
import os
import subprocess
import sys
import time
import traceback
from pathlib import Path

import torch

from moe_core.config import MoEConfig
from moe_core.numerics import layer_tolerance, relative_error
from moe_core.presets import random_inputs, random_layer
from moe_core.quant import scheme
from moe_core.reference.kernel import ReferenceKernel
from moe_core.testing import conformance, robustness
from moe_core_triton import ws_decode
from moe_core_triton.replay import counted_replays
from moe_core_triton.ws_compile import compile_plan
from moe_core_triton.ws_kernel import WarpSpecializedKernel
from moe_core_triton.ws_plan import DecodePlan, decode_plan
from moe_core_triton.ws_spec import ARCHITECTURE, WS_SM90, installed_triton_reason

QWEN3 = MoEConfig(num_experts=128, top_k=8, hidden_size=2048, intermediate_size=768, dtype=torch.bfloat16)
SMALL_FP16 = MoEConfig(num_experts=16, top_k=4, hidden_size=512, intermediate_size=256, dtype=torch.float16)
NUMERICS_TOKENS = (1, 7, 16, 64)
GRAPH_TOKENS = (1, 16, 64)
#: The bench's token counts: the targets' and those between 1 and 16, whose ranking bucket the 1-token result would
#: otherwise decide alone.
BENCH_TOKENS = (1, 2, 4, 8, 16, 64)
#: Share of the copy bandwidth each of these token counts should reach (percent); the compile and sweep steps take them.
TARGETS = {1: 85.0, 16: 95.0, 64: 95.0}
#: Seconds a step may take before the watchdog ends the process (compiles included).
HANG_S = 240
#: The same for the consan step, whose instrumented kernel ptxas takes longer than this to build.
CONSAN_HANG_S = 540


class Check:
    """Runs named steps, prints one PASS/FAIL line each and keeps their records."""

    def __init__(self):
        self.records: list[dict] = []
        self.failed = 0

    def step(self, name: str, fn, hang_s: float = HANG_S) -> object:
        print(f"... {name}", flush=True)
        faulthandler.dump_traceback_later(hang_s, exit=True)
        started = time.perf_counter()
        try:
            detail = fn()
            ok, why = True, ""
        except Exception as exc:  # noqa: BLE001 - every step reports, then the next one runs
            detail, ok, why = None, False, f"{type(exc).__name__}: {exc}"
            traceback.print_exc()
        finally:
            faulthandler.cancel_dump_traceback_later()
        seconds = time.perf_counter() - started
        self.failed += not ok
        self.records.append({"check": name, "ok": ok, "seconds": round(seconds, 1), "detail": detail, "error": why})
        print(f"{'PASS' if ok else 'FAIL'}  {name} ({seconds:.1f} s){': ' + str(detail) if ok and detail else ''}{': ' + why if why else ''}",
              flush=True)
        return detail


    def finish(self, path: Path) -> int:
        """Write the records to ``path``, print the tally; the exit status (0: every step passed)."""
        import triton

        path.write_text(json.dumps({"device": torch.cuda.get_device_name(), "torch": torch.__version__, "triton": triton.__version__,
                                    "checks": self.records}, indent=1, default=str))
        print(f"gluon_check: {len(self.records) - self.failed} of {len(self.records)} checks passed", flush=True)
        return 1 if self.failed else 0


class _CountingLayer:
    """Counts the forwards that reach :func:`ws_decode.ws_decode_layer` (the kernel imports it at each forward)."""

    def __init__(self):
        self.calls, self._layer = 0, ws_decode.ws_decode_layer

    def __call__(self, *args, **kwargs):
        self.calls += 1
        return self._layer(*args, **kwargs)


def check_compile() -> str:
    lines = []
    for tokens in TARGETS:
        compiled = compile_plan(tokens)
        assert not compiled.problems, compiled.problems
        lines.append(compiled.line())
    return " | ".join(lines)


def check_first_forward() -> str:
    return f"rel. error {conformance.check_against_reference(WarpSpecializedKernel, SMALL_FP16, 'unquantized', *random_inputs(SMALL_FP16, 3, device='cuda')):.3g}"


@contextlib.contextmanager
def few_programs(programs: int):
    """Launches of the decode layer get at most ``programs`` programs (as on a GPU of that many SMs): each program then
    runs several work items, its ring's steps and phases carried from one item to the next."""
    max_programs = ws_decode.max_programs
    ws_decode.max_programs = lambda device: programs
    try:
        yield
    finally:
        ws_decode.max_programs = max_programs


def check_few_programs() -> dict:
    with few_programs(3):
        return {tokens: conformance.check_against_reference(WarpSpecializedKernel, SMALL_FP16, "unquantized",
                                                            *random_inputs(SMALL_FP16, tokens, device="cuda"))
                for tokens in (1, 9, 64)}


def check_numerics(counter: _CountingLayer) -> list[dict]:
    reg = conformance.registry_with("moe_core_triton.plugin", name="triton")
    before = counter.calls
    records = conformance.check_numerics(reg, WS_SM90.name, device="cuda", configs=[QWEN3, SMALL_FP16], tokens=NUMERICS_TOKENS)
    ran = [r for r in records if "rel_err" in r]
    assert len(ran) == 2 * len(NUMERICS_TOKENS), f"cases skipped: {[r for r in records if 'skipped' in r]}"
    assert counter.calls - before == len(ran), f"{counter.calls - before} of {len(ran)} forwards took the Gluon layer"
    return [{k: r[k] for k in ("tokens", "rel_err", "tolerance")} for r in ran]


def check_robustness(counter: _CountingLayer) -> dict:
    reg = conformance.registry_with("moe_core_triton.plugin", name="triton")
    before, outcomes = counter.calls, {}
    for tokens in (1, 9):
        records = robustness.check_robustness(reg, WS_SM90.name, device="cuda", tokens=tokens, garbage_calls=200)
        outcomes[tokens] = {r["case"]: r["outcome"] for r in records}
    assert counter.calls > before, "no forward took the Gluon layer"
    return outcomes


def check_repeat(tokens: int = 16, forwards: int = 30) -> str:
    sch = scheme("unquantized")
    kernel = WarpSpecializedKernel(QWEN3, None, None)
    weights = kernel.prepare_weights(random_layer(QWEN3, sch, device="cuda"))
    x, routing = random_inputs(QWEN3, tokens, device="cuda")
    first = kernel.apply(x, weights, routing)
    worst = max(relative_error(kernel.apply(x, weights, routing), first) for _ in range(forwards))
    assert worst <= layer_tolerance(None, QWEN3), f"forwards of the same inputs differ by {worst:.3g}"
    return f"{forwards} forwards at {tokens} tokens, largest difference from the first {worst:.3g}"


#: Token counts of the replay check: one block per pair (one launch), and block tables (a table launch, then the layer's).
REPLAY_TOKENS = (1, 9, 64)
#: Largest relative difference of a replayed forward from a full one: the float32 atomics add in any order (``repeat``).
REPLAY_DIFFERENCE = 1e-3


def check_replay(counter: _CountingLayer, forwards: int = 4) -> dict:
    sch = scheme("unquantized")
    raw = random_layer(QWEN3, sch, device="cuda", seed=3)
    oracle = ReferenceKernel(QWEN3, None, None)
    oracle_weights = oracle.prepare_weights(raw)
    differences = {}
    with counted_replays() as replays:
        for tokens in REPLAY_TOKENS:
            kernel, full = WarpSpecializedKernel(QWEN3, None, None), WarpSpecializedKernel(QWEN3, None, None)
            full.replays = False
            weights = kernel.prepare_weights(raw)
            before, worst = counter.calls, 0.0
            for seed in range(forwards):  # the first runs in full, the second records, the others replay
                x, routing = random_inputs(QWEN3, tokens, device="cuda", seed=100 * tokens + seed)
                got = kernel.apply(x, weights, routing)
                worst = max(worst, relative_error(got, full.apply(x, weights, routing)))
                err = relative_error(got, oracle.apply(x, oracle_weights, routing))
                assert err <= layer_tolerance(None, QWEN3), f"{tokens} tokens, forward {seed}: rel. error {err:.3g} vs the reference"
            assert worst <= REPLAY_DIFFERENCE, f"{tokens} tokens: replayed and full forwards differ by {worst:.3g}"
            assert counter.calls - before == forwards + 2, f"{tokens} tokens: {counter.calls - before} full forwards"
            differences[tokens] = worst
    assert replays == [True] * (len(REPLAY_TOKENS) * (forwards - 2)), f"replays launched: {replays}"
    return {"largest difference from full forwards": differences, "replays": len(replays)}


def check_graphs() -> dict:
    return {t: conformance.check_graph_replay(WarpSpecializedKernel, QWEN3, "unquantized", tokens=t) for t in GRAPH_TOKENS}


#: Ring depths the sweep tries (those that fit beside the plan's rows).
SWEEP_STAGES = (4, 6, 8)


def _with_plan(plan: DecodePlan) -> type[WarpSpecializedKernel]:
    """The kernel running ``plan`` wherever it would run the Gluon layer."""

    def decode_plan_for(self, *args):
        return plan if WarpSpecializedKernel.decode_plan_for(self, *args) is not None else None

    return type(f"WarpSpecializedKernel[{plan}]", (WarpSpecializedKernel,), {"decode_plan_for": decode_plan_for})


def check_sweep() -> list[dict]:
    from triton.testing import do_bench_cudagraph

    raw = random_layer(QWEN3, scheme("unquantized"), device="cuda")
    records = []
    for tokens in TARGETS:
        x, routing = random_inputs(QWEN3, tokens, device="cuda")
        weight_bytes = routing.topk_ids.unique().numel() * 3 * QWEN3.hidden_size * QWEN3.intermediate_size * x.element_size()
        default = decode_plan(tokens, QWEN3.hidden_size, QWEN3.intermediate_size, x.element_size())
        variants = {dataclasses.replace(default, stages=s) for s in SWEEP_STAGES if s <= default.stages}
        variants |= {dataclasses.replace(default, pair_items=False)} if default.pair_items else set()
        for plan in sorted(variants, key=repr):
            kernel = _with_plan(plan)(QWEN3, None, None)
            weights = kernel.prepare_weights(raw)
            seconds = do_bench_cudagraph(lambda: kernel.apply(x, weights, routing), return_mode="median") / 1e3
            records.append({"tokens": tokens, **dataclasses.asdict(plan), "plan_default": plan == default, "time_us": round(seconds * 1e6, 2),
                            "weights_TBps": round(weight_bytes / seconds / 1e12, 3)})
            print(f"      {records[-1]}", flush=True)
    return records


def check_bench(out: Path) -> dict:
    command = [sys.executable, "-m", "moe_core.cli", "bench", "--preset", "qwen3-30b-a3b", "--dtype", "bfloat16", "--tokens",
               ",".join(map(str, BENCH_TOKENS)), "--backends", f"triton,{WS_SM90.name}", "--peers", "", "--quiet",
               "--json", str(out / "bench.json")]
    done = subprocess.run(command, capture_output=True, text=True, timeout=HANG_S)
    (out / "bench.txt").write_text(" ".join(command) + "\n" + done.stdout + done.stderr)
    print(done.stdout, flush=True)
    assert done.returncode == 0, done.stderr[-2000:]
    rows = [row for case in json.loads((out / "bench.json").read_text())["cases"] for row in case["rows"]]
    table = {(row["backend"], row["tokens"]): row for row in rows}
    summary = {}
    for tokens in BENCH_TOKENS:
        mine, base = table.get((WS_SM90.name, tokens)), table.get(("triton", tokens))
        assert mine and mine["status"] == "ok", f"{WS_SM90.name} at {tokens} tokens: {mine}"
        pct, target = mine["pct_copy"], TARGETS.get(tokens)
        speedup = base["time_s"] / mine["time_s"] if base and base["status"] == "ok" else None
        summary[tokens] = {"time_us": mine["time_s"] * 1e6, "pct_copy": pct, "mode": mine["mode"], "triton_time_us":
                           base["time_s"] * 1e6 if base and base["time_s"] else None, "speedup_vs_triton": speedup,
                           "eager_us": _us(mine["eager_time_s"]), "triton_eager_us": _us(base and base["eager_time_s"])}
        verdict = "" if target is None else f"TARGET {'MET' if pct >= target else 'MISSED'}  "
        print(f"{verdict}{tokens} tokens: {mine['time_s'] * 1e6:.1f} us ({mine['mode']}), {pct:.1f}% of copy"
              f"{'' if target is None else f' (target {target:.0f}%)'}, {speedup and f'{speedup:.2f}x'} triton; eager "
              f"{summary[tokens]['eager_us']} us against triton's {summary[tokens]['triton_eager_us']}", flush=True)
    return summary


def _us(seconds: float | None) -> float | None:
    return None if seconds is None else round(seconds * 1e6, 1)


#: The consan layer: 16 + 8 ring steps per work item, more than any plan's slots, so the ring wraps within an item.
CONSAN_LAYER = MoEConfig(num_experts=8, top_k=2, hidden_size=1024, intermediate_size=128, dtype=torch.float16)


def check_consan() -> dict:
    import triton

    triton.knobs.compilation.instrumentation_mode = "consan"  # before the first compile: part of every kernel's cache key
    triton.set_allocator(lambda size, alignment, stream: torch.empty(size, dtype=torch.int8, device="cuda"))  # its state
    with few_programs(2):  # 4 work items: two per program
        err = conformance.check_against_reference(WarpSpecializedKernel, CONSAN_LAYER, "unquantized",
                                                  *random_inputs(CONSAN_LAYER, 1, device="cuda"))
    return {"rel_err": err}


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--consan", action="store_true", help="only the forwards under triton's concurrency sanitizer")
    args = parser.parse_args(argv)
    out = Path(os.environ.get("OUT") or "out")
    out.mkdir(parents=True, exist_ok=True)
    import triton

    cap = torch.cuda.get_device_capability() if torch.cuda.is_available() else None
    print(f"device {torch.cuda.get_device_name() if cap else 'none'} cc {cap} | torch {torch.__version__} | triton {triton.__version__}",
          flush=True)
    reason = installed_triton_reason() or (None if cap == ARCHITECTURE else f"needs an sm_90 GPU, this is {cap}")
    if reason:
        print(f"FAIL  setup: {reason}", flush=True)
        return 2
    counter = _CountingLayer()
    ws_decode.ws_decode_layer = counter
    check = Check()
    if args.consan:
        check.step("consan", check_consan, hang_s=CONSAN_HANG_S)
        return check.finish(out / "gluon_check_consan.json")
    check.step("compile", check_compile)
    check.step("first forward", check_first_forward)
    check.step("numerics", lambda: check_numerics(counter))
    check.step("few programs", check_few_programs)
    check.step("robustness", lambda: check_robustness(counter))
    check.step("repeat", check_repeat)
    check.step("replay", lambda: check_replay(counter))
    check.step("graph", check_graphs)
    check.step("sweep", check_sweep)
    check.step("bench", lambda: check_bench(out))
    return check.finish(out / "gluon_check.json")


if __name__ == "__main__":
    sys.exit(main())
