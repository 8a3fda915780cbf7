"""A stand-in for ``deep_ep`` with exactly the calls of moe_core_deepep/contract.py, for CPU tests.

Plumbing only: it checks the arguments the dispatchers pass (dtypes, shapes, contiguity, -1 for "no
expert") and returns tensors of the documented shapes, moving the rows with gloo collectives (every
rank calls it together, as with DeepEP). It follows DeepEP's documented semantics — local ids with -1
for experts elsewhere after ``dispatch``, an unweighted sum in ``combine``, a weighted one in
``low_latency_combine`` — but none of DeepEP's kernels, buffers or timing: only GPUs test those.
"""

from __future__ import annotations

import types

import torch
import torch.distributed as dist


def _gather(obj, group):
    out = [None] * dist.get_world_size(group)
    dist.all_gather_object(out, obj, group=group)
    return out


def _check_ids(topk_idx, num_experts):
    assert topk_idx.dtype == torch.int64 and topk_idx.dim() == 2 and topk_idx.is_contiguous(), topk_idx
    assert bool(((topk_idx >= -1) & (topk_idx < num_experts)).all()), "an id outside [-1, num_experts) reached DeepEP"


class Config:
    def __init__(self, num_sms, nvl_chunk, nvl_buffer, rdma_chunk=6, rdma_buffer=128):
        self.nvl_buffer = nvl_buffer

    def get_nvl_buffer_size_hint(self, hidden_bytes, num_ranks):
        assert hidden_bytes > 0 and num_ranks > 1
        return hidden_bytes * num_ranks * self.nvl_buffer


