"""moe-core: a plugin registry for fused Mixture-of-Experts GPU kernels.

Describe a layer (:class:`MoEConfig`, quant keys), ask :func:`select` which backend should run it
and why (:func:`select_pair` for expert-parallel layers: dispatcher and experts together), and run
it with :class:`MoELayer`. Plugins register backends through the
``moe_core.plugins`` entry-point group (see docs/plugin-authoring.md).
"""

from moe_core import quant as schemes
from moe_core.config import AUTO, Activation, ActivationFormat, MoEConfig, ParallelConfig
from moe_core.dispatch import Dispatcher, DispatchSpec, ExpertCapacityError, ExpertParallelGroup
from moe_core.errors import (
    BackendUnsupportedError,
    InvalidConfigError,
    InvalidEnvironmentError,
    KernelInputError,
    MoECoreError,
    NoBackendError,
    UnknownBackendError,
)
from moe_core.hookspecs import hookimpl
from moe_core.kernel import MoEKernel
from moe_core.layer import MoELayer
from moe_core.pair import PairSelection, select_pair
from moe_core.platform import DeviceKind, Platform
from moe_core.quant import QuantFamily, QuantKey, QuantScheme
from moe_core.registry import Registry, default_registry
from moe_core.resolver import select
from moe_core.routing import BatchedRouting, Routing
from moe_core.selection import Candidate, CandidateStatus, Selection, SelectionSource
from moe_core.spec import BackendSpec, SupportQuery
from moe_core.support import Support
from moe_core.weights import ExpertWeights, GateUpOrder, quantize_experts

__all__ = [
    "AUTO", "Activation", "ActivationFormat", "BackendSpec", "BackendUnsupportedError", "BatchedRouting",
    "Candidate", "CandidateStatus", "DeviceKind", "DispatchSpec", "Dispatcher", "ExpertCapacityError",
    "ExpertParallelGroup", "ExpertWeights", "GateUpOrder", "InvalidConfigError",
    "InvalidEnvironmentError", "KernelInputError", "MoECoreError", "MoEConfig", "MoEKernel", "MoELayer",
    "NoBackendError", "PairSelection", "ParallelConfig", "Platform", "QuantFamily", "QuantKey", "QuantScheme",
    "Registry", "Routing", "Selection", "SelectionSource", "Support", "SupportQuery", "UnknownBackendError",
    "default_registry", "hookimpl", "quantize_experts", "schemes", "select", "select_pair",
]
