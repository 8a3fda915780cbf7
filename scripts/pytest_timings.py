"""A pytest plugin that streams each test's duration and each Triton compile to files as they happen.

For finding what makes a (parallel) test run slow, even a run stopped by a time limit:

    PYTHONPATH=scripts TIMINGS_DIR=/tmp/t PYTEST_ADDOPTS="-p pytest_timings" bash scripts/test.sh

writes ``TIMINGS_DIR/tests.tsv`` (seconds since the start, duration, phase, outcome, worker, test id; one line per
phase, from the pytest-xdist controller or the single process) and ``TIMINGS_DIR/compiles.tsv`` (seconds since the
start, compile seconds, worker, kernel, key hash, test; one line per Triton JIT compile, from every worker).
Lines are appended with O_APPEND, so workers can share the files.
"""

from __future__ import annotations

import os
import time

OUT = os.environ.get("TIMINGS_DIR") or os.environ.get("OUT") or "."
START = float(os.environ.get("TIMINGS_T0", time.time()))
WORKER = os.environ.get("PYTEST_XDIST_WORKER", "main")


def _append(name: str, line: str) -> None:
    fd = os.open(os.path.join(OUT, name), os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
    try:
        os.write(fd, (line + "\n").encode())
    finally:
        os.close(fd)


def pytest_configure(config):
    """Time every Triton JIT compile of this process (JITFunction._do_compile: triton 3.3 to 3.9)."""
    os.environ.setdefault("TIMINGS_T0", str(START))  # workers started from here share the start
    try:
        from triton.runtime.jit import JITFunction
    except ImportError:
        return
    compile_one = getattr(JITFunction, "_do_compile", None)
    if compile_one is None:
        return

    def timed(self, key, *args, **kwargs):
        began = time.time()
        try:
            return compile_one(self, key, *args, **kwargs)
        finally:
            test = os.environ.get("PYTEST_CURRENT_TEST", "")[:160]
            _append("compiles.tsv", f"{began - START:.1f}\t{time.time() - began:.3f}\t{WORKER}\t{self.fn.__qualname__}\t"
                                    f"{hash(str(key)) & 0xFFFFFFFF:08x}\t{test}")

    JITFunction._do_compile = timed


def pytest_runtest_logreport(report):
    if WORKER != "main":
        return  # the controller reports every worker's tests
    gateway = getattr(getattr(report, "node", None), "gateway", None)
    _append("tests.tsv", f"{time.time() - START:.1f}\t{report.duration:.2f}\t{report.when}\t{report.outcome}\t"
                         f"{getattr(gateway, 'id', '')}\t{report.nodeid}")
