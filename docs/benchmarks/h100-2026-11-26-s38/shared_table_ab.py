"""Session 38: GEMM2 reading GEMM1's block table (TritonKernel.shares_table) against a table of its own, in one process.

For each case whose data-file GEMM2 has fewer rows per block than GEMM1: the layer timed as CUDA-graph replays with the
L2 emptied by a read (cold_l2_seconds), the two kernels in turn for three rounds; then one profiled round of each
(torch.profiler, 3 forwards): the table kernels' and GEMM2's time per forward, GEMM1's as the clock's control.

    python shared_table_ab.py [preset:scheme:tokens ...]
"""
import statistics
import sys

import torch
from torch.profiler import ProfilerActivity, profile

from moe_core.bench.timing import cold_l2_seconds
from moe_core.numerics import relative_error
from moe_core_triton.kernel import TritonKernel

sys.path.insert(0, __file__.rsplit("/", 1)[0])
from gemm2_tiles import graph_of, layer_case  # noqa: E402

OwnTables = type("OwnTables", (TritonKernel,), {"shares_table": staticmethod(lambda *args: False)})


def kernel_times(kernel, x, weights, routing, forwards=3) -> dict[str, float]:
    with profile(activities=[ProfilerActivity.CUDA]) as prof:
        for _ in range(forwards):
            kernel.apply(x, weights, routing)
        torch.cuda.synchronize()
    times: dict[str, list[float]] = {}
    for e in prof.events():
        if e.device_time_total > 0:
            times.setdefault(e.name, []).append(e.device_time_total)
    gemms = times.pop("moe_gemm_kernel", [])
    out = {name: sum(ts) / forwards for name, ts in times.items()}
    out["GEMM1"], out["GEMM2"] = statistics.median(gemms[0::2]), statistics.median(gemms[1::2])
    return out


def main(argv):
    print(f"{torch.cuda.get_device_name()}; torch {torch.__version__}", flush=True)
    for case in argv or ["qwen3-30b-a3b:fp8-block:4096", "deepseek-v3:fp8-block:4096", "deepseek-v3:fp8-block:16384"]:
        cfg, sch, tokens, weights, x, routing = layer_case(case)
        kernels = {"shared": TritonKernel(cfg, sch.weight_key, sch.activation_key), "own": OwnTables(cfg, sch.weight_key, sch.activation_key)}
        outs = {k: kern.apply(x, weights, routing) for k, kern in kernels.items()}
        g1, g2 = kernels["shared"]._gemm_launches(x.device, tokens * cfg.top_k, tokens, True, False, eager=False)
        graphs = {k: graph_of(lambda kern=kern: kern.apply(x, weights, routing)) for k, kern in kernels.items()}
        times = {k: [] for k in kernels}
        for _ in range(3):
            for k, replay in graphs.items():
                times[k].append(cold_l2_seconds(replay))
        line = " | ".join(f"{k} {' / '.join(f'{t * 1e6:.1f}' for t in ts)} us" for k, ts in times.items())
        gain = sum(times["own"]) / sum(times["shared"]) - 1
        print(f"{case} (BLOCK_M {g1.config.BLOCK_M}/{g2.config.BLOCK_M}, GEMM2 table {g2.table_m}) | graph: {line} | "
              f"shared {100 * gain:+.1f}% | rel. diff {relative_error(outs['shared'], outs['own']):.1e}", flush=True)
        for k, kern in kernels.items():
            kt = kernel_times(kern, x, weights, routing)
            print(f"    {k}: " + ", ".join(f"{n} {t:.1f}" for n, t in kt.items()) + f" | GEMM2/GEMM1 {kt['GEMM2'] / kt['GEMM1']:.4f}",
                  flush=True)
        del kernels, graphs, outs, weights
        torch.cuda.empty_cache()


if __name__ == "__main__":
    main(sys.argv[1:])
