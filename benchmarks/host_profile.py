"""Where the host time of a backend's eager forwards goes: Python's profiler over many forwards of one layer.

Run on a GPU: python benchmarks/host_profile.py --backend triton_ws_sm90 --tokens 1 [--forwards 2000]

For each backend it prints the host time per forward (``moe_core.bench.timing.host_time``: GPU idle before each call,
median), how many forwards were replayed from a record of their launches (the Triton plugin's ``replay.py``; "-" for
backends without records), and the functions with the most time of their own per forward under ``cProfile``.
"""

from __future__ import annotations

import argparse
import contextlib
import cProfile
import pstats

import torch

from moe_core.bench.timing import host_time
from moe_core.presets import model, random_inputs, random_layer
from moe_core.quant import scheme
from moe_core.registry import default_registry


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--backend", default="triton", help="comma-separated registered backends")
    parser.add_argument("--preset", default="qwen3-30b-a3b")
    parser.add_argument("--scheme", default="unquantized")
    parser.add_argument("--tokens", type=int, default=1)
    parser.add_argument("--forwards", type=int, default=2000)
    parser.add_argument("--top", type=int, default=25, help="functions listed per backend")
    args = parser.parse_args()
    cfg, sch = model(args.preset).config(), scheme(args.scheme)
    x, routing = random_inputs(cfg, args.tokens, device="cuda")
    raw = random_layer(cfg, sch, device="cuda")
    with contextlib.ExitStack() as stack:
        outcomes = _counted_replays(stack)
        for name in args.backend.split(","):
            _profile(name, cfg, sch, raw, x, routing, outcomes, args)
    return 0


def _counted_replays(stack: contextlib.ExitStack) -> list | None:
    """The Triton plugin's replay outcomes while ``stack`` is open (moe_core_triton.replay.counted_replays); None without
    the plugin."""
    try:
        from moe_core_triton.replay import counted_replays
    except ImportError:
        return None
    return stack.enter_context(counted_replays())


def _profile(name, cfg, sch, raw, x, routing, outcomes, args) -> None:
    """Host time, replays and the top functions of ``args.forwards`` eager forwards of backend ``name``."""
    kernel = default_registry().specs[name].load_kernel()(cfg, sch.weight_key, sch.activation_key)
    weights = kernel.prepare_weights(raw)
    call = lambda: kernel.apply(x, weights, routing)  # noqa: E731
    for _ in range(3):  # compile, then the forward that records
        call()
    torch.cuda.synchronize()
    first = len(outcomes) if outcomes is not None else 0
    host = host_time(call, repeats=200)
    replayed = "-" if outcomes is None else f"{sum(outcomes[first:])} of {len(outcomes) - first} replays launched"
    profiler = cProfile.Profile()
    profiler.enable()
    for _ in range(args.forwards):
        call()
    profiler.disable()
    torch.cuda.synchronize()
    print(f"\n{name}, {args.preset} {args.scheme}, {args.tokens} tokens: host time {host * 1e6:.1f} us per forward; {replayed}")
    stats = pstats.Stats(profiler)
    rows = sorted(stats.stats.items(), key=lambda item: -item[1][2])[:args.top]
    print(f"  {'own us/fwd':>10} {'total us/fwd':>12} {'calls/fwd':>9}  function")
    for (path, line, func), (_, calls, own, total, _) in rows:
        print(f"  {own / args.forwards * 1e6:10.2f} {total / args.forwards * 1e6:12.2f} {calls / args.forwards:9.1f}  "
              f"{path.rsplit('/', 2)[-1] if '/' in path else path}:{line} {func}")


if __name__ == "__main__":
    raise SystemExit(main())
