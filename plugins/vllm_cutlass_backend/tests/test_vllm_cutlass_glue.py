"""The binding's contract with vLLM's _C ops library and its glue, on the CPU, without vLLM.

The schema checks compare the recorded contract with the schema texts the vLLM 0.26.0 wheel's
``vllm/_C_stable_libtorch.abi3.so`` registers, copied here from ``strings`` on that file (with its
spacing). The glue tests run against a FAKE ops namespace, for PLUMBING ONLY: the fake's
``get_cutlass_moe_mm_data`` and ``cutlass_moe_mm`` are dense torch written here from the layouts
vLLM documents (moe_data.cu, get_group_starts.cuh), not CUTLASS's arithmetic. They check which
argument reaches which schema position with which dtype, shape and stride, and that the glue's
quantization, activation, router weights, expert map and top-k sum are right against a layer written
out token by token below. The CUTLASS kernel's numerics need the GPU
(python -m moe_core_vllm_cutlass.gpu_check).
"""

import dataclasses
import types

import pytest
import torch
import torch.nn.functional as F
from hypothesis import assume, given, settings
from hypothesis import strategies as st
from torch.utils._python_dispatch import TorchDispatchMode

from moe_core.config import Activation, MoEConfig, ParallelConfig
from moe_core.env import VLLM_CUTLASS_OPS_LIBRARY
from moe_core.presets import random_inputs, random_layer
from moe_core.quant import scheme
from moe_core.routing import BatchedRouting, Routing
from moe_core.routing_guard import RoutingErrorCounter
from moe_core.testing.conformance import check_against_reference
from moe_core.testing.ops_schemas import registered_ops
from moe_core_vllm_cutlass import contract, glue, kernel, library
from moe_core_vllm_cutlass.library import LIBRARY
from moe_core_triton.pair_guard import guard_pairs
from moe_core_triton.launch import Launcher

# Copied from `strings vllm/_C_stable_libtorch.abi3.so` of the vllm-0.26.0 manylinux x86_64 wheel.
WHEEL_SCHEMAS = {
    "cutlass_moe_mm": "cutlass_moe_mm(Tensor! out_tensors, Tensor a_tensors, Tensor b_tensors,                Tensor a_scales, "
                      "Tensor b_scales, Tensor expert_offsets,                Tensor problem_sizes, Tensor a_strides,                "
                      "Tensor b_strides, Tensor c_strides, bool per_act_token,                bool per_out_ch) -> ()",
    "get_cutlass_moe_mm_data": "get_cutlass_moe_mm_data(Tensor topk_ids, Tensor! expert_offsets,                         "
                               "Tensor! problem_sizes1, Tensor! problem_sizes2,                         Tensor! input_permutation,"
                               "                         Tensor! output_permutation, int num_experts,                         "
                               "int n, int k, Tensor? blockscale_offsets,                         bool is_gated) -> ()",
    "get_cutlass_batched_moe_mm_data": "get_cutlass_batched_moe_mm_data(Tensor! expert_offsets,                              "
                                       "Tensor! problem_sizes1,                              Tensor! problem_sizes2,                              "
                                       "Tensor expert_num_tokens,                              int num_local_experts, int padded_m,"
                                       "                              int n, int k) -> ()",
    "cutlass_group_gemm_supported": "cutlass_group_gemm_supported(int cuda_device_capability) -> bool",
}
FP8_MAX = 448.0


def namespace(schemas):
    """A stand-in for torch.ops._C registering the given schema texts."""
    return registered_ops(LIBRARY.namespace, schemas)


def test_the_recorded_contract_is_what_the_wheel_registers():
    assert [op.name for op in contract.OPS] == list(WHEEL_SCHEMAS)
    assert LIBRARY.schema_mismatches(namespace(WHEEL_SCHEMAS)) == []
    older = dict(WHEEL_SCHEMAS, get_cutlass_moe_mm_data=WHEEL_SCHEMAS["get_cutlass_moe_mm_data"].replace(",                         bool is_gated", ""))
    (problem,) = LIBRARY.schema_mismatches(namespace(older))
    assert problem.startswith("_C::get_cutlass_moe_mm_data is registered as")
    del older["cutlass_moe_mm"]
    assert "_C::cutlass_moe_mm is not registered" in LIBRARY.schema_mismatches(namespace(older))


