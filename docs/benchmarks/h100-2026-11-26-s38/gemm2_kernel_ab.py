"""Session 38: GEMM2 tiles timed by their kernel's own time, GEMM1 of the same forward as the control.

gemm2_tiles.py timed whole layers of 4 to 17 ms, whose replays varied by up to 15% from one round to the next on the
H100 (clocks under sustained fp8 load), more than the tiles differ. Here every variant runs rounds of forwards under
torch.profiler, taken in turn; each forward gives its GEMM2 kernel's time and its GEMM1's (the same tile in every
variant), and a variant's score is the median over its forwards of GEMM2 / GEMM1: what the clock does to both cancels.

    python gemm2_kernel_ab.py [case ...]     # case: preset:scheme:tokens, variants in VARIANTS
"""
import statistics
import sys

import torch
from torch.profiler import ProfilerActivity, profile

from moe_core.numerics import relative_error

sys.path.insert(0, __file__.rsplit("/", 1)[0])
from gemm2_tiles import layer_case, tile, with_gemm2  # noqa: E402

VARIANTS = {
    "deepseek-v3:fp8-block:16384": [tile(128, 128, 8, 4), tile(64, 128, 4, 4), tile(128, 128, 8, 4, tma=False)],
    "mixtral-8x7b:fp8-block:4096": [tile(128, 128, 8, 4), tile(128, 128, 8, 3), tile(128, 128, 8, 4, tma=False)],
    "mixtral-8x7b:unquantized:4096": [tile(128, 128, 8, 4, tma=False), tile(128, 128, 8, 3)],
}
ROUNDS, FORWARDS = 4, 3


def gemm_times(kernel, x, weights, routing) -> list[tuple[float, float]]:
    """(GEMM1, GEMM2) kernel microseconds of each of FORWARDS forwards."""
    with profile(activities=[ProfilerActivity.CUDA]) as prof:
        for _ in range(FORWARDS):
            kernel.apply(x, weights, routing)
        torch.cuda.synchronize()
    gemms = [e.device_time_total for e in prof.events() if e.name == "moe_gemm_kernel" and e.device_time_total > 0]
    return list(zip(gemms[0::2], gemms[1::2]))


def main(argv):
    print(f"{torch.cuda.get_device_name()}; torch {torch.__version__}", flush=True)
    for case in argv or list(VARIANTS):
        cfg, sch, tokens, weights, x, routing = layer_case(case)
        kernels = [with_gemm2(lc)(cfg, sch.weight_key, sch.activation_key) for lc in [None] + VARIANTS[case]]
        outs = [k.apply(x, weights, routing) for k in kernels]
        samples = [[] for _ in kernels]
        for _ in range(ROUNDS):
            for kernel, out in zip(kernels, samples):
                out.extend(gemm_times(kernel, x, weights, routing))
        for i, (kernel, pairs) in enumerate(zip(kernels, samples)):
            c = kernel._gemm_launches(x.device, tokens * cfg.top_k, tokens, True, False)[1].config
            ratio = statistics.median(g2 / g1 for g1, g2 in pairs)
            print(f"{case} | {'data file' if i == 0 else 'variant'} {c.BLOCK_M}x{c.BLOCK_N}x{c.BLOCK_K} w{c.num_warps} "
                  f"s{c.num_stages} tma={c.TMA_B} | GEMM2 / GEMM1 {ratio:.4f} | GEMM2 median {statistics.median(p[1] for p in pairs):.1f} us "
                  f"(min {min(p[1] for p in pairs):.1f}) | GEMM1 median {statistics.median(p[0] for p in pairs):.1f} us | "
                  f"rel. diff {relative_error(outs[i], outs[0]):.1e}", flush=True)
        del kernels, outs, weights
        torch.cuda.empty_cache()


if __name__ == "__main__":
    main(sys.argv[1:])
