"""Compile Marlin's MoE kernels for this GPU once, in parallel processes, into the CUDA JIT cache.

vLLM builds its Marlin MoE kernels as sm_80 code plus PTX (``MARLIN_MOE_ARCHS "8.0+PTX;12.0f"`` with CUDA 13 in
its CMakeLists.txt), so on an sm_90 GPU the driver compiles a kernel file from PTX the first time one of its
kernels runs, one file per activation dtype and weight type: the first forwards of a (scheme, dtype) took
up to 59 s on an NVIDIA H200 (torch 2.11.0+cu130, vLLM 0.26.0's library, 2026-11-28, ``python -m
moe_core_marlin.gpu_check``), about 300 s for every declared pair, one after the other in one process. The driver
compiles a file in the thread that first needs it, so :func:`warm` runs one process per pair, all at once (a GPU in
an exclusive compute mode refuses them: the check then fails and the numerics compile one by one); each process's
first forwards fill the driver's JIT cache (``~/.nv/ComputeCache``, or ``CUDA_CACHE_PATH``), which every later
process on the machine, and the calling one, then loads from. :data:`CACHE_BYTES` is set as the cache's size
limit where the environment sets none, so the compiled files are not evicted.

``python -m moe_core_marlin.jit_warmup SCHEME DTYPE TOKENS...`` is one such process: a random layer of
:data:`LAYER` in DTYPE, one forward per token count.
"""

from __future__ import annotations

import os
import subprocess
import sys
import time

import torch

#: The cache limit set where CUDA_CACHE_MAXSIZE is unset (the driver's maximum, 4 GiB).
CACHE_BYTES = 4 * 2**30
#: A small layer: the kernels compiled depend on the dtype and the weight type, not on the layer's sizes.
LAYER = dict(num_experts=8, top_k=2, hidden_size=512, intermediate_size=256)


def use_a_large_jit_cache(environ=os.environ) -> None:
    """Set CUDA_CACHE_MAXSIZE to :data:`CACHE_BYTES` where it is unset; call it before CUDA starts in this process."""
    environ.setdefault("CUDA_CACHE_MAXSIZE", str(CACHE_BYTES))


def warm(pairs, tokens, timeout_s: float) -> str:
    """Run one process per (scheme, dtype name) of ``pairs``, all at once, each making the forwards of ``tokens``;
    a summary line, or RuntimeError naming the pairs whose process failed or ran past ``timeout_s``."""
    if os.environ.get("CUDA_CACHE_DISABLE", "0") not in ("", "0"):
        return "skipped: CUDA_CACHE_DISABLE is set, so each process compiles for itself"
    began = time.monotonic()
    procs = {pair: subprocess.Popen([sys.executable, "-m", "moe_core_marlin.jit_warmup", *pair, *map(str, tokens)],
                                    stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True) for pair in pairs}
    failed = []
    for pair, proc in procs.items():
        try:
            output, _ = proc.communicate(timeout=max(1.0, timeout_s - (time.monotonic() - began)))
        except subprocess.TimeoutExpired:
            proc.kill()
            output, _ = proc.communicate()
            failed.append(f"{' '.join(pair)}: past {timeout_s:g} s")
            continue
        if proc.returncode:
            failed.append(f"{' '.join(pair)}: exit {proc.returncode}: {output[-500:]}")
    if failed:
        raise RuntimeError("; ".join(failed))
    return f"{len(procs)} processes in {time.monotonic() - began:.0f} s"


def forward_once(scheme_name: str, dtype_name: str, tokens) -> None:
    """One forward of a random :data:`LAYER` per token count, on CUDA (the kernels for it get compiled)."""
    from moe_core.config import MoEConfig
    from moe_core.presets import random_inputs, random_layer
    from moe_core.quant import scheme
    from moe_core_marlin.kernel import MarlinKernel

    cfg = MoEConfig(**LAYER, dtype=getattr(torch, dtype_name))
    sch = scheme(scheme_name)
    kernel = MarlinKernel(cfg, sch.weight_key, sch.activation_key)
    weights = kernel.prepare_weights(random_layer(cfg, sch, device="cuda"))
    for count in tokens:
        x, routing = random_inputs(cfg, count, device="cuda")
        kernel.apply(x, weights, routing)
    torch.cuda.synchronize()


if __name__ == "__main__":
    use_a_large_jit_cache()
    forward_once(sys.argv[1], sys.argv[2], [int(t) for t in sys.argv[3:]])