def test_the_library_is_found_from_its_own_variable(tmp_path):
    given = tmp_path / contract.LIBRARY_FILE
    given.write_bytes(b"")
    assert LIBRARY.locate({VLLM_CUTLASS_OPS_LIBRARY: str(given)}).path == given
    assert LIBRARY.locate({"MOE_CORE_MARLIN_OPS_LIBRARY": str(given)}) == LIBRARY.locate({})  # another plugin's variable is not read
    reason = LIBRARY.missing_reason({VLLM_CUTLASS_OPS_LIBRARY: str(tmp_path / "absent.so")})
    assert f"{VLLM_CUTLASS_OPS_LIBRARY}={tmp_path / 'absent.so'} is not a file" in reason
    assert "unzip -j vllm-0.26.0-*.whl vllm/_C_stable_libtorch.abi3.so" in reason


def test_without_the_library_the_kernel_says_how_to_get_it(monkeypatch, tmp_path):
    monkeypatch.setenv(VLLM_CUTLASS_OPS_LIBRARY, str(tmp_path / "absent.so"))
    with pytest.raises(library.VllmCutlassUnavailableError, match=r"vllm_cutlass backend needs .*pip download --no-deps vllm==0\.26\.0"):
        LIBRARY.ops_namespace()


class FakeOps:
    """Dense torch stand-ins for the two ops, bound by the recorded schemas' argument names (plumbing only).

    Within an expert the real op orders rows by atomics; this fake takes them in reverse, so the glue
    must not rely on any order.
    """

    def __init__(self):
        self.calls = []

    def _bind(self, op, args):
        names = op.argument_names()
        assert len(args) == len(names), f"{op.name}: {len(args)} arguments, the schema has {len(names)}"
        return dict(zip(names, args))

    def get_cutlass_moe_mm_data(self, *args):
        a = self._bind(contract.GET_CUTLASS_MOE_MM_DATA, args)
        ids = a["topk_ids"]
        assert ids.dtype == torch.int32 and ids.dim() == 2 and a["blockscale_offsets"] is None and a["is_gated"]
        for name in ("expert_offsets", "problem_sizes1", "problem_sizes2", "input_permutation", "output_permutation"):
            assert a[name].dtype == torch.int32, name
        experts, n, k = a["num_experts"], a["n"], a["k"]
        flat, top_k = ids.flatten().tolist(), ids.shape[1]
        swap = ids.numel() <= contract.SWAP_AB_THRESHOLD
        start = 0
        a["expert_offsets"][0] = 0
        for e in range(experts):
            pairs = [i for i, v in enumerate(flat) if v == e][::-1]
            m = len(pairs)
            a["problem_sizes1"][e] = torch.tensor([2 * n, m, k] if swap else [m, 2 * n, k])
            a["problem_sizes2"][e] = torch.tensor([k, m, n] if swap else [m, k, n])
            for j, i in enumerate(pairs):
                a["input_permutation"][start + j] = i // top_k
                a["output_permutation"][i] = start + j
            start += m
            a["expert_offsets"][e + 1] = start
        for i, v in enumerate(flat):
            if v == -1:
                a["output_permutation"][i] = start
        self.calls.append(("data", a))

    def get_cutlass_batched_moe_mm_data(self, *args):
        a = self._bind(contract.GET_CUTLASS_BATCHED_MOE_MM_DATA, args)
        counts, experts, padded, n, k = a["expert_num_tokens"], a["num_local_experts"], a["padded_m"], a["n"], a["k"]
        assert counts.dtype == torch.int32 and counts.shape == (experts,)
        for name in ("expert_offsets", "problem_sizes1", "problem_sizes2"):
            assert a[name].dtype == torch.int32, name
        swap = experts * padded <= contract.SWAP_AB_THRESHOLD
        for e in range(experts):
            m = int(counts[e])
            a["expert_offsets"][e] = e * padded
            a["problem_sizes1"][e] = torch.tensor([2 * n, m, k] if swap else [m, 2 * n, k])
            a["problem_sizes2"][e] = torch.tensor([k, m, n] if swap else [m, k, n])
        self.calls.append(("batched data", a))

    def cutlass_moe_mm(self, *args):
        a = self._bind(contract.CUTLASS_MOE_MM, args)
        out, x, w, xs, ws = a["out_tensors"], a["a_tensors"], a["b_tensors"], a["a_scales"], a["b_scales"]
        experts, n, k = w.shape
        assert x.dtype == w.dtype == torch.float8_e4m3fn and w.is_contiguous() and x.is_contiguous() and x.shape[1] == k
        assert out.dtype in (torch.float16, torch.bfloat16) and out.shape == (x.shape[0], n)
        assert xs.dtype == ws.dtype == torch.float32 and xs.is_contiguous() and ws.is_contiguous()
        # One scale per row of A, or one in all; one per output channel of each expert, or one per expert.
        assert xs.numel() == (x.shape[0] if a["per_act_token"] else 1) and ws.numel() == (experts * n if a["per_out_ch"] else experts)
        assert a["expert_offsets"].dtype == torch.int64 and a["expert_offsets"].shape == (experts,)
        for name, value in (("a_strides", k), ("b_strides", k), ("c_strides", n)):
            assert a[name].dtype == torch.int64 and a[name].tolist() == [value] * experts, name
        swap = x.shape[0] <= contract.SWAP_AB_THRESHOLD
        for e in range(experts):
            size = a["problem_sizes"][e].tolist()
            m, size_n = (size[1], size[0]) if swap else (size[0], size[1])
            assert size_n == n and size[2] == k
            o = int(a["expert_offsets"][e])
            rows = x[o:o + m].float() @ w[e].float().T
            row_scale = xs[o:o + m].reshape(-1, 1) if a["per_act_token"] else xs.reshape(1, 1)
            col_scale = ws[e].reshape(1, n) if a["per_out_ch"] else ws[e].reshape(1, 1)
            out[o:o + m] = (rows * row_scale * col_scale).to(out.dtype)
        self.calls.append(("gemm", a))


