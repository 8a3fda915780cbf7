"""Session 38: GEMM2 tiles of the prefill layers behind issue 12's fp8 targets, timed in the whole layer.

ws_probe.py's grouped GEMM (its B by TMA, 4 stages) ran GEMM2 of DeepSeek-V3 at 16384 tokens in 5.3 ms with rows
gathered like the plugin's, where the plugin's own GEMM2 took 6.1 ms (its data-file tile: B through pointers). Here
each case's GEMM2 runs the data file's tile and the listed alternatives (GEMM1 as the data file says), each timed as
a CUDA-graph replay of the whole layer with the L2 emptied by a read (moe_core.bench.timing.cold_l2_seconds), in two
alternating rounds; each output is compared with the data file's.

    python gemm2_tiles.py [case ...]     # case: preset:scheme:tokens
"""
import sys

import torch

from moe_core.bench.timing import cold_l2_seconds
from moe_core.numerics import relative_error
from moe_core.presets import model, random_inputs, random_layer
from moe_core.quant import scheme
from moe_core_triton.configs import LaunchConfig
from moe_core_triton.kernel import TritonKernel

sys.path.insert(0, __file__.rsplit("/", 2)[0] + "/h100-2026-11-26-s37")
from fused_ab import graph_of  # noqa: E402  (session 37's CUDA-graph helper)


def tile(bm, bn, warps, stages, tma=True):
    return LaunchConfig(bm, bn, 128, 8, warps, stages, TMA_B=tma)


CASES = {
    "deepseek-v3:fp8-block:16384": [tile(128, 128, 8, 4), tile(64, 128, 4, 4), tile(64, 128, 4, 3), tile(128, 128, 8, 5),
                                    tile(128, 128, 8, 3)],
    "deepseek-v3:fp8-block:4096": [tile(128, 128, 8, 4), tile(64, 128, 4, 3), tile(64, 128, 8, 4)],
    "mixtral-8x7b:fp8-block:4096": [tile(128, 128, 8, 4), tile(128, 128, 8, 3), tile(128, 128, 8, 4, tma=False),
                                    tile(64, 128, 4, 4)],
    "qwen3-30b-a3b:fp8-block:4096": [tile(64, 128, 4, 4), tile(64, 128, 8, 4), tile(128, 128, 8, 4), tile(128, 128, 8, 3)],
    "qwen3-30b-a3b:fp8-channel:4096": [tile(64, 128, 4, 4), tile(64, 128, 4, 3), tile(128, 128, 8, 4), tile(64, 256, 8, 3)],
}


def with_gemm2(lc: LaunchConfig | None) -> type[TritonKernel]:
    if lc is None:
        return TritonKernel

    class Gemm2(TritonKernel):
        def _config(self, device, rows, n, k, gemm, tokens):
            chosen = super()._config(device, rows, n, k, gemm, tokens)
            return self.as_run(lc, k, device) if gemm == 2 else chosen

    return Gemm2


def layer_case(case: str):
    """(config, scheme, tokens, prepared weights, hidden states, routing) of ``case``, ``preset:scheme:tokens``."""
    preset, name, tokens = case.split(":")
    tokens = int(tokens)
    cfg, sch = model(preset).config(), scheme(name)
    weights = TritonKernel(cfg, sch.weight_key, sch.activation_key).prepare_weights(random_layer(cfg, sch, device="cuda", seed=0))
    x, routing = random_inputs(cfg, tokens, device="cuda", seed=tokens)
    return cfg, sch, tokens, weights, x, routing


def main(argv):
    print(f"{torch.cuda.get_device_name()}; torch {torch.__version__}", flush=True)
    for case in argv or list(CASES):
        cfg, sch, tokens, weights, x, routing = layer_case(case)
        variants = [None] + CASES[case]
        runs, outs, times, label = {}, {}, {i: [] for i in range(len(variants))}, {}
        for i, lc in enumerate(variants):
            kernel = with_gemm2(lc)(cfg, sch.weight_key, sch.activation_key)  # the same prepared weights for every variant
            plan = kernel._gemm_launches(x.device, tokens * cfg.top_k, tokens, True, False, eager=False)
            c = plan[1].config
            label[i] = (f"{'data file' if lc is None else 'variant'} {c.BLOCK_M}x{c.BLOCK_N}x{c.BLOCK_K} w{c.num_warps} "
                        f"s{c.num_stages} tma={c.TMA_B}")
            forward = lambda kernel=kernel: kernel.apply(x, weights, routing)  # noqa: E731
            try:
                outs[i] = forward()
                runs[i] = graph_of(forward)
            except Exception as exc:  # noqa: BLE001 - out of resources: not a candidate
                print(f"  {label[i]}: {type(exc).__name__}", flush=True)
        for _ in range(2):
            for i, run in runs.items():
                times[i].append(cold_l2_seconds(run))
        base = sum(times[0]) / 2
        for i in runs:
            t = sum(times[i]) / 2
            print(f"{case} | {label[i]} | {times[i][0] * 1e6:.1f} ; {times[i][1] * 1e6:.1f} us | {100 * (base / t - 1):+.1f}% | "
                  f"rel. diff {relative_error(outs[i], outs[0]):.1e}", flush=True)
        del runs, outs, weights
        torch.cuda.empty_cache()


if __name__ == "__main__":
    main(sys.argv[1:])
