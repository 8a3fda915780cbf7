"""Reused scratch buffers (moe_core_triton.scratch): handed out in order, reallocated on any
change, shared by layers of one shape, bounded in bytes, never aliased with an output, and not
used while a CUDA graph is captured."""

import pytest
import torch

from moe_core import quant
from moe_core.config import MoEConfig
from moe_core.numerics import relative_error, tolerance
from moe_core.presets import random_inputs, random_layer
from moe_core.reference.kernel import ReferenceKernel
from moe_core_triton import kernel as kernel_module
from moe_core_triton import scratch as scratch_module
from moe_core_triton.kernel import REUSE_MAX_ELEMENTS, TritonKernel
from moe_core_triton.scratch import Scratch, ScratchPool

GPU = torch.cuda.is_available()


def test_scratch_hands_out_the_same_buffers_in_the_same_order():
    scratch = Scratch()
    cpu = torch.device("cpu")
    first = [scratch.rewind().empty((4, 3), torch.float16, cpu), scratch.empty((5,), torch.int32, cpu)]
    again = [scratch.rewind().empty((4, 3), torch.float16, cpu), scratch.empty((5,), torch.int32, cpu)]
    assert all(a is b for a, b in zip(first, again))
    changed = scratch.rewind().empty((4, 3), torch.float32, cpu)  # another dtype: a new buffer for that turn
    assert changed is not first[0] and changed.dtype == torch.float32
    assert scratch.empty((6,), torch.int32, cpu).shape == (6,)  # another shape: likewise
    assert scratch.rewind().empty((4, 3), torch.float32, cpu) is changed
    assert scratch.nbytes == 4 * 3 * 4 + 6 * 4


def test_only_new_empty_is_logged_as_a_fresh_allocation_scratch_buffers_are_not():
    scratch = Scratch()
    cpu = torch.device("cpu")
    with scratch_module.fresh_allocations() as fresh:
        held = scratch.rewind().empty((4,), torch.float32, cpu)
        own = scratch_module.new_empty((4,), torch.float32, cpu)
        replaced = scratch.rewind().empty((8,), torch.float32, cpu)  # reallocated for its turn: still scratch
    assert len(fresh) == 1 and fresh[0] is own
    assert held is not replaced and scratch.holds(replaced)


def test_the_pool_keeps_one_set_per_key_and_drops_them_all_past_its_byte_budget():
    pool = ScratchPool(max_bytes=1000)
    cpu = torch.device("cpu")
    a = pool.empty_for(("a",))((100,), torch.float32, cpu)  # 400 bytes
    assert pool.empty_for(("a",))((100,), torch.float32, cpu) is a  # same key, same turn: same buffer
    pool.empty_for(("b",))((200,), torch.float32, cpu)  # 800 more: 1200 held, over the budget
    assert len(pool) == 2 and pool.held_bytes() == 1200
    pool.empty_for(("c",))  # a new key finds more than the budget held: every set is dropped first
    assert len(pool) == 1 and pool.held_bytes() == 0
    assert pool.empty_for(("a",))((100,), torch.float32, cpu) is not a


def test_forwards_reuse_scratch_up_to_a_size_where_they_are_gpu_bound():
    cfg = MoEConfig(num_experts=8, top_k=2, hidden_size=256, intermediate_size=128, dtype=torch.bfloat16)
    kernel = TritonKernel(cfg, None, None)
    largest = REUSE_MAX_ELEMENTS // (cfg.hidden_size + cfg.intermediate_size)
    gpu = torch.device("cuda", 0)
    assert kernel._scratch(gpu, largest + 1, 1, False) is scratch_module.new_empty
    assert kernel._scratch(torch.device("cpu"), 2, 1, False) is scratch_module.new_empty
    if GPU:
        assert kernel._scratch(gpu, largest, 1, False) is not scratch_module.new_empty


