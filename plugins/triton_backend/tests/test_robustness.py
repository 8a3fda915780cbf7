"""Invalid routing through the Triton kernels: dropped, counted on the device, never out of bounds.

On a CPU machine the kernels run in the interpreter and are called through ``forward`` (``apply``
checks CPU inputs synchronously and would raise first); on a GPU the conformance kit's
robustness checks run through ``apply``, then thousands of garbage routings through one layer.
"""

import pytest
import torch
import triton
import triton.language as tl
from hypothesis import given, settings
from hypothesis import strategies as st

from moe_core import quant
from moe_core.config import MoEConfig, ParallelConfig
from moe_core.layer import MoELayer
from moe_core.numerics import relative_error, tolerance
from moe_core.presets import random_inputs, random_layer
from moe_core.reference.kernel import ReferenceKernel
from moe_core.registry import Registry
from moe_core.routing import BatchedRouting, Routing
from moe_core.routing_guard import InvalidRoutingError, RoutingErrorCounter, drop_invalid_routing, invalid_pairs
from moe_core.testing import conformance
from moe_core.testing.robustness import reported_count
from moe_core_triton.blocks import next_power_of_2, pair_table, pairs_of_block, standard_table
from moe_core_triton.compile_check import with_launch_fields
from moe_core_triton.configs import FusedConfig
from moe_core_triton.kernel import TritonBatchedKernel, TritonKernel

#: The kernel with a block table at every size (small forwards otherwise use a PairTable).
BLOCK_TABLES = type("BlockTableTritonKernel", (TritonKernel,), {"pair_table_max_pairs": 0})
#: Block tables with GEMM2's blocks half GEMM1's: GEMM2 reads GEMM1's table (TritonKernel.shares_table).
SHARED_TABLE = with_launch_fields(with_launch_fields(BLOCK_TABLES, 1, BLOCK_M=32), 2, BLOCK_M=16)
GPU = torch.cuda.is_available()
DEVICE = "cuda" if GPU else "cpu"
INT32 = st.integers(-(2**31), 2**31 - 1)


@st.composite
def table_case(draw):
    num_experts = draw(st.integers(1, 9))
    with_map = draw(st.booleans())
    num_local = draw(st.integers(1, num_experts)) if with_map else num_experts
    pairs = draw(st.integers(1, 40))
    ids = draw(st.lists(st.one_of(st.integers(-2, num_experts + 1), INT32), min_size=pairs, max_size=pairs))
    expert_map = draw(st.lists(st.integers(-2, num_local + 1), min_size=num_experts, max_size=num_experts)) if with_map else None
    block_m = draw(st.sampled_from([2, 4, 16]))
    return torch.tensor(ids, dtype=torch.int32).reshape(-1, 1), num_experts, num_local, expert_map, block_m


