"""The plugin's own Marlin layouts (moe_core_marlin.repack), on the CPU.

The hand-worked cases below are derived from the layout's definition alone (16 x 64 tiles; warp w owns
columns 16w..16w+15; thread t holds rows r, r+1, r+8, r+9 with r = 2(t % 4) of columns c = 16w + t//4
and c + 8; the order of the codes inside a word), not from the code under test.
"""

import pytest
import torch
from hypothesis import given, settings, strategies as st

from moe_core_marlin.repack import pack_zero_points, permute_scales, repack_weights, unpack_weights, unpermute_scales


def one_hot(k, n, value, size_k=32, size_n=128):
    codes = torch.zeros((1, size_n, size_k), dtype=torch.int64)
    codes[0, n, k] = value
    return codes


def field(words, row, word, slot, bits):
    return (int(words[0, row, word]) & 0xFFFFFFFF) >> (bits * slot) & ((1 << bits) - 1)


# (k, n) -> (output row, word within the row, slot within the word), worked out by hand.
HAND_4BIT = [
    ((0, 0), (0, 0, 0)),     # t=0, w=0: (r, c) is the low nibble of word 4t + w = 0
    ((8, 0), (0, 0, 1)),     # (r+8, c): nibble 1
    ((0, 8), (0, 0, 2)),     # (r, c+8): nibble 2
    ((1, 0), (0, 0, 4)),     # (r+1, c): nibble 4
    ((9, 8), (0, 0, 7)),     # (r+9, c+8): nibble 7
    ((2, 0), (0, 4, 0)),     # r=2 -> t=1: word 4
    ((0, 1), (0, 16, 0)),    # c=1 -> t=4: word 16
    ((0, 16), (0, 1, 0)),    # c=16 -> w=1: word 1
    ((9, 24), (0, 1, 7)),    # w=1, c=16, n = c+8, k = r+9 with t=0: word 1, nibble 7
    ((7, 63), (0, 4 * 31 + 3, 6)),  # w=3, t//4=7 -> c=55, n=c+8; r=6 -> t%4=3: t=31; k=r+1: nibble 6
    ((0, 64), (0, 128, 0)),  # second tile along N: the next 128 words of row 0
    ((16, 0), (1, 0, 0)),    # second tile along K: row 1
]
HAND_8BIT = [
    ((0, 0), (0, 0, 0)),     # word 8t + 2w = 0 holds column c, byte 0 row r
    ((8, 0), (0, 0, 1)),     # byte 1: r+8
    ((1, 0), (0, 0, 2)),     # byte 2: r+1
    ((9, 0), (0, 0, 3)),     # byte 3: r+9
    ((0, 8), (0, 1, 0)),     # column c+8: word 8t + 2w + 1
    ((0, 16), (0, 2, 0)),    # w=1: word 2
    ((2, 1), (0, 8 * 5, 0)),  # t%4=1, t//4=1 -> t=5: word 40
    ((0, 64), (0, 256, 0)),  # second tile along N: 256 words per tile
]


