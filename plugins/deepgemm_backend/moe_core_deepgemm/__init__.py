"""moe-core plugin binding DeepGEMM's grouped GEMMs (fp8 block-scaled and bf16) with moe-core's Triton glue."""

from pathlib import Path

#: Builds DeepGEMM from its source tree for this Python; shipped in this package, so an install from a wheel has it.
BUILD_SCRIPT = Path(__file__).with_name("build_deepgemm.sh")


def how_to_build() -> str:
    """How to install DeepGEMM, with the installed path of :data:`BUILD_SCRIPT`."""
    return (f"build it from source with `bash {BUILD_SCRIPT} SOURCE_DIR` (the script's header says how to get the source); "
            "PyPI's deep-gemm 1.0.0 is an incomplete sdist and does not work")
