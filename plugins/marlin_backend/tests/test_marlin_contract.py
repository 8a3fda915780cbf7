"""The binding's contract with vLLM's Marlin ops library, on the CPU, without vLLM.

The schema checks use torch's own schema parser. The glue tests run against a FAKE ops namespace, for
plumbing only: the fake's align and GEMM are dense torch written here from the ops' documented
meaning (not Marlin's arithmetic), so they check which arguments reach which schema position and
that the glue's activation, router weights and top-k sum are right. Marlin's numerics need the GPU
(python -m moe_core_marlin.gpu_check).
"""

import sys
import types

import pytest
import torch
import torch.nn.functional as F

from moe_core.config import Activation
from moe_core.env import MARLIN_OPS_LIBRARY
from moe_core.routing_guard import RoutingErrorCounter
from moe_core.testing.ops_schemas import registered_ops
from moe_core_marlin import contract, glue, library
from moe_core_marlin.library import LIBRARY

# Read from vllm/scalar_type.py of vLLM 0.26.0 (scalar_types.<name>.id, computed by vLLM's own code).
VLLM_IDS = {"uint4b8": 1125899907892224, "uint4": 1125899906843648, "uint8b128": 1125899923621888,
            "float8_e4m3fn": 2814749767172868, "float4_e2m1f": 562949953487106}


def test_scalar_type_ids_match_vllm():
    assert {name: t.id for name, t in contract.SCALAR_TYPES.items()} == VLLM_IDS
    assert set(contract.SCALAR_TYPE_BY_SCHEME.values()) == set(VLLM_IDS)


def test_recorded_schemas_parse_and_name_the_arguments_the_glue_passes():
    gemm = [a.name for a in contract.MOE_WNA16_MARLIN_GEMM.parsed().arguments]
    assert len(gemm) == 29 and gemm[:3] == ["a", "c_or_none", "b_q_weight"] and gemm[-3:] == ["thread_k", "thread_n", "blocks_per_sm"]
    align = [a.name for a in contract.MOE_ALIGN_BLOCK_SIZE.parsed().arguments]
    assert align == ["topk_ids", "num_experts", "block_size", "sorted_token_ids", "experts_ids", "num_tokens_post_pad", "maybe_expert_map"]


def namespace(schemas):
    """A stand-in for torch.ops._moe_C registering the given schema texts."""
    return registered_ops(LIBRARY.namespace, schemas)


def test_a_library_with_the_recorded_schemas_is_accepted_and_a_different_one_refused():
    recorded = {op.name: op.schema for op in contract.OPS}
    assert LIBRARY.schema_mismatches(namespace(recorded)) == []
    # The same schema with the Tensor! written as Tensor(a!) is the same contract.
    aliased = dict(recorded, moe_align_block_size=recorded["moe_align_block_size"].replace("Tensor! sorted", "Tensor(a!) sorted"))
    assert LIBRARY.schema_mismatches(namespace(aliased)) == []
    older = dict(recorded, moe_wna16_marlin_gemm=recorded["moe_wna16_marlin_gemm"].replace(", int thread_k, int thread_n, int blocks_per_sm", ""))
    (problem,) = LIBRARY.schema_mismatches(namespace(older))
    assert problem.startswith("_moe_C::moe_wna16_marlin_gemm is registered as")
    del recorded["moe_align_block_size"]
    assert LIBRARY.schema_mismatches(namespace(recorded)) == ["_moe_C::moe_align_block_size is not registered"]


