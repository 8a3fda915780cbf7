"""A kernel the Triton interpreter runs but the compiler rejects: the statements after a constexpr
branch that returns are traced when compiled, and there the reshape does not fit (64 elements into
GROUPS x GROUP = 1 x 128) — the shape of a bug the weight-only GEMM once had."""

import sys

import torch
import triton
import triton.language as tl

from moe_core_triton.compile_check import compile_launch, describe, recording
from moe_core_triton.launch import Launcher


@triton.jit
def _early_return_kernel(x_ptr, BLOCK: tl.constexpr, GROUP: tl.constexpr, GROUPS: tl.constexpr):
    x = tl.load(x_ptr + tl.arange(0, BLOCK))
    if GROUPS == 1:  # the block lies in one group
        tl.store(x_ptr + tl.arange(0, BLOCK), x * 2)
        return
    tl.store(x_ptr + tl.arange(0, BLOCK), tl.reshape(tl.reshape(x, (GROUPS, GROUP)) * 2, (BLOCK,)))


with recording() as launches:
    Launcher(_early_return_kernel, num_warps=4, BLOCK=64, GROUP=128, GROUPS=1)((1,), torch.zeros(64))
try:
    compile_launch(launches[0], 90)
except Exception as exc:  # noqa: BLE001 - the point: the compiler's error
    print(describe(exc))
    sys.exit(1)
print("compiled")
