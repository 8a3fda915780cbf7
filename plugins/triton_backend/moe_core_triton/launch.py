"""Cheap repeated launches of ``@triton.jit`` kernels (host overhead).

Triton 3.6's ``JITFunction.run`` costs about 38 µs of host time for a 30-argument launch on the H100
machine: it binds and specialises every argument, builds its cache key from strings, and builds
launch-hook metadata that the launcher then hands to two empty hook chains. Launching the compiled
kernel itself costs about 10 µs (docs/benchmarks/triton-host-overhead-h100.md).

A :class:`Launcher` binds one kernel's constexprs and launch options once. Its first launch of a
specialization goes through triton (which compiles if needed and returns the ``CompiledKernel``);
later calls that triton would specialise the same way launch that ``CompiledKernel`` directly, through
the C ``launch`` function of its launcher when the kernel needs no global or profile scratch.

What triton specialises on (3.6 and 3.9, ``python/src/specialize.cc``): a tensor's dtype and
whether its data pointer is a multiple of 16; a tensor descriptor's dtype and block shape, and a Gluon
descriptor's shared-memory layout (a descriptor's base is always 16-byte aligned); an int's range (i32, i64, u64), whether it equals 1 (then it becomes a
constexpr) and whether it is a multiple of 16; a float is fp32, a bool u1, None a constexpr. The key
of the direct path is finer: the Python type of every argument, the dtype of every tensor, the dtype,
block shape and padding of every descriptor (a Gluon descriptor's shared-memory layout too), the exact value
of every other argument, and the current device; and the direct path is taken only when every tensor's data
pointer is a multiple of 16. Two calls with one key therefore always get one specialization. Everything else
goes through triton itself: the interpreter (``TRITON_INTERPRET=1``), launch hooks installed (profilers), a
pointer that is not 16-byte aligned, and every launch under a triton release :data:`CHECKED_TRITON` does not list. Not seen
by the direct path: triton knobs changed at run time (``TRITON_DEBUG`` style options) after a
specialization was first launched, and module globals a kernel reads (triton 3.6 rejects those anyway).

:func:`recording` lists the launches made in a block and :meth:`Launcher.direct` gives the compiled launch a call would
make, for :mod:`moe_core_triton.replay`.
"""

from __future__ import annotations

import inspect
import operator
from functools import reduce
from typing import Callable, NamedTuple

import torch
import triton
from triton import knobs
from triton.tools.tensor_descriptor import TensorDescriptor

from moe_core_triton.threadlog import ThreadLog

try:  # Gluon's host descriptor (a shared-memory layout beside triton's fields); triton releases without Gluon lack it
    from triton.experimental.gluon.nvidia.hopper import TensorDescriptor as GluonTensorDescriptor
except ImportError:  # pragma: no cover - every triton the plugin runs on has Gluon
    GluonTensorDescriptor = TensorDescriptor

#: The host tensor descriptors a launch may take: triton's, and Gluon's (ws_decode.py).
DESCRIPTORS = (TensorDescriptor, GluonTensorDescriptor)

#: The triton releases (major, minor) whose launch interfaces the direct path was checked against on a GPU:
#: ``CompiledKernel.run``'s launcher object and its C ``launch``, whose argument order triton 3.9 changed.
CHECKED_TRITON = ((3, 6),)


def checked_release(version: str) -> bool:
    """Whether triton ``version`` (``triton.__version__``) is one of :data:`CHECKED_TRITON`."""
    return tuple(int(part) for part in version.split(".")[:2]) in CHECKED_TRITON


#: Whether launches may take the direct path here; under any other triton release every launch goes through triton.
DIRECT_PATH = checked_release(triton.__version__)

#: Compiled specializations a Launcher keeps before it starts over (scalars such as row counts are
#: part of the key, so the number of keys grows with the token counts an engine sees).
MAX_ENTRIES = 1024

_dtype_of = operator.attrgetter("dtype")
_data_ptr = torch.Tensor.data_ptr


class DirectLaunch(NamedTuple):
    """A compiled specialization's launch: ``fn(*grid, stream, *head, *runtime arguments, *tail)``."""

    fn: Callable
    grid: tuple[int, int, int]
    head: tuple
    tail: tuple


_LAUNCHES = ThreadLog()
#: ``with recording() as launches:`` every :class:`Launcher` call on this thread inside the block is appended, as
#: (launcher, grid, args), to ``launches`` (the launches still happen); blocks nest.
recording = _LAUNCHES.collecting


