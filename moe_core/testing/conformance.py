"""Conformance checks every plugin package runs from its own tests.

Plain functions that raise ``AssertionError`` with a message naming the backend and the case::

    from moe_core.testing import conformance

    def test_conformance():
        reg = conformance.registry_with("acme_moe.plugin", name="acme")
        conformance.check_specs(reg, "acme")
        conformance.check_supports(reg, "acme")

    def test_numerics():
        conformance.check_numerics(reg, "acme", device="cpu")

* :func:`check_specs`: unique lowercase names, a loadable kernel class that subclasses
  :class:`~moe_core.kernel.MoEKernel` and names its backend.
* :func:`check_supports`: supports() is total (never raises, always a Support), deterministic,
  gives reasons when it says no, and every declared scheme and format is accepted somewhere
  (on some simulated platform and config), so the declaration is not a lie.
* :func:`check_numerics`: every scheme the backend claims matches the reference backend on
  random problems on the device at hand, within the budgets of :mod:`moe_core.numerics`; every declared
  scheme must run at least one case.
* :func:`check_against_reference`: one kernel call on hand-made inputs (odd sizes, empty experts,
  an expert map) against the reference kernel on the same weights.
* :func:`check_graph_replay`: one call captured in a CUDA graph, replayed on new inputs, against
  the reference (GPU).
* :func:`check_robustness` (from :mod:`moe_core.testing.robustness`): invalid routing and NaN/inf
  values never crash the backend or poison the device, and invalid routing is reported.
"""

from __future__ import annotations

import dataclasses
import importlib
import itertools
from typing import Iterable

import torch

from moe_core.config import Activation, ActivationFormat, MoEConfig, ParallelConfig
from moe_core.kernel import MoEKernel
from moe_core.platform import PRESETS, Platform
from moe_core.presets import random_inputs, random_layer
from moe_core.quant import scheme, scheme_for_keys
from moe_core.reference.kernel import ReferenceKernel
from moe_core.registry import Registry
from moe_core.batched import combine, dispatch
from moe_core.spec import BackendSpec, SupportQuery
from moe_core.support import Support
from moe_core.numerics import layer_tolerance, relative_error
from moe_core.testing.robustness import check_robustness  # noqa: F401 - part of the kit's surface

def registry_with(module: str, name: str) -> Registry:
    """A registry holding the built-in reference backend and one plugin module, nothing else."""
    reg = Registry(autoload=False, environ={})
    reg.register(importlib.import_module(module), name=name)
    return reg


def _specs(reg: Registry, plugin: str) -> list[BackendSpec]:
    specs = [s for s in reg.specs.values() if s.plugin == plugin]
    assert specs, f"plugin {plugin!r} registered no backend (problems: {[str(p) for p in reg.problems]})"
    return specs


def check_specs(reg: Registry, plugin: str) -> None:
    """Spec sanity for every backend of ``plugin``."""
    problems = [str(p) for p in reg.problems if p.plugin == plugin]
    assert not problems, f"plugin {plugin!r} misbehaved: {problems}"
    for spec in _specs(reg, plugin):
        kernel = spec.load_kernel()
        assert isinstance(kernel, type) and issubclass(kernel, MoEKernel), f"{spec.name}: kernel {kernel!r} is not a MoEKernel subclass"
        assert kernel.backend_name == spec.name, f"{spec.name}: {kernel.__name__}.backend_name is {kernel.backend_name!r}"
        if spec.batched_variant is not None:
            assert spec.batched_variant in reg.specs, f"{spec.name}: batched_variant {spec.batched_variant!r} is not registered"


def sample_configs() -> list[MoEConfig]:
    """A small grid of layers covering dtypes, activations, LoRA, clamp, EP and both formats."""
    out = []
    for dtype, act, fmt, lora, clamp, ep in itertools.product(
        (torch.bfloat16, torch.float16), (Activation.SILU, Activation.GELU), ActivationFormat, (False, True), (None, 7.0), (1, 2)
    ):
        out.append(MoEConfig(
            num_experts=64, top_k=4, hidden_size=2048, intermediate_size=768, dtype=dtype, activation=act,
            swiglu_limit=clamp, lora_enabled=lora,
            parallel=ParallelConfig(ep_size=ep, use_batched_activation_format=fmt is ActivationFormat.BATCHED_EXPERTS),
        ))
    return out


