"""moe-core as a Hugging Face transformers experts implementation.

::

    from moe_core.integrations import transformers as moe_core_hf

    moe_core_hf.register()
    model = AutoModelForCausalLM.from_pretrained(name, experts_implementation="moe_core")
    # or, on a loaded model: model.set_experts_implementation("moe_core")

Every experts module then runs through the torch custom op ``moe_core::fused_experts`` on the
backend moe-core selects for it (the torch reference on a CPU). See docs/integrations.md for what
is supported, the error cases, and how ``torch.compile(model, fullgraph=True)`` traces through.
Requires the ``transformers`` extra: ``pip install moe-core[transformers]``.
"""

from __future__ import annotations

import torch
from torch import nn

try:
    from transformers.integrations.finegrained_fp8 import FP8ExpertsInterface
    from transformers.integrations.moe import ExpertsInterface
except ImportError as exc:  # pragma: no cover - exercised only without the extra
    raise ImportError("moe_core.integrations.transformers needs transformers: pip install 'moe-core[transformers]'") from exc

from moe_core.config import AUTO
from moe_core.integrations import custom_op
from moe_core.integrations.custom_op import NotPreparedError
from moe_core.integrations.transformers import prepared
from moe_core.integrations.transformers.layout import ExpertsLayout, UnsupportedExpertsError, describe
from moe_core.integrations.transformers.prepared import prepared_layer

#: The name to pass as ``experts_implementation``.
EXPERTS_IMPLEMENTATION = "moe_core"

__all__ = [
    "EXPERTS_IMPLEMENTATION", "ExpertsLayout", "NotPreparedError", "UnsupportedExpertsError", "describe", "experts_forward",
    "prepare", "prepared_layer", "register",
]


def register(moe_backend: str = AUTO) -> None:
    """Add ``"moe_core"`` to transformers' experts implementations (plain and fine-grained fp8).

    ``moe_backend``: ``"auto"`` (moe-core's ranked selection, environment overrides included) or the
    name of one registered backend to use for every experts module. Calling again changes it.
    """
    prepared.set_backend(moe_backend)
    ExpertsInterface.register(EXPERTS_IMPLEMENTATION, experts_forward)
    FP8ExpertsInterface.register(EXPERTS_IMPLEMENTATION, experts_forward)


def prepare(model: nn.Module) -> int:
    """Register every experts module of ``model`` with moe-core; returns how many.

    Eager calls register their module on first use; ``torch.compile`` cannot (registration is host
    bookkeeping, not tensor work), so call this once before compiling a model that has not run an
    eager forward with ``experts_implementation="moe_core"``. Raises
    :class:`UnsupportedExpertsError` for the first experts module moe-core cannot run.
    """
    experts = [m for m in model.modules() if isinstance(getattr(m, "gate_up_proj", None), torch.Tensor)]
    for module in experts:
        prepared.handle(module)
    return len(experts)


def experts_forward(self: nn.Module, hidden_states: torch.Tensor, top_k_index: torch.Tensor, top_k_weights: torch.Tensor) -> torch.Tensor:
    """transformers' experts forward contract: ``hidden_states`` [T, H], ``top_k_index`` and
    ``top_k_weights`` [T, k]; returns [T, H], the router-weighted sum of each token's experts."""
    if not torch.compiler.is_compiling():
        prepared.handle(self)  # checks the module and registers it on first use: plain Python, never traced
    # An int attribute: a compiled graph holds it as a guarded constant. A module traced before prepare() has none;
    # the op then raises NotPreparedError when the graph runs (raising here, under Dynamo, would not reach the user
    # as itself: fullgraph=True turns it into torch._dynamo.exc.Unsupported).
    handle = getattr(self, prepared.ATTRIBUTE, custom_op.UNPREPARED)
    return custom_op.fused_experts(hidden_states, top_k_index, top_k_weights, handle)
