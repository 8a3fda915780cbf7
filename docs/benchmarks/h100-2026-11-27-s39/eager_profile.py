"""Where eager forwards of a multi-millisecond layer lose their last tens of microseconds against graph replays
(issue 12's eager target): the GPU's own record (torch.profiler / CUPTI) of 8 eager calls back to back and of 8 graph
replays back to back, same layer, inputs and kernel object. Per call: the summed kernel, memset and memcpy time, the
span from the first GPU activity's start to the last one's end, and the idle time between activities (span less
activity); then each kernel's time per call, eager against graph. With rounds=N (call 6), N rounds alternate an eager
window and a graph window, and each round's per-call busy and idle times are printed, eager minus graph: whether the
kernels themselves differ between the modes or only the gaps between them.

    python eager_profile.py [cases=mixtral-8x7b:unquantized:4096,...] [rounds=1]
"""
import collections, itertools, json, os, sys, tempfile
import torch
from moe_core.bench.harness import _capture
from moe_core.presets import model, random_inputs, random_layer
from moe_core.quant import scheme
from moe_core_triton.kernel import TritonKernel

CASES = "mixtral-8x7b:unquantized:4096,mixtral-8x7b:fp8-block:4096"
pick = {"cases": CASES, "calls": "8", "rounds": "1"} | dict(a.split("=", 1) for a in sys.argv[1:])
CALLS = int(pick["calls"])
GPU_CATS = {"kernel", "gpu_memset", "gpu_memcpy"}


def gpu_record(run) -> list[dict]:
    torch.cuda.synchronize()
    with torch.profiler.profile(activities=[torch.profiler.ProfilerActivity.CUDA]) as prof:
        for _ in range(CALLS):
            run()
        torch.cuda.synchronize()
    path = tempfile.mktemp(suffix=".json")
    prof.export_chrome_trace(path)
    events = [e for e in json.load(open(path))["traceEvents"] if e.get("ph") == "X" and e.get("cat") in GPU_CATS]
    os.unlink(path)
    return sorted(events, key=lambda e: e["ts"])


def summary(events):
    busy = sum(e["dur"] for e in events)
    span = max(e["ts"] + e["dur"] for e in events) - events[0]["ts"]
    per_name = collections.Counter()
    for e in events:
        per_name[e["name"][:60]] += e["dur"] / CALLS
    return busy / CALLS, span / CALLS, (span - busy) / CALLS, len(events) / CALLS, per_name


for case in pick["cases"].split(","):
    preset, name, tokens = case.split(":")
    cfg, sch = model(preset).config(), scheme(name)
    kernel = TritonKernel(cfg, *sch.keys)
    weights = kernel.prepare_weights(random_layer(cfg, sch, device="cuda"))
    sets = [random_inputs(cfg, int(tokens), device="cuda", seed=1000 * int(tokens) + i) for i in range(3)]
    fn = lambda x, r: kernel.apply(x, weights, r)  # noqa: E731
    graphs = _capture(fn, sets)
    inputs, replays = itertools.cycle(sets), itertools.cycle(graphs)
    runs = {"eager": lambda: fn(*next(inputs)), "graph": lambda: next(replays).replay()}
    for run in runs.values():  # warm: compiled, replay records made, clocks up
        for _ in range(6):
            run()
    if int(pick["rounds"]) > 1:
        print(f"{case}: per round, eager - graph per call: busy / idle (us)")
        diffs = []
        for _ in range(int(pick["rounds"])):
            e, g = (summary(gpu_record(runs[mode])) for mode in ("eager", "graph"))
            diffs.append((e[0] - g[0], e[2] - g[2]))
        print("    " + "  ".join(f"{b:+.1f} / {i:+.1f}" for b, i in diffs))
        print(f"    mean busy {sum(b for b, _ in diffs) / len(diffs):+.1f}, idle {sum(i for _, i in diffs) / len(diffs):+.1f}")
        continue
    got = {mode: summary(gpu_record(run)) for mode, run in runs.items()}
    for mode, (busy, span, idle, count, _) in got.items():
        print(f"{case} {mode}: per call {count:.1f} GPU activities, busy {busy:.1f} us, span {span:.1f} us, idle {idle:.1f} us")
    names = sorted(set(got["eager"][4]) | set(got["graph"][4]), key=lambda n: -got["eager"][4][n])
    for n in names:
        print(f"    {n:60s} eager {got['eager'][4][n]:9.1f}  graph {got['graph'][4][n]:9.1f} us/call")
    del kernel, weights, graphs, sets
    torch.cuda.empty_cache()