def test_the_library_is_found_from_the_variable_or_in_an_installed_vllm_without_importing_it(tmp_path, monkeypatch):
    given = tmp_path / "ops.so"
    given.write_bytes(b"")
    assert LIBRARY.locate({MARLIN_OPS_LIBRARY: str(given)}).path == given
    assert LIBRARY.locate({MARLIN_OPS_LIBRARY: str(tmp_path / "absent.so")}) is None
    assert f"{MARLIN_OPS_LIBRARY}={tmp_path / 'absent.so'} is not a file" in LIBRARY.missing_reason({MARLIN_OPS_LIBRARY: str(tmp_path / "absent.so")})
    package = tmp_path / "site" / "vllm"
    package.mkdir(parents=True)
    (package / "__init__.py").write_text("raise RuntimeError('vLLM was imported')\n")
    monkeypatch.syspath_prepend(str(tmp_path / "site"))
    monkeypatch.delitem(sys.modules, "vllm", raising=False)
    assert LIBRARY.locate({}) is None  # the package holds no library
    (package / contract.LIBRARY_FILE).write_bytes(b"")
    found = LIBRARY.locate({})
    assert found.path == package / contract.LIBRARY_FILE and found.source == "installed vLLM" and "vllm" not in sys.modules


def test_without_the_library_the_message_says_how_to_get_it(monkeypatch, tmp_path):
    monkeypatch.setenv(MARLIN_OPS_LIBRARY, str(tmp_path / "absent.so"))
    with pytest.raises(library.MarlinUnavailableError, match=r"pip download --no-deps vllm==0\.26\.0.*unzip"):
        LIBRARY.ops_namespace()


