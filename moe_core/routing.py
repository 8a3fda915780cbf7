"""Typed routing: which experts each token goes to, and with what weight.

``Routing(topk_ids=..., topk_weights=...)`` refuses a float id tensor or an integer weight tensor,
so the two can never be swapped silently (a real bug in the seeds' PR history).
"""

from __future__ import annotations

import enum
from dataclasses import dataclass

import torch

from moe_core.errors import KernelInputError


class Scoring(enum.Enum):
    SOFTMAX = "softmax"
    SIGMOID = "sigmoid"


@dataclass(frozen=True, eq=False)
class Routing:
    """STANDARD-format routing: ``topk_ids`` [T, k] integer, ``topk_weights`` [T, k] float."""

    topk_ids: torch.Tensor
    topk_weights: torch.Tensor

    def __post_init__(self) -> None:
        ids, weights = self.topk_ids, self.topk_weights
        if not isinstance(ids, torch.Tensor) or not isinstance(weights, torch.Tensor):
            raise KernelInputError("routing", "topk_ids and topk_weights must be torch tensors")
        if ids.is_floating_point() and not weights.is_floating_point():
            raise KernelInputError(
                "topk_ids",
                f"is {ids.dtype} and topk_weights is {weights.dtype}: they look swapped. "
                "Build Routing(topk_ids=<int ids>, topk_weights=<float weights>)",
            )
        if ids.is_floating_point() or ids.dtype is torch.bool or ids.is_complex():
            raise KernelInputError("topk_ids", f"must be an integer tensor, got {ids.dtype}")
        if not weights.is_floating_point():
            raise KernelInputError("topk_weights", f"must be a floating-point tensor, got {weights.dtype}")
        if ids.dim() != 2:
            raise KernelInputError("topk_ids", f"must be 2-D [tokens, top_k], got shape {tuple(ids.shape)}")
        if tuple(weights.shape) != tuple(ids.shape):
            raise KernelInputError("topk_weights", f"shape {tuple(weights.shape)} differs from topk_ids shape {tuple(ids.shape)}")
        if ids.device != weights.device:
            raise KernelInputError("topk_weights", f"is on {weights.device} but topk_ids is on {ids.device}")

    @property
    def num_tokens(self) -> int:
        return self.topk_ids.shape[0]

    @property
    def top_k(self) -> int:
        return self.topk_ids.shape[1]

    def localized(self, expert_map: torch.Tensor) -> "Routing":
        """The routing of one expert-parallel rank for a kernel that takes local ids and no expert map.

        ``expert_map`` [global E] maps global ids to local ones (-1: the expert lives elsewhere). Pairs of
        remote experts keep their place with local id 0 and weight 0, so they add ``0 * expert_0(x)``,
        zero for finite outputs: correct, at the cost of computing them. Torch ops only, no host sync;
        ids must be valid (``MoEKernel.apply`` drops invalid ones before ``forward``).
        """
        local = expert_map.to(self.topk_ids.device)[self.topk_ids.long()]
        here = local >= 0
        return Routing(torch.where(here, local, 0).to(self.topk_ids.dtype), torch.where(here, self.topk_weights, 0))

    @classmethod
    def from_logits(cls, logits: torch.Tensor, top_k: int, scoring: Scoring | str = Scoring.SOFTMAX, renormalize: bool = True) -> "Routing":
        """Top-k routing from router logits [T, E].

        softmax: probabilities over all experts, then the top k; sigmoid: independent scores.
        ``renormalize`` rescales each token's k weights to sum to 1. Weights are float32.
        """
        scoring = Scoring(scoring)
        if logits.dim() != 2 or not logits.is_floating_point():
            raise KernelInputError("logits", f"must be a float tensor [tokens, experts], got {logits.dtype} {tuple(logits.shape)}")
        if not 1 <= top_k <= logits.shape[1]:
            raise KernelInputError("top_k", f"must be in [1, {logits.shape[1]}], got {top_k}")
        scores = logits.float().softmax(dim=-1) if scoring is Scoring.SOFTMAX else logits.float().sigmoid()
        weights, ids = scores.topk(top_k, dim=-1)
        if renormalize:
            weights = weights / weights.sum(dim=-1, keepdim=True).clamp(min=1e-20)
        return cls(topk_ids=ids.to(torch.int32), topk_weights=weights)


@dataclass(frozen=True, eq=False)
class BatchedRouting:
    """BATCHED_EXPERTS-format routing: ``expert_num_tokens`` [E] integer, valid rows per expert.

    Hidden states are [E, max_tokens, H]; rows at or beyond an expert's count are ignored and
    their outputs are zero. Router weights are applied when results are combined
    (:func:`moe_core.batched.combine`), not by the kernel.
    """

    expert_num_tokens: torch.Tensor

    def __post_init__(self) -> None:
        counts = self.expert_num_tokens
        if not isinstance(counts, torch.Tensor) or counts.dim() != 1:
            raise KernelInputError("expert_num_tokens", "must be a 1-D integer tensor [experts]")
        if counts.is_floating_point() or counts.dtype is torch.bool:
            raise KernelInputError("expert_num_tokens", f"must be an integer tensor, got {counts.dtype}")
