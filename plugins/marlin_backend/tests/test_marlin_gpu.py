"""`marlin` on a real GPU with vLLM's compiled Marlin MoE ops, against the reference backend.

Skipped unless a CUDA GPU and an importable vLLM are both present. No machine of this project has vLLM
(the GPU image used so far is offline), so these tests have not run yet and the backend's validation record is
NOT_VALIDATED. On a machine where they pass, copy the line printed by `test_numerics` (GPU, vLLM version,
date) and the log's path into `Validation(...)` in moe_core_marlin/plugin.py.
"""

import dataclasses
import importlib.util

import pytest
import torch

from moe_core.config import MoEConfig, ParallelConfig
from moe_core.presets import random_inputs
from moe_core.routing import Routing
from moe_core.testing import conformance
from moe_core_marlin.kernel import MarlinKernel

pytestmark = pytest.mark.skipif(
    not torch.cuda.is_available() or torch.version.hip is not None or importlib.util.find_spec("vllm") is None,
    reason="needs a CUDA GPU and vLLM (its compiled Marlin MoE ops)",
)
# Marlin's tiles: hidden a multiple of 128, intermediate of 64 and of the weight group (128). At 1 and 7 tokens most experts are empty.
SMALL = MoEConfig(num_experts=8, top_k=2, hidden_size=512, intermediate_size=256, dtype=torch.bfloat16)
TOKENS = (1, 7, 333)


@pytest.fixture(scope="module")
def reg():
    return conformance.registry_with("moe_core_marlin.plugin", name="marlin")


@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float16], ids=str)
def test_numerics(reg, dtype):
    records = conformance.check_numerics(reg, "marlin", configs=[dataclasses.replace(SMALL, dtype=dtype)], tokens=TOKENS)
    print(conformance.validation_line(records, "vllm"))


def test_all_tokens_on_two_experts_and_an_expert_map():
    x, routing = random_inputs(SMALL, 333, device="cuda")
    ids = torch.stack([torch.full_like(routing.topk_ids[:, 0], 3), torch.full_like(routing.topk_ids[:, 1], 5)], dim=1)
    conformance.check_against_reference(MarlinKernel, SMALL, "w4a16", x, Routing(ids, routing.topk_weights))
    cfg = dataclasses.replace(SMALL, parallel=ParallelConfig(ep_size=2))
    expert_map = torch.tensor([0, -1, 1, -1, 2, -1, 3, -1], dtype=torch.int32, device="cuda")
    conformance.check_against_reference(MarlinKernel, cfg, "w4a16-zp", *random_inputs(cfg, 77, device="cuda"), expert_map)


def test_robustness(reg):
    conformance.check_robustness(reg, "marlin", config=SMALL, garbage_calls=20)
