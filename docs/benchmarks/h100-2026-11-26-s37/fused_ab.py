"""Session 37: the one-launch layer (fused.py) against the two GEMMs, in one process, unquantized bf16 layers.

For each preset and token count: the data file's choice (``fused_override = None``: the one-launch layer where the
tuned file names a FusedConfig for the count, else the two GEMMs) and the two GEMMs (``fused_override = False``), each
timed as a CUDA-graph replay with the L2 emptied by a read (moe_core.bench.timing.cold_l2_seconds, as `moe-core bench`),
eagerly back to back, and by host time; each output checked against the reference backend. The roofline is the
layer's bytes (moe_core.bench.roofline.work) over the copy bandwidth measured in the same process.

    python fused_ab.py [preset:tokens,tokens ...]    # default: qwen3-30b-a3b:1,2,4,8,16 mixtral-8x7b:1,2,4,16
"""
import sys

import torch

from moe_core.bench.roofline import work
from moe_core.bench.timing import _back_to_back_cuda, cold_l2_seconds, host_time
from moe_core.numerics import relative_error
from moe_core.presets import model, random_inputs, random_layer
from moe_core.quant import scheme
from moe_core.reference.kernel import ReferenceKernel
from moe_core_triton.fused import fused_layer_kernel
from moe_core_triton.kernel import TritonKernel
from moe_core_triton.launch import recording


def copy_bandwidth() -> float:
    """Bytes read + written per second by a 1 GiB device-to-device copy, median of cold runs."""
    src = torch.empty(1 << 29, dtype=torch.int16, device="cuda")
    dst = torch.empty_like(src)
    return 2 * src.numel() * 2 / cold_l2_seconds(lambda: dst.copy_(src), warmup_ms=20, rep_ms=100)


def graph_of(fn):
    stream = torch.cuda.Stream()
    stream.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(stream):
        for _ in range(2):
            fn()
    torch.cuda.current_stream().wait_stream(stream)
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        fn()
    return graph.replay


def main(argv):
    cases = argv or ["qwen3-30b-a3b:1,2,4,8,16", "mixtral-8x7b:1,2,4,16"]
    bandwidth = copy_bandwidth()
    print(f"{torch.cuda.get_device_name()}; copy {bandwidth / 1e12:.2f} TB/s; torch {torch.__version__}", flush=True)
    print("preset tokens | mode | fused? | graph us | eager us | host us | % roofline (graph) | rel. error vs reference")
    sch = scheme("unquantized")
    for case in cases:
        preset, counts = case.split(":")
        cfg = model(preset).config()
        raw = random_layer(cfg, sch, device="cuda", seed=0)
        kernel = TritonKernel(cfg, None, None)
        weights = kernel.prepare_weights(raw)
        oracle = ReferenceKernel(cfg, None, None)
        oracle_weights = oracle.prepare_weights(raw)
        for tokens in map(int, counts.split(",")):
            x, routing = random_inputs(cfg, tokens, device="cuda", seed=tokens)
            want = oracle.apply(x, oracle_weights, routing)
            ideal = work(cfg, None, routing).bytes / bandwidth
            for mode, name in ((False, "two GEMMs"), (None, "data file")):
                kernel.fused_override = mode
                forward = lambda: kernel.apply(x, weights, routing)  # noqa: E731
                with recording() as launches:
                    got = forward()
                one_launch = fused_layer_kernel in [launcher.fn for launcher, _, _ in launches]
                graph = cold_l2_seconds(graph_of(forward))
                eager = _back_to_back_cuda(forward)
                host = host_time(forward)
                print(f"{preset} {tokens} | {name} | {'fused' if one_launch else 'two'} | {graph * 1e6:.1f} | {eager * 1e6:.1f} | "
                      f"{host * 1e6:.1f} | {100 * ideal / graph:.1f} | {relative_error(got, want):.2e}", flush=True)
        del kernel, weights, oracle, oracle_weights, raw
        torch.cuda.empty_cache()


if __name__ == "__main__":
    main(sys.argv[1:])