@pytest.mark.parametrize("bits, cases", [(4, HAND_4BIT), (8, HAND_8BIT)])
def test_hand_worked_positions(bits, cases):
    for (k, n), (row, word, slot) in cases:
        value = (1 << bits) - 2
        words = repack_weights(one_hot(k, n, value), bits)
        assert words.shape == (1, 32 // 16, 128 * bits // 2)
        assert field(words, row, word, slot, bits) == value, ((k, n), (row, word, slot))
        assert int((words != 0).sum()) == 1  # nothing else set


@pytest.mark.parametrize("bits", [4, 8])
def test_repack_is_a_bijection_of_one_tile(bits):
    # One expert per position of a 16 x 64 tile, each with a single code set: every position lands in its own slot.
    codes = torch.zeros((16 * 64, 64, 16), dtype=torch.int64)
    positions = torch.arange(16 * 64)
    codes[positions, positions % 64, positions // 64] = 1
    words = repack_weights(codes, bits).to(torch.int64) & 0xFFFFFFFF
    fields = torch.stack([(words >> (bits * s)) & ((1 << bits) - 1) for s in range(32 // bits)], dim=-1).reshape(16 * 64, -1)
    assert fields.shape[1] == 16 * 64 and bool((fields.sum(1) == 1).all())
    assert torch.equal(fields.argmax(1).sort().values, positions)


@settings(max_examples=20, deadline=None, derandomize=True)
@given(bits=st.sampled_from([4, 8]), experts=st.integers(1, 3), kt=st.integers(1, 3), nt=st.integers(1, 3), seed=st.integers(0, 2**16))
def test_round_trip(bits, experts, kt, nt, seed):
    gen = torch.Generator().manual_seed(seed)
    codes = torch.randint(0, 2**bits, (experts, 64 * nt, 16 * kt), generator=gen)
    words = repack_weights(codes, bits)
    assert words.dtype == torch.int32 and words.shape == (experts, kt, 64 * nt * bits // 2)
    assert torch.equal(unpack_weights(words, bits, 64 * nt), codes)


def test_shapes_off_the_tile_are_refused():
    with pytest.raises(ValueError, match="16 \\(K\\) x 64 \\(N\\)"):
        repack_weights(torch.zeros((1, 64, 24), dtype=torch.int64), 4)


def test_scale_permutation_hand_worked():
    cols = torch.arange(128, dtype=torch.float32).reshape(1, 1, 128).repeat(1, 2, 1)  # value = source column
    grouped = permute_scales(cols, size_k=256, group_size=128)
    # Each run of 64 is an 8 x 8 block, transposed: position 8i + j takes column i + 8j.
    assert grouped[0, 0, :10].tolist() == [0, 8, 16, 24, 32, 40, 48, 56, 1, 9]
    assert grouped[0, 1, 64 + 9].item() == 64 + 1 + 8
    channel = permute_scales(cols[:, :1], size_k=256, group_size=-1)
    # Runs of 32: position 8i + m takes 2i + (0, 1, 8, 9, 16, 17, 24, 25)[m].
    assert channel[0, 0, :10].tolist() == [0, 1, 8, 9, 16, 17, 24, 25, 2, 3]
    assert channel[0, 0, 32 + 31].item() == 32 + 6 + 25
    # One group spanning all of K is read channelwise.
    assert torch.equal(permute_scales(cols[:, :1], size_k=128, group_size=128), channel)
    for s, k, g in ((grouped, 256, 128), (channel, 256, -1)):
        assert torch.equal(unpermute_scales(s, k, g), cols[:, : s.shape[1]])


def test_zero_points_hand_worked():
    zero = torch.zeros((1, 1, 64), dtype=torch.int64)
    zero[0, 0, 8] = 5   # the grouped permutation puts column 8 at position 1 ...
    zero[0, 0, 1] = 3   # ... and column 1 at position 8
    words = pack_zero_points(zero)
    assert words.shape == (1, 1, 8) and words.dtype == torch.int32
    # Position 1 is slot 4 of word 0 (slots read positions 0, 2, 4, 6, 1, 3, 5, 7); position 8 is slot 0 of word 1.
    assert int(words[0, 0, 0]) == 5 << 16 and int(words[0, 0, 1]) == 3 and int(words[0, 0, 2:].abs().sum()) == 0


@pytest.mark.parametrize("name", ["w4a16-zp", "w8a16", "fp8-block-w8a16"])
def test_prepare_weights_lays_out_the_canonical_tensors(name):
    from moe_core.config import MoEConfig
    from moe_core.quant import scheme
    from moe_core.weights import quantize_experts
    from moe_core_marlin.kernel import MarlinKernel

    cfg = MoEConfig(num_experts=2, top_k=1, hidden_size=128, intermediate_size=128, dtype=torch.bfloat16)
    keys = scheme(name).keys
    gen = torch.Generator().manual_seed(0)
    raw = quantize_experts(torch.randn(2, 256, 128, generator=gen), torch.randn(2, 128, 128, generator=gen), keys[0])
    prepared = MarlinKernel(cfg, *keys).prepare_weights(raw)
    bits = 4 if name == "w4a16-zp" else 8
    data = raw.w2
    if bits == 4:  # moe-core's int4: element 2j in the low nibble
        want = torch.stack((data.to(torch.int64) & 15, data.to(torch.int64) >> 4), dim=-1).flatten(-2)
    elif data.dtype == torch.int8:
        want = data.to(torch.int64) + 128
    else:
        want = data.view(torch.uint8).to(torch.int64)
    assert torch.equal(unpack_weights(prepared.w2, bits, 128), want)
    scales = unpermute_scales(prepared.w2_scale, 128, 128).float()
    if name == "fp8-block-w8a16":  # one 128 x 128 block per expert here, times Marlin's bfloat16 exponent bias
        assert torch.equal(scales, raw.w2_scale.to(torch.bfloat16).float().reshape(2, 1, 1).expand(2, 1, 128) * 2.0**120)
    else:
        assert torch.equal(scales, raw.w2_scale.transpose(1, 2).to(torch.bfloat16).float())
