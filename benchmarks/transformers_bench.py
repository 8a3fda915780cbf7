"""transformers' experts implementations vs experts_implementation="moe_core" on a GPU.

Two-layer random-weight models with the MoE shape of Qwen3-30B-A3B and of Mixtral-8x7B, bf16. For
1, 16 and 4096 tokens (one sequence, no KV cache) and each of "grouped_mm", "batched_mm", "eager"
and "moe_core" it times

* ``moe_ms``: the two experts modules alone, called on the exact inputs they received in a real
  forward (captured by hooks) — the MoE layers' time, host overhead included;
* ``forward_ms``: the whole model forward;

with moe_core.bench.timing.Timer (triton do_bench, CUDA events, median). It also checks moe_core
against eager: each experts module's output (budget ``numerics.tolerance(None, bf16)``), the logits,
an inductor-compiled ``torch.compile(model, fullgraph=True)`` forward (Qwen3 shape, 16 tokens), and transformers'
fine-grained fp8 experts (block-128, quantized by transformers) against their dequantized eager
oracle (budget ``tolerance(kFp8Dynamic128Sym, bf16)``). A failure in one case is recorded, never
fatal. Writes ``transformers_bench.json`` and ``transformers_bench.txt`` under ``--out``::

    pip install --no-deps --no-build-isolation -e . -e plugins/triton_backend
    python3 benchmarks/transformers_bench.py --out "$OUT"
"""

from __future__ import annotations

import argparse
import json
import time
import traceback
from pathlib import Path

import torch

from moe_core.bench.timing import Timer
from moe_core.integrations import transformers as moe_core_hf
from moe_core.integrations.transformers.models import experts_modules, fine_grained_fp8, random_model
from moe_core.numerics import relative_error, tolerance
from moe_core.quant import kFp8Dynamic128Sym

IMPLEMENTATIONS = ("grouped_mm", "batched_mm", "eager", "moe_core")
COMMON = dict(num_hidden_layers=2, vocab_size=1024, max_position_embeddings=8192)
SHAPES = {
    "qwen3-30b-a3b": ("qwen3_moe", dict(hidden_size=2048, intermediate_size=6144, moe_intermediate_size=768, num_experts=128,
                                        num_experts_per_tok=8, num_attention_heads=32, num_key_value_heads=4, head_dim=128)),
    "mixtral-8x7b": ("mixtral", dict(hidden_size=4096, intermediate_size=14336, num_local_experts=8, num_experts_per_tok=2,
                                     num_attention_heads=32, num_key_value_heads=8)),
    "tiny": ("qwen3_moe", dict(hidden_size=128, moe_intermediate_size=128, head_dim=32)),  # a CPU smoke run of this script
}
TARGETS = {16: 1.5, 4096: 1.3}  # moe_core over the best built-in implementation, MoE layers


def failure(exc: BaseException) -> str:
    if torch.cuda.is_available():
        torch.cuda.empty_cache()
    return f"{type(exc).__name__}: {exc}"[:600]


def captured_experts_inputs(model, tokens: torch.Tensor) -> list[tuple]:
    """Each experts module with the (hidden_states, top_k_index, top_k_weights) it got in one forward."""
    captured, hooks = [], []
    for experts in experts_modules(model):
        hooks.append(experts.register_forward_hook(lambda mod, args, out: captured.append((mod, tuple(a.clone() for a in args)))))
    try:
        with torch.no_grad():
            model(tokens, use_cache=False)
    finally:
        for hook in hooks:
            hook.remove()
    return captured


def run_experts(captured) -> list[torch.Tensor]:
    with torch.no_grad():
        return [experts(*args) for experts, args in captured]


def batched_mm_gather_bytes(model, num_tokens: int) -> int:
    """Bytes of expert weights batched_mm gathers (one copy per token-expert pair)."""
    experts = experts_modules(model)[0]
    top_k = model.config.num_experts_per_tok
    return num_tokens * top_k * (experts.gate_up_proj[0].numel() + experts.down_proj[0].numel()) * experts.gate_up_proj.element_size()


