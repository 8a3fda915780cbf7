"""The Triton glue against pure-torch statements of the same layouts (compiled on a GPU, TRITON_INTERPRET=1 on a CPU; fp16/fp32)."""

import pytest
import torch

from moe_core.config import Activation
from moe_core.quant import scheme
from moe_core.quantization.qtensor import quantize
from moe_core.reference.compute import gated_activation as reference_gated
from moe_core.routing_guard import RoutingErrorCounter
from moe_core_deepgemm import glue
from moe_core_deepgemm.layout import contiguous_capacity, tma_aligned_rows

ALIGN = 16
DEVICE = torch.device("cuda" if torch.cuda.is_available() else "cpu")
ACT_KEY = scheme("fp8-block").activation_key


def expected_m_indices(counts: torch.Tensor, capacity: int) -> torch.Tensor:
    """Each expert's rows start at the sum of the aligned counts before it; the rest is -1."""
    out = torch.full((capacity,), -1, dtype=torch.int32, device=DEVICE)
    start = 0
    for e, c in enumerate(counts.tolist()):
        out[start : start + c] = e
        start += (c + ALIGN - 1) // ALIGN * ALIGN
    return out


def local_experts(ids, num_experts, expert_map):
    """Pure-torch local expert per pair (-1: remote or invalid) and how many values were invalid."""
    flat = ids.reshape(-1).long()
    in_range = (flat >= 0) & (flat < num_experts)
    local = torch.where(in_range, flat, -1)
    if expert_map is not None:
        local = torch.where(in_range, expert_map.long()[flat.clamp(0, num_experts - 1)], -1)
    return local


def route(ids, num_experts, num_local, expert_map=None):
    errors = RoutingErrorCounter("routing.topk_ids", "test")
    layout = glue.build_layout(ids, num_experts, num_local, ALIGN, expert_map, errors)
    return layout, errors


