"""Session 37: the one-launch layer's fixed costs, A/B in one process (Qwen3-30B-A3B bf16, the data file's tiles).

Variants of the same FusedConfig per token count: the sums cast 1024 per step (as committed in session 36) or all of
them in one step (MAX_CAST_BLOCK 4096), and the w2 columns of the first 0, 2, 4 or all 16 GEMM2 steps asked of the L2
before GEMM1 (PREFETCH_W2); the two GEMMs too. Each timed as a CUDA-graph replay with the L2 emptied by a read, in two
rounds (the variants interleaved), and checked against the two GEMMs' output.

    git apply docs/benchmarks/h100-2026-11-26-s37/prefetch_cast_experiment.patch   # the variants' code, not kept
    python fused_tail_ab.py [tokens,...]    # default 1,2,4

Result (call 5, fused_tail_ab5.txt): casting in one step changed nothing beyond noise, and every prefetch was slower
(1 token: 36.0 µs without, 37.7 with 2 steps, 48.4 with all 16), so neither was kept.
"""
import dataclasses
import statistics
import sys

import torch

from moe_core.bench.timing import cold_l2_seconds
from moe_core.numerics import relative_error, tolerance
from moe_core.presets import model, random_inputs, random_layer
from moe_core.quant import scheme
from moe_core_triton import configs, fused
from moe_core_triton.kernel import TritonKernel, _device_name
from fused_ab import graph_of

VARIANTS = [("two GEMMs", None, None), ("cast 1024, no prefetch", 1024, 0), ("cast 4096, no prefetch", 4096, 0),
            ("cast 4096, prefetch 2", 4096, 2), ("cast 4096, prefetch 4", 4096, 4), ("cast 4096, prefetch all", 4096, 16)]


def graph_seconds(fn) -> float:
    """The median replay time of a CUDA graph of ``fn`` (fused_ab.graph_of), the L2 emptied by a read before each."""
    return cold_l2_seconds(graph_of(fn), warmup_ms=10, rep_ms=60)


def main(argv):
    token_counts = [int(t) for t in (argv[0] if argv else "1,2,4").split(",")]
    cfg = model("qwen3-30b-a3b").config()
    weights = TritonKernel(cfg, None, None).prepare_weights(random_layer(cfg, scheme("unquantized"), device="cuda", seed=0))
    key = configs.shape_key(cfg.num_experts, cfg.intermediate_size, cfg.hidden_size, "unquantized", "fused")
    print(torch.cuda.get_device_name(), torch.__version__, flush=True)
    for tokens in token_counts:
        fc = configs.choose_fused(_device_name(torch.device("cuda")), key, tokens)
        x, routing = random_inputs(cfg, tokens, device="cuda", seed=tokens)
        times = {name: [] for name, _, _ in VARIANTS}
        reference = None
        for _ in range(2):
            for name, cast, prefetch in VARIANTS:
                kernel = TritonKernel(cfg, None, None)
                if cast is None:
                    kernel.fused_override = False
                else:
                    fused.MAX_CAST_BLOCK = cast
                    fused.fused_launcher.cache_clear()
                    kernel.fused_override = dataclasses.replace(fc, PREFETCH_W2=prefetch)
                out = kernel.apply(x, weights, routing).float()
                reference = out if reference is None else reference
                assert relative_error(out, reference) <= tolerance(None, cfg.dtype), name
                times[name].append(graph_seconds(lambda: kernel.apply(x, weights, routing)))
        print(f"T={tokens} ({fc}):", flush=True)
        for name, samples in times.items():
            print(f"  {name:26s} {statistics.mean(samples) * 1e6:6.1f} us  (rounds: {', '.join(f'{s * 1e6:.1f}' for s in samples)})", flush=True)


if __name__ == "__main__":
    main(sys.argv[1:])
