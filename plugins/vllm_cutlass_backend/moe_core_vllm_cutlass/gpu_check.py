"""``python -m moe_core_vllm_cutlass.gpu_check``: validate the vllm_cutlass backend on a CUDA sm90+ GPU in one command.

Needs the ops library (``MOE_CORE_VLLM_CUTLASS_OPS_LIBRARY``, default
``out/vllm_cutlass/_C_stable_libtorch.abi3.so`` when that file exists; the README says how the file is
carried to a GPU machine in two parts and put back together). Prints one PASS/FAIL line per check and
writes ``results.json`` and the benchmarks' output under ``$OUT/vllm_cutlass`` (``out/vllm_cutlass``
when OUT is unset). Checks: the file is the vLLM 0.26.0 wheel's (sha256), it loads with the recorded
schemas, ``cutlass_group_gemm_supported`` says yes for this GPU; against moe-core's reference backend,
every declared scheme in bfloat16 and float16 at 1, 7, 333 and 4096 tokens in both formats, fp8-channel and
fp8-tensor-dyn with Mixtral-8x7B's intermediate size (14336), all tokens on two experts,
an expert map, gelu and the SwiGLU clamp, CUDA-graph capture and replay; the robustness kit of both backends; the
GPU time of each kernel of one forward (``kernel-times.txt``, :mod:`moe_core_vllm_cutlass.gpu_profile`); then
``moe-core bench`` of vllm_cutlass against triton on the Qwen3-30B-A3B shape (fp8-channel, fp8-tensor-dyn) and
the Mixtral-8x7B shape (fp8-channel, 1024 and 4096 tokens). Exit status 1 when any check failed.
"""

from __future__ import annotations

import dataclasses
import hashlib
import sys
import time
from pathlib import Path

import torch

from moe_core.testing.checklist import (
    Checks, check_activations, check_expert_map, check_hot_experts, check_scheme_numerics, run_benches, start,
)
from moe_core_vllm_cutlass.library import LIBRARY
from moe_core_vllm_cutlass import contract

DEFAULT_LIBRARY = Path("out/vllm_cutlass") / contract.LIBRARY_FILE
#: sha256 of ``vllm/_C_stable_libtorch.abi3.so`` in vllm-0.26.0-cp38-abi3-manylinux_2_28_x86_64.whl (78,831,048 bytes).
WHEEL_FILE_SHA256 = "87a4360c79ec9278a4f359957755f370141bdb272a73f314bd43ce4e4279c6b4"
TOKENS = (1, 7, 333, 4096)
BENCH_TOKENS = "1,64,1024,4096"
#: Mixtral-8x7B's intermediate size: the gated activation's row is one tile of 16384 columns (16 warps) only there.
WIDE_INTERMEDIATE = 14336
WIDE_TOKENS = (1, 333)
#: (preset, scheme, tokens) whose forward's GPU time per kernel goes to kernel-times.txt.
PROFILED = (("qwen3-30b-a3b", "fp8-channel", 1), ("qwen3-30b-a3b", "fp8-channel", 4096), ("mixtral-8x7b", "fp8-channel", 4096))
#: The larger experts' benchmark: Mixtral-8x7B (8 experts of 4096 x 14336), where the intermediate rows are widest.
LARGE_BENCH_TOKENS = "1024,4096"
#: Seconds after which the remaining benchmarks are skipped: one started just before it may run its 120 s
#: (``checklist.run_bench``), so the whole check stays under 8 minutes (95 s without the Mixtral benchmark
#: on an H200).
BENCH_DEADLINE_S = 240