def fp8(x, per_row, scale=None):
    """x quantized to float8_e4m3fn and back, with a per-tensor or per-row scale (amax / 448 unless given)."""
    if scale is None:
        amax = x.abs().amax(dim=-1, keepdim=True) if per_row else x.abs().amax().reshape(1, 1)
        scale = amax.clamp(min=1e-12) / FP8_MAX
    return (x / scale).clamp(-FP8_MAX, FP8_MAX).to(torch.float8_e4m3fn).float() * scale


def expected(x, ids, weights, w13, w2, s13, s2, activation, limit, per_row, emap=None, a13=None, a2=None, on_input=False):
    """The layer written out token by token: quantize the input, GEMM1, act(gate) * up, requantize over the valid pairs, GEMM2.

    Both GEMMs write float16 (the GEMM's output dtype in these tests), so their results are rounded to it.
    """
    tokens, top_k = ids.shape
    xs = x.float() * weights if on_input else x.float()
    xq = fp8(xs, per_row, a13)
    pairs, inter = [], []
    for t in range(tokens):
        for j in range(top_k):
            local = int(ids[t, j]) if emap is None else int(emap[ids[t, j]])
            if local < 0:
                continue
            h = (xq[t] @ (w13[local].float() * s13[local]).T).half().float()
            gate, up = h.chunk(2)
            if limit is not None:
                gate, up = gate.clamp(max=limit), up.clamp(-limit, limit)
            pairs.append((t, j, local))
            inter.append((F.silu(gate) if activation is Activation.SILU else F.gelu(gate)) * up)
    out = torch.zeros(tokens, x.shape[1])
    if not pairs:
        return out
    inter = fp8(torch.stack(inter), per_row, a2)
    for (t, j, local), row in zip(pairs, inter):
        y = (row @ (w2[local].float() * s2[local]).T).half().float()
        out[t] += y if on_input else weights[t, j] * y
    return out


