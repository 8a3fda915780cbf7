"""Timing: CUDA events (median, the L2 emptied before each run) on a GPU, wall clock on a CPU; and the
back-to-back time of eager calls, host work included."""

from __future__ import annotations

import statistics
import time
from dataclasses import dataclass
from typing import Callable, Sequence


@dataclass(frozen=True)
class Timer:
    """Times a callable: warm-up first, then the median of repeated runs, in seconds.

    On CUDA, :func:`cold_l2_seconds` (CUDA events, the L2 emptied by a read before each run); on a CPU,
    ``time.perf_counter``.
    """

    device_type: str
    warmup_ms: float = 25.0
    rep_ms: float = 100.0
    cpu_repeats: int = 5

    @property
    def method(self) -> str:
        if self.device_type != "cuda":
            return "wall clock (perf_counter), median"
        return (f"graph replays: CUDA events, median per input set, mean over the sets, the L2 emptied before each by "
                f"reading {FLUSH_BYTES >> 20} MB; "
                f"eager: calls back to back (CUDA events), median of {BATCHES} batches; "
                f"graph b2b: replays back to back, batches alternating with the eager ones; "
                f"idle: GPU idle per call of {IDLE_CALLS} calls back to back, from torch.profiler's record")

    def time(self, fn: Callable[[], object]) -> float:
        if self.device_type == "cuda":
            return cold_l2_seconds(fn, self.warmup_ms, self.rep_ms)
        fn()
        samples = []
        for _ in range(self.cpu_repeats):
            start = time.perf_counter()
            fn()
            samples.append(time.perf_counter() - start)
        return statistics.median(samples)

    def back_to_back(self, fn: Callable[[], object]) -> float:
        """Seconds per call of ``fn`` called back to back, as a model running eagerly calls a layer: each
        call is enqueued as soon as the one before returns, so a call whose host work (Python, allocations,
        launches) outlasts its GPU work is timed by its host work. On CUDA: CUDA events around batches of
        calls about ``BATCH_MS`` long, each after an untimed lead call (:func:`_cuda_batch_seconds`), median per call of
        ``BATCHES`` batches, no L2 flush between calls
        (``time`` flushes it before each call, which gives the host that flush's duration for free). On a
        CPU the same as :meth:`time`."""
        if self.device_type != "cuda":
            return self.time(fn)
        return _back_to_back_cuda(fn)

    def back_to_back_pair(self, first: Callable[[], object], second: Callable[[], object]) -> tuple[float, float]:
        """Seconds per call of ``first`` and of ``second``, each timed as :meth:`back_to_back` times one, their batches
        taken in turn (``first``'s, ``second``'s, ``first``'s, ...): both meet the same clocks and temperature, so their
        difference is what one costs more than the other in the same steady state (eager calls against their CUDA
        graph's replays: the host work the GPU does not hide). On a CPU, :meth:`time` of each."""
        if self.device_type != "cuda":
            return self.time(first), self.time(second)
        first_s, second_s = alternating_batches([first, second], _cuda_batch_seconds, _cuda_calls_per_batch)
        return first_s, second_s


#: Length and number of the batches of :meth:`Timer.back_to_back` on CUDA.
BATCH_MS = 20.0
BATCHES = 5


def alternating_batches(fns: list[Callable[[], object]], batch_seconds: Callable[[Callable[[], object], int], float],
                        calls_per_batch: Callable[[Callable[[], object]], int], batches: int = BATCHES) -> list[float]:
    """Seconds per call of each of ``fns``: ``batches`` rounds, each timing one batch of every fn in turn
    (``batch_seconds(fn, calls)``: seconds for ``calls`` calls back to back; ``calls_per_batch(fn)``: how many), the median
    per call of each fn's batches."""
    calls = [calls_per_batch(fn) for fn in fns]
    samples: list[list[float]] = [[] for _ in fns]
    for _ in range(batches):
        for fn, n, out in zip(fns, calls, samples):
            out.append(batch_seconds(fn, n) / n)
    return [statistics.median(s) for s in samples]


def _cuda_calls_per_batch(fn: Callable[[], object]) -> int:
    """Calls of ``fn`` in about :data:`BATCH_MS` (3 to 2000), from one timed call after a warm-up one."""
    import torch

    fn()
    torch.cuda.synchronize()
    start = time.perf_counter()
    fn()
    torch.cuda.synchronize()
    return max(3, min(2000, int(BATCH_MS * 1e-3 / max(time.perf_counter() - start, 1e-6))))


def _cuda_batch_seconds(fn: Callable[[], object], calls: int) -> float:
    """Seconds from before the first to after the last of ``calls`` calls of ``fn`` made back to back (CUDA events),
    after one untimed lead call: while the GPU runs it, the host enqueues the start event and the first timed call, as
    in a model running eagerly, where the host works ahead of the GPU. Without it, the first call's host time (the GPU
    idle, waiting for its first kernel) counted in every batch: for Mixtral-8x7B at 4096 tokens on the H100, 266 µs
    over a batch of 4 calls (docs/benchmarks/triton-h100.md, 2026-11-27). A call whose host work outlasts its GPU work
    is still timed by its host work."""
    import torch

    begin, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    torch.cuda.synchronize()
    fn()
    begin.record()
    for _ in range(calls):
        fn()
    end.record()
    end.synchronize()
    return begin.elapsed_time(end) / 1e3


