"""Scratch buffers that consecutive small forwards reuse instead of allocating (host overhead, issue 12).

A ``torch.empty`` costs 3-5 µs of host time on the H100 machine and a one-token forward makes
about seven of them. The kernel hands its pieces an ``empty(shape, dtype, device)`` callable:
:func:`new_empty` allocates; :meth:`Scratch.empty` returns the buffer that the same allocation
(by order within the forward) got in the previous forward with the same key.

Reuse is safe because the kernel keys a :class:`Scratch` by (device, stream, thread, rows,
tokens) and uses one only for buffers that never leave the forward: work queued on one stream
runs in order, so a forward's reads of a buffer finish before the next forward on that stream
writes it. While a CUDA graph is being captured no scratch is used (the graph gets buffers of
its own, and replays may run on any stream).
"""

from __future__ import annotations

from typing import Callable

import torch

#: ``empty(shape, dtype, device)``: an uninitialised tensor.
Empty = Callable[[tuple, torch.dtype, torch.device], torch.Tensor]


def new_empty(shape: tuple, dtype: torch.dtype, device: torch.device) -> torch.Tensor:
    """A freshly allocated uninitialised tensor."""
    return torch.empty(shape, dtype=dtype, device=device)


class Scratch:
    """The buffers of one forward, handed out again, in the same order, to the next one."""

    def __init__(self) -> None:
        self._buffers: list[torch.Tensor] = []
        self._specs: list[tuple] = []
        self._next = 0

    def rewind(self) -> Scratch:
        """Start a forward: the next :meth:`empty` returns the first buffer again."""
        self._next = 0
        return self

    def empty(self, shape: tuple, dtype: torch.dtype, device: torch.device) -> torch.Tensor:
        """The buffer of this allocation's turn, reallocated if its shape, dtype or device differ."""
        turn = self._next
        self._next = turn + 1
        spec = (shape, dtype, device)
        if turn < len(self._buffers):
            if self._specs[turn] == spec:
                return self._buffers[turn]
            self._buffers[turn] = buffer = new_empty(shape, dtype, device)
            self._specs[turn] = spec
            return buffer
        buffer = new_empty(shape, dtype, device)
        self._buffers.append(buffer)
        self._specs.append(spec)
        return buffer