def layer(experts, hidden, inter, per_channel, seed=0):
    gen = torch.Generator().manual_seed(seed)
    w13 = (torch.randn(experts, 2 * inter, hidden, generator=gen) * 4).to(torch.float8_e4m3fn)
    w2 = (torch.randn(experts, hidden, inter, generator=gen) * 4).to(torch.float8_e4m3fn)
    rows13, rows2 = (2 * inter, hidden) if per_channel else (1, 1)
    s13 = torch.rand(experts, rows13, 1, generator=gen) / 50 + 1e-3
    s2 = torch.rand(experts, rows2, 1, generator=gen) / 50 + 1e-3
    return types.SimpleNamespace(w13=w13, w2=w2, w13_scale=s13, w2_scale=s2, a13_scale=None, a2_scale=None)


def problem(scheme_name, activation=Activation.SILU, limit=None, dtype=torch.float16):
    return glue.CutlassProblem(scheme(scheme_name).activation_key, activation, limit, dtype)


@pytest.fixture
def poisoned_empty(monkeypatch):
    """torch.empty fills floating-point tensors with NaN: a row the glue reads but no op wrote shows up."""
    real = torch.empty

    def empty(*args, **kwargs):
        t = real(*args, **kwargs)
        return t.fill_(float("nan")) if t.is_floating_point() else t
    monkeypatch.setattr(torch, "empty", empty)


def new_counter():
    return RoutingErrorCounter("topk_ids", "[0, num_experts)")


def run_glue(ops, x, weights, prob, ids, router, emap=None, on_input=False, counter=None):
    """The standard forward as the kernel makes it: route (ids global: through ``emap``), then the glue."""
    lay = glue.cutlass_layer(weights, prob)
    experts = lay.local_experts if emap is None else emap.numel()
    counter = counter or new_counter()
    local, w = guard_pairs(ids, router, emap, num_experts=experts, num_local=lay.local_experts, errors=counter.buffer(x.device), dropped_id=-1)
    return glue.fused_moe(ops, x, lay, local, w, apply_router_weight_on_input=on_input)


CASES = [  # (scheme, tokens, activation, SwiGLU limit): 5 x 2 = 10 pairs swaps A and B, 40 x 2 = 80 does not
    ("fp8-channel", 5, Activation.SILU, None), ("fp8-channel", 40, Activation.GELU, None),
    ("fp8-tensor-dyn", 5, Activation.SILU, 0.5), ("fp8-tensor-dyn", 40, Activation.SILU, None),
]


@pytest.mark.parametrize("scheme_name, tokens, activation, limit", CASES)
def test_glue_computes_the_layer_through_the_fake_ops(poisoned_empty, scheme_name, tokens, activation, limit):
    per_channel = scheme_name == "fp8-channel"
    weights = layer(4, 32, 16, per_channel)
    gen = torch.Generator().manual_seed(1)
    x = torch.randn(tokens, 32, generator=gen)
    ids = torch.randint(0, 4, (tokens, 2), generator=gen)
    router = torch.rand(tokens, 2, generator=gen)
    ops = FakeOps()
    got = run_glue(ops, x, weights, problem(scheme_name, activation, limit), ids, router)
    want = expected(x, ids, router, weights.w13, weights.w2, weights.w13_scale, weights.w2_scale, activation, limit, per_channel)
    torch.testing.assert_close(got, want, rtol=2e-3, atol=2e-3)
    (data,) = [a for kind, a in ops.calls if kind == "data"]
    assert (data["num_experts"], data["n"], data["k"]) == (4, 16, 32)
    first, second = [a for kind, a in ops.calls if kind == "gemm"]
    assert first["b_tensors"] is weights.w13 and second["b_tensors"] is weights.w2
    assert first["problem_sizes"] is data["problem_sizes1"] and second["problem_sizes"] is data["problem_sizes2"]
    assert first["per_act_token"] == second["per_act_token"] == per_channel
    assert first["per_out_ch"] == second["per_out_ch"] == per_channel


