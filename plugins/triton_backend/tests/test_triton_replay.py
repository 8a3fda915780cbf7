"""Replayed eager forwards (moe_core_triton.replay): a record launches exactly what the forward it stands for would,
with each call's own pointers, and never launches once anything it took as fixed has changed.

The record itself runs anywhere with a stand-in launcher; the layer tests need compiled launches (a GPU): there each
replayed output is compared bit for bit with the same kernel's full forward, and with the reference backend.
"""

import gc
import weakref

import pytest
import torch
import triton
import triton.language as tl
from triton import knobs
from triton.experimental.gluon import language as gl
from triton.experimental.gluon.nvidia.hopper import TensorDescriptor as GluonTensorDescriptor
from triton.tools.tensor_descriptor import TensorDescriptor

from moe_core import quant
from moe_core.config import MoEConfig
from moe_core.numerics import relative_error, tolerance
from moe_core.presets import random_inputs, random_layer
from moe_core.reference.kernel import ReferenceKernel
from moe_core.routing import Routing
from moe_core.routing_guard import InvalidRoutingError
from moe_core_triton.compile_check import with_launch_fields
from moe_core_triton.kernel import TritonKernel
from moe_core_triton import launch
from moe_core_triton.launch import DirectLaunch, Launcher, recording
from moe_core_triton.replay import Replay, counted_replays
from moe_core_triton.scratch import POOL, fresh_allocations, new_empty

GPU = torch.cuda.is_available()
DEVICE = "cuda" if GPU else "cpu"


