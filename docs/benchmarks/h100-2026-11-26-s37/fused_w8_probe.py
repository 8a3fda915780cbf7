"""Session 37 probe: would the one-launch layer (fused.py) pay for 8-bit weight-only decode (issue 13)?

Qwen3-30B-A3B at 1 and 2 tokens. A probe copy of fused.py's layer whose weight tiles are 8-bit codes (int8, or e4m3
read as float8) made bf16 in registers, one float32 scale per output row (per channel) applied after each GEMM's
dot, against, in the same process, the plugin's two-GEMM w8a16 (int8, groups of 128) and fp8-w8a16 (e4m3 per
channel) layers with their tuned tiles, and bf16 as the data file runs it (one launch at 1 and 2 tokens). The codes
move about the same bytes as the plugin's (scales aside). Each probe output is checked against the plugin's bf16
layer on the dequantized weights. CUDA-graph replays with the L2 emptied by a read, the fastest probe config per
case. Candidates are compiled first by 14 worker processes.

    python fused_w8_probe.py
"""
import itertools
import subprocess
import sys

import torch
import triton
import triton.language as tl

from moe_core.bench.roofline import work
from moe_core.bench.timing import cold_l2_seconds
from moe_core.numerics import relative_error
from moe_core.presets import model, random_inputs, random_layer
from moe_core.quant import scheme
from moe_core.weights import ExpertWeights
from moe_core_triton.blocks import cdiv, next_power_of_2, pair_table, pairs_of_block
from moe_core_triton.fused import cast_sums_if_last
from moe_core_triton.gemm import gated
from moe_core_triton.kernel import TritonKernel
from fused_ab import graph_of

TOKENS = (1, 2)
CODES = {"int8": torch.int8, "e4m3": torch.float8_e4m3fn}
WORKERS = 14


