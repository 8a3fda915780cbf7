"""One prepared moe-core layer per transformers experts module, found by an integer handle.

:func:`handle` gives each experts module a handle (stored on the module as ``_moe_core_handle``)
whose provider, :class:`PreparedExperts`, builds the :class:`~moe_core.layer.MoELayer` — selection
plus one-time weight preparation — at the first call, and again whenever the call's dtype, device or
top-k changes or a weight tensor was replaced or written in place (keyed on each tensor's identity,
storage address and version counter). Writes through ``.data`` bypass the version counter and are
not seen. The handle lives as long as the module; deleting the module frees its prepared weights.
"""

from __future__ import annotations

import weakref

import torch
from torch import nn

from moe_core.config import AUTO
from moe_core.integrations import custom_op
from moe_core.integrations.transformers.layout import ExpertsLayout, describe
from moe_core.layer import MoELayer

ATTRIBUTE = "_moe_core_handle"

#: Backend requested for every experts module (``"auto"``: moe-core's selection); see ``register()``.
_backend = {"moe_backend": AUTO}


def set_backend(moe_backend: str) -> None:
    """Request one backend for every experts module (``"auto"`` lets moe-core select); layers re-prepare on their next call."""
    _backend["moe_backend"] = moe_backend


class PreparedExperts:
    """Layer provider of one experts module: prepares lazily, re-prepares when its weights change."""

    def __init__(self, module: nn.Module, layout: ExpertsLayout):
        self._module = weakref.ref(module)
        self.layout = layout
        self.layer: MoELayer | None = None
        self._key: tuple | None = None
        self._sources: tuple[torch.Tensor, ...] = ()  # keeps the keyed storages alive, so no address is reused

    def reset(self) -> None:
        self.layer, self._key, self._sources = None, None, ()

    def __call__(self, hidden_states: torch.Tensor, top_k: int) -> MoELayer:
        module = self._module()
        sources = self.layout.sources(module)
        key = (hidden_states.dtype, hidden_states.device, top_k, _backend["moe_backend"],
               tuple((id(t), t.data_ptr(), t._version) for t in sources))
        if key != self._key:
            self.reset()  # free the old prepared weights before building new ones
            config = self.layout.config(top_k, hidden_states.dtype, _backend["moe_backend"])
            weights = self.layout.weights(module, hidden_states.dtype)
            self.layer = MoELayer(config, weights, self.layout.weight_key, self.layout.activation_key)
            self._key, self._sources = key, tuple(t.detach() for t in sources)
        return self.layer


def handle(module: nn.Module) -> int:
    """The module's handle, registering it (after checking moe-core can run it) on first use.

    Raises :class:`~moe_core.integrations.transformers.layout.UnsupportedExpertsError` with every
    reason when moe-core cannot run the module.
    """
    value = module.__dict__.get(ATTRIBUTE)
    if _provider_of(module) is not None:
        return value
    value = custom_op.register_provider(PreparedExperts(module, describe(module)))  # a deepcopy gets its own
    weakref.finalize(module, custom_op.release, value)
    module.__dict__[ATTRIBUTE] = value
    return value


def prepared_layer(module: nn.Module) -> MoELayer | None:
    """The MoELayer last prepared for ``module`` (its ``selection.explain()`` says which backend and why)."""
    provider = _provider_of(module)
    return None if provider is None else provider.layer


def _provider_of(module: nn.Module) -> PreparedExperts | None:
    provider = custom_op.lookup(module.__dict__.get(ATTRIBUTE))
    return provider if isinstance(provider, PreparedExperts) and provider._module() is module else None
