"""Scratch buffers that consecutive small forwards reuse instead of allocating (host overhead).

A ``torch.empty`` costs 3-5 µs of host time on the H100 machine and a forward makes about eight of
them. The kernel hands its pieces an ``empty(shape, dtype, device)`` callable: :func:`new_empty`
allocates; :meth:`Scratch.empty` returns the buffer that the same allocation (by order within the
forward) got in the previous forward with the same key.

Reuse is safe because :data:`POOL` keys a :class:`Scratch` by (device, stream, thread, rows, tokens,
layer shape and scheme) and the kernel uses one only for buffers that never leave the forward: work
queued on one stream runs in order, so a forward's reads of a buffer finish before the next forward
on that stream writes it — the same layer's next call or the next layer of the model, which shares
the set (one set per shape, not one per layer). While a CUDA graph is being captured no scratch is
used (the graph gets buffers of its own, and replays may run on any stream).
"""

from __future__ import annotations

from typing import Callable

import torch

from moe_core_triton.threadlog import ThreadLog

#: ``empty(shape, dtype, device)``: an uninitialised tensor.
Empty = Callable[[tuple, torch.dtype, torch.device], torch.Tensor]


_FRESH = ThreadLog()


def new_empty(shape: tuple, dtype: torch.dtype, device: torch.device) -> torch.Tensor:
    """A freshly allocated uninitialised tensor, logged for :func:`fresh_allocations` (a buffer of the forward's own,
    which it hands on or drops; scratch sets allocate theirs unlogged)."""
    tensor = torch.empty(shape, dtype=dtype, device=device)
    _FRESH.add(tensor)
    return tensor


#: ``with fresh_allocations() as tensors:`` every tensor :func:`new_empty` makes on this thread inside the block is
#: appended to ``tensors`` (which keeps it alive, so no other tensor made in the block can take its place). Scratch
#: buffers are not: they outlive the forward.
fresh_allocations = _FRESH.collecting


class Scratch:
    """The buffers of one forward, handed out again, in the same order, to the next one."""

    def __init__(self, pool: ScratchPool | None = None) -> None:
        self._buffers: list[torch.Tensor] = []
        self._specs: list[tuple] = []
        self._next = 0
        self._pool = pool

    @property
    def nbytes(self) -> int:
        """Bytes of the buffers it holds."""
        return sum(buffer.nbytes for buffer in self._buffers)

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
            if self._pool is not None:
                self._pool.generation += 1  # the old buffer goes
            self._buffers[turn] = buffer = torch.empty(shape, dtype=dtype, device=device)
            self._specs[turn] = spec
            return buffer
        buffer = torch.empty(shape, dtype=dtype, device=device)
        self._buffers.append(buffer)
        self._specs.append(spec)
        return buffer

    def holds(self, tensor: torch.Tensor) -> bool:
        """Whether ``tensor`` is one of its buffers."""
        return any(tensor is buffer for buffer in self._buffers)


#: Bytes of scratch the process keeps between forwards (all sets together); a new set that finds more
#: held drops every set first. Forwards whose buffers are large are GPU-bound: they allocate instead.
MAX_HELD_BYTES = 64 << 20


class ScratchPool:
    """The scratch sets of a process, one per key, holding at most about :data:`MAX_HELD_BYTES`.

    ``generation`` counts the times a buffer it handed out was dropped (sets cleared, a buffer reallocated): while
    it stays the same, every buffer handed out since is still held, at the same address (replay.py relies on it)."""

    def __init__(self, max_bytes: int = MAX_HELD_BYTES) -> None:
        self.max_bytes = max_bytes
        self.generation = 0
        self._sets: dict[tuple, Scratch] = {}

    def empty_for(self, key: tuple) -> Empty:
        """The ``empty`` of one forward with this key: its set, rewound (a new set when the key is new)."""
        scratch = self._sets.get(key)
        if scratch is None:
            if self.held_bytes() > self.max_bytes:
                self._sets.clear()
                self.generation += 1
            scratch = self._sets[key] = Scratch(self)
        return scratch.rewind().empty

    def holds(self, tensor: torch.Tensor) -> bool:
        """Whether ``tensor`` is a buffer of one of its sets."""
        return any(scratch.holds(tensor) for scratch in self._sets.values())

    def held_bytes(self) -> int:
        """Bytes held by every set."""
        return sum(scratch.nbytes for scratch in self._sets.values())

    def __len__(self) -> int:
        return len(self._sets)


#: The process's scratch sets, shared by every Triton kernel (a model's layers of one shape share one set).
POOL = ScratchPool()