def time_case(model, implementation: str, tokens: torch.Tensor, timer: Timer) -> dict:
    model.set_experts_implementation(implementation)
    need = batched_mm_gather_bytes(model, tokens.shape[1])
    if implementation == "batched_mm" and tokens.is_cuda and need > 0.5 * torch.cuda.mem_get_info()[0]:
        return {"skipped": f"batched_mm would gather {need / 2**30:.0f} GiB of expert weights"}
    captured = captured_experts_inputs(model, tokens)
    row = {"moe_ms": 1e3 * timer.time(lambda: run_experts(captured))}
    with torch.no_grad():
        row["forward_ms"] = 1e3 * timer.time(lambda: model(tokens, use_cache=False))
    if implementation == "moe_core":
        row["backend"] = moe_core_hf.prepared_layer(captured[0][0]).backend
    return row


def check_against_eager(model, oracle, tokens: torch.Tensor, budget: float) -> dict:
    """moe_core on ``model`` vs eager on ``oracle``: per-experts-module outputs on the oracle's inputs, and logits."""
    oracle.set_experts_implementation("eager")
    want = captured_experts_inputs(oracle, tokens)
    expected = run_experts(want)
    with torch.no_grad():
        expected_logits = oracle(tokens, use_cache=False).logits
    model.set_experts_implementation("moe_core")
    mine = dict(zip([id(m) for m in experts_modules(oracle)], experts_modules(model)))
    errors = [relative_error(got, ref) for got, ref in zip(run_experts([(mine[id(experts)], args) for experts, args in want]), expected)]
    with torch.no_grad():
        logits_error = relative_error(model(tokens, use_cache=False).logits, expected_logits)
    return {"experts_rel_err": errors, "logits_rel_err": logits_error, "budget": budget, "ok": max(errors) < budget,
            "backend": moe_core_hf.prepared_layer(experts_modules(model)[0]).backend}


def check_compiled(model, tokens: torch.Tensor, timer: Timer) -> dict:
    """Inductor, fullgraph: compiled moe_core logits vs eager-implementation logits, and compiled forward time."""
    model.set_experts_implementation("eager")
    with torch.no_grad():
        want = model(tokens, use_cache=False).logits
        model.set_experts_implementation("moe_core")
        torch._dynamo.reset()
        compiled = torch.compile(model, fullgraph=True)
        start = time.perf_counter()
        got = compiled(tokens, use_cache=False).logits
        compile_s = time.perf_counter() - start
        forward_ms = 1e3 * timer.time(lambda: compiled(tokens, use_cache=False))
    error = relative_error(got, want)
    budget = tolerance(None, torch.bfloat16)
    return {"logits_rel_err": error, "budget": budget, "ok": error < budget, "compile_s": compile_s, "forward_ms": forward_ms}


def bench_shape(name: str, token_counts: list[int], timer: Timer, compile_check: bool, device: str) -> dict:
    arch, shape = SHAPES[name]
    result: dict = {"arch": arch, "shape": shape, "timings": {}, "checks": {}}
    model = random_model(arch, dtype=torch.bfloat16, device=device, **COMMON, **shape)
    generator = torch.Generator(device=device).manual_seed(0)
    inputs = {t: torch.randint(0, COMMON["vocab_size"], (1, t), device=device, generator=generator) for t in token_counts}
    for t in token_counts:
        for implementation in IMPLEMENTATIONS:
            try:
                result["timings"].setdefault(str(t), {})[implementation] = time_case(model, implementation, inputs[t], timer)
            except Exception as exc:  # noqa: BLE001 - recorded, the other cases still run
                result["timings"].setdefault(str(t), {})[implementation] = {"error": failure(exc)}
            print(name, t, implementation, result["timings"][str(t)][implementation], flush=True)
    check_tokens = [t for t in (16, 4096) if t in inputs]
    for t in check_tokens:
        try:
            result["checks"][f"bf16_{t}"] = check_against_eager(model, model, inputs[t], tolerance(None, torch.bfloat16))
        except Exception as exc:  # noqa: BLE001
            result["checks"][f"bf16_{t}"] = {"error": failure(exc), "trace": traceback.format_exc()[-2000:]}
    if compile_check and arch == "qwen3_moe" and 16 in inputs:  # one inductor compile keeps the run under ~3 minutes
        try:
            result["checks"]["inductor_16"] = check_compiled(model, inputs[16], timer)
        except Exception as exc:  # noqa: BLE001
            result["checks"]["inductor_16"] = {"error": failure(exc), "trace": traceback.format_exc()[-2000:]}
    if arch == "qwen3_moe":
        try:
            oracle = fine_grained_fp8(model)
            for t in check_tokens:
                result["checks"][f"fp8_block_{t}"] = check_against_eager(model, oracle, inputs[t], tolerance(kFp8Dynamic128Sym, torch.bfloat16))
            del oracle
        except Exception as exc:  # noqa: BLE001
            result["checks"]["fp8_block"] = {"error": failure(exc), "trace": traceback.format_exc()[-2000:]}
    for key, check in result["checks"].items():
        print(name, key, {k: v for k, v in check.items() if k != "trace"}, flush=True)
    return result


