"""Two micro-batches whose transfers overlap the other one's experts: the schedule of an expert-parallel forward.

Each rank splits its tokens in two halves (the first takes the odd token). On a GPU the four transfers and two
experts calls are ordered so that a transfer always has the other micro-batch's experts beside it::

    caller's stream:  dispatch 0 | experts 0              | experts 1 | combine 1
    side stream:                 | dispatch 1 | combine 0 |

Every rank issues the transfers in the same order (dispatch 0, dispatch 1, combine 0, combine 1), as collectives
require. Each micro-batch has a dispatcher of its own, built for half the tokens, so the two never share a buffer.
Off GPUs the same schedule runs on one stream: the result is the same, nothing overlaps.

Tensors made on one stream and read on the other live until the forward has joined the side stream back into the
caller's (the caching allocator cannot see a use on another stream), and the side stream waits for the caller's
before each of its two steps, so a later forward never reuses memory still being read.
"""

from __future__ import annotations

import contextlib
import dataclasses
from typing import Callable

import torch

from moe_core.dispatch.base import Dispatched, Dispatcher, ExpertParallelGroup
from moe_core.errors import InvalidConfigError
from moe_core.routing import Routing

Experts = Callable[[Dispatched], torch.Tensor]

def micro_batches(group: ExpertParallelGroup, dispatcher: Dispatcher) -> int:
    """How many micro-batches a forward of ``group``'s layer runs with ``dispatcher``: the group's choice, after
    checking that the dispatcher allows two (:attr:`~moe_core.dispatch.base.Dispatcher.micro_batch_safe`)."""
    if group.micro_batches == 2 and not dispatcher.micro_batch_safe:
        raise InvalidConfigError(
            f"ExpertParallelGroup.micro_batches=2 needs a dispatcher whose instances own their buffers; "
            f"{type(dispatcher).__name__} shares one between instances: use micro_batches=1 or another dispatcher")
    return group.micro_batches


def half_group(group: ExpertParallelGroup) -> ExpertParallelGroup:
    """The group one micro-batch's dispatcher is built for: half the tokens per rank (rounded up), run whole."""
    limit = group.max_tokens_per_rank
    return dataclasses.replace(group, max_tokens_per_rank=None if limit is None else -(-limit // 2), micro_batches=1)


class MicroBatchOverlap:
    """Runs one expert-parallel forward as two overlapped micro-batches over ``first`` and ``second``, two
    dispatchers of the same kind whose buffers each hold half of the layer's tokens per rank."""

    def __init__(self, first: Dispatcher, second: Dispatcher):
        self.dispatchers = (first, second)
        self._side: dict[torch.device, torch.cuda.Stream] = {}

    def side_stream(self, device: torch.device):
        """The stream micro-batch 1's dispatch and micro-batch 0's combine run on (None off GPUs)."""
        if device.type != "cuda":
            return None
        found = self._side.get(device)
        if found is None:
            # High priority: its kernels take SMs as the experts' blocks retire instead of queuing behind all of them.
            found = self._side[device] = torch.cuda.Stream(device, priority=-1)
        return found

    def __call__(self, hidden_states: torch.Tensor, routing: Routing, experts: Experts) -> torch.Tensor:
        """This rank's output [T, H]: the two halves' combined results, in token order."""
        first, second = self.dispatchers
        cut = (hidden_states.shape[0] + 1) // 2
        halves = [(hidden_states[:cut], _rows(routing, slice(0, cut))), (hidden_states[cut:], _rows(routing, slice(cut, None)))]
        side = self.side_stream(hidden_states.device)
        main = torch.cuda.current_stream(hidden_states.device) if side is not None else None

        def on_side():
            if side is None:
                return contextlib.nullcontext()
            side.wait_stream(main)  # whatever the side step reads was written on the caller's stream before
            return torch.cuda.stream(side)

        sent0 = first.dispatch(*halves[0])
        with on_side():
            sent1 = second.dispatch(*halves[1])
            arrived1 = side.record_event() if side is not None else None
        out0 = experts(sent0)
        with on_side():
            combined0 = first.combine(out0, sent0)
        if arrived1 is not None:
            main.wait_event(arrived1)
        out1 = experts(sent1)
        combined1 = second.combine(out1, sent1)
        if side is not None:
            main.wait_stream(side)
        return torch.cat((combined0, combined1))


def _rows(routing: Routing, rows: slice) -> Routing:
    return Routing(routing.topk_ids[rows], routing.topk_weights[rows])
