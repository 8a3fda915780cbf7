"""In-process A/B of the Triton plugin: an earlier commit's ``moe_core_triton`` against the working tree's, on the same
layers, weights and inputs, in one process (so both see the same clocks and the same GPU state).

Each case (preset x scheme x token count) is prepared by both versions from the same random weights (each version its
own data file of tuned tiles and its own weight layout), run once to compare outputs, then timed as one forward's CUDA
graph with the L2 emptied by a read before each replay (:func:`moe_core.bench.timing.cold_l2_seconds`), in rounds that
alternate the versions. The unquantized rows of an unchanged bf16 path show the noise between two identical kernels.

    python benchmarks/triton_ab.py --old COMMIT [--presets qwen3-30b-a3b,mixtral-8x7b] [--schemes w4a16,mxfp4] \
        [--tokens 1,16,64,4096] [--rounds 5]

``--old`` exports ``plugins/triton_backend/moe_core_triton`` at COMMIT (``git archive``) into a temporary folder as the
package ``moe_core_triton_old``; on a machine without the repository's history, ``--old`` may instead name a folder
holding that package (``git archive COMMIT plugins/triton_backend | tar -x -C DIR`` made elsewhere:
``--old DIR/plugins/triton_backend/moe_core_triton``). Prints one line per case: ``case | graph old -> new us (gain) | max diff``, where max
diff is the largest |old - new| over the output's largest |value| (0 where the change keeps every bit).
"""

from __future__ import annotations

import argparse
import importlib
import io
import statistics
import subprocess
import sys
import tarfile
import tempfile
from pathlib import Path

import torch

from moe_core.bench.timing import cold_l2_seconds
from moe_core.presets import model, random_inputs, random_layer
from moe_core.quant import scheme

ROOT = Path(__file__).resolve().parents[1]
PACKAGE = "plugins/triton_backend/moe_core_triton"
SCHEMES = "unquantized,w4a16,w4a16-zp,w8a16,w8a16-zp,fp8-w8a16,fp8-block-w8a16,nvfp4-w4a16,mxfp4"


def old_package(old: str, into: Path) -> None:
    """Write the plugin package of ``old`` (a commit, or a folder holding the package) as ``into/moe_core_triton_old``,
    its own imports rewritten to match."""
    if Path(old).is_dir():
        files = {path.relative_to(old): path.read_bytes() for path in Path(old).rglob("*")
                 if path.is_file() and "__pycache__" not in path.parts}
    else:
        archive = subprocess.run(["git", "-C", str(ROOT), "archive", "--format=tar", old, PACKAGE], check=True,
                                 capture_output=True).stdout
        with tarfile.open(fileobj=io.BytesIO(archive)) as tar:
            files = {Path(m.name).relative_to(PACKAGE): tar.extractfile(m).read() for m in tar.getmembers() if m.isfile()}
    for relative, data in files.items():
        path = into / "moe_core_triton_old" / relative
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(data.replace(b"moe_core_triton", b"moe_core_triton_old") if path.suffix == ".py" else data)


def graph(fn) -> torch.cuda.CUDAGraph:
    """One CUDA graph of ``fn``, captured after two warm-up calls on a side stream."""
    side = torch.cuda.Stream()
    side.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(side):
        for _ in range(2):
            fn()
    torch.cuda.current_stream().wait_stream(side)
    g = torch.cuda.CUDAGraph()
    with torch.cuda.graph(g):
        fn()
    return g


def compare(versions: dict, preset: str, scheme_name: str, tokens: int, rounds: int) -> str:
    """One case's line: graph times (median over rounds) of each version and the outputs' largest difference."""
    cfg = model(preset).config()
    sch = scheme(scheme_name)
    raw = random_layer(cfg, sch, device="cuda")
    kernels = {v: m.TritonKernel(cfg, *sch.keys) for v, m in versions.items()}
    weights = {v: k.prepare_weights(raw) for v, k in kernels.items()}
    x, routing = random_inputs(cfg, tokens, device="cuda", seed=tokens)
    outs = {v: kernels[v].apply(x, weights[v], routing).float() for v in kernels}
    diff = ((outs["old"] - outs["new"]).abs().max() / outs["old"].abs().max()).item()
    graphs = {v: graph(lambda v=v: kernels[v].apply(x, weights[v], routing)) for v in kernels}
    times = {v: [] for v in kernels}
    for _ in range(rounds):
        for v in kernels:
            times[v].append(cold_l2_seconds(graphs[v].replay) * 1e6)
    old, new = (statistics.median(times[v]) for v in ("old", "new"))
    return f"{preset} {scheme_name} {tokens} | {old:.1f} -> {new:.1f} us ({100 * (old / new - 1):+.1f}%) | {diff:.2e}"


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--old", required=True, help="the commit (or package folder) to compare the working tree's plugin against")
    parser.add_argument("--presets", default="qwen3-30b-a3b,mixtral-8x7b")
    parser.add_argument("--schemes", default=SCHEMES)
    parser.add_argument("--tokens", default="1,16,64,4096")
    parser.add_argument("--rounds", type=int, default=5)
    args = parser.parse_args(argv)
    with tempfile.TemporaryDirectory() as tmp:
        old_package(args.old, Path(tmp))
        sys.path.insert(0, tmp)
        versions = {"old": importlib.import_module("moe_core_triton_old.kernel"),
                    "new": importlib.import_module("moe_core_triton.kernel")}
        print(f"GPU {torch.cuda.get_device_name()}, torch {torch.__version__}; old = {args.old}, new = working tree")
        print("case | graph old -> new | max diff")
        for tokens in map(int, args.tokens.split(",")):
            for preset in args.presets.split(","):
                for name in args.schemes.split(","):
                    print(compare(versions, preset, name, tokens, args.rounds), flush=True)
                    torch.cuda.empty_cache()


if __name__ == "__main__":
    main()
