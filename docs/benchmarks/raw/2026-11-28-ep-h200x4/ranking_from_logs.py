"""The dispatcher ranking of this run from the ranks' ROW lines (the logs hold every finished case).

World 4's first process group (every dispatcher but peer_copy) aborted at 16 tokens per rank, before it
returned its results, so the ranking ep_gpu.py wrote (dispatch_ranking.json) holds only peer_copy at
world 4. This applies ep_gpu.py's rule to the logs instead: per (world, shape, tokens), each dispatcher
whose layer finished on every rank, at the slowest rank's eager time. Entries with a single dispatcher
(world 4 at 16 tokens: the other group never reached them) are left out; the nearest measured token
count decides there.

    PYTHONPATH=.:benchmarks python docs/benchmarks/raw/2026-11-28-ep-h200x4/ranking_from_logs.py OUT.json
"""

import sys
from pathlib import Path

from ep_gpu import _dims
from ep_summary import SINGLE, load
from moe_core.dispatch.ranking import ranking_from_times

HERE = Path(__file__).parent


def main(dest: str) -> None:
    measured = {}
    for name in ("ep_world2", "ep_world4"):
        record = load(str(HERE / f"{name}.json"))
        world = record["world"]
        for (shape, tokens), rows in record["bench"].items():
            e, k, h, _ = _dims(shape)
            times = {d: max(r["layer"]["eager"] for r in ranks) for d, ranks in rows.items()
                     if d not in SINGLE and len(ranks) == world and all("layer" in r for r in ranks)}
            if len(times) > 1:
                measured[(world, e, k, h, "bfloat16", tokens)] = times
    ranking_from_times("NVIDIA H200", measured).save(dest)


if __name__ == "__main__":
    main(sys.argv[1])
