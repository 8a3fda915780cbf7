"""Run a function on every rank of a freshly spawned process group (gloo on CPU, NCCL on GPUs).

Used by the expert-parallel tests and the GPU check script::

    results = spawn_group(2, my_check, "gloo", arg)     # my_check(rank, world_size, arg) -> picklable
"""

from __future__ import annotations

import os
import sys
import tempfile
import traceback
from pathlib import Path
from typing import Any, Callable

import torch
import torch.distributed as dist
import torch.multiprocessing as mp


def spawn_group(world_size: int, fn: Callable[..., Any], backend: str = "gloo", *args: Any, timeout_s: int = 300) -> list[Any]:
    """Start ``world_size`` processes, initialise a ``backend`` process group in each, run
    ``fn(rank, world_size, *args)`` and return the ranks' return values in rank order.

    ``fn`` must be importable by name (a module-level function). With ``backend="nccl"`` rank r uses
    ``cuda:r``. An exception on any rank is raised here with that rank's traceback.
    """
    with tempfile.TemporaryDirectory(prefix="moe-core-group-") as tmp:
        try:
            mp.start_processes(_rank_main, args=(world_size, backend, tmp, timeout_s, fn, args), nprocs=world_size,
                               join=True, start_method="spawn")
        except mp.ProcessExitedException as exc:  # an NCCL rank that failed left at once; its traceback is on disk
            reports = "\n".join(p.read_text() for p in sorted(Path(tmp).glob("rank*.err")))
            raise RuntimeError(f"{exc}\n{reports}") from exc
        return [torch.load(Path(tmp) / f"rank{r}.pt", weights_only=False) for r in range(world_size)]


def _rank_main(rank: int, world_size: int, backend: str, tmp: str, timeout_s: int, fn: Callable[..., Any], args: tuple) -> None:
    import datetime

    os.environ.setdefault("OMP_NUM_THREADS", "1")
    torch.set_num_threads(1)
    if backend == "nccl":
        torch.cuda.set_device(rank)
    dist.init_process_group(backend, init_method=f"file://{tmp}/store", rank=rank, world_size=world_size,
                            timeout=datetime.timedelta(seconds=timeout_s),
                            device_id=torch.device("cuda", rank) if backend == "nccl" else None)
    try:
        result = fn(rank, world_size, *args)
    except BaseException:
        if backend != "nccl":
            dist.destroy_process_group()
            raise
        # After a failure (a peer waiting in a collective, a graph capture left half done) NCCL's
        # destroy_process_group can wait forever: keep the traceback and leave without tearing down.
        (Path(tmp) / f"rank{rank}.err").write_text(f"rank {rank}:\n{traceback.format_exc()}")
        sys.stderr.flush()
        os._exit(1)
    torch.save(result, Path(tmp) / f"rank{rank}.pt")
    if backend != "nccl":
        # gloo: no rank tears its group down while a peer still drains a send of it (a peer's gloo thread would
        # see the connection close and abort its process). The ranks meet through the files, not through gloo:
        # a gloo barrier has the same race on its own messages.
        _wait_for_every_rank(Path(tmp), world_size, timeout_s)
    dist.destroy_process_group()  # with NCCL, only after every CUDA graph holding its collectives is freed


def _wait_for_every_rank(tmp: Path, world_size: int, timeout_s: int) -> None:
    """Return once every rank has saved its result (so every rank's collectives are complete)."""
    import time

    deadline = time.monotonic() + timeout_s
    while not all((tmp / f"rank{r}.pt").exists() for r in range(world_size)):
        if time.monotonic() > deadline:
            raise TimeoutError(f"the other ranks did not finish within {timeout_s} s")
        time.sleep(0.005)
