"""Expert parallelism on real GPUs: equality with the single-GPU layer, CUDA-graph capture, timing and scaling.

    python benchmarks/ep_gpu.py --world 2 --json ep.json          # on a 2-GPU machine (NCCL)
    python benchmarks/ep_gpu.py --world 2 --device cpu --small    # the same logic on CPUs (gloo)
    python benchmarks/ep_gpu.py --world 2 --one-gpu --phases equality   # every rank on cuda:0, gloo transport:
                                                       # the GPU data path and kernels without a second GPU
    bash benchmarks/ep_suite.sh                        # world 2 and 4 on a 4-GPU machine, one record

1. Equality: every dispatcher the transport can run with the auto-selected experts backend (Triton on
   NVIDIA GPUs), each shape in bf16 and fp8-block (the DeepSeek-V3 shape in fp8-block only), uneven and
   skewed routing, against the single-device reference on the same weights (moe_core.testing.expert_parallel).
2. CUDA graphs: every graph-safe dispatcher captured with a fixed max_tokens_per_rank and replayed; the
   replay must equal the eager call.
3. Timing per rank at each token count per rank, one method for everything: ranks aligned by a barrier
   before every sample, CUDA events around the call, median of ``--iters``; eager calls and CUDA-graph
   replays. Per dispatcher: the whole layer, and dispatch + combine alone (the experts' output fixed).
   Beside them: the raw ``all_to_all_single`` of every token to every rank ([ep * T, H], the bytes a
   token-row dispatch sends) and, on rank 0, the single-GPU layer on this rank's tokens (EP = 1) and on the
   whole work (ep * T tokens). ``--write-dispatch-ranking`` writes the measured order (eager layer time of
   the slowest rank) for ``moe_core.select_pair``.

Every case is isolated: an error is recorded with the case and the run goes on; ``--budget-s`` stops
timing (all ranks together) before the budget is spent, so a record is always written. Each finished
case is also printed at once as a ``ROW {json}`` line, which ``benchmarks/ep_summary.py`` reads from the
log of a run that was stopped before writing its JSON. ``peer_copy``
(symmetric memory) runs in a group of its own after the others, so that a failure there cannot cost
the rest of the record.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import os
import statistics
import sys
import time
import traceback

import torch
import torch.distributed as dist

from moe_core import ExpertParallelGroup, MoEConfig, MoELayer, ParallelConfig, Registry, Routing
from moe_core.dispatch.builtin import SPECS
from moe_core.dispatch.ranking import DispatchRanking, ranking_from_times
from moe_core.numerics import relative_error
from moe_core.platform import DeviceKind
from moe_core.presets import model, random_layer
from moe_core.quant import scheme
from moe_core.testing.distributed import spawn_group
from moe_core.testing.expert_parallel import EPCase, run_cases

from ep_summary import graph_ok  # benchmarks/ (this script's folder) is on sys.path

#: The scheme each shape is timed in (the DeepSeek-V3 layer only exists as fp8-block here).
TIMED_SCHEME = {"qwen3-30b-a3b": "unquantized", "mixtral-8x7b": "unquantized", "deepseek-v3": "fp8-block", "tiny": "unquantized"}
#: Dispatchers whose transport needs a GPU per rank and NCCL-style peers (run in a group of their own).
ISOLATED = ("peer_copy",)


def dispatchers_for(backend: str) -> list[str]:
    """Built-in dispatchers this transport can run: everything on NCCL; the CPU-capable ones over gloo."""
    return [s.name for s in SPECS if backend == "nccl" or DeviceKind.CPU in s.devices]


def _dims(shape: str) -> tuple[int, int, int, int]:
    shape = shape.partition("@")[0]
    if shape == "tiny":
        return 8, 2, 128, 128
    m = model(shape)
    return m.num_experts, m.top_k, m.hidden_size, m.intermediate_size


def timed_scheme(shape: str):
    """The scheme a shape is timed in: ``name@scheme`` names it (``qwen3-30b-a3b@fp8-block``), else TIMED_SCHEME."""
    name, _, chosen = shape.partition("@")
    return scheme(chosen or TIMED_SCHEME[name])


def equality_cases(shapes: list[str], dispatchers: list[str]) -> list[EPCase]:
    out = []
    for label in shapes:
        e, k, h, i = _dims(label)
        schemes = ("fp8-block",) if label == "deepseek-v3" else ("unquantized", "fp8-block")
        for sch in schemes:
            for d in dispatchers:
                out.append(EPCase(f"{label}/{sch}/{d}", d, tokens=(48, 33), experts=e, top_k=k, hidden=h, intermediate=i,
                                  scheme=sch, dtype=torch.bfloat16))
                out.append(EPCase(f"{label}/{sch}/{d}/skewed", d, tokens=(40, 0), experts=e, top_k=k, hidden=h, intermediate=i,
                                  scheme=sch, dtype=torch.bfloat16, routing="skewed", max_tokens_per_rank=64))
                if sch == "fp8-block" and _sends_fp8_rows(d):
                    out.append(EPCase(f"{label}/{sch}/{d}/fp8-rows", d, tokens=(48, 33), experts=e, top_k=k, hidden=h, intermediate=i,
                                      scheme=sch, dtype=torch.bfloat16, max_tokens_per_rank=64, fp8_dispatch=True))
                if _overlappable(d):  # the two micro-batches' streams only exist on GPUs: checked here
                    out.append(EPCase(f"{label}/{sch}/{d}/two-micro-batches", d, tokens=(48, 33), experts=e, top_k=k, hidden=h,
                                      intermediate=i, scheme=sch, dtype=torch.bfloat16, max_tokens_per_rank=64, micro_batches=2))
    return out


def _spec(dispatcher: str):
    """The built-in dispatcher's spec."""
    return next(s for s in SPECS if s.name == dispatcher)