@settings(max_examples=25, deadline=None)
@given(table_case())
def test_tables_hold_each_valid_pair_once_and_count_the_invalid(case):
    ids, num_experts, num_local, expert_map, block_m = case
    ids = ids.to(DEVICE)
    map_t = torch.tensor(expert_map, device=DEVICE) if expert_map is not None else None
    local, bad, _ = invalid_pairs(ids.reshape(-1), num_experts, map_t, num_local)
    for block in (None, 16):  # 16: several programs on a GPU
        counter = RoutingErrorCounter("routing.topk_ids", "")
        table = standard_table(ids, num_experts, num_local, block_m, map_t, counter, block=block)
        used = int(table.num_padded)
        rows = table.sorted_ids[:used].tolist()
        owners = table.block_expert.tolist()
        placed = {}
        for i, row in enumerate(rows):
            if row < table.num_valid:
                assert row not in placed, f"block={block}: pair {row} placed twice"
                placed[row] = owners[i // block_m]
        want = {p: e for p, e in enumerate(local.tolist()) if e >= 0}
        assert placed == want, f"block={block}: table {placed} != valid pairs {want}"
        assert reported_count(counter) == int(bad.sum())


@triton.jit
def _pair_blocks_kernel(ids_ptr, map_ptr, err_ptr, out_ptr, pairs, num_experts, num_local,
                        HAS_MAP: tl.constexpr, BLOCK_M: tl.constexpr, P_P2: tl.constexpr, E_P2: tl.constexpr):
    """Each program writes what pairs_of_block gives it: its BLOCK_M row ids, its expert, whether it is live."""
    pid = tl.program_id(0)
    ids, expert, live = pairs_of_block(ids_ptr, map_ptr, err_ptr, pid, pairs, num_experts, num_local, pid == 0,
                                       HAS_MAP, True, BLOCK_M, P_P2, E_P2)
    row = out_ptr + pid * (BLOCK_M + 2)
    tl.store(row + tl.arange(0, BLOCK_M), ids.to(tl.int32))
    tl.store(row + BLOCK_M, expert.to(tl.int32))
    tl.store(row + BLOCK_M + 1, live.to(tl.int32))


@settings(max_examples=25, deadline=None)
@given(table_case())
def test_pair_tables_give_each_program_its_block_and_count_the_invalid(case):
    """A PairTable's blocks, worked out by each GEMM program, are exactly the table's grouping: experts in order, each
    expert's valid pairs in pair order, runs padded to BLOCK_M; programs past the last block are not live."""
    ids, num_experts, num_local, expert_map, block_m = case
    ids = ids.to(DEVICE)
    map_t = torch.tensor(expert_map, device=DEVICE) if expert_map is not None else None
    local, bad, _ = invalid_pairs(ids.reshape(-1), num_experts, map_t, num_local)
    counter = RoutingErrorCounter("routing.topk_ids", "")
    table = pair_table(ids, num_experts, num_local, block_m, map_t, counter)
    programs = table.capacity // block_m
    out = torch.full((programs, block_m + 2), -7, dtype=torch.int32, device=DEVICE)
    _pair_blocks_kernel[(programs,)](ids.reshape(-1), map_t if map_t is not None else ids, counter.buffer(ids.device), out,
                                     table.num_valid, num_experts, num_local, HAS_MAP=map_t is not None, BLOCK_M=block_m,
                                     P_P2=table.pairs_p2, E_P2=next_power_of_2(num_local))
    want = []  # (row ids, expert) of every block, from the valid pairs alone
    for expert in range(num_local):
        run = [p for p, e in enumerate(local.tolist()) if e == expert]
        run += [table.num_valid] * (-len(run) % block_m)
        want += [(run[i: i + block_m], expert) for i in range(0, len(run), block_m)]
    got = out.tolist()
    assert [(row[:block_m], row[block_m]) for row in got[: len(want)]] == want
    assert [row[block_m + 1] for row in got] == [1] * len(want) + [0] * (programs - len(want))
    assert reported_count(counter) == int(bad.sum())


def _problem(name, ep=1, tokens=6):
    cfg = MoEConfig(num_experts=8, top_k=2, hidden_size=64, intermediate_size=32, dtype=torch.float16, parallel=ParallelConfig(ep_size=ep))
    sch = quant.scheme(name)
    raw = random_layer(cfg, sch, device=DEVICE, seed=1)
    x, routing = random_inputs(cfg, tokens, device=DEVICE, seed=2)
    return cfg, sch, raw, x, routing


@pytest.mark.parametrize("name", ["unquantized", "fp8-block", "fp8-tensor-dyn", "int8"])
@pytest.mark.parametrize("with_map", [False, True])
@pytest.mark.parametrize("kernel_cls", [TritonKernel, with_launch_fields(TritonKernel, SPLIT_K=3), BLOCK_TABLES, SHARED_TABLE],
                         ids=["unsplit", "split-k", "block-table", "gemm2-on-gemm1s-table"])
def test_forward_drops_invalid_pairs_and_counts_them(name, with_map, kernel_cls):
    cfg, sch, raw, x, routing = _problem(name, ep=2 if with_map else 1)
    ids = routing.topk_ids.clone()
    ids[0, 0], ids[2, 1], ids[3, 0] = cfg.num_experts, -5, 2**31 - 1
    expert_map = None
    if with_map:
        expert_map = torch.tensor([0, 1, 2, 3, -1, -1, -1, 9], device=DEVICE)  # entry 7 out of range
    bad_routing = Routing(ids, routing.topk_weights)
    kernel = kernel_cls(cfg, sch.weight_key, sch.activation_key)
    got = kernel.forward(x, kernel.prepare_weights(raw), bad_routing, expert_map=expert_map, apply_router_weight_on_input=False)
    oracle = ReferenceKernel(cfg, sch.weight_key, sch.activation_key)
    counter = RoutingErrorCounter("", "")
    safe, safe_map = drop_invalid_routing(cfg, x, bad_routing, expert_map, counter)
    want = oracle.apply(x, oracle.prepare_weights(raw), safe, expert_map=safe_map)
    assert torch.isfinite(got).all()
    assert relative_error(got, want) <= tolerance(sch.activation_key, cfg.dtype)
    assert reported_count(kernel.routing_errors) == reported_count(counter) >= 3


def test_batched_counts_out_of_range_are_clamped_and_counted():
    cfg = MoEConfig(num_experts=3, top_k=1, hidden_size=64, intermediate_size=32, dtype=torch.float16,
                    parallel=ParallelConfig(use_batched_activation_format=True))
    sch = quant.scheme("unquantized")
    raw = random_layer(cfg, sch, device=DEVICE, seed=3)
    xb = torch.randn(3, 4, 64, device=DEVICE).half()
    counts = torch.tensor([9, -1, 2], device=DEVICE)
    kernel = TritonBatchedKernel(cfg, None, None)
    got = kernel.forward(xb, kernel.prepare_weights(raw), BatchedRouting(counts), expert_map=None, apply_router_weight_on_input=False)
    oracle = ReferenceKernel(cfg, None, None)
    want = oracle.apply(xb, oracle.prepare_weights(raw), BatchedRouting(counts.clamp(0, 4)))
    assert relative_error(got, want) <= tolerance(None, cfg.dtype)
    assert got[1].abs().sum() == 0 and got[2, 2:].abs().sum() == 0
    assert reported_count(kernel.routing_errors) == 2


@pytest.mark.skipif(not GPU, reason="apply() checks CPU inputs synchronously; the masked path through apply needs a GPU")
@pytest.mark.parametrize("backend", ["triton", "triton_batched"])
def test_conformance_robustness_on_the_gpu(backend):
    records = conformance.check_robustness(Registry(), backend, device="cuda", garbage_calls=2000, schemes=("unquantized", "fp8-block", "fp8-tensor-dyn", "int8"))
    assert records and all(r["outcome"] in ("masked", "survived") for r in records), records


@pytest.mark.skipif(not GPU, reason="needs a GPU")
@pytest.mark.parametrize("tokens, fused", [(64, False), (1, FusedConfig(16, 64, 64, 128, 128, 8, 4))],
                         ids=["64 tokens, two GEMMs", "1 token, one launch"])
def test_layer_survives_garbage_and_reports_it_on_a_later_call(tokens, fused):
    cfg = MoEConfig(num_experts=128, top_k=8, hidden_size=2048, intermediate_size=768, dtype=torch.bfloat16)
    sch = quant.scheme("unquantized")
    raw = random_layer(cfg, sch, device="cuda", seed=0)
    layer = MoELayer(cfg, raw, environ={"MOE_CORE_BACKEND": "triton"})
    kernel = layer._kernels["triton"][0]
    kernel.routing_errors.min_interval_s = 0  # copy after every call: the next call must see it
    kernel.fused_override = fused  # the one-launch layer (fused.py) at 1 token, whatever the data file says
    x, routing = random_inputs(cfg, tokens, device="cuda", seed=1)
    want = ReferenceKernel(cfg, None, None)
    want = want.apply(x, want.prepare_weights(raw), routing)
    for bad in (128, 100000, -5):
        ids = routing.topk_ids.clone()
        ids[-1, 3] = bad
        layer(x, Routing(ids, routing.topk_weights))
        torch.cuda.synchronize()  # the asynchronous copy of the counter has landed
        with pytest.raises(InvalidRoutingError, match="1 value"):
            layer(x, routing)
        assert relative_error(layer(x, routing), want) <= tolerance(None, cfg.dtype)
    gen = torch.Generator().manual_seed(0)
    for _ in range(2000):
        garbage = torch.randint(-(2**31), 2**31 - 1, routing.topk_ids.shape, generator=gen, dtype=torch.int32).cuda()
        try:
            layer(x, Routing(garbage, routing.topk_weights))
        except InvalidRoutingError:
            pass
    try:  # whatever the loop's own calls did not report yet
        layer.check()
    except InvalidRoutingError:
        pass
    ids = routing.topk_ids.clone()
    ids[0, 0] = -1
    layer(x, Routing(ids, routing.topk_weights))
    with pytest.raises(InvalidRoutingError, match=r"1 value.*\[-1, -1\]"):
        layer.check()
    assert relative_error(layer(x, routing), want) <= tolerance(None, cfg.dtype)
    layer.check()
    assert any(plan is not None for plan in kernel._fused_plans.values()) == bool(fused)  # the path meant was taken


@pytest.mark.parametrize("name", ["unquantized", "fp8-block", "fp8-tensor-token", "fp8-tensor", "int8", "fp8-tensor-dyn"])
def test_a_nan_token_stays_in_its_row_unless_the_activation_scale_is_per_tensor_dynamic(name):
    cfg, sch, raw, x, routing = _problem(name)
    x = x.clone()
    x[2] = float("nan")
    weights = routing.topk_weights.clone()
    weights[4, 0] = float("inf")
    kernel = TritonKernel(cfg, sch.weight_key, sch.activation_key)
    got = kernel.apply(x, kernel.prepare_weights(raw), Routing(routing.topk_ids, weights))
    key = sch.activation_key
    if key is not None and key.group.is_per_tensor and not key.static:
        assert torch.isnan(got).all()  # one amax over all tokens: documented in docs/robustness.md
        return
    oracle = ReferenceKernel(cfg, sch.weight_key, sch.activation_key)
    want = oracle.apply(x, oracle.prepare_weights(raw), Routing(routing.topk_ids, weights))
    others = [r for r in range(x.shape[0]) if r not in (2, 4)]  # rows 2 and 4 may hold anything
    assert relative_error(got[others], want[others]) <= tolerance(key, cfg.dtype)
    assert key is not None or (torch.isnan(got[2]).all() and not torch.isfinite(got[4]).all())