def test_static_scales_and_router_weights_on_the_input_with_an_expert_map(poisoned_empty):
    weights = layer(2, 32, 16, per_channel=False, seed=3)
    weights.a13_scale, weights.a2_scale = torch.tensor([[0.01]]), torch.tensor([[0.002]])
    emap = torch.tensor([-1, 0, -1, 1], dtype=torch.int32)  # 4 global experts, 2 here
    gen = torch.Generator().manual_seed(2)
    x = torch.randn(7, 32, generator=gen)
    ids = torch.randint(0, 4, (7, 1), generator=gen)
    router = torch.rand(7, 1, generator=gen)
    ops = FakeOps()
    got = run_glue(ops, x, weights, problem("fp8-tensor"), ids, router, emap=emap, on_input=True)
    want = expected(x, ids, router, weights.w13, weights.w2, weights.w13_scale, weights.w2_scale, Activation.SILU, None, False,
                    emap=emap, a13=weights.a13_scale, a2=weights.a2_scale, on_input=True)
    torch.testing.assert_close(got, want, rtol=2e-3, atol=2e-3)
    (data,) = [a for kind, a in ops.calls if kind == "data"]
    assert data["num_experts"] == 2 and data["topk_ids"].tolist() == emap[ids.long()].tolist()
    first, second = [a for kind, a in ops.calls if kind == "gemm"]
    assert first["a_scales"].tolist() == [[pytest.approx(0.01)]] and second["a_scales"].tolist() == [[pytest.approx(0.002)]]


def test_glue_with_no_tokens_calls_no_op():
    ops = FakeOps()
    got = run_glue(ops, torch.zeros(0, 32), layer(4, 32, 16, True), problem("fp8-channel"), torch.zeros(0, 2, dtype=torch.long),
                   torch.zeros(0, 2))
    assert got.shape == (0, 32) and ops.calls == []


@pytest.mark.parametrize("scheme_name", contract.SCHEMES)
def test_the_kernel_through_the_fake_ops_agrees_with_the_reference_backend(monkeypatch, scheme_name):
    monkeypatch.setattr(library, "LIBRARY", types.SimpleNamespace(ops_namespace=FakeOps))
    cfg = MoEConfig(num_experts=4, top_k=2, hidden_size=64, intermediate_size=32, dtype=torch.bfloat16)
    x, routing = random_inputs(cfg, 9, device="cpu")
    check_against_reference(kernel.VllmCutlassKernel, cfg, scheme_name, x, routing)
    hot = Routing(torch.full_like(routing.topk_ids, 3).index_fill_(1, torch.tensor([1]), 1), routing.topk_weights)
    check_against_reference(kernel.VllmCutlassKernel, dataclasses.replace(cfg, swiglu_limit=0.5), scheme_name, x, hot)


@settings(max_examples=25, deadline=None, derandomize=True)
@given(data=st.data(), scheme_name=st.sampled_from(contract.SCHEMES), tokens=st.integers(1, 40), top_k=st.integers(1, 3),
       experts=st.integers(1, 4), remote=st.integers(0, 3))
