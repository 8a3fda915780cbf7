"""Session 38: the intermediate in GEMM1's block-table order (``TritonKernel.sorted_intermediate``, gemm.py ``SORTED``)
against the layout by pair, in one process, on the same weights and inputs.

Each case is timed both ways twice, alternating (by pair, sorted, by pair, sorted), as a CUDA-graph replay with the L2
emptied by a read (moe_core.bench.timing.cold_l2_seconds, as `moe-core bench`) and eagerly back to back; the two
outputs are compared with each other (relative error), and the launches are listed once.

    python sorted_ab.py [preset:scheme,scheme:tokens,tokens ...]
"""
import sys

import torch

from moe_core.bench.timing import _back_to_back_cuda, cold_l2_seconds
from moe_core.numerics import relative_error
from moe_core.presets import model, random_inputs, random_layer
from moe_core.quant import scheme
from moe_core_triton.kernel import TritonKernel

sys.path.insert(0, __file__.rsplit("/", 2)[0] + "/h100-2026-11-26-s37")
from fused_ab import graph_of  # noqa: E402  (session 37's CUDA-graph helper)

DEFAULT = ["qwen3-30b-a3b:unquantized,fp8-block,fp8-channel,w4a16:1024,4096",
           "mixtral-8x7b:unquantized,fp8-block,fp8-channel:1024,4096", "deepseek-v3:fp8-block:4096,16384"]


def main(argv):
    print(f"{torch.cuda.get_device_name()}; torch {torch.__version__}", flush=True)
    print("preset scheme tokens | graph by pair / sorted (us), round 1; round 2 | eager by pair / sorted | gain (graph, "
          "mean of rounds) | rel. diff | GEMM BLOCK_M")
    for case in argv or DEFAULT:
        preset, names, counts = case.split(":")
        cfg = model(preset).config()
        for name in names.split(","):
            sch = scheme(name)
            kernels = {sort: TritonKernel(cfg, sch.weight_key, sch.activation_key) for sort in (False, True)}
            for sort, kernel in kernels.items():  # one kernel each: an eager forward's record is kept per kernel
                kernel.sorted_intermediate = sort
            weights = kernels[True].prepare_weights(random_layer(cfg, sch, device="cuda", seed=0))
            for tokens in map(int, counts.split(",")):
                x, routing = random_inputs(cfg, tokens, device="cuda", seed=tokens)
                out, graph, eager = {}, {False: [], True: []}, {}
                for sort in (False, True, False, True):
                    forward = lambda: kernels[sort].apply(x, weights, routing)  # noqa: E731
                    out[sort] = forward()
                    graph[sort].append(cold_l2_seconds(graph_of(forward)))
                    eager[sort] = _back_to_back_cuda(forward)
                plan = kernels[True]._gemm_launches(x.device, tokens * cfg.top_k, tokens, True, False)
                gain = sum(graph[False]) / sum(graph[True]) - 1
                print(f"{preset} {name} {tokens} | {graph[False][0] * 1e6:.1f} / {graph[True][0] * 1e6:.1f}; "
                      f"{graph[False][1] * 1e6:.1f} / {graph[True][1] * 1e6:.1f} | {eager[False] * 1e6:.1f} / "
                      f"{eager[True] * 1e6:.1f} | {100 * gain:+.1f}% | {relative_error(out[True], out[False]):.1e} | "
                      f"{plan[0].config.BLOCK_M}/{plan[1].config.BLOCK_M} sorted={plan[0].sorted_rows}", flush=True)
            del kernels, weights
            torch.cuda.empty_cache()


if __name__ == "__main__":
    main(sys.argv[1:])
