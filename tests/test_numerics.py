"""The relative-error budgets: derived from the error model, near the known-good kernels' error, below skipped quantization.

The known-good kernels are the Triton plugin's (interpreted on a CPU machine, float16; compiled
on a GPU, bfloat16 too). A budget far above what they measure would let real bugs through; one
above the error of a reference that skips the activation or the intermediate quantization could
not tell a kernel that quantizes from one that does not.
"""

import dataclasses
import math
import os

import pytest
import torch

from moe_core import numerics, quant
from moe_core.config import MoEConfig
from moe_core.numerics import layer_tolerance, relative_error, tolerance
from moe_core.presets import random_layer
from moe_core.reference import compute
from moe_core.reference.kernel import ReferenceKernel
from moe_core.routing import Routing

GPU = torch.cuda.is_available()
if not GPU:
    os.environ.setdefault("TRITON_INTERPRET", "1")  # before the kernels are first compiled

#: A budget may sit at most this far above the error the known-good kernel measures on a problem
#: large enough for the error's rms to settle: the model's estimate is ~2x the typical error, the
#: safety factor 2 more, which is what a one-token problem (one flipped code among 128) needs.
MAX_RATIO = 8


def test_budgets_come_from_the_format_unit_roundoff():
    u = {torch.bfloat16: 2.0**-8, torch.float16: 2.0**-11}
    for dtype, roundoff in u.items():
        assert tolerance(None, dtype, 4096) == pytest.approx(numerics.SAFETY * math.hypot(2 * roundoff, 64 * 2.0**-24))
        fp8 = numerics.error_terms(quant.kFp8DynamicTokenSym, dtype, 4096)
        assert fp8["flips"] == pytest.approx(math.sqrt(roundoff * 2.0**-3)) and fp8["accumulation"] == pytest.approx(64 * 2.0**-14)
    for key in (None, quant.kFp8Dynamic128Sym, quant.kInt8DynamicTokenSym, quant.kNvfp4Dynamic):
        assert tolerance(key, torch.float32) < tolerance(key, torch.float16) < tolerance(key, torch.bfloat16)
    assert tolerance(quant.kFp8Dynamic128Sym, torch.float16, 256) < tolerance(quant.kFp8Dynamic128Sym, torch.float16, 16384)
    assert tolerance(quant.kInt8DynamicTokenSym, torch.float16, 256) == pytest.approx(tolerance(quant.kInt8DynamicTokenSym, torch.float16, 16384), rel=1e-3)
    assert tolerance(None, torch.float16) < tolerance(quant.kInt8DynamicTokenSym, torch.float16) < tolerance(quant.kFp8DynamicTokenSym, torch.float16)


def skipping(which):
    """compute.fake_quantize that skips the intermediate's quantization, or the layer input's too ("both")."""
    real = compute.fake_quantize
    calls = []

    def fake_quantize(x, key, scale=None):
        calls.append(key)
        intermediate = len(calls) % 2 == 0  # the layer input comes first, then the intermediate
        return x.float() if which == "both" or intermediate else real(x, key, scale)

    return fake_quantize


DTYPES = [torch.float16, torch.bfloat16] if GPU else [torch.float16]


@pytest.mark.parametrize("dtype", DTYPES, ids=str)
@pytest.mark.parametrize("name", ["unquantized", "w4a16", "fp8-tensor", "fp8-channel", "fp8-block", "int8"])
def test_budget_is_near_the_triton_error_and_below_skipped_quantization(name, dtype, monkeypatch):
    from moe_core_triton.kernel import TritonKernel

    sch = quant.scheme(name)
    device = "cuda" if GPU else "cpu"
    cfg = MoEConfig(num_experts=4, top_k=2, hidden_size=128, intermediate_size=64, dtype=dtype)
    budget = layer_tolerance(sch.activation_key, cfg)
    raw = random_layer(cfg, sch, device=device, seed=3)
    g = torch.Generator().manual_seed(4)
    x = torch.randn(128, cfg.hidden_size, generator=g).to(device, dtype)
    routing = Routing.from_logits(torch.randn(128, cfg.num_experts, generator=g).to(device), cfg.top_k)
    kernel, oracle = TritonKernel(cfg, sch.weight_key, sch.activation_key), ReferenceKernel(cfg, sch.weight_key, sch.activation_key)
    got = kernel.apply(x, kernel.prepare_weights(raw), routing)
    weights = oracle.prepare_weights(raw)
    err = relative_error(got, oracle.apply(x, weights, routing))
    assert err <= budget <= MAX_RATIO * err, f"{name} {dtype}: measured {err:.3g}, budget {budget:.3g}"
    if sch.activation_key is None or dtype is torch.bfloat16:
        return  # nothing to skip; in bfloat16 a flipped code costs about what skipping does (see moe_core.numerics)
    for which in ("both", "intermediate"):
        with monkeypatch.context() as m:  # each skip wraps the real fake_quantize, not the previous skip
            m.setattr(compute, "fake_quantize", skipping(which))
            skipped = relative_error(got, oracle.apply(x, weights, routing))
        assert skipped > budget, f"{name}: a reference that skips the {which} quantization is {skipped:.3g} away, within the budget {budget:.3g}"


def test_check_numerics_fails_a_declared_scheme_no_case_ran_for():
    """A backend that supports() says no to everywhere here would otherwise pass having checked nothing."""
    from moe_core.platform import DeviceKind, preset
    from moe_core.reference.plugin import SPEC
    from moe_core.registry import Registry
    from moe_core.testing import conformance
    from moe_core.testing.fakes import SpecPlugin

    gpu_only = dataclasses.replace(SPEC, name="gpu_only", schemes=frozenset({quant.scheme("unquantized").keys}), devices=frozenset({DeviceKind.CUDA}),
                                   kernel=f"{__name__}:GpuOnlyKernel")
    reg = Registry(autoload=False, environ={})
    reg.register(SpecPlugin(gpu_only), name="gpu_only")
    small = [MoEConfig(num_experts=4, top_k=2, hidden_size=64, intermediate_size=32, dtype=torch.float32)]
    with pytest.raises(AssertionError, match=r"gpu_only: declares \['unquantized'\] but no numeric case ran for them here \(unquantized: .*cuda"):
        conformance.check_numerics(reg, "gpu_only", device="cpu", platform=preset("cpu"), configs=small, tokens=(2,))
    records = conformance.check_numerics(reg, "gpu_only", device="cpu", platform=preset("cpu"), configs=small, tokens=(2,), expected_skips={"unquantized"})
    assert records and all("skipped" in r for r in records)


class GpuOnlyKernel(ReferenceKernel):
    backend_name = "gpu_only"
