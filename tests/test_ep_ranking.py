"""Measured dispatcher rankings: the file format, the nearest measured token count, and select_pair's use of them."""

from __future__ import annotations

import json

import pytest
import torch

from moe_core import MoEConfig, ParallelConfig, Registry, select_pair
from moe_core.dispatch.ranking import RANKING_FILE, DispatchRanking, ranking_from_times, use_dispatch_ranking
from moe_core.errors import RankingFileError
from moe_core.platform import preset
from moe_core.selection import SelectionSource


def _cfg(ep: int = 2, **parallel) -> MoEConfig:
    return MoEConfig(8, 2, 64, 32, dtype=torch.float32, parallel=ParallelConfig(ep_size=ep, **parallel))


def _measured(order_at_16: dict, order_at_4096: dict, ep: int = 2) -> DispatchRanking:
    key = (ep, 8, 2, 64, "float32")
    return ranking_from_times("NVIDIA H100 80GB HBM3", {(*key, 16): order_at_16, (*key, 4096): order_at_4096})


@pytest.fixture(autouse=True)
def _no_ranking_in_force():
    yield
    use_dispatch_ranking(None)


def _pair(tokens, environ=None, **parallel):
    return select_pair(_cfg(**parallel), platform=preset("cpu"), registry=Registry(autoload=False), environ=environ or {}, num_tokens=tokens)


def test_the_measured_fastest_eligible_dispatcher_wins_at_the_nearest_token_count():
    use_dispatch_ranking(_measured({"naive": 100.0, "packed_all_to_all": 120.0}, {"packed_all_to_all": 900.0, "naive": 1000.0}))
    assert _pair(None).dispatcher.name == "all_to_all"  # no token count: priorities
    small, large = _pair(20), _pair(3000)
    assert (small.dispatcher.name, small.dispatch_source) == ("naive", SelectionSource.RANKING)
    assert large.dispatcher.name == "packed_all_to_all" and large.dispatch_source is SelectionSource.RANKING
    assert "measured ranking" in small.reason and "naive 100 µs" in small.reason and "at 16 tokens per rank" in small.reason
    assert "=> pair: naive + reference" in small.explain()


def test_a_measured_dispatcher_that_is_not_eligible_is_skipped_and_a_request_still_wins():
    use_dispatch_ranking(_measured({"peer_copy": 50.0, "batched_all_to_all": 80.0, "naive": 100.0}, {"naive": 1.0}))
    got = _pair(16)  # peer_copy cannot run on a CPU: the next measured one that can
    assert got.dispatcher.name == "batched_all_to_all" and got.config.parallel.use_batched_activation_format
    assert _pair(16, dispatch_backend="naive").dispatch_source is SelectionSource.REQUEST


def test_entries_of_another_world_size_or_shape_change_nothing():
    use_dispatch_ranking(_measured({"naive": 1.0}, {"naive": 1.0}, ep=4))
    got = _pair(16)
    assert got.dispatcher.name == "all_to_all" and got.dispatch_source is SelectionSource.PRIORITY


def test_the_smallest_valid_entry_is_accepted_and_serves_one_token():
    ranking = DispatchRanking.from_dict({"format": "moe-core-dispatch-ranking/1", "device": "x",
                                         "entries": [_ENTRY | {"tokens": 1}]})
    assert ranking.entry_for(_cfg(), 1).tokens == 1 and ranking.entry_for(_cfg(), 0) is None


def test_the_file_round_trips_and_is_read_from_the_environment(tmp_path):
    ranking = _measured({"naive": 100.0}, {"all_to_all": 7.5, "naive": 9.0})
    path = tmp_path / "dispatch.json"
    ranking.save(path)
    assert DispatchRanking.load(path) == ranking
    assert _pair(5000, {RANKING_FILE: str(path)}).dispatcher.name == "all_to_all"


_ENTRY = {"world_size": 2, "num_experts": 8, "top_k": 2, "hidden_size": 64, "dtype": "float32", "tokens": 16,
          "order": ["naive"], "times_us": [1.0]}


