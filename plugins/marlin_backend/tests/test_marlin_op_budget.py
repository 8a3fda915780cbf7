"""How many ops one Marlin forward launches, on the CPU, through ops registered under the recorded schemas.

On the GPU every op of the glue is a kernel launch (several microseconds of host time eagerly, one graph node of
about two microseconds on replay), so the glue's op count is its overhead. The two Marlin ops are registered
here with the contract's schemas and do nothing (no numerics: ``test_marlin_contract.py`` checks those), so a
dispatch-mode counter sees each of them as one op and the glue's own torch ops beside them.
"""

import collections
import dataclasses

import pytest
import torch
from torch.utils._python_dispatch import TorchDispatchMode, _disable_current_modes

from moe_core.config import Activation, MoEConfig, ParallelConfig
from moe_core.presets import random_inputs, random_layer
from moe_core.quant import scheme
from moe_core_marlin import contract, glue, routing_guard
from moe_core_marlin.forward_profile import profile_forward
from moe_core_marlin.kernel import MarlinKernel
from moe_core_triton import pair_guard

_LIBRARY = torch.library.Library("moe_core_marlin_budget", "DEF")
for _op in contract.OPS:
    _LIBRARY.define(_op.schema)


def _align(ids, experts, block, sorted_ids, expert_ids, post_pad, expert_map):
    post_pad.zero_()


_LIBRARY.impl("moe_align_block_size", _align, "CPU")
_LIBRARY.impl("moe_wna16_marlin_gemm", lambda a, c, *rest: c, "CPU")
NAMESPACE = torch.ops.moe_core_marlin_budget

#: Ops that only make views or uninitialised tensors: no kernel on a GPU.
NO_LAUNCH = {"aten.empty.memory_format", "aten.slice.Tensor", "aten.view.default", "aten.select.int", "aten.unsqueeze.default"}


class LaunchCounter(TorchDispatchMode):
    """Counts the ops dispatched inside it that launch work (not views or empty tensors)."""

    def __init__(self):
        super().__init__()
        self.ops = collections.Counter()

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        if str(func) not in NO_LAUNCH:
            self.ops[str(func).removeprefix("moe_core_marlin_budget.")] += 1
        return func(*args, **(kwargs or {}))


GUARD = "routing guard (one Triton launch)"


def guard_as_one_launch(*args, **kwargs):
    """The real guard, counted as its one launch (in Triton's interpreter its tensor copies would be counted too)."""
    with _disable_current_modes() as modes:
        out = routing_guard.guard(*args, **kwargs)
    for mode in modes:
        if isinstance(mode, LaunchCounter):
            mode.ops[GUARD] += 1
    return out


@pytest.fixture(autouse=True)
def _count_the_guard_as_one_launch(monkeypatch):
    monkeypatch.setattr(glue, "guard", guard_as_one_launch)


CFG = MoEConfig(num_experts=8, top_k=2, hidden_size=128, intermediate_size=128, dtype=torch.float16)
W4 = scheme("w4a16")


#: Experts 0, 2, 4, 6 of 8 here (expert-parallel size 2).
MAP = torch.tensor([0, -1, 1, -1, 2, -1, 3, -1], dtype=torch.int32)


def kernel_and_inputs(cfg, ids_dtype=torch.int32, weights_dtype=torch.float32):
    """A MarlinKernel on the do-nothing ops, its prepared random weights and 5 tokens."""
    kernel = MarlinKernel(cfg, W4.weight_key, W4.activation_key)
    kernel.ops = NAMESPACE
    weights = kernel.prepare_weights(random_layer(cfg, W4))
    x, routing = random_inputs(cfg, 5)
    routing = dataclasses.replace(routing, topk_ids=routing.topk_ids.to(ids_dtype), topk_weights=routing.topk_weights.to(weights_dtype))
    return kernel, weights, x, routing


def launches(cfg, *, expert_map=None, ids_dtype=torch.int32, weights_dtype=torch.float32) -> collections.Counter:
    """The launching ops of the second forward (the first makes the workspace and the local map)."""
    if expert_map is not None:
        cfg = dataclasses.replace(cfg, parallel=ParallelConfig(ep_size=2))
    kernel, weights, x, routing = kernel_and_inputs(cfg, ids_dtype, weights_dtype)
    kernel.forward(x, weights, routing, expert_map=expert_map, apply_router_weight_on_input=False)
    with LaunchCounter() as counter:
        kernel.forward(x, weights, routing, expert_map=expert_map, apply_router_weight_on_input=False)
    return counter.ops


# The floor: the guard, the align, the two GEMMs, act(gate) and its product with up, the zero fill of GEMM2's
# output (rows of dropped or remote pairs stay unwritten), the sum over top-k.
FLOOR = collections.Counter({GUARD: 1, "moe_align_block_size.default": 1, "moe_wna16_marlin_gemm.default": 2, "aten.silu.default": 1,
                             "aten.mul.Tensor": 1, "aten.zeros.default": 1, "aten.sum.dim_IntList": 1})


def test_a_forward_launches_the_guard_the_align_two_gemms_the_activation_a_fill_and_the_top_k_sum_only():
    assert launches(CFG) == FLOOR


def test_the_guard_launches_nothing_besides_its_kernel(monkeypatch):
    monkeypatch.setattr(pair_guard, "_launcher", lambda has_map: lambda *args, **kwargs: None)
    ids, weights, errors = torch.zeros(5, 2, dtype=torch.int64), torch.ones(5, 2), torch.zeros(3, dtype=torch.int64)
    with LaunchCounter() as counter:
        routing_guard.guard(ids, weights, MAP, num_experts=8, num_local=4, errors=errors)
    assert counter.ops == {}


@pytest.mark.parametrize("expert_map", [MAP, MAP.long()], ids=["int32 map", "int64 map"])
def test_an_expert_map_adds_no_launch(expert_map):
    assert launches(CFG, expert_map=expert_map) == FLOOR


@pytest.mark.parametrize("change, extra", [
    (dict(swiglu_limit=7.0), {"aten.clamp.default": 2}),
    (dict(activation=Activation.GELU), {"aten.gelu.default": 1}),
], ids=["swiglu clamp", "gelu"])
def test_the_activation_variants_add_only_their_own_ops(change, extra):
    got = launches(dataclasses.replace(CFG, **change))
    want = FLOOR + collections.Counter(extra)
    if "aten.gelu.default" in extra:
        want -= collections.Counter({"aten.silu.default": 1})
    assert got == want


def test_inputs_in_other_dtypes_cost_no_conversion():
    assert launches(CFG, ids_dtype=torch.int64, weights_dtype=torch.float16) == FLOOR


def test_the_profile_of_a_forward_names_its_ops_per_forward(tmp_path):
    kernel, weights, x, routing = kernel_and_inputs(CFG)
    summary = profile_forward(kernel, weights, x, routing, table=tmp_path / "profile.txt")
    assert summary["device ops per forward"] == 0  # on the CPU nothing runs on a device
    ops = summary["most host time (us per forward, calls per forward)"]
    assert ops["moe_core_marlin_budget::moe_wna16_marlin_gemm"][1] == 2
    assert "moe_wna16_marlin_gemm" in (tmp_path / "profile.txt").read_text()
