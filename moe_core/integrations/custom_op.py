"""``moe_core::fused_experts``: the MoE kernel call as a torch custom op.

``torch.compile`` cannot trace a kernel selection, a weight preparation or a Triton launch with
data-dependent shapes, so the op hides all of them: its inputs are the hidden states, the routing
tensors and an integer **handle**; its fake implementation only says "same shape and dtype as the
hidden states". At run time (eager, or inside a compiled graph) the handle names a *layer provider*
registered here, which returns the :class:`~moe_core.layer.MoELayer` to run — preparing it on first
use and whenever the provider's weights changed. Selection and preparation therefore happen inside
the opaque op, never in the traced region; the traced graph holds only the handle, a constant.

The op is inference-only: its backward raises :class:`InferenceOnlyError`.
"""

from __future__ import annotations

import itertools
from typing import Callable

import torch

from moe_core.errors import MoECoreError
from moe_core.layer import MoELayer
from moe_core.routing import Routing

#: A layer provider: ``provider(hidden_states, top_k)`` returns the prepared layer that runs them.
LayerProvider = Callable[[torch.Tensor, int], MoELayer]

#: The handle a caller passes for a layer it never registered. Tracing cannot register one (registration is
#: host bookkeeping), so a traced caller passes this instead of raising: an exception raised while Dynamo traces
#: reaches the user as ``torch._dynamo.exc.Unsupported`` under ``fullgraph=True``, whereas the op's own
#: :class:`NotPreparedError`, raised when the compiled graph runs, reaches the user as itself.
UNPREPARED = 0

_providers: dict[int, LayerProvider] = {}
_next_handle = itertools.count(UNPREPARED + 1)


class UnknownHandleError(MoECoreError, KeyError):
    """``moe_core::fused_experts`` got a handle that no live layer provider holds."""


class NotPreparedError(MoECoreError, RuntimeError):
    """``moe_core::fused_experts`` ran with the :data:`UNPREPARED` handle: its layer was traced before it was registered."""


class InferenceOnlyError(MoECoreError, RuntimeError):
    """A backward pass reached ``moe_core::fused_experts``, which has no gradient."""


def register_provider(provider: LayerProvider) -> int:
    """Register a layer provider; returns the handle to pass to ``moe_core::fused_experts``."""
    handle = next(_next_handle)
    _providers[handle] = provider
    return handle


def release(handle: int) -> None:
    """Forget a provider (and so the prepared weights it holds). Unknown handles are ignored."""
    _providers.pop(handle, None)


def lookup(handle: int | None) -> LayerProvider | None:
    """The provider registered under ``handle``, or None."""
    return _providers.get(handle)


@torch.library.custom_op("moe_core::fused_experts", mutates_args=())
def fused_experts(hidden_states: torch.Tensor, topk_ids: torch.Tensor, topk_weights: torch.Tensor, handle: int) -> torch.Tensor:
    """Run the MoE layer registered under ``handle`` on ``hidden_states`` [T, H] with top-k routing [T, k].

    Returns [T, H] in the hidden states' dtype: the router-weighted sum of each token's experts.
    """
    if handle == UNPREPARED:
        raise NotPreparedError(
            "moe_core::fused_experts ran a layer that was traced before it was registered with moe-core. Register "
            "every layer before compiling: for a transformers model, call moe_core.integrations.transformers.prepare(model) "
            "(or run one eager forward) before torch.compile"
        )
    provider = lookup(handle)
    if provider is None:
        raise UnknownHandleError(
            f"moe_core::fused_experts handle {handle} names no live MoE layer (its module was deleted, "
            "or the handle came from another process). Register the layer again."
        )
    layer = provider(hidden_states, topk_ids.shape[1])
    return layer(hidden_states, Routing(topk_ids=topk_ids, topk_weights=topk_weights))


@fused_experts.register_fake
def _fused_experts_fake(hidden_states, topk_ids, topk_weights, handle):
    return hidden_states.new_empty(hidden_states.shape)


def _no_backward(ctx, grad_output):
    raise InferenceOnlyError(
        "moe_core::fused_experts is inference-only and has no backward. Run the forward under "
        "torch.no_grad() / torch.inference_mode(), or train with another experts implementation."
    )


torch.library.register_autograd("moe_core::fused_experts", _no_backward)