def _overlappable(dispatcher: str) -> bool:
    """Whether the dispatcher may run as two overlapped micro-batches (its instances own their buffers)."""
    return _spec(dispatcher).load().micro_batch_safe


def _sends_fp8_rows(dispatcher: str) -> bool:
    """Whether the dispatcher can send an fp8-block layer's tokens as fp8 rows (ExpertParallelGroup.fp8_dispatch)."""
    return _spec(dispatcher).load().fp8_rows


def bench_capacity(tokens: int, top_k: int, experts: int) -> int:
    """``batched_all_to_all``'s expert capacity in the benchmark: three times the mean rows per (expert, source
    rank), at least 32, at most ``tokens`` (twice the mean, at least 16, overflowed for DeepSeek-V3 at 256 tokens). The default (``tokens``) never overflows but, with 128 experts and 4096
    tokens, sends 2 GB a rank; an engine sizes it from its load. Overflow would raise at ``layer.check()``."""
    return min(tokens, max(32, 3 * -(-tokens * top_k // experts)))


# ---------------------------------------------------------------------------------------------- timing method


def _capture(fn):
    """A CUDA graph of ``fn()`` (warmed up on a side stream, as torch.cuda.graphs recommends) and its output."""
    stream = torch.cuda.Stream()
    stream.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(stream):
        fn()
    torch.cuda.current_stream().wait_stream(stream)
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        out = fn()
    return graph, out


def time_us(fn, iters: int, cuda: bool, aligned: bool = True) -> float:
    """Median time of ``fn()`` in µs: a barrier first when ``aligned`` (every rank must call it then), CUDA events
    around the call on a GPU (device time, host gaps included), the host clock elsewhere; two warm-up calls."""
    times = []
    for it in range(iters + 2):
        if aligned:
            dist.barrier()
        elif cuda:
            torch.cuda.synchronize()
        if cuda:
            start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
            start.record()
            fn()
            end.record()
            end.synchronize()
            sample = start.elapsed_time(end) * 1e3
        else:
            host = time.perf_counter()
            fn()
            sample = (time.perf_counter() - host) * 1e6
        if it >= 2:
            times.append(sample)
    return statistics.median(times)


def eager_and_graph(fn, iters: int, cuda: bool, aligned: bool = True) -> dict:
    """``{"eager": µs, "graph": µs}`` of ``fn`` (the graph only on a GPU); the graph is freed before returning."""
    row = {"eager": time_us(fn, iters, cuda, aligned)}
    if cuda:
        graph, _ = _capture(fn)
        row["graph"] = time_us(graph.replay, iters, cuda, aligned)
        del graph
    return row


# ---------------------------------------------------------------------------------------------- one rank


def _inputs(full: MoEConfig, tokens: int, device: str, seed: int):
    gen = torch.Generator().manual_seed(seed)
    x = torch.randn(tokens, full.hidden_size, generator=gen).to(device=device, dtype=full.dtype)
    return x, Routing.from_logits(torch.randn(tokens, full.num_experts, generator=gen).to(device), full.top_k)


def _ep_layer(full, weights, sch, rank: int, world: int, dispatcher: str, tokens: int, capacity: int | None, micro_batches: int = 1,
              fp8_dispatch: bool = False):
    cfg = dataclasses.replace(full, parallel=ParallelConfig(ep_size=world, dispatch_backend=dispatcher))
    group = ExpertParallelGroup(max_tokens_per_rank=tokens, expert_capacity=capacity, micro_batches=micro_batches, fp8_dispatch=fp8_dispatch)
    return MoELayer(cfg, weights.shard(rank, world), sch.weight_key, sch.activation_key, registry=Registry(), ep_group=group)


class Clock:
    """The run's time budget, agreed by all ranks (one all-reduce per question), so that they stop together."""

    def __init__(self, budget_s: float, device: str):
        self.deadline = time.monotonic() + budget_s
        self.device = device

    def expired(self) -> bool:
        late = torch.tensor([float(time.monotonic() > self.deadline)], device=self.device)
        dist.all_reduce(late, op=dist.ReduceOp.MAX)
        return bool(late.item())


def _guarded(out: dict, section: str, key: str, fn) -> None:
    """``out[key] = fn()``, or the error (with the last lines of its traceback) if it raised; then the row is printed
    as a ``ROW {json}`` line at once, so that the log holds every finished case even if the run is cut short."""
    try:
        out[key] = fn()
    except Exception as exc:  # noqa: BLE001 - one case's failure is recorded, the run goes on
        out[key] = {"error": f"{type(exc).__name__}: {exc}", "where": traceback.format_exc(limit=3)[-600:]}
        if torch.cuda.is_available():
            torch.cuda.synchronize()
    _emit(section, key, out[key])


def _emit(section: str, key: str, row: dict) -> None:
    """One ``ROW {json}`` line in one write: the ranks share the log, and a line must not interleave with another's."""
    line = {"world": dist.get_world_size(), "rank": dist.get_rank(), "section": section, "key": key, "row": row}
    sys.stdout.flush()
    os.write(sys.stdout.fileno(), ("ROW " + json.dumps(line, default=str) + "\n").encode())


def graph_check(rank: int, world: int, shapes: list[str], dispatchers: list[str], device: str) -> dict:
    """Capture each graph-safe dispatcher's layer, replay it, and compare with the eager call."""
    out = {}
    safe = [d for d in dispatchers if _spec(d).cuda_graph_safe]
    for shape in shapes:
        full = MoEConfig(*_dims(shape), dtype=torch.bfloat16)
        sch = timed_scheme(shape)
        weights = random_layer(full, sch, device=device, seed=0)
        x, routing = _inputs(full, 64, device, rank + 1)
        for d, batches in [(d, 1) for d in safe] + [(d, 2) for d in safe if _overlappable(d)]:
            def one():
                layer = _ep_layer(full, weights, sch, rank, world, d, 64, None, batches)
                eager = layer(x, routing).clone()
                # Later eager calls with other inputs, then the first inputs again: dispatchers that replay a step of
                # their own from a graph (token rows) must still give the first call's result.
                other = _inputs(full, 64, device, rank + 11)
                for _ in range(2):
                    layer(*other)
                repeat = relative_error(layer(x, routing), eager)
                if not device.startswith("cuda"):
                    return {"skipped": "no CUDA", "eager_repeat_error": repeat}
                graph, captured = _capture(lambda: layer(x, routing))
                graph.replay()
                torch.cuda.synchronize()
                layer.check()
                result = {"error_vs_eager": relative_error(captured, eager), "eager_repeat_error": repeat, "pair": f"{d} + {layer.backend}"}
                del graph
                return result
            _guarded(out, "graphs", f"{shape}/{d}" + ("/two-micro-batches" if batches == 2 else ""), one)
        del weights
    return out


def bench(rank: int, world: int, shapes: list[str], tokens: list[int], dispatchers: list[str], iters: int, device: str,
          clock: Clock, single_gpu: bool) -> dict:
    """Per (tokens per rank, shape), in the order given: each dispatcher's layer and dispatch + combine, eager and
    graph; the raw all_to_all_single of every token to every rank; on rank 0 the single-GPU layer (EP = 1, and the
    whole work). The budget is checked before each (tokens, shape)."""
    cuda = device.startswith("cuda")
    results = {}
    layers = {}  # every shape's weights, made once: token counts are the outer loop, in the order given
    for shape in shapes:
        full = MoEConfig(*_dims(shape), dtype=torch.bfloat16)
        sch = timed_scheme(shape)
        layers[shape] = (full, sch, random_layer(full, sch, device=device, seed=0))
    for t in tokens:
        for shape, (full, sch, weights) in layers.items():
            if clock.expired():
                results[f"{shape}/{t}"] = {"skipped": "time budget spent"}
                _emit("bench", f"{shape}/{t}", results[f"{shape}/{t}"])
                continue
            x, routing = _inputs(full, t, device, rank + 1)
            raw = torch.randn(world * t, full.hidden_size, device=device).to(full.dtype)
            raw_out = torch.empty_like(raw)
            _guarded(results, "bench", f"{shape}/{t}/raw_all_to_all",
                     lambda: eager_and_graph(lambda: dist.all_to_all_single(raw_out, raw), iters, cuda)
                     | {"bytes_off_rank": raw.numel() * raw.element_size() * (world - 1) / world})
            del raw, raw_out
            for d in dispatchers:
                if d == "batched_all_to_all" and t > 256:
                    continue  # fixed E x C buffers: the decode path (see bench_capacity); GBs at prefill sizes
                cap = bench_capacity(t, full.top_k, full.num_experts) if d == "batched_all_to_all" else None
                _guarded(results, "bench", f"{shape}/{t}/{d}", lambda: _bench_dispatcher(full, weights, sch, rank, world, d, t, cap, x, routing, iters, cuda))
            if single_gpu and rank == 0:
                _guarded(results, "bench", f"{shape}/{t}/single_gpu", lambda: _single_gpu(full, weights, sch, t, device, iters, cuda))
                _guarded(results, "bench", f"{shape}/{t}/single_gpu_whole_work", lambda: _single_gpu(full, weights, sch, world * t, device, iters, cuda))
            dist.barrier()
            if cuda:
                torch.cuda.empty_cache()
    return results


def _bench_dispatcher(full, weights, sch, rank, world, d, t, cap, x, routing, iters, cuda) -> dict:
    layer = _ep_layer(full, weights, sch, rank, world, d, t, cap)
    row = {"pair": f"{d} + {layer.backend}"}
    if cap is not None:
        row["expert_capacity"] = cap
    spec = layer.pair.dispatcher
    timed = eager_and_graph if spec.cuda_graph_safe else (lambda fn, n, c: {"eager": time_us(fn, n, c)})
    row["layer"] = timed(lambda: layer(x, routing), iters, cuda)
    sent, round_trip = _dispatch_combine(layer, x, routing, t)
    row["dispatch_combine"] = timed(round_trip, iters, cuda)
    if _overlappable(d) and t >= 256:  # the same layer as two overlapped micro-batches
        overlapped = _ep_layer(full, weights, sch, rank, world, d, t, cap, 2)
        row["layer_two_micro_batches"] = timed(lambda: overlapped(x, routing), iters, cuda)
        overlapped.check()
    if sch.name == "fp8-block" and _sends_fp8_rows(d):  # the same layer sending fp8 rows
        fp8 = _ep_layer(full, weights, sch, rank, world, d, t, cap, fp8_dispatch=True)
        row["layer_fp8_rows"] = timed(lambda: fp8(x, routing), iters, cuda)
        row["dispatch_combine_fp8_rows"] = timed(_dispatch_combine(fp8, x, routing, t)[1], iters, cuda)
        fp8.check()
    if sent.expert_map is not None and cuda and t >= 1024:  # prefill sizes only: each shape of the check compiles kernels
        row["experts_with_map"] = time_us(lambda: layer._run(sent.hidden_states, sent.routing, sent.expert_map, False, t), iters, cuda)
        row["experts_without_map"] = _same_pairs_without_map(layer, sent, t, iters, cuda)
    layer.check()  # overflow or dropped ids would raise here
    return row


def _dispatch_combine(layer, x, routing, tokens: int):
    """(one dispatch's result, a call of dispatch + combine alone): the experts' output of that dispatch is computed
    once and combined every time, so the call times the transport and its bookkeeping only."""
    sent = layer.dispatcher.dispatch(x, routing)
    y = layer._run(sent.hidden_states, sent.routing, sent.expert_map, False, tokens)
    layer.dispatcher.combine(y, sent)
    return sent, lambda: layer.dispatcher.combine(y, layer.dispatcher.dispatch(x, routing))


def _same_pairs_without_map(layer, sent, t: int, iters: int, cuda: bool) -> float:
    """The experts of this rank on the same number of (token, expert) pairs, given as a layer of the local experts
    alone (no expert map): what the pairs cost when no remote pair is in the routing."""
    cfg = layer.config
    local = (sent.expert_map[sent.routing.topk_ids.long()] >= 0).sum()
    pairs = max(int(local.item()), cfg.top_k)
    tokens = -(-pairs // cfg.top_k)
    alone = MoEConfig(cfg.local_num_experts, cfg.top_k, cfg.hidden_size, cfg.intermediate_size, dtype=cfg.dtype)
    kernel_layer = MoELayer(alone, layer._raw, layer.selection.query.weight_key, layer.selection.query.activation_key, registry=Registry())
    x, routing = _inputs(alone, tokens, str(sent.hidden_states.device), 7)
    return time_us(lambda: kernel_layer(x, routing), iters, cuda, aligned=False)


def _single_gpu(full, weights, sch, tokens: int, device: str, iters: int, cuda: bool) -> dict:
    """The layer on one GPU (every expert) for ``tokens`` tokens, eager and graph (no barrier: the other ranks wait)."""
    layer = MoELayer(full, weights, sch.weight_key, sch.activation_key, registry=Registry())
    x, routing = _inputs(full, tokens, device, 99)
    return eager_and_graph(lambda: layer(x, routing), iters, cuda, aligned=False) | {"backend": layer.backend, "tokens": tokens}


def profile(rank: int, world: int, shape: str, tokens: int, dispatchers: list[str], device: str, calls: int = 5) -> dict:
    """Per dispatcher, torch.profiler around ``calls`` dispatch + combine calls (the experts' output fixed) after two
    warm-ups: the ops by device time (host time off a GPU), as a printed table (rank 0) and the top rows returned."""
    from torch.profiler import ProfilerActivity, profile as torch_profile

    cuda = device.startswith("cuda")
    full = MoEConfig(*_dims(shape), dtype=torch.bfloat16)
    sch = timed_scheme(shape)
    weights = random_layer(full, sch, device=device, seed=0)
    x, routing = _inputs(full, tokens, device, rank + 1)
    out = {}
    for d in dispatchers:
        layer = _ep_layer(full, weights, sch, rank, world, d, tokens, None)
        _, step = _dispatch_combine(layer, x, routing, tokens)
        for _ in range(2):
            step()
        dist.barrier()
        activities = [ProfilerActivity.CPU] + ([ProfilerActivity.CUDA] if cuda else [])
        with torch_profile(activities=activities) as prof:
            for _ in range(calls):
                step()
            if cuda:
                torch.cuda.synchronize(device)
        key = "self_device_time_total" if cuda else "self_cpu_time_total"
        events = sorted(prof.key_averages(), key=lambda e: getattr(e, key), reverse=True)
        out[d] = [{"op": e.key, "count": e.count // calls, "us_per_call": getattr(e, key) / calls} for e in events[:25]]
        if rank == 0:
            print(f"PROFILE {shape} {tokens} tok/rank {d}: dispatch + combine, per call (of {calls}), by "
                  f"{'device' if cuda else 'host'} time\n" + prof.key_averages().table(sort_by=key, row_limit=25), flush=True)
    return out


def _all(rank: int, world: int, args: argparse.Namespace, dispatchers: list[str], single_gpu: bool) -> dict:
    device = ("cuda:0" if args.one_gpu else f"cuda:{rank}") if args.device == "cuda" else "cpu"
    shapes = args.shapes.split(",")
    out = {"rank": rank, "device": torch.cuda.get_device_name(device) if args.device == "cuda" else "cpu"}
    if "graphs" in args.phases:
        out["graphs"] = graph_check(rank, world, shapes, dispatchers, device)
    if "bench" in args.phases:
        clock = Clock(args.budget_s, device)
        out["bench"] = bench(rank, world, shapes, [int(t) for t in args.tokens.split(",")], dispatchers, args.iters, device, clock, single_gpu)
    if "profile" in args.phases:
        out["profile"] = profile(rank, world, shapes[0], max(int(t) for t in args.tokens.split(",")), dispatchers, device)
    return out


# ---------------------------------------------------------------------------------------------- report


def dispatch_ranking(per_rank: list[dict], world: int, device: str) -> DispatchRanking:
    """The measured order per (shape, tokens): eager layer time of the slowest rank, dispatchers that ran everywhere."""
    measured: dict[tuple, dict[str, float]] = {}
    for key in per_rank[0].get("bench", {}):
        parts = key.split("/")
        if len(parts) != 3 or parts[2] in ("raw_all_to_all", "single_gpu", "single_gpu_whole_work"):
            continue
        shape, t, d = parts[0], int(parts[1]), parts[2]
        rows = [r["bench"].get(key, {}) for r in per_rank]
        if all("layer" in row for row in rows):
            e, k, h, _ = _dims(shape)
            measured.setdefault((world, e, k, h, "bfloat16", t), {})[d] = max(row["layer"]["eager"] for row in rows)
    return ranking_from_times(device, measured)


def _rows_ok(per_rank: list[dict]) -> bool:
    """Whether every graph check of every rank passed (the rows themselves were printed by the ranks)."""
    return all(graph_ok(row) for r in per_rank for row in r.get("graphs", {}).values())


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--world", type=int, default=2)
    p.add_argument("--device", choices=["cuda", "cpu"], default="cuda")
    p.add_argument("--small", action="store_true", help="tiny shapes (a logic check on CPUs); same as --shapes tiny")
    p.add_argument("--one-gpu", action="store_true", help="all ranks on cuda:0 over gloo (NCCL needs a GPU per rank)")
    p.add_argument("--phases", default="equality,graphs,bench",
                   help="any of equality, graphs, bench, profile (torch.profiler of dispatch + combine, first shape, largest token count)")
    p.add_argument("--shapes", default="qwen3-30b-a3b,mixtral-8x7b", help="comma-separated: qwen3-30b-a3b, mixtral-8x7b, deepseek-v3; name@scheme times another "
                   "scheme than the shape's default (qwen3-30b-a3b@fp8-block: fp8-block layers also run with fp8 rows)")
    p.add_argument("--equality-shapes", help="shapes of the equality phase (default: --shapes)")
    p.add_argument("--tokens", default="16,256,4096", help="tokens per rank")
    p.add_argument("--iters", type=int, default=20)
    p.add_argument("--budget-s", type=float, default=1e9,
                   help="seconds from the start after which no new timing case starts (all ranks together)")
    p.add_argument("--dispatchers", help="comma-separated: only these dispatchers (default: every one the transport runs)")
    p.add_argument("--no-isolated", action="store_true", help=f"skip {', '.join(ISOLATED)} (run in a group of its own)")
    p.add_argument("--json", help="write every result here (rewritten after each group of processes)")
    p.add_argument("--write-dispatch-ranking", help="write the measured dispatcher ranking here (merged into an existing file)")
    args = p.parse_args()
    if args.small:
        args.shapes = "tiny"
    backend = "nccl" if args.device == "cuda" and not args.one_gpu else "gloo"
    available = [d for d in dispatchers_for(backend) if not args.dispatchers or d in args.dispatchers.split(",")]
    groups = [[d for d in available if d not in ISOLATED]] + ([[d for d in available if d in ISOLATED]] if not args.no_isolated else [])
    groups = [g for g in groups if g]
    deadline = time.monotonic() + args.budget_s
    equality_shapes = (args.equality_shapes or args.shapes).split(",")
    report = {"torch": torch.__version__, "world": args.world, "command": " ".join(sys.argv), "started": time.strftime("%Y-%m-%d %H:%M:%S UTC", time.gmtime())}
    ok = True

    def save():
        if args.json:
            with open(args.json, "w") as f:
                json.dump(report, f, indent=1, default=str)

    def failed(phase: str, group: list[str], exc: Exception) -> None:
        report[phase][f"group {'+'.join(group)}"] = {"error": f"{type(exc).__name__}: {str(exc)[-1500:]}"}
        print(f"{phase.upper()} GROUP {group} FAILED: {exc}", flush=True)
        save()

    # Each group of dispatchers runs every phase before the next group starts: peer_copy (last) cannot cost the others.
    report["equality"], report["ranks"] = {}, {}
    for index, group in enumerate(groups):
        if "equality" in args.phases:
            try:
                per_rank = spawn_group(args.world, run_cases, backend, equality_cases(equality_shapes, group), args.device, True, timeout_s=120)
            except Exception as exc:  # noqa: BLE001 - this group's failure is the record; the others go on
                failed("equality", group, exc)
                ok = False
            else:
                ok &= _record_equality(report["equality"], per_rank)
                save()
        if "graphs" in args.phases or "bench" in args.phases or "profile" in args.phases:
            # Time left for timing, shared out: a later group (peer_copy) keeps a third of what remains.
            left = max(deadline - time.monotonic(), 0.0)
            args.budget_s = left * (2 / 3 if index + 1 < len(groups) else 1.0)
            try:
                per_rank = spawn_group(args.world, _all, backend, args, group, index == 0, timeout_s=300)
            except Exception as exc:  # noqa: BLE001
                failed("ranks", group, exc)
                ok = False
                continue
            report["ranks"]["+".join(group)] = per_rank
            ok &= _rows_ok(per_rank)
            if args.write_dispatch_ranking:
                _merge_ranking(args.write_dispatch_ranking, dispatch_ranking(per_rank, args.world, per_rank[0]["device"]))
            save()
    save()
    print("ALL OK" if ok else "FAILURES")
    return 0 if ok else 1


def _record_equality(into: dict, per_rank: list[dict]) -> bool:
    """Every rank's result of each case into ``into``, one line per case printed; whether all passed."""
    ok = True
    for name in per_rank[0]:
        rows = [dataclasses.asdict(r[name]) | {"ok": r[name].ok} for r in per_rank]
        into[name] = rows
        ok &= all(r["ok"] for r in rows)
        print(f"{name:<48} " + "  ".join(f"r{i}: {r['dispatcher']}+{r['experts']} err {r['error']:.2e} "
                                          f"{'ok' if r['ok'] else 'FAIL ' + r['raised']}" for i, r in enumerate(rows)), flush=True)
    return ok


def _merge_ranking(path: str, new: DispatchRanking) -> None:
    """Merge ``new`` into the file at ``path``: per (world, shape, tokens) the union of the measured times."""
    measured: dict[tuple, dict[str, float]] = {}
    try:
        old = DispatchRanking.load(path)
    except Exception:  # noqa: BLE001 - no usable file yet
        old = DispatchRanking(new.device, ())
    for entry in old.entries + new.entries:
        key = (entry.world_size, entry.num_experts, entry.top_k, entry.hidden_size, entry.dtype, entry.tokens)
        measured.setdefault(key, {}).update(zip(entry.order, entry.times_us))
    ranking_from_times(new.device, measured).save(path)


if __name__ == "__main__":
    sys.exit(main())
