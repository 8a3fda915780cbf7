"""The one-launch layer (fused.py): GEMM2 fused into GEMM1 along the intermediate, the float32 sums cast by the last
program. Tuned data files pick it for decode of unquantized 16-bit layers; most tests here force it
(``TritonKernel.fused_override``) and check that the forward made that one launch and nothing else."""

import dataclasses

import pytest
import torch

from moe_core import quant
from moe_core.config import Activation, MoEConfig, ParallelConfig
from moe_core.numerics import relative_error, tolerance
from moe_core.presets import random_inputs, random_layer
from moe_core.reference.kernel import ReferenceKernel
from moe_core.routing import Routing
from moe_core.routing_guard import RoutingErrorCounter, drop_invalid_routing
from moe_core.testing import conformance
from moe_core.testing.robustness import reported_count
from moe_core_triton import configs
from moe_core_triton.blocks import FUSED_SUMS, stream_words
from moe_core_triton.compile_check import with_fused
from moe_core_triton.configs import FusedConfig
from moe_core_triton.fused import fused_layer_kernel
from moe_core_triton.kernel import TritonKernel
from moe_core_triton.launch import recording

GPU = torch.cuda.is_available()
DEVICE = "cuda" if GPU else "cpu"
DTYPE = torch.bfloat16 if GPU else torch.float16  # bfloat16 is garbage in the interpreter
#: COLS below BLOCK_N (masked tile rows), small tiles so that the test layers' sizes are not multiples of them.
ODD = FusedConfig(BLOCK_M=16, BLOCK_N=32, COLS=24, BLOCK_K=32, BLOCK_H=32, num_warps=4, num_stages=2)
#: COLS = BLOCK_N and tiles dividing the layer (the unmasked K and H loops, EVEN_K and EVEN_H).
EVEN = FusedConfig(BLOCK_M=16, BLOCK_N=32, COLS=32, BLOCK_K=64, BLOCK_H=64, num_warps=4, num_stages=2)


def fused(fc: FusedConfig) -> type[TritonKernel]:
    return with_fused(TritonKernel, fc)


def forward_and_launches(kernel: TritonKernel, x, weights, routing, expert_map=None):
    """The forward's output and the kernels of its launches."""
    with recording() as launches:
        out = kernel.forward(x, weights, routing, expert_map=expert_map, apply_router_weight_on_input=False)
    return out, [launcher.fn for launcher, _, _ in launches]


CASES = {
    "odd sizes, several pairs per expert": (MoEConfig(8, 2, 200, 72, dtype=DTYPE), 5, ODD, None),
    "even tiles": (MoEConfig(8, 2, 128, 64, dtype=DTYPE), 3, EVEN, None),
    "gelu and the swiglu clamp": (MoEConfig(4, 2, 200, 72, dtype=DTYPE, activation=Activation.GELU, swiglu_limit=0.3), 3, ODD, None),
    "top-1, one token": (MoEConfig(6, 1, 96, 40, dtype=DTYPE), 1, ODD, None),
    "expert map": (MoEConfig(8, 2, 200, 72, dtype=DTYPE, parallel=ParallelConfig(ep_size=2)), 5, ODD,
                   [-1, -1, -1, -1, 0, 1, 2, 3]),
}


@pytest.mark.parametrize("case", list(CASES))
def test_one_launch_matches_the_reference(case):
    cfg, tokens, fc, expert_map = CASES[case]
    sch = quant.scheme("unquantized")
    raw = random_layer(cfg, sch, device=DEVICE, seed=1)
    x, routing = random_inputs(cfg, tokens, device=DEVICE, seed=2)
    emap = torch.tensor(expert_map, dtype=torch.int32, device=DEVICE) if expert_map is not None else None
    kernel = fused(fc)(cfg, None, None)
    got, kernels = forward_and_launches(kernel, x, kernel.prepare_weights(raw), routing, emap)
    oracle = ReferenceKernel(cfg, None, None)
    want = oracle.apply(x, oracle.prepare_weights(raw), routing, expert_map=emap)
    assert kernels == [fused_layer_kernel]
    assert got.dtype == cfg.dtype and got.shape == want.shape
    assert relative_error(got, want) <= tolerance(None, cfg.dtype)


