"""Autotuning on this machine (the CPU in CI): measuring at selection, the per-device cache, `moe-core tune`."""

import dataclasses
import json
import multiprocessing

import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from moe_core import autotune, autotune_cache, resolver
from moe_core.autotune_cache import AutotuneCacheError
from moe_core.cli import main
from moe_core.platform import preset
from moe_core.ranking import MeasuredWith, RankingEntry
from moe_core.resolver import select
from moe_core.selection import SelectionSource
#: reg: a registry of wrong (priority 900, wrong output), slowpoke (300, slow above 2 tokens) and speedy (200, slow up to 2)
from tests.test_bench_and_ranking import CFG, reg  # noqa: F401 - reg is a fixture


@pytest.fixture(autouse=True)
def _fresh(monkeypatch):
    monkeypatch.setattr(autotune, "BUDGET_S", 60.0)  # a loaded CI machine must not turn the timing into a race
    autotune.reset()
    autotune_cache.forget()
    yield
    autotune.reset()
    autotune_cache.forget()


@pytest.fixture(autouse=True)
def _this_machine_is_a_cpu(monkeypatch):
    """The fake backends run on CPUs only: on a GPU machine too, this process's platform is a (real) CPU here."""
    cpu = dataclasses.replace(preset("cpu"), simulated=False)
    monkeypatch.setattr(resolver, "current_platform", lambda: cpu)


@pytest.fixture
def env(tmp_path):
    return {"MOE_CORE_AUTOTUNE": "1", "MOE_CORE_CACHE_DIR": str(tmp_path), "MOE_CORE_DISABLE": "reference"}


def test_buckets_are_powers_of_two():
    assert [autotune.bucket(t) for t in (1, 2, 3, 4, 5, 8, 9, 1000)] == [(1, 1), (2, 2), (3, 4), (3, 4), (5, 8), (5, 8), (9, 16), (513, 1024)]


@settings(max_examples=50, deadline=None, derandomize=True)
@given(st.integers(1, 1 << 20))
def test_bucket_holds_its_count_and_buckets_tile(tokens):
    lo, hi = autotune.bucket(tokens)
    assert lo <= tokens <= hi and hi & (hi - 1) == 0
    assert autotune.bucket(lo) == autotune.bucket(hi) == (lo, hi)
    assert hi == 1 or autotune.bucket(lo - 1)[1] == lo - 1


def test_selection_measures_once_then_reuses_the_cache(reg, env, monkeypatch):
    here = resolver.current_platform()
    static = select(CFG, platform=here, registry=reg, environ=env)
    assert static.name == "wrong"  # by priority
    chosen = select(CFG, platform=here, registry=reg, environ=env, num_tokens=6)
    assert chosen.name == "speedy" and chosen.source is SelectionSource.RANKING
    path = autotune_cache.cache_file(here.device_name, env)
    assert chosen.decided_by.startswith(f"measured: autotune cache {path}, 20")
    doc = json.loads(path.read_text())
    assert [(e["tokens_min"], e["tokens_max"], e["order"]) for e in doc["entries"]] == [(5, 8, ["speedy", "slowpoke"])]  # wrong: gated out
    assert doc["measured_with"]["versions"]["torch"] == torch.__version__

    monkeypatch.setattr(autotune, "measure", lambda *a, **k: pytest.fail("measured again"))
    assert select(CFG, platform=here, registry=reg, environ=env, num_tokens=7).name == "speedy"  # same bucket: cached
    autotune_cache.forget()  # as a new process would: read from the file
    assert select(CFG, platform=here, registry=reg, environ=env, num_tokens=5).name == "speedy"


def test_wrong_backend_is_gated_out(reg, env):
    result = autotune.measure(select(CFG, platform=resolver.current_platform(), registry=reg, environ=env).query, ["wrong", "speedy"], 4, reg,
                              torch.device("cpu"))
    assert result.outcomes["wrong"][0] is autotune.Outcome.FAILED and "differs from the reference" in result.outcomes["wrong"][1]
    assert result.order == ("speedy",)


def test_budget_stops_starting_backends(reg, env):
    query = select(CFG, platform=resolver.current_platform(), registry=reg, environ=env).query
    result = autotune.measure(query, ["slowpoke", "speedy"], 4, reg, torch.device("cpu"), budget_s=0.0)
    assert {n: o for n, (o, _) in result.outcomes.items()} == {"slowpoke": autotune.Outcome.NOT_TIMED, "speedy": autotune.Outcome.NOT_TIMED}
    assert result.order == ()