def check_supports(reg: Registry, plugin: str, platforms: Iterable[Platform] | None = None) -> None:
    """supports() is total, deterministic, explains every "no", and accepts every declared scheme and format somewhere."""
    platforms = list(PRESETS.values()) if platforms is None else list(platforms)
    configs = sample_configs()
    for spec in _specs(reg, plugin):
        accepted_schemes, accepted_formats = set(), set()
        for (wkey, akey), cfg, plat in itertools.product(sorted(spec.schemes, key=str), configs, platforms):
            query = SupportQuery(cfg, wkey, akey, plat)
            first = reg.supports(spec, query)
            assert isinstance(first, Support), f"{spec.name}: supports returned {first!r}"
            assert first == reg.supports(spec, query), f"{spec.name}: supports is not deterministic for {query}"
            assert first.ok or first.reasons, f"{spec.name}: a 'no' without reasons for {query}"
            assert not any(p.plugin == plugin and p.stage == "moe_core_supports" for p in reg.problems), (
                f"{spec.name}: supports raised or returned garbage: {[str(p) for p in reg.problems]}"
            )
            if first.ok:
                accepted_schemes.add((wkey, akey))
                accepted_formats.add(cfg.activation_format)
        never = [str(scheme_for_keys(*k).name if scheme_for_keys(*k) else k) for k in spec.schemes - accepted_schemes]
        assert not never, f"{spec.name}: declares schemes it never accepts on any platform: {never}"
        assert accepted_formats == set(spec.formats), f"{spec.name}: declares formats {sorted(f.value for f in spec.formats)} but accepts only {sorted(f.value for f in accepted_formats)}"


def check_against_reference(kernel_cls: type[MoEKernel], cfg: MoEConfig, scheme_name: str, x: torch.Tensor, routing, expert_map=None) -> float:
    """One call of ``kernel_cls`` and of the reference kernel on the same random weights, on ``x``'s device.

    For hand-made inputs (odd sizes, empty experts, an expert map) beside :func:`check_numerics`;
    raises AssertionError above the scheme's tolerance and returns the relative error.
    """
    sch = scheme(scheme_name)
    kernel, oracle = kernel_cls(cfg, sch.weight_key, sch.activation_key), ReferenceKernel(cfg, sch.weight_key, sch.activation_key)
    raw = random_layer(cfg, sch, device=x.device)
    got = kernel.apply(x, kernel.prepare_weights(raw), routing, expert_map=expert_map)
    want = oracle.apply(x, oracle.prepare_weights(raw), routing, expert_map=expert_map)
    err = relative_error(got, want)
    assert err <= layer_tolerance(sch.activation_key, cfg), f"{kernel_cls.__name__} {scheme_name}: rel. error {err:.3g} vs the reference"
    return err


def check_graph_replay(kernel_cls: type[MoEKernel], cfg: MoEConfig, scheme_name: str, tokens: int = 4) -> float:
    """Capture one call of ``kernel_cls`` in a CUDA graph, copy new inputs into the captured tensors, replay, and
    compare with the reference kernel on those inputs (GPU only). Returns the relative error; raises
    AssertionError above the tolerance or when the replay did not read the new inputs."""
    sch = scheme(scheme_name)
    raw = random_layer(cfg, sch, device="cuda")
    kernel = kernel_cls(cfg, sch.weight_key, sch.activation_key)
    weights = kernel.prepare_weights(raw)
    x, routing = random_inputs(cfg, tokens, device="cuda")
    first = kernel.apply(x, weights, routing)  # warm-up: compiles, allocates workspaces
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        out = kernel.apply(x, weights, routing)
    x2, routing2 = random_inputs(cfg, tokens, device="cuda", seed=9)
    x.copy_(x2), routing.topk_ids.copy_(routing2.topk_ids), routing.topk_weights.copy_(routing2.topk_weights)
    graph.replay()
    oracle = ReferenceKernel(cfg, sch.weight_key, sch.activation_key)
    err = relative_error(out, oracle.apply(x2, oracle.prepare_weights(raw), routing2))
    assert err <= layer_tolerance(sch.activation_key, cfg), f"{kernel_cls.__name__} {scheme_name}: graph replay rel. error {err:.3g}"
    assert not torch.equal(out, first), f"{kernel_cls.__name__}: the replay returned the captured call's result, not the new inputs'"
    return err


