"""Eager forwards replayed from a record of their launches (host overhead).

An eager forward costs host time that a CUDA graph's replay does not: launch configs, scratch buffers, the routing's
table, argument lists of 39 values and each launch's key, rebuilt every call. On the H100 machine that is 70-150 µs
for a 1-token forward of Qwen3-30B-A3B, whose GPU work takes about 37 µs. Two forwards of one layer with one
*signature* (kernel.py: device, stream, thread, token count, the inputs' dtypes and strides, an expert map or not)
launch the same kernels with the same arguments, except the data pointers of their inputs, their output and the
buffers they allocate. So the kernel records the launches of one such forward
(:func:`~moe_core_triton.launch.recording`), and while the record stays valid, a later forward with that signature
allocates its output and buffers and makes the recorded launches with its own pointers (:class:`Replay`): compiled
launches with plain integers in place of tensors, which also spares the launcher a pointer query per tensor.
kernel.py records the second eager standard-format forward of each signature on a GPU (a forward seen once pays for
no record).

A record is made only when every tensor argument of every launch is one of:

- an input of the forward (hidden states, top-k ids, top-k weights, expert map) or its output: a *slot*, whose
  pointer each call fills in;
- a tensor of the layer's ExpertWeights: valid while the weights are the same object and each tensor keeps its data
  pointer;
- a scratch buffer (:mod:`moe_core_triton.scratch`): valid while the pool's ``generation`` does not change;
- words that launches leave ready for the next one on their stream (:func:`~moe_core_triton.blocks.kept_words`, the
  routing error counter's buffer): the record holds them, so their memory is never reused while it may launch them;
- an uninitialised buffer the forward allocated (:func:`~moe_core_triton.scratch.new_empty`, seen through
  :func:`~moe_core_triton.scratch.fresh_allocations`): each call allocates its own, alike, as the output.

A tensor descriptor (triton's or Gluon's) must be of a weight tensor; each call makes it anew, of its class, for the
weights it is given (a record holds no descriptor, which would keep the weights alive). Every launch must be direct
(:meth:`~moe_core_triton.launch.Launcher.direct`), and the output must be an argument of a launch. A forward whose GPU work includes any other tensor (a zeroed buffer, a copy
of a strided input) therefore gets no record. A torch operation that changes a buffer in place cannot be seen here;
kernel.py makes none in a forward it records (split-K sums are zeroed and cast by launches: moe_core_triton.reduce).
"""

from __future__ import annotations

import contextlib
import weakref
from dataclasses import dataclass, fields
from typing import Callable

import torch
from moe_core.weights import ExpertWeights
from moe_core_triton.blocks import kept_words
from moe_core_triton.launch import DESCRIPTORS, hooks_idle
from moe_core_triton.scratch import POOL

#: The slots of a replayed forward, in the order :meth:`Replay.record` and :meth:`Replay.__call__` take them; the
#: forward's fresh buffers follow, in the order its launches first take them.
SLOTS = ("hidden_states", "topk_ids", "topk_weights", "expert_map", "output")
OUTPUT = SLOTS.index("output")
#: Launch arguments other than tensors that a record keeps as they are (scalars, and None for an absent constexpr).
_PLAIN = (int, float, bool, type(None))
#: Argument position of the stream in a direct launch: ``fn(grid x, grid y, grid z, stream, ...)``.
_STREAM = 3


@dataclass(frozen=True)
class _Step:
    """One recorded launch: ``fn(*call)``, with the stream, the slots' pointers and the weights' descriptors filled in
    first."""

    fn: Callable
    call: tuple
    slots: tuple[tuple[int, int], ...]  # (position in call, slot)
    descriptors: tuple[tuple[int, str, type, dict], ...] = ()  # (position in call, weight field, its class, its other fields)