def report(results: dict) -> str:
    lines = []
    for name, result in results["shapes"].items():
        lines.append(f"## {name} ({result['arch']}, 2 layers, bf16)")
        lines.append(f"{'tokens':>6} {'implementation':>14} {'moe_ms':>10} {'forward_ms':>11}  note")
        for t, rows in result.get("timings", {}).items():
            for implementation, row in rows.items():
                note = row.get("backend") or row.get("skipped") or row.get("error", "")
                moe, fwd = row.get("moe_ms"), row.get("forward_ms")
                moe_text, fwd_text = ("-" if v is None else f"{v:.3f}" for v in (moe, fwd))
                lines.append(f"{t:>6} {implementation:>14} {moe_text:>10} {fwd_text:>11}  {note}")
            builtin = [row["moe_ms"] for impl, row in rows.items() if impl != "moe_core" and "moe_ms" in row]
            mine = rows.get("moe_core", {}).get("moe_ms")
            if builtin and mine:
                target = TARGETS.get(int(t))
                goal = f" (target {target}x: {'met' if min(builtin) / mine >= target else 'missed'})" if target else ""
                lines.append(f"{t:>6} moe_core vs best built-in, MoE layers: {min(builtin) / mine:.2f}x{goal}")
        for key, check in result.get("checks", {}).items():
            lines.append(f"check {key}: " + json.dumps({k: v for k, v in check.items() if k != "trace"}))
        lines.append("")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--out", type=Path, required=True)
    parser.add_argument("--shapes", default=",".join(SHAPES), help=f"comma-separated, from {', '.join(SHAPES)}")
    parser.add_argument("--tokens", default="1,16,4096")
    parser.add_argument("--no-compile", action="store_true", help="skip the inductor-compiled check")
    parser.add_argument("--device", default="cuda", help="cpu: a smoke run of the script itself (with --shapes tiny)")
    args = parser.parse_args(argv)
    args.out.mkdir(parents=True, exist_ok=True)
    import transformers

    moe_core_hf.register()
    timer = Timer(torch.device(args.device).type)
    results = {"device": torch.cuda.get_device_name() if args.device != "cpu" else "cpu", "torch": torch.__version__, "transformers": transformers.__version__,
               "timing": timer.method, "shapes": {}}
    for name in args.shapes.split(","):
        start = time.perf_counter()
        try:
            results["shapes"][name] = bench_shape(name, [int(t) for t in args.tokens.split(",")], timer, not args.no_compile, args.device)
        except Exception as exc:  # noqa: BLE001
            results["shapes"][name] = {"arch": SHAPES.get(name, ("?",))[0], "error": failure(exc), "trace": traceback.format_exc()[-2000:]}
        results["shapes"][name]["seconds"] = time.perf_counter() - start
        if torch.cuda.is_available():
            torch.cuda.empty_cache()
        (args.out / "transformers_bench.json").write_text(json.dumps(results, indent=2))
    text = report(results)
    (args.out / "transformers_bench.txt").write_text(text)
    print(text)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
