"""The deepep dispatchers on two GPUs with the real DeepEP: equality with the single-GPU layer, CUDA-graph
replay of deepep_low_latency, and dispatch + combine timing beside the built-in dispatchers.

    python plugins/deepep_backend/scripts/gpu_check.py [--json FILE] [--phases equality,graphs,timing]
                                                  # what `scripts/gpu_check.sh check [PHASES]` runs

Prints one PASS/FAIL line per check and exits non-zero if any failed. Ranks are spawned here (NCCL, one GPU each).
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

import torch

from moe_core import ExpertParallelGroup, MoEConfig, MoELayer, ParallelConfig, Registry, Routing
from moe_core.numerics import relative_error, tolerance
from moe_core.presets import random_layer
from moe_core.quant import scheme
from moe_core.testing.distributed import spawn_group
from moe_core.testing.expert_parallel import EPCase, run_cases
from moe_core_deepep.dispatcher import release_buffers

sys.path.insert(0, str(Path(__file__).resolve().parents[3] / "benchmarks"))
import ep_gpu  # noqa: E402 - benchmarks/ep_gpu.py: its timing method, with the deepep names added

QWEN = dict(experts=128, top_k=8, hidden=2048, intermediate=768, dtype=torch.bfloat16)  # Qwen3-30B-A3B
MIXTRAL = dict(experts=8, top_k=2, hidden=4096, intermediate=14336, dtype=torch.bfloat16)  # Mixtral-8x7B
LOW_LATENCY_ROWS = 256  # one low-latency buffer for every case: the largest max_tokens_per_rank comes first
LOW_LATENCY = dict(max_tokens_per_rank=LOW_LATENCY_ROWS)
CASES = [
    EPCase("skewed_empty_rank_invalid_id/deepep", "deepep", tokens=(96, 0), routing="skewed", invalid_id=True, **QWEN),
    EPCase("random_uneven/deepep", "deepep", tokens=(200, 57), **QWEN),
    EPCase("skewed_empty_rank_invalid_id/deepep_low_latency", "deepep_low_latency", tokens=(96, 0), routing="skewed",
           invalid_id=True, **LOW_LATENCY, **QWEN),
    EPCase("random_uneven/deepep_low_latency", "deepep_low_latency", tokens=(200, 57), **LOW_LATENCY, **QWEN),
    EPCase("fp8_block/deepep", "deepep", tokens=(200, 57), scheme="fp8-block", **QWEN),
    EPCase("fp8_block/deepep_low_latency", "deepep_low_latency", tokens=(200, 57), scheme="fp8-block", **LOW_LATENCY, **QWEN),
    EPCase("mixtral/deepep", "deepep", tokens=(200, 57), **MIXTRAL),
    EPCase("mixtral/deepep_low_latency", "deepep_low_latency", tokens=(200, 57), **LOW_LATENCY, **MIXTRAL),
]
TIMED = ["deepep", "deepep_low_latency", "all_to_all", "packed_all_to_all", "batched_all_to_all", "naive"]


def equality(rank: int, world: int) -> dict:
    """Every case of CASES on this rank, each named on stdout as it starts (a hang names its case)."""
    results = {}
    for case in CASES:
        print(f"rank {rank}: equality {case.name}", flush=True)
        results |= run_cases(rank, world, [case], "cuda", True)
    release_buffers()  # collective: the shared DeepEP buffers go on every rank together
    return results


def graph_replay(rank: int, world: int) -> dict:
    """deepep_low_latency captured once, replayed on new inputs copied into the captured tensors, vs eager calls."""
    device = f"cuda:{torch.cuda.current_device()}"
    full = MoEConfig(QWEN["experts"], QWEN["top_k"], QWEN["hidden"], QWEN["intermediate"], dtype=torch.bfloat16)
    sch = scheme("unquantized")
    cfg = MoEConfig(full.num_experts, full.top_k, full.hidden_size, full.intermediate_size, dtype=torch.bfloat16,
                    parallel=ParallelConfig(ep_size=world, dispatch_backend="deepep_low_latency"))
    layer = MoELayer(cfg, random_layer(full, sch, device=device, seed=0).shard(rank, world), sch.weight_key, sch.activation_key,
                     registry=Registry(autoload=True), ep_group=ExpertParallelGroup(max_tokens_per_rank=LOW_LATENCY_ROWS))
    x, routing = ep_gpu._inputs(full, 64, device, rank + 1)
    ids, weights = routing.topk_ids.clone(), routing.topk_weights.clone()
    graph, out = ep_gpu._capture(lambda: layer(x, Routing(ids, weights)))
    errors = []
    for seed in (11, 12):
        nx, nr = ep_gpu._inputs(full, 64, device, rank + seed)
        want = layer(nx, nr).clone()
        x.copy_(nx), ids.copy_(nr.topk_ids), weights.copy_(nr.topk_weights)
        graph.replay()
        torch.cuda.synchronize()
        errors.append(relative_error(out, want))
    layer.check()
    release_buffers()
    return {"errors": errors, "budget": tolerance(sch.activation_key, torch.bfloat16), "pair": f"deepep_low_latency + {layer.backend}"}


def timing(rank: int, world: int, iters: int, budget_s: float) -> dict:
    """benchmarks/ep_gpu.py's timing; deepep_low_latency at decode sizes only (its buffers grow with
    max_tokens_per_rank * experts), the larger first so that one low-latency buffer serves both."""
    device = f"cuda:{torch.cuda.current_device()}"
    clock = ep_gpu.Clock(budget_s, device)
    prefill = [d for d in TIMED if d != "deepep_low_latency"]
    rows = (ep_gpu.bench(rank, world, ["qwen3-30b-a3b"], [4096], prefill, iters, device, clock, False)
            | ep_gpu.bench(rank, world, ["qwen3-30b-a3b"], [128, 16], TIMED, iters, device, clock, False))
    release_buffers()
    return rows


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--json", help="write every result here")
    p.add_argument("--iters", type=int, default=10)
    p.add_argument("--write-dispatch-ranking", help="write the measured dispatcher ranking of this run here")
    p.add_argument("--budget-s", type=float, default=150, help="no timing case starts after this many seconds")
    p.add_argument("--phases", default="equality,graphs,timing",
                   help="comma-separated, of equality, graphs, timing (each fits a 10-minute limit alone)")
    args = p.parse_args()
    phases = set(args.phases.split(","))
    if not phases <= {"equality", "graphs", "timing"}:
        p.error(f"--phases takes equality, graphs and timing, not {sorted(phases - {'equality', 'graphs', 'timing'})}")
    report, ok = {"torch": torch.__version__}, True

    def line(passed: bool, what: str, detail) -> None:
        nonlocal ok
        ok &= passed
        print(f"{'PASS' if passed else 'FAIL'} {what}: {detail}", flush=True)

    if "equality" in phases:
        check_equality(report, line)
    if "graphs" in phases:
        check_graphs(report, line)
    if "timing" in phases:
        check_timing(report, line, args)
    if args.json:
        Path(args.json).write_text(json.dumps(report, indent=1, default=str))
    print("ALL PASS" if ok else "SOME CHECKS FAILED", flush=True)
    return 0 if ok else 1


def check_equality(report: dict, line) -> None:
    """Every case of CASES on two ranks against the single-GPU layer; InvalidRoutingError expected where planted."""
    per_rank = spawn_group(2, equality, "nccl", timeout_s=300)
    report["equality"] = {case.name: [vars(r[case.name]) for r in per_rank] for case in CASES}
    for case in CASES:
        for rank, result in enumerate(r[case.name] for r in per_rank):
            reported = "InvalidRoutingError" in result.raised
            expected = case.invalid_id and rank == 0
            good = result.shape_ok and result.error <= result.budget and reported == expected and (reported or not result.raised)
            line(good, f"equality {case.name} rank {rank}", f"error {result.error:.2e} (budget {result.budget:.2e}), "
                 f"pair {result.dispatcher} + {result.experts}, raised {result.raised or 'nothing'}")


def check_graphs(report: dict, line) -> None:
    """deepep_low_latency captured in a CUDA graph and replayed on new inputs, against its eager calls."""
    graphs = spawn_group(2, graph_replay, "nccl", timeout_s=300)
    report["graphs"] = graphs
    for rank, g in enumerate(graphs):
        line(max(g["errors"]) <= g["budget"], f"graph replay deepep_low_latency rank {rank}", f"errors vs eager {g['errors']}, {g['pair']}")


def check_timing(report: dict, line, args) -> None:
    """ep_gpu.py's timing of both DeepEP dispatchers beside the built-ins; the run's dispatcher ranking if asked."""
    bench = spawn_group(2, timing, "nccl", args.iters, args.budget_s, timeout_s=420)
    report["bench"] = bench
    if args.write_dispatch_ranking:
        ep_gpu.dispatch_ranking([{"bench": b} for b in bench], 2, torch.cuda.get_device_name()).save(args.write_dispatch_ranking)
    for key, row in sorted(bench[0].items()):
        if "dispatch_combine" in row or "error" in row:
            line("error" not in row, f"timing {key} rank 0", row.get("dispatch_combine", row.get("error")))


if __name__ == "__main__":
    sys.exit(main())
