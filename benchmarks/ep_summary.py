"""The compact summary of ``benchmarks/ep_gpu.py`` records: equality, graphs, scaling and the targets.

    python benchmarks/ep_summary.py out/ep_world2.json out/ep_world4.json

Per world size, shape and tokens per rank: the raw ``all_to_all_single`` of every token to every rank,
each dispatcher's dispatch + combine and layer (slowest rank, eager / graph), and rank 0's single-GPU
layer on its own tokens (EP = 1) and on the whole work. Then each target, met or missed, with the
best dispatcher's figure. Every time in µs.
"""

from __future__ import annotations

import json
import sys

SINGLE = ("single_gpu", "single_gpu_whole_work", "raw_all_to_all")


def graph_ok(row: dict) -> bool:
    """As benchmarks/ep_gpu.py judges a graph check (kept here so that the summary needs no torch)."""
    return row.get("eager_repeat_error", 1.0) < 1e-3 and ("skipped" in row or row.get("error_vs_eager", 1.0) < 1e-3)


def load(path: str) -> dict:
    """One record: equality and failures from the JSON at ``path``; graph and bench rows from the ``ROW`` lines of the
    log beside it (``.log`` for ``.json``: every finished case, even of a run cut short), else from the JSON.
    Bench rows are gathered as {(shape, tokens): {name: [one row per rank]}}."""
    try:
        with open(path) as f:
            doc = json.load(f)
    except (OSError, json.JSONDecodeError) as exc:
        doc, missing = {}, f"{path}: {exc}"
    else:
        missing = ""
    lines = log_rows(path[: -len(".json")] + ".log" if path.endswith(".json") else path + ".log")
    if missing and not lines:
        return {"world": None, "error": missing, "bench": {}, "equality": {}, "graphs": {}, "failures": []}
    failures = [f"{name}: {row['error']}" for name, row in doc.get("equality", {}).items() if isinstance(row, dict)]
    failures += [f"timing {group}: {rows.get('error')}" for group, rows in doc.get("ranks", {}).items() if isinstance(rows, dict)]
    if not lines:  # rows from the JSON's groups
        lines = [{"rank": r.get("rank"), "section": section, "key": key, "row": row}
                 for rows in doc.get("ranks", {}).values() if isinstance(rows, list)
                 for r in rows for section in ("graphs", "bench") for key, row in r.get(section, {}).items()]
    bench: dict = {}
    graphs: dict = {}
    for line in lines:
        key, row = line["key"], line["row"]
        if line["section"] == "graphs":
            graphs.setdefault(key, {})[line["rank"]] = row
            continue
        parts = key.split("/")
        if len(parts) != 3:
            if "skipped" in row and line["rank"] == 0:
                failures.append(f"{key} not timed: {row['skipped']}")
            continue
        per_rank = bench.setdefault((parts[0], int(parts[1])), {}).setdefault(parts[2], {})
        per_rank.setdefault(line["rank"], row)  # raw_all_to_all is measured again by a later group: the first counts
    equality = {name: rows for name, rows in doc.get("equality", {}).items() if isinstance(rows, list)}
    world = doc.get("world", lines[0].get("world") if lines else None)
    if missing:
        failures.append(f"record {missing}; rows taken from the log")
    return {"world": world, "equality": equality, "failures": failures,
            "graphs": {k: list(v.values()) for k, v in graphs.items()},
            "bench": {slot: {name: list(v.values()) for name, v in names.items()} for slot, names in bench.items()}}


def log_rows(path: str) -> list[dict]:
    """The ``ROW {json}`` lines the ranks of benchmarks/ep_gpu.py print, in order; none when there is no log."""
    try:
        with open(path, errors="replace") as f:
            text = f.read()
    except OSError:
        return []
    rows = []
    for line in text.splitlines():
        if line.startswith("ROW "):
            try:
                rows.append(json.loads(line[4:]))
            except json.JSONDecodeError:
                continue  # a line cut short when the run was stopped
    return rows


def worst(rows: list, *path: str) -> float | None:
    """The largest value at ``path`` over ranks (the layer is as slow as its slowest rank); None if any lacks it."""
    values = []
    for row in rows:
        for step in path:
            row = row.get(step) if isinstance(row, dict) else None
        if not isinstance(row, (int, float)):
            return None
        values.append(float(row))
    return max(values) if values else None


