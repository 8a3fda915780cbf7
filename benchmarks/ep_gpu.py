"""Expert parallelism on real GPUs: equality with the single-GPU layer, CUDA-graph capture, and timing.

    python benchmarks/ep_gpu.py --world 2 --json ep.json          # on a 2-GPU machine (NCCL)
    python benchmarks/ep_gpu.py --world 2 --device cpu --small    # the same logic on CPUs (gloo)
    python benchmarks/ep_gpu.py --world 2 --one-gpu --phases equality   # every rank on cuda:0, gloo transport:
                                                       # the GPU data path and kernels without a second GPU

1. Equality: every built-in dispatcher with the auto-selected experts backend (Triton on NVIDIA GPUs),
   Qwen3-30B-A3B and Mixtral-8x7B shapes, bf16 and fp8-block, against the single-device reference on
   the same weights (moe_core.testing.expert_parallel).
2. CUDA graphs: the graph-safe pairs (naive, batched_all_to_all) captured with a fixed
   max_tokens_per_rank and replayed; the replay must equal the eager call.
3. Timing per rank at 16, 256 and 4096 tokens per rank: dispatch, experts, combine and total of the
   eager call (CUDA events, median of iterations, ranks aligned by a barrier) and its host time, the
   CUDA-graph replay of the graph-safe pairs, the bytes and bandwidth of the all_to_all dispatch, the raw
   all_to_all_single of tokens x top_k rows and of tokens rows, and the single-GPU layer on the whole
   work (ep x tokens), eager and in a graph. ``batched_all_to_all`` runs with ``bench_capacity``.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import statistics
import sys
import time

import torch
import torch.distributed as dist

from moe_core import ExpertParallelGroup, MoEConfig, MoELayer, ParallelConfig, Registry, Routing
from moe_core.dispatch.builtin import SPECS
from moe_core.numerics import relative_error
from moe_core.presets import model, random_layer
from moe_core.quant import scheme
from moe_core.testing.distributed import spawn_group
from moe_core.testing.expert_parallel import EPCase, run_cases

DISPATCHERS = [s.name for s in SPECS]
GRAPH_SAFE = [s.name for s in SPECS if s.cuda_graph_safe]


def equality_cases(small: bool) -> list[EPCase]:
    shapes = {"tiny": (8, 2, 128, 128)} if small else {
        name: (m.num_experts, m.top_k, m.hidden_size, m.intermediate_size) for name, m in
        (("qwen3-30b-a3b", model("qwen3-30b-a3b")), ("mixtral-8x7b", model("mixtral-8x7b")))}
    out = []
    for label, (e, k, h, i) in shapes.items():
        for sch in ("unquantized", "fp8-block"):
            for d in DISPATCHERS:
                out.append(EPCase(f"{label}/{sch}/{d}", d, tokens=(48, 33), experts=e, top_k=k, hidden=h, intermediate=i,
                                  scheme=sch, dtype=torch.bfloat16))
                out.append(EPCase(f"{label}/{sch}/{d}/skewed", d, tokens=(40, 0), experts=e, top_k=k, hidden=h, intermediate=i,
                                  scheme=sch, dtype=torch.bfloat16, routing="skewed", max_tokens_per_rank=64))
    return out


def bench_capacity(tokens: int, top_k: int, experts: int) -> int:
    """``batched_all_to_all``'s expert capacity in the benchmark: twice the mean rows per (expert, source rank),
    at least 16, at most ``tokens``. The default (``tokens``) never overflows but, with 128 experts and 4096
    tokens, sends 2 GB a rank; an engine sizes it from its load. Overflow would raise at ``layer.check()``."""
    return min(tokens, max(16, 2 * -(-tokens * top_k // experts)))


def _layer(rank: int, world: int, shape: str, sch_name: str, dispatcher: str, tokens: int, device: str, small: bool,
           capacity: int | None = None):
    m = (8, 2, 128, 128) if small else (lambda p: (p.num_experts, p.top_k, p.hidden_size, p.intermediate_size))(model(shape))
    sch = scheme(sch_name)
    full = MoEConfig(*m, dtype=torch.bfloat16)
    weights = random_layer(full, sch, device=device, seed=0)
    cfg = dataclasses.replace(full, parallel=ParallelConfig(ep_size=world, dispatch_backend=dispatcher))
    group = ExpertParallelGroup(max_tokens_per_rank=tokens, expert_capacity=capacity)
    layer = MoELayer(cfg, weights.shard(rank, world), sch.weight_key, sch.activation_key, registry=Registry(), ep_group=group)
    gen = torch.Generator().manual_seed(rank + 1)
    x = torch.randn(tokens, full.hidden_size, generator=gen).to(device=device, dtype=full.dtype)
    routing = Routing.from_logits(torch.randn(tokens, full.num_experts, generator=gen).to(device), full.top_k)
    return layer, x, routing, full, weights, sch


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


def graph_check(rank: int, world: int, shapes: list[str], device: str, small: bool) -> dict:
    """Capture each graph-safe pair, replay it, and compare with the eager call."""
    out = {}
    for shape in shapes:
        for d in GRAPH_SAFE:
            layer, x, routing, *_ = _layer(rank, world, shape, "unquantized", d, 64, device, small)
            eager = layer(x, routing)
            if not device.startswith("cuda"):
                out[f"{shape}/{d}"] = {"skipped": "no CUDA"}
                continue
            graph, captured = _capture(lambda: layer(x, routing))
            graph.replay()
            torch.cuda.synchronize()
            layer.check()
            out[f"{shape}/{d}"] = {"error_vs_eager": relative_error(captured, eager), "pair": f"{d} + {layer.backend}"}
    return out


def _replay_us(graph, iters: int, barrier: bool) -> float:
    """Median device time of one replay (CUDA events), ranks aligned by a barrier before each when asked."""
    times = []
    for it in range(iters + 2):
        if barrier:
            dist.barrier()
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        start.record()
        graph.replay()
        end.record()
        end.synchronize()
        if it >= 2:
            times.append(start.elapsed_time(end) * 1e3)
    return statistics.median(times)


def _off_rank_bytes(layer, sent, x) -> float:
    """Token bytes the all_to_all dispatcher sent to other ranks (it sends each token once per rank)."""
    send = sent.state[2]  # AllToAllDispatcher's state: (tokens, placement, send counts, receive counts)
    return (sum(send) - send[layer.dispatcher.rank]) * x.shape[1] * x.element_size()


def bench(rank: int, world: int, shapes: list[str], tokens: list[int], iters: int, device: str, small: bool) -> dict:
    """Per-phase eager times of each dispatcher, graph-replay time of the graph-safe ones, raw all_to_all
    bandwidth and the single-GPU time of the whole work."""
    cuda = device.startswith("cuda")
    results = {}
    for shape in shapes:
        preset = None if small else model(shape)
        for t in tokens:
            for d in DISPATCHERS:
                cap = bench_capacity(t, preset.top_k, preset.num_experts) if d == "batched_all_to_all" and preset else None
                layer, x, routing, full, weights, sch = _layer(rank, world, shape, "unquantized", d, t, device, small, cap)
                phases = {"dispatch": [], "experts": [], "combine": [], "total": [], "host": []}
                for it in range(iters + 2):
                    dist.barrier()
                    host = time.perf_counter()
                    marks = [_mark(cuda)]
                    sent = layer.dispatcher.dispatch(x, routing)
                    marks.append(_mark(cuda))
                    y = layer._run(sent.hidden_states, sent.routing, sent.expert_map, False, t)
                    marks.append(_mark(cuda))
                    layer.dispatcher.combine(y, sent)
                    marks.append(_mark(cuda))
                    if cuda:
                        torch.cuda.synchronize()
                    spans = [_span_ms(marks[j], marks[j + 1]) for j in range(3)]
                    if it >= 2:
                        for name, v in zip(("dispatch", "experts", "combine"), spans):
                            phases[name].append(v)
                        phases["total"].append(sum(spans))
                        phases["host"].append((time.perf_counter() - host) * 1e3)
                row = {k: statistics.median(v) * 1e3 for k, v in phases.items()}  # microseconds
                row["pair"] = f"{d} + {layer.backend}"
                if cap is not None:
                    row["expert_capacity"] = cap
                if d == "all_to_all":
                    moved = _off_rank_bytes(layer, sent, x)
                    row["dispatch_bytes_off_rank"] = moved
                    row["dispatch_GBps"] = moved / (row["dispatch"] * 1e-6) / 1e9
                    results[f"{shape}/{t}/raw_all_to_all_same_bytes"] = _raw_same_bytes(moved, full, device, iters)
                if cuda and d in GRAPH_SAFE:
                    graph, _ = _capture(lambda: layer(x, routing))
                    row["graph_total"] = _replay_us(graph, iters, barrier=True)
                    del graph
                layer.check()  # overflow or dropped ids would raise here
                results[f"{shape}/{t}/{d}"] = row
            results[f"{shape}/{t}/raw_all_to_all"] = _raw_all_to_all(t * full.top_k, full, device, iters)
            results[f"{shape}/{t}/raw_all_to_all_tokens"] = _raw_all_to_all(t, full, device, iters)
            if rank == 0:
                results[f"{shape}/{t}/single_gpu_whole_work"] = _single_gpu(full, weights, sch, t * world, device, iters)
    return results


def _mark(cuda: bool):
    """A point in time: a recorded CUDA event on a GPU, the host clock otherwise."""
    if not cuda:
        return time.perf_counter()
    event = torch.cuda.Event(enable_timing=True)
    event.record()
    return event


def _span_ms(a, b) -> float:
    return a.elapsed_time(b) if isinstance(a, torch.cuda.Event) else (b - a) * 1e3


def _raw_all_to_all(rows: int, full: MoEConfig, device: str, iters: int) -> dict:
    """all_to_all_single of ``rows`` rows of hidden size, equal splits; device time (events) on a GPU."""
    world = dist.get_world_size()
    buf = torch.randn(max(rows - rows % world, world), full.hidden_size, device=device, dtype=full.dtype)
    out = torch.empty_like(buf)
    cuda = device.startswith("cuda")
    times = []
    for it in range(iters + 2):
        dist.barrier()
        start = _mark(cuda)
        dist.all_to_all_single(out, buf)
        end = _mark(cuda)
        if cuda:
            torch.cuda.synchronize()
        if it >= 2:
            times.append(_span_ms(start, end) * 1e-3)
    sec = statistics.median(times)
    moved = buf.numel() * buf.element_size() * (world - 1) / world
    return {"rows": buf.shape[0], "bytes_off_rank": moved, "us": sec * 1e6, "GBps": moved / sec / 1e9}


def _raw_same_bytes(moved: float, full: MoEConfig, device: str, iters: int) -> dict:
    """The raw all_to_all_single that sends the largest rank's dispatch bytes off each rank (equal splits)."""
    world = dist.get_world_size()
    rows = torch.tensor([int(moved) // (full.hidden_size * full.dtype.itemsize)], device=device)
    dist.all_reduce(rows, op=dist.ReduceOp.MAX)
    return _raw_all_to_all(-(-int(rows.item()) * world // (world - 1)), full, device, iters)


def _single_gpu(full: MoEConfig, weights, sch, tokens: int, device: str, iters: int) -> dict:
    """The whole work (every rank's tokens, every expert) on one GPU: eager host time and graph replay."""
    layer = MoELayer(full, weights, sch.weight_key, sch.activation_key, registry=Registry())
    gen = torch.Generator().manual_seed(99)
    x = torch.randn(tokens, full.hidden_size, generator=gen).to(device=device, dtype=full.dtype)
    routing = Routing.from_logits(torch.randn(tokens, full.num_experts, generator=gen).to(device), full.top_k)
    cuda = device.startswith("cuda")
    times = []
    for it in range(iters + 2):
        if cuda:
            torch.cuda.synchronize()
        start = time.perf_counter()
        layer(x, routing)
        if cuda:
            torch.cuda.synchronize()
        if it >= 2:
            times.append(time.perf_counter() - start)
    row = {"us": statistics.median(times) * 1e6, "backend": layer.backend, "tokens": tokens}
    if cuda:
        graph, _ = _capture(lambda: layer(x, routing))
        row["graph_us"] = _replay_us(graph, iters, barrier=False)
    return row


def _all(rank: int, world: int, args: argparse.Namespace) -> dict:
    device = ("cuda:0" if args.one_gpu else f"cuda:{rank}") if args.device == "cuda" else "cpu"
    shapes = ["tiny"] if args.small else args.shapes.split(",")
    out = {"rank": rank, "device": torch.cuda.get_device_name(rank) if args.device == "cuda" else "cpu"}
    if "graphs" in args.phases:
        out["graphs"] = graph_check(rank, world, shapes, device, args.small)
    if "bench" in args.phases:
        out["bench"] = bench(rank, world, shapes, [int(t) for t in args.tokens.split(",")], args.iters, device, args.small)
    return out


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--world", type=int, default=2)
    p.add_argument("--device", choices=["cuda", "cpu"], default="cuda")
    p.add_argument("--small", action="store_true", help="tiny shapes (a logic check on CPUs)")
    p.add_argument("--one-gpu", action="store_true", help="all ranks on cuda:0 over gloo (NCCL needs a GPU per rank)")
    p.add_argument("--phases", default="equality,graphs,bench")
    p.add_argument("--shapes", default="qwen3-30b-a3b,mixtral-8x7b")
    p.add_argument("--tokens", default="16,256,4096")
    p.add_argument("--iters", type=int, default=20)
    p.add_argument("--json", help="write every result here")
    args = p.parse_args()
    backend = "nccl" if args.device == "cuda" and not args.one_gpu else "gloo"
    report = {"torch": torch.__version__, "world": args.world, "command": " ".join(sys.argv)}
    ok = True
    if "equality" in args.phases:
        cases = equality_cases(args.small)
        per_rank = spawn_group(args.world, run_cases, backend, cases, args.device, True)
        report["equality"] = {name: [dataclasses.asdict(r[name]) | {"ok": r[name].ok} for r in per_rank] for name in per_rank[0]}
        for name, rows in report["equality"].items():
            ok &= all(r["ok"] for r in rows)
            print(f"{name:<48} " + "  ".join(f"r{i}: {r['dispatcher']}+{r['experts']} err {r['error']:.2e} {'ok' if r['ok'] else 'FAIL ' + r['raised']}"
                                              for i, r in enumerate(rows)), flush=True)
    if "graphs" in args.phases or "bench" in args.phases:
        per_rank = spawn_group(args.world, _all, backend, args)
        report["ranks"] = per_rank
        for r in per_rank:
            for name, row in r.get("graphs", {}).items():
                print(f"graph rank {r['rank']} {name}: {row}", flush=True)
                ok &= "skipped" in row or row["error_vs_eager"] < 1e-3
            for name, row in r.get("bench", {}).items():
                print(f"bench rank {r['rank']} {name}: " + ", ".join(f"{k} {v:.1f}" if isinstance(v, float) else f"{k} {v}" for k, v in row.items()), flush=True)
    if args.json:
        with open(args.json, "w") as f:
            json.dump(report, f, indent=1, default=str)
    print("ALL OK" if ok else "FAILURES")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
