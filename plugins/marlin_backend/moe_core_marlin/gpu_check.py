"""``python -m moe_core_marlin.gpu_check``: validate the marlin backend on a CUDA GPU in one command.

Needs the ops library (``MOE_CORE_MARLIN_OPS_LIBRARY``, default ``out/marlin/_moe_C_stable_libtorch.abi3.so``
when that file exists). Prints one PASS/FAIL line per check and writes ``results.json`` and the
benchmark's output under ``$OUT/marlin`` (``out/marlin`` when OUT is unset). Checks, against moe-core's
reference backend: every declared scheme in bfloat16 and float16 (mxfp4: bfloat16) at 1, 7 and 333 tokens; all tokens on
two experts; an expert map; gelu and the SwiGLU clamp; CUDA-graph capture and replay; the robustness
kit; a torch.profiler summary of one forward (kernels, device and host time) at the Qwen3-30B-A3B shape; then
``moe-core bench`` of marlin against triton. Exit status 1 when any check failed.

Before the numerics, one process per (scheme, dtype) compiles Marlin's kernels from PTX into the driver's JIT
cache at once (:mod:`moe_core_marlin.jit_warmup`; one after the other they took about 300 s on an H200), so the
checks and the benchmark processes after it load them compiled.
"""

from __future__ import annotations

import dataclasses
import sys
import time
from pathlib import Path

import torch

from moe_core.testing.checklist import (
    Checks, check_activations, check_expert_map, check_hot_experts, check_scheme_numerics, run_benches, start,
)
from moe_core_marlin.forward_profile import profile_forward
from moe_core_marlin.jit_warmup import LAYER, use_a_large_jit_cache, warm
from moe_core_marlin.library import LIBRARY

DEFAULT_LIBRARY = Path("out/marlin/_moe_C_stable_libtorch.abi3.so")
TOKENS = (1, 7, 333)
BENCH_TOKENS = "1,64,1024"
#: Seconds after which the remaining benchmarks are skipped, so the whole check stays under 8 minutes.
BENCH_DEADLINE_S = 270
#: Batches whose forward is profiled (launch-bound: a forward's time there is its launches).
PROFILE_TOKENS = (1, 64)
#: Seconds the parallel compilation of Marlin's kernels may take (the slowest kernel file took 59 s alone on an H200).
WARM_TIMEOUT_S = 150


def numerics_pairs() -> list[tuple[str, torch.dtype]]:
    """Every declared scheme with each activation dtype Marlin builds it for."""
    from moe_core_marlin.contract import MXFP4_DTYPES
    from moe_core_marlin.plugin import SCHEMES

    return [(name, dtype) for name in SCHEMES for dtype in (MXFP4_DTYPES if name == "mxfp4" else (torch.bfloat16, torch.float16))]


def dtype_name(dtype: torch.dtype) -> str:
    return str(dtype).removeprefix("torch.")


def profile_qwen3_forward(kernel_cls, tokens: int, table: Path) -> dict:
    """:func:`moe_core_marlin.forward_profile.profile_forward` of w4a16 on a random Qwen3-30B-A3B layer in bfloat16."""
    from moe_core.presets import model, random_inputs, random_layer
    from moe_core.quant import scheme

    cfg = model("qwen3-30b-a3b").config(dtype=torch.bfloat16)
    sch = scheme("w4a16")
    kernel = kernel_cls(cfg, sch.weight_key, sch.activation_key)
    weights = kernel.prepare_weights(random_layer(cfg, sch, device="cuda"))
    x, routing = random_inputs(cfg, tokens, device="cuda")
    return profile_forward(kernel, weights, x, routing, table)


def main() -> int:
    began = time.monotonic()
    use_a_large_jit_cache()  # before CUDA starts here; the processes started below inherit it
    out = start("marlin", LIBRARY, DEFAULT_LIBRARY)
    if out is None:
        return 1
    from moe_core.config import MoEConfig
    from moe_core.testing import conformance
    from moe_core.testing.robustness import check_robustness
    from moe_core_marlin.kernel import MarlinKernel

    checks = Checks()

    def loads():
        LIBRARY.ops_namespace()
        return str(LIBRARY.locate().path)

    if not checks.run("ops library loads and matches the contract", loads):
        checks.write(out / "results.json")
        return 1
    reg = conformance.registry_with("moe_core_marlin.plugin", name="marlin")
    small = MoEConfig(**LAYER, dtype=torch.bfloat16)

    pairs = numerics_pairs()
    checks.run(f"Marlin kernels compiled from PTX for this GPU, {len(pairs)} processes at once",
               lambda: warm([(name, dtype_name(dtype)) for name, dtype in pairs], TOKENS, WARM_TIMEOUT_S))
    for name, dtype in pairs:
        checks.run(f"numerics {name} {dtype_name(dtype)} tokens {TOKENS}", lambda n=name, d=dtype: check_scheme_numerics(reg, "marlin", dataclasses.replace(small, dtype=d), n, TOKENS))

    for name in ("w4a16", "w4a16-zp", "w8a16", "fp8-block-w8a16", "nvfp4-w4a16"):
        checks.run(f"all 333 tokens on experts 3 and 5, {name}", lambda n=name: check_hot_experts(MarlinKernel, small, n))
        checks.run(f"expert map (4 of 8 experts here), {name}", lambda n=name: check_expert_map(MarlinKernel, small, n, 77))
    check_activations(checks, MarlinKernel, small, "w4a16")
    for tokens in (1, 64):
        checks.run(f"CUDA graph capture and replay, w4a16, {tokens} tokens", lambda t=tokens: conformance.check_graph_replay(MarlinKernel, small, "w4a16", tokens=t))
    checks.run("robustness kit", lambda: f"{len(check_robustness(reg, 'marlin', config=small, garbage_calls=20))} cases")

    for tokens in PROFILE_TOKENS:
        checks.run(f"profile of one forward, w4a16, Qwen3-30B-A3B shape, {tokens} tokens",
                   lambda t=tokens: profile_qwen3_forward(MarlinKernel, t, out / f"profile-qwen3-30b-a3b-w4a16-{t}.txt"))

    run_benches(checks, out, "marlin,triton", ("w4a16", "fp8-block-w8a16", "nvfp4-w4a16"), "qwen3-30b-a3b", "Qwen3-30B-A3B shape",
                BENCH_TOKENS, began=began, deadline_s=BENCH_DEADLINE_S)
    return checks.finish(out, "marlin", device=torch.cuda.get_device_name(), torch=torch.__version__, library=LIBRARY.report_lines())


if __name__ == "__main__":
    sys.exit(main())
