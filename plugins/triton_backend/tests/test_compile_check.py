"""Every kernel of every declared scheme compiles for the GPUs the plugin claims, checked on a CPU.

The CPU tests run the kernels in the Triton interpreter, which never compiles them: a kernel that only
fails when compiled passed CI once and failed on the H100 (docs/benchmarks/weight-only-h100.md).
``python -m moe_core_triton.compile_check`` compiles them with Triton's own compiler and ptxas for a
given architecture. On a GPU the other tests compile them for real, so these are skipped there.
"""

import os
import subprocess
import sys
from pathlib import Path

import pytest
import torch

from moe_core_triton.compile_check import fused_configs
from moe_core_triton.plugin import BATCHED_SCHEMES, STANDARD_SCHEMES, WEIGHT_ONLY_SCHEMES

pytestmark = pytest.mark.skipif(torch.cuda.is_available(), reason="on a GPU the kernels are compiled by the other tests")


def compile_check(*args: str, script: str | None = None) -> subprocess.CompletedProcess:
    env = {k: v for k, v in os.environ.items() if k != "TRITON_INTERPRET"}
    command = [sys.executable, script] if script else [sys.executable, "-m", "moe_core_triton.compile_check", *args]
    return subprocess.run(command, env=env, capture_output=True, text=True, timeout=900)


@pytest.mark.parametrize("arch, batched, schemes, tokens, dtype, options", [
    (90, False, STANDARD_SCHEMES, "1,300", "bfloat16", []),  # H100: two tile sizes per GEMM
    (90, True, BATCHED_SCHEMES, "1", "bfloat16", []),
    (90, False, STANDARD_SCHEMES, "1", "bfloat16", ["--swap-ab", "--stats"]),  # the transposed product tuned files may pick
    (90, False, STANDARD_SCHEMES, "1", "bfloat16", ["--split-k", "2"]),  # split K (and its gated pass), which they may pick too
    (90, False, STANDARD_SCHEMES, "300", "bfloat16", ["--tma-b", "--stats", "--sizes", "256,128"]),  # TMA weight loads, likewise
    (90, False, WEIGHT_ONLY_SCHEMES, "300", "bfloat16", ["--gate-up", "--swap-ab", "--stats", "--sizes", "256,128"]),  # gate and up in one tile
    (80, False, ("unquantized",) + WEIGHT_ONLY_SCHEMES, "1", "float16", []),  # A100, which the weight-only schemes claim
    (90, False, ("unquantized",), "1,3", "bfloat16", ["--fused"]),  # the one-launch layer, each config the data files name
    (90, False, WEIGHT_ONLY_SCHEMES, "1", "bfloat16", ["--mma-in-flight", "--split-k", "4"]),  # K loops with no path around
], ids=["sm90-standard", "sm90-batched", "sm90-swap-ab", "sm90-split-k", "sm90-tma-b", "sm90-gate-up", "sm80-weight-only", "sm90-fused",
        "sm90-mma-in-flight"])
def test_every_kernel_of_every_scheme_compiles(arch, batched, schemes, tokens, dtype, options):
    args = ["--arch", str(arch), "--scheme", ",".join(schemes), "--tokens", tokens, "--dtype", dtype]
    args += (["--batched"] if batched else []) + options
    done = compile_check(*args)
    assert done.returncode == 0, done.stdout[-4000:] + done.stderr[-4000:]
    kernel = "fused_layer_kernel" if "--fused" in options else "moe_gemm_kernel"
    assert all(f"{s} tokens={tokens.split(',')[0]} {kernel}" in done.stdout for s in schemes)  # each scheme's GEMMs were compiled
    if "--fused" in options:  # every config a data file names, at each token count
        assert done.stdout.count(kernel) == len(tokens.split(",")) * len(fused_configs()) > 2, done.stdout
    assert f"compiled for sm_{arch}" in done.stdout
    assert ("gated_rows_kernel" in done.stdout) == ("--split-k" in options)
    if "--swap-ab" in options:  # the point of the transposed product: 16-token tiles on Hopper's wgmma instead of mma.sync
        gemms = [line for line in done.stdout.splitlines() if "moe_gemm_kernel" in line]
        assert gemms and all("wgmma=0" not in line and "mma.sync=0" in line for line in gemms), gemms
    if "--gate-up" in options:  # e2m1 and int4 words (bfloat16) by their PTX in Hopper's swapped warpgroup tiles (kernel.words_by_ptx)
        gemms = [line for line in done.stdout.splitlines() if "moe_gemm_kernel" in line and "compiled above" not in line]
        for count, words in (("shf.wrap", (" nvfp4-w4a16 ", " mxfp4 ")), ("int4.words", (" w4a16 ",))):
            mine = [line for line in gemms if any(scheme in line for scheme in words)]
            by_ptx = [int(line.split("moe_gemm_kernel ")[1].split("x")[1]) % 64 == 0 for line in mine]
            assert mine and all((f"{count}=0" not in line) == ptx for line, ptx in zip(mine, by_ptx)), mine
            assert all(f"{count}=0" in line for line in gemms if line not in mine), gemms
    if "--tma-b" in options:  # weight tiles by the tensor memory accelerator, except weight-only codes (pointer loads)
        gemms = [line for line in done.stdout.splitlines() if "moe_gemm_kernel" in line and "compiled above" not in line]
        assert gemms and all(("tma=0" in line) == any(f" {s} " in line for s in WEIGHT_ONLY_SCHEMES) for line in gemms), gemms


def test_a_kernel_only_the_compiler_rejects_is_reported():
    done = compile_check(script=str(Path(__file__).with_name("compile_check_data") / "broken_kernel.py"))
    assert done.returncode == 1, done.stdout + done.stderr
    assert "reshape() cannot change total number of elements" in done.stdout


def test_a_kernel_past_the_shared_memory_limit_is_reported():
    """A kernel that compiles but needs more shared memory than the GPU has fails at launch: reported here."""
    from types import SimpleNamespace

    from moe_core_triton.compile_check import shared_memory_problem

    def kernel(shared):
        return SimpleNamespace(metadata=SimpleNamespace(shared=shared))

    # fp8-block GEMM1 with a 16x256x128 tile: 4 stages failed to launch on the H100 (2026-11-23), 3 fit
    assert "needs 271360 bytes" in shared_memory_problem(kernel(271360), 90)
    assert shared_memory_problem(kernel(203776), 90) is None
    assert "sm_89 allows 101376" in shared_memory_problem(kernel(203776), 89)


def test_it_refuses_to_run_under_the_interpreter():
    done = subprocess.run([sys.executable, "-m", "moe_core_triton.compile_check", "--scheme", "unquantized"],
                          env=dict(os.environ, TRITON_INTERPRET="1"), capture_output=True, text=True, timeout=300)
    assert done.returncode == 2 and "unset TRITON_INTERPRET" in done.stderr