def test_the_sums_and_the_counter_are_left_at_zero_for_the_next_forward():
    cfg, tokens, fc, _ = CASES["odd sizes, several pairs per expert"]
    raw = random_layer(cfg, quant.scheme("unquantized"), device=DEVICE, seed=1)
    kernel, oracle = fused(fc)(cfg, None, None), ReferenceKernel(cfg, None, None)
    weights, reference_weights = kernel.prepare_weights(raw), oracle.prepare_weights(raw)
    for seed in (3, 4):  # the second forward starts from what the first left
        x, routing = random_inputs(cfg, tokens, device=DEVICE, seed=seed)
        got, _ = forward_and_launches(kernel, x, weights, routing)
        assert relative_error(got, oracle.apply(x, reference_weights, routing)) <= tolerance(None, cfg.dtype)
        state = stream_words(x.device, FUSED_SUMS, tokens * cfg.hidden_size + 1)
        assert not state.any()


@pytest.mark.parametrize("with_map", [False, True])
def test_invalid_and_remote_pairs_are_dropped_and_counted(with_map):
    cfg = MoEConfig(8, 2, 200, 72, dtype=DTYPE, parallel=ParallelConfig(ep_size=2 if with_map else 1))
    raw = random_layer(cfg, quant.scheme("unquantized"), device=DEVICE, seed=5)
    x, routing = random_inputs(cfg, 4, device=DEVICE, seed=6)
    ids = routing.topk_ids.clone()
    ids[0, 0], ids[2, 1], ids[3, 0] = cfg.num_experts, -5, 2**31 - 1
    expert_map = torch.tensor([0, 1, 2, 3, -1, -1, -1, 9], device=DEVICE) if with_map else None  # entry 7 out of range
    bad = Routing(ids, routing.topk_weights)
    kernel = fused(ODD)(cfg, None, None)
    got, kernels = forward_and_launches(kernel, x, kernel.prepare_weights(raw), bad, expert_map)
    counter = RoutingErrorCounter("", "")
    safe, safe_map = drop_invalid_routing(cfg, x, bad, expert_map, counter)
    oracle = ReferenceKernel(cfg, None, None)
    want = oracle.apply(x, oracle.prepare_weights(raw), safe, expert_map=safe_map)
    assert kernels == [fused_layer_kernel]
    assert torch.isfinite(got).all()
    assert relative_error(got, want) <= tolerance(None, cfg.dtype)
    assert reported_count(kernel.routing_errors) == reported_count(counter) >= 3


def test_the_data_file_decides_per_token_count(monkeypatch):
    """An entry serves token counts up to its own; a null entry (the two GEMMs measured faster) and counts past the
    last entry take the two GEMMs; the key names the layer's shape with gemm=fused."""
    cfg = MoEConfig(8, 2, 128, 64, dtype=DTYPE)
    key = configs.shape_key(8, 64, 128, "unquantized", "fused")
    monkeypatch.setattr(configs, "_load", lambda device: {key: {"1": EVEN.to_dict(), "2": ODD.to_dict(), "8": None}})
    kernel = TritonKernel(cfg, None, None)
    device = torch.device(DEVICE)
    plans = {tokens: kernel._fused_plan(device, tokens * 2, tokens, True, False) for tokens in (1, 2, 3, 8, 9)}
    assert plans[1][0] == EVEN and plans[2][0] == ODD
    assert plans[3] is None and plans[8] is None and plans[9] is None
    assert kernel._fused_plan(device, 2, 1, False, False) is None  # the router weight applied to the input


def test_quantized_schemes_large_forwards_and_the_router_weight_on_the_input_take_the_two_gemms():
    cfg = MoEConfig(4, 1, 128, 64, dtype=DTYPE)
    x, routing = random_inputs(cfg, 2, device=DEVICE, seed=7)
    sch = quant.scheme("w4a16")
    raw = random_layer(cfg, sch, device=DEVICE, seed=7)
    kernel = fused(EVEN)(cfg, sch.weight_key, sch.activation_key)
    _, kernels = forward_and_launches(kernel, x, kernel.prepare_weights(raw), routing)
    assert fused_layer_kernel not in kernels
    plain = fused(EVEN)(cfg, None, None)
    assert plain._fused_plan(torch.device(DEVICE), plain.pair_table_max_pairs + 1, 100, True, False) is None
    weights = plain.prepare_weights(random_layer(cfg, quant.scheme("unquantized"), device=DEVICE, seed=7))
    with recording() as launches:
        plain.forward(x, weights, routing, expert_map=None, apply_router_weight_on_input=True)
    assert fused_layer_kernel not in [launcher.fn for launcher, _, _ in launches]


