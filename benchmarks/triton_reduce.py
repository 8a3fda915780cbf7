"""Experiment: the Triton backend's top-k reduction, separate sum vs atomics fused into GEMM2.

Run on a GPU: python benchmarks/triton_reduce.py [--json OUT]
Times the whole layer (CUDA-graph replay, do_bench median) for both modes on the same inputs and
checks both against the reference.
"""

from __future__ import annotations

import argparse
import itertools
import sys

from moe_core.bench.harness import _capture
from moe_core.bench.report import save_experiment
from moe_core.bench.timing import Timer
from moe_core.numerics import relative_error
from moe_core.presets import model, random_inputs, random_layer
from moe_core.quant import scheme
from moe_core.reference.kernel import ReferenceKernel
from moe_core_triton.kernel import TritonKernel


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--json")
    args = parser.parse_args()
    timer = Timer("cuda")
    results = []
    for preset, name in itertools.product(("qwen3-30b-a3b", "mixtral-8x7b"), ("unquantized", "fp8-channel")):
        cfg, sch = model(preset).config(), scheme(name)
        raw = random_layer(cfg, sch, device="cuda")
        oracle = ReferenceKernel(cfg, sch.weight_key, sch.activation_key)
        kernels = {mode: type(f"T_{mode}", (TritonKernel,), {"reduce": mode})(cfg, sch.weight_key, sch.activation_key) for mode in ("sum", "atomic")}
        prepared = {mode: k.prepare_weights(raw) for mode, k in kernels.items()}
        for tokens in (1, 64, 1024, 4096, 16384):
            sets = [random_inputs(cfg, tokens, device="cuda", seed=2 * tokens + i) for i in range(2)]
            want = oracle.apply(*sets[0][:1], oracle.prepare_weights(raw), sets[0][1]) if tokens <= 4096 else None
            row = {"preset": preset, "scheme": name, "tokens": tokens}
            for mode, kernel in kernels.items():
                fn = lambda x, r, k=kernel, w=prepared[mode]: k.apply(x, w, r)  # noqa: E731
                if want is not None:
                    row[f"{mode}_rel_err"] = relative_error(fn(*sets[0]), want)
                replays = itertools.cycle(_capture(fn, sets))
                row[f"{mode}_us"] = timer.time(lambda: next(replays).replay()) * 1e6
            results.append(row)
            print(f"{preset:14} {name:12} T={tokens:6}: sum {row['sum_us']:9.1f} us  atomic {row['atomic_us']:9.1f} us  "
                  f"(atomic/sum {row['atomic_us'] / row['sum_us']:.3f})", flush=True)
    if args.json:
        save_experiment(args.json, results)
    return 0


if __name__ == "__main__":
    sys.exit(main())
