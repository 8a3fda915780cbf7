"""The dispatchers that ship with the core, over ``torch.distributed`` (NCCL on GPUs, gloo on CPUs).

Registered by the core like any other plugin (plugin name ``torch_distributed``). Vendor transports
(DeepEP, pplx, ...) plug in the same way from their own packages (docs/expert-parallel.md).
"""

from __future__ import annotations

from moe_core.config import ActivationFormat
from moe_core.dispatch.spec import DispatchSpec
from moe_core.hookspecs import hookimpl
from moe_core.platform import DeviceKind
from moe_core.spec import Validation

_DEVICES = frozenset({DeviceKind.CUDA, DeviceKind.ROCM, DeviceKind.CPU})
#: Equality with the single-GPU layer and CUDA-graph replay, NCCL across two H200s, Triton experts, Qwen3-30B-A3B
#: and Mixtral-8x7B shapes, bf16 and fp8-block (docs/benchmarks/ep-h200x2.md). The gloo CPU cases run in every CI
#: (tests/test_expert_parallel.py).
_VALIDATION = Validation(
    hardware="2x NVIDIA H200 (NV18), NCCL 2.28.9, one rank per GPU",
    provider="torch 2.11.0+cu130, triton 3.6.0", date="2026-11-23", log="docs/benchmarks/raw/2026-11-23-ep-h200x2/ep_equality.log",
)

#: The same, with packed_all_to_all and peer_copy, from benchmarks/ep_suite.sh on two H200s (docs/benchmarks/ep-h200x2.md).
_VALIDATION_ROWS = Validation(
    hardware="2x NVIDIA H200 (NV18), NCCL 2.28.9, one rank per GPU",
    provider="torch 2.11.0+cu130, triton 3.6.0", date="2026-11-28", log="docs/benchmarks/raw/2026-11-28-ep-h200x2/ep_world2_equality.log",
)

SPECS = (
    DispatchSpec(
        # Below all_to_all by priority; the measured dispatcher rankings (shipped per device, or the user's) order
        # it where it was timed.
        name="packed_all_to_all", family="torch_distributed", priority=190, output_format=ActivationFormat.STANDARD,
        implementation="moe_core.dispatch.packed_all_to_all:PackedAllToAllDispatcher", host_sync=False, cuda_graph_safe=True,
        devices=_DEVICES, validation=_VALIDATION_ROWS,
        description="each token once per rank that needs it, routing in the same row, one equal-split all_to_all_single each way",
    ),
    DispatchSpec(
        name="all_to_all", family="torch_distributed", priority=200, output_format=ActivationFormat.STANDARD,
        implementation="moe_core.dispatch.all_to_all:AllToAllDispatcher", host_sync=True, cuda_graph_safe=False,
        devices=_DEVICES, validation=_VALIDATION,
        description="all_to_all_single with per-rank counts: sends each token once to each rank that needs it (prefill)",
    ),
    DispatchSpec(
        name="batched_all_to_all", family="torch_distributed", priority=150, output_format=ActivationFormat.BATCHED_EXPERTS,
        implementation="moe_core.dispatch.batched_all_to_all:BatchedAllToAllDispatcher", host_sync=False, cuda_graph_safe=True,
        devices=_DEVICES, validation=_VALIDATION,
        description="fixed-capacity per-expert buffers, one all_to_all each way, overflow reported (decode, CUDA graphs)",
    ),
    DispatchSpec(
        name="naive", family="torch_distributed", priority=100, output_format=ActivationFormat.STANDARD,
        implementation="moe_core.dispatch.naive:NaiveDispatcher", host_sync=False, cuda_graph_safe=True,
        devices=_DEVICES, validation=_VALIDATION,
        description="all-gather every token, reduce-scatter the results (small batches, CUDA graphs)",
    ),
    DispatchSpec(
        name="peer_copy", family="torch_symmetric_memory", priority=90, output_format=ActivationFormat.STANDARD,
        implementation="moe_core.dispatch.peer_copy:PeerCopyDispatcher", host_sync=False, cuda_graph_safe=True,
        devices=frozenset({DeviceKind.CUDA}), validation=_VALIDATION_ROWS,
        description="packed_all_to_all's rows copied into the peers' symmetric memory (NVLink/P2P, no collective; "
                    "lowest priority until a measured ranking prefers it)",
    ),
)


@hookimpl
def moe_core_dispatchers():
    return list(SPECS)
