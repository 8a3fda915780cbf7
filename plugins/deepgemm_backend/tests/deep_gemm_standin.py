"""A pure-torch stand-in for the few DeepGEMM 2.6 functions the plugin calls — tests only.

Written from DeepGEMM's documented semantics (its README and tests/generators.py): ``a`` rows
times each group's ``b`` transposed, fp8 operands dequantized with 1x128 (activation) and 128x128
(weight) fp32 scales, bf16 operands as they are. Contiguous layout: rows whose M index is -1 are
not written. Masked layout: only the first ``masked_m[g]`` rows of each group are written. It is
never registered as a backend and proves nothing about the real library.
"""

from __future__ import annotations

import torch

__version__ = "standin"
ALIGNMENT = 128


def get_mk_alignment_for_contiguous_layout() -> int:
    return ALIGNMENT


def _dequant_rows(a: torch.Tensor, scales: torch.Tensor) -> torch.Tensor:
    return a.float() * scales.repeat_interleave(128, dim=-1)[..., : a.shape[-1]]


def _dequant_blocks(b: torch.Tensor, scales: torch.Tensor) -> torch.Tensor:
    n, k = b.shape[-2:]
    return b.float() * scales.repeat_interleave(128, dim=-2)[..., :n, :].repeat_interleave(128, dim=-1)[..., :k]


def _contiguous(a, b, d, m_indices):
    for e in m_indices.unique().tolist():
        if e >= 0:
            rows = (m_indices == e).nonzero().squeeze(1)
            d[rows] = (a[rows] @ b[e].T).to(d.dtype)


def _masked(a, b, d, masked_m):
    # DeepGEMM 2.6 tiles M over the [G * M, K] view in blocks of up to 128 rows: a ragged M lets one
    # group's last block overwrite the next group's first rows. The plugin must pad; insist on it.
    assert a.shape[1] % 128 == 0, f"masked GEMM rows per group must be a multiple of 128, got {a.shape[1]}"
    for e, count in enumerate(masked_m.tolist()):
        d[e, :count] = (a[e, :count] @ b[e].T).to(d.dtype)


def m_grouped_fp8_gemm_nt_contiguous(a, b, d, m_indices):
    _contiguous(_dequant_rows(*a), _dequant_blocks(*b), d, m_indices)


def m_grouped_fp8_gemm_nt_masked(a, b, d, masked_m, expected_m):
    _masked(_dequant_rows(*a), _dequant_blocks(*b), d, masked_m)


def m_grouped_bf16_gemm_nt_contiguous(a, b, d, m_indices):
    _contiguous(a.float(), b.float(), d, m_indices)


def m_grouped_bf16_gemm_nt_masked(a, b, d, masked_m, expected_m):
    _masked(a.float(), b.float(), d, masked_m)
