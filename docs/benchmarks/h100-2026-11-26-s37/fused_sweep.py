"""Session 37: a wide search of the one-launch layer's tiles (fused.py) for Qwen3-30B-A3B bf16 decode, wider than
`tune --fused` (moe_core_triton.tune.fused_candidates): K steps of 64 to 256, H steps of 64 to 256, 3 to 6 stages.

Every candidate is first compiled by worker processes at once (one forward each, 14 processes), then timed in this
process as a CUDA-graph replay with the L2 emptied by a read (moe_core.bench.timing.cold_l2_seconds), against the two
GEMMs (fused_override False) in the same process; each output is checked against the two GEMMs'. With --write, the
fastest candidate per token count is written to the data file's gemm=fused entry where it beats the two GEMMs by
moe_core_triton.tune.FUSED_MARGIN, else null.

    python fused_sweep.py [--write] 1,2,4
"""
import itertools
import json
import subprocess
import sys

import torch

from moe_core.bench.timing import cold_l2_seconds
from moe_core.numerics import relative_error, tolerance
from moe_core.presets import model, random_inputs, random_layer
from moe_core.quant import scheme
from moe_core_triton import configs
from moe_core_triton.configs import FusedConfig
from moe_core_triton.kernel import TritonKernel
from moe_core_triton.tune import FUSED_MARGIN, write_atomically
from fused_ab import graph_of

PRESET = "qwen3-30b-a3b"
WORKERS = 14


def candidates() -> list[FusedConfig]:
    out = []
    for cols, bk, bh, warps, stages in itertools.product((32, 48, 64, 96, 128), (64, 128, 256), (64, 128, 256), (4, 8), (3, 4, 5, 6)):
        bn = max(16, 1 << (cols - 1).bit_length())
        if stages * 2 * bn * bk * 2 > 200 * 1024 or stages * bh * bn * 2 > 200 * 1024:
            continue  # over the shared memory of one H100 block
        out.append(FusedConfig(16, bn, cols, bk, bh, warps, stages))
    return out


def layer():
    cfg = model(PRESET).config()
    kernel = TritonKernel(cfg, None, None)
    return cfg, kernel, kernel.prepare_weights(random_layer(cfg, scheme("unquantized"), device="cuda", seed=0))


def compile_worker(index: int, count: int, token_counts: list[int]) -> None:
    cfg, kernel, weights = layer()
    for tokens in token_counts:
        x, routing = random_inputs(cfg, tokens, device="cuda", seed=tokens)
        for fc in candidates()[index::count]:
            kernel.fused_override = fc
            try:
                kernel.apply(x, weights, routing)
            except Exception:  # noqa: BLE001 - reported when timed
                pass
    torch.cuda.synchronize()


def graph_seconds(fn) -> float:
    """The median replay time of a CUDA graph of ``fn`` (fused_ab.graph_of), the L2 emptied by a read before each."""
    return cold_l2_seconds(graph_of(fn), warmup_ms=5, rep_ms=30)


def main(argv):
    if argv and argv[0] == "--worker":
        compile_worker(int(argv[1]), int(argv[2]), [int(t) for t in argv[3].split(",")])
        return
    write = argv[:1] == ["--write"]
    token_counts = [int(t) for t in argv[-1].split(",")]
    workers = [subprocess.Popen([sys.executable, __file__, "--worker", str(i), str(WORKERS), argv[-1]], stderr=subprocess.DEVNULL)
               for i in range(WORKERS)]
    for w in workers:
        w.wait()
    print(f"compiled {len(candidates())} candidates x {len(token_counts)} token counts", flush=True)
    cfg, kernel, weights = layer()
    for tokens in token_counts:
        x, routing = random_inputs(cfg, tokens, device="cuda", seed=tokens)
        kernel.fused_override = False
        reference = kernel.apply(x, weights, routing).float()
        baseline = graph_seconds(lambda: kernel.apply(x, weights, routing))
        timings = []
        for fc in candidates():
            kernel.fused_override = fc
            try:
                drift = relative_error(kernel.apply(x, weights, routing).float(), reference)
                seconds = graph_seconds(lambda: kernel.apply(x, weights, routing))
            except Exception as exc:  # noqa: BLE001 - out of resources: not a candidate
                print(f"  T={tokens} skip {fc}: {type(exc).__name__}", flush=True)
                continue
            assert drift <= tolerance(None, cfg.dtype), (fc, drift)
            timings.append((seconds, fc))
        timings.sort(key=lambda t: t[0])
        print(f"T={tokens}: two GEMMs {baseline * 1e6:.1f} us; {len(timings)} candidates; fastest:", flush=True)
        for seconds, fc in timings[:12]:
            print(f"  {seconds * 1e6:6.1f} us  {fc}", flush=True)
        best_seconds, best = timings[0]
        if write:  # after each count, so that a call's time limit loses only the counts not searched
            chosen = best if best_seconds < baseline * (1 - FUSED_MARGIN) else None
            path = configs.CONFIG_DIR / configs.device_file_name(torch.cuda.get_device_name())
            data = json.loads(path.read_text())
            key = configs.shape_key(cfg.num_experts, cfg.intermediate_size, cfg.hidden_size, "unquantized", "fused")
            data.setdefault(key, {})[str(tokens)] = chosen.to_dict() if chosen is not None else None
            write_atomically(path, json.dumps(data, indent=1, sort_keys=True))
            print(f"wrote {key} T={tokens}: {chosen}", flush=True)


if __name__ == "__main__":
    main(sys.argv[1:])
