"""Timing: CUDA events through triton.testing.do_bench (median) on a GPU, wall clock on a CPU; and the
back-to-back time of eager calls, host work included."""

from __future__ import annotations

import statistics
import time
from dataclasses import dataclass
from typing import Callable


@dataclass(frozen=True)
class Timer:
    """Times a callable: warm-up first, then the median of repeated runs, in seconds.

    On CUDA it uses ``triton.testing.do_bench`` (events, L2 flushed between runs) when Triton is
    importable, else CUDA events; on a CPU, ``time.perf_counter``.
    """

    device_type: str
    warmup_ms: float = 25.0
    rep_ms: float = 100.0
    cpu_repeats: int = 5

    @property
    def method(self) -> str:
        if self.device_type != "cuda":
            return "wall clock (perf_counter), median"
        graph = "triton.testing.do_bench (CUDA events), median" if _has_triton() else "CUDA events, median"
        return f"graph replays: {graph}; eager: calls back to back (CUDA events), median of {BATCHES} batches"

    def time(self, fn: Callable[[], object]) -> float:
        if self.device_type == "cuda":
            return _cuda_time(fn, self.warmup_ms, self.rep_ms)
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
        calls about ``BATCH_MS`` long, median per call of ``BATCHES`` batches, no L2 flush between calls
        (``time`` flushes it before each call, which gives the host that flush's duration for free). On a
        CPU the same as :meth:`time`."""
        if self.device_type != "cuda":
            return self.time(fn)
        return _back_to_back_cuda(fn)


#: Length and number of the batches of :meth:`Timer.back_to_back` on CUDA.
BATCH_MS = 20.0
BATCHES = 5


def _back_to_back_cuda(fn: Callable[[], object]) -> float:
    import torch

    fn()
    torch.cuda.synchronize()
    start = time.perf_counter()
    fn()
    torch.cuda.synchronize()
    calls = max(3, min(2000, int(BATCH_MS * 1e-3 / max(time.perf_counter() - start, 1e-6))))
    samples = []
    for _ in range(BATCHES):
        begin, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        torch.cuda.synchronize()
        begin.record()
        for _ in range(calls):
            fn()
        end.record()
        end.synchronize()
        samples.append(begin.elapsed_time(end) / 1e3 / calls)
    return statistics.median(samples)


def _has_triton() -> bool:
    try:
        import triton.testing  # noqa: F401
    except ImportError:
        return False
    return True


def _cuda_time(fn, warmup_ms: float, rep_ms: float) -> float:
    import torch

    if _has_triton():
        from triton.testing import do_bench

        return do_bench(fn, warmup=warmup_ms, rep=rep_ms, return_mode="median") / 1e3
    for _ in range(3):
        fn()
    torch.cuda.synchronize()
    samples = []
    for _ in range(20):
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        start.record()
        fn()
        end.record()
        end.synchronize()
        samples.append(start.elapsed_time(end) / 1e3)
    return statistics.median(samples)


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