@pytest.mark.parametrize("broken, message", [
    ({"format": "other"}, "format"),
    ({"device": None}, "needs 'device' \\(a string\\) and 'entries' \\(a list\\)"),
    ({"entries": {}}, "needs 'device' \\(a string\\) and 'entries' \\(a list\\)"),
    ({"entries": [_ENTRY | {"tokens": True}]}, "entries\\[0\\].tokens must be int, got True"),
    ({"entries": [_ENTRY | {"tokens": 0}]}, "entries\\[0\\] needs world_size >= 2 and tokens >= 1"),
    ({"entries": [_ENTRY | {"world_size": 1}]}, "entries\\[0\\] needs world_size >= 2 and tokens >= 1"),
    ({"entries": [_ENTRY | {"order": [""]}]}, "non-empty list of distinct dispatcher names"),
    ({"entries": [_ENTRY | {"times_us": [0.0]}]}, "one positive time"),
    ({"entries": [_ENTRY | {"times_us": [True]}]}, "one positive time"),
    ({"entries": [{"world_size": 2}]}, "entries\\[0\\] must be an object with world_size, num_experts"),
    ({"entries": [{"world_size": 2, "num_experts": 8, "top_k": 2, "hidden_size": 64, "dtype": "float32", "tokens": 16,
                   "order": ["naive", "naive"], "times_us": [1, 2]}]}, "distinct"),
    ({"entries": [{"world_size": 2, "num_experts": 8, "top_k": 2, "hidden_size": 64, "dtype": "float32", "tokens": 16,
                   "order": ["naive"], "times_us": [1, 2]}]}, "one positive time"),
])
def test_malformed_files_are_errors_that_say_what_is_wrong(tmp_path, broken, message):
    doc = {"format": "moe-core-dispatch-ranking/1", "device": "x", "entries": []} | broken
    path = tmp_path / "bad.json"
    path.write_text(json.dumps(doc))
    with pytest.raises(RankingFileError, match=message):
        DispatchRanking.load(path)
    with pytest.raises(RankingFileError, match="cannot read"):
        _pair(16, {RANKING_FILE: str(tmp_path / "missing.json")})


def test_cli_explain_shows_the_measured_dispatcher(tmp_path, capsys, monkeypatch):
    from moe_core.cli import main

    key = (2, 16, 8, 2048, "bfloat16")  # the qwen3-30b-a3b preset with 16 experts
    path = tmp_path / "dispatch.json"
    ranking_from_times("H100", {(*key, 256): {"naive": 300.0, "packed_all_to_all": 310.0}}).save(path)
    monkeypatch.setenv(RANKING_FILE, str(path))
    assert main(["explain", "--ep", "2", "--experts", "16", "--platform", "h100", "--tokens", "256"]) == 0
    out = capsys.readouterr().out
    assert "=> pair: naive + " in out and "naive 300 µs, packed_all_to_all 310 µs" in out


def _shipped_docs():
    from moe_core.dispatch.ranking import SHIPPED_DIR

    return {path: json.loads(path.read_text()) for path in sorted(SHIPPED_DIR.glob("*.json"))}


def test_every_shipped_dispatcher_ranking_is_valid_and_named_for_its_device():
    from moe_core.ranking import device_slug

    docs = _shipped_docs()
    assert docs, "moe_core/rankings/dispatch/ holds no ranking"
    for path, doc in docs.items():
        ranking = DispatchRanking.from_dict(doc, str(path))
        assert path.stem == device_slug(ranking.device) and ranking.entries


def test_the_ranking_shipped_for_a_device_decides_on_that_device_and_nowhere_else(tmp_path):
    """Each shipped entry, on a simulated platform of its device with the built-in dispatchers: the dispatcher chosen
    is the first of the entry's order that the same platform serves (read from the file, not from the code)."""
    for doc in _shipped_docs().values():
        platform = next(p for p in map(preset, ("h100", "h200", "b200")) if p.device_name == doc["device"])
        for e in doc["entries"]:
            cfg = MoEConfig(e["num_experts"], e["top_k"], e["hidden_size"], 64, dtype=getattr(torch, e["dtype"]),
                            parallel=ParallelConfig(ep_size=e["world_size"]))
            reg = Registry(autoload=False)
            got = select_pair(cfg, platform=platform, registry=reg, environ={}, num_tokens=e["tokens"])
            served = {c.name for c in got.dispatchers if c.support.ok}
            assert (got.dispatcher.name, got.dispatch_source) == (next(n for n in e["order"] if n in served), SelectionSource.RANKING)
            # another device: no shipped ranking of its own for this shape, so priorities decide
            elsewhere = select_pair(cfg, platform=preset("cpu"), registry=reg, environ={}, num_tokens=e["tokens"])
            assert elsewhere.dispatch_source is SelectionSource.PRIORITY
            # the user's file wins over the shipped one
            mine = ranking_from_times(doc["device"], {(e["world_size"], e["num_experts"], e["top_k"], e["hidden_size"], e["dtype"], e["tokens"]): {"naive": 1.0}})
            mine.save(tmp_path / "mine.json")
            chosen = select_pair(cfg, platform=platform, registry=reg, environ={RANKING_FILE: str(tmp_path / "mine.json")}, num_tokens=e["tokens"])
            assert chosen.dispatcher.name == "naive"
