"""What this plugin relies on in DeepEP, read from its source at one commit.

Pinned: github.com/deepseek-ai/DeepEP tag v1.2.1, commit 9af0e0d0e74f3577af1979c9b9e1ac2cad0104ee (the V1
API, ``deep_ep.Buffer``; V2's ElasticBuffer needs NCCL >= 2.30.4, newer than torch 2.11's). The calls
below are the only ones the dispatchers make; tests/fake_deep_ep.py implements exactly these.

``Buffer(group, num_nvl_bytes, num_rdma_bytes, low_latency_mode=..., num_qps_per_rank=..., explicitly_destroy=True)``,
which keeps ``num_nvl_bytes`` and ``num_rdma_bytes`` as attributes; ``buffer.destroy()`` (a barrier across the
ranks; without ``explicitly_destroy`` the destructor runs it whenever Python collects the buffer)
``Buffer.get_dispatch_config(num_ranks) / get_combine_config(num_ranks) -> Config``;
``Config.get_nvl_buffer_size_hint(hidden_bytes, num_ranks) -> int``
``Buffer.get_low_latency_rdma_size_hint(max_tokens_per_rank, hidden, num_ranks, num_experts) -> int``
``buffer.get_dispatch_layout(topk_idx, num_experts)``
    -> (num_tokens_per_rank [ranks] int32, None intranode, num_tokens_per_expert [E] int32,
        is_token_in_rank [T, ranks] bool, event)
``buffer.dispatch(x, num_tokens_per_rank=, is_token_in_rank=, num_tokens_per_expert=, topk_idx=, topk_weights=)``
    -> (recv_x [R, H], recv_topk_idx [R, k] int64 *local* ids, -1 for experts elsewhere,
        recv_topk_weights [R, k] float32, num_recv_tokens_per_expert list (a host sync), handle, event)
``buffer.combine(x [R, H] bf16, handle) -> (combined [T, H], None, event)``: a plain sum over ranks, no weights.
``buffer.low_latency_dispatch(x, topk_idx, max_tokens_per_rank, num_experts, use_fp8=False)``
    -> (recv_x [L, max_tokens_per_rank * ranks, H] bf16, recv_count [L] int32, handle, event, hook)
``buffer.low_latency_combine(x [L, max_tokens_per_rank * ranks, H] bf16, topk_idx, topk_weights, handle)``
    -> (combined [T, H], event, hook): weighted by topk_weights, ids of -1 skipped.

Every ``topk_idx`` is int64 and contiguous; -1 means "no expert" (the pair is neither sent nor summed).
"""

from __future__ import annotations

UPSTREAM = "github.com/deepseek-ai/DeepEP v1.2.1 (9af0e0d0e74f3577af1979c9b9e1ac2cad0104ee)"

#: Intranode normal mode: ranks joined by NVLink, one node (NUM_MAX_NVL_PEERS = 8), sizes with a tuned
#: dispatch/combine Config in Buffer.get_dispatch_config / get_combine_config.
NORMAL_WORLD_SIZES = frozenset({2, 4, 8})
#: Low-latency mode inside one node (its kernels also run across nodes over RDMA; not bound here).
LOW_LATENCY_WORLD_SIZES = frozenset({2, 4, 8})
#: Normal mode copies rows in 16-byte vectors: hidden * 2 bytes (bf16) % 16 == 0.
NORMAL_HIDDEN_MULTIPLE = 8
#: NUM_MAX_LOCAL_EXPERTS in csrc/kernels/configs.cuh.
MAX_LOCAL_EXPERTS = 1024
#: Low-latency kernels are compiled for these hidden sizes only (SWITCH_HIDDEN in csrc/kernels/launch.cuh).
LOW_LATENCY_HIDDEN_SIZES = frozenset({2048, 2560, 4096, 5120, 6144, 7168, 8192})
#: kNumMaxTopK of the low-latency dispatch and combine kernels (csrc/kernels/internode_ll.cu).
LOW_LATENCY_MAX_TOP_K = 11
#: Compute capabilities: the default build targets sm_90 (low-latency needs it: NVSHMEM and TMA);
#: DISABLE_SM90_FEATURES=1 builds normal mode alone for sm_80.
NORMAL_MIN_CAPABILITY = (8, 0)
LOW_LATENCY_MIN_CAPABILITY = (9, 0)