def test_any_routing_and_expert_map_gives_the_written_out_layer(data, scheme_name, tokens, top_k, experts, remote):
    """Pair counts on both sides of the A/B swap (64 pairs), empty experts, and pairs on other ranks."""
    per_channel = scheme_name == "fp8-channel"
    weights = layer(experts, 32, 16, per_channel, seed=tokens)
    if scheme_name == "fp8-tensor":
        weights.a13_scale, weights.a2_scale = torch.tensor([[0.01]]), torch.tensor([[0.004]])
    total = experts + remote
    assume(top_k <= total)
    ids = torch.tensor(data.draw(st.lists(st.lists(st.integers(0, total - 1), min_size=top_k, max_size=top_k, unique=True),
                                          min_size=tokens, max_size=tokens)))
    emap = None
    if remote:  # the local experts at drawn global positions, the rest elsewhere
        order = data.draw(st.permutations(list(range(total))))
        emap = torch.full((total,), -1, dtype=torch.int32)
        for local, glob in enumerate(order[:experts]):
            emap[glob] = local
    router = torch.rand(tokens, top_k, generator=torch.Generator().manual_seed(tokens))
    x = torch.randn(tokens, 32, generator=torch.Generator().manual_seed(top_k))
    got = run_glue(FakeOps(), x, weights, problem(scheme_name), ids, router, emap=emap)
    want = expected(x, ids, router, weights.w13, weights.w2, weights.w13_scale, weights.w2_scale, Activation.SILU, None, per_channel,
                    emap=emap, a13=weights.a13_scale, a2=weights.a2_scale)
    torch.testing.assert_close(got, want, rtol=2e-3, atol=2e-3)


def expected_batched(x, counts, w13, w2, s13, s2, per_row, a13=None, a2=None):
    """The batched layer written out row by row: quantize the valid rows, GEMM1, silu(gate) * up, requantize, GEMM2."""
    rows = [(e, r) for e in range(x.shape[0]) for r in range(int(counts[e]))]
    out = torch.zeros(x.shape)
    if not rows:
        return out
    xq = fp8(torch.stack([x[e, r].float() for e, r in rows]), per_row, a13)
    inter = []
    for (e, _), row in zip(rows, xq):
        gate, up = (row @ (w13[e].float() * s13[e]).T).half().float().chunk(2)
        inter.append(F.silu(gate) * up)
    for (e, r), row in zip(rows, fp8(torch.stack(inter), per_row, a2)):
        out[e, r] = (row @ (w2[e].float() * s2[e]).T).half().float()
    return out


@settings(max_examples=20, deadline=None, derandomize=True)
@given(scheme_name=st.sampled_from(contract.SCHEMES), experts=st.integers(1, 4), padded=st.integers(1, 24), data=st.data())
def test_batched_glue_gives_the_written_out_layer(scheme_name, experts, padded, data):
    """Padding rows change nothing (a per-tensor dynamic scale sees valid rows only) and come out zero; both sides of the swap."""
    per_channel = scheme_name == "fp8-channel"
    weights = layer(experts, 32, 16, per_channel, seed=padded)
    if scheme_name == "fp8-tensor":
        weights.a13_scale, weights.a2_scale = torch.tensor([[0.01]]), torch.tensor([[0.004]])
    counts = torch.tensor(data.draw(st.lists(st.integers(0, padded), min_size=experts, max_size=experts)))
    x = torch.randn(experts, padded, 32, generator=torch.Generator().manual_seed(experts)) * 3
    ops = FakeOps()
    got = glue.batched_moe(ops, x, glue.cutlass_layer(weights, problem(scheme_name)), counts)
    want = expected_batched(x, counts, weights.w13, weights.w2, weights.w13_scale, weights.w2_scale, per_channel, weights.a13_scale, weights.a2_scale)
    torch.testing.assert_close(got, want, rtol=2e-3, atol=2e-3)
    (data_call,) = [a for kind, a in ops.calls if kind == "batched data"]
    assert (data_call["num_local_experts"], data_call["padded_m"], data_call["n"], data_call["k"]) == (experts, padded, 16, 32)


@pytest.mark.parametrize("scheme_name", contract.SCHEMES)
def test_the_batched_kernel_through_the_fake_ops_agrees_with_the_reference_backend(monkeypatch, scheme_name):
    monkeypatch.setattr(library, "LIBRARY", types.SimpleNamespace(ops_namespace=FakeOps))
    cfg = MoEConfig(num_experts=4, top_k=2, hidden_size=64, intermediate_size=32, dtype=torch.bfloat16,
                    parallel=ParallelConfig(use_batched_activation_format=True))
    x = torch.randn(4, 6, 64, generator=torch.Generator().manual_seed(5)).to(torch.bfloat16)
    check_against_reference(kernel.VllmCutlassBatchedKernel, cfg, scheme_name, x, BatchedRouting(torch.tensor([6, 0, 3, 1])))


