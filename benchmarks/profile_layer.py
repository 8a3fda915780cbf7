"""Profile one forward of a registered backend (``triton`` by default): GPU time per kernel (torch.profiler), to see
where the layer's time goes.

Run on a GPU: python benchmarks/profile_layer.py --preset qwen3-30b-a3b --scheme unquantized --tokens 1,4096

With --ncu the forward runs once, after the warm-up, between cudaProfilerStart and cudaProfilerStop, for
Nsight Compute's hardware counters (bytes moved, warp stall reasons, occupancy) of each kernel in it:

    ncu --clock-control none --profile-from-start off --kernel-name regex:moe_gemm \
        --section SpeedOfLight --section Occupancy --section LaunchStats --section WarpStateStats \
        --section MemoryWorkloadAnalysis python benchmarks/profile_layer.py --ncu --scheme unquantized,w4a16 --tokens 1

(``--backend triton_ws_sm90 --kernel-name regex:ws_decode`` for the warp-specialized decode layer.)
"""

from __future__ import annotations

import argparse
import sys

import torch
from torch.profiler import ProfilerActivity, profile

from moe_core.presets import model, random_inputs, random_layer
from moe_core.quant import scheme
from moe_core.registry import default_registry


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--backend", default="triton", help="a registered backend's name")
    parser.add_argument("--preset", default="qwen3-30b-a3b")
    parser.add_argument("--scheme", default="unquantized")
    parser.add_argument("--tokens", default="1,4096")
    parser.add_argument("--ncu", action="store_true", help="one forward inside the CUDA profiler range (run under ncu)")
    args = parser.parse_args()
    kernel_cls = default_registry().specs[args.backend].load_kernel()
    for name in args.scheme.split(","):
        cfg, sch = model(args.preset).config(), scheme(name)
        kernel = kernel_cls(cfg, sch.weight_key, sch.activation_key)
        weights = kernel.prepare_weights(random_layer(cfg, sch, device="cuda"))
        for tokens in (int(t) for t in args.tokens.split(",")):
            x, routing = random_inputs(cfg, tokens, device="cuda", seed=tokens)
            for _ in range(3):
                kernel.apply(x, weights, routing)
            torch.cuda.synchronize()
            if args.ncu:
                torch.cuda.cudart().cudaProfilerStart()
                kernel.apply(x, weights, routing)
                torch.cuda.synchronize()
                torch.cuda.cudart().cudaProfilerStop()
                print(f"{args.preset} {name} T={tokens}: one forward profiled")
                continue
            with profile(activities=[ProfilerActivity.CUDA]) as prof:
                for _ in range(10):
                    kernel.apply(x, weights, routing)
                torch.cuda.synchronize()
            rows = [(e.key, e.device_time_total / 10, e.count // 10) for e in prof.key_averages() if e.device_time_total > 0]
            total = sum(t for _, t, _ in rows)
            print(f"\n{args.preset} {name} T={tokens}: GPU time per forward {total:.1f} us in {sum(c for _, _, c in rows)} kernels")
            for key, t, count in sorted(rows, key=lambda r: -r[1]):
                print(f"  {t:9.1f} us  {100 * t / total:5.1f}%  x{count:<3} {key[:90]}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
