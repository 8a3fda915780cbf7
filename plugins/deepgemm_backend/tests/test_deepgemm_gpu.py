"""Both backends on a real GPU with the real DeepGEMM, against the reference (skipped elsewhere)."""

import dataclasses
import importlib.util

import pytest
import torch

from moe_core.config import MoEConfig, ParallelConfig
from moe_core.presets import random_inputs
from moe_core.routing import Routing
from moe_core.testing import conformance
from moe_core_deepgemm.kernel import DeepGemmKernel

pytestmark = pytest.mark.skipif(
    not torch.cuda.is_available() or importlib.util.find_spec("deep_gemm") is None, reason="needs a CUDA GPU and deep_gemm"
)
TOKENS = (1, 7, 333)
# At 1 and 7 tokens most of SMALL's 8 experts are empty. Few distinct shapes: DeepGEMM JIT-compiles one kernel per (N, K, E, block config).
SMALL = MoEConfig(num_experts=8, top_k=2, hidden_size=512, intermediate_size=256, dtype=torch.bfloat16)
K7168 = MoEConfig(num_experts=16, top_k=4, hidden_size=7168, intermediate_size=256, dtype=torch.bfloat16)


@pytest.fixture(scope="module")
def reg():
    return conformance.registry_with("moe_core_deepgemm.plugin", name="deepgemm")


@pytest.mark.parametrize("backend", ["deepgemm", "batched_deepgemm"])
@pytest.mark.parametrize("cfg", [SMALL, K7168], ids=["small", "k7168"])
def test_numerics(reg, backend, cfg):
    records = conformance.check_numerics(reg, backend, configs=[cfg], tokens=TOKENS)
    assert not [r for r in records if "skipped" in r], records
    print(backend, [(r["scheme"], r["tokens"], round(r["rel_err"], 5)) for r in records])


def _against_reference(cfg, scheme_name, x, routing, expert_map=None):
    return conformance.check_against_reference(DeepGemmKernel, cfg, scheme_name, x, routing, expert_map)


@pytest.mark.parametrize("scheme_name", ["fp8-block", "unquantized"])
def test_all_tokens_on_one_expert(scheme_name):
    x, routing = random_inputs(SMALL, 333, device="cuda")
    ids = torch.stack([torch.full_like(routing.topk_ids[:, 0], 3), torch.full_like(routing.topk_ids[:, 1], 5)], dim=1)
    _against_reference(SMALL, scheme_name, x, Routing(ids, routing.topk_weights))


def test_expert_map_and_invalid_ids():
    cfg = dataclasses.replace(SMALL, parallel=ParallelConfig(ep_size=2))
    x, routing = random_inputs(cfg, 77, device="cuda")
    expert_map = torch.tensor([0, -1, 1, -1, 2, -1, 3, -1], dtype=torch.int32, device="cuda")
    _against_reference(cfg, "fp8-block", x, routing, expert_map)


def test_robustness(reg):
    for backend in ("deepgemm", "batched_deepgemm"):
        conformance.check_robustness(reg, backend, config=SMALL, garbage_calls=20)


def test_decode_is_cuda_graph_capturable():
    conformance.check_graph_replay(DeepGemmKernel, SMALL, "fp8-block")
