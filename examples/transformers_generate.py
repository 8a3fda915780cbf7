"""Generate a few tokens from a tiny random-weight transformers MoE model with each experts implementation.

The model is built in code (no network, no hub download), so the tokens are meaningless; what
matters is that every implementation generates the same ones (greedy decoding), and that moe-core
says which backend ran its experts, or why it cannot run them (gpt_oss: biases, custom gating)::

    python examples/transformers_generate.py --arch qwen3_moe --new-tokens 8
    python examples/transformers_generate.py --arch mixtral --device cuda --dtype bfloat16
"""

from __future__ import annotations

import argparse
import time

import torch

from moe_core.integrations import transformers as moe_core_hf
from moe_core.integrations.transformers.models import ARCHITECTURES, experts_modules, random_model

IMPLEMENTATIONS = ("eager", "grouped_mm", "batched_mm", moe_core_hf.EXPERTS_IMPLEMENTATION)


def main(argv: list[str] | None = None) -> dict[str, list[int] | str]:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--arch", choices=ARCHITECTURES, default="qwen3_moe")
    parser.add_argument("--new-tokens", type=int, default=8)
    parser.add_argument("--device", default="cpu")
    parser.add_argument("--dtype", choices=("float32", "bfloat16", "float16"), default="float32")
    args = parser.parse_args(argv)

    moe_core_hf.register()
    model = random_model(args.arch, dtype=getattr(torch, args.dtype), device=args.device)
    prompt = torch.arange(1, 6, device=args.device)[None]
    results: dict[str, list[int] | str] = {}
    for implementation in IMPLEMENTATIONS:
        model.set_experts_implementation(implementation)
        start = time.perf_counter()
        try:
            with torch.no_grad():
                out = model.generate(prompt, max_new_tokens=args.new_tokens, do_sample=False)
        except moe_core_hf.UnsupportedExpertsError as exc:
            results[implementation] = f"unsupported: {exc}"
        else:
            results[implementation] = out[0, prompt.shape[1]:].tolist()
        print(f"{implementation:>10} {time.perf_counter() - start:7.3f} s  {results[implementation]}")
    layer = moe_core_hf.prepared_layer(experts_modules(model)[0])
    if layer is not None:
        print(layer.selection.explain())
    return results


if __name__ == "__main__":
    main()
