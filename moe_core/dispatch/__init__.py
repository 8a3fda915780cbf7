"""Expert parallelism: dispatch/combine backends, declared by plugins and selected with the experts backend."""

from moe_core.dispatch.base import Dispatched, Dispatcher, ExpertCapacityError, ExpertParallelGroup
from moe_core.dispatch.spec import DispatchSpec

__all__ = ["DispatchSpec", "Dispatched", "Dispatcher", "ExpertCapacityError", "ExpertParallelGroup"]
