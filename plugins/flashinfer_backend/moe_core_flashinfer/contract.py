"""What this plugin binds in FlashInfer's unified MoE API, recorded as data.

Read from the flashinfer-python 0.7.2.post1 wheel: ``flashinfer/fused_moe/api.py`` (the backend
configs with ``supported(arch)`` and ``prepare_weights`` / ``prepare_activations``, the packs and
``MoEConfig``) and ``flashinfer/fused_moe/runners.py`` (one runner class per config, exported by
``flashinfer.fused_moe``). ``tests/test_flashinfer_contract.py`` checks every record against the
installed package with ``inspect.signature``, so a FlashInfer upgrade that moves, renames or removes them, or
adds a required parameter, fails there (an added optional one, as 0.7.4's ``swap_ab=False``, does not).

Every config's ``prepare_weights`` takes FlashInfer's canonical layout: ``w1`` [E, 2I, H] with rows
**[up; gate]** and ``w2`` [E, H, I] (moe-core's w13 is [gate; up]: the binding swaps the halves).
All but cuTile's fp8 config take bfloat16 weights and quantize them with FlashInfer's own quantizers.
"""

from __future__ import annotations

from dataclasses import dataclass

#: The FlashInfer versions this binding was read from and tested with (pyproject.toml's range).
FLASHINFER_DISTRIBUTION = "flashinfer-python"
TESTED_VERSION = "0.7.2.post1"
VERSION_RANGE = ">=0.7.2,<0.8"

API_MODULE = "flashinfer.fused_moe.api"
RUNNERS_MODULE = "flashinfer.fused_moe"
CUTILE_MODULE = "flashinfer.cutile"

#: Keyword arguments of ``MoEConfig(...)`` and the sub-configs the binding builds.
MOE_CONFIG_FIELDS = ("routing", "quant", "experts", "activation", "backend", "execution")
ROUTING_CONFIG_FIELDS = ("num_experts", "top_k")
QUANT_CONFIG_FIELDS = ("weight", "activation")
EXPERT_CONFIG_FIELDS = ("intermediate_size",)
EXECUTION_CONFIG_FIELDS = ("tune_max_num_tokens",)
#: ``MoEActivationPack(hidden_states_q, hidden_states_scale, topk_ids, topk_weights)``: ids int32, weights float32.
ACTIVATION_PACK_FIELDS = ("hidden_states_q", "hidden_states_scale", "topk_ids", "topk_weights")
#: Runner protocol: ``Runner(config, device)``, ``check_support()``, ``build()``, ``pack_inputs(act, weights)``, ``forward(inputs, tactic)``.
RUNNER_INIT = ("config", "device")
RUNNER_PACK_INPUTS = ("act", "weights")
RUNNER_FORWARD = ("inputs", "tactic")
#: ``MoEWeightPack().prepare_for(backend_key, view)``.
WEIGHT_PACK_PREPARE_FOR = ("backend_key", "view")

#: ``MAX_SUPPORTED_TOP_EXPERTS`` / ``MAX_SUPPORTED_TOTAL_EXPERTS`` of the TRT-LLM routed kernels (api.py).
TRTLLM_LIMITS = ("MAX_SUPPORTED_TOP_EXPERTS", "MAX_SUPPORTED_TOTAL_EXPERTS")
#: The activations cuTile's kernels implement (api.py), as ``ActivationType`` member names.
CUTILE_ACTIVATIONS_ATTR = "_CUTILE_SUPPORTED_ACTIVATIONS"
#: ``prepare_cutile_fp8_weights`` refuses hidden/intermediate sizes that are not multiples of 32.
CUTILE_FP8_MULTIPLE = 32
#: The largest token count one kernel object takes (FlashInfer's ``tune_max_num_tokens`` ceiling).
MAX_TOKENS = 65536

#: moe-core activation -> FlashInfer ActivationConfig class (gated: act(gate) * up).
ACTIVATIONS = {"silu": "SwiGLU", "gelu": "GeGLU"}
#: Only SwiGLU carries a clamp (``limit``) with moe-core's semantics: gate <= limit, |up| <= limit.
CLAMPED_ACTIVATION = "SwiGLU"


@dataclass(frozen=True)
class Binding:
    """How one moe-core (backend, scheme) runs on one FlashInfer backend config.

    ``weight`` / ``activation``: the ``QuantFormat`` names of FlashInfer's MMA pair.
    ``weights_in``: ``"bf16"`` (canonical bfloat16 weights: quantized schemes are dequantized and
    FlashInfer re-quantizes them) or ``"fp8"`` (E4M3 codes and one float32 scale per expert).
    ``prepare_params``: ``prepare_weights``'s parameters, in order (checked against the package).
    ``activations_by``: the config whose ``prepare_activations`` quantizes activations (FlashInfer's
    own quantizer), or ``""`` when the kernel takes bfloat16 activations and quantizes inside.
    ``toolchain``: what compiles or provides its kernels at run time (see :mod:`.facts`).
    ``jit_module``: the family of nvcc modules its runner JIT-builds on first use
    (:data:`.facts.JIT_MODULES`: ``"cutlass"`` or ``"trtllm"``), ``""`` when it builds none.
    """

    config: str
    runner: str
    weight: str
    activation: str
    weights_in: str
    prepare_params: tuple[str, ...]
    toolchain: str
    activations_by: str = ""
    activation_params: tuple[str, ...] = ()
    jit_module: str = ""

    @property
    def passes_quant(self) -> bool:
        return "quant" in self.prepare_params

    @property
    def static_scales(self) -> bool:
        return "hidden_states_scale_global" in self.prepare_params