@pytest.mark.skipif(not GPU, reason="scratch buffers are used on CUDA devices only")
@pytest.mark.parametrize("name", ["unquantized", "fp8-block", "fp8-tensor-dyn"])
def test_consecutive_forwards_keep_their_outputs(name):
    """Outputs are never scratch: the first result survives later forwards on reused buffers."""
    sch = quant.scheme(name)
    cfg = MoEConfig(num_experts=8, top_k=2, hidden_size=256, intermediate_size=128, dtype=torch.bfloat16)
    raw = random_layer(cfg, sch, device="cuda", seed=4)
    kernel, oracle = TritonKernel(cfg, sch.weight_key, sch.activation_key), ReferenceKernel(cfg, sch.weight_key, sch.activation_key)
    weights, oracle_weights = kernel.prepare_weights(raw), oracle.prepare_weights(raw)
    tokens = 32
    calls = [random_inputs(cfg, tokens, device="cuda", seed=s) for s in range(3)]
    outs = [kernel.apply(x, weights, routing) for x, routing in calls]
    side = torch.cuda.Stream()
    side.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(side):  # another stream: its own scratch
        outs.append(kernel.apply(calls[0][0], weights, calls[0][1]))
    torch.cuda.current_stream().wait_stream(side)
    for out, (x, routing) in zip(outs, calls + calls[:1]):
        assert relative_error(out, oracle.apply(x, oracle_weights, routing)) <= tolerance(sch.activation_key, cfg.dtype)
    assert len({out.data_ptr() for out in outs}) == len(outs)


@pytest.mark.skipif(not GPU, reason="CUDA graphs need a GPU")
def test_a_captured_graph_owns_its_buffers():
    """A graph replayed after later eager forwards (which reuse scratch) still computes its own inputs."""
    sch = quant.scheme("fp8-block")
    cfg = MoEConfig(num_experts=8, top_k=2, hidden_size=256, intermediate_size=128, dtype=torch.bfloat16)
    kernel = TritonKernel(cfg, sch.weight_key, sch.activation_key)
    weights = kernel.prepare_weights(random_layer(cfg, sch, device="cuda", seed=6))
    x, routing = random_inputs(cfg, 3, device="cuda", seed=7)
    other, other_routing = random_inputs(cfg, 3, device="cuda", seed=8)
    want = kernel.apply(x, weights, routing).clone()
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        out = kernel.apply(x, weights, routing)
    kernel.apply(other, weights, other_routing)
    graph.replay()
    kernel.apply(other, weights, other_routing)
    torch.cuda.synchronize()
    assert torch.equal(out, want)


@pytest.mark.skipif(not GPU, reason="scratch buffers are used on CUDA devices only")
def test_layers_of_one_shape_share_a_scratch_set_and_each_computes_its_own_weights(monkeypatch):
    """A model's layers run one after another on a stream: the second layer reuses the first one's buffers."""
    pool = ScratchPool()
    monkeypatch.setattr(kernel_module, "POOL", pool)
    sch = quant.scheme("fp8-channel")
    cfg = MoEConfig(num_experts=8, top_k=2, hidden_size=256, intermediate_size=128, dtype=torch.bfloat16)
    layers = [TritonKernel(cfg, sch.weight_key, sch.activation_key) for _ in range(2)]
    oracle = ReferenceKernel(cfg, sch.weight_key, sch.activation_key)
    raws = [random_layer(cfg, sch, device="cuda", seed=10 + i) for i in range(2)]
    weights = [layer.prepare_weights(raw) for layer, raw in zip(layers, raws)]
    x, routing = random_inputs(cfg, 16, device="cuda", seed=12)
    outs = [layer.apply(x, w, routing) for layer, w in zip(layers, weights)]
    assert len(pool) == 1 and pool.held_bytes() > 0
    held = pool.held_bytes()
    outs += [layer.apply(x, w, routing) for layer, w in zip(layers, weights)]
    assert len(pool) == 1 and pool.held_bytes() == held  # one set for both layers and both rounds
    for out, raw in zip(outs, raws + raws):
        want = oracle.apply(x, oracle.prepare_weights(raw), routing)
        assert relative_error(out, want) <= tolerance(sch.activation_key, cfg.dtype)