# ------------------------------------------------------------------ what one forward launches
#
# The stand-in ops are registered as real torch ops (the recorded schemas under their own namespace),
# so a dispatch mode sees each as one op, as it would see vLLM's; FakeOps runs inside them unseen.
STAND_IN = torch.library.Library("moe_core_cutlass_stand_in", "DEF")
_STAND_IN_FAKE = FakeOps()
for _op in (contract.CUTLASS_MOE_MM, contract.GET_CUTLASS_MOE_MM_DATA, contract.GET_CUTLASS_BATCHED_MOE_MM_DATA):
    STAND_IN.define(_op.schema)
    STAND_IN.impl(_op.name, getattr(_STAND_IN_FAKE, _op.name), "CPU")

#: Launches (kernels on a GPU: every op but views and allocations, and every Triton launch) of one forward,
#: the first after prepare_weights as any other. Standard format, per scheme: Triton routing (local ids, invalid routing dropped and
#: counted, float32 router weights), Triton input quantization, zero the input permutation, sort the pairs,
#: cast the expert offsets to int64, gather the rows, [gather the per-token scales], GEMM1, Triton gated
#: activation + requantization, GEMM2, Triton weighted top-k sum. A dynamic per-tensor scale adds the
#: input's amax (abs, amax, float, clamp, divide), and for the intermediate the amax of the row amaxes
#: (amax, clamp, divide) and a second Triton launch that quantizes with it. Batched (whose counts
#: ``MoEKernel.apply`` guards before the forward): no routing, sorting, gathers or sum, but GEMM2's output is
#: zeroed (padding rows), and the dynamic per-tensor scale masks the padding rows first (arange, compare,
#: where) and zeroes GEMM1's output too. Before the per-layer constants were built once and the row passes
#: fused, the standard fp8-channel forward made 48 launches, and ``MoEKernel.apply`` added about 25 more to
#: guard the routing.
BUDGET = {
    ("standard", "fp8-channel"): 11, ("standard", "fp8-tensor"): 10, ("standard", "fp8-tensor-dyn"): 19,
    ("batched", "fp8-channel"): 8, ("batched", "fp8-tensor"): 8, ("batched", "fp8-tensor-dyn"): 22,
}


class LaunchCount(TorchDispatchMode):
    """Ops seen by the dispatcher, Triton launches (counted by ``triton_launch``, whose inside is not seen), host
    reads of device values, and ops other than the GEMM that take a weight or weight-scale tensor."""

    def __init__(self, weight_storages):
        super().__init__()
        self.launches, self.host_reads, self.weight_ops, self.hidden = [], [], [], 0
        self.weight_storages = weight_storages

    def __torch_dispatch__(self, func, types_, args=(), kwargs=None):
        if not self.hidden:
            name = str(func)
            returns = func._schema.returns
            view = bool(returns) and returns[0].alias_info is not None and not returns[0].alias_info.is_write
            if name == "aten._local_scalar_dense.default":
                self.host_reads.append(name)
            if not view and name not in ("aten.empty.memory_format", "aten.empty_strided.default"):
                self.launches.append(name)
            tensors = [a for a in torch.utils._pytree.tree_leaves((args, kwargs)) if isinstance(a, torch.Tensor)]
            if "cutlass_moe_mm" not in name and any(t.untyped_storage().data_ptr() in self.weight_storages for t in tensors):
                self.weight_ops.append(name)
        return func(*args, **(kwargs or {}))

    def triton_launch(self, real):
        def launch(launcher, *args):
            self.launches.append(f"triton {launcher.fn.fn.__name__}")
            self.hidden += 1
            try:
                return real(launcher, *args)
            finally:
                self.hidden -= 1
        return launch


