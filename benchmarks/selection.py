"""Selection performance: plugin discovery, cold (uncached) selection, cached selection.

Run: .venv/bin/python benchmarks/selection.py [--json OUT]
"""

from __future__ import annotations

import argparse
import json
import platform as pyplatform
import statistics
import sys
import time


def timed(fn, repeat: int) -> list[float]:
    out = []
    for _ in range(repeat):
        start = time.perf_counter()
        fn()
        out.append(time.perf_counter() - start)
    return out


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--json", help="write the figures here")
    args = parser.parse_args()

    t0 = time.perf_counter()
    import torch  # noqa: F401  (excluded from the discovery figure)

    torch_import = time.perf_counter() - t0
    t0 = time.perf_counter()
    import moe_core  # noqa: F401

    core_import = time.perf_counter() - t0

    from moe_core import quant, resolver
    from moe_core.platform import preset
    from moe_core.presets import model
    from moe_core.registry import Registry

    discovery = timed(lambda: Registry(), 20)
    reg = Registry()
    cfg = model("deepseek-v3").config()
    sch = quant.scheme("fp8-block")
    h100 = preset("h100")

    def cold():
        resolver.clear_cache()
        resolver.select(cfg, sch.weight_key, sch.activation_key, platform=h100, registry=reg)

    cold_times = timed(cold, 2000)
    resolver.select(cfg, sch.weight_key, sch.activation_key, platform=h100, registry=reg)
    n = 20000
    start = time.perf_counter()
    for _ in range(n):
        resolver.select(cfg, sch.weight_key, sch.activation_key, platform=h100, registry=reg)
    cached = (time.perf_counter() - start) / n

    result = {
        "python": sys.version.split()[0],
        "machine": pyplatform.machine(),
        "torch": torch.__version__,
        "backends": sorted(reg.specs),
        "plugins": [p.name for p in reg.plugins],
        "import_torch_s": torch_import,
        "import_moe_core_s": core_import,
        "discovery_median_ms": statistics.median(discovery) * 1e3,
        "cold_selection_median_us": statistics.median(cold_times) * 1e6,
        "cold_selection_p99_us": sorted(cold_times)[int(len(cold_times) * 0.99)] * 1e6,
        "cached_selection_us": cached * 1e6,
    }
    print(f"backends registered: {', '.join(result['backends'])}")
    print(f"plugin discovery (Registry(), entry points + registration), median of 20: {result['discovery_median_ms']:.2f} ms  (target < 200 ms)")
    print(f"cold selection (deepseek-v3 fp8-block, simulated H100), median of 2000: {result['cold_selection_median_us']:.1f} us, p99 {result['cold_selection_p99_us']:.1f} us  (target < 1000 us)")
    print(f"cached selection, mean of {n}: {result['cached_selection_us']:.2f} us  (target < 5 us)")
    print(f"(import torch: {torch_import * 1e3:.0f} ms, import moe_core after torch: {core_import * 1e3:.0f} ms)")
    if args.json:
        with open(args.json, "w") as fh:
            json.dump(result, fh, indent=2)
    return 0


if __name__ == "__main__":
    sys.exit(main())