@pytest.mark.parametrize("case", ["random", "one expert", "empty experts", "invalid ids", "expert map"])
def test_layout_and_permute(case):
    gen = torch.Generator().manual_seed(1)
    tokens, top_k, num_experts, hidden = 13, 3, 6, 256
    ids = torch.randint(0, num_experts, (tokens, top_k), generator=gen, dtype=torch.int32)
    expert_map, num_local, invalid = None, num_experts, 0
    if case == "one expert":
        ids[:, 0] = 4
        ids[:, 1:] = torch.tensor([1, 2], dtype=torch.int32)
    elif case == "empty experts":
        ids = ids % 2 * 5  # experts 0 and 5 only
    elif case == "invalid ids":
        ids[0, 0], ids[3, 2], ids[5, 1] = -1, num_experts, 1000
        invalid = 3
    elif case == "expert map":
        num_local = 3
        expert_map = torch.tensor([-1, 0, -1, 1, 2, -1], dtype=torch.int32)
    x = torch.randn(tokens, hidden, generator=gen, dtype=torch.float16).to(DEVICE)
    xs = (torch.rand(tokens, hidden // 128, generator=gen) + 0.5).to(DEVICE)
    ids = ids.to(DEVICE)
    expert_map = expert_map.to(DEVICE) if expert_map is not None else None
    layout, errors = route(ids, num_experts, num_local, expert_map)
    a, a_scales, pair_row = glue.permute(x, xs, layout)

    local = local_experts(ids, num_experts, expert_map)
    counts = torch.bincount(local[local >= 0], minlength=num_local)
    capacity = contiguous_capacity(ids.numel(), num_local, ALIGN)
    assert layout.capacity == capacity
    assert torch.equal(layout.m_indices, expected_m_indices(counts, capacity))
    assert a_scales.stride() == (1, tma_aligned_rows(capacity))  # DeepGEMM's MN-major, TMA-aligned SFA
    rows = pair_row.long()
    assert torch.equal(rows < 0, local < 0)
    kept = (rows >= 0).nonzero().squeeze(1)
    assert len(set(rows[kept].tolist())) == kept.numel()  # one row per kept pair
    assert torch.equal(layout.m_indices[rows[kept]].long(), local[kept])
    tokens_of = kept // top_k
    assert torch.equal(a[rows[kept]], x[tokens_of])
    assert torch.equal(a_scales[rows[kept]], xs[tokens_of])
    assert errors.buffer(DEVICE)[0].item() == invalid


def test_gated_activation_quantizes_like_the_reference():
    gen = torch.Generator().manual_seed(2)
    rows, inter = 40, 256
    h = (torch.randn(rows, 2 * inter, generator=gen) * 3).to(DEVICE, torch.float16)
    m_indices = torch.where(torch.arange(rows) % 5 == 4, -1, torch.arange(rows) % 3).to(DEVICE, torch.int32)
    for activation, limit in ((Activation.SILU, None), (Activation.GELU, 2.5)):
        q, s = glue.gated_activation(h, activation, limit, True, m_indices=m_indices)
        used = m_indices >= 0
        want = quantize(reference_gated(h.float(), activation, limit)[used], ACT_KEY)
        assert s.stride() == (1, tma_aligned_rows(rows))
        torch.testing.assert_close(s[used], want.scale, rtol=1e-6, atol=0)
        assert (q[used].float() != want.data.float()).float().mean() < 0.01  # fp8 ties may round apart


def test_gated_activation_unquantized_and_masked():
    gen = torch.Generator().manual_seed(3)
    experts, max_tokens, inter = 3, 5, 64
    h = torch.randn(experts, max_tokens, 2 * inter, generator=gen, dtype=torch.float32).to(DEVICE)
    counts = torch.tensor([5, 0, 2], dtype=torch.int32, device=DEVICE)
    q, s = glue.gated_activation(h, Activation.SILU, 1.0, False, counts=counts)
    assert s is None and q.shape == (experts, max_tokens, inter)
    want = reference_gated(h, Activation.SILU, 1.0)
    for e, c in enumerate(counts.tolist()):
        torch.testing.assert_close(q[e, :c], want[e, :c])


def test_gated_activation_masked_scales_are_batched_mn_major():
    gen = torch.Generator().manual_seed(4)
    experts, max_tokens, inter = 2, 6, 256
    h = torch.randn(experts, max_tokens, 2 * inter, generator=gen, dtype=torch.float16).to(DEVICE)
    counts = torch.tensor([6, 3], dtype=torch.int32, device=DEVICE)
    q, s = glue.gated_activation(h, Activation.SILU, None, True, counts=counts)
    ld = tma_aligned_rows(max_tokens)
    assert s.shape == (experts, max_tokens, 2) and s.stride() == (ld * 2, 1, ld)
    for e, c in enumerate(counts.tolist()):
        want = quantize(reference_gated(h[e, :c].float(), Activation.SILU, None), ACT_KEY)
        torch.testing.assert_close(s[e, :c], want.scale, rtol=1e-6, atol=0)


def test_unpermute_weights_kept_rows_only():
    gen = torch.Generator().manual_seed(5)
    tokens, top_k, hidden, capacity = 4, 2, 48, 16
    y = torch.randn(capacity, hidden, generator=gen).to(DEVICE)
    pair_row = torch.tensor([0, 5, -1, 3, 7, -1, 2, 9], dtype=torch.int32, device=DEVICE)
    w = torch.rand(tokens, top_k, generator=gen).to(DEVICE)
    w[1, 0] = float("nan")  # a dropped pair's weight is never read
    out = glue.unpermute(y, pair_row, w, top_k, torch.float32)
    want = torch.zeros(tokens, hidden, device=DEVICE)
    for p, r in enumerate(pair_row.tolist()):
        if r >= 0:
            want[p // top_k] += w.reshape(-1)[p] * y[r]
    torch.testing.assert_close(out, want)
    unweighted = glue.unpermute(y, pair_row, None, top_k, torch.float32)
    torch.testing.assert_close(unweighted[0], y[0] + y[5])


def test_no_tokens():
    layout, _ = route(torch.empty(0, 2, dtype=torch.int32, device=DEVICE), 4, 4)
    assert layout.capacity == ALIGN and (layout.m_indices == -1).all()
