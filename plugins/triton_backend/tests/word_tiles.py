"""Helpers of the words tests (test_triton_e2m1_words.py, test_triton_int4_words.py): codes that put every code in
every position of a word, the rows a GEMM tile holds, a tile's words as a thread's registers hand them
(moe_core_triton.words), and a tile decoded as the GEMM decodes it."""

import torch
import triton
import triton.language as tl

from moe_core_triton import e2m1_words, int4_words

DEVICE = "cuda" if torch.cuda.is_available() else "cpu"


def every_code_everywhere(experts: int, rows: int, width: int) -> torch.Tensor:
    """Codes [experts, rows, width] (values along K, 0 to 15) in which every code meets every position of a word."""
    k = torch.arange(width)[None, None, :]
    return ((k + 5 * torch.arange(rows)[None, :, None] + 3 * torch.arange(experts)[:, None, None] + (k // 8) * 3) % 16).to(torch.uint8)


def tile_rows(rows: int, gate_up: bool) -> torch.Tensor:
    """The weight rows a GEMM tile holds in order: w13's in GATE_UP runs (8 gate rows, then their up rows), else as
    stored."""
    if not gate_up:
        return torch.arange(rows)
    half = rows // 2
    return torch.cat([torch.cat([torch.arange(x, x + 8), half + torch.arange(x, x + 8)]) for x in range(0, half, 8)])


def thread_registers(tile: torch.Tensor) -> torch.Tensor:
    """A tile's words [E, rows, bytes] (uint8, rows as the tile holds them) as a thread's registers list each word's
    bytes (rows r and r + 8 of each 16, bytes j and j + 1): [E, rows / 16, 8, bytes / 2, 4]."""
    experts, rows, width = tile.shape
    return tile.reshape(experts, rows // 16, 2, 8, width // 2, 2).permute(0, 1, 3, 4, 5, 2).reshape(experts, rows // 16, 8, width // 2, 4)


def in_stored_order(values: torch.Tensor) -> torch.Tensor:
    """16-bit values of each word's bytes [E, rows / 16, 8, bytes / 2, 4 (the word's byte), 2 (low, high code)] at
    their places in the tile, [E, rows, 2 bytes]."""
    experts, blocks, _, half_width = values.shape[:4]
    return values.reshape(experts, blocks, 8, half_width, 2, 2, 2).permute(0, 1, 5, 2, 3, 4, 6).reshape(experts, 16 * blocks, 4 * half_width)


@triton.jit
def _decode_kernel(words_ptr, out_ptr, INT4: tl.constexpr, PTX: tl.constexpr, ROWS: tl.constexpr, BYTES: tl.constexpr):
    raw = tl.load(words_ptr + tl.arange(0, ROWS)[:, None] * BYTES + tl.arange(0, BYTES)[None, :])
    if INT4:
        values = int4_words.word_values(raw, PTX, ROWS, BYTES)
    else:
        values = e2m1_words.word_values(raw, PTX, ROWS, BYTES)
    tl.store(out_ptr + tl.arange(0, ROWS)[:, None] * (2 * BYTES) + tl.arange(0, 2 * BYTES)[None, :], values.to(tl.int16, bitcast=True))


def decoded_by_the_gemm(tile: torch.Tensor, int4: bool, ptx: bool) -> torch.Tensor:
    """A tile of words [rows, bytes] (uint8) as the GEMM's decode gives it (int4 or e2m1 words; by PTX, or by integer
    operations), on the GPU if there is one: the 16-bit values' bits (int32) [rows, 2 bytes] in stored order."""
    rows, width = tile.shape
    out = torch.empty(rows, 2 * width, dtype=torch.int16, device=DEVICE)
    _decode_kernel[(1,)](tile.contiguous().to(DEVICE), out, INT4=int4, PTX=ptx, ROWS=rows, BYTES=width)
    return out.cpu().int() & 0xFFFF