@triton.jit
def _copy_kernel(x_ptr, out_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    tl.store(out_ptr + offs, tl.load(x_ptr + offs, mask=offs < n), mask=offs < n)


def test_recording_sees_every_launch_in_order_and_nests():
    launcher = Launcher(_copy_kernel, num_warps=4, BLOCK=16)
    x = torch.arange(20, dtype=torch.float32, device=DEVICE)
    a, b = torch.empty_like(x), torch.empty_like(x)
    with recording() as outer:
        launcher((2,), x, a, 20)
        with recording() as inner:
            launcher((1,), a, b, 16)
        launcher((2,), a, b, 20)
    launcher((2,), x, b, 20)  # not recorded
    assert [(grid, args) for _, grid, args in outer] == [((2,), (x, a, 20)), ((2,), (a, b, 20))]
    assert [(launcher_, grid) for launcher_, grid, _ in inner] == [(launcher, (1,))]
    torch.testing.assert_close(b, x)


class _StandIn:
    """A launcher whose direct launch appends its arguments to ``calls`` (or that has none: ``direct=False``)."""

    def __init__(self, direct=True):
        self.calls, self._direct = [], direct

    def direct(self, grid, args):
        if not self._direct:
            return None
        return DirectLaunch(lambda *call: self.calls.append(call), (*grid, 1, 1)[:3], ("head",), ("tail",))


def _problem():
    cfg = MoEConfig(num_experts=4, top_k=2, hidden_size=32, intermediate_size=16, dtype=torch.float16)
    weights = random_layer(cfg, quant.scheme("unquantized"))
    x, routing = random_inputs(cfg, 3)
    buffer = POOL.empty_for(("test_triton_replay", id(weights)))((8, 8), torch.float16, torch.device("cpu"))
    return weights, (x, routing.topk_ids, routing.topk_weights, None), buffer


def _launches(launcher, weights, inputs, buffer, out, kept):
    x, ids, topk_weights, _ = inputs
    return [(launcher, (5,), (x, weights.w13, buffer, 7, 1.5, ids, ids, kept)),
            (launcher, (2, 3), (buffer, weights.w2, topk_weights, out, None, True))]


def _fresh(inputs):
    x, ids, topk_weights, _ = inputs
    return x.clone(), ids.clone(), topk_weights.clone(), None


def test_a_replay_launches_the_recorded_arguments_with_each_calls_pointers():
    weights, inputs, buffer = _problem()
    out, kept, launcher = torch.empty(3, 32, dtype=torch.float16), torch.zeros(3, dtype=torch.int64), _StandIn()
    replay = Replay.record(_launches(launcher, weights, inputs, buffer, out, kept), weights, inputs, out, kept=(kept,))
    assert replay is not None
    new = _fresh(inputs)
    got = replay(weights, new, stream=1234)
    assert got.shape == out.shape and got.dtype == out.dtype and got.data_ptr() != out.data_ptr()
    x, ids, topk_weights, _ = new
    assert launcher.calls == [
        (5, 1, 1, 1234, "head", x.data_ptr(), weights.w13.data_ptr(), buffer.data_ptr(), 7, 1.5, ids.data_ptr(), ids.data_ptr(),
         kept.data_ptr(), "tail"),
        (2, 3, 1, 1234, "head", buffer.data_ptr(), weights.w2.data_ptr(), topk_weights.data_ptr(), got.data_ptr(), None, True, "tail"),
    ]


def test_each_replay_allocates_the_buffers_the_forward_allocated():
    weights, inputs, buffer = _problem()
    out, kept = torch.empty(3, 32, dtype=torch.float16), torch.zeros(3, dtype=torch.int64)
    with fresh_allocations() as fresh:
        own = new_empty((4, 8), torch.int32, torch.device("cpu"))
    assert fresh == [own]
    launcher = _StandIn()
    launches = _launches(launcher, weights, inputs, buffer, out, kept) + [(launcher, (1,), (own, out, own))]
    replay = Replay.record(launches, weights, inputs, out, kept=(kept,), fresh=fresh)
    assert Replay.record(launches, weights, inputs, out, kept=(kept,)) is None  # not known as the forward's own
    got = replay(weights, _fresh(inputs), 0)
    first, second = launcher.calls[-1][5], launcher.calls[-1][7]
    assert first == second != own.data_ptr() and launcher.calls[-1][6] == got.data_ptr()
    assert len(launcher.calls) == 3


def test_a_forward_with_a_tensor_of_its_own_or_a_launch_through_triton_gets_no_record():
    weights, inputs, buffer = _problem()
    out, kept = torch.empty(3, 32, dtype=torch.float16), torch.zeros(3, dtype=torch.int64)
    record = lambda launches: Replay.record(launches, weights, inputs, out, kept=(kept,))  # noqa: E731
    assert record(_launches(_StandIn(), weights, inputs, buffer, out, kept)) is not None
    assert record(_launches(_StandIn(direct=False), weights, inputs, buffer, out, kept)) is None  # through triton
    assert record(_launches(_StandIn(), weights, inputs, buffer.clone(), out, kept)) is None  # a fresh buffer
    assert record(_launches(_StandIn(), weights, inputs, buffer, out, kept.clone())) is None  # not kept
    assert record(_launches(_StandIn(), weights, inputs, buffer, out.clone(), kept)) is None  # the output is not launched
    view = weights.w13.view(-1, 32)  # not a tensor of the weights
    x, ids, topk_weights, _ = inputs
    assert record([(_StandIn(), (1,), (x, TensorDescriptor(view, list(view.shape), [32, 1], [16, 16]), out))]) is None


def _gluon_descriptor(w2: torch.Tensor) -> GluonTensorDescriptor:
    """Gluon's descriptor of ``w2`` [E, H, I] as a 2-D [E * H, I] matrix (ws_decode.py's weight descriptors)."""
    layout = gl.NVMMASharedLayout(swizzle_byte_width=32, element_bitwidth=16, rank=2)
    return GluonTensorDescriptor(w2, [w2.shape[0] * w2.shape[1], w2.shape[2]], [w2.shape[2], 1], [16, 16], layout)


@pytest.mark.parametrize("gluon", [False, True])
def test_a_replay_makes_each_weight_descriptor_anew_for_the_weights_it_is_given(gluon):
    weights, inputs, buffer = _problem()
    out, launcher = torch.empty(3, 32, dtype=torch.float16), _StandIn()
    w2 = weights.w2  # [E, H, I] = [4, 32, 16]
    descriptor = _gluon_descriptor(w2) if gluon else TensorDescriptor(w2, list(w2.shape), list(w2.stride()), [1, 16, 16])
    replay = Replay.record([(launcher, (1,), (inputs[0], descriptor, out))], weights, inputs, out)
    replay(weights, _fresh(inputs), 0)
    made = launcher.calls[-1][6]
    assert made is not descriptor and made == descriptor  # equal fields (a Gluon descriptor's layout too), the same base tensor
    assert type(made) is type(descriptor)
    weights_ref = weakref.ref(weights)
    del weights, descriptor, w2
    gc.collect()
    assert weights_ref() is None


def test_a_replay_refuses_what_it_did_not_record():
    weights, inputs, buffer = _problem()
    out, kept = torch.empty(3, 32, dtype=torch.float16), torch.zeros(3, dtype=torch.int64)
    launcher = _StandIn()
    replay = Replay.record(_launches(launcher, weights, inputs, buffer, out, kept), weights, inputs, out, kept=(kept,))
    same = _fresh(inputs)
    other = random_layer(MoEConfig(num_experts=4, top_k=2, hidden_size=32, intermediate_size=16, dtype=torch.float16),
                         quant.scheme("unquantized"))
    assert replay(other, same, 0) is None  # other weights
    wide = torch.zeros(inputs[0].numel() + 1, dtype=torch.float16)[1:].view_as(inputs[0])  # 2 bytes off 16
    assert replay(weights, (wide, *same[1:]), 0) is None
    knobs.runtime.launch_enter_hook = lambda metadata: None  # a profiler
    try:
        assert replay(weights, same, 0) is None
    finally:
        knobs.runtime.launch_enter_hook = None
    assert launcher.calls == []
    with counted_replays() as outcomes:
        assert replay(weights, same, 0) is not None
        weights.w2.data = weights.w2.clone()  # new storage behind the same tensor object
        assert replay(weights, same, 0) is None
    assert len(launcher.calls) == 2 and outcomes == [True, False]
    assert replay(weights, same, 0) is None and outcomes == [True, False]  # counted inside the block only


def test_a_replay_is_dropped_when_the_scratch_pool_lets_a_buffer_go():
    weights, inputs, buffer = _problem()
    out, kept = torch.empty(3, 32, dtype=torch.float16), torch.zeros(3, dtype=torch.int64)
    replay = Replay.record(_launches(_StandIn(), weights, inputs, buffer, out, kept), weights, inputs, out, kept=(kept,))
    before = POOL.generation
    POOL.empty_for(("test_triton_replay", id(weights)))((8, 16), torch.float16, torch.device("cpu"))  # reallocates turn 0
    assert POOL.generation == before + 1
    assert replay(weights, _fresh(inputs), 0) is None


def test_a_replay_holds_kept_words_but_never_the_weights():
    weights, inputs, buffer = _problem()
    out, kept = torch.empty(3, 32, dtype=torch.float16), torch.zeros(3, dtype=torch.int64)
    replay = Replay.record(_launches(_StandIn(), weights, inputs, buffer, out, kept), weights, inputs, out, kept=(kept,))
    kept_ref, weights_ref, w13_ref = weakref.ref(kept), weakref.ref(weights), weakref.ref(weights.w13)
    del kept, weights
    gc.collect()
    assert kept_ref() is not None and weights_ref() is None and w13_ref() is None
    assert replay is not None


# ---------------------------------------------------------------- the layer, compiled (GPU)
needs_gpu = pytest.mark.skipif(not (GPU and launch.DIRECT_PATH),
                               reason="replays launch compiled kernels directly (the interpreter always takes triton's path) of a checked triton release")


@pytest.fixture
def replay_calls():
    """Whether each replay attempted launched."""
    with counted_replays() as outcomes:
        yield outcomes


def _full(kernel: TritonKernel) -> TritonKernel:
    kernel.replays = False  # every forward in full
    return kernel


@needs_gpu
@pytest.mark.parametrize("name", ["unquantized", "fp8-block", "fp8-channel", "int8", "w4a16", "w8a16-zp", "mxfp4"])
def test_replayed_forwards_equal_full_forwards_bit_for_bit(name, replay_calls):
    """PairTable forwards (up to 64 pairs), block-table forwards on scratch buffers, one whose table launch is cooperative
    (1200 pairs), and one that allocates its buffers (12000 pairs)."""
    sch = quant.scheme(name)
    cfg = MoEConfig(num_experts=16, top_k=4, hidden_size=256, intermediate_size=128, dtype=torch.bfloat16)
    raw = random_layer(cfg, sch, device=DEVICE, seed=1)
    kernel, full = TritonKernel(cfg, *sch.keys), _full(TritonKernel(cfg, *sch.keys))
    oracle = ReferenceKernel(cfg, *sch.keys)
    weights, oracle_weights = kernel.prepare_weights(raw), oracle.prepare_weights(raw)
    expert_map = torch.tensor([0, -1, 1, 2, -1, 3, 4, 5, 6, -1, 7, 8, 9, 10, 11, -1], device=DEVICE)
    for tokens in (1, 3, 16, 40, 300, 3000):
        for emap in (None, expert_map):
            for seed in range(4):  # the first call runs in full, the second records, the last two replay
                x, routing = random_inputs(cfg, tokens, device=DEVICE, seed=100 * tokens + seed)
                got = kernel.apply(x, weights, routing, expert_map=emap)
                assert torch.equal(got, full.apply(x, weights, routing, expert_map=emap)), (tokens, emap is not None, seed)
                want = oracle.apply(x, oracle_weights, routing, expert_map=emap)
                assert relative_error(got, want) <= tolerance(sch.activation_key, cfg.dtype)
    assert replay_calls == [True] * 24
    assert full._replays == {}  # replays = False: every forward ran in full, none recorded


@needs_gpu
@pytest.mark.parametrize("variant", ["split-k", "atomic"])
@pytest.mark.parametrize("name", ["unquantized", "mxfp4"])
def test_forwards_that_add_with_atomics_are_replayed(name, variant, replay_calls):
    """Split-K forwards, and GEMM2's "atomic" reduction, zero their float32 sums and cast the layer's output by launches
    (moe_core_triton.reduce), so they are replayed too; their atomics add in any order, so a replay is compared with the
    full forward within rounding."""
    sch = quant.scheme(name)
    cfg = MoEConfig(num_experts=16, top_k=4, hidden_size=256, intermediate_size=128, dtype=torch.bfloat16)
    kernel_cls = with_launch_fields(TritonKernel, SPLIT_K=3) if variant == "split-k" else TritonKernel
    kernel, full = kernel_cls(cfg, *sch.keys), _full(kernel_cls(cfg, *sch.keys))
    kernel.reduce = full.reduce = "atomic" if variant == "atomic" else kernel.reduce
    weights = kernel.prepare_weights(random_layer(cfg, sch, device=DEVICE, seed=2))
    for tokens in (1, 16, 300):
        for seed in range(4):  # the first call runs in full, the second records, the last two replay
            x, routing = random_inputs(cfg, tokens, device=DEVICE, seed=100 * tokens + seed)
            got, want = kernel.apply(x, weights, routing), full.apply(x, weights, routing)
            assert relative_error(got, want) <= 1e-2, (tokens, seed)
    assert replay_calls == [True] * 6


def _small_bf16_layer(tokens: int):
    """(config, kernel, its prepared weights, hidden states, routing) of a small unquantized bf16 layer."""
    cfg = MoEConfig(num_experts=8, top_k=2, hidden_size=128, intermediate_size=64, dtype=torch.bfloat16)
    kernel = TritonKernel(cfg, None, None)
    weights = kernel.prepare_weights(random_layer(cfg, quant.scheme("unquantized"), device=DEVICE))
    return (cfg, kernel, weights, *random_inputs(cfg, tokens, device=DEVICE))


@needs_gpu
def test_replayed_forwards_count_invalid_routing(replay_calls):
    _, kernel, weights, x, routing = _small_bf16_layer(4)
    for _ in range(2):  # seen, then recorded
        kernel.apply(x, weights, routing)
    kernel.routing_errors.check()
    ids = routing.topk_ids.clone()
    ids[1, 0], ids[3, 1] = 8, -1
    got = kernel.apply(x, weights, Routing(ids, routing.topk_weights))
    assert replay_calls == [True] and torch.isfinite(got).all()
    torch.cuda.synchronize()
    with pytest.raises(InvalidRoutingError) as caught:
        kernel.routing_errors.check()
    assert caught.value.count == 2


@needs_gpu
def test_a_signature_is_recorded_at_its_second_forward(replay_calls, monkeypatch):
    """A forward seen once (a prefill of a new length) pays for no record."""
    _, kernel, weights, x, routing = _small_bf16_layer(5)
    records = []
    original = Replay.record
    monkeypatch.setattr(Replay, "record", lambda *args, **kw: records.append(1) or original(*args, **kw))
    outs = [kernel.apply(x, weights, routing) for _ in range(3)]
    assert records == [1] and replay_calls == [True]
    assert all(torch.equal(out, outs[0]) for out in outs)


@needs_gpu
def test_new_weight_storage_and_dropped_scratch_are_recorded_again(replay_calls):
    cfg, kernel, weights, x, routing = _small_bf16_layer(2)
    full = _full(TritonKernel(cfg, None, None))
    first = kernel.apply(x, weights, routing)
    assert torch.equal(kernel.apply(x, weights, routing), first)  # recorded
    weights.w2.data = weights.w2 * 0.5  # new storage
    halved = kernel.apply(x, weights, routing)
    assert torch.equal(halved, full.apply(x, weights, routing)) and not torch.equal(halved, first)
    POOL.generation += 1  # as when the pool drops its sets
    assert torch.equal(kernel.apply(x, weights, routing), halved)
    assert torch.equal(kernel.apply(x, weights, routing), halved)
    assert replay_calls == [False, False, True]  # refused (storage), refused (pool), replayed the new record


@needs_gpu
def test_unaligned_inputs_run_in_full_and_graphs_capture_as_before(replay_calls):
    cfg, kernel, weights, x, routing = _small_bf16_layer(2)
    wide = torch.zeros(2, 129, dtype=cfg.dtype, device=DEVICE)
    unaligned = wide[:, 1:]
    unaligned.copy_(x)
    want = kernel.apply(x, weights, routing)
    assert torch.equal(kernel.apply(x, weights, routing), want)  # recorded
    for _ in range(3):  # a signature of its own, never recorded
        assert torch.equal(kernel.apply(unaligned, weights, routing), want)
    assert torch.equal(kernel.apply(x, weights, routing), want)  # replayed
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):  # captured on a side stream, the kernel holding a replay: the capture runs in full
        captured = kernel.apply(x, weights, routing)
    graph.replay()
    torch.cuda.synchronize()
    assert torch.equal(captured, want)
    assert replay_calls == [True]



