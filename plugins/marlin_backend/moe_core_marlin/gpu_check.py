"""``python -m moe_core_marlin.gpu_check``: validate the marlin backend on a CUDA GPU in one command.

Needs the ops library (``MOE_CORE_MARLIN_OPS_LIBRARY``, default ``out/marlin/_moe_C_stable_libtorch.abi3.so``
when that file exists). Prints one PASS/FAIL line per check and writes ``results.json`` and the
benchmark's output under ``$OUT/marlin`` (``out/marlin`` when OUT is unset). Checks, against moe-core's
reference backend: every declared scheme in bfloat16 and float16 (mxfp4: bfloat16) at 1, 7 and 333 tokens; all tokens on
two experts; an expert map; gelu and the SwiGLU clamp; CUDA-graph capture and replay; the robustness
kit; then ``moe-core bench`` of marlin against triton. Exit status 1 when any check failed.
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
from moe_core_marlin.library import LIBRARY

DEFAULT_LIBRARY = Path("out/marlin/_moe_C_stable_libtorch.abi3.so")
TOKENS = (1, 7, 333)
BENCH_TOKENS = "1,64,1024"
#: Seconds after which the remaining benchmarks are skipped, so the whole check stays under 8 minutes.
BENCH_DEADLINE_S = 270


def main() -> int:
    began = time.monotonic()
    out = start("marlin", LIBRARY, DEFAULT_LIBRARY)
    if out is None:
        return 1
    from moe_core.config import MoEConfig
    from moe_core.testing import conformance
    from moe_core.testing.robustness import check_robustness
    from moe_core_marlin.contract import MXFP4_DTYPES
    from moe_core_marlin.kernel import MarlinKernel
    from moe_core_marlin.plugin import SCHEMES

    checks = Checks()

    def loads():
        LIBRARY.ops_namespace()
        return str(LIBRARY.locate().path)

    if not checks.run("ops library loads and matches the contract", loads):
        checks.write(out / "results.json")
        return 1
    reg = conformance.registry_with("moe_core_marlin.plugin", name="marlin")
    small = MoEConfig(num_experts=8, top_k=2, hidden_size=512, intermediate_size=256, dtype=torch.bfloat16)

    for name in SCHEMES:
        for dtype in MXFP4_DTYPES if name == "mxfp4" else (torch.bfloat16, torch.float16):
            checks.run(f"numerics {name} {str(dtype).removeprefix('torch.')} tokens {TOKENS}", lambda n=name, d=dtype: check_scheme_numerics(reg, "marlin", dataclasses.replace(small, dtype=d), n, TOKENS))

    for name in ("w4a16", "w4a16-zp", "w8a16", "fp8-block-w8a16", "nvfp4-w4a16"):
        checks.run(f"all 333 tokens on experts 3 and 5, {name}", lambda n=name: check_hot_experts(MarlinKernel, small, n))
        checks.run(f"expert map (4 of 8 experts here), {name}", lambda n=name: check_expert_map(MarlinKernel, small, n, 77))
    check_activations(checks, MarlinKernel, small, "w4a16")
    for tokens in (1, 64):
        checks.run(f"CUDA graph capture and replay, w4a16, {tokens} tokens", lambda t=tokens: conformance.check_graph_replay(MarlinKernel, small, "w4a16", tokens=t))
    checks.run("robustness kit", lambda: f"{len(check_robustness(reg, 'marlin', config=small, garbage_calls=20))} cases")

    run_benches(checks, out, "marlin,triton", ("w4a16", "fp8-block-w8a16", "nvfp4-w4a16"), "qwen3-30b-a3b", "Qwen3-30B-A3B shape",
                BENCH_TOKENS, began=began, deadline_s=BENCH_DEADLINE_S)
    return checks.finish(out, "marlin", device=torch.cuda.get_device_name(), torch=torch.__version__, library=LIBRARY.report_lines())


if __name__ == "__main__":
    sys.exit(main())