def _one_forward(monkeypatch, fmt, scheme_name):
    """The launches of the first forward after prepare_weights (which builds the per-layer constants) of a small layer."""
    monkeypatch.setattr(library, "LIBRARY", types.SimpleNamespace(ops_namespace=lambda: torch.ops.moe_core_cutlass_stand_in))
    batched = fmt == "batched"
    cfg = MoEConfig(num_experts=4, top_k=2, hidden_size=64, intermediate_size=32, dtype=torch.bfloat16,
                    parallel=ParallelConfig(use_batched_activation_format=batched))
    cls = kernel.VllmCutlassBatchedKernel if batched else kernel.VllmCutlassKernel
    k = cls(cfg, scheme(scheme_name).weight_key, scheme(scheme_name).activation_key)
    w = k.prepare_weights(random_layer(cfg, scheme(scheme_name)))
    if batched:
        x, routing = torch.randn(4, 6, 64).to(torch.bfloat16), BatchedRouting(torch.tensor([6, 0, 3, 1]))
    else:
        x, routing = random_inputs(cfg, 9, device="cpu")
        routing = Routing(routing.topk_ids.long(), routing.topk_weights)
    forward = lambda: k.forward(x, w, routing, expert_map=None, apply_router_weight_on_input=False)  # noqa: E731
    mode = LaunchCount({t.untyped_storage().data_ptr() for t in (w.w13, w.w2, w.w13_scale, w.w2_scale)})
    monkeypatch.setattr(Launcher, "__call__", mode.triton_launch(Launcher.__call__))
    with mode:
        forward()
    return mode


@pytest.mark.parametrize("fmt, scheme_name", sorted(BUDGET))
def test_one_forward_stays_within_its_launch_budget(monkeypatch, fmt, scheme_name):
    mode = _one_forward(monkeypatch, fmt, scheme_name)
    assert len(mode.launches) <= BUDGET[fmt, scheme_name], sorted(mode.launches)
    assert mode.host_reads == []  # nothing waits for the device: the forward can be captured in a CUDA graph
    assert mode.weight_ops == []  # no per-forward copy, transpose or conversion of the weights or their scales



@pytest.mark.parametrize("scheme_name", ["fp8-tensor-dyn", "fp8-channel"])
@pytest.mark.parametrize("with_map", [False, True])
def test_the_forward_drops_and_counts_invalid_routing(poisoned_empty, scheme_name, with_map):
    """Ids outside [0, E) and map entries outside [-1, local E) leave their pair out of the output (and of a dynamic
    per-tensor scale) and are counted with their range, on the device (moe-core's CPU path raises at the call instead)."""
    per_channel = scheme_name == "fp8-channel"
    weights = layer(2, 32, 16, per_channel, seed=5)
    gen = torch.Generator().manual_seed(6)
    x, router = torch.randn(6, 32, generator=gen) * 2, torch.rand(6, 2, generator=gen)
    if with_map:  # 5 global experts, 2 here; global 3's entry (7) is out of range
        emap, bad_ids = torch.tensor([0, -1, 1, 7, -1], dtype=torch.int32), torch.tensor([[0, 2], [9, 1], [3, 0], [-4, 2], [2, 0], [1, 4]])
        oracle_map, parking = emap, 1  # bad: 9 and -4 (ids), 7 (the map entry of id 3)
    else:
        emap, bad_ids = None, torch.tensor([[0, 1], [9, 1], [1, 0], [-4, 1], [1, 0], [0, 2]])
        oracle_map, parking = torch.tensor([0, 1, -1]), 2  # bad: ids 9, -4 and 2; the oracle parks them on a remote id
    bad = (bad_ids < 0) | (bad_ids >= (5 if with_map else 2))
    if with_map:
        bad |= bad_ids == 3
    counter = new_counter()
    got = run_glue(FakeOps(), x, weights, problem(scheme_name), bad_ids, router, emap=emap, counter=counter)
    want = expected(x, torch.where(bad, parking, bad_ids), router, weights.w13, weights.w2, weights.w13_scale, weights.w2_scale,
                    Activation.SILU, None, per_channel, emap=oracle_map)
    torch.testing.assert_close(got, want, rtol=2e-3, atol=2e-3)
    assert counter.buffer(x.device).tolist() == [3, -4, 9]  # [count, smallest, largest]