class Replay:
    """The launches of one recorded forward, made again for another forward with the same signature."""

    def __init__(self, steps: tuple[_Step, ...], weights: ExpertWeights, weight_pointers: dict[str, int],
                 allocations: list[torch.Tensor], held: list[torch.Tensor]):
        self._steps = steps
        self._weights = weakref.ref(weights)  # never keeps a layer's weights alive
        self._weight_fields = tuple(weight_pointers)
        self._weight_pointers = tuple(weight_pointers.values())
        self._allocations = tuple((tuple(t.shape), t.dtype, t.device) for t in allocations)  # the output, then fresh buffers
        self._generation = POOL.generation
        self._held = held

    @classmethod
    def record(cls, launches: list, weights: ExpertWeights, inputs: tuple, output: torch.Tensor, kept: tuple = (),
               fresh: list[torch.Tensor] = ()) -> Replay | None:
        """The replay of a forward that made ``launches`` (from :func:`~moe_core_triton.launch.recording`) with ``weights``
        and ``inputs`` (hidden states, top-k ids, top-k weights, the expert map or None) and returned ``output``; ``kept``:
        other tensors its launches may take again (the routing error counter's buffer); ``fresh``: the uninitialised
        buffers it allocated (from :func:`~moe_core_triton.scratch.fresh_allocations`). None where such a forward cannot
        be replayed (see the module docstring)."""
        slot_of = {id(t): slot for slot, t in enumerate((*inputs, output)) if t is not None}
        field_of = {id(t): name for name, t in _tensor_fields(weights)}
        kept_ids, fresh_ids = {id(t) for t in kept}, {id(t) for t in fresh}
        weight_pointers: dict[str, int] = {}
        allocations, held, steps = [output], [], []
        for launcher, grid, args in launches:
            direct = launcher.direct(grid, args)
            if direct is None:
                return None
            call, slots, descriptors = [*direct.grid, 0, *direct.head], [], []
            for arg in args:
                if isinstance(arg, DESCRIPTORS):
                    name = field_of.get(id(arg.base))
                    if name is None:
                        return None
                    weight_pointers[name] = arg.base.data_ptr()
                    descriptors.append((len(call), name, type(arg), {f.name: getattr(arg, f.name) for f in fields(arg) if f.name != "base"}))
                    call.append(None)
                    continue
                if not isinstance(arg, torch.Tensor):
                    if type(arg) not in _PLAIN:
                        return None
                    call.append(arg)
                    continue
                slot = slot_of.get(id(arg))
                if slot is None and id(arg) in fresh_ids:
                    slot = slot_of[id(arg)] = len(inputs) + len(allocations)
                    allocations.append(arg)
                if slot is not None:
                    slots.append((len(call), slot))
                    call.append(0)
                    continue
                name = field_of.get(id(arg))
                if name is not None:
                    weight_pointers[name] = arg.data_ptr()
                elif id(arg) in kept_ids or kept_words(arg):
                    held.append(arg)
                elif not POOL.holds(arg):
                    return None
                call.append(arg.data_ptr())
            steps.append(_Step(direct.fn, (*call, *direct.tail), tuple(slots), tuple(descriptors)))
        if not any(slot == OUTPUT for step in steps for _, slot in step.slots):
            return None
        return cls(tuple(steps), weights, weight_pointers, allocations, held)

    def __call__(self, weights: ExpertWeights, inputs: tuple, stream: int) -> torch.Tensor | None:
        """The output of the forward with ``weights`` and ``inputs`` (as for :meth:`record`), its launches queued on
        ``stream``; None, launching nothing, where the record does not hold for them (the caller runs the forward)."""
        if self._weights() is not weights or POOL.generation != self._generation or not hooks_idle():
            return None
        if tuple([getattr(weights, name).data_ptr() for name in self._weight_fields]) != self._weight_pointers:
            return None
        pointers = [0 if t is None else t.data_ptr() for t in inputs]
        if any(pointer & 15 for pointer in pointers):  # triton specialises such a launch differently
            return None
        buffers = [torch.empty(shape, dtype=dtype, device=device) for shape, dtype, device in self._allocations]
        pointers += [buffer.data_ptr() for buffer in buffers]
        for step in self._steps:
            call = list(step.call)
            call[_STREAM] = stream
            for position, slot in step.slots:
                call[position] = pointers[slot]
            for position, name, kind, rest in step.descriptors:
                call[position] = _remade(kind, getattr(weights, name), rest)
            step.fn(*call)
        return buffers[0]  # the fresh buffers go back to the stream's pool after their launches, as in a full forward


@contextlib.contextmanager
def counted_replays():
    """``with counted_replays() as outcomes:`` for each replay a kernel attempts in the block, ``outcomes`` gets whether
    it launched (True) or left the forward to run in full (False). For checks and benchmarks: it wraps
    :meth:`Replay.__call__` for the whole process while the block runs."""
    outcomes, original = [], Replay.__call__

    def counted(self, *args):
        out = original(self, *args)
        outcomes.append(out is not None)
        return out

    Replay.__call__ = counted
    try:
        yield outcomes
    finally:
        Replay.__call__ = original


def _remade(kind: type, base: torch.Tensor, rest: dict):
    """A descriptor of class ``kind`` with the fields ``rest`` on ``base``, made without the class's checks: the recorded
    descriptor passed them with these fields on the same field of the same weights at the same data pointer (checked by
    the caller). The checks cost about 7 µs per Gluon descriptor, most of a one-token forward's host time beside triton's
    launches."""
    made = kind.__new__(kind)
    made.__dict__.update(rest, base=base)
    return made


def _tensor_fields(weights: ExpertWeights):
    """(name, tensor) of every tensor field of ``weights``."""
    for field in fields(weights):
        value = getattr(weights, field.name)
        if isinstance(value, torch.Tensor):
            yield field.name, value
