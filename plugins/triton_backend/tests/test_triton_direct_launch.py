"""The direct-launch path of moe_core_triton.launch on any machine: which launches go through triton and which call
the compiled kernel's launch again, and with which arguments.

Small fakes stand in for what only a GPU has: a compiling ``JITFunction`` (``kernel[grid](*args, **options)`` returns
the compiled kernel), the compiled kernel and its launcher object (which record every call), and torch's current CUDA
device and stream. The arguments a direct launch must pass are triton 3.6's: its launcher object is called as
``run(grid x, y, z, stream, function, packed metadata, launch metadata, enter hook, exit hook, *kernel arguments)``
(``CompiledKernel.__getitem__``), its C ``launch`` as ``launch(grid x, y, z, stream, function, cooperative grid, PDL,
global scratch, profile scratch, packed metadata, launch metadata, enter hook, exit hook, *kernel arguments)``; the
kernel arguments are the runtime arguments and then the constexprs. Launches of compiled kernels are checked on a GPU
by test_triton_launch.py.
"""

import pytest
import torch
import triton.language as tl
from triton import knobs

from moe_core_triton import launch
from moe_core_triton.launch import DirectLaunch, Launcher, hooks_idle, recording

FUNCTION, PACKED = "cu-function", "packed-metadata"
COOPERATIVE, PDL = "cooperative-flag", "pdl-flag"
DEVICE_STREAMS = {0: 7000, 1: 7001, 2: 7002}


def _body(x_ptr, out_ptr, n, factor, BLOCK: tl.constexpr, TWICE: tl.constexpr):
    """The signature of the kernel the fakes stand for (never run)."""


class FakeLauncherObject:
    """A compiled kernel's launcher (triton 3.6's ``CompiledKernel.run``): its calls, and those of its C ``launch``
    (which it has where ``with_launch``), go to ``calls`` as ("run" or "launch", arguments)."""

    def __init__(self, calls: list, global_scratch_size=0, profile_scratch_size=0, with_launch=True):
        self.calls = calls
        if global_scratch_size is not None:
            self.global_scratch_size = global_scratch_size
        if profile_scratch_size is not None:
            self.profile_scratch_size = profile_scratch_size
        self.launch_cooperative_grid, self.launch_pdl = COOPERATIVE, PDL
        if with_launch:
            self.launch = lambda *args: calls.append(("launch", args))

    def __call__(self, *args):
        self.calls.append(("run", args))


class FakeCompiledKernel:
    def __init__(self, run: FakeLauncherObject):
        self.function, self.packed_metadata, self.run = FUNCTION, PACKED, run


class InterpretedKernel:
    """Stands in for the interpreter's kernel object: ``kernel[grid](*args, **options)`` appends (grid, args, options)
    to ``through_triton`` and returns ``compiled``."""

    fn = staticmethod(_body)

    def __init__(self, compiled):
        self.compiled = compiled
        self.through_triton: list = []

    def __getitem__(self, grid):
        def launch_through_triton(*args, **options):
            self.through_triton.append((grid, args, options))
            return self.compiled
        return launch_through_triton


class CompilingKernel(InterpretedKernel):
    """Stands in for a compiling ``triton.JITFunction``, which has ``device_caches``."""

    device_caches: dict = {}


class FakeCuda:
    """torch's current CUDA device and its raw stream (``DEVICE_STREAMS``)."""

    def __init__(self, monkeypatch):
        self.device = 0
        monkeypatch.setattr(torch._C, "_cuda_getDevice", lambda: self.device, raising=False)
        monkeypatch.setattr(torch._C, "_cuda_getCurrentRawStream", DEVICE_STREAMS.__getitem__, raising=False)


@pytest.fixture(autouse=True)
def checked_triton(monkeypatch):
    """These tests describe the direct path of the release it was checked against (CI may install another)."""
    monkeypatch.setattr(launch, "DIRECT_PATH", True)


@pytest.fixture
def cuda(monkeypatch):
    return FakeCuda(monkeypatch)


@pytest.fixture
def calls():
    return []


def _setup(calls, **launcher_object):
    kernel = CompilingKernel(FakeCompiledKernel(FakeLauncherObject(calls, **launcher_object)))
    return kernel, Launcher(kernel, num_warps=4, num_stages=3, BLOCK=32, TWICE=True)


def _args(n=100, dtype=torch.float32):
    return torch.zeros(64, dtype=dtype), torch.zeros(64, dtype=dtype), n, 1.5