def _back_to_back_cuda(fn: Callable[[], object]) -> float:
    return alternating_batches([fn], _cuda_batch_seconds, _cuda_calls_per_batch)[0]


#: Bytes :func:`cold_l2_seconds` reads before each run, several times any GPU's L2 (H100: 50 MB, H200: 60 MB).
FLUSH_BYTES = 256 << 20
_FLUSH_BUFFERS: dict = {}


def cold_l2_seconds(fn: Callable[[], object], warmup_ms: float = 25.0, rep_ms: float = 100.0) -> float:
    """Median GPU time of ``fn`` in seconds (CUDA events around each run), each run starting with an L2 that holds none
    of its data: :data:`FLUSH_BYTES` of a buffer are read (summed) before it. Reading leaves the L2 full of clean lines,
    which the run evicts for free. ``triton.testing.do_bench`` empties it by writing zeros instead, so each run first
    writes the L2's dirty lines back to memory while it streams its own data: on the H100 that added about 9 µs to a
    one-token Qwen3-30B-A3B layer (48.0 against 39.2 µs) and about 10 µs to Mixtral-8x7B's
    (docs/benchmarks/raw/2026-11-24-l2-read-timer/decode_timing.txt). Runs for about ``warmup_ms`` first, then times about
    ``rep_ms`` worth of runs (at least 5)."""
    import torch

    device = torch.cuda.current_device()
    flush_buffer = _FLUSH_BUFFERS.get(device)
    if flush_buffer is None:
        flush_buffer = _FLUSH_BUFFERS[device] = torch.ones(FLUSH_BYTES // 4, dtype=torch.int32, device="cuda")

    def flush():
        flush_buffer.sum()

    def timed_runs(n: int) -> list[float]:
        events = [(torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)) for _ in range(n)]
        for start, end in events:
            flush()
            start.record()
            fn()
            end.record()
        torch.cuda.synchronize()
        return [start.elapsed_time(end) / 1e3 for start, end in events]

    fn()
    estimate = statistics.median(timed_runs(5))
    timed_runs(max(1, int(warmup_ms * 1e-3 / max(estimate, 1e-6))))
    return statistics.median(timed_runs(max(5, int(rep_ms * 1e-3 / max(estimate, 1e-6)))))


def host_time(fn: Callable[[], object], repeats: int = 20) -> float:
    """Host time of one call on CUDA: the device is idle before each call and the time until ``fn``
    returns is measured (launch overhead, Python work, allocations; no GPU work), median in seconds."""
    import torch

    fn()
    samples = []
    for _ in range(repeats):
        torch.cuda.synchronize()
        start = time.perf_counter()
        fn()
        samples.append(time.perf_counter() - start)
    torch.cuda.synchronize()
    return statistics.median(samples)


#: Calls :func:`gpu_idle_time` records back to back.
IDLE_CALLS = 8


def idle_per_call(activities: Sequence[tuple[float, float]], calls: int) -> float:
    """The GPU's idle time per call, in the units of ``activities``: (start, duration) of every GPU activity (kernels,
    copies, fills) of ``calls`` calls made back to back, on one stream. The span from the first start to the last end,
    less the time some activity ran, over ``calls``: time the GPU waited for work between activities, which in calls
    made back to back is host work (Python, launches, allocations) the GPU did not hide. Overlapping activities count
    once."""
    if calls < 1 or not activities:
        raise ValueError("idle_per_call needs at least one call and one GPU activity")
    ordered = sorted(activities)
    busy, end = 0.0, ordered[0][0]
    for start, duration in ordered:
        busy += max(0.0, start + duration - max(start, end))
        end = max(end, start + duration)
    return (end - ordered[0][0] - busy) / calls


def gpu_idle_time(fn: Callable[[], object], calls: int = IDLE_CALLS) -> float | None:
    """Seconds per call the GPU sat idle while ``calls`` calls of ``fn`` ran back to back (:func:`idle_per_call`), from
    the GPU's own record of its activities (``torch.profiler``, CUDA activities). Unlike eager minus graph time, it does
    not move with the clocks, which change a multi-millisecond layer's kernels by more than its host work. None where
    the profiler recorded no GPU activity (no CUPTI)."""
    import torch

    fn()
    torch.cuda.synchronize()
    with torch.profiler.profile(activities=[torch.profiler.ProfilerActivity.CUDA]) as prof:
        for _ in range(calls):
            fn()
        torch.cuda.synchronize()
    gpu = [(e.start_ns() * 1e-9, e.duration_ns() * 1e-9) for e in prof.profiler.kineto_results.events()
           if e.device_type() == torch.autograd.DeviceType.CUDA]
    return idle_per_call(gpu, calls) if gpu else None