def fmt(value: float | None) -> str:
    return "–" if value is None else f"{value:.0f}"


def best(slot: dict, *path: str) -> tuple[str, float] | tuple[None, None]:
    found = [(name, worst(rows, *path)) for name, rows in slot.items() if name not in SINGLE]
    found = [(n, v) for n, v in found if v is not None]
    return min(found, key=lambda item: item[1]) if found else (None, None)


def best_layer(slot: dict, mode: str) -> tuple[str, float] | tuple[None, None]:
    """The fastest layer of the slot, whole or as two overlapped micro-batches (named so)."""
    whole, two = best(slot, "layer", mode), best(slot, "layer_two_micro_batches", mode)
    if two[0] is not None and (whole[1] is None or two[1] < whole[1]):
        return f"{two[0]} (2 micro-batches)", two[1]
    return whole


def summarize(records: list[dict]) -> list[str]:
    lines = []
    for rec in records:
        if rec.get("error"):
            lines.append(f"RECORD MISSING {rec['error']}")
            continue
        w = rec["world"]
        eq = rec["equality"]
        bad = [n for n, rows in eq.items() if not all(r.get("ok") for r in rows)]
        lines.append(f"== world {w}: equality {len(eq) - len(bad)}/{len(eq)} ok" + (f"; FAILED: {', '.join(bad)}" if bad else ""))
        graph_bad = [n for n, rows in rec["graphs"].items() if not all(graph_ok(r) for r in rows)]
        lines.append(f"   graphs {len(rec['graphs']) - len(graph_bad)}/{len(rec['graphs'])} replay and repeated eager calls == eager"
                     + (f"; FAILED: {', '.join(graph_bad)}" if graph_bad else ""))
        lines += [f"   FAILURE {f[:300]}" for f in rec["failures"]]
        for (shape, t), slot in sorted(rec["bench"].items()):
            raw = slot.get("raw_all_to_all", [])
            one, whole = slot.get("single_gpu", []), slot.get("single_gpu_whole_work", [])
            lines.append(f"-- {shape} {t} tok/rank | raw a2a [ep*T,H] eager {fmt(worst(raw, 'eager'))} graph {fmt(worst(raw, 'graph'))}"
                         f" | 1 GPU: EP=1 {fmt(worst(one, 'eager'))}/{fmt(worst(one, 'graph'))}, whole work "
                         f"{fmt(worst(whole, 'eager'))}/{fmt(worst(whole, 'graph'))} (eager/graph)")
            for name, rows in sorted(slot.items()):
                if name in SINGLE:
                    continue
                if any("error" in r for r in rows):
                    lines.append(f"   {name:<20} ERROR {next(r['error'] for r in rows if 'error' in r)[:160]}")
                    continue
                maps = (worst(rows, "experts_with_map"), worst(rows, "experts_without_map"))
                lines.append(f"   {name:<20} d+c {fmt(worst(rows, 'dispatch_combine', 'eager'))}/{fmt(worst(rows, 'dispatch_combine', 'graph'))}"
                             f"  layer {fmt(worst(rows, 'layer', 'eager'))}/{fmt(worst(rows, 'layer', 'graph'))}"
                             + (f"  2 micro-batches {fmt(worst(rows, 'layer_two_micro_batches', 'eager'))}/"
                                f"{fmt(worst(rows, 'layer_two_micro_batches', 'graph'))}" if worst(rows, "layer_two_micro_batches", "eager") else "")
                             + (f"  experts map/no map {fmt(maps[0])}/{fmt(maps[1])}" if maps[0] else ""))
    lines.append("== scaling: best layer, eager/graph (1 GPU on EP x T tokens in brackets)")
    lines += scaling(records)
    lines.append("== targets")
    lines += targets(records)
    return lines


def _best_text(slot: dict, mode: str) -> str:
    name, value = best_layer(slot, mode)
    return "–" if name is None else f"{name} {value:.0f}"


