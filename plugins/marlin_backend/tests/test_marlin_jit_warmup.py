"""The parallel JIT warm-up of the GPU check (moe_core_marlin.jit_warmup), on the CPU: its environment and its failures."""

import pytest

from moe_core_marlin import jit_warmup


def test_a_large_jit_cache_is_asked_for_only_where_the_environment_sets_no_size():
    environ = {}
    jit_warmup.use_a_large_jit_cache(environ)
    assert environ == {"CUDA_CACHE_MAXSIZE": str(4 * 2**30)}
    environ = {"CUDA_CACHE_MAXSIZE": "1024"}
    jit_warmup.use_a_large_jit_cache(environ)
    assert environ == {"CUDA_CACHE_MAXSIZE": "1024"}


def test_with_the_cache_disabled_nothing_is_started(monkeypatch):
    monkeypatch.setenv("CUDA_CACHE_DISABLE", "1")
    assert jit_warmup.warm([("w4a16", "bfloat16")], (1,), 60).startswith("skipped")


def test_a_failing_process_is_named_with_its_output(monkeypatch):
    # Without a GPU the process itself fails (no CUDA): the error names the pair and quotes the process.
    monkeypatch.delenv("CUDA_CACHE_DISABLE", raising=False)
    with pytest.raises(RuntimeError, match=r"w4a16 bfloat16: exit 1: .*(CUDA|cuda)"):
        jit_warmup.warm([("w4a16", "bfloat16")], (1,), 120)