def test_no_measuring_for_a_simulated_platform_or_when_off(reg, tmp_path, monkeypatch):
    monkeypatch.setattr(autotune, "measure", lambda *a, **k: pytest.fail("measured"))
    env = {"MOE_CORE_AUTOTUNE": "1", "MOE_CORE_CACHE_DIR": str(tmp_path)}
    sim = select(CFG, platform=preset("h100"), registry=reg, environ=env, num_tokens=6)
    assert sim.source is SelectionSource.PRIORITY and sim.decided_by == "by priority: no measurement for this shape"
    off = select(CFG, platform=resolver.current_platform(), registry=reg, environ={"MOE_CORE_CACHE_DIR": str(tmp_path)}, num_tokens=6)
    assert off.source is SelectionSource.PRIORITY


def test_api_switch_overrides_the_environment(reg, tmp_path):
    env = {"MOE_CORE_CACHE_DIR": str(tmp_path), "MOE_CORE_DISABLE": "reference"}
    autotune.enable()
    assert select(CFG, platform=resolver.current_platform(), registry=reg, environ=env, num_tokens=3).name == "speedy"
    autotune.enable(False)
    assert select(CFG, platform=resolver.current_platform(), registry=reg, environ={**env, "MOE_CORE_AUTOTUNE": "1"}, num_tokens=100).name == "wrong"


def test_never_during_cuda_graph_capture(reg, env, monkeypatch):
    with monkeypatch.context() as capturing:
        capturing.setattr(torch.cuda, "is_available", lambda: True)
        capturing.setattr(torch.cuda, "is_current_stream_capturing", lambda: True)
        capturing.setattr(autotune, "measure", lambda *a, **k: pytest.fail("measured while capturing"))
        during = select(CFG, platform=resolver.current_platform(), registry=reg, environ=env, num_tokens=6)
        assert during.name == "wrong" and during.source is SelectionSource.PRIORITY
    after = select(CFG, platform=resolver.current_platform(), registry=reg, environ=env, num_tokens=6)  # not cached: measured now
    assert after.name == "speedy" and after.source is SelectionSource.RANKING


@pytest.mark.parametrize("text,problem", [
    ("{not json", "not valid JSON"),
    ('{"format": "moe-core-ranking/1", "device": "cpu", "entries": [{"num_experts": 4}]}', r"entries\[0\] lacks"),
])
def test_corrupt_cache_is_a_typed_error_naming_the_file(reg, env, text, problem):
    path = autotune_cache.cache_file(resolver.current_platform().device_name, env)
    path.parent.mkdir(parents=True)
    path.write_text(text)
    with pytest.raises(AutotuneCacheError, match=rf"{path}: the autotune cache is unusable \(.*{problem}.*\)\. Delete the file"):
        select(CFG, platform=resolver.current_platform(), registry=reg, environ=env, num_tokens=6)


def _writer(directory, worker, barrier):
    barrier.wait()
    path = autotune_cache.cache_file("cpu", {"MOE_CORE_CACHE_DIR": directory})
    for i in range(8):
        entry = RankingEntry(4, 2, 32 + worker, 16, "float32", "unquantized", i + 1, i + 1, ("speedy",))
        autotune_cache.write(path, "cpu", [entry], MeasuredWith(command=f"writer {worker}"))


def test_concurrent_writers_lose_nothing(tmp_path):
    ctx = multiprocessing.get_context("fork")
    barrier = ctx.Barrier(4)
    procs = [ctx.Process(target=_writer, args=(str(tmp_path), w, barrier)) for w in range(4)]
    for p in procs:
        p.start()
    for p in procs:
        p.join(60)
    assert [p.exitcode for p in procs] == [0, 0, 0, 0]
    ranking = autotune_cache.read(autotune_cache.cache_file("cpu", {"MOE_CORE_CACHE_DIR": str(tmp_path)}))
    assert sorted((e.hidden_size, e.tokens_min) for e in ranking.entries) == [(32 + w, i + 1) for w in range(4) for i in range(8)]
    assert not [p for p in (tmp_path / "autotune").iterdir() if p.name.startswith(".")]  # no temporary file left behind


def test_tune_command_fills_the_cache_and_explain_uses_it(tmp_path, monkeypatch, capsys):
    monkeypatch.setenv("MOE_CORE_CACHE_DIR", str(tmp_path))
    assert main(["tune", "--preset", "tiny", "--dtype", "float32", "--tokens", "1,4", "--budget-s", "30"]) == 0
    captured = capsys.readouterr()
    assert "[1/2] tiny unquantized T=1" in captured.err and "[2/2] tiny unquantized T=4" in captured.err
    path = autotune_cache.cache_file(resolver.current_platform().device_name)
    assert f"autotune cache: {path}" in captured.out
    tokens = sorted((e.tokens_min, e.tokens_max) for e in autotune_cache.read(path).entries)
    assert tokens == [(1, 1), (3, 4)]
    assert main(["explain", "--preset", "tiny", "--dtype", "float32", "--tokens", "3"]) == 0
    assert f"measured: autotune cache {path}" in capsys.readouterr().out
    assert main(["tune", "--preset", "tiny", "--platform", "h100", "--tokens", "1"]) == 2
    assert "drop --platform" in capsys.readouterr().err
