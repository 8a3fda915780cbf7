"""How far the bench's paired timing (Timer.back_to_back_pair: eager batches alternating with batches of graph replays
back to back, 5 batches of about 20 ms each) pins eager - graph b2b for multi-millisecond layers, where a 20 ms batch
holds only 3 or 4 calls. For each case, with the bench's own timing functions: three runs of 5 paired batches, then
one run of 41, whose batches are also taken 5 at a time (8 consecutive windows) to show the spread one 5-batch
measurement can land in. Microseconds per call.

    python eager_pairs.py [cases=mixtral-8x7b:unquantized:4096,...]
"""
import itertools, statistics, sys
import torch
from moe_core.bench.harness import _capture
from moe_core.bench.timing import _cuda_batch_seconds, _cuda_calls_per_batch, alternating_batches
from moe_core.presets import model, random_inputs, random_layer
from moe_core.quant import scheme
from moe_core_triton.kernel import TritonKernel

CASES = "mixtral-8x7b:unquantized:4096,mixtral-8x7b:fp8-channel:4096,mixtral-8x7b:fp8-block:4096,qwen3-30b-a3b:unquantized:4096"
pick = {"cases": CASES} | dict(a.split("=", 1) for a in sys.argv[1:])
print("case | calls/batch | 5 batches x3: eager - b2b | 41 batches: eager, b2b, eager - b2b | 5-batch windows of the 41: eager - b2b")
for case in pick["cases"].split(","):
    preset, name, tokens = case.split(":")
    cfg, sch = model(preset).config(), scheme(name)
    kernel = TritonKernel(cfg, *sch.keys)
    weights = kernel.prepare_weights(random_layer(cfg, sch, device="cuda"))
    sets = [random_inputs(cfg, int(tokens), device="cuda", seed=1000 * int(tokens) + i) for i in range(3)]
    fn = lambda x, r: kernel.apply(x, weights, r)  # noqa: E731
    graphs = _capture(fn, sets)
    inputs, replays = itertools.cycle(sets), itertools.cycle(graphs)
    eager, replay = (lambda: fn(*next(inputs))), (lambda: next(replays).replay())
    calls = _cuda_calls_per_batch(eager)
    short = []
    for _ in range(3):
        e, g = alternating_batches([eager, replay], _cuda_batch_seconds, _cuda_calls_per_batch, 5)
        short.append((e - g) * 1e6)
    samples = {eager: [], replay: []}

    def recorded(f, n):
        s = _cuda_batch_seconds(f, n)
        samples[f].append(s / n)
        return s

    e, g = alternating_batches([eager, replay], recorded, _cuda_calls_per_batch, 41)
    windows = [(statistics.median(samples[eager][i:i + 5]) - statistics.median(samples[replay][i:i + 5])) * 1e6
               for i in range(0, 40, 5)]
    print(f"{case} | {calls} | {' / '.join(f'{d:+.1f}' for d in short)} | {e * 1e6:.1f}, {g * 1e6:.1f}, {(e - g) * 1e6:+.1f} | "
          f"{' '.join(f'{d:+.0f}' for d in windows)}", flush=True)
    del kernel, weights, graphs, sets
    torch.cuda.empty_cache()
