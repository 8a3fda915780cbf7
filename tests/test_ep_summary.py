"""benchmarks/ep_summary.py: the four-GPU record's summary reads records of several process groups and
judges each target from the slowest rank's figures."""

from __future__ import annotations

import importlib.util
import json
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]


@pytest.fixture(scope="module")
def summary():
    spec = importlib.util.spec_from_file_location("ep_summary", ROOT / "benchmarks" / "ep_summary.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _rank(rank: int, bench: dict) -> dict:
    return {"rank": rank, "device": "GPU", "graphs": {"qwen3-30b-a3b/naive": {"error_vs_eager": 0.0, "eager_repeat_error": 2e-3 * rank}}, "bench": bench}


def _write(tmp_path: Path, name: str, doc: dict) -> str:
    path = tmp_path / name
    path.write_text(json.dumps(doc))
    return str(path)


def test_targets_use_the_slowest_rank_and_the_best_dispatcher(tmp_path, summary):
    layer = lambda eager, graph: {"layer": {"eager": eager, "graph": graph}, "dispatch_combine": {"eager": eager / 4, "graph": graph / 4}}  # noqa: E731
    q = "qwen3-30b-a3b/4096"
    rank0 = {f"{q}/raw_all_to_all": {"eager": 100.0, "graph": 90.0}, f"{q}/naive": layer(1000.0, 800.0),
             f"{q}/packed_all_to_all": layer(900.0, 700.0),
             f"{q}/single_gpu_whole_work": {"eager": 1600.0, "graph": 1500.0}}
    rank1 = {f"{q}/raw_all_to_all": {"eager": 120.0, "graph": 95.0}, f"{q}/naive": layer(950.0, 850.0),
             f"{q}/packed_all_to_all": layer(1100.0, 880.0)}  # faster than naive on rank 0, slower on rank 1
    timing = _write(tmp_path, "w2.json", {"world": 2, "ranks": {"naive+packed_all_to_all": [_rank(0, rank0), _rank(1, rank1)],
                                                               "peer_copy": {"error": "RuntimeError: no P2P"}}})
    equality = _write(tmp_path, "w2eq.json", {"world": 2, "equality": {"qwen3/bf16/naive": [{"ok": True}, {"ok": False}]}})
    lines = summary.summarize(summary.merge([summary.load(equality), summary.load(timing), summary.load(str(tmp_path / "none.json"))]))
    text = "\n".join(lines)
    assert "== world 2: equality 0/1 ok; FAILED: qwen3/bf16/naive" in text
    assert "graphs 0/1 replay and repeated eager calls == eager; FAILED: qwen3-30b-a3b/naive" in text  # rank 1's repeat differs
    assert "FAILURE timing peer_copy: RuntimeError: no P2P" in text and "RECORD MISSING" in text
    # eager: slowest ranks naive 1000, packed 1100 -> naive, 1000 / 1600 = 0.62 > 0.6; graph: naive 850 / 1500 = 0.57
    assert "world 2 qwen3-30b-a3b 4096 eager EP=2 layer / 1 GPU whole work: MISSED 0.62x (≤ 0.6x): naive 1000 vs 1600 µs" in text
    assert "world 2 qwen3-30b-a3b 4096 graph EP=2 layer / 1 GPU whole work: MET 0.57x (≤ 0.6x): naive 850 vs 1500 µs" in text
    # dispatch+combine: naive 250 µs against 1.5 x 2 x 120 (slowest raw) + 40 = 400 µs
    assert "world 2 qwen3-30b-a3b 4096: eager dispatch+combine ≤ 1.5 x 2 raw + 40 µs: MET naive 250 µs vs 400 µs" in text
    assert "world 4 deepseek-v3 4096 eager EP=4 layer / 1 GPU whole work: NOT MEASURED" in text


def test_a_run_cut_short_is_summarized_from_the_rows_its_log_holds(tmp_path, summary):
    """No JSON (the run was stopped before writing it): the ROW lines of the log beside it still give the figures."""
    rows = [{"world": 4, "rank": r, "section": "bench", "key": "deepseek-v3/4096/packed_all_to_all",
             "row": {"layer": {"eager": 5000.0 + r, "graph": 4000.0}}} for r in range(4)]
    rows.append({"world": 4, "rank": 0, "section": "bench", "key": "deepseek-v3/4096/single_gpu_whole_work",
                 "row": {"eager": 20000.0, "graph": 19000.0}})
    log = "\n".join(["some output"] + [f"ROW {json.dumps(r)}" for r in rows] + ['ROW {"world": 4, "rank": 1, "sec'])
    (tmp_path / "ep_world4.log").write_text(log)
    text = "\n".join(summary.summarize(summary.merge([summary.load(str(tmp_path / "ep_world4.json"))])))
    assert "rows taken from the log" in text
    assert "world 4 deepseek-v3 4096 eager EP=4 layer / 1 GPU whole work: MET 0.25x (≤ 0.35x): packed_all_to_all 5003 vs 20000 µs" in text


def test_two_micro_batches_count_toward_the_layer_targets_and_are_named(tmp_path, summary):
    q = "qwen3-30b-a3b/4096"
    row = lambda whole, two: {"layer": {"eager": whole, "graph": whole}, "layer_two_micro_batches": {"eager": two, "graph": two + 300}}  # noqa: E731
    ranks = [_rank(r, {f"{q}/packed_all_to_all": row(1000.0, 900.0 + r), f"{q}/naive": row(950.0, 2000.0),
                       f"{q}/single_gpu_whole_work": {"eager": 1600.0, "graph": 1600.0}}) for r in range(2)]
    timing = _write(tmp_path, "w2.json", {"world": 2, "ranks": {"naive+packed_all_to_all": ranks}})
    text = "\n".join(summary.summarize(summary.merge([summary.load(timing)])))
    # eager: packed's two micro-batches (slowest rank 901) beat naive whole (950); graph: naive whole 950 beats 1201
    assert "4096 eager EP=2 layer / 1 GPU whole work: MET 0.56x (≤ 0.6x): packed_all_to_all (2 micro-batches) 901 vs 1600 µs" in text
    assert "4096 graph EP=2 layer / 1 GPU whole work: MET 0.59x (≤ 0.6x): naive 950 vs 1600 µs" in text
    assert "2 micro-batches 901/1201" in text
