"""FlashInfer backends on a real GPU against the reference (skipped where none can run).

Only the backends whose FlashInfer kernels build here are exercised: on the H100 that is
``flashinfer_cutile`` (cuTile, compiled by tileiras); the others say why not through supports().
"""

import dataclasses

import pytest
import torch

from moe_core.config import Activation, MoEConfig, ParallelConfig
from moe_core.presets import random_inputs
from moe_core.quant import scheme
from moe_core.resolver import current_platform
from moe_core.routing import Routing
from moe_core.spec import SupportQuery
from moe_core.testing import conformance

SMALL = MoEConfig(num_experts=8, top_k=2, hidden_size=256, intermediate_size=128, dtype=torch.bfloat16)
#: Sizes that are no power of two, and more experts than tokens at T=1 and 7.
ODD = MoEConfig(num_experts=12, top_k=3, hidden_size=352, intermediate_size=160, dtype=torch.bfloat16)
TOKENS = (1, 7, 33, 300)


def _runnable(reg, backend, cfg, scheme_name):
    sch = scheme(scheme_name)
    return reg.supports(reg.specs[backend], SupportQuery(cfg, sch.weight_key, sch.activation_key, current_platform()))


@pytest.fixture(scope="module")
def reg():
    if not torch.cuda.is_available():
        pytest.skip("needs a CUDA GPU")
    registry = conformance.registry_with("moe_core_flashinfer.plugin", name="flashinfer")
    verdict = _runnable(registry, "flashinfer_cutile", SMALL, "unquantized")
    if not verdict.ok:
        pytest.skip(f"flashinfer_cutile cannot run here: {verdict.explain()}")
    return registry


@pytest.mark.parametrize("scheme_name", ["unquantized", "fp8-tensor-dyn"])
@pytest.mark.parametrize("cfg", [SMALL, ODD], ids=["small", "odd"])
def test_numerics(reg, scheme_name, cfg):
    verdict = _runnable(reg, "flashinfer_cutile", cfg, scheme_name)
    if not verdict.ok:
        pytest.skip(verdict.explain())
    records = [r for r in conformance.check_numerics(reg, "flashinfer_cutile", configs=[cfg], tokens=TOKENS) if r.get("scheme") == scheme_name]
    assert records and not [r for r in records if "skipped" in r], records
    print(scheme_name, [(r["tokens"], round(r["rel_err"], 5)) for r in records])


def _against_reference(cfg, scheme_name, x, routing, expert_map=None):
    from moe_core_flashinfer.kernel import CuTileKernel

    return conformance.check_against_reference(CuTileKernel, cfg, scheme_name, x, routing, expert_map)


def test_empty_experts(reg):
    x, routing = random_inputs(SMALL, 333, device="cuda")
    ids = torch.stack([torch.full_like(routing.topk_ids[:, 0], 3), torch.full_like(routing.topk_ids[:, 1], 5)], dim=1)
    _against_reference(SMALL, "unquantized", x, Routing(ids, routing.topk_weights))


def test_expert_map(reg):
    cfg = dataclasses.replace(SMALL, parallel=ParallelConfig(ep_size=2))
    x, routing = random_inputs(cfg, 77, device="cuda")
    expert_map = torch.tensor([0, -1, 1, -1, 2, -1, 3, -1], dtype=torch.int32, device="cuda")
    _against_reference(cfg, "unquantized", x, routing, expert_map)


@pytest.mark.parametrize("activation,limit", [(Activation.SILU, 0.05), (Activation.GELU, None)])
def test_clamp_and_gelu(reg, activation, limit):
    cfg = dataclasses.replace(SMALL, activation=activation, swiglu_limit=limit)
    x, routing = random_inputs(cfg, 40, device="cuda")
    _against_reference(cfg, "unquantized", x, routing)


def test_zero_tokens(reg):
    x, routing = random_inputs(SMALL, 0, device="cuda")
    _against_reference(SMALL, "unquantized", x, routing)


def test_robustness(reg):
    conformance.check_robustness(reg, "flashinfer_cutile", config=SMALL, schemes=("unquantized",), garbage_calls=20)


def test_cuda_graph_replay(reg):
    from moe_core_flashinfer.kernel import CuTileKernel

    conformance.check_graph_replay(CuTileKernel, SMALL, "unquantized")  # the warm-up call allocates the bucket's workspace