def test_the_first_launch_goes_through_triton_with_the_bound_options(cuda, calls):
    kernel, launcher = _setup(calls)
    args = _args()
    launcher((3,), *args)
    assert kernel.through_triton == [((3,), args, {"BLOCK": 32, "TWICE": True, "num_warps": 4, "num_stages": 3})]
    assert calls == [] and launcher.cached == 1


def test_the_options_name_num_stages_and_a_cooperative_grid_only_where_given(cuda, calls):
    kernel = CompilingKernel(FakeCompiledKernel(FakeLauncherObject(calls)))
    Launcher(kernel, num_warps=8, BLOCK=16, TWICE=False)((1,), *_args())
    Launcher(kernel, num_warps=2, cooperative=True, BLOCK=64, TWICE=True)((1,), *_args())
    assert [options for _, _, options in kernel.through_triton] == [
        {"BLOCK": 16, "TWICE": False, "num_warps": 8},
        {"BLOCK": 64, "TWICE": True, "num_warps": 2, "launch_cooperative_grid": True},
    ]


@pytest.mark.parametrize("grid, grid_xyz", [((5,), (5, 1, 1)), ((5, 2), (5, 2, 1)), ((5, 2, 3), (5, 2, 3))])
def test_a_repeated_launch_calls_the_compiled_launch_on_the_current_stream(cuda, calls, grid, grid_xyz):
    kernel, launcher = _setup(calls)
    launcher((9, 9, 9), *_args())
    cuda.device = 1
    launcher((9, 9, 9), *_args())  # another device: another specialization, through triton
    args = _args()
    launcher(grid, *args)
    assert len(kernel.through_triton) == 2
    assert calls == [("launch", (*grid_xyz, DEVICE_STREAMS[1], FUNCTION, COOPERATIVE, PDL, None, None, PACKED, None, None,
                                 None, *args, 32, True))]


@pytest.mark.parametrize("scratch", [
    {"global_scratch_size": 256},  # the launcher object allocates scratch before its C launch
    {"profile_scratch_size": 64},
    {"global_scratch_size": 256, "profile_scratch_size": 64},
    {"global_scratch_size": None, "profile_scratch_size": None},  # a launcher that does not say
    {"profile_scratch_size": None},
    {"with_launch": False},  # no C launch of its own
])
def test_a_kernel_that_needs_its_launcher_object_is_launched_through_it(cuda, calls, scratch):
    kernel, launcher = _setup(calls, **scratch)
    launcher((4, 2), *_args())
    args = _args()
    launcher((4, 2), *args)
    assert len(kernel.through_triton) == 1
    assert calls == [("run", (4, 2, 1, DEVICE_STREAMS[0], FUNCTION, PACKED, None, None, None, *args, 32, True))]


def test_arguments_triton_may_specialize_differently_go_through_triton_again(cuda, calls):
    """A new value of a scalar, a new dtype, another device: each a new specialization, launched by triton once."""
    kernel, launcher = _setup(calls)
    for n, dtype, device in [(100, torch.float32, 0), (101, torch.float32, 0), (100, torch.float16, 0), (100, torch.float32, 2)]:
        cuda.device = device
        launcher((1,), *_args(n, dtype))
        launcher((1,), *_args(n, dtype))
    assert [args[2:] for _, args, _ in kernel.through_triton] == [(100, 1.5), (101, 1.5), (100, 1.5), (100, 1.5)]
    assert [args[0].dtype for _, args, _ in kernel.through_triton] == [torch.float32, torch.float32, torch.float16, torch.float32]
    assert launcher.cached == 4
    assert [call[1][3] for call in calls] == [DEVICE_STREAMS[0]] * 3 + [DEVICE_STREAMS[2]]


def test_a_misaligned_pointer_always_goes_through_triton(cuda, calls):
    kernel, launcher = _setup(calls)
    x, out, n, factor = _args()
    for _ in range(2):
        launcher((1,), x[1:], out, n, factor)
    assert len(kernel.through_triton) == 2 and calls == [] and launcher.cached == 0
    assert launcher.direct((1,), (x[1:], out, n, factor)) is None


@pytest.mark.parametrize("compiled", [None, object()], ids=["nothing", "no packed metadata"])
def test_a_launch_that_returns_no_compiled_kernel_is_not_reused(cuda, calls, compiled):
    kernel = CompilingKernel(compiled)
    launcher = Launcher(kernel, num_warps=4, BLOCK=32, TWICE=True)
    for _ in range(2):
        launcher((1,), *_args())
    assert len(kernel.through_triton) == 2 and launcher.cached == 0


