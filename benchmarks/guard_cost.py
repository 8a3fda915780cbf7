"""Experiment: what the routing guards cost the Triton backend (issue: bad routing must never take down the GPU).

Run on a GPU: python benchmarks/guard_cost.py [--json OUT]
For Qwen3-30B-A3B and Mixtral-8x7B, bf16 and fp8-block, 1/64/4096 tokens, the same layer is timed
with the guards on (invalid pairs counted on the device, masked top-k sum, MoELayer's asynchronous
report) and off (``TritonKernel.count_routing_errors = False``, the layer's snapshot/poll skipped):
CUDA-graph replay of ``kernel.apply`` (do_bench median) and eager calls through ``MoELayer`` (wall
clock of 50 back-to-back calls and one sync), on/off interleaved over ``--trials`` rounds and the
medians compared, on the same inputs, both checked against the reference first.
"""

from __future__ import annotations

import argparse
import itertools
import statistics
import sys
import time

import torch

from moe_core.bench.harness import _capture
from moe_core.bench.report import save_experiment
from moe_core.bench.timing import Timer
from moe_core.layer import MoELayer
from moe_core.numerics import relative_error
from moe_core.presets import model, random_inputs, random_layer
from moe_core.quant import scheme
from moe_core.reference.kernel import ReferenceKernel


def _switch(layer: MoELayer, on: bool) -> None:
    """Guards on: the class defaults; off: no counting, torch top-k sum, no snapshot/poll."""
    for kernel, _ in layer._kernels.values():
        if on:
            kernel.__dict__.pop("count_routing_errors", None)
            kernel.routing_errors.__dict__.pop("snapshot", None)
            kernel.routing_errors.__dict__.pop("poll", None)
        else:
            kernel.count_routing_errors = False
            kernel.routing_errors.snapshot = lambda: None
            kernel.routing_errors.poll = lambda: None


def _back_to_back_us(fn, calls: int = 50) -> float:
    """Eager time per call as an engine sees it: ``calls`` calls issued back to back, then one sync."""
    fn()
    torch.cuda.synchronize()
    start = time.perf_counter()
    for _ in range(calls):
        fn()
    torch.cuda.synchronize()
    return (time.perf_counter() - start) / calls * 1e6


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--json")
    parser.add_argument("--tokens", default="1,64,4096")
    parser.add_argument("--trials", type=int, default=5)
    args = parser.parse_args()
    timer = Timer("cuda")
    rows = []
    for preset, name in itertools.product(("qwen3-30b-a3b", "mixtral-8x7b"), ("unquantized", "fp8-block")):
        cfg, sch = model(preset).config(), scheme(name)
        raw = random_layer(cfg, sch, device="cuda")
        layer = MoELayer(cfg, raw, sch.weight_key, sch.activation_key, environ={"MOE_CORE_BACKEND": "triton"})
        kernel, weights = layer._kernels["triton"]
        oracle = ReferenceKernel(cfg, sch.weight_key, sch.activation_key)
        oracle_weights = oracle.prepare_weights(raw)
        for tokens in (int(t) for t in args.tokens.split(",")):
            sets = [random_inputs(cfg, tokens, device="cuda", seed=2 * tokens + i) for i in range(2)]
            want = oracle.apply(sets[0][0], oracle_weights, sets[0][1])
            row = {"preset": preset, "scheme": name, "tokens": tokens}
            fn = lambda x, r: kernel.apply(x, weights, r)  # noqa: E731
            graphs = {}
            for on in (True, False):
                _switch(layer, on)
                row[f"rel_err_{'on' if on else 'off'}"] = relative_error(layer(*sets[0]), want)
                graphs[on] = itertools.cycle(_capture(fn, sets))
            for trial in range(args.trials):  # on and off interleaved, medians taken
                for on in (True, False):
                    _switch(layer, on)
                    tag = "on" if on else "off"
                    cycle = itertools.cycle(sets)
                    row.setdefault(f"graph_{tag}_us", []).append(timer.time(lambda: next(graphs[on]).replay()) * 1e6)
                    row.setdefault(f"eager_{tag}_us", []).append(_back_to_back_us(lambda: layer(*next(cycle))))
            _switch(layer, True)
            for mode in ("graph", "eager"):
                for tag in ("on", "off"):
                    row[f"{mode}_{tag}_median_us"] = statistics.median(row[f"{mode}_{tag}_us"])
                row[f"{mode}_cost_pct"] = 100 * (row[f"{mode}_on_median_us"] / row[f"{mode}_off_median_us"] - 1)
            rows.append(row)
            print(f"{preset:14} {name:12} T={tokens:5}: graph on {row['graph_on_median_us']:8.1f} off {row['graph_off_median_us']:8.1f} us "
                  f"({row['graph_cost_pct']:+5.1f}%)  eager on {row['eager_on_median_us']:8.1f} off {row['eager_off_median_us']:8.1f} us "
                  f"({row['eager_cost_pct']:+5.1f}%)  rel err {row['rel_err_on']:.2e}", flush=True)
    if args.json:
        save_experiment(args.json, rows)
    return 0


if __name__ == "__main__":
    sys.exit(main())