def scaling(records: list[dict]) -> list[str]:
    """Per shape and tokens per rank: EP = 1 (one GPU, T tokens), then each world's best layer beside one GPU on its whole work."""
    found = {}
    for rec in records:
        for (shape, t), slot in rec.get("bench", {}).items():
            found.setdefault((shape, t), {})[rec["world"]] = slot
    out = []
    for (shape, t), worlds in sorted(found.items()):
        any_slot = next(iter(worlds.values()))
        parts = [f"EP=1 {fmt(worst(any_slot.get('single_gpu', []), 'eager'))}/{fmt(worst(any_slot.get('single_gpu', []), 'graph'))}"]
        for w, slot in sorted(worlds.items()):
            whole = slot.get("single_gpu_whole_work", [])
            parts.append(f"EP={w} {_best_text(slot, 'eager')} / {_best_text(slot, 'graph')} "
                         f"[{fmt(worst(whole, 'eager'))}/{fmt(worst(whole, 'graph'))}]")
        out.append(f"   {shape:<14} {t:>5}: " + "; ".join(parts))
    return out


def _ratio_line(label: str, got: tuple, limit: float, base: float | None) -> str:
    name, value = got
    if value is None or base is None:
        return f"   {label}: NOT MEASURED"
    ratio = value / base
    return f"   {label}: {'MET' if ratio <= limit else 'MISSED'} {ratio:.2f}x (≤ {limit}x): {name} {value:.0f} vs {base:.0f} µs"


def targets(records: list[dict]) -> list[str]:
    by_world = {r["world"]: r for r in records if not r.get("error")}
    out = []
    w2 = by_world.get(2, {}).get("bench", {})
    for shape in ("qwen3-30b-a3b", "mixtral-8x7b"):
        for t in (256, 4096):
            slot = w2.get((shape, t), {})
            raw = worst(slot.get("raw_all_to_all", []), "eager")
            name, dc = best(slot, "dispatch_combine", "eager")
            if raw is None or dc is None:
                out.append(f"   world 2 {shape} {t}: eager dispatch+combine ≤ 1.5 x 2 raw + 40 µs: NOT MEASURED")
            else:
                limit = 1.5 * 2 * raw + 40
                out.append(f"   world 2 {shape} {t}: eager dispatch+combine ≤ 1.5 x 2 raw + 40 µs: {'MET' if dc <= limit else 'MISSED'} "
                           f"{name} {dc:.0f} µs vs {limit:.0f} µs (raw {raw:.0f} each way)")
        slot = w2.get((shape, 4096), {})
        for mode in ("eager", "graph"):
            out.append(_ratio_line(f"world 2 {shape} 4096 {mode} EP=2 layer / 1 GPU whole work", best_layer(slot, mode), 0.6,
                                   worst(slot.get("single_gpu_whole_work", []), mode)))
        slot = w2.get((shape, 16), {})
        out.append(_ratio_line(f"world 2 {shape} 16 graph EP=2 layer / 1 GPU whole work", best_layer(slot, "graph"), 0.75,
                               worst(slot.get("single_gpu_whole_work", []), "graph")))
    w4 = by_world.get(4, {}).get("bench", {})
    for shape in ("deepseek-v3", "qwen3-30b-a3b"):
        slot = w4.get((shape, 4096), {})
        for mode in ("eager", "graph"):
            out.append(_ratio_line(f"world 4 {shape} 4096 {mode} EP=4 layer / 1 GPU whole work", best_layer(slot, mode), 0.35,
                                   worst(slot.get("single_gpu_whole_work", []), mode)))
    return out


def merge(records: list[dict]) -> list[dict]:
    """One record per world size (an equality run and a timing run of one world size become one)."""
    merged: dict = {}
    for rec in records:
        if rec.get("error"):
            merged[("missing", rec["error"])] = rec
            continue
        into = merged.setdefault(rec["world"], {"world": rec["world"], "bench": {}, "equality": {}, "graphs": {}, "failures": []})
        for part in ("bench", "equality", "graphs"):
            into[part].update(rec[part])
        into["failures"] += rec["failures"]
    return list(merged.values())


def main(paths: list[str]) -> int:
    print("\n".join(summarize(merge([load(p) for p in paths]))))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