def main() -> int:
    began = time.monotonic()
    out = start("vllm_cutlass", LIBRARY, DEFAULT_LIBRARY)
    if out is None:
        return 1
    from moe_core.config import MoEConfig
    from moe_core.presets import model
    from moe_core.testing import conformance
    from moe_core.testing.robustness import check_robustness
    from moe_core_vllm_cutlass.gpu_profile import kernel_times
    from moe_core_vllm_cutlass.kernel import VllmCutlassKernel

    checks = Checks()

    def same_file():
        location = LIBRARY.locate()
        if location is None:
            raise FileNotFoundError(LIBRARY.missing_reason())
        digest = hashlib.sha256(location.path.read_bytes()).hexdigest()
        if digest != WHEEL_FILE_SHA256:
            raise ValueError(f"{location.path} has sha256 {digest}, the vLLM {contract.VLLM_VERSION} wheel's file {WHEEL_FILE_SHA256} "
                             "(parts missing or out of order when it was put back together?)")
        return str(location.path)

    def supported_here():
        major, minor = torch.cuda.get_device_capability()
        if not LIBRARY.ops_namespace().cutlass_group_gemm_supported(major * 10 + minor):
            raise RuntimeError(f"cutlass_group_gemm_supported({major * 10 + minor}) is False on {torch.cuda.get_device_name()}")
        return f"sm_{major}{minor}"

    loaded = checks.run(f"the library is vLLM {contract.VLLM_VERSION}'s file", same_file)
    loaded = loaded and checks.run("ops library loads and matches the contract", lambda: str(LIBRARY.ops_namespace()))
    if not (loaded and checks.run("cutlass_group_gemm_supported for this GPU", supported_here)):
        checks.write(out / "results.json")
        return 1
    reg = conformance.registry_with("moe_core_vllm_cutlass.plugin", name="vllm_cutlass")
    small = MoEConfig(num_experts=8, top_k=2, hidden_size=512, intermediate_size=256, dtype=torch.bfloat16)

    for backend in ("vllm_cutlass", "batched_vllm_cutlass"):
        for name in contract.SCHEMES:
            for dtype in (torch.bfloat16, torch.float16):
                checks.run(f"numerics {backend} {name} {str(dtype).removeprefix('torch.')} tokens {TOKENS}",
                           lambda b=backend, n=name, d=dtype: check_scheme_numerics(reg, b, dataclasses.replace(small, dtype=d), n, TOKENS))

    wide = dataclasses.replace(small, intermediate_size=WIDE_INTERMEDIATE)
    for name in ("fp8-channel", "fp8-tensor-dyn"):
        checks.run(f"numerics vllm_cutlass {name} intermediate {WIDE_INTERMEDIATE} tokens {WIDE_TOKENS}",
                   lambda n=name: check_scheme_numerics(reg, "vllm_cutlass", wide, n, WIDE_TOKENS))
    for name in contract.SCHEMES:
        checks.run(f"all 333 tokens on experts 3 and 5, {name}", lambda n=name: check_hot_experts(VllmCutlassKernel, small, n))
        for tokens in (5, 77):  # 10 pairs: A and B swapped inside the GEMM; 154: not
            checks.run(f"expert map (4 of 8 experts here), {name}, {tokens} tokens", lambda n=name, t=tokens: check_expert_map(VllmCutlassKernel, small, n, t))
    check_activations(checks, VllmCutlassKernel, small, "fp8-channel")
    for name in ("fp8-channel", "fp8-tensor-dyn"):
        for tokens in (1, 64):
            checks.run(f"CUDA graph capture and replay, {name}, {tokens} tokens",
                       lambda n=name, t=tokens: conformance.check_graph_replay(VllmCutlassKernel, small, n, tokens=t))
    for backend in ("vllm_cutlass", "batched_vllm_cutlass"):
        checks.run(f"robustness kit, {backend}", lambda b=backend: f"{len(check_robustness(reg, b, config=small, garbage_calls=20))} cases")

    times = []

    def profiled(preset_name, name, tokens):
        lines = kernel_times(VllmCutlassKernel, model(preset_name).config(), name, tokens)
        print("\n".join(lines))
        times.extend(lines + [""])
        (out / "kernel-times.txt").write_text("\n".join(times))
        return lines[0]
    for preset_name, name, tokens in PROFILED:
        checks.run(f"GPU time per kernel, {preset_name} {name}, {tokens} tokens", lambda p=preset_name, n=name, t=tokens: profiled(p, n, t))

    run_benches(checks, out, "vllm_cutlass,triton", ("fp8-channel", "fp8-tensor-dyn"), "qwen3-30b-a3b", "Qwen3-30B-A3B shape",
                BENCH_TOKENS, began=began, deadline_s=BENCH_DEADLINE_S)
    run_benches(checks, out, "vllm_cutlass,triton", ("fp8-channel",), "mixtral-8x7b", "Mixtral-8x7B shape",
                LARGE_BENCH_TOKENS, began=began, deadline_s=BENCH_DEADLINE_S)
    return checks.finish(out, "vllm_cutlass", device=torch.cuda.get_device_name(), torch=torch.__version__,
                         library=LIBRARY.report_lines())


if __name__ == "__main__":
    sys.exit(main())
