"""The binding's records and calls against the installed FlashInfer, with ``inspect.signature``; weight
preparation round-trips on the CPU where FlashInfer's helpers run there."""

import inspect

import pytest
import torch

from moe_core.config import MoEConfig
from moe_core.kernel import MoEKernel
from moe_core.presets import random_inputs, random_layer
from moe_core.quant import scheme

pytest.importorskip("flashinfer.fused_moe.api", reason="needs flashinfer-python (scripts/bootstrap.sh installs it)")

import flashinfer.fused_moe as fused_moe  # noqa: E402
from flashinfer.fused_moe import api  # noqa: E402
from flashinfer.fused_moe.layer import _BACKEND_RUNNERS  # noqa: E402

from moe_core_flashinfer import contract  # noqa: E402
from moe_core_flashinfer.kernel import FlashInferWeights, to_flashinfer_w1  # noqa: E402
from moe_core_flashinfer.specs import KERNELS  # noqa: E402

CFG = MoEConfig(num_experts=4, top_k=2, hidden_size=64, intermediate_size=96, dtype=torch.bfloat16)
CASES = [(b, s, binding) for b, bindings in contract.BINDINGS.items() for s, binding in bindings.items()]
IDS = [f"{b}-{s}" for b, s, _ in CASES]


def _params(fn) -> tuple[str, ...]:
    return tuple(p for p in inspect.signature(fn).parameters if p not in ("self", "cls"))


def _extends(fn, recorded: tuple[str, ...]) -> bool:
    """True when ``fn`` takes the recorded parameters in their order and everything else it added is optional
    and cannot take a positional argument meant for a recorded one (keyword-only, or after the last recorded)."""
    params = [p for p in inspect.signature(fn).parameters.values() if p.name not in ("self", "cls")]
    if tuple(p.name for p in params if p.name in recorded) != recorded:
        return False
    last = max((i for i, p in enumerate(params) if p.name in recorded), default=-1)
    return all(p.default is not p.empty and (p.kind is p.KEYWORD_ONLY or i > last)
               for i, p in enumerate(params) if p.name not in recorded)


def _recorded(a, b, *, c=1):
    pass


@pytest.mark.parametrize("fn,ok", [
    (_recorded, True),
    (lambda a, b, *, c=1, added=None: None, True),          # a keyword-only addition with a default
    (lambda a, b, c=1, added=None: None, True),             # a trailing optional addition
    (lambda a, b, *, c=1, added: None, False),              # a new required parameter
    (lambda a, added=None, b=None, *, c=1: None, False),    # an optional one that takes b's position
    (lambda a, *, c=1: None, False),                        # a recorded parameter gone
    (lambda b, a, *, c=1: None, False),                     # reordered
])
def test_extends_accepts_compatible_additions_only(fn, ok):
    assert _extends(fn, ("a", "b", "c")) is ok


def _kernel(backend, scheme_name):
    import moe_core_flashinfer.kernel as kernels

    sch = scheme(scheme_name)
    return getattr(kernels, KERNELS[backend])(CFG, sch.weight_key, sch.activation_key)


def test_tested_version_is_installed_and_in_range():
    from packaging.specifiers import SpecifierSet
    from packaging.version import Version

    from moe_core_flashinfer import facts

    assert Version(facts.version()) in SpecifierSet(contract.VERSION_RANGE)
    assert Version(contract.TESTED_VERSION) in SpecifierSet(contract.VERSION_RANGE)


@pytest.mark.parametrize("backend,scheme_name,binding", CASES, ids=IDS)
def test_binding_matches_flashinfer(backend, scheme_name, binding):
    config = getattr(api, binding.config)
    runner = getattr(fused_moe, binding.runner)
    assert _BACKEND_RUNNERS[config] is runner, "FlashInfer's MoELayer pairs the config with another runner"
    assert runner.backend_key
    pair = (getattr(api.QuantFormat, binding.weight), getattr(api.QuantFormat, binding.activation))
    assert pair in runner.supported_quant_variants
    assert _extends(config.prepare_weights, binding.prepare_params), _params(config.prepare_weights)
    if binding.activations_by:
        prepare_activations = getattr(api, binding.activations_by).prepare_activations
        assert _extends(prepare_activations, binding.activation_params), _params(prepare_activations)
    assert _params(runner.__init__)[:2] == contract.RUNNER_INIT
    assert _params(runner.pack_inputs)[:2] == contract.RUNNER_PACK_INPUTS
    assert _params(runner.forward)[:2] == contract.RUNNER_FORWARD
    assert callable(runner.check_support) and callable(runner.build)


