"""`aiter` on a real MI300X / MI355X with the aiter package, against the reference backend.

Skipped unless a ROCm GPU and an importable aiter are both present (``fake_aiter`` in this folder is
never imported here). No machine of this project has either, so these tests have not run yet and the
backend's validation record is NOT_VALIDATED. On a machine where they pass, copy the line printed by
`test_numerics` (GPU, aiter version, date) and the log's path into `Validation(...)` in moe_core_aiter/plugin.py.
"""

import dataclasses
import importlib.util

import pytest
import torch

from moe_core.config import MoEConfig, ParallelConfig
from moe_core.presets import random_inputs
from moe_core.testing import conformance
from moe_core_aiter.kernel import AiterKernel

pytestmark = pytest.mark.skipif(
    not torch.cuda.is_available() or torch.version.hip is None or importlib.util.find_spec("aiter") is None,
    reason="needs a ROCm GPU (gfx942/gfx950) and the aiter package",
)
# Sizes AITER's weight shuffle takes (multiples of 32); at 1 and 7 tokens most experts are empty.
SMALL = MoEConfig(num_experts=8, top_k=2, hidden_size=512, intermediate_size=256, dtype=torch.bfloat16)
TOKENS = (1, 7, 333)


@pytest.fixture(scope="module")
def reg():
    return conformance.registry_with("moe_core_aiter.plugin", name="aiter")


def test_numerics(reg):
    records = conformance.check_numerics(reg, "aiter", configs=[SMALL], tokens=TOKENS)
    print(conformance.validation_line(records, "aiter"))


def test_expert_map():
    cfg = dataclasses.replace(SMALL, parallel=ParallelConfig(ep_size=2))
    expert_map = torch.tensor([0, -1, 1, -1, 2, -1, 3, -1], dtype=torch.int32, device="cuda")
    for scheme_name in ("unquantized", "fp8-block"):
        conformance.check_against_reference(AiterKernel, cfg, scheme_name, *random_inputs(cfg, 77, device="cuda"), expert_map)


def test_robustness(reg):
    conformance.check_robustness(reg, "aiter", config=SMALL, garbage_calls=20)