class Launcher:
    """One ``@triton.jit`` kernel with its constexprs and launch options bound.

    ``launcher(grid, *args)`` launches it on the current stream; ``args`` are every runtime
    (non-constexpr) argument in signature order. The kernel's constexpr parameters must all come
    after its runtime parameters, and ``constexprs`` must name each of them exactly once.
    ``cooperative`` launches it as a cooperative grid (every program resident at once).
    """

    def __init__(self, fn, *, num_warps: int, num_stages: int | None = None, cooperative: bool = False, **constexprs):
        names = _constexpr_names(fn)
        params = _param_names(fn)
        runtime = len(params) - len(names)
        if set(constexprs) != set(names) or params[runtime:] != names:
            raise TypeError(f"{fn}: constexprs must be exactly {names}, after every runtime parameter; got {sorted(constexprs)}")
        self.fn = fn
        self._runtime_params = runtime
        self._options = dict(constexprs, num_warps=num_warps)
        if num_stages is not None:
            self._options["num_stages"] = num_stages
        self.cooperative = cooperative
        if cooperative:
            self._options["launch_cooperative_grid"] = True
        self._tail = tuple(constexprs[name] for name in names)
        self._direct = DIRECT_PATH and hasattr(fn, "device_caches")  # a compiling JITFunction (not the interpreter's)
        self._compiled: dict[tuple, object] = {}
        self._layouts: dict[tuple, tuple] = {}

    def __call__(self, grid: tuple[int, ...], *args) -> None:
        if len(args) != self._runtime_params:
            raise TypeError(f"{self.fn}: expected {self._runtime_params} runtime arguments, got {len(args)}")
        _LAUNCHES.add((self, grid, args))
        if not self._direct or not hooks_idle():
            self.fn[grid](*args, **self._options)
            return
        device = torch._C._cuda_getDevice()
        key, entry = self._entry(args, device)
        if entry is None:
            kernel = self.fn[grid](*args, **self._options)
            if key is not None and hasattr(kernel, "packed_metadata"):
                if len(self._compiled) >= MAX_ENTRIES:
                    self._compiled.clear()
                self._compiled[key] = _direct_entry(kernel)
            return
        launch, head = entry
        size = len(grid)
        launch(grid[0], grid[1] if size > 1 else 1, grid[2] if size > 2 else 1, torch._C._cuda_getCurrentRawStream(device),
               *head, *args, *self._tail)

    def direct(self, grid: tuple[int, ...], args: tuple) -> DirectLaunch | None:
        """The compiled launch that ``self(grid, *args)`` makes now without going through triton, or None where that
        call goes through triton (the interpreter, a launch hook installed, a pointer not 16-byte aligned, a
        specialization not launched before)."""
        if not self._direct or not hooks_idle():
            return None
        entry = self._entry(args, torch._C._cuda_getDevice())[1]
        if entry is None:
            return None
        grid = (*grid, 1, 1)
        return DirectLaunch(entry[0], grid[:3], entry[1], self._tail)

    def _entry(self, args: tuple, device: int) -> tuple[tuple | None, tuple | None]:
        """(the direct-path key of ``args`` on ``device``, its compiled launch): the key None where a pointer is not
        16-byte aligned, the launch None where that specialization has not been launched yet."""
        key = self.key(args, device)
        return key, self._compiled.get(key) if key is not None else None

    @property
    def cached(self) -> int:
        """How many specializations are launched directly (for tests and benchmarks)."""
        return len(self._compiled)

    def key(self, args: tuple, device: int) -> tuple | None:
        """The direct-path key of ``args`` on ``device`` (see the module docstring), or None where a
        tensor's data pointer is not a multiple of 16 (such a launch always goes through triton)."""
        kinds = tuple(map(type, args))
        layout = self._layouts.get(kinds)
        if layout is None:
            layout = self._layouts[kinds] = _layout(kinds)
        tensors_of, descriptors_of, others_of = layout
        tensors = tensors_of(args)
        if reduce(operator.or_, map(_data_ptr, tensors), 0) & 15:
            return None
        return (device, kinds, tuple(map(_dtype_of, tensors)), tuple(map(_descriptor_key, descriptors_of(args))), others_of(args))


def _direct_entry(kernel) -> tuple:
    """How to launch a compiled kernel again: (function, its arguments between the stream and the kernel's own).

    Triton 3.6's ``CompiledKernel.run`` is a launcher object whose ``__call__`` allocates the global and profile
    scratch a kernel may need and calls its C ``launch``. A kernel that needs neither is launched by ``launch``
    itself, others through ``run`` (H100 machine: 18.7 -> 10.8 µs per 11-argument launch with the key included,
    docs/benchmarks/raw/2026-11-23-triton-direct-launch/host_micro.txt)."""
    runner = kernel.run
    plain = getattr(runner, "global_scratch_size", 1) == 0 and getattr(runner, "profile_scratch_size", 1) == 0
    if plain and hasattr(runner, "launch"):
        return runner.launch, (kernel.function, runner.launch_cooperative_grid, runner.launch_pdl, None, None,
                               kernel.packed_metadata, None, None, None)
    return runner, (kernel.function, kernel.packed_metadata, None, None, None)


def _layout(kinds: tuple[type, ...]) -> tuple:
    """Getters for the tensors, the tensor descriptors and the other arguments of an argument tuple with these types."""
    tensors = [i for i, kind in enumerate(kinds) if issubclass(kind, torch.Tensor)]
    descriptors = [i for i, kind in enumerate(kinds) if issubclass(kind, DESCRIPTORS)]
    others = [i for i in range(len(kinds)) if i not in tensors and i not in descriptors]
    return _getter(tensors), _getter(descriptors), _getter(others)


def _descriptor_key(desc: TensorDescriptor) -> tuple:
    """What a launch of ``desc`` is specialised on (the shape and strides are runtime values of the launch): its dtype,
    block shape and padding, and a Gluon descriptor's shared-memory layout (its class is in the key's argument types)."""
    return desc.base.dtype, tuple(desc.block_shape), desc.padding, getattr(desc, "layout", None)


def _getter(indices: list[int]):
    """A function returning the arguments at ``indices`` as a tuple."""
    if not indices:
        return lambda args: ()
    if len(indices) == 1:
        index = indices[0]
        return lambda args: (args[index],)
    return operator.itemgetter(*indices)


def hooks_idle() -> bool:
    """True when no launch enter/exit hook is installed (None, or an empty triton 3.6 HookChain)."""
    runtime = knobs.runtime
    return not _active(runtime.launch_enter_hook) and not _active(runtime.launch_exit_hook)


def _active(hook) -> bool:
    return hook is not None and bool(getattr(hook, "calls", True))


def _param_names(fn) -> list[str]:
    return list(inspect.signature(fn.fn).parameters)


def _constexpr_names(fn) -> list[str]:
    """Names of the ``tl.constexpr`` parameters of a JIT (or interpreted) function, in order."""
    params = inspect.signature(fn.fn).parameters.values()
    return [p.name for p in params if "constexpr" in str(p.annotation)]
