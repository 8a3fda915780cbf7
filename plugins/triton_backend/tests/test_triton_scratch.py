"""Reused scratch buffers (moe_core_triton.scratch): handed out in order, reallocated on any
change, never aliased with an output, and not used while a CUDA graph is captured."""

import pytest
import torch

from moe_core import quant
from moe_core.config import MoEConfig
from moe_core.numerics import relative_error, tolerance
from moe_core.presets import random_inputs, random_layer
from moe_core.reference.kernel import ReferenceKernel
from moe_core_triton.kernel import REUSE_MAX_ROWS, TritonKernel
from moe_core_triton.scratch import Scratch

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


@pytest.mark.skipif(not GPU, reason="scratch buffers are used on CUDA devices only")
@pytest.mark.parametrize("name", ["unquantized", "fp8-block", "fp8-tensor-dyn"])
def test_consecutive_forwards_keep_their_outputs(name):
    """Outputs are never scratch: the first result survives later forwards on reused buffers."""
    sch = quant.scheme(name)
    cfg = MoEConfig(num_experts=8, top_k=2, hidden_size=256, intermediate_size=128, dtype=torch.bfloat16)
    raw = random_layer(cfg, sch, device="cuda", seed=4)
    kernel, oracle = TritonKernel(cfg, sch.weight_key, sch.activation_key), ReferenceKernel(cfg, sch.weight_key, sch.activation_key)
    weights, oracle_weights = kernel.prepare_weights(raw), oracle.prepare_weights(raw)
    tokens = REUSE_MAX_ROWS // cfg.top_k
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