_GEOMETRY = ("num_local_experts", "hidden_size", "intermediate_size", "activation", "device")
_BF16 = ("w1_bf16", "w2_bf16")

BF16_TRTLLM = Binding("TrtllmBf16Config", "TrtllmBf16RoutedRunner", "BF16", "BF16", "bf16", _BF16 + _GEOMETRY + ("permute_cache",), "nvcc+cubins",
                      jit_module="trtllm")
BF16_CUTLASS = Binding("CutlassBf16Config", "CutlassBf16Runner", "BF16", "BF16", "bf16", _BF16 + _GEOMETRY, "nvcc", jit_module="cutlass")
BF16_CUTILE = Binding("CuTileBf16Config", "CuTileBf16Runner", "BF16", "BF16", "bf16", _BF16 + _GEOMETRY, "cuda-tile")
FP8_BLOCK_TRTLLM = Binding(
    "TrtllmFp8BlockConfig", "TrtllmFp8BlockRunner", "DeepSeekFp8", "DeepSeekFp8", "bf16", _BF16 + ("quant",) + _GEOMETRY, "nvcc+cubins",
    activations_by="TrtllmFp8BlockConfig", activation_params=("hidden_states_bf16", "quant"), jit_module="trtllm",
)
_STATIC = _BF16 + ("hidden_states_scale_global", "intermediate_scale_global") + _GEOMETRY
FP8_TENSOR_TRTLLM = Binding(
    "TrtllmFp8PerTensorConfig", "TrtllmFp8PerTensorRunner", "FP8PerTensor", "FP8PerTensor", "bf16", _STATIC, "nvcc+cubins",
    activations_by="TrtllmFp8PerTensorConfig", activation_params=("hidden_states_bf16", "hidden_states_scale_global"),
    jit_module="trtllm",
)
FP8_TENSOR_CUTLASS = Binding(
    "CutlassFp8PerTensorConfig", "CutlassFp8PerTensorRunner", "FP8PerTensor", "FP8PerTensor", "bf16", _STATIC, "nvcc",
    activations_by="CutlassFp8PerTensorConfig", activation_params=("hidden_states_bf16", "hidden_states_scale_global"),
    jit_module="cutlass",
)
FP8_TENSOR_CUTILE = Binding(
    "CuTileFp8PerTensorConfig", "CuTileFp8PerTensorRunner", "FP8PerTensor", "FP8PerTensor", "fp8",
    ("w1_fp8", "w1_scale", "w2_fp8", "w2_scale") + _GEOMETRY, "cuda-tile",
)
_NVFP4_ACT = dict(activations_by="TrtllmFp4Config", activation_params=("hidden_states_bf16", "quant"))
NVFP4_TRTLLM = Binding("TrtllmFp4Config", "TrtllmFp4RoutedRunner", "NVFP4", "NVFP4", "bf16", _BF16 + ("quant",) + _GEOMETRY + ("permute_cache",), "nvcc+cubins",
                       jit_module="trtllm", **_NVFP4_ACT)
NVFP4_CUTLASS = Binding(
    "CutlassNvfp4Config", "CutlassNvfp4Runner", "NVFP4", "NVFP4", "bf16", _BF16 + _GEOMETRY, "nvcc",
    activations_by="CutlassNvfp4Config", activation_params=("hidden_states_bf16", "quant"), jit_module="cutlass",
)
#: CuteDslConfig has no prepare_activations; its pack takes the same linear-scale NVFP4 activations as TRT-LLM's.
NVFP4_CUTEDSL = Binding("CuteDslConfig", "CuteDslRunner", "NVFP4", "NVFP4", "bf16", _BF16 + ("quant",) + _GEOMETRY + ("nvfp4_4over6",), "cutlass-dsl", **_NVFP4_ACT)
#: b12x takes bfloat16 activations and quantizes them in the kernel.
NVFP4_B12X = Binding("B12xNvfp4Config", "B12xNvfp4Runner", "NVFP4", "NVFP4", "bf16", _BF16 + _GEOMETRY, "cutlass-dsl")

#: backend name -> {moe-core scheme name -> Binding}. The schemes each backend declares are these keys.
BINDINGS: dict[str, dict[str, Binding]] = {
    "flashinfer_trtllm": {"unquantized": BF16_TRTLLM, "fp8-block": FP8_BLOCK_TRTLLM, "fp8-tensor": FP8_TENSOR_TRTLLM, "nvfp4": NVFP4_TRTLLM},
    "flashinfer_cutlass": {"unquantized": BF16_CUTLASS, "fp8-tensor": FP8_TENSOR_CUTLASS, "nvfp4": NVFP4_CUTLASS},
    "flashinfer_cutedsl": {"nvfp4": NVFP4_CUTEDSL},
    "flashinfer_cutedsl_batched": {"nvfp4": NVFP4_CUTEDSL},
    "flashinfer_b12x": {"nvfp4": NVFP4_B12X},
    "flashinfer_cutile": {"unquantized": BF16_CUTILE, "fp8-tensor-dyn": FP8_TENSOR_CUTILE},
}