class FakeOps:
    """Dense torch stand-ins for the two ops, bound by the recorded schemas' argument names (plumbing only)."""

    def __init__(self, dense):
        self.dense = dense  # id(packed weight) -> dense [E, N, K] float32
        self.calls = []

    def _bind(self, op, args):
        names = [a.name for a in op.parsed().arguments]
        assert len(args) == len(names), f"{op.name}: {len(args)} arguments, the schema has {len(names)}"
        return dict(zip(names, args))

    def moe_align_block_size(self, *args):
        a = self._bind(contract.MOE_ALIGN_BLOCK_SIZE, args)
        ids, block, emap = a["topk_ids"].flatten().long(), a["block_size"], a["maybe_expert_map"]
        # The compiled op reads the map through an int32 pointer whatever its dtype (no dtype check):
        # entry e is the e-th 32-bit word of its storage.
        words = None if emap is None else emap.contiguous().flatten().view(torch.int32)
        rows, experts = [], []
        for e in range(a["num_experts"]):
            local = e if words is None else int(words[e])
            pairs = (ids == e).nonzero().flatten().tolist()
            if local < 0 or not pairs:
                continue
            pairs += [ids.numel()] * (-len(pairs) % block)
            rows += pairs
            experts += [local] * (len(pairs) // block)
        a["sorted_token_ids"][: len(rows)] = torch.tensor(rows, dtype=torch.int32)
        a["experts_ids"][: len(experts)] = torch.tensor(experts, dtype=torch.int32)
        a["num_tokens_post_pad"][0] = len(rows)
        self.calls.append(("align", a))

    def moe_wna16_marlin_gemm(self, *args):
        a = self._bind(contract.MOE_WNA16_MARLIN_GEMM, args)
        self.calls.append(("gemm", a))
        w, c, top_k = self.dense[id(a["b_q_weight"])], a["c_or_none"], a["top_k"]
        block = a["moe_block_size"]
        for b in range(int(a["num_tokens_past_padded"][0]) // block):
            e = int(a["expert_ids"][b])
            for row in a["sorted_token_ids"][b * block:(b + 1) * block].tolist():
                if row < a["size_m"] * top_k:
                    out = a["a"][row // top_k].float() @ w[e].T
                    c[row] = (out * a["topk_weights"].flatten()[row] if a["mul_topk_weights"] else out).to(c.dtype)
        return c


def errors_buffer():
    """A fresh [count, smallest, largest] buffer of a routing error counter, on the CPU."""
    return RoutingErrorCounter("routing.topk_ids", "[0, 4)").buffer(torch.device("cpu"))


def layer(experts=4, hidden=32, inter=16, seed=0):
    gen = torch.Generator().manual_seed(seed)
    w13, w2 = torch.randn(experts, 2 * inter, hidden, generator=gen), torch.randn(experts, hidden, inter, generator=gen)
    # Stand-ins with the packed shapes the glue reads (w13 [E, H/16, ...], w2 [E, I/16, ...]).
    packed = types.SimpleNamespace(w13=torch.zeros(experts, hidden // 16, 1), w2=torch.zeros(experts, inter // 16, 1),
                                   w13_scale=torch.ones(1), w2_scale=torch.ones(1), w13_zero=None, w2_zero=None,
                                   w13_global_scale=torch.ones(experts), w2_global_scale=torch.ones(experts))
    return packed, {id(packed.w13): w13, id(packed.w2): w2}, w13, w2


def expected(x, ids, weights, w13, w2, activation, limit, emap=None):
    """The layer written out token by token, from the definition."""
    out = torch.zeros(x.shape, dtype=torch.float32)
    for t in range(x.shape[0]):
        for k in range(ids.shape[1]):
            e = int(ids[t, k])
            local = e if emap is None else int(emap[e])
            if local < 0:
                continue
            h = x[t].float() @ w13[local].T
            gate, up = h[: h.numel() // 2], h[h.numel() // 2:]
            if limit is not None:
                gate, up = torch.clamp(gate, max=limit), torch.clamp(up, -limit, limit)
            act = (F.silu(gate) if activation is Activation.SILU else F.gelu(gate)) * up
            out[t] += weights[t, k] * (act @ w2[local].T)
    return out


@pytest.mark.parametrize("activation, limit", [(Activation.SILU, None), (Activation.GELU, None), (Activation.SILU, 0.5)])
def test_glue_computes_the_layer_through_the_fake_ops(activation, limit):
    packed, dense, w13, w2 = layer()
    gen = torch.Generator().manual_seed(1)
    x = torch.randn(5, 32, generator=gen)
    ids = torch.randint(0, 4, (5, 2), generator=gen)
    weights = torch.rand(5, 2, generator=gen)
    ops = FakeOps(dense)
    problem = glue.MarlinProblem(contract.SCALAR_TYPES["uint4b8"].id, 4, activation, limit)
    got = glue.fused_moe(ops, x, packed, ids, weights, problem=problem, expert_map=None, apply_router_weight_on_input=False,
                         scratch=glue.device_scratch(x.device, packed.w13.shape[0]), errors=errors_buffer())
    torch.testing.assert_close(got, expected(x, ids, weights, w13, w2, activation, limit), rtol=1e-5, atol=1e-5)
    first, second = [a for kind, a in ops.calls if kind == "gemm"]
    assert (first["size_m"], first["size_n"], first["size_k"], first["top_k"]) == (5, 32, 32, 2)
    assert (second["size_m"], second["size_n"], second["size_k"], second["top_k"]) == (10, 32, 16, 1)
    assert not first["mul_topk_weights"] and second["mul_topk_weights"]
    assert first["b_type_id"] == second["b_type_id"] == VLLM_IDS["uint4b8"]
    assert first["topk_weights"].dtype == torch.float32 and first["is_full_k"] and not first["use_atomic_add"] and first["use_fp32_reduce"]
    assert first["b_scales"] is packed.w13_scale and second["b_q_weight"] is packed.w2
    assert first["global_scale"] is packed.w13_global_scale and second["global_scale"] is packed.w2_global_scale
    assert first["b_bias_or_none"] is None and first["a_scales"] is None and first["g_idx_or_none"] is None


@pytest.mark.parametrize("map_dtype", [torch.int32, torch.int64], ids=str)
def test_glue_with_an_expert_map_and_router_weights_on_the_input(map_dtype):
    # An int64 map (torch.arange builds one) works as well as an int32 one (the align op reads maps as int32).
    packed, dense, w13, w2 = layer(experts=2)
    emap = torch.tensor([-1, 0, -1, 1], dtype=map_dtype)  # 4 global experts, 2 here
    gen = torch.Generator().manual_seed(2)
    x = torch.randn(7, 32, generator=gen)
    ids = torch.randint(0, 4, (7, 1), generator=gen)
    weights = torch.rand(7, 1, generator=gen)
    ops = FakeOps(dense)
    problem = glue.MarlinProblem(contract.SCALAR_TYPES["uint4"].id, 4, Activation.SILU, None)
    got = glue.fused_moe(ops, x, packed, ids, weights, problem=problem, expert_map=emap, apply_router_weight_on_input=True,
                         scratch=glue.device_scratch(x.device, packed.w13.shape[0]), errors=errors_buffer())
    # Weights on the input scale GEMM1's rows before the activation (top_k = 1), not the output.
    want = torch.zeros(7, 32)
    for t in range(7):
        local = int(emap[ids[t, 0]])
        if local >= 0:
            h = (weights[t, 0] * x[t]) @ w13[local].T
            want[t] = (F.silu(h[:16]) * h[16:]) @ w2[local].T
    torch.testing.assert_close(got, want, rtol=1e-5, atol=1e-5)
    (align,) = [a for kind, a in ops.calls if kind == "align"]
    # The align sorts local experts (the guard applied the map): 2 here, and the slot of dropped pairs.
    assert align["num_experts"] == 2 and align["maybe_expert_map"].tolist() == [0, 1, -1]
    first, second = [a for kind, a in ops.calls if kind == "gemm"]
    assert first["mul_topk_weights"] and not second["mul_topk_weights"]


def test_glue_drops_invalid_ids_and_counts_them():
    packed, dense, w13, w2 = layer()
    gen = torch.Generator().manual_seed(3)
    x = torch.randn(5, 32, generator=gen)
    ids = torch.randint(0, 4, (5, 2), generator=gen)
    weights = torch.rand(5, 2, generator=gen)
    bad = ids.clone()
    bad[0, 0], bad[3, 1] = -1, 100
    errors = errors_buffer()
    problem = glue.MarlinProblem(contract.SCALAR_TYPES["uint4b8"].id, 4, Activation.SILU, None)
    got = glue.fused_moe(FakeOps(dense), x, packed, bad, weights, problem=problem, expert_map=None, apply_router_weight_on_input=False,
                         scratch=glue.device_scratch(x.device, packed.w13.shape[0]), errors=errors)
    kept = weights.clone()
    kept[0, 0] = kept[3, 1] = 0  # the dropped pairs add nothing
    torch.testing.assert_close(got, expected(x, ids, kept, w13, w2, Activation.SILU, None), rtol=1e-5, atol=1e-5)
    assert errors.tolist() == [2, -1, 100]


def test_glue_with_no_tokens_calls_no_op():
    packed, dense, _, _ = layer()
    ops = FakeOps(dense)
    problem = glue.MarlinProblem(contract.SCALAR_TYPES["uint4b8"].id, 4, Activation.SILU, None)
    got = glue.fused_moe(ops, torch.zeros(0, 32), packed, torch.zeros(0, 2, dtype=torch.long), torch.zeros(0, 2), problem=problem,
                         expert_map=None, apply_router_weight_on_input=False, scratch=glue.device_scratch(torch.device("cpu"), 4),
                         errors=errors_buffer())
    assert got.shape == (0, 32) and ops.calls == []


@pytest.mark.parametrize("tokens, top_k, local, total, block", [
    (1, 2, 8, 8, 8), (7, 2, 8, 8, 8), (333, 2, 8, 8, 64), (64, 8, 128, 128, 8), (4096, 8, 128, 128, 64), (40, 2, 4, 8, 16),
])
def test_block_size_follows_the_average_rows_per_expert(tokens, top_k, local, total, block):
    # Smallest of 8, 16, 32, 48, 64 with ceil(tokens * local / total) * top_k / local / size < 0.9, else 64.
    assert glue.block_size_m(tokens, top_k, local, total) == block
