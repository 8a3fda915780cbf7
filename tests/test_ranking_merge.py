"""Merging recorded bench documents into one device's ranking (moe_core/ranking_merge.py, benchmarks/ship_ranking.py)."""

from moe_core.ranking_merge import merge, points

DEVICE = "NVIDIA H100 80GB HBM3"
LAYER = {"num_experts": 8, "top_k": 2, "hidden_size": 64, "intermediate_size": 32, "dtype": "bfloat16"}
SHAPE = (8, 2, 64, 32, "bfloat16", "fp8-block")
ALLOWED = frozenset({"triton", "deepgemm", "reference"})


def _doc(date, rows, device=DEVICE, scheme="fp8-block", torch_version="2.11.0+cu130"):
    return {"environment": {"gpu": device, "date": date, "torch": torch_version, "triton": "3.6.0", "python": "3.12"},
            "cases": [{"label": "x", "scheme": scheme, "layer": LAYER, "rows": [
                {"backend": b, "kind": "peer" if b in ("reference", "torch_grouped_mm") else "backend", "tokens": t,
                 "status": status, "time_s": time_s} for b, t, status, time_s in rows]}]}


def _merged(*docs):
    pts = [p for i, d in enumerate(docs) for p in points(d, DEVICE, ALLOWED, f"doc{i}")]
    return merge(pts, DEVICE, "cmd")


def test_the_run_comparing_most_backends_decides_then_the_newest():
    with_deepgemm = _doc("2026-11-23T07:00:00+00:00", [("deepgemm", 64, "ok", 4.7e-3), ("triton", 64, "ok", 3.4e-3),
                                                       ("deepgemm", 4096, "ok", 7.7e-3), ("triton", 4096, "ok", 7.8e-3)])
    newer_triton_only = _doc("2026-11-27T00:00:00+00:00", [("triton", 64, "ok", 3.0e-3), ("reference", 64, "ok", 0.2),
                                                           ("triton", 4096, "ok", 5.9e-3), ("triton", 16, "ok", 1e-3)])
    newest_triton_only = _doc("2026-11-28T00:00:00+00:00", [("triton", 16, "ok", 1e-3), ("reference", 16, "ok", 0.01)])
    ranking = _merged(newest_triton_only, with_deepgemm, newer_triton_only)
    got = {(e.tokens_min, e.tokens_max): e.order for e in ranking.entries}
    # 16: the newest run; 64 and 4096: the run that also timed deepgemm, though older (never times from two runs in one entry).
    assert got == {(16, 32): ("triton", "reference"), (33, 512): ("triton", "deepgemm"), (513, 4096): ("deepgemm", "triton")}
    assert ranking.device == DEVICE and all(e.shape == SHAPE for e in ranking.entries)
    assert ranking.measured_with.date == "2026-11-28T00:00:00+00:00" and dict(ranking.measured_with.versions)["torch"] == "2.11.0+cu130"


def test_failed_rows_other_devices_peers_and_unknown_backends_are_not_ranked():
    doc = _doc("2026-11-28T00:00:00+00:00", [("triton", 1, "failed", None), ("deepgemm", 1, "ok", 2e-4),
                                             ("torch_grouped_mm", 1, "ok", 1e-5), ("acme", 1, "ok", 1e-6)])
    other = _doc("2026-11-29T00:00:00+00:00", [("triton", 1, "ok", 1e-6), ("deepgemm", 1, "ok", 2e-6)], device="NVIDIA H200")
    ranking = _merged(doc, other, {"not": "a bench document"})
    assert [e.order for e in ranking.entries] == [("deepgemm",)]
