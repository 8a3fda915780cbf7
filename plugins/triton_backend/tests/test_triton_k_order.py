"""Weight-only codes stored in the K order of the MMA's register fragments (k_order): the stored positions, and the
GEMM's reshape that puts a loaded tile back in K order (CPU: the Triton interpreter; GPU: compiled)."""

import torch
import triton
import triton.language as tl

from moe_core.quantization import fp4
from moe_core_triton.k_order import K_CHUNK, codes_in_k_order, permute_k, whole_chunks

DEVICE = "cuda" if torch.cuda.is_available() else "cpu"


def fragment_position(k: int) -> int:
    """Where value k of a chunk is stored: its index bits k0, k3, k4, k5, k1, k2 from low to high."""
    bit = [(k >> i) & 1 for i in range(6)]
    return bit[0] + 2 * bit[3] + 4 * bit[4] + 8 * bit[5] + 16 * bit[1] + 32 * bit[2]


def test_each_value_goes_where_its_thread_reads_16_consecutive_bytes():
    k = torch.arange(3 * K_CHUNK, dtype=torch.int32).reshape(1, 1, -1)
    stored = permute_k(k, packed=False)[0, 0]
    for value in range(3 * K_CHUNK):
        chunk, within = divmod(value, K_CHUNK)
        assert stored[chunk * K_CHUNK + fragment_position(within)] == value
    # A thread (k1, k2 fixed) finds its 16 values, k0 and k3..k5 varying, in 16 consecutive bytes.
    assert sorted(stored[16:32].tolist()) == sorted(v for v in range(64) if (v >> 1) & 3 == 1)


def test_packed_codes_move_as_bytes_keeping_their_nibbles():
    g = torch.Generator().manual_seed(0)
    codes = torch.randint(0, 16, (2, 3, 2 * K_CHUNK), generator=g, dtype=torch.uint8)
    packed = permute_k(fp4.pack_nibbles(codes), packed=True)
    assert torch.equal(fp4.unpack_nibbles(packed), permute_k(codes, packed=False))


def test_whole_chunks():
    assert [whole_chunks(k) for k in (64, 2880, 7168, 96, 200)] == [True, True, True, False, False]


@triton.jit
def _in_k_order_kernel(stored_ptr, out_ptr, W_PACKED: tl.constexpr, BLOCK_N: tl.constexpr, BYTES_K: tl.constexpr):
    offs = tl.arange(0, BLOCK_N)[:, None] * BYTES_K + tl.arange(0, BYTES_K)[None, :]
    tl.store(out_ptr + offs, codes_in_k_order(tl.load(stored_ptr + offs), W_PACKED, BLOCK_N, BYTES_K))


def test_the_gemm_reads_a_stored_tile_back_in_k_order():
    g = torch.Generator().manual_seed(1)
    for packed, width in ((False, 64), (False, 128), (True, 32), (True, 64)):
        codes = torch.randint(0, 256, (1, 16, width), generator=g, dtype=torch.uint8)
        stored = permute_k(codes, packed).to(DEVICE)
        out = torch.empty_like(stored)
        _in_k_order_kernel[(1,)](stored, out, W_PACKED=packed, BLOCK_N=16, BYTES_K=width)
        assert torch.equal(out.cpu(), codes), (packed, width)
