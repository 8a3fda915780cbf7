"""Weight-only codes stored in the K order of the MMA's register fragments, so each thread reads its codes at once.

A 16-bit MMA operand in registers (Hopper's wgmma A operand, which a SWAP_AB tile feeds the dequantized weights to;
Ampere's mma.sync A and B operands) gives each thread, per 64 values along K, 16 values: k bit 0 and bits 3 to 5 of
the value's index k in the chunk vary within the thread, bits 1 and 2 select the thread (its lane's low bits). With
the codes in K order a thread's values lie in pairs 8 bytes apart, so a tile loaded from shared memory into that layout
takes one 1- or 2-byte load per pair. Stored with the position of value k in its chunk being

    j = k0 + 2 k3 + 4 k4 + 8 k5 + 16 k1 + 32 k2    (k = k0 + 2 k1 + 4 k2 + 8 k3 + 16 k4 + 32 k5)

a thread's 16 values are 16 consecutive bytes (8 for packed 4-bit codes, whose k0 is the nibble): one vector load.
:func:`permute_k` stores them so (``prepare_weights``, once); :func:`codes_in_k_order` puts a loaded tile back in K
order with a reshape and a permute, which Triton folds into the layout the tile is loaded in, moving no data.

Which codes are stored so, and why only those: :meth:`moe_core_triton.kernel.WeightOnly.permutes` (the order pays
where a tile feeds the weights to the MMA as its register operand). K must be whole chunks (:func:`whole_chunks`), and
a GEMM over such codes takes K steps of whole chunks (BLOCK_K a multiple of :data:`K_CHUNK`).
"""

from __future__ import annotations

import torch
import triton
import triton.language as tl

#: Values along K per chunk of permuted codes.
K_CHUNK = 64


def whole_chunks(k: int) -> bool:
    """Whether a reduction size ``k`` is whole chunks of :data:`K_CHUNK` values."""
    return k % K_CHUNK == 0


def permute_k(codes: torch.Tensor, packed: bool) -> torch.Tensor:
    """Codes [E, rows, bytes] (K contiguous; ``packed``: two 4-bit codes per byte, element 2j in the low nibble of byte
    j) with every chunk of :data:`K_CHUNK` values stored in fragment order (module docstring); bytes a multiple of the
    chunk's."""
    experts, rows, width = codes.shape
    if packed:  # bytes: index bits k5 k4 k3 k2 k1 (k0 is the nibble), stored as k2 k1 k5 k4 k3
        chunks = codes.reshape(experts, rows, width // (K_CHUNK // 2), 2, 2, 2, 2, 2).permute(0, 1, 2, 6, 7, 3, 4, 5)
    else:  # index bits k5 k4 k3 k2 k1 k0, stored as k2 k1 k5 k4 k3 k0
        chunks = codes.reshape(experts, rows, width // K_CHUNK, 2, 2, 2, 2, 2, 2).permute(0, 1, 2, 6, 7, 3, 4, 5, 8)
    return chunks.reshape(experts, rows, width).contiguous()


@triton.jit
def codes_in_k_order(raw, W_PACKED: tl.constexpr, BLOCK_N: tl.constexpr, BYTES_K: tl.constexpr):
    """A tile of codes stored by :func:`permute_k`, [BLOCK_N, BYTES_K] (whole chunks), in K order."""
    if W_PACKED:
        chunks = tl.reshape(raw, (BLOCK_N, BYTES_K // 32, 2, 2, 2, 2, 2))  # k2 k1 k5 k4 k3
        ordered = tl.permute(chunks, (0, 1, 4, 5, 6, 2, 3))  # k5 k4 k3 k2 k1
    else:
        chunks = tl.reshape(raw, (BLOCK_N, BYTES_K // 64, 2, 2, 2, 2, 2, 2))  # k2 k1 k5 k4 k3 k0
        ordered = tl.permute(chunks, (0, 1, 4, 5, 6, 2, 3, 7))  # k5 k4 k3 k2 k1 k0
    return tl.reshape(ordered, (BLOCK_N, BYTES_K))