def check_numerics(
    reg: Registry,
    backend: str,
    *,
    device: str | None = None,
    platform: Platform | None = None,
    configs: Iterable[MoEConfig] | None = None,
    tokens: Iterable[int] = (1, 7, 33),
    seed: int = 0,
    expected_skips: Iterable[str] = (),
    schemes: Iterable[str] | None = None,
) -> list[dict]:
    """Every scheme ``backend`` declares (or those of them named in ``schemes``), against the reference on
    random problems.

    Returns one record per case (scheme, tokens, error, tolerance) for reporting. Cases whose
    supports() says no on this platform are skipped (and listed with their reason), but every
    declared scheme must run at least one case (over ``configs`` and formats) unless it is named
    in ``expected_skips``: a declaration no numeric case checked is not conformance.
    """
    device = device or ("cuda" if torch.cuda.is_available() else "cpu")
    from moe_core.resolver import current_platform

    platform = platform or current_platform()
    spec = reg.specs[backend]
    configs = list(configs) if configs is not None else [
        MoEConfig(num_experts=8, top_k=2, hidden_size=256, intermediate_size=128, dtype=torch.float16),
    ]
    declared = sorted(spec.schemes, key=str)
    if schemes is not None:
        wanted = set(schemes)
        names = {getattr(scheme_for_keys(*keys), "name", None) for keys in declared}
        assert wanted <= names, f"{backend}: schemes={sorted(wanted - names)} are not declared; it declares {sorted(n for n in names if n)}"
        declared = [keys for keys in declared if scheme_for_keys(*keys).name in wanted]
    records = []
    for (wkey, akey), base in itertools.product(declared, configs):
        sch = scheme_for_keys(wkey, akey)
        assert sch is not None, f"{backend}: only canonical schemes can be checked, got {wkey} / {akey}"
        for fmt in sorted(spec.formats, key=lambda f: f.value):
            cfg = dataclasses.replace(base, parallel=ParallelConfig(use_batched_activation_format=fmt is ActivationFormat.BATCHED_EXPERTS))
            verdict = reg.supports(spec, SupportQuery(cfg, wkey, akey, platform))
            if not verdict.ok:
                records.append({"scheme": sch.name, "format": fmt.value, "skipped": verdict.explain()})
                continue
            kernel = spec.load_kernel()(cfg, wkey, akey)
            oracle = ReferenceKernel(cfg, wkey, akey)
            raw = random_layer(cfg, sch, device=device, seed=seed)
            weights, ref_weights = kernel.prepare_weights(raw), oracle.prepare_weights(raw)
            for t in tokens:
                x, routing = random_inputs(cfg, t, device=device, seed=seed + t)
                if fmt is ActivationFormat.BATCHED_EXPERTS:
                    xb, brouting, layout = dispatch(x, routing, cfg.num_experts)
                    got = combine(kernel.apply(xb, weights, brouting), layout, routing)
                    want = combine(oracle.apply(xb, ref_weights, brouting), layout, routing)
                else:
                    got = kernel.apply(x, weights, routing)
                    want = oracle.apply(x, ref_weights, routing)
                assert got.shape == want.shape and got.dtype == want.dtype, f"{backend} {sch.name}: output {got.shape} {got.dtype}, expected {want.shape} {want.dtype}"
                err = relative_error(got, want)
                tol = layer_tolerance(akey, cfg)
                records.append({"scheme": sch.name, "format": fmt.value, "tokens": t, "rel_err": err, "tolerance": tol})
                assert err <= tol, f"{backend} {sch.name} {fmt.value} T={t}: relative error {err:.3g} > {tol:.3g}"
    _assert_every_scheme_ran(backend, records, set(expected_skips))
    return records


def _assert_every_scheme_ran(backend: str, records: list[dict], expected_skips: set[str]) -> None:
    ran = {r["scheme"] for r in records if "rel_err" in r}
    unchecked = sorted({r["scheme"] for r in records} - ran - expected_skips)
    reasons = sorted({f"{r['scheme']}: {r['skipped']}" for r in records if r["scheme"] in unchecked})
    assert not unchecked, (
        f"{backend}: declares {unchecked} but no numeric case ran for them here ({'; '.join(reasons)}). "
        "Pass configs and a platform where they run, or name them in expected_skips= if this platform cannot run them"
    )


def validation_line(records: list[dict], package: str) -> str:
    """After :func:`check_numerics` passed on this GPU: the facts for a backend's ``Validation`` record
    (device, the provider's distribution and version, date, schemes run and skipped) on one line.
    Raises AssertionError when no scheme ran, which would validate nothing."""
    import datetime

    from moe_core.platform import package_versions

    ran = sorted({r["scheme"] for r in records if "skipped" not in r})
    assert ran, f"no scheme ran: {records}"
    skipped = [(r["scheme"], r["skipped"]) for r in records if "skipped" in r]
    return f"validated: {torch.cuda.get_device_name()}, {package_versions(package)}, {datetime.date.today()}: {ran} skipped: {skipped}"
