"""Hypothesis strategies for configs, quant schemes, platforms, routing and random backend and dispatcher registries."""

from __future__ import annotations

import torch
from hypothesis import strategies as st

from moe_core.config import Activation, MoEConfig, ParallelConfig
from moe_core.platform import PRESETS, DeviceKind, Platform
from moe_core.quant import SCHEMES, QuantScheme
from moe_core.dispatch.spec import DispatchSpec
from moe_core.spec import BackendSpec
from moe_core.testing.fakes import FakeBackend, FakeDispatch, FakeKernel
from moe_core.config import ActivationFormat

BACKEND_NAMES = ("alpha", "bravo", "charlie", "delta", "echo", "foxtrot", "golf", "hotel")
FAMILIES = ("vendor_a", "vendor_b", "vendor_c")


def schemes() -> st.SearchStrategy[QuantScheme]:
    return st.sampled_from(SCHEMES)


def platforms() -> st.SearchStrategy[Platform]:
    return st.sampled_from(sorted(PRESETS.values(), key=lambda p: p.device_name))


def _rarely() -> st.SearchStrategy[bool]:
    return st.sampled_from([False, False, False, True])


@st.composite
def configs(draw, max_experts: int = 64, lora: bool | None = None, clamp: bool | None = None, batched: bool | None = None) -> MoEConfig:
    """Valid MoE configs; pass True/False to pin LoRA, the SwiGLU clamp or the batched format."""
    ep = draw(st.sampled_from([1, 1, 1, 2, 4]))
    experts = ep * draw(st.integers(1, max(1, max_experts // ep)))
    return MoEConfig(
        num_experts=experts,
        top_k=draw(st.integers(1, min(8, experts))),
        hidden_size=draw(st.sampled_from([64, 128, 256, 2048, 7168])),
        intermediate_size=draw(st.sampled_from([64, 128, 768, 2048])),
        dtype=draw(st.sampled_from([torch.bfloat16, torch.float16, torch.float32])),
        activation=draw(st.sampled_from(list(Activation))),
        swiglu_limit=(7.0 if draw(_rarely()) else None) if clamp is None else (7.0 if clamp else None),
        lora_enabled=draw(_rarely()) if lora is None else lora,
        parallel=ParallelConfig(ep_size=ep, use_batched_activation_format=draw(_rarely()) if batched is None else batched),
    )


@st.composite
def fake_backends(draw, names=BACKEND_NAMES, likely_scheme: QuantScheme | None = None, likely_device: DeviceKind | None = None) -> list[FakeBackend]:
    """1..len(names) fake backends with random priorities (ties likely), capabilities and rules.

    ``likely_scheme`` / ``likely_device`` make most backends claim that scheme / device, so that
    properties about successful selections get enough examples.
    """
    chosen = draw(st.lists(st.sampled_from(names), min_size=1, max_size=len(names), unique=True))
    out = []
    for name in chosen:
        claimed = draw(st.lists(schemes(), min_size=1, max_size=5, unique=True))
        if likely_scheme is not None and draw(st.integers(0, 4)):
            claimed.append(likely_scheme)
        devices = draw(st.lists(st.sampled_from(list(DeviceKind)), min_size=1, max_size=3, unique=True))
        if likely_device is not None and draw(st.integers(0, 4)):
            devices.append(likely_device)
        spec = BackendSpec(
            name=name,
            family=draw(st.sampled_from(FAMILIES)),
            priority=draw(st.integers(0, 5)) * 100,
            schemes=claimed,
            kernel=FakeKernel,
            formats=frozenset(draw(st.lists(st.sampled_from(list(ActivationFormat)), min_size=1, unique=True))),
            devices=frozenset(devices),
            supports_lora=draw(st.booleans()),
            applies_swiglu_clamp=draw(st.booleans()),
            supports_expert_map=draw(st.booleans()),
            auto_select=draw(st.sampled_from([True, True, True, False])),
        )
        out.append(
            FakeBackend(
                spec,
                min_capability=draw(st.sampled_from([None, (8, 0), (8, 9), (9, 0), (10, 0)])),
                max_experts=draw(st.sampled_from([None, 16, 64, 256])),
            )
        )
    return out


DISPATCH_NAMES = ("ringo", "paul", "george", "john")


@st.composite
def fake_dispatchers(draw, likely_device: DeviceKind | None = None, min_size: int = 0) -> list[FakeDispatch]:
    """min_size..4 fake dispatchers with random formats, priorities (ties likely), world sizes and rules."""
    chosen = draw(st.lists(st.sampled_from(DISPATCH_NAMES), min_size=min_size, max_size=len(DISPATCH_NAMES), unique=True))
    out = []
    for name in chosen:
        devices = draw(st.lists(st.sampled_from(list(DeviceKind)), min_size=1, max_size=3, unique=True))
        if likely_device is not None and draw(st.integers(0, 4)):
            devices.append(likely_device)
        spec = DispatchSpec(
            name=name,
            family=draw(st.sampled_from(FAMILIES)),
            priority=draw(st.integers(0, 3)) * 100,
            output_format=draw(st.sampled_from(list(ActivationFormat))),
            implementation="moe_core.dispatch.naive:NaiveDispatcher",
            host_sync=draw(st.booleans()),
            cuda_graph_safe=draw(st.booleans()),
            world_sizes=draw(st.sampled_from([frozenset(), frozenset(), frozenset({2, 4}), frozenset({8})])),
            devices=frozenset(devices),
            auto_select=draw(st.sampled_from([True, True, True, False])),
        )
        out.append(FakeDispatch(spec, max_hidden=draw(st.sampled_from([None, None, 256, 4096]))))
    return out