@triton.jit
def probe_kernel(x_ptr, w13_ptr, w2_ptr, s13_ptr, s2_ptr, weights_ptr, state_ptr, out_ptr, ids_ptr, pairs, num_experts,
                 H, I, cols, stride_om, TOP_K: tl.constexpr, P_P2: tl.constexpr, E_P2: tl.constexpr, BLOCK_M: tl.constexpr,
                 BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr, BLOCK_H: tl.constexpr, CAST: tl.constexpr):
    ids, expert, live = pairs_of_block(ids_ptr, ids_ptr, ids_ptr, tl.program_id(0), pairs, num_experts, num_experts, False,
                                       False, False, BLOCK_M, P_P2, E_P2)
    sums_ptr = state_ptr.to(tl.pointer_type(tl.float32))
    total = (pairs // TOP_K) * H
    if live:
        dtype = x_ptr.dtype.element_ty
        row_ok = ids < pairs
        token = ids // TOP_K
        offs_n = tl.program_id(1) * cols + tl.arange(0, BLOCK_N)
        n_ok = (tl.arange(0, BLOCK_N) < cols) & (offs_n < I)
        offs_k = tl.arange(0, BLOCK_K)
        a_ptrs = x_ptr + token[None, :] * H + offs_k[:, None]
        w_ptrs = w13_ptr + expert * 2 * I * H + offs_n[:, None] * H + offs_k[None, :]
        gate = tl.zeros((BLOCK_N, BLOCK_M), dtype=tl.float32)
        up = tl.zeros((BLOCK_N, BLOCK_M), dtype=tl.float32)
        for k in range(0, H // BLOCK_K):
            a = tl.load(a_ptrs, mask=row_ok[None, :], other=0.0)
            gate = tl.dot(tl.load(w_ptrs, mask=n_ok[:, None], other=0.0).to(dtype), a, gate)
            up = tl.dot(tl.load(w_ptrs + I * H, mask=n_ok[:, None], other=0.0).to(dtype), a, up)
            a_ptrs += BLOCK_K
            w_ptrs += BLOCK_K
        gate = gate * tl.load(s13_ptr + expert * 2 * I + offs_n, mask=n_ok, other=0.0)[:, None]
        up = up * tl.load(s13_ptr + expert * 2 * I + I + offs_n, mask=n_ok, other=0.0)[:, None]
        inter = gated(gate, up, 0.0, 0, False).to(dtype)
        router = tl.load(weights_ptr + ids, mask=row_ok, other=0.0).to(tl.float32)
        offs_h = tl.arange(0, BLOCK_H)
        d_ptrs = w2_ptr + expert * H * I + offs_h[:, None] * I + offs_n[None, :]
        s_ptrs = sums_ptr + token[None, :] * H + offs_h[:, None]
        for h in range(0, H // BLOCK_H):
            w2 = tl.load(d_ptrs, mask=n_ok[None, :], other=0.0).to(dtype)
            row_scale = tl.load(s2_ptr + expert * H + h * BLOCK_H + offs_h)
            part = tl.dot(w2, inter) * row_scale[:, None] * router[None, :]
            tl.atomic_add(s_ptrs, part, mask=row_ok[None, :], sem="relaxed")
            d_ptrs += BLOCK_H * I
            s_ptrs += BLOCK_H
    cast_sums_if_last(sums_ptr, state_ptr + total, out_ptr, total, H, stride_om, CAST)


def configs():
    """(COLS, BLOCK_K, num_warps, num_stages); BLOCK_N = COLS, BLOCK_H 128, BLOCK_M 16."""
    return list(itertools.product((64, 128), (128, 256), (4, 8), (3, 4)))


def quantized(cfg, codes_dtype, seed=0, device="cuda"):
    """Random per-channel 8-bit layer: codes, float32 scales per output row, and the dequantized weights."""
    gen = torch.Generator(device=device).manual_seed(seed)
    e, h, i = cfg.num_experts, cfg.hidden_size, cfg.intermediate_size

    def one(rows, k):
        values = torch.randn(e, rows, k, device=device, generator=gen)
        scale = values.abs().amax(dim=2) / (127.0 if codes_dtype is torch.int8 else 448.0)
        q = values / scale[:, :, None]
        codes = q.round().clamp(-127, 127).to(torch.int8) if codes_dtype is torch.int8 else q.to(codes_dtype)
        return codes, (scale * 0.05).float(), (codes.float() * (scale * 0.05)[:, :, None]).to(cfg.dtype)
    return one(2 * i, h), one(h, i)


def probe_forward(cfg, w13, w2, x, routing, config):
    cols, block_k, warps, stages = config
    (c13, s13, _), (c2, s2, _) = w13, w2
    tokens, h = x.shape
    table = pair_table(routing.topk_ids, cfg.num_experts, cfg.num_experts, 16)
    ids, _, _, pairs, capacity, experts, _ = table.kernel_args
    state = torch.zeros(tokens * h + 1, dtype=torch.int32, device=x.device)
    out = torch.empty_like(x)
    weights = routing.topk_weights.contiguous()
    grid = (capacity // 16, cdiv(cfg.intermediate_size, cols))

    def run():
        probe_kernel[grid](x, c13, c2, s13, s2, weights, state, out, ids, pairs, experts, h, cfg.intermediate_size, cols, out.stride(0),
                           TOP_K=cfg.top_k, P_P2=next_power_of_2(pairs), E_P2=next_power_of_2(experts), BLOCK_M=16, BLOCK_N=cols,
                           BLOCK_K=block_k, BLOCK_H=128, CAST=min(4096, next_power_of_2(tokens * h)), num_warps=warps, num_stages=stages)
        return out
    return run


def graph_seconds(fn) -> float:
    """The median replay time of a CUDA graph of ``fn`` (fused_ab.graph_of), the L2 emptied by a read before each."""
    return cold_l2_seconds(graph_of(fn), warmup_ms=5, rep_ms=30)


def main(argv):
    cfg = model("qwen3-30b-a3b").config()
    if argv[:1] == ["--worker"]:
        index = int(argv[1])
        for n, (name, codes) in enumerate(CODES.items()):
            w13, w2 = quantized(cfg, codes)
            for tokens in TOKENS:
                x, routing = random_inputs(cfg, tokens, device="cuda", seed=tokens)
                for c, config in enumerate(configs()):
                    if (n * 100 + tokens * 10 + c) % WORKERS == index:
                        probe_forward(cfg, w13, w2, x, routing, config)()
        torch.cuda.synchronize()
        return
    workers = [subprocess.Popen([sys.executable, __file__, "--worker", str(i)], stderr=subprocess.DEVNULL) for i in range(WORKERS)]
    for w in workers:
        w.wait()
    bf16 = TritonKernel(cfg, None, None)
    print(torch.cuda.get_device_name(), torch.__version__, triton.__version__, flush=True)
    plugin = {}
    for name in ("unquantized", "w8a16", "fp8-w8a16"):
        sch = scheme(name)
        kernel = TritonKernel(cfg, sch.weight_key, sch.activation_key)
        plugin[name] = (kernel, kernel.prepare_weights(random_layer(cfg, sch, device="cuda", seed=0)))
    for tokens in TOKENS:
        x, routing = random_inputs(cfg, tokens, device="cuda", seed=tokens)
        ideal_bf16 = work(cfg, None, routing).bytes
        times = {name: graph_seconds(lambda k=k, w=w: k.apply(x, w, routing)) for name, (k, w) in plugin.items()}
        line = " | ".join(f"{name} {t * 1e6:.1f} us" for name, t in times.items())
        print(f"T={tokens}: plugin {line}  (bf16 layer bytes {ideal_bf16 / 1e6:.1f} MB)", flush=True)
        for name, codes in CODES.items():
            w13, w2 = quantized(cfg, codes)
            want = bf16.apply(x, bf16.prepare_weights(ExpertWeights(w13=w13[2], w2=w2[2])), routing)
            results = []
            for config in configs():
                run = probe_forward(cfg, w13, w2, x, routing, config)
                err = relative_error(run().float(), want.float())
                results.append((graph_seconds(run), config, err))
            results.sort(key=lambda r: r[0])
            best = results[0]
            print(f"  probe {name}: fastest {best[0] * 1e6:.1f} us (COLS, BLOCK_K, warps, stages = {best[1]}; rel. error {best[2]:.2e}); "
                  f"next: {', '.join(f'{r[0] * 1e6:.1f}' for r in results[1:5])}; worst error {max(r[2] for r in results):.2e}", flush=True)
            print(f"    vs bf16 (data file) {times['unquantized'] / best[0]:.2f}x; vs the plugin's "
                  f"{'w8a16' if name == 'int8' else 'fp8-w8a16'} {times['w8a16' if name == 'int8' else 'fp8-w8a16'] / best[0]:.2f}x", flush=True)


if __name__ == "__main__":
    main(sys.argv[1:])