@pytest.mark.parametrize("field, value, message", [("COLS", 0, "COLS must be an int in"), ("COLS", 64, "COLS must be an int in"),
                                                   ("BLOCK_H", 24, "BLOCK_H must be a power of two"), ("num_stages", 0, "num_stages must be")])
def test_a_broken_fused_entry_is_refused_with_the_field_it_breaks(field, value, message):
    with pytest.raises(ValueError, match=f"FusedConfig.{message}"):
        FusedConfig(**(EVEN.to_dict() | {field: value}))


def test_a_deterministic_kernel_never_takes_the_one_launch_layer():
    """Its float32 atomics add in a varying order; a deterministic kernel runs the two GEMMs, whatever the override or
    the data file say."""
    cfg, tokens, fc, _ = CASES["odd sizes, several pairs per expert"]
    raw = random_layer(cfg, quant.scheme("unquantized"), device=DEVICE, seed=1)
    x, routing = random_inputs(cfg, tokens, device=DEVICE, seed=2)
    kernel = type("DeterministicFused", (fused(fc),), {"deterministic": True})(cfg, None, None)
    got, kernels = forward_and_launches(kernel, x, kernel.prepare_weights(raw), routing)
    oracle = ReferenceKernel(cfg, None, None)
    assert fused_layer_kernel not in kernels and kernels
    assert relative_error(got, oracle.apply(x, oracle.prepare_weights(raw), routing)) <= tolerance(None, cfg.dtype)


@pytest.mark.skipif(not GPU, reason="the order of float atomics varies on a GPU only")
def test_a_deterministic_qwen3_decode_gives_the_same_bits_every_forward():
    """Qwen3-30B-A3B's shape at 1 and 2 tokens, where the H100 data file picks the one-launch layer."""
    cfg = MoEConfig(128, 8, 2048, 768, dtype=torch.bfloat16)
    kernel = type("Deterministic", (TritonKernel,), {"deterministic": True})(cfg, None, None)
    weights = kernel.prepare_weights(random_layer(cfg, quant.scheme("unquantized"), device=DEVICE, seed=9))
    for tokens in (1, 2):
        x, routing = random_inputs(cfg, tokens, device=DEVICE, seed=tokens)
        first = kernel.apply(x, weights, routing).clone()
        assert all(torch.equal(kernel.apply(x, weights, routing), first) for _ in range(50))


@pytest.mark.skipif(not GPU, reason="CUDA graphs need a GPU")
def test_cuda_graph_replay():
    cfg, _, fc, _ = CASES["odd sizes, several pairs per expert"]
    conformance.check_graph_replay(fused(fc), cfg, "unquantized", tokens=3)


@pytest.mark.skipif(not GPU, reason="the race the exchanges prevent shows on a GPU")
def test_many_programs_give_the_same_sums_every_forward():
    """Mixtral-sized rows (4096 x 14336 is too large for a test; 4096 x 3584 keeps 448 programs of 8 columns): every
    forward's output matches the first within float32 rounding, none misses a program's atomics."""
    cfg = MoEConfig(8, 2, 4096, 3584, dtype=DTYPE)
    fc = FusedConfig(BLOCK_M=16, BLOCK_N=16, COLS=16, BLOCK_K=128, BLOCK_H=128, num_warps=4, num_stages=3)
    raw = random_layer(cfg, quant.scheme("unquantized"), device=DEVICE, seed=8)
    x, routing = random_inputs(cfg, 1, device=DEVICE, seed=8)
    kernel = fused(fc)(cfg, None, None)
    weights = kernel.prepare_weights(raw)
    first = kernel.apply(x, weights, routing).float()
    for _ in range(50):
        assert relative_error(kernel.apply(x, weights, routing).float(), first) < 1e-2
    oracle = ReferenceKernel(cfg, None, None)
    assert relative_error(first, oracle.apply(x, oracle.prepare_weights(raw), routing)) <= tolerance(None, cfg.dtype)