@needs_gpu
def test_replayed_forwards_with_tma_weight_tiles_equal_full_forwards(replay_calls):
    """Forwards whose GEMMs load weight tiles through tensor descriptors (TMA_B, as tuned prefill configs do)."""
    tma = with_launch_fields(TritonKernel, TMA_B=True)
    cfg = MoEConfig(num_experts=8, top_k=2, hidden_size=256, intermediate_size=128, dtype=torch.bfloat16)
    sch = quant.scheme("fp8-block")
    kernel, full = tma(cfg, *sch.keys), _full(tma(cfg, *sch.keys))
    raw = random_layer(cfg, sch, device=DEVICE)
    weights = kernel.prepare_weights(raw)
    assert kernel._gemm_launches(torch.device(DEVICE), 600, 300, True, False)[0].config.TMA_B
    for seed in range(4):
        x, routing = random_inputs(cfg, 300, device=DEVICE, seed=seed)
        assert torch.equal(kernel.apply(x, weights, routing), full.apply(x, weights, routing))
    assert replay_calls == [True, True]


@needs_gpu
def test_forwards_with_torch_work_of_their_own_run_in_full(replay_calls):
    """Per-tensor dynamic fp8: the amax and scale are torch ops, the intermediate is zeroed; nothing may be replayed."""
    sch = quant.scheme("fp8-tensor-dyn")
    cfg = MoEConfig(num_experts=8, top_k=2, hidden_size=128, intermediate_size=64, dtype=torch.bfloat16)
    kernel, oracle = TritonKernel(cfg, *sch.keys), ReferenceKernel(cfg, *sch.keys)
    raw = random_layer(cfg, sch, device=DEVICE)
    weights, oracle_weights = kernel.prepare_weights(raw), oracle.prepare_weights(raw)
    for seed in range(3):
        x, routing = random_inputs(cfg, 4, device=DEVICE, seed=seed)
        got = kernel.apply(x, weights, routing)
        assert relative_error(got, oracle.apply(x, oracle_weights, routing)) <= tolerance(sch.activation_key, cfg.dtype)
    assert replay_calls == [] and list(kernel._replays.values()) == [False]
