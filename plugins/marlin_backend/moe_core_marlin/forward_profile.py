"""One kernel's eager forwards under ``torch.profiler``: what a forward launches and where its host time goes.

The GPU check reports it for a small batch, where a forward's time is launches, not arithmetic: the kernels per
forward (Marlin's, the glue's and the routing guard's ``MoEKernel.apply`` runs before it), their device time, the
host time of a forward without the profiler, and the ops that take the most host time.
"""

from __future__ import annotations

import time
from pathlib import Path

import torch
from torch.autograd import DeviceType
from torch.profiler import ProfilerActivity, profile

#: Forwards profiled (and timed), after as many unprofiled ones.
REPEATS = 20
#: Ops listed in the summary, by host time.
TOP_OPS = 8


def profile_forward(kernel, weights, x: torch.Tensor, routing, table: Path | None = None) -> dict:
    """Profile :data:`REPEATS` eager ``kernel.apply`` calls on ``x``'s device; the per-forward summary. ``table``
    receives torch.profiler's table of every op."""
    cuda = x.device.type == "cuda"
    sync = torch.cuda.synchronize if cuda else (lambda: None)
    for _ in range(REPEATS):
        kernel.apply(x, weights, routing)
    sync()
    began = time.perf_counter()
    for _ in range(REPEATS):
        kernel.apply(x, weights, routing)
    host_us = (time.perf_counter() - began) / REPEATS * 1e6  # the calls only queue work: host time where the GPU keeps up
    sync()
    with profile(activities=[ProfilerActivity.CPU] + ([ProfilerActivity.CUDA] if cuda else [])) as prof:
        for _ in range(REPEATS):
            kernel.apply(x, weights, routing)
        sync()
    device_events = [e for e in prof.events() if e.device_type == DeviceType.CUDA]
    averages = prof.key_averages()
    if table is not None:
        table.write_text(averages.table(sort_by="self_cpu_time_total", row_limit=60))
    top = sorted((e for e in averages if e.device_type == DeviceType.CPU), key=lambda e: -e.self_cpu_time_total)[:TOP_OPS]
    return {
        "device ops per forward": len(device_events) / REPEATS,  # kernels, memsets and copies
        "device us per forward": round(sum(e.device_time_total for e in device_events) / REPEATS, 1),
        "host us per forward": round(host_us, 1),
        "most host time (us per forward, calls per forward)": {
            e.key: (round(e.self_cpu_time_total / REPEATS, 1), e.count / REPEATS) for e in top
        },
    }
