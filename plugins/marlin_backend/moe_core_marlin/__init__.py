"""moe-core plugin binding vLLM's Marlin fused MoE (``fused_marlin_moe``) for weight-only schemes on CUDA.

vLLM is imported only when the backend runs (:mod:`moe_core_marlin.provider`); importing this
plugin or selecting a backend never imports it.
"""