def test_an_interpreted_kernel_always_goes_through_triton(calls, monkeypatch):
    def no_device():
        raise AssertionError("an interpreted launch asked for the CUDA device")

    monkeypatch.setattr(torch._C, "_cuda_getDevice", no_device, raising=False)
    kernel = InterpretedKernel(FakeCompiledKernel(FakeLauncherObject(calls)))
    launcher = Launcher(kernel, num_warps=4, BLOCK=32, TWICE=True)
    for _ in range(2):
        launcher((1,), *_args())
    assert len(kernel.through_triton) == 2 and launcher.cached == 0 and calls == []
    assert launcher.direct((1,), _args()) is None


def test_the_cache_starts_over_past_max_entries(cuda, calls):
    kernel, launcher = _setup(calls)
    for n in range(launch.MAX_ENTRIES):
        launcher((1,), *_args(n))
    assert launcher.cached == launch.MAX_ENTRIES
    launcher((1,), *_args(launch.MAX_ENTRIES))
    assert launcher.cached == 1
    launcher((1,), *_args(0))  # forgotten: through triton again
    assert len(kernel.through_triton) == launch.MAX_ENTRIES + 2 and calls == []


def _function_hook(metadata):
    """A launch hook as older triton versions install it: a plain function."""


def _chain_with_a_call():
    chain = knobs.HookChain()
    chain.add(_function_hook)
    return chain


@pytest.mark.parametrize("which", ["launch_enter_hook", "launch_exit_hook"])
@pytest.mark.parametrize("hook, idle", [
    (None, True), (knobs.HookChain(), True), (_chain_with_a_call(), False), (_function_hook, False),
], ids=["none", "empty chain", "chain with a call", "function"])
def test_a_launch_hook_sends_every_launch_through_triton(cuda, calls, monkeypatch, which, hook, idle):
    """Profilers install launch hooks; only triton's own launch calls them."""
    kernel, launcher = _setup(calls)
    args = _args()
    monkeypatch.setattr(knobs.runtime, which, hook)
    assert hooks_idle() is idle
    for _ in range(2):
        launcher((1,), *args)
    direct = launcher.direct((1,), args)
    if idle:
        assert len(kernel.through_triton) == 1 and len(calls) == 1 and launcher.cached == 1 and direct is not None
    else:
        assert len(kernel.through_triton) == 2 and calls == [] and launcher.cached == 0 and direct is None


def test_direct_gives_the_launch_a_call_would_make(cuda, calls):
    kernel, launcher = _setup(calls)
    args = _args()
    assert launcher.direct((6,), args) is None  # not launched yet
    launcher((6,), *args)
    cuda.device = 1
    assert launcher.direct((6,), args) is None  # launched on another device only
    cuda.device = 0
    for grid, grid_xyz in [((6,), (6, 1, 1)), ((6, 5), (6, 5, 1)), ((6, 5, 4), (6, 5, 4))]:
        direct = launcher.direct(grid, args)
        assert direct == DirectLaunch(kernel.compiled.run.launch, grid_xyz,
                                      (FUNCTION, COOPERATIVE, PDL, None, None, PACKED, None, None, None), (32, True))
        direct.fn(*direct.grid, DEVICE_STREAMS[0], *direct.head, *args, *direct.tail)
        launcher(grid, *args)
        assert calls[-2] == calls[-1]
    assert len(kernel.through_triton) == 1


def test_recording_lists_every_launch_whichever_path_it_takes(cuda, calls):
    kernel, launcher = _setup(calls)
    first, second = _args(), _args(7)
    launcher((1,), *first)  # outside every block: not recorded
    with recording() as outer:
        launcher((2,), *first)
        with recording() as inner:
            launcher((3, 1), *second)
        launcher((4,), *second)
    assert outer == [(launcher, (2,), first), (launcher, (4,), second)]
    assert inner == [(launcher, (3, 1), second)]
    assert len(kernel.through_triton) == 2 and len(calls) == 2


@pytest.mark.parametrize("version,checked", [("3.6.0", True), ("3.6.1+git4f2a", True), ("3.5.1", False), ("3.9.0", False),
                                             ("3.60.0", False), ("4.6.0", False)])
def test_only_the_checked_triton_release_takes_the_direct_path(version, checked):
    assert launch.checked_release(version) is checked


def test_under_an_unchecked_triton_every_launch_goes_through_triton(cuda, calls, monkeypatch):
    monkeypatch.setattr(launch, "DIRECT_PATH", False)
    kernel, launcher = _setup(calls)
    args = _args()
    launcher((4,), *args)
    launcher((4,), *args)
    assert len(kernel.through_triton) == 2 and calls == [] and launcher.cached == 0 and launcher.direct((4,), args) is None
