"""Memory layouts DeepGEMM's grouped GEMMs take, and conversions from moe-core's canonical ones.

Nothing here imports DeepGEMM: the layouts are plain torch tensors, so they are tested on CPU.

* **Expert-contiguous rows** (``m_grouped_*_gemm_nt_contiguous``): the routed (token, expert) rows
  of all experts stacked in one ``[M, K]`` tensor, each expert's run starting at a multiple of the
  M alignment (``deep_gemm.get_mk_alignment_for_contiguous_layout()``, 128 on sm90). The M-index
  tensor ``[M]`` int32 names each row's expert, ``-1`` on padding rows (DeepGEMM skips blocks whose
  first row is -1). ``M`` is the static bound of :func:`contiguous_capacity`, so it never depends
  on routing and no host synchronisation is needed.
* **Activation scales** (1x128 groups, fp32, sm90): MN-major and TMA-aligned, i.e. a ``[M, K/128]``
  view with strides ``(1, align(M, 4))`` (``[G, M, K/128]`` with ``(align(M, 4) * K/128, 1,
  align(M, 4))`` for the masked GEMM). DeepGEMM transposes any other layout on every call; the glue
  kernels write this one directly (:func:`empty_mn_major_scales`).
* **Weight scales** (128x128 blocks, fp32, sm90): ``[E, N/128, K/128]``, contiguous — moe-core's
  canonical layout already is one of the two DeepGEMM 2.6 accepts (K-major or MN-major), so
  :func:`weight_scales_for_sm90` only makes it float32 and contiguous.
"""

from __future__ import annotations

import torch

#: The masked GEMM's per-expert rows must be a multiple of this: DeepGEMM 2.6 tiles M in blocks of
#: 64 or 128 rows over the [E * M, K] view of [E, M, K], so with a ragged M the last block of one
#: expert reads, and writes, the first rows of the next (seen on the H100: wrong batched results).
MASKED_M_MULTIPLE = 128

#: fp32 scale rows are padded so that each K-group column starts on a 16-byte boundary (TMA).
TMA_ALIGNMENT_BYTES = 16


def round_up(x: int, multiple: int) -> int:
    return (x + multiple - 1) // multiple * multiple


def contiguous_capacity(pairs: int, num_experts: int, alignment: int) -> int:
    """Rows of the expert-contiguous layout for ``pairs`` routed rows, whatever the routing.

    Every pair, plus the padding of each expert that can be non-empty (at most ``alignment - 1``
    rows each), rounded up to the alignment; at least one aligned block.
    """
    return max(round_up(pairs + min(num_experts, pairs) * (alignment - 1), alignment), alignment)


def tma_aligned_rows(rows: int, element_size: int = 4) -> int:
    """Leading dimension of an MN-major scale tensor: ``rows`` rounded up to 16 bytes."""
    return round_up(rows, TMA_ALIGNMENT_BYTES // element_size)


def empty_mn_major_scales(rows: int, groups: int, device: torch.device, batch: int | None = None) -> torch.Tensor:
    """Uninitialised fp32 scales ``[rows, groups]`` (``[batch, rows, groups]``) in DeepGEMM's sm90 SFA layout."""
    ld = tma_aligned_rows(rows)
    if batch is None:
        return torch.empty_strided((rows, groups), (1, ld), dtype=torch.float32, device=device)
    return torch.empty_strided((batch, rows, groups), (ld * groups, 1, ld), dtype=torch.float32, device=device)


def weight_scales_for_sm90(scales: torch.Tensor) -> torch.Tensor:
    """Canonical 128x128 block scales ``[E, N/128, K/128]`` as DeepGEMM's sm90 kernels read them (fp32, contiguous)."""
    return scales.to(torch.float32).contiguous()