def test_packs_and_configs_match_flashinfer():
    assert set(contract.MOE_CONFIG_FIELDS) <= set(_params(api.MoEConfig))
    assert set(contract.ROUTING_CONFIG_FIELDS) <= set(_params(api.RoutingConfig))
    assert set(contract.QUANT_CONFIG_FIELDS) <= set(_params(api.QuantConfig))
    assert set(contract.EXPERT_CONFIG_FIELDS) <= set(_params(api.ExpertConfig))
    assert set(contract.EXECUTION_CONFIG_FIELDS) <= set(_params(api.ExecutionConfig))
    assert _params(api.MoEActivationPack)[:4] == contract.ACTIVATION_PACK_FIELDS
    assert _params(api.MoEWeightPack.prepare_for) == contract.WEIGHT_PACK_PREPARE_FOR
    assert "limit" in _params(api.SwiGLU) and all(hasattr(api, cls) for cls in contract.ACTIVATIONS.values())


@pytest.mark.parametrize("backend,scheme_name,binding", CASES, ids=IDS)
def test_kernel_calls_bind_to_flashinfer(backend, scheme_name, binding):
    """Every FlashInfer call a kernel makes binds to the installed signatures (the ones needing a GPU are only bound)."""
    kernel = _kernel(backend, scheme_name)
    fi_config = kernel.flashinfer_config()  # MoEConfig and its sub-configs are constructed for real
    assert isinstance(fi_config, api.MoEConfig) and fi_config.routing.num_experts == CFG.num_experts
    assert [type(c).__name__ for c in fi_config.backend] == [binding.config]
    raw = random_layer(CFG, scheme(scheme_name))
    prepared = MoEKernel.prepare_weights(kernel, raw)  # the core's validation and gate/up order, without FlashInfer's helper
    args, kwargs = kernel.prepare_kwargs(prepared)
    inspect.signature(getattr(api, binding.config).prepare_weights).bind(*args, **kwargs)
    inspect.signature(getattr(fused_moe, binding.runner)).bind(fi_config, torch.device("cuda", 0))
    assert args[0].shape == (CFG.num_experts, 2 * CFG.intermediate_size, CFG.hidden_size)


@pytest.mark.parametrize("backend,scheme_name", [("flashinfer_cutile", "unquantized"), ("flashinfer_cutlass", "unquantized")])
def test_activation_pack_is_built_on_cpu(backend, scheme_name):
    kernel = _kernel(backend, scheme_name)
    x, routing = random_inputs(CFG, 5)
    pack = kernel.activation_pack(x, routing.topk_ids, routing.topk_weights, None)
    assert isinstance(pack, api.MoEActivationPack)
    assert pack.topk_ids.dtype == torch.int32 and pack.topk_weights.dtype == torch.float32 and pack.hidden_states_scale is None


def test_gate_up_swap():
    w13 = torch.arange(2 * 6 * 2, dtype=torch.float32).reshape(2, 6, 2)
    swapped = to_flashinfer_w1(w13)
    assert torch.equal(swapped[:, :3], w13[:, 3:]) and torch.equal(swapped[:, 3:], w13[:, :3])
    assert torch.equal(to_flashinfer_w1(swapped), w13)
    fp8 = w13.to(torch.float8_e4m3fn)
    assert torch.equal(to_flashinfer_w1(fp8).view(torch.uint8), to_flashinfer_w1(fp8.view(torch.uint8)))


def test_cutile_bf16_preparation_round_trip():
    """cuTile consumes [gate; up] transposed to [E, H, 2I]: FlashInfer's helper undoes the binding's swap."""
    kernel = _kernel("flashinfer_cutile", "unquantized")
    raw = random_layer(CFG, scheme("unquantized"))
    prepared = kernel.prepare_weights(raw)
    assert isinstance(prepared, FlashInferWeights) and prepared.prepared_by == "flashinfer_cutile"
    assert torch.equal(prepared.view["w1"].transpose(1, 2), raw.w13)  # gate columns first, as moe-core's rows
    assert torch.equal(prepared.view["w2"].transpose(1, 2), raw.w2)
    assert prepared.pack.get_view(fused_moe.CuTileBf16Runner.backend_key) is prepared.view


def test_cutile_fp8_preparation_round_trip():
    sch = scheme("fp8-tensor-dyn")
    kernel = _kernel("flashinfer_cutile", "fp8-tensor-dyn")
    raw = random_layer(CFG, sch)
    view = kernel.prepare_weights(raw).view
    assert torch.equal(view["w1"].view(torch.uint8), raw.w13.view(torch.uint8))  # cuTile's fp8 layout is gate-first too
    assert torch.equal(view["w1_scale"], raw.w13_scale.reshape(-1)) and torch.equal(view["w2_scale"], raw.w2_scale.reshape(-1))


def test_cutlass_bf16_preparation_keeps_flashinfers_up_gate_rows():
    kernel = _kernel("flashinfer_cutlass", "unquantized")
    raw = random_layer(CFG, scheme("unquantized"))
    view = kernel.prepare_weights(raw).view
    w1 = next(t for t in view.values() if t.dim() == 3 and t.shape[1] == 2 * CFG.intermediate_size)
    assert torch.equal(w1, to_flashinfer_w1(raw.w13))
