"""moe-core plugin binding DeepEP's dispatch/combine (intranode normal mode and low-latency mode) as dispatchers."""

from pathlib import Path

#: Builds DeepEP V1 from its source tree for this Python; shipped in this package, so an install from a wheel has it.
BUILD_SCRIPT = Path(__file__).with_name("build_deepep.sh")


def how_to_build() -> str:
    """How to install DeepEP, with the installed path of :data:`BUILD_SCRIPT`."""
    return (f"build DeepEP V1 from source with `bash {BUILD_SCRIPT} SOURCE_DIR` (the script's header names the tag); "
            "install nvidia-nvshmem-cu13 (or set NVSHMEM_DIR) first for the low-latency mode")