class Buffer:
    def __init__(self, group, num_nvl_bytes=0, num_rdma_bytes=0, low_latency_mode=False, num_qps_per_rank=24,
                 explicitly_destroy=False):
        assert group is not None and isinstance(low_latency_mode, bool)
        # DeepEP's destructor runs a barrier across the ranks when Python collects the buffer (a hang on GPUs).
        assert explicitly_destroy, "the binding destroys its buffers itself, on every rank at once"
        self.destroyed = False
        assert (num_rdma_bytes > 0) if low_latency_mode else (num_nvl_bytes > 0 and num_rdma_bytes == 0)
        self.group, self.rank, self.ranks = group, dist.get_rank(group), dist.get_world_size(group)
        self.num_nvl_bytes, self.num_rdma_bytes = num_nvl_bytes, num_rdma_bytes
        self.low_latency_mode, self.num_qps_per_rank = low_latency_mode, num_qps_per_rank

    def destroy(self):
        assert not self.destroyed, "a DeepEP buffer is destroyed once"
        dist.barrier(group=self.group)  # collective, as DeepEP's
        self.destroyed = True

    def _usable(self, low_latency: bool):
        assert not self.destroyed, "a destroyed DeepEP buffer was used"
        assert self.low_latency_mode == low_latency

    @staticmethod
    def get_dispatch_config(num_ranks):
        return Config(20, 24, 256)

    @staticmethod
    def get_combine_config(num_ranks):
        return Config(20, 10, 256)

    @staticmethod
    def get_low_latency_rdma_size_hint(num_max_dispatch_tokens_per_rank, hidden, num_ranks, num_experts):
        return 2 * num_max_dispatch_tokens_per_rank * hidden * num_experts

    # ------------------------------------------------------------------ normal mode
    def get_dispatch_layout(self, topk_idx, num_experts):
        self._usable(low_latency=False)
        _check_ids(topk_idx, num_experts)
        local = num_experts // self.ranks
        owner = torch.where(topk_idx >= 0, topk_idx // local, self.ranks)
        in_rank = torch.zeros(topk_idx.shape[0], self.ranks + 1, dtype=torch.bool).scatter_(1, owner, True)[:, : self.ranks]
        per_expert = torch.bincount(topk_idx[topk_idx >= 0], minlength=num_experts).int()
        return in_rank.sum(0).int(), None, per_expert, in_rank.contiguous(), None

    def dispatch(self, x, num_tokens_per_rank=None, is_token_in_rank=None, num_tokens_per_expert=None,
                 topk_idx=None, topk_weights=None):
        self._usable(low_latency=False)
        assert x.dtype == torch.bfloat16 and x.is_contiguous() and (x.shape[1] * 2) % 16 == 0
        assert topk_weights.dtype == torch.float32 and topk_weights.is_contiguous() and topk_weights.shape == topk_idx.shape
        assert is_token_in_rank.dtype == torch.bool and is_token_in_rank.shape == (x.shape[0], self.ranks)
        assert num_tokens_per_rank.dtype == torch.int32 and num_tokens_per_expert.dtype == torch.int32
        everyone = _gather((x, topk_idx, topk_weights, is_token_in_rank), self.group)
        local = num_tokens_per_expert.shape[0] // self.ranks
        first = self.rank * local
        xs, ids, ws, sources = [], [], [], []
        for src, (sx, sid, sw, sin) in enumerate(everyone):
            rows = sin[:, self.rank].nonzero().view(-1)  # in token order, sources in rank order
            mine = (sid[rows] >= first) & (sid[rows] < first + local)
            xs.append(sx[rows])
            ids.append(torch.where(mine, sid[rows] - first, -1))
            ws.append(sw[rows])  # stricter than DeepEP, which zeroes them: the binding must not rely on it
            sources.append(torch.stack((torch.full_like(rows, src), rows), 1))
        recv_ids = torch.cat(ids)
        per_local = [int((recv_ids == j).sum()) for j in range(local)]
        handle = (torch.cat(sources), x.shape[0])
        return torch.cat(xs), recv_ids, torch.cat(ws), per_local, handle, None

    def combine(self, x, handle):
        self._usable(low_latency=False)
        assert x.dtype == torch.bfloat16 and x.is_contiguous()
        sources, num_tokens = handle
        assert x.shape[0] == sources.shape[0], "combine got a different row count than dispatch delivered"
        out = torch.zeros(num_tokens, x.shape[1], dtype=torch.float32)
        for rows, src in _gather((x, sources), self.group):
            for row, (origin, token) in zip(rows, src.tolist()):
                if origin == self.rank:
                    out[token] += row.float()
        return out.to(torch.bfloat16), None, None

    # ------------------------------------------------------------------ low-latency mode
    def low_latency_dispatch(self, x, topk_idx, num_max_dispatch_tokens_per_rank, num_experts, use_fp8=True):
        self._usable(low_latency=True)
        assert use_fp8 is False, "the binding sends bf16"
        assert x.dtype == torch.bfloat16 and x.is_contiguous() and x.shape[0] == topk_idx.shape[0] <= num_max_dispatch_tokens_per_rank
        assert x.shape[1] % 128 == 0 and num_experts % self.ranks == 0
        _check_ids(topk_idx, num_experts)
        local = num_experts // self.ranks
        assert self.num_qps_per_rank == local
        width = num_max_dispatch_tokens_per_rank * self.ranks
        recv = torch.zeros(local, width, x.shape[1], dtype=torch.bfloat16)
        counts = torch.zeros(local, dtype=torch.int32)
        where = []  # (local expert, slot, source rank, token)
        for src, (sx, sid) in enumerate(_gather((x, topk_idx), self.group)):
            for token, chosen in enumerate(sid.tolist()):
                for expert in chosen:
                    if expert >= 0 and expert // local == self.rank:
                        j = expert - self.rank * local
                        recv[j, counts[j]] = sx[token]
                        where.append((j, int(counts[j]), src, token, expert))
                        counts[j] += 1
        handle = (where, num_max_dispatch_tokens_per_rank, x.shape[1], num_experts)
        return recv, counts, handle, None, None

    def low_latency_combine(self, x, topk_idx, topk_weights, handle):
        self._usable(low_latency=True)
        where, max_tokens, hidden, num_experts = handle
        assert x.dtype == torch.bfloat16 and x.is_contiguous()
        assert x.shape == (num_experts // self.ranks, max_tokens * self.ranks, hidden)
        assert topk_weights.dtype == torch.float32 and topk_weights.is_contiguous() and topk_weights.shape == topk_idx.shape
        assert topk_idx.shape[0] <= max_tokens
        _check_ids(topk_idx, num_experts)
        out = torch.zeros(topk_idx.shape[0], hidden, dtype=torch.float32)
        for rows, places in _gather(([x[j, slot] for j, slot, *_ in where], where), self.group):
            for row, (_, _, src, token, expert) in zip(rows, places):
                if src == self.rank:
                    k = topk_idx[token].tolist().index(expert)
                    out[token] += topk_weights[token, k] * row.float()
        return out.to(torch.bfloat16), None, None


def module() -> types.ModuleType:
    """A fresh ``deep_ep`` module object holding the stand-in."""
    mod = types.ModuleType("deep_ep")
    mod.Buffer, mod.Config = Buffer, Config
    return mod
